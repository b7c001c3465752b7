"""Figures of context and expert parallelism: the ring's schedule, the causal mask's imbalance,
the experts' load.

* :func:`ring_schedule_figure`: which key/value block each worker holds at each step of ring
  attention (环形注意力), in the order :class:`course_lib.parallel.context.RingAttention` runs
  them, and the blocks a causal mask (因果掩码) halves or skips;
* :func:`causal_busy_figure`: each worker's measured busy time, even split against zig-zag
  split, beside the counted work (:func:`course_lib.context_cost.attention_work`) scaled to the
  same total;
* :func:`expert_load_figure`: the assignments routed to each expert of a mixture of experts
  (混合专家), its capacity and the dropped part; the share dropped against the capacity factor
  (容量因子, :func:`course_lib.moe.capacity`, :func:`course_lib.moe.dropped`); the busiest
  expert, whose time the step waits for.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import context_cost, moe
from .._validate import check_array, check_int, check_real, check_type
from ..i18n import N_, tr
from . import COLORS, new_figure, styled

__all__ = ["ring_schedule_figure", "causal_busy_figure", "expert_load_figure"]

#: The splits of the sequence, as the figures name them.
_SPLIT_NAME = {"even": N_("even split"), "zigzag": N_("zig-zag split")}
#: Most workers a ring schedule is drawn for (one colour of the palette per block).
_MAX_RING = 8
#: A block skipped by the causal mask: white, hatched grey ("nothing computed").
_SKIPPED = dict(facecolor="white", edgecolor="0.6", hatch="///", linewidth=0.0)


def _tint(color: str, white: float) -> tuple:
    """``color`` mixed with ``white`` parts of white (0: the colour, 1: white)."""
    from matplotlib.colors import to_rgb

    return tuple((1 - white) * c + white for c in to_rgb(color))


def _check_split(split) -> str:
    if split not in _SPLIT_NAME:
        raise ValueError(f"split must be 'even' or 'zigzag', got {split!r}")
    return split


def _ring_schedule(workers: int, causal: bool, split: str) -> tuple[np.ndarray, np.ndarray]:
    """``(held, share)``, each ``(workers, steps)``: the worker whose key/value block worker ``i``
    holds at step ``s`` of the forward pass, and the share of that block's scores it computes
    (1 whole, 1/2 half, 0 skipped by the causal mask).

    Read from the code, not re-derived: every worker's
    :meth:`~course_lib.parallel.context.RingAttention.forward` runs on tiny arrays (a sequence
    of ``2 workers`` tokens, one head of size 1) with a ring that hands each block straight
    back, and each step's :meth:`~course_lib.parallel.context.RingAttention.pairs` call is
    recorded: whose block it was asked for, and the scores of the pairs it returned.

    Examples
    --------
    >>> held, share = _ring_schedule(3, False, "even")
    >>> held.tolist()
    [[0, 2, 1], [1, 0, 2], [2, 1, 0]]
    >>> _ring_schedule(2, True, "even")[1].tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    from ..parallel.context import RingAttention, sequence_chunks

    chunks = sequence_chunks(2 * workers, workers, split)  # 2 tokens per worker: both splits cut it
    held, share = np.full((workers, workers), -1), np.zeros((workers, workers))

    class Returned:  # a ring whose blocks come straight back: only the order of the owners matters here
        def send(self, k, v):
            self.block = (k, v)

        def recv(self):
            return self.block

    class Watched(RingAttention):
        step = 0

        def pairs(self, owner):
            found = super().pairs(owner)
            held[self.rank, self.step] = owner
            share[self.rank, self.step] = sum((r.stop - r.start) * (c.stop - c.start) for r, c, _ in found) / 4
            self.step += 1
            return found

    for rank in range(workers):
        q = np.zeros((1, 2, 1))  # 1 sequence, my 2 tokens, 1 value each
        Watched(Returned(), chunks, rank, causal).forward(q, q, q, 1)
    return held, share


@styled
def ring_schedule_figure(workers: int, causal: bool = False, split: str = "even"):
    """Ring attention's schedule: a grid of ring steps (columns) by workers (rows), each cell
    the key/value block the worker holds at that step (block ``j``: the keys and values of
    worker ``j``'s tokens), in the order the course's
    :class:`~course_lib.parallel.context.RingAttention` runs them (:func:`_ring_schedule`).

    Each block has its colour, so a block's diagonal path round the ring is seen. With
    ``causal=True`` a cell is filled in full where the worker computes the whole block, in a
    lighter shade where it computes half of it (the zig-zag split), and hatched where it skips
    it (its keys all come after its queries).

    Parameters
    ----------
    workers : int
        :math:`N_c`, 1 to 8.
    causal : bool
        Whether attention has a causal mask.
    split : {"even", "zigzag"}
        How the sequence is split (:func:`course_lib.parallel.context.sequence_chunks`).

    Examples
    --------
    >>> fig = ring_schedule_figure(4)
    >>> [t.get_text() for t in fig.axes[0].texts][:4]
    ['block 0', 'block 3', 'block 2', 'block 1']
    """
    workers = check_int(workers, "workers", 1, _MAX_RING)
    check_type(causal, "causal", (bool, np.bool_), "True or False")
    split = _check_split(split)
    held, share = _ring_schedule(workers, bool(causal), split)
    from matplotlib.patches import Patch, Rectangle

    fig, ax = new_figure(size=(min(9.6, 7.6 + 0.25 * max(workers - 4, 0)), 2.0 + 0.62 * workers))
    ax.grid(False)
    for rank in range(workers):
        for step in range(workers):
            owner, part = held[rank, step], share[rank, step]
            style = (_SKIPPED if part == 0 else
                     dict(facecolor=_tint(COLORS[owner], 0.35 if part == 1 else 0.75), edgecolor="white"))
            ax.add_patch(Rectangle((step - 0.48, rank - 0.46), 0.96, 0.92, **style))
            ax.text(step, rank, tr("block {block}", block=owner), ha="center", va="center",
                    color="0.4" if part == 0 else "black", fontweight="normal" if part < 1 else "bold",
                    bbox=dict(facecolor="white", edgecolor="none", pad=2.0) if part == 0 else None)
    ax.set_xlim(-0.55, workers - 0.45)
    ax.set_ylim(workers - 0.5, -0.5)
    ax.set_xticks(range(workers), [str(s) for s in range(workers)])
    ax.set_yticks(range(workers), [tr("worker {worker}", worker=r) for r in range(workers)])
    ax.set_xlabel(tr("step of the ring (forward pass)"))
    ax.tick_params(length=0)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    title = tr("Ring attention, N_c = {workers}: the key/value block each worker holds", workers=workers)
    mask = tr("causal mask, {split}", split=tr(_SPLIT_NAME[split])) if causal else tr("no mask")
    ax.set_title(f"{title}\n{mask}")
    if causal:
        kinds = {1.0: Patch(facecolor=_tint(COLORS[0], 0.35), label=tr("computed whole")),
                 0.5: Patch(facecolor=_tint(COLORS[0], 0.75), label=tr("half computed")),
                 0.0: Patch(**_SKIPPED, label=tr("skipped (keys after queries)"))}
        handles = [patch for part, patch in kinds.items() if np.any(share == part)]
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    return fig


@styled
def causal_busy_figure(busy: Mapping, *, seq_length: int):
    """The causal mask's imbalance: each worker's measured busy time (ms per step), one panel
    per split, beside its counted work (:func:`course_lib.context_cost.attention_work`: the
    scores it computes) scaled to the same total, so that measurement and count compare bar
    by bar. Each panel's title gives the busiest over the mean, measured and counted.

    Parameters
    ----------
    busy : mapping
        ``{"even": ms, "zigzag": ms}`` (either or both): one busy time per worker (> 0), the
        same number of workers in each.
    seq_length : int
        :math:`L`, the tokens the workers split.

    Examples
    --------
    >>> fig = causal_busy_figure({"even": [4.0, 6.6, 8.7, 10.8], "zigzag": [10.3, 9.4, 11.2, 9.5]}, seq_length=64)
    >>> [round(float(b.get_height()), 2) for b in fig.axes[0].patches[4:]]   # the even split's count, scaled
    [3.01, 6.02, 9.03, 12.04]
    """
    check_type(busy, "busy", Mapping, "a mapping {'even': busy times, 'zigzag': busy times}")
    if not busy or any(split not in _SPLIT_NAME for split in busy):
        raise ValueError(f"busy must map 'even' and/or 'zigzag' to busy times, got keys {list(busy)}")
    times = {split: check_array(busy[split], f"busy[{split!r}]", 0, low_open=True) for split in _SPLIT_NAME
             if split in busy}
    shapes = {t.shape for t in times.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1 or not 1 <= next(iter(shapes))[0] <= 64:
        raise ValueError(f"busy must give 1 to 64 workers one busy time each, the same workers per split, "
                         f"got shapes {sorted(shapes)}")
    seq_length = check_int(seq_length, "seq_length", 1, 2**24)
    workers = next(iter(times.values())).size
    try:
        work = {split: context_cost.attention_work(seq_length, workers, split) for split in times}
    except ValueError as e:
        raise ValueError(f"seq_length: {e}") from None
    fig, axes = new_figure(1, len(times), size=(9.6 if len(times) > 1 else 6.4, 4.0), sharey=True, squeeze=False)
    x, width = np.arange(workers), 0.38
    for ax, (split, ms) in zip(axes[0], times.items(), strict=True):
        counted = work[split] / work[split].sum() * ms.sum()
        ax.bar(x - width / 2, ms, width, color=COLORS[0], label=tr("measured busy time"))
        ax.bar(x + width / 2, counted, width, facecolor=_tint(COLORS[4], 0.3), edgecolor=COLORS[4], hatch="..",
               linewidth=0.0, label=tr("counted work (scores computed), scaled to the same total"))
        ax.set_xticks(x, [str(j) for j in range(workers)])
        ax.set_xlabel(tr("worker"))
        ratios = tr("busiest / mean: measured {measured}, counted {counted}", measured=f"{ms.max() / ms.mean():.2f}",
                    counted=f"{counted.max() / counted.mean():.2f}")
        ax.set_title(f"{tr(_SPLIT_NAME[split])}\n{ratios}")
    axes[0, 0].set_ylabel(tr("attention busy time per step [ms]"))
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=2, frameon=False)
    return fig


@styled
def expert_load_figure(load, *, tokens: int, top_k: int, capacity_factor: float, busy=None):
    r"""A mixture of experts' load in one batch, and what the capacity factor does with it.

    Left: the assignments routed to each expert (``load``), the part within its capacity
    :math:`C = \lceil \phi\, k_{\text{top}} B L / E \rceil` (:func:`course_lib.moe.capacity`)
    solid, the part beyond it, dropped (:func:`course_lib.moe.dropped`), hatched; the capacity
    as a line. Middle: the share of the assignments dropped for capacity factors 1 to 2 (the
    same load: the same gate decisions), the run's factor marked. Right (if ``busy`` is given):
    each expert's busy time per step, the busiest marked: the step waits for it.

    Parameters
    ----------
    load : array-like
        Assignments routed to each of the :math:`E` experts (whole counts >= 0; they add up to
        ``top_k * tokens``).
    tokens : int
        :math:`B L`, the tokens of the batch.
    top_k : int
        :math:`k_{\text{top}}`, experts per token.
    capacity_factor : float
        :math:`\phi` of the run (> 0).
    busy : array-like, optional
        Each expert's busy time per step, ms (>= 0, one per expert).

    Examples
    --------
    >>> fig = expert_load_figure([215, 132, 3, 162], tokens=256, top_k=2, capacity_factor=1.25)
    >>> fig.axes[0].get_lines()[0].get_ydata()[0]         # C = ceil(1.25 x 2 x 256 / 4)
    160
    """
    routed = check_array(load, "load", 0, whole=True)
    if routed.ndim != 1 or not 1 <= routed.size <= 64:
        raise ValueError(f"load must be 1 to 64 counts, one per expert, got shape {routed.shape}")
    experts = routed.size
    tokens = check_int(tokens, "tokens", 1, 2**40)
    top_k = check_int(top_k, "top_k", 1, experts)
    phi = check_real(capacity_factor, "capacity_factor", 0.0, 1e6, low_open=True)
    if routed.sum() != top_k * tokens:
        raise ValueError(f"load must add up to top_k * tokens = {top_k * tokens} assignments, got {routed.sum():g}")
    if busy is not None:
        busy = check_array(busy, "busy", 0)
        if busy.shape != routed.shape:
            raise ValueError(f"busy must give one time per expert ({experts}), got shape {busy.shape}")
    cap = moe.capacity(tokens, experts, top_k, phi)
    drops = moe.dropped(routed, cap)
    fig, axes = new_figure(1, 2 if busy is None else 3, size=(8.4 if busy is None else 9.6, 4.4), squeeze=False)
    ax, bx = axes[0, 0], axes[0, 1]
    e = np.arange(experts)
    ax.bar(e, routed - drops, 0.7, color=COLORS[0], label=tr("kept"))
    ax.bar(e, drops, 0.7, bottom=routed - drops, facecolor=_tint(COLORS[1], 0.55), edgecolor=COLORS[1],
           hatch="///", linewidth=0.0, label=tr("dropped"))
    ax.axhline(cap, color="black", linestyle="--", label=tr("capacity C = {capacity}", capacity=cap))
    ax.set_xticks(e, [str(i) for i in e])
    ax.set_xlabel(tr("expert"))
    ax.set_ylabel(tr("assignments in the batch"))
    ax.set_ylim(0, 1.12 * max(routed.max(), cap))
    ax.set_title(tr("φ = {factor}: {dropped} of {total} dropped", factor=f"{phi:g}", dropped=int(drops.sum()),
                    total=int(routed.sum())))
    factors = np.union1d(np.round(np.linspace(min(1.0, phi), max(2.0, phi), 201), 4), [phi])
    share = np.array([moe.dropped(routed, moe.capacity(tokens, experts, top_k, f)).sum() for f in factors]) / routed.sum()
    bx.plot(factors, 100 * share, color=COLORS[1], drawstyle="steps-post")
    bx.plot([phi], [100 * drops.sum() / routed.sum()], "o", color="black", markersize=8)
    bx.annotate(tr("the run: {share}", share=f"{drops.sum() / routed.sum():.1%}"), (phi, 100 * drops.sum() / routed.sum()),
                textcoords="offset points", xytext=(10, 6))
    bx.set_xlabel(tr("capacity factor φ"))
    bx.set_ylabel(tr("assignments dropped [%]"))
    bx.set_ylim(0, max(1.0, 115 * share.max()))
    bx.set_title(tr("drops against the capacity factor"))
    if busy is not None:
        cx = axes[0, 2]
        busiest = busy == busy.max()
        cx.bar(e[~busiest], busy[~busiest], 0.7, color=_tint(COLORS[2], 0.55), label=tr("expert busy time"))
        cx.bar(e[busiest], busy[busiest], 0.7, color=COLORS[2], label=tr("the busiest"))
        cx.axhline(busy.mean(), color="black", linestyle=":",
                   label=tr("even load: {time}", time=f"{busy.mean():.2f} ms"))
        cx.set_xticks(e, [str(i) for i in e])
        cx.set_xlabel(tr("expert"))
        cx.set_ylabel(tr("expert busy time per step [ms]"))
        cx.set_ylim(0, 1.15 * max(busy.max(), 1e-9))
        cx.set_title(tr("the step waits for {time}", time=f"{busy.max():.2f} ms"))
    handles = [h for a in axes[0] for h in a.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="outside lower center", ncols=2 if busy is not None else 3, frameon=False)
    return fig
