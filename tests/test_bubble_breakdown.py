"""planner.bubble_breakdown (issue 44, item 4): a measured step's idle share, split into the
formula's bubble, what the stages' own times add, the gradient all-reduce inside the window,
and the rest (hand-overs, turns on shared cores); the parts add up to the measurement."""

import dataclasses

import pytest

from course_lib import planner
from course_lib.schedule import StageOp, Timeline, bubble_fraction, simulate_pipeline


def _parts(b):
    return b.formula + b.stage_times + b.allreduce + b.rest


def test_equal_stages_are_the_formula():
    tl = simulate_pipeline([1.0, 1.0], [2.0, 2.0], micro_batches=2)
    b = planner.bubble_breakdown(tl)
    assert b.measured == pytest.approx(b.formula) == pytest.approx(1 / 3)
    assert b.stage_times == pytest.approx(0) and b.allreduce == 0 and b.rest == pytest.approx(0)


def test_unequal_stages_are_the_stage_times_part():
    tl = simulate_pipeline([1.0, 3.0], micro_batches=4, schedule="1f1b")
    b = planner.bubble_breakdown(tl)
    assert b.formula == bubble_fraction(2, 4) and b.stage_times > 0.1
    assert b.rest == pytest.approx(0, abs=1e-12) and _parts(b) == pytest.approx(b.measured)


def test_hand_overs_are_the_rest():
    tl = simulate_pipeline([1.0, 1.0, 1.0], micro_batches=3, send_time=0.5)  # equal stages, slow hand-overs
    b = planner.bubble_breakdown(tl)
    assert b.stage_times == pytest.approx(0) and b.rest > 0.05 and _parts(b) == pytest.approx(b.measured)


def test_an_allreduce_inside_the_window_is_its_own_part():
    """Hybrid: replica 0's last stage finishes first and all-reduces while the other still computes."""
    ops = [StageOp(0, "F", 0, 0.0, 1.0), StageOp(1, "F", 0, 1.0, 2.0), StageOp(1, "B", 0, 2.0, 4.0),
           StageOp(0, "B", 0, 4.0, 6.0), StageOp(1, "A", -1, 4.0, 5.0), StageOp(1, "U", -1, 5.0, 5.5),
           StageOp(0, "A", -1, 6.0, 7.0)]  # after the window: not counted
    tl = Timeline(tuple(ops), n_stages=2, n_micro=1, schedule="gpipe", source="measured")
    b = planner.bubble_breakdown(tl)
    assert b.makespan == 6.0 and b.measured == pytest.approx(1 - 6.0 / 12.0)
    assert b.allreduce == pytest.approx(1.5 / 12.0) and _parts(b) == pytest.approx(b.measured)
    assert b.formula == pytest.approx(0.5)


def test_a_step_of_several():
    one = simulate_pipeline([1.0, 2.0], micro_batches=2)
    later = tuple(dataclasses.replace(op, step=1, start=op.start + 100, end=op.end + 100) for op in one.ops)
    tl = Timeline(one.ops + later, 2, 2, "gpipe", source="measured")
    assert planner.bubble_breakdown(tl, 0) == planner.bubble_breakdown(tl) == planner.bubble_breakdown(tl, 1)
    with pytest.raises(ValueError, match="k must be one of the steps"):
        planner.bubble_breakdown(tl, 5)
    with pytest.raises(TypeError, match="timeline"):
        planner.bubble_breakdown([1, 2])
