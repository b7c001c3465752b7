r"""A mixture of experts (混合专家) on the running example: a learned gate sends each digit to
:math:`k_{\text{top}}` of :math:`E` small MLPs, each expert takes at most its capacity.

The model (:class:`MoE`, float64, one flat parameter buffer like every course model):

.. math::

    u &= \operatorname{relu}(x W_{\text{in}} + b_{\text{in}})        && \text{a dense layer: the token } (h \text{ values})\\
    p &= \operatorname{softmax}(u\, W_g)                               && \text{the gate: } E \text{ probabilities}\\
    z &= u + \sum_{e \in \text{top-}k_{\text{top}}(p),\ \text{kept}} g_e\, \operatorname{MLP}_e(u)  && \text{the chosen experts, weighted}\\
    \text{logits} &= z\, W_{\text{out}} + b_{\text{out}}

Each digit is one token. Routing (Switch Transformer, Fedus et al. 2021; GShard, Lepikhin
et al. 2020): ``top_k=1`` sends a token to its most probable expert with weight
:math:`g_e = p_e`; ``top_k=2`` to its two most probable, with :math:`g_e = p_e / (p_{e_1} +
p_{e_2})`. An expert takes at most its **capacity**
:math:`C = \lceil \phi\, k_{\text{top}} B L / E \rceil` tokens of a batch of :math:`B L` (here :math:`L = 1`: a digit is one token)
(:math:`\phi`: the capacity factor): every token's first choice is served before any
second choice, in batch order; an assignment beyond :math:`C` is **dropped** and the token
goes on through the residual alone. The **load-balancing loss**
:math:`\mathcal{L}_{\text{aux}} = E \sum_e f_e \pi_e` (Switch Transformer, eq. 4; GShard's
:math:`l_{\text{aux}}` up to a constant), with :math:`f_e` the fraction of tokens whose first
choice is :math:`e` and :math:`\pi_e` the mean gate probability of :math:`e`, is 1 when the load is even and
grows as it concentrates; the model's loss is the cross-entropy + ``aux_weight`` times it.

The pieces (:func:`route`, :func:`capacity`, :func:`kept_assignments`, :func:`expert_forward`,
...) are what an expert-parallel worker runs on its share
(:mod:`course_lib.parallel.experts`); :func:`dropped` and :func:`capacity_factor_for`
answer, from a load histogram, how many assignments a capacity factor drops and which one keeps drops under a share;
:func:`expert_layout_case` prices a published expert layout (``data/parallel_layouts.csv``).

Examples
--------
>>> model = MoE(experts=4, top_k=2)
>>> p = model.init_params(0); x = np.random.default_rng(0).random((16, 64))
>>> loss, g = model.loss_and_grad(p, x, np.arange(16) % 10)
>>> g.shape == (model.n_params,), model.n_dense < model.n_params
(True, True)
>>> capacity(16, experts=4, top_k=2, capacity_factor=1.0)      # 2 x 16 / 4 assignments each
8
>>> dropped([3, 9, 2, 2], 8).tolist()                           # expert 1 gets 9: one dropped
[0, 1, 0, 0]
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ._validate import as_real, check_float_dtype, check_int, check_real
from .models import MLP, check_labels, layout_slots, softmax_cross_entropy

# The pieces (route, kept_assignments, expert_forward, ... and their backward passes) are
# importable but not listed: the model and the expert-parallel workers call them with arrays
# they have checked.
__all__ = [
    "ExpertLayoutCase",
    "MoE",
    "capacity",
    "capacity_factor_for",
    "dropped",
    "expert_layout_case",
]

EXPERT_SLOTS = ("W1", "b1", "W2", "b2")
"""The parameters of one expert (prefix ``e<i>.``), after every dense parameter in the buffer."""


def capacity(tokens: int, experts: int, top_k: int, capacity_factor: float) -> int:
    r"""Assignments an expert takes per batch: :math:`\lceil \phi\, k_{\text{top}} B L / E \rceil`
    for a batch of ``tokens`` :math:`= B L`, at most all of them (an infinite factor: no token is ever dropped)."""
    tokens, experts = check_int(tokens, "tokens", 0), check_int(experts, "experts", 1)
    top_k = check_int(top_k, "top_k", 1, experts)
    phi = check_real(capacity_factor, "capacity_factor", 0.0, np.inf, low_open=True, high_open=False, allow_inf=True)
    # 1e-9 of an assignment forgiven: a factor computed as C E / (k_top T) gives C, not C + 1
    return tokens if math.isinf(phi) else min(tokens, math.ceil(phi * top_k * tokens / experts - 1e-9))


def dropped(load, cap: int) -> np.ndarray:
    """Assignments each expert drops when ``load[e]`` are routed to it and it takes ``cap``."""
    load = np.asarray(as_real(load, "load"))
    if load.ndim != 1 or np.any(load < 0):
        raise ValueError(f"load must be a 1-D array of counts >= 0, got {load!r}")
    cap = check_int(cap, "cap", 0)
    return np.maximum(load - cap, 0).astype(np.int64)


def capacity_factor_for(load, top_k: int = 1, share: float = 0.01) -> float:
    r"""The smallest capacity factor :math:`\phi` that drops at most ``share`` of the assignments
    of the load histogram ``load`` (assignments routed to each expert in one batch of
    :math:`B L = \sum_e \text{load}_e / k_{\text{top}}` tokens).

    Examples
    --------
    >>> capacity_factor_for([10, 30, 20, 20], share=0.0)   # the busiest expert: 30 of an even 20
    1.5
    """
    load = np.asarray(as_real(load, "load"))
    if load.ndim != 1 or load.size < 1 or np.any(load < 0) or np.any(load != np.round(load)):
        raise ValueError(f"load must be a 1-D array of whole counts >= 0, got {load!r}")
    top_k = check_int(top_k, "top_k", 1, load.size)
    share = check_real(share, "share", 0.0, 1.0)
    total, experts = float(load.sum()), load.size
    tokens = total / top_k
    if total == 0:
        return 0.0
    for cap in range(int(load.max()) + 1):  # the smallest capacity that drops few enough
        if dropped(load, cap).sum() <= share * total:
            break
    return cap * experts / (top_k * tokens)  # ceil(phi k_top B L / E) = cap exactly at this phi


def route(probs: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each token's ``top_k`` most probable experts (first choice first) and their weights:
    ``p_e`` for one expert, ``p_e / (sum of the chosen p)`` for more. Shapes ``(T, top_k)``."""
    choice = np.argsort(-probs, axis=1, kind="stable")[:, :top_k]
    chosen = np.take_along_axis(probs, choice, axis=1)
    return choice, chosen if top_k == 1 else chosen / chosen.sum(axis=1, keepdims=True)


def route_backward(probs: np.ndarray, choice: np.ndarray, dweight: np.ndarray) -> np.ndarray:
    """The gradient of the gate's probabilities from that of the routing weights (``(T, E)``)."""
    dprobs = np.zeros_like(probs)
    if choice.shape[1] == 1:
        np.put_along_axis(dprobs, choice, dweight, axis=1)
        return dprobs
    chosen = np.take_along_axis(probs, choice, axis=1)
    total = chosen.sum(axis=1, keepdims=True)
    weight = chosen / total
    np.put_along_axis(dprobs, choice, (dweight - (dweight * weight).sum(axis=1, keepdims=True)) / total, axis=1)
    return dprobs


def kept_assignments(choice: np.ndarray, before: np.ndarray, cap: int) -> np.ndarray:
    """Which assignments an expert keeps: ``(T, top_k)`` booleans. ``before[c, e]``: the
    assignments to expert ``e`` served before this batch's choice-``c`` ones (the first
    choices of every token, then, for a worker, those of the workers before it). Each
    expert serves in that order and keeps the first ``cap``."""
    kept = np.zeros(choice.shape, dtype=bool)
    for c in range(choice.shape[1]):
        onehot = np.eye(before.shape[1], dtype=np.int64)[choice[:, c]]  # (T, E)
        place = before[c][choice[:, c]] + np.take_along_axis(np.cumsum(onehot, axis=0), choice[:, [c]], axis=1)[:, 0]
        kept[:, c] = place <= cap  # 1-based place in its expert's queue
    return kept


def route_counts(choice: np.ndarray, experts: int) -> np.ndarray:
    """``(top_k, E)``: assignments of each choice rank to each expert."""
    return np.stack([np.bincount(choice[:, c], minlength=experts) for c in range(choice.shape[1])])


def served_before(counts: np.ndarray) -> np.ndarray:
    """``before`` of :func:`kept_assignments` for one batch: choice ``c`` waits behind every
    assignment of the choices before it (``counts`` from :func:`route_counts`)."""
    return np.cumsum(counts, axis=0) - counts


def expert_forward(w: dict, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One expert, an MLP ``h -> f -> h`` on the tokens ``rows``: its output and hidden units."""
    hidden = np.maximum(rows @ w["W1"] + w["b1"], 0)
    return hidden @ w["W2"] + w["b2"], hidden


def expert_backward(w: dict, rows: np.ndarray, hidden: np.ndarray, dout: np.ndarray, grads: dict) -> np.ndarray:
    """ADD the expert's weight gradients into ``grads``; return the gradient of its input ``rows``."""
    grads["W2"] += hidden.T @ dout
    grads["b2"] += dout.sum(axis=0)
    dh = (dout @ w["W2"].T) * (hidden > 0)
    grads["W1"] += rows.T @ dh
    grads["b1"] += dh.sum(axis=0)
    return dh @ w["W1"].T


def expert_weights(w: dict, e: int) -> dict:
    """The weights of expert ``e`` from a dict of every parameter (names ``e<i>.<slot>``), prefix removed."""
    prefix = f"e{e}."
    return {name[len(prefix):]: a for name, a in w.items() if name.startswith(prefix)}


def gate_backward(probs: np.ndarray, dprobs: np.ndarray) -> np.ndarray:
    """The gradient of the gate's logits from that of its softmax probabilities."""
    return probs * (dprobs - (dprobs * probs).sum(axis=1, keepdims=True))


@dataclass(frozen=True)
class MoE:
    """The running example with a mixture-of-experts block (pure layout and maths).

    Parameters
    ----------
    inputs, hidden, classes : int
        Pixels of a digit (64), the token's width :math:`h` (32), classes (10).
    experts : int
        :math:`E`, experts of the block (4).
    expert_hidden : int
        Hidden units of each expert's MLP (32).
    top_k : int
        :math:`k_{\\text{top}}`: experts per token, 1 (Switch) or 2 (GShard), at most ``experts``.
    capacity_factor : float
        :math:`\\phi` > 0 (``inf``: never drop).
    aux_weight : float
        Weight of the load-balancing loss (0.01, Switch Transformer's :math:`\\alpha`).
    dtype : numpy dtype
        float64 by default.

    Examples
    --------
    >>> m = MoE(inputs=64, hidden=8, experts=2, expert_hidden=4, classes=3)
    >>> m.n_dense, m.n_params        # in (64 x 8 + 8), gate (8 x 2), out (8 x 3 + 3); experts 2 x (8x4+4+4x8+8)
    (563, 715)
    """

    inputs: int = 64
    hidden: int = 32
    experts: int = 4
    expert_hidden: int = 32
    top_k: int = 1
    capacity_factor: float = 1.25
    aux_weight: float = 0.01
    classes: int = 10
    dtype: np.dtype = field(default=np.dtype(np.float64))

    def __post_init__(self):
        for name in ("inputs", "hidden", "experts", "expert_hidden", "classes"):
            object.__setattr__(self, name, check_int(getattr(self, name), name, 1, 2**20))
        if self.classes < 2:
            raise ValueError(f"classes must be an integer in [2, {2**20}], got {self.classes}")
        object.__setattr__(self, "top_k", check_int(self.top_k, "top_k", 1, min(2, self.experts)))
        object.__setattr__(self, "capacity_factor", check_real(self.capacity_factor, "capacity_factor", 0.0, np.inf,
                                                               low_open=True, high_open=False, allow_inf=True))
        object.__setattr__(self, "aux_weight", check_real(self.aux_weight, "aux_weight", 0.0, 1e6))
        object.__setattr__(self, "dtype", check_float_dtype(self.dtype))

    @functools.cached_property
    def slots(self):
        """Name, shape and offset of every parameter: the dense ones first, then each expert's."""
        h, f = self.hidden, self.expert_hidden
        expert = {"W1": (h, f), "b1": (f,), "W2": (f, h), "b2": (h,)}
        shapes = [("in.W", (self.inputs, h)), ("in.b", (h,)), ("gate.W", (h, self.experts)),
                  ("out.W", (h, self.classes)), ("out.b", (self.classes,))]
        shapes += [(f"e{e}.{n}", expert[n]) for e in range(self.experts) for n in EXPERT_SLOTS]
        return layout_slots(shapes)

    n_params = MLP.n_params  # the same flat buffer of slots as every course model
    check_flat = MLP.check_flat

    @property
    def n_dense(self) -> int:
        """Parameters every worker holds (all but the experts): the head of the flat buffer."""
        return next(s.offset for s in self.slots if s.name.startswith("e0."))

    @property
    def expert_size(self) -> int:
        """Parameters of one expert."""
        return (self.n_params - self.n_dense) // self.experts

    def views(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """Named views (no copies) into a flat parameter or gradient buffer."""
        self.check_flat(flat, "flat")
        return {s.name: flat[s.offset : s.offset + s.size].reshape(s.shape) for s in self.slots}

    def init_params(self, seed: int = 0) -> np.ndarray:
        """Normal weights with std ``sqrt(2 / fan_in)`` (ReLU follows) or ``1 / sqrt(fan_in)``
        (the gate, the experts' second layer, the head), biases 0."""
        rng = np.random.default_rng(check_int(seed, "seed", 0))
        flat = np.zeros(self.n_params, dtype=self.dtype)
        for name, w in self.views(flat).items():
            if name.split(".")[-1].startswith("W"):
                relu = name in ("in.W",) or name.endswith(".W1")
                w[...] = math.sqrt((2.0 if relu else 1.0) / w.shape[0]) * rng.standard_normal(w.shape)
        return flat

    def capacity(self, tokens: int) -> int:
        """:func:`capacity` of this model for a batch of ``tokens``."""
        return capacity(tokens, self.experts, self.top_k, self.capacity_factor)

    # ------------------------------------------------------------------ compute
    def forward(self, params: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, dict]:
        """Logits ``(T, classes)`` and the cache :meth:`backward` needs (routing, load, drops)."""
        w, x = self.views(params), self.check_x(x)
        u = np.maximum(x @ w["in.W"] + w["in.b"], 0)
        g = u @ w["gate.W"]
        probs = np.exp(g - g.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        choice, weight = route(probs, self.top_k)
        counts = route_counts(choice, self.experts)
        kept = kept_assignments(choice, served_before(counts), self.capacity(x.shape[0]))
        y, experts = np.zeros_like(u), {}
        for e in range(self.experts):
            t, c = np.nonzero((choice == e) & kept)  # the assignments expert e serves
            out, hidden = expert_forward(expert_weights(w, e), u[t])
            y[t] += weight[t, c, None] * out
            experts[e] = (t, c, out, hidden)
        z = u + y
        return z @ w["out.W"] + w["out.b"], {"x": x, "u": u, "probs": probs, "choice": choice, "weight": weight,
                                             "kept": kept, "counts": counts, "experts": experts, "z": z}

    def aux_loss(self, cache: dict) -> float:
        r""":math:`E \sum_e f_e \pi_e` of a forward's cache (1 when the first choices are even)."""
        f = cache["counts"][0] / cache["x"].shape[0]
        return float(self.experts * (f * cache["probs"].mean(axis=0)).sum())

    def backward(self, params, cache: dict, y, *, reduction: str = "mean", out=None, logits=None):
        """Loss and flat gradient (``out`` zeroed and filled) from :meth:`forward`'s cache."""
        w, tokens = self.views(params), cache["x"].shape[0]
        y = self.check_y(y, tokens)
        grad = np.zeros_like(params) if out is None else out
        self.check_flat(grad, "out")
        grad.fill(0)
        g = self.views(grad)
        loss, dlogits = softmax_cross_entropy(logits, y, reduction)
        scale = tokens if reduction == "sum" else 1
        loss += scale * self.aux_weight * self.aux_loss(cache)
        g["out.W"] += cache["z"].T @ dlogits
        g["out.b"] += dlogits.sum(axis=0)
        dz = dlogits @ w["out.W"].T
        du, dweight = dz.copy(), np.zeros_like(cache["weight"])
        for e, (t, c, out_e, hidden) in cache["experts"].items():
            dweight[t, c] = (dz[t] * out_e).sum(axis=1)
            du[t] += expert_backward(expert_weights(w, e), cache["u"][t], hidden, cache["weight"][t, c, None] * dz[t],
                                     expert_weights(g, e))
        dprobs = route_backward(cache["probs"], cache["choice"], dweight)
        dprobs += self.aux_weight * self.experts * cache["counts"][0] / tokens * (scale / tokens)
        dg = gate_backward(cache["probs"], dprobs)
        g["gate.W"] += cache["u"].T @ dg
        du = (du + dg @ w["gate.W"].T) * (cache["u"] > 0)
        g["in.W"] += cache["x"].T @ du
        g["in.b"] += du.sum(axis=0)
        return loss, grad

    def loss_and_grad(self, params, x, y, *, reduction: str = "mean", out=None):
        """Forward and backward on one batch: ``(loss, flat gradient)``."""
        logits, cache = self.forward(params, x)
        return self.backward(params, cache, y, reduction=reduction, out=out, logits=logits)

    def predict(self, params, x) -> np.ndarray:
        """Predicted class of every digit."""
        return self.forward(params, x)[0].argmax(axis=1)

    def accuracy(self, params, x, y) -> float:
        """Fraction of digits classified correctly."""
        y = self.check_y(y, np.shape(x)[0])
        return float(np.mean(self.predict(params, x) == y))

    def check_x(self, x) -> np.ndarray:
        """``x`` as a ``(T, inputs)`` float array of this model's dtype, else TypeError/ValueError."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.inputs:
            raise ValueError(f"x must have shape (batch, {self.inputs}), got {x.shape}")
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"x must be a float array, got dtype {x.dtype}")
        return x.astype(self.dtype, copy=False)

    def check_y(self, y, batch: int) -> np.ndarray:
        """``y`` as ``batch`` integer labels of this model's classes."""
        return check_labels(y, batch, self.classes)


class ExpertLayoutCase(NamedTuple):
    """A published mixture-of-experts layout priced with the course's formulas."""

    model: str
    experts_per_gpu: int
    """Routed experts of one layer on each expert-parallel rank: E / N_e."""
    expert_params: int
    """Parameters of one expert: a gated (SwiGLU) MLP, three h x f matrices."""
    routed_params: float
    """Every routed expert of every MoE layer."""
    routed_share: float
    """Their share of the published parameters."""
    active_expert_params: float
    """Expert parameters one token uses: (k_top + shared) experts in every MoE layer."""
    dispatch_bytes_per_token: int
    """What one token's dispatch sends per MoE layer: k_top copies of its h values."""
    internode_bytes_per_token: int
    """At most this much of it crosses nodes: one copy per node reached (node-limited routing)."""
    sequence_alltoall_bytes: int
    """The dispatch of the tokens of one sequence (one GPU's share of the all-to-all)."""
    sequence_alltoall_time: float
    """Its time by pairwise exchange at the network bandwidth (seconds, every copy on the network)."""


def expert_layout_case(model: str = "DeepSeek-V3", *, bytes_per_value: int = 2) -> ExpertLayoutCase:
    """The expert layout of ``model`` in ``data/parallel_layouts.csv`` (DeepSeek-V3: 256 routed
    experts and 1 shared per layer, 8 active, 64-way expert parallelism), 16-bit activations.

    Examples
    --------
    >>> case = expert_layout_case()
    >>> case.experts_per_gpu, case.expert_params, case.dispatch_bytes_per_token
    (4, 44040192, 114688)
    """
    from .alpha_beta import NETWORK_LATENCY, collective_time
    from .datasets import load_parallel_layouts

    rows = {r.model: r for r in load_parallel_layouts() if r.routed_experts}
    if model not in rows:
        raise ValueError(f"model must be one of {sorted(rows)}, got {model!r}")
    r = rows[model]
    item = check_int(bytes_per_value, "bytes_per_value", 1, 16)
    per_expert = 3 * r.hidden_size * r.expert_ffn_size
    routed = r.moe_layers * r.routed_experts * per_expert
    token = r.active_experts * r.hidden_size * item
    sequence = r.sequence_length * token
    return ExpertLayoutCase(
        model=r.model, experts_per_gpu=r.routed_experts // r.expert_parallel, expert_params=per_expert,
        routed_params=float(routed), routed_share=routed / (r.params_billion * 1e9),
        active_expert_params=float(r.moe_layers * (r.active_experts + r.shared_experts) * per_expert),
        dispatch_bytes_per_token=token,
        internode_bytes_per_token=min(r.active_experts, r.max_nodes_per_token or r.active_experts) * r.hidden_size * item,
        sequence_alltoall_bytes=sequence,
        sequence_alltoall_time=float(collective_time("all-to-all", sequence, r.expert_parallel,
                                                    r.network_gb_per_s * 1e9, NETWORK_LATENCY)))
