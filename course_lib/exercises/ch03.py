"""Exercises of chapter 03 (training cost). Expected values come from course_lib.

Each function checks one answer; the question is in its docstring and in the notebook.
The givens of each exercise are module constants, so the notebook can print them; none of
them is a case the chapter has already printed the answer of (the calculator's defaults, the
linear-scaling example of section 6, the efficiency column of the LAMB table).
"""

from __future__ import annotations

from ..cost import (
    BERT_LARGE,
    IMAGENET_TRAIN_IMAGES,
    required_efficiency,
    training_flops_per_sample,
    training_time,
)
from ..critical_batch import CriticalBatchFit
from ..datasets import get_device, lamb_scaling_table, load_dnn_models, load_training_records
from ..optim import linear_scaling_rule, sqrt_scaling_rule
from . import Result, check

__all__ = [
    "EX2_SETUP",
    "EX4_SCALING",
    "EX5_ITERATION",
    "EX8_SETUP",
    "ex1_training_flops",
    "ex2_resnet_hours",
    "ex3_efficiency_53min",
    "ex4_scaled_lr",
    "ex5_iteration_efficiency",
    "ex6_which_law",
    "ex7_v100_sxm2_days",
    "ex8_samples_at_large_batch",
]

#: Exercise 2: ResNet-50, ImageNet-1k, 90 epochs, 32 V100 (SXM2), utilisation 0.3, efficiency 0.8
#: (not the calculator's defaults of section 3, whose answer it prints).
EX2_SETUP = {"model": "ResNet-50", "epochs": 90, "device_id": "v100_sxm2_32gb", "devices": 32,
             "utilisation": 0.3, "efficiency": 0.8}

#: Exercise 4: a batch that trains well at a learning rate, and the larger batch asked about.
EX4_SCALING = {"base_batch": 1024, "base_lr": 0.3, "batch": 8192}

#: Exercise 5: the LAMB run (chips) whose time per iteration is compared with a baseline run's.
EX5_ITERATION = {"devices": 1024, "baseline": 64}


#: Exercise 8: a run with n_min steps and critical batch b_crit, trained at batch ``batch``.
EX8_SETUP = {"n_min": 2000, "b_crit": 4096, "batch": 16384}


def ex1_training_flops(answer) -> Result:
    """Training FLOPs per image of a model with 1.8 GMACs per forward pass (backward = 2x forward)."""
    macs = 1.8e9
    expected = training_flops_per_sample(macs)
    return check(
        answer,
        expected,
        name="training FLOPs per image",
        unit="FLOP",
        hint="1 MAC = 2 FLOPs, and forward + backward = 3 x forward.",
        mistakes={
            3 * macs: "That counts MACs, not FLOPs: multiply by 2 (one multiply + one add).",
            2 * macs: "That is the forward pass only; the backward pass costs about twice as much.",
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
        name="training time",
        unit="h",
        hint="D = images x epochs; C = 2 x 3 x GMACs x 1e9; r = peak x utilisation; "
        "T = D C / (r N η), then divide the seconds by 3600.",
        mistakes={
            expected / 2: "Half the answer: the data set counts MACs, and 1 MAC = 2 FLOPs.",
            expected / 3: "A third of the answer: training (forward + backward) costs about 3x "
            "the forward pass.",
            expected * s["devices"]: "That is device-hours, not hours of wall-clock time.",
            expected * 3600: "That is seconds; the question asks for hours.",
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
        name="implied parallel efficiency",
        hint="η = D C / (r N T) with T = 53 x 60 s, the same D, C and r as for the 47 minutes.",
        mistakes={1 / expected: "That is the inverse: η = ideal time / actual time <= 1."},
    )


def ex4_scaled_lr(answer) -> Result:
    """Linear-scaling learning rate for the batch of :data:`EX4_SCALING`."""
    g = EX4_SCALING
    args = (g["base_lr"], g["base_batch"], g["batch"])
    return check(
        answer,
        linear_scaling_rule(*args),
        name=f"learning rate for batch {g['batch']:,}",
        hint=f"multiply the rate by the batch ratio {g['batch']} / {g['base_batch']}.",
        mistakes={
            sqrt_scaling_rule(*args): "That is the square-root rule; the linear scaling rule "
            "multiplies by the batch ratio itself.",
            g["base_lr"] * g["base_batch"] / g["batch"]: "Upside down: a larger batch takes a "
            "LARGER rate, multiplied by the batch ratio.",
        },
    )


def _iteration_times():
    t = lamb_scaling_table()
    per_iter = t["time_minutes"] * 60.0 / t["iterations"]
    return t, per_iter


def ex5_iteration_efficiency(answer) -> Result:
    """Weak-scaling efficiency of one LAMB iteration, t_iter(baseline) / t_iter(chips) of :data:`EX5_ITERATION`."""
    t, per_iter = _iteration_times()
    chips = [int(c) for c in t["devices"]]
    i0, i = chips.index(EX5_ITERATION["baseline"]), chips.index(EX5_ITERATION["devices"])
    expected = per_iter[i0] / per_iter[i]
    base, big = f"{chips[i0]:,}", f"{chips[i]:,}"
    return check(
        answer,
        expected,
        name=f"per-iteration efficiency at {big} chips relative to {base}",
        hint=f"time per iteration = minutes x 60 / iterations, for the {base}-chip and the "
        f"{big}-chip row.",
        mistakes={
            per_iter[i] / per_iter[i0]: f"Inverted: the efficiency is t({base}) / t({big}) <= 1.",
            per_iter[0] / per_iter[i]: f"That compares with the {chips[0]}-chip run; the question "
            f"compares with the {base}-chip run.",
        },
    )


def ex6_which_law(answer) -> Result:
    """Which law describes the whole JOB down the LAMB table (time-to-train): "Amdahl" or "Gustafson"?

    Chapter 02 asked about one step (the batch per chip is fixed: Gustafson). Here the
    samples column decides: if batch x iterations stays (about) the same, the work of the
    job is fixed and more chips split it ever finer.
    """
    t, _ = _iteration_times()
    samples = t["global_batch_size"] * t["iterations"]
    spread = float(samples.max() / samples.min())
    expected = "Amdahl" if spread < 1.1 else "Gustafson"  # a growing job would double them with the chips
    other = "Gustafson" if expected == "Amdahl" else "Amdahl"
    return check(
        answer,
        expected,
        name="scaling law of the whole job",
        hint="look at the samples (global batch x iterations) down the table: does the job's "
        "total work grow with the chips, or is a fixed amount of work split ever finer? "
        "Answer 'Amdahl' or 'Gustafson'.",
        mistakes={other: "That is the law of one step (the batch per chip is fixed). The question "
                  "asks about the whole run: look at the samples column."},
    )


def ex7_v100_sxm2_days(answer) -> Result:
    """Days BERT-Large's recipe takes on ONE V100 SXM2 at its sustained rate in data/hardware.csv."""
    device = get_device("v100_sxm2_32gb")
    seconds = training_time(BERT_LARGE.tokens, BERT_LARGE.flops_per_token, device.sustained_flops)
    days = seconds / 86400.0
    return check(
        answer,
        days,
        name="BERT-Large on one V100 SXM2",
        unit="days",
        rtol=0.03,
        hint="T = 6PD / r with r = peak x sustained_fraction of the v100_sxm2_32gb row; "
             "divide the seconds by 86,400.",
        mistakes={
            days * device.sustained_fraction: "That assumes the peak rate; use the sustained rate "
                                              "(peak x sustained_fraction).",
            seconds: "That is seconds; the question asks for days.",
        },
    )


def ex8_samples_at_large_batch(answer) -> Result:
    """Samples to the target at batch ``EX8_SETUP["batch"]``, as a multiple of the minimum D_min."""
    s = EX8_SETUP
    fit = CriticalBatchFit(float(s["n_min"]), float(s["b_crit"]))
    ratio = s["batch"] * fit.steps(s["batch"]) / fit.d_min  # D(B) / D_min = 1 + B / B_crit
    return check(
        answer,
        ratio,
        name="samples relative to the minimum",
        hint="D(B) = B x n_steps(B) = D_min (1 + B / B_crit).",
        mistakes={
            fit.steps(s["batch"]) / fit.n_min: "That is the ratio of the STEPS, n_steps(B) / n_min; "
                                               "the question asks for the samples.",
            s["batch"] / s["b_crit"]: "Almost: D(B) / D_min = 1 + B / B_crit.",
        },
    )
