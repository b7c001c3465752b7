"""The convolutional variant of the running example: :class:`CNN`.

Same conventions as :class:`course_lib.models.MLP` (one flat parameter buffer with named
views, the same methods), so :func:`course_lib.parallel.train.reference.train_serial` trains it unchanged. Every
convolution is :func:`course_lib.conv.algorithms.conv2d` (im2col + GEMM).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._validate import check_float_dtype, check_int
from .models import MLP, Slot, check_labels, layout_slots

__all__ = ["CNN"]



@dataclass(frozen=True)
class CNN:
    """The running example with convolutions: conv layers (ReLU) and a linear classifier.

    Same conventions as :class:`MLP`: the object holds no parameters, all of them live
    in ONE flat buffer with named views (``W0``, ``b0`` for the first convolution, ...,
    ``W{n}``, ``b{n}`` for the final linear layer), and the methods ``forward``,
    ``backward``, ``loss_and_grad``, ``predict``, ``accuracy``, ``views``, ``layer``,
    ``layer_range``, ``init_params`` and ``flops_per_sample`` behave as the MLP's, so
    :func:`train` trains it unchanged. Every convolution is
    :func:`course_lib.conv.algorithms.conv2d` (``algorithm="im2col"``: im2col + GEMM) with "same" padding
    (``kernel_size // 2``), and its gradients come from
    :func:`course_lib.conv.algorithms.conv2d_backward`.

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
        dtype = check_float_dtype(self.dtype)
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
        from .conv.geometry import conv_output_shape

        shapes = [self.image_shape]
        for c_out, stride in zip(self.channels, self.strides):
            c, h, w = shapes[-1]
            ho, wo = conv_output_shape((1, c, h, w), self.kernel_size, stride, self.padding)
            shapes.append((c_out, ho, wo))
        return tuple(shapes)

    @functools.cached_property
    def slots(self) -> tuple[Slot, ...]:
        """Name, shape and offset of every parameter tensor in the flat buffer."""
        shapes = []
        k = self.kernel_size
        for i, (c_in, c_out) in enumerate(zip(self.feature_shapes[:-1], self.channels)):
            shapes += [(f"W{i}", (c_out, c_in[0], k, k)), (f"b{i}", (c_out,))]
        features = math.prod(self.feature_shapes[-1])
        shapes += [(f"W{self.n_conv}", (features, self.n_classes)), (f"b{self.n_conv}", (self.n_classes,))]
        return layout_slots(shapes)

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
        from .conv.algorithms import conv2d

        w, b = self.layer(params, i)
        if i < self.n_conv:
            # im2col by name, never "auto": a timed choice could differ between processes,
            # and training must be bitwise reproducible (parallel runs against serial ones)
            z = conv2d(a, w, b, stride=self.strides[i], padding=self.padding, algorithm="im2col")
            np.maximum(z, 0, out=z)
            return z
        z = a.reshape(a.shape[0], -1) @ w
        z += b
        return z

    def layer_backward(
        self, params: np.ndarray, i: int, a_in: np.ndarray, a_out: np.ndarray,
        grad_out: np.ndarray, grad: np.ndarray, *, need_input_grad: bool = True,
    ) -> np.ndarray | None:
        """Back-propagate through layer ``i``; ADDS its gradients into ``grad`` (see MLP)."""
        from .conv.algorithms import conv2d_backward

        w, _ = self.layer(params, i)
        gw, gb = self.layer(grad, i)
        if i < self.n_conv:
            dz = grad_out * (a_out > 0)
            gx, gw_i, gb_i = conv2d_backward(dz, a_in, w, stride=self.strides[i], padding=self.padding,
                                             input_grad=need_input_grad)
            gw += gw_i
            gb += gb_i
            return gx
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
        2 FLOPs; the linear layer costs features * classes MACs. Backward, counted as
        :meth:`course_lib.models.MLP.flops_per_sample` and
        :func:`course_lib.dataflow.training_graph` count it: the weight gradient of every
        layer and the input gradient of every layer but the first (training needs no
        gradient of the images, and ``conv2d_backward(input_grad=False)`` skips it), so
        backward is a little under twice the forward. Bias, ReLU and softmax are left out.

        Examples
        --------
        >>> CNN().flops_per_sample()      # forward 2 * (4608 + 18432 + 2560) MACs
        {'forward': 51200, 'backward': 93184, 'total': 144384}
        """
        macs = []
        k2 = self.kernel_size**2
        for (c_in, _, _), (c_out, ho, wo) in zip(self.feature_shapes[:-1], self.feature_shapes[1:]):
            macs.append(ho * wo * c_out * c_in * k2)
        macs.append(math.prod(self.feature_shapes[-1]) * self.n_classes)
        forward = 2 * sum(macs)
        backward = forward + 2 * sum(macs[1:])  # weight gradients + input gradients but the first
        return {"forward": forward, "backward": backward, "total": forward + backward}

    # --------------------------------------------------------------- checking
    check_flat = MLP.check_flat

    def check_x(self, x) -> np.ndarray:
        """``x`` as this model's input batch in its dtype, else TypeError/ValueError."""
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

    def check_y(self, y, batch: int) -> np.ndarray:
        """``y`` as ``batch`` integer labels of this model's classes, else TypeError/ValueError."""
        return check_labels(y, batch, self.n_classes)


