"""One argument check for every trainer (course_lib.parallel.engine.job.check_job).

The one-process references (course_lib.parallel.train.reference) and the process trainers (data parallel,
ZeRO, tensor, pipeline, hybrid) take the common arguments with the same defaults and reject
the same bad values with the same TypeError or ValueError, naming the parameter, before any
process starts.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from course_lib.models import MLP
from course_lib.optim import SGD
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.pipeline import train_pipeline
from course_lib.parallel.train.reference import train_microbatched, train_serial, train_simulated
from course_lib.parallel.train.tensor import train_tensor_parallel

MODEL = MLP((6, 5, 4, 3))
RNG = np.random.default_rng(0)
X = RNG.standard_normal((24, 6)).astype(np.float32)
Y = RNG.integers(0, 3, 24)

#: Every trainer with the arguments that make it parallel (its split of the batch).
TRAINERS = {
    "train_serial": (train_serial, {}),
    "train_simulated": (train_simulated, {"workers": 2}),
    "train_microbatched": (train_microbatched, {"micro_batches": 2}),
    "train_data_parallel": (train_data_parallel, {"workers": 2, "start_method": "fork"}),
    "zero": (train_data_parallel, {"workers": 2, "zero_stage": 1, "optimizer": SGD(0.1, momentum=0.9),
                                   "start_method": "fork"}),
    "train_tensor_parallel": (train_tensor_parallel, {"workers": 2, "start_method": "fork"}),
    "train_pipeline": (train_pipeline, {"stages": 2, "micro_batches": 2, "start_method": "fork"}),
    "hybrid": (train_pipeline, {"data": 2, "stages": 2, "start_method": "fork"}),
}

#: Bad values of the common arguments: (arguments, exception, the parameter the message names).
BAD = [
    ({"model": "mlp"}, TypeError, "model"),
    ({"x": X[:, :4]}, ValueError, "x"),
    ({"x": np.zeros((24, 6), int)}, TypeError, "x"),
    ({"y": Y[:-1]}, ValueError, "y"),
    ({"y": Y + 3}, ValueError, "y"),
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"batch_size": -4}, ValueError, "batch_size"),
    ({"batch_size": 2.5}, TypeError, "batch_size"),
    ({"batch_size": 25}, ValueError, "batch_size"),  # more than the 24 samples
    ({"steps": 0}, ValueError, "steps"),
    ({"steps": "3"}, TypeError, "steps"),
    ({"steps": None, "epochs": 0}, ValueError, "epochs"),
    ({"steps": None, "epochs": 1.5}, TypeError, "epochs"),
    ({"epochs": 1}, ValueError, "steps or epochs"),
    ({"lr": 0.0}, ValueError, "lr"),
    ({"lr": -0.1}, ValueError, "lr"),
    ({"lr": float("nan")}, ValueError, "lr"),
    ({"lr": "0.1"}, TypeError, "lr"),
    ({"seed": -1}, ValueError, "seed"),
    ({"seed": 1.0}, TypeError, "seed"),
    ({"blas_threads": 0}, ValueError, "blas_threads"),
    ({"blas_threads": "all"}, TypeError, "blas_threads"),
    ({"params": np.zeros(3, np.float32)}, ValueError, "params"),
    ({"params": np.full(MODEL.n_params, np.nan, np.float32)}, ValueError, "params"),
]


def _call(name: str, **bad):
    trainer, extra = TRAINERS[name]
    args = {"model": MODEL, "x": X, "y": Y, "batch_size": 8, "steps": 2, "lr": 0.1, "seed": 0, **extra, **bad}
    return trainer(args.pop("model"), args.pop("x"), args.pop("y"), **args)


@pytest.mark.parametrize(("bad", "exc", "name"), BAD, ids=[f"{k}={v!r:.12}" for b, _, _ in BAD for k, v in [next(iter(b.items()))]])
def test_every_trainer_rejects_the_same_bad_input_with_the_same_message(bad, exc, name):
    messages = {}
    for trainer in TRAINERS:
        with pytest.raises(exc, match=name) as info:
            _call(trainer, **bad)
        messages[trainer] = str(info.value)
    assert len(set(messages.values())) == 1, f"different messages for {bad}: {messages}"


@pytest.mark.parametrize(("trainer", "split"), [("train_simulated", "workers"), ("train_data_parallel", "workers"),
                                                ("zero", "workers"), ("train_tensor_parallel", "workers"),
                                                ("train_microbatched", "data"), ("train_pipeline", "data"),
                                                ("hybrid", "data")])
@pytest.mark.parametrize(("value", "exc"), [(0, ValueError), (-1, ValueError), (2.0, TypeError)])
def test_every_trainer_names_its_split_of_the_batch(trainer, split, value, exc):
    with pytest.raises(exc, match=f"^{split} must be an integer"):
        _call(trainer, **{split: value})


@pytest.mark.parametrize("trainer", ["train_simulated", "train_data_parallel", "train_microbatched",
                                     "train_pipeline", "hybrid"])
def test_every_batch_splitting_trainer_needs_a_sample_per_part(trainer):
    split = "data" if trainer in ("train_microbatched", "train_pipeline", "hybrid") else "workers"
    with pytest.raises(ValueError, match=f"batch_size must be >= {split}"):
        _call(trainer, batch_size=3, **{split: 4})


def test_a_tensor_split_needs_no_sample_per_worker():
    """Tensor parallelism gives every worker the whole batch: more workers than samples is fine
    for the check (here it stops at the start method, the next argument)."""
    with pytest.raises(ValueError, match="start_method"):
        _call("train_tensor_parallel", batch_size=3, workers=4, start_method="threads")


def test_the_common_arguments_have_the_same_defaults():
    common = {"batch_size": 32, "steps": None, "epochs": None, "lr": 0.1, "seed": 0, "params": None,
              "blas_threads": 1}
    for trainer in (train_serial, train_simulated, train_microbatched, train_data_parallel,
                    train_tensor_parallel, train_pipeline):
        sig = inspect.signature(trainer).parameters
        assert {k: sig[k].default for k in common} == common, trainer.__name__
    for trainer in (train_data_parallel, train_tensor_parallel, train_pipeline):
        sig = inspect.signature(trainer).parameters
        assert (sig["timeout"].default, sig["start_method"].default) == (60.0, None), trainer.__name__


def test_a_good_call_passes_the_check():
    """The arguments the bad values replace are good: the one-process references run with them."""
    assert _call("train_serial").steps == _call("train_microbatched").steps == 2
    assert _call("train_simulated").workers == 2


def test_one_result_type_and_one_loss_history():
    """Every one-process reference returns a TrainResult whose arrays have one row per step;
    train_serial's epoch_loss is the size-weighted mean of its step losses."""
    from course_lib.models import TrainResult

    runs = [_call("train_serial"), _call("train_simulated"), _call("train_microbatched"),
            train_serial(MODEL, X, Y, epochs=2, batch_size=10)]
    for run in runs:
        assert isinstance(run, TrainResult)
        assert run.loss.shape == run.step_time.shape == (run.steps,)
        assert run.compute.shape == run.communication.shape == run.waiting.shape == (run.steps, run.workers)
    sizes = [10, 10, 4]  # 24 samples in batches of 10: the last batch of an epoch holds 4
    trained = runs[-1]
    assert trained.steps == 6 and len(trained.epoch_loss) == 2
    for e in range(2):
        losses = trained.loss[3 * e : 3 * e + 3]
        assert trained.epoch_loss[e] == pytest.approx(np.dot(losses, sizes) / 24, rel=1e-12)
