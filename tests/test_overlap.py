"""Overlap of the all-reduce with the backward pass: the step-time model against hand values,
the bucketed data-parallel trainer against its references (bit for bit), its timeline, its
bad input and its faults (no process, thread or /dev/shm segment left behind)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.models import MLP
from course_lib.overlap import bucket_layers, overlapped_step_time
from course_lib.parallel.allreduce import BucketAllReduce
from course_lib.parallel.data import overlap_worker_loop
from course_lib.parallel.engine.clock import StepMonitor, Traced
from course_lib.parallel.engine.job import check_job
from course_lib.parallel.engine.launch import Launcher
from course_lib.parallel.engine.workers import (
    Fault,
    FaultInjected,
    WorkerContext,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
)
from course_lib.parallel.train.data import bucket_bounds, train_data_parallel
from course_lib.parallel.train.reference import train_serial, train_simulated

pytest_plugins = ["leak_fixtures"]

MODEL = MLP((8, 16, 12, 10, 3))  # four layers: up to four buckets
RNG = np.random.default_rng(0)
X = RNG.random((60, 8), dtype=np.float32)
Y = RNG.integers(0, 3, 60)
REF = dict(batch_size=12, steps=4, lr=0.2, seed=3)
KW = dict(REF, progress=False)
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")


# ------------------------------------------------------------------ the model
def test_model_hand_values():
    # ready at 2, 3, 4, 5; every all-reduce (0.5) ends before the next bucket is ready: only the last is exposed
    t = overlapped_step_time(1.0, [1.0] * 4, [0.5] * 4, update=0.25)
    assert t["sequential"] == 1 + 4 + 2 + 0.25 and t["overlapped"] == 5.5 + 0.25
    assert t["exposed"] == 0.5 and t["hidden"] == 1.5
    assert t["comm_start"].tolist() == [2.0, 3.0, 4.0, 5.0]
    # communication-bound: done at 2 + 3 = 5, max(3, 5) + 3 = 8; the backward is hidden instead
    t = overlapped_step_time(1.0, [1.0, 1.0], [3.0, 3.0])
    assert (t["sequential"], t["overlapped"], t["exposed"], t["hidden"]) == (9.0, 8.0, 5.0, 1.0)
    assert t["comm_end"].tolist() == [5.0, 8.0] and t["backward_end"].tolist() == [2.0, 3.0]
    # one number for the backward: split evenly over the buckets
    assert overlapped_step_time(0.0, 3.0, [1.0, 1.0, 1.0])["comm_start"].tolist() == [1.0, 2.0, 3.0]


@settings(max_examples=25, deadline=None)
@given(st.floats(0, 10), st.lists(st.floats(0, 10), min_size=1, max_size=6), st.floats(0, 10), st.data())
def test_model_bounds(fwd, comm, update, data):
    bwd = data.draw(st.lists(st.floats(0, 10), min_size=len(comm), max_size=len(comm)))
    t = overlapped_step_time(fwd, bwd, comm, update=update)
    # never slower than without overlap, never faster than the busier resource or the last bucket's all-reduce
    assert t["overlapped"] <= t["sequential"] + 1e-9
    assert t["overlapped"] >= max(fwd + sum(bwd) + comm[-1], fwd + bwd[0] + sum(comm)) + update - 1e-9
    assert np.all(np.diff(t["comm_start"]) >= -1e-12) and np.all(t["comm_start"] >= t["backward_end"] - 1e-12)
    if len(comm) == 1:
        assert t["overlapped"] == pytest.approx(t["sequential"])


@pytest.mark.parametrize(("args", "exc", "name"), [
    (("1", 1.0, 1.0), TypeError, "compute_fwd"), ((-1.0, 1.0, 1.0), ValueError, "compute_fwd"),
    ((1.0, [1.0, -1.0], [1.0, 1.0]), ValueError, "compute_bwd"),
    ((1.0, [1.0, 1.0, 1.0], [1.0, 1.0]), ValueError, "compute_bwd"),
    ((1.0, 1.0, []), ValueError, "comm_times"), ((1.0, 1.0, [np.nan]), ValueError, "comm_times"),
    ((1.0, 1.0, None), TypeError, "comm_times"),
])
def test_model_bad_input(args, exc, name):
    with pytest.raises(exc, match=name):
        overlapped_step_time(*args)
    with pytest.raises(ValueError, match="update"):
        overlapped_step_time(1.0, 1.0, 1.0, update=-1)


def test_bucket_layers():
    assert bucket_layers(5, 2) == [(2, 5), (0, 2)]
    assert bucket_layers(3, 3) == [(2, 3), (1, 2), (0, 1)]
    for n in range(1, 8):
        for k in range(1, n + 1):
            ranges = bucket_layers(n, k)
            assert ranges[-1][0] == 0 and ranges[0][1] == n  # cover every layer, last layers first
            assert all(a[0] == b[1] for a, b in zip(ranges, ranges[1:]))
            assert max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1
    with pytest.raises(ValueError, match="buckets"):
        bucket_layers(3, 4)
    with pytest.raises(TypeError, match="buckets"):
        bucket_layers(3, 1.5)
    assert bucket_bounds(MODEL, 1) == [(0, MODEL.n_params, 0)]  # one bucket: the whole buffer
    spans = bucket_bounds(MODEL, 2)  # layers 2-3 first, then 0-1: contiguous, together the buffer
    assert spans[0][1] == MODEL.n_params and spans[1][0] == 0 and spans[0][0] == spans[1][1]
    assert [s[2] for s in spans] == [2, 0]


# ------------------------------------------------------------------ the trainer
@linux
@pytest.mark.parametrize("backend", ["shm", "wire"])  # the wire: the same sums, at modelled times
@pytest.mark.parametrize("buckets", [2, 4])
def test_buckets_give_the_same_parameters_bit_for_bit(buckets, backend, clean):
    one = train_data_parallel(MODEL, X, Y, workers=3, start_method="fork", **KW)
    run = train_data_parallel(MODEL, X, Y, workers=3, start_method="fork", buckets=buckets, backend=backend, **KW)
    assert np.array_equal(run.params, one.params) and run.replicas_in_sync
    assert np.array_equal(run.params, train_simulated(MODEL, X, Y, workers=3, **REF).params)
    assert np.array_equal(run.loss, one.loss)
    assert float(np.abs(run.params - train_serial(MODEL, X, Y, **REF).params).max()) < 1e-6
    assert run.extra["buckets"] == bucket_layers(4, buckets)
    assert sum(run.extra["bucket_bytes"]) == MODEL.n_params * 4 == run.bytes_per_step[0]
    assert "timeline" not in one.extra


@linux
def test_the_timeline_holds_every_operation_in_order(clean):
    run = train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", buckets=3, **KW)
    rows = run.extra["timeline"]
    assert min(r[4] for r in rows) == 0.0
    for rank in range(2):
        for step in range(KW["steps"]):
            ops = [r for r in rows if r[0] == rank and r[1] == step]
            kinds = {(r[2], r[3]) for r in ops}
            assert kinds == {("F", -1), ("B", -1), ("U", -1)} | {(k, b) for k in "WA" for b in range(3)}
            t = {(r[2], r[3]): (r[4], r[5]) for r in ops}
            assert t["F", -1][1] <= t["B", -1][0]
            for b in range(3):
                assert t["W", b][1] <= t["A", b][0] <= t["A", b][1] <= t["U", -1][0]
                assert t["B", -1][0] <= t["W", b][0]  # taken up once the backward has begun
                if b:
                    assert t["A", b - 1][1] <= t["W", b][0]  # one bucket after the other
    assert all(start <= end for *_, start, end in rows)


@pytest.mark.parametrize(("kw", "exc"), [
    (dict(buckets=2.0), TypeError), (dict(buckets="2"), TypeError), (dict(buckets=True), TypeError),
    (dict(buckets=0), ValueError), (dict(buckets=5), ValueError),
    (dict(buckets=2, backend="pipe"), ValueError), (dict(buckets=2, zero_stage=1), ValueError),
])
def test_bad_buckets_name_the_parameter(kw, exc):
    with pytest.raises(exc, match="buckets"):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", **KW, **kw)


# --------------------------------------------- the loop in this process: threads are joined
def _one_process_run(fault=None):
    _, _, _, job = check_job(MODEL, X, Y, batch_size=12, steps=3, lr=0.2, seed=3)
    wctx = WorkerContext(0, 1, 5.0)
    with Launcher("fork") as launch:
        barrier = launch.barrier(1)
        grads = np.zeros((1, MODEL.n_params), np.float32)
        reduced = np.zeros(MODEL.n_params, np.float32)
        with BucketAllReduce(wctx, grads, reduced, barrier, bucket_bounds(MODEL, 4)) as comm:
            clock = StepMonitor(None, job.steps, fault)
            traced = Traced(job, clock, {"update": "U"},  # as the trainer sees it: its timeline recorded
                            model=Traced(MODEL, clock, {"forward": "F", "layer_backward": "B"}))
            params, *_ = overlap_worker_loop(wctx, traced, X, Y, MODEL.init_params(3), comm, clock.steps(job.batches()))
    return params, comm, clock


def test_the_loop_in_one_process_equals_the_serial_run_and_joins_its_thread():
    before = threading.active_count()
    params, comm, clock = _one_process_run()
    ref = train_simulated(MODEL, X, Y, workers=1, batch_size=12, steps=3, lr=0.2, seed=3)
    assert np.array_equal(params, ref.params)
    assert threading.active_count() == before and not comm._thread.is_alive()
    assert sorted({(kind, b) for kind, b, *_ in comm.ops}) == [(k, b) for k in "AW" for b in range(4)]
    first = [kind for kind, _, _, _, step, _ in clock.ops if step == 0]
    assert [k for i, k in enumerate(first) if i == 0 or first[i - 1] != k] == ["F", "B", "U"]
    assert first.count("B") == MODEL.n_layers  # one backward per layer


def test_an_error_in_the_loop_stops_the_thread():
    before = threading.active_count()
    with pytest.raises(FaultInjected):
        _one_process_run(Fault("raise", rank=0, step=1))
    assert threading.active_count() == before


# ------------------------------------------------------------------ faults
@linux
def test_exception_in_a_bucketed_worker(clean):
    with pytest.raises(WorkerError) as info:
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", buckets=2,
                            fault=Fault("raise", rank=1, step=2), **KW)
    assert info.value.rank == 1 and "overlap_worker_loop" in info.value.remote_traceback


@linux
def test_a_bucketed_worker_that_dies(clean):
    with pytest.raises(WorkerDied) as info:
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", buckets=2,
                            fault=Fault("kill", rank=0, step=1), timeout=30, **KW)
    assert info.value.rank == 0


@linux
def test_a_hung_bucketed_worker_times_out(clean):
    with pytest.raises(WorkerTimeout, match=r"probably \[0\]") as info:
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", buckets=3,
                            fault=Fault("hang", rank=0, step=1), timeout=0.6, **KW)
    assert info.value.progress == [2, 3]  # rank 0 stuck before its step-1 gradient


# ------------------------------------------------------------------ figures
def test_the_model_figure_draws_the_models_times():
    from course_lib.plots.overlap import overlap_model_figure

    fig = overlap_model_figure(1.0, [1.0, 1.0], [2.0, 2.0], update=0.5)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "1 bucket: compute", "1 bucket: communication", "2 buckets: compute", "2 buckets: communication"]
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == ["step 6.5 ms", "step 7.5 ms"]  # C_2 = 6 (+ 0.5) against 1 + 2 + 4 (+ 0.5)
    bars = [c for c in ax.collections if c.get_paths()]
    ends = sorted(round(p.vertices[:, 0].max(), 9) for c in bars for p in c.get_paths())
    assert 4.0 in ends and 6.0 in ends  # the two bucket all-reduces end at 4 and 6


def test_the_timeline_figure_draws_one_step():
    from course_lib.plots.overlap import overlap_timeline_figure

    rows = [(r, s, k, b, s * 10 + a, s * 10 + e) for r in range(2) for s in range(3)
            for k, b, a, e in (("F", -1, 0, 1), ("B", -1, 1, 4), ("W", 0, 2, 2.5), ("A", 0, 2.5, 3),
                               ("W", 1, 4, 4.2), ("A", 1, 4.2, 5), ("U", -1, 5, 5.5))]
    fig = overlap_timeline_figure(rows, step=2)
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == 4 and ax.get_title().startswith("step 2 as measured: 2 buckets")
    assert ax.get_xlim()[1] >= 5.5e3 * 0.999  # milliseconds from the step's start
    with pytest.raises(ValueError, match="step"):
        overlap_timeline_figure(rows, step=3)
    with pytest.raises(ValueError, match="timeline"):
        overlap_timeline_figure([])


# ------------------------------------------------------------------ measured phases, benchmark
def test_backward_shares_and_measured_phases():
    from course_lib.overlap import backward_shares, measured_phases

    # layer MACs: 1*4*8 = 32 (no input gradient), 2*8*8 = 128, 2*8*2 = 32; buckets last first
    assert (backward_shares((4, 8, 8, 2), 2) * 192).tolist() == [160.0, 32.0]  # layers 1-2, then 0
    assert backward_shares(MODEL.sizes, 1).tolist() == [1.0]
    rows = [(r, s, k, b, 0.0, d * (1 + s)) for r in range(2) for s in range(4)
            for k, b, d in (("F", -1, 1.0), ("B", -1, 2.0), ("U", -1, 0.5), ("W", 0, 0.1), ("A", 0, 0.2),
                            ("W", 1, 0.3), ("A", 1, 0.4))]
    p = measured_phases(rows, skip=1)  # steps 1, 2, 3: durations x2, x3, x4, median x3
    assert p["forward"] == 3.0 and p["backward"] == 6.0 and p["update"] == 1.5
    assert np.allclose(p["allreduce"], [0.6, 1.2]) and np.allclose(p["wait"], [0.3, 0.9])
    with pytest.raises(ValueError, match="skip"):
        measured_phases(rows, skip=4)


@linux
def test_the_overlap_benchmark_prints_every_bucket_count(capsys, tmp_path, clean):
    import json

    from benchmarks import bench_overlap

    out = tmp_path / "bench.json"
    argv = ["--sizes", "8,16,16,3", "--batch", "8", "--buckets", "1,3", "--steps", "3", "--rounds", "1",
            "--start-method", "fork", "--json", str(out)]
    assert bench_overlap.main(argv) == 0
    assert "buckets" in capsys.readouterr().out
    rows = json.loads(out.read_text())["results"]
    assert [r["buckets"] for r in rows] == [1, 3] and "model_overlapped_s" in rows[1]
    assert rows[1]["model_overlapped_s"] <= rows[1]["model_sequential_s"]


# ------------------------------------------------------------------ the exercise
def test_the_exercise_wants_the_hand_computed_step():
    from course_lib.exercises.collectives import ex3_overlapped_step_ms

    # ready at 16, 28, 40, 58; done at 20, max(28, 20) + 16 = 44, max(40, 44) + 16 = 60, max(58, 60) + 8 = 68;
    # + update 6 = 74. Without overlap 10 + 48 + 44 + 6 = 108; all hidden 64; only the last bucket 72.
    assert ex3_overlapped_step_ms(74).correct and ex3_overlapped_step_ms("74 ms").correct
    for wrong, words in ((108, "WITHOUT overlap"), (64, "perfect overlap"), (72, "link is still busy"),
                         (68, "update comes after")):
        result = ex3_overlapped_step_ms(wrong)
        assert not result.correct and words in result.message, (wrong, result.message)
    assert not ex3_overlapped_step_ms(None).correct


@linux
def test_keyboard_interrupt_stops_bucketed_workers(clean):
    from proc_support import stop_button

    with stop_button() as button, pytest.raises(KeyboardInterrupt):
        button.press_while_waiting()  # once the workers run (not a fixed time after the test's start)
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", buckets=2,
                            fault=Fault("hang", rank=1, step=2), timeout=60, **KW)
    assert len(button.workers) == 2  # pressed while both workers ran
