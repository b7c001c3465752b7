"""course_lib.conv.fast: the fast engine computes what the readable course_lib.conv.im2col defines.

im2col and col2im are compared bit for bit (equal arrays, same dtype) over many shapes:
batch, channels, size, kernel, stride, padding and dilation drawn by hypothesis, with
the engine's cache blocks made small enough that every shape is cut into several
blocks as well as left whole. The convolution's im2col algorithm is compared with the
readable formula ``weight @ im2col(x)``; the modules' imports keep the speed apart from
the idea (no circle, no private name across modules).
"""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from course_lib.conv import fast as conv_fast
from course_lib.conv.fast import conv2d_im2col, conv2d_im2col_backward, fast_col2im, fast_im2col
from course_lib.conv.geometry import ConvGeometry, backward_arguments, conv_arguments
from course_lib.conv.im2col import col2im, im2col

ROOT = Path(__file__).resolve().parent.parent / "course_lib" / "conv"
#: The modules of course_lib/conv/, and those of them that are the readable ideas.
MODULES = sorted(p.stem for p in ROOT.glob("*.py") if p.stem != "__init__")
READABLE = ("im2col", "geometry")


@st.composite
def geometries(draw, max_batch=3, max_channels=4):
    """(input shape, kernel, stride, padding, dilation) of a valid im2col, empty batches included."""
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    ph, pw = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h_min = max(1, dh * (kh - 1) + 1 - 2 * ph)
    w_min = max(1, dw * (kw - 1) + 1 - 2 * pw)
    h, w = draw(st.integers(h_min, h_min + 10)), draw(st.integers(w_min, w_min + 10))
    n, c = draw(st.integers(0, max_batch)), draw(st.integers(0, max_channels))
    return (n, c, h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw)


#: Staging bytes per block: the engine's own, and small enough to cut every input into blocks.
STAGES = (None, 64)


@contextlib.contextmanager
def _staged(stage_bytes):
    """The engine with ``stage_bytes`` per block (None: its own) inside the ``with``, and its
    own again after it (a patch left behind made every later convolution of the run, the
    CNN's training included, work in 64-byte blocks)."""
    with pytest.MonkeyPatch.context() as mp:
        if stage_bytes is not None:
            mp.setattr(conv_fast, "_STAGE_BYTES", stage_bytes)
        yield


@settings(max_examples=120, deadline=None)
@given(geometry=geometries(), dtype=st.sampled_from(["float32", "float64", "int16", "int64", "uint8"]),
       layout=st.sampled_from(["contiguous", "transposed", "sliced"]), stage=st.sampled_from(STAGES),
       seed=st.integers(0, 2**16))
def test_fast_im2col_is_the_readable_one_bit_for_bit(geometry, dtype, layout, stage, seed):
    shape, k, s, p, d = geometry
    x = (np.random.default_rng(seed).standard_normal(shape) * 50).astype(dtype)
    if layout == "transposed":  # the same values, not C-contiguous
        x = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    elif layout == "sliced":
        x = np.concatenate([x, x], axis=3)[..., : shape[3]]
    with _staged(stage):
        got = fast_im2col(x, k, s, p, d)
    want = im2col(x, k, s, p, d)
    assert got.dtype == want.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@settings(max_examples=120, deadline=None)
@given(geometry=geometries(), dtype=st.sampled_from(["float32", "float64", "int32"]),
       stage=st.sampled_from(STAGES), seed=st.integers(0, 2**16))
def test_fast_col2im_is_the_readable_one_bit_for_bit(geometry, dtype, stage, seed):
    """Float overlaps are summed in the same order: the same bits, not only close."""
    shape, k, s, p, d = geometry
    g = ConvGeometry.from_args(shape, k, s, p, d)
    cols = (np.random.default_rng(seed).standard_normal(g.cols_shape) * 50).astype(dtype)
    with _staged(stage):
        got = fast_col2im(cols, shape, k, s, p, d)
    want = col2im(cols, shape, k, s, p, d)
    assert got.dtype == want.dtype == cols.dtype and got.shape == want.shape == shape
    np.testing.assert_array_equal(got, want)


def test_a_large_input_cut_into_blocks_gives_the_same_columns():
    """A ResNet-like layer: the engine's own blocks (several per call), strides and padding."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 48, 30, 30)).astype(np.float32)
    for k, s, p in ((3, 1, 1), (3, 1, 0), (7, 2, 3), (1, 2, 0)):
        np.testing.assert_array_equal(fast_im2col(x, k, s, p), im2col(x, k, s, p))
        cols = rng.standard_normal(ConvGeometry.from_args(x.shape, k, s, p).cols_shape).astype(np.float32)
        np.testing.assert_array_equal(fast_col2im(cols, x.shape, k, s, p), col2im(cols, x.shape, k, s, p))


def _readable_conv(x, weight, bias, groups, g):
    """conv2d as the readable module states it: weight @ im2col(x) per group, plus the bias."""
    cols = im2col(x, (g.kh, g.kw), (g.sh, g.sw), (g.ph, g.pw), (g.dh, g.dw))
    w = weight.reshape(groups, weight.shape[0] // groups, -1)
    out = w @ cols.reshape(g.n, groups, -1, g.ho * g.wo)
    if bias is not None:
        out += bias.reshape(groups, -1, 1)
    return out.reshape(g.n, weight.shape[0], g.ho, g.wo)


@pytest.mark.parametrize("shape, w_shape, stride, padding, groups", [
    ((2, 4, 9, 7), (6, 4, 3, 3), 1, 1, 1),
    ((3, 6, 11, 11), (6, 2, 3, 2), (2, 1), (1, 0), 3),
    ((20, 8, 16, 16), (8, 8, 3, 3), 1, 1, 1),  # several blocks of samples
])
def test_the_im2col_algorithm_is_weight_times_columns(shape, w_shape, stride, padding, groups):
    """Forward and input gradient: the same GEMMs as the readable formula, so the same bits
    on one BLAS thread; the weight gradient (a sum over samples in another order) closely."""
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal(shape), rng.standard_normal(w_shape), rng.standard_normal(w_shape[0])
    x, w, b, groups, g = conv_arguments(x, w, b, stride, padding, 1, groups)
    with threadpool_limits(1, user_api="blas"):
        np.testing.assert_array_equal(conv2d_im2col(x, w, b, groups, g), _readable_conv(x, w, b, groups, g))
        gy = rng.standard_normal((g.n, w.shape[0], g.ho, g.wo))
        gx, gw, gb = conv2d_im2col_backward(*backward_arguments(gy, x, w, stride, padding, 1, groups))
        go = gy.reshape(g.n, groups, -1, g.ho * g.wo)
        w_t = w.reshape(groups, w.shape[0] // groups, -1).transpose(0, 2, 1)
        want_x = col2im((w_t @ go).reshape(g.cols_shape), x.shape, (g.kh, g.kw), stride, padding)
        np.testing.assert_array_equal(gx, want_x)
    cols = im2col(x, (g.kh, g.kw), stride, padding).reshape(g.n, groups, -1, g.ho * g.wo)
    want_w = np.einsum("ngol,ngkl->gok", go, cols).reshape(w.shape)
    np.testing.assert_allclose(gw, want_w, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(gb, gy.sum(axis=(0, 2, 3)))


# ------------------------------------------------------------------ the modules apart
def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(nesting level: 0 at module level, module, names) of every `from ... import` in a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def visit(node, depth):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom):
                module = "." * child.level + (child.module or "")
                found.append((depth, module, [a.name for a in child.names]))
            visit(child, depth + (isinstance(child, (ast.FunctionDef, ast.ClassDef))))

    visit(tree, 0)
    return found


@pytest.mark.parametrize("name", READABLE)
def test_the_readable_modules_do_not_import_the_fast_ones(name):
    imported = [module for _, module, _ in _imports(ROOT / f"{name}.py")]
    engines = ("fast", "algorithms", "winograd")
    assert not [m for m in imported if m.lstrip(".").split(".")[-1] in engines], imported
    assert set(READABLE) < set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_no_private_name_crosses_a_module_boundary(name):
    private = [(module, n) for _, module, names in _imports(ROOT / f"{name}.py") for n in names
               if n.startswith("_") and module.lstrip(".") != "_validate" and module != "__future__"]
    assert private == []
    text = (ROOT / f"{name}.py").read_text(encoding="utf-8")
    assert not [f"{m}._" for m in MODULES if f"{m}._" in text]


def test_the_fast_modules_say_they_are_for_speed():
    for name in ("fast", "algorithms", "winograd"):
        doc = ast.get_docstring(ast.parse((ROOT / f"{name}.py").read_text(encoding="utf-8")))
        assert "for speed, not for reading" in doc.lower(), name


def test_the_package_lists_its_modules_in_reading_order():
    """course_lib/conv/__init__.py's table names every module of the package, im2col first,
    and the package imports nothing itself."""
    import re

    import course_lib.conv

    listed = re.findall(r"^``(\w+)``", course_lib.conv.__doc__, re.M)
    assert sorted(listed) == MODULES and listed[0] == "im2col", listed
    tree = ast.parse((ROOT / "__init__.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
