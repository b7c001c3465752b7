"""Pure plot functions: data in, :class:`matplotlib.figure.Figure` out.

Figures are built with the object-oriented API (``Figure`` + Agg canvas, never
``pyplot``), so they hold no global state, need no ``plt.close`` and can be tested
without a display or widgets. One submodule per chapter (``plots.scaling``, ...;
chapter 03 also has ``plots.largebatch``, the critical batch size); this module holds what
they share.

Matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING

from .._validate import check_positive, check_type
from .style import COLORS, DPI, RC, display_width, styled

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["new_figure", "figure_to_png", "log2_axis", "show", "styled", "COLORS", "DPI"]


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

    ``compress_level`` is zlib's (0-9): 6 for figures stored in notebooks; a live
    figure's redraws use 1, about 15 % faster to encode for a PNG about 15 % larger.
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
