r"""What tensor parallelism of a transformer costs: bytes moved, bytes held, and sequence parallelism.

A transformer layer split over :math:`N_t` devices by heads (Megatron-LM: :math:`A_Q, A_K,
A_V` and the MLP block's :math:`A_1` by columns, :math:`A_O` and :math:`A_2` by rows) sums
partial outputs twice in the forward pass and input gradients twice in the backward
pass: **4 all-reduces per layer and step**, each of the layer's activations, :math:`B L h`
values (batch, sequence length, hidden size). :func:`tensor_allreduce_bytes` counts them;
:func:`tensor_layer_communication` prices them with the ring of :mod:`course_lib.alpha_beta`.

Sequence parallelism (Korthikanti et al. 2023, "Reducing activation recomputation in large
transformer models", arXiv:2205.05198) splits what tensor parallelism leaves whole on
every device - the layer norms and dropouts, which act on each token alone - along the
sequence. Each all-reduce becomes a reduce-scatter (into sequence shards, before the layer
norm) and an all-gather (back to whole sequences, before the next split layer): the same
bytes (a ring all-reduce *is* a reduce-scatter then an all-gather), while the activations of
those regions shrink by :math:`N_t`. :func:`layer_norm_dropout_bytes` and
:func:`activation_bytes` give their Table 2 (16-bit activations, per layer and
micro-batch; the paper's :math:`s` is the course's :math:`L`, its :math:`t` our
:math:`N_t`).

:func:`tensor_param_bytes` is what each device holds of the course's
:class:`course_lib.transformer.Transformer` under the split.
:func:`course_lib.megatron.megatron_tensor_traffic` prices the tensor axis of a published
Megatron-LM configuration the same way.

Examples
--------
>>> tensor_allreduce_bytes(2048, 1, 12288) / 2**20    # one GPT-3 layer, b = 1, fp16: 4 x 48 MiB
192.0
>>> round(activation_bytes(2048, 1, 12288, 96, tensor=8, sequence_parallel=True) / 2**20)  # MiB: bLh (34/8 + 10)
342
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_int, check_type
from .alpha_beta import (
    ring_allgather_time,
    ring_allreduce_time,
    ring_reduce_scatter_time,
)
from .memory import transformer_activation_bytes
from .transformer import Transformer

__all__ = [
    "LayerCommunication",
    "activation_bytes",
    "layer_norm_dropout_bytes",
    "tensor_allreduce_bytes",
    "tensor_layer_communication",
    "tensor_param_bytes",
]

ALLREDUCES_PER_LAYER = 4
"""Two in the forward pass (after the attention's output projection and after the MLP
block's second layer: "g"), two in the backward pass (the gradients of the inputs of
:math:`A_Q, A_K, A_V` and :math:`A_1`: "f")."""


def _sizes(seq_length, batch, hidden) -> tuple[int, int, int]:
    return (check_int(seq_length, "seq_length", 1, 2**40), check_int(batch, "batch_size", 1, 2**40),
            check_int(hidden, "hidden", 1, 2**40))


def tensor_allreduce_bytes(seq_length: int, batch_size: int, hidden: int, *, n_layers: int = 1,
                           bytes_per_value: int = 2, tensor: int | None = None) -> int:
    r"""Payload bytes of the tensor-parallel all-reduces of one training step:
    :math:`4\, n_{\text{layers}}\, B L h` values.

    The payload is what each all-reduce sums (every device's partial result); a ring moves
    :math:`2 (N_t - 1) / N_t` of it per device (:func:`tensor_layer_communication`).
    Independent of :math:`N_t` from two devices on: every device holds whole activations;
    one device (``tensor=1``) sums nothing, 0 bytes.

    Parameters
    ----------
    seq_length, batch_size, hidden : int
        :math:`L` tokens per sample, :math:`B` samples, hidden size :math:`h`.
    n_layers : int
        Transformer layers.
    bytes_per_value : int
        2 for 16-bit activations (the field's), 8 for the course's float64 model.
    tensor : int, optional
        :math:`N_t` >= 1; None: any :math:`N_t` >= 2 (the payload of a split layer).

    Examples
    --------
    >>> tensor_allreduce_bytes(8, 32, 32, n_layers=2, bytes_per_value=8)  # the digits model, B = 32
    524288
    >>> 4 * 2 * 32 * 8 * 32 * 8
    524288
    >>> tensor_allreduce_bytes(8, 32, 32, n_layers=2, bytes_per_value=8, tensor=1)  # one device: no all-reduce
    0
    """
    s, b, h = _sizes(seq_length, batch_size, hidden)
    layers = check_int(n_layers, "n_layers", 1, 2**20)
    item = check_int(bytes_per_value, "bytes_per_value", 1, 64)
    if tensor is not None and check_int(tensor, "tensor", 1, 2**20) == 1:
        return 0
    return ALLREDUCES_PER_LAYER * layers * b * s * h * item


@dataclass(frozen=True)
class LayerCommunication:
    """The tensor-parallel collectives of one layer in one step (forward and backward)."""

    collectives: tuple[str, ...]
    """Their names in the order of the step: 4 "all-reduce", or 4 pairs "reduce-scatter", "all-gather"."""
    payload_bytes: int
    """:math:`m = B L h` values: the activations one collective covers."""
    bytes_per_device: float
    """What each device sends in a ring: :math:`4 \\cdot 2 (N_t - 1) / N_t \\cdot m` either way."""
    time: float
    """Seconds by the alpha-beta model of :mod:`course_lib.alpha_beta`."""


def tensor_layer_communication(seq_length: int, batch_size: int, hidden: int, tensor: int, bandwidth: float,
                               latency: float, *, sequence_parallel: bool = False,
                               bytes_per_value: int = 2) -> LayerCommunication:
    r"""The collectives of one tensor-parallel layer per step, with and without sequence parallelism.

    Without: 4 ring all-reduces of :math:`m = B L h` values
    (:func:`course_lib.alpha_beta.ring_allreduce_time`). With sequence parallelism: each becomes a
    reduce-scatter and an all-gather of the same :math:`m`
    (:func:`course_lib.alpha_beta.ring_reduce_scatter_time`,
    :func:`course_lib.alpha_beta.ring_allgather_time`), each :math:`(N_t - 1)/N_t \cdot m` per
    device: the same bytes and, by the alpha-beta model, the same time.

    Examples
    --------
    >>> ar = tensor_layer_communication(2048, 1, 12288, 8, 300e9, 5e-6)
    >>> sp = tensor_layer_communication(2048, 1, 12288, 8, 300e9, 5e-6, sequence_parallel=True)
    >>> len(ar.collectives), len(sp.collectives), sp.bytes_per_device == ar.bytes_per_device
    (4, 8, True)
    >>> round(ar.time * 1e3, 3), round(sp.time * 1e3, 3)   # ms: 4 x (2 x 7/8 x 48 MiB / 300 GB/s + 14 alpha)
    (1.454, 1.454)
    """
    check_type(sequence_parallel, "sequence_parallel", bool, "True or False")
    m = tensor_allreduce_bytes(seq_length, batch_size, hidden, bytes_per_value=bytes_per_value) // ALLREDUCES_PER_LAYER
    t = check_int(tensor, "tensor", 1, 2**20)
    sent = ALLREDUCES_PER_LAYER * 2.0 * (t - 1) / t * m
    if sequence_parallel:
        one = float(ring_reduce_scatter_time(m, t, bandwidth, latency) + ring_allgather_time(m, t, bandwidth, latency))
        names = ("reduce-scatter", "all-gather") * ALLREDUCES_PER_LAYER
    else:
        one = float(ring_allreduce_time(m, t, bandwidth, latency))
        names = ("all-reduce",) * ALLREDUCES_PER_LAYER
    return LayerCommunication(names, m, sent, ALLREDUCES_PER_LAYER * one)


def layer_norm_dropout_bytes(seq_length: int, micro_batch: int, hidden: int, *, tensor: int = 1,
                             sequence_parallel: bool = False) -> float:
    r"""Activation bytes of the layer-norm and dropout regions of one layer (16-bit values).

    What tensor parallelism leaves whole on every device: the inputs of the two layer
    norms (:math:`4bLh`), their outputs, the inputs of the first split layers
    (:math:`4bLh`), and the two dropout masks (:math:`2bLh`, one byte per value): :math:`10bLh`.
    Sequence parallelism splits them along the sequence: :math:`10bLh / N_t`.

    Examples
    --------
    >>> layer_norm_dropout_bytes(2048, 1, 12288) == 10 * 2048 * 12288
    True
    >>> layer_norm_dropout_bytes(2048, 1, 12288, tensor=8, sequence_parallel=True) == 10 * 2048 * 12288 / 8
    True
    """
    s, b, h = _sizes(seq_length, micro_batch, hidden)
    t = check_int(tensor, "tensor", 1, 2**20)
    check_type(sequence_parallel, "sequence_parallel", bool, "True or False")
    return 10.0 * s * b * h / (t if sequence_parallel else 1)


def activation_bytes(seq_length: int, micro_batch: int, hidden: int, heads: int, *, tensor: int = 1,
                     sequence_parallel: bool = False, selective_recompute: bool = False) -> float:
    r"""Activation bytes of one transformer layer for one micro-batch: Table 2 of Korthikanti et al. 2023.

    =========================================  =====================================
    tensor parallel                            :math:`bLh\,(10 + 24/N_t + 5aL/(hN_t))`
    tensor + sequence parallel                 :math:`bLh\,(34/N_t + 5aL/(hN_t))`
    tensor parallel + selective recompute      :math:`bLh\,(10 + 24/N_t)`
    tensor + sequence + selective recompute    :math:`bLh\,(34/N_t)`
    =========================================  =====================================

    (:math:`N_t = 1`: no parallelism, :math:`bLh\,(34 + 5aL/h)`). Without sequence parallelism
    this is :func:`course_lib.memory.transformer_activation_bytes` (``recompute="selective"``
    where ``selective_recompute``: the attention scores' :math:`5aL^2b/N_t` are recomputed in the
    backward pass, not stored); sequence parallelism divides its :func:`layer_norm_dropout_bytes`
    by :math:`N_t`.

    Examples
    --------
    >>> bLh = 1 * 2048 * 12288                      # GPT-3: L = 2048, h = 12288, a = 96
    >>> activation_bytes(2048, 1, 12288, 96, tensor=8, sequence_parallel=True) / bLh   # 34/8 + 80/8
    14.25
    >>> activation_bytes(2048, 1, 12288, 96, tensor=8, selective_recompute=True) / bLh  # 10 + 24/8
    13.0
    """
    check_type(selective_recompute, "selective_recompute", bool, "True or False")
    whole = transformer_activation_bytes(seq_length, micro_batch, hidden, heads, tensor=tensor,
                                         recompute="selective" if selective_recompute else "none")
    s, b, h = _sizes(seq_length, micro_batch, hidden)
    t = check_int(tensor, "tensor", 1, 2**20)
    region = layer_norm_dropout_bytes(s, b, h, tensor=t)
    return whole - region + layer_norm_dropout_bytes(s, b, h, tensor=t, sequence_parallel=sequence_parallel)


def tensor_param_bytes(model: Transformer, workers: int) -> list[int]:
    r"""Bytes of the parameters each of ``workers`` devices holds of ``model`` split by heads.

    Split (a :math:`1/N_t` share each): per block :math:`A_Q, A_K, A_V` with their biases
    and :math:`A_O` by heads (``hidden / workers`` columns or rows each), the MLP block's
    :math:`A_1` with its bias and :math:`A_2` by the ``ffn`` units (the first
    ``ffn % workers`` devices one more). Whole on every device: the embedding, the
    positions, the layer norms, the biases added after an all-reduce (:math:`b_o`,
    :math:`b_2`), the head.

    Examples
    --------
    >>> from course_lib.transformer import DIGITS_TRANSFORMER as m      # 18,026 parameters
    >>> tensor_param_bytes(m, 1) == [8 * m.n_params]
    True
    >>> tensor_param_bytes(m, 4)    # 8 bytes x (2 x (3 x (32 x 8 + 8) + 8 x 32 + 32 x 16 + 16 + 16 x 32) + 1,322 whole)
    [43984, 43984, 43984, 43984]
    """
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    n = check_int(workers, "workers", 1, model.heads)
    if model.heads % n:
        raise ValueError(f"workers must divide heads ({model.heads}), got {n}")
    h, f, s = model.hidden, model.ffn, model.seq_length
    whole = (model.token_size * h + h) + s * h + model.n_layers * 6 * h + 2 * h + (h * model.classes + model.classes)
    cols = h // n
    out = []
    for r in range(n):
        units = f // n + (1 if r < f % n else 0)
        split = 3 * (h * cols + cols) + cols * h + (h * units + units) + units * h
        out.append((whole + model.n_layers * split) * model.dtype.itemsize)
    return out
