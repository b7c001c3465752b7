"""One notation for the whole course: the table, its page, and the symbols figures and notebooks use."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from course_lib.datasets import load_notation, notation_markdown

ROOT = Path(__file__).resolve().parent.parent
PLOTS = sorted((ROOT / "course_lib" / "plots").glob("*.py"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

LABEL_CALLS = {"set_xlabel", "set_ylabel", "set_title", "suptitle", "text", "annotate", "set_label"}
TICK_LABEL_NAMES = {"dims", "labels", "names", "ticklabels"}
LABEL_KEYWORDS = {"label", "xlabel", "ylabel", "title", "labels"}
# LaTeX that is an operator or layout, not a symbol
NOT_SYMBOLS = {
    r"\frac", r"\dfrac", r"\tfrac", r"\times", r"\cdot", r"\cdots", r"\approx", r"\qquad", r"\quad",
    r"\lim", r"\to", r"\infty", r"\sum", r"\prod", r"\le", r"\ge", r"\leq", r"\geq", r"\leftarrow",
    r"\log", r"\lceil", r"\rceil", r"\lfloor", r"\rfloor", r"\max", r"\min", r"\left", r"\right",
    r"\big", r"\Big", r"\sqrt", r"\langle", r"\rangle", r"\nabla", r"\underbrace", r"\ldots",
    r"\dots", r"\Longrightarrow", r"\Rightarrow", r"\in", r"\neq", r"\ne", r"\mid", r"\pm", r"\sim",
    r"\ll", r"\gg", r"\hat", r"\bar", r"\tilde", r"\top", r"\circ", r"\odot", r"\partial", r"\exp",
    r"\displaystyle", r"\lVert", r"\rVert", r"\vert", r"\mathbf", r"\mathrm", r"\text", r"\;",
}
_TEXT = re.compile(r"\\(?:text|mathrm|operatorname|textrm|mbox)\{[^{}]*\}")
_SYMBOL = re.compile(
    r"(\\mathcal\{[A-Z]\}|\\[A-Za-z]+|(?<![A-Za-z\\])[A-Za-z](?![A-Za-z]))(_\{[^{}]*\}|_[A-Za-z0-9])?"
)
_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)
# plain-text labels: a capital or Greek letter standing alone ("devices N", "N_p (pipeline stages)")
_PLAIN = re.compile(r"(?<![\w\\{$])([A-Z]|[α-ωΑ-Ω])(_[a-z0-9]+)?(?![\w-])")


def _known() -> set[str]:
    return {e.symbol for e in load_notation()} | {e.text for e in load_notation()}


def math_symbols(expr: str) -> list[str]:
    """Symbols of one LaTeX expression, each with its subscript if it has a one-letter one."""
    found = []
    for match in _SYMBOL.finditer(expr):
        base, sub = match.groups()
        if base in NOT_SYMBOLS or (base.startswith("\\") and len(base) <= 2):
            continue
        if sub and ("\\text" in sub or len(sub.strip("_{} ")) != 1):
            found.append(base)  # a descriptive subscript (t_{\text{ring}}, t_{iter}) qualifies base
        else:
            found.append(base + ("_" + sub.strip("_{}") if sub else ""))
    return found


def allowed(symbol: str, known: set[str]) -> bool:
    """A symbol of the table, or one of them with a subscript that qualifies it (T_1, H_o, g_j)."""
    return symbol in known or symbol.split("_")[0] in known


def label_strings(path: Path) -> list[str]:
    """The string constants a plot module passes to axis labels, titles, legends and texts."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []

    def strings(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else " {} " for v in node.values)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in TICK_LABEL_NAMES for t in node.targets):
            for sub in ast.walk(node.value):
                if isinstance(sub, (ast.Tuple, ast.List)):  # ("label", value) pairs, not s["K"]
                    for element in sub.elts:
                        out.extend(strings(element))
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        args = list(node.args[:1]) if name in LABEL_CALLS else []
        args += [k.value for k in node.keywords if k.arg in LABEL_KEYWORDS]
        for arg in args:
            out.extend(strings(arg))
    return out


def label_symbols(text: str) -> list[str]:
    found = []
    for match in _MATH.finditer(text):
        found += math_symbols(match.group(1) or match.group(2))
    plain = _MATH.sub(" ", text)
    found += [base + (sub or "") for base, sub in _PLAIN.findall(plain) if base not in {"A", "I"}]
    return found


def test_the_page_is_generated_from_the_table():
    page = (ROOT / "notebooks" / "notation.md").read_text(encoding="utf-8")
    assert page == notation_markdown(), "run: python -m course_lib notation"


def test_one_symbol_one_meaning():
    entries = load_notation()
    assert len({e.symbol for e in entries}) == len(entries)
    assert len({e.text for e in entries}) == len(entries)
    # the clashes the teaching audit found each have their own symbol now
    meaning = {e.symbol: e.meaning for e in entries}
    assert meaning["N"].startswith("number of devices")
    assert "parameters" in meaning["P"] and "samples" in meaning["D"] and "speedup" in meaning["S"]
    assert "micro-batches" in meaning["M"] and "efficiency" in meaning[r"\eta"]
    assert "bandwidth" in meaning[r"\beta"] and "message" in meaning["m"]
    assert {"N_d", "N_p", "N_t", r"\gamma", r"\mu", r"\lambda", r"\mathcal{M}"} <= set(meaning)


@pytest.mark.parametrize("path", PLOTS, ids=lambda p: p.name)
def test_figure_labels_use_the_notation(path):
    known = _known()
    bad = {}
    for text in label_strings(path):
        unknown = [s for s in label_symbols(text) if not allowed(s, known)]
        if unknown:
            bad[text] = unknown
    assert not bad, f"{path.name}: symbols not in data/notation.csv: {bad}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_formulas_use_the_notation(path):
    known = _known()
    bad = []
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for match in _MATH.finditer("".join(cell["source"])):
            expr = _TEXT.sub(" ", match.group(1) or match.group(2))
            bad += [(i, s) for s in math_symbols(expr) if not allowed(s, known)]
    assert not bad, f"{path.name}: (cell, symbol) not in data/notation.csv: {bad}"


def test_the_checks_can_fail():
    """A clash from before the notation table is caught, in a label and in a formula."""
    known = _known()
    assert "K" not in known and r"\Psi" not in known
    assert label_symbols("IFmap matrix M×K") == ["M", "K"]
    assert math_symbols(r"(2 + 2)\,\Psi + k\,\Psi / N_d") == [r"\Psi", "k", r"\Psi", "N_d"]
    assert math_symbols(r"t_{\text{ring}} = 2\frac{N-1}{N}\frac{m}{\beta}") == ["t", "N", "N", "m", r"\beta"]


# Forms the course wrote before the notation table; each now has its own symbol.
RETIRED = {
    r"\(S\s*-\s*1\)|M\s*\+\s*S\s*-\s*1": "pipeline stages are N_p: (N_p-1)/(M+N_p-1)",
    r"\b6ND\b": "parameters are P: 6PD",
    r"\\Psi\b": "parameters are P (ZeRO writes Ψ)",
    r"\\eta_\{?lr": "the learning rate is γ",
    r"\bD ?[x×] ?P\b|\bDxP": "the grid is N_d x N_p x N_t",
    r"\bD \* P \* T\b": "the grid has N_d * N_p * N_t devices",
    r"\bD \* S\b|\bd \* S \+ s\b": "a hybrid run has N_d * N_p processes; replica * N_p + q is stage q",
    r"\bS - s\b": "stage q of N_p stages: N_p - q - 1 warm-up forwards, N_p - q held",
    r"\bctx\b": "a worker's context is wctx (ctx also named the multiprocessing context, now mp_context)",
    r"\bW_\{?[qkv][},$`\s]|\bW_\{?o\}?(?=[\s,.$`)])[^\n]{0,40}\b(?:heads?|attention|projection)\b": (
        "attention's weights are A_Q, A_K, A_V, A_O (W is a feature map's width, W_o an output width)"),
}

#: Files that still write a retired form and who rewrites them (issue 26, the lead's process
#: modules); the test fails once a file listed here no longer does, so the list empties.
PENDING: dict[str, set[str]] = {}


def _texts():
    for path in NOTEBOOKS:
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            yield f"{path.name} cell {i}", "".join(cell["source"])
    for path in sorted((ROOT / "course_lib").rglob("*.py")):
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")


@pytest.mark.parametrize("pattern", sorted(RETIRED))
def test_retired_symbols_stay_retired(pattern):
    hits = [where for where, text in _texts() if re.search(pattern, text)]
    pending = PENDING.get(pattern, set())
    assert not pending - set(hits), f"rewritten, remove from PENDING: {sorted(pending - set(hits))}"
    hits = [where for where in hits if where not in pending]
    assert not hits, f"{RETIRED[pattern]}; still written the old way in {hits}"


def test_the_retired_forms_are_caught():
    """Each new pattern finds the form it retires, and not the course's notation."""
    found = {pattern for pattern in RETIRED for text in (
        "``D * P * T = N``", "process ``d * S + s``", "``D * S`` processes", "after ``S - s - 1`` warm-up",
        "def stage_worker(ctx, job):", "its columns of $W_q$", "the rows of $W_o$ by heads", "$W_{q,k,v}$") if re.search(pattern, text)}
    assert {p for p in RETIRED if "ctx" in p or "\\*" in p or "S - s" in p or "W_" in p} <= found
    notation = ("``N_d * N_p * N_t = N``, ``replica * N_p + q``, ``N_p - q - 1``, def f(wctx, mp_context):"
                " $A_Q$ by heads, output size $H_o \\times W_o$, (N, C_out, H_out, W_out)")
    assert not [p for p in RETIRED if re.search(p, notation)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_links_the_notation_page(path):
    first = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
    assert "](notation.md)" in first


def test_the_notation_command_asks_before_writing_an_option(tmp_path):
    """`python -m course_lib notation --help` prints its usage and writes no file named --help."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "course_lib", "notation", "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "usage" in done.stdout
    assert list(tmp_path.iterdir()) == []
    target = tmp_path / "page.md"
    done = subprocess.run([sys.executable, "-m", "course_lib", "notation", str(target)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and target.read_text(encoding="utf-8") == notation_markdown()
