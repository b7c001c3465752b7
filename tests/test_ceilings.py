"""The fair baseline and the ceilings of issue 37: the serial reference run in a worker process,
the independent copies of one worker's step, the pool's timed workers, the barrier log's
breakdown and the counts load cannot change (CPU seconds, page faults, steal)."""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

from course_lib.datasets import load_digits
from course_lib.models import MLP
from course_lib.parallel.train.ceiling import (
    measure_barrier,
    run_copies,
    serial_in_worker,
    sync_breakdown,
)
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.reference import train_serial
from course_lib.parallel.train.speedup import GradientWorkload, WorkerPool, measure_parallel_speedup
from course_lib.timing import CpuTicks, cpu_ticks, minor_faults, pin_to_core

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean

MODEL = MLP((8, 16, 3))
RNG = np.random.default_rng(0)
X = RNG.random((96, 8), dtype=np.float32)
Y = RNG.integers(0, 3, 96)
KW = dict(batch_size=24, steps=4, lr=0.1, seed=1)


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_the_serial_reference_in_a_worker_is_train_serial_bit_for_bit(method, no_leaks):
    here = train_serial(MODEL, X, Y, **KW)
    inside = serial_in_worker(MODEL, X, Y, start_method=method, **KW)
    assert np.array_equal(inside.params, here.params) and np.array_equal(inside.loss, here.loss)
    assert inside.backend == "serial" and inside.steps == KW["steps"]
    start = MODEL.init_params(5)  # given parameters travel through shared memory
    assert np.array_equal(serial_in_worker(MODEL, X, Y, params=start, start_method="fork", **KW).params,
                          train_serial(MODEL, X, Y, params=start, **KW).params)
    assert mp.active_children() == []


def test_every_run_counts_cpu_seconds_and_page_faults():
    serial = train_serial(MODEL, X, Y, **KW)
    parallel = train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", progress=False, **KW)
    for run, workers in ((serial, 1), (parallel, 2)):
        assert run.extra["cpu_time"].shape == run.extra["minor_faults"].shape == (KW["steps"], workers)
        assert np.all(run.extra["cpu_time"] >= 0) and np.all(run.extra["minor_faults"] >= 0)
        assert run.extra["cpu_time"].sum() > 0


@pytest.mark.parametrize("kind", ["data", "tensor"])
def test_copies_run_one_workers_step_side_by_side_exchanging_nothing(kind, no_leaks):
    c = run_copies(MODEL, X, Y, workers=3, kind=kind, start_method="fork", progress=False, **KW)
    assert c.backend == "copies" and c.workers == 3 and c.compute.shape == (KW["steps"], 3)
    assert float(c.communication.sum()) == float(c.waiting.sum()) == 0.0 and not c.bytes_per_step.any()
    np.testing.assert_allclose(c.step_time, c.compute.mean(axis=1))  # independent: the mean, not the slowest
    assert np.array_equal(c.params, MODEL.init_params(KW["seed"]))  # no trained replica to return
    with pytest.raises(ValueError, match="kind must be"):
        run_copies(MODEL, X, Y, workers=2, kind="pipeline", **KW)


def test_one_copy_does_the_one_workers_arithmetic_without_the_sum():
    """A copy's steps are worker_loop's: with one worker the all-reduce is the identity, so
    one copy trains exactly as one data-parallel worker."""
    one = train_data_parallel(MODEL, X, Y, workers=1, start_method="fork", progress=False, **KW)
    copy = run_copies(MODEL, X, Y, workers=1, start_method="fork", progress=False, **KW)
    np.testing.assert_allclose(copy.loss, one.loss * KW["batch_size"], rtol=1e-6)  # shard sums, not means


def test_sync_breakdown_adds_up_to_the_step():
    run = train_data_parallel(MODEL, X, Y, workers=3, start_method="fork", progress=False, log_barriers=True,
                              **{**KW, "steps": 6})
    keys = ("work", "straggler", "b1_latency", "reduce_scatter", "rs_imbalance", "b2_latency")
    steps = sync_breakdown(run, per_step=True)
    assert all(v.shape == (6,) for v in steps.values())
    # every step; atol 1 ns: the parts are differences of clock readings of about 1e4 s, each exact to ~1e-12 s
    np.testing.assert_allclose(sum(steps[k] for k in keys), steps["step"], rtol=1e-9, atol=1e-9)
    assert all(np.all(steps[k] >= -1e-9) for k in (*keys, "straggler_max"))  # nobody leaves before the last arrives
    parts = sync_breakdown(run)
    assert set(parts) == {*keys, "step", "straggler_max", "rs_gbytes_per_s"} and parts["rs_gbytes_per_s"] > 0
    with pytest.raises(ValueError, match="log_barriers=True"):
        sync_breakdown(train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", progress=False, **KW))
    with pytest.raises(ValueError, match="two waits per step"):
        sync_breakdown(train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", progress=False, buckets=2,
                                           log_barriers=True, **KW))


def test_a_barrier_alone_takes_a_positive_time(no_leaks):
    assert 0 < measure_barrier(2, "pipe", waits=30, start_method="fork") < 1
    assert 0 < measure_barrier(1, "pipe", waits=5, pin_workers=True, start_method="fork") < 1


@pytest.mark.parametrize("reply", ["pipe", "shared"])
def test_pool_workers_time_their_work_and_may_answer_through_shared_memory(reply, no_leaks):
    data = load_digits("train")
    model = MLP((64, 12, 10))
    params = model.init_params(1)
    with WorkerPool(model, data.x[:200], data.y[:200], 1, batch_size=16, start_method="fork") as one:
        _, whole = one.gradient(params)
    with WorkerPool(model, data.x[:200], data.y[:200], 3, batch_size=16, start_method="fork", reply=reply) as pool:
        loss, grad = pool.gradient(params)
        assert len(pool.compute_seconds) == 3 and all(t > 0 for t in pool.compute_seconds)
        _, again = pool.gradient(params)  # the shared rows are read, never handed out
    np.testing.assert_allclose(grad, whole, rtol=1e-5, atol=1e-6)
    assert np.array_equal(grad, again) and grad.dtype == np.float64
    with pytest.raises(ValueError, match="reply must be"):
        WorkerPool(model, data.x[:20], data.y[:20], 1, reply="socket")


def test_the_pool_measurement_reports_its_ceilings():
    m = measure_parallel_speedup([1, 2], workload=GradientWorkload(hidden=(16,), epochs=1), repeat=2,
                                 start_method="fork", reply="shared")
    assert m.ceiling.shape == (2,) and np.all(m.ceiling > 0) and m.reply == "shared"
    assert m.max_abs_difference < 1e-5


def test_counts_that_load_cannot_change():
    before = minor_faults()
    block = np.ones(4 << 20, dtype=np.uint8)  # 4 MiB touched: new pages
    assert minor_faults() > before and block.sum() == 4 << 20
    a, b = cpu_ticks(), cpu_ticks()
    assert isinstance(a, CpuTicks) and len(a.cpus) == len(a.steal)
    mean, worst = b.steal_since(a)
    if sys_has_proc_stat():
        assert len(a.cpus) >= 1 and (np.isnan(mean) or 0 <= mean <= worst <= 1)
    empty = CpuTicks((), (), (), ())
    assert all(np.isnan(v) for v in empty.steal_since(empty))
    steal = CpuTicks((0, 1), (100, 100), (0, 0), (0, 0)).steal_since(CpuTicks((0, 1), (0, 50), (0, 0), (0, 0)))
    assert steal == (0.0, 0.0)
    half = CpuTicks((0,), (50,), (0,), (50,)).steal_since(CpuTicks((0,), (0,), (0,), (0,)))
    assert half == (0.5, 0.5)


def sys_has_proc_stat() -> bool:
    return os.path.exists("/proc/stat")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_pin_to_core_pins_a_process(no_leaks):
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        core, allowed = pool.apply(_pin_and_report, (len(os.sched_getaffinity(0)) + 1,))
    cores = sorted(os.sched_getaffinity(0))
    assert core == cores[(len(cores) + 1) % len(cores)] and allowed == [core]


def _pin_and_report(index: int):
    core = pin_to_core(index)
    return core, sorted(os.sched_getaffinity(0))
