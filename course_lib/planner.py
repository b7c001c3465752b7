r"""Planning a hybrid run (组合并行): data x pipeline x tensor on a grid of devices, estimated.

``N`` devices are arranged as a grid of ``N_d`` data-parallel replicas (数据并行) times
``N_p`` pipeline stages (流水并行) times ``N_t`` tensor-parallel devices per stage (张量并行),
``N_d * N_p * N_t = N``. Each replica trains on ``B / N_d`` of the global batch with a
``N_p``-stage pipeline of ``M`` micro-batches; each stage's layers are split over its ``N_t``
devices Megatron-style (:mod:`course_lib.parallel.tensor`: pairs of layers, the first by
output columns, the second by input rows, an unpaired last layer replicated), which adds
activation all-reduces among the ``N_t`` devices to every micro-batch's forward and
backward; afterwards the ``N_d`` copies of every stage shard all-reduce its gradients.
For one step of the running example (:class:`course_lib.models.MLP`) this module
estimates

* the time: the pipeline's makespan from :func:`course_lib.schedule.simulate_pipeline`
  (compute of the slowest stage, the bubble, tensor-parallel all-reduces, activation
  hand-overs) plus the gradient all-reduce, every collective priced by
  :func:`course_lib.alpha_beta.ring_allreduce_time`;
* the memory per device: parameters, gradients and optimizer state
  (:func:`course_lib.memory.model_state_bytes`, optionally sharded over the ``N_d``
  replicas by a ZeRO stage, ``zero_stage``) and the stashed activations of the
  micro-batches in flight (:func:`course_lib.memory.mlp_activation_bytes`);

and picks the fastest configuration that fits in memory (:func:`best_config`);
:func:`bubble_breakdown` splits the idle time a real run measured into what this model explains
and what it leaves out.
:func:`scheme_comparison` computes the source chapter's comparison of schemes
(AI-System 6.2.4, table 6-3-1) for the running example.

Everything here is pure computation, no processes:
:func:`course_lib.parallel.train.pipeline.train_pipeline` with ``data=`` runs a data x
pipeline grid (no tensor axis) as processes on this machine.

The model is deliberately simple - no overlap of communication with compute, one link
per device with bandwidth ``bandwidth`` for every transfer, FLOPs run at a sustained
``device_flops`` whatever the matrix size - so that every number can be traced by hand.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import alpha_beta
from ._validate import check_int, check_positive, check_type
from .i18n import N_, tr
from .memory import format_bytes, mlp_activation_bytes, model_state_bytes, zero_comm_factor
from .models import MLP
from .schedule import (
    bubble_fraction,
    check_boundaries,
    check_schedule,
    check_virtual_stages,
    layer_flops,
    partition_layers,
    simulate_pipeline,
    stage_flops,
)

__all__ = [
    "EXAMPLE_SIZES",
    "BubbleBreakdown",
    "HybridConfig",
    "SchemeComparison",
    "best_config",
    "best_configs",
    "bubble_breakdown",
    "device_parameters",
    "enumerate_configs",
    "estimate_config",
    "scheme_comparison",
    "stage_activation_widths",
    "stage_params",
    "tensor_stage_bytes",
]


#: Layer widths of the running example scaled up for the hybrid estimates: MNIST-sized
#: inputs, 24 hidden layers of 8,192 units, 10 classes (1.55e9 parameters, 6.2 GB in float32).
EXAMPLE_SIZES = (784,) + (8192,) * 24 + (10,)


def device_parameters(device_id: str = "v100_sxm2_32gb") -> dict[str, float]:
    """Keyword arguments of :func:`estimate_config` for a device of ``data/hardware.csv``.

    ``device_flops`` is the typical sustained throughput (``sustained_flops``),
    ``memory`` the device memory in bytes and ``bandwidth`` one direction of the
    device-to-device link (the table gives both directions together, so half of it).
    Latency is not in the table; pass it yourself.

    Examples
    --------
    >>> p = device_parameters("v100_sxm2_32gb")
    >>> p["bandwidth"], p["memory"]
    (150000000000.0, 34359738368.0)
    """
    from .datasets import get_device

    dev = get_device(device_id)
    if dev.link_bandwidth_gb_s is None or dev.memory_gib is None:
        raise ValueError(
            f"device_id must name a device with a link bandwidth and a memory size in "
            f"data/hardware.csv; {device_id!r} has none"
        )
    return {
        "device_flops": dev.sustained_flops,
        "bandwidth": dev.link_bandwidth_gb_s / 2 * 1e9,
        "memory": dev.memory_bytes,
    }


@dataclass(frozen=True)
class HybridConfig:
    """Estimated step of one ``N_d x N_p x N_t`` configuration (times in s, memory in bytes).

    ``step_time = compute + bubble + p2p + allreduce + tensor_allreduce``: ``compute`` is
    the busy time of the slowest stage, ``bubble`` the rest of the pipeline's makespan
    without communication, ``tensor_allreduce`` what the tensor-parallel activation
    all-reduces add to the makespan, ``p2p`` what the activation hand-overs add on top,
    ``allreduce`` the slowest stage group's gradient all-reduce.
    """

    devices: int
    data: int
    """N_d: data-parallel replicas."""
    pipeline: int
    """N_p: pipeline stages per replica."""
    micro_batches: int
    micro_batch_size: int
    boundaries: tuple[int, ...]
    compute: float
    bubble: float
    p2p: float
    allreduce: float
    memory_params: float
    """Parameters + gradients + optimizer state of the largest stage, bytes."""
    memory_activations: float
    """Stashed activations on the stage that holds the most, bytes."""
    memory: float
    """Peak bytes on the fullest device (max over stages of params + activations)."""
    fits: bool
    """memory <= the device memory given."""
    tensor: int = 1
    """N_t: tensor-parallel devices per stage."""
    tensor_allreduce: float = 0.0
    """What the activation all-reduces among the N_t devices add to the makespan, s."""
    virtual_stages: int = 1
    """v: model chunks per pipeline device (interleaved 1F1B when > 1; 1 when N_p = 1)."""
    zero_stage: int = 0
    """ZeRO stage (0-3) that shards the model states of each stage over its N_d copies."""

    @property
    def bubble_formula(self) -> float:
        """The equal-stage bubble share ``(N_p - 1)/(v M + N_p - 1)`` of this configuration."""
        return bubble_fraction(self.pipeline, self.micro_batches, self.virtual_stages)

    @property
    def step_time(self) -> float:
        return self.compute + self.bubble + self.p2p + self.allreduce + self.tensor_allreduce

    @property
    def label(self) -> str:
        """``"{N_d}x{N_p}"``, or ``"{N_d}x{N_p}x{N_t}"`` when ``N_t > 1`` (e.g. ``"4x2"``, ``"2x2x2"``);
        `` v{v}`` appended when interleaved (``"2x4 v2"``)."""
        return (f"{self.data}x{self.pipeline}" + (f"x{self.tensor}" if self.tensor > 1 else "")
                + (f" v{self.virtual_stages}" if self.virtual_stages > 1 else ""))


def _check_model(model) -> MLP:
    return check_type(model, "model", MLP, "an MLP")


def stage_params(model, boundaries, tensor: int = 1) -> np.ndarray:
    """Number of parameters each stage of a split holds (per device of its ``tensor`` group).

    With ``tensor`` = ``N_t`` > 1 the stage's layers ``lo, lo + 1, ...`` form pairs split as in
    :mod:`course_lib.parallel.tensor`: the first layer of a pair keeps ``c`` output
    columns and their biases, the second ``c`` input rows and its whole bias, with
    ``c = ceil(hidden / N_t)`` on the device with the largest block; an unpaired last
    layer is replicated. The count is that device's.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> stage_params(MLP((64, 32, 10)), (0, 1, 2)).tolist()
    [2080, 330]
    >>> stage_params(MLP((64, 32, 10)), (0, 2), tensor=2).tolist()   # 64*16 + 16 + 16*10 + 10
    [1210]
    """
    b = check_boundaries(_check_model(model), boundaries)
    tensor = check_int(tensor, "tensor", 1, 2**20)
    out = []
    for lo, hi in zip(b[:-1], b[1:]):
        sl = model.layer_range(lo, hi)
        n = sl.stop - sl.start
        for i in range(lo, hi - 1, 2) if tensor > 1 else ():  # pairs (i, i + 1) of the stage
            d_in, hidden, d_out = model.sizes[i : i + 3]
            c = -(-hidden // tensor)
            n -= (d_in + 1 + d_out) * (hidden - c)  # drop hidden - c columns of W_i, b_i and rows of W_{i+1}
        out.append(n)
    return np.array(out, dtype=np.int64)


def stage_activation_widths(model, boundaries) -> np.ndarray:
    """Activation values per sample that each stage stashes for its backward.

    Stage ``[lo, hi)`` keeps its input (``sizes[lo]``) and every layer's output
    (``sizes[lo + 1] .. sizes[hi]``) - what :meth:`MLP.layer_backward` needs.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> stage_activation_widths(MLP((64, 32, 10)), (0, 1, 2)).tolist()
    [96, 42]
    """
    b = check_boundaries(_check_model(model), boundaries)
    return np.array([sum(model.sizes[lo : hi + 1]) for lo, hi in zip(b[:-1], b[1:])], dtype=np.int64)


def estimate_config(
    model,
    batch_size: int,
    data: int,
    pipeline: int,
    *,
    device_flops: float,
    bandwidth: float,
    latency: float = 0.0,
    memory: float = math.inf,
    micro_batches: int | None = None,
    schedule: str = "1f1b",
    optimizer_states: int = 0,
    tensor: int = 1,
    virtual_stages: int = 1,
    zero_stage: int = 0,
) -> HybridConfig:
    """Estimate one training step of ``model`` on a ``data x pipeline x tensor`` device grid.

    Parameters
    ----------
    model : MLP
        The running example (any sizes); its dtype sets the bytes per value.
    batch_size : int
        Global batch ``B`` >= ``data``; each replica gets ``ceil(B / N_d)`` samples.
    data, pipeline : int
        ``N_d`` >= 1 replicas and ``N_p`` stages, ``1 <= N_p <= model.n_layers`` (a stage
        holds at least one layer). Stages are split by :func:`partition_layers`.
    device_flops : float
        Sustained FLOP/s of one device, > 0.
    bandwidth : float
        Bytes/s of a device's link (all-reduce and activation hand-over), > 0.
    latency : float
        Seconds per message, >= 0.
    memory : float
        Bytes per device; ``fits`` says whether the configuration stays below it.
    micro_batches : int, optional
        ``M`` per replica; default ``4 * N_p`` (GPipe's rule of thumb that the bubble is
        small once ``M >= 4 N_p``), never more than the replica's samples.
    schedule : {"1f1b", "gpipe"}
        Sets how many micro-batches' activations a stage stashes (time is the same).
    optimizer_states : int
        Extra values per parameter kept by the optimizer: 0 for SGD, 1 for momentum,
        2 for Adam/LAMB.
    tensor : int
        ``N_t`` >= 1 devices per stage that split its layers Megatron-style (see
        :func:`stage_params`): compute, parameters and hidden activations drop to about
        ``1/N_t``; every micro-batch adds, per pair of layers, an all-reduce of its
        output in the forward and of its input gradient in the backward (none for the
        model's input), ``mb x width`` values each (:func:`tensor_stage_bytes`). The
        hand-over to the next stage is unchanged (each of the ``N_t`` devices sends to
        its partner, in parallel).
    virtual_stages : int
        ``v`` >= 1 model chunks per pipeline device: interleaved 1F1B (Narayanan et al.,
        SC 2021, section 2.2.2; needs ``schedule="1f1b"``, ``v N_p <= n_layers`` and ``M``
        a multiple of ``N_p``; the default ``M`` is rounded down to one). The layers are
        split into ``v N_p`` chunks, device ``q`` holding chunks ``q, q + N_p, ...``: with
        equal chunks the bubble is ``(N_p - 1)/(v M + N_p - 1)`` (:attr:`HybridConfig.bubble_formula`),
        and every micro-batch crosses ``v N_p - 1`` boundaries instead of ``N_p - 1``
        (``p2p``). Ignored (taken as 1) when ``N_p = 1``.
    zero_stage : {0, 1, 2, 3}
        ZeRO over the ``N_d`` copies of each stage (:func:`course_lib.memory.model_state_bytes`):
        0 (default) every copy holds its stage's whole states; 1 shards the optimizer state,
        2 also the gradients, 3 also the parameters, each to ``1/N_d``. The gradient
        all-reduce (``allreduce``) is multiplied by :func:`course_lib.memory.zero_comm_factor`:
        1 for stages 0-2 (reduce-scatter + all-gather), 1.5 for stage 3 (its parameters are
        all-gathered before the forward and again before the backward; once per step here,
        not per micro-batch). Activations do not change.

    Notes
    -----
    Cached: the estimate is a pure function of the checked arguments (the model compares
    by its sizes and dtype), so it is computed once per distinct call and kept in an LRU
    cache of 4,096 entries; a repeated call returns the same frozen :class:`HybridConfig`.
    A live figure whose sliders come back to a value, or that asks for a device count
    :func:`best_configs` already enumerated, costs no new pipeline simulations.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> model = MLP((64, 64, 64, 64, 10))
    >>> c = estimate_config(model, 64, 1, 1, device_flops=1e9, bandwidth=1e9, micro_batches=1)
    >>> c.compute == 64 * model.flops_per_sample()["total"] / 1e9, c.bubble, c.allreduce
    (True, 0.0, 0.0)
    >>> deep = MLP((1,) + (512,) * 5)       # 4 equal layers (and a tiny first one)
    >>> kw = dict(device_flops=1e9, bandwidth=1e9, micro_batches=4)
    >>> for v in (1, 2):                    # bubble share of the step vs (N_p-1)/(vM+N_p-1)
    ...     c = estimate_config(deep, 64, 1, 2, virtual_stages=v, **kw)
    ...     print(c.label, c.boundaries, round(c.bubble / (c.compute + c.bubble), 3), round(c.bubble_formula, 3))
    1x2 (0, 3, 5) 0.2 0.2
    1x2 v2 (0, 2, 3, 4, 5) 0.111 0.111
    """
    _check_model(model)
    batch_size = check_int(batch_size, "batch_size", 1)
    data = check_int(data, "data", 1, batch_size)
    pipeline = check_int(pipeline, "pipeline", 1, model.n_layers)
    device_flops = check_positive(device_flops, "device_flops")
    bandwidth = check_positive(bandwidth, "bandwidth")
    latency = check_positive(latency, "latency", allow_zero=True)
    memory = float(memory) if memory == math.inf else check_positive(memory, "memory")
    optimizer_states = check_int(optimizer_states, "optimizer_states", 0)
    tensor = check_int(tensor, "tensor", 1, 2**20)
    check_schedule(schedule)
    zero_stage = check_int(zero_stage, "zero_stage", 0, 3)
    v = check_virtual_stages(virtual_stages, pipeline, None, schedule) if pipeline > 1 else 1
    if v * pipeline > model.n_layers:
        raise ValueError(f"virtual_stages x pipeline = {v} x {pipeline} model chunks must be at most "
                         f"n_layers = {model.n_layers}")
    replica = -(-batch_size // data)
    if micro_batches is None:
        micro_batches = min(4 * pipeline, replica)
        micro_batches -= micro_batches % pipeline if v > 1 else 0
    micro_batches = check_int(micro_batches, "micro_batches", 1, replica)
    check_virtual_stages(v, pipeline, micro_batches, schedule)
    return _estimate(model, batch_size, data, pipeline, device_flops, bandwidth, latency, memory,
                     micro_batches, schedule, optimizer_states, tensor, v, zero_stage)


@functools.lru_cache(maxsize=4096)
def _estimate(model: MLP, batch_size: int, data: int, pipeline: int, device_flops: float,
              bandwidth: float, latency: float, memory: float, micro_batches: int, schedule: str,
              optimizer_states: int, tensor: int, virtual_stages: int = 1, zero_stage: int = 0) -> HybridConfig:
    """:func:`estimate_config` on checked arguments; cached (a pure function of hashable
    arguments returning a frozen :class:`HybridConfig`)."""
    replica = -(-batch_size // data)
    mb = -(-replica // micro_batches)
    compute, bubble, tensor_allreduce, p2p, held = _replica_step(
        model, pipeline, tensor, mb, micro_batches, schedule, device_flops, bandwidth, latency, virtual_stages)
    bounds, n_params, params_mem, _ = _stage_memory(model, pipeline, tensor, optimizer_states, virtual_stages)
    item = model.dtype.itemsize
    if zero_stage:  # the states of each device's share, sharded over the N_d copies
        params_mem = np.array([model_state_bytes(n, data, zero_stage, param_bytes=item, grad_bytes=item,
                                                 k=item * optimizer_states).total for n in n_params])
    grads = n_params * item
    allreduce = zero_comm_factor(zero_stage) * float(np.max(alpha_beta.ring_allreduce_time(grads, data, bandwidth, latency)))
    # activations are B x widths x bytes: exactly mb times those of one sample
    act_mem = np.array(held) * mb
    per_stage = params_mem + act_mem
    peak = float(per_stage.max())
    return HybridConfig(
        devices=data * pipeline * tensor,
        data=data,
        pipeline=pipeline,
        micro_batches=micro_batches,
        micro_batch_size=mb,
        boundaries=bounds,
        compute=compute,
        bubble=bubble,
        p2p=p2p,
        allreduce=allreduce,
        memory_params=float(params_mem.max()),
        memory_activations=float(act_mem.max()),
        memory=peak,
        fits=peak <= memory,
        tensor=tensor,
        tensor_allreduce=tensor_allreduce,
        virtual_stages=virtual_stages,
        zero_stage=zero_stage,
    )


@functools.lru_cache(maxsize=256)
def _stage_memory(model: MLP, pipeline: int, tensor: int, optimizer_states: int, virtual_stages: int = 1) -> tuple:
    """What a split's memory does not owe to the batch, cached: ``(boundaries, parameters
    per device, their model-state bytes, activation bytes of one sample per chunk)``
    (chunks: ``virtual_stages * pipeline`` of them, device ``q`` holding ``q, q + N_p, ...``);
    the arrays are read-only (they are shared by every caller)."""
    bounds = _stage_costs(model, virtual_stages * pipeline, tensor)[0]
    item = model.dtype.itemsize
    n_params = stage_params(model, bounds, tensor)
    n_params = np.array([n_params[q::pipeline].sum() for q in range(pipeline)], dtype=np.int64)
    params_mem = np.array([model_state_bytes(n, param_bytes=item, grad_bytes=item,
                                             k=item * optimizer_states).total for n in n_params])
    act_per_sample = np.array([mlp_activation_bytes(_stage_model(model, lo, hi), 1, tensor=tensor)
                               for lo, hi in zip(bounds[:-1], bounds[1:])])
    return bounds, *_read_only(n_params, params_mem, act_per_sample)


@functools.lru_cache(maxsize=256)
def _stage_costs(model: MLP, pipeline: int, tensor: int) -> tuple:
    """``(boundaries, forward FLOPs, backward FLOPs)`` of each stage of one sample, cached
    (the arrays read-only)."""
    bounds = partition_layers(model, pipeline)
    f_flops, b_flops = stage_flops(model, bounds) if tensor == 1 else _tensor_stage_flops(model, bounds, tensor)
    return bounds, *_read_only(f_flops, b_flops)


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``arrays`` marked read-only: a cached result cannot be changed by one of its callers."""
    for a in arrays:
        a.setflags(write=False)
    return arrays


@functools.lru_cache(maxsize=4096)
def _replica_step(model: MLP, pipeline: int, tensor: int, mb: int, micro_batches: int, schedule: str,
                  device_flops: float, bandwidth: float, latency: float, virtual_stages: int = 1) -> tuple:
    """One replica's pipeline step, cached: ``(compute, bubble, tensor_allreduce, p2p,
    peak activation bytes of one sample's worth per device)``.

    It depends on the samples per micro-batch ``mb``, not on the global batch or ``N_d``,
    so configurations of different ``B`` and ``N`` with the same micro-batches share it
    (halving ``B`` and ``N_d`` together keeps every simulation). Interleaved: the costs
    are those of the ``v N_p`` chunks.
    """
    v = virtual_stages
    bounds, f_flops, b_flops = _stage_costs(model, v * pipeline, tensor)
    forward = f_flops * mb / device_flops
    backward = b_flops * mb / device_flops
    item = model.dtype.itemsize
    # activation hand-over at boundary s: the output of (virtual) stage s, mb x sizes[bounds[s + 1]]
    sends = [latency + mb * model.sizes[bounds[s + 1]] * item / bandwidth for s in range(v * pipeline - 1)]
    sim = dict(micro_batches=micro_batches, schedule=schedule, virtual_stages=v)

    ideal = simulate_pipeline(forward, backward, **sim)
    with_tp = ideal
    if tensor > 1:  # the activation all-reduces lie on every micro-batch's path
        tp_f, tp_b = _tensor_times(model, bounds, mb, tensor, bandwidth, latency)
        forward, backward = forward + tp_f, backward + tp_b
        with_tp = simulate_pipeline(forward, backward, **sim)
    real = simulate_pipeline(forward, backward, send_time=sends, **sim)
    compute = float(ideal.busy().max())
    acts = _stage_memory(model, pipeline, tensor, 0, v)[3]
    return (compute, ideal.makespan - compute, with_tp.makespan - ideal.makespan,
            real.makespan - with_tp.makespan, _peak_activations(real, acts))


def _peak_activations(timeline, per_chunk: np.ndarray) -> tuple:
    """Peak stashed activation bytes of each device of a simulated timeline, the virtual
    stage ``j`` holding ``per_chunk[j]`` from a micro-batch's forward until its backward."""
    peaks = []
    for q in range(timeline.n_stages):
        held = peak = 0
        ops = sorted((op for op in timeline.ops if op.stage == q), key=lambda op: (op.start, op.kind == "F"))
        for op in ops:  # a backward frees first
            held += (1 if op.kind == "F" else -1) * per_chunk[op.chunk * timeline.n_stages + q]
            peak = max(peak, held)
        peaks.append(peak)
    return tuple(peaks)


def _stage_model(model: MLP, lo: int, hi: int) -> MLP:
    """Layers ``lo .. hi - 1`` of ``model`` as a model of their own."""
    return MLP(model.sizes[lo : hi + 1], dtype=model.dtype)


def _tensor_stage_flops(model: MLP, bounds, tensor: int) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward FLOPs per sample of each stage on its busiest tensor device:
    a layer of a pair does ``c / hidden`` of its GEMMs (``c = ceil(hidden / tensor)``)."""
    f, b = layer_flops(model)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        for i in range(lo, hi - 1, 2):
            hidden = model.sizes[i + 1]
            c = -(-hidden // tensor)
            f[i : i + 2] = f[i : i + 2] * c // hidden  # exact: every count holds the factor hidden
            b[i : i + 2] = b[i : i + 2] * c // hidden
    return (np.array([f[lo:hi].sum() for lo, hi in zip(bounds[:-1], bounds[1:])]),
            np.array([b[lo:hi].sum() for lo, hi in zip(bounds[:-1], bounds[1:])]))


def tensor_stage_bytes(model, boundaries, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Payload bytes of each stage's tensor-parallel all-reduces for ``batch_size`` samples,
    forward and backward.

    The stage's layers pair up as in :func:`stage_params`. Forward: each pair's output.
    Backward: each pair's input gradient, except the model's input (stage 0's first
    pair); a later stage's first pair does reduce its input gradient, which goes to the
    previous stage. For the whole model as one stage the sum is
    :func:`course_lib.parallel.tensor.tensor_parallel_bytes`.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> f, b = tensor_stage_bytes(MLP((8, 16, 16, 16, 16, 4)), (0, 2, 5), 10)  # float32
    >>> f.tolist(), b.tolist()    # stage 0: out 16; stage 1: pair (2, 3) out 16, in 16
    ([640, 640], [0, 640])
    """
    b_ = check_boundaries(_check_model(model), boundaries)
    batch_size = check_int(batch_size, "batch_size", 1, 2**40)
    per_value = batch_size * model.dtype.itemsize
    fwd, bwd = [], []
    for lo, hi in zip(b_[:-1], b_[1:]):
        pairs = range(lo, hi - 1, 2)  # pair (i, i + 1): output sizes[i + 2], input sizes[i]
        fwd.append(per_value * sum(model.sizes[i + 2] for i in pairs))
        bwd.append(per_value * sum(model.sizes[i] for i in pairs if i > 0))
    return np.array(fwd, dtype=np.int64), np.array(bwd, dtype=np.int64)


def _tensor_times(model: MLP, bounds, mb: int, tensor: int, bandwidth: float, latency: float):
    """Seconds the tensor-parallel all-reduces add to one micro-batch's forward and backward
    on each stage: ring all-reduces among ``tensor`` devices, one latency term each."""
    fwd_bytes, bwd_bytes = tensor_stage_bytes(model, bounds, mb)
    pairs = np.array([(hi - lo) // 2 for lo, hi in zip(bounds[:-1], bounds[1:])])
    n_bwd = pairs - (np.arange(pairs.size) == 0)  # the model's input needs no gradient
    per_message = alpha_beta.ring_allreduce_time(0.0, tensor, bandwidth, latency)
    # bandwidth terms (latency=0.0) plus one latency-only all-reduce per message
    t_f = alpha_beta.ring_allreduce_time(fwd_bytes, tensor, bandwidth, latency=0.0) + pairs * per_message
    t_b = alpha_beta.ring_allreduce_time(bwd_bytes, tensor, bandwidth, latency=0.0) + np.maximum(n_bwd, 0) * per_message
    return t_f, t_b


def enumerate_configs(model, batch_size: int, devices: int, *, max_tensor: int = 1, **kw) -> list[HybridConfig]:
    """Every ``N_d x N_p x N_t = devices`` grid with ``N_p <= n_layers``, ``N_d <= batch_size`` and
    ``N_t <= max_tensor``.

    Keyword arguments are those of :func:`estimate_config`. Ordered by ``N_t``, then ``N_p``;
    the default ``max_tensor=1`` gives the ``N_d x N_p`` grids only.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> cs = enumerate_configs(MLP((64, 64, 64, 10)), 256, 6, device_flops=1e9, bandwidth=1e9)
    >>> [c.label for c in cs]
    ['6x1', '3x2', '2x3']
    >>> kw = dict(device_flops=1e9, bandwidth=1e9, max_tensor=2)
    >>> [c.label for c in enumerate_configs(MLP((64, 64, 64, 10)), 256, 4, **kw)]
    ['4x1', '2x2', '2x1x2', '1x2x2']
    """
    _check_model(model)
    devices = check_int(devices, "devices", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    max_tensor = check_int(max_tensor, "max_tensor", 1, 2**20)
    v = kw.get("virtual_stages", 1)
    out = []
    for t in range(1, min(devices, max_tensor) + 1):
        rest = devices // t
        for p in range(1, min(rest, model.n_layers) + 1) if devices % t == 0 else ():
            if rest % p == 0 and rest // p <= batch_size and _interleavable(model, batch_size, rest // p, p, v):
                out.append(estimate_config(model, batch_size, rest // p, p, tensor=t, **kw))
    return out


def _interleavable(model: MLP, batch_size: int, data: int, pipeline: int, v) -> bool:
    """Whether ``v`` chunks per device fit a pipeline of ``N_p`` (``v N_p <= n_layers``,
    ``N_p`` micro-batches per replica at least); always with ``v = 1`` or ``N_p = 1``."""
    return v == 1 or pipeline == 1 or (v * pipeline <= model.n_layers and -(-batch_size // data) >= pipeline)


def best_config(model, batch_size: int, devices: int, **kw) -> HybridConfig | None:
    """The fastest configuration of :func:`enumerate_configs` that fits in memory.

    Returns ``None`` when no grid of ``devices`` holds the model. Ties go to the
    smaller pipeline degree, then the smaller tensor degree.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> model = MLP((64, 64, 64, 10))
    >>> best_config(model, 256, 4, device_flops=1e9, bandwidth=1e12).label
    '4x1'
    >>> best_config(model, 256, 4, device_flops=1e9, bandwidth=1e12, memory=1.0) is None
    True
    """
    _check_model(model)
    batch_size = check_int(batch_size, "batch_size", 1)
    devices = check_int(devices, "devices", 1)
    try:
        return _best_config(model, batch_size, devices, tuple(sorted(kw.items())))
    except TypeError:  # an unhashable keyword value: enumerate_configs says what is wrong with it
        return _best_config.__wrapped__(model, batch_size, devices, tuple(kw.items()))


@functools.lru_cache(maxsize=1024)
def _best_config(model: MLP, batch_size: int, devices: int, kw: tuple) -> HybridConfig | None:
    """:func:`best_config`, cached (the hybrid explorer asks again for every device count
    at every redraw; the estimates are cached too, but each still checks its arguments)."""
    fitting = [c for c in enumerate_configs(model, batch_size, devices, **dict(kw)) if c.fits]
    if not fitting:
        return None
    return min(fitting, key=lambda c: (c.step_time, c.pipeline, c.tensor))


def best_configs(model, batch_size: int, device_counts, **kw) -> list[HybridConfig | None]:
    """:func:`best_config` for each device count in ``device_counts``.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> kw = dict(device_flops=1e9, bandwidth=1e12)
    >>> [c.label for c in best_configs(MLP((64, 64, 64, 10)), 256, (1, 2), **kw)]
    ['1x1', '2x1']
    """
    _check_model(model)
    if isinstance(device_counts, (str, bytes)) or not isinstance(device_counts, Sequence):
        raise TypeError(f"device_counts must be a sequence of integers, got {type(device_counts).__name__}")
    counts = [check_int(n, f"device_counts[{i}]", 1) for i, n in enumerate(device_counts)]
    return [best_config(model, batch_size, n, **kw) for n in counts]


# ------------------------------------------------------------------ a measured bubble, explained
@dataclass(frozen=True)
class BubbleBreakdown:
    """The idle share of one measured pipeline step (:meth:`course_lib.schedule.Timeline.bubble`),
    split into shares of ``devices x makespan`` that add up to it."""

    measured: float
    formula: float
    """:func:`course_lib.schedule.bubble_fraction`: equal stages, free hand-overs."""
    stage_times: float
    """What the step's own operation times add: the simulator fed with each stage's mean measured
    forward and backward, minus the formula (unequal stages, and operations slowed while their
    process waited for a core)."""
    allreduce: float
    """The gradient all-reduce and update of the replicas that finished first, inside the window."""
    rest: float
    """What neither explains: hand-overs between processes, waiting for a core between
    operations, Python between operations."""
    makespan: float


def bubble_breakdown(timeline, step: int | None = None) -> BubbleBreakdown:
    """Split the idle share of a measured step into the formula's bubble and the rest.

    ``timeline`` is a run's :class:`course_lib.schedule.Timeline` (``TrainResult.timeline``);
    ``step`` one of its steps (default: the last). The shares are of ``n_rows x makespan``, the
    window :meth:`~course_lib.schedule.Timeline.bubble` measures; ``rest`` is what remains.

    Examples
    --------
    >>> from course_lib.schedule import simulate_pipeline
    >>> b = bubble_breakdown(simulate_pipeline([1.0, 1.0], micro_batches=2))    # equal stages
    >>> round(b.measured, 4), round(b.formula, 4), round(b.stage_times + b.allreduce + b.rest, 12)
    (0.3333, 0.3333, 0.0)
    """
    from .schedule import Timeline

    tl = check_type(timeline, "timeline", Timeline, "a Timeline (TrainResult.timeline)")
    tl = tl.step(tl.steps[-1] if step is None else check_int(step, "step", 0))
    v, n_p = tl.virtual_stages, tl.n_stages
    compute = [op for op in tl.ops if op.kind in ("F", "B")]
    start, span = min(op.start for op in compute), tl.makespan
    times = {kind: [float(np.mean([op.duration for op in compute if op.kind == kind and op.chunk * n_p + op.stage == j]))
                    for j in range(v * n_p)] for kind in ("F", "B")}
    simulated = simulate_pipeline(times["F"], times["B"], micro_batches=tl.n_micro, schedule=tl.schedule,
                                  virtual_stages=v).bubble()
    inside = sum(max(0.0, min(op.end, start + span) - max(op.start, start)) for op in tl.ops if op.kind in ("A", "U"))
    formula, allreduce = float(bubble_fraction(n_p, tl.n_micro, v)), inside / (tl.n_rows * span)
    measured = tl.bubble()
    return BubbleBreakdown(measured, formula, simulated - formula, allreduce, measured - simulated - allreduce, span)


# ------------------------------------------------------------------ the chapter's table
@dataclass(frozen=True)
class SchemeComparison:
    """The source chapter's comparison of schemes, computed for one model and ``N``.

    Every attribute is a tuple ``(serial, data parallel, model parallel)``; model
    parallel means the layer-wise split into ``N`` stages (a pipeline with one
    micro-batch; micro-batching changes the time, not these quantities).
    """

    devices: int
    batch_size: int
    boundaries: tuple[int, ...]
    input_per_device: tuple[float, float, float]
    """Samples each device reads per step."""
    traffic_per_device: tuple[float, float, float]
    """Bytes the busiest device sends per step (ring all-reduce / activations + their gradients)."""
    total_memory: tuple[float, float, float]
    """Bytes summed over all devices: parameters, gradients and stashed activations."""
    load_balance: tuple[float, float, float]
    """Mean / max work per device (1 = perfectly balanced)."""
    limit: tuple[float, float, float]
    """Largest useful device count: samples per step (data), layers (model)."""

    ROWS = (
        (N_("input per device"), "input_per_device", "samples"),
        (N_("traffic per step, busiest device"), "traffic_per_device", "bytes"),
        (N_("total memory"), "total_memory", "bytes"),
        (N_("load balance (mean/max work)"), "load_balance", ""),
        (N_("limit on devices N"), "limit", "devices"),
    )

    model_bytes: float = 0.0
    """Bytes of the parameters (the unit of the chapter's traffic row)."""

    def relative(self) -> dict[str, tuple[float, float, float]]:
        """The rows in the chapter's units: input and memory relative to serial, traffic
        relative to the model size (serial traffic is 0).
        """
        out = {}
        for attr in ("input_per_device", "traffic_per_device", "total_memory"):
            row = getattr(self, attr)
            base = self.model_bytes if attr == "traffic_per_device" else row[0]
            out[attr] = tuple(v / base for v in row)
        return out

    def to_markdown(self) -> str:
        """A Markdown table: value and, in brackets, the value relative to serial."""
        rel = self.relative()
        head = (f"| N = {self.devices}, B = {self.batch_size} | {tr('serial (非并行)')} | "
                f"{tr('data parallel (数据并行)')} | {tr('model parallel (模型并行)')} |")
        lines = [head, "|---|---|---|---|"]
        for title, attr, unit in self.ROWS:
            cells = []
            for i, v in enumerate(getattr(self, attr)):
                r = rel[attr][i] if attr in rel else math.nan
                if attr == "load_balance":
                    cells.append(f"{v:.2f}")
                elif attr == "limit":
                    cells.append("-" if math.isinf(v) else f"{v:.0f}")
                else:
                    txt = format_bytes(v) if unit == "bytes" else f"{v:.4g}"
                    if attr == "traffic_per_device":
                        txt = tr("{value} ({ratio} x model)", value=txt, ratio=f"{r:.2f}")
                    else:
                        txt += f" ({r:.3g} x)"
                    cells.append(txt)
            lines.append(f"| {tr(title)} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def __repr__(self) -> str:
        return self.to_markdown()


def scheme_comparison(model, batch_size: int, devices: int) -> SchemeComparison:
    """The table of the source's section 6.2.4, 表6-3-1 (non-parallel / data / model parallel) for ``model``.

    Parameters
    ----------
    model : MLP
    batch_size : int
        Global batch ``B`` >= ``devices``.
    devices : int
        ``N`` in [2, model.n_layers]: the model-parallel column needs a stage per device.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> t = scheme_comparison(MLP((64, 64, 10)), 128, 2)
    >>> t.input_per_device, t.limit
    ((128.0, 64.0, 128.0), (inf, 128.0, 2.0))
    >>> [round(r, 2) for r in t.relative()["total_memory"]]   # boundary activations twice
    [1.0, 1.35, 1.3]
    """
    model_n = check_int(devices, "devices", 2, _check_model(model).n_layers)
    batch_size = check_int(batch_size, "batch_size", model_n)
    n = model_n
    item = model.dtype.itemsize
    params = model.n_params
    param_bytes = params * item
    act_width = sum(model.sizes)  # every layer's input and output, per sample
    serial_mem = 2 * param_bytes + batch_size * act_width * item
    shard = -(-batch_size // n)

    # data parallel: full replicas, batch split, ring all-reduce of the gradients
    dp_traffic = 2 * (n - 1) / n * param_bytes
    dp_mem = n * 2 * param_bytes + batch_size * act_width * item
    dp_balance = (batch_size / n) / shard

    # model parallel: layer-wise stages, every stage sees the whole batch
    bounds = partition_layers(model, n)
    widths = stage_activation_widths(model, bounds)
    mp_mem = 2 * param_bytes + batch_size * widths.sum() * item
    # stage s sends its output forward and its input gradient backward
    sent = []
    for s in range(n):
        out = model.sizes[bounds[s + 1]] if s < n - 1 else 0
        back = model.sizes[bounds[s]] if s > 0 else 0
        sent.append(batch_size * (out + back) * item)
    f, b = stage_flops(model, bounds)
    work = (f + b).astype(float)
    mp_balance = float(work.mean() / work.max())

    return SchemeComparison(
        devices=n,
        batch_size=batch_size,
        boundaries=bounds,
        input_per_device=(float(batch_size), float(batch_size) / n, float(batch_size)),
        traffic_per_device=(0.0, float(dp_traffic), float(max(sent))),
        total_memory=(float(serial_mem), float(dp_mem), float(mp_mem)),
        load_balance=(1.0, float(dp_balance), mp_balance),
        limit=(math.inf, float(batch_size), float(model.n_layers)),
        model_bytes=float(param_bytes),
    )
