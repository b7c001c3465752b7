"""Resume (issue 41): a run killed at a random step (seeded) and resumed from its last complete
checkpoint ends with the parameters of a run that was never interrupted - bit for bit on the
same workers, within 1e-6 (float64) on fewer, where the data is re-sharded and ZeRO's chunks
re-gathered and re-split, so the gradient's sum is added in another order - under every start
method; and every bad checkpoint argument is refused at the door, naming it."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from course_lib.models import MLP
from course_lib.optim import SGD
from course_lib.parallel.checkpoint import CheckpointError, latest_checkpoint
from course_lib.parallel.engine.errors import Fault
from course_lib.parallel.engine.workers import WorkerDied
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.pipeline import train_pipeline

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")

MODEL = MLP((8, 16, 3), dtype=np.float64)  # float64: the re-sharded sums differ by rounding only
RNG = np.random.default_rng(0)
X = RNG.random((60, 8))
Y = RNG.integers(0, 3, 60)
KW = dict(batch_size=12, steps=10, lr=0.1, progress=False, optimizer=SGD(0.1, momentum=0.9), timeout=30)
METHODS = ["fork", "forkserver", pytest.param("spawn", marks=pytest.mark.slow)]
WORKERS = 3
_REFERENCES: dict = {}


def _reference(zero_stage: int) -> np.ndarray:
    """The uninterrupted run's parameters (fork: the start method does not change them)."""
    if zero_stage not in _REFERENCES:
        _REFERENCES[zero_stage] = train_data_parallel(MODEL, X, Y, workers=WORKERS, zero_stage=zero_stage,
                                                      start_method="fork", **KW).params
    return _REFERENCES[zero_stage]


def _killed_at_random(folder, method: str, zero_stage: int, seed: int) -> int:
    """Kill a worker at a step drawn from ``seed`` (checkpoints every 2 steps); return the step."""
    rng = np.random.default_rng(seed)
    step, rank = int(rng.integers(1, KW["steps"])), int(rng.integers(WORKERS))
    with pytest.raises(WorkerDied, match=rf"worker {rank} was killed by signal SIGKILL"):
        train_data_parallel(MODEL, X, Y, workers=WORKERS, zero_stage=zero_stage, start_method=method,
                            checkpoint_every=2, checkpoint_dir=folder, fault=Fault("kill", rank, step), **KW)
    return step


@pytest.mark.parametrize("zero_stage", [0, 1, 2, 3])
@pytest.mark.parametrize("method", METHODS)
def test_killed_at_a_random_step_and_resumed_on_the_same_workers_bitwise(tmp_path, clean, method, zero_stage):
    step = _killed_at_random(tmp_path, method, zero_stage, seed=zero_stage)
    resumed = train_data_parallel(MODEL, X, Y, workers=WORKERS, zero_stage=zero_stage, start_method=method,
                                  checkpoint_every=2, checkpoint_dir=tmp_path, resume=tmp_path, **KW)
    # the last checkpoint before the failure (at an even step, the one just written may lack its
    # manifest: worker 0 was stopped while writing it, once the killed worker had passed the barrier)
    assert resumed.extra["resumed_from"] in {2 * (step // 2), 2 * (step // 2) - 2 if step % 2 == 0 else -1}
    assert resumed.loss.shape == (KW["steps"] - resumed.extra["resumed_from"],)
    assert np.array_equal(resumed.params, _reference(zero_stage))
    assert resumed.replicas_in_sync


@pytest.mark.parametrize(("zero_stage", "method"), [(0, "fork"), (1, "forkserver"), (2, "fork"),
                                                    pytest.param(3, "spawn", marks=pytest.mark.slow)])
def test_resumed_on_fewer_workers_within_1e6(tmp_path, clean, zero_stage, method):
    step = _killed_at_random(tmp_path, method, zero_stage, seed=4 + zero_stage)
    assert step >= 4, "the seeds are chosen so that a checkpoint precedes the failure"
    newest = latest_checkpoint(tmp_path).step
    assert newest in {2 * (step // 2), 2 * (step // 2) - 2}
    fewer = train_data_parallel(MODEL, X, Y, workers=WORKERS - 1, zero_stage=zero_stage, start_method=method,
                                resume=tmp_path, **KW)
    assert fewer.workers == WORKERS - 1 and fewer.extra["resumed_from"] == newest
    gap = np.abs(fewer.params - _reference(zero_stage)).max()
    assert 0 < gap <= 1e-6 or gap == 0


def test_a_resume_may_change_the_zero_stage_and_the_backend(tmp_path, clean):
    train_data_parallel(MODEL, X, Y, workers=WORKERS, zero_stage=3, start_method="fork", checkpoint_every=4,
                        checkpoint_dir=tmp_path, **{**KW, "steps": 4})
    plain = train_data_parallel(MODEL, X, Y, workers=2, backend="pipe", start_method="fork", resume=tmp_path, **KW)
    assert np.abs(plain.params - _reference(0)).max() <= 1e-6


@pytest.mark.parametrize(("first", "then"), [
    (dict(stages=2), dict(stages=2)),
    (dict(stages=3), dict(stages=2)),
    (dict(stages=2, data=2), dict(stages=2, data=1)),
    (dict(stages=2, schedule="1f1b"), dict(stages=1)),
])
def test_a_pipeline_resumes_on_the_same_or_fewer_processes(tmp_path, clean, first, then):
    model = MLP((8, 16, 16, 16, 3), dtype=np.float64)
    kw = dict(micro_batches=2, batch_size=12, steps=9, lr=0.1, progress=False, start_method="fork")
    reference = train_pipeline(model, X, Y, **kw, **first).params
    with pytest.raises(WorkerDied):
        train_pipeline(model, X, Y, checkpoint_every=3, checkpoint_dir=tmp_path, fault=Fault("kill", 1, 7),
                       **kw, **first)
    resumed = train_pipeline(model, X, Y, resume=tmp_path, **kw, **then)
    assert resumed.extra["resumed_from"] == 6
    if then == first:
        assert np.array_equal(resumed.params, reference)
    else:
        assert np.abs(resumed.params - reference).max() <= 1e-6


def test_a_result_reports_its_checkpoints(tmp_path, clean):
    res = train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", checkpoint_every=3, checkpoint_dir=tmp_path,
                              **KW)
    assert res.extra["checkpoint_steps"] == [3, 6, 9]
    assert res.extra["checkpoint_time"].shape == (3, 2) and np.all(res.extra["checkpoint_time"] > 0)
    assert res.extra["resumed_from"] is None and res.extra["refused_checkpoints"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000006", "step-00000009"]  # the newest two


# ------------------------------------------------------------------ refused at the door
@pytest.mark.parametrize(("kwargs", "error", "words"), [
    (dict(checkpoint_every=0, checkpoint_dir="X"), ValueError, r"checkpoint_every must be .*1"),
    (dict(checkpoint_every=2.5, checkpoint_dir="X"), TypeError, "checkpoint_every"),
    (dict(checkpoint_every=11, checkpoint_dir="X"), ValueError, r"checkpoint_every must be in \[1, steps = 10\]"),
    (dict(checkpoint_every=2), ValueError, "checkpoint_every and checkpoint_dir go together"),
    (dict(checkpoint_dir="X"), ValueError, "checkpoint_every and checkpoint_dir go together"),
    (dict(checkpoint_every=2, checkpoint_dir=3), TypeError, "checkpoint_dir must be a folder"),
    (dict(checkpoint_async=True), ValueError, "need checkpoint_every"),
    (dict(checkpoint_every=2, checkpoint_dir="X", checkpoint_async="yes"), TypeError, "checkpoint_async"),
    (dict(checkpoint_every=2, checkpoint_dir="X", checkpoint_delay=-1), ValueError, "checkpoint_delay"),
    (dict(checkpoint_every=2, checkpoint_dir="X", checkpoint_delay=11), ValueError, "checkpoint_delay"),
    (dict(checkpoint_every=2, checkpoint_dir="X", checkpoint_store="tape"), ValueError,
     r"checkpoint_store must be one of \('disk', 'memory'\)"),
    (dict(resume="nowhere"), ValueError, "resume must be a folder of checkpoints"),
    (dict(resume=5), TypeError, "resume must be a folder"),
    (dict(fault=Fault("kill", 1, 4, point="before rename")), ValueError, "fault.point.*needs checkpoint_every"),
    (dict(checkpoint_every=3, checkpoint_dir="X", fault=Fault("kill", 1, 4, point="before rename")), ValueError,
     "fault.step=4 with a point must be a step whose checkpoint this run writes"),
])
def test_bad_checkpoint_arguments_are_refused_naming_them(tmp_path, monkeypatch, kwargs, error, words):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=words):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", **{**KW, **kwargs})
    with pytest.raises(error, match=words):
        pipeline_kw = {k: v for k, v in KW.items() if k != "optimizer"}  # plain SGD only
        train_pipeline(MLP((8, 16, 16, 3), dtype=np.float64), X, Y, stages=2, start_method="fork",
                       **{**pipeline_kw, **kwargs})


def test_a_resume_must_continue_the_same_training(tmp_path, clean):
    train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", checkpoint_every=4, checkpoint_dir=tmp_path,
                        **{**KW, "steps": 4})
    for change, words in [(dict(seed=1), "seed=0; this run has seed=1"),
                          (dict(batch_size=6), "batch_size=12; this run has batch_size=6"),
                          (dict(optimizer=None), "optimizer='SGD'; this run has optimizer=None")]:
        with pytest.raises(ValueError, match=words):
            train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", resume=tmp_path, **{**KW, **change})
    with pytest.raises(ValueError, match="n_params="):
        train_data_parallel(MLP((8, 12, 3), dtype=np.float64), X, Y, workers=2, start_method="fork",
                            resume=tmp_path, **KW)
    with pytest.raises(ValueError, match="dtype='float64'; this run has dtype='float32'"):
        train_data_parallel(MLP((8, 16, 3)), X, Y, workers=2, start_method="fork", resume=tmp_path, **KW)
    with pytest.raises(ValueError, match="checkpoint is of step 4; steps=4 leaves nothing to run"):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", resume=tmp_path, **{**KW, "steps": 4})
    with pytest.raises(ValueError, match="give params or resume, not both"):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", resume=tmp_path,
                            params=MODEL.init_params(0), **KW)


def test_a_folder_of_finished_work_is_not_overwritten(tmp_path, clean):
    train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", checkpoint_every=4, checkpoint_dir=tmp_path,
                        **{**KW, "steps": 8})
    with pytest.raises(ValueError, match="holds a complete checkpoint of step 8, later than this run's start"):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", checkpoint_every=4, checkpoint_dir=tmp_path,
                            **KW)


def test_an_empty_or_broken_resume_folder_says_why(tmp_path):
    with pytest.raises(CheckpointError, match="no complete checkpoint in"):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", resume=tmp_path, **KW)
    (tmp_path / "step-00000004").mkdir()
    with pytest.raises(CheckpointError, match="step-00000004 has no manifest.json"):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", resume=tmp_path, **KW)
