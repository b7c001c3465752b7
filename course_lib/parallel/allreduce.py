"""All-reduce: every worker ends with the sum of all workers' gradients.

One interface, used by the same step loop (:func:`course_lib.parallel.data.worker_loop`):

``gradient_buffer()``
    The array this worker writes its gradient sum into.
``start()``
    Wait until every worker is ready (the clocks start together).
``wait()``
    Wait until every worker has its gradient.
``allreduce()``
    Return the sum over all workers.

=======================  ============================================================
:class:`ShmAllReduce`    shared memory: worker ``r`` adds chunk ``r`` of every worker's
                         gradient (``reduce_scatter()``), then every worker reads all
                         chunks (``all_gather()``); no master process
:class:`PipeAllReduce`   pipes: every worker sends its gradient to rank 0, which adds
                         them and sends the sum back (the naive design)
:class:`GlooAllReduce`   ``torch.distributed.all_reduce`` with the gloo backend
:class:`BucketAllReduce` shared memory in buckets of layers, run by a communication
                         thread while the backward pass goes on
:class:`WireAllReduce`   the same buckets over a modelled :class:`Wire`: the sum is the
                         shared-memory one, the wire decides when it arrives (α + m/β
                         per message, no CPU spent)
:class:`ActivationAllReduce`  ``allreduce(part)`` of an activation of any shape
                         (tensor parallelism), on :class:`ShmAllReduce`'s buffers
=======================  ============================================================

Each communicator times itself: ``@timed("waiting")`` and ``@timed("communication")`` put a
method's time into that phase of the current step of its ``monitor`` (set by the engine that
runs the worker; None, the default, times nothing), so the step loops hold only the algorithm. :class:`ShmAllReduce` also counts
the bytes each step brings in from the other workers (``bytes_in``): summed over the workers,
``(N - 1) n`` bytes per step for an ``n``-byte buffer, which is ``(N - 1)/N n`` per worker,
the ring algorithm's figure and the lower bound of each half
(:func:`course_lib.alpha_beta.collective_lower_bound`). It is not itself a ring: every worker reads
the others' rows directly from shared memory, as a switch lets every device reach every other.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..alpha_beta import NETWORK_LATENCY, ring_allreduce_time
from .engine.clock import timed
from .partition import chunk_bounds, sum_rows

__all__ = ["ActivationAllReduce", "BucketAllReduce", "GlooAllReduce", "PipeAllReduce", "ShmAllReduce", "Wire",
           "WireAllReduce"]


class ShmAllReduce:
    """Reduce-scatter + all-gather through shared memory; no master process.

    Every worker computes its gradient directly into its row of ``grads`` (N, n); after a
    barrier (:meth:`wait`) worker ``r`` adds chunk ``r`` of all rows (in rank order) into
    ``reduced`` (n,) (:meth:`reduce_scatter`); after a second barrier every worker reads all
    of ``reduced`` (:meth:`all_gather`). :meth:`allreduce` is the two in sequence.

    Attributes
    ----------
    lo, hi : int
        This worker's chunk ``[lo, hi)`` of the flat buffer
        (:func:`course_lib.parallel.partition.chunk_bounds`).
    bytes_in : dict of str to int
        Bytes of the other workers' data this worker has read so far: ``"reduce_scatter"``
        (chunk ``r`` of the ``N - 1`` other rows) and ``"all_gather"`` (the ``N - 1`` chunks
        the others reduced).
    """

    monitor = None  # the step monitor that times this communicator (set by the engine)

    def __init__(self, wctx, grads: np.ndarray, reduced: np.ndarray, barrier):
        self.wctx, self.grads, self.reduced, self.barrier = wctx, grads, reduced, barrier
        self.lo, self.hi = chunk_bounds(reduced.size, wctx.world_size)[wctx.rank]
        self.bytes_in = {"reduce_scatter": 0, "all_gather": 0}

    def gradient_buffer(self) -> np.ndarray:
        return self.grads[self.wctx.rank]

    def start(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    @timed("waiting")
    def wait(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    @timed("communication")
    def reduce_scatter(self) -> np.ndarray:
        """Step 1, Reduce-Scatter: add chunk ``r`` of every worker's row, in rank order
        (call it after :meth:`wait`: every row written). Returns this worker's chunk of the
        sum, a view of ``reduced`` (write into it to change what :meth:`all_gather` shares)."""
        sum_rows(self.grads, self.reduced, self.lo, self.hi)  # chunk r of every row, added in rank order
        mine = self.reduced[self.lo : self.hi]  # my chunk of the sum (a view)
        self.bytes_in["reduce_scatter"] += (self.grads.shape[0] - 1) * mine.nbytes  # the others' chunks r
        return mine

    @timed("communication")
    def all_gather(self, chunk: np.ndarray | None = None) -> np.ndarray:
        """Step 2, All-Gather: put ``chunk`` (if given) as this worker's chunk ``r``, wait
        until every worker has put its own, return the whole array (``reduced``)."""
        if chunk is not None:
            self.reduced[self.lo : self.hi] = chunk  # my chunk, where the others read it
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)  # every worker has put its own
        self.bytes_in["all_gather"] += self.reduced.nbytes - self.reduced[self.lo : self.hi].nbytes
        return self.reduced  # the whole sum

    def allreduce(self) -> np.ndarray:
        """All-Reduce = Reduce-Scatter, then All-Gather: the sum over all workers."""
        self.reduce_scatter()  # step 1: every worker sums its chunk
        return self.all_gather()  # step 2: every worker reads every chunk


class PipeAllReduce:
    """The naive design: every worker's gradient through a pipe to rank 0, which adds them
    in rank order and sends the sum back through the same pipes."""

    monitor = None  # the step monitor that times this communicator (set by the engine)

    def __init__(self, wctx, n: int, dtype, conns: list, barrier):
        self.wctx, self.conns, self.barrier = wctx, conns, barrier
        self.grad = np.zeros(n, dtype=dtype)
        self.total = np.zeros(n, dtype=dtype) if wctx.rank == 0 else None

    def gradient_buffer(self) -> np.ndarray:
        return self.grad

    def start(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    @timed("waiting")
    def wait(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def _recv(self, conn):
        if not conn.poll(self.wctx.wait_timeout):
            raise TimeoutError(f"worker {self.wctx.rank}: no message within {self.wctx.wait_timeout:g} s")
        return conn.recv()

    @timed("communication")
    def allreduce(self) -> np.ndarray:
        if self.wctx.rank == 0:
            np.copyto(self.total, self.grad)
            for conn in self.conns:  # ranks 1, 2, ... in order: a reproducible sum
                self.total += self._recv(conn)
            for conn in self.conns:
                conn.send(self.total)
            return self.total
        self.conns[0].send(self.grad)  # pickled: a copy through the pipe, both ways
        return self._recv(self.conns[0])


class GlooAllReduce:
    """``torch.distributed.all_reduce`` (sum) of the worker's flat numpy gradient buffer;
    torch is imported here only. The worker must have joined a gloo process group
    (:func:`course_lib.parallel.engine.gloo.gloo_group`)."""

    monitor = None  # the step monitor that times this communicator (set by the engine)

    def __init__(self, n: int, dtype, separate_waiting: bool = False):
        from .engine.gloo import require_torch

        require_torch()
        import torch
        import torch.distributed as dist

        self.dist, self.separate_waiting = dist, separate_waiting
        self.grad = np.zeros(n, dtype=dtype)
        self.tensor = torch.from_numpy(self.grad)  # the same memory, no copy

    def gradient_buffer(self) -> np.ndarray:
        return self.grad

    def start(self) -> None:
        self.dist.barrier()

    @timed("waiting")
    def wait(self) -> None:
        if self.separate_waiting:
            self.dist.barrier()

    @timed("communication")
    def allreduce(self) -> np.ndarray:
        self.dist.all_reduce(self.tensor, op=self.dist.ReduceOp.SUM)  # gloo's own algorithm and order
        return self.grad


class BucketAllReduce:
    """Shared-memory all-reduce in buckets, run by a communication thread while the backward
    pass goes on.

    ``bounds`` holds ``(lo, hi, first_layer)`` of each bucket of the flat gradient, in the
    order the backward pass finishes them. :meth:`layer_done` hands a bucket to the thread
    once its first layer's gradient is done; the thread runs :meth:`reduce_bucket` on the
    buckets in that order; :meth:`finish` waits for all of them. Every element is the sum of
    the workers' rows in rank order, as in :class:`ShmAllReduce`. Use as a context manager:
    the thread is stopped and joined on exit. Every wait ends after the worker's
    ``wait_timeout``. ``ops`` records, per bucket, ``"W"`` (waiting for the other workers'
    gradients of it, from when the thread takes it up) and ``"A"`` (its all-reduce).
    """

    monitor = None  # the step monitor that times this communicator (set by the engine)

    def __init__(self, wctx, grads: np.ndarray, reduced: np.ndarray, barrier, bounds):
        self.wctx, self.grads, self.reduced, self.barrier = wctx, grads, reduced, barrier
        self.bounds = list(bounds)
        self._bucket_of = {first: b for b, (_, _, first) in enumerate(self.bounds)}
        self._todo: queue.Queue = queue.Queue()
        self._done: queue.Queue = queue.Queue()
        self.ops: list[tuple] = []  # (kind, bucket, start, end, step, chunk), as a StepMonitor's
        self._step = 0
        self._thread = threading.Thread(target=self._serve, name=f"ddl-comm-{wctx.rank}", daemon=True)

    def __enter__(self) -> BucketAllReduce:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def gradient_buffer(self) -> np.ndarray:
        return self.grads[self.wctx.rank]

    def start(self) -> None:
        """Wait until every worker is ready, then start the communication thread."""
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)
        self._thread.start()

    def layer_done(self, layer: int) -> None:
        """The backward pass has finished ``layer``: if it completes a bucket, reduce it now."""
        if layer in self._bucket_of:
            self._todo.put(self._bucket_of[layer])

    def wait(self) -> None:
        """Wait until every worker has the gradient of the next bucket."""
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def reduce_bucket(self, b: int) -> None:
        """All-reduce bucket ``b`` (after :meth:`wait`): add this worker's chunk of the
        bucket over all workers' rows (rank order), then wait until every chunk is added."""
        lo, hi, _ = self.bounds[b]
        c_lo, c_hi = chunk_bounds(hi - lo, self.wctx.world_size)[self.wctx.rank]
        sum_rows(self.grads, self.reduced, lo + c_lo, lo + c_hi)
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    @timed("communication")
    def finish(self) -> np.ndarray:
        """Wait for every bucket of this step; return the summed gradient."""
        for _ in self.bounds:
            try:
                item = self._done.get(timeout=self.wctx.wait_timeout)
            except queue.Empty:
                raise TimeoutError(f"worker {self.wctx.rank}: a bucket's all-reduce took longer than "
                                   f"{self.wctx.wait_timeout:g} s") from None
            if isinstance(item, BaseException):
                raise item
        self._step += 1
        return self.reduced

    def _serve(self) -> None:
        """The communication thread: reduce each bucket handed over, time it, report it."""
        try:
            while (b := self._todo.get(timeout=self.wctx.wait_timeout)) is not None:
                t0 = time.perf_counter()
                self.wait()
                t1 = time.perf_counter()
                self.reduce_bucket(b)
                self.ops += [("W", b, t0, t1, self._step, 0), ("A", b, t1, time.perf_counter(), self._step, 0)]
                self._done.put(b)
        except queue.Empty:  # the main thread stopped handing over buckets: it hangs or ended
            self._done.put(TimeoutError(f"worker {self.wctx.rank}: no bucket within {self.wctx.wait_timeout:g} s"))
        except BaseException as exc:  # noqa: BLE001 - a barrier timeout: the main thread raises it
            self._done.put(exc)

    def close(self) -> None:
        """Stop the communication thread and join it (idempotent)."""
        if self._thread.is_alive():
            self._todo.put(None)
            self._thread.join(timeout=min(5.0, self.wctx.wait_timeout))


@dataclass(frozen=True)
class Wire:
    r"""A modelled link between the workers (the α-β model of :mod:`course_lib.alpha_beta`):
    a message of :math:`m` bytes takes :math:`\alpha + m/\beta`, and an all-reduce of
    :math:`m` bytes on :math:`N` workers the ring's
    :math:`2(N-1)\alpha + 2\frac{N-1}{N}\frac{m}{\beta}`
    (:func:`course_lib.alpha_beta.ring_allreduce_time`).

    ``alpha``: :math:`\alpha`, seconds per message (default: the course's
    :data:`~course_lib.alpha_beta.NETWORK_LATENCY`); ``beta``: :math:`\beta`, bytes per second
    (default 0.5 GB/s, a 4 Gbit/s link: the all-reduce of the running example's deep MLP
    on 2 workers is then of the order of its backward pass on one core, so that hiding it
    is visible; :func:`course_lib.parallel.train.wire.matched_wire` matches it to this
    machine). Checked where a run takes it (``train_data_parallel(..., backend="wire",
    wire=...)``).

    Examples
    --------
    >>> Wire(alpha=1e-3, beta=1e9).allreduce_time(4e6, 2)   # 2 alpha + m / beta
    0.006
    >>> from course_lib.models import MLP
    >>> m = MLP((64, 1024, 1024, 1024, 10)).n_params * 4   # the deep MLP the overlap is shown on
    >>> f"{m / 1e6:.1f} MB: {Wire().allreduce_time(m, 2) * 1e3:.1f} ms on 2 workers"
    '8.7 MB: 17.4 ms on 2 workers'
    """

    alpha: float = NETWORK_LATENCY
    beta: float = 0.5e9

    def allreduce_time(self, nbytes, devices):
        """Seconds of a ring all-reduce of ``nbytes`` on ``devices`` workers over this wire."""
        return ring_allreduce_time(nbytes, devices, self.beta, self.alpha)


class WireAllReduce(BucketAllReduce):
    """:class:`BucketAllReduce` over a modelled :class:`Wire`: what a GPU cluster does, where
    the network engine moves the bytes while the cores compute.

    The arithmetic is the shared-memory one (every element the sum of the workers' rows in
    rank order: the same bits as every other backend); the wire only decides WHEN a bucket's
    sum is available. Bucket ``b`` of ``m_b`` bytes takes the ring's time ``wire_time[b]``
    (:meth:`Wire.allreduce_time`), counted from when its data is ready on every worker and
    the link is free (the thread's wait for the others ends; the thread takes one bucket
    at a time, so the buckets queue on the link as in :func:`course_lib.overlap.overlapped_step_time`).
    The sum itself (one pass over this worker's chunk of the bucket: the CPU work a GPU's
    all-reduce kernel does too) runs inside that window and is not added to it; only if it
    took longer would the bucket arrive later (so every ``"A"`` in ``ops`` lasts at least
    ``wire_time[b]``). The rest of the window is a timed wait: no CPU, the GIL released, and
    it ends at once when the communicator is closed.
    """

    def __init__(self, wctx, grads: np.ndarray, reduced: np.ndarray, barrier, bounds, wire: Wire):
        super().__init__(wctx, grads, reduced, barrier, bounds)
        self.wire = wire
        self.wire_time = [float(wire.allreduce_time((hi - lo) * grads.itemsize, wctx.world_size))
                          for lo, hi, _ in self.bounds]  # seconds of each bucket on the wire
        self._closed = threading.Event()
        self.clock, self.pause = time.perf_counter, self._closed.wait  # a test may give a fake clock

    def reduce_bucket(self, b: int) -> None:
        """All-reduce bucket ``b`` over the wire (after :meth:`wait`: every worker has its data)."""
        arrival = self.clock() + self.wire_time[b]  # on the wire now: its sum is there at `arrival`
        super().reduce_bucket(b)  # the arithmetic: the shared-memory sum, in rank order
        while (left := arrival - self.clock()) > 0:  # the rest of the wire's time: no CPU spent
            if self.pause(left):  # True: the communicator was closed, stop waiting
                break

    def close(self) -> None:
        """End a wire wait at once, then stop and join the communication thread (idempotent)."""
        self._closed.set()
        super().close()


class ActivationAllReduce:
    """``allreduce(part)``: the sum of ``part`` (any shape) over the workers, by
    :class:`ShmAllReduce` on the first ``part.size`` elements of the shared ``rows`` (N, m)
    and ``reduced`` (m,). ``moved`` adds up the payload all-reduced (nothing with one worker,
    who has nobody to exchange with)."""

    monitor = None  # the step monitor that times this communicator (set by the engine)

    def __init__(self, wctx, rows: np.ndarray, reduced: np.ndarray, barrier):
        self.wctx, self.rows, self.reduced, self.barrier = wctx, rows, reduced, barrier
        self.moved = 0

    def start(self) -> None:
        """Wait until every worker is ready (the clocks start together)."""
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def __call__(self, part: np.ndarray) -> np.ndarray:
        n = part.size
        comm = ShmAllReduce(self.wctx, self.rows[:, :n], self.reduced[:n], self.barrier)
        comm.monitor = self.monitor  # its waiting and communication are this step's
        np.copyto(self.rows[self.wctx.rank, :n], part.reshape(-1))  # my part, where the others read it
        comm.wait()  # every worker has written its part
        total = comm.allreduce().reshape(part.shape).copy()  # copied before the next write
        self.moved += part.nbytes if self.wctx.world_size > 1 else 0
        return total
