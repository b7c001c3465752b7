"""ZeRO stage 1 in the data-parallel trainer (course_lib.parallel.zero): the same
parameters as plain data parallelism with a stateful optimizer, 1/N of the optimizer
state per worker (measured), and clear errors where it does not apply."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.datasets import load_digits
from course_lib.memory import measured_state_bytes
from course_lib.models import MLP
from course_lib.optim import LAMB, SGD
from course_lib.parallel.engine.workers import Fault, WorkerError
from course_lib.parallel.partition import chunk_bounds
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.reference import train_serial

DIGITS = load_digits("train")
X, Y = DIGITS.x[:300], DIGITS.y[:300]
MODEL = MLP((64, 30, 10))
KW = dict(batch_size=64, steps=8, seed=3, progress=False)
OPT = SGD(0.1, momentum=0.9)


@pytest.mark.parametrize("method", ["fork", "forkserver", pytest.param("spawn", marks=pytest.mark.slow)])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_zero_1_gives_the_parameters_of_plain_data_parallelism(workers, method):
    plain = train_data_parallel(MODEL, X, Y, workers=workers, optimizer=OPT, start_method=method, **KW)
    zero = train_data_parallel(MODEL, X, Y, workers=workers, optimizer=OPT, zero_stage=1,
                               start_method=method, **KW)
    serial = train_serial(MODEL, X, Y, optimizer=OPT, **KW)
    assert np.abs(zero.params - plain.params).max() <= 1e-6
    assert np.abs(zero.params - serial.params).max() <= 1e-6
    assert zero.replicas_in_sync and plain.replicas_in_sync
    np.testing.assert_allclose(zero.loss, serial.loss, rtol=1e-5)


def test_momentum_changes_the_run_and_the_template_keeps_no_state():
    """The optimizer really acts (momentum differs from plain SGD) and the object passed
    in is a template: runs do not share its state."""
    plain_sgd = train_serial(MODEL, X, Y, lr=0.1, **KW)
    first = train_serial(MODEL, X, Y, optimizer=OPT, **KW)
    again = train_serial(MODEL, X, Y, optimizer=OPT, **KW)
    assert np.abs(first.params - plain_sgd.params).max() > 1e-3
    assert np.array_equal(first.params, again.params)
    assert OPT.t == 0 and OPT._velocity is None


def test_each_worker_keeps_its_chunk_of_the_optimizer_state():
    """SGD with momentum: one float32 velocity per parameter. Without ZeRO every worker
    holds all 2,260 (9,040 bytes); with ZeRO-1 worker r holds chunk r of
    chunk_bounds(2260, 3) (64-byte aligned)."""
    n = MODEL.n_params
    plain = train_data_parallel(MODEL, X, Y, workers=3, optimizer=OPT, start_method="fork", **KW)
    zero = train_data_parallel(MODEL, X, Y, workers=3, optimizer=OPT, zero_stage=1, start_method="fork", **KW)
    assert [m["optimizer_states"] for m in plain.memory] == [4 * n] * 3
    chunks = [(hi - lo) * 4 for lo, hi in chunk_bounds(n, 3)]
    assert [m["optimizer_states"] for m in zero.memory] == chunks
    assert sum(chunks) == 4 * n
    assert all(m["parameters"] == m["gradients"] == 4 * n for m in zero.memory)


def test_plain_sgd_has_no_state_to_shard():
    zero = train_data_parallel(MODEL, X, Y, workers=2, lr=0.1, zero_stage=1, start_method="fork", **KW)
    plain = train_data_parallel(MODEL, X, Y, workers=2, lr=0.1, start_method="fork", **KW)
    assert np.array_equal(zero.params, plain.params)
    assert [m["optimizer_states"] for m in zero.memory] == [0, 0]


def test_measured_state_bytes_counts_the_arrays():
    p = np.zeros(5, np.float32)
    assert measured_state_bytes(p, p, None) == {"parameters": 20, "gradients": 20, "optimizer_states": 0}


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"zero_stage": 4}, ValueError, "zero_stage"),
    ({"zero_stage": True}, TypeError, "zero_stage"),
    ({"zero_stage": 1, "backend": "pipe"}, ValueError, "backend='shm'"),
    ({"zero_stage": 1, "optimizer": LAMB(MODEL, 0.01)}, ValueError, "element-wise"),
    ({"optimizer": "adam"}, TypeError, "optimizer"),
])
def test_bad_arguments(kwargs, exc, match):
    args = {"optimizer": OPT, **kwargs}
    with pytest.raises(exc, match=match):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", **args, **KW)


def test_a_fault_in_a_zero_worker_is_reported():
    with pytest.raises(WorkerError, match="worker 1 raised"):
        train_data_parallel(MODEL, X, Y, workers=2, optimizer=OPT, zero_stage=1, start_method="fork",
                            fault=Fault("raise", rank=1, step=2), **KW)
