"""course_lib.plots.largebatch: the critical-batch figure carries the data, the fit and its asymptotes."""

import doctest

import numpy as np
import pytest

import course_lib.plots.largebatch as largebatch
from course_lib.critical_batch import CriticalBatchFit
from course_lib.plots import figure_to_png
from course_lib.plots.largebatch import critical_batch_figure

FIT = CriticalBatchFit(n_min=100.0, b_crit=64.0)
SIZES = np.array([8, 64, 512])
STEPS = FIT.steps(SIZES)


def _line(ax, label):
    return next(line for line in ax.get_lines() if line.get_label().startswith(label))


def test_doctests():
    result = doctest.testmod(largebatch)
    assert result.attempted >= 3 and result.failed == 0


def _legends_off_the_axes(fig):
    fig.draw_without_rendering()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert len(legends) == len(fig.axes)
    for legend in legends:
        assert not any(legend.get_window_extent().overlaps(ax.bbox) for ax in fig.axes)


def test_steps_panel_data_fit_and_asymptotes():
    fig = critical_batch_figure(SIZES, STEPS, FIT)
    (ax,) = fig.axes
    x, y = _line(ax, "measured").get_data()
    np.testing.assert_allclose(x, SIZES)
    np.testing.assert_allclose(y, STEPS)
    x, y = _line(ax, "fit").get_data()
    np.testing.assert_allclose(y, FIT.n_min * (1 + FIT.b_crit / x))
    x, y = _line(ax, "perfect scaling").get_data()
    np.testing.assert_allclose(y * x, FIT.n_min * FIT.b_crit)  # steps ~ 1 / B
    assert _line(ax, "floor").get_ydata()[0] == FIT.n_min
    assert "64" in " ".join(t.get_text() for t in ax.texts)  # B_crit is labelled
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert figure_to_png(fig)[:4] == b"\x89PNG"


def test_time_panel_marks_the_fastest_batch_and_skips_impossible_ones():
    grid = np.array([1.0, 2.0, 4.0, 8.0])
    seconds = np.array([np.nan, 3.0, 1.0, 2.0])
    fig = critical_batch_figure(SIZES, STEPS, FIT, times={"N = 2": (grid, seconds)})
    ax = fig.axes[1]
    curve = _line(ax, "N = 2")
    np.testing.assert_allclose(curve.get_ydata(), seconds * 1e3)  # drawn in ms
    assert curve.get_marker() == "o" and curve.get_markevery() == [2]  # at B = 4, the fastest
    _legends_off_the_axes(fig)


def test_axes_of_counts_have_plain_ticks():
    fig = critical_batch_figure(SIZES, STEPS, FIT, times={"N = 2": (np.array([8.0, 64.0]), np.array([2.0, 1.0]))})
    for ax in fig.axes:
        ticks = np.asarray(ax.xaxis.get_majorticklocs())  # batch sizes: powers of two
        assert np.all(np.log2(ticks) == np.round(np.log2(ticks)))
        labels = [ax.yaxis.get_major_formatter()(t, i) for i, t in enumerate(ax.yaxis.get_majorticklocs())]
        assert labels and all("^" not in lab and "e" not in lab for lab in labels)


def test_plain_log_axis_thins_its_ticks_and_checks_its_range():
    from course_lib.plots import new_figure, plain_log_axis

    fig, ax = new_figure()
    plain_log_axis(ax.xaxis, 0.8, 2300, max_ticks=8)
    assert [float(t) for t in ax.xaxis.get_majorticklocs()] == [1, 3, 10, 30, 100, 300, 1000]
    plain_log_axis(ax.xaxis, 1, 1e6, max_ticks=8)
    assert len(ax.xaxis.get_majorticklocs()) == 7  # only powers of ten fit
    with pytest.raises(ValueError, match="lo must be < hi"):
        plain_log_axis(ax.xaxis, 10, 1)


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "name"),
    [
        (([8, 64], [100.0], FIT), {}, ValueError, "equally long"),
        (([8, 64], [100.0, -1.0], FIT), {}, ValueError, "> 0"),
        (("8", [100.0], FIT), {}, TypeError, "batch_sizes"),
        ((SIZES, STEPS, (100, 64)), {}, TypeError, "fit"),
        ((SIZES, STEPS, FIT), {"times": [1, 2]}, TypeError, "times"),
        ((SIZES, STEPS, FIT), {"times": {"a": (1, 2, 3)}}, TypeError, "pair"),
        ((SIZES, STEPS, FIT), {"times": {"a": ([1, 2], ["x", 1])}}, TypeError, "seconds"),
        ((SIZES, STEPS, FIT), {"times": {"a": ([1, 2], [1.0])}}, ValueError, "equally long"),
    ],
)
def test_bad_input(args, kwargs, exc, name):
    with pytest.raises(exc, match=name):
        critical_batch_figure(*args, **kwargs)


@pytest.mark.parametrize("name", ["plain_log_axis", "time_axis"])
def test_log_axes_check_their_axis_and_range_alike(name):
    import course_lib.plots as plots

    set_axis = getattr(plots, name)
    fig, ax = plots.new_figure()
    with pytest.raises(TypeError, match="axis must be a matplotlib Axis"):
        set_axis(ax, 1.0, 10.0)  # the Axes, not ax.xaxis
    with pytest.raises(ValueError, match="lo must be < hi, got 10 and 1"):
        set_axis(ax.yaxis, 10.0, 1.0)
    with pytest.raises(ValueError, match="lo"):
        set_axis(ax.yaxis, 0.0, 1.0)
