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
    assert sum(t.startswith("A[:, ") for t in texts) == workers


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
