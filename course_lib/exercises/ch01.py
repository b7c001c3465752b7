"""Exercises of chapter 01 (from serial to parallel).

Expected values come from ``data/`` through :mod:`course_lib.datasets` and from
:mod:`course_lib.cost`; nothing is typed in.
"""

from __future__ import annotations

from .. import cost
from ..datasets import get_device, load_cpu_trends, load_dnn_models, load_training_records
from . import Result, check, checker

__all__ = [
    "bert_flops",
    "ex1_resnet50_gflops",
    "ex2_frequency_growth",
    "ex3_v100_days",
    "ex4_implied_efficiency",
    "ex5_measured_efficiency",
]


def bert_flops() -> float:
    """Training FLOPs of BERT-Large by 6 x parameters x tokens (:data:`cost.BERT_LARGE`)."""
    recipe = cost.BERT_LARGE
    return cost.transformer_training_flops(recipe.params, recipe.tokens)


def ex1_resnet50_gflops(answer) -> Result:
    """FLOPs (not MACs) of one ResNet-50 forward pass, in GFLOPs."""
    model = {m.model: m for m in load_dnn_models()}["ResNet-50"]
    return check(
        answer,
        model.gflops_per_forward,
        name="ResNet-50 forward pass",
        unit="GFLOPs",
        hint="the figure's axis counts multiply-accumulates; each is 2 FLOPs.",
        mistakes={model.gmacs_per_forward: "That is the multiply-accumulate count (the figure's "
                  "'G-FLOPs'). One MAC is a multiply and an add: 2 FLOPs."},
    )


def _max_frequency(after: bool, year: float = 2005.0) -> float:
    f = load_cpu_trends()["frequency_mhz"]
    mask = f.year >= year if after else f.year < year
    return float(f.value[mask].max())


def ex2_frequency_growth(answer) -> Result:
    """Highest clock frequency in the data from 2005 on, divided by the highest before 2005."""
    before, after = _max_frequency(False), _max_frequency(True)
    return check(
        answer,
        after / before,
        name="growth of the highest clock frequency after 2005",
        rtol=0.02,
        hint="trends = load_cpu_trends(); f = trends['frequency_mhz']; compare f.value where "
             "f.year >= 2005 with f.value where f.year < 2005 (the maxima).",
        mistakes={before / after: "Upside down: divide the later maximum by the earlier one."},
    )


def _bert_seconds(device_id: str, devices: int = 1, efficiency: float = 1.0) -> float:
    recipe = cost.BERT_LARGE
    flops = bert_flops()
    device = get_device(device_id)
    return cost.training_time(recipe.tokens, flops / recipe.tokens, device.sustained_flops,
                              devices, efficiency)


def ex3_v100_days(answer) -> Result:
    """Days one V100 SXM2 needs for BERT-Large at its sustained rate from data/hardware.csv."""
    days = _bert_seconds("v100_sxm2_32gb") / 86400
    device = get_device("v100_sxm2_32gb")
    return check(
        answer,
        days,
        name="BERT-Large on one V100",
        unit="days",
        rtol=0.03,
        hint=f"T = 6 P D / r with r = {device.sustained_fraction:g} x "
             f"{device.peak_tensor_tflops:g} TFLOP/s; divide seconds by 86,400.",
        mistakes={days * device.sustained_fraction: "That assumes the peak rate; use the "
                  "sustained rate (peak x sustained_fraction)."},
    )


def _nvidia_record():
    return next(r for r in load_training_records() if r.record_id == "nvidia_2019_47min")


def ex4_implied_efficiency(answer) -> Result:
    """Parallel efficiency implied by NVIDIA's 47 minutes on 1,472 V100 SXM3 (1 = perfect)."""
    rec = _nvidia_record()
    recipe = cost.BERT_LARGE
    eta = cost.required_efficiency(recipe.tokens, bert_flops() / recipe.tokens,
                                   get_device("v100_sxm3_32gb").sustained_flops, rec.devices,
                                   rec.time_minutes * 60)
    return check(
        answer,
        eta,
        name="implied parallel efficiency",
        rtol=0.03,
        hint="η = (time on one GPU) / (N x measured time); the one-GPU time comes from 6PD / r.",
    )


@checker
def ex5_measured_efficiency(answer, measurement) -> Result:
    """Parallel efficiency of YOUR measurement at its largest process count."""
    n = int(measurement.processes[-1])
    eta = float(measurement.efficiency[-1])
    return check(
        answer,
        eta,
        name=f"efficiency with {n} processes",
        rtol=0.02,
        hint="η = S / N with S = serial time / time with N processes.",
        mistakes={float(measurement.speedup[-1]): "That is the speedup S; divide it by N."},
    )
