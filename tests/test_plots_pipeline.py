"""course_lib.plots.pipeline: Gantt charts, bubble curves, hybrid figures."""

import numpy as np
import pytest

from course_lib.models import MLP
from course_lib.parallel import hybrid
from course_lib.parallel import pipeline_schedule as mp
from course_lib.plots import figure_to_png
from course_lib.plots.pipeline import (
    bubble_figure,
    gantt_figure,
    hybrid_best_figure,
    hybrid_configs_figure,
    hybrid_explorer_figure,
    schedule_figure,
)

FAST = dict(device_flops=1e10, bandwidth=1e9, latency=1e-5)


def _bars(ax):
    """(x, width, y) of every bar drawn with broken_barh."""
    out = []
    for coll in ax.collections:
        for path in coll.get_paths():
            v = path.vertices
            out.append((v[:, 0].min(), v[:, 0].max() - v[:, 0].min(), (v[:, 1].min() + v[:, 1].max()) / 2))
    return sorted(out)


def test_gantt_draws_one_bar_per_operation_where_it_happened():
    t = mp.simulate_uniform(3, 4, schedule="1f1b")
    fig = gantt_figure(t)
    ax = fig.axes[0]
    bars = _bars(ax)
    assert len(bars) == len(t.ops) == 24
    expected = sorted((op.start, op.duration, float(op.stage)) for op in t.ops)
    assert np.allclose(bars, expected)
    title = ax.get_title()
    assert "1F1B" in title and f"{mp.bubble_fraction(3, 4):.1%}" in title
    assert [lab.get_text() for lab in ax.get_legend().get_texts()] == ["forward", "backward"]


def test_gantt_of_a_measured_timeline_draws_the_first_step_in_ms():
    base = mp.simulate_uniform(2, 2, forward=0.001)
    ops = base.ops + tuple(
        mp.StageOp(o.stage, o.kind, o.micro, o.start + 1, o.end + 1, 1) for o in base.ops
    ) + (mp.StageOp(0, "U", -1, 0.02, 0.021, 0),)
    t = mp.Timeline(ops, 2, 2, "gpipe", "measured")
    fig = gantt_figure(t)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time [ms]"
    assert len(_bars(ax)) == 9  # step 0 only: 8 ops and the update
    assert max(x + w for x, w, _ in _bars(ax)) == pytest.approx(21.0)
    assert "measured" in ax.get_title()


def test_schedule_figure_formula_and_simulated_points():
    fig = schedule_figure(4, 8, schedule="gpipe", max_micro=32)
    ax_g, ax_b = fig.axes
    assert len(_bars(ax_g)) == 64
    formula = next(line for line in ax_b.get_lines() if line.get_label().startswith("$(N_p-1)"))
    m, y = formula.get_data()
    assert np.allclose(y, (4 - 1) / (m + 4 - 1))
    star = next(line for line in ax_b.get_lines() if line.get_label() == "this setting")
    assert star.get_ydata()[0] == pytest.approx(3 / 11)
    assert "holds 8 micro-batches" in ax_g.get_title()
    assert "holds 4 micro-batches" in schedule_figure(4, 8, schedule="1f1b").axes[0].get_title()


def test_bubble_figure_points_and_validation():
    fig = bubble_figure([2, 2, 3], [2, 4, 4], [0.4, 0.25, 0.45], simulated=[0.35, 0.22, 0.42])
    ax = fig.axes[0]
    pts = next(line for line in ax.get_lines() if line.get_label() == "measured, S = 2")
    assert pts.get_xdata().tolist() == [2, 4] and pts.get_ydata().tolist() == [0.4, 0.25]
    curve = next(line for line in ax.get_lines() if line.get_label() == "formula, S = 3")
    m, y = curve.get_data()
    assert np.allclose(y, 2 / (m + 2))
    with pytest.raises(ValueError, match="equal length"):
        bubble_figure([2], [2, 4], [0.3])


def test_hybrid_figures():
    model = MLP((64, 64, 64, 64, 10))
    configs = hybrid.enumerate_configs(model, 256, 4, **FAST)
    fig = hybrid_configs_figure(configs, memory=1e9)
    ax_t, ax_m = fig.axes
    assert [t.get_text() for t in ax_t.get_xticklabels()] == [c.label for c in configs]
    heights = [p.get_height() for p in ax_m.patches]
    assert np.allclose(heights, [c.memory / 1e9 for c in configs])
    # stacked bars: total height = step time
    tops = np.zeros(len(configs))
    for p in ax_t.patches:
        tops[int(round(p.get_x() + p.get_width() / 2))] += p.get_height()
    assert np.allclose(tops, [c.step_time * 1e3 for c in configs])

    counts = [1, 2, 4, 8]
    best = hybrid.best_configs(model, 256, counts, **FAST)
    fig = hybrid_best_figure(counts, best)
    line = fig.axes[0].get_lines()[0]
    assert np.allclose(line.get_ydata(), [b.step_time * 1e3 for b in best])
    with pytest.raises(ValueError):
        hybrid_best_figure([1, 2], best)

    fig = hybrid_explorer_figure(4, model=model, batch_size=256, device_counts=counts, memory=1e9, **FAST)
    assert len(fig.axes) == 3
    assert figure_to_png(fig)[:4] == b"\x89PNG"


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
    assert "D = 2 x S = 2" in ax.get_title()
    assert "all-reduce" in [lab.get_text() for lab in ax.get_legend().get_texts()]
