"""course_lib.parallel.train.pipeline.train_pipeline (and with data replicas: hybrid): stage processes equal the serial run.

Tolerances: the pipeline's parameters are BITWISE equal to ``train_microbatched`` run with
one BLAS thread like the stages (the same arithmetic in one process: micro-batch gradients
summed in micro-batch order). Against ``train_serial`` (one full-batch gradient per step,
also with one BLAS thread) they differ only by float32 rounding of that different
summation order: max |diff| <= 1e-6 (observed about 1.2e-7 for parameters of magnitude
about 1). The serial runs use one BLAS thread because a multi-threaded BLAS sums in yet
another order (seen: 1e-5 on a wider model).
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from data_support import first_digits

from course_lib import schedule as mp
from course_lib.models import MLP
from course_lib.parallel.partition import micro_rows
from course_lib.parallel.train import pipeline as mp_run
from course_lib.parallel.train import reference
from course_lib.parallel.train.reference import train_serial
from course_lib.timing import blas_threads

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits

MODEL = MLP((64, 24, 20, 16, 10))  # 4 layers: room for S = 2, 3 and uneven splits
RUN = dict(batch_size=50, steps=6, lr=0.2, seed=3)


@functools.cache
def _pipeline(schedule: str, **split):
    """A pipeline run on the 300 digits (RUN, 4 micro-batches), made once per test process:
    the timeline test reads the run of test_pipeline_equals_serial[S=3-1f1b]."""
    return mp_run.train_pipeline(MODEL, *first_digits(), micro_batches=4, schedule=schedule, **split, **RUN)


def _reference(x, y, micro_batches):
    with blas_threads(1):
        return reference.train_microbatched(MODEL, x, y, micro_batches=micro_batches, **RUN)


@pytest.mark.parametrize("schedule", mp.SCHEDULES)
@pytest.mark.parametrize(
    "split",
    [dict(stages=2), dict(stages=3), dict(boundaries=(0, 3, 4)), dict(boundaries=(0, 1, 2, 4))],
    ids=["S=2", "S=3", "uneven 3+1", "uneven 1+1+2"],
)
def test_pipeline_equals_serial(digits, split, schedule, no_leaks):
    x, y = digits
    res = _pipeline(schedule, **split)
    ref = _reference(x, y, 4)
    assert np.array_equal(res.params, ref.params)  # bitwise
    with blas_threads(1):
        serial = train_serial(MODEL, x[: 6 * 50], y[: 6 * 50], epochs=1, batch_size=50, lr=0.2, seed=3)
    # the 300 samples make exactly 6 steps of 50, the same batches as RUN's steps=6
    np.testing.assert_allclose(res.params, serial.params, rtol=0, atol=1e-6)
    np.testing.assert_allclose(res.loss, serial.loss, rtol=1e-5)
    assert not np.array_equal(res.params, MODEL.init_params(3))  # it did train
    assert len(res.boundaries) - 1 == split.get("stages", len(split.get("boundaries", ())) - 1)


def test_uneven_micro_batches_and_short_last_batch(digits, no_leaks):
    x, y = digits
    # 290 samples, batch 64: four batches of 64 and one of 34; 64 / 5 is uneven
    kw = dict(batch_size=64, epochs=1, lr=0.1, seed=0)
    res = mp_run.train_pipeline(MODEL, x[:290], y[:290], stages=2, micro_batches=5, **kw)
    with blas_threads(1):
        ref = reference.train_microbatched(MODEL, x[:290], y[:290], micro_batches=5, **kw)
        serial = train_serial(MODEL, x[:290], y[:290], epochs=1, batch_size=64, lr=0.1)
    assert np.array_equal(res.params, ref.params)
    np.testing.assert_allclose(res.params, serial.params, rtol=0, atol=1e-6)
    assert micro_rows(34, 5) == [(0, 7), (7, 14), (14, 21), (21, 28), (28, 34)]
    assert micro_rows(3, 5) == [(0, 1), (1, 2), (2, 3)]


def test_one_stage_is_gradient_accumulation(digits, no_leaks):
    x, y = digits
    res = mp_run.train_pipeline(MODEL, x, y, stages=1, micro_batches=3, **RUN)
    assert np.array_equal(res.params, _reference(x, y, 3).params)
    for k in res.timeline.steps:  # one stage waits for nobody: its operations, one after another
        ops = sorted((o for o in res.timeline.ops if o.step == k), key=lambda o: o.start)
        assert [(o.kind, o.micro) for o in ops[:-1]] == mp.schedule_order(1, 3, "gpipe")[0]
        assert ops[-1].kind == "U" and all(a.end <= b.start for a, b in zip(ops, ops[1:]))


def test_measured_timeline_is_causal_and_complete(no_leaks):
    res = _pipeline("1f1b", stages=3)
    tl = res.timeline
    assert tl.source == "measured" and tl.steps == tuple(range(6))
    for k in tl.steps:
        ops = {(o.kind, o.stage, o.micro): o for o in tl.ops if o.step == k}
        assert len(ops) == 3 * (2 * 4 + 1)  # forwards, backwards, one update per stage
        for s in range(3):
            mine = sorted((o for o in tl.ops if o.step == k and o.stage == s), key=lambda o: o.start)
            assert [(o.kind, o.micro) for o in mine[:-1]] == mp.schedule_order(3, 4, "1f1b")[s]
            assert mine[-1].kind == "U"
            assert all(a.end <= b.start for a, b in zip(mine, mine[1:]))
            for m in range(4):
                if s > 0:  # a stage starts a forward only after its input was produced
                    assert ops[("F", s, m)].start >= ops[("F", s - 1, m)].end
                if s < 2:
                    assert ops[("B", s, m)].start >= ops[("B", s + 1, m)].end
    bubbles = res.bubble_per_step()
    assert bubbles.shape == (6,) and np.all((bubbles >= 0) & (bubbles < 1))
    # the result's times come from the same operations: a step from its first forward to its
    # last update, a stage's compute its forwards, backwards and update, the rest waiting
    for k in tl.steps:
        ops = [o for o in tl.ops if o.step == k]
        assert res.step_time[k] == max(o.end for o in ops) - min(o.start for o in ops)
        for s in range(3):
            assert res.compute[k, s] == pytest.approx(sum(o.duration for o in ops if o.stage == s), rel=1e-12)
    assert res.compute.shape == res.waiting.shape == (6, 3) and np.all(res.communication == 0)
    np.testing.assert_allclose(res.compute + res.waiting, np.repeat(res.step_time[:, None], 3, axis=1))
    assert res.backend == "pipeline" and res.workers == 3 and res.breakdown()["step"] == res.time_per_step()
    f, b = res.stage_costs()
    assert f.shape == b.shape == (3,) and np.all(f > 0) and np.all(b > 0)
    # the simulator fed with the measured costs gives a valid prediction of the same kind
    sim = mp.simulate_pipeline(f, b, micro_batches=4, schedule="1f1b")
    assert 0 < sim.bubble() < 1


@pytest.mark.parametrize("data, stages", [(2, 2), (2, 1), (3, 2)], ids=["2x2", "2x1", "3x2"])
def test_hybrid_equals_serial(digits, data, stages, no_leaks):
    x, y = digits
    res = mp_run.train_pipeline(MODEL, x, y, data=data, stages=stages, micro_batches=2, schedule="1f1b", **RUN)
    with blas_threads(1):
        ref = reference.train_microbatched(MODEL, x, y, data=data, micro_batches=2, **RUN)
    assert res.replicas_in_sync and res.replicas == data
    assert np.array_equal(res.params, ref.params)
    with blas_threads(1):
        serial = train_serial(MODEL, x, y, epochs=1, batch_size=50, lr=0.2, seed=3)
    np.testing.assert_allclose(res.params, serial.params, rtol=0, atol=1e-6)
    np.testing.assert_allclose(res.loss, serial.loss, rtol=1e-5)
    tl = res.timeline
    assert tl.replicas == data and tl.n_rows == data * stages
    assert {o.replica for o in tl.ops} == set(range(data))
    kinds = {o.kind for o in tl.ops}
    assert kinds == {"F", "B", "A", "U"}
    # every process's all-reduces are its communication; compute + communication + waiting = the step
    assert res.workers == data * stages and res.communication.shape == (6, data * stages)
    for o in (o for o in tl.ops if o.kind == "A" and o.step == 1):
        assert res.communication[1, o.replica * stages + o.stage] == pytest.approx(o.duration, rel=1e-12)
    np.testing.assert_allclose(res.compute + res.communication + res.waiting,
                               np.repeat(res.step_time[:, None], data * stages, axis=1))
    # every replica's all-reduce of a step ends after the last backward of every replica
    for k in tl.steps:
        ops = [o for o in tl.ops if o.step == k]
        last_b = {(o.stage): max(p.end for p in ops if p.kind == "B" and p.stage == o.stage) for o in ops}
        for o in ops:
            if o.kind == "U":
                assert o.start >= last_b[o.stage]


def test_hybrid_rejects_batches_smaller_than_the_replicas(digits):
    x, y = digits
    with pytest.raises(ValueError, match="data"):
        mp_run.train_pipeline(MODEL, x[:52], y[:52], data=3, batch_size=50, epochs=1)  # last batch: 2
    with pytest.raises(ValueError, match="micro_batches"):
        mp_run.train_pipeline(MODEL, x, y, data=2, micro_batches=26, batch_size=50, steps=1)
    with pytest.raises(ValueError, match="data"):
        mp_run.train_pipeline(MODEL, x, y, data=0, steps=1)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_repeated_runs_close_every_pipe(digits, no_leaks):
    x, y = digits
    kw = dict(stages=3, micro_batches=2, batch_size=50, steps=1)
    mp_run.train_pipeline(MODEL, x, y, **kw)  # first run may start the forkserver (kept)
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        mp_run.train_pipeline(MODEL, x, y, **kw)
    assert len(os.listdir("/proc/self/fd")) == fds


@pytest.mark.slow
def test_spawn_start_method(digits, no_leaks):
    x, y = digits
    res = mp_run.train_pipeline(MODEL, x, y, stages=2, micro_batches=2, start_method="spawn", **RUN)
    assert np.array_equal(res.params, _reference(x, y, 2).params)


def test_train_microbatched_with_one_micro_batch_is_train_serial(digits):
    x, y = digits
    with blas_threads(1):
        a = reference.train_microbatched(MODEL, x, y, micro_batches=1, batch_size=32, epochs=2, lr=0.1)
        b = train_serial(MODEL, x, y, batch_size=32, epochs=2, lr=0.1)
    assert np.array_equal(a.params, b.params)
    np.testing.assert_allclose(a.loss, b.loss, rtol=1e-6)
    with pytest.raises(ValueError, match="no timeline"):
        a.bubble_per_step()
    # the serial baseline for the parallel runs' step times: one wall time per step
    assert a.step_time.shape == a.loss.shape == (a.steps,) and np.all(a.step_time > 0)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(stages=5), ValueError, "stages"),
        (dict(stages=2, boundaries=(0, 1, 2, 4)), ValueError, "does not match"),
        (dict(boundaries=(0, 2, 2, 4)), ValueError, "boundaries"),
        (dict(micro_batches=51), ValueError, "micro_batches"),
        (dict(schedule="interleaved"), ValueError, "schedule"),
        (dict(lr=float("nan")), ValueError, "lr"),
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(timeout=0), ValueError, "timeout"),
        (dict(fault="hang"), TypeError, "fault"),
        (dict(start_method="thread"), ValueError, "start_method"),
        (dict(stages=2.0), TypeError, "stages"),
    ],
)
def test_bad_arguments_name_the_parameter(digits, kwargs, error, match, no_leaks):
    x, y = digits
    args = {**RUN, **kwargs}
    with pytest.raises(error, match=match):
        mp_run.train_pipeline(MODEL, x, y, **args)


def test_bad_data_rejected(digits):
    x, y = digits
    with pytest.raises(ValueError, match="x must have shape"):
        mp_run.train_pipeline(MODEL, x[:, :10], y, steps=1)
    with pytest.raises(ValueError, match="y must"):
        mp_run.train_pipeline(MODEL, x, y[:-1], steps=1)
    with pytest.raises(TypeError, match="model"):
        mp_run.train_pipeline("mlp", x, y, steps=1)
