"""Exercises of chapter 04 (large batches). Expected values come from course_lib.

Each function checks one answer; the question is in its docstring and in the notebook
``notebooks/04_large_batches.ipynb``. The givens of each exercise are module constants, so
the notebook can print them; none of them is a case the chapter has already printed the
answer of (the linear-scaling example of section 1, the efficiency column of the LAMB
table, the law of the LAMB table's whole job that chapters 02 and 04 state).
"""

from __future__ import annotations

from ..critical_batch import CriticalBatchFit
from ..datasets import lamb_scaling_table
from ..i18n import tr
from ..optim import linear_scaling_rule, sqrt_scaling_rule
from . import Result, check
from .scaling_laws import _law_name  # "Gustafson's law" -> "gustafson"

__all__ = [
    "EX1_SCALING",
    "EX2_SETUP",
    "EX3_ITERATION",
    "EX4_JOB",
    "ex1_scaled_lr",
    "ex2_samples_at_large_batch",
    "ex3_iteration_efficiency",
    "ex4_which_law",
]

#: Exercise 1: a batch that trains well at a learning rate, and the larger batch asked about.
EX1_SCALING = {"base_batch": 1024, "base_lr": 0.3, "batch": 8192}

#: Exercise 2: a run with n_min steps and critical batch b_crit, trained at batch ``batch``.
EX2_SETUP = {"n_min": 2000, "b_crit": 4096, "batch": 16384}

#: Exercise 3: the LAMB run (chips) whose time per step is compared with a baseline run's.
EX3_ITERATION = {"devices": 1024, "baseline": 64}

#: Exercise 4: another job, not the LAMB table's: the same batch per chip on more chips, but
#: the same number of iterations in every run.
EX4_JOB = {"chips": (64, 256, 1024), "batch_per_chip": 32, "iterations": 100_000}


def ex1_scaled_lr(answer) -> Result:
    """Linear-scaling learning rate for the batch of :data:`EX1_SCALING`."""
    g = EX1_SCALING
    args = (g["base_lr"], g["base_batch"], g["batch"])
    return check(
        answer,
        linear_scaling_rule(*args),
        name=tr("learning rate for batch {batch}", batch=f"{g['batch']:,}"),
        hint=tr("multiply the rate by the batch ratio {batch} / {base}.", batch=g["batch"], base=g["base_batch"]),
        mistakes={
            sqrt_scaling_rule(*args): tr("That is the square-root rule; the linear scaling rule "
                                         "multiplies by the batch ratio itself."),
            g["base_lr"] * g["base_batch"] / g["batch"]: tr("Upside down: a larger batch takes a "
                                                            "LARGER rate, multiplied by the batch ratio."),
        },
    )


def ex2_samples_at_large_batch(answer) -> Result:
    """Samples to the target at batch ``EX2_SETUP["batch"]``, as a multiple of the minimum D_min."""
    s = EX2_SETUP
    fit = CriticalBatchFit(float(s["n_min"]), float(s["b_crit"]))
    ratio = s["batch"] * fit.steps(s["batch"]) / fit.d_min  # D(B) / D_min = 1 + B / B_crit
    return check(
        answer,
        ratio,
        name=tr("samples relative to the minimum"),
        hint=tr("D(B) = B x n_steps(B) = D_min (1 + B / B_crit)."),
        mistakes={
            fit.steps(s["batch"]) / fit.n_min: tr("That is the ratio of the STEPS, n_steps(B) / n_min; "
                                                  "the question asks for the samples."),
            s["batch"] / s["b_crit"]: tr("Almost: D(B) / D_min = 1 + B / B_crit."),
        },
    )


def _iteration_times():
    t = lamb_scaling_table()
    per_iter = t["time_minutes"] * 60.0 / t["iterations"]
    return t, per_iter


def ex3_iteration_efficiency(answer) -> Result:
    """Weak-scaling efficiency of one LAMB step, t_step(baseline) / t_step(chips) of :data:`EX3_ITERATION`."""
    t, per_iter = _iteration_times()
    chips = [int(c) for c in t["devices"]]
    i0, i = chips.index(EX3_ITERATION["baseline"]), chips.index(EX3_ITERATION["devices"])
    expected = per_iter[i0] / per_iter[i]
    base, big = f"{chips[i0]:,}", f"{chips[i]:,}"
    return check(
        answer,
        expected,
        name=tr("per-step efficiency at {big} chips relative to {base}", big=big, base=base),
        hint=tr("time per step = minutes x 60 / iterations, for the {base}-chip and the {big}-chip row.",
                base=base, big=big),
        mistakes={
            per_iter[i] / per_iter[i0]: tr("Inverted: the efficiency is t({base}) / t({big}) <= 1.", base=base,
                                           big=big),
            per_iter[0] / per_iter[i]: tr("That compares with the {first}-chip run; the question compares with "
                                          "the {base}-chip run.", first=chips[0], base=base),
        },
    )


def _job_samples(job: dict) -> list[int]:
    """Samples (global batch x iterations) of each run of a job like :data:`EX4_JOB`."""
    return [chips * job["batch_per_chip"] * job["iterations"] for chips in job["chips"]]


def ex4_which_law(answer) -> Result:
    """Which law describes the whole JOB of :data:`EX4_JOB` (time-to-train): "Amdahl" or "Gustafson"?

    The LAMB table's job keeps its samples (batch x iterations): a fixed amount of work split
    ever finer, Amdahl (chapter 02, section 4 and this chapter's section 4 say so). This job
    keeps its iterations instead, so its samples grow with the chips: the work grows with the
    devices, Gustafson. The samples decide, as computed here.
    """
    samples = _job_samples(EX4_JOB)
    spread = max(samples) / min(samples)
    expected = "Amdahl" if spread < 1.1 else "Gustafson"  # a growing job multiplies them with the chips
    other = "Gustafson" if expected == "Amdahl" else "Amdahl"
    return check(
        _law_name(answer),
        expected,
        name=tr("scaling law of the whole job"),
        hint=tr("compute the samples (global batch x iterations) of each run: does the job's total "
                "work grow with the chips, or is a fixed amount of work split ever finer? "
                "Answer 'Amdahl' or 'Gustafson'."),
        mistakes={other: tr("That is the law of the LAMB table's job, whose samples stay the same. This "
                            "job keeps its iterations instead: its samples, chips x {batch} x {iterations}, grow "
                            "with the chips.", batch=EX4_JOB["batch_per_chip"],
                            iterations=f"{EX4_JOB['iterations']:,}")
                  if expected == "Gustafson" else tr("That is the law of one step (the batch per chip is "
                                                     "fixed). The question asks about the whole run: look at "
                                                     "the samples.")},
    )
