"""Figures of the move from serial to parallel computing: pure functions, data in, Figure out.

* :func:`execution_model_figure` - the serial (top) and the parallel (bottom) execution
  model (source figures 6-1-1 and 6-1-4), drawn with matplotlib patches;
* :func:`cpu_trends_figure` - 50 years of microprocessor trends (log scale) with the
  multicore turn around 2005, attribution printed under the plot (CC BY 4.0);
* :func:`accuracy_compute_figure` - top-5 accuracy against multiply-accumulates per
  forward pass, bubble area = parameters (with a key of sizes), one family highlighted and
  its models labelled (source figure 6-1-3);
* :func:`bert_estimates_figure` - estimated and recorded BERT-Large training times, a dot
  plot on a time axis in words.

Legends sit outside the axes, never on the data.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np

from .._validate import as_real, check_real, check_sequence, check_type
from ..i18n import N_, tr
from . import COLORS, new_figure, styled

__all__ = [
    "accuracy_compute_figure",
    "bert_estimates_figure",
    "cpu_trends_figure",
    "execution_model_figure",
    "families",
]


# ------------------------------------------------------------ execution models
def _box(ax, x, y, w, h, text, color, *, alpha=0.18, fontsize=None):
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                linewidth=1.2, edgecolor=color, facecolor=color, alpha=alpha))
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                linewidth=1.2, edgecolor=color, facecolor="none"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="0.35"):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.2, shrinkA=0, shrinkB=0))


#: Most instruction tiles drawn in one stream; longer streams show their ends around a "…".
_MAX_TILES = 12


def _tile_labels(first: int, last: int, most: int) -> list[str]:
    """``t{first}`` ... ``t{last}``, or its first and last few around "…" if more than ``most``."""
    labels = [f"t{i}" for i in range(first, last + 1)]
    if len(labels) <= most:
        return labels
    head = (most - 1) // 2
    return labels[:head] + ["…"] + labels[-(most - 1 - head):]


def _instructions(ax, x, y, w, h, labels, color):
    """A horizontal stream of instruction tiles (t1 ... tn)."""
    tile = w / len(labels)
    for i, lab in enumerate(labels):
        _box(ax, x + i * tile + 0.02, y, tile - 0.04, h, lab, color, alpha=0.10, fontsize=10.5)


@styled
def execution_model_figure(n_cores: int = 4, *, n_instructions: int = 8):
    """The serial (top) and the parallel (bottom) execution model.

    Serial (串行计算): the problem's instructions go one after another, with the input
    data, through ONE CPU core, which produces the results. Parallel (并行计算): a
    parallel algorithm splits the problem into ``n_cores`` parts whose instruction
    streams run at the same time on ``n_cores`` cores; the partial results are
    combined. A long instruction stream shows its first and last instructions around
    a "…"; the figure grows taller with the cores.

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
    lane = 0.5  # inches per core in the parallel panel
    h_s, h_p = 2.4, lane * n_cores + 0.65
    fig, (ax_s, ax_p) = new_figure(2, 1, size=(9.6, h_s + h_p + 1.0), height_ratios=(h_s, h_p))
    fig.get_layout_engine().set(hspace=0.12)
    for ax, h in ((ax_s, h_s), (ax_p, h_p)):  # data units are about inches
        ax.set_xlim(0, 9.4)
        ax.set_ylim(0, h)
        ax.axis("off")
    c_problem, c_instr, c_core, c_result, c_algo = COLORS[4], COLORS[0], COLORS[1], COLORS[2], COLORS[3]

    # serial: problem -> instructions t1..tn -> one core -> results
    mid = 1.25
    _box(ax_s, 0.05, mid - 0.35, 1.15, 0.7, tr("problem"), c_problem)
    _instructions(ax_s, 1.6, mid + 0.25, 4.4, 0.45, _tile_labels(1, n_instructions, _MAX_TILES), c_instr)
    ax_s.text(3.8, mid + 0.85, tr("instructions, one after another"), ha="center")
    _box(ax_s, 1.6, mid - 0.75, 4.4, 0.45, tr("input data"), COLORS[5])
    _box(ax_s, 6.45, mid - 0.45, 1.0, 0.9, tr("CPU\ncore"), c_core)
    _box(ax_s, 7.9, mid - 0.35, 1.4, 0.7, tr("results"), c_result)
    _arrow(ax_s, (1.2, mid + 0.1), (1.6, mid + 0.45))
    _arrow(ax_s, (1.2, mid - 0.1), (1.6, mid - 0.5))
    _arrow(ax_s, (6.0, mid + 0.45), (6.45, mid + 0.2))
    _arrow(ax_s, (6.0, mid - 0.5), (6.45, mid - 0.2))
    _arrow(ax_s, (7.45, mid), (7.9, mid))
    ax_s.text(4.7, 0.1, tr("time ≈ n instructions × time per instruction"), ha="center", style="italic")
    ax_s.set_title(tr("serial: one core"))

    # parallel: problem -> parallel algorithm -> n parts -> n cores -> combined results
    per_core = n_instructions // n_cores
    top = h_p - 0.1
    mid = top - lane * n_cores / 2
    _box(ax_p, 0.05, mid - 0.35, 1.15, 0.7, tr("problem"), c_problem)
    _box(ax_p, 1.55, mid - 0.6, 1.25, 1.2, tr("parallel\nalgorithm"), c_algo)
    _arrow(ax_p, (1.2, mid), (1.55, mid))
    for k in range(n_cores):
        yc = top - (k + 0.5) * lane
        labels = _tile_labels(k * per_core + 1, (k + 1) * per_core, 6)
        _instructions(ax_p, 3.25, yc - 0.17, 2.75, 0.34, labels, c_instr)
        _box(ax_p, 6.4, yc - 0.17, 1.1, 0.34, tr("core {core}", core=k + 1), c_core, fontsize=10.5)
        _arrow(ax_p, (2.8, mid), (3.25, yc))
        _arrow(ax_p, (6.0, yc), (6.4, yc))
        _arrow(ax_p, (7.5, yc), (7.9, mid))
    _box(ax_p, 7.9, mid - 0.4, 1.4, 0.8, tr("combined\nresults"), c_result)
    ax_p.text(4.7, 0.05, tr("time ≈ (n / {cores}) × time per instruction + splitting and combining", cores=n_cores),
              ha="center", style="italic")
    ax_p.set_title(tr("parallel: {cores} cores", cores=n_cores))
    return fig


# ------------------------------------------------------------------ CPU trends
#: Series -> (legend text, translated where drawn; marker; colour).
_TREND_STYLE = {
    "transistors_thousands": (N_("transistors (thousands)"), "^", COLORS[1]),
    "single_thread_specint_x1000": (N_("single-thread performance\n(SpecINT × 10³)"), "o", COLORS[0]),
    "frequency_mhz": (N_("frequency (MHz)"), "s", COLORS[2]),
    "typical_power_w": (N_("typical power (W)"), "D", COLORS[3]),
    "logical_cores": (N_("logical cores"), "v", COLORS[7]),
}


@styled
def cpu_trends_figure(trends: Mapping, *, turn_year: float = 2005.0, attribution: str = ""):
    """Microprocessor trends on a log scale, with the multicore turn marked.

    The legend is right of the plot; the attribution is printed under it.

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
    import textwrap

    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    from ..datasets import CpuTrend

    check_type(trends, "trends", Mapping, "a mapping of series name -> CpuTrend (load_cpu_trends())")
    unknown = set(trends) - set(_TREND_STYLE)
    if unknown:
        raise ValueError(f"trends has unknown series {sorted(unknown)}; known: {sorted(_TREND_STYLE)}")
    for key, value in trends.items():
        check_type(value, f"trends[{key!r}]", CpuTrend, "a CpuTrend")
    turn_year = check_real(turn_year, "turn_year", 1900.0, 2100.0)
    check_type(attribution, "attribution", str, "a str")
    lines = textwrap.wrap(attribution, 118) if attribution else []
    height = 5.4 + 0.2 * len(lines)
    fig, ax = new_figure(size=(9.6, height))
    for name, (label, marker, color) in _TREND_STYLE.items():
        if name in trends:
            t = trends[name]
            ax.scatter(t.year, t.value, s=18, marker=marker, color=color, label=tr(label), alpha=0.85)
    ax.set_yscale("log")
    ax.set_ylim(0.3, 3e8)
    ax.yaxis.set_major_locator(FixedLocator([10.0**k for k in range(0, 9, 2)]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    ax.axvline(turn_year, color="0.3", ls="--", lw=1)
    ax.annotate(tr("multicore turn:\nfrequency flattens,\npower grows slowly,\ncores multiply"),
                xy=(turn_year, 2e6), xytext=(1972, 2e6), va="center",
                bbox=dict(boxstyle="round", facecolor="white", edgecolor="0.6"),
                arrowprops=dict(arrowstyle="-|>", color="0.3"))
    ax.set(xlabel=tr("year"), ylabel=tr("value (log scale)"), title=tr("50 years of microprocessor trends"))
    ax.set_xlim(1970, 2023)
    fig.legend(loc="outside right upper", markerscale=1.6)
    if lines:
        fig.text(0.01, 0.01, "\n".join(lines), color="0.3", ha="left", va="bottom", fontsize=10)
        bottom = (0.2 * len(lines) + 0.1) / height
        fig.get_layout_engine().set(rect=(0, bottom, 1, 1 - bottom))
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


#: Looks of the families when none is highlighted: six colours (no two that are hard to tell
#: apart) x two marker shapes.
_FAMILY_LOOKS = [(c, m) for m in ("o", "s") for c in (COLORS[0], COLORS[1], COLORS[2], COLORS[3], COLORS[4], COLORS[7])]
#: Parameter counts (millions) of the bubble-size key.
_SIZE_KEY = (5, 25, 100)


def _bubble_area(params_million):
    """Marker area in points² of a model with ``params_million`` parameters (area ∝ parameters)."""
    return 4.0 * np.asarray(params_million, dtype=float)


@styled
def accuracy_compute_figure(models: Sequence, highlight: str | None = None, *,
                            flops: bool = False):
    """Top-5 accuracy against compute per forward pass; bubble area = parameters.

    The x axis is logarithmic with plain labels at 1, 2, 5 x 10^k; the legend (the
    families, or the highlighted one and "other families") and a key of bubble sizes (5M,
    25M, 100M parameters) are right of the plot.

    Parameters
    ----------
    models : sequence of DnnModel
        Rows of :func:`course_lib.datasets.load_dnn_models`.
    highlight : str, optional
        A family to highlight, one of :func:`families`: the others turn grey and its
        members are labelled (placed when the figure is drawn so that no two labels
        overlap, away from the other bubbles where they can, with a leader line when a
        label had to move). ``None`` or ``""`` (the drop-down's "all families" entry)
        highlights none.
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
    >>> len(fig.axes[0].texts)  # one label per ResNet model
    9
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    from . import plain_log_axis

    models = _check_models(models)
    names = families(models)
    if highlight is not None and not isinstance(highlight, str):
        raise TypeError(f"highlight must be a family name (str) or None, got {highlight!r}")
    highlight = highlight or None
    if highlight is not None and highlight not in names:
        raise ValueError(f"highlight must be one of {names} (or None / '' for none), got {highlight!r}")
    factor = 2.0 if flops else 1.0
    fig, ax = new_figure(size=(9.6, 5.4))
    x = np.array([m.gmacs_per_forward for m in models]) * factor
    y = np.array([m.top5_pct for m in models])
    sizes = _bubble_area([m.params_million for m in models])
    family = np.array([m.family for m in models])
    handles = []
    others = tr("other families")
    for i, fam in enumerate(names):
        mask = family == fam
        on = highlight is None or fam == highlight
        color, marker = _FAMILY_LOOKS[i % len(_FAMILY_LOOKS)]
        if highlight is not None:
            color, marker = (COLORS[1], "o") if on else ("0.78", "o")
        area = sizes[mask] * (np.pi / 4 if marker == "s" else 1.0)  # a square as big as the circle
        ax.scatter(x[mask], y[mask], s=area, marker=marker, color=color,
                   alpha=0.6 if on else 0.45, edgecolors="0.15" if on else "0.65", linewidths=0.7,
                   label=fam, zorder=3 if on else 2)
        key = fam if on else others  # highlighted: it and "other families"
        if key not in (h.get_label() for h in handles):
            handles.append(Line2D([], [], ls="", marker=marker, markersize=9, color=color,
                                  markeredgecolor="0.15" if on else "0.65", alpha=0.8, label=key))
    handles.sort(key=lambda h: h.get_label() == others)  # the highlighted family first
    plain_log_axis(ax.xaxis, x.min() / 1.5, x.max() * 1.6)
    ax.set_ylim(y.min() - 1.5, y.max() + 1.2)
    ax.yaxis.set_major_locator(MaxNLocator(steps=[1, 2, 5, 10]))
    if flops:
        xlabel = tr("FLOPs per forward pass (GFLOP (= 2 × GMAC)), log scale\nthe source figure's \"G-FLOPs\" are GMACs")
    else:
        xlabel = tr("multiply-accumulates per forward pass (GMAC), log scale\nthe source figure's \"G-FLOPs\" are GMACs")
    ax.set(xlabel=xlabel, ylabel=tr("top-5 accuracy on ImageNet (%)"),
           title=tr("accuracy vs compute, highlighted: {family}", family=highlight) if highlight
           else tr("accuracy vs compute"))
    fig.legend(handles=handles, loc="outside right upper", title=tr("family"), handletextpad=0.3)
    key = [Line2D([], [], ls="", marker="o", markersize=float(np.sqrt(_bubble_area(p))), color="0.6",
                  markeredgecolor="0.2", alpha=0.7, label=f"{p}M") for p in _SIZE_KEY]
    fig.legend(handles=key, loc="outside right lower", title=tr("parameters\n(bubble area)"),
               labelspacing=1.3, borderpad=0.9, handletextpad=1.0)
    if highlight is not None:
        mask = family == highlight
        texts = [ax.annotate(m.model, (m.gmacs_per_forward * factor, m.top5_pct), textcoords="offset points",
                             xytext=(0, 0), va="center", zorder=5, in_layout=False,
                             bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.6),
                             arrowprops=dict(arrowstyle="-", color="0.4", lw=0.7, shrinkA=1,
                                             shrinkB=float(np.sqrt(sizes[j])) / 2))
                 for j, m in enumerate(models) if mask[j]]
        ax.add_artist(_point_labels_class()(texts, np.sqrt(sizes[mask]) / 2, np.column_stack([x, y]),
                                            np.sqrt(sizes) / 2, mask))
    return fig


@functools.cache
def _point_labels_class():
    """The artist class that places point labels at draw time (matplotlib imported lazily)."""
    from matplotlib.artist import Artist

    class PointLabels(Artist):
        """Places the labels of the highlighted points when the figure is drawn.

        It is drawn before the labels (lower z-order) and after the layout engine has
        placed the axes, so it sees the final positions in the one draw that renders the
        figure: no extra draw to settle the layout first (that would double a live
        figure's redraw time). See :func:`_place_labels`.
        """

        def __init__(self, texts, radii, xy_all, radii_all, highlighted):
            super().__init__()
            self.set_zorder(4)  # after the bubbles (zorder <= 3), before the labels (zorder 5)
            self.set_in_layout(False)
            self._args = (texts, radii, xy_all, radii_all, highlighted)
            self._placed_for = None

        def draw(self, renderer):
            # savefig draws twice (a dry run for the layout, then the picture): place once
            # for a given axes box and resolution
            key = (tuple(self.axes.bbox.bounds), self.figure.dpi)
            if key != self._placed_for:
                _place_labels(self.axes, *self._args, renderer)
                self._placed_for = key

    return PointLabels


def _place_labels(ax, texts, radii, xy_all, radii_all, highlighted, renderer, *, max_shift=8):
    """Put each label next to its point so that no two labels or leader lines cross.

    Greedy, top point first. A label tries positions right and left of its bubble, above
    and below it, then right and left one line further up or down at a time. A position
    must stay inside the axes and off the labels already placed; among those the label
    takes the cheapest: each line it moves away costs 1, a leader line crossing a label or
    a highlighted bubble covered 10, a grey bubble covered 0.6. A label off its point's
    line gets a leader line.
    ``radii`` are in points, positions are computed in pixels.
    """
    to_px = ax.figure.dpi / 72.0
    pts = ax.transData.transform(xy_all)
    r_all = np.asarray(radii_all) * to_px
    hard, soft = (pts[highlighted], r_all[highlighted]), (pts[~highlighted], r_all[~highlighted])
    x0, y0, x1, y1 = ax.bbox.extents
    rects: list[tuple] = []
    leaders: list[tuple] = []
    own = [ax.transData.transform(t.xy) for t in texts]
    for i in np.argsort([-p[1] for p in own], kind="stable"):
        text, (px, py), r = texts[i], own[i], radii[i] * to_px
        w, _, _ = renderer.get_text_width_height_descent(text.get_text(), text.get_fontproperties(), False)
        h = renderer.get_text_width_height_descent("lp", text.get_fontproperties(), False)[1]  # a line
        line, pad = 1.2 * h, 3 * to_px
        candidates = [(0.0, 1, 0.0, px + r + pad), (0.3, -1, 0.0, px - r - pad - w),
                      (0.5, 0, r + pad + line / 2, px - w / 2), (0.6, 0, -r - pad - line / 2, px - w / 2)]
        for k in range(1, max_shift + 1):
            for sign in (1, -1):
                candidates += [(k, 1, sign * k * line, px + r + pad), (k + 0.3, -1, sign * k * line, px - r - pad - w)]
        best = None
        for cost, side, dy, left in sorted(candidates, key=lambda c: c[0]):
            if best is not None and cost >= best[0]:
                break  # sorted: nothing further out can beat it
            rect = (left, py + dy - line / 2, left + w, py + dy + line / 2)
            if rect[0] < x0 or rect[2] > x1 or rect[1] < y0 or rect[3] > y1:
                continue
            if any(_overlap(rect, o) for o in rects):
                continue
            leader = ((rect[0] if side > 0 else rect[2], py + dy), (px, py)) if side and dy else None
            crossings = sum(_segment_hits(seg, rect) for seg in leaders) + (
                sum(_segment_hits(leader, o) for o in rects) if leader else 0)
            covered = _hits_circles(rect, *hard) - _hits_circles(rect, np.array([[px, py]]), np.array([r]))
            grey = _hits_circles(rect, *soft)
            cost += 10.0 * (crossings + covered) + 0.6 * grey
            if best is None or cost < best[0]:
                best = (cost, side, dy, rect, leader)
        if best is None:  # nowhere inside the axes is free: right of the bubble
            best = (0.0, 1, 0.0, (px + r + pad, py - line / 2, px + r + pad + w, py + line / 2), None)
        _, side, dy, rect, leader = best
        rects.append(rect)
        if leader:
            leaders.append(leader)
        dx = {1: radii[i] + 3, -1: -(radii[i] + 3), 0: 0.0}[side]
        text.xyann = (dx, dy / to_px)
        text.set_ha({1: "left", -1: "right", 0: "center"}[side])
        text.arrow_patch.set_visible(leader is not None)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _segment_hits(segment, rect) -> bool:
    """Whether a straight segment crosses a rectangle (sampled at 16 points)."""
    (ax_, ay), (bx, by) = segment
    t = np.linspace(0.0, 1.0, 16)[1:-1]
    xs, ys = ax_ + (bx - ax_) * t, ay + (by - ay) * t
    return bool(np.any((rect[0] < xs) & (xs < rect[2]) & (rect[1] < ys) & (ys < rect[3])))


def _hits_circles(rect, centres, radii) -> int:
    """How many of the circles (``centres`` an (n, 2) array, ``radii`` n) a rectangle overlaps."""
    nearest = np.clip(centres, (rect[0], rect[1]), (rect[2], rect[3]))
    return int(np.count_nonzero(np.sum((nearest - centres) ** 2, axis=1) < radii**2))


# ------------------------------------------------------------ BERT estimates
@styled
def bert_estimates_figure(labels: Sequence[str], seconds: Sequence[float],
                          record_labels: Sequence[str] = (), record_seconds: Sequence[float] = (),
                          *, texts: Sequence[str] = ()):
    """Estimated training times and records as a dot plot on a log time axis.

    One row per time, estimates (dots) first, then records (diamonds); on a log axis the
    length of a bar would mean nothing, so each time is a marker with its value beside it.
    ``texts``, if given, are those values (estimates first, then records), e.g. the times
    in human units; by default the times in words.

    Examples
    --------
    >>> fig = bert_estimates_figure(["1 CPU", "1 GPU"], [9e7, 3e6], ["record"], [2820])
    >>> fig.axes[0].get_xscale(), len(fig.axes[0].patches), len(fig.axes[0].get_lines())
    ('log', 0, 3)
    """
    from .cost import _time_dots

    labels = check_sequence(labels, "labels")
    record_labels = check_sequence(record_labels, "record_labels")
    texts = check_sequence(texts, "texts")
    est = as_real(seconds, "seconds", allowed="in (0, inf)").reshape(-1)
    rec = as_real(record_seconds, "record_seconds", allowed="in (0, inf)").reshape(-1)
    if len(labels) != est.size or len(record_labels) != rec.size:
        raise ValueError("labels and seconds (and record_labels and record_seconds) must have equal lengths")
    if np.any(~np.isfinite(est)) or np.any(est <= 0) or np.any(rec <= 0):
        raise ValueError("seconds and record_seconds must be finite and > 0")
    if texts and len(texts) != est.size + rec.size:
        raise ValueError("texts must have one entry per estimate and record")
    fig, ax = new_figure(size=(8.4, 0.5 * (est.size + rec.size) + 2.0))
    styles = ([("o", COLORS[0], tr("estimate: 6PD / sustained rate"))] * est.size
              + [("D", COLORS[1], tr("record (measured)"))] * rec.size)
    _time_dots(ax, np.concatenate([est, rec]), [*labels, *record_labels], texts=list(texts) or None,
               styles=styles)
    ax.set(xlabel=tr("training time, log scale"), title=tr("BERT-Large pre-training time"))
    fig.legend(loc="outside lower center", ncol=2)
    return fig
