"""course_lib.plots: pure figures with the right content."""

import struct

import numpy as np
import pytest

from course_lib import scaling
from course_lib.plots import figure_to_png, new_figure, show
from course_lib.plots.scaling import amdahl_figure, laws_figure, measured_speedup_figure


def _line(ax, label):
    return next(line for line in ax.get_lines() if line.get_label().startswith(label))


def _legends_off_the_axes(fig):
    fig.draw_without_rendering()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    for legend in legends:
        assert not any(legend.get_window_extent().overlaps(ax.bbox) for ax in fig.axes)


def test_amdahl_figure_curves_marker_and_limit():
    fig = amdahl_figure(0.9, 6, 8, n_max=256)
    ax_s, ax_e = fig.axes
    ideal = _line(ax_s, "s = N")
    x, y = ideal.get_data()
    assert np.allclose(y, scaling.amdahl(0.9, x))
    limit = _line(ax_s, "limit")
    assert limit.get_ydata()[0] == pytest.approx(10)
    assert ax_s.get_xscale() == "log" and ax_s.get_yscale() == "log"
    # the efficiency panel shows S/N, in the same colours and styles
    solid, dashed = ax_e.get_lines()[:2]
    x, y = solid.get_data()
    assert np.allclose(y, scaling.amdahl(0.9, x) / x)
    assert dashed.get_linestyle() == "--" and solid.get_color() == ideal.get_color()
    _legends_off_the_axes(fig)


def test_amdahl_general_form_is_the_exact_formula_without_a_kink():
    """The dashed curve keeps s/N = 6/8 and starts where s = 1 (N = 8/6): no clipped s, no corner."""
    ax_s, ax_e = amdahl_figure(0.9, 6, 8, n_max=256).axes
    x, y = _line(ax_s, "s = 0.75·N").get_data()
    assert x[0] == pytest.approx(8 / 6) and x[-1] == 256
    np.testing.assert_allclose(y, scaling.amdahl(0.9, 0.75 * x))  # never s = max(., 1)
    assert np.all(x[1:] / x[:-1] < 1.05)  # a fine grid: no straight 1 -> 2 segment
    slope = np.diff(np.log(y)) / np.diff(np.log(x))
    assert np.all(np.abs(np.diff(slope)) < 0.05)  # smooth on the log-log axes
    x, y = ax_e.get_lines()[1].get_data()
    np.testing.assert_allclose(y, scaling.amdahl(0.9, 0.75 * x) / x)


def test_amdahl_figure_writes_the_values_at_the_marked_n():
    fig = amdahl_figure(0.95, 12, 16)
    ax_s, ax_e = fig.axes
    assert [t.get_text() for t in ax_s.texts] == ["S(16) = 9.14", "S = 7.74 at s = 12"]
    assert [t.get_text() for t in ax_e.texts] == ["η(16) = 0.571", "η = 0.484 at s = 12"]
    fig.draw_without_rendering()
    for ax in (ax_s, ax_e):  # inside the axes, one above the other
        a, b = (t.get_window_extent() for t in ax.texts)
        assert not a.overlaps(b) and a.y0 > b.y0
        for box in (a, b):
            assert ax.bbox.x0 <= box.x0 and box.x1 <= ax.bbox.x1
            assert ax.bbox.y0 <= box.y0 and box.y1 <= ax.bbox.y1


@pytest.mark.parametrize(("p", "s", "n"), [(0.95, 1, 1024), (0.5, 1024, 1), (0.99, 1, 1), (1.0, 16, 16)])
def test_amdahl_figure_labels_stay_inside_at_the_slider_extremes(p, s, n):
    fig = amdahl_figure(p, s, n, n_max=1024)
    fig.draw_without_rendering()
    for ax in fig.axes:
        boxes = [t.get_window_extent() for t in ax.texts]
        assert boxes and all(ax.bbox.x0 <= b.x0 and b.x1 <= ax.bbox.x1 + 1 and ax.bbox.y0 <= b.y0
                             and b.y1 <= ax.bbox.y1 + 1 for b in boxes)
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


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
    assert [t.get_text() for t in ax.texts] == ["Gustafson: S(32) = 25.8", "Amdahl: S(32) = 4.44"]
    _legends_off_the_axes(fig)


def _powers_of_two(axis):
    ticks = np.asarray(axis.get_majorticklocs())
    return bool(np.all(np.log2(ticks) == np.round(np.log2(ticks))))


def test_measured_speedup_fit_to_two_points_is_an_illustration():
    fig = measured_speedup_figure([1, 2], [1.0, 1.7], fit_p=0.8)
    ax = fig.axes[0]
    fit = _line(ax, "Amdahl fit")
    assert fit.get_label() == "Amdahl fit to 2 points, p = 0.800 (illustration, not a law)"
    assert fit.get_linestyle() == "--"
    assert "measured" in [line.get_label() for line in ax.get_lines()]
    # no ticks at 1.2 or 1.4 processes: powers of two on both base-2 log axes
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert [float(t) for t in ax.xaxis.get_majorticklocs()] == [1.0, 2.0]
    assert _powers_of_two(ax.yaxis) and ax.get_xlabel() == "devices N"
    _legends_off_the_axes(fig)


def test_measured_speedup_fit_to_many_points_is_solid_with_its_error():
    n = np.array([1, 2, 4, 8, 16, 32, 64])
    s = scaling.amdahl(0.98, n) * np.array([1, 1.01, 0.99, 1.02, 0.98, 1.01, 0.99])
    fit = scaling.fit_amdahl(n, s)
    ax = measured_speedup_figure(n, s, fit=fit, xlabel="n = chips / 16").axes[0]
    line = _line(ax, "Amdahl fit")
    assert line.get_linestyle() == "-" and "7 points" in line.get_label() and "±" in line.get_label()
    np.testing.assert_allclose(line.get_ydata(), scaling.amdahl(fit.p, line.get_xdata()))
    assert _line(ax, "ideal").get_label() == "ideal, S = n"  # the x axis' symbol
    # log2 axes: n = 1, 2, 4 are as far apart as 16, 32, 64
    assert [int(t) for t in ax.xaxis.get_majorticklocs()] == [1, 2, 4, 8, 16, 32, 64]
    assert _powers_of_two(ax.yaxis)
    with pytest.raises(ValueError, match="not both"):
        measured_speedup_figure(n, s, fit=fit, fit_p=0.9)


def test_measured_speedup_draws_both_fits_with_their_loss():
    """Issue 38 H1: the fit of each loss, told apart by colour AND line style, named by its loss."""
    n = np.array([1, 2, 4, 8, 16, 32, 64])
    s = scaling.amdahl(0.99, n) * np.array([1, 0.96, 1.0, 0.97, 0.95, 1.02, 1.03])
    fits = [scaling.fit_amdahl(n, s, loss=k) for k in ("time", "speedup")]
    fig = measured_speedup_figure(n, s, fit=fits, xlabel="n = chips / 16")
    ax = fig.axes[0]
    in_time, in_speedup = _line(ax, "Amdahl fit in run time 1/S"), _line(ax, "Amdahl fit in speedup S")
    for line, fit in ((in_time, fits[0]), (in_speedup, fits[1])):
        np.testing.assert_allclose(line.get_ydata(), scaling.amdahl(fit.p, line.get_xdata()))
        assert f"p = {fit.p:.3f} ± {fit.stderr:.3f}" in line.get_label()
    assert in_time.get_color() != in_speedup.get_color()
    assert in_time.get_linestyle() != in_speedup.get_linestyle()
    assert _line(ax, "measured").get_color() not in (in_time.get_color(), in_speedup.get_color())
    _legends_off_the_axes(fig)
    # one fit names its loss too; a bare p has none to name
    single = measured_speedup_figure(n, s, fit=fits[1]).axes[0]
    assert _line(single, "Amdahl fit").get_label().startswith("Amdahl fit to 7 points in speedup S, p = ")
    with pytest.raises(TypeError, match="AmdahlFit"):
        measured_speedup_figure(n, s, fit=[fits[0], 0.99])
    with pytest.raises(ValueError, match="at least one"):
        measured_speedup_figure(n, s, fit=[])


def test_measured_speedup_more_series_and_no_fit():
    fig = measured_speedup_figure([1, 2, 4], [1.0, 1.8, 3.1], label="conv2d",
                                  more={"GEMM": ([1, 2, 4], [1.0, 1.9, 3.6])}, xlabel="threads N")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["ideal, S = N", "conv2d", "GEMM"]
    np.testing.assert_allclose(_line(ax, "GEMM").get_ydata(), [1.0, 1.9, 3.6])
    assert _line(ax, "GEMM").get_color() != _line(ax, "conv2d").get_color()
    with pytest.raises(TypeError, match="more"):
        measured_speedup_figure([1, 2], [1, 2], more={"x": [1, 2, 3]})


def test_a_slower_extra_series_stays_on_the_axes():
    """A contended run once drew a GEMM at S = 0.52 below the axis (its limits saw conv2d only)."""
    ax = measured_speedup_figure([1, 2], [1.0, 0.94], more={"GEMM": ([1, 2], [1.0, 0.52])}).axes[0]
    assert ax.get_ylim()[0] < 0.52 and ax.get_ylim()[1] > 2


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


@pytest.mark.parametrize("s", [11.3, 13.5, 2**3.75, 3.0, 1.0])
def test_amdahl_figure_draws_every_s_the_base2_slider_reaches(s):
    # s = 13.5 at N = 16: ratio * (N / s) rounds to 0.999...; the browser test hit it
    fig = amdahl_figure(p=0.95, s=s, n=16, n_max=1024)
    dashed = [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"][0]
    assert np.all(np.isfinite(dashed.get_ydata())) and dashed.get_ydata()[0] >= 1.0 - 1e-12
