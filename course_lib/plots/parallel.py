"""Figures of data parallelism (数据并行).

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
from typing import TYPE_CHECKING

import numpy as np

from .. import alpha_beta, scaling
from .._validate import as_real, check_int, check_positive, check_real, check_type
from ..i18n import N_, tr
from ..memory import format_bytes
from . import COLORS, log2_axis, new_figure, styled
from .scaling import measured_speedup_figure

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "comm_dominance_figure",
    "data_parallel_diagram",
    "step_breakdown_figure",
    "strong_weak_figure",
]

_PHASE_COLORS = {"compute": COLORS[0], "communication": COLORS[1], "waiting": COLORS[4]}
#: The legend text of each phase (translated where drawn).
_PHASE_LABELS = {"compute": N_("compute"), "communication": N_("communication"), "waiting": N_("waiting")}


# ------------------------------------------------------------------- diagram
def _box(ax, x, y, w, h, text, color, *, alpha=0.18, lw=1.5, **text_kw):
    """A rounded box filled with ``color`` at ``alpha`` and outlined in it, ``text`` centred."""
    from matplotlib.patches import FancyBboxPatch

    style = "round,pad=0.005,rounding_size=0.015"
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, linewidth=0, facecolor=color, alpha=alpha))
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, linewidth=lw, edgecolor=color, facecolor="none"))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", **text_kw)


def _arrow(ax, start, end, color="0.35", lw=1.5):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=lw, shrinkA=0, shrinkB=0, mutation_scale=14))


def _diagram_axes(height: float, title: str) -> tuple[Figure, Axes]:
    """``fig, ax`` of a diagram: 9.6 inches wide and ``height`` high, one axes titled ``title``,
    without frame or ticks, its coordinates running over [0, 1] in x and y."""
    fig, ax = new_figure(size=(9.6, height))
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    return fig, ax


@styled
def data_parallel_diagram(workers: int = 3, batch_size: int = 12):
    """One data-parallel step with ``workers`` workers and a global batch of ``batch_size``.

    Left to right: the global batch is split into shards (sizes from
    :func:`course_lib.parallel.partition.shard_bounds`); every worker ``j`` holds a full
    replica of the weights ``w`` and computes ``g_j``, the SUM of its shard's gradients;
    each sends ``g_j`` into ONE all-reduce (in shared memory: worker ``j`` adds up chunk
    ``j`` of every gradient, then every worker reads the whole sum) and gets
    ``sum_j g_j`` back; every worker applies the same update, so the replicas stay
    identical. One arrow in and one out per worker: no crossing lines.

    Examples
    --------
    >>> fig = data_parallel_diagram(3, 10)
    >>> fig.axes[0].get_title()
    'one data-parallel step: 3 workers, global batch B = 10'
    >>> for text in fig.axes[0].texts:  # one box per worker, its shard from shard_bounds(10, 3)
    ...     if text.get_text().startswith("worker"):
    ...         print(text.get_text().splitlines()[1])
    forward + backward on 4 samples
    forward + backward on 3 samples
    forward + backward on 3 samples
    """
    from .._validate import check_int
    from ..parallel.partition import shard_bounds

    workers = check_int(workers, "workers", 1, 8)
    batch_size = check_int(batch_size, "batch_size", workers, 64)
    shards = shard_bounds(batch_size, workers)
    height = 1.7 + 0.95 * workers
    fig, ax = _diagram_axes(height, tr("one data-parallel step: {workers} workers, global batch B = {batch}",
                                       workers=workers, batch=batch_size))
    top, bottom = 1 - 0.5 / (height - 0.6), 0.02  # room for the column headings
    row_h = (top - bottom) / workers
    sample_h = (top - bottom) / batch_size
    for j, (lo, hi) in enumerate(shards):  # the global batch, one square per sample, coloured by shard
        for i in range(lo, hi):
            _box(ax, 0.01, top - (i + 1) * sample_h + 0.004, 0.045, sample_h - 0.008, "", COLORS[j % len(COLORS)],
                 alpha=0.5, lw=1.0)
    r_x, r_w = 0.50, 0.20  # the all-reduce, one box as high as all workers
    _box(ax, r_x, bottom, r_w, top - bottom,
         tr("all-reduce\n$\\Sigma_j\\,g_j$\n\nin shared memory:\nworker j adds up\nchunk j of every g,\nthen each reads\n"
            "the whole sum"),
         "0.3", alpha=0.08, linespacing=1.25)
    for j, (lo, hi) in enumerate(shards):
        color = COLORS[j % len(COLORS)]
        y = top - (j + 0.5) * row_h
        h = min(row_h * 0.72, 0.3)
        _arrow(ax, (0.06, top - (lo + hi) / 2 * sample_h), (0.09, y))
        _box(ax, 0.09, y - h / 2, 0.33, h,
             tr("worker {worker}: replica of w\nforward + backward on {samples} samples\n{symbol} = Σ gradients of its shard",
                worker=j, samples=hi - lo, symbol=f"$g_{j}$"), color)
        _arrow(ax, (0.42, y), (r_x, y), color=color, lw=2.5)
        ax.text((0.42 + r_x) / 2, y + 0.01, f"$g_{j}$", ha="center", va="bottom", color="0.1")
        _arrow(ax, (r_x + r_w, y), (0.77, y), color=color, lw=2.5)
        ax.text((r_x + r_w + 0.77) / 2, y + 0.01, "$\\Sigma_j\\,g_j$", ha="center", va="bottom", color="0.1")
        _box(ax, 0.77, y - h / 2, 0.225, h, tr("$w \\leftarrow w - (\\gamma/B)\\,\\Sigma_j\\,g_j$\nsame update"), color)
    for x, text in ((0.03, tr("batch")), (0.255, tr("compute, in parallel")), (0.6, tr("exchange")), (0.8825, tr("update"))):
        ax.text(x, top + 0.03, text, ha="center", va="bottom", color="0.2", weight="bold")
    return fig


# ------------------------------------------------------------------ breakdown
@styled
def step_breakdown_figure(results: Mapping[str, object], *, title: str = N_("time per step"),
                          reference: str | None = None, skip: int = 1):
    """Horizontal stacked bars: median compute, communication and waiting per step.

    Parameters
    ----------
    results : mapping of label -> course_lib.models.TrainResult
        The runs to compare (same model and global batch for a fair comparison).
    title : str
        Shown in the current language where the course's catalogue translates it (as the default).
    reference : str, optional
        Label of the run that speedups are relative to (default: the first).
    skip : int
        Warm-up steps left out of the medians.

    Examples
    --------
    >>> from course_lib.parallel.train.reference import train_serial
    >>> from course_lib.models import MLP
    >>> m = MLP((4, 8, 2)); x = np.ones((16, 4), np.float32); y = np.zeros(16, int)
    >>> fig = step_breakdown_figure({"serial": train_serial(m, x, y, batch_size=8, steps=3)})
    >>> fig.axes[0].get_xlabel()
    'milliseconds per step (median)'
    """
    check_type(results, "results", Mapping, "a mapping of label -> TrainResult")
    for label, result in results.items():
        if not callable(getattr(result, "breakdown", None)):
            raise TypeError(
                f"results[{label!r}] must be a run result with a breakdown() method "
                f"(TrainResult), got {type(result).__name__}"
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
    fig, ax = new_figure(size=(8.4, 1.6 + 0.55 * len(labels)))
    y = np.arange(len(labels))
    left = np.zeros(len(labels))
    for phase in ("compute", "communication", "waiting"):
        width = np.array([parts[lab][phase] for lab in labels]) * 1e3
        ax.barh(y, width, left=left, color=_PHASE_COLORS[phase], label=tr(_PHASE_LABELS[phase]), height=0.6)
        left += width
    steps = np.array([parts[lab]["step"] for lab in labels]) * 1e3
    ax.plot(steps, y, "|", color="black", markersize=16, label=tr("wall-clock step"))
    ref_step = parts[ref]["step"]
    for i, lab in enumerate(labels):
        speedup = ref_step / parts[lab]["step"] if parts[lab]["step"] > 0 else float("nan")
        ax.text(max(steps[i], left[i]) * 1.02, i, f"{steps[i]:.3g} ms  (×{speedup:.2f})", va="center")
    ax.set_yticks(y, labels)
    ax.set_ylim(len(labels) - 0.4, -0.6)
    ax.set_xlim(0, max(steps.max(), left.max()) * 1.4)
    ax.set_xlabel(tr("milliseconds per step (median)"))
    ax.set_title(tr("{title} (×: speedup over '{reference}')", title=tr(title), reference=ref))
    ax.grid(False, axis="y")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=4, frameon=False)
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
    >>> [line.get_label() for line in fig.axes[0].get_lines()][-2:]
    ['Gustafson, p = 0.800', 'weak: fixed batch per worker (scaled)']
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
    # the undecorated function: this one's @styled audits the finished figure
    base = getattr(measured_speedup_figure, "__wrapped__", measured_speedup_figure)
    fig = base(n_arr, strong_speedup, fit_p=p_amdahl, title=N_("strong vs weak scaling, measured"),
               label=N_("strong: fixed global batch"))  # (translated there)
    fig.set_size_inches(8.6, 4.8)
    ax = fig.axes[0]
    for legend in [*fig.legends, ax.get_legend()]:
        if legend is not None:
            legend.remove()
    top = max(float(n_arr.max()), float(n_max or 0))
    log = ax.get_xscale() == "log"
    grid = np.geomspace(1, top, 200) if log else np.linspace(1, top, 200)
    for line in ax.get_lines():  # the ideal line and Amdahl's law, drawn to N = top
        if line.get_gid() == "ideal":
            line.set_data(grid, grid)
        elif line.get_gid() == "amdahl":
            line.set_data(grid, scaling.amdahl(p_amdahl, grid))
    ax.plot(grid, scaling.gustafson(p_gustafson, grid), color=COLORS[2], ls="-.",
            label=tr("Gustafson, p = {p}", p=f"{p_gustafson:.3f}"))
    ax.plot(n_arr, weak_speedup, "s-", color=COLORS[3], label=tr("weak: fixed batch per worker (scaled)"))
    if top > n_arr.max():
        ax.set_title(tr("strong vs weak scaling: measured to N = {measured}, laws extended to {extended}",
                        measured=f"{n_arr.max():g}", extended=f"{top:g}"))
    s_hi = max(top, float(np.max(strong_speedup)), float(np.max(weak_speedup)))
    if log:
        log2_axis(ax.xaxis, top)
        log2_axis(ax.yaxis, s_hi)
        ax.set_xlim(1 / 1.15, top * 1.15)
        ax.set_ylim(ax.get_ylim()[0], s_hi * 1.15)
    else:
        ax.set_xlim(0.9, top * 1.05)
        ax.set_ylim(0, s_hi * 1.05)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2, frameon=False)
    return fig


# ------------------------------------------------------------ alpha-beta model
@styled
def comm_dominance_figure(devices: int, bandwidth_gbit: float, *, compute_ms: float,
                          gradient_mb: float, latency_us: float = 10.0, n_max: int = 1024):
    r"""Where communication dominates: the alpha-beta model from 1 to ``n_max`` devices.

    Strong scaling with a fixed global batch whose forward + backward takes
    ``compute_ms`` on one device. Left: per-step compute :math:`t_c/N` against the
    gradient exchange of a ring all-reduce and of one parameter server
    (:mod:`course_lib.alpha_beta`), with the device counts from which the exchange takes
    longer than the compute (:func:`course_lib.alpha_beta.communication_crossover`).
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
    from matplotlib.ticker import NullLocator

    from .._validate import check_int, check_positive
    from ..alpha_beta import communication_crossover

    n_max = check_int(n_max, "n_max", 2)
    devices = check_int(devices, "devices", 1, n_max)
    bw = check_positive(bandwidth_gbit, "bandwidth_gbit") * 1e9 / 8
    tc = check_positive(compute_ms, "compute_ms") * 1e-3
    m = check_positive(gradient_mb, "gradient_mb") * 1e6
    lat = check_positive(latency_us, "latency_us", allow_zero=True) * 1e-6
    ns = np.unique(np.round(np.geomspace(1, n_max, 200)))
    compute = tc / ns
    ring = alpha_beta.ring_allreduce_time(m, ns, bw, lat)
    ps = alpha_beta.parameter_server_time(m, ns, bw, lat)
    from matplotlib.lines import Line2D

    fig, (ax_t, ax_s) = new_figure(1, 2, size=(9.6, 4.6))
    ax_t.loglog(ns, compute * 1e3, color=COLORS[0], label=tr("compute $t_c / N$"))
    ax_t.loglog(ns[1:], ring[1:] * 1e3, color=COLORS[2], label=tr("ring all-reduce"))
    ax_t.loglog(ns[1:], ps[1:] * 1e3, color=COLORS[1], ls="--", label=tr("1 parameter server"))  # N = 1: no exchange
    marker = dict(marker="o", mfc="white", ms=10, mew=2.0, ls="none")
    found = []
    for name, color in (("ring", COLORS[2]), ("ps", COLORS[1])):
        cross = communication_crossover(tc, m, bw, lat, algorithm=name, n_max=n_max)  # inf beyond the axis
        found.append(f"N = {cross}" if cross <= n_max else f"N > {n_max}")
        if cross <= n_max:  # the point where the exchange overtakes the compute
            ax_t.axvline(cross, color=color, lw=0.8, ls=":")
            ax_t.plot([cross], [tc / cross * 1e3], color=color, zorder=3, **marker)
    ax_t.axvline(devices, color="0.3", lw=1.2)
    ax_t.set(xlabel=tr("devices N"), ylabel=tr("milliseconds per step"),
             title=tr("exchange ≥ compute from\n{ring} (ring), {ps} (PS)", ring=found[0], ps=found[1]))
    log2_axis(ax_t.xaxis, n_max)
    s_ring = alpha_beta.data_parallel_speedup(tc, ns, m, bw, lat, algorithm="ring")
    s_ps = alpha_beta.data_parallel_speedup(tc, ns, m, bw, lat, algorithm="ps")
    ax_s.loglog(ns, ns, color="0.5", lw=1.2, ls=":", label=tr("ideal, S = N"))
    ax_s.loglog(ns, s_ring, color=COLORS[2])
    ax_s.loglog(ns, s_ps, color=COLORS[1], ls="--")
    now_ring = alpha_beta.data_parallel_speedup(tc, devices, m, bw, lat, algorithm="ring")
    now_ps = alpha_beta.data_parallel_speedup(tc, devices, m, bw, lat, algorithm="ps")
    share_ring = 1 - (tc / devices) / alpha_beta.data_parallel_step_time(tc, devices, m, bw, lat, algorithm="ring")
    share_ps = 1 - (tc / devices) / alpha_beta.data_parallel_step_time(tc, devices, m, bw, lat, algorithm="ps")
    ax_s.axvline(devices, color="0.3", lw=1.2)
    ax_s.plot([devices], [now_ring], "o", color=COLORS[2], ms=8, zorder=3)
    ax_s.plot([devices], [now_ps], "s", color=COLORS[1], ms=8, zorder=3)
    ax_s.set(xlabel=tr("devices N"), ylabel=tr("speedup S(N)"),
             title=tr("N = {devices}: communication is {ring} (ring)\nand {ps} (PS) of a step", devices=devices,
                      ring=f"{share_ring:.0%}", ps=f"{share_ps:.0%}"))
    ax_s.set_ylim(min(0.1, float(s_ps.min()) * 0.8), n_max * 1.3)
    log2_axis(ax_s.xaxis, n_max)
    for ax in (ax_t, ax_s):  # no minor ticks: they are most of a redraw's cost
        ax.yaxis.set_minor_locator(NullLocator())
    handles = [*ax_t.get_lines()[:3], ax_s.get_lines()[0],
               Line2D([], [], color="0.3", label=tr("exchange = compute"), **marker),
               Line2D([], [], color="0.3", lw=1.2, label=tr("N = {devices} (slider)", devices=devices))]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
    fig.suptitle(tr("m = {size} of gradients, links of β = {bandwidth}, α = {latency}, $t_c$ = {compute}",
                    size=format_bytes(m), bandwidth=f"{bandwidth_gbit:g} Gbit/s", latency=f"{latency_us:g} µs",
                    compute=f"{compute_ms:.3g} ms"))
    return fig
