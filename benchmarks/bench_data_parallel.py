"""Data and tensor parallelism on one machine, side by side, beside their ceilings (issues 6,
13 and 37).

Same model (MLP 784-1024-10, 3.26 MB of float32 gradients), same synthetic data and same
global batch for every variant:

* the serial reference: ``train_serial`` with one BLAS thread, run in a worker process set up
  as the workers are (:func:`course_lib.parallel.train.ceiling.serial_in_worker`); every
  speedup is against it. Beside it, the same loop in this process and with all BLAS threads;
* shared-memory data parallelism on each worker count of ``--workers`` (1 BLAS thread each),
  and its **ceiling**: as many independent copies of one worker's step, side by side,
  exchanging nothing (:func:`~course_lib.parallel.train.ceiling.run_copies`): the most those
  cores give this work. ``x ceil.`` is a run's speedup over the ceiling's (paired per round);
* on the largest worker count: the naive pipe backend, torch gloo (when torch is installed),
  tensor parallelism (the Megatron split of the 784-1024-10 pair) beside its own ceiling, and
  the options the 16-core run must choose between (``--no-options`` leaves them out): workers
  pinned to cores, the shared-memory flag barrier instead of the pipe barrier, both;
* chapter 01's pool (``measure_parallel_speedup``, the digits workload) at every worker count,
  with its ceiling (the serial time over the time its workers computed inside each run) and
  the gradient sent back through shared memory instead of pickled through the pipes.

Each round runs every variant once, interleaved, and speedups are the median over rounds of
the ratio to the serial reference of the SAME round (robust to a machine whose load changes).
Steps/s come from the median step time without the first (warm-up) step; start-up is reported
apart. ``--budget`` stops starting new rounds once the run would pass it (every batch gets at
least one round). Nothing is asserted: this prints a report (and ``--json`` writes it).

Where the time of a shared-memory step goes (the diagnostics)
-------------------------------------------------------------
Every shared-memory run logs each barrier wait's arrival and departure
(``log_barriers=True``; :func:`~course_lib.parallel.train.ceiling.sync_breakdown` reads the
log). A worker's step is: its *work* (update, batch, forward, backward), the wait at barrier
B1 for the slowest worker (*straggler*), B1's own *latency* (from the last arrival to my
departure: messages and wake-up), the *reduce-scatter* (my chunk of every row), the wait at B2
for the slowest summer (*RS imbal.*), B2's latency. The table prints them in ms per step
(mean over the workers, median over steps and rounds), the reduce-scatter's memory traffic
in GB/s, and the barrier alone (no work between the waits) for both barrier kinds. Beside
every run: its CPU seconds per step (the worker's main thread: steal and waiting do not
count), its minor page faults per step and the hypervisor's steal share of the CPUs
(``/proc/stat``) while it ran.

What the code says before any measurement (the analysis asked for by issue 37):

* the exchange itself is small: each worker's reduce-scatter reads its 1/N of every row
  (N x 3.26/N MB) and writes 3.26/N MB, the update reads the 3.26 MB sum once; at 16
  workers and batch 16,384 (1,024 per worker, ~40 ms of work) that is ~1 ms, not the 26 %
  comm+wait a 16-core run showed. So the rest is *waiting*: the slowest worker of every step
  (noise of 16 vCPUs: one 15 % slower costs everyone 15 %) and the barriers (a pipe
  dissemination barrier has log2(16) = 4 rounds, each a write, a ``poll`` and a wake-up by
  the kernel; two barriers a step) - the log separates the two;
* cache lines: each worker writes only its own row of the gradients and its own chunk of the
  sum, and chunks start on 64-byte boundaries (``chunk_bounds``), so no two workers write one
  cache line in the exchange (only the two 64-byte lines where consecutive rows meet, once a
  step); the progress counters of the engine (two 8-byte writes per worker and step) share
  lines, which costs nanoseconds;
* pinning keeps a worker's caches and stops migrations; the flag barrier replaces each
  kernel wake-up by a look at shared memory (a core spinning with ``sched_yield``).

Measured on the 2-core development machine (shared, load 9-11: only the counts and the
exchange's own costs mean anything there): the reduce-scatter of 2 workers takes 0.35-0.40 ms
a step (25-29 GB/s over both), a pipe barrier alone 55-60 us a wait, B1's latency 0.4-0.9 ms
and the straggler 2.7-4.8 ms inside 50-160 ms steps: waiting, not moving bytes, is what a
step loses. How to read the 16-core run: ``wait %`` made of ``stragg.`` (and a large
``straggler_max``, a high ``steal``) is the vCPUs, not the code - compare the pinned rows;
``B1 lat.``/``B2 lat.`` far above the barrier alone is wake-up cost - compare the flag rows;
``RS GB/s`` far below the machine's memory bandwidth is the reduce-scatter's traffic. The
defaults stay pipe barrier and no pinning until that run picks (``barrier_kind``,
``pin_workers`` of ``train_data_parallel``).

``python -m benchmarks data_parallel -- --help`` lists the options. For a 16-core machine in
about 2-3 minutes: ``--batches 2048,16384 --workers 1,2,4,8,16 --rounds 3 --budget 170``.
Targets (issue 37, 16 cores): shared memory at batch 16,384 on 16 workers >= 0.8 x its
ceiling and comm+wait <= 12 % of the step; at batch 2,048 >= 1.5 x torch gloo; the pool and
tensor parallelism >= 0.7 x their ceilings; S(1) within 10 % of the serial reference. On 2
cores: shared-memory S(2) >= 1.5 at batch 2048, throughput >= 1.15x the gloo run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

import numpy as np

from course_lib.models import MLP
from course_lib.parallel.train.ceiling import (
    measure_barrier,
    run_copies,
    serial_in_worker,
    sync_breakdown,
)
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.reference import train_serial
from course_lib.parallel.train.speedup import (
    GradientWorkload,
    default_process_counts,
    measure_parallel_speedup,
)
from course_lib.parallel.train.tensor import train_tensor_parallel
from course_lib.timing import cpu_ticks

SIZES = (784, 1024, 10)
TARGET_SPEEDUP = 1.5
TARGET_VS_GLOO = 1.15
TARGET_VS_GLOO_2048 = 1.5  # issue 37, at batch 2048 on 16 cores
TARGET_CEILING = 0.8  # shared memory at batch 16384 on 16 workers
TARGET_COMM = 0.12
TARGET_CEILING_OTHERS = 0.7  # the pool and tensor parallelism
TARGET_S1 = 0.10  # S(1) within 10 % of 1
REFERENCE = "serial, 1 BLAS thread"
SYNC_PARTS = ("work", "straggler", "b1_latency", "reduce_scatter", "rs_imbalance", "b2_latency", "step")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def _variants(cores: int, workers: list[int], with_gloo: bool, options: bool) -> list[tuple[str, int, dict]]:
    """(name, parallel units N, keyword arguments of the run)."""
    top = max(workers)
    out = [(REFERENCE, 1, dict(kind="reference")),
           ("serial, this process", 1, dict(kind="serial", blas_threads=1)),
           (f"serial, {cores} BLAS threads", cores, dict(kind="serial", blas_threads=None))]
    for n in workers:
        out.append((f"shared memory, {n} workers", n, dict(kind="dp", workers=n, backend="shm", ceiling=f"ceiling, {n} copies")))
        out.append((f"ceiling, {n} copies", n, dict(kind="copies", workers=n)))
    out.append((f"pipes, {top} workers", top, dict(kind="dp", workers=top, backend="pipe")))
    out.append((f"tensor parallel, {top} workers", top,
                dict(kind="tp", workers=top, ceiling=f"tensor ceiling, {top} copies")))
    out.append((f"tensor ceiling, {top} copies", top, dict(kind="copies", workers=top, copy="tensor")))
    if options:
        ceiling = f"ceiling, {top} copies"
        out += [(f"shm pinned, {top} workers", top, dict(kind="dp", workers=top, backend="shm", pin=True, ceiling=ceiling)),
                (f"shm flag barrier, {top} workers", top,
                 dict(kind="dp", workers=top, backend="shm", barrier="flag", ceiling=ceiling)),
                (f"shm flag + pinned, {top} workers", top,
                 dict(kind="dp", workers=top, backend="shm", barrier="flag", pin=True, ceiling=ceiling)),
                (f"ceiling pinned, {top} copies", top, dict(kind="copies", workers=top, pin=True))]
    if with_gloo:
        out.append((f"torch gloo, {top} workers", top, dict(kind="gloo", workers=top)))
    return out


def _run(spec: dict, model, x, y, batch: int, steps: int, start_method):
    kw = dict(batch_size=batch, steps=steps, lr=0.01, seed=0, progress=False)
    kind = spec["kind"]
    if kind == "reference":
        return serial_in_worker(model, x, y, start_method=start_method, **kw)
    if kind == "serial":
        return train_serial(model, x, y, blas_threads=spec["blas_threads"], **kw)
    if kind == "copies":
        return run_copies(model, x, y, workers=spec["workers"], kind=spec.get("copy", "data"),
                          pin_workers=spec.get("pin", False), start_method=start_method, **kw)
    if kind == "tp":
        return train_tensor_parallel(model, x, y, workers=spec["workers"], start_method=start_method, **kw)
    if kind == "gloo":
        return train_data_parallel(model, x, y, workers=spec["workers"], backend="gloo", start_method=start_method, **kw)
    extra = {}
    if spec["backend"] == "shm":
        extra = dict(log_barriers=True, barrier_kind=spec.get("barrier", "pipe"), pin_workers=spec.get("pin", False))
    return train_data_parallel(model, x, y, workers=spec["workers"], backend=spec["backend"],
                               start_method=start_method, **extra, **kw)


def _median(values, default=math.nan) -> float:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(values) if values else default


def _record(res, steal) -> dict:
    """What one run gives the report (times in seconds)."""
    sl = slice(1, None) if res.steps > 1 else slice(None)
    out = {"time": res.time_per_step(), "comm": res.communication_share(), "startup": res.startup_time,
           "mb": 0.0 if res.bytes_per_step is None else float(np.median(res.bytes_per_step)) / 1e6,
           "steal": steal[0], "steal_max": steal[1]}
    if "cpu_time" in res.extra:
        out["cpu"] = float(np.median(res.extra["cpu_time"][sl].max(axis=1)))
        out["faults"] = float(np.median(res.extra["minor_faults"][sl].mean(axis=1)))
    if "barrier_log" in res.extra and res.workers > 1:
        try:
            out["sync"] = sync_breakdown(res)
        except ValueError:
            pass
    return out


def _steps(model, batch: int, budget: float) -> int:
    """Steps so that the serial run computes about ``budget`` seconds (at ~60 GFLOP/s)."""
    flops = model.flops_per_sample()["total"] * batch
    return int(min(40, max(5, budget * 60e9 / flops)))


def _machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(f"{p['internal_api']} {p['version']}" for p in threadpool_info() if p["user_api"] == "blas")
    except Exception:  # noqa: BLE001 - only a label
        blas = "?"
    return f"{model}; BLAS {blas or 'none found'}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks data_parallel --", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="512,2048", help="global batch sizes, comma-separated")
    parser.add_argument("--workers", default=None,
                        help="worker counts, comma-separated (default: 1..cores, powers of two above 8 cores)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median of ratios)")
    parser.add_argument("--budget", type=float, default=0.0,
                        help="seconds the whole run may take: no new round starts past it (0: no limit)")
    parser.add_argument("--step-budget", type=float, default=0.8,
                        help="seconds of serial compute per run (sets the number of steps)")
    parser.add_argument("--cores", type=int, default=_cores(), help="largest worker count (without --workers)")
    parser.add_argument("--start-method", default=None, help="fork, forkserver or spawn")
    parser.add_argument("--no-gloo", action="store_true", help="skip the torch engine")
    parser.add_argument("--no-options", action="store_true", help="skip the pinned and flag-barrier variants")
    parser.add_argument("--no-pool", action="store_true", help="skip chapter 01's pool")
    parser.add_argument("--pool-epochs", type=int, default=GradientWorkload().epochs,
                        help="passes of chapter 01's pool workload")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    workers = ([int(n) for n in args.workers.split(",")] if args.workers
               else default_process_counts(args.cores))
    top = max(workers)
    from course_lib.parallel.engine.gloo import torch_available

    with_gloo = not args.no_gloo and torch_available()
    options = not args.no_options and platform.machine().lower() in ("x86_64", "amd64")
    model = MLP(SIZES)
    rng = np.random.default_rng(0)
    n = 2 * max(batches)
    x = rng.random((n, SIZES[0]), dtype=np.float32)
    y = rng.integers(0, SIZES[-1], n)
    load0 = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    ticks0 = cpu_ticks()
    print(f"MLP {'-'.join(map(str, SIZES))} ({model.n_params * 4 / 1e6:.2f} MB of gradients), "
          f"{_cores()} cores ({_machine()}), Python {platform.python_version()}, numpy {np.__version__}, "
          f"start method {args.start_method or 'default'}, workers {workers}, {args.rounds} rounds"
          + (f", budget {args.budget:g} s" if args.budget else "") + f"; load average at start {load0[0]:.2f}")
    if not with_gloo:
        print("torch gloo: skipped (" + ("--no-gloo" if args.no_gloo else "torch not installed") + ")")
    t_start = time.perf_counter()
    report: dict = {"batches": {}, "errors": []}

    barrier = _barrier_latency(top, options, args.start_method, report)
    n_sections = len(batches) + (0 if args.no_pool else 0.3)
    for i, batch in enumerate(batches):
        try:
            left = args.budget - (time.perf_counter() - t_start) if args.budget else math.inf
            allowance = left / (n_sections - i) if args.budget else math.inf
            report["batches"][batch] = _batch_section(model, x, y, batch, workers, with_gloo, options, args, allowance,
                                                      barrier, report)
        except Exception as exc:  # noqa: BLE001 - the other batches go on
            report["errors"].append({"section": f"batch {batch}", "error": repr(exc)})
            print(f"\nbatch {batch} failed: {exc!r}")
            traceback.print_exc()
    if not args.no_pool:
        try:
            report["pool"] = _pool_section(workers, args)
        except Exception as exc:  # noqa: BLE001
            report["errors"].append({"section": "pool", "error": repr(exc)})
            print(f"\npool failed: {exc!r}")
    load1 = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    steal = cpu_ticks().steal_since(ticks0)
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s; load average at end {load1[0]:.2f} "
          f"(a load above the core count means other processes competed for the cores); steal over the run "
          f"{_pct(steal[0])} mean, {_pct(steal[1])} on the worst CPU")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_start": load0[0], "load_end": load1[0], "cores": _cores(), "workers": workers,
                       "machine": _machine(), "steal": steal, "barrier_latency": barrier,
                       "results": {str(k): v["rows"] for k, v in report["batches"].items()},
                       "s1": {str(k): v["s1"] for k, v in report["batches"].items()},
                       "sync": {str(k): v["sync"] for k, v in report["batches"].items()},
                       "pool": report.get("pool"), "errors": report["errors"]}, f, indent=1, default=_jsonable)
    return 0


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _pct(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1%}"


def _barrier_latency(top: int, options: bool, start_method, report) -> dict:
    """The barriers alone: seconds per wait with no work between, on ``top`` (and 2) workers."""
    out = {}
    kinds = ("pipe", "flag") if options else ("pipe",)
    for n in sorted({2, top}) if top >= 2 else []:
        for kind in kinds:
            for pin in ((False, True) if options else (False,)):
                try:
                    out[f"{kind}{' pinned' if pin else ''}, {n} workers"] = measure_barrier(
                        n, kind, waits=300, pin_workers=pin, start_method=start_method)
                except Exception as exc:  # noqa: BLE001
                    report["errors"].append({"section": f"barrier {kind} {n}", "error": repr(exc)})
    if out:
        print("barrier with no work between the waits (us per wait): "
              + "; ".join(f"{k} {v * 1e6:.1f}" for k, v in out.items()))
    return out


def _batch_section(model, x, y, batch, workers, with_gloo, options, args, allowance, barrier, report) -> dict:
    t0 = time.perf_counter()
    cores = args.cores if not args.workers else max(workers)
    steps = _steps(model, batch, args.step_budget)
    variants = _variants(max(cores, max(workers)), workers, with_gloo, options)
    per_round: dict[str, list] = {name: [] for name, _, _ in variants}
    ticks0 = cpu_ticks()
    rounds = 0
    for r in range(args.rounds):
        t_round = time.perf_counter()
        for name, _, spec in variants:
            try:
                before = cpu_ticks()
                res = _run(spec, model, x, y, batch, steps, args.start_method)
                per_round[name].append(_record(res, cpu_ticks().steal_since(before)))
            except Exception as exc:  # noqa: BLE001 - one variant failing must not end the run
                per_round[name].append(None)
                report["errors"].append({"section": f"batch {batch} round {r}: {name}", "error": repr(exc)})
                print(f"  {name} failed in round {r}: {exc!r}")
        rounds += 1
        took = time.perf_counter() - t_round
        if time.perf_counter() - t0 + took > allowance:
            break
    rows = _rows(variants, per_round, with_gloo)
    steal = cpu_ticks().steal_since(ticks0)
    print(f"\nglobal batch {batch}, {steps} steps per run, {rounds} round(s), {time.perf_counter() - t0:.0f} s, "
          f"steal {_pct(steal[0])} mean, {_pct(steal[1])} worst CPU")
    _print_table(rows, with_gloo)
    s1 = _s1_check(per_round, workers, batch)
    sync = _print_sync(variants, per_round, batch)
    _print_targets(rows, batch, workers, with_gloo)
    return {"steps": steps, "rounds": rounds, "rows": rows, "s1": s1, "sync": sync, "steal": steal}


def _paired(per_round, a: str, b: str) -> list[float]:
    """time(a) / time(b) in every round where both ran."""
    return [ra["time"] / rb["time"] for ra, rb in zip(per_round.get(a, []), per_round.get(b, []))
            if ra is not None and rb is not None and rb["time"] > 0]


def _rows(variants, per_round, with_gloo) -> list[dict]:
    gloo_name = next((name for name, _, spec in variants if spec["kind"] == "gloo"), None) if with_gloo else None
    rows = []
    for name, units, spec in variants:
        runs = [r for r in per_round[name] if r is not None]
        if not runs:
            rows.append(dict(variant=name, n=units, failed=True))
            continue
        speedups = _paired(per_round, REFERENCE, name)
        s = _median(speedups)
        row = dict(variant=name, n=units, steps_per_s=_median(1 / r["time"] for r in runs), speedup=s,
                   efficiency=s / units, spread=(max(speedups) - min(speedups)) / s if speedups and s else math.nan,
                   comm_share=_median(r["comm"] for r in runs), startup_s=_median(r["startup"] for r in runs),
                   mb_per_step=_median(r["mb"] for r in runs), cpu_ms=_median(r.get("cpu") for r in runs) * 1e3,
                   faults=_median(r.get("faults") for r in runs), steal=_median(r["steal"] for r in runs),
                   steal_max=max((r["steal_max"] for r in runs if not math.isnan(r["steal_max"])), default=math.nan))
        if spec.get("ceiling"):
            row["ceiling_speedup"] = _median(_paired(per_round, REFERENCE, spec["ceiling"]))
            row["vs_ceiling"] = _median(_paired(per_round, spec["ceiling"], name))
        if gloo_name:
            row["vs_gloo"] = _median(_paired(per_round, gloo_name, name))
        rows.append(row)
    return rows


def _print_table(rows: list[dict], with_gloo: bool) -> None:
    head = (f"  {'variant':<32} {'steps/s':>8} {'speedup':>8} {'effic.':>6} {'ceil. S':>7} {'x ceil.':>7} "
            f"{'comm+wait':>9} {'cpu ms':>7} {'faults':>7} {'start-up':>8} {'MB/step':>8}")
    head += f" {'vs gloo':>7}" if with_gloo else ""
    print(head + f" {'steal':>6}")
    for r in rows:
        if r.get("failed"):
            print(f"  {r['variant']:<32} failed (see the errors)")
            continue
        line = (f"  {r['variant']:<32} {r['steps_per_s']:8.2f} {r['speedup']:8.2f} {r['efficiency']:6.2f} "
                f"{_num(r.get('ceiling_speedup'), 7)} {_num(r.get('vs_ceiling'), 7)} {r['comm_share']:9.1%} "
                f"{_num(r['cpu_ms'], 7, 1)} {_num(r['faults'], 7, 0)} {r['startup_s']:7.2f}s {r['mb_per_step']:8.3f}")
        if with_gloo:
            line += f" {_num(r.get('vs_gloo'), 7)}"
        print(line + f" {_pct(r['steal']):>6}")
    print("  speedup: median over rounds of (serial reference / this run), paired per round; ceil. S: the "
          "ceiling's speedup at the same N;\n  x ceil.: this run's speedup over the ceiling's (paired); cpu ms: "
          "CPU seconds of the slowest worker's main thread per step; faults: minor page faults per step")


def _num(value, width: int, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return f"{'-':>{width}}"
    return f"{value:{width}.{digits}f}"


def _s1_check(per_round, workers, batch) -> dict:
    """S(1): the serial reference (worker process), the same loop in this process, one worker."""
    one = "shared memory, 1 workers"
    if 1 not in workers or not per_round.get(one):
        return {}
    out = {}
    for name, key in ((REFERENCE, "reference"), ("serial, this process", "this_process"),
                      ("ceiling, 1 copies", "one_copy")):
        wall = _paired(per_round, name, one)
        cpu = [a["cpu"] / b["cpu"] for a, b in zip(per_round[name], per_round[one])
               if a is not None and b is not None and a.get("cpu") and b.get("cpu")]
        faults = _median(r.get("faults") for r in per_round[name] if r is not None)
        out[key] = {"wall": _median(wall), "wall_min": min(wall, default=math.nan),
                    "wall_max": max(wall, default=math.nan), "cpu": _median(cpu), "faults": faults}
    faults_one = _median(r.get("faults") for r in per_round[one] if r is not None)
    ref = out["reference"]
    ok = abs(ref["wall"] - 1) <= TARGET_S1
    print(f"  S(1) = serial time / one worker's time (median of rounds [min, max]): with the reference "
          f"{ref['wall']:.3f} [{ref['wall_min']:.3f}, {ref['wall_max']:.3f}], {'within' if ok else 'NOT within'} "
          f"{TARGET_S1:.0%}; with the serial loop in this process {out['this_process']['wall']:.3f} "
          f"[{out['this_process']['wall_min']:.3f}, {out['this_process']['wall_max']:.3f}]; "
          f"one copy (no exchange) / one worker {out['one_copy']['wall']:.3f}")
    print(f"    CPU seconds per step, serial / one worker (steal and waiting do not count): reference "
          f"{ref['cpu']:.3f}, this process {out['this_process']['cpu']:.3f}; minor faults per step: reference "
          f"{ref['faults']:.0f}, this process {out['this_process']['faults']:.0f}, one worker {faults_one:.0f}")
    out["within_target"] = bool(ok)
    return out


def _print_sync(variants, per_round, batch) -> dict:
    """Where each shared-memory step's time went (barrier logs), ms per step."""
    table = {}
    for name, _, _ in variants:
        logs = [r["sync"] for r in per_round[name] if r is not None and "sync" in r]
        if logs:
            table[name] = {k: _median(d[k] for d in logs) for k in (*SYNC_PARTS, "straggler_max", "rs_gbytes_per_s")}
    if not table:
        return table
    print("  where the time goes (barrier logs; ms per step, mean over workers, median over steps and rounds):")
    print(f"  {'variant':<32} {'work':>7} {'stragg.':>7} {'B1 lat.':>7} {'red.-sc.':>8} {'RS imb.':>7} "
          f"{'B2 lat.':>7} {'step':>7} {'wait %':>6} {'RS GB/s':>7}")
    for name, d in table.items():
        waits = d["straggler"] + d["b1_latency"] + d["rs_imbalance"] + d["b2_latency"]
        print(f"  {name:<32} " + " ".join(_num(d[k] * 1e3, 7 if k != "reduce_scatter" else 8) for k in SYNC_PARTS)
              + f" {waits / d['step']:6.1%} {_num(d['rs_gbytes_per_s'], 7, 1)}")
    return table


def _print_targets(rows, batch, workers, with_gloo) -> None:
    top = max(workers)
    by = {r["variant"]: r for r in rows if not r.get("failed")}
    shm = by.get(f"shared memory, {top} workers")
    if shm is None:
        return
    verdict = "met" if shm["speedup"] >= TARGET_SPEEDUP else "MISSED"
    print(f"  target S({top}) >= {TARGET_SPEEDUP} (shared memory): {shm['speedup']:.2f} {verdict}"
          + ("" if batch == 2048 else " (the target is set for batch 2048)"))
    if with_gloo and shm.get("vs_gloo") is not None:
        verdict = "met" if shm["vs_gloo"] >= TARGET_VS_GLOO else "MISSED"
        print(f"  target throughput >= {TARGET_VS_GLOO}x gloo: {shm['vs_gloo']:.2f}x {verdict}"
              + ("" if batch == 2048 else " (the target is set for batch 2048)"))
        if top >= 16:
            verdict = "met" if shm["vs_gloo"] >= TARGET_VS_GLOO_2048 else "MISSED"
            print(f"  target (16 cores) throughput >= {TARGET_VS_GLOO_2048}x gloo: {shm['vs_gloo']:.2f}x {verdict}"
                  + ("" if batch == 2048 else " (set for batch 2048)"))
    for name in [r["variant"] for r in rows if r["variant"].startswith(("shared memory", "shm ")) and r.get("n") == top]:
        r = by.get(name)
        if r is None or r.get("vs_ceiling") is None:
            continue
        ok = r["vs_ceiling"] >= TARGET_CEILING and r["comm_share"] <= TARGET_COMM
        print(f"  target {name}: >= {TARGET_CEILING} x ceiling and comm+wait <= {TARGET_COMM:.0%}: "
              f"{r['vs_ceiling']:.2f} x, {r['comm_share']:.1%} {'met' if ok else 'MISSED'}"
              + ("" if batch == 16384 else " (the target is set for batch 16384)"))
    tp = by.get(f"tensor parallel, {top} workers")
    if tp is not None and tp.get("vs_ceiling") is not None:
        print(f"  target tensor parallel >= {TARGET_CEILING_OTHERS} x its ceiling: {tp['vs_ceiling']:.2f} x "
              f"{'met' if tp['vs_ceiling'] >= TARGET_CEILING_OTHERS else 'MISSED'}")


def _pool_section(workers, args) -> dict:
    """Chapter 01's pool: its speedups beside its ceilings, and the gradients sent back
    through shared memory (at the largest count)."""
    t0 = time.perf_counter()
    workload = GradientWorkload(epochs=args.pool_epochs)
    before = cpu_ticks()
    m = measure_parallel_speedup(workers, workload=workload, repeat=max(1, args.rounds), start_method=args.start_method)
    shared = measure_parallel_speedup([max(workers)], workload=workload, repeat=max(1, args.rounds),
                                      start_method=args.start_method, reply="shared")
    steal = cpu_ticks().steal_since(before)
    print(f"\nchapter 01's pool (digits, {workload.sizes}, batch {workload.batch_size}, {workload.epochs} epochs), "
          f"{time.perf_counter() - t0:.0f} s, steal {_pct(steal[0])} mean")
    print(f"  {'N':>3} {'time ms':>8} {'paired S':>8} {'ceil. S':>7} {'x ceil.':>7} {'spread':>7}")
    rows = []
    for k, n in enumerate(m.processes.tolist()):
        rows.append(dict(n=n, seconds=float(m.seconds[k]), speedup=float(m.speedup[k]),
                         ceiling=float(m.ceiling[k]), vs_ceiling=float(m.speedup[k] / m.ceiling[k]),
                         spread=float(m.spread[k])))
        print(f"  {n:3d} {m.seconds[k] * 1e3:8.1f} {m.speedup[k]:8.2f} {m.ceiling[k]:7.2f} "
              f"{m.speedup[k] / m.ceiling[k]:7.2f} {m.spread[k]:7.0%}")
    r = dict(n=int(shared.processes[0]), seconds=float(shared.seconds[0]), speedup=float(shared.speedup[0]),
             ceiling=float(shared.ceiling[0]), vs_ceiling=float(shared.speedup[0] / shared.ceiling[0]),
             spread=float(shared.spread[0]))
    print(f"  {r['n']:3d} {r['seconds'] * 1e3:8.1f} {r['speedup']:8.2f} {r['ceiling']:7.2f} {r['vs_ceiling']:7.2f} "
          f"{r['spread']:7.0%}  (gradients back through shared memory)")
    print(f"  serial reference (timed inside a worker process): {m.serial_seconds * 1e3:.1f} ms; the ceiling: the "
          f"serial time over the mean time the workers computed in the same run")
    top = rows[-1]
    print(f"  target pool >= {TARGET_CEILING_OTHERS} x its ceiling at N = {top['n']}: {top['vs_ceiling']:.2f} x (pipes), "
          f"{r['vs_ceiling']:.2f} x (shared memory) "
          f"{'met' if max(top['vs_ceiling'], r['vs_ceiling']) >= TARGET_CEILING_OTHERS else 'MISSED'}")
    return {"rows": rows, "shared_reply": r, "serial_seconds": m.serial_seconds, "steal": steal,
            "max_abs_difference": max(m.max_abs_difference, shared.max_abs_difference)}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
