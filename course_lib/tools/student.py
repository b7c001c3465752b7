"""The student edition: the course without solutions, speaker notes or stored answers.

``python -m course_lib student`` (``make student``) writes ``build/student/``, a folder that a
student copies anywhere and opens with the two commands of its own ``README.md``
(``make install``, ``make lab``). It holds

- ``notebooks/``: every notebook of ``notebooks/`` with

  - the worked solutions removed (cells tagged ``solution``),
  - the speaker notes and talking points removed (slide type ``notes``),
  - the outputs of the exercise cells (``answer = None`` and its checker) cleared, so no
    verdict is stored in the file, and the ``nbval-check-output`` tag taken off them; the
    outputs of cells tagged ``lecturer-output`` cleared too (they show the lecturer's machine),
  - sentences about the removed solutions and lecturer-only commands rewritten or dropped
    (:data:`STUDENT_TEXT`: "A worked solution is hidden below each exercise" becomes "Run the
    cell to check your answer."),

  and everything else as it is, stored outputs included (figures, tables); the notation page
  beside them, so the links in the notebooks work;
- ``course_lib/`` (the package's source), ``data/``, ``benchmarks/``, ``pyproject.toml`` and
  the licences, so that ``pip install -e .`` in the folder installs the course;
- ``README.md`` and ``Makefile`` from ``templates/student/``.

The scratch edition (:mod:`course_lib.tools.scratch`, the learner writes the teaching core)
is built by the same machinery: :func:`write_edition` (the folder, its notebooks, files and
templates) and :func:`edition_parser` (the command line) serve both.

Give ``build/student/`` (or an archive of it) to students; lecturers keep ``notebooks/``
(solutions and notes collapsed) and the slides (``make slides``), whose speaker view (key S)
shows the notes. CI copies the edition out of the repository, installs it as its README
says and runs its notebooks under nbval, so an edition in which a later cell needs a removed
one, or that needs a file it does not hold, fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._validate import check_type
from .paths import repo_root
from .student_cells import (
    EXERCISE_CELL,
    LECTURER_OUTPUT,
    STUDENT_TEXT,
    is_exercise_cell,
    student_notebook,
    student_text,
)

__all__ = [
    "EDITION_FILES",
    "EXERCISE_CELL",
    "LECTURER_OUTPUT",
    "STUDENT_TEXT",
    "edition_parser",
    "is_exercise_cell",
    "main",
    "student_notebook",
    "student_text",
    "write_edition",
    "write_student_edition",
]

#: What the edition holds besides its notebooks: copied from the course folder as they are.
EDITION_FILES = ("course_lib", "data", "benchmarks", "pyproject.toml", "LICENSE", "LICENSE-CONTENT")
#: The library's catalogue in ``locale/<language>/LC_MESSAGES/``: every edition holds it.
LIBRARY_CATALOGUE = "course_lib.po"
#: The editions' own README.md and Makefile, one folder per edition.
TEMPLATES = Path(__file__).resolve().parent / "templates"
#: The student edition's.
TEMPLATE_DIR = TEMPLATES / "student"
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".ipynb_checkpoints")


def _check_target(root: Path, target: Path) -> None:
    """Refuse a target whose removal would delete the course or another project."""
    root, target = root.resolve(), target.resolve()
    if target == root or root.is_relative_to(target):
        raise ValueError(f"target must not be the course folder or one that holds it, got {target}")
    for name in ("notebooks", "data", "course_lib", "benchmarks"):
        if target.is_relative_to(root / name):
            raise ValueError(f"target must lie outside the course's {name}/ (it is emptied first), got {target}")
    if (target / ".git").exists():
        raise ValueError(f"target {target} is a git checkout: choose an empty folder (it is emptied first)")


def write_edition(root: Path | str | None, target: Path | str | None, *, folder: str, templates: Path,
                  notebook: Callable[[Mapping[str, Any]], dict[str, Any]] = student_notebook,
                  fields: Mapping[str, str] | None = None) -> list[Path]:
    """Write an edition of the course folder ``root`` to ``target``: what every edition shares.

    The notebooks of ``root/notebooks`` as ``notebook`` makes them (:func:`student_notebook`
    by default), the pages beside them, :data:`EDITION_FILES`, and the files of ``templates``
    with ``{notebook_count}`` and every ``{key}`` of ``fields`` filled in.

    Parameters
    ----------
    root : Path, optional
        The course folder (``notebooks/``, ``course_lib/``, ``data/`` ...); the repository
        (:func:`course_lib.tools.paths.repo_root`) by default.
    target : Path, optional
        Output folder, ``root/build/<folder>`` by default. It is emptied first; it may not
        be the course folder, hold it, or lie inside one of its source folders.

    Returns
    -------
    list of Path
        The notebooks written, in chapter order (``target/notebooks/*.ipynb``).
    """
    if not isinstance(folder, str) or not re.fullmatch(r"[\w-]+", folder):
        raise ValueError(f"folder must be a folder name (letters, digits, - and _), got {folder!r}")
    templates = Path(check_type(templates, "templates", (str, os.PathLike), "a folder of templates"))
    if not templates.is_dir():
        raise ValueError(f"templates must be a folder, got {templates}")
    if not callable(notebook):
        raise TypeError(f"notebook must be a function of a notebook, got {type(notebook).__name__}")
    fields = dict(check_type(fields or {}, "fields", Mapping, "a mapping of str to str"))
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items()):
        raise TypeError("fields must map str to str")
    root = repo_root() if root is None else Path(check_type(root, "root", (str, os.PathLike), "a path"))
    target = root / "build" / folder if target is None else Path(
        check_type(target, "target", (str, os.PathLike), "a path"))
    source = root / "notebooks"
    if not source.is_dir():
        raise ValueError(f"root must be a course folder holding notebooks/, got {root}")
    missing = [name for name in EDITION_FILES if not (root / name).exists()]
    if missing:
        raise ValueError(f"root must be a course folder, {root} has no {', '.join(missing)}")
    _check_target(root, target)
    if target.exists():
        shutil.rmtree(target)
    (target / "notebooks").mkdir(parents=True)
    written = []
    for path in sorted(source.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        out = target / "notebooks" / path.name
        out.write_text(json.dumps(notebook(nb), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(out)
    for page in sorted(source.glob("*.md")):
        shutil.copy2(page, target / "notebooks" / page.name)
    for name in EDITION_FILES:
        if (root / name).is_dir():
            shutil.copytree(root / name, target / name, ignore=_IGNORED)
        else:
            shutil.copy2(root / name, target / name)
    # The library's printed text in the course's other languages (course_lib.i18n reads it).
    for catalogue in sorted(root.glob(f"locale/*/LC_MESSAGES/{LIBRARY_CATALOGUE}")):
        (target / catalogue.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(catalogue, target / catalogue.relative_to(root))
    values = {"notebook_count": str(len(written)), **fields}
    for template in sorted(templates.iterdir()):
        text = template.read_text(encoding="utf-8")
        for key, value in values.items():
            text = text.replace("{" + key + "}", value)
        (target / template.name).write_text(text, encoding="utf-8")
    return written


def write_student_edition(root: Path | str | None = None, target: Path | str | None = None, *,
                          chinese: bool | None = None) -> list[Path]:
    """Write the student edition of the course folder ``root`` to ``target``
    (``root/build/student`` by default; emptied first): :func:`write_edition` with
    :func:`student_notebook` and ``templates/student/``, and the Chinese twin of every
    student notebook in ``target/notebooks/zh/``, built from the course's catalogues
    (:func:`course_lib.tools.i18n.build_notebook`): the sentences only the student edition
    says are messages of those catalogues too.

    Parameters
    ----------
    chinese : bool, optional
        Write the Chinese notebooks: True needs the extra ``[i18n]`` (mdpo, polib); None,
        the default, writes them where it is installed.

    Returns
    -------
    list of Path
        The notebooks written, in chapter order (``target/notebooks/*.ipynb``), then the
        Chinese ones (``target/notebooks/zh/*.ipynb``).
    """
    if chinese is not None and not isinstance(chinese, bool):
        raise TypeError(f"chinese must be True, False or None, got {type(chinese).__name__}")
    if chinese is None:
        import importlib.util

        chinese = all(importlib.util.find_spec(m) is not None for m in ("mdpo", "polib"))
    written = write_edition(root, target, folder="student", templates=TEMPLATE_DIR)
    if not chinese:
        return written
    from . import i18n

    course = repo_root() if root is None else Path(root)
    folder = i18n.locale_folder(course)
    zh = []
    for path in written:
        catalogue = folder / f"{path.stem}.po"
        if not catalogue.is_file():
            raise ValueError(f"root has no catalogue {catalogue} for {path.name}: run python -m course_lib i18n extract")
        zh.append(path.parent / "zh" / path.name)
        i18n.build_notebook(path, catalogue, zh[-1])
    return written + zh


def edition_parser(command: str, description: str, folder: str) -> argparse.ArgumentParser:
    """The command line every edition shares: ``python -m course_lib COMMAND [--root DIR] [--out DIR]``."""
    parser = argparse.ArgumentParser(prog=f"python -m course_lib {command}", description=description)
    parser.add_argument("--root", default=None, help="course folder (default: the repository this runs in)")
    parser.add_argument("--out", default=None, help=f"output folder (default: build/{folder}/ in the course folder)")
    return parser


def edition_paths(args: argparse.Namespace, folder: str) -> tuple[Path, Path]:
    """``(root, out)`` of a parsed edition command line (the repository and build/<folder> by default)."""
    root = Path(args.root) if args.root else repo_root()
    return root, Path(args.out) if args.out else root / "build" / folder


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m course_lib student [--root DIR] [--out DIR]``."""
    parser = edition_parser("student", "Write the student edition of the course (a folder that runs on its own).",
                            "student")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        root, out = edition_paths(args, "student")
        written = write_student_edition(root, out)
    except ValueError as exc:
        print(f"student: error: {exc}", file=sys.stderr)
        return 2
    zh = [p for p in written if p.parent.name == "zh"]
    print(f"student: wrote {len(written) - len(zh)} notebooks to {out / 'notebooks'}", end="")
    print(f" and their Chinese twins to {out / 'notebooks' / 'zh'}" if zh else
          " (the Chinese ones need the extra [i18n]: make zh installs it)", end="")
    print(f"; {out / 'README.md'} says how to install and open it")
    return 0
