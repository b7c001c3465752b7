"""ZeRO stages 2 and 3 (FSDP) in the data-parallel trainer (course_lib.parallel.zero): the
parameters of plain data parallelism bit for bit, 1/N of the gradients (stage 2) and of the
parameters too (stage 3) per worker, measured, the traffic of an all-reduce (stage 2) and
1.5 times it (stage 3), measured, and faults stopped with nothing left behind."""

from __future__ import annotations

import signal
import sys
import time

import numpy as np
import pytest

from course_lib.memory import model_state_bytes, zero_comm_factor
from course_lib.models import MLP
from course_lib.optim import SGD
from course_lib.parallel.engine.workers import (
    Fault,
    FaultInjected,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
)
from course_lib.parallel.partition import chunk_bounds
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.reference import train_serial

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits

MODEL = MLP((64, 30, 20, 10))  # three layers: per-layer collectives cross the chunk borders
KW = dict(batch_size=64, steps=5, seed=3, progress=False)
OPT = SGD(0.1, momentum=0.9)
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc")


@pytest.fixture(scope="module")
def runs(digits):
    """Stages 0-3 on 3 workers (fork) and the serial reference, SGD with momentum."""
    x, y = digits
    out = {s: train_data_parallel(MODEL, x, y, workers=3, zero_stage=s, optimizer=OPT, start_method="fork", **KW)
           for s in range(4)}
    out["serial"] = train_serial(MODEL, x, y, optimizer=OPT, **KW)
    return out


@pytest.mark.parametrize("stage", [2, 3])
def test_stages_2_and_3_give_the_parameters_of_plain_data_parallelism(runs, stage):
    """Every element is still the sum of the workers' gradients in rank order and the
    update is element-wise: bit for bit stage 0's parameters, within 1e-6 of the serial run."""
    run = runs[stage]
    assert np.array_equal(run.params, runs[0].params)
    assert np.abs(run.params - runs["serial"].params).max() <= 1e-6
    np.testing.assert_allclose(run.loss, runs["serial"].loss, rtol=1e-5)
    assert run.replicas_in_sync


def test_each_worker_keeps_its_chunks(runs):
    """float32 SGD with momentum: 4 + 4 + 4 bytes per parameter. Stage 2 keeps the whole
    parameters and chunk r (chunk_bounds, 64-byte aligned) of the gradient and the state;
    stage 3 chunk r of all three."""
    n = MODEL.n_params
    chunks = [(hi - lo) * 4 for lo, hi in chunk_bounds(n, 3)]
    held = {s: [(m["parameters"], m["gradients"], m["optimizer_states"]) for m in runs[s].memory] for s in range(4)}
    assert held[0] == [(4 * n, 4 * n, 4 * n)] * 3
    assert held[2] == [(4 * n, c, c) for c in chunks]
    assert held[3] == [(c, c, c) for c in chunks]
    assert sum(chunks) == 4 * n
    for s in range(4):  # the formula within one chunk's alignment (16 floats)
        formula = model_state_bytes(n, 3, s, param_bytes=4, grad_bytes=4, k=4)
        worst = max(sum(h) for h in held[s])
        assert abs(worst - formula.total) <= 3 * 16 * 4


def test_bytes_per_step_stage_3_moves_one_and_a_half_all_reduces(runs):
    payload = MODEL.n_params * 4
    for s in range(4):
        assert runs[s].bytes_per_step.tolist() == [zero_comm_factor(s) * payload] * KW["steps"]
    assert zero_comm_factor(3) == 1.5 and zero_comm_factor(2) == 1.0


@pytest.mark.parametrize(("stage", "workers"), [(2, 1), (3, 2)])
def test_one_and_two_workers_and_plain_sgd(digits, stage, workers):
    x, y = digits
    plain = train_data_parallel(MODEL, x, y, workers=workers, lr=0.1, start_method="fork", **KW)
    zero = train_data_parallel(MODEL, x, y, workers=workers, lr=0.1, zero_stage=stage, start_method="fork", **KW)
    assert np.array_equal(zero.params, plain.params)
    assert [m["optimizer_states"] for m in zero.memory] == [0] * workers


def test_more_workers_than_a_layer_has_chunks(digits):
    """A tiny model on 3 workers: some workers own no part of a layer (empty parts)."""
    x, y = digits
    tiny = MLP((64, 2, 10))  # 130 + 30 parameters: chunks of 64, 64, 32
    kw = dict(KW, optimizer=OPT)
    plain = train_data_parallel(tiny, x, y, workers=3, start_method="fork", **kw)
    for stage, method in ((2, "fork"), (3, "forkserver")):
        zero = train_data_parallel(tiny, x, y, workers=3, zero_stage=stage, start_method=method, **kw)
        assert np.array_equal(zero.params, plain.params)


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"zero_stage": 4}, ValueError, "zero_stage"),
    ({"zero_stage": -1}, ValueError, "zero_stage"),
    ({"zero_stage": 2.0}, TypeError, "zero_stage"),
    ({"zero_stage": 3, "backend": "pipe"}, ValueError, "zero_stage=3 needs backend='shm'"),
    ({"zero_stage": 2, "backend": "gloo"}, ValueError, "zero_stage=2 needs backend='shm'"),
])
def test_bad_arguments(digits, kwargs, exc, match):
    x, y = digits
    with pytest.raises(exc, match=match):
        train_data_parallel(MODEL, x, y, workers=2, optimizer=OPT, start_method="fork", **kwargs, **KW)


@linux
@pytest.mark.parametrize("stage", [2, 3])
def test_an_exception_in_a_worker_is_reraised_and_nothing_is_left(digits, stage, clean):
    x, y = digits
    with pytest.raises(WorkerError) as info:
        train_data_parallel(MODEL, x, y, workers=3, zero_stage=stage, optimizer=OPT, start_method="fork",
                            fault=Fault("raise", rank=2, step=2), **KW)
    assert info.value.rank == 2 and isinstance(info.value.__cause__, FaultInjected)
    assert f"zero{stage}_worker_loop" in info.value.remote_traceback


@linux
def test_a_worker_that_dies_in_stage_3_gives_a_clear_error(digits, clean):
    x, y = digits
    t0 = time.monotonic()
    with pytest.raises(WorkerDied) as info:
        train_data_parallel(MODEL, x, y, workers=2, zero_stage=3, start_method="fork", timeout=30,
                            fault=Fault("kill", rank=1, step=2), **KW)
    assert info.value.rank == 1 and info.value.exitcode == -signal.SIGKILL
    assert time.monotonic() - t0 < 10


@linux
def test_a_hung_stage_3_worker_times_out_and_is_named(digits, clean):
    x, y = digits
    with pytest.raises(WorkerTimeout, match=r"probably \[0\]"):
        train_data_parallel(MODEL, x, y, workers=2, zero_stage=3, start_method="fork", timeout=0.6,
                            fault=Fault("hang", rank=0, step=1), **KW)


# ------------------------------------------------------------------ the calculator and the exercise
def test_zero_step_bytes_hand_values():
    """Ring: (N - 1)/N of the payload per collective; 2 collectives (stages 0-2) or 3 (stage 3)."""
    from course_lib.datasets import load_hardware
    from course_lib.memory import device_fit, zero_step_bytes

    assert zero_step_bytes(1000, 4, 0) == 2 * 0.75 * 2 * 1000 == 3000
    assert zero_step_bytes(1000, 4, 3) == 4500 == 1.5 * zero_step_bytes(1000, 4, 2)
    assert zero_step_bytes(1000, 4, 1, grad_bytes=4) == 6000
    fit = device_fit(1e9, 8, 3, "a100_sxm_80gb", hardware=load_hardware())
    assert fit.step_bytes == zero_step_bytes(1e9, 8, 3) == 3 * 7 / 8 * 2e9


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda: zero_comm_factor(4), ValueError, "zero_stage"),
    (lambda: zero_comm_factor(1.0), TypeError, "zero_stage"),
    (lambda: __import__("course_lib.memory").memory.zero_step_bytes(-1, 2, 0), ValueError, "n_params"),
    (lambda: __import__("course_lib.memory").memory.zero_step_bytes(10, 0, 0), ValueError, "devices"),
    (lambda: __import__("course_lib.memory").memory.zero_step_bytes(10, 2, 0, grad_bytes=-2), ValueError,
     "grad_bytes"),
])
def test_calculator_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_the_zero3_traffic_exercise():
    from course_lib.exercises import memory as ex

    assert ex.ex_zero3_traffic(11.25).correct  # 3 x 15/16 x 2e9 x 2 bytes
    wrong = ex.ex_zero3_traffic(7.5)
    assert not wrong.correct and "stages 0-2" in str(wrong)
    assert not ex.ex_zero3_traffic("lots").correct


def test_the_run_figure(runs):
    from course_lib.plots.memory import zero_run_figure

    fig = zero_run_figure([runs[s].memory for s in range(4)], [runs[s].bytes_per_step[0] for s in range(4)],
                          MODEL.n_params)
    heights = [p.get_height() for p in fig.axes[1].patches]
    assert heights == pytest.approx([1, 1, 1, 1.5])
    with pytest.raises(ValueError, match="memory_by_stage"):
        zero_run_figure([runs[0].memory], [1.0], MODEL.n_params)
    with pytest.raises(TypeError, match="memory_by_stage"):
        zero_run_figure("memory", [1.0] * 4, MODEL.n_params)
