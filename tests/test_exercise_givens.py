"""Every exercise has givens of its own: its answer is not printed above it.

An exercise that asks for a number the notebook has already printed teaches nothing: the
learner copies it. For every exercise of every notebook this test takes the expected answer
from the stored output of the exercise's solution cell (the checker prints
``✓ Correct: <name> = <value> <unit>.``) and looks for it in the stored outputs of every cell
ABOVE the exercise - streams, ``text/plain`` (which holds a figure's title,
``<Figure: ...>``) and ``text/markdown``; images are not read.

A number counts as the answer at the precision a learner would type: a token ``t`` of an
earlier output (``20``, ``0.378``, ``1,024``, ``3.2e-05``, ``20.0%``) matches the expected
value ``v`` if ``t`` has at least two significant digits and ``v`` rounded to that many
significant digits equals ``t`` ("20" matches 20.0 and "0.38" matches 0.3783; "8" alone is
too common to count). A percent is read as the fraction it is (``20.0%`` is 0.2, which the
checkers also take as "20"); its digits alone are not the answer of a count (a measured
"18%" of the peak does not give away "18 steps"). A tuple answer such as ``(2, 8)`` matches the same numbers in
the same order with any of the separators a learner reads as a pair (``(2, 8)``, ``2x8``,
``2 × 8``). Words (``'Gustafson'``) and yes/no answers are not searched: they are one of the
options the question names, so they are always "printed"; that no two exercises ask the same
question is checked by their titles instead.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import fast_schema  # noqa: F401 - before nbformat: see its docstring
import nbformat
import pytest
from nbformat.v4.rwbase import rejoin_lines

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

_EXERCISE = re.compile(r"^#+ *Exercise (\d+)\s*:\s*(.*)$", re.M)
_CORRECT = re.compile(r"✓ Correct: (?P<body>.*?)\.?\s*$", re.M)
#: A number as a notebook prints it: 1,024 / 0.378 / .5 / 3.2e-05 / 20.0% (not a digit of
#: a name such as v100 or N_p2, not the exponent of 1e-05 on its own).
_NUMBER = re.compile(
    r"(?<![\w.])(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?P<exp>[eE][-+]?\d+)?(?P<pct>\s?%)?"
)
#: A unit of time after a number: a time measured on this machine, which can equal an answer
#: that is no time by chance (a step of 63 ms above an answer of 63 micro-batches).
_TIME_UNIT = re.compile(r"\s?(?:ms|s|µs|us|min)\b")
#: What separates the numbers of a pair or grid as printed: (2, 8), 2x8, 2 × 8, 2 by 8.
_PAIR_SEP = r"\s*(?:,|x|X|×|\*|by)\s*"
_FLOAT_DIGITS = 6  # the checkers print floats with 6 significant digits (exercises._fmt)


@dataclass(frozen=True)
class Exercise:
    notebook: str
    number: int
    title: str
    cell: int  # index of the exercise's markdown cell
    answer: str  # the value as the solution's checker printed it, unit stripped


@dataclass(frozen=True)
class Token:
    value: float
    digits: int  # significant digits as printed
    text: str
    timed: bool = False  # followed by a unit of time: a measurement of this machine


def _exercises(nb, name: str) -> list[Exercise]:
    """Each exercise of ``nb`` with the answer its solution cell's check printed."""
    found = []
    starts = [(i, m) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
              for m in _EXERCISE.finditer(c.source)]
    for k, (i, match) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(nb.cells)
        solutions = [c for c in nb.cells[i + 1 : end] if "solution" in c.metadata.get("tags", [])]
        assert solutions, f"{name} exercise {match.group(1)}: no solution cell"
        answers = [m.group("body") for c in solutions for m in _CORRECT.finditer(_outputs(c))]
        assert answers, f"{name} exercise {match.group(1)}: the solution prints no '✓ Correct'"
        found.append(Exercise(name, int(match.group(1)), match.group(2).strip(), i,
                              _answer_text(answers[0])))
    return found


def _answer_text(body: str) -> str:
    """The value of ``<name> = <value> <unit> (<note>)``: the name may hold ``==``."""
    noted = re.fullmatch(r"(.*) = (\S.*?) \([^()]*\)", body)  # an accepted answer's note
    return noted.group(2) if noted else body.rsplit(" = ", 1)[-1]


def _outputs(cell) -> str:
    """The text a reader sees below a code cell: streams, text/plain, text/markdown."""
    if cell.cell_type != "code":
        return ""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        data = out.get("data", {})
        parts += [data[kind] for kind in ("text/plain", "text/markdown") if kind in data]
    return "\n".join("".join(p) if isinstance(p, list) else p for p in parts)


def _significant(mantissa: str) -> int:
    """Significant digits of a number as printed: 0.0048 -> 2, 20 -> 2, 4968.0 -> 5."""
    digits = mantissa.replace(",", "").replace(".", "").lstrip("0")
    return len(digits)


def _tokens(text: str) -> list[Token]:
    """Every number of ``text``; a percent is read as the fraction it is."""
    tokens = []
    for m in _NUMBER.finditer(text):
        mantissa, exp = m.group("num"), m.group("exp") or ""
        value = float(mantissa.replace(",", "") + exp)
        digits = _significant(mantissa)
        timed = bool(_TIME_UNIT.match(text, m.end()))
        tokens.append(Token(value / 100 if m.group("pct") else value, digits, m.group(0), timed))
    return tokens


def _round_sig(x: float, digits: int) -> float:
    return float(f"{x:.{digits - 1}e}")


def _matches(token: Token, expected: float, expected_digits: int | None = None) -> bool:
    """``expected`` rounded to the token's significant digits is the token (2+ digits).

    ``expected_digits``: digits of ``expected`` as printed (a checker prints 6); a longer
    token is rounded to those, so "0.76704545" still matches the printed 0.767045.
    """
    if token.digits < 2 or token.value == 0 or not math.isfinite(expected) or expected == 0:
        return False
    digits, shown = token.digits, token.value
    if expected_digits is not None and digits > expected_digits:
        digits, shown = expected_digits, _round_sig(token.value, expected_digits)
    return math.isclose(_round_sig(abs(expected), digits), shown, rel_tol=1e-9)


def _expected(answer: str):
    """The answer as a number, a tuple of numbers, or None (a word, a yes/no)."""
    if answer.startswith(("(", "[")):
        numbers = re.findall(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", answer)
        return tuple(float(n) for n in numbers) or None
    m = re.match(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf\b", answer)
    return None if m is None else float(m.group(0))


def _printed_digits(answer: str) -> int | None:
    m = re.match(r"[-+]?(\d+(?:\.\d*)?)(?:[eE][-+]?\d+)?", answer)
    if m is None:
        return None
    digits = _significant(m.group(1))
    return digits if digits >= _FLOAT_DIGITS else None  # fewer: printed exactly


def _tuple_pattern(values: tuple[float, ...]) -> re.Pattern:
    def number(v: float) -> str:
        text = f"{v:g}" if v != int(v) else f"{int(v)}"
        with_commas = f"{int(v):,}" if v == int(v) else text
        return "(?:" + "|".join(map(re.escape, {text, with_commas})) + ")"

    return re.compile(r"(?<![\w.])" + _PAIR_SEP.join(number(v) for v in values) + r"(?![\w.]|,\d)")


def _shown_above(cell) -> str:
    """What a reader has seen of ``cell`` before an exercise below it: a code cell's outputs,
    a Markdown table's rows, and the whole of a "Try it" answer (opened before the exercise)."""
    if cell.cell_type == "code":
        return _outputs(cell)
    if "try-answer" in cell.metadata.get("tags", []):
        return cell.source
    return "\n".join(line for line in cell.source.splitlines() if line.lstrip().startswith("|"))


def _try_answers(cells) -> str:
    return "\n".join(_outputs(c) if c.cell_type == "code" else c.source
                     for c in cells if "try-answer" in c.metadata.get("tags", []))


def find_printed_answers(nb, name: str) -> list[str]:
    """One message per exercise whose answer appears above it: in an output, a table or a
    "Try it" answer (a word answer: in a "Try it" answer)."""
    problems = []
    for ex in _exercises(nb, name):
        expected = _expected(ex.answer)
        if expected is None:  # a word or a yes/no: one of the options the question names,
            word = ex.answer.strip("'\"")  # but a "Try it" answer above must not give it
            said = _try_answers(nb.cells[: ex.cell])
            if word not in ("True", "False") and re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", said, re.I):
                problems.append(f"{ex.notebook} exercise {ex.number} ({ex.title}): the answer {ex.answer} is "
                                "given by a 'Try it' answer above it. Ask the Try-it something else.")
            continue
        if isinstance(expected, float) and math.isinf(expected):
            continue
        for i, cell in enumerate(nb.cells[: ex.cell]):
            text = _shown_above(cell)
            if not text:
                continue
            if isinstance(expected, tuple):
                if len(expected) > 1 and (hit := _tuple_pattern(expected).search(text)):
                    problems.append(_message(ex, i, hit.group(0), text, hit.start()))
                    break
                continue
            timed_answer = bool(re.search(r"\d\s?(?:ms|s|µs|us|min)\b", ex.answer))
            hits = [t for t in _tokens(text) if _matches(t, expected, _printed_digits(ex.answer))
                    and (timed_answer or not t.timed)]
            if hits:
                problems.append(_message(ex, i, hits[0].text, text, text.find(hits[0].text)))
                break
    return problems


def _message(ex: Exercise, cell: int, token: str, text: str, at: int) -> str:
    line = text[text.rfind("\n", 0, at) + 1 : (text.find("\n", at) + 1 or len(text) + 1) - 1]
    return (f"{ex.notebook} exercise {ex.number} ({ex.title}): the answer {ex.answer} is printed "
            f"as {token.strip()!r} in the output of cell {cell}, above the exercise (cell "
            f"{ex.cell}): {line.strip()[:120]!r}. Give the exercise givens of its own.")


@functools.cache
def _load(path: Path):
    """The notebook as stored (read once; nbformat's validation is left out for speed)."""
    return rejoin_lines(nbformat.from_dict(json.loads(path.read_text(encoding="utf-8"))))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_exercise_answer_is_printed_above_it(path):
    problems = find_printed_answers(_load(path), path.name)
    assert not problems, "\n".join(problems)


def test_every_exercise_answer_is_read():
    """The parsing above sees every exercise: a number, a tuple, or a word / yes-no."""
    kinds = {"number": 0, "tuple": 0, "other": 0}
    for path in NOTEBOOKS:
        for ex in _exercises(_load(path), path.name):
            value = _expected(ex.answer)
            kinds["tuple" if isinstance(value, tuple) else "number" if value is not None else "other"] += 1
            if value is None:
                assert ex.answer.startswith("'") or ex.answer in {"True", "False"}, ex
    assert kinds["number"] >= 30 and kinds["tuple"] >= 3, kinds


def test_no_two_exercises_ask_the_same_question():
    """Two exercises with the same title ask the same thing (02 and 03 both had 'which law?')."""
    seen = {}
    for path in NOTEBOOKS:
        for ex in _exercises(_load(path), path.name):
            key = re.sub(r"\W+", " ", ex.title.lower()).strip()
            assert key not in seen, f"{path.name} exercise {ex.number} repeats {seen[key]}: {ex.title!r}"
            seen[key] = f"{path.name} exercise {ex.number}"


# ------------------------------------------------------------ the check can fail
def _synthetic(printed: str, answer_output: str):
    nb = nbformat.v4.new_notebook()
    shown = nbformat.v4.new_code_cell("print(...)")
    shown.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    question = nbformat.v4.new_markdown_cell("### Exercise 1: a question\n\nWhat is it?")
    solution = nbformat.v4.new_code_cell("answer = ...", metadata={"tags": ["solution"]})
    solution.outputs = [nbformat.v4.new_output(
        "execute_result", data={"text/markdown": answer_output, "text/plain": answer_output},
        execution_count=1)]
    nb.cells = [shown, question, solution]
    return nb


@pytest.mark.parametrize(
    ("printed", "answer"),
    [
        ("limit 1/(1-p) =      20", "✓ Correct: largest speedup = 20."),
        ("S = 6.400", "✓ Correct: speedup on 16 devices = 6.4."),
        ("serial fraction e = 0.38", "✓ Correct: serial fraction e at N = 2 = 0.378493."),
        ("   256   8192   62000   390.5   16   12.72   0.80", "✓ Correct: efficiency = 0.795326."),
        ("a rate of 3.2e-05 per step", "✓ Correct: rate = 3.2e-05."),
        ("1,024 chips", "✓ Correct: chips = 1024 devices."),
        ("<Figure: bubble measured 21.8%, formula = 20.0%>", "✓ Correct: bubble share = 0.2."),
        (" 2x8:   46.4 ms", "✓ Correct: best split (D, P) = (2, 8)."),
        ("shape (16, 128, 28, 28)", "✓ Correct: output shape = (16, 128, 28, 28)."),
        ("D(B) / D_min = 5.0000", "✓ Correct: samples relative to the minimum = 5."),
    ],
)
def test_the_check_catches_a_printed_answer(printed, answer):
    problems = find_printed_answers(_synthetic(printed, answer), "synthetic.ipynb")
    assert len(problems) == 1 and "synthetic.ipynb exercise 1 (a question)" in problems[0]
    assert "cell 0" in problems[0], problems[0]


@pytest.mark.parametrize(
    ("printed", "answer"),
    [
        ("N = 8 devices", "✓ Correct: steps = 8 steps."),  # one digit: too common to count
        ("S = 6.5", "✓ Correct: speedup = 6.4."),
        ("0.37", "✓ Correct: e = 0.378493."),
        ("v100_sxm2 at 12.72", "✓ Correct: x = 100."),
        ("12,544 rows", "✓ Correct: im2col matrix = (12544, 576)."),  # not the pair
        ("28 x 28 pixels", "✓ Correct: grid = (2, 8)."),
        ("Gustafson: S = 57.7", "✓ Correct: law = 'Gustafson'."),
        ("False", "✓ Correct: mean of shard means == full-batch mean = False."),
    ],
)
def test_the_check_lets_other_numbers_pass(printed, answer):
    assert find_printed_answers(_synthetic(printed, answer), "synthetic.ipynb") == []


def test_the_check_reads_tables_and_try_it_answers():
    """A Markdown table above, or a "Try it" answer above, gives an answer away as an output does."""
    table = _synthetic("nothing here", "✓ Correct: GFLOPs of the model = 7.8.")
    table.cells.insert(0, nbformat.v4.new_markdown_cell("| model | GFLOPs |\n|---|---|\n| ResNet-50 | 7.8 |"))
    assert len(find_printed_answers(table, "t.ipynb")) == 1
    prose = _synthetic("nothing here", "✓ Correct: GFLOPs of the model = 7.8.")
    prose.cells.insert(0, nbformat.v4.new_markdown_cell("ResNet-50 needs about 7.8 GFLOPs, chapter 03 says."))
    assert find_printed_answers(prose, "t.ipynb") == []  # prose numbers are not a printed table
    word = _synthetic("nothing here", "✓ Correct: start method = 'fork'.")
    word.cells.insert(0, nbformat.v4.new_markdown_cell(
        "<details><summary>Answer</summary>\n\nNo: `fork` copies the parent.\n\n</details>",
        metadata={"tags": ["try-answer"]}))
    assert len(find_printed_answers(word, "t.ipynb")) == 1
    word.cells[0].source = "<details><summary>Answer</summary>\n\n`forkserver` copies a server.\n\n</details>"
    assert find_printed_answers(word, "t.ipynb") == []


def test_the_answer_is_read_from_the_checkers_message():
    assert _answer_text("samples relative to the minimum = 5") == "5"
    assert _answer_text("mean of shard means == full-batch mean = False") == "False"
    assert _answer_text("serial fraction e at N = 2 = 0.122649") == "0.122649"
    assert _answer_text("x = 0.3793 (from S = 1.45 as printed)") == "0.3793"
    assert _expected("1.08e+10 FLOP") == 1.08e10 and _expected("17.15 ms") == 17.15
    assert _expected("(16, 128, 28, 28)") == (16, 128, 28, 28)
    assert _expected("'Gustafson'") is None and _expected("False") is None
    assert [t.text for t in _tokens("n =   4: e = 0.0113, 1,024 chips, 3.2e-05, v100, 20.0%")] == [
        "4", "0.0113", "1,024", "3.2e-05", "20.0%"]
    assert [t.value for t in _tokens("18% of the roofline")] == [0.18]  # not 18 (steps, say)


# ------------------------------------------------------------ the givens are stated
def _questions(name: str) -> dict[int, str]:
    nb = _load(ROOT / "notebooks" / name)
    out = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for m in _EXERCISE.finditer(cell.source):
                out[int(m.group(1))] = cell.source[m.start():]
    return out


def _stated_givens():
    """(notebook, exercise, phrases): each exercise given new givens states them as its
    chapter module's constants say (notebook 14: tests/test_notebooks.py; 10 Ex2, 12 Ex1-2:
    tests/test_exercises_memory_tensor.py)."""
    from course_lib.exercises import (
        collectives,
        data_parallelism,
        hybrid_parallelism,
        large_batches,
        memory,
        operator_algorithms,
        operator_parallelism,
        pipeline_parallelism,
        scaling_laws,
        serial_to_parallel,
        tensor_parallelism,
        training_cost,
        under_the_hood,
    )

    b1, f1 = serial_to_parallel.EX1_BATCH, serial_to_parallel.EX2_PERIODS
    laws = scaling_laws
    l2, s2, d2, g2, e2 = laws.EX1_LIMIT, laws.EX2_SPEEDUP, laws.EX3_DEVICES, laws.EX4_GUSTAFSON, laws.EX5_LAMB
    r3, k3, i3, j4 = training_cost.EX2_SETUP, large_batches.EX1_SCALING, large_batches.EX3_ITERATION, large_batches.EX4_JOB
    a6 = laws.EX6_ARCHIVE
    n_conv = sum(kind == "conv" for _, kind in operator_parallelism.DEEP_CNN_LAYERS)
    l5, w6, u6 = operator_parallelism.LAYER, operator_algorithms.WINOGRAD_LAYER, operator_algorithms.UPDATE
    p7, a7, shm12 = data_parallelism.EX3_PS, data_parallelism.EX4_SETUP, under_the_hood.EX2_SHM
    b9, h12, z8 = pipeline_parallelism.BUBBLE, hybrid_parallelism.BEST_SPLIT, memory.ZERO
    t11, s11 = tensor_parallelism.LAYER_TRAFFIC, tensor_parallelism.SEQUENCE_MEMORY
    ta12, da12 = hybrid_parallelism.TENSOR_AXIS, hybrid_parallelism.DATA_AXIS
    c1, c2, c3, c4 = collectives.EX1_ALLTOALL, collectives.EX2_TOY, collectives.EX3_STEP, collectives.EX4_STALE
    words = {2: "Two", 3: "Three", 4: "Four"}
    return [
        ("01_serial_to_parallel.ipynb", 1, [b1["model"], f"a batch of {b1['images']} images"]),
        ("01_serial_to_parallel.ipynb", 2, [f"processors from {f1['later'][0]} to {f1['later'][1] - 1}",
                                            f"from {f1['earlier'][0]} to {f1['earlier'][1] - 1}"]),
        ("02_scaling_laws.ipynb", 1, [f"spends {l2['serial']:.0%} of its serial run time"]),
        ("02_scaling_laws.ipynb", 2, [f"on {s2['devices']} devices", f"$p = {s2['p']:g}$",
                                      f"$N = {s2['devices']}$"]),
        ("02_scaling_laws.ipynb", 3, [f"$p = {d2['p']:g}$", f"at least {d2['target']:g}"]),
        ("02_scaling_laws.ipynb", 4, [f"On {g2['devices']} devices", f"{g2['p']:.0%} of its *parallel*",
                                      f"$p = {g2['p']:g}$"]),
        ("02_scaling_laws.ipynb", 5, [f"the {e2['devices']:,}-chip run relative to the {e2['baseline']:,}-chip run"]),
        ("02_scaling_laws.ipynb", 6, [f"archive of {a6['images'] / 1e6:g} million images",
                                      f"batches of {a6['batch_per_gpu']} images",
                                      f"from {a6['gpus'][0]} to {a6['gpus'][1]} GPUs"]),
        ("03_training_cost.ipynb", 2, [r3["model"], f"for {r3['epochs']} epochs",
                                       f"on {r3['devices']} V100 SXM2 GPUs", f"utilisation of {r3['utilisation']:g}",
                                       f"efficiency of {r3['efficiency']:g}"]),
        ("04_large_batches.ipynb", 1, [f"batch {k3['base_batch']:,} at learning rate {k3['base_lr']:g}",
                                       f"for batch {k3['batch']:,}"]),
        ("04_large_batches.ipynb", 3, [f"on {i3['devices']:,} chips compared with {i3['baseline']:,} chips",
                                       f"$t_{{\\text{{step}}}}({i3['baseline']}) / t_{{\\text{{step}}}}({i3['devices']})$"]),
        ("04_large_batches.ipynb", 4, [", ".join(f"{c:,}" for c in j4["chips"][:-1]) + f" and {j4['chips'][-1]:,} chips",
                                       f"with {j4['batch_per_chip']} sequences per chip",
                                       f"the same {j4['iterations']:,} iterations"]),
        ("05_operator_parallelism.ipynb", 1, [f"batch {l5['batch']}", f"{l5['c_in']} input and {l5['c_out']} output channels",
                                              f"a {l5['image']}×{l5['image']} image", f"a {l5['kernel']}×{l5['kernel']} kernel",
                                              f"stride {l5['stride']}, padding {l5['padding']}"]),
        ("06_operator_algorithms.ipynb", 1, [f"$C_i = {w6['c_in']}$ input and $C_o = {w6['c_out']}$ output"]),
        ("06_operator_algorithms.ipynb", 3, [f"{u6['params'] / 1e6:g} million float{8 * u6['bytes_per_number']} parameters"]),
        ("05_operator_parallelism.ipynb", 3, [f"{n_conv} convolutions and a linear classifier",
                                              "`ex.DEEP_CNN_LAYERS`"]),
        ("07_data_parallelism.ipynb", 3, [f"$t_c = {p7['compute_ms']:g}$ ms", f"{p7['bandwidth_gbit']:g} Gbit/s",
                                          f"{p7['latency_us']:g} µs latency"]),
        ("07_data_parallelism.ipynb", 4, [f"{8 * a7['bytes_per_param']}-bit gradients",
                                          f"{a7['params'] / 1e6:g} million parameters",
                                          f"{a7['bytes_per_param']} bytes per parameter",
                                          f"the {a7['devices']} GPUs", f"{a7['bandwidth'] / 1e9:g} GB/s",
                                          f"{a7['latency'] * 1e6:g} µs"]),
        ("08_collectives.ipynb", 1, [f"the {c1['devices']} GPUs", f"holds {c1['nbytes'] // 2**20} MiB",
                                     f"{c1['bandwidth'] / 1e9:g} GB/s", f"{c1['latency'] * 1e6:g} µs"]),
        ("08_collectives.ipynb", 2, [f"{words[c2['workers']]} workers", f"float{8 * c2['itemsize']} buffer of {c2['n']} numbers",
                                     f"worker {c2['rank']} read"]),
        ("08_collectives.ipynb", 3, [f"{len(c3['backward_ms'])} buckets", f"forward {c3['forward_ms']:g};",
                                     "backward " + ", ".join(f"{t:g}" for t in c3["backward_ms"]) + ";",
                                     "all-reduce " + ", ".join(f"{t:g}" for t in c3["allreduce_ms"]) + ";",
                                     f"update {c3['update_ms']:g}."]),
        ("08_collectives.ipynb", 4, [f"$w_0 = {c4['w0']:g}$", f"$\\gamma = {c4['lr']:g}$", f"$\\delta = {c4['delay']}$",
                                     f"$w_{c4['steps']}$", f"after {c4['steps']} updates"]),
        ("17_under_the_hood.ipynb", 2, [f"`{entry}`" for entry in shm12["listing"]]
         + [", ".join(map(str, shm12["alive"][:-1])) + f" and {shm12['alive'][-1]}"]),
        ("09_memory.ipynb", 1, [f"**{z8['n_params'] / 1e9:g} billion** parameters", f"**{z8['devices']}** data-parallel",
                                f"**ZeRO stage {z8['zero_stage']}**"]),
        ("11_pipeline_parallelism.ipynb", 1, [f"$N_p = {b9['stages']}$", f"$M = {b9['micro_batches']}$"]),
        ("12_tensor_parallelism.ipynb", 3, [f"$h = {t11['hidden']:,}$".replace(",", "{,}"),
                                            f"$L = {t11['seq_length']:,}$".replace(",", "{,}"),
                                            f"$b = {t11['micro_batch']}$ sequences", f"{8 * t11['bytes_per_value']}-bit",
                                            f"$N_t = {t11['tensor']}$"]),
        ("12_tensor_parallelism.ipynb", 4, [f"$h = {s11['hidden']:,}$".replace(",", "{,}"), f"$a = {s11['heads']}$",
                                            f"sequence length ${s11['seq_length']:,}$".replace(",", "{,}"),
                                            f"micro-batch {s11['micro_batch']}", f"$N_t = {s11['tensor']}$"]),
        ("14_hybrid_parallelism.ipynb", 1, [f"on {h12['devices']} V100s", f"global batch {h12['batch_size']:,}",
                                            f"latency {h12['latency'] * 1e6:g} µs",
                                            f"$N_d \\times N_p = {h12['devices']}$"]),
        ("14_hybrid_parallelism.ipynb", 2, [f"$n_{{\\text{{layers}}}} = {ta12['layers']}$",
                                            f"$h = {ta12['hidden']:,}$".replace(",", "{,}"),
                                            f"$L = {ta12['seq_length']:,}$".replace(",", "{,}"),
                                            f"$N_t = {ta12['tensor']}$", f"$N_p = {ta12['pipeline']}$",
                                            f"$b = {ta12['micro_batch']}$ sequence", f"$M = {ta12['micro_batches']}$",
                                            f"{8 * ta12['bytes_per_value']}-bit activations"]),
        ("14_hybrid_parallelism.ipynb", 3, [f"{da12['params'] / 1e9:g} billion parameters",
                                            f"{8 * da12['bytes_per_param']}-bit gradients",
                                            f"{da12['data']} \\times {da12['pipeline']} \\times {da12['tensor']}$",
                                            f"$N_d = {da12['data']}$", f"{da12['bandwidth'] / 1e9:g} GB/s",
                                            f"latency of {da12['latency'] * 1e6:g} µs"]),
    ]


def test_questions_state_their_givens_as_the_constants_say():
    for name, number, phrases in _stated_givens():
        question = _questions(name)[number]
        for phrase in phrases:
            assert phrase in question, f"{name} exercise {number} should state {phrase!r}"


def test_a_measured_time_that_equals_a_count_is_no_leak():
    printed = "pipeline 1 x 2, M = 4      2 proc.     63 ms   1.67x faster"
    assert find_printed_answers(_synthetic(printed, "✓ Correct: micro-batches = 63."), "synthetic.ipynb") == []
    caught = find_printed_answers(_synthetic(printed, "✓ Correct: time per step = 63 ms."), "synthetic.ipynb")
    assert len(caught) == 1
