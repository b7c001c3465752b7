"""A device alone communicates nothing (issue 44 item 2): the N = 1 case of every byte count.

Chapter 12 once printed, for N_t = 1, "bytes per step measured 1,048,576" from a formula that
ignored N_t. Every measured byte count of a one-worker run is 0, and every formula the
notebooks print beside a measurement gives 0 for one device.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from course_lib import alpha_beta, memory, schedule, tensor_cost
from course_lib.models import MLP
from course_lib.parallel.tensor import tensor_parallel_bytes
from course_lib.parallel.train import (
    run_shm_collectives,
    train_data_parallel,
    train_pipeline,
    train_tensor_parallel,
)
from course_lib.transformer import Transformer, digit_sequences

pytest_plugins = ["leak_fixtures"]
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork start method, /dev/shm")

RNG = np.random.default_rng(0)
X = RNG.random((64, 64), dtype=np.float32)
Y = RNG.integers(0, 10, 64)
KW = dict(batch_size=32, steps=2, start_method="fork")


@linux
@pytest.mark.parametrize("run", [
    dict(), dict(backend="pipe"), dict(buckets=2), dict(backend="wire", buckets=2),
    dict(zero_stage=1), dict(zero_stage=2), dict(zero_stage=3),
], ids=["shm", "pipe", "buckets", "wire", "zero1", "zero2", "zero3"])
def test_one_data_parallel_worker_sends_nothing(run, clean):
    result = train_data_parallel(MLP((64, 32, 32, 10)), X, Y, workers=1, **KW, **run)
    assert np.all(result.bytes_per_step == 0)


@linux
def test_one_tensor_worker_sends_nothing_and_the_formulas_agree(clean):
    mlp = MLP((64, 32, 32, 10))
    assert np.all(train_tensor_parallel(mlp, X, Y, workers=1, **KW).bytes_per_step == 0)
    assert tensor_parallel_bytes(mlp, 32, workers=1) == 0 < tensor_parallel_bytes(mlp, 32, workers=2)
    assert tensor_parallel_bytes(mlp, 32) == tensor_parallel_bytes(mlp, 32, workers=4)  # the payload
    model = Transformer(hidden=16, heads=2, n_layers=1)
    run = train_tensor_parallel(model, digit_sequences(X), Y, workers=1, **KW)
    assert np.all(run.bytes_per_step == 0)
    assert tensor_cost.tensor_allreduce_bytes(8, 32, 16, bytes_per_value=8, tensor=1) == 0
    two = train_tensor_parallel(model, digit_sequences(X), Y, workers=2, **KW)
    assert int(two.bytes_per_step[0]) == tensor_cost.tensor_allreduce_bytes(8, 32, 16, bytes_per_value=8, tensor=2)


@linux
def test_one_stage_hands_nothing_over(clean):
    model = MLP((64, 32, 32, 10))
    run = train_pipeline(model, X, Y, stages=1, micro_batches=2, **KW)
    assert np.all(run.bytes_per_step == 0)
    assert schedule.handover_bytes(model, [0, model.n_layers], 32) == 0


@linux
def test_one_worker_of_the_collectives_reads_nothing_from_others(clean):
    out = run_shm_collectives(np.ones((1, 100), np.float32), start_method="fork")
    assert np.all(out["bytes_in"] == 0)


@pytest.mark.parametrize("collective", ["all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce",
                                        "all-to-all"])
def test_every_collective_formula_of_one_device_is_free(collective):
    assert alpha_beta.collective_time(collective, 1e6, 1, 1e9, 1e-6) == 0.0
    assert alpha_beta.collective_lower_bound(collective, 1e6, 1, 1e9) == 0.0


def test_the_other_formulas_of_one_device():
    assert all(memory.zero_step_bytes(1e6, 1, stage) == 0.0 for stage in range(4))
    assert alpha_beta.parameter_server_time(1e6, 1, 1e9, 1e-6) == 0.0
    layer = tensor_cost.tensor_layer_communication(2048, 1, 1024, 1, 1e9, 1e-6)
    assert layer.bytes_per_device == 0.0 and layer.time == 0.0


def test_chapter_12_prints_nothing_sent_by_one_device():
    """The stored run: for N_t = 1 the measured bytes and the formula are both 0, and for every
    N_t the two agree (re-execute chapter 12 after changing either)."""
    import json
    import re
    from pathlib import Path

    nb = json.loads((Path(__file__).parent.parent / "notebooks" / "12_tensor_parallelism.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"])
    found = re.findall(r"N_t = (\d+):.*?bytes per step measured ([\d,]+), formula ([\d,]+)", text)
    assert [n for n, _, _ in found] == ["1", "2", "4"], found
    for n_t, measured, formula in found:
        assert measured == formula, (n_t, measured, formula)
        assert (measured == "0") == (n_t == "1"), (n_t, measured)
