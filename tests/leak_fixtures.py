"""Fixtures shared by the process tests: every run must leave no process, no mapping and
nothing in /dev/shm behind. Test modules load them with ``pytest_plugins = ["leak_fixtures"]`` (a second ``conftest.py``
beside ``tests/browser/conftest.py`` would clash under ``--doctest-modules``)."""

from __future__ import annotations

import gc
import multiprocessing
import os

import pytest
from data_support import first_digits  # tests/ is on sys.path, as for this module itself

from course_lib.testing import leaked_resources, resource_snapshot


@pytest.fixture(scope="module")
def digits():
    """The first 300 training digits: inputs and labels (``data_support.first_digits``)."""
    return first_digits()


@pytest.fixture(scope="session")
def frozen_heap():
    """What the test process holds so far (modules, collected tests, hypothesis) is moved
    out of the garbage collector's sight (``gc.freeze``): each leak check's ``gc.collect()``
    then walks only what the tests made since, about ten times fewer objects."""
    gc.freeze()


@pytest.fixture
def no_leaks(frozen_heap):
    """No process or shared-memory mapping of this test outlives it."""
    before = resource_snapshot()
    yield before
    assert leaked_resources(before) == []


@pytest.fixture
def clean(no_leaks):
    """As ``no_leaks``, and no child process left and no segment of ours in /dev/shm."""
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    yield no_leaks
    assert multiprocessing.active_children() == []
    mine = f"ddl_{os.getpid()}_"
    if os.path.isdir("/dev/shm"):
        assert not [e for e in set(os.listdir("/dev/shm")) - shm_before if e.startswith(mine)]
