"""Figures of chapter 03 (training cost): levers, calculators, large batch; and the
communication-efficiency figure of chapter 05 (the alpha-beta model of data parallelism).

Pure functions: data in, :class:`matplotlib.figure.Figure` out. The calculator
functions take plain numbers (slider values) and names (a model name, a ``device_id``:
drop-down values) plus the data rows as keyword arguments, so
:func:`course_lib.widgets.live_figure` can drive them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import comm, cost
from .._validate import as_real, check_count, check_positive, check_real, check_sequence, check_type
from . import COLORS, log2_axis, new_figure, styled

__all__ = [
    "calculator_figure",
    "cnn_calculator_figure",
    "comm_efficiency_figure",
    "large_batch_figure",
    "levers_figure",
    "time_ladder_figure",
    "transformer_calculator_figure",
]

_DAY = 86400.0
_REFERENCE_TIMES = (
    ("1 min", 60.0),
    ("1 hour", 3600.0),
    ("1 day", _DAY),
    ("1 month", 30 * _DAY),
    ("1 year", 365.25 * _DAY),
)


# ------------------------------------------------------------------ the three levers
@styled
def levers_figure():
    r"""A picture of :math:`T = D \cdot C / (r \cdot N \cdot \eta)` and its three levers.

    Data size and per-sample compute are set by the problem (the model and data); the
    compute rate is per-device rate (Moore's law, slow to improve) x device count x
    parallel efficiency - the last two are where distributed training works.
    """
    from matplotlib.patches import FancyBboxPatch

    fig, ax = new_figure(size=(9.0, 3.6))
    ax.set_axis_off()
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 4.2)

    def box(x, y, w, h, text, color, sub=""):
        ax.add_patch(
            FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05", fc=color, ec="0.3", alpha=0.25)
        )
        ax.text(x + w / 2, y + h * 0.62, text, ha="center", va="center", fontsize=13)
        if sub:
            ax.text(x + w / 2, y + h * 0.25, sub, ha="center", va="center", fontsize=8.5)

    ax.text(0.1, 3.75, r"training time  $T \;=\; \dfrac{D \times C}{R}$,   "
            r"$R \;=\; r \times N \times \eta$", fontsize=13, va="center")
    box(0.2, 1.6, 2.0, 1.3, r"$D$", COLORS[4], "data size\n(samples x epochs)")
    box(2.6, 1.6, 2.0, 1.3, r"$C$", COLORS[4], "FLOPs per sample\n(forward + backward)")
    box(5.0, 1.6, 1.4, 1.3, r"$r$", COLORS[5], "per-device rate\n(FLOP/s)")
    box(6.8, 1.6, 1.2, 1.3, r"$N$", COLORS[2], "devices")
    box(8.4, 1.6, 1.4, 1.3, r"$\eta$", COLORS[2], "parallel\nefficiency")
    ax.text(2.45, 1.2, "fixed by the problem\n(the model and the data)",
            ha="center", va="top", fontsize=9)
    ax.text(5.75, 1.2, "grows with each\nchip generation", ha="center", va="top", fontsize=9)
    ax.text(8.1, 1.2, "where distributed\ntraining works",
            ha="center", va="top", fontsize=9, color=COLORS[2], fontweight="bold")
    for x, sym in ((2.4, r"$\times$"), (4.8, "/"), (6.6, r"$\times$"), (8.2, r"$\times$")):
        ax.text(x, 2.25, sym, fontsize=20, ha="center", va="center")
    ax.set_title("the levers of training time")
    return fig


# ------------------------------------------------------------------ calculators
def _time_axis(ax, seconds: np.ndarray) -> None:
    ax.set_yscale("log")
    lo, hi = float(np.min(seconds)), float(np.max(seconds))
    for label, t in _REFERENCE_TIMES:
        if lo / 3 <= t <= hi * 3:
            ax.axhline(t, color="0.7", lw=0.8, ls="--")
            ax.text(1.0, t, f" {label}", transform=ax.get_yaxis_transform(), va="center",
                    fontsize=8, color="0.4")


@styled
def calculator_figure(
    samples: float,
    flops_per_sample: float,
    peak_flops: float,
    devices: int,
    utilisation: float,
    efficiency: float,
    *,
    title: str = "",
    device_label: str = "device",
    n_max: int = 4096,
):
    r"""Training time against device count, and the decomposition for the chosen one.

    Left: :math:`T(N)` for the ideal :math:`\eta = 1` and for the chosen :math:`\eta`,
    with reference lines (hour, day, month, year) and the chosen :math:`N` marked.
    Right: the four-line summary of :class:`course_lib.cost.TrainingEstimate`.

    Parameters
    ----------
    samples, flops_per_sample : float
        :math:`D` and :math:`C` (FLOPs, forward + backward).
    peak_flops : float
        Peak FLOP/s of one device; the sustained rate is ``utilisation * peak_flops``.
    devices : int
        :math:`N`.
    utilisation : float
        Sustained fraction of the peak, in (0, 1].
    efficiency : float
        :math:`\eta`, in (0, 1].
    """
    samples = check_positive(samples, "samples")
    flops_per_sample = check_positive(flops_per_sample, "flops_per_sample")
    peak_flops = check_positive(peak_flops, "peak_flops")
    devices, n_max = check_count(devices, "devices"), check_count(n_max, "n_max")
    efficiency = check_real(efficiency, "efficiency", 0.0, 1.0, low_open=True)
    check_type(title, "title", str, "a str")
    check_type(device_label, "device_label", str, "a str")
    r = cost.sustained_flops(peak_flops, utilisation)
    util = float(utilisation)
    est = cost.estimate_training(samples, flops_per_sample, r, devices, efficiency)
    ns = np.unique(np.round(np.geomspace(1, max(n_max, devices), 120)))
    ideal = cost.training_time(samples, flops_per_sample, r, ns)
    real = cost.training_time(samples, flops_per_sample, r, ns, efficiency)

    fig, (ax, ax_t) = new_figure(1, 2, size=(10.0, 3.8), width_ratios=(1.25, 1))
    ax.plot(ns, ideal, color="0.6", ls=":", label="η = 1 (ideal)")
    ax.plot(ns, real, color=COLORS[0], label=f"η = {float(efficiency):.2g}")
    ax.plot([devices], [est.seconds], "o", color=COLORS[1])
    ax.annotate(cost.human_duration(est.seconds), (devices, est.seconds),
                textcoords="offset points", xytext=(6, 6), fontsize=9)
    log2_axis(ax.xaxis, ns[-1])
    _time_axis(ax, np.concatenate([ideal, real]))
    ax.set(xlabel=f"devices N ({device_label})", ylabel="training time T [s]")
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(title or "training time")

    ax_t.set_axis_off()
    text = (
        f"{device_label}\n"
        f"peak {peak_flops / 1e12:.3g} TFLOP/s x utilisation {util:.2g}\n"
        f"= r = {r / 1e12:.3g} TFLOP/s sustained\n\n"
        + est.summary()
    )
    ax_t.text(0.0, 0.95, text, va="top", ha="left", family="monospace", fontsize=8.5,
              transform=ax_t.transAxes, wrap=True)
    ax_t.text(0.0, 0.02, f"T = {cost.human_duration(est.seconds)}   "
              f"({est.device_hours:,.3g} device-hours)",
              transform=ax_t.transAxes, fontsize=12, fontweight="bold", color=COLORS[1])
    return fig


@styled
def cnn_calculator_figure(
    model: str,
    images_million: float,
    epochs: int,
    device_id: str,
    devices: int,
    utilisation: float,
    efficiency: float,
    *,
    models: Sequence,
    hardware: Sequence,
):
    """Calculator for an image model of ``data/dnn_models.csv`` on a device of ``data/hardware.csv``.

    Parameters
    ----------
    model : str
        Model name: the ``model`` column of ``models`` (``load_dnn_models()``).
    images_million : float
        Training images in millions (ImageNet-1k: 1.28).
    epochs : int
        Passes over the data.
    device_id : str
        The ``device_id`` column of ``hardware`` (``load_hardware()``).
    devices, utilisation, efficiency
        As in :func:`calculator_figure`.
    """
    est = cost.cnn_calculator_estimate(model, images_million, epochs, device_id, devices,
                                  utilisation, efficiency, models=models, hardware=hardware)
    device = cost.find_row(hardware, device_id, "device_id", "device_id")
    return calculator_figure(
        est.samples, est.flops_per_sample, device.peak_tflops * 1e12, devices, utilisation,
        efficiency,
        title=f"{model}: {float(images_million):.3g}M images x {int(epochs)} epochs",
        device_label=device.device,
    )


@styled
def transformer_calculator_figure(
    params_million: float,
    tokens_million: float,
    device_id: str,
    devices: int,
    utilisation: float,
    efficiency: float,
    *,
    hardware: Sequence,
):
    """Calculator for a dense transformer by parameter count (6PD) on a device of ``hardware``.

    Parameters
    ----------
    params_million, tokens_million : float
        Parameters and training tokens, in millions (BERT-Large: 340 and about 42,600).
    device_id : str
        The ``device_id`` column of ``hardware`` (``load_hardware()``).
    devices, utilisation, efficiency
        As in :func:`calculator_figure`.
    """
    est = cost.transformer_calculator_estimate(params_million, tokens_million, device_id, devices,
                                          utilisation, efficiency, hardware=hardware)
    device = cost.find_row(hardware, device_id, "device_id", "device_id")
    return calculator_figure(
        est.samples, est.flops_per_sample, device.peak_tflops * 1e12, devices,
        utilisation, efficiency,
        title=f"transformer, {params_million:g}M parameters, {tokens_million:,.0f}M tokens (6PD)",
        device_label=device.device,
    )


@styled
def time_ladder_figure(labels: Sequence[str], seconds: Sequence[float], *, title: str = ""):
    """Horizontal bars of training times on a log axis, each labelled in human units.

    Parameters
    ----------
    labels : sequence of str
        One label per bar (top to bottom).
    seconds : sequence of float
        Times in seconds, > 0.
    """
    labels = check_sequence(labels, "labels")
    check_type(title, "title", str, "a str")
    secs = as_real(seconds, "seconds", allowed="in (0, inf)").reshape(-1)
    if len(labels) != secs.size or secs.size == 0:
        raise ValueError(f"labels and seconds must have the same non-zero length, got {len(labels)} and {secs.size}")
    if np.any(~np.isfinite(secs)) or np.any(secs <= 0):
        raise ValueError("seconds must be finite and > 0")
    fig, ax = new_figure(size=(8.0, 0.55 * secs.size + 1.4))
    y = np.arange(secs.size)[::-1]
    ax.barh(y, secs, color=[COLORS[i % len(COLORS)] for i in range(secs.size)], alpha=0.8)
    ax.set_xscale("log")
    ax.set_yticks(y, labels)
    for yi, s in zip(y, secs, strict=True):
        ax.text(s * 1.15, yi, cost.human_duration(s), va="center", fontsize=9)
    ax.set_xlim(secs.min() / 3, secs.max() * 30)
    for label, t in _REFERENCE_TIMES:
        if secs.min() / 3 <= t <= secs.max() * 30:
            ax.axvline(t, color="0.7", lw=0.8, ls="--")
            ax.text(t, 1.0, label, transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                    fontsize=8, color="0.4")
    ax.set_xlabel("training time [s], log scale")
    ax.grid(False, axis="y")
    if title:
        ax.set_title(title, pad=16)
    return fig


# ------------------------------------------------------------------ communication
@styled
def comm_efficiency_figure(
    compute_ms: float,
    gradient_mb: float,
    bandwidth_gb_s: float,
    latency_us: float,
    overlap: float,
    devices: int,
    *,
    n_max: int = 1024,
    batch_size: int | None = None,
):
    r"""Data-parallel step time and efficiency :math:`\eta(N)` under the alpha-beta model.

    Left: the step time split into compute :math:`t_c / N` and the exposed ring
    all-reduce time, against :math:`N` (fixed global batch). Right: :math:`\eta(N)` for
    ring all-reduce, binary tree and one parameter server (:mod:`course_lib.comm`) with
    a fixed global batch (strong scaling), the chosen :math:`N` marked, and the ring
    with a fixed per-device batch (weak scaling) for comparison.

    Parameters
    ----------
    compute_ms : float
        Forward + backward time of the global batch on ONE device, milliseconds.
    gradient_mb : float
        Gradient size in MB (10^6 bytes).
    bandwidth_gb_s : float
        Link bandwidth, GB/s (10^9 bytes/s).
    latency_us : float
        Per-message latency, microseconds.
    overlap : float
        Fraction of communication hidden behind compute, [0, 1].
    devices : int
        The :math:`N` to mark.
    batch_size : int, optional
        The global batch :math:`B` of ``compute_ms``. Strong scaling cannot use more devices
        than samples: the strong-scaling curves stop at :math:`N = B`, and a chosen
        :math:`N > B` is flagged as impossible instead of given an efficiency.
    """
    tc = check_positive(compute_ms, "compute_ms") * 1e-3
    m = check_positive(gradient_mb, "gradient_mb") * 1e6
    b = check_positive(bandwidth_gb_s, "bandwidth_gb_s") * 1e9
    a = check_positive(latency_us, "latency_us", allow_zero=True) * 1e-6
    overlap = check_real(overlap, "overlap", 0.0, 1.0)
    devices, n_max = check_count(devices, "devices"), check_count(n_max, "n_max")
    batch = None if batch_size is None else check_count(batch_size, "batch_size")
    ns = np.unique(np.round(np.geomspace(1, max(n_max, devices), 100)))
    possible = ns if batch is None else ns[ns <= batch]  # strong scaling: at most one sample each
    step = comm.data_parallel_step_time(tc, possible, m, b, a, overlap=overlap)
    compute = tc / possible
    fig, (ax_t, ax_e) = new_figure(1, 2, size=(10.0, 3.8))
    ax_t.fill_between(possible, 0, compute * 1e3, color=COLORS[0], alpha=0.5, label="compute t_c / N")
    ax_t.fill_between(possible, compute * 1e3, step * 1e3, color=COLORS[1], alpha=0.5,
                      label="exposed ring all-reduce")
    log2_axis(ax_t.xaxis, ns[-1])
    ax_t.set_yscale("log")
    ax_t.set(xlabel="devices N", ylabel="step time [ms]",
             title="one step, fixed global batch (ring)")
    ax_t.legend(fontsize=8)
    for name, color, style in (("ring", COLORS[0], "-"), ("tree", COLORS[2], "--"), ("ps", COLORS[1], ":")):
        eta = comm.data_parallel_efficiency(tc, possible, m, b, a, algorithm=name, overlap=overlap)
        label = {"ring": "ring all-reduce", "tree": "binary tree", "ps": "1 parameter server"}[name]
        ax_e.plot(possible, eta, style, color=color, label=label)
    if batch is not None and batch < ns[-1]:
        for ax in (ax_t, ax_e):
            ax.axvspan(batch, ns[-1], color="0.9", zorder=0)
        ax_e.text(batch * 1.08, 0.03, f"N > B = {batch}:\nfewer samples\nthan devices", fontsize=8, color="0.35")
    weak = comm.data_parallel_efficiency(tc, ns, m, b, a, overlap=overlap, scaling="weak")
    ax_e.plot(ns, weak, "-", color="0.45", lw=1.2,
              label="ring, weak scaling (batch grows with N)")
    if batch is None or devices <= batch:
        eta_now = comm.data_parallel_efficiency(tc, devices, m, b, a, overlap=overlap)
        ax_e.plot([devices], [eta_now], "o", color=COLORS[0])
        ax_e.annotate(f"η({int(devices)}) = {eta_now:.2f}", (devices, eta_now),
                      textcoords="offset points", xytext=(6, 6), fontsize=9)
    else:  # refuse: strong scaling cannot give every device a sample
        ax_e.text(batch * 1.08, 0.45, f"N = {int(devices)}:\nimpossible\nwith a fixed\nbatch of {batch}",
                  fontsize=8, color=COLORS[1])
    log2_axis(ax_e.xaxis, ns[-1])
    ax_e.set_ylim(0, 1.05)
    ax_e.set(xlabel="devices N", ylabel="parallel efficiency η(N)",
             title=f"{gradient_mb:g} MB gradients, {bandwidth_gb_s:g} GB/s, {latency_us:g} µs")
    ax_e.legend(fontsize=8)
    return fig


# ------------------------------------------------------------------ large batch
@styled
def large_batch_figure(runs: Sequence):
    """Training loss and test accuracy against epochs (top) and against steps (bottom).

    The per-step loss panel uses every step's loss (a running mean over a third of an
    epoch, to tame the small batch's noise); accuracies are measured after each epoch.

    Parameters
    ----------
    runs : sequence of course_lib.optim.BatchRun
        From :func:`course_lib.optim.large_batch_experiment`.
    """
    from ..optim import BatchRun

    runs = check_sequence(runs, "runs", BatchRun, "a BatchRun (from large_batch_experiment)")
    if not runs:
        raise ValueError("runs must not be empty")
    fig, axes = new_figure(2, 2, size=(10.0, 6.6))
    styles = ("-", "--", "-.", ":", "-", "--")
    for i, run in enumerate(runs):
        color, ls = COLORS[i % len(COLORS)], styles[i % len(styles)]
        epochs = np.arange(1, run.epochs + 1)
        axes[0, 0].plot(epochs, run.loss, ls, color=color, label=run.label)
        axes[0, 1].plot(epochs, run.test_accuracy, ls, color=color, label=run.label)
        steps, smooth = _smoothed_step_loss(run)
        axes[1, 0].plot(steps, smooth, ls, color=color)
        axes[1, 1].plot(run.steps, run.test_accuracy, ls, color=color,
                        marker="." if run.epochs < 40 else None)
    for row, xlabel in ((0, "epoch"), (1, "steps (updates), log scale")):
        axes[row, 0].set(xlabel=xlabel, ylabel="training loss" if row == 0 else
                         "training loss per step (running mean)")
        axes[row, 0].set_yscale("log")
        axes[row, 1].set(xlabel=xlabel, ylabel="test accuracy")
        axes[row, 1].set_ylim(0, 1)
    for ax in axes[1]:
        ax.set_xscale("log")
    axes[0, 0].set_title("against epochs (same data seen)")
    axes[0, 1].set_title("against epochs")
    axes[1, 0].set_title("against steps (same number of updates)")
    axes[1, 1].set_title("against steps (after each epoch)")
    axes[0, 1].legend(fontsize=7.5, loc="lower right")
    return fig


def _smoothed_step_loss(run) -> tuple[np.ndarray, np.ndarray]:
    """Per-step loss with a trailing running mean over a third of an epoch's steps."""
    loss = np.asarray(run.step_loss, float)
    window = max(1, run.steps_per_epoch // 3)
    csum = np.cumsum(np.insert(loss, 0, 0.0))
    idx = np.arange(1, loss.size + 1)
    start = np.maximum(idx - window, 0)
    return idx, (csum[idx] - csum[start]) / (idx - start)
