"""Sliders wired to plot functions: live in JupyterLab, a static PNG everywhere else.

:func:`live_figure` returns an object whose notebook output is ONE bundle holding

* the widget view (sliders + figure), which JupyterLab renders live: the figure is
  redrawn by the kernel whenever a slider moves;
* an ``image/png`` of the initial state, which every viewer without a widget
  manager shows instead (GitHub, nbviewer, nbconvert, slides without widget state,
  a notebook opened unexecuted after a save from JupyterLab); where the figure's point
  is a change, the PNG shows the initial state and 1-2 further ``states`` together;
* a short ``text/plain`` naming the figure and its slider values (what nbval sees).

JupyterLab picks the richest type it can render, so it shows the live widget and no
duplicate figure. Only notebooks import this module (it imports ipywidgets). What makes a
redraw fast (frozen layouts, one canvas, no garbage collection meanwhile, a quick PNG writer)
is apart, in :mod:`course_lib.live.render`; the glossary's search box, in
:mod:`course_lib.live.glossary`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from traitlets import Any as AnyTrait
from traitlets import HasTraits, TraitError, validate

from .._validate import check_positive, check_sequence, check_type
from ..i18n import tr
from ..plots.style import DPI, display_width
from ..typed_numbers import unit_kind
from .render import Renderer

__all__ = ["Choice", "Slider", "LiveFigure", "ValueSlider", "fraction_steps", "link_sliders", "live_figure",
           "stack_pngs"]

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
        Range, step and initial value. For ``kind="log2"`` and ``kind="log"`` ``min`` and
        ``max`` are exponents (of 2 and of 10: ``np.log10(400)`` reaches 400 exactly);
        ``value`` is always the actual initial value, which the slider starts at exactly.
        For ``kind="fraction"`` ``step`` is the step below 0.9 (see :func:`fraction_steps`).
    unit : str
        Unit of the value, e.g. ``"devices"``, ``"MB"``, ``"billion"``; empty for pure
        numbers. Sizes, rates and times are shown with their unit in the value box
        (``120 GB``, ``150 GB/s``), counts in millions or billions with a suffix (``7.5B``);
        other units after the label (``N [devices]``).
    help : str
        One sentence shown as the slider's tooltip.
    kind : {"float", "int", "log2", "log", "fraction"}
        A float slider; an integer slider; powers of two (integers 1, 2, 4, ... when
        ``step`` is a whole number); any positive number on a log scale (base 2 with a
        fractional ``step``, or base 10: a bandwidth from 1 to 400 Gbit/s), whose stops
        are round values 1, 2, 5, 10, 20, ... and the range's ends; or a fraction whose
        steps get finer towards 1 (0.9, 0.95, 0.99, 0.995, 0.999, ...). The last three
        kinds take any value in range typed into their value box and keep it exactly
        (see :class:`ValueSlider`); ``step`` of a base-10 or fractional base-2 log slider
        is not used.
    readout_format : str
        Format of the value shown beside the slider (``".1f"``); by default the value with
        up to 4 significant digits, or with its unit as described under ``unit``.
    follows : (str, callable) or None
        ``(name, rule)``: when the control ``name`` changes, this slider moves to
        ``rule(new value)`` (e.g. a device's sustained fraction when the device changes).
    scales_with : str or None
        Name of a control: when it changes, this slider moves by the same factor, so
        that their ratio stays (Amdahl's ``s`` keeps ``s / N`` when ``N`` moves).
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
    readout_format: str | None = None
    follows: tuple[str, Callable[[Any], float]] | None = None
    scales_with: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}, got {self.kind!r}")
        if not self.min < self.max:
            raise ValueError(f"slider {self.name!r}: min must be < max, got {self.min}, {self.max}")
        lo, hi = self.bounds
        if not lo <= self.value <= hi:
            raise ValueError(
                f"slider {self.name!r}: value must be in [{lo:g}, {hi:g}], got {self.value}"
            )
        if self.kind == "fraction" and not 0 <= self.min < self.max <= 1:
            raise ValueError(f"slider {self.name!r}: a fraction needs 0 <= min < max <= 1, "
                             f"got {self.min}, {self.max}")
        if self.follows is not None and not (
                isinstance(self.follows, tuple) and len(self.follows) == 2
                and isinstance(self.follows[0], str) and callable(self.follows[1])):
            raise TypeError(f"slider {self.name!r}: follows must be (control name, callable), "
                            f"got {self.follows!r}")
        if self.scales_with is not None and not isinstance(self.scales_with, str):
            raise TypeError(f"slider {self.name!r}: scales_with must be a control name (str), "
                            f"got {self.scales_with!r}")
        if self.kind == "float" and not _on_steps(self.value, self.min, self.step):
            raise ValueError(f"slider {self.name!r}: value {self.value:g} is not on the steps of {self.step:g} "
                             f"from {self.min:g} (the browser would move it there); use a finer step")

    @property
    def bounds(self) -> tuple[float, float]:
        """Smallest and largest value the slider can take (an exponent's float noise removed)."""
        base = {"log2": 2.0, "log": 10.0}.get(self.kind)
        return (_tidy(base**self.min), _tidy(base**self.max)) if base else (self.min, self.max)

    @property
    def typed(self) -> bool:
        """Whether the slider is a :class:`ValueSlider` (exact values, a box to type one)."""
        return self.kind in ("log2", "log", "fraction")

    @property
    def shows_unit(self) -> bool:
        """Whether the value box shows the unit (``120 GB``, ``7.5B``) instead of the label."""
        return self.typed and self.readout_format is None and bool(self.unit) and (
            self.unit in _SCALED or unit_kind(self.unit)[0] != "count")

    def grid(self) -> list:
        """The slider's stops, without the initial value: powers of two, 1-2-5 values or fractions."""
        lo, hi = self.bounds
        if self.kind == "fraction":
            return fraction_steps(self.min, self.max, self.step)
        if self.integer:  # whole powers of two
            k = math.ceil(self.min - 1e-9)
            return [int(round(2.0**e)) for e in _arange(k, self.max, self.step)]
        inner = [m * 10.0**e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
                 for m in (1, 2, 5)]
        return sorted({lo, hi, *(_tidy(v) for v in inner if lo < v < hi)})

    def format(self, value: float) -> str:
        """The value as the box beside the slider shows it: ``7.5B``, ``120 GB``, ``150 GB/s``, ``0.95``.

        Counts in millions or billions go through :func:`course_lib.plots.cost.human_count`,
        sizes through the course's byte formatter (as ``ModelStates`` prints them).

        Examples
        --------
        >>> Slider("p", "parameters", -1, 3, 0.01, 7.5, unit="billion", kind="log").format(7.5)
        '7.5B'
        >>> Slider("b", "β", 0, 10, 0.01, 150, unit="GB/s", kind="log2").format(150)
        '150 GB/s'
        """
        if self.readout_format:
            return format(value, self.readout_format)
        if self.shows_unit:
            kind, factor = unit_kind(self.unit)
            if self.unit in _SCALED:
                from ..plots.cost import human_count

                return human_count(value * factor)
            if kind == "bytes":
                from ..memory import format_bytes  # the course's one formatter of sizes

                return format_bytes(value * factor)
            return f"{_short(value)} {self.unit}"
        return _short(value)

    def parse(self, text: str):
        """A value typed into the box, in the slider's unit; ``ValueError`` says why not.

        Read by :func:`course_lib.typed_numbers.read_quantity` (``13``, ``13B``, ``1.5 GB``,
        ``3,75``, ``95%``); it must lie in the slider's range, and be whole for an
        integer slider.
        """
        from ..typed_numbers import read_quantity

        value = read_quantity(text, self.unit)
        lo, hi = self.bounds
        if not lo <= value <= hi:
            raise ValueError(f"{text.strip()!r} is outside {self.format(lo)} to {self.format(hi)}")
        if self.integer:
            if abs(value - round(value)) > 1e-9:
                raise ValueError(f"{self.label} is a whole number, got {text.strip()!r}")
            return int(round(value))
        return value

    @property
    def integer(self) -> bool:
        """Whether the plot function receives an ``int``."""
        return self.kind == "int" or (self.kind == "log2" and float(self.step).is_integer())

    @property
    def description(self) -> str:
        """Text shown beside the slider: the label, and the unit unless the value box shows it."""
        return f"{self.label} [{_unit_label(self.unit)}]" if self.unit and not self.shows_unit else self.label

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
        if self.typed:
            return ValueSlider(self)
        return w.FloatSlider(
            min=self.min, max=self.max, step=self.step, value=self.value,
            readout_format=self.readout_format or ".2f", **common,
        )

    def convert(self, raw: Any):
        """Slider value as passed to the plot function (int for int and whole-step log2 sliders)."""
        if self.integer:
            return int(round(raw))
        return float(raw)


#: The kinds of :class:`Slider`.
KINDS = ("float", "int", "log2", "log", "fraction")
def _unit_label(unit: str) -> str:
    """A slider's unit as its label shows it in brackets: a word in the reader's language
    (devices: 设备), a symbol as it is."""
    words = {"devices": tr("devices", context="unit label"), "samples": tr("samples", context="unit label"),
             "pixels": tr("pixels", context="unit label"), "fraction": tr("fraction", context="unit label"),
             "processes": tr("processes", context="unit label"), "steps": tr("steps", context="unit label")}
    return words.get(unit, unit)


#: Count units whose values the box shows with a suffix (7.5 billion: ``7.5B``).
_SCALED = ("thousand", "million", "billion", "trillion")


def _tidy(x: float) -> float:
    """``x`` to 12 significant digits: 10**log10(400) is 400, not 400.00000000000006."""
    return float(f"{x:.12g}")


def _arange(start: float, stop: float, step: float) -> list[float]:
    n = int(math.floor((stop - start) / step + 1e-9))
    return [start + k * step for k in range(n + 1)]


def _on_steps(value: float, lo: float, step: float) -> bool:
    k = (value - lo) / step
    return abs(k - round(k)) < 1e-6


def _short(v: float) -> str:
    """A number as a readout shows it: whole numbers in full (``1,024``), others to 4 digits.

    Examples
    --------
    >>> _short(65536), _short(12), _short(0.95), _short(1700.93), _short(0.0012345)
    ('65,536', '12', '0.95', '1,701', '0.001234')
    """
    v = float(v)
    if not math.isfinite(v):
        return str(v)
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    r = float(f"{v:.4g}")
    decimals = max(0, 3 - math.floor(math.log10(abs(r))))
    text = f"{r:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


class ValueSlider(HasTraits):
    """A slider over round values that holds any value in its range exactly, with a box to type one.

    ipywidgets' ``FloatLogSlider`` snaps every value - the initial one and a typed one - to
    ``base**(k*step)`` in the browser (7.5 became 7.58578, a typed 13 became 12.9). Here the
    slider is a ``SelectionSlider`` over the stops of :meth:`Slider.grid` plus the initial
    value (the browser sends the index of a stop, never a number), and a text box beside it
    shows the value formatted (:meth:`Slider.format`) and takes a typed one
    (:meth:`Slider.parse`), which becomes a stop of its own while it is the value.
    ``value`` is a trait: observe it, link it, set it from code (any value in range).

    Examples
    --------
    >>> s = ValueSlider(Slider("bw", "link", 0, 2.6, 0.01, 25, unit="Gbit/s", kind="log"))
    >>> s.value, s.box.value, s.slider.options[:4]
    (25.0, '25 Gbit/s', (('1 Gbit/s', 1.0), ('2 Gbit/s', 2.0), ('5 Gbit/s', 5.0), ('10 Gbit/s', 10.0)))
    >>> s.box.value = "13"; s.value
    13.0
    """

    value = AnyTrait()

    def __init__(self, spec: Slider):
        import ipywidgets as w

        super().__init__()
        self.spec = check_type(spec, "spec", Slider, "a Slider of kind 'log', 'log2' or 'fraction'")
        if not spec.typed:
            raise ValueError(f"spec: a ValueSlider takes a slider of kind 'log', 'log2' or 'fraction', got {spec.kind!r}")
        self.initial = spec.convert(spec.value)
        self._syncing = False
        self.slider = w.SelectionSlider(
            options=self._options(self.initial), value=self.initial, readout=False,
            description=spec.description, tooltip=spec.help, continuous_update=True,
            style={"description_width": "initial"}, layout=w.Layout(width="370px"))
        self.box = w.Text(value=spec.format(self.initial), continuous_update=False,
                          tooltip=f"type a value, e.g. {spec.format(self.initial)}, and press Enter",
                          layout=w.Layout(width="88px"))
        self.note = w.HTML()
        self.widget = w.HBox([self.slider, self.box, self.note])
        self.value = self.initial
        self.slider.observe(self._slid, names="value")
        self.box.observe(self._typed, names="value")
        self.observe(self._moved, names="value")

    @property
    def description(self) -> str:
        return self.slider.description

    @property
    def tooltip(self) -> str:
        return self.slider.tooltip

    def _options(self, current) -> list[tuple[str, Any]]:
        values = sorted({*self.spec.grid(), self.initial, current})
        return [(self.spec.format(v), v) for v in values]

    @validate("value")
    def _check_value(self, proposal):
        v = proposal["value"]
        lo, hi = self.spec.bounds
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise TraitError(f"slider {self.spec.name!r}: value must be a number in [{lo:g}, {hi:g}], got {v!r}")
        return self.spec.convert(v)

    def _slid(self, change) -> None:
        if not self._syncing and change["new"] is not None:
            self.value = change["new"]

    def _typed(self, change) -> None:
        if self._syncing:
            return
        try:
            value = self.spec.parse(change["new"])
        except ValueError as exc:
            self.note.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
            self._show(self.value)
            return
        self.note.value = ""
        if value == self.value:
            self._show(value)
        self.value = value

    def _moved(self, change) -> None:
        self._show(change["new"])

    def _show(self, value) -> None:
        """Put the slider on ``value`` (a stop of its own if it is none) and the box's text."""
        self._syncing = True
        try:
            with self.slider.hold_sync():
                if value not in [v for _, v in self.slider.options]:
                    self.slider.options = self._options(value)
                self.slider.value = value
            self.box.value = self.spec.format(value)
        finally:
            self._syncing = False


def fraction_steps(lo: float = 0.0, hi: float = 1.0, step: float = 0.05) -> list[float]:
    """Values of a fraction slider: ``step`` apart up to 0.9, then 0.01 apart, then 0.995, 0.998, 0.999.

    Amdahl's law changes fastest near p = 1, where a linear slider in steps of 0.01
    cannot reach 0.995 or 0.999; these steps get finer towards 1.

    Examples
    --------
    >>> fraction_steps(0.8, 1.0, 0.05)[:5], fraction_steps(0.8, 1.0, 0.05)[-5:]
    ([0.8, 0.85, 0.9, 0.91, 0.92], [0.99, 0.995, 0.998, 0.999, 1.0])
    """
    from .._validate import check_real

    lo, hi = check_real(lo, "lo", 0.0, 1.0), check_real(hi, "hi", 0.0, 1.0)
    step = check_real(step, "step", 0.0, 0.9, low_open=True)
    if not lo < hi:
        raise ValueError(f"lo must be < hi, got lo={lo}, hi={hi}")
    coarse = [round(k * step, 10) for k in range(int(0.9 / step + 1e-9) + 1)]
    grid = sorted({*coarse, *(round(0.9 + k / 100, 10) for k in range(10)), 0.995, 0.998, 0.999, 1.0})
    inside = [v for v in grid if lo - 1e-12 <= v <= hi + 1e-12]
    return sorted({lo, *inside, hi})


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
        dpi: int = DPI,
        states: Sequence[dict[str, Any]] = (),
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
        for s in sliders:
            if isinstance(s, Slider) and s.follows is not None and s.follows[0] not in names:
                raise ValueError(f"slider {s.name!r} follows {s.follows[0]!r}, which is not a control here")
            if isinstance(s, Slider) and s.scales_with is not None and s.scales_with not in names:
                raise ValueError(f"slider {s.name!r} scales with {s.scales_with!r}, which is not a control here")
        self.plot, self.sliders, self.fixed, self.dpi = plot, tuple(sliders), dict(fixed or {}), dpi
        self.states = _check_states(states, self.sliders)
        self.controls = {s.name: s.make_widget() for s in self.sliders}
        # Shown at its display size (half its pixels: 2x density), never stretched.
        self.image = w.Image(format="png", layout=w.Layout(max_width="100%", align_self="flex-start"))
        self.message = w.HTML()
        self._quiet = False
        self.renderer = Renderer(dpi)  # the redraw engine, for speed (course_lib.live.render)
        self.initial_png = self._render(stored=True)
        self.image.value = self.initial_png
        self.image.width = str(display_width(self.initial_png, dpi))
        self.fallback_png = self._fallback() if self.states else self.initial_png
        self.renderer.let_go()
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.widget = w.VBox([getattr(c, "widget", c) for c in self.controls.values()] + [self.message, self.image])
        self.widget.add_class("ddl-live-figure")

    def values(self) -> dict[str, Any]:
        """Current slider values, converted as the plot function receives them."""
        return {s.name: s.convert(self.controls[s.name].value) for s in self.sliders}

    def _render(self, values: dict[str, Any] | None = None, *, stored: bool = False) -> bytes:
        """The figure for the current (or given) values as PNG; ``stored`` ones are audited,
        laid out and compressed harder (see :class:`course_lib.live.render.Renderer`)."""
        kwargs = {**self.fixed, **(self.values() if values is None else values)}
        return self.renderer.render(self.plot, kwargs, stored=stored)

    def _fallback(self) -> bytes:
        """The initial state and each of ``states``, one under the other, each captioned."""
        initial, kept, layout = self.values(), dict(self.renderer.layouts), self.renderer.layout
        frames = [(self._caption(initial, first=True), self.initial_png)]
        for state in self.states:
            values = {**initial, **state}
            frames.append((self._caption(values, first=False), self._render(values, stored=True)))
        # a state with the initial state's signature replaced its layout: put it back,
        # so that the live figure at its initial values is the initial PNG's pixels
        self.renderer.layouts.update(kept)
        self.renderer.layout = layout
        return stack_pngs(frames, self.dpi)

    def _caption(self, values: dict[str, Any], *, first: bool) -> str:
        labels = {s.name: s.label for s in self.sliders}
        moved = {k for state in self.states for k in state}
        shown = ", ".join(f"{labels[k]} = {_fmt(v)}" for k, v in values.items() if k in moved)
        return tr("as first shown: {values}", values=shown) if first else tr("moved: {values}", values=shown)

    def _on_change(self, change=None) -> None:
        if self._quiet:
            return
        with self.renderer.quiet():  # no garbage collection during a redraw (live.render)
            try:
                self._move_followers(change)
                self.image.value = self._render()
                self.message.value = ""
            except (ValueError, TypeError) as exc:  # show bad combinations, keep the last figure
                self.message.value = f"<span style='color:#b00'>{exc}</span>"

    def _move_followers(self, change) -> None:
        """Move the sliders that follow the control that changed (one redraw for both)."""
        if change is None:
            return
        moved = next((n for n, c in self.controls.items() if c is change["owner"]), None)
        self._quiet = True
        try:
            for s in self.sliders:
                if not isinstance(s, Slider):
                    continue
                lo, hi = s.bounds
                if s.follows is not None and s.follows[0] == moved:
                    self.controls[s.name].value = s.convert(min(max(float(s.follows[1](change["new"])), lo), hi))
                elif s.scales_with == moved and change["old"]:
                    ratio = float(change["new"]) / float(change["old"])
                    target = _tidy(float(self.controls[s.name].value) * ratio)
                    self.controls[s.name].value = s.convert(min(max(target, lo), hi))
        finally:
            self._quiet = False

    def _describe(self) -> str:
        vals = ", ".join(f"{k}={_fmt(v)}" for k, v in self.values().items())
        return f"<live figure: {getattr(self.plot, '__name__', 'plot')}({vals})>"

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        if isinstance(bundle, tuple):  # pragma: no cover - (data, metadata) form
            bundle = bundle[0]
        bundle["image/png"] = self.fallback_png
        bundle["text/plain"] = self._describe()
        return bundle, {"image/png": {"width": display_width(self.fallback_png, self.dpi)}}

    def __repr__(self) -> str:
        return self._describe()


def _check_states(states, sliders) -> tuple[dict[str, Any], ...]:
    states = check_sequence(states, "states", dict, "a dict of slider values")
    if len(states) > 2:
        raise ValueError(f"states: show at most 2 states beside the initial one, got {len(states)}")
    names = {s.name for s in sliders}
    for state in states:
        unknown = set(state) - names
        if unknown or not state:
            raise ValueError(f"states: each state sets some of the sliders {sorted(names)}, got {state}")
    return tuple(dict(st) for st in states)


def stack_pngs(frames: Sequence[tuple[str, bytes]], dpi: float = DPI) -> bytes:
    """One PNG of several figures, one under the other, each under a caption.

    Parameters
    ----------
    frames : sequence of (caption, png bytes)
        The figures, rendered at ``dpi``, in display order.
    dpi : float
        Resolution they were rendered at (the captions are drawn at the same).

    Examples
    --------
    >>> from course_lib.plots import figure_to_png
    >>> from course_lib.plots.scaling import laws_figure
    >>> one, two = figure_to_png(laws_figure(0.9, 16)), figure_to_png(laws_figure(0.99, 16))
    >>> display_width(stack_pngs([("p = 0.9", one), ("p = 0.99", two)])) == display_width(one)
    True
    """
    import io

    import numpy as np
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.image import imread, imsave

    from ..plots.style import COLORS, RC, rc_params

    frames = check_sequence(frames, "frames", tuple, "a (caption, png bytes) pair")
    images = [imread(io.BytesIO(png), format="png") for _, png in frames]
    width = max(im.shape[1] for im in images)
    rows = []
    for (caption, _), im in zip(frames, images):
        with rc_context(rc_params()):  # the course's fonts: a Chinese caption gets its glyphs
            band = Figure(figsize=(width / dpi, 0.36), dpi=dpi)
            band.text(0.01, 0.5, caption, va="center", fontsize=RC["axes.titlesize"], color=COLORS[0],
                      fontweight="bold")
            canvas = FigureCanvasAgg(band)
            canvas.draw()
        rows.append(np.asarray(canvas.buffer_rgba(), dtype=np.float32)[:, :width] / 255.0)
        pad = np.ones((im.shape[0], width, 4), dtype=np.float32)
        pad[:, : im.shape[1], : im.shape[2]] = im[..., :4] if im.shape[2] == 4 else im
        rows.append(pad)
    buf = io.BytesIO()
    imsave(buf, np.concatenate(rows, axis=0), format="png", dpi=dpi)
    return buf.getvalue()


def live_figure(
    plot: Callable[..., Any],
    sliders: Sequence[Slider | Choice],
    dpi: int = DPI,
    states: Sequence[dict[str, Any]] = (),
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
        Resolution of the rendered PNG (2x the display density by default).
    states : sequence of dict
        Up to two further slider settings (``{"n": 256}``) that the static fallback
        shows under the initial state, for readers without a kernel (GitHub, nbviewer,
        slides), where the figure's point is what changes when a slider moves.
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
    return LiveFigure(plot, sliders, fixed, dpi, states)


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
