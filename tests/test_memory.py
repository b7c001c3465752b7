"""course_lib.memory: ZeRO model states, activation memory, recomputation; course_lib.megatron: the
Megatron-LM rows those counts recompute."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import megatron
from course_lib import memory as mem
from course_lib.datasets import get_device, load_hardware, load_megatron_configs
from course_lib.models import MLP

HW = load_hardware()


# ------------------------------------------------------------------ model states (ZeRO)
def test_zero_paper_figure_1():
    """Rajbhandari et al. 2020, Figure 1: 7.5B parameters, N_d = 64, K = 12."""
    psi = 7.5e9
    totals = [mem.model_state_bytes(psi, 64, k).total for k in mem.ZERO_STAGES]
    assert totals == pytest.approx([16 * psi, 4 * psi + 12 * psi / 64, 2 * psi + 14 * psi / 64, 16 * psi / 64],
                                   rel=1e-15)
    assert totals == pytest.approx([120e9, 31.40625e9, 16.640625e9, 1.875e9], rel=1e-15)
    assert [round(t / 1e9, 1) for t in totals] == [120.0, 31.4, 16.6, 1.9]  # the figure's labels


def test_stages_shard_one_kind_more_each():
    s = [mem.model_state_bytes(1000, 4, k, param_bytes=4, grad_bytes=4, k=4) for k in range(4)]
    assert [(x.parameters, x.gradients, x.optimizer_states) for x in s] == [
        (4000, 4000, 4000), (4000, 4000, 1000), (4000, 1000, 1000), (1000, 1000, 1000)]
    assert "total=9 kB" in repr(s[1])


@given(n=st.floats(0, 1e13), devices=st.integers(1, 4096))
@settings(max_examples=60, deadline=None)
def test_every_stage_saves_and_one_device_saves_nothing(n, devices):
    totals = [mem.model_state_bytes(n, devices, k).total for k in mem.ZERO_STAGES]
    assert all(a >= b for a, b in zip(totals, totals[1:]))
    assert totals[3] == pytest.approx(totals[0] / devices, rel=1e-12, abs=1e-9)
    assert len({mem.model_state_bytes(n, 1, k).total for k in mem.ZERO_STAGES}) == 1


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_params=-1.0), "n_params"),
    (dict(n_params=math.nan), "n_params"),
    (dict(n_params=10**400), "n_params"),
    (dict(n_params=1e9, zero_stage=4), "zero_stage"),
    (dict(n_params=1e9, devices=0), "devices"),
    (dict(n_params=1e9, k=-2), r"^k must"),
])
def test_model_state_bytes_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mem.model_state_bytes(**kwargs)
    with pytest.raises(TypeError, match="zero_stage"):
        mem.model_state_bytes(1e9, 4, True)


# ------------------------------------------------------------------ MLP activations
def test_mlp_activations_are_what_forward_returns():
    model = MLP((64, 32, 32, 10))
    x = np.ones((100, 64), np.float32)
    _, acts = model.forward(model.init_params(0), x)
    assert mem.mlp_activation_bytes(model, 100) == sum(a.nbytes for a in acts) == 100 * 138 * 4


def test_mlp_recomputation_by_hand():
    model = MLP((16, 64, 64, 64, 64, 10))  # layer FLOPs (fwd + bwd) 4096, 24576 x 3, 3840
    from course_lib.schedule import partition_layers

    assert partition_layers(model, 3) == (0, 2, 3, 5)  # stage costs 28672, 24576, 28416
    stored = 16 + 64 + 64  # the input of each of the 3 segments: sizes[0], sizes[2], sizes[3]
    largest = 64 + 10  # recomputed: segment [0, 2) 64 (its output is stored), [2, 3) 0, [3, 5) 64 + logits
    assert mem.mlp_activation_bytes(model, 8, segments=3) == 8 * (stored + largest) * 4
    assert mem.mlp_activation_bytes(model, 8) == 8 * (16 + 4 * 64 + 10) * 4
    assert mem.mlp_activation_bytes(model, 8, segments=1) == mem.mlp_activation_bytes(model, 8)
    assert mem.mlp_activation_bytes(model, 8, segments=5) == mem.mlp_activation_bytes(model, 8)  # all stored


def test_mlp_tensor_activations_match_the_tensor_parallel_forward():
    """A worker of course_lib.parallel.tensor keeps the hidden block of every pair."""
    from course_lib.parallel.tensor import layer_blocks, tensor_forward

    model = MLP((8, 10, 6, 7, 3))
    params = model.init_params(0)
    x = np.ones((5, 8), np.float32)
    for workers in (1, 2, 3):
        shards = layer_blocks(model, workers, 0)  # rank 0 has the largest blocks
        local = []
        for s in shards:
            w, b = model.layer(params, s.layer)
            local.append((w[s.rows, s.cols].copy(), b[s.bias].copy()))
        acts = tensor_forward(local, shards, x, lambda z: z)  # shapes only: no partner
        assert mem.mlp_activation_bytes(model, 5, tensor=workers) == sum(a.nbytes for a in acts)


@given(sizes=st.lists(st.integers(1, 300), min_size=2, max_size=8), batch=st.integers(1, 64),
       data=st.data())
@settings(max_examples=60, deadline=None)
def test_recomputation_and_tensor_never_need_more(sizes, batch, data):
    model = MLP(tuple(sizes))
    full = mem.mlp_activation_bytes(model, batch)
    k = data.draw(st.integers(1, model.n_layers))
    assert mem.mlp_activation_bytes(model, batch, segments=k) <= full
    t = data.draw(st.integers(1, 16))
    assert mem.mlp_activation_bytes(model, batch, tensor=t + 1) <= mem.mlp_activation_bytes(model, batch, tensor=t)
    assert mem.mlp_activation_bytes(model, 2 * batch) == 2 * full


def test_mlp_activation_bytes_rejects_bad_input():
    model = MLP((4, 3, 2))
    with pytest.raises(ValueError, match="segments"):
        mem.mlp_activation_bytes(model, 4, segments=3)
    with pytest.raises(ValueError, match="batch_size"):
        mem.mlp_activation_bytes(model, 0)
    with pytest.raises(TypeError, match="model"):
        mem.mlp_activation_bytes("abc", 4)


# ------------------------------------------------------------------ transformer activations
def test_korthikanti_formulas_by_hand():
    s, b, h, a = 2048, 1, 12288, 96  # GPT-3: 5as/h = 80
    sbh = 2048 * 12288
    assert mem.transformer_activation_bytes(s, b, h, a) == sbh * (34 + 80) == 2_868_903_936
    assert mem.transformer_activation_bytes(s, b, h, a, tensor=8) == sbh * (10 + 3 + 10) == 578_813_952
    assert mem.transformer_activation_bytes(s, b, h, a, recompute="full") == 2 * sbh
    assert mem.transformer_activation_bytes(s, 4, h, a) == 4 * mem.transformer_activation_bytes(s, 1, h, a)


@pytest.mark.parametrize("t", [1, 2, 8])
def test_selective_recomputation_is_korthikanti_table_2(t):
    """Their Table 2, per layer: tensor parallel + selective recompute sbh (10 + 24/t): the attention
    scores' 5as/(ht) are not stored; full recomputation keeps 2sbh; none keeps all three terms."""
    s, b, h, a = 2048, 1, 12288, 96  # GPT-3 175B
    sbh = s * b * h
    selective = mem.transformer_activation_bytes(s, b, h, a, tensor=t, recompute="selective")
    assert selective == pytest.approx(sbh * (10 + 24 / t))
    none = mem.transformer_activation_bytes(s, b, h, a, tensor=t)
    assert none - selective == pytest.approx(sbh * 5 * a * s / (h * t))  # exactly the scores
    assert mem.transformer_activation_bytes(s, b, h, a, tensor=t, recompute="full") == 2 * sbh < selective
    if t == 8:  # GPT-3 on N_t = 8: 13 sbh = 327 MB per layer and sequence, against 23 sbh without
        assert selective == 13 * sbh == 327_155_712


def test_selective_recomputation_costs_little_compute():
    """Selective recomputation runs QK^T and the scores times V again: 4 b L^2 h FLOPs per layer,
    against a training step of 3 (24 b L h^2 + 4 b L^2 h); full recomputation one more forward."""
    s, h = 2048, 12288
    step = 3 * (24 * s * h * h + 4 * s * s * h)
    assert mem.transformer_recompute_ratio(s, h, recompute="selective") == pytest.approx(1 + 4 * s * s * h / step)
    assert mem.transformer_recompute_ratio(s, h, recompute="selective") == pytest.approx(1 + s / (18 * h + 3 * s))
    assert round(mem.transformer_recompute_ratio(s, h, recompute="selective") - 1, 4) == 0.009  # 0.9 %
    assert mem.transformer_recompute_ratio(s, h) == pytest.approx(4 / 3)  # full: one more forward
    assert mem.transformer_recompute_ratio(s, h, recompute="none") == 1.0


@given(t=st.integers(1, 64), s=st.integers(1, 8192), h=st.integers(64, 32768), a=st.integers(1, 256))
@settings(max_examples=60, deadline=None)
def test_tensor_parallelism_shrinks_all_but_ten_sbh(t, s, h, a):
    one = mem.transformer_activation_bytes(s, 1, h, a, tensor=t)
    more = mem.transformer_activation_bytes(s, 1, h, a, tensor=t + 1)
    assert 10 * s * h < more <= one
    assert mem.transformer_activation_bytes(s, 1, h, a, recompute="full") < one


def test_transformer_activation_bytes_rejects_bad_input():
    with pytest.raises(ValueError, match="recompute"):
        mem.transformer_activation_bytes(2048, 1, 1024, 16, recompute="partial")
    with pytest.raises(ValueError, match="recompute"):
        mem.transformer_recompute_ratio(2048, 1024, recompute=True)
    with pytest.raises(ValueError, match="tensor"):
        mem.transformer_activation_bytes(2048, 1, 1024, 16, tensor=0)
    with pytest.raises(TypeError, match="hidden"):
        mem.transformer_activation_bytes(2048, 1, 1024.0, 16)


# ------------------------------------------------------------------ recomputation cost
def test_recompute_ratio_by_hand():
    # forward 2 (64*32 + 32*10) = 4736; backward 4736 + 2 * 320 = 5376 (no input gradient of layer 0)
    assert mem.recompute_flops_ratio(MLP((64, 32, 10))) == (10112 + 4736) / 10112
    deep = MLP((1024,) * 65)  # 64 equal layers: (64 + 127 + 64) / (64 + 127)
    assert mem.recompute_flops_ratio(deep) == pytest.approx(255 / 191)
    assert mem.recompute_flops_ratio(deep) == pytest.approx(4 / 3, rel=0.01)  # one extra forward: +33 %


# ------------------------------------------------------------------ devices
def test_device_fit_uses_the_hardware_table():
    fit = mem.device_fit(7.5e9, 64, 0, "a100_sxm_80gb", hardware=HW)
    assert fit.capacity == get_device("a100_sxm_80gb").memory_bytes == 80 * 2**30  # "80GB" is GiB
    assert (fit.total, fit.fits, fit.verdict) == (120e9, False, "does not fit")
    assert mem.device_fit(7.5e9, 64, 1, "a100_sxm_80gb", hardware=HW).fits
    with_acts = mem.device_fit(7.5e9, 64, 1, "a100_sxm_80gb", hardware=HW, activation_bytes=55e9)
    assert with_acts.total == pytest.approx(86.40625e9) and not with_acts.fits  # 80 GiB = 85.9e9 bytes
    sgd = mem.device_fit(1e9, 1, 0, "v100_sxm2_32gb", hardware=HW, param_bytes=4, grad_bytes=4,
                         k=4)
    assert sgd.total == 12e9 and sgd.fits


def test_device_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="device_id"):
        mem.device_fit(1e9, 1, 0, "no_such_gpu", hardware=HW)
    with pytest.raises(ValueError, match="memory"):
        mem.device_fit(1e9, 1, 0, "xeon_8280_core", hardware=HW)  # no memory size in the table
    with pytest.raises(TypeError, match="byte_sizes"):
        mem.device_fit(1e9, 1, 0, "a100_sxm_80gb", hardware=HW, optimizer_bytes=12)  # the keyword is k
    with pytest.raises(ValueError, match="activation_bytes"):
        mem.device_fit(1e9, 1, 0, "a100_sxm_80gb", hardware=HW, activation_bytes=-1.0)


# ------------------------------------------------------------------ Megatron-LM, Table 1
CONFIGS = {c.model: c for c in load_megatron_configs()}


def test_the_table_has_the_trillion_parameter_row_and_is_consistent():
    assert len(CONFIGS) >= 3 and "1T" in CONFIGS
    peak = get_device("a100_sxm_80gb").peak_tensor_tflops  # 312
    for c in CONFIGS.values():
        assert c.achieved_tflops_per_gpu / peak * 100 == pytest.approx(c.peak_pct, abs=1.0)
        assert c.achieved_tflops_per_gpu * c.gpus / 1e3 == pytest.approx(c.aggregate_pflops, rel=0.01)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_parameter_count_matches_the_table(name):
    c = CONFIGS[name]
    est = megatron.megatron_estimate(c, hardware=HW)
    assert round(est.params / 1e9, 1) == c.params_billion
    layers, h = c.layers, c.hidden_size
    assert est.params == pytest.approx(12 * layers * h * h + 13 * layers * h + (51200 + 2048) * h, rel=1e-12)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_recomputation_is_what_makes_every_row_fit_in_80_gb(name):
    est = megatron.megatron_estimate(CONFIGS[name], hardware=HW)
    assert est.capacity == 80 * 2**30  # the A100 80GB: 80 GiB
    assert not est.fits  # without recomputation the activations overflow the A100 ...
    assert est.fits_with_recompute  # ... with it every configuration fits
    assert est.activations_recompute < est.activations / 5


def test_trillion_parameter_row_by_hand():
    est = megatron.megatron_estimate(CONFIGS["1T"], hardware=HW)
    sbh = 2048 * 1 * 25600
    layer = sbh * (10 + 24 / 8 + 5 * 160 * 2048 / (25600 * 8))  # = 21 sbh
    assert layer == 21 * sbh
    held = min(64, 3072 // 6) * (128 // 64)  # p micro-batches in flight x 2 layers per stage
    assert (est.data_parallel, est.micro_batches, held) == (6, 512, 128)
    assert est.activations == pytest.approx(held * layer)  # 140.9 GB
    assert est.activations_recompute == pytest.approx(held * 2 * sbh + layer)  # 14.5 GB
    assert est.states.total == pytest.approx(16 * 1_008_038_707_200 / 512)  # 31.5 GB
    f = 96 * 3072 * 2048 * 128 * 25600**2 * (1 + 2048 / (6 * 25600) + 51200 / (16 * 128 * 25600))
    assert est.flops_per_iteration == pytest.approx(f)
    assert est.iteration_time == pytest.approx(f / (3072 * 163e12))
    # the paper's estimate: 450 billion tokens in about 84 days (equation 4, 8TP/(nX))
    days = 450e9 / est.tokens_per_second / 86400
    assert days == pytest.approx(84, rel=0.03)


def test_interleaved_rows_hold_more_activations():
    c = CONFIGS["530B"]  # 3 layers per stage, 1 per model chunk: factor 1 + 34 / (35 * 3)
    est = megatron.megatron_estimate(c, hardware=HW)
    layer = mem.transformer_activation_bytes(2048, 1, 20480, 128, tensor=8)
    assert est.activations == pytest.approx(35 * 3 * (1 + 34 / 105) * layer)


def test_loader_checks_that_the_parallel_sizes_divide(tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    from course_lib.datasets import DataFileError

    data = Path(__file__).resolve().parent.parent / "data"
    shutil.copytree(data, tmp_path / "data")
    monkeypatch.setenv("DDL_COURSE_DATA", str(tmp_path / "data"))
    path = tmp_path / "data" / "megatron_configs.csv"
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[-2] = lines[-2].replace(",8,64,3072,", ",8,64,3000,")  # the 1T row: 3000 GPUs, not a multiple of 512
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(DataFileError, match="megatron_configs.csv, line 11"):
        load_megatron_configs()


def test_megatron_estimate_rejects_bad_input():
    with pytest.raises(TypeError, match="config"):
        megatron.megatron_estimate({"model": "1T"}, hardware=HW)
    with pytest.raises(ValueError, match="layers"):
        megatron.megatron_params(0, 1024)
    with pytest.raises(TypeError, match="hidden"):
        megatron.megatron_iteration_flops(8, 24, math.nan)
