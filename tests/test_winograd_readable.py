"""course_lib.conv.winograd.winograd_f2x2_3x3, the readable Winograd F(2 x 2, 3 x 3).

It is held against the fast engine of the same module (``conv2d_winograd``, tiles 2 and 4)
and against references that share no code with it: the readable ``weight @ im2col(x)``
and the plain loops of ``conv2d_direct``. Shapes are drawn by hypothesis: even and odd
output sizes (an odd one has a zero row or column added, then cut), one tile to several,
one channel to several.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_teaching_core import MACHINERY, MAX_BODY, body_lines

from course_lib.conv.im2col import conv2d_direct, im2col
from course_lib.conv.winograd import conv2d_winograd, winograd_f2x2_3x3, winograd_matrices

#: float64 throughout: the transforms of F(2 x 2, 3 x 3) are exact in binary, so the
#: algorithms differ by a few roundings of the sums only.
RTOL, ATOL = 1e-12, 1e-12


def _im2col_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The convolution as the readable module states it: weight @ im2col(x)."""
    n, _, h, wd = x.shape
    return (w.reshape(w.shape[0], -1) @ im2col(x, 3)).reshape(n, w.shape[0], h - 2, wd - 2)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 4), k=st.integers(1, 4),
       h=st.integers(3, 12), w=st.integers(3, 12), seed=st.integers(0, 2**16))
@example(n=1, c=1, k=1, h=4, w=4, seed=0)  # one tile
@example(n=1, c=1, k=1, h=3, w=3, seed=0)  # one output pixel: a zero row and column added
@example(n=2, c=3, k=2, h=9, w=6, seed=1)  # odd output height, even width
def test_the_readable_winograd_is_the_engine_and_the_convolution(n, c, k, h, w, seed):
    rng = np.random.default_rng(seed)
    x, kernels = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, 3, 3))
    got = winograd_f2x2_3x3(x, kernels)
    assert got.shape == (n, k, h - 2, w - 2) and got.dtype == np.float64
    reference = _im2col_conv(x, kernels)
    np.testing.assert_allclose(got, reference, rtol=RTOL, atol=ATOL)
    for tile in (2, 4):
        np.testing.assert_allclose(got, conv2d_winograd(x, kernels, tile=tile), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("n", "c", "k", "h", "w"), [(1, 1, 1, 4, 4), (2, 3, 2, 6, 7), (1, 2, 3, 5, 5)])
def test_the_readable_winograd_is_the_definition(n, c, k, h, w):
    rng = np.random.default_rng(n + c + k + h + w)
    x, kernels = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, 3, 3))
    np.testing.assert_allclose(winograd_f2x2_3x3(x, kernels), conv2d_direct(x, kernels), rtol=RTOL, atol=ATOL)


def test_float32_input_agrees_with_the_float32_engine():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 8, 10, 10)).astype(np.float32)
    kernels = rng.standard_normal((4, 8, 3, 3)).astype(np.float32)
    engine = conv2d_winograd(x, kernels, tile=2)
    np.testing.assert_allclose(winograd_f2x2_3x3(x, kernels), engine, rtol=0, atol=1e-5 * np.abs(engine).max())


def test_the_written_out_matrices_are_the_derived_ones():
    """B^T, G, A^T typed into the readable function are winograd_matrices(2)'s (Cook-Toom)."""
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(winograd_f2x2_3x3)))
    typed = {node.targets[0].id: np.array(ast.literal_eval(node.value.args[0]), dtype=float)
             for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and isinstance(node.targets[0], ast.Name) and node.targets[0].id in ("bt", "g", "at")}
    at, g, bt = winograd_matrices(2)
    for name, derived in (("at", at), ("g", g), ("bt", bt)):
        np.testing.assert_array_equal(typed[name], derived, err_msg=name)


def test_the_readable_winograd_is_short_and_free_of_machinery():
    lines = body_lines(winograd_f2x2_3x3)
    assert len(lines) <= MAX_BODY, len(lines)
    assert [line for line in lines if MACHINERY.search(line.split("#")[0])] == []
