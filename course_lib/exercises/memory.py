"""Exercises of notebook 09 (memory: model states, ZeRO, activations).

Expected values come from :mod:`course_lib.memory`, :mod:`course_lib.schedule` and
:mod:`course_lib.planner`. The givens of each exercise are module constants, so the
notebook can print them.
"""

from __future__ import annotations

from ..memory import (
    mlp_activation_bytes,
    model_state_bytes,
    transformer_activation_bytes,
    zero_step_bytes,
)
from ..models import MLP
from ..planner import stage_params
from ..precision import FLOAT16_MAX, largest_loss_scale
from ..schedule import partition_layers
from . import Result, check

__all__ = [
    "CHECKPOINT",
    "LOSS_SCALE",
    "MEMORY",
    "STAGE_ACTIVATIONS",
    "ZERO",
    "ZERO3",
    "ex_checkpoint_mb",
    "ex_loss_scale",
    "ex_memory_per_device",
    "ex_stage_activations",
    "ex_zero3_traffic",
    "ex_zero_gb",
]

#: Givens of :func:`ex_zero_gb`: a 13-billion-parameter model, mixed-precision Adam (2 + 2 + 12
#: bytes per parameter, the ZeRO paper's accounting), 32 data-parallel GPUs, ZeRO stage 2.
ZERO = {"n_params": 13e9, "devices": 32, "zero_stage": 2}
#: Givens of :func:`ex_zero3_traffic`: 2 billion parameters sent as 16-bit values (2 bytes) over
#: 16 data-parallel GPUs with ZeRO stage 3, ring collectives.
ZERO3 = {"n_params": 2e9, "devices": 16, "grad_bytes": 2.0}
#: Givens of :func:`ex_loss_scale`: the largest gradient magnitude of a float16 backward pass.
LOSS_SCALE = {"max_grad": 3.2}
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


def ex_zero_gb(answer) -> Result:
    """GB (1e9 bytes) of model states per GPU for :data:`ZERO`."""
    g = ZERO
    per_stage = {k: model_state_bytes(g["n_params"], g["devices"], k).total / 1e9 for k in range(4)}
    one_less = model_state_bytes(g["n_params"], g["devices"] - 1, g["zero_stage"]).total / 1e9
    return check(
        answer,
        per_stage[g["zero_stage"]],
        rtol=2e-3,  # 31.7 will do; the same sum over 31 GPUs (31.87) is 0.6% off
        name="model states per GPU",
        unit="GB",
        hint="stage 2 keeps the 2-byte parameters whole and shards the 2-byte gradients and the "
             "12 bytes of optimizer states over the 32 GPUs: (2 + (2 + 12) / 32) x 13e9 bytes.",
        mistakes={
            per_stage[0]: "That is plain data parallelism (stage 0): 16 bytes per parameter on every GPU.",
            per_stage[1]: "That is stage 1: only the optimizer states are sharded; stage 2 shards the "
                          "gradients too.",
            per_stage[3]: "That is stage 3: it also shards the parameters.",
            one_less: f"That shards over {g['devices'] - 1} GPUs; all {g['devices']} data-parallel GPUs hold a share.",
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
        name="activations of the first stage",
        unit="GB",
        rtol=1e-2,
        hint="one layer holds L b h (10 + 24/N_t + 5 a L/(h N_t)) bytes per micro-batch; under 1F1B the "
        "first stage holds N_p micro-batches of its n_layers/N_p layers.",
        mistakes={
            stage(min(n_p, m), tensor=1): "That leaves out the tensor split: with N_t devices per layer "
            "the 24 L b h and the attention scores are divided by N_t (the 10 L b h are not).",
            stage(m): "That is GPipe, which holds all M micro-batches. Under 1F1B the first stage "
            "holds at most N_p of them.",
            stage(1): "That is one micro-batch. The first stage of a 1F1B pipeline holds N_p "
            "micro-batches at its peak.",
            stage(min(n_p, m), recompute="full"): "That is with full recomputation (2 L b h per layer); "
            "the question asks without it.",
            stage(min(n_p, m), tensor=1) / n_t: "That divides every term by N_t. The 10 L b h of layer-norm "
            "and dropout inputs and of the first linear layers' inputs stay whole on every device.",
        },
    )


def ex_zero3_traffic(answer) -> Result:
    """GB one GPU sends per step for :data:`ZERO3` (ring reduce-scatter and all-gathers)."""
    g = ZERO3
    n, d, b = g["n_params"], g["devices"], g["grad_bytes"]
    expected = zero_step_bytes(n, d, 3, grad_bytes=b) / 1e9
    return check(
        answer,
        expected,
        name="bytes sent per GPU and step",
        unit="GB",
        hint="a ring reduce-scatter or all-gather of X bytes sends (N - 1)/N X per device; stage 3 does "
             "three of them per step (all-gather before the forward, again before the backward, "
             "reduce-scatter of the gradient), each of 2 x 2e9 bytes.",
        mistakes={
            zero_step_bytes(n, d, 2, grad_bytes=b) / 1e9: "That is stages 0-2 (one all-reduce). Stage 3 "
            "gathers the parameters twice per step: 1.5 times as much.",
            3 * n * b / 1e9: "That leaves out the (N - 1)/N: a device does not send its own share.",
            zero_step_bytes(n, d, 3, grad_bytes=4.0) / 1e9: "That sends 4-byte values; the givens say 16-bit (2 bytes).",
            zero_step_bytes(n, d, 3, grad_bytes=b) / 1e9 / d: "That divides by N once more: each collective "
            "moves the whole parameter size around the ring, (N - 1)/N of it through each device.",
        },
    )


def ex_loss_scale(answer) -> Result:
    """The largest power-of-two loss scale for :data:`LOSS_SCALE` without float16 overflow."""
    m = LOSS_SCALE["max_grad"]
    expected = largest_loss_scale(m)
    return check(
        answer,
        expected,
        name="loss scale S",
        rtol=1e-9,
        hint=f"float16's largest value is {FLOAT16_MAX:,.0f}: the largest power of two S with "
             f"{m} x S <= {FLOAT16_MAX:,.0f}.",
        mistakes={
            2 * expected: f"{m} x {2 * expected:,.0f} = {m * 2 * expected:,.0f} overflows float16 "
                          f"(largest {FLOAT16_MAX:,.0f}).",
            65536.0: f"2**16 is a common starting scale, but {m} x 65,536 overflows; dynamic scaling "
                     "would halve it until it fits.",
            FLOAT16_MAX / m: "That is not a power of two; powers of two scale without rounding error.",
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
        name="peak activations at the best k",
        unit="MB",
        hint="try every k from 1 to n with memory.mlp_activation_bytes(model, B, segments=k) and take "
             "the smallest; it lies near sqrt(n).",
        mistakes={
            mlp_activation_bytes(model, b) / 1e6: "That stores every activation (k = 1 or k = n saves nothing).",
            inputs: "That counts the checkpoints only; the segment being recomputed is held too.",
        },
    )
