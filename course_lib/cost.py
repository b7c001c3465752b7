r"""What a training run costs: the time decomposition and FLOP/MAC counts.

The source chapter (AI-System 6.1.3, figure 6-1-5) splits the training time into
three levers::

    training time = data size x compute per sample / compute rate
    compute rate  = per-device rate x device count x parallel efficiency

In symbols, with :math:`D` samples (all epochs), :math:`C` FLOPs per sample (forward
and backward), :math:`r` the sustained FLOP/s of one device, :math:`N` devices and
:math:`\eta \in (0, 1]` the parallel efficiency:

.. math:: T = \frac{D \cdot C}{R}, \qquad R = r \cdot N \cdot \eta

One device has nothing to communicate, so :math:`\eta(1) = 1`: :func:`training_time`
applies :math:`\eta` only on :math:`N > 1` devices.

Conventions used everywhere in the course
-----------------------------------------
* **1 MAC = 2 FLOPs.** A multiply-accumulate (MAC, 乘加) ``acc += a * b`` counts as
  two floating-point operations (FLOPs, 浮点运算). Layer counts in this module are in
  MACs (``linear_macs``, ``conv2d_macs``); multiply by :data:`FLOPS_PER_MAC` for FLOPs.
  Many papers and the source chapter's figure label MACs as "FLOPs" - check.
* FLOPs are a count (an amount of work); FLOP/s is a rate. Times are in seconds.

Only numpy is imported at module level. The measured rate r is in :mod:`course_lib.rate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ._validate import (
    as_real,
    broadcast,
    check_array,
    check_count,
    check_int,
    check_positive,
    check_range,
    check_real,
    check_sequence,
    check_type,
    scalar_or_array,
)
from .i18n import tr

if TYPE_CHECKING:  # pragma: no cover
    from .models import MLP

__all__ = [
    "BERT_LARGE",
    "FLOPS_PER_MAC",
    "IMAGENET_TRAIN_IMAGES",
    "PretrainingRecipe",
    "TrainingEstimate",
    "conv2d_macs",
    "device_hours",
    "cnn_calculator_estimate",
    "compute_optimal",
    "estimate_training",
    "find_row",
    "human_duration",
    "linear_macs",
    "mlp_training_flops",
    "required_efficiency",
    "sequence_tokens",
    "sustained_flops",
    "training_flops_per_sample",
    "training_time",
    "transformer_calculator_estimate",
    "transformer_training_flops",
]

#: Floating-point operations per multiply-accumulate (one multiply + one add).
FLOPS_PER_MAC = 2

#: Training images of ImageNet-1k (ILSVRC 2012 classification): Russakovsky et al.,
#: "ImageNet Large Scale Visual Recognition Challenge", IJCV 115 (2015), table of the
#: CLS-LOC data set sizes. One epoch of an ImageNet model processes this many samples.
IMAGENET_TRAIN_IMAGES = 1_281_167


# ------------------------------------------------------------------ the decomposition








def training_time(samples, flops_per_sample, device_flops, devices=1, efficiency=1.0):
    r"""Training time in seconds: :math:`T = D \cdot C / (r \cdot N \cdot \eta)`.

    Parameters
    ----------
    samples : float or array_like
        :math:`D`, samples processed in the whole run (data-set size x epochs), >= 0.
        For language models, tokens work as samples if ``flops_per_sample`` is per token.
    flops_per_sample : float or array_like
        :math:`C`, FLOPs of one sample's forward and backward pass (about 3x the
        forward pass), >= 0. FLOPs, not MACs: FLOPs = 2 x MACs.
    device_flops : float or array_like
        :math:`r`, sustained FLOP/s of one device (peak x utilisation), > 0.
    devices : float or array_like
        :math:`N`, number of devices, >= 1.
    efficiency : float or array_like
        :math:`\eta`, parallel efficiency in (0, 1]: the fraction of the ideal
        N-fold rate the N devices achieve together. It applies only where
        :math:`N > 1`: one device has nothing to communicate, so :math:`\eta(1) = 1`
        whatever is passed (a run on one device takes :math:`D \cdot C / r`).

    Returns
    -------
    float or numpy.ndarray
        Seconds, broadcast over all arguments (a float when all are scalars).

    Examples
    --------
    >>> training_time(1e6, 1e9, 1e12)            # 1e15 FLOPs at 1 TFLOP/s
    1000.0
    >>> training_time(1e6, 1e9, 1e12, devices=8, efficiency=0.5)
    250.0
    >>> training_time(1e6, 1e9, 1e12, devices=[1, 2, 4])
    array([1000.,  500.,  250.])
    >>> training_time(1e6, 1e9, 1e12, devices=[1, 2], efficiency=0.5)  # eta(1) = 1
    array([1000., 1000.])
    """
    d = check_array(samples, "samples", 0)
    c = check_array(flops_per_sample, "flops_per_sample", 0)
    r = check_array(device_flops, "device_flops", 0, low_open=True)
    n = check_array(devices, "devices", 1)
    eta = check_array(efficiency, "efficiency", 0, 1, low_open=True)
    d, c, r, n, eta = broadcast(
        samples=d, flops_per_sample=c, device_flops=r, devices=n, efficiency=eta
    )
    result = d * c / (r * n * np.where(n > 1, eta, 1.0))  # eta(1) = 1: nothing to communicate
    return scalar_or_array(result, samples, flops_per_sample, device_flops, devices, efficiency)


def required_efficiency(samples, flops_per_sample, device_flops, devices, time):
    r"""The parallel efficiency that a measured training ``time`` implies.

    Solves :math:`T = D C / (r N \eta)` for :math:`\eta = D C / (r N T)`. A result
    above 1 means the run did less work or ran faster per device than assumed
    (e.g. it changed the batch size, the optimiser or the number of steps).

    Parameters
    ----------
    samples, flops_per_sample, device_flops, devices
        As in :func:`training_time`.
    time : float or array_like
        Measured wall-clock time of the run in seconds, > 0.

    Examples
    --------
    >>> required_efficiency(1e6, 1e9, 1e12, devices=8, time=250.0)
    0.5
    """
    d = check_array(samples, "samples", 0)
    c = check_array(flops_per_sample, "flops_per_sample", 0)
    r = check_array(device_flops, "device_flops", 0, low_open=True)
    n = check_array(devices, "devices", 1)
    t = check_array(time, "time", 0, low_open=True)
    d, c, r, n, t = broadcast(samples=d, flops_per_sample=c, device_flops=r, devices=n, time=t)
    return scalar_or_array(d * c / (r * n * t), samples, flops_per_sample, device_flops, devices, time)


@dataclass(frozen=True)
class TrainingEstimate:
    """The decomposition :math:`T = D C / (r N \\eta)` with every factor kept, for display.

    Build it with :func:`estimate_training`.
    """

    samples: float
    flops_per_sample: float
    device_flops: float
    devices: float
    efficiency: float
    label: str = ""
    """What is being trained on what (the first line of :meth:`summary`)."""

    @property
    def total_flops(self) -> float:
        """:math:`D \\cdot C`, FLOPs of the whole run."""
        return self.samples * self.flops_per_sample

    @property
    def compute_rate(self) -> float:
        """:math:`R = r N \\eta`, FLOP/s of all devices together."""
        return self.device_flops * self.devices * self.efficiency

    @property
    def seconds(self) -> float:
        """Training time :math:`T` in seconds."""
        return training_time(
            self.samples, self.flops_per_sample, self.device_flops, self.devices, self.efficiency
        )

    @property
    def device_hours(self) -> float:
        """Wall-clock hours x devices."""
        return device_hours(self.seconds, self.devices)

    def summary(self) -> str:
        """Work, rate, time and device-hours as text (deterministic, for nbval)."""
        return (f"{self.label}\n" if self.label else "") + tr(
            "work  D x C     = {work}\n      ({samples} samples x {flops_per_sample})\n"
            "rate  r x N x η = {rate}\n      ({device_rate} x {devices} x {efficiency})\n"
            "time  T         = {time} ({seconds})\ncost            = {device_hours} device-hours",
            work=f"{self.total_flops:.3g} FLOP", samples=f"{self.samples:.3g}",
            flops_per_sample=f"{self.flops_per_sample:.3g} FLOP", rate=f"{self.compute_rate / 1e12:.4g} TFLOP/s",
            device_rate=f"{self.device_flops / 1e12:.3g} TFLOP/s", devices=f"{self.devices:g}",
            efficiency=f"{self.efficiency:.3g}", time=human_duration(self.seconds), seconds=f"{self.seconds:.3g} s",
            device_hours=f"{self.device_hours:,.4g}")

    def __str__(self) -> str:
        return self.summary()


def estimate_training(
    samples, flops_per_sample, device_flops, devices=1, efficiency=1.0, *, label: str = ""
):
    """A :class:`TrainingEstimate` (scalars only; arguments as in :func:`training_time`).

    ``label`` names the run; it heads the summary. On one device the estimate records
    η = 1 whatever ``efficiency`` is (one device has nothing to communicate).

    Examples
    --------
    >>> e = estimate_training(1e6, 1e9, 1e12, devices=8, efficiency=0.5)
    >>> e.seconds, e.device_hours
    (250.0, 0.5555555555555556)
    >>> print(e)
    work  D x C     = 1e+15 FLOP
          (1e+06 samples x 1e+09 FLOP)
    rate  r x N x η = 4 TFLOP/s
          (1 TFLOP/s x 8 x 0.5)
    time  T         = 4.17 min (250 s)
    cost            = 0.5556 device-hours
    >>> estimate_training(1e6, 1e9, 1e12, devices=1, efficiency=0.01).efficiency
    1.0
    """
    values = {
        "samples": samples,
        "flops_per_sample": flops_per_sample,
        "device_flops": device_flops,
        "devices": devices,
        "efficiency": efficiency,
    }
    for name, value in values.items():
        if np.ndim(value) != 0:
            raise TypeError(f"{name} must be a scalar, got shape {np.shape(value)}")
    training_time(**values)  # validates every argument
    if not isinstance(label, str):
        raise TypeError(f"label must be a string, got {type(label).__name__}")
    if float(devices) <= 1:  # eta(1) = 1 (see training_time): record the efficiency that applies
        values["efficiency"] = 1.0
    return TrainingEstimate(**{k: float(v) for k, v in values.items()}, label=label)


def device_hours(seconds, devices=1):
    """Device-hours of a run: wall-clock hours x devices (what a cloud bill counts).

    Examples
    --------
    >>> device_hours(3600.0, devices=8)
    8.0
    """
    s = check_array(seconds, "seconds", 0)
    n = check_array(devices, "devices", 1)
    s, n = broadcast(seconds=s, devices=n)
    return scalar_or_array(s * n / 3600.0, seconds, devices)


_UNITS = (("years", 365.25 * 86400.0), ("days", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0))


def human_duration(seconds: float, digits: int = 3) -> str:
    """A duration in the largest unit that keeps the number >= 1 (years .. s, ms, µs).

    Parameters
    ----------
    seconds : float
        Duration, >= 0 and finite.
    digits : int
        Significant digits, 1 to 15.

    Examples
    --------
    >>> human_duration(2820.0)
    '47 min'
    >>> human_duration(3 * 86400 * 365.25)
    '3 years'
    >>> human_duration(0.0125)
    '12.5 ms'
    """
    arr = as_real(seconds, "seconds")
    if arr.ndim != 0:
        raise TypeError(f"seconds must be a scalar, got an array of shape {arr.shape}")
    check_range(arr, "seconds", 0.0, np.inf)
    digits = check_int(digits, "digits", 1, 15)
    s = float(arr)
    if s == 0.0:
        return "0 s"
    for unit, size in _UNITS:
        if s >= size:
            value = f"{s / size:.{digits}g}"  # the words are translated, the symbols (h, min) not:
            words = {"years": tr("{value} years", value=value), "days": tr("{value} days", value=value)}
            return words.get(unit, f"{value} {unit}")
    if s >= 1e-3:
        return f"{s * 1e3:.{digits}g} ms"
    return f"{s * 1e6:.{digits}g} µs"


# ------------------------------------------------------------------ FLOP / MAC counts
def transformer_training_flops(params, tokens):
    r"""Training FLOPs of a dense transformer: :math:`6 \cdot P \cdot D` ("6PD").

    Each parameter takes part in one multiply-accumulate per token in the forward
    pass (2 FLOPs) and two in the backward pass (4 FLOPs: the gradient with respect
    to the input and to the weight), so forward = 2PD, backward = 4PD.

    Assumptions: the matrix multiplications with the weights dominate; attention
    score computations (which grow with sequence length, about
    :math:`6 \cdot n_{layers} \cdot seq \cdot d_{model}` per token), embeddings
    look-ups, normalisation and the optimiser update are left out, and no
    activation recomputation. It underestimates for long sequences relative to
    the model width.

    Parameters
    ----------
    params : float or array_like
        :math:`P`, number of parameters, >= 0.
    tokens : float or array_like
        :math:`D`, training tokens processed (all epochs), >= 0.

    Returns
    -------
    float or numpy.ndarray
        FLOPs (not MACs).

    Examples
    --------
    >>> transformer_training_flops(340e6, 1e9)
    2.04e+18
    """
    p = check_array(params, "params", 0)
    d = check_array(tokens, "tokens", 0)
    p, d = broadcast(params=p, tokens=d)
    return scalar_or_array(6.0 * p * d, params, tokens)


def compute_optimal(compute_flops, tokens_per_param=20):
    r"""Chinchilla's ``(P, D)`` for a budget :math:`C = 6PD` at :math:`D = kP`: :math:`P = \sqrt{C/6k}`, :math:`D = kP`.

    Hoffmann et al. 2022 (arXiv:2203.15556): about 20 tokens per parameter give the lowest loss for C.

    >>> [f"{x:.3g}" for x in compute_optimal(6 * 70e9 * 1.4e12)]   # Chinchilla: 70B on 1.4T tokens
    ['7e+10', '1.4e+12']
    """
    c, k = broadcast(compute_flops=check_array(compute_flops, "compute_flops", 0),
                     tokens_per_param=check_array(tokens_per_param, "tokens_per_param", 0, low_open=True))
    params = np.sqrt(c / (6.0 * k))
    return tuple(scalar_or_array(x, compute_flops, tokens_per_param) for x in (params, k * params))


def sequence_tokens(steps, batch_size, sequence_length):
    """Tokens processed by a run of ``steps`` steps of ``batch_size`` sequences.

    Arrays broadcast, so a run with phases (e.g. BERT: 90% of the steps at length
    128, 10% at 512) is ``sequence_tokens([s1, s2], b, [128, 512]).sum()``.

    Examples
    --------
    >>> sequence_tokens(1000, 256, 128)
    32768000.0
    """
    s = check_array(steps, "steps", 0)
    b = check_array(batch_size, "batch_size", 0)
    n = check_array(sequence_length, "sequence_length", 0)
    s, b, n = broadcast(steps=s, batch_size=b, sequence_length=n)
    return scalar_or_array(s * b * n, steps, batch_size, sequence_length)


@dataclass(frozen=True)
class PretrainingRecipe:
    """A language model's pre-training run: size and steps, for a 6PD estimate.

    Attributes
    ----------
    name : str
    params : float
        Parameters :math:`P`.
    steps : tuple of int
        Steps of each phase (e.g. BERT trains at two sequence lengths).
    batch_size : tuple of int
        Sequences per step in each phase.
    sequence_length : tuple of int
        Tokens per sequence in each phase.
    source : str
        Where the numbers come from.
    layers, hidden : int, optional
        Transformer layers and hidden size (for the attention FLOPs that 6PD leaves out).
    embedding_params : float, optional
        Parameters of the embedding tables (look-ups, which 6PD charges as products).
    """

    name: str
    params: float
    steps: tuple[int, ...]
    batch_size: tuple[int, ...]
    sequence_length: tuple[int, ...]
    source: str
    layers: int | None = None
    hidden: int | None = None
    embedding_params: float | None = None

    def six_pd_terms(self) -> dict[str, float]:
        r"""What 6PD counts and omits, in FLOPs over the whole run (needs the architecture).

        * ``six_pd``: :math:`6PD`, every parameter in one multiply-accumulate per token forward
          and two backward;
        * ``embeddings``: the part of it charged to the embedding tables,
          :math:`6 P_\text{emb} D` - a look-up copies a row and multiplies nothing, so 6PD
          overcounts by this much;
        * ``attention``: the score products :math:`QK^T` and :math:`AV`, which use no
          parameters and so are not in 6PD: per token and layer :math:`4sh` forward (two
          products of :math:`s \times h` multiply-accumulates), :math:`12sh` with the backward
          pass, summed over the phases' sequence lengths :math:`s`;
        * ``products``: 6PD corrected for both (the masked-LM head that reuses the token table
          for the ~15 % masked positions is not counted),
          ``six_pd - embeddings + attention``.

        Examples
        --------
        >>> t = BERT_LARGE.six_pd_terms()
        >>> round(t["embeddings"] / t["six_pd"], 3), round(t["attention"] / t["six_pd"], 3)
        (0.093, 0.036)
        """
        if self.layers is None or self.hidden is None or self.embedding_params is None:
            raise ValueError(f"{self.name}: layers, hidden and embedding_params are needed for the 6PD terms")
        tokens = sequence_tokens(self.steps, self.batch_size, self.sequence_length)
        attention = float(np.sum(12.0 * self.layers * np.asarray(self.sequence_length) * self.hidden * tokens))
        six_pd = self.flops
        embeddings = 6.0 * self.embedding_params * self.tokens
        return {"six_pd": six_pd, "embeddings": embeddings, "attention": attention,
                "products": six_pd - embeddings + attention}

    @property
    def sequences(self) -> int:
        """Training sequences (samples), summed over the phases: steps x batch size."""
        return int(np.sum(np.asarray(self.steps, dtype=np.int64) * np.asarray(self.batch_size)))

    @property
    def tokens(self) -> float:
        """Training tokens :math:`D`, summed over the phases."""
        return float(np.sum(sequence_tokens(self.steps, self.batch_size, self.sequence_length)))

    @property
    def flops(self) -> float:
        """Training FLOPs by :func:`transformer_training_flops` (6 P D)."""
        return transformer_training_flops(self.params, self.tokens)

    @property
    def flops_per_token(self) -> float:
        """6 P: FLOPs per training token."""
        return 6.0 * self.params

    def time_on(self, device, devices=1, efficiency=1.0):
        r"""Seconds this run takes on ``devices`` devices of one kind at their sustained rate.

        :func:`training_time` with :math:`D` = :attr:`tokens`, :math:`C` =
        :attr:`flops_per_token` (6P) and :math:`r` = the device's sustained FLOP/s from
        ``data/hardware.csv`` (peak x ``sustained_fraction``, each row with its source):
        :math:`T = D \cdot C / (r \cdot N \cdot \eta)`.

        Parameters
        ----------
        device : str or course_lib.datasets.HardwareDevice
            A row of ``data/hardware.csv`` or its ``device_id``.
        devices : float or array_like
            :math:`N` >= 1.
        efficiency : float or array_like
            :math:`\eta` in (0, 1], applied from :math:`N = 2` (as in :func:`training_time`).

        Examples
        --------
        >>> round(BERT_LARGE.time_on("v100_sxm3_32gb") / 86400, 1)   # days on one V100 of the record
        25.6
        >>> round(BERT_LARGE.time_on("v100_sxm3_32gb", 1472, efficiency=0.5) / 60)   # minutes
        50
        """
        from .datasets import HardwareDevice, get_device

        if isinstance(device, str):
            device = get_device(device)
        check_type(device, "device", HardwareDevice, "a device_id or a row of data/hardware.csv")
        return training_time(self.tokens, self.flops_per_token, device.sustained_flops, devices, efficiency)


#: BERT-Large pre-training as published: 340M parameters; 1,000,000 steps of 256
#: sequences, 90% of the steps at sequence length 128 and the last 10% at 512.
BERT_LARGE = PretrainingRecipe(
    name="BERT-Large",
    params=340e6,
    steps=(900_000, 100_000),
    batch_size=(256, 256),
    sequence_length=(128, 512),
    source=(
        "Devlin, Chang, Lee, Toutanova, BERT: Pre-training of Deep Bidirectional Transformers "
        "for Language Understanding, NAACL 2019, arXiv:1810.04805: section 3 (BERT-Large, "
        "340M parameters, L = 24 layers, H = 1024) and appendix A.2 (batch 256 sequences, "
        "1,000,000 steps; sequence length 128 for 90% of the steps, 512 for the remaining 10%); "
        "embedding tables from the released configuration (google-research/bert, "
        "bert_config.json of BERT-Large, Uncased: vocab_size 30522 (the cased vocabulary has "
        "28996), max_position_embeddings 512, "
        "type_vocab_size 2)"
    ),
    layers=24,
    hidden=1024,
    embedding_params=(30522 + 512 + 2) * 1024,
)


def training_flops_per_sample(forward_macs, backward_factor=2.0):
    r"""Training FLOPs per sample from the forward pass's MACs: 2 x MACs x (1 + backward factor).

    The backward pass computes two products per forward one (the gradient with respect
    to the input and to the weights), so it costs about twice the forward pass
    (``backward_factor=2``) and training about 3x the forward pass. The first layer
    needs no input gradient, so the true factor is a little below 2 (see
    :meth:`course_lib.models.MLP.flops_per_sample`).

    Parameters
    ----------
    forward_macs : float or array_like
        Multiply-accumulates of one sample's forward pass, >= 0 (e.g. ``gmacs_per_forward
        * 1e9`` from ``data/dnn_models.csv``).
    backward_factor : float or array_like
        Backward cost relative to the forward pass, >= 0.

    Examples
    --------
    >>> training_flops_per_sample(4.089e9)     # ResNet-50: 4.089 GMACs forward
    24534000000.0
    """
    m = check_array(forward_macs, "forward_macs", 0)
    b = check_array(backward_factor, "backward_factor", 0)
    m, b = broadcast(forward_macs=m, backward_factor=b)
    return scalar_or_array(FLOPS_PER_MAC * m * (1.0 + b), forward_macs, backward_factor)


def linear_macs(in_features: int, out_features: int, batch: int = 1) -> int:
    """Multiply-accumulates of a fully connected layer's forward pass (FLOPs = 2 x MACs).

    ``y = x @ W + b`` with ``x`` (batch, in_features) and ``W`` (in_features,
    out_features) costs ``batch * in_features * out_features`` MACs; the bias add is
    not counted.

    Examples
    --------
    >>> linear_macs(64, 32)
    2048
    >>> FLOPS_PER_MAC * linear_macs(1024, 1024, batch=8)
    16777216
    """
    i = check_int(in_features, "in_features", 1)
    o = check_int(out_features, "out_features", 1)
    b = check_int(batch, "batch", 1)
    return b * i * o


def _pair(value, name: str, minimum: int) -> tuple[int, int]:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
        return (check_int(value[0], f"{name}[0]", minimum), check_int(value[1], f"{name}[1]", minimum))
    v = check_int(value, name, minimum)
    return v, v


def conv2d_macs(
    in_channels: int,
    out_channels: int,
    kernel_size,
    input_size,
    *,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
    batch: int = 1,
) -> int:
    r"""Multiply-accumulates of a 2-D convolution's forward pass (FLOPs = 2 x MACs).

    With output size :math:`H_o \times W_o`, the layer is one GEMM (the im2col view)
    of :math:`\mathcal{M} \times \mathcal{K}` by :math:`\mathcal{K} \times \mathcal{N}` with
    :math:`\mathcal{M} = B H_o W_o`, :math:`\mathcal{K} = (C_i / G_c) k_h k_w`,
    :math:`\mathcal{N} = C_o` (:math:`G_c` groups), i.e. :math:`\mathcal{M} \mathcal{K} \mathcal{N}` MACs. The bias
    add is not counted.

    Parameters
    ----------
    in_channels, out_channels : int
        :math:`C_i`, :math:`C_o`, both divisible by ``groups``.
    kernel_size, input_size : int or (int, int)
        :math:`(H_f, W_f)` and the input's :math:`(H, W)`.
    stride, padding, dilation : int or (int, int)
        As in ``torch.nn.Conv2d``; the output is
        :math:`H_o = \lfloor (H + 2p - d (H_f - 1) - 1) / s \rfloor + 1`.
    groups : int
        Grouped convolution (``groups == in_channels``: depthwise).
    batch : int
        :math:`B`, images in the batch.

    Examples
    --------
    >>> conv2d_macs(3, 64, 7, 224, stride=2, padding=3)   # ResNet-50's first layer
    118013952
    >>> conv2d_macs(3, 2, 2, 3)   # the chapter's im2col figure: 4 outputs x 12 x 2
    96
    """
    ci = check_int(in_channels, "in_channels", 1)
    co = check_int(out_channels, "out_channels", 1)
    g = check_int(groups, "groups", 1)
    b = check_int(batch, "batch", 1)
    if ci % g or co % g:
        raise ValueError(
            f"in_channels ({ci}) and out_channels ({co}) must be divisible by groups ({g})"
        )
    kh, kw = _pair(kernel_size, "kernel_size", 1)
    h, w = _pair(input_size, "input_size", 1)
    sh, sw = _pair(stride, "stride", 1)
    ph, pw = _pair(padding, "padding", 0)
    dh, dw = _pair(dilation, "dilation", 1)
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1:
        raise ValueError(
            f"kernel_size {kh}x{kw} (dilation {dh}x{dw}) does not fit input_size {h}x{w} "
            f"with padding {ph}x{pw}"
        )
    return b * ho * wo * co * (ci // g) * kh * kw


def mlp_training_flops(model: MLP, samples) -> float | np.ndarray:
    """FLOPs to train the running example on ``samples`` samples (forward + backward).

    ``samples x model.flops_per_sample()["total"]`` - GEMMs only (see
    :meth:`course_lib.models.MLP.flops_per_sample`); the optimiser update (a few
    FLOPs per parameter per step) is left out.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> mlp_training_flops(MLP((64, 32, 10)), 1000)
    10112000.0
    """
    per_sample = _flops_per_sample(model)
    d = check_array(samples, "samples", 0)
    return scalar_or_array(d * per_sample, samples)


def _flops_per_sample(model) -> int:
    counts = getattr(model, "flops_per_sample", None)
    if not callable(counts):
        raise TypeError(f"model must be a course_lib.models.MLP, got {type(model).__name__}")
    return int(counts()["total"])


# ------------------------------------------------------------------ calculator estimates


def find_row(rows: Sequence, key: str, field: str, name: str):
    """The row of ``rows`` whose ``field`` equals ``key`` (a model name, a device id).

    ``name`` is the caller's parameter, named in the error for an unknown ``key``.

    Examples
    --------
    >>> from course_lib.datasets import load_hardware
    >>> find_row(load_hardware(), "v100_sxm2_32gb", "device_id", "device_id").device
    'NVIDIA Tesla V100 SXM2 32GB'
    """
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise TypeError(f"rows must be a sequence of data rows, got {type(rows).__name__}")
    if not isinstance(key, str):
        raise TypeError(f"{name} must be a str (the {field} column), got {key!r}")
    if not isinstance(field, str):
        raise TypeError(f"field must be a str (a column name), got {field!r}")
    for row in rows:
        if getattr(row, field) == key:
            return row
    known = ", ".join(getattr(row, field) for row in rows)
    raise ValueError(f"{name} must be one of {known}; got {key!r}")


def _check_models(models) -> list:
    from .datasets import DnnModel

    return check_sequence(models, "models", DnnModel, "a DnnModel (load_dnn_models())")


def _check_hardware(hardware) -> list:
    from .datasets import HardwareDevice

    return check_sequence(hardware, "hardware", HardwareDevice, "a HardwareDevice (load_hardware())")




def sustained_flops(peak_flops: float, utilisation: float) -> float:
    """The rate r of a device: its peak FLOP/s times the sustained fraction ``utilisation``.

    Examples
    --------
    >>> sustained_flops(125e12, 0.4)
    50000000000000.0
    """
    utilisation = check_real(utilisation, "utilisation", 0.0, 1.0, low_open=True)
    return check_positive(peak_flops, "peak_flops") * utilisation


def cnn_calculator_estimate(
    model: str, images_million: float, epochs: int, device_id: str, devices: int,
    utilisation: float, efficiency: float, *, models: Sequence, hardware: Sequence,
) -> TrainingEstimate:
    """The estimate behind :func:`course_lib.plots.cost.cnn_calculator_figure` (same arguments).

    ``C`` = :func:`training_flops_per_sample` of the model's forward
    MACs (training = 3x forward); ``D`` = images x epochs; ``r`` = the device's peak
    (the one its ``sustained_fraction`` refers to: tensor or FP32) x ``utilisation``.

    Examples
    --------
    >>> from course_lib.datasets import load_dnn_models, load_hardware
    >>> est = cnn_calculator_estimate("ResNet-50", 1.0, 1, "v100_sxm2_32gb", 1, 0.5, 1.0,
    ...                               models=load_dnn_models(), hardware=load_hardware())
    >>> est.samples, round(est.flops_per_sample / 1e9, 3)  # ResNet-50: 4.089 GMACs x 2 x 3
    (1000000.0, 24.534)
    """
    models, hardware = _check_models(models), _check_hardware(hardware)
    row = find_row(models, model, "model", "model")
    device = find_row(hardware, device_id, "device_id", "device_id")
    images_million = check_positive(images_million, "images_million")
    epochs, devices = check_count(epochs, "epochs"), check_count(devices, "devices")
    return estimate_training(
        float(images_million) * 1e6 * int(epochs),
        training_flops_per_sample(row.gmacs_per_forward * 1e9),
        sustained_flops(device.peak_tflops * 1e12, utilisation),
        devices,
        efficiency,
        label=tr("{model}, {images} images x {epochs} epochs, {devices} x {device}", model=row.model, epochs=int(epochs),
                 images=f"{float(images_million):.3g}M", devices=int(devices), device=device.device),
    )


def transformer_calculator_estimate(
    params_million: float, tokens_million: float, device_id: str, devices: int,
    utilisation: float, efficiency: float, *, hardware: Sequence,
) -> TrainingEstimate:
    """The estimate behind :func:`course_lib.plots.cost.transformer_calculator_figure` (same arguments).

    ``C`` = 6 x parameters FLOPs per token (:func:`transformer_training_flops`),
    ``D`` = tokens.

    Examples
    --------
    >>> from course_lib.datasets import load_hardware
    >>> est = transformer_calculator_estimate(100, 1000, "h100_sxm", 1, 1.0, 1.0,
    ...                                       hardware=load_hardware())
    >>> est.total_flops == 6 * 100e6 * 1000e6
    True
    """
    hardware = _check_hardware(hardware)
    device = find_row(hardware, device_id, "device_id", "device_id")
    params_million = check_positive(params_million, "params_million")
    tokens_million = check_positive(tokens_million, "tokens_million")
    devices = check_count(devices, "devices")
    return estimate_training(
        float(tokens_million) * 1e6,
        6.0 * float(params_million) * 1e6,
        sustained_flops(device.peak_tflops * 1e12, utilisation),
        devices,
        efficiency,
        label=tr("transformer, {params} parameters, {tokens} tokens, {devices} x {device}", devices=int(devices),
                 params=f"{float(params_million):g}M", tokens=f"{float(tokens_million):,.0f}M", device=device.device),
    )
