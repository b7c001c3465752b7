"""The scratch edition: the student edition with the teaching core stubbed, its graders both ways.

Built as `make scratch` builds it into a temporary folder and copied out of the repository:
every stub raises its "not written yet" message (naming the chapter and section to read), the
graders report every function as not written and nothing hangs; filled from the course's
source, the edition's course_lib is the course's, file for file, and every check passes. CI
(.ci/run) does the same with the edition installed as its README says.
"""

from __future__ import annotations

import ast
import filecmp
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from course_lib.grading import TEACHING_CORE, select
from course_lib.grading.core import stub_message
from course_lib.tools.scratch import (
    displays,
    fill_edition,
    fill_source,
    main,
    scratch_notebook,
    stub_source,
    where_to_read,
    write_scratch_edition,
)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SHOWN = displays(ROOT / "notebooks")


def _run(code: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DDL_COURSE_DATA")}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _check(cwd: Path, *names: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DDL_COURSE_DATA")}
    return subprocess.run([sys.executable, "-m", "course_lib", "check", *names], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@functools.cache
def _corpus() -> str:
    """Every code file of the course with the teaching core's bodies stubbed: what the edition
    holds besides the learner's functions."""
    others = []
    for path in sorted((ROOT / "course_lib").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for g in (g for g in TEACHING_CORE if (ROOT / g.path) == path):
            text = stub_source(text, g.qualname, "")
        others.append(text)
    return "\n".join(others)


def _unique_lines(f) -> list[str]:
    """The code lines of ``f``'s body (longer than 30 characters) that no other code of the
    course holds: the lines that would give the course's solution away."""
    corpus = _corpus()
    return [line for line in _code_lines(ROOT / f.path, f.qualname) if len(line) > 30 and line not in corpus]


def _code_lines(path: Path, qualname: str) -> list[str]:
    """The code lines of ``qualname``'s body (comments and docstring left out)."""
    source = path.read_text(encoding="utf-8")
    node = ast.parse(source)
    for part in qualname.split("."):
        node = next(n for n in node.body if getattr(n, "name", None) == part)
    lines = source.splitlines()[node.body[1].lineno - 1 : node.end_lineno]
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


@functools.cache
def unique() -> dict[str, list[str]]:
    """:func:`_unique_lines` of every function (computed once, when a test first asks: not while
    every pytest worker collects this module)."""
    return {f.qualname: _unique_lines(f) for f in TEACHING_CORE}


def test_each_function_has_lines_of_its_own():
    """The lines the checks below look for: at least one per function, but two whose bodies are
    one or two short calls (Stage.layers_forward, ShmAllReduce.allreduce)."""
    short = {"Stage.layers_forward", "ShmAllReduce.allreduce"}
    assert {f.qualname for f in TEACHING_CORE if not unique()[f.qualname]} == short


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    """The scratch edition, built as `make scratch` builds it, then copied out of the repository."""
    tmp = tmp_path_factory.mktemp("scratch")
    build = tmp / "build" / "scratch"
    written = write_scratch_edition(ROOT, build)
    assert [p.name for p in written] == [p.name for p in NOTEBOOKS]
    copy = tmp / "elsewhere" / "ddl-scratch"
    shutil.copytree(build, copy)
    shutil.rmtree(build)
    return copy


def test_the_functions_are_in_chapter_order_and_each_is_shown_by_a_chapter():
    chapters = []
    for f in TEACHING_CORE:
        where = where_to_read(f, SHOWN)
        found = re.search(r"\(notebooks/(\d\d)_\w+\.ipynb\)$", where)
        assert found, f"no notebook displays {f.qualname} (or its class): {where}"
        assert "section" in where, where
        chapters.append(found[1])
    assert chapters == sorted(chapters), list(zip([f.qualname for f in TEACHING_CORE], chapters))
    for f in TEACHING_CORE:
        assert len(f.hints()) >= 2 and callable(f.check()), f.qualname
        assert all(q in [g.qualname for g in TEACHING_CORE[: TEACHING_CORE.index(f)]] for q in f.needs)


def test_select_takes_a_function_or_a_module():
    assert [f.name for f in select(["allreduce"])] == ["reduce_scatter", "all_gather", "allreduce", "reduce_bucket",
                                                       "reduce_bucket"]
    # two classes' methods of one name: the name selects both, the qualname one
    assert [f.qualname for f in select(["reduce_bucket"])] == ["BucketAllReduce.reduce_bucket",
                                                               "WireAllReduce.reduce_bucket"]
    assert [f.qualname for f in select(["WireAllReduce.reduce_bucket"])] == ["WireAllReduce.reduce_bucket"]
    assert [f.name for f in select(["checkpoint"])] == ["save_shard", "write_checkpoint", "load_checkpoint",
                                                        "latest_checkpoint"]
    assert [f.qualname for f in select(["forward"])] == ["Stage.forward", "RingAttention.forward"]
    # what a stub and the README tell the learner to check selects that function alone
    for f in TEACHING_CORE[1:]:  # im2col: a function and its module (which holds col2im too)
        assert select([f.check_name]) == [f], f.qualname
    assert [f.check_name for f in TEACHING_CORE if f.check_name != f.name] == [
        "ShmAllReduce.allreduce", "BucketAllReduce.reduce_bucket", "WireAllReduce.reduce_bucket", "Stage.forward",
        "RingAttention.forward"]
    assert [f.name for f in select(["im2col"])] == ["im2col", "col2im"]  # the module im2col.py
    with pytest.raises(ValueError, match="no function or module named 'nosuch'; the functions you write: im2col"):
        select(["nosuch"])


@pytest.mark.parametrize("path", sorted({f.path for f in TEACHING_CORE}))
def test_stubs_keep_signature_docstring_and_comments_and_fill_back(path):
    original = (ROOT / path).read_text(encoding="utf-8")
    text = original
    functions = [f for f in TEACHING_CORE if f.path == path]
    for f in functions:
        text = stub_source(text, f.qualname, f"{f.qualname} is not written yet. Read it.")
    tree = ast.parse(text)
    for f in functions:
        node = tree
        for part in f.qualname.split("."):
            node = next(n for n in node.body if getattr(n, "name", None) == part)
        raised = node.body[-1]
        assert isinstance(raised, ast.Raise) and len(node.body) == 2, f.qualname  # docstring, raise
        assert ast.get_docstring(node) == ast.get_docstring(_node(original, f.qualname))
        assert ast.unparse(node.args) == ast.unparse(_node(original, f.qualname).args)
        assert [ast.unparse(d) for d in node.decorator_list] == [ast.unparse(d) for d in
                                                                _node(original, f.qualname).decorator_list]
    back = text
    for f in functions:
        back = fill_source(back, original, f.qualname)
    assert back == original


def _node(source, qualname):
    node = ast.parse(source)
    for part in qualname.split("."):
        node = next(n for n in node.body if getattr(n, "name", None) == part)
    return node


def test_a_stub_keeps_the_bodys_comments_as_a_skeleton():
    source = textwrap.dedent('''\
        def loop(x):
            """Doc."""
            total = 0  # a running sum
            for v in x:  # every item
                # the square, not the item
                total += v * v  # noqa: B007
            return total
        ''')
    assert stub_source(source, "loop", "loop is not written yet") == textwrap.dedent('''\
        def loop(x):
            """Doc."""
            # a running sum
            # every item
                # the square, not the item
            raise NotImplementedError(
                'loop is not written yet'
            )
        ''')
    with pytest.raises(ValueError, match="no definition of nope"):
        stub_source(source, "nope", "")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_notebooks_show_no_source_of_a_stubbed_function(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    stubbed = [f"{f.module}.{f.qualname}" for f in TEACHING_CORE]
    out = scratch_notebook(nb, stubbed)
    text = json.dumps(out, ensure_ascii=False)
    for f in TEACHING_CORE:
        for line in unique()[f.qualname]:
            assert json.dumps(line, ensure_ascii=False)[1:-1] not in text, (path.name, f.qualname, line)


def test_the_edition_holds_stubs_that_say_where_to_read(edition):
    names = {p.name for p in edition.iterdir()}
    assert {"README.md", "Makefile", "pyproject.toml", "course_lib", "data", "notebooks", "LICENSE"} <= names
    assert not names & {"tests", "build", ".git", ".venv"} and not list(edition.rglob("__pycache__"))
    assert (edition / "course_lib" / "grading" / "core.py").is_file()  # the graders ship
    for f in TEACHING_CORE:  # each body: the raise of its message, nothing else
        body = _code_lines(edition / f.path, f.qualname)
        assert all(line in ("raise NotImplementedError(", ")") or line[0] in "'\"" for line in body), (f.qualname, body)
    code = textwrap.dedent("""
        import inspect
        from course_lib.grading import TEACHING_CORE
        for f in TEACHING_CORE:
            func = inspect.unwrap(f.obj())
            try:
                func(*[None] * len(inspect.signature(func).parameters))
            except NotImplementedError as exc:
                print(f.qualname, "|", exc)
            else:
                print(f.qualname, "| returned")
        """)
    proc = _run(code, edition)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = dict(line.split(" | ", 1) for line in proc.stdout.splitlines())
    assert list(said) == [f.qualname for f in TEACHING_CORE]
    for f in TEACHING_CORE:
        message = said[f.qualname]
        assert message.startswith(f"{f.qualname} is not written yet. Read chapter "), message
        assert where_to_read(f, SHOWN) in message and f"`make check NAME={f.check_name}`" in message, message


def test_the_graders_report_every_stub_not_written_and_nothing_hangs(edition):
    proc = _check(edition)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = re.findall(r"^\s*\d+\. (\S+)\s+(.+?)\s+\(\d+\.\d s\)$", proc.stdout, re.M)
    assert rows == [(f.qualname, "not written yet") for f in TEACHING_CORE], proc.stdout
    assert f"{len(TEACHING_CORE)} not written yet." in proc.stdout
    # the checks themselves, run on the stubs: each ends at once with "not written yet" (or with the
    # stub of a function it needs), none hangs
    code = textwrap.dedent("""
        from course_lib.grading import TEACHING_CORE, grade
        for f in TEACHING_CORE:
            o = grade(f, run_stubs=True)
            print(f.qualname, o.status, f"{o.seconds:.2f}", o.message.split(". Read")[0], sep=" | ")
        """)
    proc = _run(code, edition)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in proc.stdout.splitlines():
        qualname, status, seconds, first = line.split(" | ")
        assert status in ("not written", "needs"), line
        assert float(seconds) < 5, line
        assert "is not written yet" in first or "which is not written yet" in line, line


@pytest.mark.slow  # grades every function of the filled edition: 5 s
def test_filled_from_the_course_it_is_the_course_and_passes(edition):
    fill_edition(edition, ROOT, ["reduce_scatter"])  # one function written: it passes, those it needs wait
    proc = _check(edition, "allreduce")
    status = dict(re.findall(r"^\s*\d+\. (\S+)\s+(.+?)\s+\(", proc.stdout, re.M))
    assert status == {"ShmAllReduce.reduce_scatter": "passed", "ShmAllReduce.all_gather": "not written yet",
                      "ShmAllReduce.allreduce": "not written yet", "BucketAllReduce.reduce_bucket": "not written yet",
                      "WireAllReduce.reduce_bucket": "not written yet"}, proc.stdout
    assert proc.returncode == 1
    assert main(["--fill", str(edition), "--root", str(ROOT)]) == 0
    compared = filecmp.dircmp(ROOT / "course_lib", edition / "course_lib", ignore=["__pycache__"])

    def differences(cmp) -> list[str]:
        out = cmp.diff_files + cmp.left_only + cmp.right_only
        return out + [d for sub in cmp.subdirs.values() for d in differences(sub)]

    assert differences(compared) == []
    for f in TEACHING_CORE:
        assert filecmp.cmp(ROOT / f.path, edition / f.path, shallow=False), f.path
    proc = _check(edition)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert f"{len(TEACHING_CORE)} passed." in proc.stdout


def test_the_readme_gives_the_order_the_checks_and_closed_hints(edition):
    readme, makefile = (edition / "README.md").read_text(), (edition / "Makefile").read_text()
    assert "{" + "function_table}" not in readme and "{" + "hints}" not in readme
    rows = re.findall(r"^\| (\d+) \| `([\w.]+)` \| `([\w/.]+)` \| (.+?) \| `make check NAME=([\w.]+)` \|$", readme, re.M)
    assert [(int(n), q, p, name) for n, q, p, _, name in rows] == [
        (i, f.qualname, f.path, f.check_name) for i, f in enumerate(TEACHING_CORE, 1)]
    assert all("chapter" in where for *_, where, _ in rows)
    targets = set(re.findall(r"^([a-z]+):", makefile, re.M))
    assert {"install", "lab", "check"} <= set(re.findall(r"\bmake ([a-z]+)", readme)) <= targets
    assert "$(BIN)/python -m course_lib check $(NAME)" in makefile
    hints = sum(len(f.hints()) for f in TEACHING_CORE)
    assert readme.count("<details><summary>Hint ") == readme.count("</details>") == hints
    assert "<details open" not in readme
    for path in re.findall(r"`((?:[\w.-]+/)+[\w.-]*|LICENSE[\w-]*)`", readme):
        if not path.startswith(".venv"):
            assert (edition / path).exists(), f"the scratch edition's README names {path}, which it does not hold"
    shown = re.sub(r"<details>.*?</details>", "", readme.replace("\n", " "))  # the closed hints left out
    while "<details>" in shown:
        shown = re.sub(r"<details>(?:(?!<details>).)*?</details>", "", shown)
    for f in TEACHING_CORE:  # what the README shows open gives no line of a solution away
        assert not [line for line in unique()[f.qualname] if line in shown], f.qualname


def test_stub_detection_reads_the_body():
    for f in TEACHING_CORE:
        assert stub_message(f) is None, f"the course's {f.qualname} reads as a stub"


def test_the_commands(tmp_path, capsys):
    from course_lib.grading import main as check_main

    assert check_main(["--list"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["im2col", "course_lib/conv/im2col.py"]
    assert check_main(["nosuch"]) == 2
    assert main(["--fill", str(tmp_path)]) == 2
    assert "has no course_lib/" in capsys.readouterr().err
    makefile, readme = (ROOT / "Makefile").read_text(), (ROOT / "README.md").read_text()
    assert "\n\t$(BIN)/python -m course_lib scratch\n" in makefile and "make scratch" in makefile
    assert "make scratch" in readme and "make check NAME=" in readme


def test_the_readme_speaks_only_of_what_the_edition_holds(edition):
    """As the student edition's (tests/test_student.py): no lecturer's file, tool or command, no
    machine's folder, the right count of notebooks."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_student import LECTURER_ONLY, MACHINE_PATH, _counts_of_notebooks

    readme = (edition / "README.md").read_text(encoding="utf-8")
    assert not LECTURER_ONLY.search(readme), LECTURER_ONLY.search(readme)
    assert not MACHINE_PATH.search(readme)
    count = len(list((edition / "notebooks").glob("*.ipynb")))
    assert _counts_of_notebooks(readme) == {count} and f"{len(TEACHING_CORE)} functions" in readme
