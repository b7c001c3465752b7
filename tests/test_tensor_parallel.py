"""Tensor parallelism (course_lib.parallel.tensor): the Megatron split of the running
example against the serial trainer, the byte count against the formula, the block
layout, and faults with clean-up exactly as in the data-parallel trainer."""

from __future__ import annotations

import signal
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.datasets import load_digits
from course_lib.models import MLP
from course_lib.parallel.engine.workers import (
    Fault,
    FaultInjected,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
)
from course_lib.parallel.partition import batches
from course_lib.parallel.tensor import (
    gather_params,
    layer_blocks,
    tensor_backward,
    tensor_forward,
    tensor_parallel_bytes,
)
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.reference import train_serial
from course_lib.parallel.train.tensor import train_tensor_parallel

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits


DIGITS = load_digits("train")
X, Y = DIGITS.x[:300], DIGITS.y[:300]
#: The running example with hidden widths that 2, 3 and 4 do not all divide: two pairs.
MODEL = MLP((64, 30, 13, 22, 10))
KW = dict(batch_size=64, steps=6, lr=0.2, seed=3, progress=False)
#: Every start method; spawn (a fresh interpreter per worker, about a second more per run) only
#: in make test, not in make test-fast: the launcher's own tests (test_workers.py) cover it there.
RUN_METHODS = ["fork", "forkserver", pytest.param("spawn", marks=pytest.mark.slow)]


# ------------------------------------------------------------------ training
@pytest.mark.parametrize("method", RUN_METHODS)
@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_parameters_equal_the_serial_run(workers, method):
    ref = train_serial(MODEL, X, Y, **KW)
    tp = train_tensor_parallel(MODEL, X, Y, workers=workers, start_method=method, **KW)
    assert tp.params.shape == ref.params.shape and tp.params.dtype == np.float32
    assert np.abs(tp.params - ref.params).max() <= 1e-6
    np.testing.assert_allclose(tp.loss, ref.loss, rtol=1e-5)
    assert tp.replicas_in_sync and tp.backend == "tensor" and tp.workers == workers
    assert tp.extra["worker_blas_threads"] == [1] * workers
    # what the workers hold: every weight once, the row layers' biases (13 and 10) on every worker
    held = [m["parameters"] for m in tp.memory]
    assert sum(held) == 4 * (MODEL.n_params + (workers - 1) * (13 + 10))
    assert all(m["gradients"] == m["parameters"] for m in tp.memory)


def test_odd_layer_count_more_workers_than_units_and_a_short_last_batch():
    """MLP((64, 3, 10)): one pair of width 3 over 5 workers (two hold nothing); 300
    samples in batches of 128 end each epoch with 44; a 3-layer model replicates its
    last layer."""
    for model, workers in ((MLP((64, 3, 10)), 5), (MLP((64, 12, 7, 10)), 2)):
        kw = dict(batch_size=128, epochs=2, lr=0.3, seed=0, progress=False)
        ref = train_serial(model, X, Y, **kw)
        tp = train_tensor_parallel(model, X, Y, workers=workers, start_method="fork", **kw)
        assert tp.steps == ref.steps == 6
        assert np.abs(tp.params - ref.params).max() <= 1e-6
        assert tp.replicas_in_sync


def test_bytes_per_step_are_the_formula_and_far_below_data_parallel():
    """Two pairs, batch 64: forward all-reduces of 13 and 10 columns, backward one of
    13 (the first pair's input is the data): 64 x 36 x 4 bytes."""
    tp = train_tensor_parallel(MODEL, X, Y, workers=2, start_method="fork", **KW)
    assert tensor_parallel_bytes(MODEL, 64) == 64 * (13 + 10 + 13) * 4
    sizes = [b.size for b in batches(300, 64, 3, steps=6)]  # 64, 64, 64, 64, 44, 64
    assert tp.bytes_per_step.tolist() == [tensor_parallel_bytes(MODEL, b) for b in sizes]
    dp = train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", **KW)
    assert dp.bytes_per_step.tolist() == [MODEL.n_params * 4] * 6
    assert tp.communication.shape == tp.compute.shape == (6, 2)
    assert (tp.communication > 0).all() and (tp.compute > 0).all()


def test_bytes_follow_the_batch_of_each_step():
    tp = train_tensor_parallel(MODEL, X, Y, workers=2, batch_size=128, epochs=1, start_method="fork",
                               progress=False)
    assert tp.bytes_per_step.tolist() == [tensor_parallel_bytes(MODEL, b) for b in (128, 128, 44)]


@pytest.mark.parametrize(("sizes", "expected"), [
    ((8, 4), 0),                          # one replicated layer: nothing to add
    ((8, 4, 2), 2),                       # one pair: its 2-wide output, no input gradient
    ((8, 4, 6, 2), 6),                    # a pair and a replicated layer
    ((8, 4, 6, 5, 3), 6 + 3 + 6),         # two pairs: outputs 6 and 3, input gradient 6
])
def test_tensor_parallel_bytes_by_hand(sizes, expected):
    assert tensor_parallel_bytes(MLP(sizes), 10) == 10 * expected * 4
    assert tensor_parallel_bytes(MLP(sizes, dtype=np.float64), 10) == 10 * expected * 8


# ------------------------------------------------------------------ layout
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=2, max_size=6), st.integers(1, 7), st.integers(0, 99))
def test_blocks_cover_every_parameter_once(sizes, workers, seed):
    model = MLP(tuple(sizes))
    p = model.init_params(seed) + np.float32(0.5)  # no zero biases: every entry visible
    owned = np.zeros(model.n_params, dtype=int)
    blocks = []
    for rank in range(workers):
        local = []
        for s in layer_blocks(model, workers, rank):
            w, b = model.layer(p, s.layer)
            local.append((w[s.rows, s.cols].copy(), b[s.bias].copy()))
            wo, bo = model.layer(owned, s.layer)
            if s.role != "replicated" or rank == 0:
                wo[s.rows, s.cols] += 1
            if s.role == "column" or rank == 0:
                bo[s.bias] += 1
        blocks.append(local)
    assert (owned == 1).all()
    assert np.array_equal(gather_params(model, blocks), p)


def test_forward_and_backward_of_one_worker_are_the_model_s():
    """With one worker and an identity all-reduce the split is the plain network:
    same logits and gradient bit for bit as MLP.forward / MLP.backward."""
    model, p = MODEL, MODEL.init_params(1)
    shards = layer_blocks(model, 1, 0)
    local = [tuple(a.copy() for a in model.layer(p, s.layer)) for s in shards]
    acts = tensor_forward(local, shards, X[:32], allreduce=lambda a: a)
    logits, ref_acts = model.forward(p, X[:32])
    assert all(np.array_equal(a, b) for a, b in zip(acts, ref_acts, strict=True))
    _, ref_grad = model.backward(p, ref_acts, Y[:32], reduction="sum")
    from course_lib.models import softmax_cross_entropy

    _, d = softmax_cross_entropy(logits, Y[:32], reduction="sum")
    grads = [(np.zeros_like(w), np.zeros_like(b)) for w, b in local]
    tensor_backward(local, shards, acts, d, grads, allreduce=lambda a: a)
    assert np.array_equal(gather_params(model, [grads]), ref_grad)


def test_layer_shards_split_unevenly_never_reject():
    cols = [s.cols for r in range(4) for s in layer_blocks(MLP((5, 10, 3)), 4, r) if s.role == "column"]
    assert [(c.start, c.stop) for c in cols] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert [s.role for s in layer_blocks(MODEL, 3, 0)] == ["column", "row", "column", "row"]
    assert [s.role for s in layer_blocks(MLP((4, 5, 6, 7)), 3, 0)] == ["column", "row", "replicated"]


@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    ({"workers": 0}, ValueError, "workers"),
    ({"workers": 2.5}, TypeError, "workers"),
    ({"workers": 2, "lr": float("nan")}, ValueError, "lr"),
    ({"workers": 2, "batch_size": 0}, ValueError, "batch_size"),
    ({"workers": 2, "start_method": "thread"}, ValueError, "start_method"),
    ({"workers": 2, "timeout": -1}, ValueError, "timeout"),
    ({"workers": 2, "fault": Fault("raise", rank=2)}, ValueError, "fault.rank"),
])
def test_bad_arguments_name_the_parameter(kwargs, exc, name):
    args = {**KW, **kwargs}
    with pytest.raises(exc, match=name):
        train_tensor_parallel(MODEL, X, Y, **args)


# ------------------------------------------------------------------ faults
pytestmark_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc")


@pytestmark_linux
@pytest.mark.parametrize("method", RUN_METHODS)
def test_exception_in_a_worker_is_reraised_and_nothing_is_left(method, clean):
    with pytest.raises(WorkerError) as info:
        train_tensor_parallel(MODEL, X, Y, workers=3, start_method=method,
                              fault=Fault("raise", rank=2, step=3), **KW)
    assert info.value.rank == 2 and isinstance(info.value.__cause__, FaultInjected)
    assert "tensor_worker_loop" in info.value.remote_traceback


@pytestmark_linux
@pytest.mark.parametrize(("kind", "code"), [("exit", 3), ("kill", -signal.SIGKILL)])
def test_a_worker_that_dies_gives_a_clear_error_at_once(kind, code, clean):
    t0 = time.monotonic()
    with pytest.raises(WorkerDied) as info:
        train_tensor_parallel(MODEL, X, Y, workers=2, start_method="fork", timeout=30,
                              fault=Fault(kind, rank=1, step=2), **KW)
    assert info.value.rank == 1 and info.value.exitcode == code
    assert time.monotonic() - t0 < 10


@pytestmark_linux
def test_a_hung_worker_times_out_and_is_named(clean):
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"probably \[0\]") as info:
        train_tensor_parallel(MODEL, X, Y, workers=2, start_method="fork", timeout=0.6,
                              fault=Fault("hang", rank=0, step=1), **KW)
    assert 0.6 <= time.monotonic() - t0 < 10
    assert info.value.progress == [2, 3]  # rank 0 stuck at the start of step 1
