"""The modelled wire (backend "wire"): the bucketed all-reduce's sums are the shared-memory
ones (the same bits as every backend), the wire decides when they arrive, and its
bookkeeping is checked without timing anything: the modelled durations are the ring
formula's, every recorded all-reduce lasts at least its modelled time, a fake clock sees the
exact wait, closing ends a wait, and every run leaves nothing behind. Step times against
the model are measured in benchmarks/, never asserted here."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from course_lib.alpha_beta import NETWORK_LATENCY, ring_allreduce_time
from course_lib.models import MLP
from course_lib.overlap import backward_shares, overlapped_step_time
from course_lib.parallel.allreduce import BucketAllReduce, Wire, WireAllReduce
from course_lib.parallel.data import overlap_worker_loop
from course_lib.parallel.engine.clock import StepMonitor
from course_lib.parallel.engine.job import check_job
from course_lib.parallel.engine.launch import Launcher
from course_lib.parallel.engine.workers import Fault, WorkerContext, WorkerError, WorkerTimeout
from course_lib.parallel.train.data import bucket_bounds, train_data_parallel
from course_lib.parallel.train.reference import train_serial, train_simulated
from course_lib.parallel.train.wire import matched_wire, measure_overlap, wire_model_inputs

pytest_plugins = ["leak_fixtures"]

MODEL = MLP((8, 16, 12, 10, 3))  # four layers: up to four buckets
_rng = np.random.default_rng(0)
X = _rng.random((60, 8), dtype=np.float32)
Y = _rng.integers(0, 3, 60)
REF = dict(batch_size=12, steps=4, lr=0.2, seed=3)
KW = dict(REF, progress=False)
WIRE = (1e-3, 1e6)  # alpha 1 ms per message, beta 1 MB/s: each bucket of this model takes a few ms
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm")


class FakeClock:
    """A clock that moves only when the wire pauses on it (``jumps``: what ``clock()`` returns
    first, as if time passed meanwhile)."""

    def __init__(self, *jumps: float):
        self.now, self.jumps, self.pauses = 0.0, list(jumps), []

    def clock(self) -> float:
        return self.jumps.pop(0) if self.jumps else self.now

    def pause(self, seconds: float) -> bool:
        self.pauses.append(seconds)
        self.now += seconds
        return False  # not closed


class NoBarrier:
    """Every worker of a one-process test is already there."""

    def wait(self, rank, timeout):
        pass


def _comm(rank, grads, reduced, wire, buckets=2, world=2):
    return WireAllReduce(WorkerContext(rank, world, 5.0), grads, reduced, NoBarrier(), bucket_bounds(MODEL, buckets),
                         Wire(*wire))


# ------------------------------------------------------------------ the wire's bookkeeping
def test_a_bucket_takes_the_ring_time_of_its_bytes():
    alpha, beta = WIRE
    grads = np.zeros((3, MODEL.n_params), np.float32)
    comm = _comm(0, grads, np.zeros(MODEL.n_params, np.float32), WIRE, buckets=4, world=3)
    for (lo, hi, _), seconds in zip(comm.bounds, comm.wire_time):
        m = (hi - lo) * 4  # float32 bytes of the bucket
        assert seconds == ring_allreduce_time(m, 3, beta, alpha)
        assert seconds == pytest.approx(2 * 2 * alpha + 2 * 2 / 3 * m / beta, rel=1e-12)  # 2(N-1)a + 2(N-1)/N m/b
    assert Wire() == Wire(NETWORK_LATENCY, 0.5e9) and Wire().allreduce_time(1e6, 1) == 0.0  # one worker: nothing to send


def test_the_wire_waits_its_modelled_time_on_a_fake_clock_and_sums_in_rank_order():
    rng = np.random.default_rng(1)
    grads = rng.standard_normal((2, MODEL.n_params)).astype(np.float32)
    reduced = np.zeros(MODEL.n_params, np.float32)
    for rank in (0, 1):  # each worker adds its chunk of every bucket (the barrier: nobody to wait for)
        comm = _comm(rank, grads, reduced, WIRE)
        for b in range(len(comm.bounds)):
            fake = FakeClock()
            comm.clock, comm.pause = fake.clock, fake.pause
            comm.reduce_bucket(b)
            assert fake.pauses == [comm.wire_time[b]] and fake.now == comm.wire_time[b]  # on the wire, no more
    assert np.array_equal(reduced, grads[0] + grads[1])


def test_a_sum_slower_than_the_wire_adds_no_wait():
    grads = np.ones((2, MODEL.n_params), np.float32)
    comm = _comm(0, grads, np.zeros(MODEL.n_params, np.float32), WIRE)
    fake = FakeClock(0.0, 10.0)  # on the wire at 0; the sum (CPU work) done at 10 s, long after the wire
    comm.clock, comm.pause = fake.clock, fake.pause
    comm.reduce_bucket(0)
    assert fake.pauses == []


def test_closing_ends_a_wire_wait_and_joins_the_thread():
    before = threading.active_count()
    grads = np.ones((2, MODEL.n_params), np.float32)
    comm = _comm(0, grads, np.zeros(MODEL.n_params, np.float32), (100.0, 1e9))  # 200 s per bucket
    waiting, real_pause = threading.Event(), comm.pause
    comm.pause = lambda seconds: waiting.set() or real_pause(seconds)
    with comm:
        comm.start()  # the communication thread
        comm.layer_done(comm.bounds[0][2])  # hand it the first bucket: 200 s on the wire
        assert waiting.wait(5.0)  # the thread is in the wire's wait
    assert not comm._thread.is_alive() and threading.active_count() == before


def test_the_loop_over_the_wire_in_one_process_equals_the_simulated_run():
    _, _, _, job = check_job(MODEL, X, Y, batch_size=12, steps=3, lr=0.2, seed=3)
    before = threading.active_count()
    with Launcher("fork") as launch:
        grads = np.zeros((1, MODEL.n_params), np.float32)
        reduced = np.zeros(MODEL.n_params, np.float32)
        wctx = WorkerContext(0, 1, 5.0)
        with WireAllReduce(wctx, grads, reduced, launch.barrier(1), bucket_bounds(MODEL, 3), Wire(*WIRE)) as comm:
            clock = StepMonitor(None, job.steps)
            params, *_ = overlap_worker_loop(wctx, job, X, Y, MODEL.init_params(3), comm, clock.steps(job.batches()))
    assert isinstance(comm, BucketAllReduce) and comm.wire_time == [0.0, 0.0, 0.0]  # one worker sends nothing
    assert np.array_equal(params, train_simulated(MODEL, X, Y, workers=1, batch_size=12, steps=3, lr=0.2, seed=3).params)
    assert threading.active_count() == before


# ------------------------------------------------------------------ the trainer
@linux
@pytest.mark.parametrize("buckets", [1, 2, 4])
def test_the_wire_run_equals_shared_memory_and_the_references(buckets, clean):
    shm = train_data_parallel(MODEL, X, Y, workers=3, start_method="fork", buckets=buckets, **KW)
    run = train_data_parallel(MODEL, X, Y, workers=3, start_method="fork", backend="wire", wire=WIRE,
                              buckets=buckets, **KW)
    assert run.backend == "wire" and run.replicas_in_sync
    assert np.array_equal(run.params, shm.params) and np.array_equal(run.loss, shm.loss)
    assert np.array_equal(run.params, train_simulated(MODEL, X, Y, workers=3, **REF).params)
    assert float(np.abs(run.params - train_serial(MODEL, X, Y, **REF).params).max()) < 1e-6
    # the modelled durations: the ring's, of each bucket's bytes; every all-reduce lasts at least that long
    assert run.extra["wire"] == Wire(*WIRE) and len(run.extra["wire_time"]) == buckets
    assert run.extra["wire_time"] == [ring_allreduce_time(m, 3, WIRE[1], WIRE[0]) for m in run.extra["bucket_bytes"]]
    rows = run.extra["timeline"]
    kinds = {(kind, b) for _, _, kind, b, _, _ in rows}
    assert kinds == {("F", -1), ("B", -1), ("U", -1)} | {(k, b) for k in "WA" for b in range(buckets)}
    assert all(end - start >= run.extra["wire_time"][b] for _, _, kind, b, start, end in rows if kind == "A")


@linux
def test_a_plain_run_over_the_wire_defaults_to_one_bucket_and_wire(clean):
    run = train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", backend="wire", **KW)
    assert run.extra["wire"] == Wire() and run.extra["buckets"] == [(0, 4)]
    assert np.array_equal(run.params, train_simulated(MODEL, X, Y, workers=2, **REF).params)


@pytest.mark.parametrize(("kw", "exc", "words"), [
    (dict(wire="fast"), TypeError, "wire must be a Wire"), (dict(wire=(1e-3,)), TypeError, "wire must be a Wire"),
    (dict(wire=(-1e-3, 1e9)), ValueError, "wire.alpha"), (dict(wire=(float("nan"), 1e9)), ValueError, "wire.alpha"),
    (dict(wire=Wire(True, 1e9)), TypeError, "wire.alpha"), (dict(wire=(0.0, 0.0)), ValueError, "wire.beta"),
    (dict(wire=(0.0, float("inf"))), ValueError, "wire.beta"), (dict(wire=(0.0, "1e9")), TypeError, "wire.beta"),
    (dict(wire=(1.0, 1e9), timeout=2.0), ValueError, "timeout"),  # 2 alpha = 2 s per step: the run would look hung
    (dict(wire=(1e-3, 1e9), backend="shm"), ValueError, "needs backend='wire'"),
    (dict(zero_stage=1), ValueError, "zero_stage"),
])
def test_bad_wires_name_the_parameter(kw, exc, words):
    with pytest.raises(exc, match=words.replace("(", r"\(")):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", **{"backend": "wire", **kw, **KW})


@linux
def test_exception_in_a_wire_worker(clean):
    with pytest.raises(WorkerError) as info:
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", backend="wire", wire=WIRE, buckets=2,
                            fault=Fault("raise", rank=1, step=2), **KW)
    assert info.value.rank == 1 and "overlap_worker_loop" in info.value.remote_traceback


@linux
def test_a_hung_wire_worker_times_out(clean):
    with pytest.raises(WorkerTimeout, match=r"probably \[0\]"):
        train_data_parallel(MODEL, X, Y, workers=2, start_method="fork", backend="wire", wire=WIRE, buckets=3,
                            fault=Fault("hang", rank=0, step=1), timeout=0.6, **KW)


# ------------------------------------------------------------------ the model's inputs, the comparison
def test_the_model_inputs_are_each_steps_slowest_worker():
    run = train_simulated(MODEL, X, Y, workers=2, **REF)
    with pytest.raises(ValueError, match="backend"):
        wire_model_inputs(run, MODEL.sizes)  # no wire
    # by hand: rank 1 starts step 1 a second early, and step 2's backward half a second late;
    # rank 0 has the longer backward and update. A step's clock starts with its first worker,
    # the forward lasts until the last worker starts its backward, the backward until the last ends it
    run.extra.update(wire_time=[0.5, 0.25], timeline=[
        (r, s, k, -1, s * 10 + a, s * 10 + e) for r in range(2) for s in range(3)
        for k, a, e in (("F", -(r == 1 and s == 1), 1), ("B", 3 + (r == 1 and s == 2) / 2, 6 + (r == 0)),
                        ("U", 7, 7.5 + (r == 0)))])
    p = wire_model_inputs(run, MODEL.sizes)
    assert p["steps"] == [1, 2] and p["forward"] == [4.0, 3.5] and p["backward"] == [4.0, 3.5]
    assert p["update"] == [1.5, 1.5] and p["allreduce"] == [0.5, 0.25] and sum(p["shares"]) == pytest.approx(1.0)
    assert p["shares"] == backward_shares(MODEL.sizes, 2).tolist()
    with pytest.raises(ValueError, match="skip"):
        wire_model_inputs(run, MODEL.sizes, skip=3)
    with pytest.raises(TypeError, match="result"):
        wire_model_inputs(run.extra, MODEL.sizes)


@linux
def test_measure_overlap_sets_the_measured_step_beside_the_model(clean):
    out = measure_overlap(MODEL, X, Y, buckets=(1, 3), wire=WIRE, batch_size=12, steps=3, rounds=1,
                          start_method="fork")
    assert out["wire"] == {"alpha": WIRE[0], "beta": WIRE[1]} and out["workers"] == 2 and out["rounds"] == 1
    one, three = out["rows"]
    assert (one["buckets"], three["buckets"]) == (1, 3)
    assert one["model_s"] == one["sequential_s"] and one["hidden_s"] == pytest.approx(0.0, abs=1e-12)  # one bucket hides nothing
    for row in out["rows"]:
        assert row["measured_s"] > 0 and row["shm_s"] > 0 and row["model_s"] <= row["sequential_s"]
        assert row["measured_spread"] == [row["measured_s"]] * 2  # one round: no spread
        k = row["buckets"]
        times = [ring_allreduce_time(m, 2, WIRE[1], WIRE[0]) for m in
                 [(hi - lo) * 4 for lo, hi, _ in bucket_bounds(MODEL, k)]]
        assert row["wire_s"] == pytest.approx(sum(times), rel=1e-12) and len(row["bucket_backward_s"]) == k
        t = overlapped_step_time(row["forward_s"], row["bucket_backward_s"], times, update=row["update_s"])
        assert row["exposed_s"] <= sum(times) + 1e-12 and t["sequential"] > 0


@linux
def test_the_matched_wire_moves_the_gradient_in_one_backward(clean):
    wire, backward = matched_wire(MODEL, X, Y, workers=2, batch_size=12, steps=3, start_method="fork", progress=False)
    assert wire.alpha == NETWORK_LATENCY and backward > 0
    bandwidth_term = wire.allreduce_time(MODEL.n_params * 4, 2) - wire.allreduce_time(0, 2)  # 2(N-1)/N m / beta
    assert bandwidth_term == pytest.approx(backward, rel=1e-9)


@pytest.mark.parametrize(("kw", "exc", "name"), [
    (dict(buckets=()), ValueError, "buckets"), (dict(buckets=(1, 9)), ValueError, "buckets"),
    (dict(rounds=0), ValueError, "rounds"), (dict(steps=1), ValueError, "steps"), (dict(shm="yes"), TypeError, "shm"),
    (dict(wire=(-1.0, 1e9)), ValueError, "wire.alpha"), (dict(x=X), ValueError, "together"),
])
def test_measure_overlap_checks_everything_before_a_run(kw, exc, name):
    args = dict(model=MODEL, x=X, y=Y) if "x" not in kw else dict(model=None)
    with pytest.raises(exc, match=name):
        measure_overlap(**{**args, **kw, "batch_size": 12, "start_method": "fork"})
