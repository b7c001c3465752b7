"""Figures of the transformer sections: what sequence parallelism saves.

* :func:`sequence_parallel_figure` - a transformer layer's activation memory per device
  against the tensor-parallel size, without and with sequence parallelism, the
  layer-norm and dropout regions apart (:mod:`course_lib.tensor_cost`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._validate import check_int, check_type
from ..i18n import tr
from ..tensor_cost import activation_bytes, layer_norm_dropout_bytes
from . import COLORS, new_figure, styled

__all__ = ["sequence_parallel_figure"]


@styled
def sequence_parallel_figure(seq_length: int, micro_batch: int, hidden: int, heads: int,
                             tensors: Sequence[int] = (1, 2, 4, 8), *, title: str = ""):
    """Activation bytes of one layer per device for each tensor size, two bars each:
    tensor parallelism alone, and with sequence parallelism (Korthikanti et al. 2023, Table 2);
    the layer-norm and dropout part of each bar drawn apart.

    Examples
    --------
    >>> fig = sequence_parallel_figure(2048, 1, 12288, 96)
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    ['layer norms and dropouts', 'the rest (split by the tensor split)']
    >>> len(fig.axes[0].get_xticklabels())
    4
    """
    check_type(title, "title", str, "a str")
    check_type(tensors, "tensors", (list, tuple, np.ndarray), "a sequence of tensor sizes")
    sizes = [check_int(t, f"tensors[{i}]", 1, 2**20) for i, t in enumerate(tensors)]
    if not sizes:
        raise ValueError("tensors must name at least one tensor size")
    args = (seq_length, micro_batch, hidden, heads)
    fig, ax = new_figure(size=(9.0, 4.2))
    x, width, gb = np.arange(len(sizes)), 0.38, 1e9
    for k, sp in enumerate((False, True)):
        region = np.array([layer_norm_dropout_bytes(*args[:3], tensor=t, sequence_parallel=sp) for t in sizes])
        total = np.array([activation_bytes(*args, tensor=t, sequence_parallel=sp) for t in sizes])
        pos = x + (k - 0.5) * width
        ax.bar(pos, region / gb, width, color=COLORS[1], hatch="//" if sp else None, edgecolor="white",
               label=tr("layer norms and dropouts") if k == 0 else None)
        ax.bar(pos, (total - region) / gb, width, bottom=region / gb, color=COLORS[0],
               hatch="//" if sp else None, edgecolor="white",
               label=tr("the rest (split by the tensor split)") if k == 0 else None)
        for p, v in zip(pos, total, strict=True):
            ax.text(p, v / gb, tr("with SP") if sp else "TP", ha="center", va="bottom", fontsize=10)
    ax.set_xticks(x, [f"$N_t$ = {t}" for t in sizes])
    ax.set(ylabel=tr("activations per layer and device (GB)"),
           title=title or tr("one layer: L = {length}, b = {micro_batch}, h = {hidden}, a = {heads}; "
                             "TP: tensor parallel, SP: + sequence parallel", length=f"{seq_length:,}",
                             micro_batch=micro_batch, hidden=f"{hidden:,}", heads=heads))
    ax.margins(y=0.12)
    ax.legend(loc="upper right", frameon=False)
    return fig
