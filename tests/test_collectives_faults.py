"""Fault injection into the shared-memory collectives run (:func:`run_shm_collectives`): a
worker that raises, exits, is killed or hangs before the reduce-scatter or the all-gather
gives a clear error naming it, and no process, /dev/shm segment or mapping is left behind."""

from __future__ import annotations

import signal
import sys
import time

import numpy as np
import pytest

from course_lib.parallel.engine.workers import (
    Fault,
    FaultInjected,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
)
from course_lib.parallel.train.collectives import run_shm_collectives

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")

ROWS = np.arange(3 * 40, dtype=np.float16).reshape(3, 40)


@pytest.mark.parametrize("step", [0, 1])
def test_worker_that_raises_is_named_with_its_traceback(step, clean):
    with pytest.raises(WorkerError) as info:
        run_shm_collectives(ROWS, fault=Fault("raise", rank=1, step=step), start_method="fork", timeout=20)
    err = info.value
    assert err.rank == 1 and isinstance(err.__cause__, FaultInjected)
    assert "_collectives_worker" in err.remote_traceback  # the worker's own frames
    assert "worker 1 raised FaultInjected" in str(err)


@pytest.mark.parametrize(("kind", "code", "step"), [("kill", -signal.SIGKILL, 1), ("exit", 3, 0)])
def test_worker_that_dies_is_detected_at_once(kind, code, step, clean):
    t0 = time.monotonic()
    with pytest.raises(WorkerDied) as info:  # the others wait at a barrier: stopped, not left waiting
        run_shm_collectives(ROWS, fault=Fault(kind, rank=2, step=step), start_method="fork", timeout=30)
    assert info.value.rank == 2 and info.value.exitcode == code
    assert time.monotonic() - t0 < 10  # detected when it dies, not after the timeout


def test_hung_worker_times_out(clean):
    with pytest.raises(WorkerTimeout):
        run_shm_collectives(ROWS, fault=Fault("hang", rank=0, step=1), start_method="fork", timeout=0.5)


def test_a_run_after_a_fault_gives_the_sum(clean):
    with pytest.raises(WorkerError):
        run_shm_collectives(ROWS, fault=Fault("raise", rank=0), start_method="fork", timeout=20)
    out = run_shm_collectives(ROWS, start_method="fork", timeout=20)
    assert np.array_equal(out["all_gather"][2], (ROWS[0] + ROWS[1]) + ROWS[2])


@pytest.mark.parametrize(("fault", "name"), [(Fault("raise", rank=3), "fault.rank"),
                                             (Fault("raise", step=2), "fault.step")])
def test_a_fault_that_cannot_fire_is_refused(fault, name):
    with pytest.raises(ValueError, match=name):
        run_shm_collectives(ROWS, fault=fault)


@pytest.mark.slow  # a spawn start takes seconds; the fork runs above keep make test-fast quick
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_faults_under_the_other_start_methods_leave_nothing(start_method, clean):
    """The same guarantees when the workers are started fresh (forkserver, spawn): a killed
    worker is named at once and a raising one with its traceback; nothing is left behind."""
    with pytest.raises(WorkerDied) as info:
        run_shm_collectives(ROWS, fault=Fault("kill", rank=1, step=1), start_method=start_method, timeout=60)
    assert info.value.rank == 1 and info.value.exitcode == -signal.SIGKILL
    with pytest.raises(WorkerError) as raised:
        run_shm_collectives(ROWS, fault=Fault("raise", rank=2, step=0), start_method=start_method, timeout=60)
    assert raised.value.rank == 2 and "_collectives_worker" in raised.value.remote_traceback
