"""The first measured experiment: correctness of the split, BLAS limits, clean shutdown."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest

from course_lib.datasets import load_digits
from course_lib.models import MLP
from course_lib.parallel.engine.workers import WorkerDied, WorkerTimeout
from course_lib.parallel.partition import shard_bounds
from course_lib.parallel.train.speedup import (
    GradientWorkload,
    WorkerPool,
    default_process_counts,
    epoch_gradient,
    measure_parallel_speedup,
    parallel_epoch_gradient,
)
from course_lib.timing import available_cores

FAST = "fork" if "fork" in mp.get_all_start_methods() else "spawn"


@pytest.fixture
def small():
    data = load_digits("train")
    model = MLP((64, 12, 10))
    return model, model.init_params(1), data.x[:301], data.y[:301]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _assert_no_children_left(pids):
    assert mp.active_children() == []
    assert not any(_alive(pid) for pid in pids)


def test_serial_epoch_gradient_is_the_sum_of_shard_gradients(small):
    model, params, x, y = small
    loss, full = epoch_gradient(model, params, x, y, batch_size=16, epochs=2)
    parts = [epoch_gradient(model, params, x[a:b], y[a:b], batch_size=16, epochs=2)
             for a, b in shard_bounds(len(y), 3)]
    np.testing.assert_allclose(sum(g for _, g in parts), full, rtol=1e-5, atol=1e-6)
    assert sum(lo for lo, _ in parts) == pytest.approx(loss, rel=1e-6)
    # two passes with fixed parameters = twice one pass
    _, once = epoch_gradient(model, params, x, y, batch_size=16, epochs=1)
    np.testing.assert_allclose(full, 2 * once, rtol=1e-12)


def test_spawned_workers_reproduce_the_serial_gradient_with_one_blas_thread(small):
    """spawn is what macOS and Windows use: the worker code must be importable."""
    model, params, x, y = small
    _, serial = epoch_gradient(model, params, x, y, batch_size=32)
    with WorkerPool(model, x, y, 2, batch_size=32, start_method="spawn") as pool:
        loss, grad = pool.gradient(params)
        pids = [pid for pid, _ in pool.worker_info]
        assert len(set(pids)) == 2 and os.getpid() not in pids
        assert [threads for _, threads in pool.worker_info] == [1, 1]
    np.testing.assert_allclose(grad, serial, rtol=1e-5, atol=1e-6)
    _assert_no_children_left(pids)


@pytest.mark.parametrize("processes", [1, 3, 5])
def test_any_process_count_gives_the_same_gradient(small, processes):
    model, params, x, y = small
    _, serial = epoch_gradient(model, params, x, y, batch_size=8)
    _, grad = parallel_epoch_gradient(model, params, x, y, processes=processes, batch_size=8,
                                      start_method=FAST)
    np.testing.assert_allclose(grad, serial, rtol=1e-5, atol=1e-6)
    assert mp.active_children() == []


def test_error_inside_the_block_terminates_the_workers(small):
    model, params, x, y = small
    with pytest.raises(RuntimeError, match="learner stopped"):
        with WorkerPool(model, x, y, 2, start_method=FAST) as pool:
            pids = [pid for pid, _ in pool.worker_info]
            raise RuntimeError("learner stopped")
    _assert_no_children_left(pids)


def test_timeout_terminates_instead_of_hanging(small):
    model, params, x, y = small
    pool = WorkerPool(model, x, y, 2, epochs=5000, start_method=FAST, timeout=60)
    pids = [pid for pid, _ in pool.worker_info]
    pool._group.timeout = 0.01  # a gradient of 5,000 passes cannot arrive within 10 ms
    with pytest.raises(WorkerTimeout, match="no worker made progress for 0.01 s"):
        pool.gradient(params)
    _assert_no_children_left(pids)
    with pytest.raises(RuntimeError, match="closed"):
        pool.gradient(params)
    pool.close()  # harmless after terminate


def _silent_worker(ctx, *args, **kwargs):
    """A pool worker that never says it has started (stands in for a hung start-up)."""
    time.sleep(60)


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(),
                    reason="the stand-in worker is patched in; only fork inherits it")
def test_start_up_timeout(small, monkeypatch):
    """Workers that never answer: the pool gives up after ``timeout`` and stops them.

    (A tiny timeout with real workers is a race: on a loaded machine forked workers can
    answer before the parent first looks, and the pool is built instead of timing out.)
    """
    import course_lib.parallel.train.speedup as speedup

    model, _, x, y = small
    monkeypatch.setattr(speedup, "_pool_process", _silent_worker)
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout, match="no worker made progress for 0.5 s"):
        WorkerPool(model, x, y, 2, start_method="fork", timeout=0.5)
    assert time.monotonic() - t0 < 30  # stopped, not waited for
    assert mp.active_children() == []


def test_a_killed_worker_is_reported_not_waited_for(small):
    model, params, x, y = small
    with pytest.raises(WorkerDied, match="worker 1 was killed by signal SIGKILL") as info:
        with WorkerPool(model, x, y, 2, start_method=FAST, timeout=30) as pool:
            pids = [pid for pid, _ in pool.worker_info]
            os.kill(pids[1], signal.SIGKILL)
            pool._group._procs[1].join(5)
            pool.gradient(params)
    assert info.value.rank == 1 and info.value.exitcode == -signal.SIGKILL
    _assert_no_children_left(pids)


def test_an_error_in_a_worker_comes_back_with_its_traceback(small):
    from course_lib.parallel.engine.workers import WorkerError

    model, params, x, y = small
    with pytest.raises(WorkerError, match="worker 0 raised") as info:
        with WorkerPool(model, x, y, 2, start_method=FAST, timeout=30) as pool:
            pids = [pid for pid, _ in pool.worker_info]
            pool._group.send(0, "not a request")  # past the pool's own protocol
            pool._group.recv(0)
    _assert_no_children_left(pids)
    assert "pool_worker" in info.value.remote_traceback
    assert "expects True (parameters ready) or None, got 'not a request'" in str(info.value)


def test_bad_parameters_of_the_pool(small):
    model, params, x, y = small
    with pytest.raises(ValueError, match=r"processes must be an integer in \[1, "):
        WorkerPool(model, x, y, 0)
    with pytest.raises(TypeError, match="processes must be an integer"):
        WorkerPool(model, x, y, "2")
    with pytest.raises(ValueError, match="start_method must be one of"):
        WorkerPool(model, x, y, 1, start_method="thread")
    with pytest.raises(ValueError, match="timeout must be in"):
        WorkerPool(model, x, y, 1, timeout=0)
    with pytest.raises(ValueError, match="x must have shape"):
        WorkerPool(model, x[:, :10], y, 1)
    with WorkerPool(model, x, y, 1, start_method=FAST) as pool:
        with pytest.raises(ValueError, match="params must have shape"):
            pool.gradient(params[:5])
    assert mp.active_children() == []


def test_measure_parallel_speedup_fields():
    w = GradientWorkload(hidden=(16,), batch_size=64, epochs=1)
    m = measure_parallel_speedup([1, 2], workload=w, repeat=2, start_method=FAST)
    assert m.processes.tolist() == [1, 2] and m.seconds.shape == (2,)
    assert len(m.pairs) == 2 and all(len(p) == 2 for p in m.pairs)
    for k, pairs in enumerate(m.pairs):  # speedup = median of per-pair ratios (2 pairs: mean)
        assert m.speedup[k] == pytest.approx(np.mean([a / b for a, b in pairs]))
        assert m.seconds[k] == pytest.approx(np.median([b for _, b in pairs]))
    np.testing.assert_allclose(m.efficiency, m.speedup / np.array([1, 2]))
    assert m.serial_seconds == pytest.approx(np.median([a for p in m.pairs for a, _ in p]))
    assert m.max_abs_difference < 1e-5
    assert m.cores == available_cores() and m.start_method == FAST
    table = m.table().splitlines()
    assert len(table) == 5 and table[1].startswith("ser") and "Tser/T(N)" in table[0]
    np.testing.assert_allclose(m.speedup_of_medians, m.serial_seconds / m.seconds)
    for row, by_def, paired in zip(table[2:4], m.speedup_of_medians, m.speedup, strict=True):
        assert row.split()[2:4] == [f"{by_def:.2f}", f"{paired:.2f}"]  # both statistics, named
    assert mp.active_children() == []


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(processes=[]), ValueError, "at least one"),
        (dict(processes=[0]), ValueError, "processes must be an integer in"),
        (dict(repeat=0), ValueError, "repeat must be an integer in"),
        (dict(workload=(64, 10)), TypeError, "workload must be a GradientWorkload"),
        (dict(start_method="threads"), ValueError, "start_method must be one of"),
    ],
)
def test_measure_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        measure_parallel_speedup(**kwargs)


def test_default_process_counts():
    assert default_process_counts(1) == [1]
    assert default_process_counts(8) == list(range(1, 9))
    assert default_process_counts(64) == [1, 2, 4, 8, 16, 32, 64]
    assert default_process_counts()[-1] == available_cores()


def test_workload_flop_count():
    w = GradientWorkload(hidden=(32,), epochs=3)
    per_sample = MLP((64, 32, 10)).flops_per_sample()["total"]
    assert w.flops_per_run() == 3 * 1438 * per_sample
