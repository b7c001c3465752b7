"""Exercises of chapter 01 (from serial to parallel).

Expected values come from ``data/`` through :mod:`course_lib.datasets` and from
:mod:`course_lib.cost`; nothing is typed in. Exercises 3 and 4 take the learner's OWN
givens (a model, a device, a deadline of their choice) as keyword arguments and compute
the expected answer from them; exercise 5 takes the learner's own measurement.
"""

from __future__ import annotations

import math

from .. import cost
from .._validate import check_positive, check_real
from ..datasets import load_cpu_trends, load_dnn_models
from . import Result, check, check_count, checker

__all__ = [
    "bert_flops",
    "ex1_resnet50_gflops",
    "ex2_frequency_growth",
    "ex3_own_training_days",
    "ex4_devices_for_deadline",
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


_DAY = 86400.0


def _unanswered_or_missing(answer, name: str, **givens) -> Result | None:
    """Feedback before any computing: no answer yet, or the learner's givens still None."""
    if answer is None or answer is Ellipsis:
        return check(answer, 0.0, name=name)  # "not answered yet"
    if any(v is None for v in givens.values()):
        return Result(False, f"✗ {name}: set your own givens first ({', '.join(givens)} are "
                             "still None); the check computes the answer from them.")
    return None


@checker
def ex3_own_training_days(answer, *, params=None, tokens=None, sustained_tflops=None) -> Result:
    """Days ONE device needs to train a transformer of YOUR choice: T = 6 P D / r.

    The givens are the learner's own: ``params`` (P) and ``tokens`` (D) of a model they
    pick, ``sustained_tflops`` (r, TFLOP/s) of a device they pick at a utilisation they assume.
    """
    name = "training time on one device"
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
        hint="work = 6 x P x D FLOPs; time = work / (r in FLOP/s); then seconds / 86,400.",
        mistakes={
            days / 3: "A third of the answer: that is the forward pass only (2PD). Training "
                      "adds the backward pass (4PD): 6PD in all.",
            days / 6: "A sixth of the answer: count 6 FLOPs per parameter and token, not 1.",
            days * _DAY: "That is seconds; the question asks for days.",
            days * 24: "That is hours; the question asks for days.",
            days * 1e12: "The rate is in TFLOP/s: 1 TFLOP/s = 10^12 FLOP/s.",
        },
    )


@checker
def ex4_devices_for_deadline(answer, *, one_device_days=None, deadline_days=None,
                             efficiency=None) -> Result:
    """Fewest devices that finish YOUR run by YOUR deadline: T(N) = T(1) / (N η) <= deadline.

    The givens are the learner's own: ``one_device_days`` (their answer to exercise 3),
    ``deadline_days`` and the parallel ``efficiency`` η in (0, 1] they assume.
    """
    name = "devices needed"
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
        ideal: "That assumes perfect efficiency (η = 1); divide by N x η, not by N."}
    return check_count(answer, needed, name=name, unit="devices", mistakes=mistakes,
                       hint="solve T(1) / (N x η) <= deadline for N and round UP to a whole device.")


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
