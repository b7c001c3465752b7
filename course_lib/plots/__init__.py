"""Pure plot functions: data in, :class:`matplotlib.figure.Figure` out.

Figures are built with the object-oriented API (``Figure`` + Agg canvas, never
``pyplot``), so they hold no global state, need no ``plt.close`` and can be tested
without a display or widgets. One submodule per chapter (``plots.scaling``, ...);
this module holds what they share.

Matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["new_figure", "figure_to_png", "show", "COLORS"]

#: Colour cycle used across the course (colour-blind safe, Okabe-Ito).
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")


def new_figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = (6.4, 4.0), **kw):
    """A new ``Figure`` with a grid of axes, course style applied.

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

    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, **kw)
    for ax in fig.axes:
        ax.grid(True, which="major", alpha=0.3)
        ax.set_prop_cycle(color=COLORS)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig, axes


def figure_to_png(fig: Figure, dpi: int = 90) -> bytes:
    """Render a figure to PNG bytes (Agg), e.g. for a widget or a static fallback."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


class _FigureDisplay:
    """Display wrapper: PNG for notebooks, a one-line text for terminals and nbval."""

    def __init__(self, fig: Figure, dpi: int):
        self.fig, self.dpi = fig, dpi

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"image/png": figure_to_png(self.fig, self.dpi), "text/plain": self._text()}

    def _text(self) -> str:
        titles = [ax.get_title() for ax in self.fig.axes if ax.get_title()]
        suptitle = self.fig.get_suptitle() if hasattr(self.fig, "get_suptitle") else ""
        return f"<Figure: {suptitle or '; '.join(titles) or 'untitled'}>"

    def __repr__(self) -> str:
        return self._text()


def show(fig: Figure, dpi: int = 90) -> _FigureDisplay:
    """Make a figure display in a notebook as a PNG (put it last in a cell).

    Works without ``pyplot`` or an inline backend, so figures render the same under
    JupyterLab, nbconvert, nbval and slides.
    """
    return _FigureDisplay(fig, dpi)
