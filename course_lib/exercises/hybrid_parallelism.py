"""Exercises of notebook 13 (hybrid parallelism: combine the schemes).

Expected values come from :mod:`course_lib.planner`, :mod:`course_lib.tensor_cost` and
:mod:`course_lib.alpha_beta`. The givens of each exercise are module constants, so the notebook can
print them.
"""

from __future__ import annotations

import numpy as np

from .. import alpha_beta
from ..i18n import tr
from ..models import MLP
from ..planner import EXAMPLE_SIZES, best_config, device_parameters
from ..tensor_cost import tensor_allreduce_bytes, tensor_layer_communication
from . import Result, _coerce, _fmt, _wrong, check

__all__ = ["BEST_SPLIT", "DATA_AXIS", "TENSOR_AXIS", "ex_best_split", "ex_data_axis_ms", "ex_tensor_axis_gb"]

#: Givens of :func:`ex_best_split`: the scaled-up running example on V100s linked by NVLink
#: (the course's NVLink latency, :data:`course_lib.alpha_beta.NVLINK_LATENCY`), a device count and
#: batch whose best grid the notebook does not print.
BEST_SPLIT = {
    "sizes": EXAMPLE_SIZES,
    "batch_size": 1024,
    "devices": 32,
    "device_id": "v100_sxm2_32gb",
    "latency": alpha_beta.NVLINK_LATENCY,
}


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
    name = tr("best grid (N_d, N_p)")
    triple = _coerce(answer, (0, 0, 0))
    if isinstance(triple, (tuple, list, np.ndarray)) and len(triple) == 3:
        try:
            if float(triple[2]) != 1:
                return Result(False, _wrong(name, _fmt(tuple(triple))) + " " + tr(
                    "This question has no tensor parallelism: N_t = 1, and N_d x N_p = {devices}.",
                    devices=BEST_SPLIT["devices"]))
            answer = tuple(triple[:2])  # (N_d, N_p, N_t = 1)
        except (TypeError, ValueError):
            pass  # not numbers: check() explains
    model = MLP(BEST_SPLIT["sizes"])
    grad_gb = model.n_params * model.dtype.itemsize / 1e9
    n = BEST_SPLIT["devices"]
    if n <= model.n_layers:
        pipeline_only = tr("Pure pipelining: the {layers} layers do not split evenly into {n} "
                           "stages (compare the compute bars) and the bubble grows with N_p; a small "
                           "all-reduce between 2 replicas costs less.", layers=model.n_layers, n=n)
    else:
        pipeline_only = tr("Pure pipelining needs {n} stages, but the model has only {layers} "
                           "layers: a stage holds at least one layer.", n=n, layers=model.n_layers)
    return check(
        answer,
        (best.data, best.pipeline),
        name=name,
        rtol=0,
        atol=0.01,
        hint=tr("enumerate_configs lists every N_d x N_p = {n}; take the fastest that fits in memory "
                "(or move the explorer's sliders to {n} devices and batch {batch}).", n=n,
                batch=f"{BEST_SPLIT['batch_size']:,}"),
        mistakes={
            (n, 1): tr("Pure data parallelism all-reduces {size} of gradients every step: "
                       "compare the all-reduce bar with the bubble of the pipelines.", size=f"{grad_gb:.1f} GB"),
            (1, n): pipeline_only,
        },
    )


#: Givens of :func:`ex_tensor_axis_gb`: a GPT-style model (``layers`` transformer layers of
#: hidden size ``hidden``, sequences of ``seq_length`` tokens) on a grid with ``tensor``-way
#: tensor and ``pipeline``-way pipeline parallelism, micro-batches of ``micro_batch`` sequences,
#: ``micro_batches`` of them per iteration, 16-bit activations, ring all-reduces.
TENSOR_AXIS = {"layers": 48, "hidden": 6144, "seq_length": 2048, "micro_batch": 1, "tensor": 8,
               "pipeline": 4, "micro_batches": 32, "bytes_per_value": 2}
#: Givens of :func:`ex_data_axis_ms`: ``params`` parameters with 16-bit gradients, spread evenly
#: over the N_p x N_t devices of one replica; N_d replicas all-reduce them over links of
#: ``bandwidth`` bytes/s with ``latency`` seconds per message (ring, alpha-beta model).
DATA_AXIS = {"params": 40e9, "bytes_per_param": 2, "data": 16, "pipeline": 8, "tensor": 8,
             "bandwidth": 25e9, "latency": 5e-6}


def _tensor_axis_gb(*, layers_per_gpu=None, micro_batches=None, bytes_per_value=None) -> float:
    g = TENSOR_AXIS
    layer = tensor_layer_communication(g["seq_length"], g["micro_batch"], g["hidden"], g["tensor"], 1e9, 0.0,
                                       bytes_per_value=bytes_per_value or g["bytes_per_value"])
    layers = layers_per_gpu or g["layers"] // g["pipeline"]
    return layers * (micro_batches or g["micro_batches"]) * layer.bytes_per_device / 1e9


def ex_tensor_axis_gb(answer) -> Result:
    """GB (1e9 bytes) each GPU sends in the tensor-parallel all-reduces of one iteration on the
    grid of :data:`TENSOR_AXIS` (4 ring all-reduces per layer and micro-batch)."""
    g = TENSOR_AXIS
    expected = _tensor_axis_gb()
    layers = g["layers"] // g["pipeline"]
    payload = layers * g["micro_batches"] * tensor_allreduce_bytes(
        g["seq_length"], g["micro_batch"], g["hidden"], bytes_per_value=g["bytes_per_value"]) / 1e9
    return check(
        answer,
        expected,
        name=tr("tensor all-reduce bytes per GPU and iteration"),
        unit="GB",
        rtol=5e-3,
        hint=tr("each GPU holds n_layers / N_p layers; each layer does 4 all-reduces per micro-batch, each of "
                "m = L x b x h values of 2 bytes, and a ring sends 2 (N_t - 1) / N_t x m per GPU; M micro-batches."),
        mistakes={
            _tensor_axis_gb(layers_per_gpu=g["layers"]): tr("That counts all the model's layers. A GPU holds only "
                                                            "its pipeline stage's n_layers / N_p layers and "
                                                            "all-reduces for those."),
            _tensor_axis_gb(micro_batches=1): tr("That is one micro-batch. Every one of the M micro-batches of "
                                                 "the iteration passes through the layer, forward and backward."),
            payload: tr("That is the payload, 4 m per layer and micro-batch. In a ring each GPU sends "
                        "2 (N_t - 1) / N_t of each payload."),
            expected / 2: tr("That is the forward pass only: the backward pass all-reduces the gradients of the "
                             "inputs of the two split regions too."),
            _tensor_axis_gb(bytes_per_value=4): tr("16-bit activations are 2 bytes per value, not 4."),
        },
    )


def _data_axis_ms(*, share=None, devices=None, bytes_per_param=None) -> float:
    g = DATA_AXIS
    if share is None:
        share = g["params"] / (g["pipeline"] * g["tensor"])
    nbytes = share * (bytes_per_param or g["bytes_per_param"])
    return 1e3 * float(alpha_beta.ring_allreduce_time(nbytes, devices or g["data"], g["bandwidth"], g["latency"]))


def ex_data_axis_ms(answer) -> Result:
    """Milliseconds of the gradient all-reduce of one device's share on the grid of :data:`DATA_AXIS`."""
    g = DATA_AXIS
    share_bytes = g["params"] / (g["pipeline"] * g["tensor"]) * g["bytes_per_param"]
    return check(
        answer,
        _data_axis_ms(),
        name=tr("gradient all-reduce time"),
        unit="ms",
        rtol=5e-3,
        hint=tr("a device holds P / (N_p N_t) parameters; the N_d copies of that share all-reduce its gradients: "
                "2 (N_d - 1) / N_d x bytes / bandwidth + 2 (N_d - 1) x latency."),
        mistakes={
            _data_axis_ms(share=g["params"]): tr("That all-reduces the whole model. On the grid each device holds "
                                                 "only 1 / (N_p N_t) of it, and the N_d copies of that share "
                                                 "all-reduce at the same time as the others."),
            _data_axis_ms(devices=g["data"] * g["pipeline"] * g["tensor"]): tr(
                "The all-reduce runs among the N_d replicas of the same share, not among all N = N_d N_p N_t "
                "devices."),
            1e3 * share_bytes / g["bandwidth"]: tr("That sends the buffer once. A ring all-reduce is a "
                                                   "reduce-scatter and an all-gather: 2 (N_d - 1) / N_d x bytes / "
                                                   "bandwidth."),
            _data_axis_ms(bytes_per_param=4): tr("These gradients are {bits}-bit: {size} bytes per parameter, "
                                                 "not 4.", bits=8 * g["bytes_per_param"],
                                                 size=g["bytes_per_param"]),
        },
    )
