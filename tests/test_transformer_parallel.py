"""Tensor parallelism of the transformer (course_lib.parallel.tensor_transformer) against the
serial run, its bytes and memory against course_lib.tensor_cost, sequence parallelism's
formulas against Korthikanti et al. 2023 (Table 2), bad input and faults with clean-up."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.alpha_beta import ring_allreduce_time
from course_lib.memory import transformer_activation_bytes
from course_lib.parallel.engine.workers import Fault, FaultInjected, WorkerDied, WorkerError
from course_lib.parallel.partition import batches
from course_lib.parallel.tensor_transformer import (
    gather_weights,
    head_blocks,
    local_weights,
)
from course_lib.parallel.train.reference import train_serial
from course_lib.parallel.train.tensor import train_tensor_parallel
from course_lib.tensor_cost import (
    activation_bytes,
    layer_norm_dropout_bytes,
    tensor_allreduce_bytes,
    tensor_layer_communication,
    tensor_param_bytes,
)
from course_lib.transformer import Transformer, transformer_backward, transformer_forward

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean

#: 4 heads of size 2, an MLP block 6 wide (4 workers split it 2, 2, 1, 1), 2 blocks.
MODEL = Transformer(seq_length=4, token_size=3, hidden=8, heads=4, n_layers=2, ffn=6, classes=3)
RNG = np.random.default_rng(11)
X = RNG.standard_normal((40, 4, 3))
Y = RNG.integers(0, 3, 40)
KW = dict(batch_size=12, steps=4, lr=0.3, seed=2, progress=False)  # batches 12, 12, 12, 4


# ------------------------------------------------------------------ training
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_parameters_equal_the_serial_run(workers):
    ref = train_serial(MODEL, X, Y, **{k: v for k, v in KW.items() if k != "progress"})
    tp = train_tensor_parallel(MODEL, X, Y, workers=workers, start_method="fork", **KW)
    assert tp.params.shape == ref.params.shape and tp.params.dtype == np.float64
    assert np.abs(tp.params - ref.params).max() <= 1e-6
    assert np.abs(tp.params - MODEL.init_params(2)).max() > 1e-3  # it trained
    np.testing.assert_allclose(tp.loss, ref.loss, rtol=1e-9)
    assert tp.replicas_in_sync and tp.backend == "tensor" and tp.workers == workers
    # bytes: 4 all-reduces of B L h float64 values per block, B of each step (the last batch holds 4);
    # one worker alone exchanges nothing
    sizes = [idx.size for idx in batches(40, 12, 2, steps=4)]
    assert sizes == [12, 12, 12, 4]
    assert tp.bytes_per_step.tolist() == [tensor_allreduce_bytes(4, b, 8, n_layers=2, bytes_per_value=8)
                                          if workers > 1 else 0 for b in sizes]
    assert tp.bytes_per_step[0] == (4 * 2 * 12 * 4 * 8 * 8 if workers > 1 else 0)
    # memory: each worker's blocks, as the formula counts them
    assert [m["parameters"] for m in tp.memory] == tensor_param_bytes(MODEL, workers)
    assert all(m["gradients"] == m["parameters"] for m in tp.memory)


@pytest.mark.parametrize("method", ["spawn"])
def test_other_start_methods_give_the_same_parameters(method):
    kw = {**KW, "steps": 2}
    fork = train_tensor_parallel(MODEL, X, Y, workers=2, start_method="fork", **kw)
    other = train_tensor_parallel(MODEL, X, Y, workers=2, start_method=method, **kw)
    assert np.array_equal(fork.params, other.params)


def test_one_worker_with_an_identity_allreduce_is_the_model_bit_for_bit():
    p = MODEL.init_params(5)
    local = local_weights(MODEL, p, head_blocks(MODEL, 1, 0))
    logits, cache = transformer_forward(local, X[:7], MODEL.n_layers, MODEL.head_size, lambda a: a)
    ref_logits, _ = MODEL.forward(p, X[:7])
    assert np.array_equal(logits, ref_logits)
    from course_lib.models import softmax_cross_entropy

    _, d = softmax_cross_entropy(logits, Y[:7], reduction="sum")
    grads = {n: np.zeros_like(w) for n, w in local.items()}
    transformer_backward(local, cache, d, grads, MODEL.n_layers, MODEL.head_size, lambda a: a)
    _, ref = MODEL.loss_and_grad(p, X[:7], Y[:7], reduction="sum")
    assert np.array_equal(gather_weights(MODEL, [grads]), ref)


def test_two_workers_in_threads_give_the_serial_logits_and_gradient():
    """Two workers as threads of this process, summing through a barrier: the split forward
    and backward (the same block code, each worker's heads) give the serial results."""
    import threading

    from course_lib.models import softmax_cross_entropy

    p, workers = MODEL.init_params(3), 2
    parts = [local_weights(MODEL, p, head_blocks(MODEL, workers, r)) for r in range(workers)]
    barrier, slots, out = threading.Barrier(workers, timeout=20), [None] * workers, [None] * workers

    def run(rank):
        def allreduce(part):
            slots[rank] = part
            barrier.wait()
            total = slots[0] + slots[1]
            barrier.wait()  # both have read the parts before either writes the next
            return total

        logits, cache = transformer_forward(parts[rank], X[:5], MODEL.n_layers, MODEL.head_size, allreduce)
        _, d = softmax_cross_entropy(logits, Y[:5], reduction="sum")
        grads = {n: np.zeros_like(w) for n, w in parts[rank].items()}
        transformer_backward(parts[rank], cache, d, grads, MODEL.n_layers, MODEL.head_size, allreduce)
        out[rank] = logits, grads

    threads = [threading.Thread(target=run, args=(r,)) for r in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads) and None not in out
    ref_logits, _ = MODEL.forward(p, X[:5])
    np.testing.assert_allclose(out[0][0], ref_logits, rtol=1e-12, atol=1e-13)
    assert np.array_equal(out[0][0], out[1][0])  # every worker ends with the same logits
    _, ref = MODEL.loss_and_grad(p, X[:5], Y[:5], reduction="sum")
    np.testing.assert_allclose(gather_weights(MODEL, [g for _, g in out]), ref, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ layout
@settings(max_examples=20, deadline=None)
@given(st.sampled_from([(4, 1), (4, 2), (4, 4), (6, 3), (6, 2)]), st.integers(1, 9), st.integers(1, 2),
       st.integers(0, 99))
def test_blocks_cover_every_parameter_once(heads_workers, ffn, n_layers, seed):
    heads, workers = heads_workers
    model = Transformer(seq_length=2, token_size=2, hidden=2 * heads, heads=heads, n_layers=n_layers,
                        ffn=ffn, classes=2)
    p = model.init_params(seed) + 0.5
    owned = np.zeros(model.n_params)
    blocks = []
    for rank in range(workers):
        shards = head_blocks(model, workers, rank)
        blocks.append(local_weights(model, p, shards))
        views = model.views(owned)
        for name, index in shards.items():
            if index != () or rank == 0:
                views[name][index] += 1
    assert (owned == 1).all()
    assert np.array_equal(gather_weights(model, blocks), p)
    held = [8 * sum(a.size for a in b.values()) for b in blocks]
    assert held == tensor_param_bytes(model, workers)


# ------------------------------------------------------------------ formulas
def test_allreduce_bytes_by_hand_and_the_gpt3_layer():
    assert tensor_allreduce_bytes(2048, 1, 12288) == 4 * 2048 * 12288 * 2
    assert tensor_allreduce_bytes(8, 32, 32, n_layers=2, bytes_per_value=8) == 2 * 4 * 32 * 8 * 32 * 8
    comm = tensor_layer_communication(2048, 1, 12288, 8, 300e9, 5e-6)
    m = 2048 * 12288 * 2
    assert comm.payload_bytes == m and comm.collectives == ("all-reduce",) * 4
    assert comm.bytes_per_device == 4 * 2 * 7 / 8 * m
    assert comm.time == pytest.approx(4 * ring_allreduce_time(m, 8, 300e9, 5e-6), rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4096), st.integers(1, 8), st.sampled_from([512, 4096, 12288]), st.integers(1, 64),
       st.floats(1e9, 1e12), st.floats(0, 1e-4))
def test_sequence_parallelism_moves_the_same_bytes_in_the_same_time(s, b, h, t, bw, lat):
    ar = tensor_layer_communication(s, b, h, t, bw, lat)
    sp = tensor_layer_communication(s, b, h, t, bw, lat, sequence_parallel=True)
    assert sp.collectives == ("reduce-scatter", "all-gather") * 4
    assert sp.bytes_per_device == ar.bytes_per_device and sp.payload_bytes == ar.payload_bytes
    assert sp.time == pytest.approx(ar.time, rel=1e-12)


@pytest.mark.parametrize("t", [1, 2, 8])
def test_activation_bytes_are_table_2_of_korthikanti_et_al(t):
    s, b, h, a = 2048, 1, 12288, 96  # GPT-3 175B (their Table 3)
    sbh = s * b * h
    kw = dict(tensor=t)
    assert activation_bytes(s, b, h, a, **kw) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert activation_bytes(s, b, h, a, sequence_parallel=True, **kw) == pytest.approx(
        sbh * (34 / t + 5 * a * s / (h * t)))
    assert activation_bytes(s, b, h, a, selective_recompute=True, **kw) == pytest.approx(sbh * (10 + 24 / t))
    assert activation_bytes(s, b, h, a, sequence_parallel=True, selective_recompute=True, **kw) == pytest.approx(
        sbh * 34 / t)
    assert activation_bytes(s, b, h, a, **kw) == transformer_activation_bytes(s, b, h, a, tensor=t)
    assert layer_norm_dropout_bytes(s, b, h, tensor=t, sequence_parallel=True) * t == 10 * sbh
    if t == 1:  # no parallelism: sbh (34 + 5as/h) either way
        assert activation_bytes(s, b, h, a, sequence_parallel=True) == pytest.approx(sbh * (34 + 5 * a * s / h))


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    ({"workers": 3}, ValueError, "workers must divide the heads"),
    ({"workers": 8}, ValueError, "workers"),
    ({"workers": 0}, ValueError, "workers"),
    ({"workers": 2.5}, TypeError, "workers"),
    ({"workers": 2, "lr": float("nan")}, ValueError, "lr"),
    ({"workers": 2, "batch_size": 41}, ValueError, "batch_size"),
    ({"workers": 2, "start_method": "thread"}, ValueError, "start_method"),
    ({"workers": 2, "timeout": -1}, ValueError, "timeout"),
    ({"workers": 2, "fault": Fault("raise", rank=2)}, ValueError, "fault.rank"),
    ({"workers": 2, "params": np.zeros(3)}, ValueError, "params"),
])
def test_bad_arguments_name_the_parameter(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        train_tensor_parallel(MODEL, X, Y, **{**KW, **kwargs})


@pytest.mark.parametrize(("call", "exc", "name"), [
    (lambda: train_tensor_parallel("m", X, Y, workers=1), TypeError, "model"),
    (lambda: train_tensor_parallel(MODEL, X[:, :, :2], Y, workers=1), ValueError, "x must have"),
    (lambda: train_serial(MODEL, X, Y, steps=2, epochs=1), ValueError, "steps or epochs"),
    (lambda: head_blocks(MODEL, 3, 0), ValueError, "workers"),
    (lambda: head_blocks(MODEL, 2, 2), ValueError, "rank"),
    (lambda: tensor_param_bytes(MODEL, 3), ValueError, "workers"),
    (lambda: tensor_allreduce_bytes(0, 1, 1), ValueError, "seq_length"),
    (lambda: tensor_layer_communication(8, 1, 8, 2, 1e9, 0, sequence_parallel=1), TypeError, "sequence_parallel"),
    (lambda: activation_bytes(8, 1, 8, 2, tensor=0), ValueError, "tensor"),
])
def test_bad_input_of_the_helpers_names_the_parameter(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


# ------------------------------------------------------------------ faults
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc")


@linux
def test_exception_in_a_worker_is_reraised_and_nothing_is_left(clean):
    with pytest.raises(WorkerError) as info:
        train_tensor_parallel(MODEL, X, Y, workers=2, start_method="fork",
                                          fault=Fault("raise", rank=1, step=2), **KW)
    assert info.value.rank == 1 and isinstance(info.value.__cause__, FaultInjected)
    assert "transformer_worker_loop" in info.value.remote_traceback


@linux
def test_a_worker_that_dies_gives_a_clear_error(clean):
    with pytest.raises(WorkerDied) as info:
        train_tensor_parallel(MODEL, X, Y, workers=4, start_method="fork", timeout=30,
                                          fault=Fault("exit", rank=3, step=1), **KW)
    assert info.value.rank == 3 and info.value.exitcode == 3


# ------------------------------------------------------------------ exercises
def test_exercises_accept_the_formula_and_name_the_usual_mistakes():
    from course_lib.exercises.tensor_parallelism import (
        LAYER_TRAFFIC,
        SEQUENCE_MEMORY,
        ex_layer_traffic,
        ex_sequence_parallel_memory,
    )

    g = LAYER_TRAFFIC
    m = g["seq_length"] * g["micro_batch"] * g["hidden"] * 2  # bytes of one all-reduce
    assert ex_layer_traffic(4 * 2 * (g["tensor"] - 1) / g["tensor"] * m / 1e6)
    payload = ex_layer_traffic(4 * m / 1e6)
    assert not payload and "payload" in payload.message
    g = SEQUENCE_MEMORY
    s, h, a, t = g["seq_length"], g["hidden"], g["heads"], g["tensor"]
    sbh = s * g["micro_batch"] * h
    assert ex_sequence_parallel_memory(sbh * (34 / t + 5 * a * s / (h * t)) / 1e6)
    tensor_only = ex_sequence_parallel_memory(sbh * (10 + 24 / t + 5 * a * s / (h * t)) / 1e6)
    assert not tensor_only and "tensor parallelism alone" in tensor_only.message


@linux
def test_a_hung_worker_times_out_and_nothing_is_left(clean):
    from course_lib.parallel.engine.workers import WorkerTimeout

    with pytest.raises(WorkerTimeout, match=r"probably \[1\]"):
        train_tensor_parallel(MODEL, X, Y, workers=2, start_method="fork", timeout=0.6,
                                          fault=Fault("hang", rank=1, step=1), **KW)


# ------------------------------------------------------------------ figure
def test_sequence_parallel_figure_draws_the_formulas():
    import matplotlib

    matplotlib.use("Agg")
    from course_lib.plots.transformer import sequence_parallel_figure

    fig = sequence_parallel_figure(2048, 1, 12288, 96, tensors=(1, 8))
    ax = fig.axes[0]
    bars = sorted((round(p.get_x(), 3), p.get_y(), p.get_height()) for p in ax.patches)
    tops = {x: y + h for x, y, h in bars}  # the upper bar of each stack
    assert sorted(tops.values()) == pytest.approx(sorted(
        activation_bytes(2048, 1, 12288, 96, tensor=t, sequence_parallel=sp) / 1e9
        for t in (1, 8) for sp in (False, True)))
    with pytest.raises(ValueError, match="tensors"):
        sequence_parallel_figure(2048, 1, 12288, 96, tensors=(0,))
