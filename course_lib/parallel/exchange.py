r"""Exchanges between workers besides the all-reduce: a ring and an all-to-all, through shared memory.

=====================  ============================================================
:class:`ShmRing`       every worker hands arrays to the next one (rank + 1, the last to
                       the first): ring attention's key/value blocks
:class:`ShmAllToAll`   every worker sends block ``j`` of its data to worker ``j`` and
                       receives one block from every worker: the all-to-all over heads
                       (DeepSpeed-Ulysses) and the experts' dispatch and combine
=====================  ============================================================

Both write into shared arrays the others read after a barrier; both keep two sets of
buffers and use them in turn, so that one barrier per exchange is enough (a worker writes
the buffers of exchange :math:`t + 2` only after every worker has passed the barrier of
exchange :math:`t + 1`, hence read those of :math:`t`). Each counts the bytes it brought
in from the other workers (``moved``; nothing with one worker) and times itself like the
communicators of :mod:`course_lib.parallel.allreduce`: ``@timed("waiting")`` for the
barrier, ``@timed("communication")`` for the copies, ``@recorded`` for the run's timeline.

:class:`ShmRing` may also model a link (a :class:`course_lib.parallel.allreduce.Wire`): a
message sent at :math:`t_0` can be read from :math:`t_0 + \alpha + m/\beta` on. The copies
are the shared-memory ones; the wire only decides when a block arrives, so a worker that
computes while its block is on the wire hides the transfer (``exposed`` adds up what was
not hidden).

Examples
--------
One process, two "workers" called in turn (a barrier that does nothing):

>>> class Ctx:
...     def __init__(self, rank): self.rank, self.world_size, self.wait_timeout = rank, 2, 1.0
>>> class NoBarrier:
...     def wait(self, rank, timeout): pass
>>> boxes = np.zeros((2, 2, 2, 3))
>>> a2a = [ShmAllToAll(Ctx(r), boxes, NoBarrier()) for r in range(2)]
>>> for r in range(2):
...     a2a[r].post([np.full(3, 10.0 * r + j) for j in range(2)])
>>> [b.tolist() for b in a2a[1].collect()]          # block 1 of worker 0, block 1 of worker 1
[[1.0, 1.0, 1.0], [11.0, 11.0, 11.0]]
>>> a2a[1].moved                                     # 3 float64 from the other worker
24
"""

from __future__ import annotations

import math
import time

import numpy as np

from .engine.clock import recorded, timed

__all__ = ["ShmAllToAll", "ShmRing"]


class ShmRing:
    """Hand arrays to the next worker round a ring: ``send(*arrays)``, then ``recv()``.

    ``slots`` is shared, ``(N, 2, size)``: worker ``r`` writes message ``t`` into
    ``slots[r, t % 2]``, worker ``r + 1`` reads it there after the barrier. Every worker
    sends and receives the same number of messages, in the same order, with arrays of the
    same shapes (the blocks of an even split). ``stamps`` ``(N, 2)`` holds when each
    message was sent (for the wire). ``moved``: bytes received from the others;
    ``exposed``: seconds spent waiting for the wire after the barrier.
    """

    monitor = None  # the step monitor that times this communicator (set by the engine)

    def __init__(self, wctx, slots: np.ndarray, stamps: np.ndarray, barrier, wire=None):
        self.wctx, self.slots, self.stamps, self.barrier, self.wire = wctx, slots, stamps, barrier, wire
        self.sent = 0  # messages sent so far: message t uses buffer t % 2
        self.shapes: list[tuple] = []
        self.moved, self.exposed = 0, 0.0

    def wire_time(self, nbytes: int) -> float:
        """Seconds a message of ``nbytes`` spends on the modelled link (0 without one)."""
        return 0.0 if self.wire is None else self.wire.alpha + nbytes / self.wire.beta

    @recorded("S")
    @timed("communication")
    def send(self, *arrays: np.ndarray) -> None:
        """Put ``arrays`` where the next worker reads them (message ``t = sent``)."""
        slot, at = self.slots[self.wctx.rank, self.sent % 2], 0
        for a in arrays:
            slot[at : at + a.size] = a.reshape(-1)
            at += a.size
        self.shapes = [a.shape for a in arrays]
        self.stamps[self.wctx.rank, self.sent % 2] = time.perf_counter()  # on the wire from now

    @timed("waiting")
    def wait(self) -> None:
        """Wait until every worker has sent its message."""
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    @recorded("X")
    def wait_for_wire(self, seconds: float) -> None:
        """The rest of the message's time on the wire: no CPU spent."""
        time.sleep(seconds)
        self.exposed += seconds

    @recorded("R")
    @timed("communication")
    def recv(self) -> list[np.ndarray]:
        """The arrays the previous worker sent (copies, shaped as this worker's own)."""
        self.wait()
        before, parity = (self.wctx.rank - 1) % self.wctx.world_size, self.sent % 2
        size = sum(math.prod(s) for s in self.shapes)
        left = self.stamps[before, parity] + self.wire_time(size * self.slots.itemsize) - time.perf_counter()
        if left > 0:
            self.wait_for_wire(left)
        slot, out, at = self.slots[before, parity], [], 0
        for shape in self.shapes:
            n = math.prod(shape)
            out.append(slot[at : at + n].reshape(shape).copy())
            at += n
        self.sent += 1
        self.moved += size * self.slots.itemsize if self.wctx.world_size > 1 else 0
        return out


class ShmAllToAll:
    """All-to-all through shared memory: ``post(blocks)``, then ``collect(shapes)``.

    ``boxes`` is shared, ``(2, N, N, size)``: exchange ``t`` puts worker ``i``'s block for
    worker ``j`` into ``boxes[t % 2, i, j]``; after the barrier worker ``j`` reads
    ``boxes[t % 2, :, j]``. Blocks may differ in size (an all-to-all-v: the experts'
    dispatch); the receiver says which shapes it expects (by default those it posted
    itself: an even exchange). ``moved``: bytes received from the other workers.
    """

    monitor = None  # the step monitor that times this communicator (set by the engine)

    def __init__(self, wctx, boxes: np.ndarray, barrier):
        self.wctx, self.boxes, self.barrier = wctx, boxes, barrier
        self.done = 0  # exchanges so far: exchange t uses boxes[t % 2]
        self.shapes: list[tuple] = []
        self.moved = 0

    @recorded("P")
    @timed("communication")
    def post(self, blocks: list[np.ndarray]) -> None:
        """Put ``blocks[j]``, this worker's block for worker ``j``, where ``j`` reads it."""
        for j, block in enumerate(blocks):
            self.boxes[self.done % 2, self.wctx.rank, j, : block.size] = block.reshape(-1)
        self.shapes = [b.shape for b in blocks]

    @timed("waiting")
    def wait(self) -> None:
        """Wait until every worker has posted its blocks."""
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    @recorded("C")
    @timed("communication")
    def collect(self, shapes: list[tuple] | None = None) -> list[np.ndarray]:
        """The block every worker ``i`` posted for this one (copies), by ``i``; ``shapes[i]``
        is the shape of worker ``i``'s block (default: the shapes this worker posted)."""
        self.wait()
        shapes = self.shapes if shapes is None else shapes
        out = [self.boxes[self.done % 2, i, self.wctx.rank, : math.prod(s)].reshape(s).copy()
               for i, s in enumerate(shapes)]
        self.done += 1
        self.moved += sum(b.nbytes for i, b in enumerate(out) if i != self.wctx.rank)
        return out

    def __call__(self, blocks: list[np.ndarray], shapes: list[tuple] | None = None) -> list[np.ndarray]:
        """One all-to-all: post ``blocks``, return what the others posted for this worker."""
        self.post(blocks)
        return self.collect(shapes)
