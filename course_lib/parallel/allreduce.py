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

:class:`ShmAllReduce` also offers the two halves apart, ``reduce_scatter()`` and
``allgather()``: ZeRO (:mod:`course_lib.parallel.zero`) updates its chunk in between.

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

from .._validate import check_float_dtype, check_int
from .partition import chunk_bounds, sum_rows
from .workers import WorkerContext

__all__ = ["TORCH_MISSING", "GlooAllReduce", "PipeAllReduce", "ShmAllReduce", "free_port", "torch_available"]

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
    barrier worker ``r`` adds chunk ``r`` of all rows (in rank order) into
    ``reduced``; after a second barrier every worker reads all of ``reduced``.
    """

    def __init__(self, wctx: WorkerContext, grads: np.ndarray, reduced: np.ndarray, barrier):
        self.wctx, self.grads, self.reduced, self.barrier = wctx, grads, reduced, barrier
        self.lo, self.hi = chunk_bounds(reduced.size, wctx.world_size)[wctx.rank]

    def gradient_buffer(self) -> np.ndarray:
        return self.grads[self.wctx.rank]

    def start(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def wait(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def reduce_scatter(self) -> np.ndarray:
        """Add chunk ``r`` of every worker's gradient: this worker's chunk of the sum."""
        sum_rows(self.grads, self.reduced, self.lo, self.hi)
        return self.reduced[self.lo : self.hi]

    def allgather(self) -> np.ndarray:
        """Wait until every worker has written its chunk; return the whole array."""
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)
        return self.reduced

    def allreduce(self) -> np.ndarray:
        self.reduce_scatter()
        return self.allgather()


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
