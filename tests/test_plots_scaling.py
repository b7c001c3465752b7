"""course_lib.plots: pure figures with the right content."""

import numpy as np
import pytest

from course_lib import scaling
from course_lib.plots import figure_to_png, new_figure, show
from course_lib.plots.scaling import amdahl_figure, laws_figure, measured_speedup_figure


def _line(ax, label):
    return next(line for line in ax.get_lines() if line.get_label().startswith(label))


def test_amdahl_figure_curves_marker_and_limit():
    fig = amdahl_figure(0.9, 6, 8, n_max=256)
    ax_s, ax_e = fig.axes
    ideal = _line(ax_s, "Amdahl, s = N")
    x, y = ideal.get_data()
    assert np.allclose(y, scaling.amdahl(0.9, x))
    limit = _line(ax_s, "limit")
    assert limit.get_ydata()[0] == pytest.approx(10)
    assert ax_s.get_xscale() == "log" and ax_s.get_yscale() == "log"
    # the efficiency panel shows S/N
    x, y = _line(ax_e, "s = N").get_data()
    assert np.allclose(y, scaling.amdahl(0.9, x) / x)


def test_amdahl_figure_without_limit_when_p_is_one():
    fig = amdahl_figure(1.0, 4, 4)
    assert not any(line.get_label().startswith("limit") for line in fig.axes[0].get_lines())


def test_laws_figure_shows_both_laws():
    fig = laws_figure(0.8, 32)
    ax = fig.axes[0]
    x, y = _line(ax, "Gustafson").get_data()
    assert np.allclose(y, scaling.gustafson(0.8, x))
    x, y = _line(ax, "Amdahl").get_data()
    assert np.allclose(y, scaling.amdahl(0.8, x))


def test_measured_speedup_figure_with_fit():
    fig = measured_speedup_figure([1, 2], [1.0, 1.7], fit_p=0.8)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert any("p = 0.800" in lab for lab in labels) and "measured" in labels


def test_png_and_show():
    fig, ax = new_figure()
    ax.set_title("t")
    png = figure_to_png(fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    bundle = show(fig)._repr_mimebundle_()
    assert bundle["text/plain"] == "<Figure: t>" and bundle["image/png"][:4] == b"\x89PNG"
