"""course_lib.parallel.pipeline: schedules, the pipeline simulator, layer partitions."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import schedule as mp
from course_lib.models import MLP


def _by_key(timeline):
    return {(op.kind, op.stage, op.micro): op for op in timeline.ops}


# ------------------------------------------------------------------ formula
def test_bubble_fraction_hand_values():
    assert mp.bubble_fraction(2, 1) == pytest.approx(0.5)
    assert mp.bubble_fraction(4, 4) == pytest.approx(3 / 7)
    assert mp.bubble_fraction(1, 100) == 0.0
    assert np.allclose(mp.bubble_fraction([2, 8], 8), [1 / 9, 7 / 15])


@pytest.mark.parametrize("bad", [0, -1, float("nan")])
def test_bubble_fraction_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="stages"):
        mp.bubble_fraction(bad, 4)
    with pytest.raises(ValueError, match="micro_batches"):
        mp.bubble_fraction(4, bad)


# ------------------------------------------------------------------ schedules
@given(s=st.integers(1, 7), m=st.integers(1, 12), schedule=st.sampled_from(mp.SCHEDULES))
def test_schedule_order_runs_every_op_once_forward_before_backward(s, m, schedule):
    orders = mp.schedule_order(s, m, schedule)
    assert len(orders) == s
    for order in orders:
        assert sorted(order) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
        assert [i for k, i in order if k == "B"] == list(range(m))  # same accumulation order
        for i in range(m):
            assert order.index(("F", i)) < order.index(("B", i))


def test_1f1b_order_hand_written():
    assert mp.schedule_order(3, 4, "1f1b")[0] == [
        ("F", 0), ("F", 1), ("F", 2), ("B", 0), ("F", 3), ("B", 1), ("B", 2), ("B", 3)
    ]


def test_schedule_rejects_unknown_name():
    with pytest.raises(ValueError, match="schedule"):
        mp.schedule_order(2, 2, "pipedream")
    with pytest.raises(TypeError, match="stages"):
        mp.schedule_order(2.0, 2)


# ------------------------------------------------------------------ simulator
def test_gpipe_two_stages_two_micro_batches_by_hand():
    t = mp.simulate_pipeline([1.0, 1.0], [2.0, 2.0], micro_batches=2, schedule="gpipe")
    ops = _by_key(t)
    expected = {
        ("F", 0, 0): (0, 1), ("F", 0, 1): (1, 2), ("F", 1, 0): (1, 2), ("F", 1, 1): (2, 3),
        ("B", 1, 0): (3, 5), ("B", 1, 1): (5, 7), ("B", 0, 0): (5, 7), ("B", 0, 1): (7, 9),
    }
    assert {k: (op.start, op.end) for k, op in ops.items()} == expected
    assert t.makespan == 9.0
    assert t.bubble() == pytest.approx(1 / 3) == pytest.approx(mp.bubble_fraction(2, 2))
    assert t.busy().tolist() == [6.0, 6.0]


@settings(max_examples=60, deadline=None)
@given(
    s=st.integers(1, 8), m=st.integers(1, 16), schedule=st.sampled_from(mp.SCHEDULES),
    f=st.floats(0.1, 10), ratio=st.floats(0.5, 3),
)
def test_equal_stages_reproduce_the_formula(s, m, schedule, f, ratio):
    t = mp.simulate_uniform(s, m, schedule=schedule, forward=f, backward=f * ratio)
    assert t.makespan == pytest.approx((m + s - 1) * f * (1 + ratio))
    assert t.bubble() == pytest.approx(mp.bubble_fraction(s, m), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.tuples(st.floats(0.1, 5), st.floats(0.1, 5)), min_size=1, max_size=6),
    m=st.integers(1, 10), send=st.floats(0, 2),
)
def test_gpipe_makespan_is_the_flow_shop_formula(costs, m, send):
    # all forwards then all backwards: two flow shops of M identical jobs, each lasting
    # sum(p) + (M - 1) max(p) plus one hand-over per boundary
    f = np.array([c[0] for c in costs])
    b = np.array([c[1] for c in costs])
    s = len(costs)
    t = mp.simulate_pipeline(f, b, micro_batches=m, schedule="gpipe", send_time=send)
    expected = f.sum() + (m - 1) * f.max() + b.sum() + (m - 1) * b.max() + 2 * (s - 1) * send
    assert t.makespan == pytest.approx(expected)


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.tuples(st.floats(0.1, 5), st.floats(0.1, 5)), min_size=1, max_size=6),
    m=st.integers(1, 10), schedule=st.sampled_from(mp.SCHEDULES), send=st.floats(0, 1),
)
def test_timeline_respects_dependencies_and_stage_exclusivity(costs, m, schedule, send):
    f = [c[0] for c in costs]
    b = [c[1] for c in costs]
    s = len(costs)
    t = mp.simulate_pipeline(f, b, micro_batches=m, schedule=schedule, send_time=send)
    ops = _by_key(t)
    assert len(ops) == 2 * s * m
    eps = 1e-9
    for (kind, st_, i), op in ops.items():
        assert op.duration == pytest.approx(f[st_] if kind == "F" else b[st_])
        if kind == "F" and st_ > 0:
            assert op.start >= ops[("F", st_ - 1, i)].end + send - eps
        if kind == "B":
            if st_ < s - 1:
                assert op.start >= ops[("B", st_ + 1, i)].end + send - eps
            else:
                assert op.start >= ops[("F", st_, i)].end - eps
    for st_ in range(s):
        mine = sorted((op for op in t.ops if op.stage == st_), key=lambda o: o.start)
        assert all(a.end <= c.start + eps for a, c in zip(mine, mine[1:]))
    # no schedule beats the busiest stage or one micro-batch's trip through all stages
    work = np.add(f, b)
    assert t.makespan >= max(m * work.max(), work.sum()) - eps


@given(s=st.integers(1, 8), m=st.integers(1, 16))
def test_activation_memory_gpipe_holds_m_1f1b_holds_s_minus_stage(s, m):
    assert mp.simulate_uniform(s, m, schedule="gpipe").in_flight().tolist() == [m] * s
    assert mp.simulate_uniform(s, m, schedule="1f1b").in_flight().tolist() == [
        min(s - k, m) for k in range(s)
    ]


@settings(max_examples=40, deadline=None)
@given(
    costs=st.lists(st.tuples(st.floats(0.1, 3.0), st.floats(0.1, 3.0)), min_size=1, max_size=6),
    m=st.integers(1, 12),
    schedule=st.sampled_from(["gpipe", "1f1b"]),
    send=st.floats(0.0, 1.0),
)
def test_in_flight_equals_counting_at_every_forward_start(costs, m, schedule, send):
    # Independent reference: a stage holds, at the start of each of its forwards,
    # the forwards started so far minus the backwards started so far (a backward
    # at the same instant frees first).
    f, b = zip(*costs)
    t = mp.simulate_pipeline(f, b, micro_batches=m, schedule=schedule, send_time=send)
    expected = []
    for stage in range(len(costs)):
        fw = [op.start for op in t.ops if op.stage == stage and op.kind == "F"]
        bw = [op.start for op in t.ops if op.stage == stage and op.kind == "B"]
        expected.append(max(sum(x <= s0 for x in fw) - sum(x <= s0 for x in bw) for s0 in fw))
    assert t.in_flight().tolist() == expected


def test_per_boundary_send_times():
    t = mp.simulate_pipeline([1, 1, 1], [1, 1, 1], micro_batches=1, send_time=[0.5, 2.0])
    ops = _by_key(t)
    assert ops[("F", 1, 0)].start == 1.5 and ops[("F", 2, 0)].start == 4.5
    # F2 ends at 5.5 (= B2's start), B2 ends at 6.5, + 2.0 hand-over; B1 ends at 9.5, + 0.5
    assert ops[("B", 1, 0)].start == 8.5 and ops[("B", 0, 0)].start == 10.0
    with pytest.raises(ValueError, match="send_time"):
        mp.simulate_pipeline([1, 1, 1], micro_batches=1, send_time=[1.0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(forward=[], micro_batches=1), "forward"),
        (dict(forward=[1.0, -1.0], micro_batches=1), "forward"),
        (dict(forward=[1.0], backward=[1.0, 2.0], micro_batches=1), "backward"),
        (dict(forward=[1.0], micro_batches=0), "micro_batches"),
        (dict(forward=[1.0], micro_batches=1, send_time=-1), "send_time"),
        (dict(forward=[1.0], micro_batches=1, schedule="zb"), "schedule"),
    ],
)
def test_simulator_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mp.simulate_pipeline(**kwargs)


def test_timeline_steps_and_per_step_bubble():
    a = mp.simulate_uniform(2, 2)
    shifted = tuple(
        mp.StageOp(op.stage, op.kind, op.micro, op.start + 100, op.end + 100, 1) for op in a.ops
    )
    both = mp.Timeline(a.ops + shifted, 2, 2, "gpipe", "measured")
    assert both.steps == (0, 1)
    assert np.allclose(both.bubble_per_step(), [1 / 3, 1 / 3])
    assert both.step(1).ops[0].start == 0.0
    with pytest.raises(ValueError, match="k must be"):
        both.step(5)


# ------------------------------------------------------------------ stage costs
def test_layer_flops_add_up_to_the_model_count():
    model = MLP((64, 48, 32, 10))
    f, b = mp.layer_flops(model)
    per_sample = model.flops_per_sample()
    assert f.sum() == per_sample["forward"] and b.sum() == per_sample["backward"]


def _brute_force_partition(cost, stages):
    n = len(cost)
    best = None
    for cuts in itertools.combinations(range(1, n), stages - 1):
        b = (0, *cuts, n)
        worst = max(sum(cost[lo:hi]) for lo, hi in zip(b[:-1], b[1:]))
        if best is None or worst < best:
            best = worst
    return best


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), min_size=2, max_size=7), data=st.data())
def test_partition_is_optimal_against_brute_force(sizes, data):
    model = MLP(tuple(sizes))
    stages = data.draw(st.integers(1, model.n_layers))
    bounds = mp.partition_layers(model, stages)
    assert len(bounds) == stages + 1 and bounds[0] == 0 and bounds[-1] == model.n_layers
    f, b = mp.stage_flops(model, bounds)
    lf, lb = mp.layer_flops(model)
    assert (f + b).max() == _brute_force_partition(list(lf + lb), stages)
    assert f.sum() == lf.sum() and b.sum() == lb.sum()


def test_partition_rejects_more_stages_than_layers():
    with pytest.raises(ValueError, match="stages"):
        mp.partition_layers(MLP((8, 8, 8)), 3)
    with pytest.raises(ValueError, match="boundaries"):
        mp.stage_flops(MLP((8, 8, 8)), (0, 2, 2))


def test_partition_is_cached_by_the_models_sizes():
    """A second call with an equal model (a new object) returns the cached split, computed once."""
    sizes = (48, 96, 96, 96, 96, 10)
    first = mp.partition_layers(MLP(sizes), 3)
    before = mp._partition_layers.cache_info()
    again = mp.partition_layers(MLP(sizes), 3)
    after = mp._partition_layers.cache_info()
    assert again is first and after.hits == before.hits + 1 and after.misses == before.misses
    assert again == mp._partition_layers.__wrapped__(MLP(sizes), 3)  # the same as computed afresh
    assert mp.partition_layers(MLP(sizes, dtype=np.float64), 3) == first  # another key, same split
    assert mp._partition_layers.cache_info().misses == before.misses + 1
    with pytest.raises(ValueError, match="stages"):  # checked before the cache
        mp.partition_layers(MLP(sizes), 6)
