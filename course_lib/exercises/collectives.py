"""Exercises of chapter 08, collectives and synchronisation (the collectives family, the
shared-memory toy's two steps, overlap of the all-reduce with the backward pass, stale
gradients, SyncBN, and the alpha and beta of the learner's own all-reduce).

Expected values come from :mod:`course_lib.alpha_beta`, :mod:`course_lib.parallel.partition`,
:mod:`course_lib.overlap` and :mod:`course_lib.staleness` - never typed in. The givens
are module constants, so the notebook can print them; exercise 6's are the learner's own
measurement (a message-size sweep made as :data:`EX6_SWEEP` says).
"""

from __future__ import annotations

import math

import numpy as np

from .. import alpha_beta
from ..i18n import tr
from ..overlap import overlapped_step_time
from ..parallel.partition import chunk_bounds
from ..staleness import sync_batchnorm_statistics
from . import Result, _coerce, _wrong, check, checker

__all__ = ["EX1_ALLTOALL", "EX2_TOY", "EX3_STEP", "EX4_STALE", "EX5_SHARDS", "EX6_SWEEP", "EX6_TOLERANCE",
           "ex1_alltoall_ms", "ex2_reduce_scatter_bytes", "ex3_overlapped_step_ms", "ex4_stale_weight",
           "ex5_syncbn_variance", "ex6_alpha_beta"]

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

#: Exercise 6: the message-size sweep the learner measures (chapter 08, section 2): the toy's
#: all-reduce in ``train_data_parallel(MLP((64, h, 10)), ...)`` (its ``breakdown()["communication"]``,
#: the median over the steps after the first) for one hidden layer of each width ``h``: float32
#: gradients of 1.2 kB to 20 MB, ``steps`` steps of ``batch_size`` samples at learning rate ``lr``.
EX6_SWEEP = {"hidden": (4, 16, 64, 256, 1024, 4096, 16384, 65536), "batch_size": 32, "steps": 12, "lr": 0.01}
#: Exercise 6: which fits of the sweep are right. Within ``rtol`` of the least-squares fit of the
#: relative residuals (:func:`course_lib.alpha_beta.fit_alpha_beta`), or any honest fit: one whose
#: predicted times are off the measured ones by at most ``rms_factor`` x that fit's relative rms
#: + ``rms_slack`` (a fit through two points, by eye, with other weights) and is none of the
#: named slips.
EX6_TOLERANCE = {"rtol": 0.05, "rms_factor": 1.3, "rms_slack": 0.03}


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
        name=tr("all-to-all time"),
        unit="ms",
        hint=tr("N - 1 rounds; in each, every GPU sends one block of m/N bytes: (N-1)(alpha + m/(N beta))."),
        mistakes={
            1e3 * (n - 1) * (a + m / b): tr("Each round sends one BLOCK (m/N bytes), not the whole buffer."),
            1e3 * alpha_beta.pairwise_alltoall_time(m, n, b, 0.0): tr("Latency left out: each of the N - 1 rounds "
                                                                      "also costs alpha."),
            1e3 * alpha_beta.ring_allreduce_time(m, n, b, a): tr("That is an all-reduce (2(N-1) rounds); an "
                                                                 "all-to-all moves each block once."),
            1e3 * (a + m / b): tr("That is one message of the whole buffer: N - 1 partners need N - 1 rounds."),
            1e3 * alpha_beta.pairwise_alltoall_time(mib * 1e6, n, b, a):
                tr("That reads {mib} as {mb}: a MiB is 2^20 = 1,048,576 bytes, so m = {count} x 2^20 = "
                   "{exact} bytes, not {decimal}.", mib=f"{mib} MiB", mb=f"{mib} MB", count=mib, exact=f"{m:,}",
                   decimal=f"{mib * 10**6:,}"),
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
        name=tr("bytes read in the reduce-scatter"),
        unit="bytes",
        hint=tr("find worker 0's chunk with chunk_bounds(100, 3); it reads that chunk of each OTHER "
                "worker's row: (N - 1) x chunk x 4 bytes."),
        mistakes={
            even: tr("That is the even split (N-1)/N x n x 4. The toy's chunks start on multiples of "
                     "16 numbers: look at chunk_bounds(100, 3)."),
            chunk * g["itemsize"]: tr("That is worker 0's own chunk; it reads that chunk of the N - 1 "
                                      "other rows."),
            g["workers"] * chunk * g["itemsize"]: tr("Its own row is not read from another worker: "
                                                     "N - 1 rows, not N."),
            (g["n"] - chunk) * g["itemsize"]: tr("That is what it reads in the ALL-GATHER (the others' "
                                                 "chunks of the sum)."),
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
        t["sequential"]: tr("That is the step WITHOUT overlap: every all-reduce after the whole backward."),
        compute: tr("That is a perfect overlap, all communication hidden; but an all-reduce can only "
                    "start when its bucket is ready AND the previous all-reduce has finished."),
        compute + s["allreduce_ms"][-1]: tr("Only the last bucket after the backward? The link is still busy "
                                            "with an earlier bucket when the backward ends: follow "
                                            "done = max(ready, previous done) + all-reduce, bucket by bucket."),
        t["overlapped"] - s["update_ms"]: tr("The all-reduces are right; the update comes after the last one."),
    }
    return check(
        answer,
        t["overlapped"],
        name=tr("step time with overlap"),
        unit="ms",
        hint=tr("bucket ν is ready at forward + the backward of buckets 1..ν; its all-reduce ends at "
                "max(ready, the previous all-reduce's end) + its own time; the step ends after the "
                "last all-reduce and the update."),
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
        _stale_weights(w0, lr, 0, steps)[-1]: tr("That is SGD with FRESH gradients (delta = 0): each update "
                                                 "must use the weight of delta steps before."),
        _stale_weights(w0, lr, delay - 1, steps)[-1]: tr("That uses gradients one step less stale: {next} uses "
                                                         "{stale}, delta steps before w_t.", next="w_{t+1}",
                                                         stale="w_{t-delta}"),
        _stale_weights(w0, lr, delay, steps, start=0.0)[-1]: tr("Before the start the weight is w_0, not 0: the "
                                                                "first delta updates use the initial weight."),
        _stale_weights(w0, lr, delay, steps - 1)[-1]: tr("One update short: {weight} is the weight after {steps} "
                                                         "updates.", weight=f"w_{steps}", steps=steps),
        _stale_weights(w0, lr, delay, steps + 1)[-1]: tr("One update too many: {weight} is the weight after "
                                                         "{steps} updates.", weight=f"w_{steps}", steps=steps),
    }
    return check(
        answer,
        expected,
        atol=5e-3,
        name=f"w_{steps}",
        hint=tr("keep a list of the weights, starting with delta + 1 copies of w_0; each update appends "
                "last - lr * (the weight delta places before the last)."),
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
        name=tr("global variance"),
        hint=tr("add the counts, the sums and the sums of squares (the all-reduce), then "
                "mean = sum / count and variance = sum of squares / count - mean^2."),
        mistakes={
            mean_local: tr("That is the mean of the two shards' variances: the spread BETWEEN the shards "
                           "(their means differ) is missing."),
            weighted_local: tr("That weights the shards' variances by their counts, but still misses the "
                               "spread between the shard means."),
            _ex5_sample_variance(): tr("That divides by n - 1 = {less} (the sample variance, as np.var(..., ddof=1) "
                                       "or statistics.variance give it). Batch norm normalises with the variance "
                                       "of the batch itself, dividing by n = {n}: sum of squares / n - mean^2.",
                                       less=n - 1, n=n),
        },
    )


def _ex6_rms(alpha_us: float, beta_gb: float, m: np.ndarray, t: np.ndarray, n: int) -> float:
    """The rms of the relative errors of the times (alpha in µs, beta in GB/s) predict for the sweep."""
    predicted = alpha_beta.ring_allreduce_time(m, n, beta_gb * 1e9, alpha_us * 1e-6)
    return float(np.sqrt(np.mean((predicted / t - 1.0) ** 2)))


def _ex6_mistakes(fit: dict, m: np.ndarray, t: np.ndarray, n: int) -> dict:
    """The usual slips of the fit, computed from the same sweep: (alpha in µs, beta in GB/s) -> why."""
    a_us, b_gb = fit["alpha"] * 1e6, fit["beta"] / 1e9
    intercept_us, inverse_slope_gb = fit["intercept"] * 1e6, 1.0 / fit["slope"] / 1e9
    mistakes = {
        (b_gb, a_us): tr("Swapped: the answer is (α, β), the latency first (µs), then the bandwidth (GB/s)."),
        (a_us * 1e-6, b_gb): tr("That α is in seconds; the question asks for µs (x 10^6)."),
        (a_us, b_gb * 1e9): tr("That β is in bytes/s; the question asks for GB/s (/ 10^9)."),
        (a_us * 1e-6, b_gb * 1e9): tr("Those are seconds and bytes/s; the question asks for µs and GB/s."),
        (a_us, 8 * b_gb): tr("That β is in Gbit/s; the question asks for GB/s (a byte is 8 bits)."),
        (intercept_us, b_gb): tr("That α is the intercept a of t = a + b m itself. An all-reduce on N = {n} sends "
                                 "2(N-1) = {messages} messages one after the other: α = a / (2(N-1)).", n=n,
                                 messages=2 * (n - 1)),
    }
    if n != 2:  # with two workers 2(N-1)/N = 1: the slip changes nothing
        mistakes[(a_us, inverse_slope_gb)] = tr("That β is 1 / b. Each device sends 2(N-1)/N = {factor} bytes "
                                                "per byte of the buffer: β = 2(N-1)/N / b.",
                                                factor=f"{2 * (n - 1) / n:g}")
        mistakes[(intercept_us, inverse_slope_gb)] = tr("That is a and 1/b: the model's factors are missing, "
                                                        "α = a / (2(N-1)) and β = 2(N-1)/N / b.")
    slope, intercept = np.polyfit(m, t, 1)  # plain least squares of the times
    if intercept > 0 and slope > 0:
        mistakes[(intercept / (2 * (n - 1)) * 1e6, 2 * (n - 1) / n / slope / 1e9)] = tr(
            "That is the plain least-squares fit of the times: the largest messages decide it, and it misses the "
            "small ones by far. Weight every point by 1/t, so that each counts by its relative error.")
    return mistakes


@checker
def ex6_alpha_beta(answer, *, nbytes, seconds, devices) -> Result:
    """(α in µs, β in GB/s) of YOUR all-reduce: the ring's cost
    t = 2(N-1) α + 2(N-1)/N m / β fitted to your sweep (``nbytes``, ``seconds`` on ``devices``
    workers; :data:`EX6_SWEEP`).

    The expected values are :func:`course_lib.alpha_beta.fit_alpha_beta` of the sweep; any
    honest fit is right too (:data:`EX6_TOLERANCE`: judged by how well its times match
    yours). Named slips: swapped or wrong units, the intercept or 1/slope without the
    model's factors, the plain least-squares fit, a negative latency.
    """
    name = tr("(α in µs, β in GB/s)")
    if answer is None or answer is Ellipsis:
        return check(answer, (0.0, 0.0), name=name)
    fit = alpha_beta.fit_alpha_beta(nbytes, seconds, devices)  # your sweep (a sweep it cannot use: feedback)
    m, t, n = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float), int(devices)
    expected = (float(f"{fit['alpha'] * 1e6:.6g}"), float(f"{fit['beta'] / 1e9:.6g}"))
    tol, mistakes = EX6_TOLERANCE, _ex6_mistakes(fit, m, t, n)
    try:
        a_us, b_gb = (float(f"{float(v):.6g}") for v in _coerce(answer, expected))
    except Exception:  # not two numbers: check() says what it read
        a_us = b_gb = math.nan
    accept = {}
    if math.isfinite(a_us) and math.isfinite(b_gb) and b_gb > 0:
        answer = (a_us, b_gb)  # as plain numbers in the messages
        if a_us < 0:
            return Result(False, _wrong(name, f"({a_us:g}, {b_gb:g})") + " " + tr(
                "A negative latency: the line's intercept came out below zero, as a plain least-squares fit of the "
                "times often does (the largest messages decide it). Weight every point by 1/t; if the intercept is "
                "still negative, set it to 0 and fit the slope again."))
        rms = _ex6_rms(a_us, b_gb, m, t, n)
        slip = any(np.allclose(answer, key, rtol=tol["rtol"]) for key in mistakes)
        if rms <= tol["rms_factor"] * fit["relative_rms"] + tol["rms_slack"] and not slip:
            accept[answer] = tr("an honest fit: its times are off yours by {rms} rms, the least-squares "
                                "fit of the relative errors by {best}", rms=f"{rms:.0%}",
                                best=f"{fit['relative_rms']:.0%}")
    return check(
        answer,
        expected,
        name=name,
        rtol=tol["rtol"],
        accept=accept,
        mistakes=mistakes,
        hint=tr("fit the line t = a + b m with every point weighted by 1/t (np.polyfit(m, t, 1, w=1 / t) gives "
                "b, a); then α = a / (2(N-1)) and β = 2(N-1)/N / b; give α in µs and β in GB/s."),
    )
