"""Process faults from outside, for real, for every process-based trainer and experiment.

Under fork, forkserver and spawn:

* the parent is killed with SIGKILL mid-run (what a kernel restart or the out-of-memory
  killer does to a notebook): every worker exits by itself within 5 s and, within 10 s,
  nothing the run created is left in ``/dev/shm``;
* a worker is killed from outside with SIGKILL: the parent raises ``WorkerDied`` naming
  the rank and the signal, the other workers are stopped, nothing is left behind;
* SIGINT reaches the parent (the notebook's stop button): ``KeyboardInterrupt``, all
  stopped, nothing left.

The runs live in ``tests/process_runs.py`` (an importable module, as spawn needs).
Every run is tested under every start method; the parent-kill target (the parent alone
or its whole group) is rotated over them so that every pair of factors occurs
(``tests/pairwise.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from course_lib.parallel.engine.workers import RunStopped, WorkerDied
from course_lib.testing import leaked_resources, resource_snapshot

sys.path.insert(0, str(Path(__file__).parent))
import process_runs  # noqa: E402
from pairwise import all_pairs  # noqa: E402
from proc_support import cmdline, descendants, new_shm, pgid, running, stop_button, wait_until  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm"),
    pytest.mark.slow,
]

METHODS = ["fork", "forkserver", "spawn"]
SCRIPT = Path(__file__).parent / "process_runs.py"


def _torch_or_skip(run: str) -> None:
    if run != "torch_gloo":
        return
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        if os.environ.get("DDL_REQUIRE_TORCH") == "1":
            pytest.fail("DDL_REQUIRE_TORCH=1 but torch is not installed")
        pytest.skip("torch is not installed (pip install -e '.[engines]')")


@pytest.mark.parametrize(("run", "method", "target"), all_pairs(list(process_runs.RUNS), METHODS, ["parent", "group"]))
def test_parent_killed_with_sigkill_leaves_no_worker_and_nothing_in_dev_shm(run, method, target, capsys):
    """``target="parent"``: SIGKILL to the parent alone (the out-of-memory killer);
    ``"group"``: to its whole process group, as JupyterLab's "Restart kernel" does."""
    _torch_or_skip(run)
    shm_before = set(os.listdir("/dev/shm"))
    parent = subprocess.Popen([sys.executable, str(SCRIPT), run, method], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert parent.stdout.readline().startswith("started")
        seen = wait_until(lambda: len(descendants(parent.pid)[1]) >= process_runs.WORKERS[run], 60)
        assert seen is not None, f"the workers of {run} did not start"
        # Each worker leaves the parent's process group first thing in its entry point;
        # before that (a spawned worker still importing numpy on a loaded machine) a
        # group SIGKILL kills it too, and its segments wait for the next run's
        # remove_stale_segments. The test is about workers that run: wait for that.
        own_group = wait_until(lambda: all(pgid(p) not in (None, parent.pid)
                                           for p in descendants(parent.pid)[1]), 60)
        assert own_group is not None, f"the workers of {run} never reached their entry point"
        time.sleep(0.5)  # well into the training loop
        everyone, workers = descendants(parent.pid)
        assert parent.poll() is None
        if target == "group":
            os.killpg(parent.pid, signal.SIGKILL)  # a session leader: its pgid is its pid
        else:
            os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        gone = wait_until(lambda: not any(running(p) for p in everyone), 5.0)
        left = [f"{p} {cmdline(p)}" for p in everyone if running(p)]
        assert gone is not None, f"still running 5 s after the parent died: {left}"
        clean = wait_until(lambda: not new_shm(shm_before, [parent.pid, *everyone]), 10.0)
        assert clean is not None, f"left in /dev/shm: {sorted(new_shm(shm_before, [parent.pid, *everyone]))}"
        with capsys.disabled():
            print(f"\n[{target} SIGKILL] {run:>18} {method:>10}: {len(workers)} workers, "
                  f"all processes gone after {gone * 1000:.0f} ms", end="")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in descendants(parent.pid)[0]:
            if running(pid):
                os.kill(pid, signal.SIGKILL)



def _act_on_a_worker(before, count: int, act) -> threading.Thread:
    """In a thread: once ``count`` new worker processes run, wait a little and ``act(pids)``."""
    def body():
        def workers():
            old = {p for p, _, _ in before.processes}
            return sorted(p for p, state, _ in resource_snapshot().processes
                          if p not in old and state != "Z")
        if wait_until(lambda: len(workers()) >= count, 60) is not None:
            time.sleep(0.3)
            act(workers())
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def nothing_left():
    before = resource_snapshot()
    shm_before = set(os.listdir("/dev/shm"))
    yield before
    assert leaked_resources(before) == []
    clean = wait_until(lambda: not new_shm(shm_before, [os.getpid()]), 10.0)
    assert clean is not None, f"left in /dev/shm: {sorted(new_shm(shm_before, [os.getpid()]))}"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("run", list(process_runs.RUNS))
def test_worker_killed_from_outside_is_reported_with_rank_and_signal(run, method, nothing_left):
    _torch_or_skip(run)
    n = process_runs.WORKERS[run]
    thread = _act_on_a_worker(nothing_left, n, lambda pids: os.kill(pids[-1], signal.SIGKILL))
    t0 = time.monotonic()
    with pytest.raises(WorkerDied, match=r"worker \d+ was killed by signal SIGKILL") as info:
        process_runs.RUNS[run](method)
    thread.join()
    assert 0 <= info.value.rank < n and info.value.exitcode == -signal.SIGKILL
    assert time.monotonic() - t0 < 30  # noticed at once, not after a time-out


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("run", list(process_runs.RUNS))
def test_sigint_to_the_parent_stops_everything(run, method, nothing_left):
    _torch_or_skip(run)
    n = process_runs.WORKERS[run]
    # pressed once the run waits for its workers (in join or a pool's recv, so it is RunStopped),
    # not a fixed time after they appear: on a loaded machine the parent may still be in start()
    with stop_button() as button, pytest.raises(RunStopped) as stopped:  # a KeyboardInterrupt, shown as one line
        button.press_while_waiting(after=0.3)
        process_runs.RUNS[run](method)
    assert isinstance(stopped.value, KeyboardInterrupt)
    assert len(button.workers) >= n  # pressed while every worker ran
