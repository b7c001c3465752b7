"""Tests of course_lib.parallel.engine.workers and .shm: worker lifecycle, fault propagation, no leaks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from proc_support import stop_button

from course_lib.parallel.engine.shm import SharedArray
from course_lib.parallel.engine.workers import (
    Fault,
    FaultInjected,
    ProcessGroup,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
    check_start_method,
    default_start_method,
    demo_worker,
)
from course_lib.progress import ProgressBar as _Progress
from course_lib.timing import blas_threads

LINUX = sys.platform.startswith("linux")
#: Every start method; spawn (a fresh interpreter per worker, about half a second more per
#: test) only under make test, the fork-based ones under make test-fast too.
METHODS = ["fork", "forkserver", pytest.param("spawn", marks=pytest.mark.slow)]
pytest_plugins = ["leak_fixtures"]  # no_leaks


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # still exists: only acceptable if it is not a zombie of ours
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("R", "S", "D", "Z")
    except OSError:
        return True


@pytest.mark.parametrize("method", METHODS)
def test_results_in_rank_order_every_start_method(method, no_leaks):
    with ProcessGroup(demo_worker, 3, args=(4,), kwargs={"value": 2.5}, start_method=method) as g:
        pids = g.pids
        assert len(set(pids)) == 3 and os.getpid() not in pids
        assert g.join(progress_total=4) == [0.0, 2.5, 5.0]
    assert all(_pid_gone(p) for p in pids)


def test_rank_args_and_progress_counters(no_leaks):
    group = ProcessGroup(demo_worker, 2, rank_args=[(3,), (5,)], start_method="fork")
    with group:
        assert group.join() == [0.0, 1.0]


@pytest.mark.parametrize("method", METHODS)
def test_exception_reraised_with_worker_traceback(method, no_leaks):
    with pytest.raises(WorkerError) as info:
        with ProcessGroup(demo_worker, 2, args=(5, Fault("raise", rank=1, step=3)),
                          start_method=method) as g:
            g.join()
    err = info.value
    assert err.rank == 1 and err.exc_type == "FaultInjected"
    # the worker's own frames are in the message and in remote_traceback
    assert "in maybe_fire" in err.remote_traceback and "in demo_worker" in err.remote_traceback
    assert "traceback in worker 1" in str(err) and "at step 3" in str(err)
    assert isinstance(err.original, FaultInjected) and err.__cause__ is err.original


@pytest.mark.parametrize(("kind", "code"), [("exit", 3), ("kill", -signal.SIGKILL)])
@pytest.mark.parametrize("method", METHODS)
def test_hard_exit_and_kill_give_clear_error(kind, code, method, no_leaks):
    with pytest.raises(WorkerDied) as info:
        with ProcessGroup(demo_worker, 3, args=(6, Fault(kind, rank=2, step=1)),
                          start_method=method, timeout=20) as g:
            pids = g.pids
            g.join()
    assert info.value.rank == 2 and info.value.exitcode == code
    assert "worker 2" in str(info.value)
    assert all(_pid_gone(p) for p in pids)


@pytest.mark.parametrize("method", METHODS)
def test_hang_times_out_and_names_the_worker(method, no_leaks):
    # The hang time-out counts only from the moment every worker has started (start-up has
    # its own limit, see test_start_up_has_its_own_limit_and_is_not_taken_for_a_hang), so a
    # spawned worker still importing numpy is never taken for the hung one. After start-up
    # demo_worker's steps take microseconds: 1 s without progress is a hang even on a loaded machine.
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        with ProcessGroup(demo_worker, 2, args=(4, Fault("hang", rank=0, step=2)),
                          start_method=method, timeout=1.0) as g:
            pids = g.pids
            g.join()
    elapsed = time.monotonic() - t0
    assert 1.0 <= elapsed < 20  # not before the time-out, and not stuck
    assert info.value.progress == [2, 4]
    assert "[0]" in str(info.value)
    assert all(_pid_gone(p) for p in pids)


@pytest.mark.parametrize("method", METHODS)
def test_keyboard_interrupt_terminates_workers(method, no_leaks):
    with stop_button() as button, pytest.raises(KeyboardInterrupt):
        with ProcessGroup(demo_worker, 2, args=(3, Fault("hang", rank=1, step=0)),
                          start_method=method, timeout=30) as g:
            pids = g.pids
            # "stop" once join() waits, not a fixed time after the test's or the group's
            # start: on a loaded machine the main thread may not have reached join() yet
            button.press_while_waiting()
            g.join()
    assert button.presses >= 1
    assert all(_pid_gone(p) for p in pids)


def test_repeated_failing_runs_leave_nothing(no_leaks):
    for i, kind in enumerate(["raise", "exit", "kill", "raise", "exit"] * 2):
        with pytest.raises((WorkerError, WorkerDied)):
            with ProcessGroup(demo_worker, 2, args=(3, Fault(kind, rank=i % 2, step=1)),
                              start_method="fork") as g:
                g.join()


def test_unpicklable_result_is_reported():
    with pytest.raises(WorkerError, match="could not send the result back"):
        with ProcessGroup(demo_worker, 1, args=(1,), kwargs={"result": lambda: 0},
                          start_method="fork") as g:
            g.join()


def test_error_before_join_still_cleans_up(no_leaks):
    with pytest.raises(RuntimeError, match="boom"):
        with ProcessGroup(demo_worker, 2, args=(3, Fault("hang", rank=0, step=0)),
                          start_method="fork") as g:
            pids = g.pids
            raise RuntimeError("boom")
    assert all(_pid_gone(p) for p in pids)


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="uses process groups and /proc")
def test_sigint_to_process_group_like_jupyter_stop_button(tmp_path):
    """JupyterLab's interrupt signals the kernel's whole process group: workers ignore
    SIGINT, the parent stops them and exits with KeyboardInterrupt; nothing is left."""
    script = tmp_path / "victim.py"
    script.write_text(textwrap.dedent("""
        import sys
        from course_lib.parallel.engine.workers import Fault, ProcessGroup, demo_worker
        if __name__ == "__main__":
            with ProcessGroup(demo_worker, 2, args=(3, Fault("hang", rank=1, step=1)),
                              start_method=sys.argv[1], timeout=60) as g:
                print("pids", *g.pids, flush=True)
                g.join()
    """))
    # A child inherits an ignored SIGINT, and Python then installs no KeyboardInterrupt handler:
    # start the "kernel" with SIGINT at its default, as JupyterLab's kernel has it, whatever
    # an earlier test left in this pytest worker.
    proc = subprocess.Popen([sys.executable, str(script), "forkserver"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stdout.readline().split()
        assert line[0] == "pids", line
        pids = [int(p) for p in line[1:]]
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "KeyboardInterrupt" in err
    assert all(_pid_gone(p) for p in pids)
    # no process of that session survives (the forkserver and tracker exit with it)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [e for e in os.listdir("/proc") if e.isdigit() and _session(int(e)) == proc.pid]
        if not left:
            break
        time.sleep(0.1)
    assert left == []
    assert not [e for e in os.listdir("/dev/shm") if e.startswith(f"ddl_{proc.pid}_")]


def _session(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[4])
    except (OSError, ValueError, IndexError):
        return None


# ------------------------------------------------------------------ shared memory
@pytest.mark.skipif(not LINUX, reason="checks /dev/shm")
def test_shared_array_unlinks_even_with_live_views(no_leaks):
    shared = SharedArray((3, 4), np.float32, init=2.0)
    path = f"/dev/shm/{shared.name}"
    assert os.path.exists(path) and shared.name.startswith(f"ddl_{os.getpid()}_")
    view = shared.array[1]  # a view that outlives close()
    with shared.spec.attach() as other:
        assert other.shape == (3, 4) and float(other.sum()) == 24.0
        other[0, 0] = 7.0
    assert shared.array[0, 0] == 7.0
    shared.close()
    shared.close()  # idempotent
    assert not os.path.exists(path)
    assert float(view.sum()) == 8.0  # the mapping lives as long as the view
    del view


def test_shared_array_default_zero_and_repr():
    with SharedArray(5, "int64") as shared:
        assert shared.array.tolist() == [0] * 5 and "open" in repr(shared)
    assert "closed" in repr(shared)


# ------------------------------------------------------------------ arguments
def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="world_size"):
        ProcessGroup(demo_worker, 0)
    with pytest.raises(TypeError, match="world_size"):
        ProcessGroup(demo_worker, 1.5)
    with pytest.raises(ValueError, match="start_method"):
        ProcessGroup(demo_worker, 1, start_method="thread")
    with pytest.raises(ValueError, match="timeout"):
        ProcessGroup(demo_worker, 1, timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        ProcessGroup(demo_worker, 1, timeout=float("nan"))
    with pytest.raises(ValueError, match="rank_args"):
        ProcessGroup(demo_worker, 2, rank_args=[()])
    with pytest.raises(TypeError, match="target"):
        ProcessGroup(42, 1)
    with pytest.raises(ValueError, match="kind"):
        Fault("segfault")
    with pytest.raises(ValueError, match="rank"):
        Fault("raise", rank=-1)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_non_importable_target_rejected_before_starting(method):
    def local(ctx):
        return 1

    with pytest.raises(ValueError, match="importable"):
        ProcessGroup(local, 1, start_method=method)
    with pytest.raises(ValueError, match="importable"):
        ProcessGroup(lambda ctx: 1, 1, start_method=method)


def test_fork_accepts_local_target(no_leaks):
    def local(ctx, x):
        return x + ctx.rank

    with ProcessGroup(local, 2, args=(10,), start_method="fork") as g:
        assert g.join() == [10, 11]


def test_start_methods():
    assert check_start_method(None) == default_start_method()
    assert default_start_method() in ("forkserver", "spawn")
    assert check_start_method("spawn") == "spawn"


def test_join_before_start_and_double_start():
    group = ProcessGroup(demo_worker, 1, args=(1,), start_method="fork")
    with pytest.raises(RuntimeError, match="start"):
        group.join()
    group.start()
    with pytest.raises(RuntimeError, match="already"):
        group.start()
    assert group.join() == [0.0]


def test_blas_threads_limits_and_restores():
    from threadpoolctl import threadpool_info

    def blas():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    outside = blas()
    with blas_threads(1):
        assert all(n == 1 for n in blas())
    assert blas() == outside
    with pytest.raises(ValueError, match="blas_threads"):
        with blas_threads(0):
            pass


def test_progress_text_outside_notebook(capsys):
    bar = _Progress(10, "steps", display=True, delay=0.0)
    bar.tick()
    bar.update(4)
    bar.finish(ok=True)
    err = capsys.readouterr().err
    assert "4/10" in err and "done" in err
    quiet = _Progress(10, "steps", display=None, delay=0.0)  # not a notebook: off
    quiet.tick()
    assert not quiet.shown


@pytest.mark.skipif(not LINUX, reason="checks /dev/shm")
def test_stale_segments_of_dead_processes_are_removed():
    from multiprocessing import shared_memory

    from course_lib.parallel.engine.shm import remove_stale_segments

    # a pid above the kernel's limit can never be alive: like a kernel killed with SIGKILL
    dead = shared_memory.SharedMemory(name="ddl_4194305_stale", create=True, size=16)
    alive = SharedArray(4, np.float32)  # ours, alive: never touched
    try:
        deadline = time.monotonic() + 30
        while True:
            removed = remove_stale_segments()
            if "ddl_4194305_stale" in removed or time.monotonic() > deadline:
                break
            # Under pytest-xdist a ProcessGroup starting in another test process may have
            # removed it first (the same rule): make it again and look again, for as long
            # as it takes on a loaded machine, not a fixed number of times.
            open("/dev/shm/ddl_4194305_stale", "wb").close()
        assert "ddl_4194305_stale" in removed and not os.path.exists("/dev/shm/ddl_4194305_stale")
        assert os.path.exists(f"/dev/shm/{alive.name}") and alive.name not in removed
    finally:
        dead.close()
        try:
            dead.unlink()
        except FileNotFoundError:  # removed above: tell the resource tracker too
            from multiprocessing import resource_tracker

            resource_tracker.unregister(dead._name, "shared_memory")
        alive.close()


@pytest.mark.skipif(not LINUX, reason="glibc allocator")
def test_keep_freed_memory_stops_page_faults_in_fresh_processes():
    """A fresh process re-faults every freed multi-MB temporary; after keep_freed_memory()
    it reuses them (the cause of a 20-25% slower step in spawn/forkserver workers)."""
    code = textwrap.dedent("""
        import resource, sys
        import numpy as np
        from course_lib.timing import keep_freed_memory
        if sys.argv[1] == "keep":
            assert keep_freed_memory()
        def step():  # like a training step: several 4 MB temporaries alive at once
            temps = [np.ones(1 << 20, np.float32) for _ in range(4)]
            del temps
        step()  # warm up once
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(20):
            step()
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    """)
    faults = {}
    for mode in ("default", "keep"):
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        faults[mode] = int(out.stdout)
    assert faults["default"] > 20 * 1000  # thousands of 4-kB pages faulted in per step
    assert faults["keep"] < 200


def test_start_up_has_its_own_limit_and_is_not_taken_for_a_hang(no_leaks):
    # a spawned worker needs far longer than 0.1 s to start (a new interpreter, numpy):
    # the hang time-out counts only from the moment every worker has started
    with ProcessGroup(demo_worker, 2, args=(3,), start_method="spawn", timeout=0.1, start_timeout=120) as g:
        assert g.join() == [0.0, 1.0]


def test_a_worker_that_does_not_start_in_time_is_named(no_leaks):
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"worker \[0, 1\] did not start within 0.01 s"):
        with ProcessGroup(demo_worker, 2, args=(3,), start_method="spawn", start_timeout=0.01) as g:
            pids = g.pids
            g.join()
    assert time.monotonic() - t0 < 30
    assert all(_pid_gone(p) for p in pids)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "1"])
def test_bad_start_timeout(bad):
    with pytest.raises((TypeError, ValueError), match="start_timeout"):
        ProcessGroup(demo_worker, 1, args=(1,), start_timeout=bad)
