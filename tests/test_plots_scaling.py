"""course_lib.plots: pure figures with the right content."""

import numpy as np
import struct

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
    bundle, metadata = show(fig)._repr_mimebundle_()
    assert bundle["text/plain"] == "<Figure: t>" and bundle["image/png"][:4] == b"\x89PNG"
    # rendered at 2x, shown at the figure's display size: 6.4 in x 100 px/in
    width = struct.unpack(">I", bundle["image/png"][16:20])[0]
    assert width == 1280 and metadata == {"image/png": {"width": 640}}
    assert show(fig, dpi=100)._repr_mimebundle_()[1] == {"image/png": {"width": 640}}


@pytest.mark.parametrize(
    ("hi", "max_ticks", "ticks"),
    [
        (1, 8, [1]),
        (3, 8, [1, 2, 4]),
        (64, 8, [1, 2, 4, 8, 16, 32, 64]),  # 7 powers fit
        (128, 8, [1, 2, 4, 8, 16, 32, 64, 128]),  # 8 fit exactly
        (256, 8, [1, 4, 16, 64, 256]),  # 9 would not: every second power
        (1024, 8, [1, 4, 16, 64, 256, 1024]),
        (1024, 3, [1, 16, 256]),
    ],
)
def test_log2_axis_ticks_at_powers_of_two_with_plain_labels(hi, max_ticks, ticks):
    from course_lib.plots import log2_axis

    fig, ax = new_figure()
    ax.plot([1, hi], [1, hi])
    log2_axis(ax.xaxis, hi, max_ticks=max_ticks)
    assert ax.get_xscale() == "log" and ax.xaxis.get_scale() == "log"
    assert [float(t) for t in ax.xaxis.get_majorticklocs()] == [float(t) for t in ticks]
    assert list(ax.xaxis.get_minorticklocs()) == []
    fmt = ax.xaxis.get_major_formatter()
    assert [fmt(t, i) for i, t in enumerate(ticks)] == [str(t) for t in ticks]


@pytest.mark.parametrize(("kwargs", "match"), [({"hi": 0}, "hi"), ({"hi": float("nan")}, "hi"),
                                               ({"hi": 8, "max_ticks": 1}, "max_ticks")])
def test_log2_axis_rejects_bad_input(kwargs, match):
    from course_lib.plots import log2_axis

    fig, ax = new_figure()
    with pytest.raises(ValueError, match=match):
        log2_axis(ax.yaxis, **kwargs)


def test_amdahl_figure_device_axis_is_base_2():
    ax_s, ax_e = amdahl_figure(0.9, 6, 8, n_max=64).axes
    assert [int(t) for t in ax_s.xaxis.get_majorticklocs()] == [1, 2, 4, 8, 16, 32, 64]
    assert [int(t) for t in ax_e.xaxis.get_majorticklocs()] == [1, 2, 4, 8, 16, 32, 64]
