"""The code a notebook displays is the lecture's pseudo-code.

Every ``inspect.getsource(...)`` target of every notebook (a function, or each method of a
class) has at most 25 lines of body, docstring left out, and none of the machinery:
timers and the step clock (``with clock(...)``, a ``monitor``), progress reports, fault
injection, argument checks or report assembly live beside it (``course_lib.parallel.engine``:
the step monitor, the ``@timed`` communicators, the launcher), never inside.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_BODY = 25
#: What belongs to the machinery, not to the algorithm.
MACHINERY = re.compile(
    r"time\.perf_counter|time\.time\(|\.progress\(|maybe_fire|\bcheck_\w+\(|"
    r"isinstance\(|timings\[|hashlib|ProgressBar|\bclock\b|\bmonitor\b|StepMonitor"
)
#: Words of MACHINERY that are the algorithm itself in one displayed function (by qualified
#: name): the modelled wire's clock times nothing, it says when a bucket's sum arrives
#: (chapter 08, ``WireAllReduce.reduce_bucket``).
ALGORITHM = {"WireAllReduce.reduce_bucket": re.compile(r"self\.clock\(\)")}


def _displayed() -> list[tuple[str, str]]:
    """(notebook, dotted target) of every getsource call in the notebooks' code, its name
    resolved through the notebook's imports (parsed, so an import over several lines counts)."""
    found = []
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        imported, targets = {}, []
        for cell in (c for c in cells if c["cell_type"] == "code"):
            source = "\n".join(line for line in "".join(cell["source"]).splitlines()
                               if not line.lstrip().startswith(("%", "!")))  # IPython magics
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "course_lib":
                    imported.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
                elif isinstance(node, ast.Import):
                    imported.update({a.asname: a.name for a in node.names if a.asname})
                elif (isinstance(node, ast.Call) and node.args and getattr(node.func, "attr", None) == "getsource"
                      and re.fullmatch(r"[\w.]+", target := ast.unparse(node.args[0]))):
                    targets.append(target)
        for target in targets:
            head, _, rest = target.partition(".")
            dotted = imported.get(head, f"course_lib.{head}") + (f".{rest}" if rest else "")
            found.append((path.stem, dotted))
    return found


def _resolve(dotted: str):
    """The object ``dotted`` names (a module, then attributes); ImportError or AttributeError."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def body_lines(func) -> list[str]:
    """The lines of ``func``'s body, its docstring, blank lines and comment lines left out."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    node = tree.body[0]
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    if not body:
        return []
    lines = textwrap.dedent(inspect.getsource(func)).splitlines()[body[0].lineno - 1 : body[-1].end_lineno]
    return [line for line in lines if line.strip() and not line.strip().startswith("#")]


def _functions(obj):
    if inspect.isclass(obj):
        return [f for name, f in vars(obj).items() if inspect.isfunction(f)]
    return [obj]


DISPLAYED = _displayed()


def test_the_notebooks_display_the_teaching_core():
    targets = {dotted.rsplit(".", 1)[-1] for _, dotted in DISPLAYED}
    for name in ("worker_loop", "zero1_worker_loop", "tensor_forward", "stage_worker"):
        assert name in targets, f"no notebook displays {name}"
    assert any(dotted.endswith("WireAllReduce.reduce_bucket") for _, dotted in DISPLAYED), \
        "no notebook displays the modelled wire's all-reduce of a bucket"


@pytest.mark.parametrize(("notebook", "dotted"), DISPLAYED, ids=[d for _, d in DISPLAYED])
def test_displayed_code_is_short_and_free_of_machinery(notebook, dotted):
    for func in _functions(_resolve(dotted)):
        lines = body_lines(func)
        assert len(lines) <= MAX_BODY, (
            f"{notebook} displays {func.__qualname__}: {len(lines)} lines of body (at most {MAX_BODY})")
        allowed = ALGORITHM.get(func.__qualname__)
        machinery = [line.strip() for line in lines
                     if MACHINERY.search(allowed.sub("", line.split("#")[0]) if allowed else line.split("#")[0])]
        assert machinery == [], f"{notebook} displays {func.__qualname__} with machinery inside: {machinery}"


def test_the_body_counter_sees_what_it_should():
    def sample(a):
        """Doc."""
        # a comment

        b = a + 1
        t0 = time.perf_counter()  # noqa: F821
        return b, t0

    assert body_lines(sample) == ["    b = a + 1", "    t0 = time.perf_counter()  # noqa: F821",
                                  "    return b, t0"]
    assert MACHINERY.search(body_lines(sample)[1])
    for line in ('with clock("communication"):', "for idx in clock.steps(job.batches()):",
                 "self.monitor.add(bytes=n)", "check_int(n, 'n', 1)", "model.check_x(x)"):
        assert MACHINERY.search(line), line  # timers, the step clock and argument checks are machinery
    for line in ("total = comm.allreduce()", "for idx in batches:", "losses.append(loss)"):
        assert not MACHINERY.search(line), line


def test_the_wire_clock_allowance_lets_no_other_machinery_through():
    allowed = ALGORITHM["WireAllReduce.reduce_bucket"]
    assert not MACHINERY.search(allowed.sub("", "arrival = self.clock() + self.wire_time[b]"))
    for line in ('with clock("communication"):', "t0 = time.perf_counter()", "self.monitor.add(bytes=n)",
                 "self.clock = time.perf_counter"):
        assert MACHINERY.search(allowed.sub("", line)), line
