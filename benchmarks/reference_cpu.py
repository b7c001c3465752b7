"""The course's measuring experiments on the CPU, called as the notebooks call them, at each N.

Each function takes the run's :class:`benchmarks.reference.Plan` and returns a plain dict
(the ``result`` of its entry in the reference file; the fields are listed in the schema,
``data/datapackage.json``, and for the notebooks in :mod:`course_lib.reference`). Sizes are
the notebooks' (the experiment itself); only steps and repeats are chosen to fit the run's
time budget, and ``plan.quick`` shrinks everything to a smoke test. A ``"errors"`` list in a
result records the parts that failed while the rest was measured.

Times on the 16-core reference machine (notes of 2026-11-28) set the budget: chapter 01's
pool about 9 s, chapter 07's scaling 20 s at batch 1024 and 32 s at batch 8192 for N = 1..16.
"""

from __future__ import annotations

import statistics
import traceback

import numpy as np

from course_lib.datasets import load_digits
from course_lib.models import MLP
from course_lib.timing import blas_threads, measure

#: The widened running example of chapters 08 (overlap), 11, 12 and 13.
PIPE_SIZES = (64, 1024, 1024, 1024, 10)
#: Its quick stand-in (tests).
TINY_PIPE_SIZES = (64, 32, 32, 32, 10)


def _error(where: str, exc: BaseException) -> dict:
    return {"part": where, "type": type(exc).__name__, "message": str(exc)[:1000],
            "traceback": traceback.format_exc()[-3000:]}


def _median_after_first(values) -> float:
    values = np.asarray(values, dtype=float)
    return float(np.median(values[1:] if values.size > 1 else values))


# ------------------------------------------------------------------ chapter 01
def pool(plan) -> dict:
    """measure_parallel_speedup: the gradient workload over a pool of N processes."""
    from course_lib.parallel.train import GradientWorkload, measure_parallel_speedup

    workload = GradientWorkload(hidden=(16,), epochs=1) if plan.quick else GradientWorkload()
    repeat = 1 if plan.quick else 3
    m = measure_parallel_speedup(plan.workers, workload=workload, repeat=repeat, start_method=plan.start_method)
    return {"call": f"measure_parallel_speedup({plan.workers}, workload=GradientWorkload(...), repeat={repeat})",
            "workload": {"sizes": list(workload.sizes), "batch_size": workload.batch_size,
                         "epochs": workload.epochs, "seed": workload.seed},
            "gflop_per_run": workload.flops_per_run() / 1e9, "repeat": repeat,
            "processes": m.processes, "seconds": m.seconds, "serial_seconds": m.serial_seconds,
            "speedup": m.speedup, "speedup_of_medians": m.speedup_of_medians, "efficiency": m.efficiency,
            "spread": m.spread, "startup_seconds": m.startup_seconds, "start_method": m.start_method,
            "max_abs_difference": m.max_abs_difference, "pairs": m.pairs}


# ------------------------------------------------------------------ chapter 05
def threads(plan) -> dict:
    """The thread experiment: conv2d (im2col) and a 1024^2 GEMM at 1..N BLAS threads."""
    from course_lib import scaling
    from course_lib.conv.algorithms import conv2d

    rng = np.random.default_rng(0)
    n = 128 if plan.quick else 1024
    g = rng.random((n, n), dtype=np.float32)
    x_shape, w_shape = ((2, 4, 16, 16), (8, 4, 3, 3)) if plan.quick else ((16, 64, 56, 56), (64, 64, 3, 3))
    xt = rng.standard_normal(x_shape, dtype=np.float32)
    wt = rng.standard_normal(w_shape, dtype=np.float32)
    counts = plan.workers
    repeat = 2 if plan.quick else 5
    t_gemm, t_conv = [], []
    for k in counts:  # the convolution at every thread count first, then the GEMM (as the notebook)
        with blas_threads(k):
            t_conv.append(measure(lambda: conv2d(xt, wt, padding=1, algorithm="im2col"), repeat=repeat,
                                  warmup=2).median)
    for k in counts:
        with blas_threads(k):
            t_gemm.append(measure(lambda: g @ g, repeat=repeat, warmup=2).median)
    s_gemm = [t_gemm[0] / t for t in t_gemm]
    s_conv = [t_conv[0] / t for t in t_conv]
    fit = None
    if len(counts) >= 2:
        try:  # the notebook fits only a free machine's run; here the file's cores check says which
            f = scaling.fit_amdahl(counts, s_conv)
            fit = {"p": f.p, "stderr": f.stderr, "points": f.n_points}
        except ValueError:
            fit = None
    return {"threads": counts,
            "gemm": {"size": n, "seconds": t_gemm, "speedup": s_gemm, "flops": 2.0 * n**3},
            "conv": {"x_shape": list(x_shape), "w_shape": list(w_shape), "padding": 1, "algorithm": "im2col",
                     "seconds": t_conv, "speedup": s_conv},
            "conv_amdahl": fit, "repeat": repeat}


# ------------------------------------------------------------------ chapter 06
def roofline(plan) -> dict:
    """measure_roofline (one core), a cache copy, the GEMM rate at N threads, the MLP step rates."""
    from course_lib import cost, rate
    from course_lib import roofline as rl
    from course_lib.conv.im2col import gemm_sizes

    quick = plan.quick
    roof = rl.measure_roofline(2**20, 128, repeat=2) if quick else rl.measure_roofline()
    cache = rl.measure_memory_bandwidth(2**16 if quick else 2**20)
    size = 128 if quick else 2048
    by_threads = [rate.measure_gemm_rate(size, threads=k, repeat=2 if quick else 3) for k in plan.workers]
    mlp, digits = MLP((64, 64, 10)), load_digits("train")
    steps = []
    for b in (64,) if quick else (16, 64, 256):
        ops_b, flops_b = rl.mlp_step_ops(mlp, b), cost.mlp_training_flops(mlp, b)
        predicted = roof.predict_rate(ops_b, flops_b)
        run = rate.measure_flop_rate(mlp, digits.x, digits.y, batch_size=b, repeat=1 if quick else 5)
        steps.append({"batch_size": b, "intensity": flops_b / sum(op.nbytes for op in ops_b),
                      "predicted_rate": predicted, "measured_rate": run.rate, "epoch_seconds": run.timing.median,
                      "share_of_peak": run.rate / roof.peak_flops, "share_of_roofline": run.rate / predicted})
    step = {op.name: op for op in rl.mlp_step_ops(mlp, 64)}  # chapter 06's operators (no timing)
    s = gemm_sizes(16, 56, 3, 1, 64, 64)
    cols = rl.im2col_op(16, 56, 3, 1, 64)
    conv_gemm = rl.gemm_op(s["M"], s["K"], s["N"], name="ResNet conv GEMM")
    ops = [rl.gemm_op(512, 512, 512), conv_gemm, rl.total_op([cols, conv_gemm], "ResNet conv = im2col + GEMM"),
           cols, step["L0 forward GEMM"], step["L1 forward GEMM"], step["L0 ReLU"], step["SGD update"],
           step["gather batch"]]
    return {"one_core": {"peak_flops": roof.peak_flops, "memory_bandwidth": roof.memory_bandwidth,
                         "ridge": roof.ridge, "label": roof.label},
            "cache_bandwidth": cache,
            "gemm_rate_by_threads": {"threads": plan.workers, "size": size, "flops_per_second": by_threads},
            "memory_bandwidth_note": "one core's copy (course_lib.roofline.measure_memory_bandwidth)",
            "training_steps": steps, "model": list(mlp.sizes),
            "operators": [{"name": op.name, "flops": op.flops, "nbytes": op.nbytes,
                           "intensity": op.intensity, "bound": roof.bound(op)} for op in ops]}


# ------------------------------------------------------------------ chapter 07
def scaling(plan) -> dict:
    """measure_scaling: strong and weak scaling of the data-parallel trainer (784-1024-10)."""
    from course_lib.parallel.train import measure_scaling

    model = MLP((784, 32, 10)) if plan.quick else MLP((784, 1024, 10))
    batches, b_weak = ((64,), 32) if plan.quick else ((1024, 8192), 768)
    steps, rounds = (3, 1) if plan.quick else (6, 3)
    runs, errors = [], []
    for big_b in batches:
        try:
            rng = np.random.default_rng(0)
            n_samples = max(big_b, max(plan.workers) * b_weak)
            x = rng.random((n_samples, 784), dtype=np.float32)
            y = rng.integers(0, 10, n_samples)
            m = measure_scaling(model, x, y, workers=plan.workers, batch_size=big_b, per_worker_batch=b_weak,
                                steps=steps, rounds=rounds, start_method=plan.start_method, progress=False)
        except Exception as exc:  # noqa: BLE001 - the other batch goes on
            errors.append(_error(f"batch {big_b}", exc))
            continue
        fit, gustafson, karp_flatt = None, None, []
        if len(plan.workers) >= 2:
            try:
                f = m.amdahl
                fit = {"p": f.p, "stderr": f.stderr, "points": f.n_points}
                gustafson, karp_flatt = m.gustafson_p, m.karp_flatt
            except ValueError as exc:
                errors.append(_error(f"fits at batch {big_b}", exc))
        runs.append({"batch_size": big_b, "per_worker_batch": b_weak, "workers": m.workers,
                     "serial_strong": m.serial_strong, "serial_weak": m.serial_weak,
                     "strong_time": m.strong_time, "weak_time": m.weak_time,
                     "strong_speedup": m.strong_speedup, "weak_speedup": m.weak_speedup,
                     "karp_flatt": karp_flatt, "amdahl": fit, "gustafson_p": gustafson})
    if not runs and errors:
        raise RuntimeError("; ".join(e["message"] for e in errors))
    return {"model": list(model.sizes), "steps": steps, "rounds": rounds, "runs": runs, "errors": errors}


# ------------------------------------------------------------------ chapter 08
def _timed_allreduce_worker(wctx, g_spec, r_spec, barrier, counts, repeats) -> list[list[float]]:
    """In each of N processes: for every message size, ``ShmAllReduce.allreduce()`` from a
    common start (a barrier) until this worker holds its own copy of the sum; seconds."""
    import time

    from course_lib.parallel.allreduce import ShmAllReduce

    out = []
    with g_spec.attach() as grads, r_spec.attach() as reduced:
        for n, rep in zip(counts, repeats, strict=True):
            comm = ShmAllReduce(wctx, grads[:, :n], reduced[:n], barrier)
            mine = np.empty(n, dtype=reduced.dtype)
            comm.start()
            np.copyto(mine, comm.allreduce())  # warm-up (page faults of the buffers)
            times = []
            for _ in range(rep):
                comm.wait()  # every worker starts together
                t0 = time.perf_counter()
                np.copyto(mine, comm.allreduce())  # the all-gather's bytes are read here
                times.append(time.perf_counter() - t0)
            out.append(times)
            del comm, mine
        del grads, reduced
    return out


def collectives(plan) -> dict:
    """run_shm_collectives' bytes, and the shared-memory all-reduce timed over a message-size sweep."""
    from course_lib.alpha_beta import fit_alpha_beta
    from course_lib.parallel.engine.launch import Launcher
    from course_lib.parallel.train import run_shm_collectives

    sizes = [2**k for k in (range(10, 23, 4) if plan.quick else range(10, 25, 2))]  # 1 KiB .. 4 MiB or 16 MiB
    counts = [s // 4 for s in sizes]  # float32 elements
    repeats = [5 if plan.quick else (30 if s < 2**20 else 10) for s in sizes]
    digits_model = MLP((64, 64, 10))
    runs, errors = [], []
    for n in [k for k in plan.workers if k >= 2]:
        entry = {"workers": n}
        try:  # chapter 08's run: the running example's gradient, one row per worker
            rows = np.random.default_rng(0).standard_normal((n, digits_model.n_params)).astype(np.float32)
            out = run_shm_collectives(rows, start_method=plan.start_method)
            entry["bytes_check"] = {"message_bytes": rows[0].nbytes, "bytes_in": out["bytes_in"],
                                    "formula_per_step": (n - 1) / n * rows[0].nbytes,
                                    "sum_correct": all(np.array_equal(r, sum(rows[1:], rows[0]))
                                                       for r in out["all_gather"])}
        except Exception as exc:  # noqa: BLE001
            errors.append(_error(f"run_shm_collectives N={n}", exc))
        try:
            with Launcher(plan.start_method) as launch:
                grads = launch.shared((n, counts[-1]), np.float32, np.ones((n, counts[-1]), np.float32))
                reduced = launch.shared(counts[-1], np.float32)
                barrier = launch.barrier(n)
                per_rank = launch.run(_timed_allreduce_worker, n, args=(grads.spec, reduced.spec, barrier,
                                                                        counts, repeats),
                                      timeout=120, name="ddl-ref-allreduce",
                                      preload=("course_lib.parallel.engine.workers", "benchmarks.reference_cpu"))
            # one all-reduce lasts until its slowest worker is done: max over the ranks, median over repeats
            seconds = [float(np.median(np.max([per_rank[r][i] for r in range(n)], axis=0)))
                       for i in range(len(sizes))]
            entry.update(message_bytes=sizes, seconds=seconds, repeats=repeats)
        except Exception as exc:  # noqa: BLE001
            errors.append(_error(f"timed all-reduce N={n}", exc))
        if "seconds" in entry:
            try:  # noise can hide the slope of a short sweep (the quick run): recorded, the times stay
                entry["fit"] = fit_alpha_beta(sizes, entry["seconds"], n)
            except ValueError as exc:
                errors.append(_error(f"alpha-beta fit N={n}", exc))
        runs.append(entry)
    if errors and not any("seconds" in r for r in runs):
        raise RuntimeError("; ".join(e["part"] + ": " + e["message"] for e in errors))
    return {"runs": runs, "errors": errors,
            "timed": "ShmAllReduce.allreduce() and a copy of the sum into the worker's own buffer, from a "
                     "common start to the slowest worker's end (max over workers, median over repeats)",
            "model": "t = 2(N-1) alpha + 2 (N-1)/N m / beta (course_lib.alpha_beta.ring_allreduce_time), fitted "
                     "by least squares of the relative residuals (course_lib.alpha_beta.fit_alpha_beta)"}


def _overlap_runs(model, x, y, n, batch, steps, rounds, backend, start_method) -> dict:
    from course_lib.overlap import backward_shares, measured_phases, overlapped_step_time
    from course_lib.parallel.train import train_data_parallel

    buckets = (1, 2, 4)
    runs: dict[int, list] = {k: [] for k in buckets}
    for _ in range(rounds):  # interleaved
        for k in buckets:
            runs[k].append(train_data_parallel(model, x, y, workers=n, batch_size=batch, steps=steps, lr=0.05,
                                               buckets=k, backend=backend, start_method=start_method,
                                               progress=False))
    out = {"workers": n, "batch_size": batch, "backend": backend, "buckets": list(buckets), "measured_step": [],
           "exposed_communication": [], "model_sequential": [], "model_overlapped": [], "allreduce_total": [],
           "same_params_as_one_bucket": []}
    for k in buckets:
        out["measured_step"].append(statistics.median(_median_after_first(r.step_time) for r in runs[k]))
        out["exposed_communication"].append(statistics.median(  # mean over the workers, as TrainResult.breakdown
            _median_after_first(r.communication.mean(axis=1)) for r in runs[k]))
        out["same_params_as_one_bucket"].append(bool(np.array_equal(runs[k][0].params, runs[1][0].params)))
        if k == 1:
            out["model_sequential"].append(None)
            out["model_overlapped"].append(None)
            out["allreduce_total"].append(None)
            continue
        preds = []
        for r in runs[k]:
            p = measured_phases(r.extra["timeline"])
            t = overlapped_step_time(p["forward"], p["backward"] * backward_shares(model.sizes, k), p["allreduce"],
                                     update=p["update"])
            preds.append((t["sequential"], t["overlapped"], float(p["allreduce"].sum())))
        for i, key in enumerate(("model_sequential", "model_overlapped", "allreduce_total")):
            out[key].append(statistics.median(pr[i] for pr in preds))
    return out


def overlap(plan) -> dict:
    """train_data_parallel(..., buckets=k), k = 1, 2, 4, against course_lib.overlap's model; and over a wire."""
    try:  # the modelled wire (issue 37 point 4), where the course has it
        from course_lib.parallel.train.wire import measure_overlap
    except ImportError:
        measure_overlap = None
    model = MLP(TINY_PIPE_SIZES if plan.quick else PIPE_SIZES)
    train = load_digits("train")
    steps, rounds = (3, 1) if plan.quick else (6, 2)
    runs, wire_runs, errors = [], [], []
    for n in [k for k in plan.workers if k >= 2]:
        batch = 32 if plan.quick else max(128, 64 * n)  # the notebook's 64 samples per worker (128 on 2)
        try:
            runs.append(_overlap_runs(model, train.x, train.y, n, batch, steps, rounds, "shm", plan.start_method))
        except Exception as exc:  # noqa: BLE001
            errors.append(_error(f"shm N={n}", exc))
        if measure_overlap is not None:
            try:
                wire_runs.append(measure_overlap(model, train.x, train.y, workers=n, batch_size=batch, steps=steps,
                                                 rounds=rounds, shm=False, start_method=plan.start_method))
            except Exception as exc:  # noqa: BLE001
                errors.append(_error(f"wire N={n}", exc))
    if errors and not runs:
        raise RuntimeError("; ".join(e["part"] + ": " + e["message"] for e in errors))
    return {"model": list(model.sizes), "steps": steps, "rounds": rounds, "lr": 0.05, "runs": runs,
            "wire_runs": wire_runs, "wire_available": measure_overlap is not None, "errors": errors}


# ------------------------------------------------------------------ chapters 11-14
def _pipe_setup(plan):
    digits = load_digits("train")
    model = MLP(TINY_PIPE_SIZES if plan.quick else PIPE_SIZES)
    n = 200 if plan.quick else 1200
    # the notebooks' run: one epoch = 3 steps of 400 samples; here 2 epochs (6 steps) for steadier medians
    kw = dict(batch_size=n // 3, epochs=1 if plan.quick else 2, lr=0.05, seed=0)
    return model, digits.x[:n], digits.y[:n], kw


def pipeline(plan) -> dict:
    """train_pipeline: GPipe at M = 1, 2, 4, 8 and 1F1B at M = 8, measured bubble against the formula."""
    from course_lib import schedule
    from course_lib.parallel.train import train_pipeline

    model, x, y, kw = _pipe_setup(plan)
    stage_counts = [s for s in (2, 4) if s <= min(plan.cores, model.n_layers)] or [2]
    if plan.quick:
        stage_counts = [2]
    micro = (1, 2, 4, 8)
    runs, errors = [], []
    for n_p in stage_counts:
        done = {}
        for sched, m in [("gpipe", m) for m in micro] + [("1f1b", 8)]:
            try:
                r = train_pipeline(model, x, y, stages=n_p, micro_batches=m, schedule=sched,
                                   start_method=plan.start_method, progress=False, **kw)
            except Exception as exc:  # noqa: BLE001
                errors.append(_error(f"{sched} N_p={n_p} M={m}", exc))
                continue
            done[(sched, m)] = r
            t_fwd, t_bwd = r.stage_costs()
            runs.append({"stages": n_p, "schedule": sched, "micro_batches": m,
                         "bubble_measured": _median_after_first(r.bubble_per_step()),
                         "bubble_formula": schedule.bubble_fraction(n_p, m),
                         "bubble_simulated": schedule.simulate_pipeline(t_fwd, t_bwd, micro_batches=m).bubble(),
                         "time_per_step": r.time_per_step(), "processes": r.timeline.n_rows,
                         "boundaries": list(r.boundaries)})
        if ("gpipe", 8) in done and ("1f1b", 8) in done:
            runs[-1]["same_params_as_gpipe"] = bool(np.array_equal(done[("1f1b", 8)].params,
                                                                   done[("gpipe", 8)].params))
    if errors and not runs:
        raise RuntimeError("; ".join(e["part"] + ": " + e["message"] for e in errors))
    return {"model": list(model.sizes), "run": kw, "samples": len(y), "runs": runs, "errors": errors}


def tensor(plan) -> dict:
    """train_tensor_parallel against train_serial (one BLAS thread), N workers."""
    from course_lib.parallel.train import train_serial, train_tensor_parallel

    model, x, y, kw = _pipe_setup(plan)
    runs, errors = [], []
    for n in plan.workers:  # the serial reference timed beside each N (a drifting machine hits both)
        try:
            serial = train_serial(model, x, y, **kw)
            tp = train_tensor_parallel(model, x, y, workers=n, start_method=plan.start_method, progress=False,
                                       **kw)
        except Exception as exc:  # noqa: BLE001
            errors.append(_error(f"N={n}", exc))
            continue
        t, t_serial = tp.time_per_step(), serial.time_per_step()
        runs.append({"workers": n, "time_per_step": t, "serial_time_per_step": t_serial, "speedup": t_serial / t,
                     "breakdown": tp.breakdown(), "communication_share": tp.communication_share(),
                     "bytes_per_step": tp.bytes_per_step, "replicas_in_sync": bool(tp.replicas_in_sync),
                     "max_abs_difference": float(np.abs(tp.params - serial.params).max())})
    if errors and not runs:
        raise RuntimeError("; ".join(e["part"] + ": " + e["message"] for e in errors))
    return {"model": list(model.sizes), "run": kw, "runs": runs, "errors": errors}


def hybrid(plan) -> dict:
    """train_pipeline(..., data=N_d): N_d replicas of a 2-stage pipeline against the serial loop."""
    from course_lib.parallel.train import train_microbatched, train_pipeline

    model, x, y, kw = _pipe_setup(plan)
    with blas_threads(1):  # the baseline: the plain serial loop, one BLAS thread like every stage
        plain = train_microbatched(model, x, y, micro_batches=1, **kw)
        one_process = train_microbatched(model, x, y, micro_batches=4, **kw)
    base = plain.time_per_step()
    replicas = [1] + [d for d in (2, 4, 8, 16) if 2 * d <= plan.cores]
    if 2 not in replicas:
        replicas.append(2)  # the notebook's 2 x 2, oversubscribed where there are fewer than 4 cores
    runs, errors = [], []
    for d in replicas:
        m = 4 if d == 1 else 2  # the notebook's: pipeline 1 x 2 with M = 4, hybrid d x 2 with M = 2 per replica
        try:
            r = train_pipeline(model, x, y, data=d, stages=2, micro_batches=m, schedule="gpipe",
                               start_method=plan.start_method, progress=False, **kw)
        except Exception as exc:  # noqa: BLE001
            errors.append(_error(f"data={d}", exc))
            continue
        t = r.time_per_step()
        runs.append({"data": d, "stages": 2, "micro_batches": m, "processes": r.timeline.n_rows,
                     "oversubscribed": r.timeline.n_rows > plan.cores, "time_per_step": t, "speedup": base / t,
                     "replicas_in_sync": bool(r.replicas_in_sync),
                     "max_abs_difference": float(np.abs(r.params - plain.params).max())})
    if errors and not runs:
        raise RuntimeError("; ".join(e["part"] + ": " + e["message"] for e in errors))
    return {"model": list(model.sizes), "run": kw, "serial_time_per_step": base,
            "one_process_m4_time_per_step": one_process.time_per_step(), "runs": runs, "errors": errors}


# ------------------------------------------------------------------ the course's convolution
def conv(plan) -> dict:
    """The course's conv2d algorithms (im2col, Winograd) on ResNet-50's 3x3 layers, 1 thread and all cores."""
    from course_lib.conv.algorithms import conv2d, resnet50_3x3_layers
    from course_lib.cost import conv2d_macs

    batch = 1 if plan.quick else 32
    layers = resnet50_3x3_layers(batch)
    if plan.quick:  # a smoke test: the layers' geometry, few channels, small images
        layers = [(layer.name, (1, 4, 8, 8), (4, 4, 3, 3)) for layer in layers[:2]]
    else:
        layers = [(layer.name, layer.x_shape, layer.w_shape) for layer in layers]
    algorithms = ("im2col", "winograd_f4", "winograd_f2")
    thread_counts = sorted({1, plan.cores})
    repeat = 1 if plan.quick else 3
    rng = np.random.default_rng(0)
    rows, errors = [], []
    for name, x_shape, w_shape in layers:
        x = rng.standard_normal(x_shape, dtype=np.float32)
        w = rng.standard_normal(w_shape, dtype=np.float32)
        macs = conv2d_macs(w_shape[1], w_shape[0], 3, x_shape[2], padding=1, batch=x_shape[0])
        row = {"name": name, "x_shape": list(x_shape), "w_shape": list(w_shape), "padding": 1, "macs": macs,
               "by_threads": []}
        for k in thread_counts:
            seconds = {}
            with blas_threads(k):
                for alg in algorithms:
                    try:
                        seconds[alg] = measure(lambda a=alg, x=x, w=w: conv2d(x, w, padding=1, algorithm=a),
                                               repeat=repeat, warmup=1).median
                    except Exception as exc:  # noqa: BLE001
                        errors.append(_error(f"{name} {alg} {k} threads", exc))
            best = min(seconds, key=seconds.get) if seconds else None
            row["by_threads"].append({"threads": k, "seconds": seconds, "fastest": best})
        rows.append(row)
    return {"batch": batch, "algorithms": list(algorithms), "threads": thread_counts, "repeat": repeat,
            "layers": rows, "errors": errors}


#: (name, chapter, function) in the order the run goes through them.
EXPERIMENTS = [
    ("pool", "01", pool),
    ("threads", "05", threads),
    ("roofline", "06", roofline),
    ("scaling", "07", scaling),
    ("collectives", "08", collectives),
    ("overlap", "08", overlap),
    ("pipeline", "11", pipeline),
    ("tensor", "12", tensor),
    ("hybrid", "14", hybrid),
    ("conv", "05/06", conv),
]
