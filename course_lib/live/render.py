"""The redraw engine of live figures: for speed, not for reading.

A live figure (:func:`course_lib.live.widgets.live_figure`) rebuilds and renders its figure in
the kernel whenever a slider moves. Read :mod:`course_lib.live.widgets` for what it does; this
module only makes a redraw fast. What a redraw shows is what the plain route shows,
``figure_to_png(plot(**values))``: at the initial values the redraw gives the initial PNG's
pixels exactly (the tests compare them). Each trick skips work, none changes a figure:

* :func:`redraw` builds the figure under the course style without the style audit (the
  first render and the fallback's states are audited; what the audit checks, the width and
  the type sizes, is set by the plot function, not by the slider values): a tenth of a redraw;
* a frozen layout: the layout engine (about a third of a redraw) runs for stored renders
  only; a redraw reuses the axes positions of a layout made for the same figure whose text
  needs at least as much room (:func:`_layout_signature`, :func:`_roomy_layout`) and is
  drawn once, without a layout engine (:func:`_remove_layout_engine`): a quarter; the
  titles keep that layout's heights too (matplotlib otherwise measures every tick label
  again to lift a title above them): a tenth;
* text shaped once: a text's glyphs and their offsets, for the same string, font and
  resolution, are kept by the canvas's renderer (:class:`_ShapedTextRenderer`), so only
  the glyphs are drawn again: a third of the time of every text (tick labels and the
  numbers in bars mostly repeat);
* glyphs rendered once: each glyph's bitmap is kept per font, size, rotation and 1/64-pixel
  phase of its position and drawn at the whole-pixel rest (``_draw_text_glyphs_and_boxes``
  of :class:`_ShapedTextRenderer`; a whole-pixel shift only moves FreeType's bitmap): text
  drawing 45-65 -> 10-15 ms, a fifth of a redraw (hybrid explorer: 346 -> 277 ms CPU,
  accuracy chart: 282 -> 201, pipeline schedule: 255 -> 190, medians of 16 redraws on a
  loaded 2-core machine);
* ticks cloned: a redraw's x and y axes make their ticks by copying a pristine tick made
  the usual way for the same kind of axis, tick keywords, spine positions and style, kept
  from one redraw to the next (:func:`_cloned_ticks`): 0.05 instead of 0.6-0.9 ms a tick,
  20-90 ticks a redraw (hybrid explorer: 279 -> 255 ms CPU, communication dominance and
  efficiency: 255 -> 237 and 169 -> 156, A/B medians of 20 redraws on a loaded 2-core
  machine); one pristine tick per style, so that the ticks a figure makes while it is built
  (under the course style) are clones too, and a new tick shares the first tick's marker
  instead of a deep copy (hybrid explorer: 240 -> 190 ms CPU a redraw, 16 redraws, process
  time);
* text laid out once: a text's layout (lines, sizes, offsets and box around its anchor) is
  kept per renderer, string, font, alignment, rotation and spacing and reused
  (:func:`_kept_text_layouts`): matplotlib lays out every text anew, 100-150 a redraw, tick
  labels mostly repeating: 10-15 % of a redraw (accuracy chart: 190 -> 161 ms CPU,
  communication dominance: 158 -> 134, hybrid explorer: 249 -> 224, A/B medians of 20
  redraws);
* one canvas for every state, so its renderer and matplotlib's text-size cache carry over:
  about a third (tick labels and titles mostly repeat);
* no garbage collection while a figure is built and sent, and the figure let go as soon as
  its PNG is out (:meth:`Renderer.quiet`): Python's collector otherwise pauses the kernel
  100-180 ms every sixth redraw or so;
* together, the glyphs, ticks and text layouts kept make a redraw 28-37 % cheaper in CPU
  (least of three runs of 16 redraws, loaded 2-core machine, before -> after: hybrid
  explorer 310 -> 218 ms, accuracy chart 214 -> 155, pipeline schedule 225 -> 162,
  communication dominance 196 -> 125 and efficiency 206 -> 130);
* :func:`quick_png`: a PNG written by hand, rows unfiltered, zlib level 1: half the
  encoding time of matplotlib's writer, the same pixels; the pixels copied once, straight
  into the rows, and the rows handed to zlib without a copy: 15 -> 6 ms of a redraw.

The figures timed: the hybrid explorer
(:func:`course_lib.plots.pipeline.hybrid_explorer_figure`), the accuracy chart
(:func:`course_lib.plots.trends.accuracy_compute_figure`), the pipeline schedule
(:func:`course_lib.plots.pipeline.schedule_figure`), communication dominance
(:func:`course_lib.plots.parallel.comm_dominance_figure`) and efficiency
(:func:`course_lib.plots.cost.comm_efficiency_figure`).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import check_int, check_positive, check_type
from ..plots import figure_to_png
from ..plots.style import DPI, rc_params

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["Renderer", "quick_png", "redraw"]


class _Layout(list):
    """The axes positions of one layout (a list, one per axes) and its titles' heights
    (``title_y``, in axes coordinates)."""

    title_y: list[float]


class Renderer:
    """Renders the states of one live figure: one canvas, and the layouts made so far.

    Parameters
    ----------
    dpi : float
        Resolution of every PNG.

    Attributes
    ----------
    layouts : dict
        Layout signature (:func:`_layout_signature`) -> axes positions, one per layout made.
    layout : list or None
        The axes positions of the latest render.

    Examples
    --------
    >>> from course_lib.plots.scaling import laws_figure
    >>> r = Renderer(100)
    >>> first = r.render(laws_figure, {"p": 0.9, "n": 16}, stored=True)   # laid out, audited
    >>> moved = r.render(laws_figure, {"p": 0.5, "n": 16})                # the same layout, drawn once
    >>> len(r.layouts), moved[:8] == first[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    (1, True)
    """

    def __init__(self, dpi: float = DPI):
        self.dpi = check_positive(dpi, "dpi")
        self.canvas = None
        self.layouts: dict[tuple, list] = {}
        self.layout: list | None = None
        self.ticks: dict = {}  # pristine ticks, for cloning (_cloned_ticks)
        self.text_layouts: dict = {}  # text layouts, for reuse (_kept_text_layouts)

    def render(self, plot: Callable[..., Figure], kwargs: dict[str, Any], *, stored: bool = False) -> bytes:
        """PNG of ``plot(**kwargs)``; ``stored`` renders are audited, laid out and compressed harder.

        A redraw reuses a layout kept in :attr:`layouts` while the text around the axes
        needs no more room than it had; a new layout is made, and kept, when the text needs
        more room (longer category labels, say), and for every stored state (the initial one
        and the fallback's, which therefore often lay out the widest labels in advance).
        """
        if stored:
            return self._render(plot(**kwargs), stored=True)
        with _cloned_ticks(self.ticks), _kept_text_layouts(self.text_layouts):
            return self._render(redraw(plot, **kwargs), stored=False)

    def _render(self, fig: Figure, *, stored: bool) -> bytes:
        """PNG of the built ``fig`` (see :meth:`render`)."""
        signature = _layout_signature(fig)
        layout = None if stored else _roomy_layout(self.layouts, signature)
        if layout is not None:
            self.layout = layout
            _remove_layout_engine(fig)
            for ax, position, title_y in zip(fig.axes, layout, layout.title_y):
                ax.set_position(position)
                _freeze_title(ax, title_y)
        if self.canvas is None:
            self.canvas = _canvas_class()(fig)
        else:
            self.canvas.figure = fig
            fig.set_canvas(self.canvas)
        if stored:
            png = figure_to_png(fig, self.dpi, compress_level=6)
        elif fig.get_layout_engine() is None:
            png = quick_png(fig, self.dpi)
        else:  # a new layout: savefig lays the figure out first
            png = figure_to_png(fig, self.dpi, compress_level=1)
        if layout is None:
            self.layout = self.layouts[signature] = _Layout(ax.get_position() for ax in fig.axes)
            self.layout.title_y = [ax.title.get_position()[1] for ax in fig.axes]
        return png

    def let_go(self) -> None:
        """Drop the canvas's reference to the figure last drawn (the canvas and its renderer
        are kept for the next redraw; the figure is garbage from here on)."""
        if self.canvas is not None:
            self.canvas.figure = None

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """No garbage collection inside; the figure let go on the way out.

        Python's collector pauses the kernel to scan every object it tracks (170,000 in a
        kernel that has trained and planned a few models): 100-180 ms, every sixth redraw or so, because each redraw's figure
        lives long enough to reach the oldest generation. So no collection runs while a
        figure is built and sent, the figure is let go as soon as its PNG is out, and the
        collection that follows finds it still young: a cheap one, after the reader already
        has the new figure. A collector that was off stays off.
        """
        collecting = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            self.let_go()
            if collecting:
                gc.enable()


def redraw(plot: Callable[..., Figure], **kwargs: Any) -> Figure:
    """Build ``plot(**kwargs)`` under the course style without :func:`~course_lib.plots.style.audit`.

    A function not decorated with :func:`~course_lib.plots.style.styled` is simply called.

    Examples
    --------
    >>> from course_lib.plots.scaling import laws_figure
    >>> a, b = redraw(laws_figure, p=0.9, n=16), laws_figure(p=0.9, n=16)
    >>> [ax.title.get_fontsize() for ax in a.axes] == [ax.title.get_fontsize() for ax in b.axes]
    True
    """
    if not callable(plot):
        raise TypeError(f"plot must be callable, got {type(plot).__name__}")
    if not getattr(plot, "__styled__", False):
        return plot(**kwargs)
    import matplotlib

    with matplotlib.rc_context(rc_params()):
        return plot.__wrapped__(**kwargs)


def quick_png(fig: Figure, dpi: float = DPI, compress_level: int = 1) -> bytes:
    """``fig`` drawn at ``dpi`` as ``savefig`` draws it, written as a PNG with unfiltered rows.

    For a figure without a layout engine (``savefig`` would lay one out first), on an Agg
    canvas. RGB when every pixel is opaque (the course's figures are), RGBA otherwise.
    ``compress_level`` is zlib's (0-9; 1 for redraws: about the size of matplotlib's file
    at level 1, in half the time).

    Examples
    --------
    >>> import io
    >>> from matplotlib.image import imread
    >>> from course_lib.plots.scaling import laws_figure
    >>> fig = laws_figure(0.9, 16)
    >>> stored = figure_to_png(fig)
    >>> _remove_layout_engine(fig)   # laid out by the first draw; now drawn as it stands
    >>> quick = quick_png(fig)
    >>> bool((imread(io.BytesIO(stored))[..., :3] == imread(io.BytesIO(quick))[..., :3]).all())
    True
    """
    import struct
    import zlib

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    check_type(fig, "fig", Figure, "a matplotlib Figure")
    dpi = check_positive(dpi, "dpi")
    compress_level = check_int(compress_level, "compress_level", 0, 9)
    if fig.get_layout_engine() is not None:
        raise ValueError("fig must have no layout engine (figure_to_png lays a figure out)")
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    canvas, shown_dpi = fig.canvas, fig.dpi
    fig.set_dpi(dpi)  # as savefig does, for the time of the drawing
    try:
        canvas.draw()
        rgba = np.asarray(canvas.buffer_rgba())
        height, width, _ = rgba.shape
        channels = 3 if (rgba[..., 3] == 255).all() else 4
        rows = np.empty((height, 1 + width * channels), np.uint8)
        rows[:, 0] = 0  # filter type 0 (none) for every row
        # the pixels copied once, straight into the rows (a view: reshape raises rather than copy)
        np.reshape(rows[:, 1:], (height, width, channels), copy=False)[...] = rgba[..., :channels]
    finally:
        fig.set_dpi(shown_dpi)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2 if channels == 3 else 6, 0, 0, 0)
    density = round(dpi / 0.0254)  # pixels per metre, as matplotlib writes it
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"pHYs", struct.pack(">IIB", density, density, 1))
            + chunk(b"IDAT", zlib.compress(rows, compress_level)) + chunk(b"IEND", b""))


# ------------------------------------------------------------------ frozen layouts
def _freeze_title(ax, title_y: float) -> None:
    """Put ``ax``'s titles at height ``title_y`` (axes coordinates) and keep them there:
    matplotlib then skips lifting them above the tick labels, which measures every label."""
    ax._autotitlepos = False  # what set_title(y=...) sets: the position was chosen
    for title in (ax.title, ax._left_title, ax._right_title):
        title.set_y(title_y)


def _layout_signature(fig) -> tuple:
    """What a frozen layout depends on: the figure's size and the room the text around
    each axes needs.

    Returned as ``(exact, room)``. ``room`` holds the widest y tick label and the longest
    turned x tick label of each axes; ``exact`` the rest: the size, the first and last
    level x tick labels (they stick out past the axes' ends), how many lines each title,
    axis label and tick label has, and how many legend entries there are (a figure
    legend: how many rows, ``ncols`` entries a row). The number of
    ticks does not count (a Gantt chart with 4 or 8 stages has the same margins), nor a
    title's length (a title is centred: a number in it changes nothing around the axes),
    nor hidden tick labels. Tick labels are formatted as they will be drawn (with the
    axis' offset, as in '1e6'), without drawing.
    """

    def lines(texts) -> int:
        return max((t.count("\n") for t in texts), default=0)

    signature = [tuple(round(float(v), 3) for v in fig.get_size_inches())]  # positions are fractions
    room = []  # widths a roomier layout also serves (see _roomy_layout)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.major.formatter
            lo, hi = sorted(axis.get_view_interval())
            locs = [v for v in axis.get_majorticklocs() if lo <= v <= hi]
            first = axis.get_major_ticks(1)[0].label1
            labels = formatter.format_ticks(locs) if first.get_visible() else []  # hidden: no room
            turned = axis.axis_name == "y" or first.get_rotation() != 0
            # level labels stick out past the axes' ends by half their width
            ends = (len(labels[0]), len(labels[-1])) if labels and not turned else ()
            if turned:
                room.append(max((len(t) for t in labels), default=0))
            signature += [ends, lines(labels), len(formatter.get_offset()), lines([axis.label.get_text()])]
        legend = ax.get_legend()
        signature += [lines([ax.get_title()]), 0 if legend is None else len(legend.get_texts())]
    # a figure legend below or beside the axes takes room by its rows, not its entries
    signature += [-(-len(legend.get_texts()) // max(legend._ncols, 1)) for legend in fig.legends]
    return tuple(signature), tuple(room)


def _roomy_layout(layouts: dict, signature: tuple) -> list | None:
    """A layout kept in ``layouts`` (signature -> axes positions) that serves ``signature``.

    Either the one made for it, or one made for the same figure with at least as much
    room for every y tick label and turned x tick label (the least such room): a little
    more margin than needed, and an axes that stays put while a slider moves.
    """
    exact, room = signature
    fits = [(sum(r), positions) for (e, r), positions in layouts.items()
            if e == exact and all(a >= b for a, b in zip(r, room))]
    return min(fits, key=lambda item: item[0])[1] if fits else None


def _remove_layout_engine(fig) -> None:
    """Take the layout engine off ``fig`` entirely (not ``"none"``, a placeholder).

    ``savefig`` draws a figure twice when it has any layout engine, the placeholder
    included: once to lay it out, once to render. Without one it draws once, which
    makes a redraw about a quarter faster and gives the same PNG.
    """
    import matplotlib

    with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


# ------------------------------------------------------------------ ticks cloned
@contextmanager
def _cloned_ticks(pristine: dict) -> Iterator[None]:
    """While inside, an x or y axis of plain axes makes its ticks by cloning a pristine tick
    (:func:`_tick_plan`, :func:`_clone`) made the usual way for the same kind of axis, tick
    keywords, spine positions and style, and kept in ``pristine`` from one redraw to the next.

    ``Axis._get_tick`` builds a new tick from these (two lines with markers, a grid line, two
    texts: 0.6-0.9 ms); a clone copies the pristine tick's state and points it at its own
    axes (its figure, and the transforms a new tick gets from its axes). Matplotlib then
    sets up every tick as before (position, the first tick's properties). The class
    attribute is put back on the way out.
    """
    import matplotlib
    from matplotlib import axis as maxis
    from matplotlib import lines as mlines
    from matplotlib.axes import Axes
    from matplotlib.markers import MarkerStyle

    made = maxis.Axis.__dict__["_get_tick"]

    def get_tick(self, major):
        if type(self) not in (maxis.XAxis, maxis.YAxis) or type(self.axes) is not Axes:
            return made(self, major)
        try:
            key = (type(self), major, _tick_inputs(self, major))
            kept = pristine.setdefault(key, [])
        except TypeError:  # keywords that do not hash (arrays)
            return made(self, major)
        # one pristine tick per style in force: the course style while a figure is built,
        # matplotlib's own while it is drawn (a plain dict comparison: RcParams' own is slow)
        plan = next((plan for style, plan in kept if dict.__eq__(style, matplotlib.rcParams)), None)
        if plan is None:
            if len(pristine) > 512 or len(kept) > 4:  # bounds, for figures that set ever new keywords
                pristine.clear()
                kept = pristine[key] = []
            plan = _tick_plan(made(self, major))
            kept.append((dict(dict.items(matplotlib.rcParams)), plan))
        return _clone(plan, self)

    copy_props = maxis.Axis.__dict__["_copy_tick_props"]

    def copy_tick_props(self, src, dest):
        # Line2D.update_from deep-copies the source line's marker (a third of a new tick's
        # cost); a tick's marker is replaced, never changed, so the copy may share it
        mlines.MarkerStyle = _shared_marker
        try:
            copy_props(self, src, dest)
        finally:
            mlines.MarkerStyle = MarkerStyle

    maxis.Axis._get_tick, maxis.Axis._copy_tick_props = get_tick, copy_tick_props
    try:
        yield
    finally:
        maxis.Axis._get_tick, maxis.Axis._copy_tick_props = made, copy_props


def _shared_marker(marker=None, *args, **kwargs):
    """``MarkerStyle(marker)`` that returns ``marker`` itself when it already is one (and
    nothing else is asked): what :func:`_cloned_ticks` lets ``Line2D.update_from`` use."""
    from matplotlib.markers import MarkerStyle

    if isinstance(marker, MarkerStyle) and not args and not kwargs:
        return marker
    return MarkerStyle(marker, *args, **kwargs)


def _tick_inputs(axis, major: bool) -> tuple:
    """What a new tick of ``axis`` is made from, besides its axes and the style: the axis'
    tick keywords and its axes' spine positions (they place the ticks and labels)."""
    keywords = axis._major_tick_kw if major else axis._minor_tick_kw
    return (tuple(sorted(keywords.items())),
            tuple((name, spine._position) for name, spine in axis.axes.spines.items()))


_TICK_PARTS = ("tick1line", "tick2line", "gridline", "label1", "label2")


def _tick_plan(tick) -> tuple:
    """How to clone the fresh ``tick``: per artist (the tick, its lines and texts) its class,
    its state, and the entries a clone gets its own copy of (lists, arrays, font
    properties); callbacks are new; markers and paths (replaced, never changed, when a tick
    moves) shared; the axes, figure and transforms set by :func:`_clone`."""
    from matplotlib.font_manager import FontProperties

    def plan(artist):
        state = dict(artist.__dict__)
        for key in ("_axes", "_parent_figure", "_transform") + _TICK_PARTS:  # set per clone: no
            if key in state:                                                 # old figure kept
                state[key] = None
        copies = tuple(key for key, value in state.items()
                       if isinstance(value, (list, np.ndarray, FontProperties)))
        return type(artist), state, copies

    return plan(tick), tuple(plan(getattr(tick, name)) for name in _TICK_PARTS)


def _clone(tick_plan: tuple, axis):
    """A new tick of ``axis`` from :func:`_tick_plan`'s plan: what ``Tick.__init__`` takes
    from the axes (the axes, its figure, the transforms of the lines and labels) is set as
    ``XTick``/``YTick`` set it."""
    from matplotlib.cbook import CallbackRegistry

    ax = axis.axes
    figure = ax.get_figure(root=False)

    def make(cls, state, copies):
        artist = object.__new__(cls)
        artist.__dict__ = own = state.copy()
        for key in copies:
            own[key] = own[key].copy()
        own["_callbacks"] = CallbackRegistry(signals=["pchanged"])
        own["_parent_figure"] = figure
        return artist

    whole, parts = tick_plan
    tick = make(*whole)
    tick._axes = ax
    for name, part in zip(_TICK_PARTS, parts):
        setattr(tick, name, make(*part))
    lines = ax.get_xaxis_transform if tick.__name__ == "xtick" else ax.get_yaxis_transform
    tick.tick1line._transform = lines("tick1")
    tick.tick2line._transform = lines("tick2")
    tick.gridline._transform = lines("grid")
    tick.label1._transform = tick._get_text1_transform()[0]
    tick.label2._transform = tick._get_text2_transform()[0]
    return tick


# ------------------------------------------------------------------ text laid out once
@contextmanager
def _kept_text_layouts(kept: dict) -> Iterator[None]:
    """While inside, a text's layout (``Text._get_layout``: its lines, their sizes and
    offsets, its box, all relative to its anchor) is taken from ``kept`` when a text with
    the same string, font, alignment, rotation, line spacing and resolution was laid out
    by the same renderer before (text that wraps or uses TeX is laid out as usual). The
    layout is kept as values and handed out as new objects (a new box, a new list)."""
    from matplotlib import text as mtext
    from matplotlib.transforms import Bbox

    made = mtext.Text.__dict__["_get_layout"]

    def get_layout(self, renderer):
        if self._wrap or self._usetex:
            return made(self, renderer)
        try:
            key = (renderer, self._text, tuple(self._fontproperties.__dict__.values()), self._linespacing,
                   self._multialignment, self.get_rotation(), self._horizontalalignment,
                   self._verticalalignment, self._rotation_mode, self._parse_math,
                   self.get_figure(root=True).dpi)
            layout = kept.get(key)
        except TypeError:  # a property that does not hash
            return made(self, renderer)
        if layout is None:
            box, lines, corner = made(self, renderer)
            if len(kept) > 8192:  # a bound, for figures that write ever new text
                kept.clear()
            kept[key] = layout = (box.bounds, tuple(lines), corner)
        bounds, lines, corner = layout
        return Bbox.from_bounds(*bounds), list(lines), corner

    mtext.Text._get_layout = get_layout
    try:
        yield
    finally:
        mtext.Text._get_layout = made


# ------------------------------------------------------------------ text shaped once
@functools.cache
def _canvas_class():
    """An Agg canvas whose renderer shapes each text once (:class:`_ShapedTextRenderer`);
    the classes are made on first use, so that importing this module imports no matplotlib."""
    import math

    from matplotlib.backends import backend_agg
    from matplotlib.ft2font import RenderMode

    class _ShapedTextRenderer(backend_agg.RendererAgg):
        """Agg, with the shaping of plain text kept: ``font._layout`` (the glyphs and their
        offsets, about a third of a text's drawing time) depends only on the string, the
        font, its size, the resolution and the text's features and language; the glyphs
        are drawn exactly as Agg draws them (``_draw_text_glyphs_and_boxes``)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._shaped: dict[tuple, tuple] = {}
            self._bitmaps: dict[tuple, tuple] = {}
            self._matrices: dict[tuple, Any] = {}

        def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
            if ismath:
                return self.draw_mathtext(gc, x, y, s, prop, angle)
            features = mtext.get_fontfeatures() if mtext is not None else None
            language = mtext.get_language() if mtext is not None else None
            flags = backend_agg.get_hinting_flag()
            font_key = (tuple(prop.get_family()), prop.get_style(), prop.get_variant(), prop.get_weight(),
                        prop.get_stretch(), prop.get_size_in_points(), prop.get_file())
            key = (s, font_key, self.dpi, flags, None if features is None else tuple(features), language)
            items = self._shaped.get(key)
            if items is None:
                font = self._prepare_font(prop)
                items = tuple(font._layout(s, flags=flags, features=features, language=language))
                if len(self._shaped) > 4096:  # a bound, for a figure that writes ever new text
                    self._shaped.clear()
                self._shaped[key] = items
            size = prop.get_size_in_points()
            self._draw_text_glyphs_and_boxes(
                gc, x, y, angle, ((i.ft_object, size, i.glyph_index, 0, 1, i.x, i.y) for i in items), [])

        def _draw_text_glyphs_and_boxes(self, gc, x, y, angle, glyphs, boxes):
            """Agg's glyph drawing with each glyph's bitmap rendered once per sub-pixel phase.

            Agg hands FreeType each glyph's position in 1/64 pixel and draws the bitmap it
            gets at the bitmap's whole-pixel corner. A shift by whole pixels only moves the
            bitmap, so the bitmap is kept per font, size, glyph, rotation, hinting and the
            position's 1/64 fraction, and drawn at the whole-pixel part: FreeType's work
            (setting the size and transform, rendering) is done once per such key.
            """
            matrix = self._matrices.get((angle, None))
            if matrix is None:
                cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
                self._matrices[angle, None] = matrix = (cos, sin)
            cos, sin = matrix
            flags = backend_agg.get_hinting_flag()
            antialiased = gc.get_antialiased()
            height, dpi, cache = self.height, self.dpi, self._bitmaps
            draw = self._renderer.draw_text_image
            for font, size, glyph_index, slant, extend, dx, dy in glyphs:  # dy is upwards
                px = round(0x40 * (x + dx * cos - dy * sin))
                py = round(0x40 * (height - y + dx * sin + dy * cos))  # FreeType's y is upwards
                key = (font, size, glyph_index, angle, slant, extend, px & 63, py & 63, flags, antialiased, dpi)
                bitmap = cache.get(key)
                if bitmap is None:
                    transform = self._matrices.get((angle, slant, extend))
                    if transform is None:
                        transform = (0x10000 * np.array([[cos, -sin], [sin, cos]])
                                     @ [[extend, extend * slant], [0, 1]]).round().astype(int)
                        self._matrices[angle, slant, extend] = transform
                    font.set_size(size, dpi)
                    font._set_transform(transform, [px & 63, py & 63])  # the fraction only
                    rendered = font._render_glyph(
                        glyph_index, flags, RenderMode.NORMAL if antialiased else RenderMode.MONO)
                    buffer = rendered.buffer
                    if not antialiased:
                        buffer *= 0xff
                    if len(cache) > 65536:  # a bound, for a figure that writes ever new text
                        cache.clear()
                    cache[key] = bitmap = (buffer, rendered.left, rendered.top - buffer.shape[0])
                buffer, left, bottom = bitmap
                # draw_text_image's y is downwards & the bitmap's bottom side
                draw(buffer, left + (px >> 6), int(height) - bottom - (py >> 6), 0, gc)
            if boxes:  # mathtext's rules, as Agg draws them
                super()._draw_text_glyphs_and_boxes(gc, x, y, angle, (), boxes)

    class _ShapedTextCanvas(backend_agg.FigureCanvasAgg):
        """``FigureCanvasAgg`` drawing with :class:`_ShapedTextRenderer` (kept between
        figures of the same size and resolution, as Agg keeps its renderer)."""

        def get_renderer(self):
            w, h = self.get_width_height(physical=True)
            key = w, h, self.figure.dpi
            if self._lastKey != key:
                self.renderer = _ShapedTextRenderer(w, h, self.figure.dpi)
                self._lastKey = key
            return self.renderer

    return _ShapedTextCanvas
