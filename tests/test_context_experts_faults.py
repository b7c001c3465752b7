"""train_context_parallel (ring and all-to-all) and train_expert_parallel under faults: a worker
that raises, exits, is killed, hangs, is killed while it starts or from outside; the stop
button; the parent killed with SIGKILL. Errors are re-raised naming the worker, nothing hangs,
and no process, no /dev/shm segment and no mapping is left behind (``no_leaks``).

The support functions are those of the other fault tests (``tests/proc_support.py``,
``tests/leak_fixtures.py``). ``python tests/test_context_experts_faults.py RUN METHOD`` starts
run ``RUN`` and trains until killed: the parent the SIGKILL test kills.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from proc_support import cmdline, descendants, new_shm, pgid, running, stop_button, wait_until  # noqa: E402

from course_lib.parallel.engine.workers import (  # noqa: E402
    Fault,
    FaultInjected,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
)

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean

LONG = 20_000  # steps: long enough (> 10 s) for the faults from outside, not forever
WORKERS = 2
METHODS = ["fork", "forkserver", pytest.param("spawn", marks=pytest.mark.slow)]


def _context(method: str, steps: int = 4, attention: str = "ring", **kw):
    from course_lib.parallel.train.context import train_context_parallel
    from course_lib.transformer import Transformer

    model = Transformer(seq_length=8, token_size=2, hidden=8, heads=2, n_layers=1, ffn=8, classes=3, causal=True)
    rng = np.random.default_rng(0)
    x, y = rng.random((24, 8, 2)), rng.integers(0, 3, 24)
    return train_context_parallel(model, x, y, workers=WORKERS, method=attention, batch_size=8, steps=steps,
                                  start_method=method, progress=False, **{"timeout": 30, **kw})


def _experts(method: str, steps: int = 4, **kw):
    from course_lib.moe import MoE
    from course_lib.parallel.train.experts import train_expert_parallel

    model = MoE(inputs=8, hidden=6, experts=4, expert_hidden=5, classes=3, top_k=2, capacity_factor=1.0)
    rng = np.random.default_rng(0)
    x, y = rng.random((24, 8)), rng.integers(0, 3, 24)
    return train_expert_parallel(model, x, y, workers=WORKERS, batch_size=8, steps=steps, start_method=method,
                                 progress=False, **{"timeout": 30, **kw})


RUNS = {
    "context_ring": _context,
    "context_all_to_all": lambda method, steps=4, **kw: _context(method, steps, "all_to_all", **kw),
    "experts": _experts,
}


# ------------------------------------------------------------------ faults inside a worker
@pytest.mark.parametrize("run", list(RUNS))
def test_an_exception_is_reraised_with_its_rank_and_traceback(run, no_leaks):
    with pytest.raises(WorkerError) as info:
        RUNS[run]("fork", fault=Fault("raise", rank=1, step=2))
    assert info.value.rank == 1 and info.value.exc_type == "FaultInjected"
    assert isinstance(info.value.__cause__, FaultInjected) and "maybe_fire" in info.value.remote_traceback


@pytest.mark.parametrize("kind, rank", [("exit", 0), ("kill", 1)])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("run", list(RUNS))
def test_a_dead_worker_gives_a_clear_error(run, method, kind, rank, no_leaks):
    t0 = time.monotonic()
    with pytest.raises(WorkerDied, match=f"worker {rank}"):
        RUNS[run](method, fault=Fault(kind, rank=rank, step=1))
    assert time.monotonic() - t0 < 20  # the other worker's waits did not block the caller


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("run", list(RUNS))
def test_a_hung_worker_times_out_instead_of_hanging(run, method, no_leaks):
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        RUNS[run](method, timeout=0.6, fault=Fault("hang", rank=1, step=1))
    assert 0.6 <= time.monotonic() - t0 < 15
    assert "no worker made progress" in str(info.value) and "probably [1]" in str(info.value)


def test_failures_then_a_good_run(no_leaks):
    for run in RUNS:
        with pytest.raises((WorkerError, WorkerDied)):
            RUNS[run]("fork", fault=Fault("exit", rank=0, step=0))
        assert np.all(np.isfinite(RUNS[run]("fork").params))


# ------------------------------------------------------------------ from outside
def _gone(pids) -> bool:
    return not any(running(p) for p in pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc")
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("run", list(RUNS))
def test_the_stop_button_stops_every_worker(run, method, no_leaks):
    with stop_button() as button, pytest.raises(KeyboardInterrupt):
        button.press_while_waiting(after=0.3)
        RUNS[run](method, steps=LONG, fault=Fault("hang", rank=1, step=0))
    assert len(button.workers) == WORKERS and wait_until(lambda: _gone(button.workers), 5) is not None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc")
@pytest.mark.parametrize("run", list(RUNS))
def test_a_worker_killed_from_outside_is_named(run, no_leaks):
    old = set(descendants(os.getpid())[1])

    def kill_one():
        found = wait_until(lambda: len(set(descendants(os.getpid())[1]) - old) >= WORKERS, 60)
        if found is not None:
            time.sleep(0.3)
            os.kill(max(set(descendants(os.getpid())[1]) - old), signal.SIGKILL)

    thread = threading.Thread(target=kill_one, daemon=True)
    thread.start()
    with pytest.raises(WorkerDied, match=r"worker \d was killed by signal SIGKILL"):
        RUNS[run]("fork", steps=LONG)
    thread.join()


@pytest.mark.slow  # a subprocess per start method
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
@pytest.mark.parametrize("run", list(RUNS))
def test_the_parent_killed_leaves_no_worker_and_nothing_in_dev_shm(run, method):
    shm_before = set(os.listdir("/dev/shm"))
    parent = subprocess.Popen([sys.executable, __file__, run, method], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert parent.stdout.readline().startswith("started")
        assert wait_until(lambda: len(descendants(parent.pid)[1]) >= WORKERS, 60) is not None
        assert wait_until(lambda: all(pgid(p) not in (None, parent.pid) for p in descendants(parent.pid)[1]),
                          60) is not None  # the workers are in their loops, each in its own group
        time.sleep(0.5)
        everyone, _ = descendants(parent.pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        gone = wait_until(lambda: _gone(everyone), 5.0)
        assert gone is not None, f"still running: {[cmdline(p) for p in everyone if running(p)]}"
        clean = wait_until(lambda: not new_shm(shm_before, [parent.pid, *everyone]), 10.0)
        assert clean is not None, f"left in /dev/shm: {sorted(new_shm(shm_before, [parent.pid, *everyone]))}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in descendants(parent.pid)[0]:
            if running(pid):
                os.kill(pid, signal.SIGKILL)



@pytest.mark.slow  # a start fault per run and start method
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc")
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
@pytest.mark.parametrize("run", list(RUNS))
def test_a_worker_killed_as_it_starts_ends_the_run(run, method, no_leaks):
    old = set(descendants(os.getpid())[1])

    def kill_first():
        found = wait_until(lambda: bool(set(descendants(os.getpid())[1]) - old), 60, poll=0.001)
        if found is not None:
            # a helper (the resource tracker) started by fork and exec shows the parent's command
            # line until its exec: look again once it has had the time, so only a worker is killed
            time.sleep(0.05)
            try:
                os.kill(min(set(descendants(os.getpid())[1]) - old), signal.SIGKILL)
            except (ProcessLookupError, ValueError):  # pragma: no cover - it ended first
                pass

    thread = threading.Thread(target=kill_first, daemon=True)
    thread.start()
    t0 = time.monotonic()
    with pytest.raises(WorkerDied, match="SIGKILL"):
        RUNS[run](method, steps=LONG)
    thread.join()
    assert time.monotonic() - t0 < 30


if __name__ == "__main__":  # the parent of the SIGKILL test: train until killed
    print(f"started {os.getpid()}", flush=True)
    RUNS[sys.argv[1]](sys.argv[2], steps=LONG)
