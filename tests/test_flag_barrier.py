"""The shared-memory flag barrier and the barrier log (issue 37, the benchmarks' options):
correct on processes (nobody passes before everybody has written), every wait ends at its
timeout, a run with a killed or hung worker ends with a clear error and leaves nothing behind,
and the trainers keep their bits whatever barrier, pinning or log they use."""

from __future__ import annotations

import pickle
import platform
import signal
import sys
import time

import numpy as np
import pytest

from course_lib.models import MLP
from course_lib.parallel.engine.launch import (
    BARRIER_KINDS,
    BarrierTimeout,
    FlagBarrier,
    Launcher,
    LoggedBarrier,
)
from course_lib.parallel.engine.shm import SharedArray
from course_lib.parallel.engine.workers import Fault, WorkerDied, WorkerTimeout
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.reference import train_simulated

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")
x86 = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                         reason="the flag barrier is made on x86-64 only")

MODEL = MLP((8, 16, 3))
RNG = np.random.default_rng(0)
X = RNG.random((60, 8), dtype=np.float32)
Y = RNG.integers(0, 3, 60)
KW = dict(batch_size=12, steps=5, lr=0.1, progress=False)


def _round_trip_worker(wctx, barrier, board_spec, rounds: int) -> int:
    """Each round: write the round into my cell, wait, check that every cell holds it (nobody
    passed early), wait again (nobody writes the next round before all have read)."""
    with board_spec.attach() as board:
        seen = 0
        for k in range(1, rounds + 1):
            board[wctx.rank] = k
            barrier.wait(wctx.rank, 20.0)
            if np.all(board == k):
                seen += 1
            barrier.wait(wctx.rank, 20.0)
        del board
    return seen


@x86
@pytest.mark.parametrize("method", ["fork", "forkserver"])
@pytest.mark.parametrize("parties", [1, 3])
def test_nobody_passes_the_flag_barrier_before_everybody_has_written(method, parties, clean):
    rounds = 150
    with Launcher(method) as launch:
        board = launch.shared(parties, np.int64)
        barrier = launch.barrier(parties, "flag")
        assert isinstance(barrier, FlagBarrier)
        seen = launch.run(_round_trip_worker, parties, args=(barrier, board.spec, rounds), timeout=60)
    assert seen == [rounds] * parties


@x86
def test_the_log_sees_every_wait_in_order(clean):
    parties, rounds = 3, 20
    with Launcher("fork") as launch:
        board = launch.shared(parties, np.int64)
        barrier = launch.barrier(parties, "flag", log_waits=2 * rounds + 5)
        assert isinstance(barrier, LoggedBarrier)
        launch.run(_round_trip_worker, parties, args=(barrier, board.spec, rounds), timeout=60)
        log = barrier.log()
    arrive, leave = log[:, : 2 * rounds, 0], log[:, : 2 * rounds, 1]
    assert log.shape == (parties, 2 * rounds + 5, 2) and np.all(log[:, 2 * rounds:] == 0)  # unused slots
    assert np.all(arrive > 0) and np.all(leave >= arrive)
    assert np.all(leave.min(axis=0) >= arrive.max(axis=0))  # nobody left before the last arrived
    assert np.all(arrive[:, 1:] >= leave[:, :-1])  # each party's waits one after the other


def test_a_flag_wait_ends_at_its_timeout():
    with SharedArray((2, FlagBarrier.SLOT), np.int64) as slots:
        barrier = FlagBarrier(2, slots, spin=0.02, nap=1e-3)  # spins, then naps
        t0 = time.monotonic()
        with pytest.raises(BarrierTimeout, match="party 0 of 2 waited 0.15 s"):
            barrier.wait(0, 0.15)  # party 1 never comes
        assert 0.15 <= time.monotonic() - t0 < 5
        barrier.close()


def test_a_flag_barrier_counts_each_party_and_pickles_without_its_mapping():
    with SharedArray((3, FlagBarrier.SLOT), np.int64) as slots:
        barrier = FlagBarrier(3, slots)
        assert [barrier.arrive(r) for r in (0, 1)] == [1, 1] and not barrier.passed(0)
        assert barrier.arrive(2) == 1 and barrier.passed(0) and barrier.passed(2)
        assert barrier.arrive(0) == 2 and not barrier.passed(0) and barrier.passed(1)  # one ahead: waits
        assert slots.array[:, 1:].sum() == 0  # one 8-byte count per 64-byte line, the rest untouched
        state = pickle.loads(pickle.dumps(barrier)).__dict__
        assert state["_owner"] is None and state["_slots"] is None and state["_spec"] == slots.spec
        barrier.close()
    with pytest.raises(ValueError, match="shape"), SharedArray((3, 4), np.int64) as bad:
        FlagBarrier(3, bad)


def test_launcher_barrier_kinds(monkeypatch):
    with Launcher("fork") as launch, pytest.raises(ValueError, match="barrier kind must be one of"):
        launch.barrier(2, "semaphore")
    monkeypatch.setattr("platform.machine", lambda: "arm64")
    with Launcher("fork") as launch, pytest.raises(ValueError, match="x86-64"):
        launch.barrier(2, "flag")
    assert BARRIER_KINDS == ("pipe", "flag")


@x86
@pytest.mark.parametrize(("barrier_kind", "pin", "method", "workers"),
                         [("flag", False, "fork", 3), ("flag", True, "forkserver", 2), ("pipe", True, "fork", 3),
                          ("flag", False, "fork", 1)])
def test_the_options_keep_the_bits(barrier_kind, pin, method, workers):
    ref = train_simulated(MODEL, X, Y, workers=workers, **{k: v for k, v in KW.items() if k != "progress"})
    run = train_data_parallel(MODEL, X, Y, workers=workers, start_method=method, barrier_kind=barrier_kind,
                              pin_workers=pin, log_barriers=True, **KW)
    assert np.array_equal(run.params, ref.params) and run.replicas_in_sync
    log = run.extra["barrier_log"]
    assert log.shape[:2] == (workers, 1 + 2 * KW["steps"] * (MODEL.n_layers + 1))
    assert np.all(log[:, : 1 + 2 * KW["steps"], 0] > 0)  # the start, then two waits a step
    assert run.extra["cpu_time"].shape == run.extra["minor_faults"].shape == (KW["steps"], workers)


@linux
@x86
@pytest.mark.parametrize(("kind", "code"), [("kill", -signal.SIGKILL), ("exit", 3)])
def test_a_dead_worker_ends_a_flag_barrier_run_at_once(kind, code, clean):
    """The others spin at the flag barrier: they are stopped, not left spinning."""
    t0 = time.monotonic()
    with pytest.raises(WorkerDied) as info:
        train_data_parallel(MODEL, X, Y, workers=3, start_method="fork", barrier_kind="flag", pin_workers=True,
                            fault=Fault(kind, rank=1, step=2), timeout=30, **KW)
    assert info.value.rank == 1 and info.value.exitcode == code
    assert time.monotonic() - t0 < 10  # detected when it dies, not after the timeout


@linux
@x86
def test_a_hung_worker_times_out_and_the_spinning_ones_are_stopped(clean):
    with pytest.raises(WorkerTimeout):
        train_data_parallel(MODEL, X, Y, workers=3, start_method="forkserver", barrier_kind="flag",
                            fault=Fault("hang", rank=0, step=1), timeout=1.0, **KW)


def test_bad_options_name_the_parameter():
    with pytest.raises(TypeError, match="pin_workers"):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", pin_workers="yes", **KW)
    with pytest.raises(ValueError, match="barrier kind"):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", barrier_kind="spin", **KW)
