"""course_lib.plots.context: the ring's schedule, the causal mask's imbalance, the experts' load."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from course_lib import context_cost, moe
from course_lib.plots import figure_to_png
from course_lib.plots.context import (
    _ring_schedule,
    causal_busy_figure,
    expert_load_figure,
    ring_schedule_figure,
)
from course_lib.plots.style import MAX_WIDTH_IN, MIN_FONT_PT, MIN_WIDTH_IN

BUSY = {"even": [4.0, 6.6, 8.7, 10.8], "zigzag": [10.3, 9.4, 11.2, 9.5]}
LOAD = [215, 132, 3, 162]  # chapter 13's step 0: 2 choices for each of 256 digits


def _blocks_of(fig) -> list[list[str]]:
    """The labels of the ring grid, row by row (worker 0 first)."""
    ax = fig.axes[0]
    cells = sorted((round(t.get_position()[1]), round(t.get_position()[0]), t.get_text()) for t in ax.texts)
    workers = max(r for r, _, _ in cells) + 1
    return [[text for r, _, text in cells if r == row] for row in range(workers)]


def _code_order(workers: int, causal: bool, split: str) -> np.ndarray:
    """Whose block each worker holds at each step, from RingAttention run on real blocks: each
    worker's keys are filled with its number and a ring of queues passes them on, so the owner
    of a block is read from its values, not from the figure module's bookkeeping."""
    import queue
    import threading

    from course_lib.parallel.context import RingAttention, sequence_chunks

    chunks = sequence_chunks(2 * workers, workers, split)
    boxes = [queue.Queue() for _ in range(workers)]
    seen = np.full((workers, workers), -1)

    class Link:
        def __init__(self, rank):
            self.rank = rank

        def send(self, k, v):
            boxes[(self.rank + 1) % workers].put((k.copy(), v.copy()))

        def recv(self):
            return boxes[self.rank].get(timeout=10)

    class Seen(RingAttention):
        def fold(self, step, state, q, k, v, rows, cols, mask):
            seen[self.rank, step] = int(k[0, 0, 0, 0])
            super().fold(step, state, q, k, v, rows, cols, mask)

    def run(rank):
        k = np.full((1, 2, 1), float(rank))
        Seen(Link(rank), chunks, rank, causal).forward(np.zeros((1, 2, 1)), k, k, 1)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    return seen


# ------------------------------------------------------------------ A: the ring's schedule
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_the_ring_grid_labels_are_the_blocks_ring_attention_holds(workers):
    held = _code_order(workers, False, "even")
    assert (held >= 0).all()
    fig = ring_schedule_figure(workers)
    assert _blocks_of(fig) == [[f"block {b}" for b in row] for row in held]
    assert _ring_schedule(workers, False, "even")[0].tolist() == held.tolist()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [f"worker {r}" for r in range(workers)]
    assert fig.legends == []  # no mask: every block computed whole, nothing to tell apart


@pytest.mark.parametrize("split", ["even", "zigzag"])
def test_the_causal_grid_shades_what_the_mask_skips(split):
    held, share = _ring_schedule(4, True, split)
    computed = sum(context_cost.attention_work(8, 4, split))  # 2 tokens per worker: a block has 4 scores
    assert 4 * share.sum() == computed
    assert (share[:, 0] == 1).all()  # step 0: its own block, computed whole (masked)
    if split == "even":
        # worker i computes the blocks of workers 0..i whole, skips the later ones
        assert share.tolist() == [[1.0 if held[i, s] <= i else 0.0 for s in range(4)] for i in range(4)]
    else:
        assert (share[:, 1:] == 0.5).all()
    fig = ring_schedule_figure(4, causal=True, split=split)
    cells = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    hatched = sum(bool(p.get_hatch()) for p in cells)
    assert hatched == int((share == 0).sum())
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert ("skipped (keys after queries)" in labels) == (split == "even")
    assert ("half computed" in labels) == (split == "zigzag")


# ------------------------------------------------------------------ B: measured and counted
def test_the_busy_bars_are_the_measured_times_and_the_count_scaled_to_their_total():
    fig = causal_busy_figure(BUSY, seq_length=64)
    assert len(fig.axes) == 2
    for ax, split in zip(fig.axes, ("even", "zigzag"), strict=True):
        heights = [p.get_height() for p in ax.patches]
        measured, counted = np.array(heights[:4]), np.array(heights[4:])
        np.testing.assert_allclose(measured, BUSY[split])
        np.testing.assert_allclose(counted.sum(), sum(BUSY[split]))
        work = context_cost.attention_work(64, 4, split)
        np.testing.assert_allclose(counted / counted.sum(), work / work.sum())
        assert ax.get_title().startswith({"even": "even split", "zigzag": "zig-zag split"}[split])
    assert "counted 1.60" in fig.axes[0].get_title() and "counted 1.00" in fig.axes[1].get_title()
    assert len(fig.legends) == 1  # one key, below the panels
    assert len(causal_busy_figure({"zigzag": BUSY["zigzag"]}, seq_length=64).axes) == 1


# ------------------------------------------------------------------ C: the experts
def test_the_load_bars_are_the_loads_cut_at_the_capacity():
    fig = expert_load_figure(LOAD, tokens=256, top_k=2, capacity_factor=1.25, busy=[2.73, 1.82, 0.45, 2.45])
    ax, bx, cx = fig.axes
    cap = moe.capacity(256, 4, 2, 1.25)
    kept, dropped = ax.patches[:4], ax.patches[4:8]
    np.testing.assert_array_equal([k.get_height() + d.get_height() for k, d in zip(kept, dropped, strict=True)], LOAD)
    np.testing.assert_array_equal([d.get_height() for d in dropped], moe.dropped(LOAD, cap))
    assert all(d.get_hatch() for d in dropped) and not any(k.get_hatch() for k in kept)
    (line,) = ax.get_lines()
    assert set(line.get_ydata()) == {cap} == {160}
    assert ax.get_title() == "φ = 1.25: 57 of 512 dropped"
    # drops against phi: the library's capacity and drops for every factor drawn, the run's marked
    curve, mark = bx.get_lines()
    x, y = curve.get_xdata(), curve.get_ydata()
    assert x.min() == 1.0 and x.max() == 2.0
    expected = [100 * moe.dropped(LOAD, moe.capacity(256, 4, 2, f)).sum() / 512 for f in x]
    np.testing.assert_allclose(y, expected)
    assert mark.get_xdata()[0] == 1.25 and mark.get_ydata()[0] == pytest.approx(100 * 57 / 512)
    # the busiest expert, whose time the step waits for
    np.testing.assert_allclose(sorted(p.get_height() for p in cx.patches), sorted([2.73, 1.82, 0.45, 2.45]))
    assert cx.get_title() == "the step waits for 2.73 ms"
    assert len(expert_load_figure(LOAD, tokens=256, top_k=2, capacity_factor=1.25).axes) == 2


def test_a_factor_outside_one_to_two_widens_the_curve_to_it():
    fig = expert_load_figure(LOAD, tokens=256, top_k=2, capacity_factor=0.75)
    curve = fig.axes[1].get_lines()[0]
    assert curve.get_xdata().min() == 0.75 and curve.get_xdata().max() == 2.0


# ------------------------------------------------------------------ every figure
FIGURES = [
    lambda: ring_schedule_figure(8, causal=True, split="zigzag"),
    lambda: ring_schedule_figure(4, causal=True),
    lambda: causal_busy_figure(BUSY, seq_length=64),
    lambda: expert_load_figure(LOAD, tokens=256, top_k=2, capacity_factor=1.25, busy=[2.73, 1.82, 0.45, 2.45]),
]


@pytest.mark.parametrize("make", FIGURES)
def test_figures_are_readable_keep_their_legend_off_the_data_and_close(make):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = make()
    assert MIN_WIDTH_IN <= fig.get_figwidth() <= MAX_WIDTH_IN
    assert all(t.get_fontsize() >= MIN_FONT_PT for t in fig.findobj(Text) if t.get_text())
    figure_to_png(fig)
    renderer = fig.canvas.get_renderer()
    for legend in fig.legends:  # every key sits outside every panel
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            a = ax.get_window_extent(renderer)
            assert min(box.x1, a.x1) <= max(box.x0, a.x0) or min(box.y1, a.y1) <= max(box.y0, a.y0)
    titles = [ax.title.get_window_extent(renderer) for ax in fig.axes]
    for i, a in enumerate(titles):  # titles side by side do not run into each other
        for b in titles[i + 1:]:
            assert min(a.x1, b.x1) <= max(a.x0, b.x0) or min(a.y1, b.y1) <= max(a.y0, b.y0)
    assert plt.get_fignums() == before  # never a pyplot figure: nothing left open
    ref = _drawn(make)
    gc.collect()
    assert ref() is None  # and once dropped, nothing holds it: it is freed


def _drawn(make):
    """A weak reference to a figure made and rendered, no strong one left."""
    fig = make()
    figure_to_png(fig)
    return weakref.ref(fig)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(("call", "exc", "name"), [
    (lambda: ring_schedule_figure(0), ValueError, "workers"),
    (lambda: ring_schedule_figure(9), ValueError, "workers"),
    (lambda: ring_schedule_figure(2.0), TypeError, "workers"),
    (lambda: ring_schedule_figure(2, causal="yes"), TypeError, "causal"),
    (lambda: ring_schedule_figure(2, split="odd"), ValueError, "split"),
    (lambda: causal_busy_figure({}, seq_length=64), ValueError, "busy"),
    (lambda: causal_busy_figure({"odd": [1.0]}, seq_length=64), ValueError, "busy"),
    (lambda: causal_busy_figure([1.0, 2.0], seq_length=64), TypeError, "busy"),
    (lambda: causal_busy_figure({"even": [1.0, -2.0]}, seq_length=64), ValueError, "busy"),
    (lambda: causal_busy_figure({"even": [1.0, 2.0], "zigzag": [1.0]}, seq_length=64), ValueError, "busy"),
    (lambda: causal_busy_figure(BUSY, seq_length=66), ValueError, "seq_length"),
    (lambda: causal_busy_figure(BUSY, seq_length=0), ValueError, "seq_length"),
    (lambda: expert_load_figure([1, 2.5], tokens=2, top_k=1, capacity_factor=1.0), ValueError, "load"),
    (lambda: expert_load_figure([[1, 2]], tokens=3, top_k=1, capacity_factor=1.0), ValueError, "load"),
    (lambda: expert_load_figure([1, -1], tokens=0, top_k=1, capacity_factor=1.0), ValueError, "load"),
    (lambda: expert_load_figure([1, 2], tokens=4, top_k=1, capacity_factor=1.0), ValueError, "load"),
    (lambda: expert_load_figure([1, 2], tokens=3, top_k=3, capacity_factor=1.0), ValueError, "top_k"),
    (lambda: expert_load_figure([1, 2], tokens=0, top_k=1, capacity_factor=1.0), ValueError, "tokens"),
    (lambda: expert_load_figure([1, 2], tokens=3, top_k=1, capacity_factor=0.0), ValueError, "capacity_factor"),
    (lambda: expert_load_figure([1, 2], tokens=3, top_k=1, capacity_factor=1.0, busy=[1.0]), ValueError, "busy"),
])
def test_bad_input_names_the_parameter(call, exc, name):
    with pytest.raises(exc, match=name):
        call()
