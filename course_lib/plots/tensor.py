"""Figures of tensor parallelism (张量并行) and what each scheme moves.

* :func:`tensor_split_diagram` - one pair of linear layers split over workers: the
  first by columns, the second by rows, the partial outputs summed by an all-reduce
  (layout from :func:`course_lib.parallel.tensor.layer_blocks`);
* :func:`scheme_bytes_figure` - bytes per step of data, pipeline and tensor
  parallelism, measured beside the formula, against the global batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .._validate import as_real, check_int, check_type
from ..i18n import N_, tr
from . import COLORS, new_figure, styled
from .parallel import _arrow, _box, _diagram_axes

__all__ = ["scheme_bytes_figure", "tensor_split_diagram"]


def _blocks(ax, x, y, w, h, cuts, axis: str, label: str, *, alpha=0.55):
    """A matrix drawn as blocks, one colour per worker; ``cuts`` are (lo, hi) fractions."""
    from matplotlib.patches import Rectangle

    for r, (lo, hi) in enumerate(cuts):
        color = COLORS[r % len(COLORS)]
        if hi <= lo:
            continue
        xy, size = ((x + w * lo, y), (w * (hi - lo), h)) if axis == "cols" else \
            ((x, y + h * (1 - hi)), (w, h * (hi - lo)))
        ax.add_patch(Rectangle(xy, *size, facecolor=color, alpha=alpha, edgecolor="white", lw=1.5))
    ax.text(x + w / 2, y - 0.03, label, ha="center", va="top")


@styled
def tensor_split_diagram(workers: int = 2, hidden: int = 8):
    """One pair of linear layers ``Y = relu(X A_1) A_2`` split over ``workers`` (Megatron-style).

    Left: the whole product, ``A_1`` cut into column blocks and ``A_2`` into row blocks,
    one colour per worker. Right: worker ``j`` holds the column block ``A_1[:, c_j]`` and
    the row block ``A_2[c_j, :]`` (``c_j`` from
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
    height = 2.2 + 0.85 * workers
    fig, ax = _diagram_axes(
        height, tr("a pair of linear layers over {workers} workers (hidden width {hidden}: blocks of {widths})",
                   workers=workers, hidden=hidden, widths=widths))
    top, bottom = 1 - 0.75 / (height - 0.5), 0.02  # room for the labels of "f" and "g"
    row_h = (top - bottom) / workers
    mid = (top + bottom) / 2
    # the whole product, left
    ax.text(0.1, mid + 0.2, "$Y = \\mathrm{relu}(X A_1)\\, A_2$", ha="center", va="bottom")
    _blocks(ax, 0.01, mid - 0.1, 0.10, 0.2, cuts, "cols", tr("$A_1$: by\ncolumns"))
    _blocks(ax, 0.14, mid - 0.15, 0.06, 0.3, cuts, "rows", tr("$A_2$: by\nrows"))
    # per worker, right
    x0, x_sum = 0.235, 0.865
    for j, (lo, hi) in enumerate(bounds):
        color = COLORS[j % len(COLORS)]
        h = min(row_h * 0.72, 0.32)
        y = top - (j + 0.5) * row_h - h / 2
        _box(ax, x0, y, 0.095, h, f"$A_1[:, {lo}{{:}}{hi}]$", color, alpha=0.55)
        _arrow(ax, (x0 + 0.095, y + h / 2), (x0 + 0.115, y + h / 2))
        _box(ax, x0 + 0.115, y, 0.17, h,
             tr("{formula}\nno communication", formula=f"$H_{j} = \\mathrm{{relu}}(X A_1[:, c_{j}])$"),
             color, alpha=0.15)
        _arrow(ax, (x0 + 0.285, y + h / 2), (x0 + 0.305, y + h / 2))
        _box(ax, x0 + 0.305, y, 0.095, h, f"$A_2[{lo}{{:}}{hi}, :]$", color, alpha=0.55)
        _arrow(ax, (x0 + 0.4, y + h / 2), (x0 + 0.42, y + h / 2))
        _box(ax, x0 + 0.42, y, 0.15, h, tr("{formula}\npartial", formula=f"$Y_{j} = H_{j}\\, A_2[c_{j}, :]$"), color,
             alpha=0.15)
        _arrow(ax, (x0 + 0.57, y + h / 2), (x_sum, mid), color=color, lw=2.0)
    _box(ax, x_sum, mid - 0.14, 1 - x_sum - 0.005, 0.28,
         tr("all-reduce\n$Y = \\Sigma_j\\, Y_j$\n(+ bias)\non every\nworker"), "0.3", alpha=0.1)
    ax.text(x0 + 0.06, top + 0.02, tr('"f": identity forward,\nall-reduce of dX backward'), ha="center", va="bottom")
    ax.text(x_sum + 0.065, mid + 0.16, tr('"g": all-reduce\nforward, identity\nbackward'), ha="center", va="bottom")
    return fig


@styled
def scheme_bytes_figure(batch_sizes: Sequence[int], formula: Mapping[str, Sequence[float]],
                        measured: Mapping[str, tuple[int, float]] | None = None, *,
                        title: str = N_("bytes moved per training step")):
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
        Shown in the current language where the course's catalogue translates it (as the default).

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
    fig, ax = new_figure(size=(9.0, 4.2))
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
        ax.plot([], [], "o", color="0.3", mfc="none", label=tr("measured"))
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_yscale("log")
    ax.set(xlabel=tr("global batch B"), ylabel=tr("bytes per step"), title=tr(title))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    return fig
