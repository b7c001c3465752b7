"""Checks of the shared-memory all-reduce: ``ShmAllReduce.reduce_scatter``, ``all_gather``
and ``allreduce``; and of the all-reduce in buckets, ``BucketAllReduce.reduce_bucket`` and
``WireAllReduce.reduce_bucket``.

``reduce_scatter`` runs in this process, one worker at a time (it needs no other worker:
it is called once every row is written): its chunk must be the sum of the rows in rank
order, bit for bit (:func:`course_lib.parallel.partition.sum_rows`), written into
``reduced[lo:hi]`` and nowhere else. ``all_gather`` and ``allreduce`` run on three worker
processes, whose barrier writes down every wait; one round lets the last worker arrive
late, another lets it leave the barrier late, so that a missing or misplaced wait shows as
a chunk read before it was written.

``BucketAllReduce.reduce_bucket`` runs in this process, one worker and one bucket at a time
(as ``reduce_scatter``: its barrier, which writes down every wait, has nobody else to wait
for): worker r's chunk of the bucket must be the rows' sum in rank order, bit for bit, and
nothing else written, before the worker waits. ``WireAllReduce.reduce_bucket`` runs the same
way on a fake clock that moves only when the wire's wait (``self.pause``) says so, and while
the sum is added (a fixed share of the bucket's wire time): its bucket must arrive exactly
``wire_time[b]`` after it was put on the wire, the sum inside that window, and the wait must
end at once when the communicator is closed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..parallel.partition import chunk_bounds, sum_rows
from .core import GRADER_TIMEOUT, Mistake
from .harness import arrays_differ, launch, learner, run_workers

__all__ = ["CHECKS", "HINTS"]

MODULE = "course_lib.parallel.allreduce"
WORKERS, SIZE = 3, 100  # chunks [0, 48), [48, 96), [96, 100): unequal, as chunk_bounds makes them
HELD = 777.0  # what a worker's chunk of `reduced` holds before its reduce-scatter (the rest: NaN)
DELAY = 0.2  # seconds the last worker arrives (or leaves the barrier) late in the probing rounds
ROUNDS = 4


@dataclass(frozen=True)
class _Ctx:
    """A worker context for a function run in this process (rank, size, wait timeout)."""

    rank: int
    world_size: int
    wait_timeout: float = GRADER_TIMEOUT


class _Barrier:
    """A barrier that counts the waits (and, for the probing rounds, holds one worker back
    after the real barrier lets it go); ``inner`` None: nobody else to wait for."""

    def __init__(self, inner=None, rank: int = 0):
        self.inner, self.rank, self.waits, self.late = inner, rank, 0, False
        self.mine = None  # (reduced, lo, hi, chunk): this worker's chunk, to be written before it waits
        self.early = False  # it waited before its chunk was written

    def wait(self, rank: int, timeout: float) -> None:
        self.waits += 1
        if self.mine is not None:
            reduced, lo, hi, chunk = self.mine
            self.early |= not np.array_equal(reduced[lo:hi], chunk)
        if self.inner is not None:
            self.inner.wait(rank, timeout)
        if self.late:
            time.sleep(DELAY)


def _rows(workers: int, n: int, seed: int) -> np.ndarray:
    """Gradient rows of mixed magnitudes: their float32 sum depends on the order of addition."""
    rng = np.random.default_rng(seed)
    scale = np.array([1.0, 1e3, 1e-3, 10.0, 1e2][:workers], dtype=np.float32)[:, None]
    return (rng.standard_normal((workers, n)).astype(np.float32) * scale).astype(np.float32)


def _rank_sum(rows: np.ndarray, lo: int = 0, hi: int | None = None) -> np.ndarray:
    out = np.zeros(rows.shape[1], dtype=rows.dtype)
    return sum_rows(rows, out, lo, hi)[lo:hi].copy()


# ------------------------------------------------------------------ reduce_scatter
def _reduce_scatter_mistake(r: int, rows: np.ndarray, reduced: np.ndarray, got, bounds) -> str:
    """What is wrong with worker ``r``'s reduce-scatter ("" if nothing)."""
    n_workers = rows.shape[0]
    lo, hi = bounds[r]
    expected = _rank_sum(rows, lo, hi)
    outside = np.flatnonzero(~np.isnan(reduced) & ((np.arange(reduced.size) < lo) | (np.arange(reduced.size) >= hi)))
    if outside.size:
        for k, (a, b) in enumerate(bounds):
            if k != r and a < b and np.array_equal(reduced[a:b], _rank_sum(rows, a, b)):
                return (f"worker {r} reduced chunk {k} [{a}, {b}), not its own chunk {r} [{lo}, {hi}): worker r "
                        f"adds chunk r of every row (self.lo, self.hi)")
        return (f"worker {r} wrote outside its chunk [{lo}, {hi}) (at index {int(outside[0])}): each worker "
                f"writes its own chunk of self.reduced only")
    mine = reduced[lo:hi]
    if np.array_equal(mine, expected):
        return ""
    said = f"worker {r}'s chunk [{lo}, {hi})"
    if np.array_equal(mine, np.full_like(mine, HELD)):
        if got is not None and np.shape(got) == expected.shape and np.array_equal(got, expected):
            return f"{said}: the sum was returned but not written into self.reduced[{lo}:{hi}] (all_gather shares what is there)"
        return f"{said} of self.reduced was not written: put the sum of chunk {r} of every row there"
    if np.allclose(mine, expected + HELD, rtol=1e-5, atol=1e-3):
        return (f"{said} holds the sum plus what self.reduced held before the call ({HELD:g} here): you added "
                f"into self.reduced without setting it first (start from row 0's chunk, then add rows 1, 2, ...)")
    with np.errstate(all="ignore"):
        tiny = 1e-6 * float(np.abs(rows).max())
        if np.allclose(mine, expected / n_workers, rtol=1e-5, atol=tiny):
            return f"{said} is the mean of the rows, not the sum: did you divide by N?"
        if np.array_equal(mine, rows[r, lo:hi]):
            return f"{said} holds only worker {r}'s own gradient: add chunk {r} of EVERY worker's row"
        for k in range(n_workers):
            others = np.delete(rows, k, axis=0)
            if np.array_equal(mine, _rank_sum(others, lo, hi)):
                return f"{said} misses worker {k}'s row: add all N rows (did your loop stop one short?)"
        for k, (a, b) in enumerate(bounds):
            if k != r and b - a == hi - lo and np.array_equal(mine, _rank_sum(rows, a, b)):
                return f"{said} holds the sum of chunk {k} [{a}, {b}): read chunk {r} of the rows, [self.lo, self.hi)"
        if np.allclose(mine, expected, rtol=1e-5, atol=tiny):
            return (f"{said} is the sum up to rounding but not bit for bit: add the rows in rank order "
                    f"(row 0, then 1, 2, ...), as sum_rows does, so that every run gives the same bits")
    return f"{said} is not the sum of the rows: {arrays_differ(mine, expected)}"


def check_reduce_scatter() -> None:
    shm = learner(MODULE, "ShmAllReduce")
    for workers, n in ((WORKERS, SIZE), (4, 96)):  # 4 workers on 96 numbers: the last chunk is empty
        bounds = chunk_bounds(n, workers)
        for r in range(workers):
            lo, hi = bounds[r]
            grads, barrier = _rows(workers, n, seed=r), _Barrier()
            reduced = np.full(n, np.nan, dtype=np.float32)
            comm = shm(_Ctx(r, workers), grads, reduced, barrier)
            for call in range(2):  # twice: the second call must not keep anything of the first
                rows = grads.copy()
                reduced[:] = np.nan  # the other workers' chunks: not this worker's business
                reduced[lo:hi] = HELD
                got = comm.reduce_scatter()
                if not np.array_equal(grads, rows):
                    raise Mistake(f"reduce_scatter: worker {r} changed the gradient rows (self.grads): add them "
                                  "into self.reduced, leave the rows as they are")
                mistake = _reduce_scatter_mistake(r, rows, reduced, got, bounds)
                if mistake:
                    raise Mistake(f"reduce_scatter: {mistake}" + (" (on the second call)" if call else ""))
                if got is None:
                    raise Mistake("reduce_scatter returned None: return this worker's chunk of the sum, "
                                  "the view self.reduced[self.lo:self.hi]")
                if np.shape(got) != (hi - lo,):
                    raise Mistake(f"reduce_scatter: worker {r} returned {np.size(got)} numbers: return its chunk only "
                                  f"({hi - lo} numbers, self.reduced[{lo}:{hi}])")
                if hi > lo and not np.shares_memory(got, reduced):
                    raise Mistake("reduce_scatter returned a copy: return the view self.reduced[self.lo:self.hi], "
                                  "so that writing into it changes what all_gather shares")
                wanted = (workers - 1) * (hi - lo) * grads.itemsize * (call + 1)
                if comm.bytes_in.get("reduce_scatter") != wanted:
                    raise Mistake(f"reduce_scatter: bytes_in['reduce_scatter'] is {comm.bytes_in.get('reduce_scatter')} "
                                  f"after {call + 1} call(s), expected {wanted}: each call reads chunk {r} of the "
                                  f"N - 1 other rows, (N - 1) x {(hi - lo) * grads.itemsize} bytes")
                grads[:] = _rows(workers, n, seed=10 + call)


# ------------------------------------------------------------------ all_gather and allreduce
def _chunk(k: int, r: int, lo: int, hi: int) -> np.ndarray:
    """What worker ``r`` shares in round ``k``: recognisable numbers (round, rank, position)."""
    return (1000.0 * (k + 1) + 100.0 * r + np.arange(lo, hi) / 1000.0).astype(np.float32)


def _gather_worker(wctx, grads_spec, reduced_spec, barrier, mode: str) -> list:
    """One worker of the all_gather (``mode="all_gather"``) or allreduce check: ROUNDS rounds,
    each recorded as (barrier waits, result copied at once, result's size, bytes_in delta, calls)."""
    shm = learner(MODULE, "ShmAllReduce")
    with grads_spec.attach() as grads, reduced_spec.attach() as reduced:
        probe = _Barrier(barrier, wctx.rank)
        comm = shm(wctx, grads, reduced, probe)
        calls: list[str] = []
        if mode == "allreduce":  # write down the steps allreduce takes
            for step in ("reduce_scatter", "all_gather"):
                method = getattr(comm, step)

                def traced(*args, _method=method, _step=step, **kwargs):
                    calls.append(_step)
                    return _method(*args, **kwargs)

                setattr(comm, step, traced)
        records = []
        for k in range(ROUNDS):
            lo, hi = comm.lo, comm.hi
            last = wctx.rank == wctx.world_size - 1
            before = dict(comm.bytes_in)
            del calls[:]
            if mode == "allreduce":
                grads[wctx.rank] = _rows(wctx.world_size, reduced.size, seed=k)[wctx.rank]
                comm.wait()  # every row written (the data-parallel step's wait)
            probe.waits, probe.early = 0, False
            probe.mine = None if mode == "allreduce" else (reduced, lo, hi, _chunk(k, wctx.rank, lo, hi))
            if k == 1 and last:  # the last worker comes late
                time.sleep(DELAY)
            probe.late = k == 2 and last  # the last worker leaves the barrier late
            if mode == "allreduce":
                out = comm.allreduce()
            elif k == 3:  # the chunk is already in place (after reduce_scatter): all_gather()
                reduced[lo:hi] = _chunk(k, wctx.rank, lo, hi)
                out = comm.all_gather()
            else:
                out = comm.all_gather(_chunk(k, wctx.rank, lo, hi))
            copy = None if out is None else np.array(out, copy=True)
            probe.late, probe.mine = False, None
            grown = {key: comm.bytes_in.get(key, 0) - before.get(key, 0) for key in ("reduce_scatter", "all_gather")}
            records.append((probe.waits, copy, grown, list(calls), probe.early))
            barrier.wait(wctx.rank, wctx.wait_timeout)  # everyone has read this round before the next writes
            wctx.progress(k + 1)
        del comm, probe
    return records


def _run(mode: str) -> list:
    with launch() as launcher:
        grads = launcher.shared((WORKERS, SIZE), np.float32)
        reduced = launcher.shared(SIZE, np.float32)
        reduced.array[:] = np.nan
        barrier = launcher.barrier(WORKERS)
        return run_workers(launcher, _gather_worker, WORKERS, args=(grads.spec, reduced.spec, barrier, mode))


def check_all_gather() -> None:
    results = _run("all_gather")
    bounds = chunk_bounds(SIZE, WORKERS)
    for k in range(ROUNDS):
        whole = np.concatenate([_chunk(k, s, a, b) for s, (a, b) in enumerate(bounds)])
        for r, (lo, hi) in enumerate(bounds):
            waits, got, grown, _, early = results[r][k]
            how = "all_gather()" if k == 3 else "all_gather(chunk)"
            if got is None:
                raise Mistake("all_gather returned None: return the whole array, self.reduced")
            if got.shape != (SIZE,):
                raise Mistake(f"all_gather: worker {r} returned {got.size} numbers: return the whole array "
                              f"self.reduced ({SIZE} numbers), every worker's chunk")
            if not np.array_equal(got[lo:hi], whole[lo:hi]):
                if k == 3:
                    raise Mistake(f"all_gather: {how}, with no chunk given, changed worker {r}'s chunk: the chunk "
                                  "is already in self.reduced (reduce_scatter wrote it), put one only when given")
                raise Mistake(f"all_gather: worker {r}'s chunk was not put into self.reduced[{lo}:{hi}]: "
                              f"{how} first writes the chunk given there, where the others read it")
            stale = [s for s, (a, b) in enumerate(bounds) if s != r and not np.array_equal(got[a:b], whole[a:b])]
            if waits == 0:
                a, b = bounds[stale[0]] if stale else (0, 0)
                seen = (f" (worker {r} read chunk {stale[0]} [{a}, {b}) before worker {stale[0]} had written "
                        "it)") if stale else ""
                raise Mistake(f"all_gather: worker {r} returned without waiting on the barrier, so it can read "
                              f"the other workers' chunks before they are written{seen}: write your chunk, then "
                              "self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout), then return self.reduced")
            if early:
                seen = ""
                if stale:
                    s, (a, b) = stale[0], bounds[stale[0]]
                    seen = f" (worker {r} read chunk {s} [{a}, {b}) before worker {s} had written it)"
                raise Mistake(f"all_gather: worker {r} waited on the barrier before writing its chunk, so the others "
                              f"can leave the barrier and read it before it is there{seen}: wait AFTER writing your "
                              "own chunk, so that every chunk is written when anyone leaves the barrier")
            if stale:
                s, (a, b) = stale[0], bounds[stale[0]]
                raise Mistake(f"all_gather: worker {r} read chunk {s} [{a}, {b}) before worker {s} had "
                              "written it, although it waited on the barrier: wait AFTER writing your own chunk, "
                              "so that every chunk is written when anyone leaves the barrier")
            wanted = (SIZE - (hi - lo)) * 4
            if grown["all_gather"] != wanted:
                raise Mistake(f"all_gather: bytes_in['all_gather'] grew by {grown['all_gather']} in one call, "
                              f"expected {wanted}: the whole array minus this worker's own chunk, in bytes")


def check_allreduce() -> None:
    results = _run("allreduce")
    bounds = chunk_bounds(SIZE, WORKERS)
    for k in range(ROUNDS):
        expected = _rank_sum(_rows(WORKERS, SIZE, seed=k))
        for r in range(len(bounds)):
            _, got, _, calls, _ = results[r][k]
            if "reduce_scatter" not in calls:
                raise Mistake("allreduce never called self.reduce_scatter(): first every worker adds its chunk")
            if "all_gather" not in calls:
                raise Mistake("allreduce stops after self.reduce_scatter(): each worker then holds only its own "
                              "chunk of the sum; return self.all_gather(), which shares every chunk")
            if calls.index("all_gather") < calls.index("reduce_scatter"):
                raise Mistake(f"allreduce called {' then '.join(calls)}: reduce first (reduce_scatter), then share "
                              "(all_gather): shared before it is reduced, a chunk is read before it is summed")
            if got is None:
                raise Mistake("allreduce returned None: return what self.all_gather() returns, the whole sum")
            if got.shape != (SIZE,):
                raise Mistake(f"allreduce: worker {r} returned {got.size} numbers, not the whole sum ({SIZE}): "
                              "return self.all_gather()'s result")
            wrong = arrays_differ(got, expected)
            if wrong:
                raise Mistake(f"allreduce: worker {r}'s result is not the sum of the rows in rank order: {wrong}")


# ------------------------------------------------------------------ the buckets
#: The buckets of a gradient of 240 numbers, in the order the backward pass finishes them:
#: ``(lo, hi, first layer)``, the last layer's first; of unequal sizes (their chunks too).
BUCKETS = ((150, 240, 2), (40, 150, 1), (0, 40, 0))
BUCKETED = 240
#: Seconds each bucket spends on the modelled wire (WireAllReduce.wire_time), all different.
WIRE_TIME = (0.030, 0.050, 0.020)
#: The share of a bucket's wire time its sum takes (the fake clock moves that much meanwhile).
SUM_SHARE = 0.4


class _Clock:
    """The wire's clock and pause, faked: the time moves only while the sum is added, when the
    wire's wait is asked to wait (at once), and by a tick at each reading. The wait returns
    True (closed) at once, without waiting, when ``closed``."""

    TICK = 1e-7

    def __init__(self, closed: bool = False):
        self.t, self.readings, self.pauses, self.closed = 50.0, 0, [], closed

    def clock(self) -> float:
        self.readings += 1
        if self.readings > 1000 and not self.pauses:
            raise Mistake("WireAllReduce.reduce_bucket reads the clock in a loop without waiting (a busy wait, "
                          "or time.sleep): it burns a core the backward pass needs and does not end when the "
                          "communicator is closed; wait the rest of the wire's time with self.pause(left)")
        self.t += self.TICK
        return self.t

    def pause(self, seconds: float) -> bool:
        self.pauses.append(seconds)
        if len(self.pauses) > 100:
            raise Mistake("WireAllReduce.reduce_bucket kept waiting after the communicator was closed: "
                          "self.pause(left) returns True then; stop waiting (break) when it does")
        if not self.closed:
            self.t += max(float(seconds), 0.0)
        return self.closed


class _BucketBarrier:
    """A barrier in this process (nobody else to wait for): it writes down each wait and
    whether this worker's chunk of the bucket was in place then, and moves the fake clock by
    the sum's time (the sum is done once the worker waits)."""

    def __init__(self):
        self.waits, self.early, self.mine, self.clock, self.sum_time = 0, False, None, None, 0.0

    def wait(self, rank: int, timeout: float) -> None:
        self.waits += 1
        if self.mine is not None:
            reduced, lo, hi, chunk = self.mine
            self.early |= not np.array_equal(reduced[lo:hi], chunk)
        if self.clock is not None:
            self.clock.t += self.sum_time


def _bucket_mistake(r: int, b: int, rows: np.ndarray, reduced: np.ndarray) -> str:
    """What is wrong with what worker ``r``'s reduce_bucket(b) wrote ("" if nothing)."""
    workers = rows.shape[0]
    lo, hi, _ = BUCKETS[b]
    chunks = chunk_bounds(hi - lo, workers)
    a, z = lo + chunks[r][0], lo + chunks[r][1]
    said = f"worker {r}'s chunk [{a}, {z}) of bucket {b} [{lo}, {hi})"
    written = np.flatnonzero(~np.isnan(reduced))
    span = (int(written[0]), int(written[-1]) + 1) if written.size else None
    if span is not None and (span[0] < a or span[1] > z):
        if span == (lo, hi) and np.array_equal(reduced[lo:hi], _rank_sum(rows, lo, hi)):
            return (f"worker {r} summed the whole bucket {b} [{lo}, {hi}), not its chunk [{a}, {z}): every worker "
                    "adds only its chunk of the bucket, chunk_bounds(hi - lo, N)[rank], so that N workers share "
                    "the work (and never write the same numbers)")
        if span == chunks[r] and np.array_equal(reduced[span[0]:span[1]], _rank_sum(rows, *span)):
            return (f"worker {r} summed [{span[0]}, {span[1]}): its chunk of the bucket counted from 0, not from the "
                    f"bucket's start: chunk [{chunks[r][0]}, {chunks[r][1]}) of bucket {b} is [lo + "
                    f"{chunks[r][0]}, lo + {chunks[r][1]}) = [{a}, {z}) of the gradient")
        whole = chunk_bounds(rows.shape[1], workers)[r]
        if span == whole and np.array_equal(reduced[span[0]:span[1]], _rank_sum(rows, *span)):
            return (f"worker {r} summed [{span[0]}, {span[1]}), its chunk of the WHOLE gradient, not of bucket {b} "
                    f"[{lo}, {hi}): split the bucket, chunk_bounds(hi - lo, N)[rank], offset by lo")
        if span == (lo + whole[0], min(lo + whole[1], rows.shape[1])):
            return (f"worker {r} summed [{span[0]}, {span[1]}): a chunk of the whole gradient's size "
                    f"(chunk_bounds({rows.shape[1]}, N)), not of bucket {b}'s {hi - lo} numbers: split the bucket, "
                    "chunk_bounds(hi - lo, N)[rank], offset by lo")
        for k, (c, d) in enumerate(chunks):
            if k != r and span == (lo + c, lo + d) and np.array_equal(reduced[lo + c:lo + d],
                                                                      _rank_sum(rows, lo + c, lo + d)):
                return (f"worker {r} summed chunk {k} [{lo + c}, {lo + d}) of bucket {b}, not its own chunk {r} "
                        f"[{a}, {z}): worker r adds chunk r (self.wctx.rank)")
        return (f"worker {r} wrote outside its chunk [{a}, {z}) of bucket {b} (at [{span[0]}, {span[1]})): each "
                "worker writes its own chunk of self.reduced only")
    mine, expected = reduced[a:z], _rank_sum(rows, a, z)
    if np.array_equal(mine, expected):
        return ""
    if np.isnan(mine).all():
        return f"{said} was not written: put the sum of that chunk of every row there (sum_rows)"
    tiny = 1e-6 * float(np.abs(rows).max())
    with np.errstate(all="ignore"):
        if np.allclose(mine, expected / workers, rtol=1e-5, atol=tiny):
            return f"{said} is the mean of the rows, not the sum: did you divide by N?"
        if np.array_equal(mine, rows[r, a:z]):
            return f"{said} holds only worker {r}'s own gradient: add that chunk of EVERY worker's row"
        if np.allclose(mine, expected, rtol=1e-5, atol=tiny):
            return (f"{said} is the sum up to rounding but not bit for bit: add the rows in rank order "
                    "(sum_rows does), so that every run gives the same bits")
    return f"{said} is not the sum of the rows: {arrays_differ(mine, expected)}"


def _bucket_comm(cls_name: str, r: int, seed: int):
    """Worker ``r``'s communicator of class ``cls_name`` (the learner's), its rows and barrier."""
    from ..parallel.allreduce import Wire

    rows = _rows(WORKERS, BUCKETED, seed=seed)
    reduced = np.full(BUCKETED, np.nan, dtype=np.float32)
    barrier = _BucketBarrier()
    cls = learner(MODULE, cls_name)
    args = (_Ctx(r, WORKERS), rows, reduced, barrier, BUCKETS) + ((Wire(),) if cls_name == "WireAllReduce" else ())
    return cls(*args), rows, reduced, barrier


def _reduce_one(comm, rows, reduced, barrier, r: int, b: int, name: str) -> None:
    """Worker ``r``'s reduce_bucket(b), checked: its chunk summed, nothing else written, one wait
    after the sum."""
    lo, hi, _ = BUCKETS[b]
    c_lo, c_hi = chunk_bounds(hi - lo, WORKERS)[r]
    reduced[:] = np.nan
    before = rows.copy()
    barrier.waits, barrier.early = 0, False
    barrier.mine = (reduced, lo + c_lo, lo + c_hi, _rank_sum(rows, lo + c_lo, lo + c_hi))
    comm.reduce_bucket(b)
    if not np.array_equal(rows, before):
        raise Mistake(f"{name}: worker {r} changed the gradient rows (self.grads): add them into self.reduced, "
                      "leave the rows as they are")
    mistake = _bucket_mistake(r, b, rows, reduced)
    if mistake and name.startswith("Wire") and np.isnan(reduced).all():
        raise Mistake(f"{name}: worker {r} summed nothing of bucket {b}: the wire decides only WHEN the sum "
                      "arrives; the sum itself is the shared-memory one, super().reduce_bucket(b)")
    if mistake:
        raise Mistake(f"{name}: {mistake}")
    if barrier.waits == 0:
        raise Mistake(f"{name}: worker {r} returned without waiting on the barrier: finish() would hand over "
                      f"bucket {b} before the other workers have summed their chunks of it; after adding your "
                      "chunk, self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)")
    if barrier.early:
        raise Mistake(f"{name}: worker {r} waited on the barrier before adding its chunk of bucket {b}: the others "
                      "leave the barrier and may read that chunk before it is summed; add first, then wait")
    if barrier.waits > 1:
        raise Mistake(f"{name}: worker {r} waited {barrier.waits} times on the barrier in one call: once, after "
                      "adding its chunk (every worker must wait as often as the others)")


def check_bucket_reduce_bucket() -> None:
    for r in range(WORKERS):
        comm, rows, reduced, barrier = _bucket_comm("BucketAllReduce", r, seed=20 + r)
        for b in range(len(BUCKETS)):
            _reduce_one(comm, rows, reduced, barrier, r, b, "BucketAllReduce.reduce_bucket")
            rows[:] = _rows(WORKERS, BUCKETED, seed=30 + b)


def check_wire_reduce_bucket() -> None:
    name = "WireAllReduce.reduce_bucket"
    for r in range(WORKERS):
        for b in range(len(BUCKETS)):
            for closed in (False, True):
                comm, rows, reduced, barrier = _bucket_comm("WireAllReduce", r, seed=40 + r)
                clock = _Clock(closed)
                comm.clock, comm.pause, comm.wire_time = clock.clock, clock.pause, list(WIRE_TIME)
                barrier.clock, barrier.sum_time = clock, SUM_SHARE * WIRE_TIME[b]
                t0 = clock.t
                _reduce_one(comm, rows, reduced, barrier, r, b, name)
                took, wire, summed = clock.t - t0, WIRE_TIME[b], SUM_SHARE * WIRE_TIME[b]
                slack = 1e-5
                if closed:
                    if len(clock.pauses) != 1:
                        raise Mistake(f"{name}: the communicator was closed, yet worker {r} asked self.pause "
                                      f"{len(clock.pauses)} times: stop waiting as soon as self.pause(left) "
                                      "returns True")
                    continue
                if not clock.pauses:
                    raise Mistake(f"{name}: worker {r} never waited for the wire (self.pause): bucket {b} takes "
                                  f"{wire * 1e3:g} ms on the wire; its sum ({summed * 1e3:g} ms here) runs inside "
                                  "that window, then wait what is left of it with self.pause(left), as long as some is left")
                if any(p <= 0 for p in clock.pauses):
                    raise Mistake(f"{name}: worker {r} asked self.pause to wait {min(clock.pauses):g} s: wait only "
                                  "while some of the wire's time is left (left > 0)")
                if abs(took - (summed + wire)) < slack:
                    raise Mistake(f"{name}: bucket {b} arrived {took * 1e3:.4g} ms after it was put on the wire: the "
                                  f"sum's {summed * 1e3:g} ms plus the wire's {wire * 1e3:g} ms. The sum runs INSIDE "
                                  "the wire's window (a network engine moves the bytes while the cores add): read "
                                  "the clock for the arrival BEFORE super().reduce_bucket(b)")
                if abs(took - wire) > slack:
                    other = [k for k, w in enumerate(WIRE_TIME) if k != b and abs(took - w) < slack]
                    why = (f": that is bucket {other[0]}'s wire time; use bucket b's, self.wire_time[b]" if other
                           else f"; it arrives self.wire_time[b] = {wire * 1e3:g} ms after it is put on the wire")
                    raise Mistake(f"{name}: bucket {b} arrived {took * 1e3:.4g} ms after it was put on the wire{why}")


CHECKS = {
    "ShmAllReduce.reduce_scatter": check_reduce_scatter,
    "ShmAllReduce.all_gather": check_all_gather,
    "ShmAllReduce.allreduce": check_allreduce,
    "BucketAllReduce.reduce_bucket": check_bucket_reduce_bucket,
    "WireAllReduce.reduce_bucket": check_wire_reduce_bucket,
}

HINTS = {
    "ShmAllReduce.reduce_scatter": (
        "Every worker's gradient is a row of `self.grads` (N rows). Worker r is responsible for one chunk of "
        "the columns only: `[self.lo, self.hi)`.",
        "Its job: `self.reduced[lo:hi] = grads[0, lo:hi] + grads[1, lo:hi] + ...`, added in rank order so "
        "that every run gives the same bits. `sum_rows(rows, out, lo, hi)` does exactly that.",
        "Return the view `self.reduced[self.lo : self.hi]` and count the bytes read from the others: "
        "`(N - 1)` times the chunk's `nbytes`, into `self.bytes_in[\"reduce_scatter\"]`.",
    ),
    "ShmAllReduce.all_gather": (
        "When a worker's reduce-scatter is done, only ITS chunk of `self.reduced` is summed. Before it may "
        "read the others' chunks, each of them must have finished its own.",
        "If a chunk is given, write it to `self.reduced[self.lo : self.hi]` first; then wait on the barrier "
        "(`self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)`): after it, every chunk is written.",
        "Count the bytes read from the others (the whole array minus your own chunk) into "
        "`self.bytes_in[\"all_gather\"]`, and return `self.reduced`.",
    ),
    "ShmAllReduce.allreduce": (
        "The all-reduce is the two steps you have written, in the right order.",
        "`self.reduce_scatter()`, then `return self.all_gather()`.",
    ),
    "BucketAllReduce.reduce_bucket": (
        "A bucket is a slice `[lo, hi)` of the flat gradient (`lo, hi, _ = self.bounds[b]`). Its all-reduce is "
        "the shared-memory one on that slice only: each worker adds ITS chunk of the bucket over every row.",
        "Worker r's chunk of the bucket: `c_lo, c_hi = chunk_bounds(hi - lo, N)[rank]`, counted from the "
        "bucket's start, so it is `[lo + c_lo, lo + c_hi)` of the gradient. Add it in rank order: `sum_rows(...)`.",
        "Then wait on the barrier (`self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)`): after it every "
        "chunk of the bucket is summed, and finish() may hand the bucket over.",
    ),
    "WireAllReduce.reduce_bucket": (
        "The arithmetic is BucketAllReduce's, unchanged (`super().reduce_bucket(b)`); the wire decides only "
        "WHEN the sum is there: `self.wire_time[b]` seconds after the bucket goes on the wire.",
        "Read the clock first: the bucket arrives `self.wire_time[b]` after what `self.clock()` says now; then "
        "the sum, which runs inside that window (as a GPU's all-reduce kernel runs while the network moves the "
        "bytes).",
        "Then wait the rest without using a core: as long as some time is `left` before the arrival (read the "
        "clock again each round), `self.pause(left)`; and `break` when it returns True (the communicator was "
        "closed).",
    ),
}
