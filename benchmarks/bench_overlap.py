"""Overlap of the all-reduce with the backward pass, measured against the model (issue 28).

The deep variant of the running example (MLP 784-1024-1024-1024-10, 11.6 MB of float32
gradients) is trained with ``N`` shared-memory workers, once with the whole gradient
all-reduced after the backward pass (``buckets=1``) and once per bucket count ``k`` with
the gradient all-reduced in ``k`` buckets by each worker's communication thread while the
backward pass goes on. Rounds interleave the variants; the report gives the median step
time (without the first, warm-up step) of each and what the model
(:func:`course_lib.overlap.overlapped_step_time`) predicts from the phases measured in the
bucketed run (:func:`course_lib.overlap.measured_phases`: forward, backward split over the
buckets by their FLOPs, each bucket's all-reduce, update).

What 2 cores can show: the model assumes that computing and communicating use different
resources (a GPU and its network engine). Here both are the same 2 cores: with 2 workers
each core already runs one worker's backward, and the communication thread's additions
(the all-reduce is memory traffic done by the CPU) take cycles from it; the model does not
see that slowdown (its inputs are the phases as measured in the bucketed run, already
slowed). Overlap then hides mainly what is not CPU work - waiting for the slower worker and
the barrier messages - and that waiting is not in the model either: the measured step of
``buckets=1`` can be longer than the model's sequential step, and the measured gain can be
larger or smaller than the model's, or turn into a loss when other processes compete for
the cores (the load average is printed). On a machine with more cores than workers the
communication thread has a core of its own and the measurement comes closer to the model.
Nothing is asserted: this prints a report.
``python -m benchmarks overlap -- --help`` lists the options.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys

import numpy as np

from course_lib.models import MLP
from course_lib.overlap import backward_shares, measured_phases, overlapped_step_time
from course_lib.parallel.train.data import train_data_parallel

SIZES = (784, 1024, 1024, 1024, 10)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def run(sizes=SIZES, *, workers: int = 2, batch: int = 256, buckets=(1, 2, 4), steps: int = 12,
        rounds: int = 3, start_method: str | None = None) -> list[dict]:
    """Median step times of ``buckets`` (each measured ``rounds`` times, interleaved) and the
    model's prediction from each bucketed run's measured phases; one dict per bucket count."""
    model = MLP(tuple(sizes))
    rng = np.random.default_rng(0)
    x = rng.random((2 * batch, model.sizes[0]), dtype=np.float32)
    y = rng.integers(0, model.sizes[-1], 2 * batch)
    runs: dict[int, list] = {k: [] for k in buckets}
    for _ in range(rounds):
        for k in buckets:
            runs[k].append(train_data_parallel(model, x, y, workers=workers, batch_size=batch, steps=steps, lr=0.01,
                                               buckets=k, start_method=start_method, progress=False))
    rows = []
    for k in buckets:
        measured = statistics.median(float(np.median(r.step_time[1:])) for r in runs[k])
        row = dict(buckets=k, measured_s=measured, exposed_comm_s=statistics.median(
            float(np.median(r.communication[1:])) for r in runs[k]))
        if k > 1:
            predictions = []
            for r in runs[k]:
                p = measured_phases(r.extra["timeline"])
                t = overlapped_step_time(p["forward"], p["backward"] * backward_shares(model.sizes, k),
                                         p["allreduce"], update=p["update"])
                predictions.append((t["sequential"], t["overlapped"], float(p["allreduce"].sum())))
            row.update(model_sequential_s=statistics.median(s for s, _, _ in predictions),
                       model_overlapped_s=statistics.median(o for _, o, _ in predictions),
                       allreduce_s=statistics.median(a for _, _, a in predictions))
        rows.append(row)
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks overlap --", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="layer widths, comma-separated")
    parser.add_argument("--batch", type=int, default=256, help="global batch size")
    parser.add_argument("--buckets", default="1,2,4", help="bucket counts, comma-separated (1: no overlap)")
    parser.add_argument("--steps", type=int, default=12, help="steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--workers", type=int, default=min(2, _cores()), help="worker processes N")
    parser.add_argument("--start-method", default=None, help="fork, forkserver or spawn")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    buckets = tuple(int(k) for k in args.buckets.split(","))
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    n_params = MLP(sizes).n_params
    print(f"MLP {'-'.join(map(str, sizes))} ({n_params * 4 / 1e6:.2f} MB of gradients), {args.workers} workers "
          f"on {_cores()} cores, global batch {args.batch}, Python {platform.python_version()}, numpy "
          f"{np.__version__}; load average at start {load0:.2f}")
    rows = run(sizes, workers=args.workers, batch=args.batch, buckets=buckets, steps=args.steps,
               rounds=args.rounds, start_method=args.start_method)
    base = rows[0]["measured_s"]
    print(f"\n  {'buckets':>7} {'measured':>10} {'vs first':>9} {'exposed comm':>13} {'model: sequential':>18} "
          f"{'overlapped':>11} {'all-reduces':>12}")
    for r in rows:
        line = (f"  {r['buckets']:>7} {r['measured_s'] * 1e3:8.1f}ms {base / r['measured_s']:8.2f}x "
                f"{r['exposed_comm_s'] * 1e3:11.1f}ms")
        if "model_overlapped_s" in r:
            line += (f" {r['model_sequential_s'] * 1e3:16.1f}ms {r['model_overlapped_s'] * 1e3:9.1f}ms "
                     f"{r['allreduce_s'] * 1e3:10.1f}ms")
        print(line)
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nload average at end {load1:.2f} (above the core count: other processes competed for the cores). "
          "The model assumes separate resources for computing and communicating; on a CPU they are the same cores.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_start": load0, "load_end": load1, "cores": _cores(), "workers": args.workers,
                       "sizes": sizes, "batch": args.batch, "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
