"""Exercises of notebook 10 (memory, part 2: activations, recomputation, splitting the model).

Expected values come from :mod:`course_lib.memory` and :mod:`course_lib.schedule`. The givens
of each exercise are module constants, so the notebook can print them.
"""

from __future__ import annotations

from ..i18n import tr
from ..memory import mlp_activation_bytes, transformer_activation_bytes
from ..models import MLP
from ..schedule import partition_layers
from . import Result, check

__all__ = [
    "CHECKPOINT",
    "MEMORY",
    "STAGE_ACTIVATIONS",
    "ex_checkpoint_mb",
    "ex_memory_per_device",
    "ex_stage_activations",
]

#: Givens of :func:`ex_checkpoint_mb`: an MLP of 25 layers (float32), a batch of 64 samples.
CHECKPOINT = {"sizes": (64,) + (1024,) * 24 + (10,), "batch_size": 64}
#: Givens of :func:`ex_memory_per_device`: layer widths and pipeline stages (SGD, float32).
MEMORY = {"sizes": (1024,) + (4096,) * 8 + (10,), "stages": 4}
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


def ex_memory_per_device(answer) -> Result:
    """MB of parameters + gradients on the fullest device of a 4-stage pipeline."""
    model = MLP(MEMORY["sizes"])
    bounds = partition_layers(model, MEMORY["stages"])
    item = model.dtype.itemsize
    spans = [model.layer_range(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]  # each stage's slice
    expected = float(max(s.stop - s.start for s in spans) * item * 2 / 1e6)
    even = model.n_params * item * 2 / MEMORY["stages"] / 1e6
    return check(
        answer,
        expected,
        name=tr("memory per device"),
        unit="MB",
        hint=tr("split the layers with partition_layers; a stage holds the weights and biases of its "
                "layers (layer i: sizes[i] x sizes[i + 1] weights and sizes[i + 1] biases): take the largest "
                "stage and multiply its parameters by 4 bytes and by 2 (parameters and gradients)."),
        mistakes={
            even: tr("That assumes the parameters split evenly over the stages. Stages hold whole "
                     "layers, split by compute: count the parameters of each stage's layers."),
            expected / 2: tr("That counts the parameters only; the gradients need as much again."),
        },
    )


def ex_stage_activations(answer) -> Result:
    """GB of activations on the first pipeline stage at its peak (1F1B, no recomputation)."""
    g = STAGE_ACTIVATIONS
    seq, b, h, a = g["seq_length"], g["micro_batch"], g["hidden"], g["heads"]
    n_t, n_p, layers, m = g["tensor"], g["pipeline"], g["layers"], g["micro_batches"]

    def stage(held: int, tensor: int = n_t, recompute: str = "none") -> float:
        per_layer = transformer_activation_bytes(seq, b, h, a, tensor=tensor, recompute=recompute)
        return held * (layers // n_p) * per_layer / 1e9

    expected = stage(min(n_p, m))
    return check(
        answer,
        expected,
        name=tr("activations of the first stage"),
        unit="GB",
        rtol=1e-2,
        hint=tr("one layer holds L b h (10 + 24/N_t + 5 a L/(h N_t)) bytes per micro-batch; under 1F1B the "
                "first stage holds N_p micro-batches of its n_layers/N_p layers."),
        mistakes={
            stage(min(n_p, m), tensor=1): tr("That leaves out the tensor split: with N_t devices per layer "
                                             "the 24 L b h and the attention scores are divided by N_t (the "
                                             "10 L b h are not)."),
            stage(m): tr("That is GPipe, which holds all M micro-batches. Under 1F1B the first stage "
                         "holds at most N_p of them."),
            stage(1): tr("That is one micro-batch. The first stage of a 1F1B pipeline holds N_p "
                         "micro-batches at its peak."),
            stage(min(n_p, m), recompute="full"): tr("That is with full recomputation (2 L b h per layer); "
                                                     "the question asks without it."),
            stage(min(n_p, m), tensor=1) / n_t: tr("That divides every term by N_t. The 10 L b h of layer-norm "
                                                   "and dropout inputs and of the first linear layers' inputs "
                                                   "stay whole on every device."),
        },
    )


def ex_checkpoint_mb(answer) -> Result:
    """MB of activations at the best number of checkpointed segments for :data:`CHECKPOINT`."""
    model, b = MLP(CHECKPOINT["sizes"]), CHECKPOINT["batch_size"]
    peaks = {k: mlp_activation_bytes(model, b, segments=k) / 1e6 for k in range(1, model.n_layers + 1)}
    best = min(peaks, key=peaks.get)
    inputs = sum(model.sizes[lo] for lo in partition_layers(model, best)[:-1]) * b * model.dtype.itemsize / 1e6
    return check(
        answer,
        peaks[best],
        name=tr("peak activations at the best n_ckpt"),
        unit="MB",
        hint=tr("try every n_ckpt from 1 to n_layers with memory.mlp_activation_bytes(model, B, segments=n_ckpt) "
                "and take the smallest; it lies near sqrt(n_layers)."),
        mistakes={
            mlp_activation_bytes(model, b) / 1e6: tr("That stores every activation (n_ckpt = 1 or "
                                                     "n_ckpt = n_layers saves nothing)."),
            inputs: tr("That counts the checkpoints only; the segment being recomputed is held too."),
            float(best): tr("That is the best number of segments, n_ckpt = {best}; the question asks for the MB "
                            "of activations it needs: memory.mlp_activation_bytes(model, B, segments=n_ckpt) / 1e6.",
                            best=best),
        },
    )
