"""Every live figure of every notebook starts at the values its text states, exactly.

The sliders of each live figure are rebuilt from the notebook's own source: the cell's
``Slider``/``Choice`` list is evaluated (not the figure) in a namespace made of the
notebook's import cells and the cheap statements of its live-figure cells, so the test
needs no kernel and no long computation. Then

* each control starts exactly at its given value, as the browser will show it (a log or
  fraction slider's index points at that value; nothing snaps it);
* the stored output of the cell (``<live figure: f(k=v, ...)>``) names the same values;
* where the prose or a print states a slider's starting value, the number stated equals
  the slider's value at the precision it is written (``STATED`` below).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from course_lib.live.widgets import Choice, Slider, ValueSlider, _fmt

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: (notebook prefix, plot function, slider name) -> a regex of the text (markdown or a stored
#: print of the notebook) that states the slider's starting value in its group "v", and the
#: factor from the stated number to the slider's unit.
STATED = {
    ("02", "amdahl_figure", "p"): (r"starts at \$p = (?P<v>[\d.]+)\$", 1),
    ("02", "amdahl_figure", "n"): (r"on \$N = (?P<v>\d+)\$ devices with", 1),
    ("02", "amdahl_figure", "s"): (r"with \$s = (?P<v>[\d.]+)\$", 1),
    ("02", "laws_figure", "p"): (r"starts at \$p = (?P<v>[\d.]+)\$", 1),
    ("02", "laws_figure", "n"): (r"on \$N = (?P<v>\d+)\$ devices with", 1),
    ("03", "cnn_calculator_figure", "images_million"): (r"(?P<v>[\d.]+)M images x \d+ epochs", 1),
    ("03", "cnn_calculator_figure", "epochs"): (r"images x (?P<v>\d+) epochs", 1),
    ("03", "cnn_calculator_figure", "devices"): (r"epochs, (?P<v>\d+) x NVIDIA", 1),
    ("03", "cnn_calculator_figure", "utilisation"): (r"SXM2 32GB +125 +tensor +(?P<v>[\d.]+)", 1),
    ("03", "cnn_calculator_figure", "efficiency"): (r"TFLOP/s x \d+ x (?P<v>[\d.]+)\)", 1),
    ("09", "zero_memory_figure", "params_billion"): (r"\((?P<v>[\d.]+) billion parameters, \d+ GPUs\)", 1),
    ("09", "zero_memory_figure", "devices"): (r"billion parameters, (?P<v>\d+) GPUs\)", 1),
    ("09", "zero_memory_figure", "zero_stage"): (r"stage (?P<v>0): +120\.00 GB per GPU", 1),
    ("07", "comm_dominance_figure", "bandwidth_gbit"): (r"(?P<v>25) Gbit/s +\d+", 1),
    ("03", "transformer_calculator_figure", "params_million"): (r"transformer, (?P<v>\d+)M parameters", 1),
    ("03", "transformer_calculator_figure", "tokens_million"): (r"parameters, (?P<v>[\d,]+)M tokens", 1),
    ("03", "transformer_calculator_figure", "devices"): (r"M tokens, (?P<v>\d+) x NVIDIA", 1),
    ("05", "gemm_sizes_figure", "kernel"): (r"(?P<v>\d+)x\d+, 64 ch, 56x56, B=32", 1),
    ("05", "gemm_sizes_figure", "image"): (r"64 ch, (?P<v>\d+)x\d+, B=32", 1),
    ("05", "gemm_sizes_figure", "batch"): (r"64 ch, 56x56, B=(?P<v>\d+)", 1),
    ("11", "schedule_figure", "stages"): (r"gpipe +N_p = (?P<v>\d+), M = \d+", 1),
    ("11", "schedule_figure", "micro_batches"): (r"gpipe +N_p = \d+, M = (?P<v>\d+)", 1),
    ("16", "laws_figure", "p"): (r"p = (?P<v>[\d.]+): S\(16\)", 1),
}


def _source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _text(cell) -> str:
    """What a reader sees of a cell: its markdown, or its printed output."""
    if cell["cell_type"] == "markdown":
        return _source(cell)
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def _runnable(src: str) -> str:
    return "\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!")))


def _try(stmt, namespace: dict, path: Path) -> None:
    try:
        exec(compile(ast.Module([stmt], []), path.name, "exec"), namespace)
    except Exception:  # needs a measurement of an earlier cell: not a slider's value
        pass


def _live_figures(path: Path):
    """(plot name, controls, stored description, notebook text) of each live figure of ``path``."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"]
    namespace: dict = {}
    for cell in cells:  # every import, and the statements of the cell that imports the widgets
        src = _source(cell)
        if cell["cell_type"] == "code":
            whole = re.search(r"from course_lib\.live(\.widgets)? import", src) is not None
            for stmt in ast.parse(_runnable(src)).body:
                if whole or isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    _try(stmt, namespace, path)
    text = "\n".join(_text(c) for c in cells)
    found = []
    for cell in cells:
        src = _source(cell)
        if cell["cell_type"] != "code" or "live_figure(" not in src:
            continue
        tree = ast.parse(_runnable(src))
        for stmt in tree.body:  # cheap statements (names the sliders use); the figure is not built
            calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "live_figure"]
            if not calls:
                _try(stmt, namespace, path)
                continue
            call = calls[0]
            controls = eval(compile(ast.Expression(call.args[1]), path.name, "eval"), namespace)
            if isinstance(stmt, ast.Assign):  # later cells may reuse the sliders
                namespace[stmt.targets[0].id] = None
            stored = "".join("".join(o["data"].get("text/plain", "")) for o in cell.get("outputs", [])
                             if "data" in o)
            found.append((call.args[0].id, controls, stored, text))
    return found


FIGURES = [(path.name[:2], *figure) for path in NOTEBOOKS for figure in _live_figures(path)]


def test_every_notebook_with_sliders_is_read():
    names = {(nb, plot) for nb, plot, *_ in FIGURES}
    assert {("02", "amdahl_figure"), ("02", "laws_figure"), ("03", "cnn_calculator_figure"),
            ("03", "transformer_calculator_figure"), ("09", "zero_memory_figure"),
            ("07", "comm_efficiency_figure"), ("14", "hybrid_explorer_figure"), ("16", "laws_figure")} <= names
    assert len(FIGURES) >= 12


@pytest.mark.parametrize(("nb", "plot", "controls", "stored", "text"), FIGURES,
                         ids=[f"{nb}-{plot}" for nb, plot, *_ in FIGURES])
def test_each_slider_starts_exactly_at_its_value(nb, plot, controls, stored, text):
    for spec in controls:
        widget = spec.make_widget()
        assert widget.value == spec.value, f"{nb} {plot}: {spec.name} starts at {widget.value}, not {spec.value}"
        if isinstance(spec, Slider) and spec.typed:
            assert isinstance(widget, ValueSlider)
            index = widget.slider.index  # what the browser holds
            assert widget.slider.options[index][1] == spec.value
            assert widget.box.value == spec.format(spec.value)
        if isinstance(spec, Slider) and spec.kind == "float":  # the browser keeps a value on the steps
            assert abs((spec.value - spec.min) / spec.step - round((spec.value - spec.min) / spec.step)) < 1e-6
    values = ", ".join(f"{s.name}={_fmt(s.convert(s.value))}" for s in controls)
    assert f"{plot}({values})" in stored, f"{nb} {plot}: the stored output is not the given state: {stored}"


@pytest.mark.parametrize(("nb", "plot", "controls", "stored", "text"), FIGURES,
                         ids=[f"{nb}-{plot}" for nb, plot, *_ in FIGURES])
def test_the_text_states_the_values_the_sliders_start_at(nb, plot, controls, stored, text):
    for spec in controls:
        if isinstance(spec, Choice) or (nb, plot, spec.name) not in STATED:
            continue
        pattern, factor = STATED[(nb, plot, spec.name)]
        match = re.search(pattern, text)
        assert match, f"{nb} {plot}: the text no longer states {spec.name} ({pattern!r})"
        stated = match.group("v").replace(",", "")
        decimals = len(stated.split(".")[1]) if "." in stated else 0
        assert round(spec.value * factor, decimals) == pytest.approx(float(stated)), (
            f"{nb} {plot}: {spec.name} starts at {spec.value}, the text says {stated}")


def test_the_table_of_stated_values_names_real_sliders():
    sliders = {(nb, plot, s.name) for nb, plot, controls, *_ in FIGURES for s in controls}
    assert set(STATED) <= sliders, set(STATED) - sliders


def test_the_stated_value_check_fails_on_a_contradiction():
    spec = Slider("params_billion", "parameters", -1, 3, 0.01, 7.58578, unit="billion", kind="log")
    text = "(7.5 billion parameters, 64 GPUs)"
    with pytest.raises(AssertionError, match="the text says 7.5"):
        test_the_text_states_the_values_the_sliders_start_at("09", "zero_memory_figure", [spec], "", text)
