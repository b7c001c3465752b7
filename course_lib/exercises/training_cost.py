"""Exercises of chapter 03 (training cost). Expected values come from course_lib.

Each function checks one answer; the question is in its docstring and in the notebook
``notebooks/03_training_cost.ipynb``. The givens of each exercise are module constants
or data rows, so the notebook can print them; none of them is a case the chapter has
already printed the answer of (the calculator's defaults, the 47-minute record, the
V100 SXM3 of the record).
"""

from __future__ import annotations

from ..cost import (
    BERT_LARGE,
    IMAGENET_TRAIN_IMAGES,
    required_efficiency,
    training_flops_per_sample,
    training_time,
)
from ..datasets import get_device, load_dnn_models, load_training_records
from ..i18n import tr
from . import Result, check

__all__ = [
    "EX2_SETUP",
    "ex1_training_flops",
    "ex2_resnet_hours",
    "ex3_efficiency_53min",
    "ex4_v100_sxm2_days",
]

#: Exercise 2: ResNet-50, ImageNet-1k, 90 epochs, 32 V100 (SXM2), utilisation 0.3, efficiency 0.8
#: (not the calculator's defaults of section 3, whose answer it prints).
EX2_SETUP = {"model": "ResNet-50", "epochs": 90, "device_id": "v100_sxm2_32gb", "devices": 32,
             "utilisation": 0.3, "efficiency": 0.8}


def ex1_training_flops(answer) -> Result:
    """Training FLOPs per image of a model with 1.8 GMACs per forward pass (backward = 2x forward)."""
    macs = 1.8e9
    expected = training_flops_per_sample(macs)
    return check(
        answer,
        expected,
        name=tr("training FLOPs per image"),
        unit="FLOP",
        hint=tr("1 MAC = 2 FLOPs, and forward + backward = 3 x forward."),
        mistakes={
            3 * macs: tr("That counts MACs, not FLOPs: multiply by 2 (one multiply + one add)."),
            2 * macs: tr("That is the forward pass only; the backward pass costs about twice as much."),
        },
    )


def _ex2_expected() -> float:
    s = EX2_SETUP
    model = next(m for m in load_dnn_models() if m.model == s["model"])
    device = get_device(s["device_id"])
    seconds = training_time(
        IMAGENET_TRAIN_IMAGES * s["epochs"],
        training_flops_per_sample(model.gmacs_per_forward * 1e9),
        device.peak_tflops * 1e12 * s["utilisation"],
        s["devices"],
        s["efficiency"],
    )
    return seconds / 3600.0


def ex2_resnet_hours(answer) -> Result:
    """Hours to train ResNet-50 for 90 ImageNet epochs on 32 V100s (see ``EX2_SETUP``)."""
    expected = _ex2_expected()
    s = EX2_SETUP
    return check(
        answer,
        expected,
        name=tr("training time"),
        unit="h",
        hint=tr("D = images x epochs; C = 2 x 3 x GMACs x 1e9; r = peak x utilisation; "
                "T = D C / (r N η), then divide the seconds by 3600."),
        mistakes={
            expected / 2: tr("Half the answer: the data set counts MACs, and 1 MAC = 2 FLOPs."),
            expected / 3: tr("A third of the answer: training (forward + backward) costs about 3x "
                             "the forward pass."),
            expected * s["devices"]: tr("That is device-hours, not hours of wall-clock time."),
            expected * 3600: tr("That is seconds; the question asks for hours."),
        },
    )


def _ex3_expected() -> float:
    rec = next(r for r in load_training_records() if r.record_id == "nvidia_2019_53min")
    device = get_device("v100_sxm3_32gb")
    return required_efficiency(
        BERT_LARGE.tokens, BERT_LARGE.flops_per_token, device.sustained_flops,
        rec.devices, rec.time_minutes * 60.0,
    )


def ex3_efficiency_53min(answer) -> Result:
    """Parallel efficiency implied by the first announcement (53 minutes on 1,472 V100s)."""
    expected = _ex3_expected()
    return check(
        answer,
        expected,
        name=tr("implied parallel efficiency"),
        hint=tr("η = D C / (r N T) with T = 53 x 60 s, the same D, C and r as for the 47 minutes."),
        mistakes={1 / expected: tr("That is the inverse: η = ideal time / actual time <= 1.")},
    )


def ex4_v100_sxm2_days(answer) -> Result:
    """Days BERT-Large's recipe takes on ONE V100 SXM2 at its sustained rate in data/hardware.csv."""
    device = get_device("v100_sxm2_32gb")
    seconds = training_time(BERT_LARGE.tokens, BERT_LARGE.flops_per_token, device.sustained_flops)
    days = seconds / 86400.0
    return check(
        answer,
        days,
        name=tr("BERT-Large on one V100 SXM2"),
        unit="days",
        rtol=0.03,
        hint=tr("T = 6PD / r with r = peak x sustained_fraction of the v100_sxm2_32gb row; "
                "divide the seconds by 86,400."),
        mistakes={
            days * device.sustained_fraction: tr("That assumes the peak rate; use the sustained rate "
                                                 "(peak x sustained_fraction)."),
            seconds: tr("That is seconds; the question asks for days."),
        },
    )
