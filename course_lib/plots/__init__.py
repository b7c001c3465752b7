"""Pure plot functions: data in, :class:`matplotlib.figure.Figure` out.

Figures are built with the object-oriented API (``Figure`` + Agg canvas, never
``pyplot``), so they hold no global state, need no ``plt.close`` and can be tested
without a display or widgets. One submodule per subject (``plots.scaling`` for the scaling
laws, ``plots.largebatch`` for the critical batch size, ...); this module holds what
they share: figure creation and rendering, the log axes (:func:`log2_axis` for counts in
powers of two, :func:`plain_log_axis` for other amounts, :func:`time_axis` for durations in
words) and :func:`dot_rows`, the dot plot used wherever values sit on a log axis.

Matplotlib is imported only when a figure is drawn. Nothing here knows of sliders:
:mod:`course_lib.live` wires sliders to these functions and redraws their figures fast (it
imports this package, never the other way round).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._validate import check_positive, check_type
from ..i18n import N_, tr
from .style import COLORS, DPI, RC, display_width, styled

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["new_figure", "figure_to_png", "log2_axis", "plain_log_axis", "time_axis", "dot_rows", "show", "styled",
           "COLORS", "DPI", "SUPERSCRIPT"]


def new_figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = (6.4, 4.0), **kw):
    """A new ``Figure`` with a grid of axes, course style applied.

    Call it inside a plot function decorated with :func:`~course_lib.plots.style.styled`
    (which sets type sizes and colours, :mod:`course_lib.plots.style`).

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : Axes or numpy array of Axes (as ``Figure.subplots`` returns them)

    Examples
    --------
    >>> fig, ax = new_figure()
    >>> type(fig).__name__
    'Figure'
    """
    from matplotlib.figure import Figure

    from .._validate import check_int

    nrows = check_int(nrows, "nrows", 1, 100)
    ncols = check_int(ncols, "ncols", 1, 100)
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, **kw)
    for ax in fig.axes:
        ax.grid(True, which="major", alpha=0.3)
        ax.set_prop_cycle(color=COLORS)
        ax.tick_params(labelsize=RC["xtick.labelsize"])  # ticks are made at draw time, outside the style
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig, axes


def log2_axis(axis, hi: float, *, max_ticks: int = 8) -> None:
    """Put a count axis on a base-2 log scale, ticks at powers of two, plain labels.

    Device, process and micro-batch counts are powers of two, and the course's sliders
    step through them; ticks at 1, 4, 16, 64, ... read better than 10^0, 10^1, ...
    There are no minor ticks (creating tick objects is most of the cost of redrawing a
    live figure). Every power of two gets a tick until there would be more than
    ``max_ticks``, then every second, fourth, ... one.

    Parameters
    ----------
    axis : matplotlib.axis.Axis
        ``ax.xaxis`` or ``ax.yaxis``.
    hi : float
        Largest count shown (> 0; ticks start at 1).
    max_ticks : int
        Most major ticks (>= 2).

    Examples
    --------
    >>> fig, ax = new_figure()
    >>> log2_axis(ax.xaxis, 1024)
    >>> [int(t) for t in ax.xaxis.get_majorticklocs()]
    [1, 4, 16, 64, 256, 1024]
    """
    from matplotlib.axis import Axis
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    from .._validate import check_int, check_positive, check_type

    check_type(axis, "axis", Axis, "a matplotlib Axis (ax.xaxis or ax.yaxis)")
    hi = check_positive(hi, "hi")
    max_ticks = check_int(max_ticks, "max_ticks", 2)
    top = max(0, math.ceil(math.log2(max(hi, 1.0))))
    step = 1
    while top // step + 1 > max_ticks:
        step *= 2
    getattr(axis.axes, f"set_{axis.axis_name}scale")("log", base=2)
    axis.set_major_locator(FixedLocator([2.0**k for k in range(0, top + 1, step)]))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def figure_to_png(fig: Figure, dpi: int = DPI, *, compress_level: int = 6) -> bytes:
    """Render a figure to PNG bytes (Agg) at the course's 2x density, e.g. for a widget or a fallback.

    ``compress_level`` is zlib's (0-9): 6 for figures stored in notebooks (matplotlib's
    writer tries a filter per row for a smaller file). A live figure's redraws use a quicker
    writer for the same pixels (:func:`course_lib.live.render.quick_png`).

    Examples
    --------
    >>> from course_lib.plots.scaling import laws_figure
    >>> figure_to_png(laws_figure(0.9, 16))[1:4]
    b'PNG'
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from .._validate import check_int

    _check_figure(fig)
    dpi = check_positive(dpi, "dpi")
    compress_level = check_int(compress_level, "compress_level", 0, 9)
    if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": compress_level})
    return buf.getvalue()


def _check_figure(fig) -> None:
    from matplotlib.figure import Figure

    check_type(fig, "fig", Figure, "a matplotlib Figure")


class _FigureDisplay:
    """Display wrapper: PNG for notebooks, a one-line text for terminals and nbval."""

    def __init__(self, fig: Figure, dpi: int):
        self.fig, self.dpi = fig, dpi

    def _repr_mimebundle_(self, include=None, exclude=None):
        png = figure_to_png(self.fig, self.dpi)
        data = {"image/png": png, "text/plain": self._text()}
        return data, {"image/png": {"width": display_width(png, self.dpi)}}

    def _text(self) -> str:
        titles = [ax.get_title() for ax in self.fig.axes if ax.get_title()]
        suptitle = self.fig.get_suptitle() if hasattr(self.fig, "get_suptitle") else ""
        return f"<Figure: {suptitle or '; '.join(titles) or 'untitled'}>"

    def __repr__(self) -> str:
        return self._text()


def show(fig: Figure, dpi: int = DPI) -> _FigureDisplay:
    """Make a figure display in a notebook as a PNG (put it last in a cell).

    Works without ``pyplot`` or an inline backend, so figures render the same under
    JupyterLab, nbconvert, nbval and slides. The PNG is rendered at ``dpi`` (2x the
    display density by default) and shown at its display size, so it is crisp on a
    HiDPI screen and its text is the size the style sets.
    """
    _check_figure(fig)
    return _FigureDisplay(fig, check_positive(dpi, "dpi"))


# ------------------------------------------------------------------ log axes and dot plots
_DAY = 86400.0
_YEAR = 365.25 * _DAY
#: Unicode superscript digits, for powers of ten without mathtext (cheap to draw).
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
#: Durations a time axis is ticked at, in words (those in words are translated where drawn;
#: the English text is the key of :data:`_TICK_PRIORITY`).
_TIME_TICKS = (
    (1e-6, "1 µs"), (1e-5, "10 µs"), (1e-4, "100 µs"), (1e-3, "1 ms"), (0.01, "10 ms"), (0.1, "100 ms"), (1.0, "1 s"), (10.0, "10 s"), (60.0, "1 min"),
    (600.0, "10 min"), (3600.0, "1 h"), (_DAY, N_("1 day")),
    (7 * _DAY, N_("1 week")), (30 * _DAY, N_("1 month")), (_YEAR, N_("1 year")), (10 * _YEAR, N_("10 years")),
    (100 * _YEAR, N_("100 years")), (1e3 * _YEAR, N_("1,000 years")), (1e4 * _YEAR, N_("10,000 years")),
    (1e5 * _YEAR, N_("100,000 years")), (1e6 * _YEAR, N_("1M years")), (1e7 * _YEAR, N_("10M years")),
    (1e8 * _YEAR, N_("100M years")), (1e9 * _YEAR, N_("1B years")), (1e10 * _YEAR, N_("10B years")),
)
#: Which durations to keep first when not all fit.
_TICK_PRIORITY = ("1 s", "1 min", "1 h", "1 day", "1 year", "1 month", "100 years", "10 years", "1 week",
                  "10,000 years", "1,000 years", "1M years", "100,000 years", "100M years", "10M years",
                  "10B years", "1B years", "1 ms", "100 ms", "10 s", "10 min", "10 ms", "1 µs", "100 µs",
                  "10 µs")


def plain_log_axis(axis, lo: float, hi: float, *, max_ticks: int = 8) -> None:
    """Log scale from ``lo`` to ``hi``, ticks labelled as plain numbers, no minor ticks.

    Ticks at 1, 2, 5 x 10^k, or at 1, 3 x 10^k, or at 10^k: the densest of these that
    gives at most ``max_ticks``. For counts and amounts that are not powers of two
    (steps, GFLOPs, ms).

    Examples
    --------
    >>> from course_lib.plots import new_figure
    >>> fig, ax = new_figure()
    >>> plain_log_axis(ax.xaxis, 0.3, 60)
    >>> [ax.xaxis.get_major_formatter()(t) for t in ax.xaxis.get_majorticklocs()]
    ['0.5', '1', '2', '5', '10', '20', '50']
    >>> plain_log_axis(ax.xaxis, 0.8, 2300)
    >>> [ax.xaxis.get_major_formatter()(t) for t in ax.xaxis.get_majorticklocs()]
    ['1', '3', '10', '30', '100', '300', '1000']
    """
    from .._validate import check_int

    lo, hi = _check_log_range(axis, lo, hi)
    max_ticks = check_int(max_ticks, "max_ticks", 2)
    k = np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
    for steps in ((1, 2, 5), (1, 3), (1,)):
        ticks = [m * 10.0**e for e in k for m in steps if lo <= m * 10.0**e <= hi]
        if len(ticks) <= max_ticks:
            break
    _log_ticks(axis, lo, hi, {t: f"{t:g}" for t in ticks})


def _check_log_range(axis, lo, hi) -> tuple[float, float]:
    """The checks of :func:`plain_log_axis` and :func:`time_axis`: a matplotlib Axis and
    0 < ``lo`` < ``hi``; returns ``(lo, hi)`` as floats."""
    from matplotlib.axis import Axis

    check_type(axis, "axis", Axis, "a matplotlib Axis (ax.xaxis or ax.yaxis)")
    lo, hi = check_positive(lo, "lo"), check_positive(hi, "hi")
    if lo >= hi:
        raise ValueError(f"lo must be < hi, got {lo:g} and {hi:g}")
    return lo, hi


def _log_ticks(axis, lo: float, hi: float, labels: dict) -> None:
    """Log scale from ``lo`` to ``hi``, major ticks at the keys of ``labels`` written as its values.

    No minor ticks (creating tick objects is most of the cost of redrawing a live figure).
    The shared end of :func:`plain_log_axis` and :func:`time_axis`.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    getattr(axis.axes, f"set_{axis.axis_name}scale")("log")
    getattr(axis.axes, f"set_{axis.axis_name}lim")(lo, hi)
    axis.set_major_locator(FixedLocator(sorted(labels)))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: labels.get(v, "")))


def time_axis(axis, lo: float, hi: float, *, length: float | None = None) -> None:
    """Log scale from ``lo`` to ``hi`` seconds, ticks at durations in words (1 min, 1 h, 1 day ...).

    The most familiar durations go first (1 s, 1 min, 1 h, 1 day, 1 year, ...); one whose
    label would crowd another is skipped (the axis is about ``length`` inches long; by
    default 60 % of the figure's width or height). Where fewer
    than two named durations fall in the range, powers of ten of seconds are used instead.
    No minor ticks.

    Examples
    --------
    >>> from course_lib.plots import new_figure
    >>> fig, ax = new_figure()
    >>> time_axis(ax.yaxis, 30.0, 5e5)
    >>> [ax.yaxis.get_major_formatter()(t) for t in ax.yaxis.get_majorticklocs()]
    ['1 min', '10 min', '1 h', '1 day']
    """
    lo, hi = _check_log_range(axis, lo, hi)
    if length is not None:
        length = check_positive(length, "length")
    horizontal = axis.axis_name == "x"
    fig = axis.axes.figure
    if length is None:
        length = 0.6 * (fig.get_figwidth() if horizontal else fig.get_figheight())
    per_decade = length / max(np.log10(hi / lo), 1e-9)  # inches

    def size(name):  # inches a label needs along the axis: its width, or its height
        return 0.085 * len(name) if horizontal else 0.22

    named: dict[float, str] = {}
    for t, name in sorted(_TIME_TICKS, key=lambda tick: _TICK_PRIORITY.index(tick[1])):
        if lo <= t <= hi and all(abs(np.log10(t / u)) * per_decade >= (size(v) + size(name)) / 2 + 0.15
                                 for u, v in named.items()):
            named[t] = name
    named = {t: tr(name) for t, name in named.items()}
    if len(named) < 2:
        named = {10.0**k: f"10{str(k).translate(SUPERSCRIPT)} s"
                 for k in range(int(np.ceil(np.log10(lo))), int(np.floor(np.log10(hi))) + 1)}
    _log_ticks(axis, lo, hi, named)


def dot_rows(ax, labels: Sequence[str], values, texts: Sequence[str], *, styles: Sequence | None = None) -> None:
    """Rows of values as a dot plot: one marker per row (first row on top), its value written beside it.

    Dots, not bars, wherever the value axis is logarithmic: there a bar's length depends
    on where the axis starts, so it means nothing; a dot's position is the value. The
    caller sets the value (x) axis. ``styles`` are one ``(marker, color, legend label)``
    per row (rows with the same label share one legend entry; ``None``: no entry).

    Examples
    --------
    >>> fig, ax = new_figure()
    >>> dot_rows(ax, ["a", "b"], [10.0, 1e4], ["10", "10k"])
    >>> [t.get_text() for t in ax.get_yticklabels()], [t.get_text() for t in ax.texts]
    (['a', 'b'], ['10', '10k'])
    """
    from matplotlib.axes import Axes

    from .._validate import as_real, check_sequence

    check_type(ax, "ax", Axes, "a matplotlib Axes")
    values = as_real(values, "values").reshape(-1)
    labels = check_sequence(labels, "labels", str, "a row label (str)")
    texts = check_sequence(texts, "texts", str, "a text written beside a dot (str)")
    if not len(labels) == len(texts) == values.size:
        raise ValueError(f"labels, values and texts must have equal lengths, got "
                         f"{len(labels)}, {values.size} and {len(texts)}")
    styles = list(styles) if styles is not None else [("o", COLORS[0], None)] * values.size
    y = np.arange(values.size)[::-1]
    seen = set()
    for xi, yi, (marker, color, label), text in zip(values, y, styles, texts, strict=True):
        ax.plot([xi], [yi], marker, color=color, markersize=9, zorder=3,
                label=label if label and label not in seen else "_nolegend_")
        seen.add(label)
        ax.annotate(text, (xi, yi), textcoords="offset points", xytext=(9, 0), va="center")
    ax.set_yticks(y, labels)
    ax.set_ylim(-0.6, values.size - 0.4)
    ax.grid(True, axis="y", color="0.85", lw=0.8, ls=":")
    ax.tick_params(axis="y", length=0)
    ax.spines["left"].set_visible(False)
