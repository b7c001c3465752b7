"""course_lib.plots.cost: figures of chapter 03 carry the right data and labels."""

import numpy as np
import pytest

from course_lib import alpha_beta, cost
from course_lib.critical_batch import BatchRun
from course_lib.datasets import load_dnn_models, load_hardware
from course_lib.plots import figure_to_png
from course_lib.plots.cost import (
    calculator_figure,
    cnn_calculator_figure,
    comm_efficiency_figure,
    large_batch_figure,
    levers_figure,
    time_ladder_figure,
    transformer_calculator_figure,
)


def _line(ax, label):
    return next(line for line in ax.get_lines() if line.get_label().startswith(label))


def _texts(fig):
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def _legends_off_the_plots(fig):
    fig.draw_without_rendering()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    for legend in legends:  # axes drawn without axis lines (a text panel) hold no data
        assert not any(legend.get_window_extent().overlaps(ax.bbox) for ax in fig.axes if ax.axison)


def test_levers_figure_names_every_factor():
    fig = levers_figure()
    text = _texts(fig)
    for symbol in ("$D$", "$C$", "$r$", "$N$", r"$\eta$"):
        assert symbol in text
    assert "distributed" in text and "fixed by the problem" in text
    assert figure_to_png(fig)[:4] == b"\x89PNG"


def test_levers_figure_is_a_real_fraction_and_says_what_is_true():
    """T = D C / (r N eta): D and C above the bar, r, N and eta below it (not "D x C / r x N x eta")."""
    fig = levers_figure()
    ax = fig.axes[0]
    (bar,) = [line for line in ax.get_lines() if len(set(line.get_ydata())) == 1]
    y_bar = bar.get_ydata()[0]
    at = {t.get_text(): t.get_position()[1] for t in ax.texts}
    assert at["$D$"] > y_bar and at["$C$"] > y_bar
    assert at["$r$"] < y_bar and at["$N$"] < y_bar and at[r"$\eta$"] < y_bar
    text = _texts(fig)
    assert "Moore" not in text and "clock speed" in text and "tensor cores" in text
    # sized to its content: no empty third at the bottom
    fig.draw_without_rendering()
    lowest = min(t.get_window_extent().y0 for t in ax.texts)
    assert lowest < 0.15 * fig.bbox.height


def test_calculator_figure_curve_and_summary():
    fig = calculator_figure(1e6, 1e9, 2e12, 8, 0.5, 0.5, device_label="test device")
    ax, ax_text = fig.axes
    real, ideal = _line(ax, "η = 0.5"), _line(ax, "ideal")
    x, y = real.get_data()
    np.testing.assert_allclose(y, cost.training_time(1e6, 1e9, 1e12, x, 0.5))
    assert y[0] == pytest.approx(1000.0)  # N = 1: eta(1) = 1
    x, y = ideal.get_data()
    np.testing.assert_allclose(y, cost.training_time(1e6, 1e9, 1e12, x))
    # the ideal line is dashed and drawn on top of the thicker curve, so both show at eta = 1
    assert ideal.get_linestyle() != "-" and ideal.get_zorder() > real.get_zorder()
    assert ideal.get_linewidth() < real.get_linewidth()
    # marker at N = 8: 1e15 / (1e12 * 8 * 0.5) = 250 s
    marker = [line for line in ax.get_lines() if line.get_marker() == "o"][0]
    assert marker.get_xdata()[0] == 8 and marker.get_ydata()[0] == pytest.approx(250.0)
    text = _texts(fig)
    assert "4.17 min" in text and "test device" in text
    assert "D = 1M samples" in text and "R = r·N·η = 4 TFLOP/s" in text and "N = 8, η = 0.5" in text
    _legends_off_the_plots(fig)


def test_calculator_figure_one_device_ignores_eta():
    """At eta = 0.01 the old calculator made one device 100x slower than ideal."""
    fig = calculator_figure(1e6, 1e9, 2e12, 1, 0.5, 0.01)
    ax = fig.axes[0]
    marker = [line for line in ax.get_lines() if line.get_marker() == "o"][0]
    assert marker.get_ydata()[0] == pytest.approx(1000.0)  # 1e15 FLOP at 1 TFLOP/s, no eta
    assert _line(ax, "η = 0.01").get_ydata()[0] == _line(ax, "ideal").get_ydata()[0]
    assert "N = 1: η = 1" in _texts(fig)


def test_calculator_time_axis_ticks_are_durations_in_words():
    ax = calculator_figure(1e6, 1e9, 2e12, 8, 0.5, 0.5).axes[0]
    fmt = ax.yaxis.get_major_formatter()
    words = [fmt(t, i) for i, t in enumerate(ax.yaxis.get_majorticklocs())]
    assert words and all(w.split()[0].replace(",", "").isdigit() for w in words)
    assert {"1 s", "1 min"} <= set(words)  # 1000 s on one device, 0.5 s on 4096
    assert [int(t) for t in ax.xaxis.get_majorticklocs()][:3] == [1, 4, 16]  # powers of two


def test_human_count_writes_billions_not_millions():
    from course_lib.plots.cost import human_count

    assert human_count(42_598e6) == "42.6B" and human_count(340e6) == "340M"
    assert human_count(1.28e6) == "1.28M" and human_count(2_500) == "2.5k" and human_count(12) == "12"
    assert human_count(3e13) == "30T"


@pytest.mark.parametrize(
    ("kwargs", "name"), [(dict(utilisation=0.0), "utilisation"), (dict(efficiency=1.5), "efficiency")]
)
def test_calculator_figure_bad_input(kwargs, name):
    args = dict(samples=1e6, flops_per_sample=1e9, peak_flops=1e12, devices=1, utilisation=0.5,
                efficiency=1.0) | kwargs
    with pytest.raises(ValueError, match=name):
        calculator_figure(**args)


def test_cnn_and_transformer_calculators_use_the_data():
    models, hardware = load_dnn_models(), load_hardware()
    r50 = next(m for m in models if m.model == "ResNet-50")
    v100 = next(d for d in hardware if d.device_id == "v100_sxm2_32gb")
    fig = cnn_calculator_figure("ResNet-50", 1.0, 10, "v100_sxm2_32gb", 1, 0.5, 1.0,
                                models=models, hardware=hardware)
    marker = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"][0]
    # ResNet-50: 4.089 GMACs -> 2 x 3 x 4.089e9 FLOPs per image; V100 tensor peak 125 TFLOP/s
    expected = 1e7 * 6 * 4.089e9 / (0.5 * 125e12)
    assert r50.gmacs_per_forward == 4.089 and v100.peak_tflops == 125.0
    assert marker.get_ydata()[0] == pytest.approx(expected)
    assert "ResNet-50" in fig.axes[0].get_title() and v100.device in _texts(fig)
    fig = transformer_calculator_figure(340, 42598, "v100_sxm3_32gb", 4, 0.3, 0.8, hardware=hardware)
    marker = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"][0]
    # the 450 W V100 of the DGX-2H: 131 TFLOP/s tensor peak
    expected = cost.training_time(42598e6, 6 * 340e6, 0.3 * 131e12, 4, 0.8)
    assert marker.get_ydata()[0] == pytest.approx(expected)
    assert "DGX-2H" in _texts(fig)


def test_transformer_calculator_speaks_of_tokens_in_the_course_notation():
    """42.6B tokens, not "42,598M tokens" or "4.26e+10 samples"; P parameters, D tokens, N devices."""
    fig = transformer_calculator_figure(340, 42598, "v100_sxm3_32gb", 1, 0.3, 1.0, hardware=load_hardware())
    title, text = fig.axes[0].get_title(), _texts(fig)
    assert title == "transformer: P = 340M parameters, D = 42.6B tokens"
    assert "D = 42.6B tokens" in text and "C = 6P = 2.04 GFLOP per token" in text
    assert "samples" not in text and "e+" not in text and "42,598" not in title
    assert "6ND" not in title + text and fig.axes[0].get_xlabel() == "devices N"


def test_calculators_reject_unknown_names():
    models, hardware = load_dnn_models(), load_hardware()
    with pytest.raises(ValueError, match="model must be one of AlexNet, .*; got 'ResNet-51'"):
        cnn_calculator_figure("ResNet-51", 1.0, 1, "h100_sxm", 1, 0.5, 1.0, models=models,
                              hardware=hardware)
    with pytest.raises(ValueError, match="device_id must be one of .*h100_sxm.*; got 'v100'"):
        cnn_calculator_figure("ResNet-50", 1.0, 1, "v100", 1, 0.5, 1.0, models=models,
                              hardware=hardware)
    with pytest.raises(ValueError, match="device_id"):
        transformer_calculator_figure(1, 1, "NVIDIA Tesla V100 SXM2 32GB", 1, 0.5, 1.0,
                                      hardware=hardware)
    with pytest.raises(TypeError, match="device_id must be a str"):
        transformer_calculator_figure(1, 1, 2, 1, 0.5, 1.0, hardware=hardware)
    with pytest.raises(TypeError, match="model must be a str"):
        cnn_calculator_figure(0, 1.0, 1, "h100_sxm", 1, 0.5, 1.0, models=models, hardware=hardware)


def test_time_ladder_figure_is_a_dot_plot():
    fig = time_ladder_figure(["a", "b"], [60.0, 86400.0 * 40], title="t")
    ax = fig.axes[0]
    assert len(ax.patches) == 0  # no bars on a log axis
    assert sorted(line.get_xdata()[0] for line in ax.get_lines()) == [60.0, 86400.0 * 40]
    assert all(line.get_marker() == "o" for line in ax.get_lines())
    assert "1 min" in _texts(fig) and "40 days" in _texts(fig)
    fmt = ax.xaxis.get_major_formatter()
    assert "1 day" in [fmt(t, i) for i, t in enumerate(ax.xaxis.get_majorticklocs())]
    # the first label is drawn at the top
    positions = dict(zip([t.get_text() for t in ax.get_yticklabels()], ax.get_yticks(), strict=True))
    assert positions["a"] > positions["b"]
    with pytest.raises(ValueError, match="same"):
        time_ladder_figure(["a"], [1.0, 2.0])
    with pytest.raises(ValueError, match="seconds"):
        time_ladder_figure(["a"], [0.0])


def test_time_axis_labels_do_not_crowd():
    from course_lib.plots import new_figure, time_axis

    fig, ax = new_figure(size=(8.0, 4.0))
    time_axis(ax.xaxis, 600.0, 3e11)  # 10 min .. 10,000 years: not every duration fits
    fig.draw_without_rendering()
    boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
    assert len(boxes) >= 4
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))  # left to right, apart
    words = [t.get_text() for t in ax.get_xticklabels()]
    assert "1 year" in words and "1 day" in words  # the durations people know come first


def test_comm_efficiency_figure_matches_the_model():
    fig = comm_efficiency_figure(100.0, 400.0, 10.0, 5.0, 0.0, 16, n_max=256)
    ax_t, ax_e = fig.axes
    x, y = _line(ax_e, "ring all-reduce").get_data()
    np.testing.assert_allclose(y, alpha_beta.data_parallel_efficiency(0.1, x, 4e8, 1e10, 5e-6))
    x, y = _line(ax_e, "1 parameter server").get_data()
    np.testing.assert_allclose(y, alpha_beta.data_parallel_efficiency(0.1, x, 4e8, 1e10, 5e-6, algorithm="ps"))
    x, y = _line(ax_e, "naive tree").get_data()
    np.testing.assert_allclose(y, alpha_beta.data_parallel_efficiency(0.1, x, 4e8, 1e10, 5e-6, algorithm="tree"))
    x, y = _line(ax_e, "ring, weak").get_data()
    np.testing.assert_allclose(
        y, alpha_beta.data_parallel_efficiency(0.1, x, 4e8, 1e10, 5e-6, scaling="weak")
    )
    assert "η(16)" in _texts(fig)


def test_comm_efficiency_labels_explain_each_algorithm_and_sit_off_the_curves():
    fig = comm_efficiency_figure(100.0, 400.0, 10.0, 5.0, 0.0, 16, n_max=256)
    labels = [line.get_label() for line in fig.axes[1].get_lines()]
    assert "naive tree: 2⌈log₂N⌉ steps of all m bytes" in labels
    assert "ring all-reduce: 2(N − 1) steps of m/N bytes" in labels
    assert "naive (not pipelined)" in comm_efficiency_figure.__doc__ and "log_2" in comm_efficiency_figure.__doc__
    _legends_off_the_plots(fig)


def _run(label, batch, steps_per_epoch, epochs):
    loss = tuple(np.linspace(2.0, 0.1, epochs))
    acc = tuple(np.linspace(0.2, 0.9, epochs))
    return BatchRun(label, batch, "SGD", 0.1, 0, steps_per_epoch, loss, acc,
                    tuple(np.linspace(2.5, 0.1, steps_per_epoch * epochs)))


def test_large_batch_figure_axes_and_data():
    runs = [_run("small", 16, 90, 5), _run("large", 512, 3, 5)]
    fig = large_batch_figure(runs)
    assert len(fig.axes) == 4
    ax_loss_epoch, ax_acc_epoch, ax_loss_step, ax_acc_step = fig.axes
    x, y = ax_acc_step.get_lines()[1].get_data()
    assert list(x) == [3, 6, 9, 12, 15] and np.allclose(y, runs[1].test_accuracy)
    x, y = ax_loss_epoch.get_lines()[0].get_data()
    assert list(x) == [1, 2, 3, 4, 5] and np.allclose(y, runs[0].epoch_loss)
    x, y = ax_loss_step.get_lines()[1].get_data()
    assert len(x) == 15 and y[0] == pytest.approx(2.5)  # running mean starts at the first step
    assert ax_loss_step.get_xscale() == "log"
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["small", "large"]
    with pytest.raises(ValueError, match="runs"):
        large_batch_figure([])


def test_large_batch_figure_is_readable():
    """Integer epoch ticks, the legend off the data, runs told apart by more than a hue."""
    from matplotlib.colors import to_hex

    runs = [_run(f"run {i}", 16 * 2**i, 90 // 2**i + 1, 20) for i in range(6)]
    fig = large_batch_figure(runs)
    for ax in fig.axes[:2]:
        ticks = ax.xaxis.get_majorticklocs()
        visible = ticks[(ticks >= ax.get_xlim()[0]) & (ticks <= ax.get_xlim()[1])]
        assert len(visible) >= 3 and np.all(visible == np.round(visible))  # no 2.5, 7.5
    looks = [(to_hex(line.get_color()), line.get_linestyle(), line.get_marker())
             for line in fig.axes[0].get_lines()]
    assert len(set(looks)) == 6 and len({c for c, _, _ in looks}) == 6
    assert len({(ls, m) for _, ls, m in looks}) == 6  # each run also has its own line style and marker
    assert not {"#56b4e9", "#f0e442"} & {c for c, _, _ in looks}  # no sky blue, no yellow
    _legends_off_the_plots(fig)


def test_calculator_estimates_match_the_figures_and_name_the_run():
    from course_lib.cost import cnn_calculator_estimate, transformer_calculator_estimate

    models, hardware = load_dnn_models(), load_hardware()
    a100 = next(d for d in hardware if d.device_id == "a100_sxm_40gb")
    est = cnn_calculator_estimate("AlexNet", 1.0, 2, "a100_sxm_40gb", 2, 0.5, 0.5,
                                  models=models, hardware=hardware)
    assert est.samples == 2e6 and est.devices == 2 and est.efficiency == 0.5
    assert est.flops_per_sample == pytest.approx(6 * 0.714e9)  # AlexNet: 0.714 GMACs forward
    assert est.device_flops == pytest.approx(0.5 * a100.peak_tflops * 1e12)
    assert est.summary().splitlines()[0] == f"AlexNet, 1M images x 2 epochs, 2 x {a100.device}"
    fig = cnn_calculator_figure("AlexNet", 1.0, 2, "a100_sxm_40gb", 2, 0.5, 0.5,
                                models=models, hardware=hardware)
    text = _texts(fig)  # the figure shows the estimate's numbers
    assert "D = 2M samples" in text and "C = 4.28 GFLOP per sample" in text
    assert f"T = {cost.human_duration(est.seconds)}" in text and a100.device in text
    est = transformer_calculator_estimate(100, 1000, "h100_sxm", 1, 1.0, 1.0, hardware=hardware)
    assert est.total_flops == pytest.approx(6 * 100e6 * 1000e6)
    assert "transformer, 100M parameters" in str(est)
    fig = transformer_calculator_figure(100, 1000, "h100_sxm", 1, 1.0, 1.0, hardware=hardware)
    assert "D·C = 6 × 10¹⁷ FLOP" in _texts(fig) and "D = 1B tokens" in _texts(fig)


def test_comm_efficiency_figure_refuses_more_devices_than_samples():
    """Strong scaling with a global batch of 256 cannot use 1,472 devices: the curves stop at
    N = B and the chosen N is flagged, not given an efficiency."""
    from course_lib.plots.cost import comm_efficiency_figure

    fig = comm_efficiency_figure(50.0, 1360.0, 150.0, 5.0, 0.0, 1472, n_max=2048, batch_size=256)
    ax_e = fig.axes[1]
    ring = next(ln for ln in ax_e.get_lines() if ln.get_label().startswith("ring all-reduce"))
    assert ring.get_xdata().max() <= 256
    texts = [t.get_text() for t in ax_e.texts]
    assert any("impossible" in t for t in texts) and not any(t.startswith("η(1472)") for t in texts)
    assert any("impossible" in t.get_text() for t in ax_e.texts)
    ok = comm_efficiency_figure(50.0, 1360.0, 150.0, 5.0, 0.0, 64, batch_size=256)
    assert any(t.get_text().startswith("η(64) = ") for t in ok.axes[1].texts)
    with pytest.raises(ValueError, match="batch_size"):
        comm_efficiency_figure(50.0, 1360.0, 150.0, 5.0, 0.0, 64, batch_size=0)


def test_calculator_texts_stay_readable_at_the_slider_extremes():
    """A 1T-parameter model on one CPU core: years in words, no 4.73e+07, nothing off the figure."""
    fig = transformer_calculator_figure(2**20, 2**24, "xeon_8280_core", 4096, 0.01, 0.01,
                                        hardware=load_hardware())
    text = _texts(fig)
    assert "e+" not in text and "M years" in text and "TFLOP per token" in text
    fig.draw_without_rendering()
    for ax in fig.axes:
        for t in ax.texts:
            box = t.get_window_extent()
            assert 0 <= box.x0 and box.x1 <= fig.bbox.width, t.get_text()
    fmt = fig.axes[0].yaxis.get_major_formatter()
    words = [fmt(t, i) for i, t in enumerate(fig.axes[0].yaxis.get_majorticklocs())]
    assert all("years" in w for w in words) and len(words) >= 2


def test_comm_efficiency_starts_every_scheme_at_one_and_names_the_size_as_the_slider():
    """Issue 44 item 5: with t_c = 1 ms, 1 MB, 1 GB/s the parameter server's curve once started
    at eta(1) = 0.33, and the title said "1360 MB" where the slider said "1.36 GB". A device
    alone communicates nothing: every strong-scaling curve starts at 1; the title writes the
    size as the slider's value box does."""
    from course_lib.live import Slider

    fig = comm_efficiency_figure(1.0, 1.0, 1.0, 5.0, 0.0, 16)
    curves = [line for line in fig.axes[1].get_lines() if not line.get_label().startswith("_")]
    assert len(curves) == 4
    for line in curves:
        assert line.get_xdata()[0] == 1 and line.get_ydata()[0] == 1.0, line.get_label()
    slider = Slider("gradient_mb", "gradients", 0, 14, 0.01, 1360, unit="MB", kind="log2")
    title = comm_efficiency_figure(1700.0, 1360.0, 150.0, 5.0, 0.0, 16, batch_size=256).axes[1].get_title()
    assert slider.format(1360) == "1.36 GB" and title.startswith("1.36 GB gradients") and "1360" not in title
