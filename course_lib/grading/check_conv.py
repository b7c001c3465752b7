"""Checks of im2col and col2im (the convolution as one matrix product).

The reference is the definition, one window at a time: column ``oh * W_out + ow`` of
``im2col(x)`` holds, in row ``c kh kw + i kw + j``, input pixel
``(oh s_h - p_h + i d_h, ow s_w - p_w + j d_w)`` of channel ``c`` (zero outside the image);
``col2im`` adds every column back where it came from (its adjoint). The inputs hold small
integers, so every sum is exact: the comparison is bit for bit. A wrong result is compared
with the usual mistakes (the stride or the dilation left out or swapped, padding on one
side, rows or columns in another order; a subtraction, an assignment or a wrong crop in
col2im) to name the one made.
"""

from __future__ import annotations

import numpy as np

from ..conv.geometry import ConvGeometry
from .core import Mistake
from .harness import arrays_differ, learner

__all__ = ["CHECKS", "HINTS"]

MODULE = "course_lib.conv.im2col"

#: (input shape, kernel_size, stride, padding, dilation) of every case, the plain one first.
CASES = (
    ((2, 3, 5, 5), 3, 1, 0, 1),
    ((2, 3, 7, 6), (3, 2), (2, 1), (1, 0), 1),
    ((1, 2, 7, 6), 3, 2, 1, 2),
    ((2, 2, 6, 7), (2, 3), 1, (1, 2), (2, 1)),
)


def _describe(shape, kernel_size, stride, padding, dilation) -> str:
    return (f"x of shape {shape}, kernel_size={kernel_size}, stride={stride}, padding={padding}, "
            f"dilation={dilation}")


def _input(shape, dtype) -> np.ndarray:
    """Distinct small integers (1, 2, ...): each pixel recognisable, padding zeros apart."""
    return (np.arange(int(np.prod(shape))) + 1).reshape(shape).astype(dtype)


def _taps(g: ConvGeometry, rule: str = "right"):
    """Row and column of the input each (kernel offset, window) reads, under ``rule``:
    the definition (``right``) or a usual mistake."""
    s, d, p = (g.sh, g.sw), (g.dh, g.dw), (g.ph, g.pw)
    if rule == "stride":  # the windows step by 1
        s = (1, 1)
    elif rule == "dilation":  # the taps are adjacent
        d = (1, 1)
    elif rule == "swapped":  # stride and dilation exchanged
        s, d = d, s
    elif rule == "one side":  # all the padding after the image
        p = (0, 0)
    oh, ow = np.arange(g.ho)[:, None], np.arange(g.wo)[None, :]
    return [(i, j, oh * s[0] - p[0] + i * d[0], ow * s[1] - p[1] + j * d[1])
            for i in range(g.kh) for j in range(g.kw)]


def _unfold(x: np.ndarray, g: ConvGeometry, rule: str = "right") -> np.ndarray:
    """im2col by its definition (or by a usual mistake, ``rule``)."""
    out = np.zeros((g.n, g.c, g.kh, g.kw, g.ho, g.wo), dtype=x.dtype)
    for i, j, r, c in _taps(g, rule):
        inside = (r >= 0) & (r < g.h) & (c >= 0) & (c < g.w)
        out[:, :, i, j] = np.where(inside, x[:, :, np.clip(r, 0, g.h - 1), np.clip(c, 0, g.w - 1)], 0)
    if rule == "layout":  # rows ordered (offset, channel)
        out = out.transpose(0, 2, 3, 1, 4, 5)
    if rule == "windows":  # columns ordered (ow, oh)
        out = out.transpose(0, 1, 2, 3, 5, 4)
    return out.reshape(g.n, g.c * g.kh * g.kw, g.ho * g.wo)


def _fold(cols: np.ndarray, g: ConvGeometry, rule: str = "right") -> np.ndarray:
    """col2im by its definition (or by a usual mistake, ``rule``)."""
    windows = cols.reshape(g.n, g.c, g.kh, g.kw, g.ho, g.wo)
    if rule in ("assigned", "crop"):  # on a padded image, as the readable loop does
        padded = np.zeros((g.n, g.c, g.h + 2 * g.ph, g.w + 2 * g.pw), dtype=cols.dtype)
        for i, j, r, c in _taps(g):
            if rule == "assigned":
                padded[:, :, r + g.ph, c + g.pw] = windows[:, :, i, j]
            else:
                np.add.at(padded, (slice(None), slice(None), r + g.ph, c + g.pw), windows[:, :, i, j])
        return padded[:, :, : g.h, : g.w] if rule == "crop" else padded[:, :, g.ph : g.ph + g.h, g.pw : g.pw + g.w]
    out = np.zeros((g.n, g.c, g.h, g.w), dtype=cols.dtype)
    for i, j, r, c in _taps(g, rule):
        inside = (r >= 0) & (r < g.h) & (c >= 0) & (c < g.w)
        rr, cc = np.broadcast_to(r, inside.shape)[inside], np.broadcast_to(c, inside.shape)[inside]
        np.add.at(out, (slice(None), slice(None), rr, cc), windows[:, :, i, j][:, :, inside])
    return -out if rule == "subtracted" else out


#: What each mistake looks like, in the learner's words.
IM2COL_MISTAKES = {
    "stride": "the windows step by 1, not by the stride: window (oh, ow) starts at row oh * stride - padding",
    "dilation": "the kernel's taps are adjacent: with dilation d, offset (i, j) reads row oh * stride - padding + i * d",
    "swapped": "stride and dilation are swapped: the window moves by the stride, its taps are dilation apart",
    "one side": "the padding is all on one side: pad `padding` zeros before AND after the image (np.pad with (p, p))",
    "layout": "the rows are in the wrong order: row c * kh * kw + i * kw + j holds channel c at kernel offset (i, j)",
    "windows": "the columns are in the wrong order: column oh * W_out + ow holds window (oh, ow), row by row",
}
COL2IM_MISTAKES = {
    "subtracted": "every value has the wrong sign: col2im ADDS the columns into the image (+=), it does not subtract",
    "assigned": ("where windows overlap, only one value is left: a pixel covered by several windows receives "
                 "their SUM (+=, not =)"),
    "crop": "the image is cut from the wrong place: drop `padding` rows and columns on each side "
            "(padded[:, :, p_h : p_h + H, p_w : p_w + W])",
    "stride": IM2COL_MISTAKES["stride"],
    "dilation": IM2COL_MISTAKES["dilation"],
    "swapped": IM2COL_MISTAKES["swapped"],
}


def _shape_hint(got, g: ConvGeometry) -> str:
    """Why an im2col result has the shape ``got``, when it is a usual mistake."""
    if tuple(got) == (g.n, g.c * g.kh * g.kw, g.ho, g.wo):
        return ": the windows are not flattened into one axis of H_out * W_out columns"
    if tuple(got) == (g.n, g.ho * g.wo, g.c * g.kh * g.kw):
        return ": rows and columns are swapped (one ROW per kernel tap, one COLUMN per window)"
    for what, kw in (("stride", dict(stride=1)), ("padding", dict(padding=0)), ("dilation", dict(dilation=1))):
        args = dict(stride=(g.sh, g.sw), padding=(g.ph, g.pw), dilation=(g.dh, g.dw)) | kw
        if args != dict(stride=(g.sh, g.sw), padding=(g.ph, g.pw), dilation=(g.dh, g.dw)):
            try:
                alt = ConvGeometry.from_args((g.n, g.c, g.h, g.w), (g.kh, g.kw), **args)
            except ValueError:
                continue
            if tuple(got) == alt.cols_shape:
                return f": the {what} is left out (H_out = (H + 2 p - d (k - 1) - 1) // s + 1)"
    return ""


def check_im2col() -> None:
    im2col = learner(MODULE, "im2col")
    for shape, k, s, p, d in CASES:
        for dtype in (np.float32, np.int64):
            x = _input(shape, dtype)
            g = ConvGeometry.from_args(shape, k, s, p, d)
            got = im2col(x.copy(), k, s, p, d)
            said = f"im2col({_describe(shape, k, s, p, d)})"
            if not isinstance(got, np.ndarray):
                raise Mistake(f"{said} returned {type(got).__name__}, not a numpy array")
            if got.shape != g.cols_shape:
                raise Mistake(f"{said} has shape {got.shape}, expected (N, C kh kw, H_out W_out) = "
                              f"{g.cols_shape}{_shape_hint(got.shape, g)}")
            if got.dtype != x.dtype:
                raise Mistake(f"{said} returned {got.dtype} for a {x.dtype} input: keep the input's dtype")
            expected = _unfold(x, g)
            if np.array_equal(got, expected):
                continue
            for rule, why in IM2COL_MISTAKES.items():
                if np.array_equal(got, _unfold(x, g, rule)):
                    raise Mistake(f"im2col: {why} (seen with {_describe(shape, k, s, p, d)})")
            raise Mistake(f"{said} differs from the definition: {_first_cell(got, expected, g)}")


def _first_cell(got: np.ndarray, expected: np.ndarray, g: ConvGeometry) -> str:
    n, row, col = (int(v[0]) for v in np.nonzero(got != expected))
    c, rest = divmod(row, g.kh * g.kw)
    i, j = divmod(rest, g.kw)
    oh, ow = divmod(col, g.wo)
    return (f"sample {n}, row {row} (channel {c}, kernel offset ({i}, {j})), column {col} (window "
            f"({oh}, {ow})) holds {got[n, row, col]!r}, expected {expected[n, row, col]!r} (input pixel "
            f"({oh * g.sh - g.ph + i * g.dh}, {ow * g.sw - g.pw + j * g.dw}), zero if outside the image)")


def check_col2im() -> None:
    col2im = learner(MODULE, "col2im")
    for shape, k, s, p, d in CASES:
        g = ConvGeometry.from_args(shape, k, s, p, d)
        rng = np.random.default_rng(1)
        cols = rng.integers(-8, 9, g.cols_shape).astype(np.float32)  # exact sums in any order
        said = f"col2im(cols, {_describe(shape, k, s, p, d)})"
        got = col2im(cols.copy(), shape, k, s, p, d)
        if not isinstance(got, np.ndarray):
            raise Mistake(f"{said} returned {type(got).__name__}, not a numpy array")
        if got.shape != tuple(shape):
            padded = (g.n, g.c, g.h + 2 * g.ph, g.w + 2 * g.pw)
            hint = ": the padding is still there: crop it off" if got.shape == padded else ""
            raise Mistake(f"{said} has shape {got.shape}, expected the input's {tuple(shape)}{hint}")
        if got.dtype != cols.dtype:
            raise Mistake(f"{said} returned {got.dtype} for {cols.dtype} columns: keep their dtype")
        expected = _fold(cols, g)
        if np.array_equal(got, expected):
            continue
        for rule, why in COL2IM_MISTAKES.items():
            if np.array_equal(got, _fold(cols, g, rule)):
                raise Mistake(f"col2im: {why} (seen with {_describe(shape, k, s, p, d)})")
        x = _input(shape, np.float32)
        lhs, rhs = float(np.vdot(_unfold(x, g), cols)), float(np.vdot(x, got))
        raise Mistake(f"{said} is not im2col's adjoint: <im2col(x), cols> = {lhs:g} but <x, col2im(cols)> = "
                      f"{rhs:g}; {arrays_differ(got, expected)}")


CHECKS = {"im2col": check_im2col, "col2im": check_col2im}

HINTS = {
    "im2col": (
        "Pad the image first (`np.pad`, `padding` zeros on each side of H and W). Then think of one kernel "
        "offset `(i, j)` at a time: across all windows, it reads a regular grid of pixels.",
        "For offset `(i, j)` the grid's rows are `i * d_h, i * d_h + s_h, ...` (H_out of them), its columns "
        "`j * d_w, j * d_w + s_w, ...`: one slice with a step per axis, `padded[:, :, rows, columns]`.",
        "Write them into an array shaped `(N, C, kh, kw, H_out, W_out)` and reshape it to "
        "`(N, C * kh * kw, H_out * W_out)` at the end: the row order then comes out right by itself.",
    ),
    "col2im": (
        "col2im undoes im2col's reading: every value goes back to the pixel it was read from. Where windows "
        "overlap, the values ADD.",
        "Reshape `cols` to `(N, C, kh, kw, H_out, W_out)`, start from a zero padded image, and for each kernel "
        "offset `(i, j)` add `windows[:, :, i, j]` into the same strided slice im2col read.",
        "Crop the padding off at the end: rows `p_h : p_h + H`, columns `p_w : p_w + W`.",
    ),
}
