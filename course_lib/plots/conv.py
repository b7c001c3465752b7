"""Figures of chapter 04 (intra-operator parallelism): data-flow graph, im2col, GEMM sizes, timings.

:func:`dataflow_figure` draws the graph of :func:`course_lib.dataflow.training_graph` with
the operators that could run at the same time (inter-operator parallelism) in the same
column, and the dimensions each operator can be split along inside (intra-operator
parallelism) written under it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._validate import as_real, check_int, check_sequence, check_type
from ..dataflow import DataflowGraph
from ..im2col import gemm_sizes, im2col
from . import COLORS, new_figure, styled

__all__ = [
    "dataflow_figure",
    "im2col_figure",
    "im2col_numbers_figure",
    "gemm_sizes_figure",
    "speed_bars_figure",
]

_ROW = {"forward": 0, "loss": 0, "grad_input": 1, "grad_weight": 2, "update": 3}
_ROW_NAME = ("forward", "backward: input gradient", "backward: weight gradient", "update")
_KIND_COLOR = {
    "forward": COLORS[0], "loss": COLORS[7], "grad_input": COLORS[1],
    "grad_weight": COLORS[3], "update": COLORS[2],
}


@styled
def dataflow_figure(graph: DataflowGraph, *, show_dims: bool = True):
    """Draw a training step's graph: columns = levels, rows = forward / backward / update.

    Operators in the same column are independent: they could run at the same time
    on different devices (inter-operator parallelism, 算子间并行). The text under a
    forward operator lists the dimensions along which that ONE operator can be split
    (intra-operator parallelism, 算子内并行).
    """
    check_type(graph, "graph", DataflowGraph, "a DataflowGraph (from training_graph)")
    from matplotlib.patches import FancyBboxPatch, Patch

    levels = graph.levels()
    n_cols = 1 + max(levels.values())
    fig, ax = new_figure(size=(max(7.0, 1.25 * n_cols + 1.5), 4.6))
    ax.grid(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    pos = {op.name: (levels[op.name], _ROW[op.kind]) for op in graph.ops}
    # shade columns with several operators: they could run concurrently
    for names in graph.concurrent():
        col = levels[names[0]]
        ax.axvspan(col - 0.46, col + 0.46, color=COLORS[4], alpha=0.15, lw=0)
    for a, b in graph.edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        ax.annotate(
            "", xy=(x1 - 0.36 if y0 == y1 else x1, y1 - 0.22 if y1 > y0 else y1),
            xytext=(x0 + 0.36 if y0 == y1 else x0, y0 + 0.22 if y1 > y0 else y0),
            arrowprops=dict(arrowstyle="-|>", color="0.35", lw=0.9, shrinkA=0, shrinkB=0,
                            connectionstyle="arc3,rad=0.0"),
        )
    for op in graph.ops:
        x, y = pos[op.name]
        ax.add_patch(FancyBboxPatch(
            (x - 0.36, y - 0.22), 0.72, 0.44, boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=_KIND_COLOR[op.kind], edgecolor="white", lw=1, label=op.name,
        ))
        label = op.name.replace("d_in:", "dX ").replace("d_w:", "dW ").replace("update:", "upd ")
        ax.text(x, y, label, ha="center", va="center", fontsize=7.5, color="white", weight="bold")
        if show_dims and op.kind == "forward":
            ax.text(x, y + 0.3, op.parallel_dims.replace(" · ", "\n"), ha="center", va="top",
                    fontsize=6.2, color="0.25")
    ax.set_xlim(-0.6, n_cols - 0.4)
    ax.set_ylim(3.5, -0.6)
    ax.set_yticks(range(4), _ROW_NAME, fontsize=8)
    ax.set_xticks(range(n_cols), [str(c) for c in range(n_cols)], fontsize=8)
    ax.set_xlabel("step of a schedule with unlimited devices (shaded: operators that can run concurrently)")
    ax.set_title(
        f"data-flow graph of one training step: {len(graph.ops)} operators, "
        f"critical path {graph.critical_path} steps"
    )
    handles = [Patch(color=_KIND_COLOR[k]) for k in ("forward", "loss", "grad_input", "grad_weight", "update")]
    ax.legend(handles, ["forward", "loss", "input gradient", "weight gradient", "update"],
              fontsize=7, loc="upper left", ncols=5, frameon=False, bbox_to_anchor=(0, -0.12))
    return fig


# ------------------------------------------------------------------ im2col figure
#: One colour per input channel in the im2col figures.
_CHAN_COLORS = ("#D55E00", "#009E73", "#0072B2", "#CC79A7", "#E69F00", "#56B4E9")


def _cell(ax, x, y, text, color, alpha=0.85, fs=8):
    """One labelled square of a drawn matrix, top-left corner at (x, y)."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), 1, 1, facecolor=color, alpha=alpha, edgecolor="white", lw=1.2))
    ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=fs, color="white", weight="bold")


def _filter_grid(ax, shape, label, gap):
    """Draw filters of ``shape`` (C_out, C_in, kh, kw): one row per output channel, one
    kernel per input channel coloured by its channel; ``label(o, c, r, q)`` is each cell's text."""
    c_out, c_in, kh, kw = shape
    for o in range(c_out):
        for c in range(c_in):
            for r in range(kh):
                for q in range(kw):
                    _cell(ax, c * (kw + gap) + q, o * (kh + gap) + r, label(o, c, r, q),
                          _CHAN_COLORS[c], alpha=0.55 + 0.4 * (o % 2 == 0))
        ax.text(-0.3, o * (kh + gap) + kh / 2, f"out {o}", ha="right", va="center", fontsize=8)
    ax.set_xlim(-1.6, c_in * (kw + gap))
    ax.set_ylim(c_out * (kh + gap), -0.8)
    ax.set_title(f"Filters: {c_out} output channels × {c_in} kernels of {kh}×{kw}", fontsize=9)


@styled
def im2col_figure(c_in: int = 3, size: int = 3, kernel: int = 2, c_out: int = 2):
    """The chapter's im2col figure (图6-1-7) with index labels, computed by :func:`im2col`.

    Top: the input feature maps (IFmaps, one colour per channel, pixels ``I0 ..``) and
    the filters (``F0 ..`` per input channel, one row of kernels per output channel).
    Bottom: the IFmap matrix (M x K: one row per output pixel, one column per
    channel and kernel tap), the filter matrix (K x N: one column per output channel)
    and their product, the output matrix (M x N). Row 0 of the IFmap matrix times
    column 0 of the filter matrix is ``O0 = I0*F0 + I1*F1 + I3*F2 + I4*F3 + ...``.
    """
    c_in, size, kernel, c_out = (check_int(v, name) for v, name in (
        (c_in, "c_in"), (size, "size"), (kernel, "kernel"), (c_out, "c_out")))
    if min(c_in, size, kernel, c_out) < 1 or kernel > size or c_in > 6 or size > 6 or c_out > 4:
        raise ValueError(
            f"need 1 <= kernel ({kernel}) <= size ({size}) <= 6, 1 <= c_in ({c_in}) <= 6, "
            f"1 <= c_out ({c_out}) <= 4"
        )
    from matplotlib.patches import Rectangle

    chan_colors, cell = _CHAN_COLORS, _cell
    index = np.arange(c_in * size * size).reshape(1, c_in, size, size)
    cols = im2col(index, kernel)[0]  # (K, M) in torch's layout
    ifmap_matrix = cols.T  # (M, K) as drawn in the chapter
    m, k = ifmap_matrix.shape
    taps = kernel * kernel

    fig = new_figure(size=(10.5, 6.2))[0]
    fig.clear()
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.5], width_ratios=[k + 1, c_out + 1.5, c_out + 1])
    ax_in = fig.add_subplot(grid[0, 0])
    ax_f = fig.add_subplot(grid[0, 1:])
    ax_im = fig.add_subplot(grid[1, 0])
    ax_fm = fig.add_subplot(grid[1, 1])
    ax_o = fig.add_subplot(grid[1, 2])
    for ax in fig.axes:
        ax.set_axis_off()
        ax.set_aspect("equal")

    # IFmaps: channels side by side
    gap = 0.6
    for c in range(c_in):
        for r in range(size):
            for q in range(size):
                cell(ax_in, c * (size + gap) + q, r, f"I{r * size + q}", chan_colors[c])
        ax_in.text(c * (size + gap) + size / 2, -0.35, f"channel {c}", ha="center", fontsize=8)
    ax_in.set_xlim(-0.2, c_in * (size + gap))
    ax_in.set_ylim(size + 0.2, -0.8)
    ax_in.set_title(f"IFmaps: {c_in} channels of {size}×{size}", fontsize=9)

    _filter_grid(ax_f, (c_out, c_in, kernel, kernel), lambda o, c, r, q: f"F{r * kernel + q}", gap)

    # IFmap matrix M x K
    for r in range(m):
        for q in range(k):
            v = int(ifmap_matrix[r, q])
            cell(ax_im, q, r, f"I{v % (size * size)}", chan_colors[v // (size * size)], fs=7)
    ax_im.add_patch(Rectangle((0, 0), k, 1, fill=False, edgecolor="black", lw=2))
    ax_im.set_xlim(-0.2, k + 0.2)
    ax_im.set_ylim(m + 0.2, -0.8)
    ax_im.set_title(f"IFmap matrix  $\\mathcal{{M}}\\times\\mathcal{{K}}$ = {m}×{k}", fontsize=9)

    # Filter matrix K x N
    for o in range(c_out):
        for row in range(k):
            c, t = divmod(row, taps)
            cell(ax_fm, o, row, f"F{t}", chan_colors[c], alpha=0.55 + 0.4 * (o % 2 == 0), fs=7)
    ax_fm.add_patch(Rectangle((0, 0), 1, k, fill=False, edgecolor="black", lw=2))
    ax_fm.set_xlim(-0.5, c_out + 0.5)
    ax_fm.set_ylim(k + 0.2, -0.8)
    ax_fm.set_title(f"Filter matrix  $\\mathcal{{K}}\\times\\mathcal{{N}}$ = {k}×{c_out}", fontsize=9)

    # Output matrix M x N
    for o in range(c_out):
        for r in range(m):
            cell(ax_o, o, r, f"O{o * m + r}", "0.35", fs=7)
    ax_o.add_patch(Rectangle((0, 0), 1, 1, fill=False, edgecolor="black", lw=2))
    ax_o.set_xlim(-0.5, c_out + 0.5)
    ax_o.set_ylim(m + 0.2, -0.8)
    ax_o.set_title(f"Output  $\\mathcal{{M}}\\times\\mathcal{{N}}$ = {m}×{c_out}", fontsize=9)
    fig.suptitle(
        "im2col: the convolution becomes ONE matrix product  O = IFmap matrix × Filter matrix "
        "(framed: row 0 × column 0 = O0)", fontsize=10,
    )
    return fig


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
        Bottom: the IFmap matrix (M x K, made by :func:`course_lib.im2col.im2col`), the
        filter matrix (K x N), their product, the output matrix (M x N), and the
        sliding-window result, one map per output channel. The title of the last panel
        says whether its values equal the product's columns (to 1e-9).
    """
    from matplotlib.patches import Rectangle

    from ..im2col import conv2d_direct

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
    ifmap_matrix = im2col(x, (kh, kw))[0].T  # M x K, as drawn in the chapter
    filter_matrix = weight.reshape(c_out, -1).T  # K x N
    product = ifmap_matrix @ filter_matrix  # M x N
    m, k = ifmap_matrix.shape
    ho, wo = size_h - kh + 1, size_w - kw + 1
    if reference is None:
        reference = conv2d_direct(x, weight)
    reference = as_real(reference, "reference")
    if reference.shape != (1, c_out, ho, wo):
        raise ValueError(f"reference must have the output shape {(1, c_out, ho, wo)}, got {reference.shape}")
    differ = int(np.sum(~np.isclose(reference[0].reshape(c_out, m).T, product, rtol=1e-9, atol=1e-9)))
    channel_of_row = np.repeat(np.arange(c_in), kh * kw)  # input channel of each column of K

    gap = 0.6
    fig = new_figure(size=(11.5, 6.6))[0]
    fig.clear()
    grid = fig.add_gridspec(2, 4, height_ratios=[1, 1.6],
                            width_ratios=[k + 1, c_out + 1.5, c_out + 1.5, c_out * (wo + gap) + 0.5])
    ax_in = fig.add_subplot(grid[0, :2])
    ax_f = fig.add_subplot(grid[0, 2:])
    ax_im, ax_fm, ax_o, ax_ref = (fig.add_subplot(grid[1, i]) for i in range(4))
    for ax in fig.axes:
        ax.set_axis_off()
        ax.set_aspect("equal")

    for c in range(c_in):  # IFmaps: channels side by side
        for r in range(size_h):
            for q in range(size_w):
                _cell(ax_in, c * (size_w + gap) + q, r, _number(x[0, c, r, q]), _CHAN_COLORS[c])
        ax_in.text(c * (size_w + gap) + size_w / 2, -0.35, f"channel {c}", ha="center", fontsize=8)
    ax_in.set_xlim(-0.2, c_in * (size_w + gap))
    ax_in.set_ylim(size_h + 0.2, -0.8)
    ax_in.set_title(f"IFmaps: {c_in} channels of {size_h}×{size_w}", fontsize=9)

    _filter_grid(ax_f, (c_out, c_in, kh, kw), lambda o, c, r, q: _number(weight[o, c, r, q]), gap)

    for r in range(m):
        for q in range(k):
            _cell(ax_im, q, r, _number(ifmap_matrix[r, q]), _CHAN_COLORS[channel_of_row[q]], fs=7)
    ax_im.add_patch(Rectangle((0, 0), k, 1, fill=False, edgecolor="black", lw=2))
    ax_im.set_xlim(-0.2, k + 0.2)
    ax_im.set_ylim(max(m, k) + 0.2, -0.8)
    ax_im.set_title(f"IFmap matrix\n$\\mathcal{{M}}\\times\\mathcal{{K}}$ = {m}×{k}", fontsize=9)

    for o in range(c_out):
        for row in range(k):
            _cell(ax_fm, o, row, _number(filter_matrix[row, o]), _CHAN_COLORS[channel_of_row[row]],
                  alpha=0.55 + 0.4 * (o % 2 == 0), fs=7)
    ax_fm.add_patch(Rectangle((0, 0), 1, k, fill=False, edgecolor="black", lw=2))
    ax_fm.set_xlim(-0.5, c_out + 0.5)
    ax_fm.set_ylim(max(m, k) + 0.2, -0.8)
    ax_fm.set_title(f"× Filter matrix\n$\\mathcal{{K}}\\times\\mathcal{{N}}$ = {k}×{c_out}", fontsize=9)

    for o in range(c_out):
        for r in range(m):
            _cell(ax_o, o, r, _number(product[r, o]), "0.35", fs=7)
    ax_o.add_patch(Rectangle((0, 0), 1, 1, fill=False, edgecolor="black", lw=2))
    ax_o.set_xlim(-0.5, c_out + 0.5)
    ax_o.set_ylim(max(m, k) + 0.2, -0.8)
    ax_o.set_title(f"= Output\n$\\mathcal{{M}}\\times\\mathcal{{N}}$ = {m}×{c_out}", fontsize=9)

    for o in range(c_out):  # the sliding-window result, one H_out x W_out map per channel
        for r in range(ho):
            for q in range(wo):
                _cell(ax_ref, o * (wo + gap) + q, r, _number(reference[0, o, r, q]), "0.55", fs=7)
        ax_ref.text(o * (wo + gap) + wo / 2, ho + 0.6, f"out {o}", ha="center", fontsize=8)
    ax_ref.add_patch(Rectangle((0, 0), 1, 1, fill=False, edgecolor="black", lw=2))
    ax_ref.set_xlim(-0.2, c_out * (wo + gap))
    ax_ref.set_ylim(max(m, k) + 0.2, -0.8)
    verdict = "= the output columns ✓" if differ == 0 else f"✗ {differ} value(s) differ from the output"
    ax_ref.set_title(f"sliding window: {c_out} maps {ho}×{wo}\n{verdict}", fontsize=9)
    fig.suptitle(
        "im2col with numbers: IFmap matrix × Filter matrix = the convolution "
        "(framed: row 0 × column 0 = O0)", fontsize=10,
    )
    return fig


def _fmt_bytes(b: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


@styled
def gemm_sizes_figure(batch: int = 32, image: int = 56, kernel: int = 3, stride: int = 1,
                      c_in: int = 64, c_out: int = 64, padding: int | None = None):
    """GEMM sizes M, K, N of a convolution and the memory of the im2col matrix.

    Left: the GEMM sizes ℳ = B·H_o·W_o, 𝒦 = C_i·k_h·k_w, 𝒩 = C_o (log scale). Right: memory of the input,
    the im2col matrix, the weights and the output (float32), with the blow-up factor
    im2col / input (about kh·kw / stride²).
    """
    s = gemm_sizes(batch, image, kernel, stride, c_in, c_out, padding)
    fig, (ax_d, ax_m) = new_figure(1, 2, size=(9.6, 3.6))
    dims = [(r"$\mathcal{M} = B\,H_o W_o$", s["M"]), (r"$\mathcal{K} = C_i\,k_h k_w$", s["K"]),
            (r"$\mathcal{N} = C_o$", s["N"])]
    ax_d.barh([d[0] for d in dims], [d[1] for d in dims], color=COLORS[:3])
    ax_d.set_xscale("log")
    ax_d.set_xlim(1, max(10, s["M"]) * 30)
    for i, (_, v) in enumerate(dims):
        ax_d.text(v * 1.15, i, f"{v:,}", va="center", fontsize=8)
    ax_d.invert_yaxis()
    ax_d.set_title(f"GEMM  $O_{{\\mathcal{{M}}\\times\\mathcal{{N}}}} = I_{{\\mathcal{{M}}\\times\\mathcal{{K}}}}\\,F_{{\\mathcal{{K}}\\times\\mathcal{{N}}}}$,  {s['macs']:.3g} MACs", fontsize=9)
    ax_d.set_xlabel("size (log scale)")

    names = ["input", "im2col matrix", "weights", "output"]
    sizes = [s["input_bytes"], s["im2col_bytes"], s["weight_bytes"], s["output_bytes"]]
    ax_m.bar(names, [v / 1e6 for v in sizes], color=[COLORS[5], COLORS[1], COLORS[2], COLORS[0]])
    top = max(sizes) / 1e6
    for i, v in enumerate(sizes):
        ax_m.text(i, v / 1e6 + top * 0.02, _fmt_bytes(v), ha="center", fontsize=8)
    ax_m.set_ylim(0, top * 1.18)
    ax_m.set_ylabel("MB (float32)")
    ax_m.set_title(f"im2col matrix = {s['blowup']:.2f} × the input", fontsize=9)
    ax_m.tick_params(axis="x", labelsize=8)
    fig.suptitle(
        f"batch {batch}, {c_in}→{c_out} channels, {image}×{image} image, {kernel}×{kernel} kernel, "
        f"stride {stride}, padding {s['padding']} → output {s['Ho']}×{s['Wo']}", fontsize=9,
    )
    return fig


# ------------------------------------------------------------------ timings
@styled
def speed_bars_figure(labels: Sequence[str], seconds: Sequence[float], *, title: str = "run time"):
    """Horizontal bars of measured times (log scale), each annotated with its time and
    its speedup over the slowest."""
    labels = check_sequence(labels, "labels")
    check_type(title, "title", str, "a str")
    t = as_real(seconds, "seconds", allowed="in (0, inf)").reshape(-1)
    if len(labels) != t.size or t.size == 0 or np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(f"need one positive, finite time per label: {len(labels)} labels, {t.tolist()}")
    fig, ax = new_figure(size=(7.2, 0.6 * t.size + 1.4))
    ax.barh(list(labels), t, color=[COLORS[i % len(COLORS)] for i in range(t.size)])
    ax.set_xscale("log")
    ax.set_xlim(t.min() / 3, t.max() * 40)
    slowest = t.max()
    for i, v in enumerate(t):
        text = f"{v * 1e6:.3g} µs" if v < 1e-3 else f"{v * 1e3:.3g} ms" if v < 1 else f"{v:.3g} s"
        if v < slowest:
            text += f"   ({slowest / v:,.0f}× faster)"
        ax.text(v * 1.2, i, text, va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (log scale)")
    ax.set_title(title)
    return fig
