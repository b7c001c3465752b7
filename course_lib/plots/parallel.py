"""Figures of chapter 05: data parallelism (数据并行).

* :func:`data_parallel_diagram` - one step drawn: split the batch, compute, all-reduce,
  update (with the reduce-scatter chunks of the shared-memory all-reduce);
* :func:`step_breakdown_figure` - measured time per step split into compute,
  communication and waiting, for several runs side by side;
* :func:`strong_weak_figure` - measured strong and weak scaling against Amdahl and
  Gustafson (built on :func:`course_lib.plots.scaling.measured_speedup_figure`);
* :func:`comm_dominance_figure` - the alpha-beta model from one machine to 1,024
  devices: ring all-reduce vs a parameter server, and where communication dominates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .. import comm, scaling
from .._validate import as_real, check_int, check_positive, check_real, check_type
from . import COLORS, log2_axis, new_figure, styled
from .scaling import measured_speedup_figure

__all__ = [
    "comm_dominance_figure",
    "data_parallel_diagram",
    "step_breakdown_figure",
    "strong_weak_figure",
]

_PHASE_COLORS = {"compute": COLORS[0], "communication": COLORS[1], "waiting": COLORS[4]}


# ------------------------------------------------------------------- diagram
def _box(ax, x, y, w, h, text, color, *, fontsize=8, alpha=0.18):
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.005,rounding_size=0.015",
                                linewidth=1.0, edgecolor=color, facecolor=color, alpha=alpha))
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.005,rounding_size=0.015",
                                linewidth=1.0, edgecolor=color, facecolor="none"))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="0.35"):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.0, shrinkA=0, shrinkB=0))


@styled
def data_parallel_diagram(workers: int = 3, batch_size: int = 12):
    """One data-parallel step with ``workers`` workers and a global batch of ``batch_size``.

    Left to right: the global batch is split into shards (sizes from
    :func:`course_lib.parallel.partition.shard_bounds`); every worker holds a full replica
    of the parameters and computes the SUM of its shard's gradients; the all-reduce
    adds them - in shared memory as a reduce-scatter (worker r adds chunk r of every
    gradient) and an all-gather (everyone reads every reduced chunk); every worker
    applies the same update, so the replicas stay identical.

    Examples
    --------
    >>> fig = data_parallel_diagram(3, 10)
    >>> fig.axes[0].get_title()
    'one data-parallel step: 3 workers, global batch 10'
    """
    from .._validate import check_int
    from ..parallel.partition import shard_bounds

    workers = check_int(workers, "workers", 1, 8)
    batch_size = check_int(batch_size, "batch_size", workers, 64)
    shards = shard_bounds(batch_size, workers)
    fig, ax = new_figure(size=(10.0, 1.5 + 0.85 * workers))
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.08, 1)
    ax.set_title(f"one data-parallel step: {workers} workers, global batch {batch_size}", fontsize=10)
    top, bottom = 0.86, 0.06
    row_h = (top - bottom) / workers
    # global batch as a column of samples, coloured by shard
    sample_h = (top - bottom) / batch_size
    for r, (lo, hi) in enumerate(shards):
        for i in range(lo, hi):
            y = top - (i + 1) * sample_h
            _box(ax, 0.02, y + 0.003, 0.06, sample_h - 0.006, "", COLORS[r % len(COLORS)], alpha=0.45)
    ax.text(0.05, top + 0.04, f"global batch\n{batch_size} samples", ha="center", va="bottom", fontsize=8)
    # per-worker compute boxes, gradients in chunks, the shared reduced buffer, update
    g_x, g_w = 0.45, 0.19  # gradient bars
    s_x, s_w = 0.69, 0.07  # shared reduced buffer (one chunk per worker, stacked)
    u_x, u_w = 0.80, 0.19  # update boxes
    for r, (lo, hi) in enumerate(shards):
        color = COLORS[r % len(COLORS)]
        y_mid = top - (r + 0.5) * row_h
        y_shard = top - (lo + hi) / 2 * sample_h
        _arrow(ax, (0.085, y_shard), (0.14, y_mid))
        _box(ax, 0.14, y_mid - row_h * 0.35, 0.25, row_h * 0.7,
             f"worker {r}: replica of W\nforward + backward on {hi - lo} samples\n"
             f"g{r} = Σ gradients of its shard", color, alpha=0.15)
        _arrow(ax, (0.395, y_mid), (g_x, y_mid))
        # its gradient as a bar of chunks; chunk c is added up by worker c
        for c in range(workers):
            x0 = g_x + g_w * c / workers
            _box(ax, x0 + 0.002, y_mid - row_h * 0.18, g_w / workers - 0.004, row_h * 0.36,
                 f"g{r}[{c}]" if workers <= 4 else "", COLORS[c % len(COLORS)],
                 alpha=0.55 if c == r else 0.12, fontsize=7)
            # reduce-scatter: every g_r[c] flows into chunk c of the shared sum
            y_sum = top - (c + 0.5) * row_h
            ax.plot([x0 + g_w / workers / 2, s_x], [y_mid - row_h * 0.18 if y_sum < y_mid else
                                                    y_mid + row_h * 0.18, y_sum],
                    color=COLORS[c % len(COLORS)], lw=0.6, alpha=0.5)
        # chunk r of the shared sum, reduced by worker r
        _box(ax, s_x, y_mid - row_h * 0.3, s_w, row_h * 0.6, f"Σ[{r}]\nby {r}", color,
             alpha=0.45, fontsize=7)
        # all-gather: every worker reads every chunk
        _arrow(ax, (s_x + s_w, y_mid), (u_x, y_mid))
        _box(ax, u_x, y_mid - row_h * 0.3, u_w, row_h * 0.6,
             "W ← W − (lr / B)·Σ\n(same update everywhere)", color, alpha=0.15)
    ax.text(g_x + g_w / 2 + 0.06, top + 0.04, "all-reduce: reduce-scatter (worker r adds chunk r\n"
            "of every g) + all-gather (everyone reads every Σ[r])", ha="center", va="bottom", fontsize=8)
    # the sum lives in ONE shared buffer that every worker reads whole (all-gather)
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((s_x - 0.012, bottom - 0.02), s_w + 0.024, top - bottom + 0.04,
                           facecolor="0.92", edgecolor="0.6", lw=0.8, ls="--", zorder=0))
    ax.text(s_x + s_w / 2, bottom - 0.035, "shared Σ: each worker\nreads all of it", ha="center",
            va="top", fontsize=7, color="0.3")
    ax.text(u_x + u_w / 2, top + 0.04, "update", ha="center", va="bottom", fontsize=8)
    ax.text(0.265, top + 0.04, "compute (in parallel)", ha="center", va="bottom", fontsize=8)
    return fig


# ------------------------------------------------------------------ breakdown
@styled
def step_breakdown_figure(results: Mapping[str, object], *, title: str = "time per step",
                          reference: str | None = None, skip: int = 1):
    """Horizontal stacked bars: median compute, communication and waiting per step.

    Parameters
    ----------
    results : mapping of label -> DataParallelResult
        The runs to compare (same model and global batch for a fair comparison).
    title : str
    reference : str, optional
        Label of the run that speedups are relative to (default: the first).
    skip : int
        Warm-up steps left out of the medians.

    Examples
    --------
    >>> from course_lib.parallel.data import train_serial
    >>> from course_lib.models import MLP
    >>> m = MLP((4, 8, 2)); x = np.ones((16, 4), np.float32); y = np.zeros(16, int)
    >>> fig = step_breakdown_figure({"serial": train_serial(m, x, y, batch_size=8, steps=3)})
    >>> fig.axes[0].get_xlabel()
    'milliseconds per step (median)'
    """
    check_type(results, "results", Mapping, "a mapping of label -> DataParallelResult")
    for label, result in results.items():
        if not callable(getattr(result, "breakdown", None)):
            raise TypeError(
                f"results[{label!r}] must be a run result with a breakdown() method "
                f"(DataParallelResult), got {type(result).__name__}"
            )
    check_type(title, "title", str, "a str")
    skip = check_int(skip, "skip", 0)
    if not results:
        raise ValueError("results must hold at least one run")
    labels = list(results)
    ref = labels[0] if reference is None else reference
    if ref not in results:
        raise ValueError(f"reference must be one of {labels}, got {ref!r}")
    parts = {lab: results[lab].breakdown(skip) for lab in labels}
    fig, ax = new_figure(size=(8.0, 0.9 + 0.55 * len(labels)))
    y = np.arange(len(labels))
    left = np.zeros(len(labels))
    for phase in ("compute", "communication", "waiting"):
        width = np.array([parts[lab][phase] for lab in labels]) * 1e3
        ax.barh(y, width, left=left, color=_PHASE_COLORS[phase], label=phase, height=0.6)
        left += width
    steps = np.array([parts[lab]["step"] for lab in labels]) * 1e3
    ax.plot(steps, y, "|", color="black", markersize=16, label="wall-clock step")
    ref_step = parts[ref]["step"]
    for i, lab in enumerate(labels):
        speedup = ref_step / parts[lab]["step"] if parts[lab]["step"] > 0 else float("nan")
        ax.text(max(steps[i], left[i]) * 1.02, i, f"{steps[i]:.3g} ms  (×{speedup:.2f})",
                va="center", fontsize=8)
    ax.set_yticks(y, labels)
    ax.set_ylim(len(labels) - 0.4, -0.6)
    ax.set_xlim(0, max(steps.max(), left.max()) * 1.35)
    ax.set_xlabel("milliseconds per step (median)")
    ax.set_title(f"{title} (×: speedup over '{ref}')", fontsize=10)
    ax.grid(False, axis="y")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.28 - 0.1 / len(labels)),
              ncol=4, frameon=False)
    return fig


# -------------------------------------------------------------- strong / weak
@styled
def strong_weak_figure(n: Sequence[float], strong_speedup: Sequence[float], weak_speedup: Sequence[float],
                       *, p_amdahl: float, p_gustafson: float, n_max: float | None = None):
    """Measured strong scaling (fixed global batch) against Amdahl's law and measured
    weak scaling (fixed batch per worker, scaled speedup) against Gustafson's law.

    Parameters
    ----------
    n : sequence of int
        Worker counts.
    strong_speedup, weak_speedup : sequence of float
        Measured speedups at ``n``; weak scaling uses the scaled speedup
        ``N * t_1 / t_N`` (N times the work in time ``t_N``).
    p_amdahl, p_gustafson : float
        Parallel fractions fitted to each (in [0, 1]); their laws are drawn.
    n_max : float, optional
        Extend the law curves to this many workers (default: the largest ``n``).

    Examples
    --------
    >>> fig = strong_weak_figure([1, 2], [1, 1.6], [1, 1.8], p_amdahl=0.75, p_gustafson=0.8)
    >>> [line.get_label() for line in fig.axes[0].get_lines()][1:]
    ['Amdahl fit, p = 0.750', 'strong: fixed global batch', 'Gustafson, p = 0.800', 'weak: fixed batch per worker (scaled)']
    """
    n_arr = as_real(n, "n")
    strong_speedup = as_real(strong_speedup, "strong_speedup")
    weak_speedup = as_real(weak_speedup, "weak_speedup")
    p_amdahl = check_real(p_amdahl, "p_amdahl", 0.0, 1.0)
    p_gustafson = check_real(p_gustafson, "p_gustafson", 0.0, 1.0)
    if n_max is not None:
        n_max = check_positive(n_max, "n_max")
    if n_arr.size == 0 or n_arr.shape != np.shape(strong_speedup) or n_arr.shape != np.shape(weak_speedup):
        raise ValueError("n, strong_speedup and weak_speedup must be non-empty and of the same length")
    fig = measured_speedup_figure(n_arr, strong_speedup, fit_p=p_amdahl,
                                  title="strong vs weak scaling, measured", label="strong: fixed global batch")
    ax = fig.axes[0]
    top = max(float(n_arr.max()), float(n_max or 0))
    grid = np.linspace(1, top, 200)
    ax.plot(grid, scaling.gustafson(p_gustafson, grid), color=COLORS[2], ls="--",
            label=f"Gustafson, p = {p_gustafson:.3f}")
    ax.plot(n_arr, weak_speedup, "s-", color=COLORS[3], label="weak: fixed batch per worker (scaled)")
    if n_max and n_max > n_arr.max():
        ax.plot(grid, grid, color="0.6", lw=1, ls=":")
        ax.plot(grid, scaling.amdahl(p_amdahl, grid), color=COLORS[1])
        ax.set_title(f"strong vs weak scaling: measured to N = {n_arr.max():g}, laws extended to {top:g}")
    ax.set_xlim(0.9, top * 1.05)
    ax.legend(fontsize=8, loc="upper left")
    return fig


# ------------------------------------------------------------ alpha-beta model
@styled
def comm_dominance_figure(devices: int, bandwidth_gbit: float, *, compute_ms: float,
                          gradient_mb: float, latency_us: float = 10.0, n_max: int = 1024):
    r"""Where communication dominates: the alpha-beta model from 1 to ``n_max`` devices.

    Strong scaling with a fixed global batch whose forward + backward takes
    ``compute_ms`` on one device. Left: per-step compute :math:`t_c/N` against the
    gradient exchange of a ring all-reduce and of one parameter server
    (:mod:`course_lib.comm`), with the device counts from which the exchange takes
    longer than the compute (:func:`course_lib.comm.communication_crossover`).
    Right: the resulting speedup, with the chosen ``devices`` marked.

    Parameters
    ----------
    devices : int
        Device count to mark, 1 .. n_max.
    bandwidth_gbit : float
        Link bandwidth in Gbit/s (10^9 bits/s), > 0.
    compute_ms : float
        Forward + backward of the global batch on ONE device, milliseconds, > 0.
    gradient_mb : float
        Gradient bytes / 10^6.
    latency_us : float
        Per-message latency, microseconds.

    Examples
    --------
    >>> fig = comm_dominance_figure(64, 10, compute_ms=100, gradient_mb=3.26)
    >>> [ax.get_xlabel() for ax in fig.axes]
    ['devices N', 'devices N']
    """
    from .._validate import check_int, check_positive
    from ..comm import communication_crossover

    n_max = check_int(n_max, "n_max", 2)
    devices = check_int(devices, "devices", 1, n_max)
    bw = check_positive(bandwidth_gbit, "bandwidth_gbit") * 1e9 / 8
    tc = check_positive(compute_ms, "compute_ms") * 1e-3
    m = check_positive(gradient_mb, "gradient_mb") * 1e6
    lat = check_positive(latency_us, "latency_us", allow_zero=True) * 1e-6
    ns = np.unique(np.round(np.geomspace(1, n_max, 200)))
    compute = tc / ns
    ring = comm.ring_allreduce_time(m, ns, bw, lat)
    ps = comm.parameter_server_time(m, ns, bw, lat)
    fig, (ax_t, ax_s) = new_figure(1, 2, size=(10.4, 4.0))
    ax_t.loglog(ns, compute * 1e3, color=COLORS[0], label="compute t_c / N")
    ax_t.loglog(ns[1:], ring[1:] * 1e3, color=COLORS[2], label="ring all-reduce")
    ax_t.loglog(ns, ps * 1e3, color=COLORS[1], ls="--", label="1 parameter server")
    for name, color in (("ring", COLORS[2]), ("ps", COLORS[1])):
        cross = communication_crossover(tc, m, bw, lat, algorithm=name)
        if cross <= n_max:
            ax_t.axvline(cross, color=color, lw=0.8, ls=":")
            ax_t.annotate(f"N = {cross}", (cross, tc / cross * 1e3), textcoords="offset points",
                          xytext=(4, 8), fontsize=8, color=color)
    ax_t.axvline(devices, color="0.3", lw=1.0)
    ax_t.set(xlabel="devices N", ylabel="milliseconds per step",
             title="per step (dotted: from here the exchange ≥ compute)")
    ax_t.title.set_fontsize(9)
    ax_t.legend(fontsize=8, loc="lower left")
    log2_axis(ax_t.xaxis, n_max)
    s_ring = comm.data_parallel_speedup(tc, ns, m, bw, lat, algorithm="ring")
    s_ps = comm.data_parallel_speedup(tc, ns, m, bw, lat, algorithm="ps")
    ax_s.loglog(ns, ns, color="0.6", lw=1, ls=":", label="ideal, S = N")
    ax_s.loglog(ns, s_ring, color=COLORS[2], label="ring all-reduce")
    ax_s.loglog(ns, s_ps, color=COLORS[1], ls="--", label="1 parameter server")
    now_ring = comm.data_parallel_speedup(tc, devices, m, bw, lat, algorithm="ring")
    now_ps = comm.data_parallel_speedup(tc, devices, m, bw, lat, algorithm="ps")
    share_ring = 1 - (tc / devices) / comm.data_parallel_step_time(tc, devices, m, bw, lat, algorithm="ring")
    share_ps = 1 - (tc / devices) / comm.data_parallel_step_time(tc, devices, m, bw, lat, algorithm="ps")
    ax_s.plot([devices], [now_ring], "o", color=COLORS[2])
    ax_s.plot([devices], [now_ps], "s", color=COLORS[1])
    ax_s.set(xlabel="devices N", ylabel="speedup S(N)",
             title=f"N = {devices}: communication is {share_ring:.0%} (ring) / {share_ps:.0%} (PS) of a step")
    ax_s.title.set_fontsize(9)
    ax_s.set_ylim(min(0.1, float(s_ps.min()) * 0.8), n_max * 1.3)
    ax_s.legend(fontsize=8, loc="upper left")
    log2_axis(ax_s.xaxis, n_max)
    fig.suptitle(f"{gradient_mb:g} MB of gradients, {bandwidth_gbit:g} Gbit/s links, "
                 f"{latency_us:g} µs latency, t_c = {compute_ms:.3g} ms", fontsize=10)
    return fig
