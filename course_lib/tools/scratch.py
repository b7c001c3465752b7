"""The scratch edition ("build it yourself"): the student edition with the teaching core to write.

``python -m course_lib scratch`` (``make scratch``) writes ``build/scratch/``, a folder that
runs on its own as the student edition does (:func:`course_lib.tools.student.write_edition`:
no solutions, speaker notes or stored answers), in which the bodies of the teaching core's
functions (:data:`course_lib.grading.TEACHING_CORE`) are stubs: signature, decorators and
docstring as they are, the comments of the body as a skeleton, and
``raise NotImplementedError("<name> is not written yet. Read chapter ..., section ...")``,
the chapter and section found in the notebooks (the cell that displays the function). The
stubs are generated from the source with :mod:`ast` and :mod:`tokenize` (:func:`stub_source`),
never kept by hand. The notebooks call ``course_lib``, the edition's own, so a chapter runs
once its functions are written; the stored outputs of the cells that display a stubbed
function's source are cleared (they would show the course's code). ``make check`` in the
edition grades the learner's functions (:mod:`course_lib.grading`); its README lists them in
the order to write them, with hints that open one at a time.

``python -m course_lib scratch --fill DIR`` puts the course's bodies back into the edition
``DIR`` (:func:`fill_edition`): what CI does to prove that the filled edition is the course
again, file for file, and that its checks pass.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import sys
import textwrap
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._validate import check_sequence, check_type
from ..grading.core import TEACHING_CORE, Function, not_written_message
from .cells import cell_source
from .student import TEMPLATES, edition_parser, edition_paths, student_notebook, write_edition

__all__ = [
    "displays",
    "fill_edition",
    "fill_source",
    "main",
    "scratch_notebook",
    "stub_source",
    "where_to_read",
    "write_scratch_edition",
]

#: The scratch edition's own README.md and Makefile.
TEMPLATE_DIR = TEMPLATES / "scratch"
#: Comments of a body that are no skeleton (linters' and coverage's marks).
_NOT_SKELETON = re.compile(r"#\s*(?:noqa|pragma|type:)\b.*$")


# ----------------------------------------------------------------------- stubs
def _function(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    """The definition of ``qualname`` (``Class.method`` or ``function``) in ``tree``."""
    body, node = tree.body, None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            raise ValueError(f"no definition of {qualname} in the source")
        body = node.body
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise ValueError(f"{qualname} is not a function")
    return node


def _body_lines(source: str, qualname: str) -> tuple[int, int, int]:
    """``(first, last, indent)``: the lines (1-based, inclusive) of ``qualname``'s body after
    its docstring, and the body's indentation. A function of the teaching core has a docstring."""
    node = _function(ast.parse(source), qualname)
    doc = node.body[0]
    if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)):
        raise ValueError(f"{qualname} has no docstring: its stub would not say what it does")
    if len(node.body) < 2:
        raise ValueError(f"{qualname} has no body after its docstring")
    return doc.end_lineno + 1, node.end_lineno, node.body[1].col_offset


def _comments(source: str, first: int, last: int) -> list[str]:
    """The comments of lines ``first .. last``, each at the indentation of its line."""
    lines = source.splitlines()
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and first <= tok.start[0] <= last:
            text = _NOT_SKELETON.sub("", tok.string).rstrip()
            if text.strip("# "):
                line = lines[tok.start[0] - 1]
                out.append(line[: len(line) - len(line.lstrip())] + text)
    return out


def _raise(message: str, indent: int) -> list[str]:
    """``raise NotImplementedError(message)`` over lines of readable length."""
    pad = " " * indent
    parts = textwrap.wrap(message, 88 - indent, break_long_words=False, break_on_hyphens=False, drop_whitespace=False)
    return [f"{pad}raise NotImplementedError("] + [f"{pad}    {part!r}" for part in parts] + [f"{pad})"]


def stub_source(source: str, qualname: str, message: str) -> str:
    """``source`` (a module's text) with the body of ``qualname`` replaced by its stub: the
    body's comments as a skeleton, then ``raise NotImplementedError(message)``. Signature,
    decorators and docstring stay as they are.

    Examples
    --------
    >>> src = '''def f(x):
    ...     \"\"\"Twice x.\"\"\"
    ...     y = x + x  # add it to itself
    ...     return y
    ... '''
    >>> print(stub_source(src, "f", "f is not written yet"))
    def f(x):
        \"\"\"Twice x.\"\"\"
        # add it to itself
        raise NotImplementedError(
            'f is not written yet'
        )
    <BLANKLINE>
    """
    for value, name in ((source, "source"), (qualname, "qualname"), (message, "message")):
        check_type(value, name, str, "a str")
    first, last, indent = _body_lines(source, qualname)
    lines = source.splitlines(keepends=True)
    stub = _comments(source, first, last) + _raise(message, indent)
    return "".join(lines[: first - 1]) + "".join(line + "\n" for line in stub) + "".join(lines[last:])


def fill_source(source: str, original: str, qualname: str) -> str:
    """``source`` with the body of ``qualname`` taken from ``original`` (the course's text of
    the same module): what a learner does, done with the course's code.

    Examples
    --------
    >>> course = 'def f(x):\\n    \"\"\"Twice x.\"\"\"\\n    return x + x\\n'
    >>> fill_source(stub_source(course, "f", "not written yet"), course, "f") == course
    True
    """
    for value, name in ((source, "source"), (original, "original"), (qualname, "qualname")):
        check_type(value, name, str, "a str")
    first, last, _ = _body_lines(source, qualname)
    o_first, o_last, _ = _body_lines(original, qualname)
    lines, o_lines = source.splitlines(keepends=True), original.splitlines(keepends=True)
    return "".join(lines[: first - 1] + o_lines[o_first - 1 : o_last] + lines[last:])


# ----------------------------------------------------------------------- where each function is read
def _displayed(nb: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(cell index, dotted target) of every ``inspect.getsource(...)`` in ``nb``'s code, its
    name resolved through the notebook's imports (as tests/test_teaching_core.py reads them)."""
    imported: dict[str, str] = {}
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        code = "\n".join(line for line in cell_source(cell).splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "course_lib":
                imported.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
            elif isinstance(node, ast.Import):
                imported.update({a.asname: a.name for a in node.names if a.asname})
            elif (isinstance(node, ast.Call) and node.args and getattr(node.func, "attr", None) == "getsource"
                  and re.fullmatch(r"[\w.]+", target := ast.unparse(node.args[0]))):
                head, _, rest = target.partition(".")
                found.append((i, imported.get(head, f"course_lib.{head}") + (f".{rest}" if rest else "")))
    return found


def _headings(nb: Mapping[str, Any], upto: int) -> tuple[str, str, str]:
    """The chapter's title, and the section and subsection headings above cell ``upto``."""
    title = section = sub = ""
    for cell in nb["cells"][:upto]:
        if cell.get("cell_type") != "markdown":
            continue
        for line in cell_source(cell).splitlines():
            if line.startswith("# ") and not title:
                title = line[2:].strip()
            elif line.startswith("## "):
                section, sub = line[3:].strip(), ""
            elif line.startswith("### "):
                sub = line[4:].strip()
    return title, section, sub


def displays(notebooks: Path) -> dict[str, str]:
    """Every function or class the notebooks in ``notebooks`` display, and where: dotted
    name -> "chapter NN · title, section ... (notebooks/NN_x.ipynb)" (the last display wins)."""
    out: dict[str, str] = {}
    notebooks = Path(check_type(notebooks, "notebooks", (str, os.PathLike), "a folder of notebooks"))
    for path in sorted(notebooks.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for index, dotted in _displayed(nb):
            title, section, sub = _headings(nb, index)
            where = f"chapter {title}" if title else f"notebooks/{path.name}"
            if section:
                where += f", section {section}"
            if sub:
                where += f", \u201c{sub}\u201d"
            out[dotted] = f"{where} (notebooks/{path.name})"
    return out


def where_to_read(function: Function, shown: Mapping[str, str]) -> str:
    """Where the notebooks display ``function`` (``shown``: :func:`displays`): the function
    itself, else its class, else another method of its class; else the reading guide."""
    check_type(function, "function", Function, "a Function of TEACHING_CORE")
    check_type(shown, "shown", Mapping, "what displays() returns (a mapping)")
    dotted = f"{function.module}.{function.qualname}"
    if dotted in shown:
        return shown[dotted]
    owner = dotted.rsplit(".", 1)[0]
    if "." in function.qualname:
        if owner in shown:
            return shown[owner]
        siblings = [where for name, where in shown.items() if name.startswith(owner + ".")]
        if siblings:
            return siblings[0]
    return "the chapter that shows it (the course's reading guide lists them)"


# ----------------------------------------------------------------------- the edition
def scratch_notebook(nb: Mapping[str, Any], stubbed: Iterable[str]) -> dict[str, Any]:
    """A notebook of the scratch edition: :func:`course_lib.tools.student.student_notebook`,
    and no stored output in a cell that displays the source of a function in ``stubbed``
    (dotted names), or of a class holding one: it would show the course's code.

    Examples
    --------
    >>> nb = {"cells": [{"cell_type": "code", "metadata": {}, "execution_count": 1,
    ...        "source": "from course_lib.parallel import data\\nprint(inspect.getsource(data.worker_loop))",
    ...        "outputs": [{"output_type": "stream", "name": "stdout", "text": "def worker_loop(...)"}]}],
    ...       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    >>> scratch_notebook(nb, ["course_lib.parallel.data.worker_loop"])["cells"][0]["outputs"]
    []
    """
    stubbed = set(check_sequence(stubbed, "stubbed", str, "dotted names (str)"))
    out = student_notebook(nb)
    hidden = {i for i, dotted in _displayed(out)
              if dotted in stubbed or any(s.startswith(dotted + ".") for s in stubbed)}
    for i in hidden:
        out["cells"][i]["outputs"], out["cells"][i]["execution_count"] = [], None
    return out


def _readme_fields(shown: Mapping[str, str]) -> dict[str, str]:
    """The README's table of the functions in the order to write them, and their hints."""
    rows = ["| # | function | write it in | read first | check it |", "|---|---|---|---|---|"]
    hints = []
    for i, f in enumerate(TEACHING_CORE, 1):
        where = where_to_read(f, shown).replace("|", "\\|")
        rows.append(f"| {i} | `{f.qualname}` | `{f.path}` | {where} | `make check NAME={f.check_name}` |")
        steps = f.hints()
        nested = ""
        for k in reversed(range(len(steps))):
            inner = f"\n{nested}\n" if nested else ""
            nested = f"<details><summary>Hint {k + 1}</summary>\n\n{steps[k]}\n{inner}\n</details>"
        hints.append(f"### {i}. `{f.qualname}`\n\n{nested}")
    return {"function_count": str(len(TEACHING_CORE)), "function_table": "\n".join(rows),
            "hints": "\n\n".join(hints)}


def write_scratch_edition(root: Path | str | None = None, target: Path | str | None = None) -> list[Path]:
    """Write the scratch edition of the course folder ``root`` to ``target``
    (``root/build/scratch`` by default; emptied first).

    Returns
    -------
    list of Path
        The notebooks written, in chapter order.
    """
    from .paths import repo_root

    root = repo_root() if root is None else Path(check_type(root, "root", (str, os.PathLike), "a path"))
    edition = root / "build" / "scratch" if target is None else Path(
        check_type(target, "target", (str, os.PathLike), "a path"))
    shown = displays(root / "notebooks")
    stubbed = [f"{f.module}.{f.qualname}" for f in TEACHING_CORE]
    written = write_edition(root, edition, folder="scratch", templates=TEMPLATE_DIR,
                            notebook=lambda nb: scratch_notebook(nb, stubbed), fields=_readme_fields(shown))
    for path in sorted({f.path for f in TEACHING_CORE}):
        original = (root / path).read_text(encoding="utf-8")
        text = original
        for f in (f for f in TEACHING_CORE if f.path == path):
            text = stub_source(text, f.qualname, not_written_message(f, where_to_read(f, shown)))
        ast.parse(text)  # a stub is valid Python
        back = text
        for f in (f for f in TEACHING_CORE if f.path == path):
            back = fill_source(back, original, f.qualname)
        if back != original:  # pragma: no cover - would be a bug in stub_source or fill_source
            raise RuntimeError(f"the stubs of {path}, filled from the course, are not the course's file")
        (edition / path).write_text(text, encoding="utf-8")
    return written


def fill_edition(edition: Path | str, root: Path | str | None = None, names: Sequence[str] = ()) -> list[Function]:
    """Put the course's bodies (from ``root``, the repository by default) into the stubs of the
    scratch edition ``edition``: every function, or those ``names`` selects
    (:func:`course_lib.grading.select`). Returns the functions filled."""
    from ..grading.core import select
    from .paths import repo_root

    edition = Path(check_type(edition, "edition", (str, os.PathLike), "a path"))
    root = repo_root() if root is None else Path(check_type(root, "root", (str, os.PathLike), "a path"))
    if not (edition / "course_lib").is_dir():
        raise ValueError(f"{edition} is not an edition of the course: it has no course_lib/")
    chosen = select(names)
    for path in sorted({f.path for f in chosen}):
        text, original = (edition / path).read_text(encoding="utf-8"), (root / path).read_text(encoding="utf-8")
        for f in (f for f in chosen if f.path == path):
            text = fill_source(text, original, f.qualname)
        (edition / path).write_text(text, encoding="utf-8")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m course_lib scratch [--root DIR] [--out DIR] | --fill DIR [NAME ...]``."""
    parser = edition_parser("scratch", "Write the scratch edition of the course: the student edition in which "
                            "the learner writes the teaching core, graded by `make check`.", "scratch")
    parser.add_argument("--fill", metavar="DIR", default=None,
                        help="instead: put the course's code into the stubs of the scratch edition DIR (CI, lecturers)")
    parser.add_argument("names", nargs="*", metavar="NAME", help="with --fill: only these functions (default: all)")
    args = parser.parse_args(sys.argv[1:] if argv is None else check_sequence(argv, "argv", str, "a list of str"))
    try:
        root, out = edition_paths(args, "scratch")
        if args.fill is not None:
            filled = fill_edition(args.fill, root, args.names)
            print(f"scratch: filled {len(filled)} function(s) of {args.fill} with the course's code")
            return 0
        if args.names:
            parser.error("function names go with --fill only")
        written = write_scratch_edition(root, out)
    except ValueError as exc:
        print(f"scratch: error: {exc}", file=sys.stderr)
        return 2
    print(f"scratch: wrote {len(written)} notebooks and {len(TEACHING_CORE)} functions to write to {out}; "
          f"{out / 'README.md'} says in which order, and `make check` there grades them")
    return 0
