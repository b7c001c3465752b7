"""train_pipeline under faults: errors re-raised, no hangs, nothing leaked.

Every test checks with ``no_leaks`` that no stage process, no /dev/shm segment and no
mapping is left behind.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest
from proc_support import stop_button

from course_lib import schedule as mp
from course_lib.models import MLP
from course_lib.parallel.engine.workers import (
    Fault,
    FaultInjected,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
)
from course_lib.parallel.train import pipeline as mp_run

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits


MODEL = MLP((16, 12, 12, 4))
RNG = np.random.default_rng(0)
X = RNG.standard_normal((120, 16)).astype(np.float32)
Y = RNG.integers(0, 4, 120)
RUN = dict(stages=3, micro_batches=3, batch_size=30, steps=4)
#: Every start method; spawn (a fresh interpreter per worker, about a second more per run) only
#: in make test, not in make test-fast: the launcher's own tests (test_workers.py) cover it there.
RUN_METHODS = ["fork", "forkserver", pytest.param("spawn", marks=pytest.mark.slow)]


def _gone(pids):
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        with open(f"/proc/{pid}/stat") as f:  # a reaped pid may be reused: check state
            if f.read().rsplit(")", 1)[1].split()[0] in ("R", "S", "D", "Z"):
                return False
    return True


@pytest.mark.parametrize("schedule", mp.SCHEDULES)
def test_exception_in_a_middle_stage_reraised_with_its_traceback(schedule, no_leaks):
    with pytest.raises(WorkerError) as info:
        mp_run.train_pipeline(MODEL, X, Y, schedule=schedule, fault=Fault("raise", rank=1, step=2), **RUN)
    err = info.value
    assert err.rank == 1 and err.exc_type == "FaultInjected"
    assert isinstance(err.__cause__, FaultInjected)
    assert "stage_worker" in err.remote_traceback and "maybe_fire" in err.remote_traceback
    assert "traceback in worker 1" in str(err)


@pytest.mark.parametrize("kind, rank", [("exit", 0), ("kill", 2)])
@pytest.mark.parametrize("method", RUN_METHODS)
def test_dead_stage_gives_a_clear_error(kind, rank, method, no_leaks):
    t0 = time.monotonic()
    with pytest.raises(WorkerDied, match=f"worker {rank}"):
        mp_run.train_pipeline(MODEL, X, Y, fault=Fault(kind, rank=rank, step=1), start_method=method,
                          **RUN)
    assert time.monotonic() - t0 < 20  # the neighbours' waits did not block the caller


@pytest.mark.parametrize("method", RUN_METHODS)
def test_hung_stage_times_out_instead_of_hanging(method, no_leaks):
    # 0.6 s as in the other trainers' hang tests: the time-out counts once every stage has
    # started, and the stages' steps take milliseconds
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        mp_run.train_pipeline(MODEL, X, Y, timeout=0.6, fault=Fault("hang", rank=2, step=1),
                          start_method=method, **RUN)
    assert 0.6 <= time.monotonic() - t0 < 15
    assert "no worker made progress" in str(info.value)
    # stages 0 and 1 made their step-1 forwards (3 + 3 + 1 ops of step 0, then 3), stage 2 none
    assert info.value.progress == [10, 10, 7] and "probably [2]" in str(info.value)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks /proc")
@pytest.mark.parametrize("method", RUN_METHODS)
def test_keyboard_interrupt_stops_every_stage(method, no_leaks):
    # press "stop" once the run waits for its three stages (their pids noted then)
    with stop_button() as button, pytest.raises(KeyboardInterrupt):
        button.press_while_waiting(after=0.3)
        mp_run.train_pipeline(MODEL, X, Y, timeout=60, fault=Fault("hang", rank=1, step=0),
                          start_method=method, **RUN)
    pids = button.workers
    assert len(pids) == 3 and _gone(pids)


def test_repeated_failures_then_a_good_run(no_leaks):
    for kind in ("raise", "exit", "raise"):
        with pytest.raises((WorkerError, WorkerDied)):
            mp_run.train_pipeline(MODEL, X, Y, fault=Fault(kind, rank=0, step=0), **RUN)
    res = mp_run.train_pipeline(MODEL, X, Y, **RUN)
    assert np.all(np.isfinite(res.params))


def test_fault_in_a_hybrid_run_stops_all_replicas(no_leaks):
    # stage 1 of replica 1 fails: its pipeline neighbour and the other replica's stage 1
    # (waiting at the all-reduce barrier) are stopped too
    with pytest.raises(WorkerError) as info:
        mp_run.train_pipeline(MODEL, X, Y, data=2, fault=Fault("raise", rank=4, step=1), **RUN)
    assert info.value.rank == 4


@pytest.mark.slow
def test_fault_with_spawn(no_leaks):
    with pytest.raises(WorkerError, match="FaultInjected"):
        mp_run.train_pipeline(MODEL, X, Y, start_method="spawn", fault=Fault("raise", rank=2, step=0), **RUN)


@pytest.mark.parametrize("run, top", [
    (lambda f: mp_run.train_pipeline(MODEL, X, Y, fault=f, **RUN), 2),             # 3 stages
    (lambda f: mp_run.train_pipeline(MODEL, X, Y, data=2, fault=f, **RUN), 5),       # 2 x 3 processes
])
def test_fault_rank_must_exist(run, top, no_leaks):
    # a rank that names no process would silently never fire (Fault itself rejects rank < 0)
    with pytest.raises(ValueError, match=rf"fault\.rank must be an integer in \[0, {top}\]"):
        run(Fault("raise", rank=top + 1, step=0))
    with pytest.raises(WorkerError):  # the last process is a valid target
        run(Fault("raise", rank=top, step=0))
