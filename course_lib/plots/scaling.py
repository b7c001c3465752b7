"""Figures of chapter 02 (scaling laws), reused wherever speedup is plotted."""

from __future__ import annotations

import numpy as np

from .. import scaling
from .._validate import as_real, check_count, check_range, check_real
from . import COLORS, log2_axis, new_figure, styled

__all__ = ["amdahl_figure", "laws_figure", "measured_speedup_figure"]


def _device_axis(n_max: float) -> np.ndarray:
    return np.unique(np.round(np.geomspace(1, n_max, 200)))


@styled
def amdahl_figure(p: float, s: float, n: int, *, n_max: int = 1024):
    """Speedup and efficiency against device count under Amdahl's law.

    Left: speedup (log-log) for ideal devices (``s = N``), for devices that give the
    parallel part only ``s`` at ``N`` (per-device efficiency ``s / N``, kept constant
    along the curve), the ideal line ``S = N`` and the limit ``1 / (1 - p)``. Right:
    parallel efficiency ``S / N``. The current ``N`` is marked on both.

    Parameters
    ----------
    p : float
        Parallel fraction in [0, 1].
    s : float
        Speedup of the parallelisable part at ``n`` devices (Amdahl's general form), >= 1.
    n : int
        Current device count, >= 1.
    n_max : int
        Right end of the device axis.
    """
    p_val = check_real(p, "p", 0.0, 1.0)
    s = check_real(s, "s", 1.0)
    n_val = check_count(n, "n")
    n_max = check_count(n_max, "n_max")
    per_device = s / n_val
    ns = _device_axis(max(n_max, n_val))
    ideal_devices = scaling.amdahl(p_val, ns)
    # s = (s/N)·n along the curve, floored at 1: the parallel part is never slower
    # than on one device.
    real_devices = scaling.amdahl(p_val, np.maximum(per_device * ns, 1.0))
    limit = scaling.amdahl_limit(p_val)
    s_ideal_now = scaling.amdahl(p_val, n_val)
    s_now = scaling.amdahl(p_val, s)

    fig, (ax_s, ax_e) = new_figure(1, 2, size=(9.6, 3.8))
    ax_s.loglog(ns, ns, color="0.6", lw=1, ls=":", label="ideal, S = N")
    ax_s.loglog(ns, ideal_devices, color=COLORS[0], label="Amdahl, s = N")
    ax_s.loglog(ns, real_devices, color=COLORS[1], ls="--", label=f"Amdahl, s = {per_device:.2f}·N")
    if np.isfinite(limit):
        ax_s.axhline(limit, color=COLORS[2], lw=1, ls="-.", label=f"limit 1/(1-p) = {limit:.4g}")
    ax_s.plot([n_val], [s_ideal_now], "o", color=COLORS[0])
    ax_s.plot([n_val], [s_now], "s", color=COLORS[1])
    ax_s.annotate(f"S = {s_now:.3g}", (n_val, s_now), textcoords="offset points", xytext=(6, -14))
    ax_s.set(xlabel="devices N", ylabel="speedup S", title=f"Amdahl's law, p = {p_val:.3g}")
    ax_s.set_ylim(0.8, max(ns[-1], 2) * 1.2)
    ax_s.legend(fontsize=8, loc="upper left")
    log2_axis(ax_s.xaxis, ns[-1])
    log2_axis(ax_s.yaxis, ns[-1])

    ax_e.semilogx(ns, ideal_devices / ns, color=COLORS[0], label="s = N")
    ax_e.semilogx(ns, real_devices / ns, color=COLORS[1], ls="--", label=f"s = {per_device:.2f}·N")
    ax_e.plot([n_val], [s_ideal_now / n_val], "o", color=COLORS[0])
    ax_e.plot([n_val], [s_now / n_val], "s", color=COLORS[1])
    ax_e.annotate(
        f"η = {s_now / n_val:.3g}", (n_val, s_now / n_val), textcoords="offset points", xytext=(6, 6)
    )
    ax_e.set(xlabel="devices N", ylabel="efficiency η = S / N", title="parallel efficiency")
    ax_e.set_ylim(0, max(1.05, per_device * 1.05))
    ax_e.legend(fontsize=8)
    log2_axis(ax_e.xaxis, ns[-1])
    return fig


@styled
def laws_figure(p: float, n: int, *, n_max: int = 1024):
    """Amdahl (fixed problem) and Gustafson (growing problem) side by side.

    Both curves use the same ``p`` - note that it means a different thing in each law
    (fraction of the serial run vs of the parallel run), which the notebook explains.
    """
    p_val = check_real(p, "p", 0.0, 1.0)
    n_val, n_max = check_count(n, "n"), check_count(n_max, "n_max")
    ns = _device_axis(max(n_max, n_val))
    fig, ax = new_figure(size=(6.4, 4.0))
    ax.loglog(ns, ns, color="0.6", lw=1, ls=":", label="ideal, S = N")
    ax.loglog(ns, scaling.amdahl(p_val, ns), color=COLORS[0], label="Amdahl (strong scaling)")
    ax.loglog(ns, scaling.gustafson(p_val, ns), color=COLORS[1], label="Gustafson (weak scaling)")
    a_now, g_now = scaling.amdahl(p_val, n_val), scaling.gustafson(p_val, n_val)
    ax.plot([n_val], [a_now], "o", color=COLORS[0])
    ax.plot([n_val], [g_now], "o", color=COLORS[1])
    ax.annotate(f"{a_now:.3g}", (n_val, a_now), textcoords="offset points", xytext=(6, -12))
    ax.annotate(f"{g_now:.3g}", (n_val, g_now), textcoords="offset points", xytext=(6, 4))
    ax.set(xlabel="devices N", ylabel="speedup S", title=f"fixed vs growing problem, p = {p_val:.3g}")
    ax.set_ylim(0.8, ns[-1] * 1.2)
    ax.legend(fontsize=8, loc="upper left")
    log2_axis(ax.xaxis, ns[-1])
    log2_axis(ax.yaxis, ns[-1])
    return fig


@styled
def measured_speedup_figure(
    n,
    speedup,
    *,
    fit_p: float | None = None,
    title: str = "measured speedup",
    label: str = "measured",
    xlabel: str = "N",
):
    """Measured speedups against the ideal line and, if given, a fitted Amdahl curve.

    Parameters
    ----------
    n, speedup : array_like
        Device (process, thread, chip) counts and the measured speedups.
    fit_p : float, optional
        Parallel fraction from :func:`course_lib.scaling.fit_amdahl`; its curve is drawn.
    title, label, xlabel : str
        Axes title, legend label of the measurements, x-axis label.
    """
    n_arr, s_arr = as_real(n, "n"), as_real(speedup, "speedup")
    if n_arr.ndim != 1 or n_arr.shape != s_arr.shape or n_arr.size == 0:
        raise ValueError(
            f"n and speedup must be 1-D, non-empty and of equal length, got shapes "
            f"{n_arr.shape} and {s_arr.shape}"
        )
    check_range(n_arr, "n", 1.0)
    if fit_p is not None:
        fit_p = check_real(fit_p, "fit_p", 0.0, 1.0)
    fig, ax = new_figure(size=(6.0, 3.8))
    grid = np.linspace(1, n_arr.max(), 200)
    ax.plot(grid, grid, color="0.6", lw=1, ls=":", label="ideal, S = N")
    if fit_p is not None:
        ax.plot(grid, scaling.amdahl(fit_p, grid), color=COLORS[1], label=f"Amdahl fit, p = {fit_p:.3f}")
    ax.plot(n_arr, s_arr, "o-", color=COLORS[0], label=label)
    ax.set(xlabel=xlabel, ylabel="speedup S", title=title)
    ax.legend(fontsize=8, loc="upper left")
    return fig
