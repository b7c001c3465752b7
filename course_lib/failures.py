r"""Failures at scale: how often a job is interrupted, how often to checkpoint, what it costs.

A job on :math:`N` devices fails whenever any one of them does. If each device fails at
random, on average once every :math:`T_{\text{dev}}` hours, the job's **mean time between
failures** (平均故障间隔时间, MTBF) is

.. math:: T_{\text{MTBF}} = T_{\text{dev}} / N,

so a job of a month on 16,384 GPUs is interrupted hundreds of times (Llama 3's
pre-training: 419 unexpected interruptions in 54 days, :func:`failure_record`). Every
failure throws away the work since the last **training checkpoint** (训练检查点) and costs a
restart; every checkpoint costs :math:`t_{\text{save}}` seconds of blocked training.
Checkpointing every :math:`\Delta` seconds of work wastes about

.. math:: \frac{t_{\text{save}}}{\Delta} + \frac{\Delta / 2 + t_{\text{restart}}}{T_{\text{MTBF}}}

of the time (a failure loses half an interval on average), least at **Young and Daly's
interval** :math:`\Delta^* = \sqrt{2\, t_{\text{save}}\, T_{\text{MTBF}}}`
(:func:`young_daly_interval`; J. W. Young, CACM 17(9), 1974; J. T. Daly, FGCS 22(3), 2006).
For failures that arrive at random (exponentially distributed times) Daly's exact expected
wall time gives the share of the time that is useful work, the **goodput** (有效吞吐) as a
fraction (:func:`goodput`); :func:`best_interval` is its exact optimum and
:func:`daly_interval` Daly's higher-order estimate of it.

A **straggler** (掉队者) is the other way a device hurts a synchronous job: one device
slower by :math:`t_{\text{slow}}` per step makes every step wait for it
(:func:`straggler_efficiency`).

Units: every time in one unit of your choice (seconds or hours: the functions only divide
and multiply), devices and failures as counts. Every function takes scalars.
"""

from __future__ import annotations

import math

from ._validate import check_int, check_real

__all__ = [
    "best_interval",
    "cluster_mtbf",
    "daly_interval",
    "device_mtbf",
    "expected_failures",
    "failure_record",
    "goodput",
    "lost_hours",
    "parabola_top",
    "simulate_goodput",
    "straggler_efficiency",
    "wasted_share",
    "young_daly_interval",
]


def _time(value, name: str, *, zero: bool = False) -> float:
    return check_real(value, name, 0.0, math.inf, low_open=not zero)


def device_mtbf(failures: int, devices: int, hours: float) -> float:
    """Mean time between failures of one device, from ``failures`` counted on ``devices``
    devices over ``hours``: the device-hours per failure.

    Examples
    --------
    >>> round(device_mtbf(419, 16384, 54 * 24))    # Llama 3: GPU-hours per interruption
    50677
    """
    failures = check_int(failures, "failures", 1)
    devices = check_int(devices, "devices", 1)
    return devices * _time(hours, "hours") / failures


def cluster_mtbf(device_hours: float, devices: int) -> float:
    r"""The job's mean time between failures on ``devices`` devices that each fail once per
    ``device_hours`` on average (independently): :math:`T_{\text{dev}} / N`.

    Examples
    --------
    >>> round(cluster_mtbf(device_mtbf(419, 16384, 54 * 24), 16384), 2)   # hours
    3.09
    """
    return _time(device_hours, "device_hours") / check_int(devices, "devices", 1)


def expected_failures(devices: int, hours: float, device_hours: float) -> float:
    """Expected failures of a job on ``devices`` devices running ``hours``, each device
    failing once per ``device_hours`` on average.

    Examples
    --------
    >>> round(expected_failures(16384, 30 * 24, device_mtbf(419, 16384, 54 * 24)))  # a month
    233
    """
    devices = check_int(devices, "devices", 1)
    return devices * _time(hours, "hours", zero=True) / _time(device_hours, "device_hours")


def young_daly_interval(save_time: float, mtbf: float) -> float:
    r"""Young and Daly's checkpoint interval :math:`\sqrt{2\, t_{\text{save}}\, T_{\text{MTBF}}}`:
    the work between checkpoints that wastes the least time, to first order (valid while
    ``save_time`` is much shorter than ``mtbf``).

    Examples
    --------
    >>> young_daly_interval(2.0, 100.0)
    20.0
    """
    return math.sqrt(2.0 * _time(save_time, "save_time") * _time(mtbf, "mtbf"))


def daly_interval(save_time: float, mtbf: float) -> float:
    r"""Daly's higher-order estimate of the best interval (FGCS 22(3), 2006, equation 37):
    :math:`\sqrt{2 t M}\,[1 + \tfrac13 \sqrt{t/(2M)} + \tfrac19\, t/(2M)] - t` for
    :math:`t < 2M` (``t`` the save time, ``M`` the MTBF), else :math:`M`.

    Examples
    --------
    >>> round(daly_interval(2.0, 100.0), 3)
    18.689
    """
    t, m = _time(save_time, "save_time"), _time(mtbf, "mtbf")
    if t >= 2 * m:
        return m
    r = t / (2 * m)
    return math.sqrt(2 * t * m) * (1 + math.sqrt(r) / 3 + r / 9) - t


def goodput(interval: float, save_time: float, mtbf: float, restart_time: float = 0.0) -> float:
    r"""The share of the wall time that is useful work when the job checkpoints after every
    ``interval`` of work and fails at random, on average every ``mtbf`` (exponentially
    distributed times between failures), each failure costing ``restart_time`` and the work
    since the last complete checkpoint.

    Daly's expected wall time of one interval and its checkpoint (FGCS 2006, equation 13;
    failures may strike during checkpoints and restarts too):
    :math:`M e^{R/M} (e^{(\Delta + t)/M} - 1)`; the goodput is :math:`\Delta` over it.

    Examples
    --------
    >>> round(goodput(20.0, 2.0, 100.0), 3)
    0.813
    >>> round(goodput(20.0, 2.0, 1e9), 4)    # no failures: only the checkpoints cost
    0.9091
    """
    d = _time(interval, "interval")
    t, m, r = _time(save_time, "save_time", zero=True), _time(mtbf, "mtbf"), _time(restart_time, "restart_time",
                                                                                       zero=True)
    return d / (m * math.exp(r / m) * math.expm1((d + t) / m))


def wasted_share(interval: float, save_time: float, mtbf: float, restart_time: float = 0.0) -> float:
    r"""The first-order share of the time wasted: :math:`t/\Delta + (\Delta/2 + R)/M` (checkpoints,
    then the half interval and the restart each failure costs); its minimum over
    :math:`\Delta` is at :func:`young_daly_interval`.

    Examples
    --------
    >>> wasted_share(20.0, 2.0, 100.0)
    0.2
    """
    d = _time(interval, "interval")
    t, m, r = _time(save_time, "save_time", zero=True), _time(mtbf, "mtbf"), _time(restart_time, "restart_time",
                                                                                       zero=True)
    return t / d + (d / 2 + r) / m


def best_interval(save_time: float, mtbf: float) -> float:
    r"""The interval of highest :func:`goodput` (the same for every restart time): the root
    in :math:`(0, M)` of :math:`e^{(\Delta + t)/M}(1 - \Delta/M) = 1`, by bisection.

    Examples
    --------
    >>> round(best_interval(2.0, 100.0), 3), round(young_daly_interval(2.0, 100.0), 3)
    (18.689, 20.0)
    """
    t, m = _time(save_time, "save_time"), _time(mtbf, "mtbf")
    lo, hi = 0.0, m
    for _ in range(200):
        mid = (lo + hi) / 2
        if math.exp((mid + t) / m) * (1 - mid / m) > 1:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def simulate_goodput(interval: float, save_time: float, mtbf: float, work: float, *, seed: int = 0) -> float:
    """The goodput of one job in a simulation of the measured experiment: ``work`` seconds of
    steps with a checkpoint of ``save_time`` after every ``interval`` of them, failures after
    exponential times of mean ``mtbf`` (``numpy.random.default_rng(seed)``: one draw per
    attempt, as :func:`course_lib.parallel.train.restarts.run_with_failures` draws them), each
    losing the work since the last complete checkpoint. Returns useful seconds over running
    seconds (restarts left out).

    Examples
    --------
    >>> round(simulate_goodput(20.0, 2.0, 1e9, 100.0), 4)    # no failure: the checkpoints cost
    0.9259
    >>> 0 < simulate_goodput(20.0, 2.0, 50.0, 1000.0) < 0.9
    True
    """
    import numpy as np

    d, t, m = _time(interval, "interval"), _time(save_time, "save_time", zero=True), _time(mtbf, "mtbf")
    work = _time(work, "work")
    rng = np.random.default_rng(check_int(seed, "seed", 0))
    clock = done = 0.0
    failure = rng.exponential(m)
    while done < work:
        segment = min(d, work - done)
        end = clock + segment + (t if done + segment < work else 0.0)  # no checkpoint after the last step
        if failure < end:  # lost: back to the last complete checkpoint
            clock, failure = failure, failure + rng.exponential(m)
            continue
        clock, done = end, done + segment
    return work / clock


def parabola_top(x, y) -> float:
    """Where a parabola through the points ``(log x, y)`` (least squares) has its top: the best
    ``x`` of a measured curve; the best point's ``x`` if the parabola has no top inside the
    range of ``x`` (or there are fewer than 3 points).

    Examples
    --------
    >>> round(parabola_top([1.0, 2.0, 4.0, 8.0], [1.0, 1.8, 2.0, 1.6]), 2)
    3.56
    """
    import numpy as np

    from ._validate import check_array

    x, y = check_array(x, "x", 0, low_open=True), check_array(y, "y")
    if x.ndim != 1 or x.shape != y.shape or x.size == 0:
        raise ValueError(f"x and y must be 1-D and of one length, got shapes {x.shape} and {y.shape}")
    best = float(x[int(np.argmax(y))])
    if x.size < 3:
        return best
    logs = np.log(x)
    c2, c1, _ = np.polyfit(logs, y, 2)
    if c2 >= 0:
        return best
    top = -c1 / (2 * c2)
    return float(np.exp(top)) if logs.min() <= top <= logs.max() else best


def lost_hours(job_hours: float, devices: int, device_hours: float, interval: float,
               restart_time: float = 0.0) -> float:
    """Expected wall-clock hours a job loses to failures, to first order: its expected
    failures (:func:`expected_failures` over ``job_hours``) times half a checkpoint
    ``interval`` plus a restart each (every time in hours).

    Examples
    --------
    >>> round(lost_hours(30 * 24, 16384, device_mtbf(419, 16384, 54 * 24), 1.0, 0.25), 1)
    174.6
    """
    failures = expected_failures(devices, job_hours, device_hours)
    return failures * (_time(interval, "interval", zero=True) / 2 + _time(restart_time, "restart_time", zero=True))


def straggler_efficiency(step_time: float, slow_time: float) -> float:
    r"""What one straggler leaves of a synchronous job's parallel efficiency: every step
    waits for the slowest device, so a step of ``step_time`` takes ``step_time + slow_time``
    and :math:`\eta` is multiplied by :math:`t / (t + t_{\text{slow}})`.

    Examples
    --------
    >>> straggler_efficiency(0.010, 0.005)    # one device 5 ms late on a 10 ms step
    0.6666666666666667
    """
    t = _time(step_time, "step_time")
    return t / (t + _time(slow_time, "slow_time", zero=True))


#: The run of ``data/failure_records.csv`` the course computes with.
LLAMA3 = "Llama 3 405B pre-training"


def failure_record(run: str = LLAMA3):
    """The row of ``data/failure_records.csv`` of ``run`` (default: Llama 3 405B's
    pre-training; :func:`course_lib.datasets.load_failure_records`).

    Examples
    --------
    >>> row = failure_record()
    >>> row.gpus, row.days, row.unexpected_interruptions
    (16384, 54.0, 419)
    """
    from .datasets import load_failure_records

    if not isinstance(run, str):
        raise TypeError(f"run must be the name of a run of data/failure_records.csv, got {type(run).__name__}")
    rows = {r.run: r for r in load_failure_records()}
    if run not in rows:
        raise ValueError(f"run must be one of {sorted(rows)}, got {run!r}")
    return rows[run]
