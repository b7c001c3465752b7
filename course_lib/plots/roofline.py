"""Figure of the roofline model (:mod:`course_lib.roofline`).

Pure: a :class:`~course_lib.roofline.Roofline`, operators and measured rates in,
:class:`matplotlib.figure.Figure` out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .._validate import check_real, check_sequence, check_type
from ..i18n import tr
from ..roofline import Op, Roofline
from . import COLORS, new_figure, styled

__all__ = ["roofline_figure"]

_MEMORY, _COMPUTE, _MEASURED = COLORS[1], COLORS[2], COLORS[3]


@styled
def roofline_figure(roofline: Roofline, ops: Sequence[Op] = (), *,
                    measured: Mapping[str, tuple[float, float]] | None = None, title: str = ""):
    r"""The roofline on log-log axes with operators and measured rates placed on it.

    The roof is :math:`\min(\text{peak},\ I_a \beta_{\text{mem}})`, the dotted vertical
    line the ridge point. Every operator of ``ops`` is a numbered point on the roof at
    its intensity, coloured by the roof that limits it (memory: orange, compute: green);
    operators with :math:`I_a = 0` (copies such as im2col) cannot sit on a log axis and
    are drawn as a left-pointing triangle at the left edge. Every entry of ``measured``
    (label -> (intensity in FLOP/B, rate in FLOP/s)) is an open circle with a dotted line
    up to the roof: the gap the roofline does not explain. A key beside the axes (off
    the data) names the numbers.

    Parameters
    ----------
    roofline : course_lib.roofline.Roofline
    ops : sequence of course_lib.roofline.Op
    measured : mapping of str to (float, float), optional
    title : str
        Axes title; by default the roofline's label.

    Examples
    --------
    >>> from course_lib.roofline import Roofline, gemm_op, elementwise_op
    >>> fig = roofline_figure(Roofline(100e9, 25e9), [gemm_op(512, 512, 512), elementwise_op(99)])
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()][1:]
    ['1  GEMM 512×512×512 (I_a = 85.3)', '2  element-wise (I_a = 0.125)']
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    check_type(roofline, "roofline", Roofline, "a course_lib.roofline.Roofline")
    ops = check_sequence(ops, "ops", Op, "a course_lib.roofline.Op")
    points = _measured(measured)
    check_type(title, "title", str, "a str")
    peak, bw, ridge = roofline.peak_flops, roofline.memory_bandwidth, roofline.ridge
    tera = peak >= 1e12
    scale, unit = (1e12, "TFLOP/s") if tera else (1e9, "GFLOP/s")

    xs = [op.intensity for op in ops if op.intensity > 0] + [i for _, i, _ in points] + [ridge]
    lo, hi = min(xs) / 4, max(xs) * 4
    rates = [roofline.attainable(x) for x in xs] + [r for _, _, r in points]
    bottom, top = min(min(rates), roofline.attainable(lo)) / 4, peak * 3

    fig, ax = new_figure(size=(9.6, 4.4))
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    ax.loglog(grid, [roofline.attainable(x) / scale for x in grid], color=COLORS[0], lw=2.5)
    ax.axvline(ridge, color="0.5", lw=1, ls=":")
    ax.text(ridge * 1.08, bottom * 1.4 / scale, tr("ridge point\n{intensity}", intensity=f"{ridge:.3g} FLOP/B"),
            color="0.3", va="bottom")
    ax.text(ridge / 1.12, peak * 1.6 / scale, tr("← memory-bound"), ha="right", color=_MEMORY)
    ax.text(ridge * 1.12, peak * 1.6 / scale, tr("compute-bound →"), ha="left", color=_COMPUTE)
    handles = [Line2D([], [], color=COLORS[0], lw=2.5)]
    labels = [tr("roof: peak {peak}, β_mem {bandwidth}", peak=f"{peak / scale:.3g} {unit}",
                 bandwidth=f"{bw / 1e9:.3g} GB/s")]
    placed: list[list] = []  # [x, y, numbers] of each label, x and y in axes fractions

    def place(x, y, number):
        fx = math.log(x / lo) / math.log(hi / lo)
        fy = math.log(y / bottom) / math.log(top / bottom)
        for label in placed:
            if abs(label[0] - fx) < 0.035 and abs(label[1] - fy) < 0.05:
                label[0], label[1] = min(label[0], fx), min(label[1], fy)
                label[2].append(number)  # (almost) the same point: one label "3,5"
                return
        placed.append([fx, fy, [number]])

    zeros = 0
    for k, op in enumerate(ops, start=1):
        color = _COMPUTE if roofline.bound(op) == "compute" else _MEMORY
        if op.intensity > 0:
            x, y, marker = op.intensity, roofline.attainable(op.intensity), "o"
        else:
            zeros += 1
            x, y, marker = lo * 1.05, bottom * 1.8**zeros, "<"
        ax.plot([x], [y / scale], marker, color=color, ms=8, zorder=3)
        place(x, y, str(k))
        handles.append(Line2D([], [], ls="", marker=marker, color=color, ms=7))
        shown = f"{op.intensity:.3g}" if op.intensity > 0 else tr("0: time = bytes / β_mem")
        labels.append(f"{k}  {op.name} (I_a = {shown})")
    for k, (label, x, rate) in enumerate(points, start=len(ops) + 1):
        ax.plot([x, x], [rate / scale, roofline.attainable(x) / scale], ":", color=_MEASURED, lw=1.2)
        ax.plot([x], [rate / scale], "o", mfc="white", mec=_MEASURED, mew=2, ms=8, zorder=3)
        place(x, rate, str(k))
        handles.append(Line2D([], [], ls="", marker="o", mfc="white", mec=_MEASURED, mew=2, ms=7))
        labels.append(tr("{number}  {label} (measured, I_a = {intensity})", number=k, label=label,
                         intensity=f"{x:.3g}"))
    for fx, fy, numbers in placed:
        x, y = lo * (hi / lo) ** fx, bottom * (top / bottom) ** fy
        ax.annotate(",".join(numbers), (x, y / scale), textcoords="offset points",
                    xytext=(7, -14), fontweight="bold")
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom / scale, top / scale)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    default = tr("roofline: {label}", label=roofline.label) if roofline.label else tr("roofline")
    ax.set(xlabel=tr("arithmetic intensity $I_a$ (FLOP/B)"), ylabel=tr("attainable rate ({unit})", unit=unit),
           title=title or default)
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              handletextpad=0.4)
    return fig


def _measured(measured) -> list[tuple[str, float, float]]:
    """``measured`` as (label, intensity, rate) triples, checked."""
    if measured is None:
        return []
    check_type(measured, "measured", Mapping, "a mapping of label -> (intensity, rate)")
    out = []
    for label, pair in measured.items():
        check_type(label, "measured label", str, "a str")
        if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
            raise TypeError(f"measured[{label!r}] must be a pair (intensity, rate), got {pair!r}")
        out.append((label, check_real(pair[0], f"measured[{label!r}] intensity", 0, low_open=True),
                    check_real(pair[1], f"measured[{label!r}] rate", 0, low_open=True)))
    return out
