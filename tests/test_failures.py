"""The arithmetic of failures at scale (course_lib.failures), its data (Llama 3's interruptions,
data/failure_records.csv), the measured experiments (course_lib.parallel.train.restarts) and the
straggler fault."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import failures as fl
from course_lib.datasets import FailureRecord, load_failure_records
from course_lib.models import MLP
from course_lib.parallel.engine.errors import Fault
from course_lib.parallel.train import restarts
from course_lib.parallel.train.data import train_data_parallel

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits

DATA = Path(__file__).resolve().parent.parent / "data"


# ------------------------------------------------------------------ the data
def test_llama3_row_is_the_papers():
    with pytest.raises(ValueError, match="run must be one of"):
        fl.failure_record("GPT-5")
    row = fl.failure_record()
    assert (row.gpus, row.days, row.unexpected_interruptions, row.planned_interruptions) == (16384, 54.0, 419, 47)
    assert "arXiv:2407.21783" in row.source and "3.3.4" in row.source


def test_failure_records_schema_and_loader_agree():
    package = json.loads((DATA / "datapackage.json").read_text(encoding="utf-8"))
    fields = next(r for r in package["resources"] if r["name"] == "failure_records")["schema"]["fields"]
    assert [f["name"] for f in fields] == [f.name for f in dataclasses.fields(FailureRecord)]
    for schema_field, record_field in zip(fields, dataclasses.fields(FailureRecord), strict=True):
        assert ("None" in str(record_field.type)) == (not schema_field["constraints"]["required"])
    assert len(load_failure_records()) >= 1


def test_llama3_scaled_to_a_month():
    """The chapter's figures: about 3.1 hours between failures on 16,384 GPUs, some 230 in a month."""
    row = fl.failure_record()
    per_gpu = fl.device_mtbf(row.unexpected_interruptions, row.gpus, row.days * 24)
    assert per_gpu == pytest.approx(16384 * 54 * 24 / 419)
    assert fl.cluster_mtbf(per_gpu, row.gpus) == pytest.approx(54 * 24 / 419)
    assert fl.expected_failures(row.gpus, 30 * 24, per_gpu) == pytest.approx(419 * 30 / 54)
    assert fl.expected_failures(row.gpus // 2, 30 * 24, per_gpu) == pytest.approx(419 * 15 / 54)


# ------------------------------------------------------------------ the formulas
def test_young_daly_minimises_the_first_order_waste():
    t, m = 0.5, 200.0
    best = fl.young_daly_interval(t, m)
    assert best == pytest.approx(math.sqrt(2 * t * m))
    grid = np.linspace(best / 3, 3 * best, 2001)
    waste = [fl.wasted_share(d, t, m) for d in grid]
    assert grid[int(np.argmin(waste))] == pytest.approx(best, rel=2e-3)
    assert fl.wasted_share(best, t, m) == pytest.approx(math.sqrt(2 * t / m))


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-4, 10.0), st.floats(20.0, 1e5), st.floats(0.0, 100.0))
def test_the_exact_optimum_is_the_goodputs_and_near_daly(save, mtbf, restart):
    best = fl.best_interval(save, mtbf)
    g = fl.goodput(best, save, mtbf, restart)
    for f in (0.97, 1.03):
        assert fl.goodput(best * f, save, mtbf, restart) <= g * (1 + 1e-12)
    assert fl.daly_interval(save, mtbf) == pytest.approx(best, rel=1e-2)  # Daly's estimate: 0.6 % at t = M / 2
    yd = fl.young_daly_interval(save, mtbf)
    assert abs(best / yd - 1) <= 2 * math.sqrt(save / mtbf) + 1e-9  # first order: off by O(sqrt(t/M))


def test_goodput_limits():
    assert fl.goodput(10.0, 1.0, 1e12) == pytest.approx(10 / 11)  # no failures: the checkpoints cost
    assert fl.goodput(10.0, 0.0, 100.0) < 1  # failures without checkpoint cost: lost work
    assert fl.goodput(10.0, 1.0, 100.0, restart_time=10.0) == pytest.approx(
        fl.goodput(10.0, 1.0, 100.0) * math.exp(-0.1))  # a restart scales it, whatever the interval
    assert fl.daly_interval(300.0, 100.0) == 100.0  # t >= 2M: checkpoint once per MTBF


def test_lost_hours_and_straggler():
    assert fl.lost_hours(100.0, 1000, 10_000.0, 2.0, 0.5) == pytest.approx(10 * 1.5)
    assert fl.straggler_efficiency(0.01, 0.0) == 1.0
    assert fl.straggler_efficiency(0.01, 0.01) == 0.5


@pytest.mark.parametrize(("call", "words"), [
    (lambda: fl.young_daly_interval(0, 10), "save_time"),
    (lambda: fl.young_daly_interval(1, -10), "mtbf"),
    (lambda: fl.device_mtbf(0, 10, 5), "failures"),
    (lambda: fl.cluster_mtbf(10.0, 0), "devices"),
    (lambda: fl.goodput(1.0, 1.0, float("nan")), "mtbf"),
    (lambda: fl.straggler_efficiency(0.0, 1.0), "step_time"),
])
def test_bad_arguments_name_themselves(call, words):
    with pytest.raises((ValueError, TypeError), match=words):
        call()


# ------------------------------------------------------------------ the straggler fault
def test_a_slow_fault_is_checked():
    with pytest.raises(ValueError, match="seconds"):
        Fault("slow", rank=0)
    with pytest.raises(ValueError, match="seconds is for kind 'slow' only"):
        Fault("kill", rank=0, seconds=1.0)
    with pytest.raises(ValueError, match="point must be None or one of"):
        Fault("kill", point="somewhere")
    with pytest.raises(ValueError, match="after is for kind 'kill'"):
        Fault("hang", after=1.0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")
def test_one_slow_worker_sets_every_steps_pace(clean):
    rng = np.random.default_rng(0)
    x, y = rng.random((48, 8)), rng.integers(0, 3, 48)
    kw = dict(workers=2, batch_size=16, steps=6, progress=False, start_method="fork")
    plain = train_data_parallel(MLP((8, 16, 3)), x, y, **kw)
    slow = train_data_parallel(MLP((8, 16, 3)), x, y, fault=Fault("slow", rank=1, step=2, seconds=0.1), **kw)
    assert np.array_equal(plain.params, slow.params)  # a straggler changes the time, not the arithmetic
    # steps 2-5 wait for the sleeping worker: 4 x 100 ms in all. Lower bounds only (a sleep never
    # ends early; a loaded machine can only add time), and the waiting is worker 0's: it waits for
    # worker 1 at every step from step 2 on, unless it was itself held up for as long
    assert slow.step_time[2:].sum() >= 0.9 * 4 * 0.1
    assert slow.waiting[2:, 0].sum() >= 0.5 * 4 * 0.1


# ------------------------------------------------------------------ the measured experiments
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")
def test_a_job_through_failures_ends_with_the_uninterrupted_parameters(clean):
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 8)), rng.integers(0, 3, 64)
    model = MLP((8, 16, 3), dtype=np.float64)
    kw = dict(batch_size=16, progress=False, start_method="fork")
    plain = train_data_parallel(model, x, y, workers=2, steps=200, **kw)
    # seed 1: the first failure 31 ms into the first attempt, the next one half a second into the second
    job = restarts.run_with_failures(model, x, y, steps=200, checkpoint_every=20, mtbf=0.1, seed=1,
                                     checkpoint_store="memory", **kw)
    assert job.failure_times[0] == pytest.approx(0.031, abs=1e-3)
    assert job.failures >= 1 and len(job.attempt_times) == job.failures + 1
    assert np.array_equal(job.params, plain.params)
    assert job.run_time <= job.wall_time and job.goodput >= job.wall_goodput
    parts = job.breakdown()
    assert set(parts) == {"useful", "checkpoints", "lost", "restarts"} and parts["useful"] > 0
    with pytest.raises(TypeError, match="draws its own faults"):
        restarts.run_with_failures(model, x, y, steps=10, checkpoint_every=5, mtbf=1.0, fault=Fault("kill"))
    with pytest.raises(ValueError, match="mtbf"):
        restarts.run_with_failures(model, x, y, steps=10, checkpoint_every=5, mtbf=0.0)


def _run(every: int, run_time: float) -> restarts.FailureRun:
    return restarts.FailureRun(1000, every, 1.0, run_time + 1.0, run_time, (run_time + 1.0,), (None,), (9.9,), 1,
                               np.zeros(1), 0.001, 0.001)


def test_the_measured_best_interval_is_the_top_of_the_parabola():
    every = [10, 20, 40, 80, 160]
    # goodput = 1000 / run_time peaks at 40 steps: run times symmetric in log(every) around it
    curve = restarts.GoodputCurve(tuple(_run(k, 2.0 + 0.3 * math.log(k / 40) ** 2) for k in every), 0.5, 0.001,
                                  0.001)
    assert curve.best_interval == pytest.approx(0.040, rel=0.02)
    assert curve.young_daly == pytest.approx(math.sqrt(2 * 0.001 * 0.5))
    assert curve.agrees == (abs(curve.best_interval / curve.young_daly - 1) <= 0.3)
    assert "Young-Daly" in str(curve) and "every" in curve.table()
    rising = restarts.GoodputCurve(tuple(_run(k, 5.0 / k) for k in every), 0.5, 0.001, 0.001)
    assert rising.best_interval == pytest.approx(0.160)  # no top inside: the best point


def test_the_plan_puts_young_daly_in_the_middle():
    plan = restarts.plan_goodput(0.002, 0.0005, ratio=40, failures=10)
    assert plan.mtbf == pytest.approx(0.08)
    assert plan.intervals[2] == round(fl.young_daly_interval(0.002, 0.08) / 0.0005)
    assert plan.steps == round(10 * 0.08 / 0.0005)
    assert restarts.plan_goodput(0.002, 0.0005).steps == round(16 * 0.08 / 0.0005)  # 16 failures by default
    assert "Young-Daly" in str(plan)


def test_sixteen_failures_per_interval_find_young_daly_nineteen_times_in_twenty():
    """The statistics behind plan_goodput's default: a simulation of the experiment (same grid,
    failures drawn per attempt, 16 MTBFs of work per interval) puts the top of the parabola within
    30 % of Young and Daly's interval in about 19 runs of 20 (at least 9 in 10 here)."""
    save, mtbf = 0.002, 0.08
    best = fl.young_daly_interval(save, mtbf)
    grid = [best * f for f in (0.25, 0.5, 1, 2, 4)]
    hits = 0
    for seed in range(100):
        goodput = [fl.simulate_goodput(d, save, mtbf, 16 * mtbf, seed=seed) for d in grid]
        hits += abs(fl.parabola_top(grid, goodput) / best - 1) <= 0.3
    assert hits >= 90
    with pytest.raises(ValueError, match="x and y"):
        fl.parabola_top([1.0, 2.0], [1.0])
