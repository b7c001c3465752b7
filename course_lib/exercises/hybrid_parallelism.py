"""Exercises of notebook 12 (hybrid parallelism: combine the schemes).

Expected values come from :mod:`course_lib.planner`. The givens of each exercise are module
constants, so the notebook can print them.
"""

from __future__ import annotations

import numpy as np

from .. import comm
from ..models import MLP
from ..planner import EXAMPLE_SIZES, best_config, device_parameters
from . import Result, _coerce, _fmt, check

__all__ = ["BEST_SPLIT", "ex_best_split"]

#: Givens of :func:`ex_best_split`: the scaled-up running example on V100s linked by NVLink
#: (the course's NVLink latency, :data:`course_lib.comm.NVLINK_LATENCY`), a device count and
#: batch whose best grid the notebook does not print.
BEST_SPLIT = {
    "sizes": EXAMPLE_SIZES,
    "batch_size": 1024,
    "devices": 32,
    "device_id": "v100_sxm2_32gb",
    "latency": comm.NVLINK_LATENCY,
}


def _best_split():
    g = BEST_SPLIT
    return best_config(
        MLP(g["sizes"]), g["batch_size"], g["devices"], latency=g["latency"],
        **device_parameters(g["device_id"]),
    )


def ex_best_split(answer) -> Result:
    """The fastest grid (N_d, N_p) for the scaled-up running example on the devices and batch of
    :data:`BEST_SPLIT`; a grid (N_d, N_p, 1) with the tensor degree N_t = 1 is the same grid."""
    best = _best_split()
    triple = _coerce(answer, (0, 0, 0))
    if isinstance(triple, (tuple, list, np.ndarray)) and len(triple) == 3:
        try:
            if float(triple[2]) != 1:
                return Result(False, f"✗ best grid (N_d, N_p) = {_fmt(tuple(triple))} is not right. This question "
                                     "has no tensor parallelism: N_t = 1, and N_d x N_p = "
                                     f"{BEST_SPLIT['devices']}.")
            answer = tuple(triple[:2])  # (N_d, N_p, N_t = 1)
        except (TypeError, ValueError):
            pass  # not numbers: check() explains
    model = MLP(BEST_SPLIT["sizes"])
    grad_gb = model.n_params * model.dtype.itemsize / 1e9
    n = BEST_SPLIT["devices"]
    if n <= model.n_layers:
        pipeline_only = (f"Pure pipelining: the {model.n_layers} layers do not split evenly into {n} "
                         "stages (compare the compute bars) and the bubble grows with N_p; a small "
                         "all-reduce between 2 replicas costs less.")
    else:
        pipeline_only = (f"Pure pipelining needs {n} stages, but the model has only {model.n_layers} "
                         "layers: a stage holds at least one layer.")
    return check(
        answer,
        (best.data, best.pipeline),
        name="best grid (N_d, N_p)",
        rtol=0,
        atol=0.01,
        hint=f"enumerate_configs lists every N_d x N_p = {n}; take the fastest that fits in memory "
        f"(or move the explorer's sliders to {n} devices and batch {BEST_SPLIT['batch_size']:,}).",
        mistakes={
            (n, 1): f"Pure data parallelism all-reduces {grad_gb:.1f} GB of gradients every step: "
            "compare the all-reduce bar with the bubble of the pipelines.",
            (1, n): pipeline_only,
        },
    )
