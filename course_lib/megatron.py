r"""The published Megatron-LM configurations recomputed (Narayanan et al. 2021, Table 1).

``data/megatron_configs.csv`` holds the rows of Table 1 of "Efficient Large-Scale Language
Model Training on GPU Clusters Using Megatron-LM" (SC 2021, arXiv:2104.04473): GPT models
from 1.7 billion to 1 trillion parameters on up to 3,072 A100 GPUs, each split
:math:`N_t \times N_p` ways (the paper's :math:`t \times p`) and replicated :math:`N_d`
times (its :math:`d`). This module recomputes them with the counts of
:mod:`course_lib.memory` and the alpha-beta model of :mod:`course_lib.alpha_beta`:

* :func:`megatron_estimate`: the parameters (equation 2), the model states and first-stage
  activations per GPU (without, with selective and with full recomputation), the bubble and
  the time of an iteration (equation 3 at the measured throughput);
* :func:`megatron_tensor_traffic`: the tensor-parallel all-reduces per GPU and iteration on NVLink;
* :func:`sharding_comparison`: the same model on the same GPUs four ways - ZeRO-3 over every
  GPU (one flat ring, or two-level rings), hybrid sharding (shard inside a server, replicate
  across servers) and the paper's 3D grid - by memory per GPU and by the bytes each GPU sends
  per step and their time on the network and on NVLink, against the step's compute.

Units: bytes and seconds (GB = 1e9 bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._validate import check_int, check_positive, check_sequence, check_type
from .alpha_beta import (
    NETWORK_LATENCY,
    NVLINK_LATENCY,
    ring_allgather_time,
    ring_allreduce_time,
)
from .i18n import tr
from .memory import ModelStates, model_state_bytes, transformer_activation_bytes, zero_step_bytes
from .schedule import bubble_fraction
from .tensor_cost import (
    LayerCommunication,
    activation_bytes,
    tensor_allreduce_bytes,
    tensor_layer_communication,
)

__all__ = [
    "MegatronEstimate",
    "MegatronTraffic",
    "ShardingPlan",
    "megatron_estimate",
    "megatron_iteration_flops",
    "megatron_params",
    "megatron_tensor_traffic",
    "network_bandwidth",
    "sharding_comparison",
]


def _device(device_id: str, hardware: Sequence):
    """The row of ``hardware`` (``load_hardware()``) named ``device_id``."""
    from .cost import find_row
    from .datasets import HardwareDevice

    rows = check_sequence(hardware, "hardware", HardwareDevice, "a HardwareDevice (load_hardware())")
    return find_row(rows, device_id, "device_id", "device_id")


def network_bandwidth(device_id: str, *, hardware: Sequence) -> float:
    r"""Network bandwidth of ONE GPU to the other servers, one direction, bytes/s.

    A server's network bandwidth (``node_network_gb_s`` of ``data/hardware.csv``, both
    directions of all its network cards together) shared by its ``node_gpus`` GPUs:
    Megatron-LM's DGX A100 servers have eight 200 Gbit/s HDR InfiniBand cards for 8 GPUs,
    200 GB/s each way, 25 GB/s per GPU (Narayanan et al. 2021, Section 5).

    Examples
    --------
    >>> from course_lib.datasets import load_hardware
    >>> network_bandwidth("a100_sxm_80gb", hardware=load_hardware()) / 1e9
    25.0
    """
    dev = _device(device_id, hardware)
    if dev.node_network_gb_s is None or dev.node_gpus is None:
        raise ValueError(f"device_id must name a device with node_gpus and node_network_gb_s; {device_id!r} has none")
    return dev.node_network_gb_s * 1e9 / 2 / dev.node_gpus


# ------------------------------------------------------------------ Table 1, recomputed
def megatron_params(layers: int, hidden: int, *, vocab_size: int = 51200, seq_length: int = 2048) -> float:
    r"""Parameters of a GPT model, Narayanan et al. 2021, equation (2).

    .. math:: P = 12 l h^2 \left(1 + \frac{13}{12h} + \frac{V + s}{12 l h}\right)

    :math:`12h^2 + 13h` per layer (attention and a 4h-wide MLP with biases, two layer
    norms), the token embedding :math:`Vh` and the position embedding :math:`sh`.

    Examples
    --------
    >>> round(megatron_params(128, 25600) / 1e9, 1)   # Table 1: 1008.0 billion
    1008.0
    """
    l_ = check_int(layers, "layers", 1, 2**20)
    h = check_int(hidden, "hidden", 1, 2**30)
    v = check_int(vocab_size, "vocab_size", 1, 2**40)
    s = check_int(seq_length, "seq_length", 1, 2**40)
    return 12.0 * l_ * h * h * (1.0 + 13.0 / (12.0 * h) + (v + s) / (12.0 * l_ * h))


def megatron_iteration_flops(batch_size: int, layers: int, hidden: int, *, vocab_size: int = 51200,
                             seq_length: int = 2048) -> float:
    r"""FLOPs of one training iteration, Narayanan et al. 2021, equation (3).

    .. math:: F = 96 B s l h^2 \left(1 + \frac{s}{6h} + \frac{V}{16 l h}\right)

    GEMMs only, counted as the paper does WITH activation recomputation: forward,
    backward (2 x forward) and the recomputed forward of every layer, 4 x (24 B s h^2 +
    4 B s^2 h) per layer, plus the logit layer's forward and backward, 6 B s h V (it is
    not recomputed).

    Examples
    --------
    >>> f = megatron_iteration_flops(3072, 128, 25600)
    >>> round(f / (3072 * 163e12), 1)                   # seconds per iteration at 163 TFLOP/s
    102.6
    """
    b = check_int(batch_size, "batch_size", 1, 2**40)
    l_ = check_int(layers, "layers", 1, 2**20)
    h = check_int(hidden, "hidden", 1, 2**30)
    v = check_int(vocab_size, "vocab_size", 1, 2**40)
    s = check_int(seq_length, "seq_length", 1, 2**40)
    return 96.0 * b * s * l_ * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l_ * h))


@dataclass(frozen=True)
class MegatronEstimate:
    """One row of ``data/megatron_configs.csv`` recomputed (bytes, seconds; per GPU)."""

    config: Any
    """The :class:`course_lib.datasets.MegatronConfig` row."""
    params: float
    """Equation (2)."""
    data_parallel: int
    """d = GPUs / (t p)."""
    micro_batches: int
    """Micro-batches per replica and iteration: B / (d b)."""
    states: ModelStates
    """Mixed-precision Adam (16 bytes per parameter), ``params / (t p)`` per GPU, no ZeRO."""
    activations: float
    """First pipeline stage, no recomputation (Korthikanti et al., Section 4)."""
    activations_recompute: float
    """First pipeline stage, full recomputation: the stored layer inputs plus one layer recomputed."""
    activations_selective: float
    r"""First pipeline stage, selective recomputation (Korthikanti et al., Section 5): every layer
    without its attention scores, :math:`bLh\,(10 + 24/N_t)`."""
    activations_sequence_selective: float
    r"""First pipeline stage, sequence parallelism and selective recomputation together (Korthikanti
    et al., Table 2): :math:`bLh \cdot 34/N_t` per layer (:func:`course_lib.tensor_cost.activation_bytes`)."""
    capacity: float
    """GPU memory, bytes."""
    flops_per_iteration: float
    """Equation (3)."""
    iteration_time: float
    """Equation (3) / (GPUs x achieved FLOP/s per GPU)."""
    virtual_stages: int = 1
    """v = layers / (p x layers_per_virtual_stage): model chunks per GPU (1 without interleaving)."""
    bubble: float = 0.0
    """Idle share of the pipeline, (p - 1)/(v m + p - 1) (:func:`course_lib.schedule.bubble_fraction`)."""

    @property
    def bubble_time(self) -> float:
        """Seconds of :attr:`iteration_time` the bubble takes, equal stages assumed."""
        return self.bubble * self.iteration_time

    @property
    def tokens_per_second(self) -> float:
        return self.config.batch_size * self.config.sequence_length / self.iteration_time

    @property
    def fits(self) -> bool:
        """States + activations without recomputation fit in the GPU's memory."""
        return self.states.total + self.activations <= self.capacity

    @property
    def fits_with_recompute(self) -> bool:
        return self.states.total + self.activations_recompute <= self.capacity

    @property
    def fits_with_selective(self) -> bool:
        return self.states.total + self.activations_selective <= self.capacity


def megatron_estimate(config, *, hardware: Sequence) -> MegatronEstimate:
    r"""Recompute a configuration of Narayanan et al. 2021, Table 1 (``data/megatron_configs.csv``).

    What the reproduction includes, per GPU (:math:`t` tensor, :math:`p` pipeline,
    :math:`d` = GPUs / (t p) data-parallel, :math:`m = B / (d b)` micro-batches of :math:`b`):

    * parameters from equation (2); model states (mixed-precision Adam,
      :func:`course_lib.memory.model_state_bytes`) split over the :math:`t p` GPUs of one model replica;
    * activations of the first pipeline stage, which holds :math:`\min(p, m)` micro-batches
      in flight (1F1B) of its :math:`l / p` layers, each
      :func:`course_lib.memory.transformer_activation_bytes` (none, selective or full recomputation);
      with the interleaved schedule (``layers_per_virtual_stage``,
      :math:`v = l / (p \cdot \text{layers\_per\_virtual\_stage})` chunks per GPU) times
      :math:`1 + (p - 1)/(p v)` (Korthikanti et al., Section 4.2.3);
    * the pipeline bubble :math:`(p - 1)/(v m + p - 1)` (:func:`course_lib.schedule.bubble_fraction`);
    * time: equation (3) over GPUs x achieved TFLOP/s (the paper's measured throughput, so
      bubble and communication are inside it, not added).

    The tensor-parallel all-reduces (4 per layer and micro-batch, 2 forward and 2
    backward, of :math:`b s h` 16-bit values) and their time on NVLink are
    :func:`megatron_tensor_traffic` of this estimate. Left out: embedding and output layers
    (small), the data-parallel gradient all-reduce, the pipeline hand-overs, the all-reduces
    the recomputed forward repeats, overlap of communication with compute.

    Examples
    --------
    >>> from course_lib.datasets import load_hardware, load_megatron_configs
    >>> one_t = [c for c in load_megatron_configs() if c.model == "1T"][0]
    >>> est = megatron_estimate(one_t, hardware=load_hardware())
    >>> round(est.params / 1e9, 1), est.fits, est.fits_with_selective, est.fits_with_recompute
    (1008.0, False, False, True)
    >>> est.virtual_stages, est.micro_batches, round(est.bubble, 4)     # 63 / (512 + 63)
    (1, 512, 0.1096)
    """
    from .datasets import MegatronConfig

    c = check_type(config, "config", MegatronConfig, "a MegatronConfig (load_megatron_configs())")
    capacity = _device(c.device_id, hardware).memory_bytes
    t, p, b = c.tensor_parallel, c.pipeline_parallel, c.micro_batch_size
    params = megatron_params(c.layers, c.hidden_size, vocab_size=c.vocab_size, seq_length=c.sequence_length)
    d = c.gpus // (t * p)
    m = c.batch_size // (d * b)
    per_stage = c.layers // p
    chunks = per_stage // c.layers_per_virtual_stage if c.layers_per_virtual_stage else 1
    factor = 1.0 + (p - 1) / (p * chunks) if c.layers_per_virtual_stage else 1.0  # chunks = v
    held = min(p, m) * per_stage * factor  # layer activations the first stage holds
    layer = transformer_activation_bytes(c.sequence_length, b, c.hidden_size, c.attention_heads, tensor=t)
    inputs, selective = (transformer_activation_bytes(c.sequence_length, b, c.hidden_size, c.attention_heads,
                                                      tensor=t, recompute=how) for how in ("full", "selective"))
    flops = megatron_iteration_flops(c.batch_size, c.layers, c.hidden_size, vocab_size=c.vocab_size,
                                     seq_length=c.sequence_length)
    return MegatronEstimate(
        config=c,
        params=params,
        data_parallel=d,
        micro_batches=m,
        states=model_state_bytes(params / (t * p)),
        activations=held * layer,
        activations_recompute=held * inputs + layer,
        activations_selective=held * selective,
        activations_sequence_selective=held * activation_bytes(c.sequence_length, b, c.hidden_size, c.attention_heads,
                                                               tensor=t, sequence_parallel=True,
                                                               selective_recompute=True),
        capacity=capacity,
        flops_per_iteration=flops,
        iteration_time=flops / (c.gpus * c.achieved_tflops_per_gpu * 1e12),
        virtual_stages=chunks,
        bubble=float(bubble_fraction(p, m, chunks)),
    )


@dataclass(frozen=True)
class MegatronTraffic:
    """The tensor-parallel all-reduces of one GPU in one iteration of a Megatron-LM configuration."""

    layer: LayerCommunication
    """One layer and one micro-batch: 4 all-reduces of :math:`b s h` values."""
    layers: int
    """Transformer layers on the GPU: :math:`l / p` (all its model chunks)."""
    micro_batches: int
    """:math:`m` per replica and iteration."""
    payload_bytes: float
    """What the all-reduces sum: :func:`course_lib.tensor_cost.tensor_allreduce_bytes` of the GPU's layers, times :math:`m`."""
    bytes_per_gpu: float
    """What the GPU sends in rings: :math:`2 (t - 1)/t` of the payload."""
    time: float
    """Seconds, alpha-beta ring model on the GPU's link (NVLink inside a server)."""
    share: float
    """``time`` over the estimate's iteration time (eq. 3 at the measured throughput)."""


def megatron_tensor_traffic(estimate, bandwidth: float, latency: float = NVLINK_LATENCY) -> MegatronTraffic:
    r"""Tensor-parallel traffic per GPU and iteration of a :func:`megatron_estimate`.

    Each of the GPU's :math:`l / p` transformer layers does, for each of the :math:`m`
    micro-batches, 4 all-reduces (2 forward, 2 backward) among the :math:`t` GPUs of its
    tensor group, each of :math:`b s h` 16-bit values
    (:func:`course_lib.tensor_cost.tensor_layer_communication`): :math:`4 (l/p)\, m` ring all-reduces per
    iteration. Megatron-LM keeps the tensor group inside one server, so ``bandwidth`` is the
    NVLink bandwidth per direction (``planner.device_parameters(device_id)["bandwidth"]``)
    and ``latency`` the course's alpha on NVLink (:data:`course_lib.alpha_beta.NVLINK_LATENCY`).
    Left out: the 2 forward all-reduces that full recomputation repeats per layer (6 in
    all), and any overlap with compute. :math:`t = 1`: nothing.

    Examples
    --------
    >>> from course_lib.datasets import load_hardware, load_megatron_configs
    >>> row = [c for c in load_megatron_configs() if c.model == "145B"][0]   # t = 8, p = 8, b = 2
    >>> tr = megatron_tensor_traffic(megatron_estimate(row, hardware=load_hardware()), 300e9)
    >>> tr.layers, tr.micro_batches, tr.layer.payload_bytes   # 80 / 8 layers, m = 48, 2 x 2048 x 12288 x 2 bytes
    (10, 48, 100663296)
    >>> round(tr.bytes_per_gpu / 1e9, 1), round(tr.time, 3)   # 1,920 all-reduces: 2 x 7/8 x payload, + 14 alpha each
    (338.2, 1.262)
    """
    est = check_type(estimate, "estimate", MegatronEstimate, "a MegatronEstimate (megatron_estimate)")
    bandwidth = check_positive(bandwidth, "bandwidth")
    latency = check_positive(latency, "latency", allow_zero=True)
    c = est.config
    layer = tensor_layer_communication(c.sequence_length, c.micro_batch_size, c.hidden_size, c.tensor_parallel,
                                       bandwidth, latency)
    layers, m = c.layers // c.pipeline_parallel, est.micro_batches
    payload = float(m * tensor_allreduce_bytes(c.sequence_length, c.micro_batch_size, c.hidden_size, n_layers=layers))
    time = m * layers * layer.time
    return MegatronTraffic(layer, layers, m, payload, m * layers * layer.bytes_per_device, time,
                           time / est.iteration_time)


# ------------------------------------------------------------------ ZeRO-3 alone or 3D parallelism
@dataclass(frozen=True)
class ShardingPlan:
    """One way to train a configuration's model on its GPUs: per GPU and per step (bytes, seconds)."""

    name: str
    states: ModelStates
    """Model states (16 bytes per parameter, mixed-precision Adam) held by one GPU."""
    activations: float
    """Activations held, with full recomputation (the layer inputs, plus one layer recomputed)."""
    buffers: float
    """Working copies under ZeRO-3: one layer's 16-bit parameters gathered whole and its 16-bit
    gradient before the reduce-scatter (0 for the 3D grid, whose GPUs keep their share whole)."""
    capacity: float
    """GPU memory, bytes."""
    network_bytes: float
    """Bytes one GPU sends per step to other servers (InfiniBand); for one flat ring, the GPU whose
    neighbour is in the next server: all it sends."""
    network_time: float
    """Their time on the GPU's share of the network, alpha-beta ring model, no overlap."""
    nvlink_bytes: float
    """Bytes one GPU sends per step to the GPUs of its own server (NVLink)."""
    nvlink_time: float
    compute_time: float
    """The step's compute: equation (3) at the paper's measured throughput (the same for every plan)."""
    min_batch: int
    """Fewest sequences per step: one micro-batch of ``b`` per data-parallel replica."""

    @property
    def sent_bytes(self) -> float:
        """Bytes one GPU sends per step, network and NVLink together."""
        return self.network_bytes + self.nvlink_bytes

    @property
    def memory(self) -> float:
        """States + activations + buffers, bytes per GPU."""
        return self.states.total + self.activations + self.buffers

    @property
    def fits(self) -> bool:
        return self.memory <= self.capacity

    @property
    def traffic_ratio(self) -> float:
        """Communication time (network + NVLink) over the step's compute time."""
        return (self.network_time + self.nvlink_time) / self.compute_time


def sharding_comparison(config, *, hardware: Sequence) -> tuple[ShardingPlan, ...]:
    r"""ZeRO-3 over every GPU (two ways), hybrid sharding, and the paper's 3D grid, for one Table 1 row.

    The same model (:math:`P` parameters, :math:`m = 2P` bytes of 16-bit values on the wire, full
    recomputation) on the same :math:`N` GPUs in servers of :math:`G` (``data/hardware.csv``: NVLink
    inside a server, :func:`network_bandwidth` per GPU between servers), per GPU and step:

    * **ZeRO-3 alone** (FSDP): every GPU a data-parallel replica with :math:`1/N` of the model
      states; each step two all-gathers and one reduce-scatter of :math:`m`, each sending
      :math:`(N-1)/N \cdot m` per GPU (:func:`course_lib.memory.zero_step_bytes`); at least one
      micro-batch per GPU. **One flat ring** over all :math:`N` GPUs moves at its slowest hop, a
      GPU's share of the network to the next server. **Two-level rings** (every network card
      busy): a ring over the :math:`N/G` servers among the GPUs of equal rank, each carrying
      :math:`m/G`, then a ring inside each server on NVLink.
    * **hybrid sharding** (PyTorch's HSDP; ZeRO++'s hpZ shards the parameters this way): ZeRO-3
      inside each server (on NVLink); the :math:`N/G` servers are replicas that all-reduce their
      :math:`m/G` share of the gradient over the network.
    * **3D parallelism**, the paper's :math:`N_d \times N_p \times N_t` (:func:`megatron_estimate`):
      on the network the all-reduce of each GPU's :math:`m/(N_t N_p)` gradient bytes over the
      :math:`N_d` replicas and the pipeline hand-overs (activations forward, gradients back, each
      :math:`2bLh/N_t` bytes per micro-batch: the paper's scatter/gather); on NVLink the tensor
      all-reduces (:func:`megatron_tensor_traffic`).

    Activations: ZeRO-3 and hybrid sharding hold one micro-batch of all :math:`n_{\text{layers}}`
    layers (their inputs, :math:`2bLh` each, plus one layer recomputed, no tensor split), the
    3D grid its first stage's (``activations_recompute``). Every transfer is priced by the
    alpha-beta ring model at the course's :data:`course_lib.alpha_beta.NETWORK_LATENCY` and
    ``NVLINK_LATENCY``, no overlap with compute; gathering layer by layer would add latency
    steps, so the ZeRO-3 times are lower bounds.

    Examples
    --------
    >>> from course_lib.datasets import load_hardware, load_megatron_configs
    >>> one_t = [c for c in load_megatron_configs() if c.model == "1T"][0]
    >>> flat, two_level, hsdp, grid = sharding_comparison(one_t, hardware=load_hardware())
    >>> round(flat.states.total / 1e9, 2), round(flat.sent_bytes / 1e12, 2), round(flat.network_time)
    (5.25, 6.05, 242)
    >>> round(two_level.network_bytes / 1e9), round(two_level.network_time, 1), round(two_level.nvlink_time, 1)
    (754, 30.2, 17.6)
    >>> flat.fits, hsdp.fits, grid.fits, round(grid.compute_time, 1)
    (True, False, True, 102.6)
    """
    est = megatron_estimate(config, hardware=hardware)
    c, dev = est.config, _device(est.config.device_id, hardware)
    n, params = c.gpus, est.params
    g = min(dev.node_gpus or 1, n)
    net, nvlink = network_bandwidth(c.device_id, hardware=hardware), dev.link_bandwidth_gb_s * 1e9 / 2
    wire = 2.0 * params  # m: the 16-bit parameters (or gradients)
    s, b, h, a = c.sequence_length, c.micro_batch_size, c.hidden_size, c.attention_heads
    acts = (c.layers * transformer_activation_bytes(s, b, h, a, recompute="full")
            + transformer_activation_bytes(s, b, h, a))  # one micro-batch, every layer, no tensor split
    buffers = 2 * 2.0 * (12.0 * h * h + 13.0 * h)  # one layer's 16-bit parameters gathered whole, its gradient

    def zero3(m: float, devices: int, bandwidth: float, latency: float) -> tuple[float, float]:
        """Bytes one GPU sends and seconds: two ring all-gathers and a reduce-scatter of m."""
        once = float(ring_allgather_time(m, devices, bandwidth, latency))  # = a reduce-scatter's
        return zero_step_bytes(m / 2, devices, 3), 3.0 * once  # m / 2 values of 2 bytes

    def plan(name, states, activations, buf, network, nv, replicas) -> ShardingPlan:
        return ShardingPlan(name, states, activations, buf, est.capacity, *network, *nv, est.iteration_time,
                            replicas * b)

    nodes, shard = n // g, model_state_bytes(params, n, 3)
    hand_over = 2.0 * s * b * h / c.tensor_parallel  # one micro-batch's activations (or gradients), 16-bit
    d, p2p = est.data_parallel, 2 * est.micro_batches if c.pipeline_parallel > 1 else 0  # a middle stage
    grad = wire / (n // d)  # a GPU's share of the 16-bit gradient in the grid
    dp = (2.0 * (d - 1) / d * grad, float(ring_allreduce_time(grad, d, net, NETWORK_LATENCY)))
    tensor = megatron_tensor_traffic(est, nvlink)
    return (
        plan(tr("ZeRO-3, flat ring"), shard, acts, buffers, zero3(wire, n, net, NETWORK_LATENCY), (0.0, 0.0), n),
        plan(tr("ZeRO-3, two-level"), shard, acts, buffers, zero3(wire / g, nodes, net, NETWORK_LATENCY),
             zero3(wire, g, nvlink, NVLINK_LATENCY), n),
        plan(tr("hybrid sharding"), model_state_bytes(params, g, 3), acts, buffers,
             (2.0 * (nodes - 1) / nodes * wire / g, float(ring_allreduce_time(wire / g, nodes, net, NETWORK_LATENCY))),
             zero3(wire, g, nvlink, NVLINK_LATENCY), n),
        plan(tr("3D parallelism"), est.states, est.activations_recompute, 0.0,
             (dp[0] + p2p * hand_over, dp[1] + p2p * (NETWORK_LATENCY + hand_over / net)),
             (tensor.bytes_per_gpu, tensor.time), d),
    )
