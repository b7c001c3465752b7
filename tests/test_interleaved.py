"""Interleaved 1F1B (virtual stages; Narayanan et al., SC 2021, section 2.2.2).

The schedule, the simulator against the formula (N_p - 1)/(v M + N_p - 1), the process
pipeline against the one-process reference, the planner's pipeline axis, the figure.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import planner
from course_lib import schedule as mp
from course_lib.models import MLP
from course_lib.parallel.engine.workers import Fault, WorkerDied, WorkerError
from course_lib.parallel.train import pipeline as mp_run
from course_lib.parallel.train import reference
from course_lib.timing import blas_threads

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


def test_stage_order_is_the_rule_schedule_order_applies():
    for n, m, v in ((2, 4, 2), (3, 6, 3), (4, 8, 1)):
        assert mp.schedule_order(n, m, "1f1b", virtual_stages=v) == [
            mp.stage_order(q, n, m, "1f1b", virtual_stages=v) for q in range(n)]


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


@pytest.mark.parametrize("n", [2, 3, 4, 8])
@pytest.mark.parametrize("v", [2, 3, 4])
def test_first_device_holds_what_korthikanti_counts(n, v):
    # Korthikanti et al. 2023, section 4.2.3: interleaving makes the first stage hold the activations
    # of N_p (1 + (N_p - 1)/(N_p v)) stages' worth of layers; a chunk is 1/v of them
    t = mp.simulate_uniform(n, 2 * n, schedule="1f1b", virtual_stages=v)
    assert t.in_flight()[0] / v == pytest.approx(n * (1 + (n - 1) / (n * v)))
    assert mp.simulate_uniform(n, 2 * n, schedule="1f1b").in_flight()[0] == n  # plain 1F1B: N_p


def test_megatron_table_rows_interleave_in_groups_of_n_p():
    from course_lib.datasets import load_megatron_configs

    rows = [c for c in load_megatron_configs() if c.layers_per_virtual_stage]
    assert rows
    for c in rows:
        n_p = c.pipeline_parallel
        m = c.batch_size // (c.gpus // (c.tensor_parallel * n_p) * c.micro_batch_size)
        v = c.layers // n_p // c.layers_per_virtual_stage
        assert m % n_p == 0 and v > 1  # the rule the schedule enforces holds for the published runs
        assert mp.bubble_fraction(n_p, m, v) < mp.bubble_fraction(n_p, m)


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


# ----------------------------------------------------------------------------- processes
pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean, digits

MODEL = MLP((64, 24, 20, 16, 10))  # 4 layers: 2 processes x 2 chunks of one layer
RUN = dict(batch_size=48, steps=4, lr=0.2, seed=3)


def _reference(x, y, micro_batches, **kw):
    with blas_threads(1):
        return reference.train_microbatched(MODEL, x, y, micro_batches=micro_batches, **(RUN | kw))


@pytest.mark.parametrize("extra", [dict(), dict(recompute=True)], ids=["plain", "recompute"])
def test_interleaved_pipeline_equals_reference_bitwise(digits, extra, clean):
    x, y = digits
    res = mp_run.train_pipeline(MODEL, x, y, stages=2, micro_batches=4, schedule="1f1b", virtual_stages=2,
                                **RUN, **extra)
    assert np.array_equal(res.params, _reference(x, y, 4).params)  # bitwise
    assert res.boundaries == (0, 1, 2, 3, 4) and res.workers == 2
    tl = res.timeline
    assert tl.virtual_stages == 2 and tl.n_stages == 2 and tl.n_rows == 2
    for q, order in enumerate(mp.schedule_order(2, 4, "1f1b", virtual_stages=2)):
        for k in tl.steps:  # each process ran its interleaved order, chunks recorded
            mine = [(o.kind, o.micro, o.chunk) for o in tl.ops if o.stage == q and o.step == k and o.kind in "FB"]
            assert sorted(mine, key=order.index) == order
            assert sorted(o.chunk for o in tl.ops if o.stage == q and o.step == k and o.kind == "U") == [0, 1]
    assert res.bubble_per_step().shape == (4,) and np.all((res.bubble_per_step() >= 0) & (res.bubble_per_step() < 1))


def test_interleaved_handover_bytes_are_the_price(digits, clean):
    x, y = digits
    plain = mp_run.train_pipeline(MODEL, x, y, stages=2, micro_batches=2, schedule="1f1b", steps=1,
                                  batch_size=48, lr=0.2, seed=3)
    inter = mp_run.train_pipeline(MODEL, x, y, stages=2, micro_batches=2, schedule="1f1b", virtual_stages=2,
                                  steps=1, batch_size=48, lr=0.2, seed=3)
    # v = 1: one boundary, 2 x 48 x its width x 4 B
    assert plain.bytes_per_step[0] == mp.handover_bytes(MODEL, plain.boundaries, 48)
    # v = 2: chunks (0, 1, 2, 3, 4): 3 boundaries of widths 24, 20, 16 = 2 x 48 x 60 x 4 B
    assert inter.bytes_per_step[0] == mp.handover_bytes(MODEL, (0, 1, 2, 3, 4), 48) == 2 * 48 * 60 * 4
    # the measured costs: one per virtual stage (chunk c of device q is c N_p + q), as the
    # simulator takes them, each the median of that chunk's own operations
    f, b = inter.stage_costs(skip_first=False)
    assert f.shape == b.shape == (4,) and np.all(f > 0) and np.all(b > 0)
    ops = inter.timeline.ops
    for j in range(4):
        chunk, q = divmod(j, 2)
        mine = [o.duration for o in ops if o.kind == "F" and o.stage == q and o.chunk == chunk]
        assert len(mine) == 2 and f[j] == np.median(mine)
    sim = mp.simulate_pipeline(f, b, micro_batches=2, schedule="1f1b", virtual_stages=2)
    assert 0 < sim.bubble() < 1


def test_interleaved_hybrid_two_replicas(digits, clean):
    x, y = digits
    res = mp_run.train_pipeline(MODEL, x, y, stages=2, micro_batches=2, schedule="1f1b", virtual_stages=2,
                                data=2, **RUN)
    ref = _reference(x, y, 4)  # two replicas of two micro-batches: four micro-batches
    np.testing.assert_allclose(res.params, ref.params, rtol=0, atol=1e-6)
    assert res.replicas_in_sync and res.workers == 4
    assert {(o.replica, o.stage, o.chunk) for o in res.timeline.ops if o.kind == "A"} == {
        (d, q, c) for d in range(2) for q in range(2) for c in range(2)}


@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(virtual_stages=0), ValueError, "virtual_stages"),
    (dict(virtual_stages=2.0), TypeError, "virtual_stages"),
    (dict(virtual_stages="2"), TypeError, "virtual_stages"),
    (dict(virtual_stages=2, micro_batches=3), ValueError, "micro_batches must be a multiple"),
    (dict(virtual_stages=3), ValueError, "at most n_layers"),
    (dict(virtual_stages=2, schedule="gpipe"), ValueError, "virtual_stages"),
    (dict(virtual_stages=2, stages=None, boundaries=(0, 1, 2, 4)), ValueError, "boundaries"),
    # 300 samples = 9 x 33 + 3: the last batch has 3 micro-batches, not a multiple of N_p = 2
    (dict(virtual_stages=2, steps=None, epochs=1, batch_size=33), ValueError, "micro_batches must be a multiple"),
])
def test_bad_interleaved_input_names_the_parameter(digits, kwargs, exc, word, clean):
    x, y = digits
    args = dict(stages=2, micro_batches=4, schedule="1f1b", steps=1, batch_size=48) | kwargs
    with pytest.raises(exc, match=word):
        mp_run.train_pipeline(MODEL, x, y, **args)


def test_interleaved_faults_stop_every_process(digits, clean):
    x, y = digits
    kw = dict(stages=2, micro_batches=4, schedule="1f1b", virtual_stages=2, **RUN)
    with pytest.raises(WorkerError) as info:
        mp_run.train_pipeline(MODEL, x, y, fault=Fault("raise", rank=1, step=1), **kw)
    assert info.value.rank == 1 and "stage_worker" in info.value.remote_traceback
    with pytest.raises(WorkerDied, match="worker 0"):
        mp_run.train_pipeline(MODEL, x, y, fault=Fault("exit", rank=0, step=1), **kw)


# ----------------------------------------------------------------------------- planner
DEEP = MLP((1,) + (512,) * 9)  # a tiny first layer, then 8 equal ones: chunks of equal cost (to 0.1 %)
FAST = dict(device_flops=1e9, bandwidth=1e9)


@pytest.mark.parametrize("pipeline, v, micro", [(2, 1, 4), (2, 2, 4), (2, 4, 2), (4, 2, 8), (4, 2, 4)])
def test_planner_bubble_is_the_interleaved_formula(pipeline, v, micro):
    c = planner.estimate_config(DEEP, 64, 1, pipeline, micro_batches=micro, virtual_stages=v, **FAST)
    assert c.virtual_stages == v and len(c.boundaries) == v * pipeline + 1
    assert c.bubble_formula == mp.bubble_fraction(pipeline, micro, v) == (pipeline - 1) / (v * micro + pipeline - 1)
    assert c.bubble / (c.compute + c.bubble) == pytest.approx(c.bubble_formula, rel=5e-3)


def test_planner_interleaving_pays_in_handovers_and_memory():
    kw = dict(micro_batches=8, **FAST)
    plain = planner.estimate_config(DEEP, 64, 1, 4, **kw)
    inter = planner.estimate_config(DEEP, 64, 1, 4, virtual_stages=2, **kw)
    assert inter.bubble < plain.bubble and inter.compute == pytest.approx(plain.compute, rel=5e-3)
    # the price: 7 boundaries instead of 3, each 2 x mb x 512 x 4 B a micro-batch (p2p, the time they
    # add to the makespan, may even shrink: interleaving overlaps them with other chunks' work)
    assert mp.handover_bytes(DEEP, inter.boundaries, 64) == 7 * 2 * 64 * 512 * 4
    assert mp.handover_bytes(DEEP, plain.boundaries, 64) == 3 * 2 * 64 * 512 * 4
    assert inter.memory_activations > plain.memory_activations  # a longer warm-up holds more
    assert inter.memory_params == plain.memory_params  # the same layers per device (equal widths)
    assert inter.label == "1x4 v2" and plain.label == "1x4"


def test_planner_one_stage_or_v1_is_unchanged():
    a = planner.estimate_config(DEEP, 64, 2, 1, virtual_stages=4, **FAST)
    assert a == planner.estimate_config(DEEP, 64, 2, 1, **FAST)  # N_p = 1: nothing to interleave
    assert planner.estimate_config(DEEP, 64, 1, 2, virtual_stages=1, **FAST) == \
        planner.estimate_config(DEEP, 64, 1, 2, **FAST)


def test_planner_default_micro_batches_is_a_multiple_of_the_stages():
    c = planner.estimate_config(DEEP, 6, 1, 4, virtual_stages=2, **FAST)  # min(4 N_p, 6) = 6 -> 4
    assert c.micro_batches == 4


def test_hybrid_explorer_takes_virtual_stages():
    from course_lib.plots.pipeline import hybrid_explorer_figure

    model = MLP((8,) + (16,) * 4 + (4,))
    fig = hybrid_explorer_figure(4, model=model, batch_size=64, device_counts=(1, 2, 4), memory=1e9,
                                 virtual_stages=2, **FAST)
    labels = [[t.get_text() for t in ax.get_xticklabels()] for ax in fig.axes]
    assert ["4x1", "2x2 v2"] in labels  # 1 x 4 x 2 = 8 chunks > 5 layers: left out


def test_planner_enumerate_skips_what_cannot_interleave():
    labels = [c.label for c in planner.enumerate_configs(MLP((8, 8, 8, 8, 4)), 64, 4, virtual_stages=2, **FAST)]
    assert labels == ["4x1", "2x2 v2"]  # 1 x 4 would need 8 chunks of 4 layers


@pytest.mark.parametrize("kwargs, word", [
    (dict(virtual_stages=0), "virtual_stages"),
    (dict(virtual_stages=8), "at most n_layers"),
    (dict(virtual_stages=2, micro_batches=3), "micro_batches must be a multiple"),
    (dict(virtual_stages=2, schedule="gpipe"), "virtual_stages"),
])
def test_planner_bad_virtual_stages(kwargs, word):
    with pytest.raises(ValueError, match=word):
        planner.estimate_config(DEEP, 64, 1, 2, **kwargs, **FAST)


# ----------------------------------------------------------------------------- figures
def _collections(ax, prefix):
    return {c.get_label(): c for c in ax.collections if c.get_label().startswith(prefix)}


def test_gantt_of_an_interleaved_timeline_shows_every_chunk():
    from matplotlib.colors import to_rgba

    from course_lib.plots.pipeline import _NUMBERS, gantt_figure

    t = mp.simulate_uniform(2, 4, schedule="1f1b", virtual_stages=2)
    ax = gantt_figure(t).axes[0]
    keys = [lab.get_text() for lab in ax.get_legend().get_texts()]
    assert keys == ["forward, chunk 0", "forward, chunk 1", "backward, chunk 0", "backward, chunk 1", "idle (bubble)"]
    for kind, name in (("F", "forward"), ("B", "backward")):
        for c in range(2):  # one bar per operation of that chunk, each chunk its own shade
            coll = _collections(ax, f"{name}, chunk {c}")[f"{name}, chunk {c}"]
            assert len(coll.get_paths()) == sum(op.kind == kind and op.chunk == c for op in t.ops) == 8
        shades = {tuple(_collections(ax, f"{name}, chunk {c}")[f"{name}, chunk {c}"].get_facecolor()[0])
                  for c in range(2)}
        assert len(shades) == 2 and to_rgba(shades.pop()) != to_rgba(shades.pop())
    numbers = [text for c in ax.collections if c.get_label() == _NUMBERS for text in c.texts]
    assert sorted(numbers) == sorted(str(op.micro) for op in t.ops if op.kind in "FB")  # every bar numbered
    title = ax.get_title()
    assert "interleaved 1F1B, v = 2" in title and f"{mp.bubble_fraction(2, 4, 2):.1%}" in title
    assert [t.get_text() for t in ax.get_yticklabels()] == ["device 0", "device 1"]


def test_interleaved_figure_compares_v_on_one_time_axis():
    from course_lib.plots.pipeline import interleaved_figure

    fig = interleaved_figure(4, 8, (1, 2))
    top, bottom = fig.axes[:2]
    assert top.get_xlim() == bottom.get_xlim()
    assert "27.3%" in top.get_title() and "3 hand-overs" in top.get_title()  # 3/11; v N_p - 1 = 3
    assert "15.8%" in bottom.get_title() and "7 hand-overs" in bottom.get_title()  # 3/19; 7
    with pytest.raises(ValueError, match="micro_batches must be a multiple"):
        interleaved_figure(4, 6, (1, 2))
    with pytest.raises(ValueError, match="virtual_stages"):
        interleaved_figure(4, 8, ())


# ----------------------------------------------------------------------------- exercise
def test_virtual_stages_exercise():
    from course_lib.exercises import pipeline_parallelism as ex

    n_p, m, target = ex.VIRTUAL_STAGES["stages"], ex.VIRTUAL_STAGES["micro_batches"], ex.VIRTUAL_STAGES["target"]
    # by hand: (N_p-1)/(vM+N_p-1) <= target  <=>  v >= (N_p-1)(1-target)/(target M) = 5 x 0.95 / 0.6 = 7.92
    expected = next(v for v in range(1, 100) if (n_p - 1) / (v * m + n_p - 1) <= target + 1e-12)
    assert expected == 8 == ex.smallest_virtual_stages(n_p, m, target)
    assert ex.ex_virtual_stages(8).correct and ex.ex_virtual_stages(8.0).correct
    assert "short" in ex.ex_virtual_stages(7).message  # rounded down
    assert "denominator" in ex.ex_virtual_stages(9).message  # (N_p-1)/(vM) <= target
    assert "without interleaving" in ex.ex_virtual_stages(95).message
    assert not ex.ex_virtual_stages(None).correct and not ex.ex_virtual_stages("eight").correct
    with pytest.raises(ValueError, match="target"):
        ex.smallest_virtual_stages(6, 12, 0.0)
