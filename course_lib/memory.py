r"""Memory (显存/内存) of training: model states, activations, ZeRO and recomputation.

A training step keeps two kinds of data on every device:

* the **model states** (模型状态): parameters, their gradients and the optimizer states
  (优化器状态, e.g. Adam's momentum and variance). For mixed-precision Adam the ZeRO paper
  counts :math:`2 + 2 + K` bytes per parameter with :math:`k = 12` (an fp32 copy of the
  parameters, momentum, variance): :func:`model_state_bytes`. ZeRO (零冗余优化器) shards
  them over the :math:`N_d` data-parallel devices stage by stage.
* the **activations** (激活) that the backward pass needs: for the running example
  :func:`mlp_activation_bytes`, for a transformer layer :func:`transformer_activation_bytes`.
  Activation recomputation (激活重计算) stores fewer of them and runs the forward pass a
  second time inside the backward (:func:`recompute_flops_ratio`).

:func:`device_fit` says whether a configuration fits a device of ``data/hardware.csv``;
:mod:`course_lib.megatron` recomputes the published configurations of
``data/megatron_configs.csv`` (Narayanan et al. 2021, Table 1) with this module's counts.

Units: bytes everywhere (GB = 1e9 bytes, as the papers and ``data/hardware.csv`` use).

References: S. Rajbhandari, J. Rasley, O. Ruwase, Y. He, "ZeRO: Memory Optimizations
Toward Training Trillion Parameter Models", SC 2020 (Figure 1, Section 5);
V. Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
MLSys 2023, arXiv:2205.05198 (Sections 4 and 5); T. Chen et al., "Training Deep Nets with Sublinear
Memory Cost", arXiv:1604.06174 (recomputation by segments).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._validate import check_int, check_positive, check_real, check_sequence, check_type
from .i18n import tr
from .models import MLP, softmax_cross_entropy
from .schedule import partition_layers

__all__ = [
    "ZERO_STAGES",
    "checkpointed_grad",
    "CheckpointRun",
    "DeviceFit",
    "ModelStates",
    "device_fit",
    "format_bytes",
    "measured_state_bytes",
    "mlp_activation_bytes",
    "model_state_bytes",
    "recompute_flops_ratio",
    "transformer_activation_bytes",
    "transformer_recompute_ratio",
    "zero_comm_factor",
    "zero_step_bytes",
]

#: ZeRO stages: 0 = plain data parallelism, 1 = optimizer states sharded, 2 = also the
#: gradients, 3 = also the parameters (Rajbhandari et al. 2020, Section 5).
ZERO_STAGES = (0, 1, 2, 3)


def format_bytes(nbytes: float) -> str:
    """``nbytes`` in TB, GB, MB, kB or B (powers of ten) with three significant digits.

    The course's one formatter of sizes: model states, tables, figure labels and the
    sliders' value boxes all print bytes this way. The unit is the largest one that
    gives at least 1 after rounding (999,600 bytes are ``1 MB``, not ``1e+03 kB``).

    Examples
    --------
    >>> format_bytes(1.36e9), format_bytes(2048), format_bytes(512), format_bytes(1.6e13)
    ('1.36 GB', '2.05 kB', '512 B', '16 TB')
    >>> format_bytes(999_600), format_bytes(0)
    ('1 MB', '0 B')
    """
    nbytes = check_real(nbytes, "nbytes")
    for div, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")):
        value = float(f"{nbytes / div:.3g}")
        if abs(value) >= 1 or div == 1.0:
            return f"{value:g} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


# ------------------------------------------------------------------ model states
@dataclass(frozen=True)
class ModelStates:
    """Bytes of the model states on ONE device (counted by :func:`model_state_bytes`,
    measured by :func:`measured_state_bytes`: the same three fields)."""

    parameters: float
    gradients: float
    optimizer_states: float

    @property
    def total(self) -> float:
        """Parameters + gradients + optimizer states, bytes."""
        return self.parameters + self.gradients + self.optimizer_states

    def __repr__(self) -> str:
        return (f"ModelStates(parameters={format_bytes(self.parameters)}, "
                f"gradients={format_bytes(self.gradients)}, "
                f"optimizer_states={format_bytes(self.optimizer_states)}, total={format_bytes(self.total)})")


def model_state_bytes(
    n_params: float,
    devices: int = 1,
    zero_stage: int = 0,
    *,
    param_bytes: float = 2.0,
    grad_bytes: float = 2.0,
    k: float = 12.0,
) -> ModelStates:
    r"""Bytes per device of parameters, gradients and optimizer states under ZeRO.

    With :math:`P` parameters, :math:`N_d` data-parallel devices and
    :math:`(p, g, k)` bytes per parameter (Rajbhandari et al. 2020, Figure 1 and
    Section 5), each device holds

    ========  ===================  ==================  ============================
    stage     parameters           gradients           optimizer states
    ========  ===================  ==================  ============================
    0 (DP)    :math:`pP`        :math:`gP`       :math:`kP`
    1         :math:`pP`        :math:`gP`       :math:`kP / N_d`
    2         :math:`pP`        :math:`gP/N_d`   :math:`kP / N_d`
    3         :math:`pP/N_d`    :math:`gP/N_d`   :math:`kP / N_d`
    ========  ===================  ==================  ============================

    The defaults are the paper's mixed-precision Adam: fp16 parameters and gradients
    (2 + 2 bytes) and :math:`k = 12` bytes of optimizer states (fp32 parameters,
    momentum, variance). The running example in float32 with SGD + momentum is
    ``param_bytes=4, grad_bytes=4, k=4``. Shards are exact fractions
    (the largest of an uneven split is at most one parameter more).

    Parameters
    ----------
    n_params : float
        :math:`P`, number of parameters, >= 0.
    devices : int
        :math:`N_d` >= 1, data-parallel devices that share the states.
    zero_stage : {0, 1, 2, 3}
        See :data:`ZERO_STAGES`.
    param_bytes, grad_bytes, k : float
        Bytes per parameter of each kind, >= 0 (:math:`p, g, k`).

    Returns
    -------
    ModelStates
        Bytes per device; ``.total`` is their sum.

    Examples
    --------
    The paper's Figure 1: 7.5 billion parameters on 64 devices (120, 31.4, 16.6, 1.9 GB):

    >>> [round(model_state_bytes(7.5e9, 64, k).total / 1e9, 1) for k in ZERO_STAGES]
    [120.0, 31.4, 16.6, 1.9]
    >>> model_state_bytes(7.5e9, 64, 1)
    ModelStates(parameters=15 GB, gradients=15 GB, optimizer_states=1.41 GB, total=31.4 GB)
    """
    n_params = check_real(n_params, "n_params", 0.0)
    devices = check_int(devices, "devices", 1)
    zero_stage = check_int(zero_stage, "zero_stage", 0, 3)
    p = check_positive(param_bytes, "param_bytes", allow_zero=True)
    g = check_positive(grad_bytes, "grad_bytes", allow_zero=True)
    k = check_positive(k, "k", allow_zero=True)
    return ModelStates(
        parameters=p * n_params / (devices if zero_stage >= 3 else 1),
        gradients=g * n_params / (devices if zero_stage >= 2 else 1),
        optimizer_states=k * n_params / (devices if zero_stage >= 1 else 1),
    )


def zero_comm_factor(zero_stage: int) -> float:
    r"""Bytes a ZeRO stage moves per step, in all-reduces of the parameters' size.

    An all-reduce is a reduce-scatter followed by an all-gather. Stages 0, 1 and 2 do
    exactly that once per step (stage 0 all-reduces the gradient; stages 1 and 2
    reduce-scatter the gradient and all-gather the updated parameters): factor 1. Stage
    3 keeps only a shard of the parameters, so it all-gathers each layer before its
    forward AND again before its backward, plus the reduce-scatter of the gradient: three
    halves, factor 1.5 (Rajbhandari et al. 2020, Section 7.2: 3P values moved instead of
    2P for P parameters, which the paper calls Ψ). ``train_data_parallel(..., zero_stage=3)``
    (:mod:`course_lib.parallel.zero`) measures it on the running example.

    Examples
    --------
    >>> [zero_comm_factor(s) for s in ZERO_STAGES]
    [1.0, 1.0, 1.0, 1.5]
    """
    zero_stage = check_int(zero_stage, "zero_stage", 0, 3)
    return 1.5 if zero_stage == 3 else 1.0


def zero_step_bytes(n_params: float, devices: int, zero_stage: int, *, grad_bytes: float = 2.0) -> float:
    r"""Bytes one device sends per step under ZeRO, ring collectives.

    A ring reduce-scatter or all-gather of :math:`X` bytes sends :math:`(N_d - 1)/N_d \cdot X`
    bytes per device; a step of stages 0-2 does one of each (an all-reduce), stage 3 one
    more all-gather (:func:`zero_comm_factor`):
    :math:`2\,\text{factor}\,(N_d - 1)/N_d \cdot g P` with :math:`g` bytes per value
    (2: 16-bit gradients and parameters, as mixed precision sends them).

    Examples
    --------
    >>> zero_step_bytes(7.5e9, 64, 0) / 1e9, zero_step_bytes(7.5e9, 64, 3) / 1e9
    (29.53125, 44.296875)
    >>> zero_step_bytes(100, 1, 3)     # one device sends nothing
    0.0
    """
    n_params = check_real(n_params, "n_params", 0.0)
    devices = check_int(devices, "devices", 1)
    g = check_positive(grad_bytes, "grad_bytes", allow_zero=True)
    return 2.0 * zero_comm_factor(zero_stage) * (devices - 1) / devices * g * n_params


def measured_state_bytes(params: np.ndarray, grad: np.ndarray, optimizer) -> dict[str, int]:
    """Bytes one worker holds of parameters, gradients and optimizer states, measured: the
    arrays' ``nbytes`` and those of the optimizer's numpy attributes (e.g. SGD's momentum
    buffer).

    The fields are those of :class:`ModelStates`, so a run's measurement sits beside
    :func:`model_state_bytes`, the count by formula (float32 SGD with momentum: 4, 4, 4).

    Examples
    --------
    >>> from course_lib.optim import SGD
    >>> opt = SGD(0.1, momentum=0.9); p = np.ones(10, np.float32); opt.step(p, p.copy())
    >>> measured_state_bytes(p, p, opt)
    {'parameters': 40, 'gradients': 40, 'optimizer_states': 40}
    >>> model_state_bytes(10, param_bytes=4, grad_bytes=4, k=4)
    ModelStates(parameters=40 B, gradients=40 B, optimizer_states=40 B, total=120 B)
    """
    check_type(params, "params", np.ndarray, "a numpy array")
    check_type(grad, "grad", np.ndarray, "a numpy array")
    state = 0 if optimizer is None else sum(
        v.nbytes for v in vars(optimizer).values() if isinstance(v, np.ndarray))
    return {"parameters": int(params.nbytes), "gradients": int(grad.nbytes), "optimizer_states": int(state)}


# ------------------------------------------------------------------ activations
def _check_model(model) -> MLP:
    return check_type(model, "model", MLP, "a course_lib.models.MLP")


def _output_widths(model: MLP, tensor: int) -> list[int]:
    """Per-device output width of every layer when pairs of layers are split over ``tensor``
    devices Megatron-style: the first layer of a pair keeps its largest column block
    (``ceil(width / tensor)``), the second (after its all-reduce) and an unpaired last
    layer the whole width."""
    widths = list(model.sizes[1:])
    for i in range(0, model.n_layers - 1, 2):
        widths[i] = -(-widths[i] // tensor)
    return widths


def mlp_activation_bytes(model, batch_size: int, *, segments: int | None = None, tensor: int = 1) -> int:
    r"""Peak bytes of activations the backward pass of the running example needs.

    :meth:`course_lib.models.MLP.forward` returns ``acts``: the input and every layer's
    output; :meth:`~course_lib.models.MLP.backward` needs all of them. For a batch of
    :math:`B` samples that is :math:`B \sum_i w_i` values, :math:`w_0 \dots w_L` the
    layer widths ``model.sizes``, times the bytes of ``model.dtype``.

    With activation recomputation (激活重计算) in ``segments`` segments (the split of
    :func:`course_lib.schedule.partition_layers`, i.e. the stages of
    a pipeline) the forward pass stores only each segment's input; the backward pass
    re-runs one segment's forward at a time. The peak is the stored inputs plus the
    largest segment's recomputed outputs - all but its last, which is the next
    segment's stored input (for the last segment: the logits too). As in Chen et al.
    2016 every segment input counts for the whole backward (in fact the inputs of
    finished segments can be freed). ``segments=1`` saves nothing, and neither does
    one segment per layer: then every activation is a segment input.

    With ``tensor`` > 1 every pair of layers is split over ``tensor`` devices as in
    :mod:`course_lib.parallel.tensor`: each device keeps its block of the pair's hidden
    activations (``ceil(w / tensor)`` wide) and the full input and output.

    Parameters
    ----------
    model : MLP
    batch_size : int
        :math:`B` >= 1 samples (a micro-batch, in a pipeline).
    segments : int, optional
        Number of recomputation segments in [1, n_layers]; None: no recomputation.
    tensor : int
        Tensor-parallel degree >= 1.

    Returns
    -------
    int
        Bytes on one device.

    Examples
    --------
    >>> model = MLP((64, 32, 32, 10))              # float32
    >>> mlp_activation_bytes(model, 100)           # 100 x (64 + 32 + 32 + 10) x 4
    55200
    >>> mlp_activation_bytes(model, 100, tensor=2)    # the pair's hidden layer: 16 of 32
    48800
    >>> deep = MLP((16, 64, 64, 64, 64, 10))          # segments (0, 2, 3, 5): inputs 16, 64, 64
    >>> mlp_activation_bytes(deep, 100), mlp_activation_bytes(deep, 100, segments=3)  # + max(64, 0, 64 + 10)
    (112800, 87200)
    """
    model = _check_model(model)
    batch_size = check_int(batch_size, "batch_size", 1, 2**40)
    tensor = check_int(tensor, "tensor", 1, 2**20)
    outputs = _output_widths(model, tensor)
    item = model.dtype.itemsize
    if segments is None:
        return batch_size * (model.sizes[0] + sum(outputs)) * item
    bounds = partition_layers(model, check_int(segments, "segments", 1, model.n_layers))
    widths = [model.sizes[0]] + outputs  # acts[j] of MLP.forward on one device
    stored = sum(widths[lo] for lo in bounds[:-1])
    # recomputing segment [lo, hi) rebuilds acts[lo + 1 .. hi - 1] (acts[hi] is stored; the logits are not)
    largest = max(sum(widths[lo + 1 : hi if hi < model.n_layers else hi + 1])
                  for lo, hi in zip(bounds[:-1], bounds[1:]))
    return batch_size * (stored + largest) * item


@dataclass(frozen=True)
class CheckpointRun:
    """One forward/backward pass with activation checkpointing (:func:`checkpointed_grad`)."""

    loss: float
    grad: np.ndarray
    """The flat gradient (bit for bit :meth:`course_lib.models.MLP.loss_and_grad`'s)."""
    stored_bytes: int
    """Peak bytes of the activations held at once, counted from the arrays: the stored
    segment inputs plus the segment being recomputed (:func:`mlp_activation_bytes`' peak)."""
    traced_bytes: int
    """Peak bytes allocated during the pass beyond the gradient buffer, measured with
    :mod:`tracemalloc`: the activations (but the input batch, allocated before) and the
    backward's temporaries."""
    recomputed_flops: int
    """FLOPs of the forward GEMMs run a second time inside the backward."""


def checkpointed_grad(model, params: np.ndarray, x: np.ndarray, y: np.ndarray, segments: int) -> CheckpointRun:
    r"""Loss and gradient of the running example with activation checkpointing (Chen et al. 2016).

    The layers are split into ``segments`` segments (:func:`course_lib.schedule.partition_layers`).
    The forward pass keeps only each segment's input (the checkpoints); the backward pass
    takes the segments from last to first, recomputes the segment's activations from its
    checkpoint and back-propagates through them. With :math:`n_{\text{layers}}` layers of equal
    width the :math:`n_{\text{ckpt}}` checkpoints cost about :math:`n_{\text{ckpt}}` layers'
    activations and the segment being recomputed :math:`n_{\text{layers}}/n_{\text{ckpt}}`: least
    near :math:`n_{\text{ckpt}} = \sqrt{n_{\text{layers}}}`. Every layer's forward runs twice.

    Parameters
    ----------
    model : MLP
    params : numpy.ndarray
        Flat parameters of ``model``.
    x, y : numpy.ndarray
        A batch and its labels (mean loss).
    segments : int
        :math:`n_{\text{ckpt}}` in [1, model.n_layers].

    Returns
    -------
    CheckpointRun
        ``stored_bytes`` equals :func:`mlp_activation_bytes` with ``segments``.

    Examples
    --------
    >>> model = MLP((8, 16, 16, 16, 4)); p = model.init_params(0)
    >>> x = np.ones((5, 8), np.float32); y = np.arange(5) % 4
    >>> run = checkpointed_grad(model, p, x, y, 2)
    >>> bool(np.array_equal(run.grad, model.loss_and_grad(p, x, y)[1]))
    True
    >>> run.stored_bytes == mlp_activation_bytes(model, 5, segments=2)
    True
    """
    import tracemalloc

    model = _check_model(model)
    model.check_flat(params, "params")
    x = model.check_x(x)
    y = model.check_y(y, x.shape[0])
    bounds = partition_layers(model, check_int(segments, "segments", 1, model.n_layers))
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        loss, grad, stored, flops = _checkpointed(model, params, x, y, bounds)
        traced = tracemalloc.get_traced_memory()[1] - base - grad.nbytes
    finally:
        if not tracing:
            tracemalloc.stop()
    return CheckpointRun(float(loss), grad, int(stored), int(traced), int(flops))


def _checkpointed(model: MLP, params, x, y, bounds):
    """The pass of :func:`checkpointed_grad`: loss, gradient, peak stored bytes, recomputed FLOPs."""
    segments = list(zip(bounds[:-1], bounds[1:]))
    checkpoints, a = [], x
    for lo, hi in segments:  # forward: keep each segment's input only
        checkpoints.append(a)
        for i in range(lo, hi):
            a = model.layer_forward(params, i, a)
    del a
    stored = sum(c.nbytes for c in checkpoints)
    grad, g, peak, flops, loss = np.zeros_like(params), None, 0, 0, 0.0
    for s in reversed(range(len(segments))):  # backward: one segment at a time, recomputed
        lo, hi = segments[s]
        acts = [checkpoints[s]]
        for i in range(lo, hi):
            acts.append(model.layer_forward(params, i, acts[-1]))
            flops += 2 * x.shape[0] * model.sizes[i] * model.sizes[i + 1]
        last = hi == model.n_layers  # its output is the logits, not the next checkpoint
        peak = max(peak, stored + sum(t.nbytes for t in acts[1:-1]) + (acts[-1].nbytes if last else 0))
        if last:
            loss, g = softmax_cross_entropy(acts[-1], y, reduction="mean")
        for i in reversed(range(lo, hi)):
            g = model.layer_backward(params, i, acts[i - lo], acts[i - lo + 1], g, grad, need_input_grad=i > 0)
    return loss, grad, peak, flops


#: Values :func:`transformer_activation_bytes` accepts for ``recompute``.
_RECOMPUTE = ("none", "selective", "full")


def transformer_activation_bytes(seq_length: int, micro_batch: int, hidden: int, heads: int, *,
                                 tensor: int = 1, recompute: str = "none") -> float:
    r"""Activation bytes of ONE transformer layer for one micro-batch, 16-bit activations.

    Korthikanti et al. 2023 (arXiv:2205.05198), Section 4 and Table 2, with sequence length
    :math:`L` (the paper's :math:`s`), micro-batch :math:`b`, hidden size :math:`h`,
    :math:`a` attention heads and tensor-parallel size :math:`N_t` (the paper's :math:`t`):

    * no parallelism: :math:`bLh\,(34 + 5aL/h)` (the 34: attention 11, MLP 19, two
      layer norms 4, in units of :math:`bLh` bytes; :math:`5aL/h`: the attention
      scores, quadratic in :math:`L`);
    * tensor parallelism: :math:`bLh\,(10 + 24/N_t + 5aL/(hN_t))` (the 10 stay replicated:
      layer-norm and dropout inputs, the inputs of the first linear layers); for
      :math:`N_t = 1` this is the line above;
    * selective recomputation (``recompute="selective"``, their Section 5): only the
      attention-score region (:math:`QK^T`, softmax, its dropout, the product with the values)
      is recomputed, so its :math:`5aL/(hN_t)` term is not stored: :math:`bLh\,(10 + 24/N_t)`,
      for little compute (:func:`transformer_recompute_ratio`);
    * full recomputation (``recompute="full"``): :math:`2bLh`, only the layer's input
      is kept (the rest is recomputed in the backward pass).

    Examples
    --------
    >>> round(transformer_activation_bytes(2048, 1, 12288, 96) / 1e9, 3)   # GPT-3 layer: bLh (34 + 80)
    2.869
    >>> round(transformer_activation_bytes(2048, 1, 12288, 96, tensor=8) / 1e9, 4)  # bLh (10 + 3 + 10)
    0.5788
    >>> transformer_activation_bytes(2048, 1, 12288, 96, tensor=8, recompute="selective") == 2048 * 12288 * 13
    True
    >>> transformer_activation_bytes(2048, 1, 12288, 96, recompute="full") == 2 * 2048 * 12288
    True
    """
    s = check_int(seq_length, "seq_length", 1, 2**40)
    b = check_int(micro_batch, "micro_batch", 1, 2**40)
    h = check_int(hidden, "hidden", 1, 2**40)
    a = check_int(heads, "heads", 1, 2**40)
    t = check_int(tensor, "tensor", 1, 2**20)
    if recompute not in _RECOMPUTE:
        raise ValueError(f"recompute must be one of {_RECOMPUTE}, got {recompute!r}")
    sbh = float(s) * b * h
    if recompute == "full":
        return 2.0 * sbh
    scores = 0.0 if recompute == "selective" else 5.0 * a * s / (h * t)
    return sbh * (10.0 + 24.0 / t + scores)


def transformer_recompute_ratio(seq_length: int, hidden: int, *, recompute: str = "full") -> float:
    r"""Training FLOPs of a transformer layer with recomputation over those without.

    A layer's forward does :math:`24bLh^2 + 4bL^2h` FLOPs (its GEMMs, Narayanan et al. 2021)
    and its training step three times that (backward = 2 x forward). Full recomputation runs
    the forward once more: 4/3. Selective recomputation (Korthikanti et al. 2023, Section 5)
    runs again only the two products of the attention-score region, :math:`QK^T` and the
    scores times the values, :math:`4bL^2h` (softmax and dropout add no GEMM):
    :math:`1 + L/(18h + 3L)`. ``"none"``: 1.

    Examples
    --------
    >>> round(transformer_recompute_ratio(2048, 12288, recompute="selective"), 4)   # GPT-3: 0.9 %
    1.009
    >>> transformer_recompute_ratio(2048, 12288) == 4 / 3
    True
    """
    s = check_int(seq_length, "seq_length", 1, 2**40)
    h = check_int(hidden, "hidden", 1, 2**40)
    if recompute not in _RECOMPUTE:
        raise ValueError(f"recompute must be one of {_RECOMPUTE}, got {recompute!r}")
    forward = 24.0 * s * h * h + 4.0 * s * s * h  # per sequence; b cancels
    extra = {"none": 0.0, "selective": 4.0 * s * s * h, "full": forward}[recompute]
    return (3.0 * forward + extra) / (3.0 * forward)


def recompute_flops_ratio(model) -> float:
    r"""Training FLOPs with full activation recomputation over those without.

    Recomputation runs every layer's forward once more inside the backward pass:
    :math:`(F + B + F) / (F + B)` with :math:`F, B` from
    :meth:`course_lib.models.MLP.flops_per_sample`. A transformer (backward = 2 x
    forward) goes from 3 to 4 forward passes: 4/3, 33 % more compute; the running
    example skips the first layer's input gradient, so its ratio is a little higher.

    Examples
    --------
    >>> f = MLP((64, 32, 10)).flops_per_sample()
    >>> recompute_flops_ratio(MLP((64, 32, 10))) == (f["total"] + f["forward"]) / f["total"]
    True
    >>> round(recompute_flops_ratio(MLP((4096,) * 9)), 4)   # 8 equal layers: (8 + 15 + 8) / (8 + 15)
    1.3478
    """
    flops = _check_model(model).flops_per_sample()
    return (flops["total"] + flops["forward"]) / flops["total"]


# ------------------------------------------------------------------ devices
@dataclass(frozen=True)
class DeviceFit:
    """Model states (+ activations) on one device of ``data/hardware.csv``: does it fit?"""

    device: str
    """The device's name."""
    capacity: float
    """Device memory, bytes."""
    states: ModelStates
    activations: float
    """Activation bytes assumed on the device."""
    step_bytes: float = 0.0
    """Bytes the device sends per step in ring collectives (:func:`zero_step_bytes`:
    stage 3 sends 1.5 times what stages 0-2 send)."""

    @property
    def total(self) -> float:
        return self.states.total + self.activations

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    @property
    def verdict(self) -> str:
        """``"fits"`` or ``"does not fit"``."""
        return tr("fits") if self.fits else tr("does not fit")


def _device_memory(device_id: str, hardware: Sequence) -> tuple[str, float]:
    from .cost import find_row
    from .datasets import HardwareDevice

    rows = check_sequence(hardware, "hardware", HardwareDevice, "a HardwareDevice (load_hardware())")
    device = find_row(rows, device_id, "device_id", "device_id")
    if device.memory_bytes is None:
        raise ValueError(f"device_id must name a device with a memory size; {device_id!r} has none")
    return device.device, device.memory_bytes


def device_fit(n_params: float, devices: int, zero_stage: int, device_id: str, *, hardware: Sequence,
               activation_bytes: float = 0.0, **byte_sizes: float) -> DeviceFit:
    """Whether the model states of ``n_params`` parameters (+ activations) fit on a device.

    The states are :func:`model_state_bytes` (``byte_sizes``: its ``param_bytes``,
    ``grad_bytes``, ``k``) for ``devices`` data-parallel devices and ZeRO
    stage ``zero_stage``; the capacity is the device's ``memory_bytes`` (``memory_gib`` in
    ``data/hardware.csv``, ``hardware = load_hardware()``: an "80GB" A100 holds 80 GiB =
    85.9e9 bytes). Workspace and framework
    overheads are not counted. ``step_bytes``: what the device sends per step
    (:func:`zero_step_bytes`, in ``grad_bytes`` per value).

    Examples
    --------
    >>> from course_lib.datasets import load_hardware
    >>> fit = device_fit(7.5e9, 64, 0, "a100_sxm_80gb", hardware=load_hardware())
    >>> fit.verdict, round(fit.total / 1e9), fit.capacity / 2**30
    ('does not fit', 120, 80.0)
    >>> device_fit(7.5e9, 64, 1, "a100_sxm_80gb", hardware=load_hardware()).verdict
    'fits'
    >>> [format_bytes(device_fit(7.5e9, 64, s, "a100_sxm_80gb", hardware=load_hardware()).step_bytes)
    ...  for s in (2, 3)]
    ['29.5 GB', '44.3 GB']
    """
    name, capacity = _device_memory(device_id, hardware)
    unknown = set(byte_sizes) - {"param_bytes", "grad_bytes", "k"}
    if unknown:
        raise TypeError(f"byte_sizes must be param_bytes, grad_bytes or k, got {sorted(unknown)}")
    states = model_state_bytes(n_params, devices, zero_stage, **byte_sizes)
    sent = zero_step_bytes(n_params, devices, zero_stage, grad_bytes=byte_sizes.get("grad_bytes", 2.0))
    return DeviceFit(name, capacity, states, check_positive(activation_bytes, "activation_bytes", allow_zero=True),
                     sent)
