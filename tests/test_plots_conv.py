"""course_lib.plots.conv: the training data-flow graph and the chapter 05 figures."""

import numpy as np
import pytest

from course_lib.conv.im2col import conv2d_direct, gemm_sizes, im2col
from course_lib.dataflow import training_graph
from course_lib.plots import figure_to_png
from course_lib.plots.conv import (
    dataflow_figure,
    gemm_sizes_figure,
    im2col_figure,
    im2col_numbers_figure,
    speed_bars_figure,
)
from course_lib.plots.style import MIN_FONT_PT

CNN_LAYERS = [("conv0", "conv"), ("conv1", "conv"), ("fc", "linear")]


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


# ------------------------------------------------------------------ graph
def test_training_graph_ops_and_dependencies():
    g = training_graph(CNN_LAYERS)
    names = [op.name for op in g.ops]
    # forward, loss, backward (no input gradient for the first layer), updates
    assert names[:4] == ["conv0", "conv1", "fc", "loss"]
    assert "d_in:conv0" not in names and {"d_w:conv0", "d_in:conv1"} <= set(names)
    assert ("d_in:conv1", "d_w:conv0") in g.edges and ("d_w:fc", "update:fc") in g.edges
    lv = g.levels()
    # every edge goes forward in time
    assert all(lv[a] < lv[b] for a, b in g.edges)
    # both gradients of a layer are independent; an update overlaps the next layer's backward
    assert lv["d_in:fc"] == lv["d_w:fc"] == lv["loss"] + 1
    assert lv["update:fc"] == lv["d_w:conv1"]
    assert g.critical_path == 8 and len(g.ops) == 12


def test_one_layer_graph_has_no_input_gradient():
    g = training_graph([("only", "linear")])
    assert [op.kind for op in g.ops] == ["forward", "loss", "grad_weight", "update"]
    assert g.concurrent() == [] and g.critical_path == 4


@pytest.mark.parametrize("layers, pattern", [([], "at least one"), ([("x", "pool")], "kind must be")])
def test_training_graph_rejects_bad_layers(layers, pattern):
    with pytest.raises(ValueError, match=pattern):
        training_graph(layers)


def _overlap(a, b) -> float:
    """Area (px^2) shared by two display bounding boxes."""
    return max(min(a.x1, b.x1) - max(a.x0, b.x0), 0) * max(min(a.y1, b.y1) - max(a.y0, b.y0), 0)


def test_dataflow_figure_draws_one_box_per_op_and_the_parallel_dims():
    g = training_graph(CNN_LAYERS)
    fig = dataflow_figure(g)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if p.get_label() in {op.name for op in g.ops}]
    assert len(boxes) == len(g.ops)
    texts = _texts(fig)
    assert "dW\nconv0" in texts and "upd\nfc" in texts
    # the split dimensions under each conv, one per line, in the course notation, named in a key
    assert texts.count("$B$\n$H_o{\\times}W_o$\n$C_o$") == 2 and "$B$\noutputs" in texts
    key = next(t for t in texts if t.startswith("under a forward operator"))
    assert "$B$ samples" in key and "$C_o$ output channels" in key
    assert "critical path 8" in ax.get_title()
    assert figure_to_png(fig)[:4] == b"\x89PNG"


def test_dataflow_dimensions_are_readable_and_clear_of_the_boxes():
    fig = dataflow_figure(training_graph(CNN_LAYERS))
    figure_to_png(fig)
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    dims = [t for t in ax.texts if t.get_text().startswith("$B$")]
    assert len(dims) == 3 and all(t.get_fontsize() >= MIN_FONT_PT for t in dims)
    boxes = [p.get_window_extent(renderer) for p in ax.patches]
    labels = [t.get_window_extent(renderer) for t in dims + [t for t in ax.texts if t.get_text().startswith("under")]]
    for i, a in enumerate(labels):
        assert all(_overlap(a, b) < 1.0 for b in boxes)  # on no operator
        assert all(_overlap(a, b) < 1.0 for b in labels[i + 1:])  # on no other label
    assert fig.get_figwidth() <= 9.6


# ------------------------------------------------------------------ im2col figure
def test_im2col_figure_reproduces_the_chapter_labels():
    fig = im2col_figure()
    titles = [ax.get_title() for ax in fig.axes]
    assert r"IFmap matrix  $\mathcal{M}\times\mathcal{K}$ = 4×12" in titles
    assert "× Filter matrix\n$\\mathcal{K}\\times\\mathcal{N}$ = 12×2" in titles
    im_ax = fig.axes[titles.index(r"IFmap matrix  $\mathcal{M}\times\mathcal{K}$ = 4×12")]
    labels = [t.get_text() for t in im_ax.texts]
    # row 0 (output O0) holds I0, I1, I3, I4 of each of the 3 channels
    assert labels[:12] == ["I0", "I1", "I3", "I4"] * 3
    # the labels follow im2col's index layout, transposed (M x K)
    idx = im2col(np.arange(27).reshape(1, 3, 3, 3), 2)[0].T
    assert labels == [f"I{v % 9}" for v in idx.ravel()]


def _cell_px(ax):
    """Size on screen (px) of one cell of a drawn matrix (the figure drawn already)."""
    (x0, y0), (x1, y1) = ax.transData.transform([(0, 0), (1, 1)])
    return abs(x1 - x0), abs(y1 - y0)


@pytest.mark.parametrize("make", [lambda: im2col_figure(),
                                  lambda: im2col_numbers_figure(np.ones((1, 3, 3, 3)), np.ones((2, 3, 2, 2)))])
def test_im2col_matrices_are_drawn_at_one_scale(make):
    """Every matrix has cells of the same size, large enough for its numbers."""
    fig = make()
    figure_to_png(fig)  # laid out and drawn once, as shown
    sizes = [_cell_px(ax) for ax in fig.axes]
    widths = [w for w, _ in sizes]
    assert max(widths) / min(widths) < 1.1 and all(abs(w - h) < 0.5 for w, h in sizes)
    assert min(widths) >= 30  # >= 30 display px (0.3 in) per cell (transforms are at the display dpi)
    renderer = fig.canvas.get_renderer()
    cells = [t for ax in fig.axes for t in ax.texts if t.get_color() == "white"]
    assert cells and all(t.get_fontsize() >= MIN_FONT_PT for t in cells)
    assert max(t.get_window_extent(renderer).width for t in cells) < min(widths)  # numbers fit their cell
    assert fig.get_figwidth() <= 9.6


def test_im2col_figure_rejects_sizes_it_cannot_draw():
    with pytest.raises(ValueError, match=r"kernel \(4\) <= size \(3\)"):
        im2col_figure(kernel=4)


def _panel(fig, title_start):
    return next(ax for ax in fig.axes if ax.get_title().startswith(title_start))


@pytest.mark.slow  # more than 3 s on two free cores (make test runs it, make test-fast does not)
def test_im2col_numbers_figure_draws_the_matrices_and_checks_the_product():
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, (1, 3, 3, 3)).astype(float)
    w = rng.integers(-2, 3, (2, 3, 2, 2)).astype(float)
    fig = im2col_numbers_figure(x, w, conv2d_direct(x, w))
    ifmap_matrix, filter_matrix = im2col(x, 2)[0].T, w.reshape(2, -1).T
    def values(ax):  # the numbers drawn in a panel, in drawing order (labels left out)
        return [int(t.get_text()) for t in ax.texts if t.get_text().lstrip("-").isdigit()]

    im_ax = _panel(fig, "IFmap matrix")
    assert r"$\mathcal{M}\times\mathcal{K}$ = 4×12" in im_ax.get_title()
    assert values(im_ax) == ifmap_matrix.astype(int).ravel().tolist()  # row by row
    # cells coloured by input channel: 4 taps of channel 0, then 4 of channel 1, ...
    colors = [p.get_facecolor()[:3] for p in im_ax.patches[:12]]
    assert colors[0] == colors[3] != colors[4] == colors[7] != colors[8]
    fm_ax = _panel(fig, "× Filter matrix")
    assert values(fm_ax) == filter_matrix.astype(int).ravel().tolist()  # row by row
    out_ax = _panel(fig, "= Output")
    assert values(out_ax) == (ifmap_matrix @ filter_matrix).astype(int).ravel().tolist()
    ref_ax = _panel(fig, "sliding window")
    assert values(ref_ax) == conv2d_direct(x, w)[0].astype(int).ravel().tolist()
    assert "✓" in ref_ax.get_title()  # (drawn as a PNG by test_im2col_matrices_are_drawn_at_one_scale)
    # the reference defaults to the sliding-window convolution; a wrong one is flagged
    assert "✓" in _panel(im2col_numbers_figure(x, w), "sliding window").get_title()
    wrong = conv2d_direct(x, w)
    wrong[0, 1, 0, 1] += 1
    assert "✗ 1 value(s) differ" in _panel(im2col_numbers_figure(x, w, wrong), "sliding window").get_title()
    # non-integers are drawn with two digits
    assert "0.5" in _texts(im2col_numbers_figure(x * 0.5, w))


@pytest.mark.parametrize(
    "x_shape, w_shape, reference, pattern",
    [
        ((2, 3, 3, 3), (2, 3, 2, 2), None, r"one image x \(1, C_in, H, W\).*\(2, 3, 3, 3\)"),
        ((1, 3, 3, 3), (2, 2, 2, 2), None, r"same C_in.*\(2, 2, 2, 2\)"),
        ((1, 3, 8, 8), (2, 3, 2, 2), None, r"image \(8x8\) <= 6x6"),
        ((1, 3, 3, 3), (2, 3, 4, 4), None, r"kernel \(4x4\) <= image \(3x3\)"),
        ((1, 3, 3, 3), (2, 3, 2, 2), np.zeros((1, 2, 3, 3)), r"output shape \(1, 2, 2, 2\), got \(1, 2, 3, 3\)"),
    ],
)
def test_im2col_numbers_figure_rejects_what_it_cannot_draw(x_shape, w_shape, reference, pattern):
    with pytest.raises(ValueError, match=pattern):
        im2col_numbers_figure(np.zeros(x_shape), np.zeros(w_shape), reference)


# ------------------------------------------------------------------ GEMM sizes
def test_gemm_sizes_by_hand():
    s = gemm_sizes(8, 224, 7, 2, 3, 64, padding=3)
    assert (s["Ho"], s["Wo"]) == (112, 112)
    assert (s["M"], s["K"], s["N"]) == (8 * 112 * 112, 147, 64)
    assert s["im2col_bytes"] == 8 * 112 * 112 * 147 * 4
    assert s["blowup"] == pytest.approx(147 * 112 * 112 / (3 * 224 * 224))  # ~ 49 / 4
    assert s["macs"] == 8 * 112 * 112 * 147 * 64
    assert gemm_sizes(1, 8, 1, 1, 4, 4)["blowup"] == 1.0  # a 1x1 kernel copies the input once


def test_gemm_sizes_figure_shows_dims_as_dots_and_the_blowup():
    fig = gemm_sizes_figure(batch=4, image=16, kernel=5, stride=1, c_in=8, c_out=16)
    ax_d, ax_m = fig.axes
    assert ax_d.get_xscale() == "log" and not ax_d.patches  # dots, not bars, on a log axis
    dots = ax_d.get_lines()  # one marker per row, first row on top
    assert [x for d in dots for x in d.get_xdata()] == [4 * 16 * 16, 8 * 25, 16]
    assert {d.get_marker() for d in dots} == {"o"} and [d.get_ydata()[0] for d in dots] == [2, 1, 0]
    assert [t.get_text() for t in ax_d.texts] == ["1,024", "200", "16"]  # each value beside its dot
    heights = [p.get_height() for p in ax_m.patches]  # bars on a linear axis
    assert ax_m.get_yscale() == "linear" and heights[1] / heights[0] == pytest.approx(25.0)
    assert "25.00 × the input" in ax_m.get_title()
    with pytest.raises(ValueError, match="kernel"):
        gemm_sizes_figure(image=4, kernel=11, padding=0)


def test_speed_figure_draws_dots_on_its_log_axis():
    fig = speed_bars_figure(["loops", "numpy"], [2.0, 0.004], title="t")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and not ax.patches
    assert [x for line in ax.get_lines() for x in line.get_xdata()] == [2.0, 0.004]
    texts = _texts(fig)
    assert "2 s" in texts and any(t.startswith("4 ms") and "500× faster" in t for t in texts)
    assert speed_bars_figure(["a", "b"], [1e-3, 5e-5]).axes[0].texts[1].get_text().startswith("50 µs")
    with pytest.raises(ValueError, match="one positive"):
        speed_bars_figure(["a"], [0.0])
