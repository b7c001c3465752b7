"""Live figures: sliders wired to the pure plot functions of :mod:`course_lib.plots`.

A live figure is redrawn by the kernel whenever a slider moves (in JupyterLab) and shows a
static PNG everywhere else (GitHub, nbviewer, slides, nbval). The plot functions know
nothing of this package: ``live`` imports ``plots``, never the other way round.

============  =================================================================
``widgets``   :func:`~course_lib.live.widgets.live_figure`: sliders and drop-downs
              (``Slider``, ``Choice``, ``ValueSlider``) bound to a plot function,
              one output bundle (widget view, PNG fallback, text), linked sliders
``render``    the redraw engine, for speed, not for reading: frozen layouts, one
              canvas, text and ticks kept, no garbage collection, a quick PNG writer
``glossary``  the glossary as a search box, the whole table as static HTML
============  =================================================================

Notebooks import the names they use from here::

    from course_lib.live import Choice, Slider, link_sliders, live_figure

Importing this package imports traitlets but neither ipywidgets nor matplotlib (both come
when a figure is made); ``import course_lib`` alone imports none of it.
"""

from __future__ import annotations

from .glossary import GlossarySearch
from .widgets import Choice, Slider, link_sliders, live_figure

__all__ = ["Choice", "GlossarySearch", "Slider", "link_sliders", "live_figure"]
