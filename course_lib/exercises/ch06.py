"""Exercises of chapter 06 (model, pipeline, tensor and hybrid parallelism; memory).

Expected values come from :mod:`course_lib.schedule`, :mod:`course_lib.planner`,
:mod:`course_lib.parallel.tensor` and :mod:`course_lib.memory`.
The givens of each exercise are module constants, so the notebook can print them.
"""

from __future__ import annotations

import numpy as np

from .. import comm
from ..memory import transformer_activation_bytes
from ..models import MLP
from ..parallel.tensor import tensor_parallel_bytes
from ..planner import EXAMPLE_SIZES, best_config, device_parameters, stage_params
from ..schedule import bubble_fraction, partition_layers, simulate_uniform
from . import Result, _coerce, _fmt, check, check_count

__all__ = [
    "BEST_SPLIT",
    "BUBBLE",
    "MEMORY",
    "MICRO_BATCHES",
    "STAGE_ACTIVATIONS",
    "STASH",
    "TENSOR_BYTES",
    "ex_best_split",
    "ex_bubble",
    "ex_memory_per_device",
    "ex_micro_batches",
    "ex_stage_activations",
    "ex_stash",
    "ex_tensor_bytes",
    "smallest_micro_batches",
]

#: Givens of :func:`ex_bubble`: stages and micro-batches.
BUBBLE = {"stages": 5, "micro_batches": 12}
#: Givens of :func:`ex_micro_batches`: stages and the largest acceptable bubble share.
MICRO_BATCHES = {"stages": 8, "target": 0.10}
#: Givens of :func:`ex_memory_per_device`: layer widths and pipeline stages (SGD, float32).
MEMORY = {"sizes": (1024,) + (4096,) * 8 + (10,), "stages": 4}
#: Givens of :func:`ex_stash`: stages and micro-batches.
STASH = {"stages": 4, "micro_batches": 16}
#: Givens of :func:`ex_best_split`: the scaled-up running example on V100s (a device count
#: and batch whose best grid section 5 does not print).
BEST_SPLIT = {
    "sizes": EXAMPLE_SIZES,
    "batch_size": 1024,
    "devices": 32,
    "device_id": "v100_sxm2_32gb",
    "latency": comm.NETWORK_LATENCY,
}
#: Givens of :func:`ex_tensor_bytes`: layer widths (float32), global batch, tensor-parallel workers.
TENSOR_BYTES = {"sizes": (256, 2048, 2048, 2048, 2048, 1000), "batch_size": 128, "workers": 4}
#: Givens of :func:`ex_stage_activations`: a GPT-3-shaped model (Korthikanti et al. 2023,
#: 16-bit activations) on an N_t x N_p grid with the 1F1B schedule, no recomputation.
STAGE_ACTIVATIONS = {
    "seq_length": 2048,
    "micro_batch": 1,
    "hidden": 12288,
    "heads": 96,
    "layers": 96,
    "tensor": 8,
    "pipeline": 8,
    "micro_batches": 32,
}


def ex_bubble(answer) -> Result:
    """Bubble share of a GPipe step with the N_p stages and M micro-batches of :data:`BUBBLE`."""
    s, m = BUBBLE["stages"], BUBBLE["micro_batches"]
    bubble = bubble_fraction(s, m)
    return check(
        answer,
        bubble,
        name="bubble share",
        rtol=1e-3,
        hint="a step lasts M + N_p - 1 slots; every stage is busy in M of them.",
        mistakes={
            (s - 1) / m: "That is (N_p-1)/M: idle slots per busy slot. The share is idle slots "
            "over ALL slots of the step, M + N_p - 1.",
            1 - bubble: "That is the busy share; the question asks for the idle share.",
        },
    )


def smallest_micro_batches(stages: int, target: float) -> int:
    """Fewest micro-batches ``M`` with ``bubble_fraction(stages, M) <= target``.

    Examples
    --------
    >>> smallest_micro_batches(8, 0.10)
    63
    """
    if not 0 < target < 1:
        raise ValueError(f"target must be in (0, 1), got {target!r}")
    m = 1
    while bubble_fraction(stages, m) > target + 1e-12:
        m += 1
    return m


def ex_micro_batches(answer) -> Result:
    """Fewest micro-batches that keep the bubble of an 8-stage pipeline at or below 10%."""
    s, t = MICRO_BATCHES["stages"], MICRO_BATCHES["target"]
    expected = smallest_micro_batches(s, t)
    return check_count(
        answer,
        expected,
        name="micro-batches M",
        noun="micro-batch",
        hint="solve (N_p-1)/(M+N_p-1) <= target for M and round up to a whole micro-batch.",
        mistakes={
            round((s - 1) / t): "That is M + N_p - 1, the length of the step in slots; subtract N_p - 1.",
        },
    )


def ex_memory_per_device(answer) -> Result:
    """MB of parameters + gradients on the fullest device of a 4-stage pipeline."""
    model = MLP(MEMORY["sizes"])
    bounds = partition_layers(model, MEMORY["stages"])
    item = model.dtype.itemsize
    expected = float(stage_params(model, bounds).max() * item * 2 / 1e6)
    even = model.n_params * item * 2 / MEMORY["stages"] / 1e6
    return check(
        answer,
        expected,
        name="memory per device",
        unit="MB",
        hint="split the layers with partition_layers, count the parameters of the largest "
        "stage (stage_params) and multiply by 4 bytes and by 2 (parameters and gradients).",
        mistakes={
            even: "That assumes the parameters split evenly over the stages. Stages hold whole "
            "layers, split by compute: look at stage_params.",
            expected / 2: "That counts the parameters only; the gradients need as much again.",
        },
    )


def ex_stash(answer) -> Result:
    """How many times more micro-batch activations stage 0 holds under GPipe than under 1F1B."""
    s, m = STASH["stages"], STASH["micro_batches"]
    gpipe = simulate_uniform(s, m, schedule="gpipe").in_flight()[0]
    one_f = simulate_uniform(s, m, schedule="1f1b").in_flight()[0]
    return check(
        answer,
        float(gpipe / one_f),
        name="GPipe / 1F1B activation memory on stage 0",
        rtol=1e-3,
        hint="GPipe runs all M forwards before the first backward; 1F1B lets stage 0 start a "
        "backward as soon as its first micro-batch has come back through the N_p stages.",
    )


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


def ex_stage_activations(answer) -> Result:
    """GB of activations on the first pipeline stage at its peak (1F1B, no recomputation)."""
    g = STAGE_ACTIVATIONS
    s, b, h, a = g["seq_length"], g["micro_batch"], g["hidden"], g["heads"]
    t, p, layers, m = g["tensor"], g["pipeline"], g["layers"], g["micro_batches"]

    def stage(held: int, tensor: int = t, recompute: str = "none") -> float:
        per_layer = transformer_activation_bytes(s, b, h, a, tensor=tensor, recompute=recompute)
        return held * (layers // p) * per_layer / 1e9

    expected = stage(min(p, m))
    return check(
        answer,
        expected,
        name="activations of the first stage",
        unit="GB",
        rtol=1e-2,
        hint="one layer holds L b h (10 + 24/N_t + 5 a L/(h N_t)) bytes per micro-batch; under 1F1B the "
        "first stage holds N_p micro-batches of its n_layers/N_p layers.",
        mistakes={
            stage(min(p, m), tensor=1): "That leaves out the tensor split: with N_t devices per layer "
            "the 24 L b h and the attention scores are divided by N_t (the 10 L b h are not).",
            stage(m): "That is GPipe, which holds all M micro-batches. Under 1F1B the first stage "
            "holds at most N_p of them.",
            stage(1): "That is one micro-batch. The first stage of a 1F1B pipeline holds N_p "
            "micro-batches at its peak.",
            stage(min(p, m), recompute="full"): "That is with full recomputation (2 L b h per layer); "
            "the question asks without it.",
            stage(min(p, m), tensor=1) / t: "That divides every term by N_t. The 10 L b h of layer-norm "
            "and dropout inputs and of the first linear layers' inputs stay whole on every device.",
        },
    )
