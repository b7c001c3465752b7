"""Data for the tests: a writable copy of data/ for the tests of its loaders and its
validator (test_datasets.py, test_data_schema.py), and the first 300 training digits of the
process tests. Test modules import what they use (``from data_support import
data_copy_fixture``): a second ``conftest.py`` beside ``tests/browser/conftest.py`` would
clash under ``--doctest-modules``."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.fixture(name="data_copy")
def data_copy_fixture(tmp_path, monkeypatch) -> Path:
    """A writable copy of data/ that the loaders read instead of the real one
    (``DDL_COURSE_DATA``), so that the real files are never touched."""
    target = tmp_path / "data"
    shutil.copytree(DATA, target)
    monkeypatch.setenv("DDL_COURSE_DATA", str(target))
    return target


@functools.cache
def first_digits():
    """The first 300 training digits: inputs and labels, read once per test process (the
    ``digits`` fixture of leak_fixtures.py, and the runs that test modules cache)."""
    from course_lib.datasets import load_digits

    d = load_digits("train")
    return d.x[:300], d.y[:300]
