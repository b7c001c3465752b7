"""Nothing is lost when a worker, or the notebook that started it, is killed while a
checkpoint is written (issue 41).

A worker is killed (SIGKILL) at every point of the write of the checkpoint of step 4
(``Fault("kill", point=...)``: before its shard is written, before it is flushed, before it
is renamed, after; worker 0 also before the manifest, before the manifest's rename, after
it). The run ends with ``WorkerDied`` and leaves nothing behind; the newest complete
checkpoint is step 2's, or step 4's once its manifest is in place, and every other file is a
``.tmp`` or a folder without a manifest. A run resumed from the folder ends with the
parameters of a run that was never interrupted, bit for bit. The same for asynchronous
writes (a failure may then also lose the write still in flight), for the pipeline trainer,
and with the notebook's process itself killed at each point (its workers notice and exit).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from proc_support import new_shm, wait_until

from course_lib.models import MLP
from course_lib.optim import SGD
from course_lib.parallel.checkpoint import CheckpointError, latest_checkpoint
from course_lib.parallel.engine.errors import Fault
from course_lib.parallel.engine.workers import WorkerDied
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.pipeline import train_pipeline

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")

MODEL = MLP((8, 16, 3), dtype=np.float64)
RNG = np.random.default_rng(0)
X = RNG.random((60, 8))
Y = RNG.integers(0, 3, 60)
KW = dict(batch_size=12, steps=8, lr=0.1, progress=False, optimizer=SGD(0.1, momentum=0.9), timeout=30)
METHODS = ["fork", "forkserver", "spawn"]
STEP = 4  # the checkpoint written when the worker is killed (every 2 steps)
#: Every point of the write with the worker killed there (worker 0 for the manifest's points),
#: and a start method rotating over them (spawn: make test only).
CASES = [pytest.param(point, rank, METHODS[i % 3], marks=[pytest.mark.slow] if METHODS[i % 3] == "spawn" else [],
                      id=f"{point}-worker{rank}-{METHODS[i % 3]}")
         for i, (point, rank) in enumerate([(p, r) for p in Fault.POINTS for r in (0, 1)
                                            if r == 0 or "manifest" not in p])]


def _uninterrupted(**kw):
    return train_data_parallel(MODEL, X, Y, workers=3, zero_stage=1, start_method="fork", **{**KW, **kw})


REFERENCE = {}


def _reference():
    if "dp" not in REFERENCE:
        REFERENCE["dp"] = _uninterrupted().params
    return REFERENCE["dp"]


def _only_whole_files(folder: Path) -> None:
    """Every file is a whole shard or manifest or a ``.tmp``; a folder without a manifest is
    an unfinished checkpoint."""
    for path in folder.rglob("*"):
        if path.is_file():
            assert path.name.endswith((".npz", ".json", ".tmp")), path


@pytest.mark.parametrize(("point", "rank", "method"), CASES)
def test_a_worker_killed_at_every_point_of_the_write_loses_nothing(tmp_path, clean, point, rank, method):
    with pytest.raises(WorkerDied, match=rf"worker {rank} was killed by signal SIGKILL"):
        train_data_parallel(MODEL, X, Y, workers=3, zero_stage=1, start_method=method, checkpoint_every=2,
                            checkpoint_dir=tmp_path, fault=Fault("kill", rank, STEP, point=point), **KW)
    _only_whole_files(tmp_path)
    newest = latest_checkpoint(tmp_path)
    assert newest.step == (STEP if point == "after manifest" else STEP - 2)
    if point != "after manifest":
        assert "step-00000004" in newest.refused[0]
    resumed = train_data_parallel(MODEL, X, Y, workers=3, zero_stage=1, start_method=method, checkpoint_every=2,
                                  checkpoint_dir=tmp_path, resume=tmp_path, **KW)
    assert resumed.extra["resumed_from"] == newest.step
    assert np.array_equal(resumed.params, _reference())
    assert latest_checkpoint(tmp_path).step == KW["steps"]


@pytest.mark.parametrize("point", ["before flush", "after rename", "before manifest rename", "after manifest"])
def test_asynchronous_writes_lose_at_most_the_write_in_flight(tmp_path, clean, point):
    rank = 0 if "manifest" in point else 1
    with pytest.raises(WorkerDied):
        train_data_parallel(MODEL, X, Y, workers=3, zero_stage=1, start_method="fork", checkpoint_every=2,
                            checkpoint_dir=tmp_path, checkpoint_async=True,
                            fault=Fault("kill", rank, STEP, point=point), **KW)
    _only_whole_files(tmp_path)
    try:
        resume = tmp_path if latest_checkpoint(tmp_path).step <= STEP else None
    except CheckpointError:  # even step 2's manifest may still have been in flight
        resume = None
    resumed = train_data_parallel(MODEL, X, Y, workers=3, zero_stage=1, start_method="fork", checkpoint_every=2,
                                  checkpoint_dir=tmp_path, resume=resume, checkpoint_async=True, **KW)
    assert np.array_equal(resumed.params, _reference())


@pytest.mark.parametrize(("point", "rank"), [("before rename", 1), ("before manifest", 0), ("after manifest", 0)])
def test_a_pipeline_stage_killed_while_writing_loses_nothing(tmp_path, clean, point, rank):
    model = MLP((8, 16, 16, 3), dtype=np.float64)
    kw = dict(stages=2, micro_batches=2, batch_size=12, steps=8, lr=0.1, progress=False, start_method="fork")
    reference = train_pipeline(model, X, Y, **kw).params
    with pytest.raises(WorkerDied):
        train_pipeline(model, X, Y, checkpoint_every=2, checkpoint_dir=tmp_path,
                       fault=Fault("kill", rank, STEP, point=point), **kw)
    assert latest_checkpoint(tmp_path).step == (STEP if point == "after manifest" else STEP - 2)
    resumed = train_pipeline(model, X, Y, checkpoint_every=2, checkpoint_dir=tmp_path, resume=tmp_path, **kw)
    assert np.array_equal(resumed.params, reference)


#: The notebook's side: it trains, and one of its workers kills it (the notebook's process) at
#: the given point of the write, then waits there until its watcher ends it.
_PARENT = textwrap.dedent("""
    import os, signal, sys, time
    import numpy as np
    from course_lib.models import MLP
    from course_lib.optim import SGD
    from course_lib.parallel.engine import errors
    from course_lib.parallel.train.data import train_data_parallel

    point, rank, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]

    def kill_the_parent(self, rank, step):
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)  # the worker's watcher ends it (the parent is gone) while it is here

    errors.Fault.fire = kill_the_parent
    rng = np.random.default_rng(0)
    x, y = rng.random((60, 8)), rng.integers(0, 3, 60)
    train_data_parallel(MLP((8, 16, 3), dtype=np.float64), x, y, workers=3, zero_stage=1, start_method="fork",
                        checkpoint_every=2, checkpoint_dir=folder, fault=errors.Fault("hang", rank, 4, point=point),
                        batch_size=12, steps=8, lr=0.1, progress=False, optimizer=SGD(0.1, momentum=0.9), timeout=30)
""")


def _processes_naming(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("point", "rank"), [("before write", 1), ("before flush", 1), ("before rename", 2),
                                             ("after rename", 1), ("before manifest", 0),
                                             ("before manifest rename", 0), ("after manifest", 0)])
def test_the_notebook_killed_at_every_point_of_the_write_loses_nothing(tmp_path, no_leaks, point, rank):
    folder = tmp_path / "checkpoints"
    shm_before = set(os.listdir("/dev/shm"))
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, point, str(rank), str(folder)],
                              stderr=subprocess.PIPE, text=True)
    _, err = parent.communicate(timeout=90)
    assert parent.returncode == -signal.SIGKILL, err
    assert wait_until(lambda: not _processes_naming(str(folder)), 20) is not None, "a worker outlived its parent"
    theirs = f"ddl_{parent.pid}_"  # the segments of the killed notebook's run
    left = wait_until(lambda: not [e for e in new_shm(shm_before) if e.startswith(theirs)], 10)
    assert left is not None, f"left in /dev/shm: {sorted(e for e in new_shm(shm_before) if e.startswith(theirs))}"
    _only_whole_files(folder)
    newest = latest_checkpoint(folder)
    assert newest.step == (STEP if point == "after manifest" else STEP - 2)
    resumed = train_data_parallel(MODEL, X, Y, workers=3, zero_stage=1, start_method="fork", checkpoint_every=2,
                                  checkpoint_dir=folder, resume=folder, **KW)
    assert np.array_equal(resumed.params, _reference())
