"""Figures of chapter 01 (from serial to parallel): pure functions, data in, Figure out.

* :func:`execution_model_figure` - the serial and the parallel execution model
  (source figures 6-1-1 and 6-1-4), drawn with matplotlib patches;
* :func:`cpu_trends_figure` - 50 years of microprocessor trends (log scale) with the
  multicore turn around 2005, attribution printed under the plot (CC BY 4.0);
* :func:`accuracy_compute_figure` - top-5 accuracy against multiply-accumulates per
  forward pass, bubble area = parameters, one family highlighted (source figure 6-1-3);
* :func:`bert_estimates_figure` - estimated and recorded BERT-Large training times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .._validate import as_real, check_real, check_sequence, check_type
from . import COLORS, new_figure, styled

__all__ = [
    "accuracy_compute_figure",
    "bert_estimates_figure",
    "cpu_trends_figure",
    "execution_model_figure",
    "families",
]


# ------------------------------------------------------------ execution models
def _box(ax, x, y, w, h, text, color, *, fontsize=9, alpha=0.18):
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.01,rounding_size=0.02",
                                linewidth=1.2, edgecolor=color, facecolor=color, alpha=alpha))
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.01,rounding_size=0.02",
                                linewidth=1.2, edgecolor=color, facecolor="none"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="0.35"):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.2, shrinkA=0, shrinkB=0))


def _instructions(ax, x, y, w, h, labels, color):
    """A horizontal stream of instruction tiles (t_1 ... t_n)."""
    n = len(labels)
    tile = w / n
    for i, lab in enumerate(labels):
        _box(ax, x + i * tile + 0.004, y, tile - 0.008, h, lab, color, fontsize=7, alpha=0.10)


@styled
def execution_model_figure(n_cores: int = 4, *, n_instructions: int = 8):
    """The serial (left) and the parallel (right) execution model.

    Serial (串行计算): the problem's instructions go one after another, with the input
    data, through ONE CPU core, which produces the results. Parallel (并行计算): a
    parallel algorithm splits the problem into ``n_cores`` parts whose instruction
    streams run at the same time on ``n_cores`` cores; the partial results are
    combined.

    Parameters
    ----------
    n_cores : int
        Cores (and parts) of the parallel model, 2 .. 8.
    n_instructions : int
        Instructions of the whole problem, a multiple of ``n_cores``, 2 .. 32.

    Examples
    --------
    >>> fig = execution_model_figure(4)
    >>> [ax.get_title() for ax in fig.axes]
    ['serial: one core', 'parallel: 4 cores']
    """
    from .._validate import check_int

    n_cores = check_int(n_cores, "n_cores", 2, 8)
    n_instructions = check_int(n_instructions, "n_instructions", 2, 32)
    if n_instructions % n_cores:
        raise ValueError(
            f"n_instructions must be a multiple of n_cores={n_cores}, got {n_instructions}"
        )
    fig, (ax_s, ax_p) = new_figure(1, 2, size=(11.0, 4.2))
    for ax in (ax_s, ax_p):
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
    c_problem, c_instr, c_core, c_result, c_algo = COLORS[4], COLORS[0], COLORS[1], COLORS[2], COLORS[3]

    # serial: problem -> instructions t1..tn -> one core -> results
    _box(ax_s, 0.02, 0.42, 0.16, 0.16, "problem", c_problem)
    _instructions(ax_s, 0.24, 0.60, 0.42, 0.09, [f"t{i + 1}" for i in range(n_instructions)], c_instr)
    ax_s.text(0.45, 0.73, "instructions, one after another", ha="center", fontsize=8)
    _box(ax_s, 0.24, 0.30, 0.42, 0.09, "input data", COLORS[5], fontsize=8)
    _box(ax_s, 0.70, 0.40, 0.13, 0.20, "CPU\ncore", c_core)
    _box(ax_s, 0.87, 0.42, 0.12, 0.16, "results", c_result, fontsize=8)
    _arrow(ax_s, (0.18, 0.52), (0.24, 0.64))
    _arrow(ax_s, (0.18, 0.48), (0.24, 0.35))
    _arrow(ax_s, (0.66, 0.645), (0.70, 0.55))
    _arrow(ax_s, (0.66, 0.345), (0.70, 0.45))
    _arrow(ax_s, (0.83, 0.50), (0.87, 0.50))
    ax_s.text(0.5, 0.10, "time ≈ n instructions × time per instruction", ha="center", fontsize=8,
              style="italic")
    ax_s.set_title("serial: one core")

    # parallel: problem -> parallel algorithm -> n parts -> n cores -> combined results
    _box(ax_p, 0.00, 0.42, 0.12, 0.16, "problem", c_problem, fontsize=8)
    _box(ax_p, 0.15, 0.30, 0.12, 0.40, "parallel\nalgorithm", c_algo, fontsize=8)
    _arrow(ax_p, (0.12, 0.50), (0.15, 0.50))
    per_core = n_instructions // n_cores
    top, bottom = 0.90, 0.10
    lane = (top - bottom) / n_cores
    for k in range(n_cores):
        yc = top - (k + 0.5) * lane
        h = min(0.09, lane * 0.6)
        labels = [f"t{k * per_core + i + 1}" for i in range(per_core)]
        _instructions(ax_p, 0.31, yc - h / 2, 0.34, h, labels, c_instr)
        _box(ax_p, 0.69, yc - h / 2, 0.10, h, f"core {k + 1}", c_core, fontsize=7)
        _arrow(ax_p, (0.27, 0.50), (0.31, yc))
        _arrow(ax_p, (0.65, yc), (0.69, yc))
        _arrow(ax_p, (0.79, yc), (0.86, 0.50))
    _box(ax_p, 0.86, 0.42, 0.13, 0.16, "combined\nresults", c_result, fontsize=8)
    ax_p.text(0.48, 0.015, f"time ≈ (n / {n_cores}) × time per instruction + splitting and combining",
              ha="center", fontsize=8, style="italic")
    ax_p.set_title(f"parallel: {n_cores} cores")
    return fig


# ------------------------------------------------------------------ CPU trends
_TREND_STYLE = {
    "transistors_thousands": ("transistors (thousands)", "^", COLORS[1]),
    "single_thread_specint_x1000": ("single-thread performance (SpecINT × 10³)", "o", COLORS[0]),
    "frequency_mhz": ("frequency (MHz)", "s", COLORS[2]),
    "typical_power_w": ("typical power (W)", "D", COLORS[3]),
    "logical_cores": ("logical cores", "v", COLORS[7]),
}


@styled
def cpu_trends_figure(trends: Mapping, *, turn_year: float = 2005.0, attribution: str = ""):
    """Microprocessor trends on a log scale, with the multicore turn marked.

    Parameters
    ----------
    trends : mapping of series name -> object with ``year`` and ``value`` arrays
        As returned by :func:`course_lib.datasets.load_cpu_trends`.
    turn_year : float
        Where to draw the vertical "multicore turn" line.
    attribution : str
        Printed under the plot (the data's CC BY 4.0 licence requires it).

    Examples
    --------
    >>> from course_lib.datasets import load_cpu_trends, CPU_TRENDS_ATTRIBUTION
    >>> fig = cpu_trends_figure(load_cpu_trends(), attribution=CPU_TRENDS_ATTRIBUTION)
    >>> fig.axes[0].get_yscale(), len(fig.axes[0].collections)
    ('log', 5)
    """
    from ..datasets import CpuTrend

    check_type(trends, "trends", Mapping, "a mapping of series name -> CpuTrend (load_cpu_trends())")
    unknown = set(trends) - set(_TREND_STYLE)
    if unknown:
        raise ValueError(f"trends has unknown series {sorted(unknown)}; known: {sorted(_TREND_STYLE)}")
    for key, value in trends.items():
        check_type(value, f"trends[{key!r}]", CpuTrend, "a CpuTrend")
    turn_year = check_real(turn_year, "turn_year", 1900.0, 2100.0)
    check_type(attribution, "attribution", str, "a str")
    fig, ax = new_figure(size=(8.0, 5.0))
    for name, (label, marker, color) in _TREND_STYLE.items():
        if name in trends:
            t = trends[name]
            ax.scatter(t.year, t.value, s=14, marker=marker, color=color, label=label, alpha=0.8)
    ax.set_yscale("log")
    ax.axvline(turn_year, color="0.3", ls="--", lw=1)
    ax.annotate("multicore turn (Intel, AMD):\nfrequency and power flatten,\ncores multiply",
                xy=(turn_year, 2e5), xytext=(1971, 2e5), fontsize=8, va="center",
                bbox=dict(boxstyle="round", facecolor="white", edgecolor="0.6"),
                arrowprops=dict(arrowstyle="-|>", color="0.3"))
    ax.set(xlabel="year", ylabel="value (log scale)",
           title="50 years of microprocessor trends")
    ax.set_xlim(1970, 2023)
    ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    if attribution:
        import textwrap

        fig.text(0.01, 0.005, "\n".join(textwrap.wrap(attribution, 150)), fontsize=6.5,
                 color="0.3", ha="left", va="bottom")
        fig.get_layout_engine().set(rect=(0, 0.05, 1, 0.95))
    return fig


# ---------------------------------------------------------- accuracy vs compute
def families(models: Sequence) -> list[str]:
    """Sorted family names of ``models`` (rows of :func:`course_lib.datasets.load_dnn_models`).

    Examples
    --------
    >>> from course_lib.datasets import load_dnn_models
    >>> families(load_dnn_models())[:4]
    ['AlexNet', 'DPN', 'DenseNet', 'Inception']
    """
    return sorted({m.family for m in _check_models(models)})


def _check_models(models) -> list:
    from ..datasets import DnnModel

    return check_sequence(models, "models", DnnModel, "a DnnModel (a row of load_dnn_models())")


@styled
def accuracy_compute_figure(models: Sequence, highlight: str | None = None, *,
                            flops: bool = False):
    """Top-5 accuracy against compute per forward pass; bubble area = parameters.

    Parameters
    ----------
    models : sequence of DnnModel
        Rows of :func:`course_lib.datasets.load_dnn_models`.
    highlight : str, optional
        A family to highlight, one of :func:`families`: the others turn grey and its
        members are labelled (labels are moved apart, with a leader line, where points
        crowd). ``None`` or ``""`` (the drop-down's "all families" entry) highlights none.
    flops : bool
        Plot FLOPs (2 x MACs) instead of multiply-accumulates on the x axis.

    Examples
    --------
    >>> from course_lib.datasets import load_dnn_models
    >>> fig = accuracy_compute_figure(load_dnn_models(), "ResNet")
    >>> fig.axes[0].get_xlabel()[:44]
    'multiply-accumulates per forward pass (GMAC)'
    >>> fig.axes[0].get_title()
    'accuracy vs compute, highlighted: ResNet'
    >>> len(fig.axes[0].texts) - 1  # one label per ResNet model, plus the bubble note
    9
    """
    models = _check_models(models)
    names = families(models)
    if highlight is not None and not isinstance(highlight, str):
        raise TypeError(f"highlight must be a family name (str) or None, got {highlight!r}")
    highlight = highlight or None
    if highlight is not None and highlight not in names:
        raise ValueError(f"highlight must be one of {names} (or None / '' for none), got {highlight!r}")
    factor = 2.0 if flops else 1.0
    fig, ax = new_figure(size=(8.0, 5.0))
    x = np.array([m.gmacs_per_forward for m in models]) * factor
    y = np.array([m.top5_pct for m in models])
    p = np.array([m.params_million for m in models])
    sizes = 4.0 * p  # area proportional to parameters
    from matplotlib import colormaps

    palette = colormaps["tab20"].colors
    colour_of = {fam: palette[(2 * i) % 20 if i < 10 else (2 * (i - 10) + 1) % 20]
                 for i, fam in enumerate(names)}
    if highlight is not None:
        colour_of[highlight] = COLORS[1]
    for fam in names:
        mask = np.array([m.family == fam for m in models])
        on = highlight is None or fam == highlight
        ax.scatter(x[mask], y[mask], s=sizes[mask],
                   color=colour_of[fam] if on else "0.8", alpha=0.55 if on else 0.35,
                   edgecolors="0.2" if on else "0.7", linewidths=0.6,
                   label=fam, zorder=3 if on else 2)
    ax.set_xscale("log")
    unit = "GFLOP (= 2 × GMAC)" if flops else "GMAC"
    what = "FLOPs" if flops else "multiply-accumulates"
    ax.set(xlabel=f"{what} per forward pass ({unit}); the source figure's \"G-FLOPs\" are GMACs",
           ylabel="top-5 accuracy on ImageNet (%)",
           title="accuracy vs compute" + (f", highlighted: {highlight}" if highlight else ""))
    legend = ax.legend(fontsize=7, ncol=2, loc="lower right", markerscale=0.4, framealpha=0.9)
    for handle in legend.legend_handles:
        handle.set_sizes([30])
    note = ax.text(0.01, 0.98, "bubble area ∝ parameters", transform=ax.transAxes, fontsize=7,
                   va="top", color="0.3")
    if highlight is not None:
        mask = np.array([m.family == highlight for m in models])
        _label_points(ax, x[mask], y[mask], [m.model for m, on in zip(models, mask, strict=True) if on],
                      np.sqrt(sizes[mask]) / 2, avoid=[legend, note])
    return fig


def _label_points(ax, x, y, labels, radii, *, avoid=(), fontsize=7.0, pad=2.0, max_shift=10):
    """Annotate data points ``(x, y)`` so that no two labels overlap.

    Greedy placement in display space (points), top point first: each label goes to
    the right of its bubble (radius ``radii``, in points), else to the left, else one
    line further up or down, alternately, up to ``max_shift`` lines; a label that
    had to move is joined to its point by a thin leader line. Labels also keep out
    of the other bubbles, of the artists in ``avoid`` and of the axes' edges.
    """
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    fig = ax.figure
    fig.draw_without_rendering()  # settle the layout and the axis limits first
    to_points = 72.0 / fig.dpi
    xy = ax.transData.transform(np.column_stack([x, y])) * to_points
    ax0, ay0, ax1, ay1 = ax.bbox.extents * to_points
    blocked = [tuple(a.get_window_extent().extents * to_points) for a in avoid]
    bubbles = [(px - r, py - r, px + r, py + r) for (px, py), r in zip(xy, radii, strict=True)]
    font, measure = FontProperties(size=fontsize), TextToPath()
    line = 1.3 * fontsize

    def free(rect, own):
        if rect[0] < ax0 or rect[2] > ax1 or rect[1] < ay0 or rect[3] > ay1:
            return False
        others = blocked + [b for j, b in enumerate(bubbles) if j != own]
        return not any(rect[0] < o[2] and o[0] < rect[2] and rect[1] < o[3] and o[1] < rect[3]
                       for o in others)

    for i in np.argsort(-xy[:, 1], kind="stable"):
        (px, py), r = xy[i], radii[i]
        width = measure.get_text_width_height_descent(labels[i], font, ismath=False)[0]
        choice = None
        for k in range(2 * max_shift + 1):
            dy = (k + 1) // 2 * line * (1 if k % 2 else -1)
            for side in (1, -1):
                left = px + r + pad if side > 0 else px - r - pad - width
                rect = (left, py + dy - line / 2, left + width, py + dy + line / 2)
                if free(rect, i):
                    choice = (side, dy, rect)
                    break
            if choice:
                break
        side, dy, rect = choice or (1, 0.0, (px + r + pad, py - line / 2, px + r + pad + width,
                                             py + line / 2))
        blocked.append(rect)
        arrow = None if dy == 0 else dict(arrowstyle="-", color="0.45", lw=0.6, shrinkA=1, shrinkB=r)
        ax.annotate(labels[i], (x[i], y[i]), xytext=(side * (r + pad), dy), textcoords="offset points",
                    ha="left" if side > 0 else "right", va="center", fontsize=fontsize,
                    arrowprops=arrow, zorder=4, in_layout=False)


# ------------------------------------------------------------ BERT estimates
@styled
def bert_estimates_figure(labels: Sequence[str], seconds: Sequence[float],
                          record_labels: Sequence[str] = (), record_seconds: Sequence[float] = (),
                          *, texts: Sequence[str] = ()):
    """Horizontal bars of estimated training times (log scale), records as markers.

    ``texts``, if given, are printed at the end of each bar and marker (estimates
    first, then records), e.g. the times in human units.

    Examples
    --------
    >>> fig = bert_estimates_figure(["1 CPU", "1 GPU"], [9e7, 3e6], ["record"], [2820])
    >>> fig.axes[0].get_xscale(), len(fig.axes[0].patches)
    ('log', 2)
    """
    labels = check_sequence(labels, "labels")
    record_labels = check_sequence(record_labels, "record_labels")
    texts = check_sequence(texts, "texts")
    est = as_real(seconds, "seconds", allowed="in (0, inf)").reshape(-1)
    rec = as_real(record_seconds, "record_seconds", allowed="in (0, inf)").reshape(-1)
    if len(labels) != est.size or len(record_labels) != rec.size:
        raise ValueError("labels and seconds (and record_labels and record_seconds) must have equal lengths")
    if np.any(~np.isfinite(est)) or np.any(est <= 0) or np.any(rec <= 0):
        raise ValueError("seconds and record_seconds must be finite and > 0")
    fig, ax = new_figure(size=(8.0, 0.6 * (est.size + rec.size) + 1.6))
    ypos = np.arange(est.size + rec.size)[::-1]
    ax.barh(ypos[: est.size], est, color=COLORS[0], alpha=0.7, label="estimate (6PD / sustained rate)")
    ax.plot(rec, ypos[est.size:], "D", color=COLORS[1], label="record")
    ax.set_yticks(ypos, [*labels, *record_labels])
    ax.set_xscale("log")
    marks = [(60, "1 min"), (3600, "1 h"), (86400, "1 day"), (30 * 86400, "1 month"),
             (365.25 * 86400, "1 year")]
    lo, hi = min(est.min(), rec.min(initial=np.inf)), max(est.max(), rec.max(initial=0))
    for sec, name in marks:
        if lo / 3 <= sec <= hi * 3:
            ax.axvline(sec, color="0.6", lw=0.8, ls=":")
            ax.text(sec, ypos[0] + 0.55, name, fontsize=7, ha="center", color="0.4")
    if texts:
        if len(texts) != est.size + rec.size:
            raise ValueError("texts must have one entry per estimate and record")
        for xv, yv, text in zip([*est, *rec], ypos, texts, strict=True):
            ax.annotate(text, (xv, yv), textcoords="offset points", xytext=(6, -3), fontsize=8)
    ax.set_xlim(right=max(est.max(), rec.max(initial=0)) * 30)
    ax.set(xlabel="training time (s, log scale)", title="BERT-Large pre-training time")
    ax.legend(fontsize=8, loc="lower right")
    return fig
