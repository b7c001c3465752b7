"""The geometry of a convolution: its shapes, and the argument checks made once.

Every convolution of :mod:`course_lib.conv` has the same arguments and the same sizes:
this module holds them, so that :mod:`course_lib.conv.im2col` reads as the algorithm.
:class:`ConvGeometry` is the shapes of one convolution (input, kernel, stride, padding,
dilation, output), :func:`conv_output_shape` its output size; :func:`conv_input`,
:func:`conv_columns`, :func:`conv_arguments`, :func:`backward_arguments` and
:func:`conv_shapes` are the checks each public entry point makes once (never inside a
loop), raising a ``ValueError`` or ``TypeError`` that names the number that does not fit.

Conventions (the same as PyTorch): arrays are NCHW, a weight has shape
``(C_out, C_in / groups, kh, kw)``, the operation is a cross-correlation (the kernel is
not flipped), and ``kernel_size``, ``stride``, ``padding``, ``dilation`` accept an int
or an ``(h, w)`` pair. The output size along each axis is

    H_out = (H + 2 * padding - dilation * (kh - 1) - 1) // stride + 1.

Examples
--------
>>> g = ConvGeometry.from_args((8, 3, 32, 32), 3, stride=2, padding=1)
>>> g.ho, g.wo, g.rows
(16, 16, 27)
>>> conv_output_shape((1, 3, 5, 5), 7)
Traceback (most recent call last):
...
ValueError: kernel height 7 with dilation 1 spans 7 pixels, more than the padded input height 5 + 2 * 0 = 5
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .._validate import check_int

__all__ = [
    "ConvGeometry",
    "backward_arguments",
    "conv_arguments",
    "conv_columns",
    "conv_input",
    "conv_output_shape",
    "conv_shapes",
]


# ----------------------------------------------------------------- sizes
@dataclass(frozen=True)
class ConvGeometry:
    """Shapes of one convolution: input, kernel, stride, padding, dilation and output.

    Build it with :meth:`from_args`, which checks everything and names the numbers that
    do not fit.

    Examples
    --------
    >>> g = ConvGeometry.from_args((8, 3, 224, 224), 7, stride=2, padding=3)
    >>> g.ho, g.wo, g.rows, g.cols_shape
    (112, 112, 147, (8, 147, 12544))
    """

    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    sh: int = 1
    sw: int = 1
    ph: int = 0
    pw: int = 0
    dh: int = 1
    dw: int = 1

    @classmethod
    def from_args(cls, input_shape, kernel_size, stride=1, padding=0, dilation=1) -> ConvGeometry:
        """Check the arguments of :func:`course_lib.conv.im2col.im2col` and friends and return the geometry."""
        shape = tuple(input_shape)
        if len(shape) != 4 or not all(
            (type(s) is int or isinstance(s, numbers.Integral) and not isinstance(s, (bool, np.bool_)))
            and s >= 0
            for s in shape
        ):
            raise ValueError(f"input shape must be 4 non-negative ints (N, C, H, W), got {shape}")
        kh, kw = _pair(kernel_size, "kernel_size", 1)
        sh, sw = _pair(stride, "stride", 1)
        ph, pw = _pair(padding, "padding", 0)
        dh, dw = _pair(dilation, "dilation", 1)
        n, c, h, w = (int(s) for s in shape)
        if h == 0 or w == 0:
            # an empty batch (N = 0) or no channels (C = 0) is fine, as in PyTorch; an image
            # without pixels has no windows to speak of, padded or not
            raise ValueError(
                f"input height H and width W must be >= 1, got H = {h}, W = {w} in input shape "
                f"(N, C, H, W) = {tuple(int(s) for s in shape)}"
            )
        for axis, size, pad, k, d in (("height", h, ph, kh, dh), ("width", w, pw, kw, dw)):
            extent = d * (k - 1) + 1
            if extent > size + 2 * pad:
                raise ValueError(
                    f"kernel {axis} {k} with dilation {d} spans {extent} pixels, more than the "
                    f"padded input {axis} {size} + 2 * {pad} = {size + 2 * pad}"
                )
        return cls(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw)

    @property
    def ho(self) -> int:
        """Output height."""
        return (self.h + 2 * self.ph - self.dh * (self.kh - 1) - 1) // self.sh + 1

    @property
    def wo(self) -> int:
        """Output width."""
        return (self.w + 2 * self.pw - self.dw * (self.kw - 1) - 1) // self.sw + 1

    @property
    def rows(self) -> int:
        """Rows of the column matrix per sample: C * kh * kw (the GEMM's inner size 𝒦)."""
        return self.c * self.kh * self.kw

    @property
    def cols_shape(self) -> tuple[int, int, int]:
        """Shape of ``im2col``'s result: (N, C * kh * kw, H_out * W_out)."""
        return (self.n, self.rows, self.ho * self.wo)

    @property
    def hp(self) -> int:
        """Padded input height."""
        return self.h + 2 * self.ph

    @property
    def wp(self) -> int:
        """Padded input width."""
        return self.w + 2 * self.pw




def conv_output_shape(input_shape, kernel_size, stride=1, padding=0, dilation=1) -> tuple[int, int]:
    """Output height and width of a convolution (or of im2col's windows).

    Examples
    --------
    >>> conv_output_shape((1, 3, 32, 32), 3, stride=2, padding=1)
    (16, 16)
    >>> conv_output_shape((1, 3, 7, 9), (3, 1), dilation=(2, 1))
    (3, 9)
    """
    g = ConvGeometry.from_args(input_shape, kernel_size, stride, padding, dilation)
    return g.ho, g.wo



# ----------------------------------------------------------------- argument checks
# Once, at the public entry points of the package; never inside a loop.
def conv_input(x, kernel_size, stride=1, padding=0, dilation=1) -> tuple[np.ndarray, ConvGeometry]:
    """:func:`course_lib.conv.im2col.im2col`'s arguments checked: ``x`` as a 4-d numeric array, and the geometry.

    Examples
    --------
    >>> x, g = conv_input([[[[1, 2], [3, 4]]]], 2)
    >>> x.shape, g.cols_shape
    ((1, 1, 2, 2), (1, 4, 1))
    """
    x = _array4(x, "x", floats=False)
    return x, ConvGeometry.from_args(x.shape, kernel_size, stride, padding, dilation)


def conv_columns(cols, input_shape, kernel_size, stride=1, padding=0, dilation=1) -> tuple[np.ndarray, ConvGeometry]:
    """:func:`course_lib.conv.im2col.col2im`'s arguments checked: ``cols`` as an array of the right shape, and the geometry.

    Examples
    --------
    >>> conv_columns(np.zeros((1, 4, 5)), (1, 1, 3, 3), 2)
    Traceback (most recent call last):
    ...
    ValueError: cols must have shape (N, C*kh*kw, H_out*W_out) = (1, 4, 4) for input shape (1, 1, 3, 3) and kernel 2x2, got (1, 4, 5)
    """
    if not isinstance(cols, np.ndarray):
        if isinstance(cols, (str, bytes)) or cols is None:
            raise TypeError(f"cols must be a numpy array, got {type(cols).__name__}")
        cols = np.asarray(cols)
    if cols.dtype.kind not in "iuf":
        raise TypeError(f"cols must have an integer or floating-point dtype, got {cols.dtype}")
    g = ConvGeometry.from_args(input_shape, kernel_size, stride, padding, dilation)
    if cols.shape != g.cols_shape:
        raise ValueError(
            f"cols must have shape (N, C*kh*kw, H_out*W_out) = {g.cols_shape} for input shape "
            f"{tuple(input_shape)} and kernel {g.kh}x{g.kw}, got {cols.shape}"
        )
    return cols, g


def conv_arguments(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """:func:`course_lib.conv.algorithms.conv2d`'s arguments checked: ``(x, weight, bias, groups, geometry)``.

    ``x``, ``weight`` and ``bias`` come back C-contiguous in their common dtype.

    Examples
    --------
    >>> x, w, b, groups, g = conv_arguments(np.ones((1, 4, 5, 5), np.float32), np.ones((6, 2, 3, 3)), groups=2)
    >>> x.dtype, groups, (g.ho, g.wo)
    (dtype('float64'), 2, (3, 3))
    """
    x = _array4(x, "x", floats=True)
    weight = _array4(weight, "weight", floats=True)
    if isinstance(groups, (bool, np.bool_)) or not isinstance(groups, numbers.Integral):
        raise TypeError(f"groups must be an int, got {groups!r}")
    groups = int(groups)
    if groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}")
    c_in, c_out = x.shape[1], weight.shape[0]
    if c_in % groups:
        raise ValueError(f"input channels C_in = {c_in} are not divisible by groups = {groups}")
    if c_out % groups:
        raise ValueError(f"output channels C_out = {c_out} are not divisible by groups = {groups}")
    if weight.shape[1] * groups != c_in:
        raise ValueError(
            f"weight expects C_in / groups = {weight.shape[1]} channels per group "
            f"({weight.shape[1]} x groups {groups} = {weight.shape[1] * groups}), "
            f"but x has C_in = {c_in} channels"
        )
    dtype = np.result_type(x.dtype, weight.dtype)
    if bias is not None:
        if not isinstance(bias, np.ndarray):
            bias = np.asarray(bias)
        if bias.dtype not in (np.float32, np.float64):
            raise TypeError(f"bias must have dtype float32 or float64, got {bias.dtype}")
        if bias.shape != (c_out,):
            raise ValueError(f"bias must have shape (C_out,) = ({c_out},), got {bias.shape}")
        bias = bias.astype(dtype, copy=False)
    g = ConvGeometry.from_args(x.shape, weight.shape[2:], stride, padding, dilation)
    x = np.ascontiguousarray(x, dtype=dtype)
    weight = np.ascontiguousarray(weight, dtype=dtype)
    return x, weight, bias, groups, g


def backward_arguments(grad_out, x, weight, stride=1, padding=0, dilation=1, groups=1, input_grad=True):
    """:func:`course_lib.conv.algorithms.conv2d_backward`'s arguments checked: ``(grad_out, x, weight, groups, geometry, input_grad)``.

    ``grad_out`` must have the forward pass's output shape; it comes back C-contiguous
    in the dtype of ``x``.

    Examples
    --------
    >>> backward_arguments(np.zeros((1, 2, 3, 3)), np.zeros((1, 2, 4, 4)), np.zeros((2, 2, 3, 3)))
    Traceback (most recent call last):
    ...
    ValueError: grad_out must have the output shape (1, 2, 2, 2), got (1, 2, 3, 3)
    """
    x, weight, _, groups, g = conv_arguments(x, weight, None, stride, padding, dilation, groups)
    if not isinstance(grad_out, np.ndarray):
        grad_out = np.asarray(grad_out)
    expected = (g.n, weight.shape[0], g.ho, g.wo)
    if grad_out.shape != expected:
        raise ValueError(f"grad_out must have the output shape {expected}, got {grad_out.shape}")
    if grad_out.dtype not in (np.float32, np.float64):
        raise TypeError(f"grad_out must have dtype float32 or float64, got {grad_out.dtype}")
    if not isinstance(input_grad, (bool, np.bool_)):
        raise TypeError(f"input_grad must be True or False, got {input_grad!r}")
    return np.ascontiguousarray(grad_out, dtype=x.dtype), x, weight, groups, g, bool(input_grad)


def conv_shapes(x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1) -> tuple[ConvGeometry, tuple, int]:
    """The shapes of a convolution checked, without arrays: ``(geometry, w_shape, groups)``.

    What :func:`course_lib.conv.algorithms.candidates` and the counts of multiplications
    check: ``w_shape`` is 4 ints (C_out, C_in / groups, kh, kw) that fit ``x_shape`` and
    ``groups``.

    Examples
    --------
    >>> g, w_shape, groups = conv_shapes((2, 4, 9, 9), (6, 2, 3, 3), padding=1, groups=2)
    >>> (g.ho, g.wo), w_shape, groups
    ((9, 9), (6, 2, 3, 3), 2)
    >>> conv_shapes((2, 4, 9, 9), (6, 4, 3, 3), groups=2)
    Traceback (most recent call last):
    ...
    ValueError: w_shape (6, 4, 3, 3) does not fit C_in = 4 with groups = 2: C_in must be w_shape[1] x groups and C_out divisible by groups
    """
    try:
        w_shape = tuple(w_shape)
    except TypeError:
        raise TypeError(f"w_shape must be 4 ints (C_out, C_in / groups, kh, kw), got {w_shape!r}") from None
    if len(w_shape) != 4:
        raise ValueError(f"w_shape must be 4 ints (C_out, C_in / groups, kh, kw), got {w_shape!r}")
    w_shape = tuple(check_int(v, f"w_shape[{i}]", 0 if i < 2 else 1) for i, v in enumerate(w_shape))
    groups = check_int(groups, "groups", 1, 2**31)
    g = ConvGeometry.from_args(x_shape, w_shape[2:], stride, padding, dilation)
    if w_shape[1] * groups != g.c or w_shape[0] % groups:
        raise ValueError(f"w_shape {w_shape} does not fit C_in = {g.c} with groups = {groups}: "
                         "C_in must be w_shape[1] x groups and C_out divisible by groups")
    return g, w_shape, groups


def _pair(value, name: str, minimum: int) -> tuple[int, int]:
    """An int or an (h, w) pair of ints >= minimum, returned as a pair."""
    if type(value) is int:  # fast path (exact int, not bool)
        pair = (value, value)
    elif type(value) is tuple and len(value) == 2 and type(value[0]) is int and type(value[1]) is int:
        pair = value
    elif isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}")
    elif isinstance(value, numbers.Integral):
        pair = (int(value), int(value))
    elif isinstance(value, (tuple, list, np.ndarray)) and len(value) == 2 and all(
        isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in value
    ):
        pair = (int(value[0]), int(value[1]))
    else:
        raise TypeError(f"{name} must be an int or a pair of ints (h, w), got {value!r}")
    if min(pair) < minimum:
        raise ValueError(f"{name} must be >= {minimum} in both directions, got {value!r}")
    return pair


def _array4(x, name: str, *, floats: bool) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        if isinstance(x, (str, bytes)) or x is None:
            raise TypeError(f"{name} must be a numpy array, got {type(x).__name__}")
        x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(
            f"{name} must be a 4-d array (N, C, H, W), got {x.ndim} dimension(s) with shape {x.shape}"
        )
    if floats:
        if x.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name} must have dtype float32 or float64, got {x.dtype}")
    elif x.dtype.kind not in "iuf":
        raise TypeError(f"{name} must have an integer or floating-point dtype, got {x.dtype}")
    return x
