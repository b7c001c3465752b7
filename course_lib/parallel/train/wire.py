r"""Overlap that can be seen: the bucketed all-reduce over a modelled wire, measured
against the step-time model of :mod:`course_lib.overlap`.

On a CPU the workers compute AND communicate with the same cores: the shared-memory
all-reduce is memory traffic done by the CPU, so on few cores a communication thread takes
its cycles from a backward pass, and overlap can hide only what is not CPU work (waiting,
barrier messages). The model assumes what a GPU cluster has: a network that moves the
bytes while the cores compute. ``backend="wire"``
(:class:`course_lib.parallel.allreduce.WireAllReduce`) gives the run that network: every
bucket's sum is still the shared-memory one (the same bits), but it arrives after the ring's
:math:`2(N-1)\alpha + 2\frac{N-1}{N}m/\beta` of a modelled link, a wait that takes no CPU.

:func:`measure_overlap` runs 1, 2 and 4 buckets over that wire (rounds interleaved, and
the shared-memory run beside each) and sets every measured step beside the model's
prediction from the same run: its measured compute phases (forward, backward split over
the buckets by their FLOPs, update) and the wire's modelled time of each bucket.

Examples
--------
>>> from course_lib.models import MLP
>>> rng = np.random.default_rng(0)
>>> x = rng.random((64, 8), dtype=np.float32); y = rng.integers(0, 3, 64)
>>> out = measure_overlap(MLP((8, 16, 16, 3)), x, y, buckets=(1, 3), batch_size=16, steps=3, rounds=1,
...                       wire=(1e-4, 1e6), shm=False, start_method="fork")
>>> [row["buckets"] for row in out["rows"]], out["wire"]
([1, 3], {'alpha': 0.0001, 'beta': 1000000.0})
>>> row = out["rows"][1]
>>> row["model_s"] <= row["sequential_s"], len(row["bucket_backward_s"]), "shm_s" in row
(True, 3, False)
"""

from __future__ import annotations

import os
import statistics

import numpy as np

from ..._validate import check_int, check_sequence, check_type
from ...alpha_beta import NETWORK_LATENCY
from ...models import TrainResult
from ...overlap import backward_shares, overlapped_step_time
from ...timing import available_cores
from ..allreduce import Wire
from ..engine.job import check_flag, check_job
from .data import train_data_parallel

__all__ = ["DEEP_SIZES", "matched_wire", "measure_overlap", "wire_model_inputs"]

#: The deep variant of the running example that the overlap is shown on (the digits, 3 hidden layers of 1,024).
DEEP_SIZES = (64, 1024, 1024, 1024, 10)


def wire_model_inputs(result, sizes, *, skip: int = 1) -> dict:
    """The model's inputs for every step of a ``backend="wire"`` run after the first ``skip``.

    A bucket goes on the wire when the LAST worker has it, and a step (as
    ``result.step_time`` measures it) lasts from its first worker's start. So each step's
    clock starts when its first worker starts its forward: ``forward`` lasts until the last
    worker starts its backward (the forward, the loss, the zeroed gradient buffer, and how
    late the last worker began), ``backward`` until the last worker ends it, ``update`` is
    the longest update; one value per step in ``steps``. ``shares`` splits the backward over
    the buckets by their FLOPs (:func:`course_lib.overlap.backward_shares`); ``allreduce`` is
    the wire's modelled seconds of each bucket (``result.extra["wire_time"]``).
    """
    check_type(result, "result", TrainResult, 'the TrainResult of a run with backend="wire"')
    if "wire_time" not in result.extra:
        raise ValueError(f'result must come from a run with backend="wire", got backend={result.backend!r}')
    skip = check_int(skip, "skip", 0)
    ops: dict[int, dict] = {}  # step -> rank -> kind -> (start, end)
    for rank, step, kind, _, start, end in result.extra["timeline"]:
        if step >= skip and kind in "FBU":
            ops.setdefault(step, {}).setdefault(rank, {})[kind] = (start, end)
    if not ops:
        raise ValueError(f"the run has no step after the first skip={skip}")
    steps = sorted(ops)
    phases: dict[str, list] = {"forward": [], "backward": [], "update": []}
    for s in steps:
        workers = ops[s].values()
        first = min(o["F"][0] for o in workers)  # the step's clock starts here
        backward_start, backward_end = (max(o["B"][i] for o in workers) for i in (0, 1))
        phases["forward"].append(backward_start - first)
        phases["backward"].append(backward_end - backward_start)
        phases["update"].append(max(o["U"][1] - o["U"][0] for o in workers))
    buckets = len(result.extra["wire_time"])
    return {"steps": steps, **phases, "shares": backward_shares(sizes, buckets).tolist(),
            "allreduce": list(result.extra["wire_time"])}


def matched_wire(model, x, y, *, workers: int = 2, **run) -> tuple[Wire, float]:
    r"""A :class:`~course_lib.parallel.allreduce.Wire` whose all-reduce of the whole gradient
    takes as long as the backward pass on this machine, and that backward (seconds).

    One run of ``train_data_parallel(model, x, y, workers=workers, backend="wire", **run)``
    over a wire too fast to matter measures the backward :math:`t_{\text{bwd}}` (the median
    over its steps after the first, as :func:`wire_model_inputs` reads it); then :math:`\alpha` is the
    course's :data:`~course_lib.alpha_beta.NETWORK_LATENCY` and :math:`\beta =
    2\frac{N-1}{N} m / t_{\text{bwd}}` (``Wire()``'s with one worker, who sends nothing).
    """
    fast = Wire(NETWORK_LATENCY, 1e13)  # a wire too fast to matter: the step is its compute
    run = train_data_parallel(model, x, y, workers=workers, backend="wire", wire=fast, **run)
    backward = float(np.median(wire_model_inputs(run, model.sizes)["backward"]))
    nbytes = run.params.nbytes
    if workers == 1:
        return Wire(), backward
    return Wire(NETWORK_LATENCY, 2 * (workers - 1) / workers * nbytes / backward), backward


def _spread(values) -> list[float]:
    return [float(min(values)), float(max(values))]


def measure_overlap(model=None, x=None, y=None, *, workers: int = 2, buckets=(1, 2, 4), wire=None,
                    batch_size: int = 128, steps: int = 8, lr: float = 0.05, rounds: int = 3, shm: bool = True,
                    start_method: str | None = None, timeout: float = 60.0) -> dict:
    r"""Measured step time of the bucketed all-reduce over a modelled wire against the model's
    prediction, per bucket count.

    Every round runs ``train_data_parallel(..., backend="wire", buckets=k)`` for each ``k``
    (and, with ``shm``, the shared-memory run with the same ``k`` right after it). For each
    step of a wire run (after the first) the model
    (:func:`course_lib.overlap.overlapped_step_time`) is given that step's measured compute
    phases (up to its last worker's) and the wire's modelled all-reduce of each bucket
    (:func:`wire_model_inputs`), and the measured step is divided by the prediction: a step
    slowed by other programs slows its measurement and its prediction alike. A run's error
    is the median of these ratios, minus 1.

    Parameters
    ----------
    model, x, y : optional
        The model and its data; None: the deep MLP of :data:`DEEP_SIZES` on the
        digits' training split.
    workers : int
        Worker processes :math:`N` (2).
    buckets : sequence of int
        Bucket counts :math:`N_b`, each in [1, n_layers] (1, 2, 4).
    wire : Wire or (alpha, beta), optional
        The link (:class:`course_lib.parallel.allreduce.Wire`; ``Wire()`` for its defaults).
        None: a wire matched to this machine, :math:`\alpha` the course's ``NETWORK_LATENCY``
        and :math:`\beta` such that the wire's all-reduce of the whole gradient takes as long
        as the backward pass measured here (:func:`matched_wire`, one extra run):
        communication comparable to computation on any machine, so that hiding it is visible.
    batch_size, steps, lr, start_method, timeout
        As for :func:`~course_lib.parallel.train.data.train_data_parallel` (steps >= 2: the
        first is left out).
    rounds : int
        Interleaved rounds, >= 1 (medians and spreads over them).
    shm : bool
        Also run the shared-memory all-reduce with each bucket count (``shm_s``).

    Returns
    -------
    dict
        ``wire`` (alpha, beta, and when matched ``backward_s``, the backward it matched),
        ``workers``, ``sizes``, ``batch_size``, ``steps``, ``rounds``,
        ``cores``, ``load`` (the load average before and after) and ``rows``, one per bucket
        count: ``buckets``; ``measured_s`` and ``model_s`` (medians over the rounds of the
        measured step and of the model's overlapped step), ``sequential_s`` (the model
        without overlap), ``error`` (the median over the rounds of each run's error) with
        ``*_spread`` (min, max over the rounds) of each; ``wire_s`` (the buckets' modelled
        all-reduces, summed), ``exposed_s`` and ``hidden_s`` (the model's), the medians of
        ``forward_s``, ``backward_s``, ``update_s``, ``bucket_backward_s``, and with ``shm``
        ``shm_s`` and ``shm_spread``. Plain floats and lists (JSON-ready).
    """
    if (x is None) != (y is None) or (model is None) != (x is None):
        raise ValueError("give model, x and y together, or none of them (the deep MLP of DEEP_SIZES on the digits)")
    if model is None:
        from ...datasets import load_digits
        from ...models import MLP

        train = load_digits("train")
        model, x, y = MLP(DEEP_SIZES), train.x, train.y
    counts = [check_int(k, f"buckets[{i}]", 1) for i, k in enumerate(check_sequence(buckets, "buckets"))]
    if not counts:
        raise ValueError("buckets must name at least one bucket count")
    rounds = check_int(rounds, "rounds", 1)
    steps = check_int(steps, "steps", 2)
    shm = check_flag(shm, "shm")
    kw = dict(workers=workers, batch_size=batch_size, steps=steps, lr=lr, start_method=start_method,
              timeout=timeout, progress=False)
    for k in counts:  # every run checked before the first starts
        check_job(model, x, y, backend="wire", wire=Wire() if wire is None else wire, buckets=k, **kw)
    load = [os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")]
    matched = None
    if wire is None:
        wire, matched = matched_wire(model, x, y, **kw)
    runs: dict[int, list] = {k: [] for k in counts}
    for _ in range(rounds):  # interleaved: a slow moment of the machine falls on every variant
        for k in counts:
            run = train_data_parallel(model, x, y, backend="wire", wire=wire, buckets=k, **kw)
            other = train_data_parallel(model, x, y, backend="shm", buckets=k, **kw) if shm else None
            runs[k].append((run, other))
    load.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))
    rows = [_row(k, runs[k], model.sizes) for k in counts]
    used = runs[counts[0]][0][0].extra["wire"]
    described = {"alpha": float(used.alpha), "beta": float(used.beta)}
    if matched is not None:
        described["backward_s"] = matched
    return {"wire": described, "workers": int(workers),
            "sizes": list(model.sizes), "batch_size": int(batch_size), "steps": steps, "rounds": rounds,
            "cores": available_cores(), "load": load, "rows": rows}


def _predict(run, sizes) -> dict:
    """One wire run against the model, step by step: the measured step and the model's."""
    p = wire_model_inputs(run, sizes)
    shares = np.asarray(p["shares"])
    model = [overlapped_step_time(f, b * shares, p["allreduce"], update=u)
             for f, b, u in zip(p["forward"], p["backward"], p["update"])]
    measured = run.step_time[p["steps"]]
    med = statistics.median
    return {"measured": float(np.median(measured)), "model": med(t["overlapped"] for t in model),
            "error": med(m / t["overlapped"] for m, t in zip(measured, model)) - 1.0,
            "sequential": med(t["sequential"] for t in model), "exposed": med(t["exposed"] for t in model),
            "hidden": med(t["hidden"] for t in model), "forward": med(p["forward"]),
            "backward": med(p["backward"]), "update": med(p["update"]), "wire": float(sum(p["allreduce"])),
            "bucket_backward": (med(p["backward"]) * shares).tolist()}


def _row(k: int, runs: list, sizes) -> dict:
    """One bucket count's row of :func:`measure_overlap` from its rounds' runs."""
    fits = [_predict(run, sizes) for run, _ in runs]
    shm = [float(np.median(other.step_time[1:])) for _, other in runs if other is not None]
    med = statistics.median
    row = {"buckets": k}
    for name in ("measured", "model", "error"):
        values = [fit[name] for fit in fits]
        row.update({f"{name}_s" if name != "error" else name: med(values), f"{name}_spread": _spread(values)})
    for name in ("sequential", "exposed", "hidden", "forward", "backward", "update", "wire"):
        row[f"{name}_s"] = med(fit[name] for fit in fits)
    row["bucket_backward_s"] = [med(fit["bucket_backward"][j] for fit in fits) for j in range(k)]
    if shm:
        row.update(shm_s=med(shm), shm_spread=_spread(shm))
    return row
