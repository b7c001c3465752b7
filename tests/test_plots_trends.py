"""Chapter 01 figures: they draw the data they are given, with the labels the chapter needs."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.text import Text

from course_lib.datasets import CPU_TRENDS_ATTRIBUTION, load_cpu_trends, load_dnn_models
from course_lib.plots import figure_to_png
from course_lib.plots.trends import (
    accuracy_compute_figure,
    bert_estimates_figure,
    cpu_trends_figure,
    execution_model_figure,
    families,
)


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]


def test_execution_model_boxes_and_cores():
    fig = execution_model_figure(3, n_instructions=6)
    ax_s, ax_p = fig.axes
    serial, parallel = [t.get_text() for t in ax_s.texts], [t.get_text() for t in ax_p.texts]
    assert serial.count("CPU\ncore") == 1
    assert [f"t{i}" for i in range(1, 7)] == [t for t in serial if t.startswith("t") and t[1:].isdigit()]
    assert [t for t in parallel if t.startswith("core ")] == ["core 1", "core 2", "core 3"]
    assert "parallel\nalgorithm" in parallel and "combined\nresults" in parallel
    # each core gets its own two instructions
    assert sorted(t for t in parallel if t.startswith("t") and t[1:].isdigit()) == sorted(
        f"t{i}" for i in range(1, 7))
    assert figure_to_png(fig)[:4] == b"\x89PNG"


@pytest.mark.parametrize("kwargs, exc", [(dict(n_cores=1), ValueError), (dict(n_cores=9), ValueError),
                                         (dict(n_cores=4, n_instructions=6), ValueError),
                                         (dict(n_cores=2.0), TypeError)])
def test_execution_model_bad_arguments(kwargs, exc):
    with pytest.raises(exc, match="n_cores|n_instructions"):
        execution_model_figure(**kwargs)


def test_cpu_trends_figure_plots_every_point_on_a_log_axis_with_attribution():
    trends = load_cpu_trends()
    fig = cpu_trends_figure(trends, attribution=CPU_TRENDS_ATTRIBUTION)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    points = {c.get_label(): c.get_offsets() for c in ax.collections}
    freq = points["frequency (MHz)"]
    np.testing.assert_array_equal(np.asarray(freq)[:, 1], trends["frequency_mhz"].value)
    assert sum(len(p) for p in points.values()) == sum(len(t) for t in trends.values())
    assert any(line.get_xdata()[0] == 2005 for line in ax.get_lines())  # the multicore turn
    assert any("Rupp" in t and "CC BY 4.0" in t for t in _texts(fig))


def test_cpu_trends_unknown_series():
    with pytest.raises(ValueError, match="unknown series"):
        cpu_trends_figure({"clock": None})


def test_accuracy_compute_axes_bubbles_and_mac_label():
    models = load_dnn_models()
    fig = accuracy_compute_figure(models)
    ax = fig.axes[0]
    assert [c.get_label() for c in ax.collections] == families(models)  # one scatter per family
    assert families(models) == sorted({m.family for m in models}) and "ResNet" in families(models)
    assert "multiply-accumulates" in ax.get_xlabel() and "G-FLOPs" in ax.get_xlabel()
    xs = np.concatenate([np.asarray(c.get_offsets())[:, 0] for c in ax.collections if len(c.get_offsets())])
    assert sorted(xs) == sorted(m.gmacs_per_forward for m in models)
    vgg = next(c for c in ax.collections if c.get_label() == "VGG")
    sizes = vgg.get_sizes()
    params = [m.params_million for m in models if m.family == "VGG"]
    np.testing.assert_allclose(sizes / sizes[0], np.array(params) / params[0])  # area ∝ params


def test_accuracy_compute_flops_doubles_the_axis():
    models = load_dnn_models()
    macs = accuracy_compute_figure(models).axes[0]
    flops = accuracy_compute_figure(models, flops=True).axes[0]
    x_macs = np.concatenate([np.asarray(c.get_offsets())[:, 0] for c in macs.collections if len(c.get_offsets())])
    x_flops = np.concatenate([np.asarray(c.get_offsets())[:, 0] for c in flops.collections if len(c.get_offsets())])
    np.testing.assert_allclose(x_flops, 2 * x_macs)
    assert "GFLOP (= 2 × GMAC)" in flops.get_xlabel()


def test_highlight_by_name_and_all_families():
    models = load_dnn_models()
    ax = accuracy_compute_figure(models, "ResNet").axes[0]
    assert ax.get_title().endswith("highlighted: ResNet")
    labelled = {t.get_text() for t in ax.texts}
    assert {m.model for m in models if m.family == "ResNet"} <= labelled
    assert not any(m.model in labelled for m in models if m.family == "VGG")
    grey = [c for c in ax.collections if c.get_label() == "VGG"][0]
    assert np.allclose(grey.get_facecolor()[0][:3], 0.8)
    for none in (None, ""):  # "" is the drop-down's "all families" entry
        ax = accuracy_compute_figure(models, none).axes[0]
        assert ax.get_title() == "accuracy vs compute"
        assert [t.get_text() for t in ax.texts] == ["bubble area ∝ parameters"]


@pytest.mark.parametrize("family", ["ResNet", "SENet", "VGG", "Inception"])  # the crowded ones
def test_highlight_labels_point_at_their_model_and_do_not_overlap(family):
    models = load_dnn_models()
    fig = accuracy_compute_figure(models, family)
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text() != "bubble area ∝ parameters"]
    members = {m.model: m for m in models if m.family == family}
    assert sorted(t.get_text() for t in labels) == sorted(members)
    for t in labels:  # each label is anchored at its own model's point
        m = members[t.get_text()]
        assert t.xy == pytest.approx((m.gmacs_per_forward, m.top5_pct))
    fig.draw_without_rendering()
    boxes = [Text.get_window_extent(t) for t in labels]  # the text alone, without its leader line
    inside = ax.bbox
    for i, a in enumerate(boxes):
        assert inside.x0 <= a.x0 and a.x1 <= inside.x1 and inside.y0 <= a.y0 and a.y1 <= inside.y1
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)
    legend = ax.get_legend().get_window_extent()
    assert not any(a.overlaps(legend) for a in boxes)


@pytest.mark.parametrize("bad, exc", [("Transformer", ValueError), (7, TypeError), (True, TypeError)])
def test_highlight_bad(bad, exc):
    with pytest.raises(exc, match="highlight must be"):
        accuracy_compute_figure(load_dnn_models(), bad)


def test_bert_estimates_bars_records_and_texts():
    fig = bert_estimates_figure(["a", "b"], [1e8, 1e6], ["rec"], [2820], texts=["3 y", "12 d", "47 min"])
    ax = fig.axes[0]
    widths = [p.get_width() for p in ax.patches]
    assert widths == [1e8, 1e6]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "rec"]
    assert {"3 y", "12 d", "47 min"} <= {t.get_text() for t in ax.texts}
    with pytest.raises(ValueError, match="equal lengths"):
        bert_estimates_figure(["a"], [1.0, 2.0])
    with pytest.raises(ValueError, match="> 0"):
        bert_estimates_figure(["a"], [0.0])
    with pytest.raises(ValueError, match="texts must have"):
        bert_estimates_figure(["a"], [1.0], texts=["x", "y"])
