"""Figures of training cost (its levers, the calculators), of the large-batch experiment, and
the communication-efficiency figure of data parallelism (the alpha-beta model).

Pure functions: data in, :class:`matplotlib.figure.Figure` out. The calculator
functions take plain numbers (slider values) and names (a model name, a ``device_id``:
drop-down values) plus the data rows as keyword arguments, so
:func:`course_lib.live.widgets.live_figure` can drive them.

Times are drawn on a log axis whose ticks are durations in words (1 min, 1 h, 1 day, ...:
:func:`time_axis`); a time per row is a dot with its value beside it (a dot plot,
``_time_dots``: on a log axis the length of a bar means nothing).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np

from .. import alpha_beta, cost
from .._validate import (
    as_real,
    check_count,
    check_int,
    check_positive,
    check_real,
    check_sequence,
    check_type,
)
from ..i18n import N_, tr, tr_n
from ..memory import format_bytes
from . import (
    _YEAR,
    COLORS,
    SUPERSCRIPT,
    dot_rows,
    log2_axis,
    new_figure,
    plain_log_axis,
    styled,
    time_axis,
)

__all__ = [
    "calculator_figure",
    "cnn_calculator_figure",
    "comm_efficiency_figure",
    "human_count",
    "large_batch_figure",
    "levers_figure",
    "time_ladder_figure",
    "transformer_calculator_figure",
]

def human_count(value: float, digits: int = 3) -> str:
    """A count with a k / M / B / T suffix: ``42.6B`` tokens, ``115M`` samples, ``340M`` parameters.

    From 10^15 on, a power of ten (``1.7 × 10¹⁵``).

    Examples
    --------
    >>> human_count(42_598e6), human_count(1.153e8), human_count(340e6), human_count(999)
    ('42.6B', '115M', '340M', '999')
    >>> human_count(1.7e15)
    '1.7 × 10¹⁵'
    """
    v = check_real(value, "value")
    digits = check_int(digits, "digits", 1, 15)
    if abs(v) >= 1e15:
        return _power_of_ten(v)
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g}{suffix}"
    return f"{v:.{digits}g}"


def _power_of_ten(value: float) -> str:
    """``2.83 × 10¹⁸`` (unicode, no mathtext: cheap to draw)."""
    exponent = int(np.floor(np.log10(abs(value))))
    return f"{value / 10.0**exponent:.3g} × 10{str(exponent).translate(SUPERSCRIPT)}"


def _time_dots(ax, seconds, labels, *, texts=None, styles=None) -> None:
    """Rows of times as a dot plot (:func:`~course_lib.plots.dot_rows`) on a :func:`~course_lib.plots.time_axis`.

    ``texts`` default to the times in words; the axis leaves room on the right for them.
    """
    secs = np.asarray(seconds, dtype=float)
    dot_rows(ax, labels, secs, texts or [_duration(s) for s in secs], styles=styles)
    time_axis(ax.xaxis, secs.min() / 3, secs.max() * 40, length=0.55 * ax.figure.get_figwidth())


# ------------------------------------------------------------------ the three levers
@styled
def levers_figure():
    r"""A picture of :math:`T = \dfrac{D\,C}{r\,N\,\eta}` as a real fraction, with its levers.

    Numerator: the work, data size :math:`D` x compute per sample :math:`C`, set by the
    problem (the model and the data). Denominator: the compute rate :math:`R = r N \eta`:
    the per-device rate :math:`r` grows with new hardware (tensor cores, lower precision;
    single-core clock speed stopped rising in the mid-2000s), while the device count
    :math:`N` and the parallel efficiency :math:`\eta` are where distributed training works.

    Examples
    --------
    >>> fig = levers_figure()
    >>> [t.get_text() for t in fig.axes[0].texts][:2]
    ['$T \\;=$', '$D$']
    """
    from matplotlib.patches import FancyBboxPatch

    fig, ax = new_figure(size=(9.6, 4.2))
    ax.set_axis_off()
    ax.set_xlim(0, 10.0)  # about inches: the boxes and notes fit their text
    ax.set_ylim(0, 3.7)

    def box(x, y, w, symbol, text, color):
        ax.add_patch(FancyBboxPatch((x, y), w, 1.1, boxstyle="round,pad=0.04", fc=color, ec="0.35",
                                    alpha=0.3, lw=1.0))
        ax.text(x + w / 2, y + 0.8, symbol, ha="center", va="center", fontsize=18)
        ax.text(x + w / 2, y + 0.33, text, ha="center", va="center")

    bar, top, bottom = 2.15, 2.4, 0.85  # the fraction bar, the numerator's and denominator's boxes
    ax.text(0.45, bar, r"$T \;=$", ha="center", va="center", fontsize=20)
    ax.plot([0.95, 7.45], [bar, bar], color="0.1", lw=2.5, solid_capstyle="butt")
    box(2.1, top, 1.9, "$D$", tr("data size\n(samples × epochs)"), COLORS[4])
    box(4.4, top, 1.9, "$C$", tr("FLOPs per sample\n(forward + backward)"), COLORS[4])
    box(0.95, bottom, 1.9, "$r$", tr("per-device rate\n(FLOP/s)"), COLORS[5])
    box(3.25, bottom, 1.9, "$N$", tr("devices"), COLORS[2])
    box(5.55, bottom, 1.9, r"$\eta$", tr("parallel\nefficiency"), COLORS[2])
    for x, y in ((4.2, top), (3.05, bottom), (5.35, bottom)):
        ax.text(x, y + 0.55, "×", ha="center", va="center", fontsize=18)
    ax.text(7.75, top + 0.55, tr("the work D·C:\nfixed by the problem\n(the model and the data)"),
            va="center")
    ax.text(7.75, bottom + 0.55, tr("the rate R = r·N·η\nof all N devices"), va="center")
    ax.text(1.9, bottom - 0.12, tr("grows with new hardware\n(tensor cores, lower precision),\n"
                                   "not with clock speed"), ha="center", va="top")
    ax.text(5.35, bottom - 0.12, tr("where distributed\ntraining works"), ha="center", va="top",
            color=COLORS[2], fontweight="bold")
    ax.set_title(tr("the levers of training time"))
    return fig


# ------------------------------------------------------------------ calculators
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
    device_label: str = N_("device"),
    n_max: int = 4096,
    sample_unit: str = N_("samples"),
    params: float | None = None,
):
    r"""Training time against device count, and the decomposition for the chosen one.

    Left: :math:`T(N)` for the ideal :math:`\eta = 1` (dashed, drawn on top) and for the
    chosen :math:`\eta`, on a time axis ticked in words (1 h, 1 day, ...), the chosen
    :math:`N` marked. One device has nothing to communicate: :math:`\eta(1) = 1`, so both
    curves start at the same time (:func:`course_lib.cost.training_time`). Right: the
    work :math:`D C`, the rate :math:`R = r N \eta` and the time, counts in words (42.6B).

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
        :math:`\eta`, in (0, 1]; it applies from :math:`N = 2` on.
    sample_unit : str
        What :math:`D` counts (``"tokens"`` for a language model; ``"samples"`` and
        ``"tokens"`` are shown in the current language, as is the default ``device_label``).
    params : float, optional
        :math:`P`, for a transformer whose :math:`C = 6P` per token.

    Examples
    --------
    >>> fig = calculator_figure(1e6, 1e9, 2e12, 1, 0.5, 0.01)
    >>> fig.axes[1].texts[-1].get_text()  # one device: eta does not apply
    'T = 16.7 min\n(0.278 device-hours)'
    """
    samples = check_positive(samples, "samples")
    flops_per_sample = check_positive(flops_per_sample, "flops_per_sample")
    peak_flops = check_positive(peak_flops, "peak_flops")
    devices, n_max = check_count(devices, "devices"), check_count(n_max, "n_max")
    efficiency = check_real(efficiency, "efficiency", 0.0, 1.0, low_open=True)
    for name, value in (("title", title), ("device_label", device_label), ("sample_unit", sample_unit)):
        check_type(value, name, str, "a str")
    if params is not None:
        params = check_positive(params, "params")
    r = cost.sustained_flops(peak_flops, utilisation)
    est = cost.estimate_training(samples, flops_per_sample, r, devices, efficiency)
    ns = np.unique(np.round(np.geomspace(1, max(n_max, devices), 60)))
    ideal = cost.training_time(samples, flops_per_sample, r, ns)
    real = cost.training_time(samples, flops_per_sample, r, ns, efficiency)

    fig, (ax, ax_t) = new_figure(1, 2, size=(9.6, 4.2), width_ratios=(1.35, 1))
    ax.plot(ns, real, color=COLORS[0], lw=3.0, zorder=2,
            label=tr("η = {efficiency} (from N = 2 on)", efficiency=f"{efficiency:.2g}") if efficiency < 1 else "η = 1")
    ax.plot(ns, ideal, color="0.1", lw=1.4, ls=(0, (4, 3)), zorder=3, label=tr("ideal: η = 1"))
    ax.plot([devices], [est.seconds], "o", color=COLORS[1], markersize=9, zorder=4)
    right = devices <= ns[-1] ** 0.75  # near the right end: write the time left of the marker
    ax.annotate(_duration(est.seconds), (devices, est.seconds), textcoords="offset points",
                xytext=(8 if right else -8, 8), ha="left" if right else "right", color=COLORS[1],
                zorder=5, in_layout=False,
                bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.85))
    log2_axis(ax.xaxis, ns[-1])
    both = np.concatenate([ideal, real])
    time_axis(ax.yaxis, both.min() / 2, both.max() * 3)
    ax.set(xlabel=tr("devices N"), ylabel=tr("training time T"))
    ax.set_title(title or tr("training time"))

    ax_t.set_axis_off()
    per = _UNIT_ONE.get(sample_unit, sample_unit[:-1] if sample_unit.endswith("s") else sample_unit)
    indent = "    "  # the lines of one quantity under its heading
    lines = [
        *textwrap.wrap(tr(device_label), 36),
        "",
        tr("work  D·C = {flops} FLOP", flops=_power_of_ten(est.total_flops)),
        indent + tr("D = {count} {unit}", count=human_count(samples), unit=tr(sample_unit)),
        indent + tr("C = {flops} per {unit}", flops=f"{'6P = ' if params else ''}{_si(flops_per_sample, 'FLOP')}",
                    unit=tr(per)),
        *([indent + tr("P = {count} parameters", count=human_count(params))] if params else []),
        tr("rate  R = r·N·η = {rate}", rate=_si(est.compute_rate, 'FLOP/s')),
        indent + tr("r = peak × utilisation = {rate}", rate=_si(r, 'FLOP/s')),
        f"        ({peak_flops / 1e12:.3g} TFLOP/s × {float(utilisation):.2g})",
        f"    N = {devices:,}, η = {est.efficiency:.2g}" if devices > 1 else
        indent + tr("N = 1: η = 1 (nothing to communicate)"),
    ]
    ax_t.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", transform=ax_t.transAxes,
              linespacing=1.3, in_layout=False)
    ax_t.legend(*ax.get_legend_handles_labels(), loc="lower left", bbox_to_anchor=(0.0, 0.2),
                borderaxespad=0.0, frameon=False).set_in_layout(False)
    ax_t.text(0.0, 0.0, f"T = {_duration(est.seconds)}\n({_device_hours(est.device_hours)})",
              in_layout=False, linespacing=1.3,
              transform=ax_t.transAxes, fontsize=12.5, fontweight="bold", color=COLORS[1])
    return fig


#: The unit of one sample as the calculator writes "per sample" (English keys: ``sample_unit``).
_UNIT_ONE = {"samples": N_("sample"), "tokens": N_("token")}
#: The units of :math:`D` the calculators pass as ``sample_unit`` (translated where written).
_SAMPLE_UNITS = (N_("samples"), N_("tokens"))


def _device_hours(hours: float) -> str:
    if hours < 0.01:
        return tr("{count} device-seconds", count=f"{hours * 3600:.3g}")
    number = human_count(hours) if hours >= 1e6 else f"{hours:,.0f}" if hours >= 100 else f"{hours:.3g}"
    return tr("{count} device-hours", count=number)


def _duration(seconds: float) -> str:
    """:func:`course_lib.cost.human_duration`, with a k / M / B count of years beyond 1,000."""
    years = seconds / _YEAR
    return tr("{count} years", count=human_count(years)) if years >= 1000 else cost.human_duration(seconds)


def _si(value: float, unit: str) -> str:
    """``24.5 GFLOP``, ``39.3 TFLOP/s``: the SI prefix that keeps the number in [1, 1000)."""
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


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
        As in :func:`calculator_figure` (:math:`\\eta` applies from 2 devices on).
    """
    est = cost.cnn_calculator_estimate(model, images_million, epochs, device_id, devices,
                                       utilisation, efficiency, models=models, hardware=hardware)
    device = cost.find_row(hardware, device_id, "device_id", "device_id")
    return calculator_figure(
        est.samples, est.flops_per_sample, device.peak_tflops * 1e12, devices, utilisation,
        efficiency,
        title=tr_n("{model}: {images} images × {count} epoch", "{model}: {images} images × {count} epochs",
                   int(epochs), model=model, images=human_count(float(images_million) * 1e6)),
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

    The work is :math:`6PD`: :math:`P` parameters, :math:`D` tokens, :math:`C = 6P` FLOPs
    per token; :math:`N` is the device count.

    Parameters
    ----------
    params_million, tokens_million : float
        :math:`P` and :math:`D`, in millions (BERT-Large: 340 and about 42,600).
    device_id : str
        The ``device_id`` column of ``hardware`` (``load_hardware()``).
    devices, utilisation, efficiency
        As in :func:`calculator_figure` (:math:`\\eta` applies from 2 devices on).
    """
    est = cost.transformer_calculator_estimate(params_million, tokens_million, device_id, devices,
                                               utilisation, efficiency, hardware=hardware)
    device = cost.find_row(hardware, device_id, "device_id", "device_id")
    return calculator_figure(
        est.samples, est.flops_per_sample, device.peak_tflops * 1e12, devices,
        utilisation, efficiency,
        title=tr("transformer: P = {params} parameters, D = {tokens} tokens",
                 params=human_count(float(params_million) * 1e6), tokens=human_count(float(tokens_million) * 1e6)),
        device_label=device.device, sample_unit="tokens", params=float(params_million) * 1e6,
    )


@styled
def time_ladder_figure(labels: Sequence[str], seconds: Sequence[float], *, title: str = ""):
    """Training times on a log axis as a dot plot: a dot per row, its time in words beside it.

    Parameters
    ----------
    labels : sequence of str
        One label per row (top to bottom).
    seconds : sequence of float
        Times in seconds, > 0.

    Examples
    --------
    >>> fig = time_ladder_figure(["a", "b"], [60.0, 86400.0 * 40])
    >>> [t.get_text() for t in fig.axes[0].texts], len(fig.axes[0].patches)
    (['1 min', '40 days'], 0)
    """
    labels = check_sequence(labels, "labels")
    check_type(title, "title", str, "a str")
    secs = as_real(seconds, "seconds", allowed="in (0, inf)").reshape(-1)
    if len(labels) != secs.size or secs.size == 0:
        raise ValueError(f"labels and seconds must have the same non-zero length, got {len(labels)} and {secs.size}")
    if np.any(~np.isfinite(secs)) or np.any(secs <= 0):
        raise ValueError("seconds must be finite and > 0")
    fig, ax = new_figure(size=(8.0, 0.5 * secs.size + 1.5))
    _time_dots(ax, secs, labels)
    ax.set_xlabel(tr("training time, log scale"))
    if title:
        ax.set_title(title)
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
    ring all-reduce, the naive binary tree and one parameter server (:mod:`course_lib.alpha_beta`)
    with a fixed global batch (strong scaling), the chosen :math:`N` marked, and the ring
    with a fixed per-device batch (weak scaling) for comparison. The naive (not pipelined)
    binary tree reduces to a root and broadcasts back: :math:`2\lceil\log_2 N\rceil` steps, each sending the
    whole gradient, so it needs few messages (latency) but moves more bytes than the ring.
    Every curve starts at :math:`\eta(1) = 1`: a device alone communicates nothing. The
    title writes the gradient size as the slider's value box does (``1.36 GB``,
    :func:`course_lib.memory.format_bytes`).

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
    step = alpha_beta.data_parallel_step_time(tc, possible, m, b, a, overlap=overlap)
    compute = tc / possible
    fig, (ax_t, ax_e) = new_figure(1, 2, size=(9.6, 4.8))
    ax_t.fill_between(possible, 0, compute * 1e3, color=COLORS[0], alpha=0.5, label=tr("compute t_c / N"))
    ax_t.fill_between(possible, compute * 1e3, step * 1e3, color=COLORS[1], alpha=0.5,
                      label=tr("exposed ring all-reduce"))
    log2_axis(ax_t.xaxis, ns[-1])
    plain_log_axis(ax_t.yaxis, float(np.min(compute)) * 1e3 / 1.5, float(np.max(step)) * 1e3 * 1.3)
    ax_t.set(xlabel=tr("devices N"), ylabel=tr("step time [ms]"), title=tr("one step, fixed global batch (ring)"))
    for name, color, style in (("ring", COLORS[0], "-"), ("tree", COLORS[2], "--"), ("ps", COLORS[1], ":")):
        eta = alpha_beta.data_parallel_efficiency(tc, possible, m, b, a, algorithm=name, overlap=overlap)
        label = {"ring": tr("ring all-reduce: 2(N − 1) steps of m/N bytes"),
                 "tree": tr("naive tree: 2⌈log₂N⌉ steps of all m bytes"),
                 "ps": tr("1 parameter server: N·m bytes through its link")}[name]
        ax_e.plot(possible, eta, style, color=color, label=label)
    weak = alpha_beta.data_parallel_efficiency(tc, ns, m, b, a, overlap=overlap, scaling="weak")
    ax_e.plot(ns, weak, "-", color="0.45", lw=1.2, label=tr("ring, weak scaling (batch grows with N)"))
    if batch is not None and batch < ns[-1]:
        for ax in (ax_t, ax_e):
            ax.axvspan(batch, ns[-1], color="0.9", zorder=0)
        ax_e.text(0.98, 0.03, tr("N > B = {batch}:\nfewer samples\nthan devices", batch=batch), color="0.3",
                  transform=ax_e.transAxes, ha="right", va="bottom")
    if batch is None or devices <= batch:
        eta_now = alpha_beta.data_parallel_efficiency(tc, devices, m, b, a, overlap=overlap)
        ax_e.plot([devices], [eta_now], "o", color=COLORS[0], markersize=8)
        right = devices <= ns[-1] ** 0.75  # near the right end: write it left of the marker
        ax_e.annotate(f"η({int(devices)}) = {eta_now:.2f}", (devices, eta_now), textcoords="offset points",
                      xytext=(8 if right else -8, 8), ha="left" if right else "right", in_layout=False,
                      bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.85))
    else:  # refuse: strong scaling cannot give every device a sample
        ax_e.text(0.98, 0.6, tr("N = {devices}:\nimpossible\nwith B = {batch}", devices=int(devices), batch=batch),
                  color=COLORS[1], transform=ax_e.transAxes, ha="right", va="center",
                  bbox=dict(boxstyle="square,pad=0.2", fc="white", ec=COLORS[1], alpha=0.9))
    log2_axis(ax_e.xaxis, ns[-1])
    ax_e.set_ylim(0, 1.05)
    ax_e.set(xlabel=tr("devices N"), ylabel=tr("parallel efficiency η(N)"),
             title=tr("{size} gradients, {bandwidth}, {latency}", size=format_bytes(m),
                      bandwidth=f"{bandwidth_gb_s:g} GB/s", latency=f"{latency_us:g} µs"))
    for ax in (ax_t, ax_e):  # below the axes, off the curves
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), borderaxespad=0.0)
    return fig


# ------------------------------------------------------------------ large batch
#: One look per run: colour, line style and marker, so that no two runs differ by a hue
#: alone (no blue beside sky blue, no orange beside yellow).
_RUN_STYLES = (
    (COLORS[0], "-", "o"), (COLORS[1], "--", "s"), (COLORS[2], "-.", "^"),
    (COLORS[3], ":", "D"), (COLORS[7], "-", "v"), (COLORS[4], "--", "P"),
)


@styled
def large_batch_figure(runs: Sequence):
    """Training loss and test accuracy against epochs (top) and against steps (bottom).

    The per-step loss panel uses every step's loss (a running mean over a third of an
    epoch, to tame the small batch's noise); accuracies are measured after each epoch.
    Every run has its own colour, line style and marker; the legend is under the panels.

    Parameters
    ----------
    runs : sequence of course_lib.critical_batch.BatchRun
        From :func:`course_lib.critical_batch.large_batch_experiment`.
    """
    from matplotlib.ticker import MaxNLocator

    from ..critical_batch import BatchRun

    runs = check_sequence(runs, "runs", BatchRun, "a BatchRun (from large_batch_experiment)")
    if not runs:
        raise ValueError("runs must not be empty")
    fig, axes = new_figure(2, 2, size=(9.6, 8.0))
    for i, run in enumerate(runs):
        color, ls, marker = _RUN_STYLES[i % len(_RUN_STYLES)]
        epochs = np.arange(1, run.epochs + 1)
        every = max(1, run.epochs // 10)
        look = dict(color=color, ls=ls, marker=marker, markevery=every, markersize=6)
        axes[0, 0].plot(epochs, run.epoch_loss, label=run.label, **look)
        axes[0, 1].plot(epochs, run.test_accuracy, **look)
        steps, smooth = _smoothed_step_loss(run)
        axes[1, 0].plot(steps, smooth, color=color, ls=ls)
        axes[1, 1].plot(run.steps, run.test_accuracy, **look)
    steps_max = max(max(run.steps) for run in runs)
    for row, xlabel in ((0, tr("epoch")), (1, tr("steps (updates), log scale"))):
        axes[row, 0].set(xlabel=xlabel, ylabel=tr("training loss") if row == 0 else
                         tr("training loss per step\n(running mean)"))
        axes[row, 0].set_yscale("log")
        axes[row, 1].set(xlabel=xlabel, ylabel=tr("test accuracy"))
        axes[row, 1].set_ylim(0, 1)
    for ax in axes[0]:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[1]:
        plain_log_axis(ax.xaxis, 0.8, steps_max * 1.25)
    axes[0, 0].set_title(tr("against epochs (same data seen)"))
    axes[0, 1].set_title(tr("against epochs"))
    axes[1, 0].set_title(tr("against steps (same number of updates)"))
    axes[1, 1].set_title(tr("against steps (after each epoch)"))
    fig.legend(loc="outside lower center", ncol=2)
    return fig


def _smoothed_step_loss(run) -> tuple[np.ndarray, np.ndarray]:
    """Per-step loss with a trailing running mean over a third of an epoch's steps."""
    loss = np.asarray(run.loss, float)
    window = max(1, run.steps_per_epoch // 3)
    csum = np.cumsum(np.insert(loss, 0, 0.0))
    idx = np.arange(1, loss.size + 1)
    start = np.maximum(idx - window, 0)
    return idx, (csum[idx] - csum[start]) / (idx - start)
