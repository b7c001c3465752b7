"""The stop button ends a run with one short line, not a traceback through the engine.

A ``KeyboardInterrupt`` while a run waits for its workers stops every worker, then raises
:class:`course_lib.parallel.engine.errors.RunStopped` (a ``KeyboardInterrupt``). IPython
shows an exception through its ``_render_traceback_`` hook when it has one: a stopped run
renders as one line; with ``DDL_FULL_TRACEBACK`` set it renders the whole traceback, for a
maintainer. (tests/test_process_faults.py presses the stop button in every kind of run and
checks that ``RunStopped`` comes out and nothing is left behind.)
"""

from __future__ import annotations

import io
import sys

import pytest

from course_lib.parallel.engine.errors import FULL_TRACEBACK, RunStopped


def _deep(n: int):
    if n == 0:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as stop:
            raise RunStopped() from stop
    _deep(n - 1)


def _shown(monkeypatch) -> str:
    """What IPython prints for a RunStopped raised 20 frames deep (stdout and stderr)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", out)
    try:
        _deep(20)
    except RunStopped:
        shell.showtraceback()
    return out.getvalue()


def test_a_stopped_run_shows_one_line_in_ipython(monkeypatch):
    monkeypatch.delenv(FULL_TRACEBACK, raising=False)
    shown = _shown(monkeypatch)
    lines = [line for line in shown.splitlines() if line.strip()]
    assert lines == ["RunStopped: the run was stopped; every worker has ended and nothing is left behind."], shown


def test_the_whole_traceback_stays_available_for_a_maintainer(monkeypatch):
    monkeypatch.setenv(FULL_TRACEBACK, "1")
    shown = _shown(monkeypatch)
    assert "_deep" in shown and shown.count("\n") > 20 and "RunStopped" in shown


def test_a_stopped_run_is_still_a_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt):
        _deep(2)
