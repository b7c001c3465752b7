"""Figures of pipelines and hybrid grids: pipeline timelines (Gantt charts), bubbles, hybrid grids.

Every Gantt chart shades the idle time of each stage between the step's first forward
and its last backward (hatched grey, "idle (bubble)"): the bubble its title quantifies.
An interleaved 1F1B timeline (``virtual_stages = v > 1``) draws each model chunk of a
device in its own shade of the forward or backward colour (chunk 0 darkest), named in
the key, with the micro-batch number in each bar.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from .. import planner
from .._validate import as_real, check_int, check_positive, check_range, check_sequence, check_type
from ..i18n import N_, tr, tr_n
from ..schedule import Timeline, bubble_fraction, check_schedule, simulate_uniform
from . import COLORS, log2_axis, new_figure, styled

__all__ = [
    "gantt_figure",
    "interleaved_figure",
    "schedule_figure",
    "bubble_figure",
    "hybrid_configs_figure",
    "hybrid_best_figure",
    "hybrid_explorer_figure",
]

_KIND_COLOR = {"F": COLORS[0], "B": COLORS[1], "A": COLORS[3], "U": "0.3"}
_KIND_NAME = {"F": N_("forward"), "B": N_("backward"), "A": N_("all-reduce"), "U": N_("update")}
#: The key of one model chunk's forwards or backwards in an interleaved chart.
_CHUNK_NAME = {"F": N_("forward, chunk {chunk}"), "B": N_("backward, chunk {chunk}")}
_SCHEDULE_NAME = {"gpipe": "GPipe", "1f1b": "1F1B"}
#: Idle time (the bubble): light grey, hatched, so it reads as "nothing here" in grey too.
_IDLE = dict(facecolor="0.94", edgecolor="0.55", hatch="///", linewidth=0.0)
_IDLE_LABEL = N_("idle (bubble)")  # translated where drawn
#: Width of one digit of a micro-batch number at the default type size, in points
#: (DejaVu Sans digits are 0.64 em), and the box height a number needs.
_DIGIT_PT, _NUMBER_HEIGHT_PT = 0.64 * 11.0, 14.0
_NUMBERS = "_micro-batch numbers"  # the label of a Gantt chart's numbers (no legend entry)


def _idle_intervals(timeline) -> list[tuple[int, float, float]]:
    """Idle time of every row (device) of a timeline: ``(row, start, end)`` intervals.

    A row is idle when it runs no forward or backward between the step's first
    forward and its last backward - what :meth:`Timeline.bubble` counts: the intervals
    add up to ``bubble() * n_rows * makespan``.

    Examples
    --------
    >>> t = simulate_uniform(2, 2)
    >>> _idle_intervals(t)
    [(0, 2.0, 5.0), (1, 0.0, 1.0), (1, 7.0, 9.0)]
    >>> sum(end - start for _, start, end in _idle_intervals(t)), round(t.bubble() * 2 * t.makespan, 9)
    (6.0, 6.0)
    """
    check_type(timeline, "timeline", Timeline, "a Timeline")
    busy: dict[int, list[tuple[float, float]]] = {}
    for op in timeline.ops:
        if op.kind in ("F", "B"):
            busy.setdefault(timeline.row(op), []).append((op.start, op.end))
    if not busy:
        return []
    t0 = min(a for spans in busy.values() for a, _ in spans)
    t1 = max(b for spans in busy.values() for _, b in spans)
    out = []
    for row in range(timeline.n_rows):
        t = t0
        for a, b in sorted(busy.get(row, [])):
            if a > t:
                out.append((row, t, a))
            t = max(t, b)
        if t < t1:
            out.append((row, t, t1))
    return out


def _polys(ax, verts, label: str, **style) -> None:
    """Add polygons ``verts`` as one PolyCollection (without moving the axis limits)."""
    from matplotlib.collections import PolyCollection

    cls = _hatched_polys_class() if style.get("hatch") else PolyCollection
    ax.add_collection(cls(verts, label=label, **style), autolim=False)


@functools.lru_cache(maxsize=1)
def _hatched_polys_class():
    """A PolyCollection that draws its polygons as ONE compound path: Agg makes a hatch tile
    for every path it fills, and 30 hatched bars cost 16 ms of a 190 ms redraw (the hybrid
    explorer), about 4 ms as one path; the same pixels (the hatch is anchored to the
    canvas). Its paths stay one per polygon for everyone else (``get_paths``)."""
    from matplotlib.collections import PolyCollection
    from matplotlib.path import Path

    class HatchedPolyCollection(PolyCollection):
        def draw(self, renderer):
            paths = self._paths
            if len(paths) > 1:
                self._paths = [Path.make_compound_path(*paths)]
            try:
                super().draw(renderer)
            finally:
                self._paths = paths

    return HatchedPolyCollection


def _boxes(ax, spans, label: str, **style) -> None:
    """Gantt bars ``(row, start, end)``, each 0.8 of a row high, as one collection."""
    _polys(ax, [((x0, r - 0.4), (x0, r + 0.4), (x1, r + 0.4), (x1, r - 0.4)) for r, x0, x1 in spans],
           label, **style)


def _numbers(ax, texts, color: str = "white") -> None:
    """White bold numbers ``(text, x, row)`` centred in their bars, as one collection of
    glyph outlines: a live Gantt chart writes up to a few hundred, and one collection draws
    in a fraction of the time as many text artists (for speed; it looks the same)."""
    if not texts:
        return
    from matplotlib.collections import PathCollection
    from matplotlib.font_manager import FontProperties
    from matplotlib.transforms import Affine2D

    size = FontProperties().get_size_in_points()  # the course style's type size
    paths = [_number_path(text, size) for text, _, _ in texts]
    points = Affine2D().scale(1 / 72.0) + ax.figure.dpi_scale_trans  # glyph outlines are in points
    numbers = PathCollection(paths, offsets=[(x, r) for _, x, r in texts], offset_transform=ax.transData,
                             transform=points, facecolors=color, edgecolors="none", zorder=3, label=_NUMBERS)
    numbers.texts = [text for text, _, _ in texts]  # what it writes, for readers (and tests)
    ax.add_collection(numbers, autolim=False)


@functools.lru_cache(maxsize=256)
def _number_path(text: str, size: float):
    """The outline of ``text`` in bold at ``size`` points, centred on (0, 0)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath
    from matplotlib.transforms import Affine2D

    path = TextPath((0, 0), text, size=size, prop=FontProperties(weight="bold"))
    (x0, y0), (x1, y1) = path.get_extents().get_points()
    return path.transformed(Affine2D().translate(-(x0 + x1) / 2, -(y0 + y1) / 2))


def _shade(color: str, chunk: int, chunks: int) -> tuple:
    """``color`` mixed with white by ``0.6 * chunk / chunks``: chunk 0 full, later chunks lighter."""
    from matplotlib.colors import to_rgb

    w = 0.6 * chunk / max(chunks, 1)
    return tuple((1 - w) * c + w for c in to_rgb(color))


def _row_names(timeline) -> list[str]:
    if timeline.replicas == 1 and timeline.virtual_stages > 1:  # a row holds v stages: name the device
        return [tr("device {device}", device=s) for s in range(timeline.n_rows)]
    if timeline.replicas == 1:
        return [tr("stage {stage}", stage=s) for s in range(timeline.n_rows)]
    return [tr("replica {replica}, stage {stage}", replica=r // timeline.n_stages, stage=r % timeline.n_stages)
            for r in range(timeline.n_rows)]


def _draw_gantt(ax, timeline, scale: float, *, width_in: float, row_in: float, labels: bool = True) -> list:
    """Draw a timeline's operations and its idle time; return the legend handles.

    A micro-batch number is written into a bar only where it fits at the default type
    size: the bar is ``width_in`` (inches of the x axis) times its share of the span wide.
    """
    from matplotlib.patches import Patch

    ops = timeline.ops
    lo = min((op.start for op in ops), default=0.0) * scale
    hi = max((op.end for op in ops), default=1.0) * scale
    span = max(hi - lo, 1e-12)
    handles = []
    v = timeline.virtual_stages
    _boxes(ax, [(r, a * scale, b * scale) for r, a, b in _idle_intervals(timeline)], tr(_IDLE_LABEL), **_IDLE)
    for kind in ("F", "B", "A", "U"):
        for c in range(v if kind in ("F", "B") else 1):  # interleaved: one shade per chunk
            mine = [op for op in ops if op.kind == kind and (op.chunk == c or kind not in ("F", "B"))]
            name = tr(_CHUNK_NAME[kind], chunk=c) if v > 1 and kind in ("F", "B") else tr(_KIND_NAME[kind])
            color = _shade(_KIND_COLOR[kind], c, v)
            if mine:
                _boxes(ax, [(timeline.row(op), op.start * scale, op.end * scale) for op in mine], name,
                       facecolor=color, edgecolor="white", linewidth=0.6)
                handles.append(Patch(facecolor=color, label=name))
    handles.append(Patch(**_IDLE, label=tr(_IDLE_LABEL)))
    pt_per_unit = width_in * 72.0 / span
    if labels and row_in * 0.8 * 72.0 >= _NUMBER_HEIGHT_PT:
        for c in range(v):  # dark numbers on the light shades of later chunks
            _numbers(ax, [(str(op.micro), (op.start + op.end) / 2 * scale, timeline.row(op)) for op in ops
                          if op.kind in ("F", "B") and op.chunk == c
                          and op.duration * scale * pt_per_unit >= _DIGIT_PT * len(str(op.micro)) + 4],
                     "white" if 0.6 * c / v < 0.3 else "black")
    names = _row_names(timeline)
    step = 1 if row_in * 72.0 >= 13.0 else 2  # every row named while the names fit
    ax.set_yticks(range(0, timeline.n_rows, step), names[::step])
    ax.set_ylim(timeline.n_rows - 0.5, -0.5)
    ax.set_xlim(lo - 0.01 * span, hi + 0.01 * span)
    ax.grid(True, axis="x", alpha=0.3)
    ax.grid(False, axis="y")
    return handles


def _label_room(names: Sequence[str], fig_width: float, right: float = 0.25) -> float:
    """Inches of x axis left beside tick labels ``names`` at the tick type size (an estimate)."""
    return fig_width - 0.45 - 0.58 * 10.5 / 72.0 * max(len(n) for n in names) - right


def _gantt_key(ax, handles) -> int:
    """The key of a Gantt chart above its axes (off the bars): one row, or rows of 4 entries
    when there are more (an interleaved chart names every chunk). Returns the title's pad."""
    ncols = len(handles) if len(handles) <= 4 else 4
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=ncols,
              frameon=False, borderaxespad=0.2, handlelength=1.6, columnspacing=1.2)
    return 24 + 18 * (-(-len(handles) // ncols) - 1)


def _schedule_name(tl) -> str:
    name = _SCHEDULE_NAME.get(tl.schedule, tl.schedule)
    return tr("interleaved {schedule}, v = {v}", schedule=name, v=tl.virtual_stages) if tl.virtual_stages > 1 else name


def _gantt_title(name: str, tl, measured: bool) -> str:
    v = tl.virtual_stages
    fields = dict(schedule=name, grid=f"$N_d$ = {tl.replicas} × " if tl.replicas > 1 else "", stages=tl.n_stages,
                  micro=tl.n_micro, bubble=f"{tl.bubble():.1%}",
                  formula="$(N_p-1)/(vM+N_p-1)$" if v > 1 else "$(N_p-1)/(M+N_p-1)$",
                  share=f"{bubble_fraction(tl.n_stages, tl.n_micro, v):.1%}")
    if measured:
        return tr("{schedule}, {grid}$N_p$ = {stages}, M = {micro}: bubble measured {bubble}\n"
                  "formula {formula} = {share} (equal stages, no hand-over time)", **fields)
    return tr("{schedule}, {grid}$N_p$ = {stages}, M = {micro}: bubble simulated {bubble}\n"
              "formula {formula} = {share} (equal stages, no hand-over time)", **fields)


@styled
def gantt_figure(timeline, *, step: int | None = None, title: str | None = None, labels: bool = True):
    """Gantt chart (甘特图) of a pipeline timeline, measured or simulated.

    One row per stage (per device of a hybrid run); blue bars are forwards, orange
    backwards, dark grey updates, purple gradient all-reduces, each forward and backward
    numbered with its micro-batch where the number fits. The idle time between the
    step's first forward and last backward is hatched grey: the bubble, whose share the
    title compares with the formula ``(N_p-1)/(M+N_p-1)``.

    Parameters
    ----------
    timeline : course_lib.schedule.Timeline
    step : int, optional
        Draw only this step (default: the first step of a measured run, everything of
        a simulated one).
    title : str, optional
    labels : bool
        Write the micro-batch index into each bar wide enough for it.
    """
    check_type(timeline, "timeline", Timeline, "a Timeline")
    if title is not None:
        check_type(title, "title", str, "a str")
    if step is None and timeline.source == "measured" and len(timeline.steps) > 1:
        step = timeline.steps[0]
    tl = timeline.step(step) if step is not None else timeline
    measured = tl.source == "measured"
    width, row_in = 9.6, 0.5
    key_rows = -(-(2 * tl.virtual_stages + 1) // 4) if tl.virtual_stages > 1 else 1
    fig, ax = new_figure(size=(width, 1.75 + row_in * tl.n_rows + 0.25 * (key_rows - 1)))
    handles = _draw_gantt(ax, tl, 1e3 if measured else 1.0, labels=labels, row_in=row_in,
                          width_in=_label_room(_row_names(tl), width))
    pad = _gantt_key(ax, handles)
    ax.set_xlabel(tr("time [ms]") if measured else tr("time [units of one forward]"))
    ax.set_title(title or _gantt_title(_schedule_name(tl), tl, measured), pad=pad)
    return fig


@styled
def interleaved_figure(stages: int, micro_batches: int, virtual_stages: Sequence[int] = (1, 2), *,
                       backward_ratio: float = 2.0):
    """Simulated 1F1B with equal stages, plain and interleaved, one Gantt chart above the
    other on one time axis: the same work per device finishes sooner with ``v`` chunks.

    Each panel is :func:`course_lib.schedule.simulate_uniform` (a device's forward takes
    1 unit, split into ``v`` chunks of ``1/v``); its title gives the simulated bubble, the
    formula ``(N_p-1)/(vM+N_p-1)`` and the hand-overs per micro-batch ``v N_p - 1``.

    Parameters
    ----------
    stages, micro_batches : int
        ``N_p`` >= 1 and ``M`` >= 1, a multiple of ``N_p`` (every ``v > 1``).
    virtual_stages : sequence of int
        The ``v`` of each panel (1 to 4 panels).
    backward_ratio : float
        Backward time relative to the forward.
    """
    from ..schedule import virtual_handovers

    stages = check_int(stages, "stages", 1, 64)
    micro_batches = check_int(micro_batches, "micro_batches", 1, 256)
    vs = check_sequence(virtual_stages, "virtual_stages")
    if not 1 <= len(vs) <= 4:
        raise ValueError(f"virtual_stages must list 1 to 4 values, got {len(vs)}")
    vs = [check_int(v, f"virtual_stages[{i}]", 1, 16) for i, v in enumerate(vs)]
    backward = check_positive(backward_ratio, "backward_ratio", allow_zero=True)
    tls = [simulate_uniform(stages, micro_batches, schedule="1f1b", backward=backward, virtual_stages=v)
           for v in vs]
    width, row_in = 9.6, 0.45
    panel = [1.65 + row_in * stages + 0.25 * -(-(2 * v + 1) // 4) for v in vs]
    fig, axes = new_figure(len(vs), 1, size=(width, sum(panel)), sharex=True, squeeze=False,
                           gridspec_kw=dict(height_ratios=panel))
    for ax, tl, v in zip(axes[:, 0], tls, vs):
        handles = _draw_gantt(ax, tl, 1.0, row_in=row_in, width_in=_label_room(_row_names(tl), width))
        pad = _gantt_key(ax, handles)
        ax.set_title(tr_n("{schedule}, $N_p$ = {stages}, M = {micro}: step {step} units, bubble {bubble}\n"
                          "formula $(N_p-1)/(vM+N_p-1)$ = {share}; {count} hand-over per micro-batch ($vN_p-1$)",
                          "{schedule}, $N_p$ = {stages}, M = {micro}: step {step} units, bubble {bubble}\n"
                          "formula $(N_p-1)/(vM+N_p-1)$ = {share}; {count} hand-overs per micro-batch ($vN_p-1$)",
                          virtual_handovers(stages, v), schedule=_schedule_name(tl), stages=stages, micro=micro_batches,
                          step=f"{tl.makespan:.3g}", bubble=f"{tl.bubble():.1%}",
                          share=f"{bubble_fraction(stages, micro_batches, v):.1%}"), pad=pad)
    lo, hi = 0.0, max(tl.makespan for tl in tls)
    for ax in axes[:, 0]:
        ax.set_xlim(lo - 0.01 * hi, 1.01 * hi)
    axes[-1, 0].set_xlabel(tr("time [units of one forward of a whole stage]"))
    return fig


@functools.lru_cache(maxsize=512)
def _uniform(stages: int, micro_batches: int, schedule: str, backward: float):
    """:func:`~course_lib.schedule.simulate_uniform` with forward 1, cached
    (a pure function of hashable arguments returning a frozen Timeline): the live
    :func:`schedule_figure` asks for the same points at every redraw."""
    return simulate_uniform(stages, micro_batches, schedule=schedule, forward=1.0,
                                              backward=backward)


@styled
def schedule_figure(stages: int, micro_batches: int, *, schedule: str = "gpipe",
                    backward_ratio: float = 2.0, max_micro: int = 64):
    """Simulated pipeline with equal stages: Gantt chart and bubble against ``M``.

    Top: the simulated timeline (:func:`course_lib.schedule.simulate_uniform`)
    of ``stages`` stages and ``micro_batches`` micro-batches, idle time hatched. Bottom: the
    bubble share against ``M`` - the formula for this ``N_p`` and the simulator's points
    for both schedules (the same with equal stages: GPipe hollow circles, 1F1B filled
    diamonds inside them) - and the peak activations held by stage 0 (GPipe: ``M``;
    1F1B: ``min(N_p, M)``) in the title. Simulations are cached (:func:`_uniform`), so a
    redraw with slider values seen before simulates nothing.

    Parameters
    ----------
    stages, micro_batches : int
        ``N_p`` >= 1, ``M`` >= 1 (the sliders).
    schedule : {"gpipe", "1f1b"}
    backward_ratio : float
        Backward time relative to the forward (2 for a GEMM layer).
    max_micro : int
        Right end of the ``M`` axis (fixed, so that the axis stays put while a slider moves).
    """
    stages = check_int(stages, "stages", 1, 256)
    micro_batches = check_int(micro_batches, "micro_batches", 1, 4096)
    max_micro = check_int(max_micro, "max_micro", 1, 4096)
    backward = check_positive(backward_ratio, "backward_ratio", allow_zero=True)
    check_schedule(schedule)
    tl = _uniform(stages, micro_batches, schedule, backward)
    held = int(tl.in_flight()[0])
    # The chart keeps one height up to 10 stages (2.4 in, rows share it), so that the
    # figure does not jump while the stages slider moves; beyond, 0.22 in a row.
    width, row_in = 9.6, max(0.22, 2.4 / stages)
    gantt_h = row_in * stages
    fig, axes = new_figure(2, 2, size=(width, gantt_h + 4.0),
                           gridspec_kw=dict(height_ratios=(gantt_h + 0.9, 2.1), width_ratios=(3.0, 1.0)))
    ax_g, ax_b = axes[0, 0], axes[1, 0]
    ax_g.set_subplotspec(axes[0, 0].get_subplotspec().get_gridspec()[0, :])
    axes[0, 1].remove()
    handles = _draw_gantt(ax_g, tl, 1.0, row_in=row_in, width_in=_label_room(_row_names(tl), width))
    _gantt_key(ax_g, handles)
    name = _SCHEDULE_NAME[schedule]
    ax_g.set_xlabel(tr("time [units of one forward]"))
    ax_g.set_title(tr_n("{schedule}, $N_p$ = {stages}, M = {micro}: bubble (hatched) {bubble}; "
                        "stage 0 holds {count} micro-batch' activations",
                        "{schedule}, $N_p$ = {stages}, M = {micro}: bubble (hatched) {bubble}; "
                        "stage 0 holds {count} micro-batches' activations", held,
                        schedule=name, stages=stages, micro=micro_batches, bubble=f"{tl.bubble():.1%}"), pad=24)

    top = max(max_micro, micro_batches)
    ms = np.unique(np.round(np.geomspace(1, top, 60)).astype(int))
    ax_b.plot(ms, bubble_fraction(stages, ms), color="0.3", label="$(N_p-1)/(M+N_p-1)$")
    pts = np.unique(np.round(np.geomspace(1, top, 9)).astype(int))
    for sched, style in (("gpipe", dict(marker="o", mfc="none", ms=11, mew=2.0, color=COLORS[0])),
                         ("1f1b", dict(marker="D", ms=5, color=COLORS[1]))):
        sim = [_uniform(stages, int(m), sched, backward).bubble() for m in pts]
        ax_b.plot(pts, sim, ls="none", label=tr("simulated {schedule}", schedule=_SCHEDULE_NAME[sched]), **style)
    ax_b.plot([micro_batches], [tl.bubble()], "*", color=COLORS[2], ms=15, mec="black", mew=0.8,
              label=tr("this setting"))
    log2_axis(ax_b.xaxis, top)
    ax_b.set(xlabel=tr("micro-batches M"), ylabel=tr("bubble share"), ylim=(0, 1),
             title=tr("$N_p$ = {stages}: GPipe and 1F1B idle alike", stages=stages))
    ax_leg = axes[1, 1]
    ax_leg.set_axis_off()
    ax_leg.legend(*ax_b.get_legend_handles_labels(), loc="center left", frameon=False, borderaxespad=0)
    return fig


@styled
def bubble_figure(stages: Sequence[int], micro_batches: Sequence[int], measured: Sequence[float],
                  *, simulated: Sequence[float] | None = None, max_micro: int | None = None):
    """Measured bubble shares against the formula ``(N_p-1)/(M+N_p-1)``.

    Measured points are filled vermillion circles, the simulator's hollow blue squares
    around them (so both show where they agree); one grey formula curve per ``N_p``
    (line style by ``N_p``). The axes end where the data end.

    Parameters
    ----------
    stages, micro_batches, measured : sequences of equal length
        One point per run: ``N_p``, ``M`` and the measured idle share.
    simulated : sequence of float, optional
        The simulator's prediction for each run (e.g. from measured stage costs).
    max_micro : int, optional
        Draw the formula curves to this ``M`` (default: the largest ``M`` measured).
    """
    s_arr = _counts(stages, "stages")
    m_arr = _counts(micro_batches, "micro_batches")
    y = as_real(measured, "measured", allowed="in [0, 1]")
    if not (s_arr.shape == m_arr.shape == y.shape) or s_arr.ndim != 1:
        raise ValueError("stages, micro_batches and measured must be 1-d and of equal length")
    check_range(y, "measured", 0.0, 1.0)
    top = int(m_arr.max(initial=1))
    if max_micro is not None:
        top = max(top, check_int(max_micro, "max_micro", 1, 4096))
    values = [y]
    if simulated is not None:
        simulated = as_real(simulated, "simulated")
        if simulated.shape != y.shape:
            raise ValueError(f"simulated must have the shape of measured {y.shape}, got {simulated.shape}")
        values.append(simulated)
    fig, ax = new_figure(size=(8.0, 4.0))
    ms = np.unique(np.round(np.geomspace(1, top, 40)).astype(int))
    for i, s in enumerate(sorted(set(s_arr.tolist()))):
        curve = bubble_fraction(s, ms)
        values.append(curve)
        ax.plot(ms, curve, color="0.3", ls=("-", "--", ":", "-.")[i % 4], label=tr("formula, $N_p$ = {stages}", stages=s))
    if simulated is not None:
        ax.plot(m_arr, simulated, "s", mfc="none", mec=COLORS[0], mew=2.0, ms=13,
                label=tr("simulated (measured stage times)"))
    ax.plot(m_arr, y, "o", color=COLORS[1], ms=7, zorder=3, label=tr("measured"))
    log2_axis(ax.xaxis, top)
    ax.set_xlim(2 ** -0.3, top * 2**0.3)
    ax.set(xlabel=tr("micro-batches M"), ylabel=tr("bubble (idle share)"),
           ylim=(0, min(1.0, 1.15 * float(max(np.max(v) for v in values)) + 0.02)),
           title=tr("pipeline bubble: measured vs $(N_p-1)/(M+N_p-1)$"))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0)
    return fig


def _counts(values, name: str) -> np.ndarray:
    """A 1-D array of whole counts >= 1 (stages, micro-batches, devices)."""
    arr = as_real(values, name, allowed="(whole numbers >= 1)")
    check_range(arr, name, 1.0, 2.0**40)
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold whole numbers, got {arr.tolist()}")
    return arr.astype(np.int64)


# ---------------------------------------------------------------------- hybrid
#: The parts of an estimated step, bottom to top; the bubble is hatched like a Gantt chart's idle time.
#: (attribute, key text translated where drawn, style)
_PARTS = (("compute", N_("compute"), dict(color=COLORS[0])),
          ("bubble", N_("pipeline bubble"), _IDLE),
          ("p2p", N_("hand-over (p2p)"), dict(color=COLORS[2])),
          ("allreduce", N_("gradient all-reduce"), dict(color=COLORS[3])),
          ("tensor_allreduce", N_("tensor all-reduce"), dict(color=COLORS[4])))
#: Memory bars of the explorer: sky blue (no step-time part has it), over the device's memory hatched.
_MEMORY = {"label": N_("memory per device"), "bars": dict(facecolor=COLORS[5], linewidth=0)}
_MEMORY_OVER = {"label": N_("memory per device, over the limit"),
                "bars": dict(facecolor=COLORS[1], edgecolor="white", hatch="xx", linewidth=0)}


def _rank(config) -> tuple:
    """Order of :func:`course_lib.planner.best_config`: time, then fewer stages, then smaller N_t."""
    return (config.step_time, config.pipeline, config.tensor)


def _tensor_groups(ax_t, axes, configs) -> None:
    """Separate the groups of equal tensor degree N_t and name them above ``ax_t``."""
    ts = [c.tensor for c in configs]
    if max(ts) == 1:
        return
    starts = [i for i, t in enumerate(ts) if i == 0 or t != ts[i - 1]] + [len(ts)]
    for lo, hi in zip(starts[:-1], starts[1:]):
        for ax in axes:
            if lo > 0:
                ax.axvline(lo - 0.5, color="0.4", lw=0.8, ls=":")
        ax_t.text((lo + hi - 1) / 2, 1.0, f"$N_t$ = {ts[lo]}", transform=ax_t.get_xaxis_transform(),
                  ha="center", va="bottom", color="0.25")


def _columns(ax, x, heights, bottoms, label: str, **style):
    """Bars 0.75 wide as ONE PolyCollection (much cheaper to draw than a Rectangle per bar)."""
    _polys(ax, [((xi - 0.375, b), (xi - 0.375, b + h), (xi + 0.375, b + h), (xi + 0.375, b))
                for xi, h, b in zip(x, heights, bottoms)], label, **style)


def _config_panels(ax_t, ax_m, configs, memory: float | None, best) -> list:
    """Stacked step time (``ax_t``) and memory per device (``ax_m``, below, same x) of every
    configuration; returns the legend handles."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    x = np.arange(len(configs))
    bottom = np.zeros(len(configs))
    tensor = max(c.tensor for c in configs) > 1
    handles = []
    for attr, name, style in _PARTS:
        if attr == "tensor_allreduce" and not tensor:
            continue
        vals = np.array([getattr(c, attr) for c in configs]) * 1e3
        style = {"facecolor": style["color"], "linewidth": 0} if "color" in style else style
        _columns(ax_t, x, vals, bottom.copy(), tr(name), **style)
        handles.append(Patch(label=tr(name), **style))
        bottom += vals
    bad = [i for i, c in enumerate(configs) if not c.fits]
    top = float(bottom.max()) or 1.0
    marks = dict(marker="x", color=COLORS[1], ms=9, mew=2.5, ls="none")
    if bad:
        ax_t.plot(x[bad], bottom[bad] + 0.05 * top, label=tr("does not fit"), **marks)
        handles.append(Line2D([], [], label=tr("does not fit"), **marks))
    if best is not None:
        bi = next(i for i, c in enumerate(configs) if c.label == best.label)
        ax_t.plot([bi], [bottom[bi] + 0.07 * top], "*", color="black", ms=15)
        handles.append(Line2D([], [], marker="*", color="black", ms=15, ls="none", label=tr("best that fits")))
    ax_t.set(ylabel=tr("step time [ms]"), ylim=(0, 1.18 * top), xlim=(-0.6, len(configs) - 0.4))
    ax_t.tick_params(labelbottom=False)
    ax_t.grid(False, axis="x")
    gb = np.array([c.memory for c in configs]) / 1e9
    fits = np.array([c.fits for c in configs])
    for mask, style in ((fits, _MEMORY), (~fits, _MEMORY_OVER)):  # a colour of their own, in the key
        _columns(ax_m, x[mask], gb[mask], np.zeros(mask.sum()), tr(style["label"]), **style["bars"])
        if mask.any():
            handles.append(Patch(label=tr(style["label"]), **style["bars"]))
    ax_m.set_ylim(0, 1.1 * max(float(gb.max()), (memory or 0) / 1e9 if memory and np.isfinite(memory) else 0))
    if memory is not None and np.isfinite(memory):
        line = ax_m.axhline(memory / 1e9, color="black", ls="--", lw=1.2,
                            label=tr("device memory, {memory}", memory=f"{memory / 1e9:.3g} GB"))
        handles.append(line)
    ax_m.set_xticks(x, [c.label for c in configs], rotation=90 if len(configs) > 8 else 0)
    grid = r"$N_d \times N_p \times N_t$" if tensor else r"$N_d \times N_p$"
    ax_m.set(xlabel=tr("{grid}  (replicas × stages × tensor degree)", grid=grid) if tensor
             else tr("{grid}  (replicas × stages)", grid=grid), ylabel=tr("memory per\ndevice [GB]"))
    ax_m.grid(False, axis="x")
    _tensor_groups(ax_t, (ax_t, ax_m), configs)
    return handles


def _key(fig, handles, ncols: int = 4) -> None:
    """One legend below the panels (off the data)."""
    fig.legend(handles=handles, loc="outside lower center", ncols=ncols, frameon=False)


def _config_grid(size: tuple[float, float], extra_column: bool):
    """Figure with the step-time panel above the memory panel (shared x), and a full-height
    panel beside them when ``extra_column``."""
    if not extra_column:
        fig, (ax_t, ax_m) = new_figure(2, 1, size=size, sharex=True, gridspec_kw=dict(height_ratios=(2.3, 1)))
        return fig, ax_t, ax_m, None
    fig, axes = new_figure(2, 2, size=size, gridspec_kw=dict(height_ratios=(2.3, 1), width_ratios=(1.75, 1)))
    ax_t, ax_m, ax_b = axes[0, 0], axes[1, 0], axes[0, 1]
    ax_m.sharex(ax_t)
    ax_b.set_subplotspec(ax_b.get_subplotspec().get_gridspec()[:, 1])
    axes[1, 1].remove()
    return fig, ax_t, ax_m, ax_b


@styled
def hybrid_configs_figure(configs: Sequence, *, memory: float | None = None):
    """Step time (stacked: compute, bubble, hand-over, all-reduces) and, below it, the
    memory per device of every ``N_d x N_p (x N_t)`` configuration of one device count.

    Parameters
    ----------
    configs : sequence of course_lib.planner.HybridConfig
        E.g. from :func:`course_lib.planner.enumerate_configs`.
    memory : float, optional
        Device memory in bytes (drawn as a dashed line).
    """
    configs = check_sequence(configs, "configs", planner.HybridConfig, "a HybridConfig")
    if not configs:
        raise ValueError("configs must not be empty")
    if memory is not None:
        memory = check_positive(memory, "memory")
    fitting = [c for c in configs if c.fits]
    best = min(fitting, key=_rank) if fitting else None
    fig, ax_t, ax_m, _ = _config_grid((8.0, 5.4), extra_column=False)
    handles = _config_panels(ax_t, ax_m, configs, memory, best)
    tensor = max(c.tensor for c in configs) > 1
    ax_t.set_title(tr("N = {devices} devices: estimated step per configuration", devices=configs[0].devices),
                   pad=18 if tensor else 6)
    _key(fig, handles)
    return fig


def _best_panel(ax, counts: np.ndarray, bests: Sequence, *, devices: int | None = None) -> None:
    """Best step time against N on log axes, each point labelled with its split (rotated, above it)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    ok = np.array([b is not None for b in bests])
    t = np.array([b.step_time * 1e3 if b is not None else np.nan for b in bests])
    ax.plot(counts[ok], t[ok], "o-", color=COLORS[0], lw=1.5, label=tr("best that fits"))
    for ni, ti, b in zip(counts, t, bests):
        if b is not None:
            ax.annotate(b.label, (ni, ti), textcoords="offset points", xytext=(0, 8), rotation=90,
                        ha="center", va="bottom")
    lo, hi = (np.nanmin(t), np.nanmax(t)) if ok.any() else (1.0, 1.0)
    decades = max(np.log10(hi / lo), 0.5)
    if (~ok).any():
        ax.plot(counts[~ok], np.full((~ok).sum(), hi), "x", color=COLORS[1], ms=9, mew=2.5, ls="none",
                label=tr("does not fit"))
    if devices is not None:
        here = [ti for ni, ti in zip(counts, t) if ni == devices and np.isfinite(ti)]
        if here:
            ax.plot([devices], here, "*", color="black", ms=15, zorder=3)
    ax.set_yscale("log")
    ax.set_ylim(lo / 10 ** (0.1 * decades), hi * 10 ** (0.45 * decades))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    log2_axis(ax.xaxis, counts.max())
    ax.set_xlim(2 ** -0.4, counts.max() * 2**0.4)
    ax.set(xlabel=tr("devices N"), ylabel=tr("best step time [ms]"))


@styled
def hybrid_best_figure(device_counts: Sequence[int], best: Sequence):
    """Best configuration as the device count grows: step time and the chosen ``N_d``, ``N_p``
    (and ``N_t`` when some best grid splits its stages).

    Parameters
    ----------
    device_counts : sequence of int
    best : sequence of HybridConfig or None
        :func:`course_lib.planner.best_configs` for ``device_counts`` (None: nothing fits).
    """
    n = _counts(device_counts, "device_counts").astype(float)
    best = check_sequence(best, "best", (planner.HybridConfig, type(None)), "a HybridConfig or None")
    if n.ndim != 1 or len(best) != n.size or n.size == 0:
        raise ValueError("device_counts and best must be non-empty and of equal length")
    fig, (ax_t, ax_c) = new_figure(1, 2, size=(9.6, 4.4))
    _best_panel(ax_t, n, best)
    ok = np.array([b is not None for b in best])
    if ok.any():
        first = int(np.argmax(ok))
        ideal = best[first].step_time * 1e3 * n[first] / n
        ax_t.plot(n[first:], ideal[first:], ":", color="0.4", label=tr("ideal 1/N from the first that fits"))
        ax_t.set_ylim(min(ax_t.get_ylim()[0], ideal[-1] / 1.3), ax_t.get_ylim()[1])
    ax_t.set_title(tr("fastest configuration that fits"))
    d = np.array([b.data if b is not None else np.nan for b in best])
    p = np.array([b.pipeline if b is not None else np.nan for b in best])
    t = np.array([b.tensor if b is not None else np.nan for b in best])
    ax_c.plot(n, d, "D-", color=COLORS[3], label=tr("$N_d$ (data-parallel replicas)"))
    ax_c.plot(n, p, "s--", color=COLORS[1], label=tr("$N_p$ (pipeline stages)"))
    tensor = bool(np.nanmax(t, initial=1) > 1)
    if tensor:
        ax_c.plot(n, t, "^:", color=COLORS[2], label=tr("$N_t$ (tensor degree)"))
    log2_axis(ax_c.xaxis, n.max())
    log2_axis(ax_c.yaxis, n.max())
    grid = r"N_d \times N_p \times N_t" if tensor else r"N_d \times N_p"
    ax_c.set(xlabel=tr("devices N"), ylabel=tr("degree"), title=tr("chosen split {formula}", formula=f"${grid} = N$"))
    _key(fig, [h for ax in (ax_t, ax_c) for h in ax.get_lines() if not h.get_label().startswith('_')], ncols=2)
    return fig


@styled
def hybrid_explorer_figure(devices: int, *, model, batch_size: int, memory: float,
                           device_counts: Sequence[int] | None = None, **estimate_kw):
    """Live-figure view: the configurations at ``devices`` and, if ``device_counts`` is
    given, the best one as N grows beside them.

    ``devices`` is the slider; ``device_counts`` the N axis of the right panel (None: no
    right panel, the cheaper redraw, when the best grids for every N are printed beside it); ``memory`` and ``estimate_kw`` are passed to
    :func:`course_lib.planner.enumerate_configs` (``max_tensor`` > 1 adds the
    tensor-parallel axis: configurations ``N_d x N_p x N_t``, grouped by ``N_t``, and the best
    one may split its stages over ``N_t`` devices; ``virtual_stages`` > 1 interleaves every
    pipeline, ``zero_stage`` > 0 shards the model states over the ``N_d`` replicas: both are
    named in the title).

    The estimates are cached by :func:`course_lib.planner.estimate_config` (and the
    pipeline simulations inside them by micro-batch size), so moving the ``devices``
    slider recomputes nothing and a new global batch only the configurations whose
    micro-batches are new. The right panel asks for every device count: a new batch or
    ``v`` then costs about 55 pipeline simulations (0.2-0.5 s), the panel alone instead
    only the configurations of ``devices``.
    """
    configs = planner.enumerate_configs(model, batch_size, devices, memory=memory, **estimate_kw)
    fitting = [c for c in configs if c.fits]
    best_here = min(fitting, key=_rank) if fitting else None
    if device_counts is None:
        fig, ax_t, ax_m, ax_b = _config_grid((8.4, 5.8), extra_column=False)
    else:
        counts = check_sequence(device_counts, "device_counts")
        bests = planner.best_configs(model, batch_size, counts, memory=memory, **estimate_kw)
        fig, ax_t, ax_m, ax_b = _config_grid((9.6, 5.8), extra_column=True)
    handles = _config_panels(ax_t, ax_m, configs, memory, best_here)
    tensor = max(c.tensor for c in configs) > 1
    setting = [f"N = {devices}", f"B = {batch_size}"]
    setting += [f"v = {estimate_kw['virtual_stages']}"] if estimate_kw.get("virtual_stages", 1) > 1 else []
    setting += [tr("ZeRO stage {stage}", stage=estimate_kw["zero_stage"])] if estimate_kw.get("zero_stage", 0) else []
    ax_t.set_title(tr("{setting}: estimated step of every split", setting=", ".join(setting)), pad=18 if tensor else 6)
    if ax_b is not None:
        _best_panel(ax_b, np.asarray(counts, dtype=float), bests, devices=devices)
        ax_b.set_title(tr("best split as N grows"))
    _key(fig, handles)
    return fig
