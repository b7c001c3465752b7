"""course_lib.planner: data x pipeline grids and the chapter's comparison table."""

import math

import numpy as np
import pytest

from course_lib import alpha_beta, planner
from course_lib import schedule as mp
from course_lib.models import MLP

FAST = dict(device_flops=1e10, bandwidth=1e9, latency=1e-5)


def test_one_device_is_the_serial_step():
    model = MLP((64, 64, 64, 10))
    c = planner.estimate_config(model, 100, 1, 1, micro_batches=1, **FAST)
    assert c.compute == pytest.approx(100 * model.flops_per_sample()["total"] / 1e10)
    assert c.bubble == 0 and c.p2p == 0 and c.allreduce == 0
    params = model.n_params * 4
    assert c.memory == pytest.approx(2 * params + 100 * sum(model.sizes) * 4)
    assert c.step_time == pytest.approx(c.compute) and c.fits


def test_data_parallel_uses_the_ring_allreduce_and_splits_the_batch():
    model = MLP((64, 64, 10))
    c = planner.estimate_config(model, 100, 3, 1, micro_batches=1, **FAST)
    assert c.allreduce == pytest.approx(alpha_beta.ring_allreduce_time(model.n_params * 4, 3, 1e9, 1e-5))
    assert c.compute == pytest.approx(34 * model.flops_per_sample()["total"] / 1e10)  # ceil(100/3)


def test_pipeline_matches_an_independent_simulation():
    model = MLP((32, 64, 64, 64, 10))
    c = planner.estimate_config(model, 64, 1, 2, micro_batches=8, schedule="gpipe", **FAST)
    bounds = mp.partition_layers(model, 2)
    f, b = mp.stage_flops(model, bounds)
    send = 1e-5 + 8 * model.sizes[bounds[1]] * 4 / 1e9
    t0 = mp.simulate_pipeline(f * 8 / 1e10, b * 8 / 1e10, micro_batches=8, schedule="gpipe")
    t1 = mp.simulate_pipeline(f * 8 / 1e10, b * 8 / 1e10, micro_batches=8, schedule="gpipe",
                              send_time=send)
    assert c.boundaries == bounds and c.micro_batch_size == 8
    assert c.compute + c.bubble == pytest.approx(t0.makespan)
    assert c.step_time == pytest.approx(t1.makespan + c.allreduce)
    assert c.compute == pytest.approx(8 * (f + b).max() * 8 / 1e10)
    # memory: stage s stashes 8 micro-batches of its activations (GPipe)
    widths = planner.stage_activation_widths(model, bounds)
    params = planner.stage_params(model, bounds)
    assert c.memory == pytest.approx(max(2 * params * 4 + 8 * 8 * widths * 4))


def test_1f1b_needs_less_activation_memory_than_gpipe_in_the_same_time():
    model = MLP((64,) + (256,) * 8 + (10,))
    g = planner.estimate_config(model, 512, 1, 4, micro_batches=16, schedule="gpipe", **FAST)
    o = planner.estimate_config(model, 512, 1, 4, micro_batches=16, schedule="1f1b", **FAST)
    assert o.step_time == pytest.approx(g.step_time, rel=0.05)
    assert o.memory_activations < g.memory_activations / 3  # 4 vs 16 micro-batches


def test_stage_helpers_by_hand():
    model = MLP((10, 20, 30, 5))
    assert planner.stage_params(model, (0, 1, 3)).tolist() == [220, 630 + 155]
    assert planner.stage_activation_widths(model, (0, 1, 3)).tolist() == [30, 55]
    assert planner.stage_params(model, (0, 3)).sum() == model.n_params


def test_enumerate_and_best():
    model = MLP((64, 64, 64, 64, 10))
    configs = planner.enumerate_configs(model, 256, 8, **FAST)
    assert [c.label for c in configs] == ["8x1", "4x2", "2x4"]  # P = 8 > 4 layers is impossible
    assert all(c.devices == 8 for c in configs)
    best = planner.best_config(model, 256, 8, **FAST)
    assert best.step_time == min(c.step_time for c in configs)
    # memory too small for the data-parallel replica forces the pipeline
    limit = (configs[0].memory + configs[1].memory) / 2
    forced = planner.best_config(model, 256, 8, memory=limit, **FAST)
    assert forced.pipeline > 1 and forced.memory <= limit
    assert forced.step_time == min(c.step_time for c in configs[1:])
    assert planner.best_config(model, 256, 8, memory=1.0, **FAST) is None
    assert planner.best_configs(model, 256, [1, 2], **FAST)[0].label == "1x1"


def test_large_batch_favours_data_parallelism_large_model_the_pipeline():
    # the chapter's rule: data parallelism for large batches, model parallelism for large models
    small_model = MLP((64, 64, 64, 64, 10))
    assert planner.best_config(small_model, 8192, 4, **FAST).label == "4x1"
    big_model = MLP((1024,) + (4096,) * 4 + (10,))
    assert planner.best_config(big_model, 64, 4, **FAST).pipeline > 1


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((100, 1, 4), {}, "pipeline"),
        ((100, 101, 1), {}, "data"),
        ((100, 1, 1), {"micro_batches": 101}, "micro_batches"),
        ((100, 1, 1), {"schedule": "x"}, "schedule"),
        ((100, 1, 1), {"memory": -1.0}, "memory"),
    ],
)
def test_estimate_rejects_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        planner.estimate_config(MLP((8, 8, 8, 4)), *args, **FAST, **kwargs)
    with pytest.raises(ValueError, match="device_flops"):
        planner.estimate_config(MLP((8, 8, 4)), 8, 1, 1, device_flops=0, bandwidth=1.0)


def test_scheme_comparison_hand_values():
    model = MLP((64, 64, 10))
    t = planner.scheme_comparison(model, 128, 2)
    p_bytes = model.n_params * 4
    assert t.input_per_device == (128, 64, 128)
    assert t.traffic_per_device == (0, pytest.approx(p_bytes), 128 * 64 * 4)
    act = 128 * (64 + 64 + 10) * 4
    assert t.total_memory[0] == 2 * p_bytes + act
    assert t.total_memory[1] == 2 * 2 * p_bytes + act
    assert t.total_memory[2] == 2 * p_bytes + 128 * ((64 + 64) + (64 + 10)) * 4
    assert t.load_balance[1] == 1.0
    assert t.load_balance[2] == pytest.approx(((8192 + 8192) + (1280 + 2560)) / 2 / (8192 + 8192))
    assert t.limit == (math.inf, 128, 2)
    rel = t.relative()
    assert rel["input_per_device"] == (1.0, 0.5, 1.0)
    assert rel["traffic_per_device"][1] == pytest.approx(1.0)  # ring all-reduce ~ model size
    md = t.to_markdown()
    assert md.count("\n") == 6 and "数据并行" in md


def test_scheme_comparison_memory_approaches_n_for_big_models():
    model = MLP((256,) + (1024,) * 8 + (10,))
    t = planner.scheme_comparison(model, 8, 8)
    assert t.relative()["total_memory"][1] == pytest.approx(8, rel=0.02)
    assert t.relative()["total_memory"][2] == pytest.approx(1, rel=0.02)
    assert np.isclose(t.relative()["traffic_per_device"][1], 2 * 7 / 8)
    with pytest.raises(ValueError, match="devices"):
        planner.scheme_comparison(model, 8, 10)


# ------------------------------------------------------------------ exercises
def test_model_parallel_exercises_accept_the_answer_and_catch_known_mistakes():
    from course_lib.exercises import activations as mem_ex
    from course_lib.exercises import hybrid_parallelism as ex
    from course_lib.exercises import pipeline_parallelism as pp_ex

    assert pp_ex.ex_bubble(4 / 16).correct  # N_p = 5, M = 12: 4 idle slots of 16
    assert not pp_ex.ex_bubble(4 / 12).correct and "M + N_p - 1" in pp_ex.ex_bubble(4 / 12).message
    assert pp_ex.ex_micro_batches(63).correct  # 7 / (M + 7) <= 0.1  <=>  M >= 63
    assert not pp_ex.ex_micro_batches(62).correct
    assert pp_ex.smallest_micro_batches(2, 0.5) == 1
    with pytest.raises(ValueError, match="target"):
        pp_ex.smallest_micro_batches(2, 1.5)
    model = MLP(mem_ex.MEMORY["sizes"])
    bounds = mp.partition_layers(model, 4)
    largest = max(model.layer_range(lo, hi).stop - model.layer_range(lo, hi).start
                  for lo, hi in zip(bounds[:-1], bounds[1:]))
    assert mem_ex.ex_memory_per_device(largest * 8 / 1e6).correct
    assert not mem_ex.ex_memory_per_device(model.n_params * 8 / 4 / 1e6).correct
    assert pp_ex.ex_stash(16 / 4).correct
    best = planner.best_config(
        MLP(ex.BEST_SPLIT["sizes"]), 1024, 32, latency=alpha_beta.NVLINK_LATENCY, **planner.device_parameters()
    )
    assert ex.ex_best_split((best.data, best.pipeline)).correct
    assert not ex.ex_best_split((32, 1)).correct
    assert "not answered" in ex.ex_best_split(None).message



def test_grid_axis_exercises_accept_the_hand_count_and_name_the_usual_mistakes():
    from course_lib.exercises import hybrid_parallelism as ex

    # tensor axis: 48 / 4 = 12 layers per GPU, 32 micro-batches, 4 ring all-reduces of
    # 2048 x 1 x 6144 values x 2 bytes, each 2 x 7/8 of it sent per GPU
    by_hand = 12 * 32 * 4 * 2 * 7 / 8 * (2048 * 6144 * 2) / 1e9
    assert by_hand == pytest.approx(67.645734912)
    assert ex.ex_tensor_axis_gb(by_hand).correct and ex.ex_tensor_axis_gb(67.6).correct
    assert "all the model's layers" in ex.ex_tensor_axis_gb(by_hand * 4).message  # 48 layers, not 12
    assert "one micro-batch" in ex.ex_tensor_axis_gb(by_hand / 32).message
    assert "payload" in ex.ex_tensor_axis_gb(by_hand * 8 / 7 / 2).message
    # data axis: 40e9 / (8 x 8) parameters x 2 bytes = 1.25 GB per device, ring over N_d = 16
    share = 40e9 / 64 * 2
    ms = 1e3 * (2 * 15 / 16 * share / 25e9 + 2 * 15 * 5e-6)
    assert ms == pytest.approx(93.9)
    assert ex.ex_data_axis_ms(ms).correct and ex.ex_data_axis_ms(94).correct
    assert "whole model" in ex.ex_data_axis_ms(ms * 64).message
    assert "sends the buffer once" in ex.ex_data_axis_ms(1e3 * share / 25e9).message
    assert not ex.ex_data_axis_ms(110.1).correct  # a ring over all 1,024 devices


def test_device_parameters_from_the_hardware_table():
    p = planner.device_parameters("a100_sxm_80gb")
    assert p["bandwidth"] == 300e9 and p["memory"] == 80 * 2**30
    assert p["device_flops"] == pytest.approx(0.52 * 312e12)
    with pytest.raises(ValueError, match="device_id"):
        planner.device_parameters("tpuv3_chip")  # no link bandwidth in the table


def test_estimates_are_cached_and_shared_across_batch_and_replicas():
    model = MLP((64, 96, 96, 96, 10))
    kw = dict(FAST, memory=1e9, schedule="gpipe")
    first = planner.estimate_config(model, 512, 4, 2, **kw)
    before = planner._estimate.cache_info()
    again = planner.estimate_config(MLP((64, 96, 96, 96, 10)), 512, 4, 2, **kw)
    assert again is first and planner._estimate.cache_info().hits == before.hits + 1
    fresh = planner._estimate.__wrapped__(model, 512, 4, 2, 1e10, 1e9, 1e-5, 1e9, first.micro_batches,
                                         "gpipe", 0, 1)
    assert fresh == first  # the cache returns what the computation gives
    # half the batch on half the replicas: the same micro-batches, so the same pipeline simulation
    steps = planner._replica_step.cache_info()
    half = planner.estimate_config(model, 256, 2, 2, **kw)
    assert planner._replica_step.cache_info().hits == steps.hits + 1
    assert (half.compute, half.bubble, half.p2p) == (first.compute, first.bubble, first.p2p)
    assert half.allreduce < first.allreduce  # what does depend on N_d is computed anew
    with pytest.raises(ValueError, match="data"):  # arguments are checked before the cache
        planner.estimate_config(model, 4, 8, 1, **kw)


@pytest.mark.parametrize("tensor", [1, 2, 3])
@pytest.mark.parametrize("pipeline", [1, 2, 3])
@pytest.mark.parametrize("batch_size", [7, 64, 1000])
def test_cached_stage_memory_equals_the_memory_model_per_micro_batch(tensor, pipeline, batch_size):
    """The estimate keeps one sample's activation bytes per stage and scales them by the
    micro-batch size: the same integers as :func:`mlp_activation_bytes` at that size."""
    from course_lib.memory import mlp_activation_bytes, model_state_bytes

    model = MLP((64, 96, 96, 96, 10))
    c = planner.estimate_config(model, batch_size, 1, pipeline, tensor=tensor, **FAST, memory=1e12,
                               schedule="gpipe")
    bounds = mp.partition_layers(model, pipeline)
    stages = [MLP(model.sizes[lo : hi + 1]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    held = mp.simulate_uniform(pipeline, c.micro_batches).in_flight()  # GPipe: all M held
    acts = [h * mlp_activation_bytes(s, c.micro_batch_size, tensor=tensor)
            for h, s in zip(held, stages)]
    states = [model_state_bytes(int(n), param_bytes=4, grad_bytes=4, k=0).total  # plain SGD
              for n in planner.stage_params(model, bounds, tensor)]
    assert c.memory_activations == max(acts)
    assert c.memory_params == max(states)
    assert c.memory == max(a + s for a, s in zip(acts, states))


def test_cached_stage_arrays_cannot_be_changed_by_a_caller():
    model = MLP((64, 96, 96, 96, 10))
    _, n_params, params_mem, per_sample = planner._stage_memory(model, 2, 1, 0)
    _, f_flops, b_flops = planner._stage_costs(model, 2, 1)
    for a in (n_params, params_mem, per_sample, f_flops, b_flops):
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 0


@pytest.mark.parametrize("stage, per_param", [(0, 4 + 4 + 8), (1, 4 + 4 + 8 / 4), (2, 4 + 4 / 4 + 8 / 4),
                                              (3, (4 + 4 + 8) / 4)])
def test_zero_stage_shards_the_states_over_the_replicas_by_hand(stage, per_param):
    # MLP (64, 64, 10), float32, Adam (2 states): 4 + 4 + 8 bytes a parameter, N_d = 4 replicas
    model = MLP((64, 64, 10))
    n = 64 * 64 + 64 + 64 * 10 + 10  # 4,810 parameters
    c = planner.estimate_config(model, 100, 4, 1, micro_batches=1, optimizer_states=2, zero_stage=stage, **FAST)
    acts = 25 * (64 + 64 + 10) * 4  # 25 samples per replica: input and both outputs
    assert c.zero_stage == stage
    assert c.memory_params == pytest.approx(per_param * n)  # 76,960 / 48,100 / 33,670 / 19,240 bytes
    assert c.memory == pytest.approx(per_param * n + acts)
    ring = alpha_beta.ring_allreduce_time(4 * n, 4, 1e9, 1e-5)
    assert c.allreduce == pytest.approx(ring * (1.5 if stage == 3 else 1.0))  # stage 3: one more all-gather
    assert c.compute == planner.estimate_config(model, 100, 4, 1, micro_batches=1, optimizer_states=2, **FAST).compute


def test_zero_stage_0_is_the_default_and_one_replica_shards_nothing():
    model = MLP((64,) + (128,) * 4 + (10,))
    kw = dict(micro_batches=4, optimizer_states=1, **FAST)
    assert planner.estimate_config(model, 64, 2, 2, zero_stage=0, **kw) is planner.estimate_config(model, 64, 2, 2, **kw)
    one = [planner.estimate_config(model, 64, 1, 2, zero_stage=s, **kw) for s in range(3)]
    assert len({(c.memory, c.step_time) for c in one}) == 1  # N_d = 1: ZeRO 0-2 change nothing
    z3 = planner.estimate_config(model, 64, 2, 2, zero_stage=3, tensor=2, **kw)
    base = planner.estimate_config(model, 64, 2, 2, tensor=2, **kw)
    assert z3.memory_params == pytest.approx(base.memory_params / 2)  # everything halves on N_d = 2
    assert [c.zero_stage for c in planner.enumerate_configs(model, 64, 4, zero_stage=2, **kw)] == [2, 2, 2]
    with pytest.raises(ValueError, match="zero_stage"):
        planner.estimate_config(model, 64, 2, 2, zero_stage=4, **kw)
    with pytest.raises(TypeError, match="zero_stage"):
        planner.estimate_config(model, 64, 2, 2, zero_stage=1.5, **kw)


def test_hybrid_explorer_names_v_and_the_zero_stage_and_draws_sharded_memory():
    from course_lib.plots.pipeline import hybrid_explorer_figure

    model = MLP((8,) + (16,) * 4 + (4,))
    kw = dict(model=model, batch_size=64, device_counts=(1, 2, 4), memory=1e9, **FAST)
    plain = hybrid_explorer_figure(4, **kw)
    z3 = hybrid_explorer_figure(4, virtual_stages=2, zero_stage=3, **kw)
    assert "ZeRO" not in plain.axes[0].get_title() and "v =" not in plain.axes[0].get_title()
    assert ", v = 2, ZeRO stage 3:" in z3.axes[0].get_title()
    configs = planner.enumerate_configs(model, 64, 4, memory=1e9, virtual_stages=2, zero_stage=3, **FAST)
    ax_m = next(ax for ax in z3.axes if ax.get_ylabel().startswith("memory per"))
    tops = [path.vertices[:, 1].max() for coll in ax_m.collections for path in coll.get_paths()]
    assert sorted(tops) == pytest.approx(sorted(c.memory / 1e9 for c in configs))  # the sharded states
