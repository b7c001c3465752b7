"""Activation recomputation (激活重计算) in course_lib.parallel.pipeline: same result, less memory.

With ``recompute=True`` a stage stores only the input of every micro-batch in flight and
re-runs its forward at the start of the backward. The forward is the same sequence of
float32 operations, so the parameters must be BITWISE equal to ``recompute=False`` (and to
the serial reference ``train_microbatched``, which the pipeline equals bitwise with one
BLAS thread, see test_model_parallel.py).

The stored bytes are derived by hand: every batch has 50 rows (300 samples, batch 50,
6 steps), so a micro-batch has ``50 / M`` rows of float32 (4 bytes). Stage ``s`` owning
layers ``[lo, hi)`` stores per micro-batch ``rows x sizes[lo] x 4`` bytes with
recomputation, ``rows x (sizes[lo] + ... + sizes[hi]) x 4`` without. It holds ``M``
micro-batches at once under GPipe (all forwards before the first backward) and
``min(S - s, M)`` under 1F1B (``min(S - s - 1, M)`` warm-up forwards, then one more
forward before each backward).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from data_support import first_digits

from course_lib import schedule as mp
from course_lib.datasets import load_digits
from course_lib.models import MLP, TrainResult
from course_lib.parallel.train import pipeline as mp_run
from course_lib.parallel.train import reference
from course_lib.parallel.train.pipeline import RecomputeOverhead, recompute_overhead
from course_lib.timing import blas_threads

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits

MODEL = MLP((64, 24, 20, 16, 10))
RUN = dict(batch_size=50, steps=6, lr=0.2, seed=3)
F32 = 4  # bytes per value


@functools.cache
def _serial(micro_batches: int, recompute: bool, data: int = 1) -> TrainResult:
    with blas_threads(1):
        return reference.train_microbatched(
            MODEL, *first_digits(), micro_batches=micro_batches, data=data, recompute=recompute, **RUN
        )


@functools.cache
def _pipeline(boundaries, micro_batches: int, schedule: str, recompute: bool) -> TrainResult:
    """One pipeline run on the 300 digits (RUN), made once per test process: the
    hand-derived test reads the same three runs as the parametrized S = 2, M = 5 cases."""
    return mp_run.train_pipeline(MODEL, *first_digits(), boundaries=boundaries, micro_batches=micro_batches,
                                 schedule=schedule, recompute=recompute, **RUN)


def _expected_bytes(boundaries, micro_batches, schedule, recompute, batch=50):
    """Hand-derived peak stored bytes of every stage (see the module docstring)."""
    n_stages = len(boundaries) - 1
    rows = batch // micro_batches
    out = []
    for s, (lo, hi) in enumerate(zip(boundaries[:-1], boundaries[1:])):
        width = MODEL.sizes[lo] if recompute else sum(MODEL.sizes[lo : hi + 1])
        in_flight = micro_batches if schedule == "gpipe" else min(n_stages - s, micro_batches)
        out.append(rows * width * F32 * in_flight)
    return out


CASES = [((0, 2, 4), 5), ((0, 1, 2, 4), 2), ((0, 1, 2, 3, 4), 5)]


@pytest.mark.parametrize("schedule", mp.SCHEDULES)
@pytest.mark.parametrize("boundaries, micro_batches", CASES, ids=["S=2 M=5", "S=3 M=2", "S=4 M=5"])
def test_recompute_is_bitwise_equal_and_stores_only_inputs(boundaries, micro_batches, schedule, no_leaks):
    plain = _pipeline(boundaries, micro_batches, schedule, False)
    redo = _pipeline(boundaries, micro_batches, schedule, True)
    ref = _serial(micro_batches, False)
    assert not plain.recompute and redo.recompute
    assert np.array_equal(redo.params, plain.params)  # bitwise
    assert np.array_equal(redo.params, ref.params)
    assert np.array_equal(_serial(micro_batches, True).params, ref.params)
    assert np.array_equal(redo.loss, plain.loss) and np.array_equal(plain.loss, ref.loss)
    assert not np.array_equal(redo.params, MODEL.init_params(3))  # it did train

    n_stages = len(boundaries) - 1
    assert plain.stored_activation_bytes.tolist() == _expected_bytes(boundaries, micro_batches, schedule, False)
    assert redo.stored_activation_bytes.tolist() == _expected_bytes(boundaries, micro_batches, schedule, True)
    assert plain.recompute_time.shape == redo.recompute_time.shape == (6, n_stages)
    assert np.all(plain.recompute_time == 0)
    assert np.all(redo.recompute_time > 0)
    # the recomputation happens inside the backwards: their measured time includes it
    for k in range(6):
        for s in range(n_stages):
            backward = sum(o.duration for o in redo.timeline.ops if o.step == k and o.stage == s and o.kind == "B")
            assert 0 < redo.recompute_time[k, s] < backward


def test_hand_derived_bytes_of_two_stages(no_leaks):
    """S = 2 (layers 0-1 | 2-3), M = 5 micro-batches of 10 rows, the figures written out."""
    gpipe = _pipeline((0, 2, 4), 5, "gpipe", True)
    plain = _pipeline((0, 2, 4), 5, "gpipe", False)
    one_f_one_b = _pipeline((0, 2, 4), 5, "1f1b", True)
    # GPipe, all 5 micro-batches held: 5 x 10 rows x 64 (stage 0) or 20 (stage 1) x 4 B
    assert gpipe.stored_activation_bytes.tolist() == [12_800, 4_000]
    # without: stage 0 keeps 64 + 24 + 20 values a row, stage 1 20 + 16 + 10
    assert plain.stored_activation_bytes.tolist() == [50 * 108 * 4, 50 * 46 * 4] == [21_600, 9_200]
    # 1F1B: stage 0 holds 2 micro-batches, stage 1 one
    assert one_f_one_b.stored_activation_bytes.tolist() == [2 * 10 * 64 * 4, 10 * 20 * 4] == [5_120, 800]
    o = recompute_overhead(plain, gpipe)
    assert o.memory_saved == pytest.approx(1 - 64 / 108, rel=1e-12)  # the fullest stage: stage 0
    assert o.extra_compute > 0
    assert o.compute_increase > -1
    assert str(o).startswith("recomputation cost ") and f"saved {100 * (1 - 64 / 108):.1f} %" in str(o)


@pytest.mark.parametrize(
    "start_method", ["fork", "forkserver", pytest.param("spawn", marks=pytest.mark.slow)]
)
@pytest.mark.parametrize("schedule", mp.SCHEDULES)
def test_recompute_under_every_start_method(digits, start_method, schedule, no_leaks):
    x, y = digits
    res = mp_run.train_pipeline(MODEL, x, y, boundaries=(0, 1, 2, 4), micro_batches=2, schedule=schedule,
                                recompute=True, start_method=start_method, **RUN)
    assert np.array_equal(res.params, _serial(2, False).params)
    assert res.stored_activation_bytes.tolist() == _expected_bytes((0, 1, 2, 4), 2, schedule, True)


def test_hybrid_forwards_recompute(digits, no_leaks):
    x, y = digits
    res = mp_run.train_pipeline(MODEL, x, y, data=2, boundaries=(0, 2, 4), micro_batches=5, recompute=True, **RUN)
    assert res.recompute and res.replicas_in_sync
    assert np.array_equal(res.params, _serial(5, False, data=2).params)
    # each replica: 25 rows in 5 micro-batches of 5, all held (GPipe); rows d * S + s
    assert res.stored_activation_bytes.tolist() == [25 * 64 * 4, 25 * 20 * 4] * 2
    assert res.recompute_time.shape == (6, 4) and np.all(res.recompute_time > 0)


def test_serial_reference_reports_memory_and_recomputation():
    plain, redo = _serial(5, False), _serial(5, True)
    # one micro-batch of 10 rows at a time through all four layers
    assert plain.stored_activation_bytes.tolist() == [10 * (64 + 24 + 20 + 16 + 10) * 4]
    assert redo.stored_activation_bytes.tolist() == [10 * 64 * 4]
    assert plain.recompute_time.shape == redo.recompute_time.shape == (6, 1)
    assert np.all(plain.recompute_time == 0) and np.all(redo.recompute_time > 0)
    assert np.all(redo.recompute_time[:, 0] < redo.step_time)


def _fake(recompute: bool, f: float, b: float, stored, redo, warm: float = 100.0) -> TrainResult:
    """Two steps of S = 2, M = 2 with given op durations; step 0 (warm-up) is ``warm`` long."""
    ops, t = [], 0.0
    for k in range(2):
        for s in range(2):
            for kind, m in mp.schedule_order(2, 2, "gpipe")[s]:
                d = warm if k == 0 else (f if kind == "F" else b)
                ops.append(mp.StageOp(s, kind, m, t, t + d, k))
                t += d
    tl = mp.Timeline(tuple(ops), 2, 2, "gpipe", "measured")
    zeros = np.zeros((2, 2))
    return TrainResult(np.zeros(3, np.float32), np.zeros(2), np.ones(2), zeros, zeros, zeros, "pipeline", 4,
                       workers=2, memory=[{"activations": b} for b in stored], timeline=tl,
                       boundaries=(0, 1, 2), schedule="gpipe", micro_batches=2, recompute=recompute,
                       recompute_time=np.array(redo, dtype=float))


def test_recompute_overhead_hand_derived():
    # without: F = 1 s, B = 2 s; step 1: 2 stages x 2 micro-batches x 3 s = 12 s
    base = _fake(False, 1.0, 2.0, [1000, 600], [[0, 0], [0, 0]])
    # with: B = 3.5 s of which 1 s recomputes; step 1: 2 x 2 x 4.5 = 18 s, 4 s recomputing
    redo = _fake(True, 1.0, 3.5, [400, 300], [[70, 70], [2, 2]])
    o = recompute_overhead(base, redo)
    assert isinstance(o, RecomputeOverhead)
    assert o.extra_compute == 4 / 12
    assert o.compute_increase == 18 / 12 - 1
    assert o.memory_saved == 1 - 400 / 1000
    assert str(o) == "recomputation cost 33.3 % more compute time, saved 60.0 % of activation memory"


def test_recompute_overhead_rejects_wrong_runs():
    base = _fake(False, 1.0, 2.0, [1000, 600], [[0, 0], [0, 0]])
    redo = _fake(True, 1.0, 3.0, [400, 300], [[1, 1], [1, 1]])
    with pytest.raises(ValueError, match="baseline must be a run with recompute=False"):
        recompute_overhead(redo, base)
    with pytest.raises(ValueError, match="recomputed must be a run with recompute=True"):
        recompute_overhead(base, base)
    with pytest.raises(ValueError, match="baseline must be a process run"):
        recompute_overhead(_serial(5, False), redo)
    with pytest.raises(TypeError, match="recomputed must be a course_lib.models.TrainResult"):
        recompute_overhead(base, "fast")
    other = dataclasses.replace(redo, micro_batches=4)
    with pytest.raises(ValueError, match="same pipeline"):
        recompute_overhead(base, other)


def test_recompute_must_be_a_flag(digits):
    x, y = digits
    with pytest.raises(TypeError, match="recompute must be True or False"):
        mp_run.train_pipeline(MODEL, x, y, recompute="yes", steps=1)
    with pytest.raises(TypeError, match="recompute"):
        reference.train_microbatched(MODEL, x, y, recompute=1, steps=1)


def test_bytes_handed_over_per_step_are_the_boundary_activations_twice():
    """Stages (0, 2, 4) of MLP((64, 32, 32, 16, 10)): one boundary, 32 wide; every
    sample's activation goes forward and its gradient back: 2 x B x 32 x 4 bytes."""
    from course_lib.parallel.partition import batches

    d = load_digits("train")
    model = MLP((64, 32, 32, 16, 10))
    res = mp_run.train_pipeline(model, d.x[:200], d.y[:200], boundaries=(0, 2, 4), micro_batches=3,
                         batch_size=64, steps=5, start_method="fork")
    sizes = [b.size for b in batches(200, 64, 0, steps=5)]  # 64, 64, 64, 8, 64
    assert res.bytes_per_step.tolist() == [2 * b * 32 * 4 for b in sizes]
    assert [mp.handover_bytes(model, (0, 2, 4), b) for b in sizes] == [2 * b * 32 * 4 for b in sizes]
