"""Figures of memory per device: the ZeRO calculator (零冗余优化器), ZeRO stages run on the cores,
loss scaling for float16 (混合精度), activation checkpointing (激活重计算)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import memory
from .._validate import check_array, check_count, check_int, check_positive, check_type
from ..i18n import N_, tr
from . import COLORS, new_figure, styled

__all__ = ["checkpoint_figure", "loss_scale_figure", "zero_memory_figure", "zero_run_figure"]

_STAGE_NAMES = (N_("stage 0\nreplicated"), N_("stage 1\noptimizer states\nsharded"),
                N_("stage 2\n+ gradients\nsharded"), N_("stage 3\n+ parameters\nsharded"))
#: (attribute or key, legend label, legend label of a measured bar); labels translated where drawn.
_PARTS = (("parameters", N_("parameters"), N_("parameters (measured)")),
          ("gradients", N_("gradients"), N_("gradients (measured)")),
          ("optimizer_states", N_("optimizer states"), N_("optimizer states (measured)")))


@styled
def zero_memory_figure(params_billion: float, devices: int, zero_stage: int, device_id: str, *,
                       hardware: Sequence, activations_gb: float = 0.0, **byte_sizes: float):
    """Calculator: memory per device of every ZeRO stage, against one device's memory.

    Stacked bars of parameters, gradients and optimizer states per device
    (:func:`course_lib.memory.model_state_bytes`, mixed-precision Adam unless
    ``byte_sizes`` say otherwise) for stages 0-3 on ``devices`` data-parallel devices;
    the chosen ``zero_stage`` is drawn solid, the others pale. The dashed line is the
    memory of ``device_id`` in ``hardware`` (``load_hardware()``); the title gives the
    verdict of :func:`course_lib.memory.device_fit` for the chosen stage.

    Parameters
    ----------
    params_billion : float
        Model parameters in billions (> 0; the ZeRO paper's Figure 1: 7.5).
    devices : int
        Data-parallel devices ``N_d`` >= 1 (a slider's float is rounded down).
    zero_stage : {0, 1, 2, 3}
    device_id : str
        The ``device_id`` column of ``hardware``.
    activations_gb : float
        Activation memory per device to add on top, GB (>= 0).
    **byte_sizes
        ``param_bytes``, ``grad_bytes``, ``k`` of :func:`course_lib.memory.model_state_bytes`.

    Examples
    --------
    >>> from course_lib.datasets import load_hardware
    >>> fig = zero_memory_figure(7.5, 64, 1, "a100_sxm_80gb", hardware=load_hardware())
    >>> fig.axes[0].get_title().endswith("fits")
    True
    """
    params_billion = check_positive(params_billion, "params_billion")
    devices = check_count(devices, "devices")
    zero_stage = check_int(zero_stage, "zero_stage", 0, 3)
    activations_gb = check_positive(activations_gb, "activations_gb", allow_zero=True)
    n = params_billion * 1e9
    fit = memory.device_fit(n, devices, zero_stage, device_id, hardware=hardware,
                            activation_bytes=activations_gb * 1e9, **byte_sizes)
    states = [memory.model_state_bytes(n, devices, k, **byte_sizes) for k in memory.ZERO_STAGES]

    fig, ax = new_figure(size=(9.0, 4.6))
    x = np.arange(len(states))
    bottom = np.zeros(len(states))
    parts = [part[:2] for part in _PARTS] + ([("activations", N_("activations"))] if activations_gb > 0 else [])
    for i, (attr, name) in enumerate(parts):
        gb = np.array([activations_gb if attr == "activations" else getattr(s, attr) / 1e9 for s in states])
        chosen = x == zero_stage
        for sel, alpha in ((chosen, 1.0), (~chosen, 0.35)):  # one bar call each: solid, pale
            ax.bar(x[sel], gb[sel], bottom=bottom[sel], width=0.6, color=COLORS[i], alpha=alpha,
                   edgecolor="black" if alpha == 1.0 else "none", linewidth=1.2,
                   label=tr(name) if alpha == 1.0 else None)
        bottom += gb
    cap = fit.capacity / 1e9
    top = bottom.max()
    ylim = 1.15 * max(min(top, 3.0 * cap), cap)  # bars far above the device are cut, their value kept
    for k in x:
        cut = bottom[k] > ylim
        ax.text(k, ylim * 0.98 if cut else bottom[k] + 0.01 * ylim, ("\u2191 " if cut else "") + memory.format_bytes(bottom[k] * 1e9),
                ha="center", va="top" if cut else "bottom",
                fontweight="bold" if k == zero_stage else "normal",
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1.0))
    ax.axhline(cap, color="black", ls="--", lw=1.2,
               label=f"{fit.device}\n{fit.capacity / 2**30:g} GiB = {cap:.3g} GB")
    ax.set_xticks(x, [tr(name) for name in _STAGE_NAMES])
    ax.get_xticklabels()[zero_stage].set_fontweight("bold")
    ax.set_xlim(-0.6, len(states) - 0.4)
    ax.set_ylim(0, ylim)
    ax.set_ylabel(tr("memory per device [GB]"))
    ax.grid(False, axis="x")
    ax.set_axisbelow(True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title=tr("solid: chosen stage"))
    fields = dict(params=f"{params_billion:g}B", devices=devices, stage=zero_stage,
                  sent=memory.format_bytes(fit.step_bytes), needed=memory.format_bytes(fit.total),
                  capacity=f"{cap:.3g} GB")
    if fit.fits:  # the sentence of each verdict (fit.verdict: "fits", "does not fit")
        title = tr("{params} parameters on N = {devices} devices, ZeRO stage {stage} (sends {sent} per step):\n"
                   "needs {needed} per device of {capacity}: fits", **fields)
    else:
        title = tr("{params} parameters on N = {devices} devices, ZeRO stage {stage} (sends {sent} per step):\n"
                   "needs {needed} per device of {capacity}: does not fit", **fields)
    ax.set_title(title, color="black" if fit.fits else COLORS[1])
    return fig


@styled
def zero_run_figure(memory_by_stage: Sequence, bytes_by_stage: Sequence[float], n_params: int, *,
                    param_bytes: float = 4.0, grad_bytes: float = 4.0, k: float = 4.0):
    """ZeRO stages 0-3 run on the cores: what the fullest worker held and what a step moved.

    Left: stacked bars of the parameters, gradients and optimizer states the fullest worker
    of each stage held, measured (``TrainResult.memory`` of ``train_data_parallel(...,
    zero_stage=s)``); black diamonds: :func:`course_lib.memory.model_state_bytes` for the
    same ``N`` workers. Right: bytes per step over one all-reduce's payload (``n_params x
    grad_bytes``), measured (bars) and :func:`course_lib.memory.zero_comm_factor` (diamonds).

    Parameters
    ----------
    memory_by_stage : sequence of 4 sequences of dict
        For stages 0-3, each worker's ``{"parameters", "gradients", "optimizer_states"}`` bytes.
    bytes_by_stage : sequence of 4 floats
        Bytes moved per step by each stage's run (``bytes_per_step[0]``).
    n_params : int
        Parameters of the model (> 0).
    param_bytes, grad_bytes, k : float
        Bytes per parameter of the run (float32 SGD with momentum: 4, 4, 4).

    Examples
    --------
    >>> held = [[{"parameters": 40, "gradients": 40, "optimizer_states": 40}]] * 4
    >>> zero_run_figure(held, [40.0] * 4, 10).axes[1].get_ylabel()
    'bytes per step / all-reduce payload'
    """
    check_type(memory_by_stage, "memory_by_stage", (list, tuple), "a list of 4 lists of dicts")
    check_type(bytes_by_stage, "bytes_by_stage", (list, tuple, np.ndarray), "4 numbers")
    if len(memory_by_stage) != 4 or len(bytes_by_stage) != 4:
        raise ValueError(f"memory_by_stage and bytes_by_stage must hold stages 0-3 (4 entries), got "
                         f"{len(memory_by_stage)} and {len(bytes_by_stage)}")
    n_params = check_int(n_params, "n_params", 1)
    workers = len(memory_by_stage[0])
    fig, (ax, bx) = new_figure(1, 2, size=(9.6, 4.2), gridspec_kw={"width_ratios": [2.2, 1]})
    x = np.arange(4)
    fullest = [max(run, key=lambda m: sum(m[a] for a, _, _ in _PARTS)) for run in memory_by_stage]
    bottom = np.zeros(4)
    for i, (attr, _, measured) in enumerate(_PARTS):
        kb = np.array([m[attr] / 1e3 for m in fullest])
        ax.bar(x, kb, bottom=bottom, width=0.6, color=COLORS[i], label=tr(measured))
        bottom += kb
    formula = [memory.model_state_bytes(n_params, workers, s, param_bytes=param_bytes, grad_bytes=grad_bytes,
                                        k=k).total / 1e3 for s in memory.ZERO_STAGES]
    ax.plot(x, formula, "D", color="black", label=f"model_state_bytes (N = {workers})")
    for s in x:
        ax.text(s, bottom[s] * 1.02, memory.format_bytes(bottom[s] * 1e3), ha="center", va="bottom")
    ax.set_xticks(x, [tr("stage {stage}", stage=s) for s in x])
    ax.set_ylim(0, 1.2 * max(bottom.max(), max(formula)))
    ax.set_ylabel(tr("held by the fullest worker [kB]"))
    ax.legend(loc="upper right", frameon=False)
    ax.grid(False, axis="x")
    payload = n_params * grad_bytes
    ratio = np.asarray(bytes_by_stage, dtype=float) / payload
    bx.bar(x, ratio, width=0.6, color=COLORS[5], label=tr("measured"))
    bx.plot(x, [memory.zero_comm_factor(s) for s in x], "D", color="black", label="zero_comm_factor")
    for s in x:
        bx.text(s, ratio[s] + 0.03, f"{ratio[s]:g}", ha="center", va="bottom")
    bx.set_xticks(x, [str(s) for s in x])
    bx.set_xlabel(tr("ZeRO stage"))
    bx.set_ylim(0, 2.0)
    bx.set_ylabel(tr("bytes per step / all-reduce payload"))
    bx.legend(loc="upper left", frameon=False)
    bx.grid(False, axis="x")
    fig.suptitle(tr("ZeRO on {workers} worker processes: the model states shrink, stage 3 moves 1.5 times the bytes",
                    workers=workers))
    return fig


@styled
def loss_scale_figure(log2_scales: Sequence[float], flushed: Sequence[float], overflow: Sequence[int]):
    """Loss scaling: the share of gradients float16 flushes to zero against the scale.

    ``flushed[i]`` is the share of non-zero activation gradients that became 0 in float16
    with loss scale ``2 ** log2_scales[i]`` (:func:`course_lib.precision.gradient_underflow`);
    scales whose gradients overflowed (``overflow[i] > 0``) are shaded.

    Examples
    --------
    >>> fig = loss_scale_figure([0, 8, 16], [0.02, 0.0, 0.0], [0, 0, 3])
    >>> fig.axes[0].get_xlabel()
    'loss scale σ (log scale)'
    """
    s = check_array(log2_scales, "log2_scales", -200, 200)
    f = check_array(flushed, "flushed", 0, 1)
    o = check_array(overflow, "overflow", 0, whole=True)
    if not (s.ndim == f.ndim == o.ndim == 1 and s.size == f.size == o.size >= 1):
        raise ValueError(f"log2_scales, flushed and overflow must be 1-d of one length, got {s.shape}, "
                         f"{f.shape}, {o.shape}")
    fig, ax = new_figure(size=(7.6, 3.8))
    ax.plot(s, 100 * f, "o-", color=COLORS[0], label=tr("activation gradients flushed to 0 in float16"))
    if (o > 0).any():
        first = s[o > 0].min()
        ax.axvspan(first - 0.5, s.max() + 0.5, color=COLORS[1], alpha=0.2, label=tr("overflow: gradients > 65,504"))
    ax.set_xticks(s[:: max(1, s.size // 8)], [f"$2^{{{v:g}}}$" for v in s[:: max(1, s.size // 8)]])
    ax.set_xlabel(tr("loss scale σ (log scale)"))
    ax.set_ylabel(tr("flushed to zero [%]"))
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", frameon=False)
    ax.set_title(tr("Scaling the loss lifts small gradients into float16's range, until the largest overflow"))
    return fig


@styled
def checkpoint_figure(segments: Sequence[int], stored: Sequence[float], traced: Sequence[float],
                      formula: Sequence[float], everything: float, n_layers: int):
    """Activation checkpointing: peak activation memory against the number of segments.

    Counted peak of the held arrays (bars), :func:`course_lib.memory.mlp_activation_bytes`
    (diamonds), the :mod:`tracemalloc` peak (line), all bytes; the dashed line is the plain
    backward's ``everything``; the dotted line marks :math:`\\sqrt{n_{\\text{layers}}}` segments.

    Examples
    --------
    >>> fig = checkpoint_figure([1, 2, 3, 4], [8e6, 4e6, 3.5e6, 8e6], [9e6, 6e6, 5e6, 9e6],
    ...                         [8e6, 4e6, 3.5e6, 8e6], 8e6, 4)
    >>> fig.axes[0].get_xlabel()
    'segments n_ckpt (checkpoints)'
    """
    k = check_array(segments, "segments", 1, whole=True)
    arrays = [check_array(a, name, 0) / 1e6 for a, name in ((stored, "stored"), (traced, "traced"), (formula, "formula"))]
    if not all(a.shape == k.shape for a in arrays) or k.ndim != 1 or k.size < 1:
        raise ValueError("segments, stored, traced and formula must be 1-d of one length")
    everything = check_positive(everything, "everything") / 1e6
    n_layers = check_int(n_layers, "n_layers", 1)
    fig, ax = new_figure(size=(8.0, 4.0))
    ax.bar(k, arrays[0], width=0.7, color=COLORS[0], label=tr("held activations, counted"))
    ax.plot(k, arrays[2], "D", color="black", label="mlp_activation_bytes(segments=n_ckpt)")
    ax.plot(k, arrays[1], "-", color=COLORS[1], lw=2, label=tr("tracemalloc peak (with temporaries)"))
    ax.axhline(everything, color="black", ls="--", lw=1.2, label=tr("plain backward: every activation"))
    ax.axvline(math.sqrt(n_layers), ymax=0.72, color=COLORS[2], ls=":", lw=2,
               label=f"n_ckpt = sqrt(n_layers) = {math.sqrt(n_layers):.3g}")
    ax.set_xticks(k)
    ax.set_xlabel(tr("segments n_ckpt (checkpoints)"))
    ax.set_ylabel(tr("peak activation memory [MB]"))
    ax.set_ylim(0, 1.4 * max(everything, arrays[1].max()))
    ax.legend(loc="upper center", ncol=2, frameon=False)
    ax.grid(False, axis="x")
    ax.set_title(tr("{layers} layers: least memory near sqrt(n_layers) segments, for one more forward pass",
                    layers=n_layers))
    return fig
