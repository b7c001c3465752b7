"""The running example: a small fully connected network (MLP) in plain numpy.

Every chapter parallelises this same computation. The parameters live in ONE flat
float32 buffer, with named views per layer (``W0``, ``b0``, ``W1``, ...), so that a
data-parallel trainer can all-reduce one buffer and a pipeline can hand each stage
a contiguous slice.

Layer ``i`` computes ``z = a @ W_i + b_i`` with ``W_i`` of shape (fan_in, fan_out);
hidden layers apply ReLU, the last layer feeds a softmax cross-entropy loss.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._validate import as_real, check_int, check_positive, check_type

__all__ = [
    "MLP",
    "TrainResult",
    "softmax_cross_entropy",
    "sgd_step",
    "train",
]


def softmax_cross_entropy(logits: np.ndarray, y: np.ndarray, reduction: str = "mean"):
    """Softmax cross-entropy loss and its gradient with respect to the logits.

    Parameters
    ----------
    logits : numpy.ndarray
        (batch, classes) scores.
    y : numpy.ndarray
        (batch,) integer labels in [0, classes).
    reduction : {"mean", "sum"}
        Average or sum over the batch (a data-parallel worker uses "sum" on its shard,
        so that the shard gradients add up to the full-batch gradient).

    Returns
    -------
    loss : float
    dlogits : numpy.ndarray
        Gradient of the loss with respect to ``logits`` (same dtype).

    Examples
    --------
    >>> loss, d = softmax_cross_entropy(np.zeros((2, 4), np.float32), np.array([0, 3]))
    >>> round(loss, 6) == round(math.log(4), 6), d.shape
    (True, (2, 4))
    """
    check_type(logits, "logits", np.ndarray, "a numpy array of shape (batch, classes)")
    if logits.ndim != 2 or not np.issubdtype(logits.dtype, np.floating):
        raise ValueError(
            f"logits must be a float array of shape (batch, classes), got {logits.dtype} {logits.shape}"
        )
    y = _check_labels(y, logits.shape[0], logits.shape[1])
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    sum_exp = exp.sum(axis=1, keepdims=True)
    rows = np.arange(logits.shape[0])
    log_prob = shifted[rows, y] - np.log(sum_exp[:, 0])
    probs = exp / sum_exp
    probs[rows, y] -= 1.0
    scale = 1.0 / logits.shape[0] if reduction == "mean" else 1.0
    loss = -float(log_prob.sum(dtype=np.float64)) * scale
    return loss, (probs * np.asarray(scale, dtype=logits.dtype)).astype(logits.dtype, copy=False)


def _check_labels(y, batch: int, classes: int) -> np.ndarray:
    """``y`` as an integer array of shape (batch,) with labels in [0, classes)."""
    y = np.asarray(y) if not isinstance(y, np.ndarray) else y
    if y.shape != (batch,) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must be an integer array of shape ({batch},), got {y.dtype} {y.shape}")
    if batch and (y.min() < 0 or y.max() >= classes):
        raise ValueError(f"y must hold labels in [0, {classes - 1}]")
    return y


@dataclass(frozen=True)
class _Slot:
    name: str
    shape: tuple[int, ...]
    offset: int

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class MLP:
    """Layout and maths of a fully connected ReLU network with a softmax output.

    The object holds no parameters: it describes where each layer's weights sit in a
    flat buffer and computes with a buffer it is given (pure functions, no state).

    Parameters
    ----------
    sizes : sequence of int
        Layer widths from input to output, e.g. ``(64, 64, 10)``: 64 inputs, one hidden
        layer of 64 units, 10 classes.
    dtype : numpy dtype
        Parameter and activation dtype, float32 by default.

    Examples
    --------
    >>> model = MLP((64, 32, 10))
    >>> params = model.init_params(seed=0)
    >>> params.dtype, params.size == model.n_params == 64 * 32 + 32 + 32 * 10 + 10
    (dtype('float32'), True)
    >>> sorted(model.views(params))
    ['W0', 'W1', 'b0', 'b1']
    """

    sizes: tuple[int, ...]
    dtype: np.dtype = field(default=np.dtype(np.float32))

    def __post_init__(self):
        if isinstance(self.sizes, (str, bytes)) or not isinstance(self.sizes, Sequence):
            raise TypeError(f"sizes must be a sequence of layer widths, got {self.sizes!r}")
        sizes = tuple(check_int(s, f"sizes[{i}]", 1) for i, s in enumerate(self.sizes))
        if len(sizes) < 2:
            raise ValueError(f"sizes needs at least an input and an output width, got {sizes}")
        dtype = np.dtype(self.dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "dtype", dtype)

    # ----------------------------------------------------------------- layout
    @property
    def n_layers(self) -> int:
        """Number of weight layers (len(sizes) - 1)."""
        return len(self.sizes) - 1

    @property
    def slots(self) -> tuple[_Slot, ...]:
        """Name, shape and offset of every parameter tensor in the flat buffer."""
        slots, offset = [], 0
        for i, (fan_in, fan_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            for name, shape in ((f"W{i}", (fan_in, fan_out)), (f"b{i}", (fan_out,))):
                slots.append(_Slot(name, shape, offset))
                offset += math.prod(shape)
        return tuple(slots)

    @property
    def n_params(self) -> int:
        """Total number of parameters."""
        return sum(s.size for s in self.slots)

    def layer_range(self, start: int, stop: int) -> slice:
        """The slice of the flat buffer that holds layers ``start`` .. ``stop - 1``.

        Layers are stored in order, so any run of consecutive layers (a pipeline
        stage) owns one contiguous slice.
        """
        start = check_int(start, "start", 0, self.n_layers - 1)
        stop = check_int(stop, "stop", start + 1, self.n_layers)
        slots = self.slots
        first, last = slots[2 * start], slots[2 * stop - 1]
        return slice(first.offset, last.offset + last.size)

    def views(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """Named views (no copies) into a flat parameter or gradient buffer."""
        self._check_flat(flat, "flat")
        return {s.name: flat[s.offset : s.offset + s.size].reshape(s.shape) for s in self.slots}

    def layer(self, flat: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Views ``(W_i, b_i)`` of layer ``i`` in ``flat``."""
        i = check_int(i, "i", 0, self.n_layers - 1)
        w, b = self.slots[2 * i], self.slots[2 * i + 1]
        return (
            flat[w.offset : w.offset + w.size].reshape(w.shape),
            flat[b.offset : b.offset + b.size],
        )

    def init_params(self, seed: int = 0) -> np.ndarray:
        """He-initialised weights (normal, std sqrt(2 / fan_in)) and zero biases.

        Deterministic: the same seed gives the same buffer on every machine.
        """
        rng = np.random.default_rng(check_int(seed, "seed", 0))
        flat = np.zeros(self.n_params, dtype=self.dtype)
        for i in range(self.n_layers):
            w, _ = self.layer(flat, i)
            w[...] = rng.standard_normal(w.shape) * math.sqrt(2.0 / w.shape[0])
        return flat

    # ---------------------------------------------------------------- compute
    def layer_forward(self, params: np.ndarray, i: int, a: np.ndarray) -> np.ndarray:
        """Output of layer ``i`` for input activations ``a`` (ReLU except the last layer)."""
        w, b = self.layer(params, i)
        z = a @ w
        z += b
        if i < self.n_layers - 1:
            np.maximum(z, 0, out=z)
        return z

    def layer_backward(
        self,
        params: np.ndarray,
        i: int,
        a_in: np.ndarray,
        a_out: np.ndarray,
        grad_out: np.ndarray,
        grad: np.ndarray,
        *,
        need_input_grad: bool = True,
    ) -> np.ndarray | None:
        """Back-propagate through layer ``i``.

        Parameters
        ----------
        a_in, a_out : numpy.ndarray
            The layer's input and output from :meth:`layer_forward`.
        grad_out : numpy.ndarray
            Gradient of the loss with respect to ``a_out`` (for the last layer: the
            gradient with respect to the logits).
        grad : numpy.ndarray
            Flat gradient buffer; this layer's slots are ADDED to (accumulation over
            micro-batches works by calling this repeatedly).
        need_input_grad : bool
            Whether to return the gradient with respect to ``a_in`` (not needed for
            layer 0, which saves one GEMM).
        """
        w, _ = self.layer(params, i)
        gw, gb = self.layer(grad, i)
        dz = grad_out * (a_out > 0) if i < self.n_layers - 1 else grad_out
        gw += a_in.T @ dz
        gb += dz.sum(axis=0)
        return dz @ w.T if need_input_grad else None

    def forward(self, params: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Logits for a batch and the activations needed by :meth:`backward`.

        Returns
        -------
        logits : numpy.ndarray
            (batch, classes).
        acts : list of numpy.ndarray
            ``acts[0] = x`` and ``acts[i + 1]`` = output of layer ``i``.
        """
        self._check_flat(params, "params")
        x = self._check_x(x)
        acts = [x]
        for i in range(self.n_layers):
            acts.append(self.layer_forward(params, i, acts[-1]))
        return acts[-1], acts

    def backward(
        self,
        params: np.ndarray,
        acts: list[np.ndarray],
        y: np.ndarray,
        *,
        reduction: str = "mean",
        out: np.ndarray | None = None,
    ) -> tuple[float, np.ndarray]:
        """Loss and flat gradient from the activations of :meth:`forward`.

        ``out``, if given, is a flat buffer that receives the gradient (it is zeroed
        first); otherwise a new buffer is returned.
        """
        y = self._check_y(y, acts[0].shape[0])
        grad = np.zeros_like(params) if out is None else out
        if out is not None:
            self._check_flat(out, "out")
            grad.fill(0)
        loss, g = softmax_cross_entropy(acts[-1], y, reduction)
        for i in reversed(range(self.n_layers)):
            g = self.layer_backward(
                params, i, acts[i], acts[i + 1], g, grad, need_input_grad=i > 0
            )
        return loss, grad

    def loss_and_grad(
        self,
        params: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
        *,
        reduction: str = "mean",
        out: np.ndarray | None = None,
    ) -> tuple[float, np.ndarray]:
        """Forward and backward pass on one batch: ``(loss, flat gradient)``.

        Examples
        --------
        >>> model = MLP((4, 3, 2))
        >>> p = model.init_params(1)
        >>> x = np.ones((5, 4), np.float32); y = np.array([0, 1, 0, 1, 1])
        >>> loss, g = model.loss_and_grad(p, x, y)
        >>> g.shape == p.shape and loss > 0
        True
        """
        _, acts = self.forward(params, x)
        return self.backward(params, acts, y, reduction=reduction, out=out)

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Predicted class per row of ``x``."""
        logits, _ = self.forward(params, x)
        return logits.argmax(axis=1)

    def accuracy(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        """Fraction of rows of ``x`` classified correctly."""
        y = self._check_y(y, np.shape(x)[0])
        return float(np.mean(self.predict(params, x) == y))

    # ------------------------------------------------------------------ costs
    def flops_per_sample(self) -> dict[str, int]:
        """Floating-point operations of one sample's pass, counting GEMMs only.

        A GEMM of an (1 x k) row by a (k x n) matrix costs k*n multiply-accumulates
        = 2*k*n FLOPs (1 MAC = 2 FLOPs). Bias adds, ReLU and the softmax are O(width)
        and left out (they are below 2% for the course's sizes). Forward: one GEMM per
        layer. Backward: the weight gradient for every layer plus the input gradient
        for every layer except the first (this implementation skips that one), so
        backward is just under twice the forward cost.

        Examples
        --------
        >>> MLP((64, 32, 10)).flops_per_sample()
        {'forward': 4736, 'backward': 5376, 'total': 10112}
        """
        macs = [a * b for a, b in zip(self.sizes[:-1], self.sizes[1:])]
        forward = 2 * sum(macs)
        backward = 2 * sum(macs) + 2 * sum(macs[1:])
        return {"forward": forward, "backward": backward, "total": forward + backward}

    # --------------------------------------------------------------- checking
    def _check_flat(self, flat, name: str) -> None:
        check_type(flat, name, np.ndarray, "a numpy array")
        if flat.shape != (self.n_params,):
            raise ValueError(f"{name} must have shape ({self.n_params},), got {flat.shape}")

    def _check_x(self, x) -> np.ndarray:
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.sizes[0]:
            raise ValueError(f"x must have shape (batch, {self.sizes[0]}), got {x.shape}")
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"x must be a float array, got dtype {x.dtype}")
        return x.astype(self.dtype, copy=False)

    def _check_y(self, y, batch: int) -> np.ndarray:
        return _check_labels(y, batch, self.sizes[-1])


def sgd_step(params: np.ndarray, grad: np.ndarray, lr: float) -> None:
    """Plain SGD, in place: ``params -= lr * grad``.

    Examples
    --------
    >>> p = np.ones(3, np.float32)
    >>> sgd_step(p, np.full(3, 2.0, np.float32), 0.25)
    >>> p
    array([0.5, 0.5, 0.5], dtype=float32)
    """
    check_type(params, "params", np.ndarray, "a numpy array")
    if not np.issubdtype(params.dtype, np.floating):
        raise TypeError(f"params must be a float array, got dtype {params.dtype}")
    check_type(grad, "grad", np.ndarray, "a numpy array")
    if grad.shape != params.shape:
        raise ValueError(f"grad must have the shape of params {params.shape}, got {grad.shape}")
    lr = check_positive(lr, "lr")
    params -= np.asarray(lr, dtype=params.dtype) * grad


@dataclass
class TrainResult:
    """What :func:`train` returns: final parameters and per-epoch history."""

    params: np.ndarray
    loss: list[float]
    """Mean training loss of each epoch."""
    test_accuracy: list[float]
    """Test accuracy after each epoch (empty when no test set was given)."""
    step_loss: list[float]
    """Loss of every step."""


def train(
    model: MLP,
    x: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int = 5,
    batch_size: int = 32,
    lr: float = 0.1,
    seed: int = 0,
    optimizer=None,
    x_test: np.ndarray | None = None,
    y_test: np.ndarray | None = None,
    params: np.ndarray | None = None,
) -> TrainResult:
    """Train ``model`` with mini-batch gradient descent (serial reference loop).

    Parameters
    ----------
    model : MLP
    x, y : numpy.ndarray
        Training inputs (n, features) and labels (n,).
    epochs, batch_size : int
        Passes over the data and samples per step (the last, smaller batch of an epoch
        is kept).
    lr : float
        Learning rate of plain SGD (ignored when ``optimizer`` is given).
    seed : int
        Seeds the initial parameters and the shuffling of every epoch.
    optimizer : object with ``step(params, grad)``, optional
        E.g. one from :mod:`course_lib.optim`; updates ``params`` in place.
    x_test, y_test : numpy.ndarray, optional
        Evaluated after every epoch.
    params : numpy.ndarray, optional
        Start from these parameters (copied) instead of ``model.init_params(seed)``.

    Examples
    --------
    >>> from course_lib.datasets import load_digits
    >>> tr, te = load_digits("train"), load_digits("test")
    >>> res = train(MLP((64, 64, 10)), tr.x, tr.y, epochs=10, x_test=te.x, y_test=te.y)
    >>> res.test_accuracy[-1] > 0.9
    True
    """
    check_type(model, "model", (MLP, CNN), "an MLP or a CNN")
    epochs = check_int(epochs, "epochs", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    seed = check_int(seed, "seed", 0)
    x = model._check_x(x)
    y = model._check_y(y, x.shape[0])
    if optimizer is None:
        lr = check_positive(lr, "lr")
    elif not callable(getattr(optimizer, "step", None)):
        raise TypeError(
            f"optimizer must have a step(params, grad) method, got {type(optimizer).__name__}"
        )
    if (x_test is None) != (y_test is None):
        raise ValueError("x_test and y_test must be given together")
    if x_test is not None:
        x_test = model._check_x(x_test)
        y_test = model._check_y(y_test, x_test.shape[0])
    if params is None:
        params = model.init_params(seed)
    else:
        params = np.array(as_real(params, "params"), dtype=model.dtype)
        model._check_flat(params, "params")
    grad = np.zeros_like(params)
    rng = np.random.default_rng(seed + 1)
    result = TrainResult(params=params, loss=[], test_accuracy=[], step_loss=[])
    for _ in range(epochs):
        order = rng.permutation(x.shape[0])
        total, count = 0.0, 0
        for start in range(0, x.shape[0], batch_size):
            idx = order[start : start + batch_size]
            loss, _ = model.loss_and_grad(params, x[idx], y[idx], out=grad)
            if optimizer is None:
                sgd_step(params, grad, lr)
            else:
                optimizer.step(params, grad)
            result.step_loss.append(loss)
            total += loss * idx.size
            count += idx.size
        result.loss.append(total / count)
        if x_test is not None and y_test is not None:
            result.test_accuracy.append(model.accuracy(params, x_test, y_test))
    return result


# ============================================================================
# The convolutional variant of the running example
# ============================================================================
import functools  # noqa: E402 - appended section; its slots are computed once per model


@dataclass(frozen=True)
class CNN:
    """The running example with convolutions: conv layers (ReLU) and a linear classifier.

    Same conventions as :class:`MLP`: the object holds no parameters, all of them live
    in ONE flat buffer with named views (``W0``, ``b0`` for the first convolution, ...,
    ``W{n}``, ``b{n}`` for the final linear layer), and the methods ``forward``,
    ``backward``, ``loss_and_grad``, ``predict``, ``accuracy``, ``views``, ``layer``,
    ``layer_range``, ``init_params`` and ``flops_per_sample`` behave as the MLP's, so
    :func:`train` trains it unchanged. Every convolution is
    :func:`course_lib.im2col.conv2d` (im2col + GEMM) with "same" padding
    (``kernel_size // 2``), and its gradients come from
    :func:`course_lib.im2col.conv2d_backward`.

    Parameters
    ----------
    image_shape : (C, H, W)
        Input image shape; inputs may also be given flattened, (batch, C * H * W).
    channels : sequence of int
        Output channels of each convolution.
    n_classes : int
        Outputs of the final linear layer.
    kernel_size : int
        Square kernel of every convolution (odd, so that "same" padding is symmetric).
    strides : sequence of int
        Stride of each convolution (same length as ``channels``).
    dtype : numpy dtype
        float32 (default) or float64.

    Examples
    --------
    >>> model = CNN()                    # 1x8x8 digits -> 8x8x8 -> 16x4x4 -> 10
    >>> [(s.name, s.shape) for s in model.slots][::2]
    [('W0', (8, 1, 3, 3)), ('W1', (16, 8, 3, 3)), ('W2', (256, 10))]
    >>> model.feature_shapes
    ((1, 8, 8), (8, 8, 8), (16, 4, 4))
    >>> params = model.init_params(seed=0)
    >>> logits, _ = model.forward(params, np.zeros((5, 64), np.float32))
    >>> logits.shape, params.size == model.n_params
    ((5, 10), True)
    """

    image_shape: tuple[int, int, int] = (1, 8, 8)
    channels: tuple[int, ...] = (8, 16)
    n_classes: int = 10
    kernel_size: int = 3
    strides: tuple[int, ...] = (1, 2)
    dtype: np.dtype = field(default=np.dtype(np.float32))

    def __post_init__(self):
        for name in ("image_shape", "channels", "strides"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise TypeError(f"{name} must be a sequence of ints, got {value!r}")
        if len(self.image_shape) != 3:
            raise ValueError(f"image_shape must be (C, H, W), got {tuple(self.image_shape)}")
        image = tuple(check_int(s, f"image_shape[{i}]", 1) for i, s in enumerate(self.image_shape))
        channels = tuple(check_int(s, f"channels[{i}]", 1) for i, s in enumerate(self.channels))
        strides = tuple(check_int(s, f"strides[{i}]", 1) for i, s in enumerate(self.strides))
        if not channels:
            raise ValueError("channels needs at least one convolution, got ()")
        if len(strides) != len(channels):
            raise ValueError(
                f"strides must give one stride per convolution: {len(channels)} channels, "
                f"{len(strides)} strides"
            )
        k = check_int(self.kernel_size, "kernel_size", 1)
        if k % 2 == 0:
            raise ValueError(f"kernel_size must be odd (symmetric 'same' padding), got {k}")
        dtype = np.dtype(self.dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        object.__setattr__(self, "image_shape", image)
        object.__setattr__(self, "channels", channels)
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "n_classes", check_int(self.n_classes, "n_classes", 1))
        object.__setattr__(self, "dtype", dtype)
        self.feature_shapes  # noqa: B018 - checks that every convolution fits its input

    # ----------------------------------------------------------------- layout
    @property
    def n_conv(self) -> int:
        """Number of convolution layers."""
        return len(self.channels)

    @property
    def n_layers(self) -> int:
        """Number of weight layers: the convolutions and the final linear layer."""
        return self.n_conv + 1

    @property
    def padding(self) -> int:
        """Zero padding of every convolution ("same" for stride 1)."""
        return self.kernel_size // 2

    @functools.cached_property
    def feature_shapes(self) -> tuple[tuple[int, int, int], ...]:
        """(C, H, W) of the input and of every convolution's output."""
        from .im2col import conv_output_shape

        shapes = [self.image_shape]
        for c_out, stride in zip(self.channels, self.strides):
            c, h, w = shapes[-1]
            ho, wo = conv_output_shape((1, c, h, w), self.kernel_size, stride, self.padding)
            shapes.append((c_out, ho, wo))
        return tuple(shapes)

    @functools.cached_property
    def slots(self) -> tuple[_Slot, ...]:
        """Name, shape and offset of every parameter tensor in the flat buffer."""
        shapes = []
        k = self.kernel_size
        for i, (c_in, c_out) in enumerate(zip(self.feature_shapes[:-1], self.channels)):
            shapes += [(f"W{i}", (c_out, c_in[0], k, k)), (f"b{i}", (c_out,))]
        features = math.prod(self.feature_shapes[-1])
        shapes += [(f"W{self.n_conv}", (features, self.n_classes)), (f"b{self.n_conv}", (self.n_classes,))]
        slots, offset = [], 0
        for name, shape in shapes:
            slots.append(_Slot(name, shape, offset))
            offset += math.prod(shape)
        return tuple(slots)

    n_params = MLP.n_params
    layer_range = MLP.layer_range
    views = MLP.views
    layer = MLP.layer

    def init_params(self, seed: int = 0) -> np.ndarray:
        """He-initialised weights (normal, std sqrt(2 / fan_in)) and zero biases.

        ``fan_in`` is C_in * k * k for a convolution and the feature count for the
        linear layer. Deterministic: the same seed gives the same buffer everywhere.
        """
        rng = np.random.default_rng(check_int(seed, "seed", 0))
        flat = np.zeros(self.n_params, dtype=self.dtype)
        for i in range(self.n_layers):
            w, _ = self.layer(flat, i)
            fan_in = math.prod(w.shape[1:]) if i < self.n_conv else w.shape[0]
            w[...] = rng.standard_normal(w.shape) * math.sqrt(2.0 / fan_in)
        return flat

    # ---------------------------------------------------------------- compute
    def layer_forward(self, params: np.ndarray, i: int, a: np.ndarray) -> np.ndarray:
        """Output of layer ``i``: conv2d + ReLU for a convolution, ``a @ W + b`` for the last."""
        from .im2col import conv2d

        w, b = self.layer(params, i)
        if i < self.n_conv:
            z = conv2d(a, w, b, stride=self.strides[i], padding=self.padding)
            np.maximum(z, 0, out=z)
            return z
        z = a.reshape(a.shape[0], -1) @ w
        z += b
        return z

    def layer_backward(
        self,
        params: np.ndarray,
        i: int,
        a_in: np.ndarray,
        a_out: np.ndarray,
        grad_out: np.ndarray,
        grad: np.ndarray,
        *,
        need_input_grad: bool = True,
    ) -> np.ndarray | None:
        """Back-propagate through layer ``i``; ADDS its gradients into ``grad`` (see MLP)."""
        from .im2col import conv2d_backward

        w, _ = self.layer(params, i)
        gw, gb = self.layer(grad, i)
        if i < self.n_conv:
            dz = grad_out * (a_out > 0)
            gx, gw_i, gb_i = conv2d_backward(dz, a_in, w, stride=self.strides[i], padding=self.padding)
            gw += gw_i
            gb += gb_i
            return gx if need_input_grad else None
        flat_in = a_in.reshape(a_in.shape[0], -1)
        gw += flat_in.T @ grad_out
        gb += grad_out.sum(axis=0)
        return (grad_out @ w.T).reshape(a_in.shape) if need_input_grad else None

    forward = MLP.forward
    backward = MLP.backward
    loss_and_grad = MLP.loss_and_grad
    predict = MLP.predict
    accuracy = MLP.accuracy

    # ------------------------------------------------------------------ costs
    def flops_per_sample(self) -> dict[str, int]:
        """Floating-point operations of one sample's pass, counting GEMMs only.

        A convolution is one GEMM per sample (the im2col view): H_out * W_out * C_out *
        C_in * k * k multiply-accumulates (:func:`course_lib.cost.conv2d_macs`), 1 MAC =
        2 FLOPs; the linear layer costs features * classes MACs. Backward: the weight
        gradient and the input gradient of EVERY layer (``conv2d_backward`` also returns
        the first layer's input gradient, which training does not need), so backward
        is exactly twice the forward cost. Bias, ReLU and softmax are left out.

        Examples
        --------
        >>> CNN().flops_per_sample()      # 2 * (4608 + 18432 + 2560) MACs forward
        {'forward': 51200, 'backward': 102400, 'total': 153600}
        """
        macs = []
        k2 = self.kernel_size**2
        for (c_in, _, _), (c_out, ho, wo) in zip(self.feature_shapes[:-1], self.feature_shapes[1:]):
            macs.append(ho * wo * c_out * c_in * k2)
        macs.append(math.prod(self.feature_shapes[-1]) * self.n_classes)
        forward = 2 * sum(macs)
        return {"forward": forward, "backward": 2 * forward, "total": 3 * forward}

    # --------------------------------------------------------------- checking
    _check_flat = MLP._check_flat

    def _check_x(self, x) -> np.ndarray:
        x = np.asarray(x)
        c, h, w = self.image_shape
        if x.ndim == 2 and x.shape[1] == c * h * w:
            x = x.reshape(x.shape[0], c, h, w)
        if x.ndim != 4 or x.shape[1:] != (c, h, w):
            raise ValueError(
                f"x must have shape (batch, {c}, {h}, {w}) or (batch, {c * h * w}), got {x.shape}"
            )
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"x must be a float array, got dtype {x.dtype}")
        return x.astype(self.dtype, copy=False)

    def _check_y(self, y, batch: int) -> np.ndarray:
        return _check_labels(y, batch, self.n_classes)


__all__ += ["CNN"]
