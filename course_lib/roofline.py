r"""The roofline model (屋顶线模型): why the measured rate r is a small share of the peak.

An operator that does :math:`F` FLOPs and moves :math:`Q` bytes to or from memory needs
at least :math:`\max(F / \text{peak},\ Q / \beta_{\text{mem}})` seconds on one device. Its
**arithmetic intensity** (算术强度) :math:`I_a = F / Q` (FLOP/B) decides which bound wins:

.. math:: \text{attainable rate} = \min(\text{peak},\ I_a \cdot \beta_{\text{mem}})

Left of the **ridge point** :math:`\text{peak} / \beta_{\text{mem}}` an operator is
memory-bound, right of it compute-bound. (:math:`\beta` alone is the link bandwidth of the
alpha-beta model; the memory bandwidth is :math:`\beta_{\text{mem}}`.)

Byte counts are the compulsory traffic: every operand read once and every result written
once - a perfect cache inside an operator and none between operators. Real kernels move
more, so the roofline is an upper bound on the rate. A pure copy (im2col, gathering a
batch) has :math:`F = 0`, so :math:`I_a = 0`: no point on a log axis, but a time,
:math:`Q / \beta_{\text{mem}}`, that the prediction of a training step counts.

Only numpy is imported at module level; the peak is :func:`course_lib.rate.measure_gemm_rate`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ._validate import (
    broadcast,
    check_array,
    check_int,
    check_positive,
    check_real,
    check_sequence,
    check_type,
    scalar_or_array,
)
from .i18n import tr

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import ArrayLike

    from .datasets import HardwareDevice
    from .models import MLP

__all__ = [
    "Op", "Roofline", "arithmetic_intensity", "attainable_rate", "elementwise_op", "gemm_op",
    "im2col_op", "measure_memory_bandwidth", "measure_roofline", "mlp_step_ops", "total_op",
]


@dataclass(frozen=True)
class Op:
    """One operator's work: ``flops`` (>= 0) and ``nbytes`` read and written (> 0).

    Examples
    --------
    >>> Op("ReLU", 1000, 8000).intensity
    0.125
    """

    name: str
    flops: float
    nbytes: float

    def __post_init__(self):
        check_type(self.name, "name", str, "a str")
        object.__setattr__(self, "flops", check_real(self.flops, "flops", 0))
        object.__setattr__(self, "nbytes", check_real(self.nbytes, "nbytes", 0, low_open=True))

    @property
    def intensity(self) -> float:
        """Arithmetic intensity :math:`I_a` = FLOPs / bytes (FLOP/B)."""
        return self.flops / self.nbytes


def arithmetic_intensity(flops: ArrayLike, nbytes: ArrayLike) -> float | np.ndarray:
    """:math:`I_a = F / Q`: FLOPs per byte moved (FLOP/B), broadcast over the arguments.

    Examples
    --------
    >>> round(arithmetic_intensity(2 * 512**3, 3 * 512**2 * 4), 2)   # a 512³ float32 GEMM
    85.33
    """
    f = check_array(flops, "flops", 0)
    q = check_array(nbytes, "nbytes", 0, low_open=True)
    f, q = broadcast(flops=f, nbytes=q)
    return scalar_or_array(f / q, flops, nbytes)


def attainable_rate(intensity: ArrayLike, peak_flops: ArrayLike,
                    memory_bandwidth: ArrayLike) -> float | np.ndarray:
    r"""The roof: :math:`\min(\text{peak},\ I_a \cdot \beta_{\text{mem}})` in FLOP/s.

    Parameters
    ----------
    intensity : float or array_like
        :math:`I_a` in FLOP/B, >= 0 (infinity: no memory traffic, the peak).
    peak_flops : float or array_like
        Peak FLOP/s, > 0.
    memory_bandwidth : float or array_like
        :math:`\beta_{\text{mem}}` in B/s, > 0.

    Examples
    --------
    >>> attainable_rate([1.0, 10.0], 100e9, 25e9)      # ridge point at 4 FLOP/B
    array([2.5e+10, 1.0e+11])
    """
    i = check_array(intensity, "intensity", 0, high_open=False, allow_inf=True)
    p = check_array(peak_flops, "peak_flops", 0, low_open=True)
    b = check_array(memory_bandwidth, "memory_bandwidth", 0, low_open=True)
    i, p, b = broadcast(intensity=i, peak_flops=p, memory_bandwidth=b)
    return scalar_or_array(np.minimum(p, i * b), intensity, peak_flops, memory_bandwidth)


def gemm_op(m: int, k: int, n: int, *, itemsize: int = 4, name: str = "") -> Op:
    r"""A GEMM :math:`\mathcal{M}\times\mathcal{K}` by :math:`\mathcal{K}\times\mathcal{N}`.

    :math:`2\mathcal{MKN}` FLOPs (1 MAC = 2 FLOPs); bytes: both inputs read and the result
    written once, :math:`(\mathcal{MK} + \mathcal{KN} + \mathcal{MN})` x ``itemsize``.

    Examples
    --------
    >>> op = gemm_op(512, 512, 512)
    >>> op.name, op.flops, round(op.intensity, 2)
    ('GEMM 512×512×512', 268435456.0, 85.33)
    """
    m, k, n = (check_int(v, s, 1, 2**31) for v, s in ((m, "m"), (k, "k"), (n, "n")))
    size = check_int(itemsize, "itemsize", 1, 16)
    return Op(name or f"GEMM {m}×{k}×{n}", 2.0 * m * k * n, float(m * k + k * n + m * n) * size)


def elementwise_op(n: int, *, inputs: int = 1, flops_per_element: float = 1.0,
                   itemsize: int = 4, name: str = "element-wise") -> Op:
    """An operation applied element by element to ``n`` elements (ReLU, bias add, SGD).

    Reads ``inputs`` arrays of ``n`` elements and writes one: ``(inputs + 1) * n *
    itemsize`` bytes for ``n * flops_per_element`` FLOPs - an intensity that does not
    grow with ``n``.

    Examples
    --------
    >>> elementwise_op(1000, name="ReLU").intensity          # 1 FLOP per 4 + 4 bytes
    0.125
    """
    n = check_int(n, "n", 1, 2**40)
    inputs = check_int(inputs, "inputs", 0, 16)
    fpe = check_real(flops_per_element, "flops_per_element", 0, 1e6)
    size = check_int(itemsize, "itemsize", 1, 16)
    return Op(name, n * fpe, float((inputs + 1) * n * size))


def im2col_op(batch: int, image: int, kernel: int, stride: int = 1, c_in: int = 1, *,
              padding: int | None = None, itemsize: int = 4) -> Op:
    """im2col of a convolution (arguments as :func:`course_lib.conv.im2col.gemm_sizes`): a copy.

    0 FLOPs; reads the input once and writes the :math:`\\mathcal{M}\\times\\mathcal{K}`
    column matrix, so :math:`I_a = 0`.

    Examples
    --------
    >>> op = im2col_op(1, 8, 3, 1, 1)     # 8×8 image, 3×3 kernel: 64 windows of 9 pixels
    >>> op.flops, op.nbytes
    (0.0, 2560.0)
    """
    from .conv.im2col import gemm_sizes

    s = gemm_sizes(batch, image, kernel, stride, c_in, 1, padding, itemsize)
    return Op(f"im2col {s['M']}×{s['K']}", 0.0, float(s["input_bytes"] + s["im2col_bytes"]))


def total_op(ops: Sequence[Op], name: str) -> Op:
    """The operators of ``ops`` run one after the other, as one: FLOPs and bytes add up.

    Examples
    --------
    >>> conv = total_op([im2col_op(1, 8, 3, 1, 1), gemm_op(64, 9, 4)], "conv")
    >>> round(conv.intensity, 3)        # the copy pulls the GEMM's intensity down
    0.764
    """
    ops = check_sequence(ops, "ops", Op, "an Op")
    if not ops:
        raise ValueError("ops must hold at least one Op")
    check_type(name, "name", str, "a str")
    return Op(name, sum(op.flops for op in ops), sum(op.nbytes for op in ops))


def mlp_step_ops(model: MLP, batch_size: int, *, itemsize: int | None = None) -> list[Op]:
    """The operators of one training step of the running example, as ``train`` runs them.

    Batch gather (a copy), then per layer forward GEMM, bias add and ReLU (hidden layers);
    softmax cross-entropy (counted as 5 FLOPs per logit); per layer backward, last to
    first: ReLU mask, weight-gradient GEMM and its accumulation, bias gradient, and the
    input-gradient GEMM (not for layer 0); the SGD update. The GEMMs' FLOPs add up to
    ``cost.mlp_training_flops(model, batch_size)``.

    Parameters
    ----------
    model : course_lib.models.MLP
    batch_size : int
        :math:`B`, samples per step.
    itemsize : int, optional
        Bytes per number; the model's dtype by default (float32: 4).

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> ops = mlp_step_ops(MLP((64, 64, 10)), 64)
    >>> len(ops), sum(op.flops for op in ops if op.name.endswith("GEMM"))
    (14, 1294336.0)
    """
    from .models import MLP

    check_type(model, "model", MLP, "a course_lib.models.MLP")
    b = check_int(batch_size, "batch_size", 1, 2**31)
    s = model.dtype.itemsize if itemsize is None else check_int(itemsize, "itemsize", 1, 16)
    layers = list(zip(model.sizes[:-1], model.sizes[1:]))
    last = len(layers) - 1
    ops = [Op("gather batch", 0.0, 2.0 * b * model.sizes[0] * s)]
    for i, (fi, fo) in enumerate(layers):
        ops += [gemm_op(b, fi, fo, itemsize=s, name=f"L{i} forward GEMM"),
                Op(f"L{i} bias add", b * fo, (2.0 * b * fo + fo) * s)]
        if i < last:
            ops.append(elementwise_op(b * fo, itemsize=s, name=f"L{i} ReLU"))
    ops.append(elementwise_op(b * model.sizes[-1], flops_per_element=5, itemsize=s,
                              name="softmax cross-entropy"))
    for i, (fi, fo) in reversed(list(enumerate(layers))):
        if i < last:
            ops.append(elementwise_op(b * fo, inputs=2, flops_per_element=2, itemsize=s,
                                      name=f"L{i} ReLU mask"))
        ops += [gemm_op(fi, b, fo, itemsize=s, name=f"L{i} weight-gradient GEMM"),
                Op(f"L{i} gradient sums", fi * fo + b * fo, (3.0 * fi * fo + b * fo + 2 * fo) * s)]
        if i > 0:
            ops.append(gemm_op(b, fo, fi, itemsize=s, name=f"L{i} input-gradient GEMM"))
    ops.append(elementwise_op(model.n_params, inputs=2, flops_per_element=2, itemsize=s,
                              name="SGD update"))
    return ops


@dataclass(frozen=True)
class Roofline:
    r"""A device's roofline: peak FLOP/s and memory bandwidth :math:`\beta_{\text{mem}}` (B/s).

    Examples
    --------
    >>> roof = Roofline(100e9, 25e9)
    >>> roof.ridge, roof.bound(gemm_op(512, 512, 512)), roof.bound(elementwise_op(10**6))
    (4.0, 'compute', 'memory')
    >>> roof.predict_rate([Op("a", 1e9, 1e8), Op("b", 0, 1e8)])    # 10 ms + 4 ms
    71428571428.57143
    """

    peak_flops: float
    memory_bandwidth: float
    label: str = ""

    def __post_init__(self):
        object.__setattr__(self, "peak_flops", check_positive(self.peak_flops, "peak_flops"))
        object.__setattr__(self, "memory_bandwidth",
                           check_positive(self.memory_bandwidth, "memory_bandwidth"))
        check_type(self.label, "label", str, "a str")

    @classmethod
    def of_device(cls, device: HardwareDevice) -> Roofline:
        """The roofline of a row of ``data/hardware.csv`` (the peak its sustained fraction uses)."""
        from .datasets import HardwareDevice

        check_type(device, "device", HardwareDevice, "a HardwareDevice (load_hardware())")
        return cls(device.peak_tflops * 1e12, device.memory_bandwidth_gb_s * 1e9, device.device)

    @property
    def ridge(self) -> float:
        """Ridge point peak / bandwidth (FLOP/B): the intensity where the two roofs meet."""
        return self.peak_flops / self.memory_bandwidth

    def attainable(self, intensity: ArrayLike) -> float | np.ndarray:
        """:func:`attainable_rate` on this roofline."""
        return attainable_rate(intensity, self.peak_flops, self.memory_bandwidth)

    def time(self, op: Op) -> float:
        """Least seconds for ``op``: max(FLOPs / peak, bytes / bandwidth)."""
        check_type(op, "op", Op, "an Op")
        return max(op.flops / self.peak_flops, op.nbytes / self.memory_bandwidth)

    def bound(self, op: Op) -> str:
        """``"compute"`` or ``"memory"``: which roof limits ``op``."""
        check_type(op, "op", Op, "an Op")
        return "compute" if op.intensity >= self.ridge else "memory"

    def predict_rate(self, ops: Sequence[Op], counted_flops: float | None = None) -> float:
        """Rate r of running ``ops`` one after the other: counted FLOPs / summed times.

        ``counted_flops`` are the FLOPs r is counted with (all of the ops' by default;
        the training-time model counts the GEMMs only: ``cost.mlp_training_flops``).
        """
        ops = check_sequence(ops, "ops", Op, "an Op")
        if not ops:
            raise ValueError("ops must hold at least one Op")
        flops = sum(op.flops for op in ops) if counted_flops is None else counted_flops
        flops = check_real(flops, "counted_flops", 0)
        return flops / math.fsum(self.time(op) for op in ops)

    def __str__(self) -> str:
        tera = self.peak_flops >= 1e12
        numbers = {"peak": f"{self.peak_flops / (1e12 if tera else 1e9):.4g} {'T' if tera else 'G'}FLOP/s",
                   "bandwidth": f"{self.memory_bandwidth / 1e9:.4g} GB/s", "ridge": f"{self.ridge:.3g} FLOP/B"}
        if self.label:
            return tr("{label}: peak {peak}, memory bandwidth {bandwidth} -> ridge point {ridge}", label=self.label,
                      **numbers)
        return tr("peak {peak}, memory bandwidth {bandwidth} -> ridge point {ridge}", **numbers)


def measure_memory_bandwidth(nbytes: int = 2**26, *, repeat: int = 5) -> float:
    """Memory bandwidth in B/s of this machine (one core) from copying ``nbytes`` bytes.

    ``np.copyto`` reads ``nbytes`` and writes ``nbytes``, so ``2 * nbytes`` bytes move
    per copy; the fastest of ``repeat`` copies (after one untimed copy) counts. The
    default, 64 MiB, is larger than most CPUs' last-level cache: it measures main
    memory. A copy that fits in the cache (1 MiB) measures the cache instead.

    Parameters
    ----------
    nbytes : int
        Bytes of the source array, 4 KiB to 4 GiB.
    repeat : int
        Timed copies, >= 1.

    Examples
    --------
    >>> measure_memory_bandwidth(2**20, repeat=2) > 1e8
    True
    """
    from .timing import measure

    nbytes = check_int(nbytes, "nbytes", 4096, 2**32)
    repeat = check_int(repeat, "repeat", 1, 1000)
    src = np.full(nbytes, 1, dtype=np.uint8)  # written, so every page is really there
    dst = np.empty_like(src)
    return 2.0 * nbytes / measure(lambda: np.copyto(dst, src), repeat=repeat, warmup=1).best


def measure_roofline(nbytes: int = 2**26, size: int = 512, *, repeat: int = 5,
                     threads: int | None = 1) -> Roofline:
    """This machine's roofline: peak from a GEMM, bandwidth from a copy (one core by default).

    The peak is :func:`course_lib.rate.measure_gemm_rate` (``size``, ``threads``,
    ``repeat``), the bandwidth :func:`measure_memory_bandwidth` (``nbytes``, ``repeat``).

    Examples
    --------
    >>> roof = measure_roofline(2**20, 128, repeat=2)
    >>> roof.ridge > 0
    True
    """
    from .rate import measure_gemm_rate

    nbytes = check_int(nbytes, "nbytes", 4096, 2**32)
    peak = measure_gemm_rate(size, threads=threads, repeat=repeat)
    bandwidth = measure_memory_bandwidth(nbytes, repeat=repeat)
    cores = (tr("one core") if threads == 1 else tr("{threads} BLAS threads", threads=threads) if threads
             else tr("the default BLAS threads"))
    return Roofline(peak, bandwidth, tr("this machine, {cores} (GEMM {size}, copy of {copy})", cores=cores,
                                        size=f"{size}²", copy=f"{nbytes / 2**20:g} MiB"))
