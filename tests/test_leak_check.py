"""The leak check every process test ends with (``course_lib.testing.leaked_resources``):
what it reports, and that it collects garbage only when something new is there."""

from __future__ import annotations

import gc
import sys

import pytest

from course_lib import testing
from course_lib.parallel.engine.shm import SharedArray
from course_lib.testing import leaked_resources, resource_snapshot

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")


@pytest.fixture
def collections(monkeypatch):
    """Counts the leak check's garbage collections (each still collects)."""
    calls = []

    def counted(*args):
        calls.append(args)
        return gc.collect(*args)

    monkeypatch.setattr(testing, "gc", type("gc", (), {"collect": staticmethod(counted)}))
    return calls


@pytest.fixture
def no_automatic_gc():
    """Garbage stays until someone collects it (the leak check, here)."""
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


def test_nothing_new_returns_at_once_without_a_collection(collections):
    before = resource_snapshot()
    assert leaked_resources(before) == []
    assert collections == []


def test_a_mapping_held_only_by_garbage_is_collected_not_reported(collections, no_automatic_gc):
    before = resource_snapshot()
    shared = SharedArray(1000, "f8")
    name = shared.name
    cycle = [shared.array]
    cycle.append(cycle)  # only the collector frees a cycle
    shared.close()  # unlinked; mapped while a view lives
    del shared, cycle
    held = {m.split()[0] for m in resource_snapshot().mapped - before.mapped}  # "<name> (deleted)"
    assert name in held, "the test needs a mapping held by garbage"
    assert leaked_resources(before, grace=0) == []
    assert len(collections) == 1


def test_what_is_still_held_is_reported_after_one_collection(collections):
    before = resource_snapshot()
    with SharedArray(1000, "f8") as shared:
        leaks = leaked_resources(before, grace=0.2)
        assert f"/dev/shm/{shared.name}" in leaks and f"mapping of /dev/shm/{shared.name}" in leaks
    assert len(collections) == 1  # once, however long it waits
    assert leaked_resources(before) == []
