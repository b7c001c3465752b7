"""Review quiz of chapter 16 (summary): one question per idea of chapters 01-14.

Every expected value is computed by the course library (scaling laws, the training-time
model, the communication model, im2col's GEMM sizes, the pipeline bubble, the chapter's
comparison of schemes) from the inputs stated in each question, which live here as
constants; ``tests/test_notebooks.py`` checks that notebook 14's question texts state them.
"""

from __future__ import annotations

from ..alpha_beta import data_parallel_efficiency
from ..conv.im2col import gemm_sizes
from ..cost import BERT_LARGE, training_time
from ..datasets import get_device
from ..i18n import tr
from ..models import MLP
from ..planner import scheme_comparison
from ..scaling import amdahl_limit, devices_needed, gustafson_to_amdahl, karp_flatt, speedup
from ..schedule import bubble_fraction
from . import Result, check, check_count

__all__ = [
    "Q1_TIMES",
    "Q2",
    "Q3",
    "Q4",
    "Q5",
    "Q6_CONV1",
    "Q7",
    "Q8",
    "ex1_limit_from_measurement",
    "ex2_devices_needed",
    "ex3_gustafson_to_amdahl",
    "ex4_bert_days",
    "ex5_weak_scaling_efficiency",
    "ex6_conv1_gemm",
    "ex7_1f1b_bubble",
    "ex8_more_traffic",
]

SECONDS_PER_DAY = 86_400.0

#: Question 1: run times (s) of one job on 1 and on 4 devices (an example measurement).
Q1_TIMES = {"t1": 100.0, "t4": 28.0, "devices": 4}
#: Question 2: parallel fraction and target speedup.
Q2 = {"p": 0.97, "target": 20.0}
#: Question 3: parallel fraction measured on a weak-scaling run on ``devices`` devices.
Q3 = {"p": 0.9, "devices": 32}
#: Question 4: BERT-Large (cost.BERT_LARGE, 6PD FLOPs) on A100s (data/hardware.csv).
Q4 = {"device_id": "a100_sxm_40gb", "devices": 8, "efficiency": 0.9}
#: Question 5: data-parallel step of BERT-Large, float32 gradients; example link and compute.
Q5 = {"compute_s": 0.4, "devices": 64, "bandwidth": 100e9, "latency": 10e-6,
      "nbytes": 4 * BERT_LARGE.params}
#: Question 6: ResNet-50's first convolution (He et al., CVPR 2016, table 1: 7x7, 64
#: filters, stride 2 on 224x224 RGB images; padding 3 as in torchvision) on a batch of 32.
Q6_CONV1 = {"batch": 32, "image": 224, "kernel": 7, "stride": 2, "c_in": 3, "c_out": 64, "padding": 3}
#: Question 7: a 1F1B pipeline.
Q7 = {"stages": 6, "micro_batches": 24}
#: Question 8: the table of the source's section 6.2.4 (表6-3-1) for a deeper running example on 4 devices.
Q8 = {"sizes": (64, 1024, 1024, 1024, 10), "batch_size": 4096, "devices": 4}


def ex1_limit_from_measurement(answer) -> Result:
    """Amdahl limit implied by the Karp-Flatt serial fraction of :data:`Q1_TIMES`."""
    s = speedup(Q1_TIMES["t1"], Q1_TIMES["t4"])
    e = karp_flatt(s, Q1_TIMES["devices"])
    return check(
        answer,
        amdahl_limit(1.0 - e),
        name=tr("largest speedup"),
        hint=tr("S = T1/T4; the Karp-Flatt serial fraction e = (1/S - 1/N) / (1 - 1/N); "
                "Amdahl's limit is 1/e."),
        mistakes={
            s: tr("That is the measured speedup on 4 devices, not the limit for many devices."),
            1.0 / (1.0 - s / Q1_TIMES["devices"]): tr("1 - S/N is not the serial fraction: use "
                                                      "the Karp-Flatt formula."),
        },
    )


def ex2_devices_needed(answer) -> Result:
    """Fewest devices that reach the speedup ``Q2["target"]`` when ``p = Q2["p"]``."""
    return check_count(
        answer,
        devices_needed(Q2["p"], Q2["target"]),
        name=tr("devices needed"),
        unit="devices",
        hint=tr("solve 1/((1-p) + p/N) >= target for N, then round UP to a whole device."),
    )


def ex3_gustafson_to_amdahl(answer) -> Result:
    """Amdahl's ``p`` (of the serial run) of a weak-scaling run with ``p = Q3["p"]`` on ``Q3["devices"]``."""
    return check(
        answer,
        gustafson_to_amdahl(Q3["p"], Q3["devices"]),
        rtol=5e-4,
        name=tr("parallel fraction of the serial run"),
        hint=tr("on one device the parallel part takes N times as long: p' = pN / ((1-p) + pN)."),
        mistakes={Q3["p"]: tr("p of the parallel run is not p of the serial run: the serial "
                              "run does the parallel part's N-fold work on ONE device.")},
    )


def ex4_bert_days(answer) -> Result:
    """Days of BERT-Large pre-training on ``Q4["devices"]`` A100s at their sustained rate."""
    dev = get_device(Q4["device_id"])
    days = training_time(BERT_LARGE.tokens, BERT_LARGE.flops_per_token, dev.sustained_flops,
                         Q4["devices"], Q4["efficiency"]) / SECONDS_PER_DAY
    peak = training_time(BERT_LARGE.tokens, BERT_LARGE.flops_per_token, dev.peak_tflops * 1e12,
                         Q4["devices"], Q4["efficiency"]) / SECONDS_PER_DAY
    return check(
        answer,
        days,
        rtol=0.02,
        name=tr("BERT-Large on {devices} {device}", devices=Q4["devices"], device=dev.device),
        unit="days",
        hint=tr("T = D x C / (r x N x η) with D = BERT_LARGE.tokens, C = 6P FLOPs per token and "
                "r = get_device({device}).sustained_flops; divide seconds by 86,400.",
                device=repr(Q4["device_id"])),
        mistakes={
            days * Q4["efficiency"]: tr("You left out the parallel efficiency η = {efficiency}.",
                                        efficiency=f"{Q4['efficiency']:g}"),
            peak: tr("That uses the peak rate; training sustains only a fraction of it."),
        },
    )


def ex5_weak_scaling_efficiency(answer) -> Result:
    """Weak-scaling efficiency of a data-parallel step with the ring all-reduce of :data:`Q5`."""
    args = (Q5["compute_s"], Q5["devices"], Q5["nbytes"], Q5["bandwidth"], Q5["latency"])
    return check(
        answer,
        data_parallel_efficiency(*args, scaling="weak"),
        rtol=2e-3,  # 0.935 will do; leaving out the latency gives 0.937 (0.29% more)
        name=tr("weak-scaling efficiency"),
        hint=tr("η = t_c / (t_c + T_ring) with T_ring = 2 (N-1)/N · m/β + 2 (N-1) α."),
        mistakes={
            data_parallel_efficiency(*args, scaling="strong"): tr("That is the strong-scaling "
                                                                  "efficiency: here every device keeps its own "
                                                                  "batch (weak scaling)."),
            data_parallel_efficiency(*args[:-1], 0.0, scaling="weak"): tr("Latency left out: the "
                                                                          "ring's 2 (N-1) steps each wait α as "
                                                                          "well."),
        },
    )


def _conv1(**change) -> tuple[int, int, int]:
    q = {**Q6_CONV1, **change}
    s = gemm_sizes(q["batch"], q["image"], q["kernel"], q["stride"], q["c_in"], q["c_out"], q["padding"])
    return (s["M"], s["K"], s["N"])


def ex6_conv1_gemm(answer) -> Result:
    """GEMM sizes (ℳ, 𝒦, 𝒩) of ResNet-50's first convolution, batch 32 (:data:`Q6_CONV1`)."""
    return check(
        answer,
        _conv1(),
        rtol=0,
        name=tr("GEMM sizes (ℳ, 𝒦, 𝒩)"),
        hint=tr("ℳ = B x H_o x W_o, 𝒦 = C_i x k_h x k_w, 𝒩 = C_o; H_o = "
                "(H + 2 x padding - k_h) // stride + 1."),
        mistakes={
            _conv1(padding=0): tr("You left out the padding."),
            _conv1(stride=1): tr("You left out the stride."),
        },
    )


def ex7_1f1b_bubble(answer) -> Result:
    """Bubble share of a 1F1B step with ``Q7["stages"]`` stages and ``Q7["micro_batches"]`` micro-batches."""
    s, m = Q7["stages"], Q7["micro_batches"]
    return check(
        answer,
        bubble_fraction(s, m),
        rtol=3e-3,  # three significant digits (0.172) will do
        name=tr("bubble share"),
        hint=tr("1F1B changes the order of the work, not the idle time: (N_p-1)/(M+N_p-1)."),
        mistakes={(s - 1) / m: tr("The step lasts M + N_p - 1 slots, not M: divide by M + N_p - 1.")},
    )


def ex8_more_traffic(answer) -> Result:
    """Which scheme's busiest device sends more bytes per step in the table of section 6.2.4 (表6-3-1) for :data:`Q8`:
    ``"data parallel"`` or ``"model parallel"``?"""
    table = scheme_comparison(MLP(Q8["sizes"]), Q8["batch_size"], Q8["devices"])
    _, data, model = table.traffic_per_device
    return check(
        answer,
        "model parallel" if model > data else "data parallel",
        name=tr("more traffic"),
        hint=tr("data parallelism all-reduces the gradients (model size, whatever the batch); "
                "model parallelism passes activations and their gradients (they grow with the batch). "
                "Answer 'data parallel' or 'model parallel'."),
    )
