r"""Optimisers for the running example: SGD with momentum, LARS and LAMB (numpy).

Every optimiser is an object with ``step(params, grad)`` that updates the flat
parameter buffer **in place** - the protocol every trainer uses
(``train_serial(..., optimizer=opt)``). The learning rate may be a number or a function of the
step (a callable ``lr(step)``, e.g. :class:`WarmupLR`); ``step`` counts the updates already
made, from 0.

Layer-wise optimisers (LARS, LAMB) compute their norms **per parameter tensor**: each
weight matrix ``W_i`` and each bias vector ``b_i`` of :attr:`course_lib.models.MLP.slots`
is one "layer". As in common practice (the LAMB authors' BERT code, the usual LARS
implementations for ResNet), **biases are excluded** by default: they get trust ratio 1
and no weight decay (``exclude_bias=True``); a zero norm also gives trust ratio 1.

Large-batch training (大批量训练) in one paragraph: a batch :math:`k` times larger
gives :math:`k` times fewer steps per epoch; the **linear scaling rule** (线性缩放规则,
Goyal et al. 2017, arXiv:1706.02677) multiplies the learning rate by :math:`k` to
compensate, with a **warm-up** (预热) that ramps the rate up over the first steps
because a large rate diverges while the weights are still random. **LARS** (You,
Gitman, Ginsburg 2017, arXiv:1708.03888) scales each layer's step by a **trust
ratio** (信任比) :math:`\|w\| / \|g\|`, so that no layer moves by more than a set
fraction of its weights; **LAMB** (You et al., ICLR 2020, arXiv:1904.00962) applies
the same layer-wise idea to Adam's update and is what trained BERT with batches of
32k-64k sequences, where LARS did poorly.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import check_int, check_positive, check_real

__all__ = [
    "LAMB",
    "LARS",
    "SGD",
    "WarmupLR",
    "linear_scaling_rule",
    "sqrt_scaling_rule",
]


# ------------------------------------------------------------------ learning rates




def linear_scaling_rule(base_lr: float, base_batch: int, batch: int) -> float:
    r"""Learning rate for batch size ``batch`` by the linear scaling rule.

    :math:`\gamma = \gamma_0 \cdot B / B_0` (Goyal et al., "Accurate, Large Minibatch SGD:
    Training ImageNet in 1 Hour", 2017, arXiv:1706.02677). Motivation: :math:`k` small
    SGD steps of rate :math:`\gamma_0` move the weights by about
    :math:`\gamma_0 \sum_j g_j`; one step on the :math:`k`-times larger batch with
    gradient :math:`\frac1k \sum_j g_j` moves them as far only if its rate is
    :math:`k \gamma_0` - valid while the gradients hardly change over those :math:`k`
    steps, which fails early in training (hence warm-up) and for very large :math:`k`.

    Examples
    --------
    >>> linear_scaling_rule(0.1, 256, 8192)
    3.2
    """
    base_lr = check_positive(base_lr, "base_lr")
    base_batch = check_int(base_batch, "base_batch", 1)
    batch = check_int(batch, "batch", 1)
    return base_lr * batch / base_batch


def sqrt_scaling_rule(base_lr: float, base_batch: int, batch: int) -> float:
    r"""Learning rate by the square-root rule :math:`\gamma = \gamma_0 \sqrt{B / B_0}`.

    Keeps the variance of the update constant (Krizhevsky 2014, arXiv:1404.5997); the
    LAMB paper uses it for LAMB's learning rate.

    Examples
    --------
    >>> sqrt_scaling_rule(0.001, 512, 32768)
    0.008
    """
    base_lr = check_positive(base_lr, "base_lr")
    base_batch = check_int(base_batch, "base_batch", 1)
    batch = check_int(batch, "batch", 1)
    return base_lr * math.sqrt(batch / base_batch)


@dataclass(frozen=True)
class WarmupLR:
    r"""Linear warm-up to ``peak_lr``, then constant or a polynomial decay.

    For update number ``step`` = 0, 1, ... (the course's learning rate is :math:`\gamma`):

    * warm-up, ``step < warmup_steps``:
      ``initial_lr + (peak_lr - initial_lr) * (step + 1) / warmup_steps``
      (so the last warm-up step already uses the peak);
    * afterwards, without ``total_steps``: ``peak_lr``;
    * with ``total_steps``: ``peak_lr * (1 - (step - warmup_steps) / (total_steps - warmup_steps)) ** power``
      before ``total_steps``, and 0 from then on.

    ``initial_lr=0`` is the BERT/LAMB style; Goyal et al. start from the small-batch
    rate (``initial_lr = base_lr``).

    Parameters
    ----------
    peak_lr : float
        Rate reached at the end of the warm-up, > 0.
    warmup_steps : int
        Number of warm-up updates, >= 0 (0: no warm-up).
    total_steps : int, optional
        Length of the whole run for the decay, > ``warmup_steps``.
    power : float
        Decay exponent (1 linear, 2 as in LARS's "poly(2)"), > 0.
    initial_lr : float
        Rate the warm-up starts from, in [0, ``peak_lr``].

    Examples
    --------
    >>> s = WarmupLR(1.0, warmup_steps=4)
    >>> [s(t) for t in range(6)]
    [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    >>> s = WarmupLR(1.0, warmup_steps=2, total_steps=6)
    >>> [s(t) for t in range(7)]
    [0.5, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0]
    """

    peak_lr: float
    warmup_steps: int
    total_steps: int | None = None
    power: float = 1.0
    initial_lr: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "peak_lr", check_positive(self.peak_lr, "peak_lr"))
        object.__setattr__(self, "warmup_steps", check_int(self.warmup_steps, "warmup_steps", 0))
        if self.total_steps is not None:
            object.__setattr__(
                self,
                "total_steps",
                check_int(self.total_steps, "total_steps", self.warmup_steps + 1),
            )
        object.__setattr__(self, "power", check_positive(self.power, "power"))
        init = check_positive(self.initial_lr, "initial_lr", allow_zero=True)
        if init > self.peak_lr:
            raise ValueError(f"initial_lr must be in [0, peak_lr={self.peak_lr:g}], got {init:g}")
        object.__setattr__(self, "initial_lr", init)

    def __call__(self, step: int) -> float:
        step = check_int(step, "step", 0)
        if step < self.warmup_steps:
            frac = (step + 1) / self.warmup_steps
            return self.initial_lr + (self.peak_lr - self.initial_lr) * frac
        if self.total_steps is None:
            return self.peak_lr
        if step >= self.total_steps:
            return 0.0
        left = 1.0 - (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return self.peak_lr * left**self.power


# ------------------------------------------------------------------ optimisers
def _check_lr(lr: Any) -> float | Callable[[int], float]:
    if callable(lr):
        return lr
    return check_positive(lr, "lr")


def _norm(x: np.ndarray) -> float:
    """Euclidean norm accumulated in float64."""
    flat = x.reshape(-1).astype(np.float64, copy=False)
    return math.sqrt(float(np.dot(flat, flat)))


class _Optimizer:
    """Shared parts: learning-rate lookup, step counter, argument checks."""

    elementwise = False
    """Whether each number's update depends on that number alone (then ZeRO can shard the
    state by arbitrary chunks of the flat buffer; LARS and LAMB need whole layers)."""

    def __init__(self, lr, weight_decay: float):
        self.lr = _check_lr(lr)
        self.weight_decay = check_positive(weight_decay, "weight_decay", allow_zero=True)
        self.t = 0
        """Updates made so far."""
        self._size: int | None = None

    def fresh(self):
        """A copy with the same settings and no state: no updates made, no buffers.

        What a trainer keeps of an optimizer passed to it (a template: each run and each
        worker starts from this, never from the state of an earlier run).

        Examples
        --------
        >>> opt = SGD(0.1, momentum=0.9); opt.step(np.ones(3), np.ones(3))
        >>> new = opt.fresh()
        >>> new.t, new._velocity, new.momentum, opt.t
        (0, None, 0.9, 1)
        """
        new = copy.copy(self)
        new.t, new._size = 0, None
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray):
                setattr(new, name, None)
        if hasattr(new, "last_trust_ratios"):
            new.last_trust_ratios = {}
        return new

    def current_lr(self) -> float:
        """Learning rate of the next update."""
        if callable(self.lr):
            value = self.lr(self.t)
            return check_positive(value, f"lr({self.t})", allow_zero=True)
        return self.lr

    def _check(self, params: np.ndarray, grad: np.ndarray) -> None:
        for name, arr in (("params", params), ("grad", grad)):
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"{name} must be a numpy array, got {type(arr).__name__}")
            if arr.ndim != 1 or arr.dtype not in (np.float32, np.float64):
                raise ValueError(f"{name} must be a flat float32/float64 array, got {arr.dtype} {arr.shape}")
        if grad.shape != params.shape:
            raise ValueError(f"grad must have the shape of params {params.shape}, got {grad.shape}")
        if not params.flags.writeable:
            raise ValueError("params must be writeable (the update is in place)")
        if self._size is None:
            self._size = params.size
        elif params.size != self._size:
            raise ValueError(
                f"params has {params.size} elements but this optimiser was used with {self._size}; "
                "make a new optimiser for a new model"
            )

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        """Update ``params`` in place from ``grad`` (one optimisation step)."""
        self._check(params, grad)
        self._update(params, grad, self.current_lr())
        self.t += 1

    def _update(self, params, grad, lr):  # pragma: no cover - abstract
        raise NotImplementedError


class SGD(_Optimizer):
    r"""Stochastic gradient descent with momentum (动量) and weight decay.

    PyTorch's convention: with :math:`d = g + \lambda w`,

    .. math:: v \leftarrow \mu v + d, \qquad w \leftarrow w - \gamma\, v

    (Nesterov: :math:`w \leftarrow w - \gamma (d + \mu v)`). With ``momentum=0`` and no
    weight decay this is exactly :func:`course_lib.models.sgd_step`.

    Parameters
    ----------
    lr : float or callable
        Learning rate :math:`\gamma` or a function ``lr(step)`` (e.g. :class:`WarmupLR`).
    momentum : float
        :math:`\mu \in [0, 1)`.
    weight_decay : float
        :math:`\lambda \ge 0` (L2 penalty added to the gradient).
    nesterov : bool
        Nesterov momentum.

    Examples
    --------
    >>> opt = SGD(0.1, momentum=0.9)
    >>> w = np.array([1.0, 2.0]); g = np.array([1.0, -1.0])
    >>> opt.step(w, g); w.tolist()
    [0.9, 2.1]
    >>> opt.step(w, g); w.tolist()          # v = 0.9 * g + g = 1.9 g
    [0.71, 2.29]
    """

    elementwise = True

    def __init__(self, lr, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(lr, weight_decay)
        self.momentum = check_real(momentum, "momentum", 0.0, 1.0, high_open=True)
        if not isinstance(nesterov, (bool, np.bool_)):
            raise TypeError(f"nesterov must be True or False, got {nesterov!r}")
        if nesterov and self.momentum == 0:
            raise ValueError("nesterov=True needs momentum > 0")
        self.nesterov = bool(nesterov)
        self._velocity: np.ndarray | None = None

    def _update(self, params, grad, lr):
        d = grad if self.weight_decay == 0 else grad + self.weight_decay * params
        if self.momentum:
            if self._velocity is None:
                self._velocity = np.zeros_like(params)
            v = self._velocity
            v *= self.momentum
            v += d
            d = d + self.momentum * v if self.nesterov else v
        params -= np.asarray(lr, dtype=params.dtype) * d


class _LayerWise(_Optimizer):
    """Optimisers whose step is scaled per parameter tensor of an MLP."""

    def __init__(self, model, lr, weight_decay: float, exclude_bias: bool):
        super().__init__(lr, weight_decay)
        slots = getattr(model, "slots", None)
        n_params = getattr(model, "n_params", None)
        if slots is None or n_params is None:
            raise TypeError(
                f"model must describe its parameter tensors (.slots, .n_params) like "
                f"course_lib.models.MLP, got {type(model).__name__}"
            )
        if not isinstance(exclude_bias, (bool, np.bool_)):
            raise TypeError(f"exclude_bias must be True or False, got {exclude_bias!r}")
        self.slots = tuple(slots)
        self.n_params = int(n_params)
        self.exclude_bias = bool(exclude_bias)
        self.last_trust_ratios: dict[str, float] = {}
        """Trust ratio of each parameter tensor in the last step (for inspection)."""

    def _check(self, params, grad):
        super()._check(params, grad)
        if params.size != self.n_params:
            raise ValueError(f"params must have {self.n_params} elements (the model's), got {params.size}")

    def _excluded(self, slot) -> bool:
        return self.exclude_bias and len(slot.shape) == 1

    def _tensors(self, *flats: np.ndarray):
        for s in self.slots:
            yield s, [f[s.offset : s.offset + s.size] for f in flats]


class LARS(_LayerWise):
    r"""Layer-wise Adaptive Rate Scaling: SGD with momentum and a per-layer trust ratio.

    You, Gitman, Ginsburg, "Large Batch Training of Convolutional Networks", 2017,
    arXiv:1708.03888, Algorithm 1. For every parameter tensor :math:`w` with gradient
    :math:`g`:

    .. math::
        \rho = \tau \frac{\|w\|}{\|g\| + \lambda \|w\|}, \qquad
        v \leftarrow \mu v + \gamma\, \rho\, (g + \lambda w), \qquad
        w \leftarrow w - v

    with global rate :math:`\gamma`, trust coefficient :math:`\tau` (the paper's
    :math:`\eta = 0.001`), weight decay :math:`\lambda` and momentum :math:`\mu` (the paper
    writes :math:`\beta` and :math:`m`). The trust ratio :math:`\rho` (the paper's local
    rate :math:`\lambda`) makes the update of each layer about :math:`\gamma \tau` times
    its weight norm, whatever the size of its gradient. Excluded tensors (biases, by
    default) and tensors with a zero weight or gradient norm use :math:`\rho = 1`
    and (excluded ones) no weight decay.

    Parameters
    ----------
    model : course_lib.models.MLP
        Gives the parameter tensors (``model.slots``).
    lr : float or callable
        Global rate :math:`\gamma` or a function ``lr(step)`` (e.g. :class:`WarmupLR`).
    momentum : float
        :math:`\mu \in [0, 1)`.
    weight_decay : float
        :math:`\lambda \ge 0`.
    trust_coefficient : float
        :math:`\tau > 0`.
    exclude_bias : bool
        Biases get trust ratio 1 and no weight decay.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> model = MLP((2, 1))                       # W0 (2, 1), b0 (1,)
    >>> w = np.array([3.0, 4.0, 0.5]); g = np.array([0.6, 0.8, 1.0])
    >>> opt = LARS(model, lr=1.0, momentum=0.0, trust_coefficient=0.1)
    >>> opt.step(w, g)                            # lambda = 0.1 * 5 / 1 = 0.5
    >>> w.round(6).tolist(), opt.last_trust_ratios
    ([2.7, 3.6, -0.5], {'W0': 0.5, 'b0': 1.0})
    """

    def __init__(
        self,
        model,
        lr,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        trust_coefficient: float = 0.001,
        exclude_bias: bool = True,
    ):
        super().__init__(model, lr, weight_decay, exclude_bias)
        self.momentum = check_real(momentum, "momentum", 0.0, 1.0, high_open=True)
        self.trust_coefficient = check_positive(trust_coefficient, "trust_coefficient")
        self._velocity: np.ndarray | None = None

    def _update(self, params, grad, lr):
        if self._velocity is None:
            self._velocity = np.zeros_like(params)
        ratios = {}
        for slot, (w, g, v) in self._tensors(params, grad, self._velocity):
            if self._excluded(slot):
                local, d = 1.0, g
            else:
                wd = self.weight_decay
                w_norm, g_norm = _norm(w), _norm(g)
                denom = g_norm + wd * w_norm
                local = self.trust_coefficient * w_norm / denom if w_norm > 0 and denom > 0 else 1.0
                d = g if wd == 0 else g + wd * w
            ratios[slot.name] = local
            v *= self.momentum
            v += np.asarray(lr * local, dtype=params.dtype) * d
            w -= v
        self.last_trust_ratios = ratios


class LAMB(_LayerWise):
    r"""Layer-wise Adaptive Moments for Batch training: Adam with a per-layer trust ratio.

    You, Li, Reddi, Hseu, Kumar, Bhojanapalli, Song, Demmel, Keutzer, Hsieh, "Large
    Batch Optimization for Deep Learning: Training BERT in 76 minutes", ICLR 2020,
    arXiv:1904.00962, Algorithm 2 (with :math:`\phi` the identity). In the course's notation (the paper
    writes :math:`m, v` for the moments, :math:`\beta_1, \beta_2` for their coefficients and
    :math:`\eta` for the rate), at step :math:`n_{\text{step}} = 1, 2, \dots`:

    .. math::
        v_1 \leftarrow \mu_1 v_1 + (1 - \mu_1) g, \qquad
        v_2 \leftarrow \mu_2 v_2 + (1 - \mu_2) g^2,

        \hat v_1 = \frac{v_1}{1 - \mu_1^{n_{\text{step}}}}, \quad
        \hat v_2 = \frac{v_2}{1 - \mu_2^{n_{\text{step}}}}, \quad
        u = \frac{\hat v_1}{\sqrt{\hat v_2} + \epsilon} + \lambda w,

        w \leftarrow w - \gamma \, \frac{\|w\|}{\|u\|} \, u

    per parameter tensor: every layer moves by :math:`\gamma \|w\|` - a fixed fraction of
    its own size - in the direction Adam chooses. Excluded tensors (biases, by default)
    and zero norms use trust ratio 1; excluded tensors get no weight decay.

    Parameters
    ----------
    model : course_lib.models.MLP
        Gives the parameter tensors (``model.slots``).
    lr : float or callable
        :math:`\gamma` or a function ``lr(step)`` (e.g. :class:`WarmupLR`).
    betas : (float, float)
        :math:`\mu_1, \mu_2 \in [0, 1)` (the paper's :math:`\beta_1, \beta_2`).
    eps : float
        :math:`\epsilon > 0`.
    weight_decay : float
        Decoupled weight decay :math:`\lambda \ge 0` (0.01 in the paper's BERT runs).
    exclude_bias : bool
        Biases get trust ratio 1 and no weight decay.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> model = MLP((2, 1))
    >>> w = np.array([3.0, 4.0, 0.5]); g = np.array([0.6, -0.8, 1.0])
    >>> opt = LAMB(model, lr=0.1, weight_decay=0.0, eps=0.0)
    >>> opt.step(w, g)   # first step: u = sign(g); ||w|| = 5, ||u|| = sqrt(2)
    >>> w.round(4).tolist()
    [2.6464, 4.3536, 0.4]
    """

    def __init__(
        self,
        model,
        lr,
        betas: Sequence[float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        exclude_bias: bool = True,
    ):
        super().__init__(model, lr, weight_decay, exclude_bias)
        if isinstance(betas, (str, bytes)) or not isinstance(betas, Sequence) or len(betas) != 2:
            raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        self.betas = (
            check_real(betas[0], "betas[0]", 0.0, 1.0, high_open=True),
            check_real(betas[1], "betas[1]", 0.0, 1.0, high_open=True),
        )
        self.eps = check_positive(eps, "eps", allow_zero=True)
        self._m: np.ndarray | None = None
        self._v: np.ndarray | None = None

    def _update(self, params, grad, lr):
        if self._m is None:
            self._m, self._v = np.zeros_like(params), np.zeros_like(params)
        b1, b2 = self.betas
        t = self.t + 1
        self._m *= b1
        self._m += (1 - b1) * grad
        self._v *= b2
        self._v += (1 - b2) * grad * grad
        c1, c2 = 1 - b1**t, 1 - b2**t
        ratios = {}
        for slot, (w, m, v) in self._tensors(params, self._m, self._v):
            u = (m / c1) / (np.sqrt(v / c2) + self.eps)
            excluded = self._excluded(slot)
            if not excluded and self.weight_decay:
                u += self.weight_decay * w
            if excluded:
                ratio = 1.0
            else:
                w_norm, u_norm = _norm(w), _norm(u)
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            ratios[slot.name] = ratio
            w -= np.asarray(lr * ratio, dtype=params.dtype) * u.astype(params.dtype, copy=False)
        self.last_trust_ratios = ratios
