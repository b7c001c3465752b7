"""Exercises of notebook 12 (tensor parallelism: the MLP split, a transformer split by heads,
sequence parallelism).

Expected values come from :mod:`course_lib.parallel.tensor` and :mod:`course_lib.tensor_cost`
(and through it :mod:`course_lib.alpha_beta` and :mod:`course_lib.memory`). The givens of each
exercise are module constants, so the notebook can print them.
"""

from __future__ import annotations

import math

from ..i18n import tr
from ..models import MLP
from ..parallel.tensor import tensor_parallel_bytes
from ..tensor_cost import activation_bytes, tensor_allreduce_bytes, tensor_layer_communication
from . import Result, check, check_count

__all__ = [
    "CROSSOVER",
    "LAYER_TRAFFIC",
    "SEQUENCE_MEMORY",
    "TENSOR_BYTES",
    "ex_crossover_batch",
    "ex_layer_traffic",
    "ex_sequence_parallel_memory",
    "ex_tensor_bytes",
]

#: Givens of :func:`ex_tensor_bytes`: layer widths (float32), global batch, tensor-parallel workers.
TENSOR_BYTES = {"sizes": (256, 2048, 2048, 2048, 2048, 1000), "batch_size": 128, "workers": 4}
#: Givens of :func:`ex_crossover_batch`: layer widths (float32) of a model trained either with
#: data parallelism or with the tensor split of notebook 12 (pairs (0, 1), (2, 3); layer 4 whole).
CROSSOVER = {"sizes": (512, 4096, 4096, 4096, 4096, 10)}

#: Givens of :func:`ex_layer_traffic`: one GPT-3 layer (h = 12288, sequence length 2048) with a
#: micro-batch of 2 sequences, 16-bit activations, split over N_t = 4 GPUs (ring collectives).
LAYER_TRAFFIC = {"seq_length": 2048, "micro_batch": 2, "hidden": 12288, "tensor": 4, "bytes_per_value": 2}
#: Givens of :func:`ex_sequence_parallel_memory`: a layer of the 22-billion-parameter model of
#: Korthikanti et al. 2023 (h = 6144, a = 64 heads, sequence length 2048), micro-batch 1,
#: 16-bit activations, N_t = 8, with tensor and sequence parallelism, no recomputation.
SEQUENCE_MEMORY = {"seq_length": 2048, "micro_batch": 1, "hidden": 6144, "heads": 64, "tensor": 8}


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
        name=tr("all-reduce payload per step"),
        unit="MB",
        rtol=5e-3,
        hint=tr("per pair of layers (0, 1), (2, 3): one all-reduce of the pair's output in the forward "
                "pass and one of its input gradient in the backward pass; batch x width x 4 bytes each."),
        mistakes={
            forward: tr("That is the forward pass only. The backward pass all-reduces the input gradient "
                        "of every pair but the first (the f operator)."),
            expected + batch * item * sizes[0] / 1e6: tr("The first pair's input is the data: it needs no "
                                                         "gradient, so the backward pass skips that all-reduce."),
            expected + batch * item * sizes[-1] / 1e6: tr("The unpaired last layer is replicated: every "
                                                          "worker computes the logits whole, so there is nothing "
                                                          "to add up."),
            expected / g["workers"]: tr("The payload does not shrink with the workers: every worker "
                                        "contributes a partial sum as wide as the whole activation."),
            model.n_params * item / 1e6: tr("That is the gradient payload of data parallelism. Tensor "
                                            "parallelism all-reduces activations, not weight gradients."),
            expected * 2 * (g["workers"] - 1) / g["workers"]: tr(
                "That applies the ring's factor 2(N_t - 1)/N_t: it gives the bytes each worker SENDS in a ring "
                "all-reduce. The question asks the payload, what the all-reduces sum (as "
                "tensor.tensor_parallel_bytes counts it): batch x width x 4 bytes each."),
            expected * (g["workers"] - 1) / g["workers"]: tr(
                "That applies a ring factor (N_t - 1)/N_t to the payload. The question asks the payload itself, "
                "before any ring: batch x width x 4 bytes per all-reduce."),
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
        name=tr("crossover batch B"),
        noun="sample",
        hint=tr("data parallelism moves 4 bytes per parameter whatever B; the tensor split moves "
                "4 B (sizes[2] + sizes[4] + sizes[2]) bytes: the outputs of both pairs forward, the input "
                "gradient of the second pair backward. Solve for B and round up."),
        mistakes={
            math.ceil(gradients / forward): tr("That counts the forward all-reduces only. The backward "
                                               "pass all-reduces the input gradient of every pair but the first "
                                               "(the f operator)."),
            math.ceil(gradients / first_input): tr("The first pair's input is the data: it needs no "
                                                   "gradient, so the backward pass skips that all-reduce."),
            math.ceil(gradients / per_sample / 2): tr("Both payloads are those of one worker's all-reduces: "
                                                      "do not double one side."),
        },
    )


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
        name=tr("bytes each GPU sends per layer and micro-batch"),
        unit="MB",
        rtol=5e-3,
        hint=tr("4 all-reduces per layer (2 forward, 2 backward), each of m = L x b x h values of "
                "2 bytes; a ring all-reduce sends 2 (N_t - 1) / N_t x m per GPU."),
        mistakes={
            payload: tr("That is the payload, 4 m: what the all-reduces sum. In a ring each GPU sends "
                        "2 (N_t - 1) / N_t of each payload (a reduce-scatter, then an all-gather)."),
            sent / 2: tr("That counts the forward pass only (or one of the ring's two halves). The backward "
                         "pass all-reduces the gradients of the inputs of the two split layers too."),
            sent / 4: tr("That is one all-reduce. A layer has four per step: after the attention's output "
                         "projection and after the MLP block, forward; their mirror images backward."),
            payload / t: tr("The payload does not shrink with N_t: every GPU holds whole activations, and "
                            "each contributes a partial sum as large as the layer's output."),
            sent * 2: tr("16-bit activations are 2 bytes per value, not 4."),
            payload * 2: tr("A ring sends 2 (N_t - 1) / N_t of the payload per GPU, not 2 times it."),
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
        name=tr("activations per layer and GPU"),
        unit="MB",
        rtol=5e-3,
        hint=tr("Table 2 of the paper: s b h (34 / t + 5 a s / (h t)) bytes, with s the sequence length, "
                "a the heads and t = N_t: sequence parallelism splits the 10 s b h that tensor parallelism "
                "leaves whole (layer norms, dropouts) as well."),
        mistakes={
            tensor_only: tr("That is tensor parallelism alone: s b h (10 + 24 / t + 5 a s / (h t)). Sequence "
                            "parallelism splits the layer-norm and dropout regions too: 10 / t instead of 10."),
            activation_bytes(*args) / 1e6: tr("That is one GPU without any parallelism: divide by t."),
            activation_bytes(*args, tensor=t, sequence_parallel=True, selective_recompute=True) / 1e6:
            tr("That leaves out the attention scores, 5 a s / (h t): only selective recomputation "
               "discards them; here they are kept."),
        },
    )
