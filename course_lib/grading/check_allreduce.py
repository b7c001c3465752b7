"""Checks of the shared-memory all-reduce: ``ShmAllReduce.reduce_scatter``, ``all_gather``
and ``allreduce``.

``reduce_scatter`` runs in this process, one worker at a time (it needs no other worker:
it is called once every row is written): its chunk must be the sum of the rows in rank
order, bit for bit (:func:`course_lib.parallel.partition.sum_rows`), written into
``reduced[lo:hi]`` and nowhere else. ``all_gather`` and ``allreduce`` run on three worker
processes, whose barrier writes down every wait; one round lets the last worker arrive
late, another lets it leave the barrier late, so that a missing or misplaced wait shows as
a chunk read before it was written.
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


CHECKS = {
    "ShmAllReduce.reduce_scatter": check_reduce_scatter,
    "ShmAllReduce.all_gather": check_all_gather,
    "ShmAllReduce.allreduce": check_allreduce,
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
}
