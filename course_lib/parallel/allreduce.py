"""All-reduce: every worker ends with the sum of all workers' gradients.

One interface, three implementations, used by the same worker step loop
(:func:`course_lib.parallel.data.worker_loop`):

``gradient_buffer()``
    The array this worker writes its gradient sum into.
``start()``
    Wait until every worker is ready (the clocks start together).
``wait()``
    Wait until every worker has its gradient (the waiting is measured apart).
``allreduce()``
    Return the sum over all workers.

:class:`ShmAllReduce` is the two halves of the ring all-reduce as two public steps,
``reduce_scatter()`` then ``all_gather()`` (chapter "Collectives and synchronisation"):
ZeRO (:mod:`course_lib.parallel.zero`) updates its chunk in between, and ZeRO-2/3 use
each half alone. It counts the bytes each step brings in from the other workers
(``bytes_in``), to set against :func:`course_lib.comm.ring_reduce_scatter_time` and
:func:`course_lib.comm.ring_allgather_time`; :func:`run_shm_collectives` runs the two
steps in processes and returns what each worker holds and counted.

:class:`ShmAllReduce`
    Shared memory: worker ``r`` adds chunk ``r`` of every worker's gradient
    (Reduce-Scatter), then every worker reads all chunks (All-Gather).
:class:`PipeAllReduce`
    Pipes: every worker pickles its gradient to rank 0, which adds and sends back.
:class:`GlooAllReduce`
    ``torch.distributed.all_reduce`` with the gloo backend (optional torch).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from datetime import timedelta

import numpy as np

from .._validate import check_float_dtype, check_int, check_positive, check_type
from .partition import chunk_bounds, sum_rows
from .workers import Fault, WorkerContext, check_start_method

__all__ = [
    "TORCH_MISSING", "GlooAllReduce", "PipeAllReduce", "ShmAllReduce", "free_port", "run_shm_collectives",
    "torch_available",
]

#: What to say where torch is needed but not installed.
TORCH_MISSING = (
    "PyTorch is not installed: install the optional engine with "
    "`pip install -e '.[engines]'` (on the course machines: `pip install torch==2.13.0`, "
    "a local CPU build)"
)


class ShmAllReduce:
    """Reduce-scatter + all-gather through shared memory; no master process (notebook 07,
    "Communication: pipes to one reducer vs shared memory").

    Every worker computes its gradient directly into its row of ``grads``; after a
    barrier (:meth:`wait`) worker ``r`` adds chunk ``r`` of all rows (in rank order) into
    ``reduced`` (:meth:`reduce_scatter`); after a second barrier every worker reads all of
    ``reduced`` (:meth:`all_gather`). :meth:`allreduce` is the two in sequence.

    Attributes
    ----------
    lo, hi : int
        This worker's chunk ``[lo, hi)`` of the flat buffer
        (:func:`course_lib.parallel.partition.chunk_bounds`).
    bytes_in : dict of str to int
        Bytes of the other workers' data this worker has read so far, per step:
        ``"reduce_scatter"`` (chunk ``r`` of the ``N - 1`` other rows) and ``"all_gather"``
        (the ``N - 1`` chunks the others reduced). Summed over the workers each is
        ``(N - 1) n`` bytes for an ``n``-byte buffer: ``(N - 1)/N n`` per worker, the
        ring's figure and the bound (:func:`course_lib.comm.collective_lower_bound`).
    """

    def __init__(self, wctx: WorkerContext, grads: np.ndarray, reduced: np.ndarray, barrier):
        self.wctx, self.grads, self.reduced, self.barrier = wctx, grads, reduced, barrier
        self.lo, self.hi = chunk_bounds(reduced.size, wctx.world_size)[wctx.rank]
        self.bytes_in = {"reduce_scatter": 0, "all_gather": 0}

    def gradient_buffer(self) -> np.ndarray:
        return self.grads[self.wctx.rank]

    def start(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def wait(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def reduce_scatter(self) -> np.ndarray:
        """Step 1, Reduce-Scatter: add chunk ``r`` of every worker's row, in rank order
        (call it after :meth:`wait`: every row written). Returns this worker's chunk of the
        sum, a view of ``reduced`` (write into it to change what :meth:`all_gather` shares)."""
        sum_rows(self.grads, self.reduced, self.lo, self.hi)
        mine = self.reduced[self.lo : self.hi]
        self.bytes_in["reduce_scatter"] += (self.grads.shape[0] - 1) * mine.nbytes  # the others' chunks r
        return mine

    def all_gather(self, chunk: np.ndarray | None = None) -> np.ndarray:
        """Step 2, All-Gather: put ``chunk`` (if given) as this worker's chunk ``r``, wait
        until every worker has put its own, return the whole array (``reduced``)."""
        if chunk is not None:
            self.reduced[self.lo : self.hi] = chunk
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)
        self.bytes_in["all_gather"] += self.reduced.nbytes - self.reduced[self.lo : self.hi].nbytes
        return self.reduced

    def allgather(self) -> np.ndarray:
        """The former name of :meth:`all_gather` (ZeRO-1's loop, notebook 09)."""
        return self.all_gather()

    def allreduce(self) -> np.ndarray:
        """All-Reduce = Reduce-Scatter, then All-Gather: the sum over all workers."""
        self.reduce_scatter()
        return self.all_gather()


def run_shm_collectives(rows, *, fault: Fault | None = None, start_method: str | None = None,
                        timeout: float = 30.0) -> dict:
    """Run :class:`ShmAllReduce`'s two steps in ``N`` processes; what each holds and counted.

    Worker ``r`` starts with ``rows[r]``, calls :meth:`ShmAllReduce.reduce_scatter`, keeps
    a copy of its chunk of the sum, then :meth:`ShmAllReduce.all_gather`.

    The rows keep their dtype (float16, float32 or float64; integers become float64): the
    shared buffers are in that dtype, ``bytes_in`` counts its bytes (float16 moves half of
    float32's), and the sum is added in rank order *in that dtype*, each partial sum rounded
    to it (:func:`course_lib.parallel.partition.sum_rows`), as NCCL's ring adds float16
    gradients hop by hop in float16 (no float32 accumulator). A float16 sum can lose digits
    and overflow to ``inf`` above 65,504 (:data:`course_lib.precision.FLOAT16_MAX`);
    :func:`course_lib.precision.allreduce_in` is the one-process reference.

    Parameters
    ----------
    rows : array_like, shape (N, n)
        One row per worker (``N >= 1`` processes), float16, float32 or float64.
    fault : course_lib.parallel.workers.Fault, optional
        A deliberate failure in worker ``fault.rank`` (< N): at ``fault.step`` 0 before the
        reduce-scatter, 1 before the all-gather (the fault tests).
    start_method : {"fork", "forkserver", "spawn"} or None
        How the workers start (None: the course default).
    timeout : float
        Seconds the parent waits for the workers, > 0.

    Returns
    -------
    dict
        ``"chunks"``: list of ``(lo, hi)``; ``"reduce_scatter"``: each worker's chunk of the
        sum after step 1; ``"all_gather"``: ``(N, n)`` array in the rows' dtype, what each
        holds after step 2; ``"bytes_in"``: ``(N, 2)`` int array, the bytes each worker read
        from the others in step 1 and step 2 (:attr:`ShmAllReduce.bytes_in`).

    Examples
    --------
    >>> out = run_shm_collectives(np.arange(8.0).reshape(2, 4), start_method="fork")
    >>> out["all_gather"].tolist()
    [[4.0, 6.0, 8.0, 10.0], [4.0, 6.0, 8.0, 10.0]]
    >>> out["bytes_in"].sum(axis=0).tolist()   # (N - 1) n bytes per step over the workers
    [32, 32]
    >>> [run_shm_collectives(np.arange(8, dtype=t).reshape(2, 4), start_method="fork")["bytes_in"].sum().item()
    ...  for t in (np.float32, np.float16)]   # float16: half the bytes of float32
    [32, 16]
    """
    from .launch import Launcher  # the process layer, only when processes run

    rows = np.asarray(rows) if isinstance(rows, (list, tuple, np.ndarray)) else rows
    if not isinstance(rows, np.ndarray) or rows.dtype.kind not in "iuf":
        raise TypeError(f"rows must be an (N, n) array of real numbers, got {type(rows).__name__}")
    if rows.ndim != 2 or not 1 <= rows.shape[0] <= 64:
        raise ValueError(f"rows must be an (N, n) array with 1 <= N <= 64 workers, got shape {rows.shape}")
    rows = rows if rows.dtype in (np.float16, np.float32, np.float64) else rows.astype(np.float64)
    if fault is not None:
        check_type(fault, "fault", Fault, "a course_lib.parallel.workers.Fault")
        check_int(fault.rank, "fault.rank", 0, rows.shape[0] - 1)
        check_int(fault.step, "fault.step", 0, 1)
    start_method = check_start_method(start_method)
    timeout = check_positive(timeout, "timeout")
    with Launcher(start_method) as launch:
        grads = launch.shared(rows.shape, rows.dtype, rows)
        reduced = launch.shared(rows.shape[1], rows.dtype)
        barrier = launch.barrier(rows.shape[0])
        results = launch.run(_collectives_worker, rows.shape[0], args=(grads.spec, reduced.spec, barrier, fault),
                             timeout=timeout, name="ddl-collectives")
    return {
        "chunks": [r["chunk"] for r in results],
        "reduce_scatter": [r["reduce_scatter"] for r in results],
        "all_gather": np.stack([r["all_gather"] for r in results]),
        "bytes_in": np.array([[r["bytes_in"]["reduce_scatter"], r["bytes_in"]["all_gather"]] for r in results]),
    }


def _collectives_worker(wctx: WorkerContext, g_spec, r_spec, barrier, fault: Fault | None = None) -> dict:
    """One worker of :func:`run_shm_collectives` (runs in a child process)."""
    fire = fault.maybe_fire if fault is not None else lambda rank, step: None
    with g_spec.attach() as grads, r_spec.attach() as reduced:
        comm = ShmAllReduce(wctx, grads, reduced, barrier)
        comm.start()
        comm.wait()  # every row is in place (written by the parent here)
        fire(wctx.rank, 0)
        mine = comm.reduce_scatter().copy()
        fire(wctx.rank, 1)
        gathered = comm.all_gather().copy()
        out = {"chunk": (comm.lo, comm.hi), "reduce_scatter": mine, "all_gather": gathered,
               "bytes_in": dict(comm.bytes_in)}
        del comm
    return out


class PipeAllReduce:
    """The naive design: pickled gradients through pipes to rank 0, the sum sent back
    (notebook 07, "Communication: pipes to one reducer vs shared memory")."""

    def __init__(self, wctx: WorkerContext, n: int, dtype, conns: list, barrier):
        self.wctx, self.conns, self.barrier = wctx, conns, barrier
        self.grad = np.zeros(n, dtype=dtype)
        self.total = np.zeros(n, dtype=dtype) if wctx.rank == 0 else None

    def gradient_buffer(self) -> np.ndarray:
        return self.grad

    def start(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def wait(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def _recv(self, conn):
        if not conn.poll(self.wctx.wait_timeout):
            raise TimeoutError(f"worker {self.wctx.rank}: no message within {self.wctx.wait_timeout:g} s")
        return conn.recv()

    def allreduce(self) -> np.ndarray:
        if self.wctx.rank == 0:
            np.copyto(self.total, self.grad)
            for conn in self.conns:  # ranks 1, 2, ... in order: reproducible sum
                self.total += self._recv(conn)
            for conn in self.conns:
                conn.send(self.total)
            return self.total
        self.conns[0].send(self.grad)
        return self._recv(self.conns[0])


class GlooAllReduce:
    """``torch.distributed.all_reduce`` (sum) of the worker's flat numpy gradient buffer
    (notebook 07, "A real engine"); torch is imported here only.

    Use :meth:`joined` to join the gloo process group around the training loop.
    """

    def __init__(self, n: int, dtype, separate_waiting: bool = False):
        grad = np.zeros(check_int(n, "n", 0, 2**40), dtype=check_float_dtype(dtype))  # checks first,
        if not torch_available():  # then the install hint
            raise ImportError(TORCH_MISSING)
        import torch
        import torch.distributed as dist

        self.dist, self.separate_waiting, self.grad = dist, separate_waiting, grad
        self.tensor = torch.from_numpy(self.grad)  # same memory, no copy

    @staticmethod
    @contextlib.contextmanager
    def joined(rank: int, world_size: int, init_method: str, timeout: float) -> Iterator[None]:
        """Join the gloo process group (one BLAS/torch thread), leave it on exit."""
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout))
        try:
            yield
        finally:
            dist.destroy_process_group()

    def gradient_buffer(self) -> np.ndarray:
        return self.grad

    def start(self) -> None:
        self.dist.barrier()

    def wait(self) -> None:
        if self.separate_waiting:
            self.dist.barrier()

    def allreduce(self) -> np.ndarray:
        self.dist.all_reduce(self.tensor, op=self.dist.ReduceOp.SUM)
        return self.grad


def torch_available() -> bool:
    """Whether torch can be imported (checked without importing it)."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for the gloo rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
