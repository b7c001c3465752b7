"""course_lib.plots.roofline: the roof, the ridge point and the placed operators."""

import numpy as np
import pytest

from course_lib.plots import figure_to_png
from course_lib.plots.roofline import roofline_figure
from course_lib.roofline import Op, Roofline, elementwise_op, gemm_op, im2col_op

ROOF = Roofline(100e9, 25e9, "test machine")  # ridge point 4 FLOP/B


def _markers(ax, marker):
    return [line for line in ax.get_lines() if line.get_marker() == marker]


def test_the_roof_is_min_of_peak_and_bandwidth_line():
    fig = roofline_figure(ROOF, [gemm_op(512, 512, 512)])
    ax = fig.axes[0]
    roof = ax.get_lines()[0]
    x, y = (np.asarray(v) for v in roof.get_data())
    np.testing.assert_allclose(y, np.minimum(100, x * 25))  # in GFLOP/s
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_ylabel() == "attainable rate (GFLOP/s)" and "I_a" in ax.get_xlabel()
    assert ax.get_title() == "roofline: test machine"
    ridge = [line for line in ax.get_lines() if line.get_linestyle() == ":" and
             np.allclose(line.get_xdata(), 4.0)]
    assert ridge, "no ridge line at peak / bandwidth"
    assert any("ridge point\n4 FLOP/B" == t.get_text() for t in ax.texts)


def test_ops_sit_on_the_roof_coloured_by_their_bound():
    ops = [gemm_op(512, 512, 512), elementwise_op(1000, name="ReLU")]
    ax = roofline_figure(ROOF, ops).axes[0]
    gemm, relu = _markers(ax, "o")
    assert gemm.get_xydata().tolist() == [[pytest.approx(256 / 3), 100.0]]
    assert relu.get_xydata().tolist() == [[0.125, pytest.approx(0.125 * 25)]]
    assert gemm.get_color() != relu.get_color()
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[1:] == ["1  GEMM 512×512×512 (I_a = 85.3)", "2  ReLU (I_a = 0.125)"]
    assert {t.get_text() for t in ax.texts} >= {"1", "2"}


def test_a_copy_is_drawn_at_the_left_edge():
    ax = roofline_figure(ROOF, [gemm_op(64, 64, 64), im2col_op(1, 8, 3)]).axes[0]
    (copy,) = _markers(ax, "<")
    assert copy.get_xdata()[0] == pytest.approx(ax.get_xlim()[0] * 1.05)
    assert "I_a = 0: time = bytes / β_mem" in ax.get_legend().get_texts()[2].get_text()


def test_measured_points_are_open_and_joined_to_the_roof():
    ax = roofline_figure(ROOF, [], measured={"step": (2.0, 5e9)}).axes[0]
    (point,) = [line for line in _markers(ax, "o") if line.get_markerfacecolor() == "white"]
    assert point.get_xydata().tolist() == [[2.0, 5.0]]
    gap = [line for line in ax.get_lines() if list(line.get_xdata()) == [2.0, 2.0]]
    assert gap and list(gap[0].get_ydata()) == [5.0, 50.0]  # up to 2 x 25 GB/s
    assert ax.get_legend().get_texts()[1].get_text() == "1  step (measured, I_a = 2)"


def test_coincident_points_share_one_label():
    ops = [Op("a", 10, 100), Op("b", 10, 100)]
    ax = roofline_figure(ROOF, ops).axes[0]
    assert "1,2" in [t.get_text() for t in ax.texts]


def test_tera_units_for_a_gpu_and_a_png():
    fig = roofline_figure(Roofline(125e12, 900e9), [gemm_op(4096, 4096, 4096, itemsize=2)], title="V100")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "attainable rate (TFLOP/s)" and ax.get_title() == "V100"
    assert figure_to_png(fig)[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"roofline": "roof"}, TypeError),
        ({"ops": [1]}, TypeError),
        ({"measured": [(1, 2)]}, TypeError),
        ({"measured": {"a": 1.0}}, TypeError),
        ({"measured": {"a": (1.0, -2.0)}}, ValueError),
        ({"measured": {"a": (0.0, 2.0)}}, ValueError),
        ({"title": 3}, TypeError),
    ],
)
def test_bad_input(kwargs, error):
    args = {"roofline": ROOF, **kwargs}
    with pytest.raises(error):
        roofline_figure(**args)


def test_readable_and_the_key_beside_the_axes():
    from matplotlib.text import Text

    from course_lib.plots.style import MIN_FONT_PT

    ops = [gemm_op(512, 512, 512), elementwise_op(1000), im2col_op(16, 56, 3)]
    fig = roofline_figure(ROOF, ops, measured={"step": (2.0, 5e9)})
    assert all(t.get_fontsize() >= MIN_FONT_PT for t in fig.findobj(Text) if t.get_text())
    figure_to_png(fig)
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1 - 1
    assert 5.0 <= fig.get_figwidth() <= 9.6
