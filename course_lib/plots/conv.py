"""Figures of operator parallelism: data-flow graph, im2col, GEMM sizes, timings.

:func:`dataflow_figure` draws the graph of :func:`course_lib.dataflow.training_graph` with
the operators that could run at the same time (inter-operator parallelism) in the same
column, and the dimensions each operator can be split along inside (intra-operator
parallelism) written under it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._validate import as_real, check_int, check_sequence, check_type
from ..conv.im2col import gemm_sizes, im2col
from ..dataflow import DataflowGraph
from ..i18n import N_, tr
from ..memory import format_bytes
from . import COLORS, dot_rows, new_figure, styled

__all__ = [
    "dataflow_figure",
    "im2col_figure",
    "im2col_numbers_figure",
    "gemm_sizes_figure",
    "speed_bars_figure",
]

_ROW = {"forward": 0, "loss": 0, "grad_input": 1, "grad_weight": 2, "update": 3}
#: Height of each row: the forward row has the split dimensions written under it.
_ROW_Y = (0.0, 1.75, 2.75, 3.75)
_ROW_NAME = (N_("forward"), N_("backward:\ninput gradient"), N_("backward:\nweight gradient"), N_("update"))
_KIND_COLOR = {
    "forward": COLORS[0], "loss": COLORS[7], "grad_input": COLORS[1],
    "grad_weight": COLORS[3], "update": COLORS[2],
}
#: The dimensions of :data:`course_lib.dataflow.PARALLEL_DIMS` as drawn under an operator (in
#: the course notation, short) and as named in the key under the graph (both in English,
#: translated where drawn).
_DIMS = {
    "batch B": ("$B$", N_("$B$ samples")),
    "space Ho×Wo": (r"$H_o{\times}W_o$", N_(r"$H_o\times W_o$ output pixels")),
    "channels C_out": ("$C_o$", N_("$C_o$ output channels")),
    "hidden units (time: sequential)": (N_("hidden"), N_("hidden: hidden units (time stays sequential)")),
    "outputs": (N_("outputs"), N_("outputs")),
}


def _dims(parallel_dims: str) -> tuple[list[str], list[str]]:
    """The short names of an operator's split dimensions and their key entries."""
    parts = [p.strip() for p in parallel_dims.split("·")]
    return [_DIMS.get(p, (p, p))[0] for p in parts], [_DIMS.get(p, (p, p))[1] for p in parts]


@styled
def dataflow_figure(graph: DataflowGraph, *, show_dims: bool = True):
    """Draw a training step's graph: columns = levels, rows = forward / backward / update.

    Operators in the same column are independent: they could run at the same time
    on different devices (inter-operator parallelism, 算子间并行). Under each forward
    operator, one per line, the dimensions along which that ONE operator can be split
    (intra-operator parallelism, 算子内并行), in the course notation; the key under the
    graph names them.
    """
    check_type(graph, "graph", DataflowGraph, "a DataflowGraph (from training_graph)")
    from matplotlib.patches import FancyBboxPatch

    levels = graph.levels()
    n_cols = 1 + max(levels.values())
    fig, ax = new_figure(size=(9.6, 6.0))
    ax.grid(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    pos = {op.name: (levels[op.name], _ROW_Y[_ROW[op.kind]]) for op in graph.ops}
    kinds = {op.name: op.kind for op in graph.ops}
    half_w, half_h = 0.4, 0.3
    for names in graph.concurrent():  # shade columns with several operators: they could run concurrently
        col = levels[names[0]]
        ax.axvspan(col - 0.48, col + 0.48, color=COLORS[4], alpha=0.15, lw=0)
    for a, b in graph.edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        same = y0 == y1
        skip = _ROW[kinds[b]] - _ROW[kinds[a]] > 1  # passes a row: bend around its boxes
        ax.annotate("", xy=(x1 - half_w if same else x1, y1 - half_h if y1 > y0 else y1),
                    xytext=(x0 + half_w if same else x0, y0 + half_h if y1 > y0 else y0),
                    arrowprops=dict(arrowstyle="-|>", color="0.35", lw=1.2, shrinkA=0, shrinkB=0,
                                    connectionstyle=f"arc3,rad={0.3 if skip else 0.0}"))
    key: list[str] = []
    for op in graph.ops:
        x, y = pos[op.name]
        ax.add_patch(FancyBboxPatch((x - half_w, y - half_h), 2 * half_w, 2 * half_h,
                                    boxstyle="round,pad=0.02,rounding_size=0.08",
                                    facecolor=_KIND_COLOR[op.kind], edgecolor="white", lw=1, label=op.name))
        label = op.name.replace("d_in:", "dX\n").replace("d_w:", "dW\n").replace("update:", "upd\n")
        ax.text(x, y, label, ha="center", va="center", color="white", weight="bold", linespacing=1.0)
        if show_dims and op.kind == "forward":
            short, named = _dims(op.parallel_dims)
            ax.text(x, y + half_h + 0.08, "\n".join(map(tr, short)), ha="center", va="top", color="0.15")
            key += [k for k, k_short in zip(named, short) if k != k_short and k not in key]
    ax.set_xlim(-0.55, n_cols - 0.45)
    ax.set_ylim(_ROW_Y[-1] + 0.45, -0.45)
    ax.set_yticks(_ROW_Y, [tr(name) for name in _ROW_NAME])
    ax.set_xticks(range(n_cols), [str(c) for c in range(n_cols)])
    ax.tick_params(length=0)
    if key:  # in the empty corner under the forward chain
        ax.text(-0.45, _ROW_Y[1] - 0.3, tr("under a forward operator: the\ndimensions it can be split along\n"
                                           "(intra-operator parallelism):\n{dimensions}",
                                           dimensions="\n".join(map(tr, key))), va="top", ha="left", color="0.15")
    ax.set_xlabel(tr("step of a schedule with unlimited devices (shaded: operators that can run concurrently)"))
    ax.set_title(tr("data-flow graph of one training step: {operators} operators, critical path {steps} steps",
                    operators=len(graph.ops), steps=graph.critical_path))
    return fig


# ------------------------------------------------------------------ im2col figure
#: One colour per input channel in the im2col figures.
_CHAN_COLORS = ("#D55E00", "#009E73", "#0072B2", "#CC79A7", "#E69F00", "#56B4E9")
#: Gap between the maps (channels, kernels) drawn side by side, in cells.
_GAP = 0.6


def _cell(ax, x, y, text, color, alpha=0.85):
    """One labelled square of a drawn matrix, top-left corner at (x, y)."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), 1, 1, facecolor=color, alpha=alpha, edgecolor="white", lw=1.2))
    ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", color="white", weight="bold")


def _frame(ax, w, h):
    """A black frame around the top-left ``w`` x ``h`` cells (row 0, column 0)."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((0, 0), w, h, fill=False, edgecolor="black", lw=2.5))


def _maps(ax, shape, label, title, width, *, outputs=False):
    """Draw ``n`` maps of ``h`` x ``w`` cells side by side, one colour each; ``label(c, r, q)`` is a
    cell's text; the axes is ``width`` cells wide (its column of the layout). Each map is
    named "channel c" (input channels) or, with ``outputs``, "out c"."""
    n, h, w = shape
    for c in range(n):
        for r in range(h):
            for q in range(w):
                _cell(ax, c * (w + _GAP) + q, r, label(c, r, q), _CHAN_COLORS[c])
        ax.text(c * (w + _GAP) + w / 2, -0.3, tr("out {o}", o=c) if outputs else tr("channel {c}", c=c),
                ha="center", va="bottom")
    ax.set_xlim(-0.2, width - 0.2)
    ax.set_ylim(h + 0.2, -0.9)
    ax.set_title(title)


def _filter_grid(ax, shape, label, width):
    """Draw filters of ``shape`` (C_out, C_in, kh, kw): one row per output channel, one
    kernel per input channel coloured by its channel; ``label(o, c, r, q)`` is each cell's text."""
    c_out, c_in, kh, kw = shape
    for o in range(c_out):
        for c in range(c_in):
            for r in range(kh):
                for q in range(kw):
                    _cell(ax, c * (kw + _GAP) + q, o * (kh + _GAP) + r, label(o, c, r, q),
                          _CHAN_COLORS[c], alpha=0.55 + 0.4 * (o % 2 == 0))
        ax.text(-0.3, o * (kh + _GAP) + kh / 2, tr("out {o}", o=o), ha="right", va="center")
    ax.set_xlim(-1.7, width - 1.7)
    ax.set_ylim(c_out * (kh + _GAP), -0.8)
    ax.set_title(tr("Filters: {outputs} output channels\n× {inputs} kernels of {size}", outputs=c_out, inputs=c_in,
                    size=f"{kh}×{kw}"))


def _matrix(ax, values, colors, title, *, frame, width, alphas=None):
    """A matrix of labelled cells: ``values[r][q]`` text, ``colors[r][q]`` colour; frame = (w, h);
    the axes is ``width`` cells wide, its column of the layout (so that every panel has one scale)."""
    rows, cols = len(values), len(values[0])
    for r in range(rows):
        for q in range(cols):
            _cell(ax, q, r, values[r][q], colors[r][q], alpha=0.85 if alphas is None else alphas[q])
    _frame(ax, *frame)
    ax.set_xlim(-(width - cols) / 2, cols + (width - cols) / 2)
    ax.set_ylim(rows + 0.2, -0.4)
    ax.set_title(title)


def _im2col_layout(widths, h_top, h_bottom, k, filters_span):
    """Figure and axes of the im2col drawings, every cell the same size.

    Columns ``widths`` (in cells); every panel is exactly as wide as its column and has
    room to spare below, so each is scaled to its column's width - the same scale for
    all. The top row holds the IFmaps (column 0) and the filters
    (columns ``filters_span``); the filter matrix (``k`` rows) takes column 1 of both rows;
    the bottom row holds the IFmap matrix (column 0) and the panels right of the filter
    matrix. Returns the figure and the axes (ifmaps, filters, ifmap matrix, filter matrix, rest).
    """
    unit = min(0.42, 9.0 / sum(widths))  # inches per cell
    h_bottom = max(h_bottom, k + 0.8 - h_top)
    fig = new_figure(size=(9.6, (h_top + h_bottom) * unit + 1.9))[0]
    fig.clear()
    grid = fig.add_gridspec(2, len(widths), width_ratios=widths, height_ratios=(h_top, h_bottom))
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, filters_span]),
            fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[:, 1])]
    axes += [fig.add_subplot(grid[1, i]) for i in range(2, len(widths))]
    for ax in axes:
        ax.set_axis_off()
        ax.set_aspect("equal")
        ax.set_anchor("N")
    return fig, axes


@styled
def im2col_figure(c_in: int = 3, size: int = 3, kernel: int = 2, c_out: int = 2):
    """The chapter's im2col figure (图6-1-7) with index labels, computed by :func:`im2col`.

    Top: the input feature maps (IFmaps, one colour per channel, pixels ``I0 ..``) and
    the filters (``F0 ..`` per input channel, one row of kernels per output channel).
    Below: the IFmap matrix (ℳ x 𝒦: one row per output pixel, one column per channel and
    kernel tap) times the filter matrix (𝒦 x 𝒩: one column per output channel, drawn
    tall between them) gives the output matrix (ℳ x 𝒩). Row 0 of the IFmap matrix times
    column 0 of the filter matrix is ``O0 = I0*F0 + I1*F1 + I3*F2 + I4*F3 + ...`` (framed).
    """
    c_in, size, kernel, c_out = (check_int(v, name) for v, name in (
        (c_in, "c_in"), (size, "size"), (kernel, "kernel"), (c_out, "c_out")))
    if min(c_in, size, kernel, c_out) < 1 or kernel > size or c_in > 6 or size > 6 or c_out > 4:
        raise ValueError(
            f"need 1 <= kernel ({kernel}) <= size ({size}) <= 6, 1 <= c_in ({c_in}) <= 6, "
            f"1 <= c_out ({c_out}) <= 4"
        )
    index = np.arange(c_in * size * size).reshape(1, c_in, size, size)
    ifmap_matrix = im2col(index, kernel)[0].T  # (ℳ, 𝒦) as drawn in the chapter
    m, k = ifmap_matrix.shape
    taps, pixels = kernel * kernel, size * size
    widths = (max(k + 0.4, c_in * (size + _GAP) - 0.4), c_out + 1.0,
              max(c_out + 1.0, c_in * (kernel + _GAP) + 1.7))
    fig, (ax_in, ax_f, ax_im, ax_fm, ax_o) = _im2col_layout(
        widths, max(size + 1.1, c_out * (kernel + _GAP) + 0.8), m + 0.6, k, 2)

    _maps(ax_in, (c_in, size, size), lambda c, r, q: f"I{r * size + q}",
          tr("IFmaps: {channels} channels of {size}", channels=c_in, size=f"{size}×{size}"), widths[0])
    _filter_grid(ax_f, (c_out, c_in, kernel, kernel), lambda o, c, r, q: f"F{r * kernel + q}", widths[2])
    _matrix(ax_im, [[f"I{int(v) % pixels}" for v in row] for row in ifmap_matrix],
            [[_CHAN_COLORS[int(v) // pixels] for v in row] for row in ifmap_matrix],
            _ifmap_title(m, k), frame=(k, 1), width=widths[0])
    _matrix(ax_fm, [[f"F{row % taps}" for _ in range(c_out)] for row in range(k)],
            [[_CHAN_COLORS[row // taps]] * c_out for row in range(k)],
            _filter_title(k, c_out), frame=(1, k), width=widths[1],
            alphas=[0.55 + 0.4 * (o % 2 == 0) for o in range(c_out)])
    _matrix(ax_o, [[f"O{o * m + r}" for o in range(c_out)] for r in range(m)], [["0.35"] * c_out] * m,
            tr("= Output  $\\mathcal{{M}}\\times\\mathcal{{N}}$ = {shape}", shape=f"{m}×{c_out}"), frame=(1, 1),
            width=widths[2])
    fig.suptitle(tr("im2col: the convolution becomes ONE matrix product\n"
                    "Output = IFmap matrix × Filter matrix   (framed: row 0 × column 0 = O0)"))
    return fig


def _ifmap_title(m: int, k: int) -> str:
    return tr("IFmap matrix  $\\mathcal{{M}}\\times\\mathcal{{K}}$ = {shape}", shape=f"{m}×{k}")


def _filter_title(k: int, c_out: int) -> str:
    return tr("× Filter matrix\n$\\mathcal{{K}}\\times\\mathcal{{N}}$ = {shape}", shape=f"{k}×{c_out}")


def _number(v: float) -> str:
    """A matrix entry as drawn: integers without a decimal point, others to 2 digits."""
    v = float(v)
    return f"{v:.0f}" if v.is_integer() else f"{v:.2g}"


@styled
def im2col_numbers_figure(x, weight, reference=None):
    """The chapter's im2col figure (图6-1-7) with numbers, and the product checked.

    Parameters
    ----------
    x : array (1, C_in, H, W)
        One image (the IFmaps); stride 1 and no padding, as in the chapter's figure.
    weight : array (C_out, C_in, kh, kw)
        The filters. Small integers draw best (and make the check exact).
    reference : array (1, C_out, H_out, W_out), optional
        The sliding-window convolution of ``x`` with ``weight`` to check the product
        against, e.g. ``conv2d_direct(x, weight)`` (computed so when omitted).

    Returns
    -------
    matplotlib.figure.Figure
        Top: the IFmaps and the filters with their values, one colour per input channel.
        Bottom: the IFmap matrix (ℳ x 𝒦, made by :func:`course_lib.conv.im2col.im2col`), the
        filter matrix (𝒦 x 𝒩), their product, the output matrix (ℳ x 𝒩), and the
        sliding-window result, one map per output channel. The title of the last panel
        says whether its values equal the product's columns (to 1e-9).
    """

    from ..conv.im2col import conv2d_direct

    x, weight = as_real(x, "x"), as_real(weight, "weight")
    if x.ndim != 4 or x.shape[0] != 1 or weight.ndim != 4 or weight.shape[1] != x.shape[1]:
        raise ValueError(
            f"need one image x (1, C_in, H, W) and weights (C_out, C_in, kh, kw) with the same "
            f"C_in, got x {x.shape} and weight {weight.shape}"
        )
    _, c_in, size_h, size_w = x.shape
    c_out, _, kh, kw = weight.shape
    if not (1 <= c_in <= 6 and 1 <= c_out <= 4 and 1 <= kh <= size_h <= 6 and 1 <= kw <= size_w <= 6):
        raise ValueError(
            f"too large or empty to draw: need 1 <= C_in ({c_in}) <= 6, 1 <= C_out ({c_out}) <= 4 "
            f"and 1 <= kernel ({kh}x{kw}) <= image ({size_h}x{size_w}) <= 6x6"
        )
    ifmap_matrix = im2col(x, (kh, kw))[0].T  # ℳ x 𝒦, as drawn in the chapter
    filter_matrix = weight.reshape(c_out, -1).T  # 𝒦 x 𝒩
    product = ifmap_matrix @ filter_matrix  # ℳ x 𝒩
    m, k = ifmap_matrix.shape
    ho, wo = size_h - kh + 1, size_w - kw + 1
    if reference is None:
        reference = conv2d_direct(x, weight)
    reference = as_real(reference, "reference")
    if reference.shape != (1, c_out, ho, wo):
        raise ValueError(f"reference must have the output shape {(1, c_out, ho, wo)}, got {reference.shape}")
    differ = int(np.sum(~np.isclose(reference[0].reshape(c_out, m).T, product, rtol=1e-9, atol=1e-9)))
    channel_of_row = np.repeat(np.arange(c_in), kh * kw)  # input channel of each column of 𝒦

    widths = (max(k + 0.4, c_in * (size_w + _GAP) - 0.4), c_out + 1.0, c_out + 1.0,
              max(c_out * (wo + _GAP) + 0.2, c_in * (kw + _GAP) + 0.7 - c_out))
    fig, (ax_in, ax_f, ax_im, ax_fm, ax_o, ax_ref) = _im2col_layout(
        widths, max(size_h + 1.1, c_out * (kh + _GAP) + 0.8), m + 0.6, k, slice(2, None))
    _maps(ax_in, (c_in, size_h, size_w), lambda c, r, q: _number(x[0, c, r, q]),
          tr("IFmaps: {channels} channels of {size}", channels=c_in, size=f"{size_h}×{size_w}"), widths[0])
    _filter_grid(ax_f, (c_out, c_in, kh, kw), lambda o, c, r, q: _number(weight[o, c, r, q]), widths[2] + widths[3])
    _matrix(ax_im, [[_number(v) for v in row] for row in ifmap_matrix],
            [[_CHAN_COLORS[channel_of_row[q]] for q in range(k)]] * m,
            _ifmap_title(m, k), frame=(k, 1), width=widths[0])
    _matrix(ax_fm, [[_number(v) for v in row] for row in filter_matrix],
            [[_CHAN_COLORS[channel_of_row[row]]] * c_out for row in range(k)],
            _filter_title(k, c_out), frame=(1, k), width=widths[1],
            alphas=[0.55 + 0.4 * (o % 2 == 0) for o in range(c_out)])
    _matrix(ax_o, [[_number(v) for v in row] for row in product], [["0.35"] * c_out] * m,
            tr("= Output\n$\\mathcal{{M}}\\times\\mathcal{{N}}$ = {shape}", shape=f"{m}×{c_out}"), frame=(1, 1),
            width=widths[2])
    _maps(ax_ref, (c_out, ho, wo), lambda o, r, q: _number(reference[0, o, r, q]), "", widths[3], outputs=True)
    for patch in ax_ref.patches:  # the maps are output channels, drawn grey
        patch.set_facecolor("0.45")
    _frame(ax_ref, 1, 1)
    if differ == 0:
        title = tr("sliding window:\n{maps} maps of {size}\n= the output columns ✓", maps=c_out, size=f"{ho}×{wo}")
    else:
        title = tr("sliding window:\n{maps} maps of {size}\n✗ {differ} value(s) differ\nfrom the output",
                   maps=c_out, size=f"{ho}×{wo}", differ=differ)
    ax_ref.set_title(title)
    fig.suptitle(tr("im2col with numbers: IFmap matrix × Filter matrix = the convolution\n"
                    "(framed: row 0 × column 0 = O0)"))
    return fig


def _log_dots(ax, labels: Sequence[str], values, texts: Sequence[str]) -> None:
    """A dot plot (:func:`~course_lib.plots.dot_rows`) on a plain log-10 x axis."""
    from matplotlib.ticker import LogLocator, NullLocator

    dot_rows(ax, labels, values, texts)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=8))
    ax.xaxis.set_minor_locator(NullLocator())


@styled
def gemm_sizes_figure(batch: int = 32, image: int = 56, kernel: int = 3, stride: int = 1,
                      c_in: int = 64, c_out: int = 64, padding: int | None = None):
    """GEMM sizes ℳ, 𝒦, 𝒩 of a convolution and the memory of the im2col matrix.

    Left: the GEMM sizes ℳ = B·H_o·W_o, 𝒦 = C_i·k_h·k_w, 𝒩 = C_o as dots on a log axis,
    each with its value. Right: memory of the input, the im2col matrix, the weights and
    the output (float32; linear axis), with the blow-up factor im2col / input (about
    k_h·k_w / stride²).
    """
    s = gemm_sizes(batch, image, kernel, stride, c_in, c_out, padding)
    fig, (ax_d, ax_m) = new_figure(1, 2, size=(9.6, 3.8), width_ratios=(1.1, 1))
    dims = [(r"$\mathcal{M} = B\,H_o W_o$", s["M"]), (r"$\mathcal{K} = C_i\,k_h k_w$", s["K"]),
            (r"$\mathcal{N} = C_o$", s["N"])]
    values = np.array([float(d[1]) for d in dims])
    _log_dots(ax_d, [d[0] for d in dims], values, [f"{v:,}" for _, v in dims])
    ax_d.set_xlim(values.min() / 3, values.max() * 40)
    ax_d.set_title(tr("GEMM  $O = I\\,F$:  {macs} multiply-adds", macs=f"{s['macs']:.3g}"))
    ax_d.set_xlabel(tr("size (log scale)"))

    names = [tr("input"), tr("im2col\nmatrix"), tr("weights"), tr("output")]
    sizes = np.array([s["input_bytes"], s["im2col_bytes"], s["weight_bytes"], s["output_bytes"]], float)
    ax_m.bar(range(4), sizes / 1e6, width=0.65, color=[COLORS[0], COLORS[1], COLORS[0], COLORS[0]])
    top = sizes.max() / 1e6
    for i, v in enumerate(sizes):
        ax_m.text(i, v / 1e6 + top * 0.02, format_bytes(v), ha="center", va="bottom")
    ax_m.set_xticks(range(4), names)
    ax_m.set_ylim(0, top * 1.2)
    ax_m.set_ylabel("MB (float32)")
    ax_m.set_title(tr("im2col matrix = {factor} × the input", factor=f"{s['blowup']:.2f}"))
    ax_m.grid(False, axis="x")
    fig.suptitle(tr("B = {batch}, {c_in}→{c_out} channels, {image} image, {kernel} kernel, stride {stride}, "
                    "padding {padding} → output {output}", batch=batch, c_in=c_in, c_out=c_out,
                    image=f"{image}×{image}", kernel=f"{kernel}×{kernel}", stride=stride, padding=s["padding"],
                    output=f"{s['Ho']}×{s['Wo']}"), fontsize="medium")
    return fig


# ------------------------------------------------------------------ timings
def _duration(v: float) -> str:
    return f"{v * 1e6:.3g} µs" if v < 1e-3 else f"{v * 1e3:.3g} ms" if v < 1 else f"{v:.3g} s"


@styled
def speed_bars_figure(labels: Sequence[str], seconds: Sequence[float], *, title: str = N_("run time")):
    """Measured times as dots on a log axis (a Cleveland dot plot), each annotated with its
    time and its speedup over the slowest (``title`` shown in the current language where the
    course's catalogue translates it, as it does the default)."""
    labels = check_sequence(labels, "labels")
    check_type(title, "title", str, "a str")
    t = as_real(seconds, "seconds", allowed="in (0, inf)").reshape(-1)
    if len(labels) != t.size or t.size == 0 or np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(f"need one positive, finite time per label: {len(labels)} labels, {t.tolist()}")
    fig, ax = new_figure(size=(7.2, 0.6 * t.size + 1.5))
    slowest = t.max()
    texts = [tr("{time}   ({factor}× faster)", time=_duration(v), factor=f"{slowest / v:,.0f}") if v < slowest
             else _duration(v) for v in t]
    _log_dots(ax, labels, t, texts)
    ax.set_xlim(t.min() / 3, t.max() * 40)
    ax.set_xlabel(tr("seconds (log scale)"))
    ax.set_title(tr(title))
    return fig
