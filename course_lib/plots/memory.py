"""Figures of memory per device: the ZeRO calculator (零冗余优化器)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import memory
from .._validate import check_count, check_int, check_positive
from . import COLORS, new_figure, styled

__all__ = ["zero_memory_figure"]

_STAGE_NAMES = ("stage 0\nreplicated", "stage 1\noptimizer states\nsharded", "stage 2\n+ gradients\nsharded",
                "stage 3\n+ parameters\nsharded")
_PARTS = (("parameters", "parameters"), ("gradients", "gradients"), ("optimizer_states", "optimizer states"))


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
    parts = list(_PARTS) + ([("activations", "activations")] if activations_gb > 0 else [])
    for i, (attr, name) in enumerate(parts):
        gb = np.array([activations_gb if attr == "activations" else getattr(s, attr) / 1e9 for s in states])
        chosen = x == zero_stage
        for sel, alpha in ((chosen, 1.0), (~chosen, 0.35)):  # one bar call each: solid, pale
            ax.bar(x[sel], gb[sel], bottom=bottom[sel], width=0.6, color=COLORS[i], alpha=alpha,
                   edgecolor="black" if alpha == 1.0 else "none", linewidth=1.2,
                   label=name if alpha == 1.0 else None)
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
    ax.set_xticks(x, _STAGE_NAMES)
    ax.get_xticklabels()[zero_stage].set_fontweight("bold")
    ax.set_xlim(-0.6, len(states) - 0.4)
    ax.set_ylim(0, ylim)
    ax.set_ylabel("memory per device [GB]")
    ax.grid(False, axis="x")
    ax.set_axisbelow(True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="solid: chosen stage")
    ax.set_title(f"{params_billion:g}B parameters on N = {devices} devices, ZeRO stage {zero_stage}:\n"
                 f"needs {memory.format_bytes(fit.total)} per device of {cap:.3g} GB: {fit.verdict}",
                 color="black" if fit.fits else COLORS[1])
    return fig
