"""course_lib.plots.pipeline: Gantt charts, bubble curves, hybrid figures."""

import numpy as np
import pytest
from matplotlib.text import Text

from course_lib import planner
from course_lib import schedule as mp
from course_lib.models import MLP
from course_lib.plots import figure_to_png
from course_lib.plots.pipeline import (
    _NUMBERS,
    _idle_intervals,
    bubble_figure,
    gantt_figure,
    hybrid_best_figure,
    hybrid_configs_figure,
    hybrid_explorer_figure,
    schedule_figure,
)
from course_lib.plots.style import MIN_FONT_PT

FAST = dict(device_flops=1e10, bandwidth=1e9, latency=1e-5)
IDLE = "idle (bubble)"


def _spans(coll):
    """(x, width, y) of every box of a collection."""
    out = []
    for path in coll.get_paths():
        v = path.vertices
        out.append((v[:, 0].min(), v[:, 0].max() - v[:, 0].min(), (v[:, 1].min() + v[:, 1].max()) / 2))
    return out


def _bars(ax):
    """(x, width, y) of every operation drawn (the idle boxes left out)."""
    return sorted(b for coll in ax.collections if coll.get_label() not in (IDLE, _NUMBERS) for b in _spans(coll))


def _numbers(ax):
    """(text, x, row, width in points) of every micro-batch number written into a bar."""
    found = [c for c in ax.collections if c.get_label() == _NUMBERS]
    if not found:
        return []
    (coll,) = found
    return [(text, x, y, path.get_extents().width)
            for text, (x, y), path in zip(coll.texts, coll.get_offsets(), coll.get_paths())]


def _idle(ax):
    (coll,) = [c for c in ax.collections if c.get_label() == IDLE]
    return _spans(coll)


def _overlap(a, b) -> float:
    """Area (px^2) shared by two display bounding boxes."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(w, 0) * max(h, 0)


def _measured(replicas: int = 1):
    """A measured-looking timeline: two steps of a 2-stage GPipe with M = 2 and an update."""
    base = mp.simulate_uniform(2, 2, forward=0.001)
    ops = base.ops + tuple(
        mp.StageOp(o.stage, o.kind, o.micro, o.start + 1, o.end + 1, 1) for o in base.ops
    ) + (mp.StageOp(0, "U", -1, 0.02, 0.021, 0),)
    return mp.Timeline(ops, 2, 2, "gpipe", "measured")


def test_gantt_draws_one_bar_per_operation_where_it_happened():
    t = mp.simulate_uniform(3, 4, schedule="1f1b")
    fig = gantt_figure(t)
    ax = fig.axes[0]
    bars = _bars(ax)
    assert len(bars) == len(t.ops) == 24
    expected = sorted((op.start, op.duration, float(op.stage)) for op in t.ops)
    assert np.allclose(bars, expected)
    title = ax.get_title()
    assert "1F1B" in title and "$N_p$ = 3" in title and f"{mp.bubble_fraction(3, 4):.1%}" in title
    assert [lab.get_text() for lab in ax.get_legend().get_texts()] == ["forward", "backward", IDLE]


@pytest.mark.parametrize("timeline", [mp.simulate_uniform(4, 8), mp.simulate_uniform(3, 5, schedule="1f1b"),
                                      mp.simulate_pipeline([1.0, 2.5, 0.5], micro_batches=3, send_time=0.3)])
def test_the_shaded_idle_time_is_the_bubble(timeline):
    """The hatched boxes add up to the idle time the title quantifies, row by row."""
    ax = gantt_figure(timeline).axes[0]
    idle = _idle(ax)
    total = sum(w for _, w, _ in idle)
    assert total == pytest.approx(timeline.bubble() * timeline.n_rows * timeline.makespan)
    for row in range(timeline.n_rows):  # per row: idle + busy = the makespan
        row_idle = sum(w for _, w, y in idle if y == row)
        assert row_idle + timeline.busy()[row] == pytest.approx(timeline.makespan)
    # no idle box overlaps an operation of its row
    ops = _bars(ax)
    for x, w, y in idle:
        assert all(x + w <= ox + 1e-9 or ox + ow <= x + 1e-9 for ox, ow, oy in ops if oy == y)


def test_idle_intervals_by_hand():
    t = mp.simulate_uniform(2, 2)  # F = 1, B = 2: stage 0 waits for the backwards, stage 1 for the forwards
    assert _idle_intervals(t) == [(0, 2.0, 5.0), (1, 0.0, 1.0), (1, 7.0, 9.0)]  # 6 of 2 x 9: 1/3
    assert _idle_intervals(mp.Timeline((), 2, 1, "gpipe")) == []


def test_gantt_numbers_are_large_enough_and_fit_their_bar():
    t = mp.simulate_uniform(4, 8, schedule="1f1b")
    fig = gantt_figure(t)
    ax = fig.axes[0]
    figure_to_png(fig)  # lay the figure out
    numbers = _numbers(ax)
    assert len(numbers) == 64 and all(t.isdigit() for t, *_ in numbers)  # every bar is wide enough at M = 8
    (coll,) = [c for c in ax.collections if c.get_label() == _NUMBERS]
    height_pt = max(p.get_extents().height for p in coll.get_paths())
    assert height_pt >= 0.7 * MIN_FONT_PT  # a digit's height is about 0.7 of its type size
    to_px = ax.transData
    for _, x, y, width_pt in numbers:
        bar = next(b for b in _bars(ax) if b[0] <= x <= b[0] + b[1] and b[2] == y)
        width_px = to_px.transform((bar[0] + bar[1], y))[0] - to_px.transform((bar[0], y))[0]
        assert width_pt * fig.dpi / 72.0 <= width_px
    # many micro-batches: the bars get narrow and the numbers that no longer fit are left out
    narrow = gantt_figure(mp.simulate_uniform(4, 24)).axes[0]
    shown = [t for t, *_ in _numbers(narrow)]
    assert shown and len(shown) < 192 and max(len(n) for n in shown) == 1  # only the one-digit backwards


def test_gantt_key_sits_above_the_bars():
    fig = gantt_figure(mp.simulate_uniform(3, 6))
    figure_to_png(fig)
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    assert _overlap(ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)) < 1.0


def test_gantt_of_a_measured_timeline_draws_the_first_step_in_ms():
    t = _measured()
    fig = gantt_figure(t)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time [ms]"
    assert len(_bars(ax)) == 9  # step 0 only: 8 ops and the update
    assert max(x + w for x, w, _ in _bars(ax)) == pytest.approx(21.0)
    assert "measured" in ax.get_title()
    step = t.step(0)
    assert sum(w for _, w, _ in _idle(ax)) == pytest.approx(step.bubble() * 2 * step.makespan * 1e3)


def test_schedule_figure_formula_and_simulated_points():
    fig = schedule_figure(4, 8, schedule="gpipe", max_micro=32)
    ax_g, ax_b = fig.axes[:2]
    assert len(_bars(ax_g)) == 64
    formula = next(line for line in ax_b.get_lines() if line.get_label().startswith("$(N_p-1)"))
    m, y = formula.get_data()
    assert np.allclose(y, (4 - 1) / (m + 4 - 1))
    star = next(line for line in ax_b.get_lines() if line.get_label() == "this setting")
    assert star.get_ydata()[0] == pytest.approx(3 / 11)
    assert "holds 8 micro-batches" in ax_g.get_title()
    assert "holds 4 micro-batches" in schedule_figure(4, 8, schedule="1f1b").axes[0].get_title()
    assert sum(w for _, w, _ in _idle(ax_g)) == pytest.approx(3 / 11 * 4 * 33)


def test_schedule_figure_shows_both_schedules_and_keeps_its_keys_off_the_data():
    fig = schedule_figure(4, 8, schedule="1f1b")
    figure_to_png(fig)
    renderer = fig.canvas.get_renderer()
    ax_g, ax_b, ax_key = fig.axes
    gpipe, one_f = (next(line for line in ax_b.get_lines() if line.get_label() == f"simulated {s}")
                    for s in ("GPipe", "1F1B"))
    # the points coincide (equal stages): told apart by colour, shape and filling
    assert np.allclose(gpipe.get_ydata(), one_f.get_ydata())
    assert gpipe.get_color() != one_f.get_color() and gpipe.get_marker() != one_f.get_marker()
    assert gpipe.get_markerfacecolor() == "none" and gpipe.get_markersize() > one_f.get_markersize()
    key = ax_key.get_legend()
    assert [t.get_text() for t in key.get_texts()] == [
        "$(N_p-1)/(M+N_p-1)$", "simulated GPipe", "simulated 1F1B", "this setting"]
    for legend, ax in ((key, ax_b), (ax_g.get_legend(), ax_g)):
        assert _overlap(legend.get_window_extent(renderer), ax.get_window_extent(renderer)) < 1.0


def test_schedule_figure_is_cached_and_stays_readable_with_many_stages():
    from course_lib.plots.pipeline import _uniform

    schedule_figure(16, 64, schedule="1f1b")
    before = _uniform.cache_info()
    fig = schedule_figure(16, 64, schedule="1f1b")
    after = _uniform.cache_info()
    assert after.misses == before.misses and after.hits > before.hits  # nothing simulated again
    assert all(t.get_fontsize() >= MIN_FONT_PT for t in fig.findobj(Text) if t.get_text())
    assert fig.get_figwidth() <= 9.6


def test_bubble_figure_points_and_validation():
    fig = bubble_figure([2, 2, 3], [2, 4, 4], [0.4, 0.25, 0.45], simulated=[0.35, 0.22, 0.42])
    ax = fig.axes[0]
    pts = next(line for line in ax.get_lines() if line.get_label() == "measured")
    assert pts.get_xdata().tolist() == [2, 4, 4] and pts.get_ydata().tolist() == [0.4, 0.25, 0.45]
    curve = next(line for line in ax.get_lines() if line.get_label() == "formula, $N_p$ = 3")
    m, y = curve.get_data()
    assert np.allclose(y, 2 / (m + 2))
    with pytest.raises(ValueError, match="equal length"):
        bubble_figure([2], [2, 4], [0.3])


def test_bubble_figure_tells_measured_from_simulated_and_ends_with_the_data():
    fig = bubble_figure([2] * 4, [1, 2, 4, 8], [0.5, 0.34, 0.32, 0.36], simulated=[0.5, 0.35, 0.21, 0.12])
    ax = fig.axes[0]
    meas = next(line for line in ax.get_lines() if line.get_label() == "measured")
    sim = next(line for line in ax.get_lines() if line.get_label().startswith("simulated"))
    assert meas.get_color() != sim.get_markeredgecolor() and meas.get_marker() != sim.get_marker()
    assert sim.get_markerfacecolor() == "none"  # hollow around the filled measured point
    assert meas.get_zorder() > sim.get_zorder()
    assert 8 <= ax.get_xlim()[1] <= 8 * 1.5  # the M axis ends where the data end (not at 32)
    assert 0.5 <= ax.get_ylim()[1] <= 0.65
    figure_to_png(fig)
    renderer = fig.canvas.get_renderer()
    assert _overlap(ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)) < 1.0


def _tops(ax, n):
    """Total height of the stacked columns at x = 0 .. n - 1 (drawn as collections)."""
    tops = np.zeros(n)
    for coll in ax.collections:
        for path in coll.get_paths():
            v = path.vertices
            tops[int(round(v[:, 0].mean()))] += v[:, 1].max() - v[:, 1].min()
    return tops


def test_hybrid_figures():
    model = MLP((64, 64, 64, 64, 10))
    configs = planner.enumerate_configs(model, 256, 4, **FAST)
    fig = hybrid_configs_figure(configs, memory=1e9)
    ax_t, ax_m = fig.axes
    assert [t.get_text() for t in ax_m.get_xticklabels()] == [c.label for c in configs]
    assert np.allclose(_tops(ax_m, len(configs)), [c.memory / 1e9 for c in configs])
    assert np.allclose(_tops(ax_t, len(configs)), [c.step_time * 1e3 for c in configs])  # stacked
    assert not ax_t.patches and not ax_m.patches  # one collection per part, no Rectangle per bar

    counts = [1, 2, 4, 8]
    best = planner.best_configs(model, 256, counts, **FAST)
    fig = hybrid_best_figure(counts, best)
    line = fig.axes[0].get_lines()[0]
    assert np.allclose(line.get_ydata(), [b.step_time * 1e3 for b in best])
    assert [t.get_text() for t in fig.axes[0].texts] == [b.label for b in best]
    with pytest.raises(ValueError):
        hybrid_best_figure([1, 2], best)

    fig = hybrid_explorer_figure(4, model=model, batch_size=256, device_counts=counts, memory=1e9, **FAST)
    assert len(fig.axes) == 3
    assert figure_to_png(fig)[:4] == b"\x89PNG"
    assert fig.get_figwidth() <= 9.6


def test_hybrid_configs_mark_what_does_not_fit():
    model = MLP((64, 256, 256, 256, 10))
    configs = planner.enumerate_configs(model, 256, 8, memory=1e6, **FAST)
    bad = [i for i, c in enumerate(configs) if not c.fits]
    assert bad and len(bad) < len(configs)
    fig = hybrid_configs_figure(configs, memory=1e6)
    ax_t = fig.axes[0]
    crosses = next(line for line in ax_t.get_lines() if line.get_label() == "does not fit")
    assert crosses.get_xdata().tolist() == bad
    assert {t.get_text() for t in fig.legends[0].get_texts()} >= {"does not fit", "best that fits",
                                                                  "pipeline bubble"}


def test_hybrid_explorer_redraws_from_the_cache():
    model = MLP((64, 128, 128, 128, 128, 10))
    kw = dict(model=model, device_counts=[1, 2, 4, 8], memory=1e9, max_tensor=2, **FAST)
    hybrid_explorer_figure(4, batch_size=512, **kw)
    before = planner._replica_step.cache_info()
    hybrid_explorer_figure(8, batch_size=512, **kw)  # the devices slider moves
    assert planner._replica_step.cache_info().misses == before.misses
    hybrid_explorer_figure(8, batch_size=1024, **kw)  # the batch doubles: most micro-batches are known
    after = planner._replica_step.cache_info()
    assert after.hits - before.hits > after.misses - before.misses


def test_gantt_of_a_hybrid_timeline_has_a_row_per_device():
    base = mp.simulate_uniform(2, 2)
    ops = base.ops + tuple(
        mp.StageOp(o.stage, o.kind, o.micro, o.start, o.end, 0, 1) for o in base.ops
    ) + (mp.StageOp(1, "A", -1, 9.0, 9.5, 0, 1),)
    t = mp.Timeline(ops, 2, 2, "gpipe", "simulated", replicas=2)
    ax = gantt_figure(t).axes[0]
    assert [lab.get_text() for lab in ax.get_yticklabels()] == [
        "replica 0, stage 0", "replica 0, stage 1", "replica 1, stage 0", "replica 1, stage 1"
    ]
    bars = _bars(ax)
    assert (9.0, 0.5, 3.0) in [tuple(round(v, 6) for v in b) for b in bars]
    assert "$N_d$ = 2 × $N_p$ = 2" in ax.get_title()
    assert "all-reduce" in [lab.get_text() for lab in ax.get_legend().get_texts()]
    assert sum(w for _, w, _ in _idle(ax)) == pytest.approx(t.bubble() * 4 * t.makespan)


def test_hybrid_explorer_shows_the_tensor_axis():
    model = MLP((64, 256, 256, 256, 256, 10))
    kw = dict(device_flops=1e10, bandwidth=1e9, latency=1e-5)
    fig = hybrid_explorer_figure(8, model=model, batch_size=256, device_counts=[1, 2, 4, 8], memory=1e9,
                                 max_tensor=4, **kw)
    ax_t, ax_m, ax_b = (next(ax for ax in fig.axes if ax.get_ylabel().startswith(y))
                        for y in ("step time", "memory", "best step time"))
    configs = planner.enumerate_configs(model, 256, 8, memory=1e9, max_tensor=4, **kw)
    assert [t.get_text() for t in ax_m.get_xticklabels()] == [c.label for c in configs]  # shared with ax_t
    assert {c.tensor for c in configs} == {1, 2, 4}
    groups = [t.get_text() for t in ax_t.texts if t.get_text().startswith("$N_t$ = ")]
    assert groups == ["$N_t$ = 1", "$N_t$ = 2", "$N_t$ = 4"]
    assert np.allclose(_tops(ax_t, len(configs)), [c.step_time * 1e3 for c in configs])
    assert np.allclose(_tops(ax_m, len(configs)), [c.memory / 1e9 for c in configs])
    assert r"$N_d \times N_p \times N_t$" in ax_m.get_xlabel() and "N = 8" in ax_t.get_title()
    assert figure_to_png(fig)[:4] == b"\x89PNG"



def test_hatched_bars_draw_as_one_path_with_the_same_pixels():
    """The bubble's hatched bars are drawn as one compound path (one hatch tile instead of
    one per bar) and give the pixels of a plain PolyCollection; their paths stay one per bar."""
    import io

    import matplotlib.image as mimage
    from matplotlib.collections import PolyCollection

    from course_lib.plots import figure_to_png
    from course_lib.plots import pipeline as pl

    t = mp.simulate_uniform(4, 6, schedule="1f1b")
    fig = gantt_figure(t)
    (coll,) = [c for c in fig.axes[0].collections if c.get_label() == IDLE]
    assert type(coll) is not PolyCollection and len(coll.get_paths()) == len(_spans(coll)) > 1
    fast = mimage.imread(io.BytesIO(figure_to_png(fig, 60)))
    assert len(coll.get_paths()) > 1  # put back after the draw
    plain = pl._hatched_polys_class
    pl._hatched_polys_class = lambda: PolyCollection
    try:
        slow = mimage.imread(io.BytesIO(figure_to_png(gantt_figure(t), 60)))
    finally:
        pl._hatched_polys_class = plain
    assert fast.shape == slow.shape and (fast == slow).all()


def test_the_explorer_without_device_counts_draws_the_configurations_only(monkeypatch):
    """Without ``device_counts`` the explorer draws the step-time and memory panels of one N
    and asks the planner for that N only (a new batch or v then costs a few simulations,
    not one search per device count)."""
    model = MLP((64, 256, 256, 256, 10))
    full = hybrid_explorer_figure(4, model=model, batch_size=256, device_counts=[1, 2, 4], memory=1e9, **FAST)
    assert len(full.axes) == 3

    def refuse(*args, **kwargs):
        raise AssertionError("best_configs asked although no device counts were given")

    monkeypatch.setattr(planner, "best_configs", refuse)
    fig = hybrid_explorer_figure(4, model=model, batch_size=256, memory=1e9, **FAST)
    assert len(fig.axes) == 2
    assert [ax.get_title() for ax in fig.axes][0] == full.axes[0].get_title()
    (t_full, t_own) = [[p.vertices[:, 1].max() for c in f.axes[0].collections for p in c.get_paths()]
                       for f in (full, fig)]
    assert t_full == t_own  # the same bars


def test_the_memory_bars_have_a_colour_and_a_key_of_their_own():
    """Issue 44, item 5: the explorer's memory bars were drawn in the green of "hand-over (p2p)" with no
    key entry. Now they have a colour no part of the step time uses, from the course palette, and
    a key entry (and the bars over the device's memory theirs)."""
    from matplotlib.colors import to_hex

    from course_lib.plots.pipeline import _PARTS
    from course_lib.plots.style import COLORS

    model = MLP((64, 256, 256, 256, 10))
    configs = planner.enumerate_configs(model, 256, 8, memory=1e6, **FAST)
    assert any(c.fits for c in configs) and not all(c.fits for c in configs)
    fig = hybrid_explorer_figure(8, model=model, batch_size=256, memory=1e6, **FAST)
    ax_m = fig.axes[1]
    fills = {to_hex(coll.get_facecolor()[0]) for coll in ax_m.collections if len(coll.get_paths())}
    parts = {to_hex(style["color"]) for _, _, style in _PARTS if "color" in style}
    assert fills and fills <= {to_hex(c) for c in COLORS} and not fills & parts
    keys = {t.get_text() for legend in fig.legends for t in legend.get_texts()}
    assert {"memory per device", "memory per device, over the limit", "hand-over (p2p)"} <= keys
