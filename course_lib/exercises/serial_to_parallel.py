"""Exercises of chapter 01 (from serial to parallel).

Expected values come from ``data/`` through :mod:`course_lib.datasets` and from
:mod:`course_lib.cost`; nothing is typed in. The givens of exercises 1 and 2 are module
constants, so the notebook can print them, and neither can be read off a table the chapter
prints: exercise 1 asks about a model the chapter's table leaves out, exercise 2 about two
spans of years the table of section 2 does not split off. Exercises 3 and 4 take the learner's OWN givens (a model, a
device, a deadline of their choice) as keyword arguments and compute the expected answer from
them; exercise 5 takes the learner's own measurement and asks for what its table does not
print: the capacity that overhead took, N - S processes.
"""

from __future__ import annotations

import math

from .. import cost
from .._validate import check_positive, check_real
from ..datasets import load_cpu_trends, load_dnn_models
from ..i18n import tr
from . import Result, check, check_count, checker, shown_tolerance

__all__ = [
    "EX1_BATCH",
    "EX2_PERIODS",
    "EX5_SHOWN_DECIMALS",
    "bert_flops",
    "ex1_batch_gflops",
    "ex2_frequency_growth",
    "ex3_own_training_days",
    "ex4_devices_for_deadline",
    "ex5_measured_efficiency",
]


def bert_flops() -> float:
    """Training FLOPs of BERT-Large by 6 x parameters x tokens (:data:`cost.BERT_LARGE`)."""
    recipe = cost.BERT_LARGE
    return cost.transformer_training_flops(recipe.params, recipe.tokens)


#: Givens of :func:`ex1_batch_gflops`: the model (a row of ``data/dnn_models.csv`` that the
#: chapter's table does not print) and the images of one batch.
EX1_BATCH = {"model": "ResNet-101", "images": 64}


def ex1_batch_gflops(answer) -> Result:
    """FLOPs (not MACs) of the forward pass of :data:`EX1_BATCH`'s model over its batch, in GFLOPs."""
    model = {m.model: m for m in load_dnn_models()}[EX1_BATCH["model"]]
    images = EX1_BATCH["images"]
    return check(
        answer,
        images * model.gflops_per_forward,
        name=tr("{model} forward pass over {images} images", model=model.model, images=images),
        unit="GFLOPs",
        hint=tr("the figure's axis counts multiply-accumulates per image; each is 2 FLOPs, and every "
                "image of the batch costs a forward pass."),
        mistakes={
            images * model.gmacs_per_forward: tr("That is the multiply-accumulate count (the figure's "
                                                 "'G-FLOPs'). One MAC is a multiply and an add: 2 FLOPs."),
            model.gflops_per_forward: tr("That is one image; the batch has {images}.", images=images),
            model.gmacs_per_forward: tr("That is the MACs of one image: count FLOPs (2 per MAC), for "
                                        "all {images} images.", images=images),
        },
    )


#: Givens of :func:`ex2_frequency_growth`: two spans of years of processors, each [start, end);
#: the highest clock of the later one is divided by the highest of the earlier one.
EX2_PERIODS = {"earlier": (1995, 2000), "later": (2000, 2005)}


def _max_frequency(years: tuple[int, int]) -> float:
    f = load_cpu_trends()["frequency_mhz"]
    lo, hi = years
    return float(f.value[(f.year >= lo) & (f.year < hi)].max())


def ex2_frequency_growth(answer) -> Result:
    """Highest clock frequency of :data:`EX2_PERIODS`' later span over that of its earlier one.

    The growth as a percent is a named slip: ``'579%'`` is read as the fraction 5.79, the
    growth (ratio - 1), not the ratio; ``579`` typed as a number is the percent itself.
    """
    (lo0, hi0), (lo1, hi1) = EX2_PERIODS["earlier"], EX2_PERIODS["later"]
    before, after = _max_frequency(EX2_PERIODS["earlier"]), _max_frequency(EX2_PERIODS["later"])
    ratio = after / before
    growth = ratio - 1
    if isinstance(answer, str) and "%" in answer:
        as_growth = tr("A percentage was read as a fraction: {typed} is {growth}, the growth (ratio - 1). The "
                       "question asks for the ratio of the two maxima, 1 + growth = {ratio}: give that number "
                       "(or '{percent}').", typed=repr(answer.strip()), growth=f"{growth:.3g}",
                       ratio=f"{ratio:.3g}", percent=f"{100 * ratio:.0f}%")
    else:
        as_growth = tr("That is the growth, ratio - 1. The question asks for the ratio of the two maxima, "
                       "1 + growth = {ratio}: give that number (or '{percent}').", ratio=f"{ratio:.3g}",
                       percent=f"{100 * ratio:.0f}%")
    return check(
        answer,
        ratio,
        name=tr("growth of the highest clock frequency, {earlier} to {later}", earlier=f"{lo0}-{hi0 - 1}",
                later=f"{lo1}-{hi1 - 1}"),
        rtol=0.02,
        hint=tr("f = load_cpu_trends()['frequency_mhz']; take the maximum of f.value where "
                "{lo1} <= f.year < {hi1} and divide it by the maximum where {lo0} <= f.year < {hi0}.",
                lo0=lo0, hi0=hi0, lo1=lo1, hi1=hi1),
        mistakes={
            1 / ratio: tr("Upside down: divide the later maximum by the earlier one."),
            growth: as_growth,
            100 * growth: tr("That is the growth in percent ({percent}); the question asks for the ratio of the "
                             "two maxima, a plain number: 1 + {growth}.", percent=f"{100 * growth:.0f}%",
                             growth=f"{growth:.3g}"),
        },
    )


_DAY = 86400.0


def _unanswered_or_missing(answer, name: str, **givens) -> Result | None:
    """Feedback before any computing: no answer yet, or the learner's givens still None."""
    if answer is None or answer is Ellipsis:
        return check(answer, 0.0, name=name)  # "not answered yet"
    if any(v is None for v in givens.values()):
        return Result(False, tr("✗ {name}: set your own givens first ({givens} are still None); the check "
                                "computes the answer from them.", name=name, givens=", ".join(givens)))
    return None


@checker
def ex3_own_training_days(answer, *, params=None, tokens=None, sustained_tflops=None) -> Result:
    """Days ONE device needs to train a transformer of YOUR choice: T = 6 P D / r.

    The givens are the learner's own: ``params`` (P) and ``tokens`` (D) of a model they
    pick, ``sustained_tflops`` (r, TFLOP/s) of a device they pick at a utilisation they assume.
    """
    name = tr("training time on one device")
    early = _unanswered_or_missing(answer, name, params=params, tokens=tokens,
                                   sustained_tflops=sustained_tflops)
    if early is not None:
        return early
    P, D = check_positive(params, "params"), check_positive(tokens, "tokens")
    r = check_positive(sustained_tflops, "sustained_tflops") * 1e12
    days = cost.training_time(D, cost.transformer_training_flops(P, 1), r) / _DAY
    return check(
        answer,
        days,
        name=name,
        unit="days",
        rtol=0.03,
        hint=tr("work = 6 x P x D FLOPs; time = work / (r in FLOP/s); then seconds / 86,400."),
        mistakes={
            days / 3: tr("A third of the answer: that is the forward pass only (2PD). Training "
                         "adds the backward pass (4PD): 6PD in all."),
            days / 6: tr("A sixth of the answer: count 6 FLOPs per parameter and token, not 1."),
            days * _DAY: tr("That is seconds; the question asks for days."),
            days * 24: tr("That is hours; the question asks for days."),
            days * 1e12: tr("The rate is in TFLOP/s: 1 TFLOP/s = 10^12 FLOP/s."),
        },
    )


@checker
def ex4_devices_for_deadline(answer, *, one_device_days=None, deadline_days=None,
                             efficiency=None) -> Result:
    """Fewest devices that finish YOUR run by YOUR deadline: T(N) = T(1) / (N η) <= deadline.

    The givens are the learner's own: ``one_device_days`` (their answer to exercise 3),
    ``deadline_days`` and the parallel ``efficiency`` η in (0, 1] they assume.
    """
    name = tr("devices needed")
    early = _unanswered_or_missing(answer, name, one_device_days=one_device_days,
                                   deadline_days=deadline_days, efficiency=efficiency)
    if early is not None:
        return early
    t1 = check_positive(one_device_days, "one_device_days")
    deadline = check_positive(deadline_days, "deadline_days")
    eta = check_real(efficiency, "efficiency", 0.0, 1.0, low_open=True)
    needed = max(1, math.ceil(t1 / (deadline * eta) - 1e-9))  # a whole device, rounded up
    ideal = max(1, math.ceil(t1 / deadline - 1e-9))
    mistakes = {} if ideal == needed else {
        ideal: tr("That assumes perfect efficiency (η = 1); divide by N x η, not by N.")}
    return check_count(answer, needed, name=name, unit="devices", mistakes=mistakes,
                       hint=tr("solve T(1) / (N x η) <= deadline for N and round UP to a whole device."))


#: Exercise 5: decimals of the paired S and of the efficiency in the measurement's table
#: (``SpeedupMeasurement.table``): an answer computed from those rounded numbers is right too.
EX5_SHOWN_DECIMALS = {"speedup": 2, "efficiency": 2}


@checker
def ex5_measured_efficiency(answer, measurement) -> Result:
    """Capacity YOUR measurement lost to overhead at its largest process count, in processes.

    ``N`` processes at efficiency ``η`` deliver ``S = η N`` times the serial speed, so
    ``N - S = N (1 - η)`` processes' worth of capacity went to overhead. The table prints S
    and η, not this; an answer from either as printed is accepted.
    """
    n = int(measurement.processes[-1])
    s, eta = float(measurement.speedup[-1]), float(measurement.efficiency[-1])
    d_s, d_eta = EX5_SHOWN_DECIMALS["speedup"], EX5_SHOWN_DECIMALS["efficiency"]
    accept = {n - round(s, d_s): tr("from S = {speedup} as printed", speedup=f"{s:.{d_s}f}"),
              n * (1 - round(eta, d_eta)): tr("from η = {efficiency} as printed", efficiency=f"{eta:.{d_eta}f}")}
    return check(
        answer,
        n - s,
        name=tr("capacity lost to overhead with {n} processes", n=n),
        unit="processes",
        rtol=0,
        atol=shown_tolerance(d_s),
        accept=accept,
        hint=tr("N processes at efficiency η deliver S = η N times the serial speed; the rest of "
                "the N, N - S = N (1 - η), went to overhead."),
        mistakes={
            eta: tr("That is the efficiency η itself; the question asks how many of the N processes' "
                    "capacity it leaves unused: N (1 - η)."),
            s: tr("That is the speedup S: the capacity that turned into speed. Subtract it from N."),
            1 - eta: tr("That is the share 1 - η; multiply it by the N processes."),
        },
    )
