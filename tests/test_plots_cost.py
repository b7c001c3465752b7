"""course_lib.plots.cost: figures of chapter 03 carry the right data and labels."""

import numpy as np
import pytest

from course_lib import comm, cost
from course_lib.datasets import load_dnn_models, load_hardware
from course_lib.optim import BatchRun
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


def test_levers_figure_names_every_factor():
    fig = levers_figure()
    text = _texts(fig)
    for symbol in ("$D$", "$C$", "$r$", "$N$", r"$\eta$"):
        assert symbol in text
    assert "distributed" in text and "fixed by the problem" in text
    assert figure_to_png(fig)[:4] == b"\x89PNG"


def test_calculator_figure_curve_and_summary():
    fig = calculator_figure(1e6, 1e9, 2e12, 8, 0.5, 0.5, device_label="test device")
    ax, ax_text = fig.axes
    x, y = _line(ax, "η = 0.5").get_data()
    np.testing.assert_allclose(y, cost.training_time(1e6, 1e9, 1e12, x, 0.5))
    x, y = _line(ax, "η = 1").get_data()
    np.testing.assert_allclose(y, cost.training_time(1e6, 1e9, 1e12, x))
    # marker at N = 8: 1e15 / (1e12 * 8 * 0.5) = 250 s
    marker = [line for line in ax.get_lines() if line.get_marker() == "o"][0]
    assert marker.get_xdata()[0] == 8 and marker.get_ydata()[0] == pytest.approx(250.0)
    text = _texts(fig)
    assert "4.17 min" in text and "test device" in text
    assert cost.estimate_training(1e6, 1e9, 1e12, 8, 0.5).summary() in text


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


def test_time_ladder_figure():
    fig = time_ladder_figure(["a", "b"], [60.0, 86400.0 * 40], title="t")
    ax = fig.axes[0]
    widths = sorted(p.get_width() for p in ax.patches)
    assert widths == [60.0, 86400.0 * 40]
    assert "1 min" in _texts(fig) and "40 days" in _texts(fig)
    # the first label is drawn at the top
    positions = dict(zip([t.get_text() for t in ax.get_yticklabels()], ax.get_yticks(), strict=True))
    assert positions["a"] > positions["b"]
    with pytest.raises(ValueError, match="same"):
        time_ladder_figure(["a"], [1.0, 2.0])
    with pytest.raises(ValueError, match="seconds"):
        time_ladder_figure(["a"], [0.0])


def test_comm_efficiency_figure_matches_the_model():
    fig = comm_efficiency_figure(100.0, 400.0, 10.0, 5.0, 0.0, 16, n_max=256)
    ax_t, ax_e = fig.axes
    x, y = _line(ax_e, "ring all-reduce").get_data()
    np.testing.assert_allclose(y, comm.data_parallel_efficiency(0.1, x, 4e8, 1e10, 5e-6))
    x, y = _line(ax_e, "1 parameter server").get_data()
    np.testing.assert_allclose(y, comm.data_parallel_efficiency(0.1, x, 4e8, 1e10, 5e-6, algorithm="ps"))
    x, y = _line(ax_e, "ring, weak").get_data()
    np.testing.assert_allclose(
        y, comm.data_parallel_efficiency(0.1, x, 4e8, 1e10, 5e-6, scaling="weak")
    )
    assert "η(16)" in _texts(fig)


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
    assert list(x) == [1, 2, 3, 4, 5] and np.allclose(y, runs[0].loss)
    x, y = ax_loss_step.get_lines()[1].get_data()
    assert len(x) == 15 and y[0] == pytest.approx(2.5)  # running mean starts at the first step
    assert ax_loss_step.get_xscale() == "log"
    assert [t.get_text() for t in ax_acc_epoch.get_legend().get_texts()] == ["small", "large"]
    with pytest.raises(ValueError, match="runs"):
        large_batch_figure([])


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
    assert est.summary().split("\n", 1)[1] in _texts(fig)  # the figure shows all but the label
    est = transformer_calculator_estimate(100, 1000, "h100_sxm", 1, 1.0, 1.0, hardware=hardware)
    assert est.total_flops == pytest.approx(6 * 100e6 * 1000e6)
    assert "transformer, 100M parameters" in str(est)
    fig = transformer_calculator_figure(100, 1000, "h100_sxm", 1, 1.0, 1.0, hardware=hardware)
    assert est.summary().split("\n", 1)[1] in _texts(fig)


def test_comm_efficiency_figure_refuses_more_devices_than_samples():
    """Strong scaling with a global batch of 256 cannot use 1,472 devices: the curves stop at
    N = B and the chosen N is flagged, not given an efficiency."""
    from course_lib.plots.cost import comm_efficiency_figure

    fig = comm_efficiency_figure(50.0, 1360.0, 150.0, 5.0, 0.0, 1472, n_max=2048, batch_size=256)
    ax_e = fig.axes[1]
    ring = next(ln for ln in ax_e.get_lines() if ln.get_label() == "ring all-reduce")
    assert ring.get_xdata().max() <= 256
    texts = [t.get_text() for t in ax_e.texts]
    assert any("impossible" in t for t in texts) and not any(t.startswith("η(1472)") for t in texts)
    assert any("impossible" in t.get_text() for t in ax_e.texts)
    ok = comm_efficiency_figure(50.0, 1360.0, 150.0, 5.0, 0.0, 64, batch_size=256)
    assert any(t.get_text().startswith("η(64) = ") for t in ok.axes[1].texts)
    with pytest.raises(ValueError, match="batch_size"):
        comm_efficiency_figure(50.0, 1360.0, 150.0, 5.0, 0.0, 64, batch_size=0)
