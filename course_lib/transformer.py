r"""A small transformer classifier in plain numpy: the model that tensor parallelism splits by heads.

The digits as sequences: each 8x8 image is :math:`L = 8` tokens (its rows) of :math:`d = 8`
pixels, or, read finer, :math:`L = 64` tokens of one pixel each (``digit_sequences(x, tokens=64)``:
attention's :math:`L^2` then dominates the cost). The network, with hidden size :math:`h`, :math:`a` attention heads of size
:math:`h / a` and :math:`n_{\text{layers}}` blocks:

.. math::

    z_0 &= x E + e + P                                  && \text{token embedding + learned positions} \\
    z' &= z + \operatorname{attn}(\operatorname{LN}_1(z))\, A_O + b_o  && \text{self-attention, } a \text{ heads} \\
    z'' &= z' + \operatorname{relu}(\operatorname{LN}_2(z')\, A_1 + b_1)\, A_2 + b_2 && \text{the MLP block} \\
    \text{logits} &= \operatorname{mean}_{\text{tokens}}(\operatorname{LN}_f(z_{n_{\text{layers}}}))\, W_h + b_h

(pre-LN blocks with residuals, no dropout: deterministic; with ``causal=True`` token
:math:`\xi` attends to tokens :math:`0 \ldots \xi` only, the mask of a language model; the loss is
:func:`course_lib.models.softmax_cross_entropy`). Like the running example
(:class:`course_lib.models.MLP`) the parameters live in ONE flat buffer (float64 by
default) with named views, so the course's optimisers (:mod:`course_lib.optim`) apply.

:func:`block_forward` and :func:`block_backward` are one block, written out. Each takes an
``allreduce``: the identity on one device; under tensor parallelism
(:mod:`course_lib.parallel.tensor_transformer`) each worker passes its heads' columns of
:math:`A_Q, A_K, A_V`, its rows of :math:`A_O`, its columns of :math:`A_1` and rows of
:math:`A_2`, and the sum over workers: two all-reduces forward (Megatron's "g") and two
backward ("f") per block.

Examples
--------
>>> model = Transformer(hidden=16, heads=2, n_layers=1)
>>> p = model.init_params(seed=0)
>>> p.dtype, p.size == model.n_params
(dtype('float64'), True)
>>> x = digit_sequences(np.zeros((3, 64), np.float32)); x.shape
(3, 8, 8)
>>> logits, _ = model.forward(p, x); logits.shape
(3, 10)
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ._validate import as_real, check_float_dtype, check_int
from .models import MLP, Slot, check_labels, layout_slots, softmax_cross_entropy

# The pieces (layer_norm, attention and their backward passes) are importable but not
# listed: the blocks and the model call them with arrays they have checked.
__all__ = [
    "DIGITS_PIXEL_TRANSFORMER",
    "DIGITS_TRANSFORMER",
    "DIGIT_TOKENS",
    "Transformer",
    "block_backward",
    "block_forward",
    "digit_sequences",
    "transformer_backward",
    "transformer_forward",
]

EPS = 1e-5
"""The layer norm's :math:`\\epsilon`."""

BLOCK_SLOTS = ("ln1.g", "ln1.b", "Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo",
               "ln2.g", "ln2.b", "W1", "b1", "W2", "b2")
"""The parameters of one block, in their order in the flat buffer (prefix ``l<i>.``)."""


def _same(a: np.ndarray) -> np.ndarray:
    """The all-reduce of one device: the identity."""
    return a


def _tmm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a^T b`` over every (sample, token) row: the weight gradient of ``a @ W``."""
    return a.reshape(-1, a.shape[-1]).T @ b.reshape(-1, b.shape[-1])


DIGIT_TOKENS = (1, 2, 4, 8, 16, 32, 64)
"""The sequence lengths a digit's 64 pixels can be read as (the divisors of 64)."""


def digit_sequences(x, tokens: int = 8) -> np.ndarray:
    """The digits' ``(n, 64)`` pixel rows as sequences ``(n, tokens, 64 // tokens)``: by default
    8 tokens (the image rows) of 8 pixels; ``tokens=64``: 64 tokens of one pixel each, in
    reading order (row by row), so that attention over :math:`L = 64` tokens is the cost.

    Examples
    --------
    >>> digit_sequences(np.arange(128.0).reshape(2, 64))[1, 2].tolist()  # image 1, row 2
    [80.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0]
    >>> digit_sequences(np.arange(128.0).reshape(2, 64), tokens=64)[1, 10].tolist()  # image 1, pixel 10
    [74.0]
    """
    if isinstance(tokens, (bool, np.bool_)) or not isinstance(tokens, numbers.Integral):
        raise TypeError(f"tokens must be an integer, one of {DIGIT_TOKENS}, got {type(tokens).__name__}")
    if tokens not in DIGIT_TOKENS:
        raise ValueError(f"tokens must be one of {DIGIT_TOKENS} (a divisor of the 64 pixels), got {tokens!r}")
    x = np.asarray(as_real(x, "x"))
    if x.ndim != 2 or x.shape[1] != 64:
        raise ValueError(f"x must have shape (n, 64) (8x8 images as rows), got {x.shape}")
    return x.reshape(x.shape[0], tokens, 64 // tokens)


# ------------------------------------------------------------------ the pieces
def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, tuple]:
    """Layer norm over the last axis: ``g * (x - mean) / std + b``; returns it and what the backward needs."""
    mu = x.mean(axis=-1, keepdims=True)
    std = np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + EPS)
    xhat = (x - mu) / std
    return xhat * g + b, (xhat, std)


def layer_norm_backward(dy: np.ndarray, cache: tuple, g: np.ndarray, dg: np.ndarray, db: np.ndarray) -> np.ndarray:
    """Gradient of :func:`layer_norm` with respect to ``x``; ADDS the gradients of ``g``, ``b`` into ``dg``, ``db``."""
    xhat, std = cache
    dg += (dy * xhat).reshape(-1, dy.shape[-1]).sum(axis=0)
    db += dy.reshape(-1, dy.shape[-1]).sum(axis=0)
    dxhat = dy * g
    return (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True)) / std


def _heads(t: np.ndarray, head_size: int) -> np.ndarray:
    """(batch, L, n * head_size) -> (batch, n, L, head_size): one slice per head."""
    b, s, width = t.shape
    return t.reshape(b, s, width // head_size, head_size).transpose(0, 2, 1, 3)


def _merge(t: np.ndarray) -> np.ndarray:
    """The inverse of :func:`_heads`: the heads side by side again."""
    b, n, s, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, n * d)


def causal_mask(length: int) -> np.ndarray:
    r"""``(L, L)`` booleans: query :math:`\xi` may see key :math:`\xi'` iff :math:`\xi' \le \xi`."""
    return np.tril(np.ones((length, length), dtype=bool))


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, head_size: int,
              causal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    r"""Scaled dot-product self-attention of every head whose columns ``q``, ``k``, ``v`` hold.

    Head :math:`j` uses columns ``j * head_size .. (j + 1) * head_size`` of each:
    :math:`\operatorname{softmax}(Q_j K_j^T / \sqrt{h/a})\, V_j`. The heads are
    independent: any subset of them (a worker's) is computed without the others.
    ``causal``: token :math:`\xi` sees tokens :math:`0 \ldots \xi` only (the other
    scores are :math:`-\infty`, their weights 0; :func:`attention_backward` needs no change).

    Returns
    -------
    heads_out : numpy.ndarray
        (batch, L, width) the heads' outputs side by side.
    probs : numpy.ndarray
        (batch, heads, L, L) the attention weights (for the backward pass).
    """
    scores = _heads(q, head_size) @ _heads(k, head_size).transpose(0, 1, 3, 2) / math.sqrt(head_size)
    if causal:
        scores[..., ~causal_mask(q.shape[1])] = -np.inf
    scores -= scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    return _merge(probs @ _heads(v, head_size)), probs


def attention_backward(dctx, q, k, v, probs, head_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of :func:`attention` with respect to ``q``, ``k``, ``v``."""
    qh, kh, vh, dc = (_heads(t, head_size) for t in (q, k, v, dctx))
    dv = probs.transpose(0, 1, 3, 2) @ dc
    dp = dc @ vh.transpose(0, 1, 3, 2)
    ds = probs * (dp - (dp * probs).sum(axis=-1, keepdims=True)) / math.sqrt(head_size)
    return _merge(ds @ kh), _merge(ds.transpose(0, 1, 3, 2) @ qh), _merge(dv)


# ------------------------------------------------------------------ one block
def block_forward(w: dict, x: np.ndarray, head_size: int, allreduce=_same, attend=attention) -> tuple[np.ndarray, dict]:
    """One pre-LN transformer block (attention, then the MLP block, each with a residual).

    ``w`` holds the block's weights; a tensor-parallel worker passes its heads' columns of
    ``Wq``, ``Wk``, ``Wv`` (and biases), its rows of ``Wo``, its columns of ``W1`` and rows
    of ``W2``, and ``allreduce`` the sum over workers (Megatron's "g"): the block's two
    all-reduces of the forward pass. On one device ``allreduce`` is the identity.
    """
    a, ln1 = layer_norm(x, w["ln1.g"], w["ln1.b"])
    q, k, v = a @ w["Wq"] + w["bq"], a @ w["Wk"] + w["bk"], a @ w["Wv"] + w["bv"]  # my heads
    heads_out, probs = attend(q, k, v, head_size)
    x1 = x + allreduce(heads_out @ w["Wo"]) + w["bo"]  # g: add the heads' partial outputs
    m, ln2 = layer_norm(x1, w["ln2.g"], w["ln2.b"])
    u = np.maximum(m @ w["W1"] + w["b1"], 0)  # my columns of the MLP block
    x2 = x1 + allreduce(u @ w["W2"]) + w["b2"]  # g: add the partial outputs
    return x2, {"a": a, "ln1": ln1, "q": q, "k": k, "v": v, "probs": probs, "heads_out": heads_out,
                "m": m, "ln2": ln2, "u": u}


def block_backward(w: dict, c: dict, dx2: np.ndarray, grads: dict, head_size: int, allreduce=_same,
                   attend_backward=None) -> np.ndarray:
    """Back-propagate through :func:`block_forward` (cache ``c``): ADD the block's weight
    gradients into ``grads`` (same keys and shapes as ``w``) and return the gradient
    with respect to the block's input. The gradients of the inputs of the two split
    layers are summed over workers: the block's two all-reduces of the backward pass
    (Megatron's "f"). ``attend_backward`` is the backward of the forward's ``attend``
    (None: :func:`attention_backward`, the backward of :func:`attention`, masked or not)."""
    grads["b2"] += dx2.reshape(-1, dx2.shape[-1]).sum(axis=0)
    grads["W2"] += _tmm(c["u"], dx2)
    du = (dx2 @ w["W2"].T) * (c["u"] > 0)
    grads["W1"] += _tmm(c["m"], du)
    grads["b1"] += du.reshape(-1, du.shape[-1]).sum(axis=0)
    dm = allreduce(du @ w["W1"].T)  # f: the input gradient is a sum over workers
    dx1 = dx2 + layer_norm_backward(dm, c["ln2"], w["ln2.g"], grads["ln2.g"], grads["ln2.b"])
    grads["bo"] += dx1.reshape(-1, dx1.shape[-1]).sum(axis=0)
    grads["Wo"] += _tmm(c["heads_out"], dx1)
    dq, dk, dv = (attend_backward or attention_backward)(dx1 @ w["Wo"].T, c["q"], c["k"], c["v"], c["probs"],
                                                          head_size)
    da = 0.0
    for n, d in (("q", dq), ("k", dk), ("v", dv)):
        grads["W" + n] += _tmm(c["a"], d)
        grads["b" + n] += d.reshape(-1, d.shape[-1]).sum(axis=0)
        da = da + d @ w["W" + n].T
    da = allreduce(da)  # f
    return dx1 + layer_norm_backward(da, c["ln1"], w["ln1.g"], grads["ln1.g"], grads["ln1.b"])


def block_weights(w: dict, i: int) -> dict:
    """The weights of block ``i`` from a dict of every parameter (names ``l<i>.<slot>``), prefix removed."""
    prefix = f"l{i}."
    return {name[len(prefix):]: a for name, a in w.items() if name.startswith(prefix)}


def transformer_forward(w: dict, x: np.ndarray, n_layers: int, head_size: int, allreduce=_same, attend=attention):
    """Logits of the whole network from the named weights ``w`` (all of them, or a worker's) and the cache
    (``attend``: the attention, :attr:`Transformer.attend`)."""
    z = x @ w["embed.W"] + w["embed.b"] + w["pos"]
    caches = []
    for i in range(n_layers):
        z, c = block_forward(block_weights(w, i), z, head_size, allreduce, attend)
        caches.append(c)
    f, lnf = layer_norm(z, w["final.g"], w["final.b"])
    logits = f.mean(axis=1) @ w["head.W"] + w["head.b"]
    return logits, {"x": x, "blocks": caches, "f": f, "lnf": lnf}


def transformer_backward(w: dict, cache: dict, dlogits: np.ndarray, grads: dict, n_layers: int,
                         head_size: int, allreduce=_same) -> None:
    """ADD the gradient of every weight in ``w`` into ``grads`` (same keys) from the logits' gradient."""
    f = cache["f"]
    grads["head.W"] += f.mean(axis=1).T @ dlogits
    grads["head.b"] += dlogits.sum(axis=0)
    df = np.broadcast_to((dlogits @ w["head.W"].T)[:, None, :] / f.shape[1], f.shape)
    dz = layer_norm_backward(df, cache["lnf"], w["final.g"], grads["final.g"], grads["final.b"])
    for i in reversed(range(n_layers)):
        dz = block_backward(block_weights(w, i), cache["blocks"][i], dz, block_weights(grads, i),
                            head_size, allreduce)
    grads["pos"] += dz.sum(axis=0)
    grads["embed.W"] += _tmm(cache["x"], dz)
    grads["embed.b"] += dz.reshape(-1, dz.shape[-1]).sum(axis=0)


# ------------------------------------------------------------------ the model
@dataclass(frozen=True)
class Transformer:
    """Layout and maths of the transformer classifier (pure: holds no parameters).

    Parameters
    ----------
    seq_length : int
        :math:`L`, tokens per sample (8: the rows of a digit).
    token_size : int
        :math:`d`, features per token (8 pixels).
    hidden : int
        :math:`h`, the hidden size; a multiple of ``heads``.
    heads : int
        :math:`a`, attention heads of size ``hidden // heads``.
    n_layers : int
        Blocks.
    ffn : int or None
        Width of the MLP block (None: ``4 * hidden``).
    classes : int
    dtype : numpy dtype
        float64 by default (gradient checks), or float32.
    causal : bool
        Mask attention so that each token sees itself and the tokens before it only (a
        language model's mask; False, the classifier of the digits, sees every token).

    Examples
    --------
    >>> m = Transformer(hidden=32, heads=4, n_layers=2)
    >>> m.head_size, m.ffn, m.n_params
    (8, 128, 26346)
    >>> block = 4 * 32 + 4 * (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32)  # 2 LN, q k v o, MLP
    >>> (8 * 32 + 32) + 8 * 32 + 2 * block + 2 * 32 + (32 * 10 + 10)  # embedding, positions, final LN, head
    26346
    >>> [s.name for s in m.slots][:5]
    ['embed.W', 'embed.b', 'pos', 'l0.ln1.g', 'l0.ln1.b']
    """

    seq_length: int = 8
    token_size: int = 8
    hidden: int = 32
    heads: int = 4
    n_layers: int = 2
    ffn: int | None = None
    classes: int = 10
    dtype: np.dtype = field(default=np.dtype(np.float64))
    causal: bool = False

    def __post_init__(self):
        for name in ("seq_length", "token_size", "hidden", "heads", "n_layers", "classes"):
            object.__setattr__(self, name, check_int(getattr(self, name), name, 1, 2**20))
        if self.classes < 2:
            raise ValueError(f"classes must be an integer in [2, {2**20}], got {self.classes}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden must be a multiple of heads ({self.heads}), got {self.hidden}")
        ffn = 4 * self.hidden if self.ffn is None else check_int(self.ffn, "ffn", 1, 2**20)
        object.__setattr__(self, "ffn", ffn)
        object.__setattr__(self, "dtype", check_float_dtype(self.dtype))
        if not isinstance(self.causal, (bool, np.bool_)):
            raise TypeError(f"causal must be True or False, got {type(self.causal).__name__}")
        object.__setattr__(self, "causal", bool(self.causal))

    @property
    def head_size(self) -> int:
        """``hidden // heads``."""
        return self.hidden // self.heads

    @property
    def attend(self):
        """The attention of every block: :func:`attention`, causal if :attr:`causal`."""
        return functools.partial(attention, causal=True) if self.causal else attention

    @functools.cached_property
    def slots(self) -> tuple[Slot, ...]:
        """Name, shape and offset of every parameter tensor in the flat buffer."""
        h, f = self.hidden, self.ffn
        block = {"ln1.g": (h,), "ln1.b": (h,), "Wq": (h, h), "bq": (h,), "Wk": (h, h), "bk": (h,),
                 "Wv": (h, h), "bv": (h,), "Wo": (h, h), "bo": (h,), "ln2.g": (h,), "ln2.b": (h,),
                 "W1": (h, f), "b1": (f,), "W2": (f, h), "b2": (h,)}
        shapes = [("embed.W", (self.token_size, h)), ("embed.b", (h,)), ("pos", (self.seq_length, h))]
        shapes += [(f"l{i}.{n}", block[n]) for i in range(self.n_layers) for n in BLOCK_SLOTS]
        shapes += [("final.g", (h,)), ("final.b", (h,)), ("head.W", (h, self.classes)), ("head.b", (self.classes,))]
        return layout_slots(shapes)

    n_params = MLP.n_params  # the same flat buffer of slots (as course_lib.cnn.CNN shares it)

    def views(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """Named views (no copies) into a flat parameter or gradient buffer."""
        self.check_flat(flat, "flat")
        return {s.name: flat[s.offset : s.offset + s.size].reshape(s.shape) for s in self.slots}

    def init_params(self, seed: int = 0) -> np.ndarray:
        """Deterministic initial parameters: normal weights with std ``1 / sqrt(fan_in)`` (``W1``:
        ``sqrt(2 / fan_in)``, ReLU follows; the residual branches' ``Wo``, ``W2`` scaled by
        ``1 / sqrt(2 n_layers)``), positions with std 0.1, layer-norm gains 1, biases 0."""
        rng = np.random.default_rng(check_int(seed, "seed", 0))
        flat = np.zeros(self.n_params, dtype=self.dtype)
        for name, w in self.views(flat).items():
            kind = name.split(".")[-1]
            if kind == "g":
                w[...] = 1.0
            elif name == "pos":
                w[...] = 0.1 * rng.standard_normal(w.shape)
            elif kind.startswith("W"):
                std = math.sqrt((2.0 if kind == "W1" else 1.0) / w.shape[0])
                if kind in ("Wo", "W2"):
                    std /= math.sqrt(2 * self.n_layers)
                w[...] = std * rng.standard_normal(w.shape)
        return flat

    # ---------------------------------------------------------------- compute
    def forward(self, params: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, dict]:
        """Logits ``(batch, classes)`` and the cache :meth:`backward` needs."""
        return transformer_forward(self.views(params), self.check_x(x), self.n_layers, self.head_size,
                                   attend=self.attend)

    def backward(self, params: np.ndarray, cache: dict, y: np.ndarray, *, reduction: str = "mean",
                 out: np.ndarray | None = None, logits: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """Loss and flat gradient from :meth:`forward`'s ``logits`` and ``cache`` (``out`` is zeroed and filled)."""
        y = self.check_y(y, cache["x"].shape[0])
        grad = np.zeros_like(params) if out is None else out
        self.check_flat(grad, "out")
        grad.fill(0)
        loss, dlogits = softmax_cross_entropy(logits, y, reduction)
        transformer_backward(self.views(params), cache, dlogits, self.views(grad), self.n_layers, self.head_size)
        return loss, grad

    def loss_and_grad(self, params: np.ndarray, x: np.ndarray, y: np.ndarray, *, reduction: str = "mean",
                      out: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """Forward and backward pass on one batch: ``(loss, flat gradient)``.

        Examples
        --------
        >>> m = Transformer(hidden=8, heads=2, n_layers=1)
        >>> loss, g = m.loss_and_grad(m.init_params(0), np.ones((3, 8, 8)), np.array([0, 1, 2]))
        >>> g.shape == (m.n_params,) and loss > 0
        True
        """
        logits, cache = self.forward(params, x)
        return self.backward(params, cache, y, reduction=reduction, out=out, logits=logits)

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Predicted class of every sample."""
        return self.forward(params, x)[0].argmax(axis=1)

    def accuracy(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        """Fraction of samples classified correctly."""
        y = self.check_y(y, np.shape(x)[0])
        return float(np.mean(self.predict(params, x) == y))

    # --------------------------------------------------------------- checking
    check_flat = MLP.check_flat

    def check_x(self, x) -> np.ndarray:
        """``x`` as this model's input batch in its dtype, else TypeError/ValueError."""
        x = np.asarray(x)
        shape = (self.seq_length, self.token_size)
        if x.ndim != 3 or x.shape[1:] != shape:
            raise ValueError(f"x must have shape (batch, {shape[0]}, {shape[1]}) (samples, tokens, "
                             f"features), got {x.shape}")
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"x must be a float array, got dtype {x.dtype}")
        return x.astype(self.dtype, copy=False)

    def check_y(self, y, batch: int) -> np.ndarray:
        """``y`` as ``batch`` integer labels of this model's classes, else TypeError/ValueError."""
        return check_labels(y, batch, self.classes)


DIGITS_TRANSFORMER = Transformer(hidden=32, heads=4, n_layers=2, ffn=64)
"""The course's variant for the digits: h = 32, a = 4 heads, 2 blocks, an MLP block 64 wide
(18,026 parameters). Trained by :func:`course_lib.parallel.train.reference.train_serial` (the serial loop of the
running example, which takes this model as it takes the MLP) with
``optimizer=SGD(0.05, momentum=0.9)``, batch 32, 8 epochs, seed 0, it classifies 93.0 % of
the test digits (tests/test_transformer.py)."""

DIGITS_PIXEL_TRANSFORMER = Transformer(seq_length=64, token_size=1, hidden=16, heads=4, n_layers=1, ffn=32)
"""The digits read as 64 one-pixel tokens (``digit_sequences(x, tokens=64)``), the model that
context parallelism splits by its sequence: h = 16, a = 4 heads of 4, one block, an MLP block
32 wide (3,482 parameters). Its attention scores every pixel against every pixel: a head's
:math:`L^2 = 4{,}096` scores per digit against the :math:`L h = 1{,}024` values of a layer's input."""
