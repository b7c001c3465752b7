"""Exercises of notebook 07 (data parallelism).

Expected values come from :mod:`course_lib.alpha_beta`, :mod:`course_lib.scaling`,
:mod:`course_lib.cost` and the running example - never typed in. The givens of each
exercise are module constants, so the notebook can print them. Exercise 2 takes the
learner's own measurement: the pipe backend's run of section 4, whose serial fraction the
notebook does not print (section 3 prints e of the shared-memory runs).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import alpha_beta
from ..alpha_beta import communication_crossover
from ..cost import BERT_LARGE
from ..i18n import tr
from ..models import MLP
from ..parallel.partition import shard_bounds
from ..scaling import karp_flatt
from . import Result, _fmt, _number, check, check_count, checker, shown_tolerance

__all__ = [
    "EX2_SHOWN_DECIMALS",
    "EX3_PS",
    "DIGITS_MODEL",
    "EX4_SETUP",
    "RUNNING_EXAMPLE",
    "ex1_mean_of_means",
    "ex2_karp_flatt",
    "ex3_ps_crossover",
    "ex4_ring_allreduce_ms",
]

#: The model of the measurements and the benchmark: MLP 784-1024-10, float32.
RUNNING_EXAMPLE = MLP((784, 1024, 10))
#: The digits model of sections 1-2 (the README's running example, 64-64-10): the other model a
#: learner may take for "the running example" in exercise 3.
DIGITS_MODEL = MLP((64, 64, 10))

#: Exercise 2: decimals of a speedup S(N) as the notebook prints it, of the Karp-Flatt e (as in
#: ``ScalingMeasurement.table``) and of the step times in ms (section 4's print): an answer
#: computed from the rounded speedup or from the printed step times is right too, and so is
#: one rounded to 2 decimals (0.72, or 72%).
EX2_SHOWN_DECIMALS = {"speedup": 2, "karp_flatt": 3, "step_ms": 1, "answer": 2}

#: Exercise 3 (stated in the notebook's question): the global batch takes 50 ms on one device,
#: 10 Gbit/s links, and the course's one network latency (``alpha_beta.NETWORK_LATENCY``, 10 µs);
#: the gradients are those of the measurements' model, named with its size in the question
#: (issue 44 item 1: "the running example's" let a learner take the 64-64-10 digits model).
EX3_PS = {"compute_ms": 50.0, "bandwidth_gbit": 10.0, "latency_us": alpha_beta.NETWORK_LATENCY * 1e6,
          "model": "MLP 784-1024-10", "params": RUNNING_EXAMPLE.n_params,
          "bytes_per_param": RUNNING_EXAMPLE.dtype.itemsize}

#: Exercise 4: BERT-Large's 340 million parameters (the BERT paper's count, ``BERT_LARGE.params``),
#: 16-bit gradients (mixed precision, 2 bytes per parameter), ring all-reduce over the 16 GPUs
#: of one DGX-2H, 150 GB/s per direction (half of the V100's 300 GB/s NVLink total) and the
#: course's one NVLink latency (``alpha_beta.NVLINK_LATENCY``, 5 µs per message). (Section 5's figure
#: starts from float32 gradients.)
EX4_SETUP = {"params": BERT_LARGE.params, "bytes_per_param": 2, "devices": 16, "bandwidth": 150e9,
             "latency": alpha_beta.NVLINK_LATENCY}
#: Parameter counts a learner may take for BERT-Large instead of the question's (checkpoints
#: and model cards give 330 M to 350 M): their answers get a word on the count.
_EX4_OTHER_COUNTS = (330e6, 335e6, 345e6, 350e6)


def ex1_mean_of_means(answer) -> Result:
    """True or False: with shards of 4, 3 and 3 samples, averaging the three shard MEAN
    gradients gives the full-batch mean gradient."""
    model = MLP((6, 5, 3))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 6)).astype(np.float64)
    y = rng.integers(0, 3, 10)
    params = model.init_params(0).astype(np.float64)
    model64 = MLP((6, 5, 3), dtype=np.float64)
    _, full = model64.loss_and_grad(params, x, y)
    means = [model64.loss_and_grad(params, x[lo:hi], y[lo:hi])[1] for lo, hi in shard_bounds(10, 3)]
    expected = bool(np.allclose(np.mean(means, axis=0), full, rtol=1e-9, atol=1e-12))
    return check(
        answer,
        expected,
        name=tr("mean of shard means == full-batch mean"),
        hint=tr("the 4-sample shard's mean would count each of its samples 1/12, the others 1/9; "
                "a sum over samples splits exactly, a mean over unequal shards does not."),
    )


@checker
def ex2_karp_flatt(answer, *, speedup: float, workers: int, step_seconds=None) -> Result:
    """Karp-Flatt serial fraction of YOUR measurement: speedup ``speedup`` with ``workers``.

    The notebook passes the speedup of the pipe backend's run (section 4) over the serial
    step, whose e it does not print, and the two step times ``step_seconds`` = (serial,
    pipes) that section 4 prints in ms with one decimal: an e computed by hand from those
    printed times is right (any speedup the rounded times allow), and so is e rounded to
    2 decimals (``0.72``, ``"72%"``).
    """
    if workers < 2:
        return Result(False, tr("… this machine has one core: the Karp-Flatt metric needs N > 1 "
                                "(use speedup=1.6, workers=2 to practise)."))
    expected = karp_flatt(speedup, workers)
    name = tr("serial fraction e at N = {workers}", workers=workers)
    shown = round(float(speedup), EX2_SHOWN_DECIMALS["speedup"])  # S(N) as the table prints it
    accept = {}
    if shown > 0 and shown != speedup:
        accept[karp_flatt(shown, workers)] = tr("from S = {speedup} as printed",
                                                speedup=f"{shown:.{EX2_SHOWN_DECIMALS['speedup']}f}")
    result = check(
        answer,
        expected,
        rtol=0,
        atol=shown_tolerance(EX2_SHOWN_DECIMALS["karp_flatt"]),
        accept=accept,
        name=name,
        hint=tr("e = (1/S - 1/N) / (1 - 1/N) with the measured S of the pipe run (its step time over the "
                "serial one, as section 4 prints them) and its N workers."),
        mistakes={1 - speedup / workers: tr("That is 1 - efficiency, not the Karp-Flatt metric.")},
    )
    if result.correct:
        return result
    x = _number(answer)
    if x is None:
        return result
    lo, hi = _karp_flatt_window(expected, workers, step_seconds, _decimals(x))
    if lo <= x <= hi:
        return Result(True, tr("✓ Correct: {name} = {value} (e = {exact} from the unrounded times; yours is "
                               "within what the printed step times and 2 decimals allow).", name=name,
                               value=_fmt(x), exact=f"{expected:.4f}"))
    return result


def _decimals(x: float) -> int:
    """Decimals of ``x`` as written (0.72: 2; 0.7165: 4), at most 15."""
    text = f"{x:.15g}"
    if "e" in text:
        return 15
    return len(text.split(".")[1]) if "." in text else 0


def _karp_flatt_window(expected: float, workers: int, step_seconds, decimals: int) -> tuple[float, float]:
    """The e values an honest hand computation reaches: from the step times as printed
    (rounded to ``EX2_SHOWN_DECIMALS["step_ms"]`` decimals of a ms), then rounded to the
    answer's ``decimals`` (no fewer than ``EX2_SHOWN_DECIMALS["answer"]``)."""
    lo = hi = expected
    if step_seconds is not None:
        t_serial, t_pipe = (round(float(t) * 1e3, EX2_SHOWN_DECIMALS["step_ms"]) for t in step_seconds)
        half = shown_tolerance(EX2_SHOWN_DECIMALS["step_ms"])
        if t_pipe - half > 0 and t_serial - half > 0:
            s_min, s_max = (t_serial - half) / (t_pipe + half), (t_serial + half) / (t_pipe - half)
            bounds = (karp_flatt(s_min, workers), karp_flatt(s_max, workers))
            lo, hi = min(lo, *bounds), max(hi, *bounds)
    rounding = shown_tolerance(min(15, max(EX2_SHOWN_DECIMALS["answer"], decimals)))
    return lo - rounding, hi + rounding


@functools.cache
def _ex3_crossovers(params: int | None = None, bytes_per_second: float | None = None) -> tuple[float, float]:
    """(parameter server, ring) crossovers of ``EX3_PS`` (searched once: a million N), for
    its model or one of ``params`` parameters, at its link or at ``bytes_per_second``."""
    g = EX3_PS
    nbytes = (params or g["params"]) * g["bytes_per_param"]
    beta = bytes_per_second or g["bandwidth_gbit"] * 1e9 / 8
    args = (g["compute_ms"] * 1e-3, nbytes, beta, g["latency_us"] * 1e-6)
    return communication_crossover(*args, algorithm="ps"), communication_crossover(*args, algorithm="ring")


def ex3_ps_crossover(answer) -> Result:
    """Fewest devices at which ONE parameter server exchanges at least as long as the
    devices compute (``EX3_PS``: t_c = 50 ms for the global batch on one device, 10 Gbit/s
    links, 10 µs latency; the gradients of the MLP 784-1024-10, 814,090 float32 parameters).

    The answer for the other model, the 64-64-10 digits model of sections 1-2, is named as
    such, and so is every message: it says which model the checker assumed."""
    g = EX3_PS
    expected, ring = _ex3_crossovers()
    digits_ps, digits_ring = _ex3_crossovers(params=DIGITS_MODEL.n_params)
    digits = tr("That is the answer for the MLP 64-64-10 ({digits} parameters), the digits model of sections 1-2. "
                "This exercise's gradients are the {model}, {params} float32 parameters = {size} "
                "(ex.EX3_PS['params']): redo it with that m.", digits=f"{DIGITS_MODEL.n_params:,}",
                model=g["model"], params=f"{g['params']:,}",
                size=f"{g['params'] * g['bytes_per_param'] / 1e6:.2f} MB")
    return check_count(
        answer,
        expected,
        name=tr("devices where the parameter server dominates ({model})", model=g["model"]),
        unit="devices",
        hint=tr("m = {size} bytes x {params} parameters of the {model}; find the smallest N with "
                "2 (N m / β + α) >= t_c / N (course_lib.alpha_beta.communication_crossover does the search).",
                size=g["bytes_per_param"], params=f"{g['params']:,}", model=g["model"]),
        mistakes={
            ring: tr("That is the crossover of the ring all-reduce."),
            digits_ps: digits,
            digits_ring: digits + " " + tr("(And that is the ring's crossover; the question asks for the parameter "
                                           "server.)"),
            _ex3_crossovers(bytes_per_second=g["bandwidth_gbit"] * 1e9)[0]:
                tr("That reads {gbit} as {gbyte}: a byte is 8 bits, so β = {beta}.",
                   gbit=f"{g['bandwidth_gbit']:g} Gbit/s", gbyte=f"{g['bandwidth_gbit']:g} GB/s",
                   beta=f"{g['bandwidth_gbit'] / 8:g} GB/s"),
        },
    )


def _ex4_expected(latency: float | None = None, bytes_per_param: int | None = None,
                  params: float | None = None) -> float:
    s = EX4_SETUP
    nbytes = (bytes_per_param or s["bytes_per_param"]) * (params or s["params"])
    alpha = s["latency"] if latency is None else latency
    return 1e3 * alpha_beta.ring_allreduce_time(nbytes, s["devices"], s["bandwidth"], alpha)


def ex4_ring_allreduce_ms(answer) -> Result:
    """Milliseconds of a ring all-reduce of BERT-Large's 16-bit gradients (see ``EX4_SETUP``)."""
    s = EX4_SETUP
    expected = _ex4_expected()
    nbytes = s["bytes_per_param"] * s["params"]
    counts = {_ex4_expected(params=p): tr("That takes BERT-Large as {count} parameters; the question gives "
                                          "{given} (ex.EX4_SETUP['params']). The rest of your computation may "
                                          "be right.", count=f"{p / 1e6:g} M", given=f"{s['params'] / 1e6:g} M")
              for p in _EX4_OTHER_COUNTS}
    return check(
        answer,
        expected,
        rtol=1e-2,  # 8.6 or 8.7 ms will do; 8.5 ms (no latency) is 1.7% short
        name=tr("ring all-reduce time"),
        unit="ms",
        hint=tr("T = 2 (N-1)/N x bytes / bandwidth + 2 (N-1) x latency, bytes = {size} x {count} parameters.",
                size=s["bytes_per_param"], count=f"{s['params'] / 1e6:g} M"),
        mistakes={
            1e3 * nbytes / s["bandwidth"]: tr("That sends the buffer once. A ring all-reduce is a "
                                              "reduce-scatter and an all-gather: 2 (N-1)/N x bytes / bandwidth."),
            _ex4_expected() / 2: tr("That is half: a reduce-scatter only. Add the all-gather."),
            _ex4_expected(latency=0.0): tr("Latency left out: each of the 2 (N-1) steps also waits {latency}, "
                                           "2 (N-1) x latency in all.", latency=f"{s['latency'] * 1e6:g} µs"),
            _ex4_expected(bytes_per_param=4): tr("That counts float32 gradients, 4 bytes per parameter; these are "
                                                 "{bits}-bit: {size} bytes.", bits=8 * s["bytes_per_param"],
                                                 size=s["bytes_per_param"]),
            **counts,  # the nearest known mistake wins: 335 M with latency is not "latency left out"
        },
    )
