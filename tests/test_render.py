"""course_lib.live.render: the redraw engine of live figures keeps every figure as it is.

A redraw reuses a layout only while the text needs no more room, draws on one canvas, skips
the style audit, runs without garbage collection and writes its PNG by hand: the tests
compare the pixels with the plain route and check each shortcut is taken when it should be.
"""

import pytest
from test_widgets import PNG_MAGIC, _pixels, _sliders

from course_lib.live.widgets import Slider, live_figure
from course_lib.plots.pipeline import schedule_figure
from course_lib.plots.scaling import amdahl_figure, laws_figure


def test_redraws_reuse_the_first_layout():
    fig = live_figure(amdahl_figure, [Slider("p", "p", 0, 1, 0.01, 0.9), Slider("s", "s", 1, 64, 1, 8)], n=8)
    first = [tuple(ax.get_position().bounds) for ax in fig.plot(p=0.9, s=8, n=8).axes]
    assert len(fig.renderer.layout) == len(first)
    fig.controls["p"].value = 0.5  # redraw with frozen positions: still a valid PNG
    assert bytes(fig.image.value[:8]) == PNG_MAGIC and bytes(fig.image.value) != fig.initial_png


def test_redraw_with_the_frozen_layout_reproduces_the_laid_out_figure():
    # Back at the initial values, the redraw (fixed axes positions, no layout engine,
    # one draw) must give exactly the pixels that the constrained-layout render gave.


    figures = []

    def recording(**kw):
        figures.append(amdahl_figure(**kw))
        return figures[-1]

    fig = live_figure(recording, [Slider("p", "p", 0, 1, 0.01, 0.9), Slider("s", "s", 1, 64, 1, 8)], n=8)
    fig.controls["p"].value = 0.5
    fig.controls["p"].value = 0.9
    assert (_pixels(bytes(fig.image.value)) == _pixels(fig.initial_png)).all()
    assert figures[0].get_layout_engine() is not None  # the first render is laid out
    assert all(f.get_layout_engine() is None for f in figures[1:])  # redraws: drawn once
    assert len({id(f.canvas) for f in figures}) == 1  # one canvas (and renderer) for all states


def test_redraws_compress_faster_but_show_the_same_pixels():
    """Redraws are written unfiltered at zlib level 1 (RGB: the figures are opaque); the
    stored PNG by matplotlib's writer at level 6. Same pixels, and the quick file is no
    more than 1.5x the stored one."""
    fig = live_figure(laws_figure, _sliders())
    fig.controls["p"].value = 0.5
    fig.controls["p"].value = 0.9  # back to the initial state, drawn by the live path
    redrawn, stored = bytes(fig.image.value), fig.initial_png
    assert redrawn != stored
    assert (_pixels(redrawn) == _pixels(stored)).all()
    assert len(redrawn) < 1.5 * len(stored)
    assert redrawn[12:16] == b"IHDR" and redrawn[25] == 2  # colour type 2: RGB


def test_a_figure_whose_ticks_change_is_laid_out_again():
    from course_lib.plots import new_figure

    def bars(n):
        fig, ax = new_figure()
        ax.bar(range(n), range(1, n + 1))
        ax.set_xticks(range(n), [f"{k}x{n - k}x2" for k in range(n)], rotation=90)
        return fig

    fig = live_figure(bars, [Slider("n", "n", 1, 20, 1, 4, kind="int")])
    first = fig.renderer.layout
    fig.controls["n"].value = 16  # more, longer category labels: a new layout
    assert fig.renderer.layout is not first and fig.renderer.layout[0].height < first[0].height
    relaid = fig.renderer.layout
    fig.controls["n"].value = 4
    fig.controls["n"].value = 16  # back to 16 ticks after 4: laid out again, same as before
    assert [p.bounds for p in fig.renderer.layout] == [p.bounds for p in relaid]


def test_the_layout_follows_the_room_text_needs_not_the_tick_count():
    """A redraw is laid out again only when the text around an axes needs other room.

    More ticks of the same kind (a Gantt chart with 5 stages after 4) or a longer
    centred title keep the layout; a wider y tick label or longer turned x tick labels
    make a new one, which is kept and reused when that room is needed again.
    """
    from course_lib.live.render import _layout_signature
    from course_lib.plots import new_figure

    def bars(n, title="t", turned=False, big=False):
        fig, ax = new_figure()
        ax.bar(range(n), [1e6 if big else 1.0] * n)
        ax.set_xticks(range(n), [f"c{k}" for k in range(n)], rotation=90 if turned else 0)
        ax.set_title(title)
        return fig

    same = _layout_signature(bars(4))
    assert _layout_signature(bars(5)) == same  # one tick more, same room
    assert _layout_signature(bars(4, title="a much longer title 12.3 %")) == same
    assert _layout_signature(bars(4, title="two\nlines")) != same
    assert _layout_signature(bars(4, big=True)) != same  # wider y tick labels, an offset
    assert _layout_signature(bars(12, turned=True)) != _layout_signature(bars(4, turned=True))
    assert _layout_signature(bars(12)) != same  # level labels: the last one (c11) sticks out more

    fig = live_figure(bars, [Slider("n", "n", 1, 20, 1, 4, kind="int")], turned=True)
    first = fig.renderer.layout
    fig.controls["n"].value = 5  # c0..c4: same room, same layout
    assert fig.renderer.layout is first and set(fig.renderer.layouts) == {_layout_signature(bars(4, turned=True))}
    fig.controls["n"].value = 12  # c10, c11: longer turned labels, a new layout
    assert fig.renderer.layout is not first and len(fig.renderer.layouts) == 2
    fig.controls["n"].value = 4
    assert fig.renderer.layout is first  # reused from the cache, not laid out again


def test_redraws_skip_the_audit_but_keep_the_style():
    """A redraw is built under the course style (same pixels as a styled build) without
    the audit; stored renders are audited."""
    import warnings

    from course_lib.live.render import redraw
    from course_lib.plots import figure_to_png, new_figure
    from course_lib.plots.style import StyleWarning, styled

    assert figure_to_png(redraw(laws_figure, p=0.5, n=8)) == figure_to_png(laws_figure(p=0.5, n=8))

    @styled
    def narrow(p):  # breaks a style rule (3 in wide): the audit warns
        fig, ax = new_figure(size=(3.0, 2.0))
        ax.set_title(f"p = {p}")
        return fig

    with pytest.warns(StyleWarning, match="narrower than"):
        fig = live_figure(narrow, [Slider("p", "p", 0, 1, 0.1, 0.5)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig.controls["p"].value = 0.6  # a redraw: no audit, no warning
    assert fig.message.value == "" and bytes(fig.image.value) != fig.initial_png


@pytest.mark.slow  # more than 3 s on two free cores (make test runs it, make test-fast does not)
def test_a_figure_that_changes_size_is_laid_out_for_its_size():
    """Axes positions are fractions of the figure: a taller figure gets its own layout
    (a layout frozen for another height put 06's Gantt title off the top at 1 stage)."""
    import functools

    from course_lib.live.render import _layout_signature

    @functools.cache  # each chart built once (sig(4) and sig(12) are compared twice)
    def sig(stages):
        return _layout_signature(schedule_figure(stages=stages, micro_batches=8))

    assert sig(4) == sig(5) == sig(10)  # one chart height up to 10 stages: one layout
    assert sig(12) != sig(4)  # a taller chart
    assert sig(12) != sig(13)  # same labels ("stage 11", "stage 12"), a taller figure
    fig = live_figure(schedule_figure, [Slider("stages", "N_p", 1, 16, 1, 4, kind="int")], micro_batches=8)
    fig.controls["stages"].value = 12
    assert len(fig.renderer.layouts) == 2
    fig.controls["stages"].value = 1
    assert len(fig.renderer.layouts) == 2  # back at the first height: its layout is reused


def test_a_redraw_lets_its_figure_go_while_it_is_young():
    """No collection runs during a redraw, and the figure is dropped once its PNG is out:
    a young-generation collection frees it (none is left for a full, slow collection).
    The collector is switched back on afterwards, and left off if it was off."""
    import gc
    import weakref

    drawn = []

    def recording(**kw):
        fig = laws_figure(**kw)
        drawn.append(weakref.ref(fig))
        return fig

    lf = live_figure(recording, _sliders())
    for p in (0.5, 0.6, 0.7):
        lf.controls["p"].value = p
        assert gc.isenabled()
        gc.collect(0)  # the youngest generation only
        assert drawn[-1]() is None  # the figure just drawn is gone already
    gc.disable()
    try:
        lf.controls["p"].value = 0.8
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_shorter_labels_reuse_a_roomier_layout():
    """Labels that need less room than a layout already made (06's explorer: its stored
    state at N = 256 has the longest split names) reuse it instead of a new layout."""
    from course_lib.live.render import _layout_signature, _roomy_layout
    from course_lib.plots import new_figure

    def bars(n):
        fig, ax = new_figure()
        ax.bar(range(n), [1.0] * n)
        ax.set_xticks(range(n), [f"split {k}" for k in range(n)], rotation=90)
        return fig

    fig = live_figure(bars, [Slider("n", "n", 1, 20, 1, 12, kind="int")])
    first = fig.renderer.layout
    fig.controls["n"].value = 4  # "split 3" is shorter than "split 11": the roomier layout serves
    assert fig.renderer.layout is first and len(fig.renderer.layouts) == 1
    fig.controls["n"].value = 16  # no longer than "split 11": still the same
    assert fig.renderer.layout is first
    # never a layout with less room, never one made for another figure size
    assert _roomy_layout(fig.renderer.layouts, _layout_signature(bars(4))) is first
    (exact, room), = fig.renderer.layouts
    assert _roomy_layout(fig.renderer.layouts, (exact, tuple(r + 1 for r in room))) is None
    assert _roomy_layout(fig.renderer.layouts, (("other",) + exact[1:], room)) is None


def test_the_engine_lives_in_one_module_headed_for_speed():
    """The redraw machinery is in live/render.py only: live/widgets.py is sliders plus
    live_figure, plots/__init__.py and style.py hold what is about plotting and style."""
    import ast
    import inspect

    import course_lib.live.glossary
    import course_lib.live.render
    import course_lib.live.widgets
    import course_lib.plots
    import course_lib.plots.style

    assert "for speed, not for reading" in course_lib.live.render.__doc__
    for module in (course_lib.live.widgets, course_lib.live.glossary, course_lib.plots, course_lib.plots.style):
        source = inspect.getsource(module)
        tree = ast.parse(source)
        names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert not names & {"_layout_signature", "_roomy_layout", "_remove_layout_engine", "_quick_png",
                            "quick_png", "redraw"}, module.__name__
        assert "gc.disable" not in source and "zlib." not in source, module.__name__
    imported = [(node.module, a.name) for node in ast.walk(ast.parse(inspect.getsource(course_lib.live.render)))
                if isinstance(node, ast.ImportFrom) for a in node.names]
    assert [name for module, name in imported if name.startswith("_") and module != "_validate"] == []



def _agg_and_shaped_pixels(fig, dpi=100, shaped=True):
    """``fig`` drawn by matplotlib's Agg canvas, then twice on one redraw canvas (cold, warm);
    returns the three pixel arrays and how many glyph bitmaps the canvas kept after each.
    ``shaped=False``: the Agg drawing only (the reference pixels), ``([agg], [])``."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from course_lib.live.render import _canvas_class, _remove_layout_engine

    _remove_layout_engine(fig)
    fig.set_dpi(dpi)
    agg = FigureCanvasAgg(fig)
    agg.draw()
    pixels, kept = [np.asarray(agg.buffer_rgba()).copy()], []
    if not shaped:
        return pixels, kept
    shaped = _canvas_class()(fig)
    for _ in range(2):
        shaped.draw()
        pixels.append(np.asarray(shaped.buffer_rgba()).copy())
        kept.append(len(shaped.renderer._bitmaps))
    return pixels, kept


def test_glyph_bitmaps_kept_per_sub_pixel_phase_give_agg_pixels():
    """Each glyph's bitmap is rendered once per font, size, rotation and 1/64-pixel phase and
    drawn at its whole-pixel place: the pixels are Agg's, for plain, turned, unsmoothed and
    math text at scattered positions, and the second drawing renders no glyph again."""
    import numpy as np

    from course_lib.plots import new_figure

    fig, ax = new_figure()
    rng = np.random.default_rng(0)
    for k in range(40):
        ax.text(rng.random(), rng.random(), ["Ag 1.25", r"$N_d \times \sqrt{x}$", "µs γ", "stage 12"][k % 4],
                rotation=[0, 90, 33.3, -45][k % 4], fontsize=[6, 8.5, 11, 14][k // 10], antialiased=k % 7 != 0)
    ax.set_title(r"$\frac{a}{b}$ title")
    (agg, cold, warm), (kept_cold, kept_warm) = _agg_and_shaped_pixels(fig)
    assert (agg == cold).all() and (agg == warm).all()
    assert kept_cold == kept_warm > 100


def test_quick_png_copies_every_pixel_once_opaque_or_not():
    """The pixels go straight into the PNG's rows (RGB when opaque, RGBA with a see-through
    background): decoded, they are the canvas's pixels exactly."""
    import io

    import numpy as np
    from matplotlib.image import imread

    from course_lib.live.render import _remove_layout_engine, quick_png
    from course_lib.plots import new_figure

    for alpha in (1.0, 0.0):
        fig, ax = new_figure()
        ax.plot([0, 1, 2], [2, 0, 1])
        fig.patch.set_alpha(alpha)
        _remove_layout_engine(fig)
        png = quick_png(fig, 50)
        drawn = np.asarray(fig.canvas.buffer_rgba())  # the canvas quick_png drew at 50 dpi
        decoded = np.round(imread(io.BytesIO(png)) * 255).astype(np.uint8)
        assert png[25] == (2 if alpha == 1.0 else 6)  # colour type: RGB, RGBA
        assert (decoded == drawn[..., : decoded.shape[-1]]).all()


def _tick_figure(labels=("a", "bb", "ccc")):
    """Two axes with ticks of many kinds: log y with minor ticks, tick keywords set after
    the first ticks exist, an outward spine, turned category labels, a twin axes."""
    from course_lib.plots import new_figure

    fig, (a, b) = new_figure(1, 2)
    a.plot([1, 2, 3], [1, 30, 900])
    a.set_yscale("log")
    a.tick_params(labelsize=7, direction="in", length=6)
    a.grid(True, which="minor", axis="y")
    b.bar(range(len(labels)), range(1, len(labels) + 1))
    b.spines.left.set_position(("outward", 5))
    b.set_xticks(range(len(labels)), labels, rotation=45)
    b.minorticks_on()
    b.twinx().set_ylim(0, 2)
    return fig


def test_ticks_cloned_from_an_earlier_figure_are_new_ticks():
    """A tick cloned from a pristine tick of an earlier figure has a new tick's state: the
    same attributes and values, its own lists, arrays, font properties and callbacks, its
    own axes, figure and transforms (equal to a new tick's); and a figure whose ticks are
    all clones has the plain route's pixels."""
    import numpy as np
    from matplotlib.transforms import Transform

    from course_lib.live.render import Renderer, _cloned_ticks

    renderer = Renderer(60)
    with _cloned_ticks(renderer.ticks):  # pristine ticks made here (built and drawn), for the next figure
        _agg_and_shaped_pixels(_tick_figure(), shaped=False)
    kinds = len(renderer.ticks)
    assert kinds >= 2  # x and y ticks, major and minor
    fig = _tick_figure()
    with _cloned_ticks(renderer.ticks):
        (cloned, *_), _ = _agg_and_shaped_pixels(_tick_figure(), 60)
        clone = fig.axes[1].yaxis._get_tick(major=False)
    (plain,), _ = _agg_and_shaped_pixels(_tick_figure(), 60, shaped=False)
    assert len(renderer.ticks) == kinds and (cloned == plain).all()

    new = fig.axes[1].yaxis._get_tick(major=False)  # made the usual way
    pairs = [(clone, new)] + [(getattr(clone, n), getattr(new, n))
                              for n in ("tick1line", "tick2line", "gridline", "label1", "label2")]
    points = np.array([[0.25, 0.5], [3.0, 7.0]])
    for c, n in pairs:
        assert type(c) is type(n) and c.__dict__.keys() == n.__dict__.keys()
        for key, value in n.__dict__.items():
            mine = c.__dict__[key]
            if isinstance(value, Transform):
                assert np.allclose(mine.transform(points), value.transform(points)), key
            elif isinstance(value, (list, np.ndarray)) or key in ("_fontproperties", "_callbacks"):
                assert mine is not value and (key == "_callbacks" or np.array_equal(mine, value) or mine == value), key
            elif key not in ("tick1line", "tick2line", "gridline", "label1", "label2", "_path", "_marker"):
                assert mine is value or mine == value, key
    assert clone.axes is fig.axes[1] and clone.label1.get_figure(root=False) is fig


def test_text_layouts_kept_per_string_font_and_alignment_give_the_same_pixels():
    """Texts laid out once per renderer (same string, font, alignment, rotation, spacing)
    and placed again from the kept layout: the pixels and the extents are the plain ones,
    for texts that differ only in size, alignment, rotation or rotation mode."""
    import itertools

    from course_lib.live.render import _kept_text_layouts
    from course_lib.plots import new_figure

    def build():
        fig, ax = new_figure()
        cases = itertools.product(["two\nlines", r"$N_p$ = 4"], [9, 12], ["left", "right"], ["top", "baseline"],
                                  [0, 30], ["default", "anchor"], [1.2, 2.0])
        for k, (text, size, ha, va, angle, mode, spacing) in enumerate(cases):
            ax.text(0.1 + 0.006 * k, 0.1 + 0.006 * k, text, fontsize=size, ha=ha, va=va, rotation=angle,
                    rotation_mode=mode, linespacing=spacing)
        ax.legend(handles=ax.plot([0, 1], label="a line"), title="key")
        ax.annotate("here", (0.5, 0.5), xytext=(10, -10), textcoords="offset points", arrowprops={})
        return fig

    (plain,), _ = _agg_and_shaped_pixels(build(), shaped=False)
    kept: dict = {}
    with _kept_text_layouts(kept):
        fig = build()
        (_, cold, warm), _ = _agg_and_shaped_pixels(fig)
        extents = [t.get_window_extent().bounds for t in fig.texts]
    assert len(kept) > 128 and (cold == plain).all() and (warm == plain).all()
    assert extents == [t.get_window_extent().bounds for t in fig.texts]  # as laid out without it


def test_ticks_made_while_a_styled_figure_is_built_are_cloned_too():
    """Ticks made while a figure is built (under the course style, e.g. by ``set_xticks`` with
    labels) are cloned from a pristine tick of that style, not made the slow way, once one
    redraw has run; the tick copies share their marker; the pixels are the plain route's;
    and the pristine ticks keep no figure alive."""
    import gc
    import weakref

    from matplotlib import axis as maxis

    from course_lib.live.render import Renderer

    renderer = Renderer(60)
    kwargs = dict(p=0.9, n=16)
    renderer.render(laws_figure, kwargs)  # pristine ticks of both styles
    made = maxis.Tick.__init__
    calls = []

    def counting(self, *args, **kw):
        calls.append(type(self).__name__)
        return made(self, *args, **kw)

    maxis.Tick.__init__ = counting
    try:
        cloned = renderer.render(laws_figure, kwargs)
    finally:
        maxis.Tick.__init__ = made
    assert calls == [], f"ticks made the slow way during a redraw: {calls}"
    assert cloned == renderer.render(laws_figure, kwargs)
    from matplotlib.figure import Figure
    from matplotlib.markers import MarkerStyle

    from course_lib.live.render import _cloned_ticks

    with _cloned_ticks(renderer.ticks):
        fig = Figure()
        axis = fig.add_subplot().xaxis
        first = axis.get_major_ticks(numticks=1)[0]
        second = axis.get_major_ticks(numticks=2)[1]  # a new tick: matplotlib copies the first's props
    assert second.tick1line._marker is first.tick1line._marker  # shared, not deep-copied
    assert isinstance(second.tick1line._marker, MarkerStyle)
    assert MarkerStyle.__module__ == "matplotlib.markers" and axis.__class__._copy_tick_props.__module__ == (
        "matplotlib.axis")  # everything patched is put back
    ref = weakref.ref(fig)
    del fig, axis, first, second
    renderer.let_go()
    gc.collect()
    assert ref() is None


def test_a_figure_legend_takes_room_by_its_rows():
    """Figures whose legend below the axes has 7 or 8 entries in 4 columns (2 rows) share a
    layout signature; 9 entries (3 rows) need another."""
    from course_lib.live.render import _layout_signature
    from course_lib.plots import new_figure

    def fig_with(entries: int):
        fig, ax = new_figure()
        for i in range(entries):
            ax.plot([0, 1], [i, i], label=f"line {i}")
        fig.legend(loc="outside lower center", ncols=4)
        return fig

    seven, eight, nine = (_layout_signature(fig_with(n)) for n in (7, 8, 9))
    assert seven == eight and eight != nine
