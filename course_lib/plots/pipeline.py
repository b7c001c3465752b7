"""Figures of chapter 06: pipeline timelines (Gantt charts), bubbles, hybrid grids."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._validate import as_real, check_int, check_positive, check_range, check_sequence, check_type
from ..parallel import hybrid, pipeline_schedule
from . import COLORS, log2_axis, new_figure, styled

__all__ = [
    "gantt_figure",
    "schedule_figure",
    "bubble_figure",
    "hybrid_configs_figure",
    "hybrid_best_figure",
    "hybrid_explorer_figure",
]

_KIND_COLOR = {"F": COLORS[0], "B": COLORS[1], "A": COLORS[3], "U": "0.55"}
_KIND_NAME = {"F": "forward", "B": "backward", "A": "all-reduce", "U": "update"}
_SCHEDULE_NAME = {"gpipe": "GPipe", "1f1b": "1F1B"}


def _draw_gantt(ax, timeline, scale: float, labels: bool) -> None:
    s_count = timeline.n_rows
    span = max((op.end for op in timeline.ops), default=0.0) * scale
    for kind in ("F", "B", "A", "U"):
        ops = [op for op in timeline.ops if op.kind == kind]
        for s in range(s_count):
            bars = [(op.start * scale, op.duration * scale) for op in ops if timeline.row(op) == s]
            if bars:
                ax.broken_barh(
                    bars, (s - 0.4, 0.8), facecolors=_KIND_COLOR[kind], edgecolor="white",
                    linewidth=0.5, label=f"{_KIND_NAME[kind]}, stage {s}",
                )
        if labels:
            for op in ops:
                if op.kind in "FB" and span > 0 and op.duration * scale > span / 60:
                    ax.text(
                        (op.start + op.duration / 2) * scale, timeline.row(op), str(op.micro),
                        ha="center", va="center", fontsize=7, color="white",
                    )
    if timeline.replicas == 1:
        names = [f"stage {s}" for s in range(s_count)]
    else:
        names = [f"replica {r // timeline.n_stages}, stage {r % timeline.n_stages}" for r in range(s_count)]
    ax.set_yticks(range(s_count), names)
    ax.set_ylim(s_count - 0.5, -0.5)
    ax.grid(True, axis="x", alpha=0.3)
    ax.grid(False, axis="y")
    # one legend entry per kind present
    handles, names = [], []
    from matplotlib.patches import Patch

    for kind in ("F", "B", "A", "U"):
        if any(op.kind == kind for op in timeline.ops):
            handles.append(Patch(color=_KIND_COLOR[kind]))
            names.append(_KIND_NAME[kind])
    ax.legend(handles, names, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


@styled
def gantt_figure(timeline, *, step: int | None = None, title: str | None = None, labels: bool = True):
    """Gantt chart (甘特图) of a pipeline timeline, measured or simulated.

    One row per stage; blue bars are forwards, orange backwards, grey updates, each
    labelled with its micro-batch. The title compares the idle share with the formula
    ``(N_p-1)/(M+N_p-1)``.

    Parameters
    ----------
    timeline : course_lib.parallel.pipeline_schedule.Timeline
    step : int, optional
        Draw only this step (default: the first step of a measured run, everything of
        a simulated one).
    title : str, optional
    labels : bool
        Write the micro-batch index into each bar.
    """
    check_type(timeline, "timeline", pipeline_schedule.Timeline, "a Timeline")
    if title is not None:
        check_type(title, "title", str, "a str")
    if step is None and timeline.source == "measured" and len(timeline.steps) > 1:
        step = timeline.steps[0]
    tl = timeline.step(step) if step is not None else timeline
    measured = tl.source == "measured"
    scale = 1e3 if measured else 1.0
    fig, ax = new_figure(size=(9.0, 1.0 + 0.55 * tl.n_rows + 0.6))
    _draw_gantt(ax, tl, scale, labels)
    formula = pipeline_schedule.bubble_fraction(tl.n_stages, tl.n_micro)
    what = "measured" if measured else "simulated"
    name = _SCHEDULE_NAME.get(tl.schedule, tl.schedule)
    ax.set_xlabel("time [ms]" if measured else "time [units of one forward]")
    grid = f"D = {tl.replicas} x " if tl.replicas > 1 else ""
    ax.set_title(
        title
        or f"{name}, {grid}S = {tl.n_stages}, M = {tl.n_micro}: bubble {what} {tl.bubble():.1%}, "
        f"formula $(N_p-1)/(M+N_p-1)$ = {formula:.1%}",
        fontsize=10,
    )
    return fig


@styled
def schedule_figure(stages: int, micro_batches: int, *, schedule: str = "gpipe",
                    backward_ratio: float = 2.0, max_micro: int = 64):
    """Simulated pipeline with equal stages: Gantt chart and bubble against ``M``.

    Left: the simulated timeline (:func:`course_lib.parallel.pipeline_schedule.simulate_uniform`) of
    ``stages`` stages and ``micro_batches`` micro-batches. Right: the bubble share
    against ``M`` - the formula for this ``N_p`` and the simulator's points for both
    schedules - and the peak activations held by stage 0 (GPipe: ``M``; 1F1B: ``min(S, M)``).

    Parameters
    ----------
    stages, micro_batches : int
        ``N_p`` >= 1, ``M`` >= 1 (the sliders).
    schedule : {"gpipe", "1f1b"}
    backward_ratio : float
        Backward time relative to the forward (2 for a GEMM layer).
    max_micro : int
        Right end of the ``M`` axis.
    """
    stages = check_int(stages, "stages", 1, 256)
    micro_batches = check_int(micro_batches, "micro_batches", 1, 4096)
    max_micro = check_int(max_micro, "max_micro", 1, 4096)
    backward_ratio = check_positive(backward_ratio, "backward_ratio", allow_zero=True)
    tl = pipeline_schedule.simulate_uniform(
        stages, micro_batches, schedule=schedule, forward=1.0, backward=float(backward_ratio)
    )
    fig, (ax_g, ax_b) = new_figure(1, 2, size=(11.0, 1.6 + 0.35 * stages), width_ratios=(2.2, 1))
    _draw_gantt(ax_g, tl, 1.0, labels=stages * micro_batches <= 256)
    name = _SCHEDULE_NAME[schedule]
    ax_g.set_xlabel("time [units of one forward]")
    peak = tl.in_flight()
    ax_g.set_title(
        f"{name}, S = {stages}, M = {micro_batches}: bubble {tl.bubble():.1%}; "
        f"stage 0 holds {peak[0]} micro-batches' activations",
        fontsize=10,
    )
    ms = np.arange(1, max(max_micro, micro_batches) + 1)
    ax_b.plot(ms, pipeline_schedule.bubble_fraction(stages, ms), color="0.3", label="$(N_p-1)/(M+N_p-1)$")
    pts = np.unique(np.round(np.geomspace(1, ms[-1], 9)).astype(int))
    for sched, marker, color in (("gpipe", "o", COLORS[0]), ("1f1b", "x", COLORS[1])):
        sim = [pipeline_schedule.simulate_uniform(stages, int(m), schedule=sched,
                                               backward=float(backward_ratio)).bubble() for m in pts]
        ax_b.plot(pts, sim, marker, color=color, ls="none", label=f"simulated {_SCHEDULE_NAME[sched]}")
    ax_b.plot([micro_batches], [tl.bubble()], "*", color=COLORS[2], ms=12, label="this setting")
    log2_axis(ax_b.xaxis, ms[-1])
    ax_b.set(xlabel="micro-batches M", ylabel="bubble share", ylim=(0, 1), title=f"S = {stages}")
    ax_b.legend(fontsize=7)
    return fig


@styled
def bubble_figure(stages: Sequence[int], micro_batches: Sequence[int], measured: Sequence[float],
                  *, simulated: Sequence[float] | None = None, max_micro: int = 32):
    """Measured bubble shares against the formula ``(N_p-1)/(M+N_p-1)``.

    Parameters
    ----------
    stages, micro_batches, measured : sequences of equal length
        One point per run: ``N_p``, ``M`` and the measured idle share.
    simulated : sequence of float, optional
        The simulator's prediction for each run (e.g. from measured stage costs).
    max_micro : int
        Right end of the ``M`` axis of the formula curves.
    """
    s_arr = _counts(stages, "stages")
    m_arr = _counts(micro_batches, "micro_batches")
    y = as_real(measured, "measured", allowed="in [0, 1]")
    if not (s_arr.shape == m_arr.shape == y.shape) or s_arr.ndim != 1:
        raise ValueError("stages, micro_batches and measured must be 1-d and of equal length")
    check_range(y, "measured", 0.0, 1.0)
    max_micro = check_int(max_micro, "max_micro", 1, 4096)
    if simulated is not None:
        simulated = as_real(simulated, "simulated")
        if simulated.shape != y.shape:
            raise ValueError(f"simulated must have the shape of measured {y.shape}, got {simulated.shape}")
    fig, ax = new_figure(size=(6.4, 4.0))
    ms = np.arange(1, max(max_micro, int(m_arr.max(initial=1))) + 1)
    for i, s in enumerate(sorted(set(s_arr.tolist()))):
        color = COLORS[i % len(COLORS)]
        ax.plot(ms, pipeline_schedule.bubble_fraction(s, ms), color=color, label=f"formula, S = {s}")
        sel = s_arr == s
        ax.plot(m_arr[sel], y[sel], "o", color=color, label=f"measured, S = {s}")
        if simulated is not None:
            sim = simulated
            ax.plot(m_arr[sel], sim[sel], "x", color=color, ms=8, label=f"simulated, S = {s}")
    ax.set(xlabel="micro-batches M", ylabel="bubble (idle share)", ylim=(0, 1),
           title="pipeline bubble: measured vs $(N_p-1)/(M+N_p-1)$")
    log2_axis(ax.xaxis, ms[-1])
    ax.legend(fontsize=8)
    return fig


def _counts(values, name: str) -> np.ndarray:
    """A 1-D array of whole counts >= 1 (stages, micro-batches, devices)."""
    arr = as_real(values, name, allowed="(whole numbers >= 1)")
    check_range(arr, name, 1.0, 2.0**40)
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold whole numbers, got {arr.tolist()}")
    return arr.astype(np.int64)


# ---------------------------------------------------------------------- hybrid
_PARTS = (("compute", "compute (slowest stage)"), ("bubble", "pipeline bubble"),
          ("p2p", "activation hand-over"), ("allreduce", "gradient all-reduce"),
          ("tensor_allreduce", "tensor-parallel all-reduce"))


def _rank(config) -> tuple:
    """Order of :func:`course_lib.parallel.hybrid.best_config`: time, then fewer stages, then smaller T."""
    return (config.step_time, config.pipeline, config.tensor)


def _tensor_groups(axes, configs) -> None:
    """Separate and name the groups of equal tensor degree N_t (when there is more than N_t = 1)."""
    ts = [c.tensor for c in configs]
    if max(ts) == 1:
        return
    starts = [i for i, t in enumerate(ts) if i == 0 or t != ts[i - 1]] + [len(ts)]
    for ax in axes:
        for lo, hi in zip(starts[:-1], starts[1:]):
            if lo > 0:
                ax.axvline(lo - 0.5, color="0.4", lw=0.8, ls=":")
            ax.text((lo + hi - 1) / 2, 1.0, f"$N_t$ = {ts[lo]}", transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=8, color="0.25")


def _bars(ax_t, ax_m, configs, memory: float | None, best) -> None:
    labels = [c.label for c in configs]
    x = np.arange(len(configs))
    bottom = np.zeros(len(configs))
    tensor = max(c.tensor for c in configs) > 1
    for i, (attr, name) in enumerate(_PARTS):
        vals = np.array([getattr(c, attr) for c in configs]) * 1e3
        if attr == "tensor_allreduce" and not tensor:
            continue
        ax_t.bar(x, vals, bottom=bottom, color=COLORS[i], label=name)
        bottom += vals
    for xi, c in zip(x, configs):
        if not c.fits:
            ax_t.text(xi, bottom[xi], "does not fit", ha="center", va="bottom", fontsize=7, color="#b00")
    if best is not None:
        bi = next(i for i, c in enumerate(configs) if c.label == best.label)
        ax_t.plot([bi], [bottom[bi] * 1.08 + 1e-9], "*", color="k", ms=12, label="best that fits")
    grid = r"$N_d \times N_p \times N_t$" if tensor else r"$N_d \times N_p$"
    rotation = 90 if tensor and len(configs) > 8 else 0
    ax_t.set_xticks(x, labels, rotation=rotation)
    ax_t.set(xlabel=f"{grid}  (data-parallel replicas x pipeline stages" + (" x tensor devices)" if tensor else ")"),
             ylabel="step time [ms]", ylim=(0, 1.15 * bottom.max() + 1e-9))
    # one legend below the panels, off the data
    ax_t.figure.legend(*ax_t.get_legend_handles_labels(), loc="outside lower center", ncol=6, fontsize=7,
                       frameon=False)
    gb = np.array([c.memory for c in configs]) / 1e9
    ax_m.bar(x, gb, color=[COLORS[2] if c.fits else "#b00" for c in configs])
    title = "memory per device"
    if memory is not None and np.isfinite(memory):
        ax_m.axhline(memory / 1e9, color="k", ls="--", lw=1)
        title += f"\n(dashed: device memory, {memory / 1e9:.3g} GB)"
    ax_m.set_xticks(x, labels, rotation=rotation)
    ax_m.set(xlabel=grid, ylabel="memory per device [GB]")
    ax_m.set_title(title, fontsize=10, pad=14 if tensor else 6)
    _tensor_groups((ax_t, ax_m), configs)


@styled
def hybrid_configs_figure(configs: Sequence, *, memory: float | None = None):
    """Step time (stacked: compute, bubble, hand-over, all-reduce) and memory per device
    of every ``N_d x N_p`` configuration of one device count.

    Parameters
    ----------
    configs : sequence of course_lib.parallel.hybrid.HybridConfig
        E.g. from :func:`course_lib.parallel.hybrid.enumerate_configs`.
    memory : float, optional
        Device memory in bytes (drawn as a line).
    """
    configs = check_sequence(configs, "configs", hybrid.HybridConfig, "a HybridConfig")
    if not configs:
        raise ValueError("configs must not be empty")
    if memory is not None:
        memory = check_positive(memory, "memory")
    fitting = [c for c in configs if c.fits]
    best = min(fitting, key=_rank) if fitting else None
    fig, (ax_t, ax_m) = new_figure(1, 2, size=(10.0, 3.8))
    _bars(ax_t, ax_m, configs, memory, best)
    ax_t.set_title(f"N = {configs[0].devices} devices: estimated step", fontsize=10,
                   pad=14 if max(c.tensor for c in configs) > 1 else 6)
    return fig


@styled
def hybrid_best_figure(device_counts: Sequence[int], best: Sequence):
    """Best configuration as the device count grows: step time and the chosen ``N_d``, ``N_p``.

    Parameters
    ----------
    device_counts : sequence of int
    best : sequence of HybridConfig or None
        :func:`course_lib.parallel.hybrid.best_configs` for ``device_counts`` (None: nothing fits).
    """
    n = _counts(device_counts, "device_counts").astype(float)
    best = check_sequence(best, "best", (hybrid.HybridConfig, type(None)), "a HybridConfig or None")
    if n.ndim != 1 or len(best) != n.size or n.size == 0:
        raise ValueError("device_counts and best must be non-empty and of equal length")
    fig, (ax_t, ax_c) = new_figure(1, 2, size=(10.0, 3.8))
    ok = np.array([b is not None for b in best])
    t = np.array([b.step_time if b is not None else np.nan for b in best])
    ax_t.loglog(n[ok], t[ok] * 1e3, "o-", color=COLORS[0], label=r"best $N_d \times N_p$")
    if ok.any():
        first = int(np.argmax(ok))
        ideal = t[first] * n[first] / n
        ax_t.loglog(n[first:], ideal[first:] * 1e3, ":", color="0.5", label="ideal 1/N from the first that fits")
    for ni, b in zip(n, best):
        if b is not None:
            ax_t.annotate(b.label, (ni, b.step_time * 1e3), textcoords="offset points",
                          xytext=(0, 6), ha="center", fontsize=7)
    if (~ok).any():
        ax_t.plot(n[~ok], np.full((~ok).sum(), np.nanmax(t) * 1e3 if ok.any() else 1.0), "x",
                  color="#b00", label="does not fit")
    ax_t.set(xlabel="devices N", ylabel="step time [ms]", title="fastest configuration that fits")
    ax_t.legend(fontsize=7)
    log2_axis(ax_t.xaxis, n.max())
    d = np.array([b.data if b is not None else np.nan for b in best])
    p = np.array([b.pipeline if b is not None else np.nan for b in best])
    ax_c.plot(n, d, "o-", color=COLORS[0], label="$N_d$ (data-parallel replicas)")
    ax_c.plot(n, p, "s-", color=COLORS[1], label="$N_p$ (pipeline stages)")
    log2_axis(ax_c.xaxis, n.max())
    log2_axis(ax_c.yaxis, n.max())
    ax_c.set(xlabel="devices N", ylabel="degree", title=r"chosen split $N_d \times N_p = N$")
    ax_c.legend(fontsize=7)
    return fig


@styled
def hybrid_explorer_figure(devices: int, *, model, batch_size: int, device_counts: Sequence[int],
                           memory: float, **estimate_kw):
    """Live-figure view: the configurations at ``devices`` and the best one as N grows.

    ``devices`` is the slider; ``device_counts`` the N axis of the right panel;
    ``memory`` and ``estimate_kw`` are passed to :func:`course_lib.parallel.hybrid.enumerate_configs`
    (``max_tensor=T`` adds the tensor-parallel axis: configurations ``N_d x N_p x N_t``, grouped by
    ``N_t``, and the best one may split its stages over ``N_t`` devices).
    """
    counts = check_sequence(device_counts, "device_counts")
    configs = hybrid.enumerate_configs(model, batch_size, devices, memory=memory, **estimate_kw)
    fitting = [c for c in configs if c.fits]
    best_here = min(fitting, key=_rank) if fitting else None
    bests = hybrid.best_configs(model, batch_size, counts, memory=memory, **estimate_kw)
    fig, (ax_t, ax_m, ax_b) = new_figure(1, 3, size=(13.0, 3.8), width_ratios=(1.4, 1, 1.2))
    _bars(ax_t, ax_m, configs, memory, best_here)
    tensor = max(c.tensor for c in configs) > 1
    grid, pad = (r"$N_d \times N_p \times N_t$", 14) if tensor else (r"$N_d \times N_p$", 6)
    ax_t.set_title(f"N = {devices}: estimated step per {grid}", fontsize=10, pad=pad)
    n = np.asarray(counts, dtype=float)
    t = np.array([b.step_time * 1e3 if b is not None else np.nan for b in bests])
    ax_b.loglog(n, t, "-", color="0.6", lw=1)
    degrees = sorted({b.tensor for b in bests if b is not None})
    for k, deg in enumerate(degrees):  # marker shape: the tensor degree N_t of the best split
        sel = [i for i, b in enumerate(bests) if b is not None and b.tensor == deg]
        ax_b.plot(n[sel], t[sel], "osD^vP"[k % 6], color=COLORS[0], label=f"$N_t$ = {deg}")
    for ni, b in zip(n, bests):
        if b is not None:
            ax_b.annotate(b.label, (ni, b.step_time * 1e3), textcoords="offset points",
                          xytext=(0, 6), ha="center", fontsize=7)
    if best_here is not None:
        ax_b.plot([devices], [best_here.step_time * 1e3], "*", color="k", ms=12)
    ax_b.set(xlabel="devices N", ylabel="best step time [ms]", title=f"best {grid} as N grows")
    if len(degrees) > 1:
        ax_b.legend(fontsize=7, title="best split's $N_t$", title_fontsize=7)
    log2_axis(ax_b.xaxis, n.max())
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    ax_b.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax_b.yaxis.set_minor_locator(NullLocator())
    ax_b.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    return fig
