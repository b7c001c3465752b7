"""Figures of the scaling laws, reused wherever speedup is plotted.

Device counts are drawn on base-2 log axes (:func:`~course_lib.plots.log2_axis`), ticks at
powers of two only; legends sit outside the axes, never on the curves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .. import scaling
from .._validate import as_real, check_count, check_range, check_real, check_type
from ..i18n import N_, tr
from . import COLORS, log2_axis, new_figure, styled

__all__ = ["amdahl_figure", "laws_figure", "measured_speedup_figure"]

#: Points of the curves: a fine geometric grid, so that a curve has no visible corners on a
#: log axis (integer device counts would draw 1 -> 2 as one straight segment).
_GRID = 160


def _number(v: float) -> str:
    """3 significant digits, no exponent for large values (``0.75``, ``12``, ``1,024``)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _value_labels(ax, x: float, marks, *, rising: bool, x_hi: float) -> None:
    """Write the values of the markers at ``x`` as a block of lines beside them.

    ``marks`` are ``(y, text, color)``, one line each, the highest value on top. The
    block goes right of the markers (left in the last fifth of the log device axis), on
    the side of them the curves leave free: below where they rise toward that side,
    above where they fall; if it would leave the axes it goes to the other side. Call it
    after the y limits are set.
    """
    marks = sorted(marks, key=lambda m: -m[0])
    right = x <= x_hi ** 0.8
    log = ax.get_yscale() == "log"
    lo, hi = ax.get_ylim()
    f = (lambda v: (np.log(v) - np.log(lo)) / (np.log(hi) - np.log(lo))) if log else (
        lambda v: (v - lo) / (hi - lo))
    line, gap = 15.0, 8.0  # points
    height = 0.7 * ax.figure.get_figheight() * 72  # the axes' height, roughly, in points
    block = (len(marks) * line + gap) / height
    below = rising == right
    if below and f(marks[-1][0]) - block < 0.02:
        below = False
    elif not below and f(marks[0][0]) + block > 0.98:
        below = True
    anchor = marks[-1][0] if below else marks[0][0]
    for i, (_, text, color) in enumerate(marks):
        k = i if below else i - len(marks) + 1  # lines counted from the anchor
        ax.annotate(text, (x, min(max(float(f(anchor)), 0.0), 1.0)), xycoords=("data", "axes fraction"),
                    textcoords="offset points",
                    xytext=(8 if right else -8, -gap - k * line if below else gap - k * line),
                    ha="left" if right else "right", va="top" if below else "bottom", color=color,
                    bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.85))


@styled
def amdahl_figure(p: float, s: float, n: int, *, n_max: int = 1024):
    """Speedup and efficiency against device count under Amdahl's law.

    Left: speedup (log-log) for ideal devices (``s = N``), for devices that give the
    parallel part only ``s`` at ``N`` (the ratio ``s / N`` kept along the curve, which
    is drawn only where that ``s`` is at least 1, the parallel part no slower than on
    one device), the ideal line ``S = N`` and the limit ``1 / (1 - p)``. Right: parallel
    efficiency ``S / N``. The current ``N`` is marked and its values written on both.

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

    Examples
    --------
    >>> fig = amdahl_figure(0.95, 12, 16)
    >>> [t.get_text() for t in fig.axes[0].texts]
    ['S(16) = 9.14', 'S = 7.74 at s = 12']
    """
    p_val = check_real(p, "p", 0.0, 1.0)
    s = check_real(s, "s", 1.0)
    n_val = check_count(n, "n")
    n_max = check_count(n_max, "n_max")
    ratio = s / n_val  # s / N, kept along the dashed curve
    hi = float(max(n_max, n_val))
    ns = np.geomspace(1.0, hi, _GRID)
    ideal_devices = scaling.amdahl(p_val, ns)
    # s(N) = ratio * N is a speedup of the parallel part only where it is >= 1: start there
    start = min(max(1.0, 1.0 / ratio), hi)
    ns_real = np.geomspace(start, hi, _GRID)
    # (ratio * start can round to just below 1: that is still s = 1)
    real_devices = scaling.amdahl(p_val, np.maximum(ratio * ns_real, 1.0))
    limit = scaling.amdahl_limit(p_val)
    s_ideal_now = scaling.amdahl(p_val, n_val)
    s_now = scaling.amdahl(p_val, s)
    same = np.isclose(s, n_val)

    fig, (ax_s, ax_e) = new_figure(1, 2, size=(9.6, 4.1))
    ax_s.loglog(ns, ns, color="0.45", lw=1.2, ls=":", label=tr("ideal S = N"))
    ax_s.loglog(ns, ideal_devices, color=COLORS[0], label=tr("s = N (perfect devices)"))
    ax_s.loglog(ns_real, real_devices, color=COLORS[1], ls="--", label=tr("s = {ratio}·N (s/N kept)", ratio=_number(ratio)))
    if np.isfinite(limit):
        ax_s.axhline(limit, color=COLORS[2], lw=1.2, ls="-.", label=tr("limit 1/(1 − p) = {limit}", limit=f"{limit:.4g}"))
    ax_s.plot([n_val], [s_ideal_now], "o", color=COLORS[0])
    if not same:
        ax_s.plot([n_val], [s_now], "s", color=COLORS[1])
    ax_s.set(xlabel=tr("devices N"), ylabel=tr("speedup S"), title=tr("Amdahl's law, p = {p}", p=f"{p_val:.3g}"))
    ax_s.set_ylim(0.8, hi * 1.25)
    log2_axis(ax_s.xaxis, hi)
    log2_axis(ax_s.yaxis, hi)
    marks = [(s_ideal_now, f"S({n_val}) = {s_ideal_now:.3g}", COLORS[0])]
    if not same:
        marks.append((s_now, tr("S = {speedup} at s = {s}", speedup=f"{s_now:.3g}", s=f"{s:g}"), COLORS[1]))
    _value_labels(ax_s, n_val, marks, rising=True, x_hi=hi)

    eta_ideal, eta_real = ideal_devices / ns, real_devices / ns_real
    ax_e.semilogx(ns, eta_ideal, color=COLORS[0])
    ax_e.semilogx(ns_real, eta_real, color=COLORS[1], ls="--")
    ax_e.plot([n_val], [s_ideal_now / n_val], "o", color=COLORS[0])
    if not same:
        ax_e.plot([n_val], [s_now / n_val], "s", color=COLORS[1])
    ax_e.set(xlabel=tr("devices N"), ylabel=tr("efficiency η = S / N"), title=tr("parallel efficiency"))
    ax_e.set_ylim(0, max(1.1, 1.12 * float(np.max(eta_real, initial=0.0))))
    log2_axis(ax_e.xaxis, hi)
    marks = [(s_ideal_now / n_val, f"η({n_val}) = {s_ideal_now / n_val:.3g}", COLORS[0])]
    if not same:
        marks.append((s_now / n_val, tr("η = {efficiency} at s = {s}", efficiency=f"{s_now / n_val:.3g}", s=f"{s:g}"),
                      COLORS[1]))
    _value_labels(ax_e, n_val, marks, rising=False, x_hi=hi)
    fig.legend(loc="outside lower center", ncol=4, columnspacing=1.2, handlelength=1.8)
    return fig


@styled
def laws_figure(p: float, n: int, *, n_max: int = 1024):
    """Amdahl (fixed problem) and Gustafson (growing problem) side by side.

    Both curves use the same ``p`` - note that it means a different thing in each law
    (fraction of the serial run vs of the parallel run), which the notebook explains.
    The current ``N`` is marked on both curves and their speedups written beside.

    Examples
    --------
    >>> fig = laws_figure(0.95, 16)
    >>> [t.get_text() for t in fig.axes[0].texts]
    ['Gustafson: S(16) = 15.2', 'Amdahl: S(16) = 9.14']
    """
    p_val = check_real(p, "p", 0.0, 1.0)
    n_val, n_max = check_count(n, "n"), check_count(n_max, "n_max")
    hi = float(max(n_max, n_val))
    ns = np.geomspace(1.0, hi, _GRID)
    fig, ax = new_figure(size=(6.4, 4.6))
    ax.loglog(ns, ns, color="0.45", lw=1.2, ls=":", label=tr("ideal, S = N"))
    ax.loglog(ns, scaling.amdahl(p_val, ns), color=COLORS[0], label=tr("Amdahl: strong scaling, fixed problem"))
    ax.loglog(ns, scaling.gustafson(p_val, ns), color=COLORS[1], ls="--",
              label=tr("Gustafson: weak scaling, growing problem"))
    a_now, g_now = scaling.amdahl(p_val, n_val), scaling.gustafson(p_val, n_val)
    ax.plot([n_val], [a_now], "o", color=COLORS[0])
    ax.plot([n_val], [g_now], "s", color=COLORS[1])
    ax.set(xlabel=tr("devices N"), ylabel=tr("speedup S"),
           title=tr("fixed vs growing problem, p = {p}", p=f"{p_val:.3g}"))
    ax.set_ylim(0.8, hi * 1.25)
    log2_axis(ax.xaxis, hi)
    log2_axis(ax.yaxis, hi)
    _value_labels(ax, n_val, [(a_now, tr("Amdahl: S({n}) = {speedup}", n=n_val, speedup=f"{a_now:.3g}"), COLORS[0]),
                              (g_now, tr("Gustafson: S({n}) = {speedup}", n=n_val, speedup=f"{g_now:.3g}"),
                               COLORS[1])],
                  rising=True, x_hi=hi)
    fig.legend(loc="outside lower center", ncol=1)
    return fig


@styled
def measured_speedup_figure(
    n,
    speedup,
    *,
    fit_p: float | None = None,
    fit: scaling.AmdahlFit | Sequence[scaling.AmdahlFit] | None = None,
    title: str = N_("measured speedup"),
    label: str = N_("measured"),
    xlabel: str = N_("devices N"),
    more: Mapping | None = None,
):
    """Measured speedups against the ideal line and, if given, a fitted Amdahl curve.

    Both axes are base-2 logarithmic (ticks at powers of two), so small counts (1, 2, 4)
    are as far apart as large ones. A fit with fewer than 3 points (one point besides
    ``n = 1``: the curve just passes through it) has no error estimate: its curve is
    dashed and labelled as an illustration, not a law.

    Parameters
    ----------
    n, speedup : array_like
        Device (process, thread, chip) counts and the measured speedups.
    fit_p : float, optional
        Parallel fraction from :func:`course_lib.scaling.fit_amdahl` on ``n, speedup``;
        its curve is drawn.
    fit : AmdahlFit or sequence of AmdahlFit, optional
        The whole fit instead of ``fit_p`` (then its standard error and its loss are shown
        too), or several fits of the same points with different losses
        (``scaling.fit_amdahl(..., loss=...)``), each drawn in its own colour and line style.
    title, label, xlabel : str
        Axes title, legend label of the measurements, x-axis label (shown in the current
        language where the course's catalogue translates them, as it does the defaults).
    more : mapping, optional
        ``{label: (n, speedup)}``: further measured series, drawn the same way.

    Examples
    --------
    >>> fig = measured_speedup_figure([1, 2], [1.0, 1.7], fit_p=0.82)
    >>> [line.get_label() for line in fig.axes[0].get_lines()][1]
    'Amdahl fit to 2 points, p = 0.820 (illustration, not a law)'
    >>> n, s = [1, 2, 4, 8], [1.0, 1.7, 3.6, 7.0]
    >>> fits = [scaling.fit_amdahl(n, s, loss=k) for k in ("time", "speedup")]
    >>> for line in measured_speedup_figure(n, s, fit=fits).axes[0].get_lines()[1:3]:
    ...     print(line.get_label())
    Amdahl fit in run time 1/S, p = 0.949 ± 0.039
    Amdahl fit in speedup S, p = 0.978 ± 0.005
    """
    n_arr, s_arr = _series(n, speedup, "n", "speedup")
    for name, value in (("title", title), ("label", label), ("xlabel", xlabel)):
        check_type(value, name, str, "a str")
    extra = {}
    if more is not None:
        check_type(more, "more", Mapping, "a mapping {label: (n, speedup)}")
        for key, pair in more.items():
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"more[{key!r}] must be a pair (n, speedup)")
            extra[str(key)] = _series(pair[0], pair[1], f"more[{key!r}] n", f"more[{key!r}] speedup")
    fits = _fits(fit)
    if fits and fit_p is not None:
        raise ValueError("give fit_p or fit, not both")
    fig, ax = new_figure(size=(6.4, 4.6))
    hi = float(max([n_arr.max(), *(x.max() for x, _ in extra.values())]))
    s_hi = float(max([s_arr.max(), *(y.max() for _, y in extra.values()), hi]))
    grid = np.geomspace(1.0, hi, 100) if hi > 1 else np.array([1.0])
    ax.plot(grid, grid, color="0.45", lw=1.2, ls=":", label=tr("ideal, S = {symbol}", symbol=_count_symbol(xlabel)),
            gid="ideal")  # gids: strong_weak_figure finds these lines in any language
    if fit_p is not None:
        fits = [scaling.AmdahlFit(check_real(fit_p, "fit_p", 0.0, 1.0), float("nan"), int(n_arr.size), "")]
    exact = int(np.count_nonzero(n_arr > 1)) < 2  # one point besides n = 1: the curve passes through it
    for i, one in enumerate(fits):
        color, style = _FIT_STYLES[i % len(_FIT_STYLES)]
        if one.n_points < 3 or exact:
            ax.plot(grid, scaling.amdahl(one.p, grid), "--", color=color, gid="amdahl",
                    label=tr("Amdahl fit to {count} points, p = {p} (illustration, not a law)",
                             count=one.n_points, p=f"{one.p:.3f}"))
            continue
        fields = dict(count=one.n_points, p=f"{one.p:.3f}",
                      spread=f" ± {one.stderr:.3f}" if np.isfinite(one.stderr) else "",
                      loss=tr(_LOSS_WORDS[one.loss]) if one.loss in _LOSS_WORDS else one.loss)
        if len(fits) > 1:
            text = (tr("Amdahl fit in {loss}, p = {p}{spread}", **fields) if one.loss
                    else tr("Amdahl fit , p = {p}{spread}", **fields))
        else:
            text = (tr("Amdahl fit to {count} points in {loss}, p = {p}{spread}", **fields) if one.loss
                    else tr("Amdahl fit to {count} points, p = {p}{spread}", **fields))
        ax.plot(grid, scaling.amdahl(one.p, grid), style, color=color, label=text, gid="amdahl")
    ax.plot(n_arr, s_arr, "o-", color=COLORS[0], label=tr(label))
    for i, (name, (x, y)) in enumerate(extra.items()):
        ax.plot(x, y, ("s--", "^-.", "D:", "v--")[i % 4], color=COLORS[(2, 3, 4, 7)[i % 4]], label=tr(name))
    ax.set(xlabel=tr(xlabel), ylabel=tr("speedup S"), title=tr(title))
    log2_axis(ax.xaxis, hi)
    log2_axis(ax.yaxis, s_hi)
    ax.set_xlim(1 / 1.15, hi * 1.15)
    s_lo = float(min([1.0, s_arr.min(), *(y.min() for _, y in extra.values())]))  # every series shown
    ax.set_ylim(s_lo / 1.15, s_hi * 1.15)
    fig.legend(loc="outside lower center", ncol=1)
    return fig


#: Colour and line style of the first, second ... fitted curve (colour-blind safe palette,
#: told apart by the line style as well).
_FIT_STYLES = ((COLORS[1], "-"), (COLORS[2], "-."), (COLORS[3], ":"))
#: How a legend names the loss of a fit (``AmdahlFit.loss``).
_LOSS_WORDS = {"time": N_("run time 1/S"), "speedup": N_("speedup S")}


def _fits(fit) -> list:
    """``fit`` (an AmdahlFit, a sequence of them, or None) as a list of AmdahlFit."""
    if fit is None:
        return []
    what = "an AmdahlFit (from scaling.fit_amdahl) or a sequence of them"
    if isinstance(fit, scaling.AmdahlFit):
        return [fit]
    check_type(fit, "fit", (list, tuple), what)
    if not fit:
        raise ValueError("fit must hold at least one AmdahlFit")
    for one in fit:
        check_type(one, "fit", scaling.AmdahlFit, what)
    return list(fit)


def _count_symbol(xlabel: str) -> str:
    """The symbol of the x axis: ``n`` of "n = chips / 16", ``N`` of "devices N" (else ``N``)."""
    import re

    match = re.match(r"\s*([A-Za-z])\s*=", xlabel) or re.search(r"(?<![\w\\])([A-Za-z])\s*$", xlabel)
    return match.group(1) if match else "N"


def _series(n, speedup, n_name: str, s_name: str) -> tuple[np.ndarray, np.ndarray]:
    n_arr, s_arr = as_real(n, n_name), as_real(speedup, s_name)
    if n_arr.ndim != 1 or n_arr.shape != s_arr.shape or n_arr.size == 0:
        raise ValueError(
            f"{n_name} and {s_name} must be 1-D, non-empty and of equal length, got shapes "
            f"{n_arr.shape} and {s_arr.shape}"
        )
    check_range(n_arr, n_name, 1.0)
    check_range(s_arr, s_name, 0.0, low_open=True)
    return n_arr, s_arr
