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


def test_cpu_trends_legend_off_the_data():
    _legends_off_the_axes(cpu_trends_figure(load_cpu_trends(), attribution=CPU_TRENDS_ATTRIBUTION))


def test_cpu_trends_unknown_series():
    with pytest.raises(ValueError, match="unknown series"):
        cpu_trends_figure({"clock": None})


def _legends_off_the_axes(fig):
    fig.draw_without_rendering()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    for legend in legends:
        assert not any(legend.get_window_extent().overlaps(ax.bbox) for ax in fig.axes if ax.axison)


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


def test_accuracy_compute_log_axis_has_labelled_ticks_at_1_2_5():
    """The reviewer saw two labels (10^0, 10^1): now 1, 2, 5 x 10^k, written as plain numbers."""
    ax = accuracy_compute_figure(load_dnn_models()).axes[0]
    ticks = ax.xaxis.get_majorticklocs()
    assert ax.get_xscale() == "log" and len(ticks) >= 6
    mantissas = {round(t / 10 ** np.floor(np.log10(t)), 6) for t in ticks}
    assert mantissas <= {1.0, 2.0, 5.0}
    fmt = ax.xaxis.get_major_formatter()
    assert [fmt(t, i) for i, t in enumerate(ticks)] == [f"{t:g}" for t in ticks]
    lo, hi = ax.get_xlim()
    assert lo <= min(m.gmacs_per_forward for m in load_dnn_models()) <= max(
        m.gmacs_per_forward for m in load_dnn_models()) <= hi


def test_accuracy_compute_has_a_bubble_size_key_and_legends_off_the_data():
    models = load_dnn_models()
    fig = accuracy_compute_figure(models, "ResNet")
    key = next(leg for leg in fig.legends if "parameters" in leg.get_title().get_text())
    assert [t.get_text() for t in key.get_texts()] == ["5M", "25M", "100M"]
    # a key bubble is as big as a model bubble of that many parameters: area 4 pt² per million
    diameters = np.array([h.get_markersize() for h in key.legend_handles])
    np.testing.assert_allclose(diameters**2, 4.0 * np.array([5, 25, 100]))
    family = next(leg for leg in fig.legends if leg.get_title().get_text() == "family")
    assert [t.get_text() for t in family.get_texts()] == ["ResNet", "other families"]
    _legends_off_the_axes(fig)
    everyone = next(leg for leg in accuracy_compute_figure(models).legends
                    if leg.get_title().get_text() == "family")
    assert [t.get_text() for t in everyone.get_texts()] == families(models)


def test_accuracy_compute_families_differ_by_colour_or_shape_and_use_safe_colours():
    from course_lib.plots import COLORS

    ax = accuracy_compute_figure(load_dnn_models()).axes[0]
    looks = set()
    for c in ax.collections:
        rgb = tuple(np.round(c.get_facecolor()[0][:3], 3))
        looks.add((rgb, c.get_paths()[0].vertices.shape))
    assert len(looks) == len(ax.collections)  # no two families look the same
    from matplotlib.colors import to_rgb

    allowed = {tuple(np.round(to_rgb(c), 3)) for c in COLORS} - {
        tuple(np.round(to_rgb("#56B4E9"), 3)), tuple(np.round(to_rgb("#F0E442"), 3))}
    assert {rgb for rgb, _ in looks} <= allowed  # Okabe-Ito, without sky blue and yellow


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
    assert np.allclose(grey.get_facecolor()[0][:3], 0.78)
    for none in (None, ""):  # "" is the drop-down's "all families" entry
        ax = accuracy_compute_figure(models, none).axes[0]
        assert ax.get_title() == "accuracy vs compute"
        assert len(ax.texts) == 0


def _circle_hits(box, centre, radius):
    cx, cy = min(max(centre[0], box.x0), box.x1), min(max(centre[1], box.y0), box.y1)
    return (cx - centre[0]) ** 2 + (cy - centre[1]) ** 2 < radius**2


@pytest.mark.parametrize("family", ["ResNet", "SENet", "VGG", "Inception"])  # the crowded ones
def test_highlight_labels_point_at_their_model_and_do_not_overlap(family):
    models = load_dnn_models()
    fig = accuracy_compute_figure(models, family)
    ax = fig.axes[0]
    labels = list(ax.texts)
    members = {m.model: m for m in models if m.family == family}
    assert sorted(t.get_text() for t in labels) == sorted(members)
    for t in labels:  # each label is anchored at its own model's point
        m = members[t.get_text()]
        assert t.xy == pytest.approx((m.gmacs_per_forward, m.top5_pct))
    fig.draw_without_rendering()  # the labels are placed when the figure is drawn
    boxes = [Text.get_window_extent(t) for t in labels]  # the text alone, without its leader line
    inside = ax.bbox
    for i, a in enumerate(boxes):
        assert inside.x0 <= a.x0 and a.x1 <= inside.x1 and inside.y0 <= a.y0 and a.y1 <= inside.y1
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)
    # no label covers another highlighted bubble
    scatter = next(c for c in ax.collections if c.get_label() == family)
    centres = ax.transData.transform(scatter.get_offsets())
    radii = np.sqrt(scatter.get_sizes()) / 2 * fig.dpi / 72
    for t, box in zip(labels, boxes, strict=True):
        own = ax.transData.transform(t.xy)
        for centre, radius in zip(centres, radii, strict=True):
            if not np.allclose(centre, own):
                assert not _circle_hits(box, centre, radius), (t.get_text(), centre)
    # a label that left its point's line has a leader line; one on it has none
    for t, box in zip(labels, boxes, strict=True):
        on_line = abs((box.y0 + box.y1) / 2 - ax.transData.transform(t.xy)[1]) < 1.0
        assert t.arrow_patch.get_visible() != on_line or t.get_ha() == "center"


@pytest.mark.parametrize("bad, exc", [("Transformer", ValueError), (7, TypeError), (True, TypeError)])
def test_highlight_bad(bad, exc):
    with pytest.raises(exc, match="highlight must be"):
        accuracy_compute_figure(load_dnn_models(), bad)


def test_bert_estimates_are_dots_not_bars_with_times_and_records():
    """Bar length means nothing on a log axis: one marker per row, its value beside it."""
    fig = bert_estimates_figure(["a", "b"], [1e8, 1e6], ["rec"], [2820], texts=["3 y", "12 d", "47 min"])
    ax = fig.axes[0]
    assert len(ax.patches) == 0 and ax.get_xscale() == "log"
    lines = ax.get_lines()
    assert [line.get_marker() for line in lines] == ["o", "o", "D"]
    assert [line.get_xdata()[0] for line in lines] == [1e8, 1e6, 2820]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "rec"]
    assert {"3 y", "12 d", "47 min"} <= {t.get_text() for t in ax.texts}
    fmt = ax.xaxis.get_major_formatter()
    words = [fmt(t, i) for i, t in enumerate(ax.xaxis.get_majorticklocs())]
    assert "1 h" in words and "1 year" in words  # durations in words, not 10^k s
    _legends_off_the_axes(fig)
    with pytest.raises(ValueError, match="equal lengths"):
        bert_estimates_figure(["a"], [1.0, 2.0])
    with pytest.raises(ValueError, match="> 0"):
        bert_estimates_figure(["a"], [0.0])
    with pytest.raises(ValueError, match="texts must have"):
        bert_estimates_figure(["a"], [1.0], texts=["x", "y"])


def test_execution_model_long_streams_are_elided_and_fit():
    fig = execution_model_figure(2, n_instructions=32)
    ax_s, ax_p = fig.axes
    serial = [t.get_text() for t in ax_s.texts]
    tiles = [t for t in serial if t == "…" or (t.startswith("t") and t[1:].isdigit())]
    assert tiles[0] == "t1" and tiles[-1] == "t32" and "…" in tiles and len(tiles) <= 12
    assert fig.get_figwidth() <= 9.6
    fig.draw_without_rendering()  # every tile label fits its tile
    from matplotlib.patches import FancyBboxPatch

    frames = [p.get_window_extent() for p in ax_s.patches if isinstance(p, FancyBboxPatch)]
    for t in ax_s.texts:
        if t.get_text() in tiles:
            box = t.get_window_extent()
            assert any(f.x0 <= box.x0 and box.x1 <= f.x1 for f in frames)
