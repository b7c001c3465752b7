"""Exercises of notebook 11 (tensor and hybrid parallelism).

Expected values come from :mod:`course_lib.planner` and :mod:`course_lib.parallel.tensor`.
The givens of each exercise are module constants, so the notebook can print them.
"""

from __future__ import annotations

import math

import numpy as np

from .. import comm
from ..models import MLP
from ..parallel.tensor import tensor_parallel_bytes
from ..planner import EXAMPLE_SIZES, best_config, device_parameters
from . import Result, _coerce, _fmt, check, check_count

__all__ = [
    "BEST_SPLIT",
    "CROSSOVER",
    "TENSOR_BYTES",
    "ex_best_split",
    "ex_crossover_batch",
    "ex_tensor_bytes",
]

#: Givens of :func:`ex_best_split`: the scaled-up running example on V100s linked by NVLink
#: (the course's NVLink latency, :data:`course_lib.comm.NVLINK_LATENCY`), a device count and
#: batch whose best grid the notebook does not print.
BEST_SPLIT = {
    "sizes": EXAMPLE_SIZES,
    "batch_size": 1024,
    "devices": 32,
    "device_id": "v100_sxm2_32gb",
    "latency": comm.NVLINK_LATENCY,
}
#: Givens of :func:`ex_tensor_bytes`: layer widths (float32), global batch, tensor-parallel workers.
TENSOR_BYTES = {"sizes": (256, 2048, 2048, 2048, 2048, 1000), "batch_size": 128, "workers": 4}
#: Givens of :func:`ex_crossover_batch`: layer widths (float32) of a model trained either with
#: data parallelism or with the tensor split of notebook 11 (pairs (0, 1), (2, 3); layer 4 whole).
CROSSOVER = {"sizes": (512, 4096, 4096, 4096, 4096, 10)}


def _best_split():
    g = BEST_SPLIT
    return best_config(
        MLP(g["sizes"]), g["batch_size"], g["devices"], latency=g["latency"],
        **device_parameters(g["device_id"]),
    )


def ex_best_split(answer) -> Result:
    """The fastest grid (N_d, N_p) for the scaled-up running example on the devices and batch of
    :data:`BEST_SPLIT`; a grid (N_d, N_p, 1) with the tensor degree N_t = 1 is the same grid."""
    best = _best_split()
    triple = _coerce(answer, (0, 0, 0))
    if isinstance(triple, (tuple, list, np.ndarray)) and len(triple) == 3:
        try:
            if float(triple[2]) != 1:
                return Result(False, f"✗ best grid (N_d, N_p) = {_fmt(tuple(triple))} is not right. This question "
                                     "has no tensor parallelism: N_t = 1, and N_d x N_p = "
                                     f"{BEST_SPLIT['devices']}.")
            answer = tuple(triple[:2])  # (N_d, N_p, N_t = 1)
        except (TypeError, ValueError):
            pass  # not numbers: check() explains
    model = MLP(BEST_SPLIT["sizes"])
    grad_gb = model.n_params * model.dtype.itemsize / 1e9
    n = BEST_SPLIT["devices"]
    if n <= model.n_layers:
        pipeline_only = (f"Pure pipelining: the {model.n_layers} layers do not split evenly into {n} "
                         "stages (compare the compute bars) and the bubble grows with N_p; a small "
                         "all-reduce between 2 replicas costs less.")
    else:
        pipeline_only = (f"Pure pipelining needs {n} stages, but the model has only {model.n_layers} "
                         "layers: a stage holds at least one layer.")
    return check(
        answer,
        (best.data, best.pipeline),
        name="best grid (N_d, N_p)",
        rtol=0,
        atol=0.01,
        hint=f"enumerate_configs lists every N_d x N_p = {n}; take the fastest that fits in memory "
        f"(or move the explorer's sliders to {n} devices and batch {BEST_SPLIT['batch_size']:,}).",
        mistakes={
            (n, 1): f"Pure data parallelism all-reduces {grad_gb:.1f} GB of gradients every step: "
            "compare the all-reduce bar with the bubble of the pipelines.",
            (1, n): pipeline_only,
        },
    )


def ex_tensor_bytes(answer) -> Result:
    """MB (1e6 bytes) carried by the activation all-reduces of one tensor-parallel step."""
    g = TENSOR_BYTES
    model = MLP(g["sizes"])
    batch, item, sizes = g["batch_size"], model.dtype.itemsize, model.sizes
    expected = tensor_parallel_bytes(model, batch) / 1e6
    pairs = range(0, model.n_layers - 1, 2)
    forward = batch * item * sum(sizes[i + 2] for i in pairs) / 1e6
    return check(
        answer,
        expected,
        name="all-reduce payload per step",
        unit="MB",
        rtol=5e-3,
        hint="per pair of layers (0, 1), (2, 3): one all-reduce of the pair's output in the forward "
        "pass and one of its input gradient in the backward pass; batch x width x 4 bytes each.",
        mistakes={
            forward: "That is the forward pass only. The backward pass all-reduces the input gradient "
            "of every pair but the first (the f operator).",
            expected + batch * item * sizes[0] / 1e6: "The first pair's input is the data: it needs no "
            "gradient, so the backward pass skips that all-reduce.",
            expected + batch * item * sizes[-1] / 1e6: "The unpaired last layer is replicated: every "
            "worker computes the logits whole, so there is nothing to add up.",
            expected / g["workers"]: "The payload does not shrink with the workers: every worker "
            "contributes a partial sum as wide as the whole activation.",
            model.n_params * item / 1e6: "That is the gradient payload of data parallelism. Tensor "
            "parallelism all-reduces activations, not weight gradients.",
        },
    )


def ex_crossover_batch(answer) -> Result:
    """Smallest global batch at which the tensor split of :data:`CROSSOVER` moves at least as
    many bytes per step as data parallelism (the all-reduce payload of one worker)."""
    model = MLP(CROSSOVER["sizes"])
    item, sizes = model.dtype.itemsize, model.sizes
    gradients = model.n_params * item  # data parallelism: every gradient, whatever B
    per_sample = tensor_parallel_bytes(model, 1)  # the activation all-reduces of one sample
    expected = math.ceil(gradients / per_sample)
    forward = item * (sizes[2] + sizes[4])
    first_input = per_sample + item * sizes[0]
    return check_count(
        answer,
        expected,
        name="crossover batch B",
        noun="sample",
        hint="data parallelism moves 4 bytes per parameter whatever B; the tensor split moves "
        "4 B (sizes[2] + sizes[4] + sizes[2]) bytes: the outputs of both pairs forward, the input "
        "gradient of the second pair backward. Solve for B and round up.",
        mistakes={
            math.ceil(gradients / forward): "That counts the forward all-reduces only. The backward "
            "pass all-reduces the input gradient of every pair but the first (the f operator).",
            math.ceil(gradients / first_input): "The first pair's input is the data: it needs no "
            "gradient, so the backward pass skips that all-reduce.",
            math.ceil(gradients / per_sample / 2): "Both payloads are those of one worker's all-reduces: "
            "do not double one side.",
        },
    )
