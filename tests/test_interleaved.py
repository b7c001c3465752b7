"""Interleaved 1F1B (virtual stages; Narayanan et al., SC 2021, section 2.2.2).

The schedule, the simulator against the formula (N_p - 1)/(v M + N_p - 1), the process
pipeline against the one-process reference, the planner's pipeline axis, the figure.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import schedule as mp

# ----------------------------------------------------------------------------- schedule


def test_bubble_fraction_hand_values():
    assert mp.bubble_fraction(2, 2, 2) == pytest.approx(1 / 5)
    assert mp.bubble_fraction(4, 8, virtual_stages=1) == mp.bubble_fraction(4, 8)
    assert mp.bubble_fraction(4, 8, virtual_stages=4) == pytest.approx(3 / 35)
    assert np.allclose(mp.bubble_fraction(4, 8, [1, 2, 4]), [3 / 11, 3 / 19, 3 / 35])


@pytest.mark.parametrize("bad", [0, 0.5, -1])
def test_bubble_fraction_rejects_bad_virtual_stages(bad):
    with pytest.raises(ValueError, match="virtual_stages"):
        mp.bubble_fraction(4, 8, bad)


def test_order_two_devices_two_micro_batches_two_chunks_by_hand():
    # M = N_p: every forward first (groups of N_p = 2: chunk 0 for m = 0, 1, then chunk 1),
    # then the backwards from the last chunk back
    expected = [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1),
                ("B", 0, 1), ("B", 1, 1), ("B", 0, 0), ("B", 1, 0)]
    assert mp.schedule_order(2, 2, "1f1b", virtual_stages=2) == [expected, expected]


def test_order_two_devices_four_micro_batches_two_chunks_by_hand():
    # device 0: 2 (N_p - 0 - 1) + (v - 1) N_p = 4 warm-up forwards; device 1: 2
    d0, d1 = mp.schedule_order(2, 4, "1f1b", virtual_stages=2)
    assert d0 == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1),
                  ("F", 2, 0), ("B", 0, 1), ("F", 3, 0), ("B", 1, 1), ("F", 2, 1), ("B", 0, 0),
                  ("F", 3, 1), ("B", 1, 0),
                  ("B", 2, 1), ("B", 3, 1), ("B", 2, 0), ("B", 3, 0)]
    assert d1[:4] == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("B", 0, 1)]


def test_one_virtual_stage_is_plain_1f1b():
    for n, m in ((1, 3), (3, 4), (4, 8)):
        assert mp.schedule_order(n, m, "1f1b", virtual_stages=1) == mp.schedule_order(n, m, "1f1b")
        assert mp.simulate_uniform(n, m, schedule="1f1b", virtual_stages=1).ops == \
            mp.simulate_uniform(n, m, schedule="1f1b").ops


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5), k=st.integers(1, 4), v=st.integers(1, 4))
def test_order_runs_every_unit_once_backwards_in_micro_order_per_chunk(n, k, v):
    m = n * k
    for order in mp.schedule_order(n, m, "1f1b", virtual_stages=v):
        order = [(*op, 0)[:3] for op in order]  # v = 1: (kind, micro), chunk 0
        units = {(mb, c) for mb in range(m) for c in range(v)}
        assert sorted(op[1:] for op in order if op[0] == "F") == sorted(units)
        assert sorted(op[1:] for op in order if op[0] == "B") == sorted(units)
        for c in range(v):  # gradients of a chunk accumulate in micro-batch order
            assert [op[1] for op in order if op[0] == "B" and op[2] == c] == list(range(m))
        seen = set()
        for kind, mb, c in order:
            assert kind == "F" or (mb, c) in seen  # forward before its backward
            seen.add((mb, c))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 6), k=st.integers(1, 4), v=st.integers(1, 4), ratio=st.sampled_from([0.5, 1.0, 2.0, 3.0]))
def test_simulated_idle_share_equals_formula(n, k, v, ratio):
    t = mp.simulate_uniform(n, n * k, schedule="1f1b", forward=1.0, backward=ratio, virtual_stages=v)
    assert t.bubble() == pytest.approx(mp.bubble_fraction(n, n * k, v), abs=1e-12)
    assert t.busy() == pytest.approx([n * k * (1.0 + ratio)] * n)  # each device: its whole work


def test_simulated_timeline_by_hand():
    # N_p = 2, M = 2, v = 2, chunk forward 0.5, backward 1 (a device: t_f = 1, t_b = 2)
    t = mp.simulate_uniform(2, 2, schedule="1f1b", virtual_stages=2)
    dev1 = [(o.kind, o.micro, o.chunk, o.start, o.end) for o in t.ops if o.stage == 1]
    assert dev1 == [("F", 0, 0, 0.5, 1.0), ("F", 1, 0, 1.0, 1.5), ("F", 0, 1, 1.5, 2.0), ("F", 1, 1, 2.0, 2.5),
                    ("B", 0, 1, 2.5, 3.5), ("B", 1, 1, 3.5, 4.5), ("B", 0, 0, 4.5, 5.5), ("B", 1, 0, 5.5, 6.5)]
    assert t.makespan == 7.5  # vs 9 without interleaving
    assert mp.simulate_uniform(2, 2, schedule="1f1b").makespan == 9.0
    assert t.virtual_stages == 2 and t.step(0).virtual_stages == 2


def test_send_time_per_virtual_boundary():
    # 2 devices x 2 chunks: 3 boundaries; the last device's chunk 0 hands back to device 0
    t = mp.simulate_pipeline([1.0] * 4, [1.0] * 4, micro_batches=2, schedule="1f1b", virtual_stages=2,
                             send_time=[0.0, 10.0, 0.0])
    f = {(o.stage, o.chunk, o.micro): o for o in t.ops if o.kind == "F"}
    assert f[(0, 1, 0)].start == pytest.approx(f[(1, 0, 0)].end + 10.0)
    with pytest.raises(ValueError, match="send_time"):
        mp.simulate_pipeline([1.0] * 4, micro_batches=2, schedule="1f1b", virtual_stages=2, send_time=[0.0])


@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(virtual_stages=0), ValueError, "virtual_stages"),
    (dict(virtual_stages=2.0), TypeError, "virtual_stages"),
    (dict(virtual_stages=2, micro_batches=3), ValueError, "micro_batches must be a multiple"),
    (dict(virtual_stages=2, schedule="gpipe"), ValueError, "virtual_stages"),
])
def test_bad_virtual_stages(kwargs, exc, word):
    args = dict(micro_batches=4, schedule="1f1b") | kwargs
    with pytest.raises(exc, match=word):
        mp.schedule_order(2, args.pop("micro_batches"), args.pop("schedule"), **args)


def test_simulate_pipeline_rejects_costs_not_a_multiple_of_v():
    with pytest.raises(ValueError, match="forward must have"):
        mp.simulate_pipeline([1.0] * 3, micro_batches=2, schedule="1f1b", virtual_stages=2)


def test_virtual_handovers():
    assert mp.virtual_handovers(1, 1) == 0
    assert mp.virtual_handovers(4, 1) == 3
    assert mp.virtual_handovers(4, 3) == 11
