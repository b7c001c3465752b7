"""Exercises of the chapter on failures at scale (checkpoints, restarts, stragglers).

Expected values come from :mod:`course_lib.failures` and the interruption counts of
``data/failure_records.csv``. The givens of each exercise are module constants, so the notebook
can print them.
"""

from __future__ import annotations

from ..failures import (
    device_mtbf,
    expected_failures,
    failure_record,
    lost_hours,
    straggler_efficiency,
    young_daly_interval,
)
from ..i18n import tr
from . import Result, check

__all__ = ["FAILURES", "LOST_HOURS", "STRAGGLER", "YOUNG_DALY", "ex_expected_failures", "ex_lost_hours",
           "ex_straggler", "ex_young_daly"]

#: Givens of :func:`ex_young_daly`: a checkpoint holds training up 2 minutes; the job fails on
#: average every 3 hours. The answer in seconds.
YOUNG_DALY = {"save_minutes": 2.0, "mtbf_hours": 3.0}
#: Givens of :func:`ex_expected_failures`: a year (365 days) of training on 8,192 GPUs that fail as
#: often as Llama 3's (419 unexpected interruptions in 54 days on 16,384 GPUs).
FAILURES = {"gpus": 8192, "days": 365.0}
#: Givens of :func:`ex_lost_hours`: a 30-day job on 16,384 GPUs at Llama 3's failure rate,
#: checkpointing after every 30 minutes of work; a restart takes 10 minutes. The answer in
#: GPU-hours.
LOST_HOURS = {"gpus": 16384, "days": 30.0, "interval_minutes": 30.0, "restart_minutes": 10.0}
#: Givens of :func:`ex_straggler`: a synchronous step of 350 ms with parallel efficiency 0.92;
#: one device is 90 ms late at every step.
STRAGGLER = {"step_ms": 350.0, "efficiency": 0.92, "late_ms": 90.0}


def _llama_device_hours() -> float:
    row = failure_record()
    return device_mtbf(row.unexpected_interruptions, row.gpus, row.days * 24)


def ex_young_daly(answer) -> Result:
    """Young and Daly's checkpoint interval for :data:`YOUNG_DALY`, in seconds."""
    g = YOUNG_DALY
    save, mtbf = 60 * g["save_minutes"], 3600 * g["mtbf_hours"]
    expected = young_daly_interval(save, mtbf)
    return check(
        answer,
        expected,
        name=tr("checkpoint interval"),
        unit="s",
        rtol=5e-3,
        hint=tr("√(2 t_save T_MTBF), with both times in seconds: 2 x 60 s and 3 x 3,600 s."),
        mistakes={
            (save * mtbf) ** 0.5: tr("That leaves out the 2 under the root: √(2 t_save T_MTBF)."),
            (2 * g["save_minutes"] * g["mtbf_hours"]) ** 0.5: tr("That mixes minutes and hours: give both times in "
                                                                 "seconds."),
            young_daly_interval(g["save_minutes"], 60 * g["mtbf_hours"]): tr("That is the interval in minutes; "
                                                                              "the question asks for seconds."),
            2 * save * mtbf: tr("That forgot the square root."),
        },
    )


def ex_expected_failures(answer) -> Result:
    """Expected failures of the run of :data:`FAILURES` at Llama 3's failure rate per GPU."""
    g = FAILURES
    per_gpu = _llama_device_hours()
    expected = expected_failures(g["gpus"], g["days"] * 24, per_gpu)
    row = failure_record()
    return check(
        answer,
        expected,
        name=tr("expected failures"),
        rtol=1e-2,
        hint=tr("a failure per GPU-hours: 16,384 x 54 x 24 / 419; the run has 8,192 x 365 x 24 GPU-hours."),
        mistakes={
            expected_failures(row.gpus, g["days"] * 24, per_gpu): tr("That is for 16,384 GPUs: half the GPUs fail "
                                                                      "half as often."),
            expected_failures(g["gpus"], row.days * 24, per_gpu): tr("That is for 54 days: the run lasts 365."),
            float(row.unexpected_interruptions): tr("That is Llama 3's own count: scale it by the GPUs and the "
                                                    "days."),
        },
    )


def ex_lost_hours(answer) -> Result:
    """Expected GPU-hours the job of :data:`LOST_HOURS` loses to failures."""
    g = LOST_HOURS
    per_gpu, hours, n = _llama_device_hours(), g["days"] * 24, g["gpus"]
    interval, restart = g["interval_minutes"] / 60, g["restart_minutes"] / 60
    wall = lost_hours(hours, n, per_gpu, interval, restart)
    failures = expected_failures(n, hours, per_gpu)
    return check(
        answer,
        n * wall,
        name=tr("GPU-hours lost to failures"),
        unit="GPU-hours",
        rtol=1e-2,
        hint=tr("expected failures (16,384 GPUs for 30 days at 419 per 54 days) times what each costs the job: "
                "half an interval of lost work on average, plus the restart; every GPU loses that time."),
        mistakes={
            wall: tr("That is hours of the job's wall time: each of its 16,384 GPUs loses them."),
            n * failures * (interval + restart): tr("A failure loses half an interval on average, not a whole one."),
            n * failures * interval / 2: tr("Each failure also costs its restart: 10 minutes."),
            n * failures * (g["interval_minutes"] / 2 + g["restart_minutes"]): tr("That is GPU-minutes: divide by "
                                                                                  "60."),
        },
    )


def ex_straggler(answer) -> Result:
    """Parallel efficiency of the job of :data:`STRAGGLER` with its straggler."""
    g = STRAGGLER
    expected = g["efficiency"] * straggler_efficiency(g["step_ms"], g["late_ms"])
    return check(
        answer,
        expected,
        name=tr("parallel efficiency with the straggler"),
        rtol=5e-3,
        hint=tr("every step now waits for the late device: {step} + {late} ms; η shrinks by the same factor as "
                "the step grows.", step=f"{g['step_ms']:g}", late=f"{g['late_ms']:g}"),
        mistakes={
            g["efficiency"] - g["late_ms"] / g["step_ms"]: tr("η shrinks by a factor t / (t + t_slow), not by a "
                                                              "difference."),
            straggler_efficiency(g["step_ms"], g["late_ms"]): tr("That is the factor; multiply it by the η of 0.92 "
                                                                 "without the straggler."),
            g["efficiency"] * (1 - g["late_ms"] / g["step_ms"]): tr("The step becomes 440 ms: η x 350 / 440, not "
                                                                    "η x (1 - 90 / 350)."),
        },
    )
