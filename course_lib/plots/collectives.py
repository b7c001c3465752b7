"""Figures of the collectives family (who holds what, before and after) and of stale gradients.

* :func:`collectives_figure` - who holds what before and after each of the six
  collectives, drawn from :func:`course_lib.alpha_beta.simulate_collective` (each algorithm run
  on numpy arrays), one small before/after panel per collective;
* :func:`staleness_figure` - loss curves of SGD with δ-step-stale gradients and the
  largest learning rate that still converges for each staleness δ
  (:mod:`course_lib.staleness`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .._validate import check_type
from ..alpha_beta import COLLECTIVES, simulate_collective
from ..i18n import N_, tr
from . import COLORS, new_figure, plain_log_axis, styled

__all__ = ["collectives_figure", "staleness_figure"]

_LETTERS = "ABCDEFGHIJKLMNOP"
_SUM = "#333333"
#: A panel's title per collective (the names of :data:`course_lib.alpha_beta.COLLECTIVES`).
_TITLES = {"broadcast": N_("broadcast (root A)"), "reduce": N_("reduce (root A)"), "all-gather": N_("all-gather"),
           "reduce-scatter": N_("reduce-scatter"), "all-to-all": N_("all-to-all"), "all-reduce": N_("all-reduce")}


def _cell(vector: np.ndarray) -> tuple[str, str, str]:
    """(label, face colour, text colour) of one slot's content (see ``simulate_collective``)."""
    if np.isnan(vector).all():
        return "", "white", "black"
    sources = np.flatnonzero(vector)
    block = int(vector[sources[0]]) - 1
    if sources.size == 1:
        s = int(sources[0])
        return f"{_LETTERS[s]}{block}", COLORS[s % len(COLORS)], "white" if s % len(COLORS) in (0, 1, 3, 7) else "black"
    if sources.size == vector.size:
        return f"Σ{block}", _SUM, "white"
    return "+".join(_LETTERS[int(s)] for s in sources) + str(block), "0.7", "black"  # a partial sum


def _grid(ax, holding: np.ndarray, x0: float) -> None:
    from matplotlib.patches import Rectangle

    n = holding.shape[0]
    for d in range(n):
        for c in range(n):
            label, face, ink = _cell(holding[d, c])
            ax.add_patch(Rectangle((x0 + c, d), 1, 1, facecolor=face, edgecolor="0.55", linewidth=0.8))
            if label:
                ax.text(x0 + c + 0.5, d + 0.5, label, ha="center", va="center", color=ink, fontsize=10)


@styled
def collectives_figure(results: Mapping[str, Mapping] | None = None, *, devices: int = 4):
    """Who holds what before and after each collective, one panel per collective.

    Parameters
    ----------
    results : mapping of str to dict, optional
        ``{name: simulate_collective(name, N)}`` for names in
        :data:`course_lib.alpha_beta.COLLECTIVES`; default: all six for ``devices``.
    devices : int
        :math:`N` when ``results`` is not given (2 to 6 read well).

    Returns
    -------
    matplotlib.figure.Figure
        Per panel a before grid and an after grid: a row per device, a column per slot
        (chunk, block or segment of :math:`m/N` bytes). ``B2`` is device B's chunk 2,
        ``Σ2`` chunk 2 summed over all devices, white: nothing (defined) there.

    Examples
    --------
    >>> fig = collectives_figure(devices=3)
    >>> [ax.get_title() for ax in fig.axes][:2]
    ['broadcast (root A)', 'reduce (root A)']
    """
    if results is None:
        results = {name: simulate_collective(name, devices) for name in COLLECTIVES}
    check_type(results, "results", Mapping, "a mapping of collective names to simulate_collective results")
    names = [name for name in COLLECTIVES if name in results]
    if not names:
        raise ValueError(f"results must hold at least one of {COLLECTIVES}, got keys {sorted(results)}")
    fig, axes = new_figure(2, 3, size=(9.6, 5.0))
    for ax in np.ravel(axes)[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(np.ravel(axes), names):
        before, after = np.asarray(results[name]["before"]), np.asarray(results[name]["after"])
        n = before.shape[0]
        _grid(ax, before, 0.0)
        _grid(ax, after, n + 1.4)
        ax.annotate("", xy=(n + 1.25, n / 2), xytext=(n + 0.15, n / 2),
                    arrowprops=dict(arrowstyle="->", color="0.3", linewidth=1.5))
        ax.text(n / 2, n + 0.15, tr("before"), ha="center", va="top", fontsize=10)
        ax.text(n + 1.4 + n / 2, n + 0.15, tr("after"), ha="center", va="top", fontsize=10)
        for d in range(n):
            ax.text(-0.12, d + 0.5, _LETTERS[d], ha="right", va="center", fontsize=10)
        ax.set_xlim(-0.7, 2 * n + 1.5)
        ax.set_ylim(n + 0.9, -0.1)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(tr(_TITLES[name]))
        ax.text(-0.7, n + 0.75, tr("{rounds} rounds", rounds=results[name]["rounds"]), fontsize=10, color="0.3",
                va="center")
    fig.suptitle(tr("Who holds what: a row per device, a column per chunk (Σ2: chunk 2 summed over all {devices})",
                    devices=n))
    return fig


@styled
def staleness_figure(curves: Mapping[int, Sequence[float]], lr: float, max_lr: Mapping[int, float] | None = None,
                     *, title: str | None = None):
    """Loss curves of SGD with δ-step-stale gradients; optionally the largest stable learning rate.

    Parameters
    ----------
    curves : mapping of int to sequence of float
        ``{δ: losses per step}`` (:func:`course_lib.staleness.train_stale`).
    lr : float
        The learning rate of the curves (for the title).
    max_lr : mapping of int to float, optional
        ``{δ: largest learning rate that converged}``
        (:func:`course_lib.staleness.largest_stable_lr`); drawn as a second panel.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = staleness_figure({0: [2.3, 1.0, 0.5], 4: [2.3, 2.0, 1.5]}, 0.5, {0: 1.0, 4: 0.25})
    >>> len(fig.axes)
    2
    """
    check_type(curves, "curves", Mapping, "a mapping of staleness δ to a sequence of losses")
    fig, axes = new_figure(1, 2 if max_lr else 1, size=(9.6, 3.8) if max_lr else (6.4, 3.8))
    ax = axes[0] if max_lr else axes
    shown = []
    for i, (k, losses) in enumerate(sorted(curves.items())):
        losses = np.asarray(losses, dtype=float)
        ax.plot(np.arange(losses.size), losses, color=COLORS[i % len(COLORS)], label=f"δ = {k}")
        shown.append(losses[np.isfinite(losses) & (losses > 0)])
    ax.set_xlabel(tr("step"))
    ax.set_ylabel(tr("loss of the step's batch"))
    ax.set_yscale("log")
    values = np.concatenate(shown) if shown else np.ones(1)
    if values.size:
        plain_log_axis(ax.yaxis, float(values.min()), float(values.max()))
    ax.set_title(title or tr("Gradients δ steps stale, learning rate γ = {lr}", lr=f"{lr:g}"))
    ax.legend()
    if max_lr:
        ks = sorted(max_lr)
        right = axes[1]
        right.plot(range(len(ks)), [max_lr[k] for k in ks], "o-", color=COLORS[0])
        right.set_xticks(range(len(ks)), [str(k) for k in ks])
        right.set_xlim(-0.4, len(ks) - 0.3)
        right.set_yscale("log", base=2)
        for i, k in enumerate(ks):
            right.annotate(f"{max_lr[k]:g}", (i, max_lr[k]), textcoords="offset points", xytext=(8, 4), fontsize=10)
        right.set_xlabel(tr("staleness δ (steps)"))
        right.set_ylabel(tr("largest stable learning rate"))
        right.set_title(tr("Staler gradients need smaller steps"))
    return fig
