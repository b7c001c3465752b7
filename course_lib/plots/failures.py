"""Figures of failures at scale: goodput (有效吞吐) against the checkpoint interval, measured and
as Daly's formula gives it, and how often a job on many devices fails."""

from __future__ import annotations

import numpy as np

from .. import failures
from .._validate import check_array, check_positive
from ..i18n import tr
from . import COLORS, log2_axis, new_figure, plain_log_axis, styled

__all__ = ["goodput_figure", "mtbf_figure"]


@styled
def goodput_figure(interval_seconds, goodput, *, save_time: float, mtbf: float, step_time: float,
                   best: float | None = None):
    """Useful steps per second of running against the checkpoint interval Δ.

    Dots: the measured goodput of each interval (:func:`course_lib.parallel.train.restarts.measure_goodput`).
    Line: :func:`course_lib.failures.goodput` for the measured ``save_time`` and the chosen
    ``mtbf`` (no restarts: the running time), over ``step_time``. Dashed: Young and Daly's
    interval; dotted: ``best``, the measured best interval (if given).

    Parameters
    ----------
    interval_seconds, goodput : array-like
        Δ of each run, seconds (> 0), and its steps per second (> 0).
    save_time, mtbf, step_time : float
        ``t_save``, ``T_MTBF`` and a step's seconds (> 0).
    best : float, optional
        The measured best interval, seconds.

    Examples
    --------
    >>> fig = goodput_figure([0.01, 0.02, 0.04], [900, 1000, 950], save_time=0.002, mtbf=0.1, step_time=0.0005)
    >>> fig.axes[0].get_xlabel()
    'checkpoint interval Δ [ms]'
    """
    x = check_array(interval_seconds, "interval_seconds", 0, low_open=True)
    g = check_array(goodput, "goodput", 0, low_open=True)
    if x.ndim != 1 or x.shape != g.shape or x.size == 0:
        raise ValueError(f"interval_seconds and goodput must be 1-D and of one length, got shapes {x.shape} and {g.shape}")
    save_time, mtbf = check_positive(save_time, "save_time"), check_positive(mtbf, "mtbf")
    step_time = check_positive(step_time, "step_time")
    fig, ax = new_figure(size=(7.2, 4.2))
    lo, hi = x.min() / 1.5, x.max() * 1.5
    grid = np.geomspace(lo, hi, 200)
    model = np.array([failures.goodput(d, save_time, mtbf) for d in grid]) / step_time
    ax.plot(1e3 * grid, model, color=COLORS[0], label=tr("Daly's formula (measured t_save, chosen T_MTBF)"))
    ax.plot(1e3 * x, g, "o", color=COLORS[1], markersize=8, label=tr("measured"))
    yd = failures.young_daly_interval(save_time, mtbf)
    ax.axvline(1e3 * yd, color="black", linestyle="--", label=tr("Young-Daly √(2 t_save T_MTBF) = {interval}", interval=f"{1e3 * yd:.1f} ms"))
    if best is not None:
        best = check_positive(best, "best")
        ax.axvline(1e3 * best, color=COLORS[1], linestyle=":", label=tr("measured best = {interval}", interval=f"{1e3 * best:.1f} ms"))
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis, 1e3 * lo, 1e3 * hi)
    ax.set_xlabel(tr("checkpoint interval Δ [ms]"))
    ax.set_ylabel(tr("goodput [useful steps / s]"))
    ax.set_ylim(0, 1.15 * max(g.max(), model.max()))
    ax.legend(loc="lower center", frameon=False)
    return fig


@styled
def mtbf_figure(device_hours: float, *, max_gpus: int = 2**17, marked: int | None = None, days: float = 30.0):
    """How often a job fails, against its devices: the mean time between failures
    (:func:`course_lib.failures.cluster_mtbf`, left axis, hours) and the failures of a run of
    ``days`` (:func:`course_lib.failures.expected_failures`, right axis), each device failing
    once per ``device_hours`` on average; ``marked`` devices get a marker.

    Examples
    --------
    >>> fig = mtbf_figure(50_000.0, marked=16384)
    >>> fig.axes[0].get_xlabel()
    'GPUs of the job'
    """
    device_hours = check_positive(device_hours, "device_hours")
    days = check_positive(days, "days")
    gpus = 2 ** np.arange(0, int(np.log2(max(2, max_gpus))) + 1)
    fig, ax = new_figure(size=(7.2, 4.0))
    mtbf = [failures.cluster_mtbf(device_hours, int(n)) for n in gpus]
    ax.plot(gpus, mtbf, color=COLORS[0], label=tr("T_MTBF: hours between failures (left)"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    log2_axis(ax.xaxis, gpus[-1])
    ax.set_xlabel(tr("GPUs of the job"))
    ax.set_ylabel(tr("hours between failures"))
    bx = ax.twinx()
    per_run = [failures.expected_failures(int(n), 24 * days, device_hours) for n in gpus]
    bx.plot(gpus, per_run, color=COLORS[1], linestyle="--", label=tr("failures in {days} days (right)", days=f"{days:g}"))
    bx.set_yscale("log")
    bx.set_ylabel(tr("failures in {days} days", days=f"{days:g}"))
    if marked is not None:
        m = failures.cluster_mtbf(device_hours, marked)
        ax.plot([marked], [m], "o", color="black")
        ax.annotate(tr("{gpus} GPUs: every {interval}", gpus=f"{marked:,}", interval=f"{m:.1f} h"), (marked, m),
                    textcoords="offset points", xytext=(-150, -14))
    lines = ax.get_lines()[:1] + bx.get_lines()
    ax.legend(lines, [line.get_label() for line in lines], loc="upper center", frameon=False)
    return fig
