"""Exercises of the transformer sections (tensor parallelism by heads, sequence parallelism).

Expected values come from :mod:`course_lib.tensor_cost` (and through it
:mod:`course_lib.comm` and :mod:`course_lib.memory`). The givens of each exercise are
module constants, so the notebook can print them.
"""

from __future__ import annotations

from ..tensor_cost import activation_bytes, tensor_allreduce_bytes, tensor_layer_communication
from . import Result, check

__all__ = [
    "LAYER_TRAFFIC",
    "SEQUENCE_MEMORY",
    "ex_layer_traffic",
    "ex_sequence_parallel_memory",
]

#: Givens of :func:`ex_layer_traffic`: one GPT-3 layer (h = 12288, sequence length 2048) with a
#: micro-batch of 2 sequences, 16-bit activations, split over N_t = 4 GPUs (ring collectives).
LAYER_TRAFFIC = {"seq_length": 2048, "micro_batch": 2, "hidden": 12288, "tensor": 4, "bytes_per_value": 2}
#: Givens of :func:`ex_sequence_parallel_memory`: a layer of the 22-billion-parameter model of
#: Korthikanti et al. 2023 (h = 6144, a = 64 heads, sequence length 2048), micro-batch 1,
#: 16-bit activations, N_t = 8, with tensor and sequence parallelism, no recomputation.
SEQUENCE_MEMORY = {"seq_length": 2048, "micro_batch": 1, "hidden": 6144, "heads": 64, "tensor": 8}


def ex_layer_traffic(answer) -> Result:
    """MB (1e6 bytes) each GPU sends in the tensor-parallel collectives of one layer of
    :data:`LAYER_TRAFFIC` in one training step (forward and backward, ring)."""
    g = LAYER_TRAFFIC
    s, b, h, t, item = g["seq_length"], g["micro_batch"], g["hidden"], g["tensor"], g["bytes_per_value"]
    sent = tensor_layer_communication(s, b, h, t, 1e9, 0.0, bytes_per_value=item).bytes_per_device / 1e6
    payload = tensor_allreduce_bytes(s, b, h, bytes_per_value=item) / 1e6
    return check(
        answer,
        sent,
        name="bytes each GPU sends per layer and step",
        unit="MB",
        rtol=5e-3,
        hint="4 all-reduces per layer (2 forward, 2 backward), each of m = L x b x h values of "
        "2 bytes; a ring all-reduce sends 2 (N_t - 1) / N_t x m per GPU.",
        mistakes={
            payload: "That is the payload, 4 m: what the all-reduces sum. In a ring each GPU sends "
            "2 (N_t - 1) / N_t of each payload (a reduce-scatter, then an all-gather).",
            sent / 2: "That counts the forward pass only (or one of the ring's two halves). The backward "
            "pass all-reduces the gradients of the inputs of the two split layers too.",
            sent / 4: "That is one all-reduce. A layer has four per step: after the attention's output "
            "projection and after the MLP block, forward; their mirror images backward.",
            payload / t: "The payload does not shrink with N_t: every GPU holds whole activations, and "
            "each contributes a partial sum as large as the layer's output.",
            sent * 2: "16-bit activations are 2 bytes per value, not 4.",
            payload * 2: "A ring sends 2 (N_t - 1) / N_t of the payload per GPU, not 2 times it.",
        },
    )


def ex_sequence_parallel_memory(answer) -> Result:
    """MB (1e6 bytes) of activations of one layer of :data:`SEQUENCE_MEMORY` per GPU, for one
    micro-batch, with tensor AND sequence parallelism (Korthikanti et al. 2023)."""
    g = SEQUENCE_MEMORY
    args = (g["seq_length"], g["micro_batch"], g["hidden"], g["heads"])
    t = g["tensor"]
    expected = activation_bytes(*args, tensor=t, sequence_parallel=True) / 1e6
    tensor_only = activation_bytes(*args, tensor=t) / 1e6
    return check(
        answer,
        expected,
        name="activations per layer and GPU",
        unit="MB",
        rtol=5e-3,
        hint="Table 2 of the paper: s b h (34 / t + 5 a s / (h t)) bytes, with s the sequence length, "
        "a the heads and t = N_t: sequence parallelism splits the 10 s b h that tensor parallelism "
        "leaves whole (layer norms, dropouts) as well.",
        mistakes={
            tensor_only: "That is tensor parallelism alone: s b h (10 + 24 / t + 5 a s / (h t)). Sequence "
            "parallelism splits the layer-norm and dropout regions too: 10 / t instead of 10.",
            activation_bytes(*args) / 1e6: "That is one GPU without any parallelism: divide by t.",
            activation_bytes(*args, tensor=t, sequence_parallel=True, selective_recompute=True) / 1e6:
            "That leaves out the attention scores, 5 a s / (h t): only selective recomputation "
            "discards them; here they are kept.",
        },
    )
