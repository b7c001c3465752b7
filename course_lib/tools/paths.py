"""Where the course's folders are: the one place the tools find the repository root.

The tools (``slides``, ``student``, ``notation``) write into and read from folders of the
checkout (``notebooks/``, ``data/``, ``build/``). They find it with :func:`repo_root`, never
from a module's depth in the package (a module that moves to another subpackage would
otherwise read and write in the wrong folder).
"""

from __future__ import annotations

import os
from pathlib import Path

from .._validate import check_type

__all__ = ["MARKERS", "RepoNotFoundError", "is_repo_root", "repo_root"]

#: What a course folder holds: the repository and the student edition both have these.
MARKERS = ("pyproject.toml", "notebooks")


class RepoNotFoundError(ValueError):
    """No course folder was found (the message says what was looked for, and where)."""


def is_repo_root(folder: Path | str) -> bool:
    """Whether ``folder`` holds ``pyproject.toml`` and a ``notebooks/`` folder.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     (Path(tmp) / "notebooks").mkdir()
    ...     before = is_repo_root(tmp)
    ...     _ = (Path(tmp) / "pyproject.toml").write_text("")
    ...     before, is_repo_root(tmp)
    (False, True)
    """
    folder = Path(check_type(folder, "folder", (str, os.PathLike), "a path (str or pathlib.Path)"))
    return (folder / MARKERS[0]).is_file() and (folder / MARKERS[1]).is_dir()


def repo_root(start: Path | str | None = None) -> Path:
    """The root of the course checkout (or of a student edition).

    Looks first in the folder holding the ``course_lib`` package and its parents (the
    package lives in the checkout when installed with ``pip install -e .``), then in
    ``start`` (the current directory by default) and its parents, for the first folder
    that holds both ``pyproject.toml`` and ``notebooks/`` (:func:`is_repo_root`).

    Raises
    ------
    RepoNotFoundError
        (a ValueError) naming what was looked for and where, when no folder qualifies.

    Examples
    --------
    >>> (repo_root() / "notebooks").is_dir()
    True
    """
    if start is not None:
        check_type(start, "start", (str, os.PathLike), "a path (str or pathlib.Path)")
    package = Path(__file__).resolve().parent.parent
    here = Path(os.getcwd() if start is None else start).resolve()
    for origin in (package, here):
        for folder in (origin, *origin.parents):
            if is_repo_root(folder):
                return folder
    raise RepoNotFoundError(
        f"no ddl-course folder found: looked for a folder holding {' and '.join(MARKERS)}/ "
        f"in {package} (where course_lib is), in {here} and in their parents. Run the command "
        "from a clone of the course (or from the student edition's folder)."
    )
