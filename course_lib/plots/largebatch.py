r"""Figure of the critical batch size: steps, and time, to a target against the batch.

Left: the steps a run needs to reach a target loss at each batch size :math:`B` (measured,
e.g. by :func:`course_lib.critical_batch.batch_size_sweep`), the fit of McCandlish et al.'s model
:math:`n_{\text{steps}}(B) = n_{\min}(1 + B_{\text{crit}}/B)`
(:func:`course_lib.critical_batch.fit_critical_batch`) and its two asymptotes: perfect scaling
(steps :math:`\propto 1/B`, the small-batch side) and the floor :math:`n_{\min}`; they
cross at :math:`B_{\text{crit}}`. Right (optional): time to the target, steps x time per
step, for a few device counts.

Pure functions: data in, :class:`matplotlib.figure.Figure` out. :func:`plain_log_axis` (a log
axis labelled 1, 2, 5, 10 ...) also serves the trends and cost figures.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .._validate import as_real, check_type
from ..i18n import tr
from . import COLORS, log2_axis, new_figure, plain_log_axis, styled

__all__ = ["critical_batch_figure"]


@styled
def critical_batch_figure(batch_sizes, steps, fit, *, times: Mapping | None = None):
    r"""Steps to the target against the batch size, with the fitted model; time on N devices.

    Parameters
    ----------
    batch_sizes, steps : array_like
        Measured steps to the target (> 0) at each batch size (> 0).
    fit : course_lib.critical_batch.CriticalBatchFit
        The fitted :math:`n_{\min}` and :math:`B_{\text{crit}}`.
    times : mapping, optional
        ``{label: (batch sizes, seconds to the target)}``, one curve each in a second
        panel (NaN where a batch size is impossible, e.g. fewer samples than devices);
        the fastest point of each curve is marked. Each panel's legend is under it, off the data.

    Examples
    --------
    >>> from course_lib.critical_batch import CriticalBatchFit
    >>> fig = critical_batch_figure([8, 64, 512], [900, 200, 112.5], CriticalBatchFit(100.0, 64.0))
    >>> len(fig.axes), fig.axes[0].get_title()
    (1, 'steps to the target\n(statistical efficiency)')
    """
    from ..critical_batch import CriticalBatchFit

    b = as_real(batch_sizes, "batch_sizes", allowed="in (0, inf)").reshape(-1)
    n = as_real(steps, "steps", allowed="in (0, inf)").reshape(-1)
    if b.size != n.size or b.size == 0 or np.any(b <= 0) or np.any(n <= 0):
        raise ValueError(f"batch_sizes and steps must be equally long, non-empty and > 0; "
                         f"got {b.size} and {n.size} values")
    check_type(fit, "fit", CriticalBatchFit, "a CriticalBatchFit (from fit_critical_batch)")
    curves = _check_times(times)
    fig, axes = new_figure(1, 2 if curves else 1, size=(9.6, 5.0) if curves else (6.4, 5.0),
                           squeeze=False)
    ax = axes[0, 0]
    grid = np.geomspace(min(b.min(), fit.b_crit) / 2, max(b.max(), fit.b_crit) * 2, 120)
    ax.plot(grid, fit.n_min * fit.b_crit / grid, "--", color="0.4",
            label=tr("perfect scaling: {formula}", formula=r"$n_{\min} B_{\mathrm{crit}} / B$"))
    ax.axhline(fit.n_min, ls=":", color="0.4", label=tr("floor $n_{{\\min}}$ = {steps}", steps=f"{fit.n_min:.0f}"))
    ax.plot(grid, fit.steps(grid), color=COLORS[1],
            label=tr("fit: {formula}", formula=r"$n_{\min}(1 + B_{\mathrm{crit}}/B)$"))
    ax.plot(b, n, "o", color=COLORS[0], markersize=8, label=tr("measured"))
    ax.axvline(fit.b_crit, color=COLORS[2], lw=1.2, ls="-.")
    ax.annotate(rf"$B_{{\mathrm{{crit}}}}$ = {fit.b_crit:.0f}", (fit.b_crit, 1.0),
                xycoords=("data", "axes fraction"), xytext=(5, -4), textcoords="offset points",
                va="top", color=COLORS[2])
    plain_log_axis(ax.yaxis, fit.n_min / 1.6, max(n.max(), fit.steps(grid[0])) * 1.3)
    ax.set(xlabel=tr("batch size B, log scale"), ylabel=tr("steps to the target, log scale"),
           title=tr("steps to the target\n(statistical efficiency)"))
    log2_axis(ax.xaxis, grid[-1])
    ax.set_xlim(grid[0], grid[-1])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), borderaxespad=0.0)
    if curves:
        _time_panel(axes[0, 1], curves)
    return fig


def _check_times(times):
    if times is None:
        return {}
    check_type(times, "times", Mapping, "a mapping {label: (batch sizes, seconds)}")
    curves = {}
    for label, pair in times.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"times[{label!r}] must be a pair (batch sizes, seconds)")
        x = as_real(pair[0], f"times[{label!r}] batch sizes").reshape(-1)
        try:  # seconds may hold NaN (an impossible batch size), so as_real does not apply
            y = np.asarray(pair[1], dtype=float).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"times[{label!r}] seconds must be numbers, got {pair[1]!r:.60}") from exc
        if x.size != y.size or x.size == 0 or np.any(x <= 0) or np.any(y[~np.isnan(y)] <= 0):
            raise ValueError(f"times[{label!r}] needs equally long batch sizes and seconds, all > 0")
        curves[str(label)] = (x, y)
    return curves


#: Colour, line style and marker of each time curve (not the steps panel's colours).
_TIME_STYLES = ((COLORS[3], "-", "o"), (COLORS[7], "--", "s"), (COLORS[4], "-.", "^"), (COLORS[0], ":", "D"))


def _time_panel(ax, curves) -> None:
    for i, (label, (x, y)) in enumerate(curves.items()):
        color, ls, marker = _TIME_STYLES[i % len(_TIME_STYLES)]
        fastest = [int(np.nanargmin(y))] if np.isfinite(y).any() else []  # one marker, there
        ax.plot(x, y * 1e3, color=color, ls=ls, marker=marker, markevery=fastest, markersize=9,
                label=label)
    xs = np.concatenate([x for x, _ in curves.values()])
    ys = np.concatenate([y for _, y in curves.values()]) * 1e3
    log2_axis(ax.xaxis, xs.max())
    ax.set_xlim(xs.min(), xs.max())
    if np.isfinite(ys).any():
        plain_log_axis(ax.yaxis, np.nanmin(ys) / 1.2, np.nanmax(ys) * 1.2)
    ax.set(xlabel=tr("global batch size B, log scale"), ylabel=tr("time to the target [ms], log scale"),
           title=tr("time to the target =\nsteps × time per step (model)"))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), borderaxespad=0.0, ncol=2,
              title=tr("marker: the fastest batch"))
