"""Figures of chapter 06: tensor parallelism (张量并行) and what each scheme moves.

* :func:`tensor_split_diagram` - one pair of linear layers split over workers: the
  first by columns, the second by rows, the partial outputs summed by an all-reduce
  (layout from :func:`course_lib.parallel.tensor.layer_shards`);
* :func:`scheme_bytes_figure` - bytes per step of data, pipeline and tensor
  parallelism, measured beside the formula, against the global batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .._validate import as_real, check_int, check_type
from . import COLORS, new_figure, styled
from .parallel import _arrow, _box

__all__ = ["scheme_bytes_figure", "tensor_split_diagram"]


def _blocks(ax, x, y, w, h, cuts, axis: str, label: str, *, alpha=0.5):
    """A matrix drawn as blocks, one colour per worker; ``cuts`` are (lo, hi) fractions."""
    from matplotlib.patches import Rectangle

    for r, (lo, hi) in enumerate(cuts):
        color = COLORS[r % len(COLORS)]
        if hi <= lo:
            continue
        xy, size = ((x + w * lo, y), (w * (hi - lo), h)) if axis == "cols" else \
            ((x, y + h * (1 - hi)), (w, h * (hi - lo)))
        ax.add_patch(Rectangle(xy, *size, facecolor=color, alpha=alpha, edgecolor="white", lw=1.5))
    ax.text(x + w / 2, y - 0.035, label, ha="center", va="top", fontsize=8)


@styled
def tensor_split_diagram(workers: int = 2, hidden: int = 8):
    """One pair of linear layers ``Y = relu(X A) B`` split over ``workers`` (Megatron-style).

    Left: the whole product. Right: worker ``r`` holds the column block ``A[:, c_r]``
    and the row block ``B[c_r, :]`` (``c_r`` from
    :func:`course_lib.parallel.partition.shard_bounds` of the hidden width, uneven when
    ``workers`` does not divide it), computes its partial output with no communication
    ("f": identity forward, all-reduce backward) and the all-reduce adds the partial
    outputs ("g": all-reduce forward, identity backward).

    Examples
    --------
    >>> fig = tensor_split_diagram(3, 8)
    >>> fig.axes[0].get_title()
    'a pair of linear layers over 3 workers (hidden width 8: blocks of 3, 3, 2)'
    """
    from ..parallel.partition import shard_bounds

    workers = check_int(workers, "workers", 1, 8)
    hidden = check_int(hidden, "hidden", 1, 64)
    bounds = shard_bounds(hidden, workers)
    cuts = [(lo / hidden, hi / hidden) for lo, hi in bounds]
    widths = ", ".join(str(hi - lo) for lo, hi in bounds)
    fig, ax = new_figure(size=(10.0, 2.0 + 0.75 * workers))
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(0.0, 1.02)
    ax.set_title(f"a pair of linear layers over {workers} workers (hidden width {hidden}: blocks of {widths})",
                 fontsize=10)
    top, bottom = 0.86, 0.06
    row_h = (top - bottom) / workers
    # the whole product, left
    _box(ax, 0.01, 0.42, 0.05, 0.2, "X", "0.5", alpha=0.15)
    _blocks(ax, 0.08, 0.42, 0.10, 0.2, cuts, "cols", "A: split by columns")
    _blocks(ax, 0.20, 0.37, 0.06, 0.3, cuts, "rows", "B: split by rows")
    ax.text(0.135, 0.75, "Y = relu(X A) B", ha="center", fontsize=9)
    # per worker, right
    x0 = 0.34
    for r, (lo, hi) in enumerate(bounds):
        color = COLORS[r % len(COLORS)]
        y = top - (r + 1) * row_h + row_h * 0.15
        h = row_h * 0.7
        _box(ax, x0, y, 0.05, h, "X", "0.5", alpha=0.15, fontsize=7)
        _box(ax, x0 + 0.07, y, 0.08, h, f"A[:, {lo}:{hi}]", color, alpha=0.5, fontsize=7)
        _arrow(ax, (x0 + 0.155, y + h / 2), (x0 + 0.18, y + h / 2))
        _box(ax, x0 + 0.18, y, 0.10, h, f"H{r} = relu(X A{r})\nno communication", color, alpha=0.15,
             fontsize=7)
        _box(ax, x0 + 0.30, y, 0.08, h, f"B[{lo}:{hi}, :]", color, alpha=0.5, fontsize=7)
        _arrow(ax, (x0 + 0.385, y + h / 2), (x0 + 0.41, y + h / 2))
        _box(ax, x0 + 0.41, y, 0.07, h, f"Y{r} = H{r} B{r}\npartial", color, alpha=0.15, fontsize=7)
        _arrow(ax, (x0 + 0.485, y + h / 2), (0.87, 0.46))
    _box(ax, 0.87, 0.36, 0.12, 0.2, "all-reduce\nY = Σ Yr (+ bias)\nsame on every worker", "0.3",
         alpha=0.12, fontsize=7)
    ax.text(x0 + 0.11, top + 0.05, '"f": identity forward,\nall-reduce of dX backward', ha="center",
            va="bottom", fontsize=8)
    ax.text(0.93, 0.62, '"g": all-reduce forward,\nidentity backward', ha="center", va="bottom", fontsize=8)
    return fig


@styled
def scheme_bytes_figure(batch_sizes: Sequence[int], formula: Mapping[str, Sequence[float]],
                        measured: Mapping[str, tuple[int, float]] | None = None, *,
                        title: str = "bytes moved per training step"):
    """Bytes per step of each scheme against the global batch (log-log), with measured points.

    Parameters
    ----------
    batch_sizes : sequence of int
        Global batches, > 0 (the x axis).
    formula : mapping of str to sequence of float
        Scheme name -> bytes per step by formula at each batch (> 0).
    measured : mapping of str to (batch, bytes), optional
        Scheme name -> one measured point, drawn as a marker on that scheme's line.
    title : str

    Examples
    --------
    >>> fig = scheme_bytes_figure([64, 256], {"data": [4e6, 4e6], "tensor": [1e5, 4e5]},
    ...                           {"tensor": (256, 4e5)})
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    ['data', 'tensor', 'measured']
    """
    check_type(title, "title", str, "a str")
    batches = as_real(batch_sizes, "batch_sizes", allowed="> 0").reshape(-1)
    if batches.size == 0 or np.any(batches <= 0) or not np.all(np.isfinite(batches)):
        raise ValueError("batch_sizes must be a non-empty sequence of finite numbers > 0")
    check_type(formula, "formula", Mapping, "a mapping of scheme name to bytes per batch")
    if measured is not None:
        check_type(measured, "measured", Mapping, "a mapping of scheme name to (batch, bytes)")
    fig, ax = new_figure(size=(7.5, 4.0))
    for k, (name, values) in enumerate(formula.items()):
        v = as_real(values, f"formula[{name!r}]", allowed="> 0").reshape(-1)
        if v.shape != batches.shape or np.any(v <= 0) or not np.all(np.isfinite(v)):
            raise ValueError(f"formula[{name!r}] must hold one finite value > 0 per batch size")
        ax.plot(batches, v, color=COLORS[k % len(COLORS)], ls=("-", "--", ":", "-.")[k % 4], lw=1.8,
                label=name)  # styles too: two schemes may nearly coincide
        if measured is not None and name in measured:
            b, m = measured[name]
            ax.plot([b], [m], "o", color=COLORS[k % len(COLORS)], mfc="none", ms=9, mew=1.6)
    if measured:
        ax.plot([], [], "o", color="0.3", mfc="none", label="measured")
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_yscale("log")
    ax.set(xlabel="global batch B", ylabel="bytes per step", title=title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig
