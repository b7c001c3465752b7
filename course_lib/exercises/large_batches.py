"""Exercises of chapter 04 (large batches). Expected values come from course_lib.

Each function checks one answer; the question is in its docstring and in the notebook
``notebooks/04_large_batches.ipynb``. The givens of each exercise are module constants, so
the notebook can print them; none of them is a case the chapter has already printed the
answer of (the linear-scaling example of section 1, the efficiency column of the LAMB
table).
"""

from __future__ import annotations

from ..critical_batch import CriticalBatchFit
from ..datasets import lamb_scaling_table
from ..optim import linear_scaling_rule, sqrt_scaling_rule
from . import Result, check

__all__ = [
    "EX1_SCALING",
    "EX2_SETUP",
    "EX3_ITERATION",
    "ex1_scaled_lr",
    "ex2_samples_at_large_batch",
    "ex3_iteration_efficiency",
    "ex4_which_law",
]

#: Exercise 1: a batch that trains well at a learning rate, and the larger batch asked about.
EX1_SCALING = {"base_batch": 1024, "base_lr": 0.3, "batch": 8192}

#: Exercise 2: a run with n_min steps and critical batch b_crit, trained at batch ``batch``.
EX2_SETUP = {"n_min": 2000, "b_crit": 4096, "batch": 16384}

#: Exercise 3: the LAMB run (chips) whose time per iteration is compared with a baseline run's.
EX3_ITERATION = {"devices": 1024, "baseline": 64}


def ex1_scaled_lr(answer) -> Result:
    """Linear-scaling learning rate for the batch of :data:`EX1_SCALING`."""
    g = EX1_SCALING
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


def ex2_samples_at_large_batch(answer) -> Result:
    """Samples to the target at batch ``EX2_SETUP["batch"]``, as a multiple of the minimum D_min."""
    s = EX2_SETUP
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


def _iteration_times():
    t = lamb_scaling_table()
    per_iter = t["time_minutes"] * 60.0 / t["iterations"]
    return t, per_iter


def ex3_iteration_efficiency(answer) -> Result:
    """Weak-scaling efficiency of one LAMB iteration, t_iter(baseline) / t_iter(chips) of :data:`EX3_ITERATION`."""
    t, per_iter = _iteration_times()
    chips = [int(c) for c in t["devices"]]
    i0, i = chips.index(EX3_ITERATION["baseline"]), chips.index(EX3_ITERATION["devices"])
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


def ex4_which_law(answer) -> Result:
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
