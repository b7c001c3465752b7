"""course_lib.cost: hand-derived values, bad input, properties, doctests."""

import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import course_lib.cost as cost
from course_lib.cost import (
    FLOPS_PER_MAC,
    conv2d_macs,
    device_hours,
    human_duration,
    linear_macs,
    mlp_training_flops,
    required_efficiency,
    sequence_tokens,
    training_time,
    transformer_training_flops,
)
from course_lib.models import MLP
from course_lib.rate import measure_flop_rate

positive = st.floats(1e-3, 1e12, allow_nan=False, allow_infinity=False)
effs = st.floats(1e-3, 1.0, allow_nan=False)


def test_doctests():
    result = doctest.testmod(cost)
    assert result.attempted > 10 and result.failed == 0


# ------------------------------------------------------------------ training_time
def test_training_time_hand_values():
    # 1e6 samples x 1e9 FLOPs = 1e15 FLOPs; at 1e12 FLOP/s: 1000 s
    assert training_time(1e6, 1e9, 1e12) == 1000.0
    # 8 devices at 50% efficiency = 4 effective devices
    assert training_time(1e6, 1e9, 1e12, devices=8, efficiency=0.5) == 250.0
    assert training_time(0, 1e9, 1e12) == 0.0
    assert type(training_time(1, 1, 1)) is float


def test_training_time_broadcasts():
    out = training_time(1e6, 1e9, 1e12, devices=np.array([[1], [2]]), efficiency=[1.0, 0.5])
    assert out.shape == (2, 2)
    np.testing.assert_allclose(out, [[1000, 1000], [500, 1000]])  # eta(1) = 1


@pytest.mark.parametrize("eta", [0.01, 0.5, 1.0])
def test_one_device_ignores_the_efficiency(eta):
    """eta(1) = 1: one device has nothing to communicate, so T(N = 1) = D C / r for any eta."""
    assert training_time(1e6, 1e9, 1e12, devices=1, efficiency=eta) == 1000.0
    assert training_time(1e6, 1e9, 1e12, 1, eta) == training_time(1e6, 1e9, 1e12, 1, 1.0)
    # ... but from N = 2 on it applies: 1e15 FLOP / (1e12 x 2 x eta)
    assert training_time(1e6, 1e9, 1e12, devices=2, efficiency=eta) == pytest.approx(500.0 / eta)
    est = cost.estimate_training(1e6, 1e9, 1e12, devices=1, efficiency=eta)
    assert est.seconds == 1000.0 and est.efficiency == 1.0 and "x 1 x 1)" in est.summary()
    assert cost.estimate_training(1e6, 1e9, 1e12, devices=2, efficiency=eta).efficiency == eta


def test_calculator_estimates_on_one_device_ignore_the_efficiency():
    """At eta = 0.01 one device used to take 100x the ideal time; now it takes the ideal time."""
    from course_lib.datasets import load_dnn_models, load_hardware

    models, hardware = load_dnn_models(), load_hardware()
    cnn = [cost.cnn_calculator_estimate("ResNet-50", 1.0, 1, "v100_sxm2_32gb", 1, 0.5, eta,
                                        models=models, hardware=hardware) for eta in (0.01, 1.0)]
    assert cnn[0].seconds == cnn[1].seconds
    # by hand: 1e6 images x 6 x 4.089e9 FLOP / (0.5 x 125e12 FLOP/s)
    assert cnn[0].seconds == pytest.approx(1e6 * 6 * 4.089e9 / 62.5e12)
    tf = [cost.transformer_calculator_estimate(340, 42598, "v100_sxm3_32gb", 1, 0.3, eta,
                                               hardware=hardware) for eta in (0.01, 1.0)]
    assert tf[0].seconds == tf[1].seconds == pytest.approx(42598e6 * 6 * 340e6 / (0.3 * 131e12))
    two = cost.transformer_calculator_estimate(340, 42598, "v100_sxm3_32gb", 2, 0.3, 0.01,
                                               hardware=hardware)
    assert two.seconds == pytest.approx(tf[1].seconds / (2 * 0.01))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(samples=-1), "samples"),
        (dict(flops_per_sample=-1), "flops_per_sample"),
        (dict(device_flops=0), "device_flops"),
        (dict(devices=0), "devices"),
        (dict(devices=0.5), "devices"),
        (dict(efficiency=0.0), "efficiency"),
        (dict(efficiency=1.5), "efficiency"),
        (dict(efficiency=-0.1), "efficiency"),
        (dict(samples=math.nan), "samples"),
        (dict(device_flops=math.inf), "device_flops"),
    ],
)
def test_training_time_bad_values(kwargs, name):
    args = dict(samples=1e6, flops_per_sample=1e9, device_flops=1e12) | kwargs
    with pytest.raises(ValueError, match=name):
        training_time(**args)


@pytest.mark.parametrize("bad", ["10", None, True, 1 + 2j])
def test_training_time_bad_types(bad):
    with pytest.raises(TypeError, match="samples"):
        training_time(bad, 1e9, 1e12)


def test_training_time_shape_mismatch_named():
    with pytest.raises(ValueError, match="devices"):
        training_time([1, 2, 3], 1.0, 1.0, devices=[1, 2])


@given(positive, positive, positive, st.integers(2, 100_000), effs, st.integers(2, 64))
@settings(max_examples=60, deadline=None)
def test_training_time_inverse_in_devices_and_efficiency(d, c, r, n, eta, k):
    t = training_time(d, c, r, devices=n, efficiency=eta)
    assert training_time(d, c, r, devices=n * k, efficiency=eta) == pytest.approx(t / k, rel=1e-12)
    assert training_time(d, c, r, devices=n, efficiency=eta / k) == pytest.approx(t * k, rel=1e-12)
    # only the product r N eta matters
    assert training_time(d, c, r * n * eta) == pytest.approx(t, rel=1e-12)
    # linear in data size and per-sample compute
    assert training_time(k * d, c, r, n, eta) == pytest.approx(k * t, rel=1e-12)
    assert training_time(d, k * c, r, n, eta) == pytest.approx(k * t, rel=1e-12)


@given(positive, positive, positive, st.integers(2, 100_000), effs)
@settings(max_examples=40, deadline=None)
def test_required_efficiency_inverts_training_time(d, c, r, n, eta):
    t = training_time(d, c, r, devices=n, efficiency=eta)
    assert required_efficiency(d, c, r, n, t) == pytest.approx(eta, rel=1e-12)


def test_required_efficiency_bad_time():
    with pytest.raises(ValueError, match="time"):
        required_efficiency(1, 1, 1, 1, time=0)


def test_device_hours():
    assert device_hours(3600, 8) == 8.0
    assert device_hours(47 * 60, 1472) == pytest.approx(1472 * 47 / 60)
    with pytest.raises(ValueError, match="seconds"):
        device_hours(-1)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0 s"),
        (5e-6, "5 µs"),
        (0.0125, "12.5 ms"),
        (1.0, "1 s"),
        (59.0, "59 s"),
        (90.0, "1.5 min"),
        (47 * 60.0, "47 min"),
        (2 * 3600.0, "2 h"),
        (36 * 86400.0, "36 days"),
        (2.5 * 365.25 * 86400, "2.5 years"),
    ],
)
def test_human_duration(seconds, text):
    assert human_duration(seconds) == text


def test_human_duration_bad_input():
    with pytest.raises(ValueError, match="seconds"):
        human_duration(-1.0)
    with pytest.raises(TypeError, match="seconds"):
        human_duration([1.0, 2.0])
    with pytest.raises(ValueError, match="digits"):
        human_duration(1.0, digits=0)


# ------------------------------------------------------------------ FLOP counts
def test_transformer_flops_hand_values():
    assert transformer_training_flops(1, 1) == 6.0
    assert transformer_training_flops(340e6, 1e9) == pytest.approx(2.04e18)
    np.testing.assert_allclose(transformer_training_flops([1, 2], 10), [60, 120])
    with pytest.raises(ValueError, match="params"):
        transformer_training_flops(-1, 1)
    with pytest.raises(ValueError, match="tokens"):
        transformer_training_flops(1, -1)


@given(positive, positive, st.floats(0.01, 100))
@settings(max_examples=40, deadline=None)
def test_6nd_linear_in_both(n, d, k):
    f = transformer_training_flops(n, d)
    assert transformer_training_flops(k * n, d) == pytest.approx(k * f, rel=1e-12)
    assert transformer_training_flops(n, k * d) == pytest.approx(k * f, rel=1e-12)


def test_6nd_matches_a_linear_layer_count():
    # A stack of linear layers (no attention) is exactly what 6ND counts: per token,
    # forward = 2 MAC-FLOPs per weight, backward twice that.
    sizes = [(512, 2048), (2048, 512)]
    params = sum(i * o for i, o in sizes)
    tokens = 1000
    forward = FLOPS_PER_MAC * sum(linear_macs(i, o, batch=tokens) for i, o in sizes)
    assert transformer_training_flops(params, tokens) == 3 * forward


def test_sequence_tokens_bert_phases():
    # BERT pre-training: 1M steps of 256 sequences, 90% at length 128, 10% at 512
    tokens = sequence_tokens([900_000, 100_000], 256, [128, 512]).sum()
    assert tokens == 900_000 * 256 * 128 + 100_000 * 256 * 512
    with pytest.raises(ValueError, match="batch_size"):
        sequence_tokens(1, -1, 1)


def test_linear_macs():
    assert linear_macs(64, 32) == 64 * 32
    assert linear_macs(3, 5, batch=7) == 105
    with pytest.raises(ValueError, match="in_features"):
        linear_macs(0, 3)
    with pytest.raises(TypeError, match="out_features"):
        linear_macs(3, 2.5)
    with pytest.raises(ValueError, match="batch"):
        linear_macs(3, 3, batch=0)


def test_linear_macs_agrees_with_the_running_example():
    model = MLP((64, 32, 16, 10))
    forward = FLOPS_PER_MAC * sum(
        linear_macs(a, b) for a, b in zip(model.sizes[:-1], model.sizes[1:], strict=False)
    )
    assert forward == model.flops_per_sample()["forward"]


def _conv_macs_by_loops(ci, co, k, h, w, stride, pad, groups, batch):
    """Independent reference: count the MACs of a direct convolution loop."""
    ho = (h + 2 * pad - k) // stride + 1
    wo = (w + 2 * pad - k) // stride + 1
    count = 0
    for _b in range(batch):
        for oc in range(co):
            g = oc // (co // groups)
            for _y in range(ho):
                for _x in range(wo):
                    for _ic in range(g * (ci // groups), (g + 1) * (ci // groups)):
                        count += k * k
    return count


@pytest.mark.parametrize(
    ("ci", "co", "k", "h", "w", "stride", "pad", "groups", "batch"),
    [
        (3, 2, 2, 3, 3, 1, 0, 1, 1),  # the chapter's im2col figure
        (4, 6, 3, 7, 5, 2, 1, 1, 2),
        (4, 4, 3, 6, 6, 1, 1, 4, 1),  # depthwise
        (6, 4, 1, 5, 5, 1, 0, 2, 3),
    ],
)
def test_conv2d_macs_against_loops(ci, co, k, h, w, stride, pad, groups, batch):
    got = conv2d_macs(ci, co, k, (h, w), stride=stride, padding=pad, groups=groups, batch=batch)
    assert got == _conv_macs_by_loops(ci, co, k, h, w, stride, pad, groups, batch)


def test_conv2d_macs_known_layers():
    # ResNet-50 conv1: 112 x 112 outputs x 64 channels x (3 x 7 x 7) MACs
    assert conv2d_macs(3, 64, 7, 224, stride=2, padding=3) == 112 * 112 * 64 * 3 * 49
    # im2col GEMM sizes M x K x N
    b, ho, wo, ci, kh, kw, co = 8, 14, 14, 256, 3, 3, 256
    assert conv2d_macs(ci, co, 3, 14, padding=1, batch=b) == (b * ho * wo) * (ci * kh * kw) * co
    # dilation 2 with a 3x3 kernel covers 5x5
    assert conv2d_macs(1, 1, 3, 5, dilation=2) == 9


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        (dict(in_channels=0), ValueError, "in_channels"),
        (dict(groups=3), ValueError, "groups"),
        (dict(kernel_size=(3, 3, 3)), ValueError, "kernel_size"),
        (dict(kernel_size=9), ValueError, "kernel_size"),
        (dict(stride=0), ValueError, "stride"),
        (dict(padding=-1), ValueError, "padding"),
        (dict(input_size=2.0), TypeError, "input_size"),
    ],
)
def test_conv2d_macs_bad_input(kwargs, exc, name):
    args = dict(in_channels=4, out_channels=4, kernel_size=3, input_size=8) | kwargs
    with pytest.raises(exc, match=name):
        conv2d_macs(**args)


def test_mlp_training_flops():
    model = MLP((64, 64, 10))
    assert mlp_training_flops(model, 100) == 100 * model.flops_per_sample()["total"]
    with pytest.raises(TypeError, match="model"):
        mlp_training_flops("mlp", 1)


# ------------------------------------------------------------------ measurement
def test_measure_flop_rate_is_consistent():
    from course_lib.datasets import load_digits

    d = load_digits("train")
    model = MLP((64, 32, 10))
    m = measure_flop_rate(model, d.x[:256], d.y[:256], batch_size=64, repeat=2, warmup=0)
    assert m.samples == 256 and m.batch_size == 64
    assert m.flops_per_epoch == 256 * model.flops_per_sample()["total"]
    assert m.rate == pytest.approx(m.flops_per_epoch / m.timing.median)
    # the prediction for E epochs is E times the measured epoch (by construction of r)
    assert m.predict_time(10) == pytest.approx(10 * m.timing.median)
    assert "GFLOP/s" in repr(m)


def test_measure_flop_rate_bad_input():
    from course_lib.datasets import load_digits

    d = load_digits("test")
    model = MLP((64, 8, 10))
    with pytest.raises(ValueError, match="batch_size"):
        measure_flop_rate(model, d.x, d.y, batch_size=0)
    with pytest.raises(ValueError, match="x must have shape"):
        measure_flop_rate(model, d.x[:, :10], d.y)
    with pytest.raises(ValueError, match="lr"):
        measure_flop_rate(model, d.x, d.y, lr=-1.0)
    with pytest.raises(TypeError, match="model"):
        measure_flop_rate(object(), d.x, d.y)


def test_bert_large_recipe():
    from course_lib.cost import BERT_LARGE

    tokens = 900_000 * 256 * 128 + 100_000 * 256 * 512
    assert BERT_LARGE.tokens == tokens
    assert BERT_LARGE.flops == pytest.approx(6 * 340e6 * tokens)
    assert BERT_LARGE.flops_per_token == 6 * 340e6
    assert BERT_LARGE.sequences == 256 * 1_000_000  # batch 256 for 1M steps, both phases
    assert "1810.04805" in BERT_LARGE.source


def test_bert_large_time_on_a_device_hand_derived():
    """The one BERT-time helper: 6 P D over the device's sustained rate (peak x fraction)."""
    from course_lib.cost import BERT_LARGE
    from course_lib.datasets import get_device

    v100 = get_device("v100_sxm3_32gb")
    tokens = 900_000 * 256 * 128 + 100_000 * 256 * 512
    one = 6 * 340e6 * tokens / (v100.peak_tflops * 1e12 * v100.sustained_fraction)
    assert BERT_LARGE.time_on("v100_sxm3_32gb") == pytest.approx(one, rel=1e-12)
    assert BERT_LARGE.time_on(v100) == BERT_LARGE.time_on("v100_sxm3_32gb")
    assert BERT_LARGE.time_on(v100, 8, 0.5) == pytest.approx(one / 4, rel=1e-12)
    assert BERT_LARGE.time_on(v100, 1, 0.5) == BERT_LARGE.time_on(v100)  # eta(1) = 1
    with pytest.raises(TypeError, match="device must be a device_id or a row"):
        BERT_LARGE.time_on(39.3e12)
    with pytest.raises(ValueError, match="devices"):
        BERT_LARGE.time_on(v100, 0)


def test_time_training_run_and_threads():
    from course_lib.datasets import load_digits
    from course_lib.rate import time_training_run

    d = load_digits("test")
    model = MLP((64, 8, 10))
    assert time_training_run(model, d.x, d.y, epochs=1, batch_size=64) > 0
    assert time_training_run(model, d.x, d.y, epochs=1, batch_size=64, threads=None) > 0
    with pytest.raises(ValueError, match="epochs"):
        time_training_run(model, d.x, d.y, epochs=0)
    with pytest.raises(ValueError, match="threads"):
        measure_flop_rate(model, d.x, d.y, threads=0)


def test_measure_gemm_rate():
    from course_lib.rate import measure_gemm_rate

    assert measure_gemm_rate(64, repeat=2) > 0
    with pytest.raises(ValueError, match="size"):
        measure_gemm_rate(8)


# ------------------------------------------------------------------ chapters 03 and 04 exercises
def test_training_cost_exercises_accept_hand_answers_and_explain_mistakes():
    from course_lib.exercises import training_cost as ex

    assert ex.ex1_training_flops(1.8e9 * 2 * 3)  # 1 MAC = 2 FLOPs, training = 3 x forward
    assert "MACs" in ex.ex1_training_flops(1.8e9 * 3).message
    # 53 minutes: 6 x 340M x 4.26e10 FLOP / (0.3 x 131 TFLOP/s x 1472 x 3180 s)
    tokens = 900_000 * 256 * 128 + 100_000 * 256 * 512
    assert ex.ex3_efficiency_53min(6 * 340e6 * tokens / (0.3 * 131e12 * 1472 * 53 * 60))
    # ResNet-50: 4.089 GMACs; 90 x 1,281,167 images; 32 x 0.8 x 0.3 x 125 TFLOP/s
    hours = 90 * 1_281_167 * 6 * 4.089e9 / (0.3 * 125e12 * 32 * 0.8) / 3600
    assert ex.ex2_resnet_hours(hours)
    assert "device-hours" in ex.ex2_resnet_hours(32 * hours).message
    # one V100 SXM2: 6 x 340M x tokens / (0.3 x 125 TFLOP/s), in days; the peak rate is a named mistake
    days = 6 * 340e6 * tokens / (0.3 * 125e12) / 86400
    assert ex.ex4_v100_sxm2_days(days) and not ex.ex4_v100_sxm2_days(0.3 * days)
    assert "sustained" in ex.ex4_v100_sxm2_days(0.3 * days).message
    for fn in (ex.ex1_training_flops, ex.ex2_resnet_hours, ex.ex3_efficiency_53min, ex.ex4_v100_sxm2_days):
        assert "not answered" in fn(None).message


def test_large_batches_exercises_accept_hand_answers_and_explain_mistakes():
    from course_lib.exercises import large_batches as ex

    assert ex.EX1_SCALING == {"base_batch": 1024, "base_lr": 0.3, "batch": 8192}
    assert ex.ex1_scaled_lr(0.3 * 8) and not ex.ex1_scaled_lr(0.3 * math.sqrt(8))
    assert "square-root" in ex.ex1_scaled_lr(0.3 * math.sqrt(8)).message
    # D(B) / D_min = 1 + B / B_crit = 1 + 16384 / 4096; the steps' ratio 1.25 is a named mistake
    assert ex.EX2_SETUP == {"n_min": 2000, "b_crit": 4096, "batch": 16384}
    assert ex.ex2_samples_at_large_batch(5) and "STEPS" in ex.ex2_samples_at_large_batch(1.25).message
    # per iteration: 1284 min / 250k iterations on 64 chips; 101.2 min / 15.6k on 1,024
    assert ex.EX3_ITERATION == {"devices": 1024, "baseline": 64}
    assert ex.ex3_iteration_efficiency((1284 * 60 / 250_000) / (101.2 * 60 / 15_600))
    # another job: 100,000 iterations on 64, 256 and 1,024 chips at 32 per chip, so
    # 0.2e9, 0.8e9 and 3.3e9 samples: work that grows with the chips (the LAMB table's: Amdahl)
    assert ex.EX4_JOB == {"chips": (64, 256, 1024), "batch_per_chip": 32, "iterations": 100_000}
    assert ex.ex4_which_law("Gustafson") and not ex.ex4_which_law("Amdahl")
    for fn in (ex.ex1_scaled_lr, ex.ex2_samples_at_large_batch, ex.ex3_iteration_efficiency, ex.ex4_which_law):
        assert "not answered" in fn(None).message


def test_compute_optimal_by_hand():
    """Chinchilla's rule D = 20 P with C = 6PD: P = sqrt(C / 120), D = 20 P (Hoffmann et al. 2022)."""
    from course_lib.cost import compute_optimal, transformer_training_flops

    assert compute_optimal(120e18) == (1e9, 20e9)  # 6 x 20 x (1e9)^2
    params, tokens = compute_optimal(6 * 70e9 * 1.4e12)  # the paper's own model: 70B on 1.4T tokens
    assert params == pytest.approx(70e9) and tokens == pytest.approx(1.4e12)
    assert compute_optimal(6 * 4 * 1e6**2, tokens_per_param=4) == pytest.approx((1e6, 4e6))
    assert compute_optimal(0.0) == (0.0, 0.0) and isinstance(compute_optimal(1e20)[0], float)
    budget = np.array([1e20, 8.69e19, 2.7e24])  # BERT-Large's and Megatron-LM 1T's budgets too
    params, tokens = compute_optimal(budget)
    np.testing.assert_allclose(transformer_training_flops(params, tokens), budget, rtol=1e-12)
    np.testing.assert_allclose(tokens / params, 20.0)
    with pytest.raises(ValueError, match="compute_flops"):
        compute_optimal(-1.0)
    with pytest.raises(ValueError, match="tokens_per_param"):
        compute_optimal(1e20, tokens_per_param=0)


def test_six_pd_terms_of_bert_large_by_hand():
    """6PD = 6 x 340e6 x D; the embedding tables (30,522 + 512 + 2) x 1,024 are charged
    6 FLOPs per token; attention adds 12 l s h per token at each phase's length s."""
    from course_lib.cost import BERT_LARGE

    tokens_128, tokens_512 = 900_000 * 256 * 128, 100_000 * 256 * 512
    t = BERT_LARGE.six_pd_terms()
    assert t["six_pd"] == pytest.approx(6 * 340e6 * (tokens_128 + tokens_512))
    assert t["embeddings"] == pytest.approx(6 * 31_780_864 * (tokens_128 + tokens_512))
    assert t["attention"] == pytest.approx(12 * 24 * 1024 * (128 * tokens_128 + 512 * tokens_512))
    assert t["products"] == pytest.approx(t["six_pd"] - t["embeddings"] + t["attention"])
    assert 0.03 < t["attention"] / t["six_pd"] < 0.04 and 0.09 < t["embeddings"] / t["six_pd"] < 0.1


def test_six_pd_terms_need_the_architecture():
    from course_lib.cost import PretrainingRecipe

    bare = PretrainingRecipe("x", 1e6, (10,), (2,), (8,), "test")
    with pytest.raises(ValueError, match="layers, hidden and embedding_params"):
        bare.six_pd_terms()
