"""Exercises of chapter 08, collectives and synchronisation (the collectives family, the
shared-memory toy's two steps, overlap of the all-reduce with the backward pass, stale
gradients, SyncBN).

Expected values come from :mod:`course_lib.alpha_beta`, :mod:`course_lib.parallel.partition`,
:mod:`course_lib.overlap` and :mod:`course_lib.staleness` - never typed in. The givens
are module constants, so the notebook can print them.
"""

from __future__ import annotations

import numpy as np

from .. import alpha_beta
from ..overlap import overlapped_step_time
from ..parallel.partition import chunk_bounds
from ..staleness import sync_batchnorm_statistics
from . import Result, check

__all__ = ["EX1_ALLTOALL", "EX2_TOY", "EX3_STEP", "EX4_STALE", "EX5_SHARDS", "ex1_alltoall_ms",
           "ex2_reduce_scatter_bytes", "ex3_overlapped_step_ms", "ex4_stale_weight", "ex5_syncbn_variance"]

#: Exercise 1: a mixture-of-experts layer on 8 GPUs of one server; every GPU holds 64 MiB of
#: token activations, one block per expert (per GPU), and sends each block to its expert's GPU by
#: pairwise exchange; 50 GB/s per direction and the course's NVLink latency (5 µs).
EX1_ALLTOALL = {"devices": 8, "nbytes": 64 * 2**20, "bandwidth": 50e9, "latency": alpha_beta.NVLINK_LATENCY}

#: Exercise 2: the shared-memory toy (``ShmAllReduce``) with 3 workers on a float32 buffer of
#: 100 numbers; its chunks start on multiples of 16 numbers (``chunk_bounds``).
EX2_TOY = {"workers": 3, "n": 100, "itemsize": 4, "rank": 0}

#: Exercise 3: one data-parallel step in 4 buckets, numbered in the order the backward pass
#: finishes them (the last layers first), in milliseconds. The first layer is the widest: its
#: bucket's backward is the longest, and the middle buckets' all-reduces take longer than
#: their backward.
EX3_STEP = {"forward_ms": 10, "backward_ms": (6, 12, 12, 18), "allreduce_ms": (4, 16, 16, 8), "update_ms": 6}

#: Exercise 4: SGD with stale gradients on the loss w^2 / 2 of one weight (its gradient is w):
#: w_{t+1} = w_t - lr * w_{t - delay}, with w_t = w0 for t < 0; the weight after ``steps`` updates.
EX4_STALE = {"w0": 1.0, "lr": 0.9, "delay": 2, "steps": 6}

#: Exercise 5: what two workers' SyncBN all-reduce adds up for one feature of a batch-norm
#: layer: each worker's count, sum and sum of squares of its shard.
EX5_SHARDS = ({"count": 4, "sum": 10.0, "sum_sq": 30.0}, {"count": 6, "sum": 42.0, "sum_sq": 300.0})


def ex1_alltoall_ms(answer) -> Result:
    """Milliseconds of the all-to-all of :data:`EX1_ALLTOALL` by pairwise exchange.

    The usual unit slip, the given 64 MiB read as 64 MB (64 x 10^6 bytes), is named."""
    g = EX1_ALLTOALL
    n, m, b, a = g["devices"], g["nbytes"], g["bandwidth"], g["latency"]
    expected = 1e3 * alpha_beta.pairwise_alltoall_time(m, n, b, a)
    mib = m // 2**20
    return check(
        answer,
        expected,
        rtol=1e-2,
        name="all-to-all time",
        unit="ms",
        hint="N - 1 rounds; in each, every GPU sends one block of m/N bytes: (N-1)(alpha + m/(N beta)).",
        mistakes={
            1e3 * (n - 1) * (a + m / b): "Each round sends one BLOCK (m/N bytes), not the whole buffer.",
            1e3 * alpha_beta.pairwise_alltoall_time(m, n, b, 0.0): "Latency left out: each of the N - 1 rounds "
                                                             "also costs alpha.",
            1e3 * alpha_beta.ring_allreduce_time(m, n, b, a): "That is an all-reduce (2(N-1) rounds); an "
                                                        "all-to-all moves each block once.",
            1e3 * (a + m / b): "That is one message of the whole buffer: N - 1 partners need N - 1 rounds.",
            1e3 * alpha_beta.pairwise_alltoall_time(mib * 1e6, n, b, a):
                f"That reads {mib} MiB as {mib} MB: a MiB is 2^20 = 1,048,576 bytes, so m = {mib} x 2^20 = "
                f"{m:,} bytes, not {mib * 10**6:,}.",
        },
    )


def _ex2_chunk() -> int:
    g = EX2_TOY
    lo, hi = chunk_bounds(g["n"], g["workers"])[g["rank"]]
    return hi - lo


def ex2_reduce_scatter_bytes(answer) -> Result:
    """Bytes worker 0 of :data:`EX2_TOY` reads from the OTHER workers in its reduce-scatter."""
    g = EX2_TOY
    chunk = _ex2_chunk()
    expected = (g["workers"] - 1) * chunk * g["itemsize"]
    even = (g["workers"] - 1) / g["workers"] * g["n"] * g["itemsize"]
    return check(
        answer,
        expected,
        rtol=0,
        atol=0.5,
        name="bytes read in the reduce-scatter",
        unit="bytes",
        hint="find worker 0's chunk with chunk_bounds(100, 3); it reads that chunk of each OTHER "
             "worker's row: (N - 1) x chunk x 4 bytes.",
        mistakes={
            even: "That is the even split (N-1)/N x n x 4. The toy's chunks start on multiples of "
                  "16 numbers: look at chunk_bounds(100, 3).",
            chunk * g["itemsize"]: "That is worker 0's own chunk; it reads that chunk of the N - 1 "
                                   "other rows.",
            g["workers"] * chunk * g["itemsize"]: "Its own row is not read from another worker: "
                                                  "N - 1 rows, not N.",
            (g["n"] - chunk) * g["itemsize"]: "That is what it reads in the ALL-GATHER (the others' "
                                              "chunks of the sum).",
        },
    )


def _ex3_times() -> dict:
    s = EX3_STEP
    return overlapped_step_time(s["forward_ms"], s["backward_ms"], s["allreduce_ms"], update=s["update_ms"])


def ex3_overlapped_step_ms(answer) -> Result:
    """Step time in ms of :data:`EX3_STEP` when each bucket's all-reduce starts as soon as its
    backward is done and the link is free (one all-reduce at a time), the update after the
    last one."""
    s, t = EX3_STEP, _ex3_times()
    compute = s["forward_ms"] + sum(s["backward_ms"]) + s["update_ms"]
    mistakes = {
        t["sequential"]: "That is the step WITHOUT overlap: every all-reduce after the whole backward.",
        compute: "That is a perfect overlap, all communication hidden; but an all-reduce can only "
                 "start when its bucket is ready AND the previous all-reduce has finished.",
        compute + s["allreduce_ms"][-1]: "Only the last bucket after the backward? The link is still busy "
                                         "with an earlier bucket when the backward ends: follow "
                                         "done = max(ready, previous done) + all-reduce, bucket by bucket.",
        t["overlapped"] - s["update_ms"]: "The all-reduces are right; the update comes after the last one.",
    }
    return check(
        answer,
        t["overlapped"],
        name="step time with overlap",
        unit="ms",
        hint="bucket ν is ready at forward + the backward of buckets 1..ν; its all-reduce ends at "
             "max(ready, the previous all-reduce's end) + its own time; the step ends after the "
             "last all-reduce and the update.",
        mistakes=mistakes,
    )


def _stale_weights(w0: float, lr: float, delay: int, steps: int, *, start: float | None = None) -> list[float]:
    """w_1 ... w_steps of SGD on w^2 / 2 with gradients ``delay`` steps old; the weights
    before the start are ``w0`` (or ``start``: a variant for the usual mistake)."""
    w = [w0 if start is None else start] * delay + [w0]
    for _ in range(steps):
        w.append(w[-1] - lr * w[-1 - delay])
    return w[delay + 1:]


def ex4_stale_weight(answer) -> Result:
    """The weight after :data:`EX4_STALE`'s updates with stale gradients."""
    g = EX4_STALE
    w0, lr, delay, steps = g["w0"], g["lr"], g["delay"], g["steps"]
    expected = _stale_weights(w0, lr, delay, steps)[-1]
    mistakes = {
        _stale_weights(w0, lr, 0, steps)[-1]: "That is SGD with FRESH gradients (delta = 0): each update "
                                              "must use the weight of delta steps before.",
        _stale_weights(w0, lr, delay - 1, steps)[-1]: "That uses gradients one step less stale: w_{t+1} "
                                                      "uses w_{t-delta}, delta steps before w_t.",
        _stale_weights(w0, lr, delay, steps, start=0.0)[-1]: "Before the start the weight is w_0, not 0: the "
                                                             "first delta updates use the initial weight.",
        _stale_weights(w0, lr, delay, steps - 1)[-1]: f"One update short: w_{steps} is the weight after {steps} updates.",
        _stale_weights(w0, lr, delay, steps + 1)[-1]: f"One update too many: w_{steps} is the weight after {steps} "
                                                      "updates.",
    }
    return check(
        answer,
        expected,
        atol=5e-3,
        name=f"w_{steps}",
        hint="keep a list of the weights, starting with delta + 1 copies of w_0; each update appends "
             "last - lr * (the weight delta places before the last).",
        mistakes=mistakes,
    )


def _ex5_stats() -> tuple[float, float, float]:
    """(global variance, mean of the shards' variances, their count-weighted mean), all with
    the divisor n of batch norm (the population variance)."""
    shards = []
    for s in EX5_SHARDS:  # a shard with these count, sum and sum of squares: two values
        mean = s["sum"] / s["count"]
        spread = np.sqrt(s["sum_sq"] / s["count"] - mean * mean)
        shards.append(np.repeat([[mean - spread], [mean + spread]], s["count"] // 2, axis=0))
    _, var = sync_batchnorm_statistics(shards)
    local = [float(np.var(s)) for s in shards]
    counts = [s["count"] for s in EX5_SHARDS]
    return float(var[0]), float(np.mean(local)), float(np.average(local, weights=counts))


def _ex5_sample_variance() -> float:
    """The global variance with the divisor n - 1 (the sample variance): the usual slip."""
    n = sum(s["count"] for s in EX5_SHARDS)
    s1, s2 = sum(s["sum"] for s in EX5_SHARDS), sum(s["sum_sq"] for s in EX5_SHARDS)
    return (s2 - s1 * s1 / n) / (n - 1)


def ex5_syncbn_variance(answer) -> Result:
    """The global batch's variance of the feature of :data:`EX5_SHARDS` (what SyncBN uses).

    The usual slip, the sample variance (divisor n - 1), is named."""
    expected, mean_local, weighted_local = _ex5_stats()
    n = sum(s["count"] for s in EX5_SHARDS)
    return check(
        answer,
        expected,
        rtol=1e-3,
        name="global variance",
        hint="add the counts, the sums and the sums of squares (the all-reduce), then "
             "mean = sum / count and variance = sum of squares / count - mean^2.",
        mistakes={
            mean_local: "That is the mean of the two shards' variances: the spread BETWEEN the shards "
                        "(their means differ) is missing.",
            weighted_local: "That weights the shards' variances by their counts, but still misses the "
                            "spread between the shard means.",
            _ex5_sample_variance(): f"That divides by n - 1 = {n - 1} (the sample variance, as np.var(..., ddof=1) "
                                    f"or statistics.variance give it). Batch norm normalises with the variance of "
                                    f"the batch itself, dividing by n = {n}: sum of squares / n - mean^2.",
        },
    )
