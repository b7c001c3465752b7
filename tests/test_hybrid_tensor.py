"""course_lib.planner with a tensor-parallel axis: N_d x N_p x N_t grids."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import alpha_beta, planner
from course_lib import schedule as mp
from course_lib.memory import mlp_activation_bytes, model_state_bytes
from course_lib.models import MLP
from course_lib.parallel.tensor import layer_blocks, tensor_parallel_bytes

FAST = dict(device_flops=1e10, bandwidth=1e9, latency=1e-5)


def _rank_params(model, workers, rank=0):
    """Parameters worker ``rank`` holds in course_lib.parallel.tensor (an independent count)."""
    flat = model.init_params(0)
    total = 0
    for s in layer_blocks(model, workers, rank):
        w, b = model.layer(flat, s.layer)
        total += w[s.rows, s.cols].size + b[s.bias].size
    return total


def test_tensor_one_is_the_old_estimate_bit_for_bit():
    model = MLP((32, 64, 64, 64, 10))
    for d, p in ((1, 1), (2, 2), (1, 4)):
        old = planner.estimate_config(model, 64, d, p, micro_batches=4, **FAST)
        new = planner.estimate_config(model, 64, d, p, micro_batches=4, tensor=1, **FAST)
        assert new == old and new.tensor == 1 and new.tensor_allreduce == 0.0
        assert new.label == f"{d}x{p}" and new.devices == d * p
    assert planner.enumerate_configs(model, 64, 4, max_tensor=1, **FAST) == planner.enumerate_configs(model, 64, 4, **FAST)


@pytest.mark.parametrize("sizes", [(8, 10, 6, 3), (8, 16, 16, 4), (5, 7, 9, 11, 13, 3)])
@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_parameters_per_device_are_those_of_the_tensor_parallel_split(sizes, workers):
    model = MLP(sizes)
    whole = (0, model.n_layers)
    assert planner.stage_params(model, whole, workers)[0] == _rank_params(model, workers)


def test_one_stage_split_over_two_devices_by_hand():
    model = MLP((8, 16, 16, 4))  # pair (0, 1) with hidden 16 -> 8 per device; layer 2 replicated
    c = planner.estimate_config(model, 64, 1, 1, micro_batches=1, tensor=2, **FAST)
    n = (8 * 8 + 8) + (8 * 16 + 16) + (16 * 4 + 4)
    assert n == 284 == planner.stage_params(model, (0, 3), 2)[0]
    assert c.memory_params == model_state_bytes(n, param_bytes=4, grad_bytes=4, k=0).total == 2272
    acts = mlp_activation_bytes(model, 64, tensor=2)
    assert acts == 64 * (8 + 8 + 16 + 4) * 4
    assert c.memory == 2272 + acts
    # compute: the pair's GEMMs are halved; forward 2(8*8 + 8*16 + 16*4), backward without layer 0's dX
    fwd, bwd = 2 * (64 + 128 + 64), 2 * 64 + 4 * 128 + 4 * 64
    assert c.compute == pytest.approx(64 * (fwd + bwd) / 1e10)
    # one forward all-reduce of the pair's output (64 x 16 float32), none in the backward
    assert tensor_parallel_bytes(model, 64) == 64 * 16 * 4
    expect = alpha_beta.ring_allreduce_time(64 * 16 * 4, 2, 1e9, 1e-5)  # = 4.096e-6 + 2e-5
    assert c.tensor_allreduce == pytest.approx(expect) == pytest.approx(2.4096e-5)
    assert c.step_time == pytest.approx(c.compute + c.tensor_allreduce)
    assert (c.label, c.devices) == ("1x1x2", 2)


def test_stage_bytes_add_up_to_the_whole_model_and_count_the_stage_input_gradient():
    model = MLP((8, 16, 16, 16, 16, 4))
    f, b = planner.tensor_stage_bytes(model, (0, 5), 10)
    assert f[0] + b[0] == tensor_parallel_bytes(model, 10)
    f, b = planner.tensor_stage_bytes(model, (0, 2, 5), 10)
    assert f.tolist() == [10 * 16 * 4, 10 * 16 * 4]  # each stage's pair output
    assert b.tolist() == [0, 10 * 16 * 4]  # stage 1's input gradient goes back to stage 0
    f, b = planner.tensor_stage_bytes(model, (0, 1, 2, 3, 4, 5), 10)  # one layer per stage: nothing to split
    assert f.sum() == b.sum() == 0


@given(st.lists(st.integers(1, 40), min_size=2, max_size=9), st.data())
def test_stage_bytes_equal_the_trainers_count_of_each_stage(sizes, data):
    """Each stage's bytes are what parallel.tensor counts for that stage as a model of its own,
    plus the gradient of its input when it is not the model's input (an independent count)."""
    model = MLP(sizes)
    cuts = data.draw(st.sets(st.integers(1, model.n_layers - 1), max_size=model.n_layers - 1)
                     if model.n_layers > 1 else st.just(set()))
    bounds = (0, *sorted(cuts), model.n_layers)
    f, b = planner.tensor_stage_bytes(model, bounds, 3)
    for q, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        own = tensor_parallel_bytes(MLP(sizes[lo : hi + 1]), 3)
        first = 3 * 4 * sizes[lo] if lo > 0 and hi - lo > 1 else 0
        assert f[q] + b[q] == own + first


def test_tensor_parallel_pipeline_against_an_independent_simulation():
    model = MLP((32, 64, 64, 64, 64, 10))
    c = planner.estimate_config(model, 64, 1, 2, micro_batches=4, schedule="gpipe", tensor=2, **FAST)
    bounds = mp.partition_layers(model, 2)
    assert bounds == (0, 2, 5)
    mb = 16
    # largest blocks: hidden 64 -> 32 per device; pairs (0, 1) and (2, 3); layer 4 replicated
    f = np.array([2 * (32 * 32 + 32 * 64), 2 * (64 * 32 + 32 * 64) + 2 * 64 * 10])
    b = np.array([2 * 32 * 32 + 4 * 32 * 64, 4 * (64 * 32 + 32 * 64) + 4 * 64 * 10])
    ring = lambda m, k: alpha_beta.ring_allreduce_time(m, 2, 1e9, 0.0) + k * alpha_beta.ring_allreduce_time(0, 2, 1e9, 1e-5)  # noqa: E731
    tp_f = np.array([ring(mb * 64 * 4, 1), ring(mb * 64 * 4, 1)])
    tp_b = np.array([0.0, ring(mb * 64 * 4, 1)])  # stage 0 skips the model input's gradient
    fwd, bwd = f * mb / 1e10, b * mb / 1e10
    t0 = mp.simulate_pipeline(fwd, bwd, micro_batches=4, schedule="gpipe")
    t1 = mp.simulate_pipeline(fwd + tp_f, bwd + tp_b, micro_batches=4, schedule="gpipe")
    send = 1e-5 + mb * 64 * 4 / 1e9
    t2 = mp.simulate_pipeline(fwd + tp_f, bwd + tp_b, micro_batches=4, schedule="gpipe", send_time=send)
    assert c.compute + c.bubble == pytest.approx(t0.makespan)
    assert c.tensor_allreduce == pytest.approx(t1.makespan - t0.makespan)
    assert c.step_time == pytest.approx(t2.makespan + c.allreduce)


@given(t=st.integers(2, 8), p=st.sampled_from([1, 2]))
@settings(max_examples=20, deadline=None)
def test_splitting_over_more_devices_never_needs_more_memory(t, p):
    model = MLP((64, 256, 256, 256, 256, 10))
    base = planner.estimate_config(model, 64, 1, p, micro_batches=2, tensor=t - 1, **FAST)
    more = planner.estimate_config(model, 64, 1, p, micro_batches=2, tensor=t, **FAST)
    assert more.memory_params <= base.memory_params and more.memory_activations <= base.memory_activations
    assert more.compute <= base.compute


def test_parameters_drop_about_one_over_t_for_wide_layers():
    model = MLP((1024,) * 5)  # two pairs, nothing replicated
    one = planner.estimate_config(model, 64, 1, 1, tensor=1, **FAST)
    four = planner.estimate_config(model, 64, 1, 1, tensor=4, **FAST)
    assert four.memory_params / one.memory_params == pytest.approx(1 / 4, rel=0.01)


def test_enumerate_and_best_with_a_tensor_axis():
    model = MLP((64, 64, 64, 10))
    configs = planner.enumerate_configs(model, 256, 4, max_tensor=4, **FAST)
    assert [c.label for c in configs] == ["4x1", "2x2", "2x1x2", "1x2x2", "1x1x4"]
    assert all(c.devices == 4 for c in configs)
    best = planner.best_config(model, 256, 4, max_tensor=4, **FAST)
    assert best.step_time == min(c.step_time for c in configs)
    # a wide model with a small batch: the gradient all-reduce of data parallelism is the
    # expensive part; splitting the layers beats replicating them
    wide = MLP((64, 8192, 8192, 10))
    kw = dict(device_flops=1e12, bandwidth=1e9, latency=1e-5)
    assert planner.best_config(wide, 8, 4, max_tensor=4, **kw).tensor > 1
    with pytest.raises(ValueError, match="max_tensor"):
        planner.enumerate_configs(model, 256, 4, max_tensor=0, **FAST)
    with pytest.raises(ValueError, match="tensor"):
        planner.estimate_config(model, 256, 1, 1, tensor=0, **FAST)


def test_config_is_a_frozen_dataclass_with_defaults_for_the_new_fields():
    names = [f.name for f in dataclasses.fields(planner.HybridConfig)]
    assert names[-4:] == ["tensor", "tensor_allreduce", "virtual_stages", "zero_stage"]
