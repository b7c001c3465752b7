"""Sliders wired to plot functions: live in JupyterLab, a static PNG everywhere else.

:func:`live_figure` returns an object whose notebook output is ONE bundle holding

* the widget view (sliders + figure), which JupyterLab renders live: the figure is
  redrawn by the kernel whenever a slider moves;
* an ``image/png`` of the initial state, which every viewer without a widget
  manager shows instead (GitHub, nbviewer, nbconvert, slides without widget state,
  a notebook opened unexecuted after a save from JupyterLab);
* a short ``text/plain`` naming the figure and its slider values (what nbval sees).

JupyterLab picks the richest type it can render, so it shows the live widget and no
duplicate figure. Only notebooks import this module (it imports ipywidgets).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._validate import check_positive, check_sequence, check_type
from .plots import figure_to_png

__all__ = ["Choice", "GlossarySearch", "Slider", "LiveFigure", "glossary_table", "link_sliders", "live_figure"]

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


@dataclass(frozen=True)
class Slider:
    """Description of one slider.

    Parameters
    ----------
    name : str
        Keyword argument of the plot function that the slider sets.
    label : str
        Short label shown beside the slider (e.g. ``"p"``).
    min, max, step, value : float
        Range, step and initial value. For ``kind="log2"`` they are exponents of 2
        except ``value``, which is the actual initial value (a power of two).
    unit : str
        Unit shown after the label, e.g. ``"devices"``; empty for pure numbers.
    help : str
        One sentence shown as the slider's tooltip.
    kind : {"float", "int", "log2"}
        A float slider, an integer slider, or integer powers of two (1, 2, 4, ...).
    readout_format : str
        Format of the value shown beside the slider (``".2f"`` by default for floats).
    """

    name: str
    label: str
    min: float
    max: float
    step: float
    value: float
    unit: str = ""
    help: str = ""
    kind: str = "float"
    readout_format: str = ".2f"

    def __post_init__(self):
        if self.kind not in ("float", "int", "log2"):
            raise ValueError(f"kind must be 'float', 'int' or 'log2', got {self.kind!r}")
        if not self.min < self.max:
            raise ValueError(f"slider {self.name!r}: min must be < max, got {self.min}, {self.max}")
        lo, hi = (2.0**self.min, 2.0**self.max) if self.kind == "log2" else (self.min, self.max)
        if not lo <= self.value <= hi:
            raise ValueError(
                f"slider {self.name!r}: value must be in [{lo:g}, {hi:g}], got {self.value}"
            )

    @property
    def description(self) -> str:
        """Text shown beside the slider: label and unit."""
        return f"{self.label} [{self.unit}]" if self.unit else self.label

    def make_widget(self):
        """The ipywidgets slider for this description."""
        import ipywidgets as w

        common = dict(
            description=self.description,
            tooltip=self.help,
            continuous_update=True,
            style={"description_width": "initial"},
            layout=w.Layout(width="460px"),
        )
        if self.kind == "int":
            return w.IntSlider(
                min=int(self.min), max=int(self.max), step=int(self.step), value=int(self.value), **common
            )
        if self.kind == "log2":
            return w.FloatLogSlider(
                base=2, min=self.min, max=self.max, step=self.step, value=self.value,
                readout_format=".0f", **common,
            )
        return w.FloatSlider(
            min=self.min, max=self.max, step=self.step, value=self.value,
            readout_format=self.readout_format, **common,
        )

    def convert(self, raw: Any):
        """Slider value as passed to the plot function (int for int/log2 sliders)."""
        if self.kind in ("int", "log2"):
            return int(round(raw))
        return float(raw)


@dataclass(frozen=True)
class Choice:
    """Description of a drop-down: pick one of several named options.

    Parameters
    ----------
    name : str
        Keyword argument of the plot function that the choice sets.
    label : str
        Short label shown beside the drop-down.
    options : sequence of str or of (label, value) pairs
        What the learner can pick; with pairs, the plot function receives ``value``.
    value : object
        Initial selection: one of the option values.
    help : str
        One sentence shown as the tooltip.

    Examples
    --------
    >>> c = Choice("device", "device", [("NVIDIA V100", "v100"), ("NVIDIA A100", "a100")], "a100")
    >>> c.convert(c.make_widget().value)
    'a100'
    """

    name: str
    label: str
    options: tuple
    value: Any
    help: str = ""

    def __post_init__(self):
        pairs = tuple(o if isinstance(o, tuple) else (str(o), o) for o in self.options)
        if not pairs:
            raise ValueError(f"choice {self.name!r}: options must not be empty")
        object.__setattr__(self, "options", pairs)
        if self.value not in [v for _, v in pairs]:
            raise ValueError(
                f"choice {self.name!r}: value must be one of {[v for _, v in pairs]}, got {self.value!r}"
            )

    @property
    def description(self) -> str:
        """Text shown beside the drop-down."""
        return self.label

    def make_widget(self):
        """The ipywidgets drop-down for this description."""
        import ipywidgets as w

        return w.Dropdown(
            options=list(self.options), value=self.value, description=self.description,
            tooltip=self.help, style={"description_width": "initial"}, layout=w.Layout(width="460px"),
        )

    def convert(self, raw: Any):
        """The selected value, as the plot function receives it."""
        return raw


class LiveFigure:
    """A plot function bound to sliders (see :func:`live_figure`)."""

    def __init__(
        self,
        plot: Callable[..., Any],
        sliders: Sequence[Slider | Choice],
        fixed: dict[str, Any] | None = None,
        dpi: int = 80,
    ):
        import ipywidgets as w

        if not callable(plot):
            raise TypeError(f"plot must be callable, got {type(plot).__name__}")
        sliders = check_sequence(sliders, "sliders", (Slider, Choice), "a Slider or a Choice")
        if fixed is not None:
            check_type(fixed, "fixed", dict, "a dict of keyword arguments")
        dpi = check_positive(dpi, "dpi")
        names = [s.name for s in sliders]
        if len(set(names)) != len(names):
            raise ValueError(f"slider names must be unique, got {names}")
        self.plot, self.sliders, self.fixed, self.dpi = plot, tuple(sliders), dict(fixed or {}), dpi
        self.controls = {s.name: s.make_widget() for s in self.sliders}
        # Shown at its own size (not stretched to the box width, which blurs it).
        self.image = w.Image(format="png", layout=w.Layout(max_width="100%", align_self="flex-start"))
        self.message = w.HTML()
        self.initial_png = self._render()
        self.image.value = self.initial_png
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.widget = w.VBox([*self.controls.values(), self.message, self.image])
        self.widget.add_class("ddl-live-figure")

    def values(self) -> dict[str, Any]:
        """Current slider values, converted as the plot function receives them."""
        return {s.name: s.convert(self.controls[s.name].value) for s in self.sliders}

    def _render(self) -> bytes:
        fig = self.plot(**self.fixed, **self.values())
        # The layout engine costs about a third of a redraw. Lay the figure out once (the
        # initial state) and reuse the axes positions while the figure keeps the same axes.
        layout = getattr(self, "_layout", None)
        if layout is not None and len(fig.axes) == len(layout):
            _remove_layout_engine(fig)
            for ax, position in zip(fig.axes, layout):
                ax.set_position(position)
        # Draw every state on the same canvas: its renderer, and matplotlib's text-size
        # cache that belongs to the renderer, carry over, which makes a redraw about a
        # third faster (tick labels and titles mostly repeat) and gives the same PNG.
        canvas = getattr(self, "_canvas", None)
        if canvas is None:
            from matplotlib.backends.backend_agg import FigureCanvasAgg

            self._canvas = FigureCanvasAgg(fig)
        else:
            canvas.figure = fig
            fig.set_canvas(canvas)
        png = figure_to_png(fig, self.dpi)
        if layout is None or len(fig.axes) != len(layout):
            self._layout = [ax.get_position() for ax in fig.axes]
        return png

    def _on_change(self, _change=None) -> None:
        try:
            self.image.value = self._render()
            self.message.value = ""
        except (ValueError, TypeError) as exc:  # show bad combinations, keep the last figure
            self.message.value = f"<span style='color:#b00'>{exc}</span>"

    def _describe(self) -> str:
        vals = ", ".join(f"{k}={_fmt(v)}" for k, v in self.values().items())
        return f"<live figure: {getattr(self.plot, '__name__', 'plot')}({vals})>"

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        if isinstance(bundle, tuple):  # pragma: no cover - (data, metadata) form
            bundle = bundle[0]
        bundle["image/png"] = self.initial_png
        bundle["text/plain"] = self._describe()
        return bundle

    def __repr__(self) -> str:
        return self._describe()


def live_figure(
    plot: Callable[..., Any],
    sliders: Sequence[Slider | Choice],
    dpi: int = 80,
    **fixed: Any,
) -> LiveFigure:
    """Wire ``sliders`` to ``plot`` and return a displayable live figure.

    Parameters
    ----------
    plot : callable
        A pure plot function from :mod:`course_lib.plots` returning a Figure; it is
        called with every slider's ``name`` as a keyword, plus ``fixed``.
    sliders : sequence of Slider or Choice
        The controls, in display order (a :class:`Choice` gives a drop-down).
    dpi : int
        Resolution of the rendered PNG (lower is faster to redraw).
    **fixed
        Further keyword arguments passed unchanged to ``plot``.

    Examples
    --------
    >>> from course_lib.plots.scaling import laws_figure
    >>> fig = live_figure(laws_figure, [Slider("p", "p", 0, 1, 0.01, 0.9),
    ...                                 Slider("n", "N", 0, 10, 1, 16, unit="devices", kind="log2")])
    >>> fig.values()
    {'p': 0.9, 'n': 16}
    """
    return LiveFigure(plot, sliders, fixed, dpi)


def _remove_layout_engine(fig) -> None:
    """Take the layout engine off ``fig`` entirely (not ``"none"``, a placeholder).

    ``savefig`` draws a figure twice when it has any layout engine, the placeholder
    included: once to lay it out, once to render. Without one it draws once, which
    makes a redraw about a quarter faster and gives the same PNG.
    """
    import matplotlib

    with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


def _fmt(v: Any) -> str:
    if isinstance(v, float) and math.isfinite(v):
        return f"{v:g}"
    return str(v)


def link_sliders(source: LiveFigure, target: LiveFigure, names: Sequence[str]) -> None:
    """Make sliders of two live figures move together (linked in the browser).

    Moving the named slider of either figure moves the other one, so one set of
    values drives both figures (e.g. Amdahl's and Gustafson's laws side by side).

    Examples
    --------
    >>> from course_lib.plots.scaling import laws_figure
    >>> a = live_figure(laws_figure, [Slider("p", "p", 0, 1, 0.01, 0.9), Slider("n", "N", 0, 10, 1, 16, kind="log2")])
    >>> b = live_figure(laws_figure, [Slider("p", "p", 0, 1, 0.01, 0.9), Slider("n", "N", 0, 10, 1, 16, kind="log2")])
    >>> link_sliders(a, b, ["p"])
    >>> a.controls["p"].value = 0.5
    >>> b.values()["p"]
    0.5
    """
    import ipywidgets as w

    check_type(source, "source", LiveFigure, "a LiveFigure")
    check_type(target, "target", LiveFigure, "a LiveFigure")
    names = check_sequence(names, "names", str, "a slider name (str)")
    for name in names:
        if name not in source.controls or name not in target.controls:
            raise ValueError(f"both figures need a slider named {name!r}")
        # A kernel-side link: both figures redraw, in JupyterLab and when driven from code.
        w.link((source.controls[name], "value"), (target.controls[name], "value"))


# ------------------------------------------------------------------ glossary
def glossary_table(entries: Sequence, query: str = "") -> str:
    """HTML table of the glossary ``entries`` whose English, Chinese or definition contain ``query``.

    A Chinese term not found in the source chapter is marked with ``*``.

    Examples
    --------
    >>> from course_lib.datasets import load_glossary
    >>> html = glossary_table(load_glossary(), "parameter server")
    >>> html.startswith("<p>1 of ") and "<td>parameter server</td>" in html
    True
    """
    import html

    from .datasets import GlossaryEntry

    entries = check_sequence(entries, "entries", GlossaryEntry, "a GlossaryEntry (load_glossary())")
    check_type(query, "query", str, "a str")
    q = query.strip().lower()
    rows = [e for e in entries if q in f"{e.term} {e.term_zh} {e.definition}".lower()]
    body = "".join(
        f"<tr><td>{html.escape(e.term)}</td><td>{html.escape(e.term_zh)}{'' if e.zh_from_source else ' *'}</td>"
        f"<td>{e.chapter:02d}</td><td style='text-align:left'>{html.escape(e.definition)}</td></tr>"
        for e in rows)
    return (f"<p>{len(rows)} of {len(entries)} terms</p><table class='ddl-glossary-table'><thead><tr>"
            f"<th>term</th><th>中文</th><th>chapter</th><th>definition</th></tr></thead><tbody>{body}</tbody></table>")


class GlossarySearch:
    """A search box over the glossary: live in JupyterLab, the whole table everywhere else.

    Parameters
    ----------
    entries : sequence of GlossaryEntry
        ``course_lib.datasets.load_glossary()``.
    """

    def __init__(self, entries: Sequence):
        import ipywidgets as w

        from .datasets import GlossaryEntry

        self.entries = check_sequence(entries, "entries", GlossaryEntry, "a GlossaryEntry (load_glossary())")
        self.search = w.Text(placeholder="filter, e.g. all-reduce or 并行", description="search")
        self.table = w.HTML(glossary_table(self.entries))
        self.search.observe(lambda change: setattr(self.table, "value", glossary_table(self.entries, change["new"])),
                            names="value")
        self.widget = w.VBox([self.search, self.table])
        self.widget.add_class("ddl-glossary")

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle.update({"text/html": glossary_table(self.entries),
                       "text/plain": f"<glossary: {len(self.entries)} terms>"})
        return bundle
