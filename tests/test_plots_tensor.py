"""Figures of tensor parallelism and of the bytes each scheme moves."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.plots.tensor import scheme_bytes_figure, tensor_split_diagram


@pytest.mark.parametrize(("workers", "hidden", "blocks"), [(2, 8, "4, 4"), (3, 8, "3, 3, 2"), (5, 3, "1, 1, 1, 0, 0")])
def test_split_diagram_names_the_uneven_blocks(workers, hidden, blocks):
    fig = tensor_split_diagram(workers, hidden)
    assert fig.axes[0].get_title().endswith(f"blocks of {blocks})")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sum(t.startswith("$A_1[:, ") for t in texts) == workers  # a column block of A_1 each
    assert sum(t.startswith("$A_2[") for t in texts) == workers  # and a row block of A_2
    assert sum(t.startswith(f"$Y_{j} = H_{j}") for j in range(workers) for t in texts) == workers


def test_split_diagram_is_readable_and_uses_the_course_notation():
    from matplotlib.text import Text

    from course_lib.plots import figure_to_png
    from course_lib.plots.style import MIN_FONT_PT

    fig = tensor_split_diagram(4, 8)
    assert all(t.get_fontsize() >= MIN_FONT_PT for t in fig.findobj(Text) if t.get_text())
    assert fig.get_figwidth() <= 9.6
    figure_to_png(fig)
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [p.get_window_extent(renderer) for p in ax.patches if p.get_fill() and p.get_facecolor()[3] > 0]
    for text in [t for t in ax.texts if t.get_text()]:  # every label inside one box, or clear of all
        bb = text.get_window_extent(renderer)
        inside = [b for b in boxes if b.x0 - 1 <= bb.x0 and bb.x1 <= b.x1 + 1 and b.y0 - 1 <= bb.y0 and bb.y1 <= b.y1 + 1]
        if not inside:
            assert all(min(bb.x1, b.x1) <= max(bb.x0, b.x0) or min(bb.y1, b.y1) <= max(bb.y0, b.y0) for b in boxes), \
                text.get_text()


def test_bytes_figure_draws_one_line_per_scheme_with_the_values_given():
    fig = scheme_bytes_figure([32, 64, 128], {"data": [9e6] * 3, "tensor": [1e5, 2e5, 4e5]},
                              {"tensor": (64, 2e5)})
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label() in ("data", "tensor")]
    assert [ln.get_label() for ln in lines] == ["data", "tensor"]
    np.testing.assert_array_equal(lines[1].get_ydata(), [1e5, 2e5, 4e5])
    assert lines[0].get_linestyle() != lines[1].get_linestyle()


@pytest.mark.parametrize(("args", "exc", "name"), [
    (([], {"a": []}), ValueError, "batch_sizes"),
    (([1, 2], {"a": [1.0]}), ValueError, "formula"),
    (([1, 2], {"a": [1.0, -1.0]}), ValueError, "formula"),
    (([1, 2], [1.0, 2.0]), TypeError, "formula"),
])
def test_bytes_figure_bad_input(args, exc, name):
    with pytest.raises(exc, match=name):
        scheme_bytes_figure(*args)


@pytest.mark.parametrize(("kw", "exc"), [({"workers": 0}, ValueError), ({"hidden": "8"}, TypeError)])
def test_split_diagram_bad_input(kw, exc):
    with pytest.raises(exc, match=next(iter(kw))):
        tensor_split_diagram(**kw)
