"""Fault injection into the data-parallel trainer: every failure becomes a clear error,
and no process, /dev/shm segment or mapping is left behind - also over repeated runs."""

from __future__ import annotations

import signal
import sys
import time

import numpy as np
import pytest
from pairwise import all_pairs
from proc_support import stop_button

from course_lib.models import MLP
from course_lib.parallel.engine.workers import (
    Fault,
    FaultInjected,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
)
from course_lib.parallel.train.data import train_data_parallel

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")

MODEL = MLP((8, 16, 3))
RNG = np.random.default_rng(0)
X = RNG.random((60, 8), dtype=np.float32)
Y = RNG.integers(0, 3, 60)
KW = dict(batch_size=12, steps=5, lr=0.1, progress=False)
METHODS = ["fork", "forkserver", "spawn"]
#: Every start method; spawn (a fresh interpreter per worker, about a second more per run) only
#: in make test, not in make test-fast: the launcher's own tests (test_workers.py) cover it there.
RUN_METHODS = ["fork", "forkserver", pytest.param("spawn", marks=pytest.mark.slow)]


@pytest.mark.parametrize("backend", ["shm", "pipe"])
@pytest.mark.parametrize("method", RUN_METHODS)
def test_exception_in_worker_is_reraised_with_its_traceback(backend, method, clean):
    with pytest.raises(WorkerError) as info:
        train_data_parallel(MODEL, X, Y, workers=3, backend=backend, start_method=method,
                            fault=Fault("raise", rank=2, step=3), **KW)
    err = info.value
    assert err.rank == 2 and isinstance(err.__cause__, FaultInjected)
    assert "worker_loop" in err.remote_traceback  # the worker's own frames
    assert "worker 2 raised FaultInjected" in str(err)


@pytest.mark.parametrize(("backend", "method", "kind"), all_pairs(["shm", "pipe"], METHODS, ["exit", "kill"]))
def test_worker_that_dies_gives_clear_error(backend, method, kind, clean):
    """Every backend under every start method; the way the worker dies (exit 3 or SIGKILL)
    rotates over them so that it meets each backend and each method (tests/pairwise.py)."""
    code = {"exit": 3, "kill": -signal.SIGKILL}[kind]
    t0 = time.monotonic()
    with pytest.raises(WorkerDied) as info:
        train_data_parallel(MODEL, X, Y, workers=2, backend=backend, start_method=method,
                            fault=Fault(kind, rank=1, step=2), timeout=30, **KW)
    assert info.value.rank == 1 and info.value.exitcode == code
    assert time.monotonic() - t0 < 10  # detected at once, not after the timeout


@pytest.mark.parametrize("backend", ["shm", "pipe"])
@pytest.mark.parametrize("method", RUN_METHODS)
def test_hung_worker_times_out(backend, method, clean):
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"probably \[0\]") as info:
        train_data_parallel(MODEL, X, Y, workers=2, backend=backend, start_method=method,
                            fault=Fault("hang", rank=0, step=1), timeout=0.6, **KW)
    assert 0.6 <= time.monotonic() - t0 < 10
    assert info.value.progress == [2, 3]  # rank 0 stuck before its step-1 gradient


@pytest.mark.parametrize("method", RUN_METHODS)
def test_keyboard_interrupt_stops_workers(method, clean):
    with stop_button() as button, pytest.raises(KeyboardInterrupt):
        button.press_while_waiting()  # once the workers run (not a fixed time after the test's start)
        train_data_parallel(MODEL, X, Y, workers=2, start_method=method,
                            fault=Fault("hang", rank=1, step=2), timeout=60, **KW)
    assert len(button.workers) == 2  # pressed while both workers ran


def test_repeated_runs_in_one_process_leak_nothing(clean):
    faults = [None, Fault("raise", 1, 1), Fault("exit", 0, 0), None, Fault("kill", 1, 4), None]
    for i, fault in enumerate(faults * 2):
        backend = "shm" if i % 2 == 0 else "pipe"
        if fault is None:
            res = train_data_parallel(MODEL, X, Y, workers=2, backend=backend, start_method="fork", **KW)
            assert res.replicas_in_sync
        else:
            with pytest.raises((WorkerError, WorkerDied)):
                train_data_parallel(MODEL, X, Y, workers=2, backend=backend, start_method="fork",
                                    fault=fault, **KW)


def test_fault_rank_must_exist():
    with pytest.raises(ValueError, match="fault.rank"):
        train_data_parallel(MODEL, X, Y, workers=2, fault=Fault("raise", rank=2), **KW)
