r"""Mixed precision (混合精度): the bytes it keeps, the bytes it sends, and why the loss is scaled.

Mixed-precision training (Micikevicius et al., ICLR 2018) runs the forward and backward
passes in a 16-bit format (float16 or bfloat16) and the update in float32:

* **bytes kept** (:func:`adam_bytes_per_param`, :func:`mixed_adam_arrays`): the 16-bit
  parameters and gradients (2 + 2 bytes) for the passes, and for Adam a float32 master copy
  of the parameters plus the two float32 moments, :math:`k = 4 + 4 + 4 = 12` bytes: the
  :math:`2 + 2 + k = 16` bytes per parameter of the ZeRO paper
  (:func:`course_lib.memory.model_state_bytes`). Not fewer than float32 Adam's 4 + 4 + 8;
  the gain is speed and the activations' size.
* **bytes sent** (:func:`allreduce_in`): 16-bit gradients halve the all-reduce's payload;
  the sum is added in the toy's rank order (:func:`course_lib.parallel.partition.sum_rows`),
  each partial sum rounded to 16 bits. :func:`course_lib.parallel.train.collectives.run_shm_collectives`
  measures it in processes (float16 rows: half of float32's bytes); :func:`allreduce_in` is
  its one-process reference, :func:`sum_error` the error of either sum.
* **loss scaling** (:func:`gradient_underflow`): float16's smallest positive number is
  :math:`2^{-24} \approx 6 \cdot 10^{-8}`; smaller gradients become 0 and their information is
  lost. Multiplying the loss by a scale :math:`\sigma` multiplies every gradient of the backward
  pass by :math:`\sigma` and lifts them into range; the update divides by :math:`\sigma` again in
  float32. (bfloat16 has float32's range and needs no scaling.)

References: P. Micikevicius et al., "Mixed Precision Training", ICLR 2018, arXiv:1710.03740;
S. Rajbhandari et al., "ZeRO", SC 2020, Section 3.1.

Examples
--------
>>> adam_bytes_per_param()
ModelStates(parameters=2 B, gradients=2 B, optimizer_states=12 B, total=16 B)
>>> adam_bytes_per_param("float32").total      # float32 Adam: 4 + 4 + 8, no master copy
16.0
"""

from __future__ import annotations

import numpy as np

from ._validate import check_int, check_positive, check_type
from .memory import ModelStates
from .models import MLP, softmax_cross_entropy

__all__ = [
    "FLOAT16_MAX",
    "FLOAT16_MIN",
    "HALF_DTYPES",
    "adam_bytes_per_param",
    "allreduce_in",
    "gradient_underflow",
    "largest_loss_scale",
    "mixed_adam_arrays",
    "sum_error",
]

#: float16's largest finite value (65,504) and smallest positive (subnormal) value, 2**-24.
FLOAT16_MAX = float(np.finfo(np.float16).max)
FLOAT16_MIN = float(np.finfo(np.float16).smallest_subnormal)

#: The 16-bit formats of the passes, and float32 (no mixed precision).
HALF_DTYPES = ("float16", "bfloat16", "float32")
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4}


def _check_compute(dtype) -> str:
    """``dtype`` as one of :data:`HALF_DTYPES`, else ValueError naming ``compute_dtype``."""
    try:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name if dtype is not None else None
    except TypeError:
        name = None
    if name not in HALF_DTYPES:
        raise ValueError(f"compute_dtype must be one of {HALF_DTYPES}, got {dtype!r}")
    return name


def adam_bytes_per_param(compute_dtype="float16") -> ModelStates:
    """Bytes per parameter of Adam's model states when the passes run in ``compute_dtype``.

    Parameters and gradients in ``compute_dtype``; optimizer states: Adam's two float32
    moments (4 + 4 bytes), plus a float32 master copy of the parameters (4 bytes) when the
    passes run in 16 bits (the update must see increments far below a 16-bit parameter's
    last digit). The counts come from the formats' item sizes.

    Parameters
    ----------
    compute_dtype : {"float16", "bfloat16", "float32"}

    Examples
    --------
    >>> adam_bytes_per_param("bfloat16").optimizer_states    # ZeRO's K = 12
    12.0
    >>> adam_bytes_per_param("float32")
    ModelStates(parameters=4 B, gradients=4 B, optimizer_states=8 B, total=16 B)
    """
    name = _check_compute(compute_dtype)
    item, fp32 = float(_ITEMSIZE[name]), 4.0
    master = fp32 if item < fp32 else 0.0
    return ModelStates(parameters=item, gradients=item, optimizer_states=master + 2 * fp32)


def mixed_adam_arrays(n_params: int) -> dict[str, np.ndarray]:
    """The arrays mixed-precision Adam keeps for ``n_params`` parameters (float16 passes),
    allocated, so that their ``nbytes`` can be measured.

    Examples
    --------
    >>> arrays = mixed_adam_arrays(1000)
    >>> {k: v.nbytes for k, v in arrays.items()}
    {'parameters (float16)': 2000, 'gradients (float16)': 2000, 'master parameters (float32)': 4000, 'momentum (float32)': 4000, 'variance (float32)': 4000}
    >>> sum(v.nbytes for v in arrays.values()) / 1000 == adam_bytes_per_param().total
    True
    """
    n = check_int(n_params, "n_params", 1, 2**31)
    return {
        "parameters (float16)": np.zeros(n, np.float16),
        "gradients (float16)": np.zeros(n, np.float16),
        "master parameters (float32)": np.zeros(n, np.float32),
        "momentum (float32)": np.zeros(n, np.float32),
        "variance (float32)": np.zeros(n, np.float32),
    }


def allreduce_in(rows: np.ndarray, dtype) -> dict[str, float]:
    """Sum the workers' gradient ``rows`` in ``dtype`` as the shared-memory all-reduce does.

    Each row (one worker's gradient) is rounded to ``dtype``, the rows are added in rank
    order in ``dtype`` (as :func:`course_lib.parallel.partition.sum_rows` adds them in the
    toy's reduce-scatter), and the result is compared with the float64 sum of the
    unrounded rows.

    Parameters
    ----------
    rows : numpy.ndarray
        ``(N, n)`` float gradients, one row per worker, N >= 1, n >= 1.
    dtype : {"float16", "float32", "float64"}
        The format the gradients travel in.

    Returns
    -------
    dict
        ``payload``: bytes of one worker's gradient in ``dtype`` (what an all-reduce moves,
        :attr:`course_lib.models.TrainResult.bytes_per_step`); ``max_rel_error``: the largest
        error of the sum relative to the largest float64 sum magnitude; ``sum``: the sum.

    Examples
    --------
    >>> rows = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    >>> allreduce_in(rows, "float16")["payload"], allreduce_in(rows, "float32")["payload"]
    (4, 8)
    """
    check_type(rows, "rows", np.ndarray, "a numpy array of shape (N, n)")
    if rows.ndim != 2 or rows.shape[0] < 1 or rows.shape[1] < 1 or rows.dtype.kind != "f":
        raise ValueError(f"rows must be a float array of shape (N, n), N, n >= 1, got {rows.dtype} {rows.shape}")
    if str(dtype) not in ("float16", "float32", "float64"):
        raise ValueError(f"dtype must be 'float16', 'float32' or 'float64', got {dtype!r}")
    sent = rows.astype(dtype)
    total = sent[0].copy()
    for row in sent[1:]:  # rank order, in ``dtype``: what sum_rows does in the shared-memory all-reduce
        total += row
    return {"payload": int(sent[0].nbytes), "sum": total, "max_rel_error": _sum_error(total, rows)}


def sum_error(total: np.ndarray, rows: np.ndarray) -> float:
    """The largest error of an all-reduced ``total`` relative to the largest magnitude of the
    exact (float64) sum of the workers' ``rows``: the rounding a 16-bit all-reduce costs.

    Parameters
    ----------
    total : numpy.ndarray
        ``(n,)`` the sum an all-reduce returned (any float dtype), e.g. a row of
        :func:`course_lib.parallel.train.collectives.run_shm_collectives`' ``"all_gather"``.
    rows : numpy.ndarray
        ``(N, n)`` the workers' float gradients before rounding.

    Examples
    --------
    >>> rows = np.array([[1.0, 2049.0], [0.0, 0.0]])
    >>> sum_error(rows.sum(axis=0).astype(np.float16), rows)   # 2049 is 2048 in float16: 1/2049
    0.000488...
    """
    check_type(rows, "rows", np.ndarray, "a numpy array of shape (N, n)")
    check_type(total, "total", np.ndarray, "a numpy array of shape (n,)")
    if rows.ndim != 2 or rows.shape[0] < 1 or rows.shape[1] < 1 or rows.dtype.kind != "f":
        raise ValueError(f"rows must be a float array of shape (N, n), N, n >= 1, got {rows.dtype} {rows.shape}")
    if total.shape != rows.shape[1:] or total.dtype.kind != "f":
        raise ValueError(f"total must be a float array of shape ({rows.shape[1]},), got {total.dtype} {total.shape}")
    return _sum_error(total, rows)


def _sum_error(total: np.ndarray, rows: np.ndarray) -> float:
    """:func:`sum_error` without the checks (its callers have checked)."""
    exact = rows.astype(np.float64).sum(axis=0)
    scale = float(np.abs(exact).max()) or 1.0
    return float(np.abs(total.astype(np.float64) - exact).max() / scale)


def gradient_underflow(model, params: np.ndarray, x: np.ndarray, y: np.ndarray, *,
                       scale: float = 1.0) -> dict[str, float]:
    """Share of the backward pass's gradients that float16 flushes to zero, with loss scale ``scale``.

    The running example's backward pass (:meth:`course_lib.models.MLP.layer_backward`) with
    the mean loss multiplied by ``scale``, and every gradient it hands back - the logits'
    gradient and each layer's input gradient, the values a float16 backward stores - rounded
    to float16 before the next layer uses it; the parameter gradients are rounded at the end.

    Parameters
    ----------
    model : MLP
    params : numpy.ndarray
        The flat parameters (float32).
    x, y : numpy.ndarray
        A batch and its labels.
    scale : float
        The loss scale σ > 0 (1: no scaling).

    Returns
    -------
    dict
        ``activation_grads``: share of the non-zero activation-gradient entries that became
        0 in float16; ``param_grads``: the same for the parameter gradients (after dividing
        by ``scale`` in float32 they are what the update sees); ``overflow``: entries that
        became infinite (a scale too large); ``max_rel_error``: the largest error of the
        unscaled parameter gradients relative to the largest float32 gradient (inf after
        an overflow).

    Examples
    --------
    >>> model = MLP((4, 3, 2)); p = model.init_params(0)
    >>> x = np.ones((2, 4), np.float32); y = np.array([0, 1])
    >>> gradient_underflow(model, p, x, y)["activation_grads"]
    0.0
    """
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    model.check_flat(params, "params")
    scale = check_positive(scale, "scale")
    logits, acts = model.forward(params, x)
    _, g = softmax_cross_entropy(logits, y, reduction="mean")
    exact, grad = model.backward(params, acts, y)[1], np.zeros_like(params)
    nonzero = flushed = 0
    with np.errstate(over="ignore", invalid="ignore"):  # a scale too large: counted as overflow
        g = g * np.float32(scale)
        for i in reversed(range(model.n_layers)):
            half = g.astype(np.float16)
            nonzero += np.count_nonzero(g)
            flushed += np.count_nonzero((half == 0) & (g != 0))
            g = model.layer_backward(params, i, acts[i], acts[i + 1], half.astype(np.float32), grad,
                                     need_input_grad=i > 0)
        half = grad.astype(np.float16)
        unscaled = half.astype(np.float32) / np.float32(scale)
        error = np.abs(unscaled - exact).max() / (np.abs(exact).max() or 1.0)
    return {
        "activation_grads": float(flushed / max(nonzero, 1)),
        "param_grads": float(np.count_nonzero((half == 0) & (exact != 0)) / max(np.count_nonzero(exact), 1)),
        "overflow": int(np.count_nonzero(~np.isfinite(half))),
        "max_rel_error": float(error),
    }


def largest_loss_scale(max_grad: float) -> float:
    """The largest power-of-two loss scale σ with ``max_grad * σ`` still finite in float16.

    Dynamic loss scaling (Micikevicius et al. 2018, Section 3.2) looks for this scale at run
    time: it halves σ after a step whose gradients overflowed and doubles it after
    a run of steps without overflow. Powers of two change only the exponent, so scaling and
    unscaling are exact.

    Parameters
    ----------
    max_grad : float
        The largest gradient magnitude of the backward pass, > 0.

    Examples
    --------
    >>> largest_loss_scale(3.2), largest_loss_scale(1.0)   # 3.2 x 2**14 = 52,429 <= 65,504
    (16384.0, 32768.0)
    """
    max_grad = check_positive(max_grad, "max_grad")
    s = 2.0 ** np.floor(np.log2(FLOAT16_MAX / max_grad))
    while max_grad * s > FLOAT16_MAX:  # guard the rounding of log2
        s /= 2.0
    return float(s)
