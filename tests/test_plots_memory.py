"""course_lib.plots.memory: the ZeRO calculator, alone and as a live figure."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from course_lib import memory as mem
from course_lib.datasets import load_hardware
from course_lib.plots import figure_to_png
from course_lib.plots.memory import zero_memory_figure

HW = load_hardware()


def _tops(ax, n: int = 4) -> np.ndarray:
    """Total bar height at each x position 0 .. n - 1 (the stacked parts of each bar)."""
    tops = np.zeros(n)
    for p in ax.patches:
        tops[int(round(p.get_x() + p.get_width() / 2))] += p.get_height()
    return tops


@pytest.mark.parametrize("stage, verdict", [(0, "does not fit"), (1, "fits"), (2, "fits"), (3, "fits")])
def test_zero_figure_bars_and_verdict_are_computed(stage, verdict):
    fig = zero_memory_figure(7.5, 64, stage, "a100_sxm_80gb", hardware=HW)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    expected = [mem.model_state_bytes(7.5e9, 64, k).total / 1e9 for k in mem.ZERO_STAGES]
    assert np.allclose(_tops(ax), expected)  # 120, 31.4, 16.6, 1.9 GB
    fit = mem.device_fit(7.5e9, 64, stage, "a100_sxm_80gb", hardware=HW)
    assert fit.verdict == verdict and ax.get_title().endswith(": " + verdict)
    assert [line.get_ydata()[0] for line in ax.get_lines()] == [80 * 2**30 / 1e9]  # the device's memory: 80 GiB in GB
    chosen = [p for p in ax.patches if p.get_alpha() == 1.0]
    assert {int(round(p.get_x() + p.get_width() / 2)) for p in chosen} == {stage}


def test_zero_figure_is_readable_and_its_key_off_the_bars():
    from matplotlib.text import Text

    from course_lib.plots.style import MIN_FONT_PT

    fig = zero_memory_figure(7.5, 64, 0, "a100_sxm_80gb", hardware=HW)
    ax = fig.axes[0]
    figure_to_png(fig)
    renderer = fig.canvas.get_renderer()
    key, area = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    assert key.x0 >= area.x1 - 1  # beside the axes, not on the bars
    title = ax.title.get_window_extent(renderer)
    assert title.x0 >= 0 and title.x1 <= fig.bbox.width  # the whole title is on the figure
    assert all(t.get_fontsize() >= MIN_FONT_PT for t in fig.findobj(Text) if t.get_text())
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "stage 0\nreplicated"


def test_zero_figure_with_activations_and_sgd_bytes():
    fig = zero_memory_figure(1.0, 4, 2, "v100_sxm2_32gb", hardware=HW, activations_gb=20.0,
                             param_bytes=4, grad_bytes=4, k=4)
    # stage 2: 4 GB parameters + 1 GB gradients + 1 GB optimizer state + 20 GB activations
    assert _tops(fig.axes[0])[2] == pytest.approx(26.0)
    assert "26 GB" in fig.axes[0].get_title() and fig.axes[0].get_title().endswith("fits")
    assert "activations" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_zero_figure_rejects_bad_input():
    with pytest.raises(ValueError, match="zero_stage"):
        zero_memory_figure(7.5, 64, 4, "a100_sxm_80gb", hardware=HW)
    with pytest.raises(ValueError, match="params_billion"):
        zero_memory_figure(float("nan"), 64, 1, "a100_sxm_80gb", hardware=HW)
    with pytest.raises(ValueError, match="device_id"):
        zero_memory_figure(7.5, 64, 1, "no_such_gpu", hardware=HW)
    with pytest.raises(TypeError, match="hardware"):
        zero_memory_figure(7.5, 64, 1, "a100_sxm_80gb", hardware=None)


def test_zero_figure_is_a_live_calculator():
    from course_lib.live.widgets import Choice, Slider, live_figure

    live = live_figure(zero_memory_figure, [
        Slider("params_billion", "parameters", 0.1, 1000, 0.1, 7.5, unit="billion", readout_format=".1f"),
        Slider("devices", "N", 0, 10, 1, 64, unit="devices", kind="log2"),
        Slider("zero_stage", "ZeRO stage", 0, 3, 1, 0, kind="int"),
        Choice("device_id", "device", [("NVIDIA A100 80GB", "a100_sxm_80gb"), ("NVIDIA V100 32GB", "v100_sxm2_32gb")],
               "a100_sxm_80gb"),
    ], hardware=HW)
    first = live.image.value
    assert first[:4] == b"\x89PNG"
    live.controls["zero_stage"].value = 3
    assert live.values() == {"params_billion": 7.5, "devices": 64, "zero_stage": 3, "device_id": "a100_sxm_80gb"}
    assert live.image.value != first and live.message.value == ""
    assert "zero_memory_figure(params_billion=7.5, devices=64, zero_stage=3" in repr(live)
