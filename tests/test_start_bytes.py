"""What goes into a starting worker stays small, for every trainer, however long the run.

Under ``spawn`` the parent writes each worker's pickled arguments into a pipe whose read
end it holds itself until the write returns: a worker killed before it has read them
all blocks that write for ever once they exceed the pipe's buffer (64 KiB on Linux,
16 KiB at first on macOS). So every trainer sends shapes, seeds and shared-memory names,
never data or per-step plans (``course_lib.parallel.engine.workers``, "Why starting a worker
cannot block"). These tests measure the pickled arguments of every trainer's workers for
a 100,000-step run on a data set of 12.8 MB, without starting any process.
"""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from course_lib.models import MLP
from course_lib.optim import SGD
from course_lib.parallel.engine.workers import (
    MAX_START_BYTES,
    ProcessGroup,
    demo_worker,
    pickled_size,
)

STEPS = 100_000
SMALL = 4 * 1024  # what the course's trainers need: shapes, seeds, names (about 1 KB)


class _Measured(Exception):
    """Raised instead of starting the processes, once their arguments are measured."""


@pytest.fixture
def measured(monkeypatch):
    """Every ProcessGroup built from now on records its start_bytes and stops there."""
    seen: list[tuple[str, list]] = []
    original = ProcessGroup._measure_start_bytes

    def measure(self):
        seen.append((self.name, original(self)))
        raise _Measured

    monkeypatch.setattr(ProcessGroup, "_measure_start_bytes", measure)
    return seen


@pytest.fixture(scope="module")
def large():
    rng = np.random.default_rng(0)
    x = rng.random((50_000, 64), dtype=np.float32)  # 12.8 MB: a thousand times the limit
    return x, rng.integers(0, 10, 50_000)


def _runs(x, y):
    from course_lib.parallel.train.data import train_data_parallel
    from course_lib.parallel.train.pipeline import train_pipeline
    from course_lib.parallel.train.speedup import WorkerPool
    from course_lib.parallel.train.tensor import train_tensor_parallel

    model = MLP((64, 32, 32, 10))
    used = SGD(0.1, momentum=0.9)  # an optimizer with state: its buffers must not travel
    used.step(np.ones(model.n_params, np.float32), np.ones(model.n_params, np.float32))
    kw = dict(batch_size=32, steps=STEPS, start_method="spawn")
    return {
        "data parallel (shm)": lambda: train_data_parallel(model, x, y, workers=2, optimizer=used, **kw),
        "data parallel (pipe)": lambda: train_data_parallel(model, x, y, workers=2, backend="pipe", **kw),
        "ZeRO-1": lambda: train_data_parallel(model, x, y, workers=2, zero_stage=1, optimizer=used, **kw),
        "pipeline": lambda: train_pipeline(model, x, y, stages=2, **kw),
        "hybrid": lambda: train_pipeline(model, x, y, data=2, stages=2, **kw),
        "tensor parallel": lambda: train_tensor_parallel(model, x, y, workers=2, **kw),
        "worker pool (chapter 01)": lambda: WorkerPool(model, x, y, 2, start_method="spawn"),
    }


@pytest.mark.parametrize("run", list(_runs(None, None)))
def test_every_trainer_starts_its_workers_with_small_arguments(run, measured, large):
    with pytest.raises(_Measured):
        _runs(*large)[run]()
    [(name, sizes)] = measured
    assert all(size is not None and size < SMALL for size in sizes), (run, name, sizes)


def test_the_pickled_size_counts_data_but_not_pipe_ends():
    recv, send = multiprocessing.Pipe(duplex=False)
    try:
        assert pickled_size((recv, send)) < 100  # handles, as spawn sends them
    finally:
        recv.close()
        send.close()
    data = np.zeros(10_000, np.float32)
    assert data.nbytes <= pickled_size(data) < data.nbytes + 300


@pytest.mark.parametrize("where", ["args", "rank_args", "kwargs"])
@pytest.mark.parametrize("method", multiprocessing.get_all_start_methods())
def test_too_large_arguments_are_refused_before_anything_starts(where, method, monkeypatch):
    def never(self):  # pragma: no cover - the check must come first
        raise AssertionError("a process was started")

    monkeypatch.setattr(ProcessGroup, "start", never)
    big = np.zeros(MAX_START_BYTES // 4 + 1, np.float32)
    kw = {"args": (1, None, 1.0, big)} if where == "args" else (
        {"args": (1,), "rank_args": [(None, 1.0, big), (None, 1.0, None)]} if where == "rank_args"
        else {"args": (1,), "kwargs": {"result": big}})
    with pytest.raises(ValueError, match=r"worker 0 .* pickle to [\d,]+ bytes; at most MAX_START_BYTES"):
        ProcessGroup(demo_worker, 2, start_method=method, **kw)


def test_arguments_just_under_the_limit_are_accepted():
    group = ProcessGroup(demo_worker, 1, args=(1,), kwargs={"result": b"x" * (MAX_START_BYTES - 200)},
                         start_method="spawn")
    assert MAX_START_BYTES - 200 < group.start_bytes[0] <= MAX_START_BYTES


def test_fork_accepts_arguments_that_cannot_be_pickled():
    group = ProcessGroup(demo_worker, 1, args=(1,), kwargs={"result": lambda: None}, start_method="fork")
    assert group.start_bytes == [None]


def test_a_large_message_to_a_worker_is_refused_before_it_is_sent():
    group = ProcessGroup(demo_worker, 1, args=(0,), start_method="fork", channels=True)
    with pytest.raises(ValueError, match="message must pickle to at most MAX_START_BYTES"):
        group.send(0, np.zeros(MAX_START_BYTES, np.uint8))
