r"""Overlap of communication with the backward pass (通信与计算重叠): the step-time model.

The backward pass computes the gradients of the layers last to first. The gradient of the
last layers is final long before the backward pass ends, so its all-reduce need not wait:
the gradients are grouped into **buckets** of consecutive layers, and the all-reduce of a
bucket starts as soon as the backward pass has finished its layers, while the backward pass
goes on with the earlier layers (PyTorch DDP: Li et al. 2020, "PyTorch Distributed:
Experiences on Accelerating Data Parallel Training", PVLDB 13(12), section 3.2.3; Horovod's
tensor fusion is the same idea).

Number the :math:`N_b` buckets :math:`\nu = 1 \ldots N_b` in the order the backward pass
finishes them. With the forward taking :math:`t_{\text{fwd}}`, the backward of bucket
:math:`\nu` :math:`t_{\text{bwd},\nu}`, its all-reduce :math:`t_{\text{ar},\nu}` and the update
:math:`t_{\text{upd}}`, the backward pass has finished bucket :math:`\nu` at
:math:`t^{\text{ready}}_\nu = t_{\text{fwd}} + \sum_{\nu' \le \nu} t_{\text{bwd},\nu'}`, and the
all-reduces run one after the other on the link, each once its bucket is ready:

.. math:: t^{\text{done}}_\nu = \max(t^{\text{ready}}_\nu,\ t^{\text{done}}_{\nu-1}) + t_{\text{ar},\nu},
          \qquad t^{\text{done}}_0 = 0, \qquad t_{\text{step}} = t^{\text{done}}_{N_b} + t_{\text{upd}}

against :math:`t_{\text{fwd}} + \sum_\nu t_{\text{bwd},\nu} + \sum_\nu t_{\text{ar},\nu} + t_{\text{upd}}`
without overlap (one bucket). When every all-reduce is shorter than the next bucket's backward,
only the last bucket's all-reduce is exposed. More buckets hide more, but each all-reduce pays
its latency :math:`\alpha` again (:func:`course_lib.alpha_beta.ring_allreduce_time` of each bucket's
bytes), which is why DDP's buckets hold 25 MB by default, not one layer each.

The model assumes that computation and communication use different resources (a GPU's
cores and its network engine). On a CPU-only machine both are the same cores: the
all-reduce's additions compete with the backward's matrix products, and the overlap can
only hide what is not CPU work (waiting for the other workers, the barrier messages).

Examples
--------
>>> t = overlapped_step_time(1.0, [1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5])
>>> t["sequential"], t["overlapped"], t["exposed"]
(7.0, 5.5, 0.5)
>>> bucket_layers(5, 2)   # layers [2, 5) finish first in the backward pass
[(2, 5), (0, 2)]
"""

from __future__ import annotations

import numpy as np

from ._validate import as_real, check_int, check_positive, check_range, check_sequence

__all__ = ["backward_shares", "bucket_layers", "measured_phases", "overlapped_step_time"]


def bucket_layers(n_layers: int, buckets: int) -> list[tuple[int, int]]:
    """Layer ranges ``[start, stop)`` of ``buckets`` buckets of consecutive layers, in the
    order the backward pass finishes them (the last layers first).

    The layers are split as evenly as counts allow (``stop - start`` differ by at most one).

    Parameters
    ----------
    n_layers : int
        Weight layers of the model, >= 1.
    buckets : int
        Number of buckets, in [1, n_layers].

    Examples
    --------
    >>> bucket_layers(4, 1), bucket_layers(4, 4)
    ([(0, 4)], [(3, 4), (2, 3), (1, 2), (0, 1)])
    """
    n_layers = check_int(n_layers, "n_layers", 1)
    buckets = check_int(buckets, "buckets", 1, n_layers)
    edges = [k * n_layers // buckets for k in range(buckets + 1)]
    return [(edges[k], edges[k + 1]) for k in reversed(range(buckets))]


def _times(value, name: str, count: int | None = None) -> np.ndarray:
    arr = np.atleast_1d(as_real(value, name, allowed="in [0, inf)"))
    check_range(arr, name, 0.0)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a number or a non-empty sequence of numbers >= 0")
    if count is not None and arr.size not in (1, count):
        raise ValueError(f"{name} must have one value or one per bucket ({count}), got {arr.size}")
    return arr


def overlapped_step_time(compute_fwd, compute_bwd, comm_times, *, update: float = 0.0) -> dict:
    r"""Step time of data parallelism with and without overlapping the all-reduce with the
    backward pass (the module's model; Li et al. 2020).

    Parameters
    ----------
    compute_fwd : float
        :math:`t_{\text{fwd}}`, seconds of the forward pass, >= 0.
    compute_bwd : float or sequence of float
        :math:`t_{\text{bwd},\nu}`, seconds of the backward pass of each bucket in the order it finishes
        them (the last layers first); one number: the whole backward, split evenly over the
        buckets.
    comm_times : float or sequence of float
        :math:`t_{\text{ar},\nu}`, seconds of each bucket\'s all-reduce (same order); the number of buckets
        :math:`N_b` is its length (one number: one bucket, no overlap).
    update : float
        :math:`t_{\text{upd}}`, seconds of the optimizer step after the last all-reduce, >= 0.

    Returns
    -------
    dict
        ``sequential``: the step without overlap; ``overlapped``:
        :math:`t^{\text{done}}_{N_b} + t_{\text{upd}}`; ``exposed``: communication not hidden,
        :math:`t^{\text{done}}_{N_b} - t^{\text{ready}}_{N_b}`; ``hidden``: the sum of the
        :math:`t_{\text{ar},\nu}` - exposed; ``backward_end``: the :math:`t^{\text{ready}}_\nu`;
        ``comm_start`` and ``comm_end``: when each all-reduce starts and ends (seconds from
        the start of the step), for drawing a timeline.

    Examples
    --------
    Two buckets whose all-reduce takes longer than their backward (hand values:
    ready at 2 and 3, done at :math:`2 + 2 = 4` and :math:`\max(3, 4) + 2 = 6`):

    >>> t = overlapped_step_time(1.0, [1.0, 1.0], [2.0, 2.0])
    >>> t["sequential"], t["overlapped"], t["hidden"], t["comm_start"].tolist()
    (7.0, 6.0, 1.0, [2.0, 4.0])

    One bucket hides nothing:

    >>> t = overlapped_step_time(1.0, 2.0, 2.0, update=0.5)
    >>> t["sequential"] == t["overlapped"] == 5.5
    True
    """
    t_f = check_positive(compute_fwd, "compute_fwd", allow_zero=True)
    t_u = check_positive(update, "update", allow_zero=True)
    comm = _times(comm_times, "comm_times")
    bwd = _times(compute_bwd, "compute_bwd", comm.size)
    if bwd.size == 1 and comm.size > 1:
        bwd = np.full(comm.size, bwd[0] / comm.size)
    backward_end = t_f + np.cumsum(bwd)
    start, end = np.empty(comm.size), np.empty(comm.size)
    link_free = 0.0
    for j in range(comm.size):
        start[j] = max(backward_end[j], link_free)
        end[j] = link_free = start[j] + comm[j]
    exposed = float(end[-1] - backward_end[-1])
    return {
        "sequential": float(t_f + bwd.sum() + comm.sum() + t_u),
        "overlapped": float(end[-1] + t_u),
        "exposed": exposed,
        "hidden": float(comm.sum() - exposed),
        "backward_end": backward_end,
        "comm_start": start,
        "comm_end": end,
    }


def backward_shares(sizes, buckets: int) -> np.ndarray:
    """Share of the backward pass's FLOPs that each bucket's layers take, in the order the
    backward pass finishes the buckets (:func:`bucket_layers`).

    Layer ``i`` (``sizes[i]`` inputs, ``sizes[i + 1]`` outputs) costs one GEMM for its weight
    gradient and, except layer 0, one for its input gradient (as
    :meth:`course_lib.models.MLP.flops_per_sample` counts them).

    Examples
    --------
    >>> (backward_shares((4, 8, 8, 2), 3) * 6).tolist()   # 2*8*2, 2*8*8, 1*4*8 MACs: 32, 128, 32
    [1.0, 4.0, 1.0]
    """
    sizes = [check_int(s, f"sizes[{i}]", 1) for i, s in enumerate(check_sequence(sizes, "sizes"))]
    if len(sizes) < 2:
        raise ValueError(f"sizes needs at least an input and an output width, got {sizes}")
    macs = [a * b * (2 if i else 1) for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]
    per_bucket = np.array([sum(macs[lo:hi]) for lo, hi in bucket_layers(len(macs), buckets)], dtype=float)
    return per_bucket / per_bucket.sum()


def measured_phases(timeline, *, skip: int = 1) -> dict:
    """The model's inputs measured: median seconds (over steps and workers) of the forward,
    the backward, the update, and each bucket's all-reduce and wait, from the timeline of
    ``train_data_parallel(..., buckets=k)`` (``result.extra["timeline"]``: rows
    ``(rank, step, kind, bucket, start, end)``).

    Parameters
    ----------
    timeline : sequence of (rank, step, kind, bucket, start, end)
    skip : int
        Steps left out at the start (warm-up), >= 0; at least one step must remain.

    Returns
    -------
    dict
        ``forward``, ``backward``, ``update`` (float), ``allreduce`` and ``wait`` (one per
        bucket, in the order the backward pass finishes them).

    Examples
    --------
    >>> rows = [(0, s, k, b, 0.0, d) for s in range(3) for k, b, d in
    ...         (("F", -1, 1.0), ("B", -1, 2.0), ("U", -1, 0.5), ("W", 0, 0.1), ("A", 0, 0.25))]
    >>> p = measured_phases(rows)
    >>> p["forward"], p["backward"], p["update"], p["allreduce"].tolist()
    (1.0, 2.0, 0.5, [0.25])
    """
    rows = check_sequence(timeline, "timeline", (tuple, list), "a (rank, step, kind, bucket, start, end) row")
    skip = check_int(skip, "skip", 0)
    rows = [r for r in rows if r[1] >= skip]
    if not rows:
        raise ValueError(f"timeline has no step after the first skip={skip}")

    def median(kind, bucket=None):
        values = [r[5] - r[4] for r in rows if r[2] == kind and (bucket is None or r[3] == bucket)]
        return float(np.median(values)) if values else 0.0

    buckets = sorted({r[3] for r in rows if r[2] == "A"})
    return {"forward": median("F"), "backward": median("B"), "update": median("U"),
            "allreduce": np.array([median("A", b) for b in buckets]),
            "wait": np.array([median("W", b) for b in buckets])}
