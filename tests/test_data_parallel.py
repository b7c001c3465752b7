"""Tests of course_lib.parallel.data: partitioning, equivalence with serial training."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from course_lib import models
from course_lib.models import MLP, TrainResult
from course_lib.parallel.partition import batches, shard_bounds
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.reference import train_serial, train_simulated

MODEL = MLP((12, 24, 5))


def _data(n=90, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, MODEL.sizes[0])).astype(np.float32)
    y = rng.integers(0, MODEL.sizes[-1], n)
    return x, y


X, Y = _data()


@pytest.mark.parametrize(("batch", "steps"), [(15, 12), (20, 10)])  # 90 / 20: a last batch of 10
def test_train_serial_equals_a_plain_sgd_loop_written_here(batch, steps):
    """Independent reference: plain SGD written out here, drawing its batches as documented
    (a fresh permutation per epoch from a generator seeded with seed + 1, consecutive
    slices, the smaller last batch of an epoch kept): the same bits."""
    params, rng, losses = MODEL.init_params(3), np.random.default_rng(3 + 1), []
    grad = np.zeros_like(params)
    for _ in range(2):
        order = rng.permutation(len(Y))
        for start in range(0, len(Y), batch):
            idx = order[start : start + batch]
            loss, _ = MODEL.loss_and_grad(params, X[idx], Y[idx], out=grad)
            models.sgd_step(params, grad, 0.2)
            losses.append(loss)
    res = train_serial(MODEL, X, Y, epochs=2, batch_size=batch, lr=0.2, seed=3)
    assert res.steps == steps == len(losses)
    np.testing.assert_array_equal(res.params, params)
    np.testing.assert_allclose(res.loss, losses, rtol=1e-12)


def test_a_last_batch_smaller_than_the_workers_leaves_some_shards_empty():
    """93 samples, batch 45: the third batch has 3 samples for 4 workers. Parallel and
    simulated runs agree bit for bit, and both follow the serial run."""
    x, y = _data(n=93, seed=2)
    kw = dict(batch_size=45, epochs=2, lr=0.3, seed=1)
    sim = train_simulated(MODEL, x, y, workers=4, **kw)
    par = train_data_parallel(MODEL, x, y, workers=4, start_method="fork", progress=False, **kw)
    ser = train_serial(MODEL, x, y, **kw)
    assert par.steps == sim.steps == ser.steps == 6
    np.testing.assert_array_equal(par.params, sim.params)
    assert np.abs(par.params - ser.params).max() <= 1e-6
    np.testing.assert_allclose(par.loss, ser.loss, rtol=1e-5)


def test_simulated_sum_of_shards_matches_full_batch_gradient():
    """One step by hand: the sum of shard gradient sums / B is the mean gradient."""
    p0 = MODEL.init_params(7)
    idx = next(batches(len(Y), 20, seed=7, steps=1))
    _, g_mean = MODEL.loss_and_grad(p0, X[idx], Y[idx])
    g_sum = sum(MODEL.loss_and_grad(p0, X[idx[lo:hi]], Y[idx[lo:hi]], reduction="sum")[1]
                for lo, hi in shard_bounds(20, 3))
    expected = p0 - np.float32(0.5) * g_mean
    sim = train_simulated(MODEL, X, Y, workers=3, batch_size=20, steps=1, lr=0.5, seed=7)
    np.testing.assert_allclose(sim.params, expected, atol=1e-6)
    np.testing.assert_array_equal(
        sim.params, p0 - (g_sum * np.float32(0.5 / 20)).astype(np.float32)
    )


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7])
def test_simulated_within_1e6_of_serial(workers):
    kw = dict(batch_size=21, steps=8, lr=0.3, seed=1)
    sim = train_simulated(MODEL, X, Y, workers=workers, **kw)
    ser = train_serial(MODEL, X, Y, **kw)
    assert np.abs(sim.params - ser.params).max() <= 1e-6
    np.testing.assert_allclose(sim.loss, ser.loss, rtol=1e-5)


# ---------------------------------------------------------------- parallel runs
KW = dict(batch_size=20, steps=6, lr=0.4, seed=2)


@functools.cache
def _fork_run(workers: int, backend: str = "shm") -> TrainResult:
    """``train_data_parallel`` on X, Y with KW under fork, made once per test process: the
    timings test and the step-breakdown figure read the run of the 2-worker shm bitwise test."""
    return train_data_parallel(MODEL, X, Y, workers=workers, backend=backend, start_method="fork",
                               progress=False, **KW)


@pytest.mark.parametrize("backend", ["shm", "pipe", "wire"])  # gloo: its own order, tests/test_torch_engine.py
@pytest.mark.parametrize("workers", [1, 2, 3])  # 3 does not divide the batch of 20
def test_parallel_bitwise_equal_to_simulated_and_close_to_serial(backend, workers):
    par = _fork_run(workers, backend)
    sim = train_simulated(MODEL, X, Y, workers=workers, **KW)
    ser = train_serial(MODEL, X, Y, **KW)
    assert par.params.dtype == np.float32 and par.params.shape == (MODEL.n_params,)
    np.testing.assert_array_equal(par.params, sim.params)
    assert np.abs(par.params - ser.params).max() <= 1e-6
    np.testing.assert_allclose(par.loss, ser.loss, rtol=1e-5)
    assert par.replicas_in_sync and par.workers == workers and par.backend == backend
    assert par.extra["worker_blas_threads"] == [1] * workers  # one BLAS thread per worker


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_other_start_methods_give_the_same_bits(method):
    par = train_data_parallel(MODEL, X, Y, workers=2, start_method=method, progress=False, **KW)
    sim = train_simulated(MODEL, X, Y, workers=2, **KW)
    np.testing.assert_array_equal(par.params, sim.params)
    assert par.start_method == method
    assert par.extra["worker_blas_threads"] == [1, 1]  # the limit holds in fresh interpreters too


def test_pipe_backend_with_spawn_and_more_workers_than_cores():
    workers = min((os.cpu_count() or 1) + 1, KW["batch_size"])  # more than cores where possible
    par = train_data_parallel(MODEL, X, Y, workers=workers, backend="pipe", start_method="spawn",
                              progress=False, **KW)
    np.testing.assert_array_equal(par.params, train_simulated(MODEL, X, Y, workers=workers, **KW).params)


def test_epochs_and_start_params():
    p = MODEL.init_params(11)
    a = train_data_parallel(MODEL, X, Y, workers=2, batch_size=30, epochs=2, lr=0.1, params=p,
                            start_method="fork", progress=False)
    b = train_serial(MODEL, X, Y, batch_size=30, epochs=2, lr=0.1, params=p)
    assert a.steps == b.steps == 6
    assert np.abs(a.params - b.params).max() <= 1e-6
    assert not np.shares_memory(a.params, p)


def test_result_timings_are_consistent():
    par = _fork_run(2)
    assert isinstance(par, TrainResult)
    for arr in (par.compute, par.communication, par.waiting):
        assert arr.shape == (KW["steps"], 2) and np.all(arr >= 0)
    per_worker = par.compute + par.communication + par.waiting
    assert np.all(per_worker.max(axis=1) <= par.step_time * (1 + 1e-9) + 1e-9)
    b = par.breakdown()
    assert set(b) == {"compute", "communication", "waiting", "step"}
    assert 0 <= par.communication_share() <= 1
    assert par.samples_per_second() == pytest.approx(KW["batch_size"] / par.time_per_step())
    assert 0 <= par.startup_time <= par.wall_time
    assert "TrainResult(backend='shm'" in repr(par)
    ser = train_serial(MODEL, X, Y, **KW)
    assert np.all(ser.communication == 0) and ser.communication_share() == 0


def test_training_actually_learns_digits():
    from course_lib.datasets import load_digits

    tr, te = load_digits("train"), load_digits("test")
    model = MLP((64, 32, 10))
    res = train_data_parallel(model, tr.x, tr.y, workers=2, batch_size=64, epochs=4, lr=0.5,
                              start_method="fork", progress=False)
    assert res.loss[-5:].mean() < res.loss[:5].mean() / 2
    assert model.accuracy(res.params, te.x, te.y) > 0.85


# ---------------------------------------------------------------- bad arguments
@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        (dict(workers=0), ValueError, "workers"),
        (dict(workers=2.0), TypeError, "workers"),
        (dict(workers=25), ValueError, "batch_size"),  # batch 20 < 25 workers
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(batch_size=1000), ValueError, "batch_size"),
        (dict(lr=float("nan")), ValueError, "lr"),
        (dict(lr=float("inf")), ValueError, "lr"),
        (dict(lr=0.0), ValueError, "lr"),
        (dict(lr=-0.1), ValueError, "lr"),
        (dict(steps=0), ValueError, "steps"),
        (dict(epochs=1), ValueError, "steps or epochs"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(backend="mpi"), ValueError, "backend"),
        (dict(start_method="threads"), ValueError, "start_method"),
        (dict(timeout=0), ValueError, "timeout"),
        (dict(blas_threads=0), ValueError, "blas_threads"),
        (dict(params=np.zeros(3, np.float32)), ValueError, "params"),
        (dict(fault="crash"), TypeError, "fault"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, exc, name):
    args = dict(workers=2, start_method="fork", progress=False, **KW)
    args.update(kwargs)
    with pytest.raises(exc, match=name):
        train_data_parallel(MODEL, X, Y, **args)


def test_bad_data_and_model():
    with pytest.raises(TypeError, match="model"):
        train_data_parallel("mlp", X, Y, workers=2, **KW)
    with pytest.raises(ValueError, match="x"):
        train_data_parallel(MODEL, X[:, :3], Y, workers=2, **KW)
    with pytest.raises(ValueError, match="y"):
        train_data_parallel(MODEL, X, Y + 10, workers=2, **KW)
    with pytest.raises(ValueError, match="batch_size"):
        train_serial(MODEL, X, Y, batch_size=91, steps=1)
    with pytest.raises(ValueError, match="workers"):
        train_simulated(MODEL, X, Y, workers=0, **KW)


# ---------------------------------------------------------------- cost model helpers
def test_communication_crossover_against_hand_solutions():
    from course_lib import alpha_beta
    from course_lib.alpha_beta import communication_crossover

    # ring, no latency: exchange 2(N-1)/N m/b >= t_c/N  <=>  N >= 1 + t_c b / (2 m)
    assert communication_crossover(1.0, 1e9, 1e9, 0.0) == 2
    assert communication_crossover(10.0, 1e9, 1e9, 0.0) == 6
    # parameter server: 2 N m / b >= t_c / N  <=>  N^2 >= t_c b / (2 m) = 500 -> 23
    assert communication_crossover(1.0, 1e6, 1e9, 0.0, algorithm="ps") == 23
    # brute force with the comm module for a random case
    tc, m, b, a = 0.05, 3.3e6, 25e9 / 8, 1e-5
    n = communication_crossover(tc, m, b, a, algorithm="ring")
    assert alpha_beta.ring_allreduce_time(m, n, b, a) >= tc / n
    assert alpha_beta.ring_allreduce_time(m, n - 1, b, a) < tc / (n - 1)
    assert communication_crossover(1e6, 1.0, 1e12, 0.0, n_max=100) == float("inf")
    with pytest.raises(ValueError, match="compute_time"):
        communication_crossover(0.0, 1e6, 1e9, 0.0)


def test_fit_gustafson_recovers_p_and_validates():
    from course_lib.scaling import fit_gustafson, gustafson

    n = np.array([1, 2, 4, 8, 16])
    assert fit_gustafson(n, gustafson(0.83, n)) == pytest.approx(0.83, abs=1e-12)
    assert fit_gustafson([1, 2], [1.0, 3.0]) == 1.0  # clipped
    with pytest.raises(ValueError, match="n"):
        fit_gustafson([1, 1], [1.0, 1.0])
    with pytest.raises(ValueError, match="same length"):
        fit_gustafson([1, 2], [1.0])


def test_measure_scaling_speedups_follow_from_the_times():
    from course_lib.parallel.train.speedup import measure_scaling
    from course_lib.scaling import karp_flatt

    sm = measure_scaling(MODEL, X, Y, workers=[1, 2, 3], batch_size=30, per_worker_batch=10,
                         steps=3, start_method="fork", progress=False)
    assert sm.workers.tolist() == [1, 2, 3]
    np.testing.assert_allclose(sm.strong_speedup, sm.serial_strong / sm.strong_time)
    np.testing.assert_allclose(sm.weak_speedup, sm.workers * sm.serial_weak / sm.weak_time)
    np.testing.assert_allclose(sm.karp_flatt, karp_flatt(sm.strong_speedup[1:], [2, 3]))
    assert sm.runs["weak 3"] is sm.runs["strong 3"]  # 3 x 10 == 30: the same run
    assert sm.runs["weak 2"].batch_size == 20
    assert "Karp-Flatt" in sm.table() and len(sm.table().splitlines()) == 5
    assert 0 <= sm.amdahl.p <= 1 and 0 <= sm.gustafson_p <= 1
    with pytest.raises(ValueError, match="workers"):
        measure_scaling(MODEL, X, Y, workers=[], batch_size=30, per_worker_batch=10)
    with pytest.raises(ValueError, match="rounds"):
        measure_scaling(MODEL, X, Y, workers=[1], batch_size=30, per_worker_batch=10, rounds=0)


def test_measure_scaling_takes_the_median_of_interleaved_rounds(monkeypatch):
    """Every configuration is run once per round, in turn, and its time is the median over the
    rounds: one slow round (a busy moment of the host) moves no speedup."""
    from types import SimpleNamespace

    from course_lib.parallel.train import speedup

    calls = []
    slow_round = {1}  # the second round runs twice as slow, for every configuration alike

    def fake(kind):
        def run(model, x, y, *, batch_size, workers=1, **kw):
            calls.append((kind, workers, batch_size))
            rnd = sum(1 for c in calls if c[0] == "serial" and c[2] == 30) - 1
            base = 0.030 * batch_size / 30 / (workers if kind == "parallel" else 1)
            t = base * (2.0 if rnd in slow_round else 1.0)
            return SimpleNamespace(time_per_step=lambda t=t: t, batch_size=batch_size)
        return run

    monkeypatch.setattr(speedup, "serial_in_worker", fake("serial"))  # the serial reference's process
    monkeypatch.setattr(speedup, "train_data_parallel", fake("parallel"))
    sm = speedup.measure_scaling(MODEL, X, Y, workers=[1, 2], batch_size=30, per_worker_batch=10, rounds=3)
    per_round = [("serial", 1, 30), ("serial", 1, 10), ("parallel", 1, 30), ("parallel", 1, 10),
                 ("parallel", 2, 30), ("parallel", 2, 20)]
    assert calls == 3 * per_round  # every configuration once per round, in turn
    np.testing.assert_allclose(sm.strong_speedup, [1.0, 2.0])
    np.testing.assert_allclose(sm.serial_strong, 0.030)


# ---------------------------------------------------------------- plots
def test_plots_have_the_expected_artists():
    from matplotlib.text import Annotation, Text

    from course_lib.plots.parallel import (
        comm_dominance_figure,
        data_parallel_diagram,
        step_breakdown_figure,
        strong_weak_figure,
    )
    from course_lib.plots.style import MIN_FONT_PT

    fig = data_parallel_diagram(3, 10)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert any("forward + backward on 4 samples" in t for t in texts)  # shard sizes 4, 3, 3
    assert sum("on 3 samples" in t for t in texts) == 2
    # the all-reduce: one arrow into it and one out of it per worker, no crossing lines
    assert not ax.lines and sum(t.startswith("all-reduce") for t in texts) == 1
    thick = [a for a in ax.texts if isinstance(a, Annotation) and a.arrow_patch.get_linewidth() >= 2]
    assert len(thick) == 2 * 3
    assert all(a.xy[1] == pytest.approx(a.xyann[1]) for a in thick)  # horizontal: they cannot cross
    assert all(t.get_fontsize() >= MIN_FONT_PT for t in fig.findobj(Text) if t.get_text())
    assert fig.get_figwidth() <= 9.6
    with pytest.raises(ValueError, match="batch_size"):
        data_parallel_diagram(4, 3)

    runs = {"serial": train_serial(MODEL, X, Y, **KW),
            "2 workers": _fork_run(2)}
    fig = step_breakdown_figure(runs)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["serial", "2 workers"]
    assert {t.get_text() for t in fig.legends[0].get_texts()} >= {"compute", "communication", "waiting"}
    assert any("(×1.00)" in t.get_text() for t in ax.texts)
    with pytest.raises(ValueError, match="reference"):
        step_breakdown_figure(runs, reference="nope")
    with pytest.raises(ValueError, match="results"):
        step_breakdown_figure({})

    fig = strong_weak_figure([1, 2], [1.0, 1.7], [1.0, 1.9], p_amdahl=0.8, p_gustafson=0.9, n_max=8)
    ax = fig.axes[0]
    assert "laws extended to 8" in ax.get_title()
    amdahl = next(line for line in ax.get_lines() if line.get_label().startswith("Amdahl"))
    assert amdahl.get_xdata().max() == pytest.approx(8) and ax.get_xlim()[1] >= 8  # the laws reach N = 8
    assert ax.get_legend() is None and fig.legends  # the key below the axes, off the curves
    with pytest.raises(ValueError, match="same length"):
        strong_weak_figure([1, 2], [1.0], [1.0, 1.9], p_amdahl=0.8, p_gustafson=0.9)

    fig = comm_dominance_figure(64, 25, compute_ms=50, gradient_mb=3.26)
    left, right = fig.axes[:2]
    assert {"compute $t_c / N$", "ring all-reduce", "1 parameter server"} <= {
        line.get_label() for line in left.get_lines()}
    assert "N = 64" in right.get_title() and "%" in right.get_title()
    with pytest.raises(ValueError, match="devices"):
        comm_dominance_figure(2048, 25, compute_ms=50, gradient_mb=3.26)
    with pytest.raises(ValueError, match="bandwidth_gbit"):
        comm_dominance_figure(8, 0, compute_ms=50, gradient_mb=3.26)


def test_comm_dominance_labels_sit_off_the_lines():
    """The crossovers are marked points named in the title, the slider's N a named line: no text
    on a curve."""
    from course_lib import alpha_beta
    from course_lib.plots import figure_to_png
    from course_lib.plots.parallel import comm_dominance_figure

    fig = comm_dominance_figure(4, 1, compute_ms=31.5, gradient_mb=0.34)
    left, right = fig.axes
    assert not left.texts and not right.texts
    bw, m, lat = 1e9 / 8, 0.34e6, 10e-6
    crosses = [alpha_beta.communication_crossover(31.5e-3, m, bw, lat, algorithm=a) for a in ("ring", "ps")]
    assert f"N = {crosses[0]} (ring), N = {crosses[1]} (PS)" in left.get_title()
    points = [line for line in left.get_lines() if line.get_marker() == "o"]
    assert sorted(p.get_xdata()[0] for p in points) == sorted(crosses)
    assert all(p.get_ydata()[0] == pytest.approx(31.5 / p.get_xdata()[0]) for p in points)  # on t_c / N
    key = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "N = 4 (slider)" in key and "exchange = compute" in key
    figure_to_png(fig)
    renderer = fig.canvas.get_renderer()
    box = fig.legends[0].get_window_extent(renderer)
    assert all(box.y1 <= ax.get_window_extent(renderer).y0 for ax in fig.axes)  # below both panels
    assert fig.get_figwidth() <= 9.6


# ---------------------------------------------------------------- exercises
def test_exercise_checkers_accept_the_right_answers_only():
    from course_lib.exercises import data_parallelism as ex
    from course_lib.scaling import karp_flatt

    assert ex.ex2_karp_flatt(karp_flatt(1.6, 2), speedup=1.6, workers=2).correct
    assert not ex.ex2_karp_flatt(0.2, speedup=1.6, workers=2).correct
    assert not ex.ex2_karp_flatt(0.0, speedup=1.0, workers=1).correct  # one core: explained
    m = ex.RUNNING_EXAMPLE.n_params * 4
    # hand solution of exercise 3: smallest N with 2 (N m / b + a) >= t_c / N
    b, a, tc = 10e9 / 8, 10e-6, 50e-3
    n = next(n for n in range(1, 1000) if 2 * (n * m / b + a) >= tc / n)
    assert ex.ex3_ps_crossover(n).correct and not ex.ex3_ps_crossover(n + 1).correct
    assert ex.ex1_mean_of_means(False).correct and not ex.ex1_mean_of_means(True).correct
    # exercise 4, 16-bit gradients: 2 x 15/16 x 0.68 GB / 150 GB/s + 2 x 15 x 5 µs = 8.5 ms + 0.15 ms
    assert ex.ex4_ring_allreduce_ms(2 * 15 / 16 * 0.68e9 / 150e9 * 1e3 + 0.15)
    assert "reduce-scatter" in ex.ex4_ring_allreduce_ms(0.68e9 / 150e9 * 1e3).message
    for check in (ex.ex1_mean_of_means, ex.ex3_ps_crossover, ex.ex4_ring_allreduce_ms):
        assert "not answered" in check(None).message


@pytest.mark.slow
def test_benchmark_runs_and_reports_targets(capsys):
    """Smoke test of benchmarks/bench_data_parallel.py (numbers are not asserted)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_data_parallel.py"
    spec = importlib.util.spec_from_file_location("bench_data_parallel", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--batches", "64", "--rounds", "1", "--no-gloo", "--cores", "2",
                       "--step-budget", "0.01", "--start-method", "fork"]) == 0
    out = capsys.readouterr().out
    assert "shared memory, 2 workers" in out and "pipes, 2 workers" in out
    assert "target S(2) >= 1.5" in out


def test_zero_exercise_accepts_the_answer_and_names_the_stages():
    from course_lib.exercises import memory as ex
    from course_lib.memory import model_state_bytes

    g = ex.ZERO
    right = (2 + (2 + 12) / 32) * 13e9 / 1e9  # by hand: 31.6875 GB
    assert ex.ex_zero_gb(right).correct and abs(right - 31.6875) < 1e-12
    assert model_state_bytes(g["n_params"], g["devices"], 2).total / 1e9 == right
    assert "stage 0" in ex.ex_zero_gb(208).message
    assert "stage 1" in ex.ex_zero_gb(56.875).message
    assert "stage 3" in ex.ex_zero_gb(6.5).message
    assert not ex.ex_zero_gb("thirty").correct


def test_comm_dominance_one_device_exchanges_nothing():
    """Issue 44 item 5: a device alone communicates nothing, for the parameter server too:
    its speedup starts at S(1) = 1 and its exchange time is drawn from N = 2 on (0 has no
    place on a log axis); the title writes m as the course's byte formatter does."""
    from course_lib.plots.parallel import comm_dominance_figure

    fig = comm_dominance_figure(64, 25, compute_ms=50, gradient_mb=3.256)
    left, right = fig.axes[:2]
    ps_time = next(line for line in left.get_lines() if line.get_label() == "1 parameter server")
    assert ps_time.get_xdata()[0] == 2
    speedups = [line for line in right.get_lines() if line.get_xdata()[0] == 1 and len(line.get_xdata()) > 2]
    assert len(speedups) == 3 and all(line.get_ydata()[0] == pytest.approx(1.0) for line in speedups)
    assert fig._suptitle.get_text().startswith("m = 3.26 MB of gradients")
