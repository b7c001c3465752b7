"""Exercises of chapter 06 (one operator, several algorithms: Winograd, the roofline).

Expected values come from :mod:`course_lib.conv.algorithms` and :mod:`course_lib.roofline`;
the channels of exercise 1 are :data:`WINOGRAD_LAYER`, the device of exercises 2 and 3 is
:data:`DEVICE`, the GEMM of exercise 2 :data:`THIN_GEMM`, the update of exercise 3
:data:`UPDATE`. GEMM sizes are written ℳ x 𝒦 by 𝒦 x 𝒩 as in the notebook.
"""

from __future__ import annotations

from ..conv.algorithms import multiplication_count
from ..i18n import tr
from ..roofline import Roofline, elementwise_op, gemm_op
from . import Result, check, check_count

__all__ = [
    "WINOGRAD_LAYER",
    "ex1_winograd_multiplications",
    "DEVICE",
    "THIN_GEMM",
    "ex2_attainable_rate",
    "UPDATE",
    "ex3_update_time",
]

#: Exercise 1: the channels of a 3 x 3, stride-1 layer computed with Winograd's F(2 x 2, 3 x 3).
WINOGRAD_LAYER = dict(c_in=64, c_out=128)
#: Exercises 2 and 3: a hypothetical accelerator (peak in TFLOP/s, memory bandwidth in GB/s) ...
DEVICE = dict(peak_tflops=20.0, memory_bandwidth_gb_s=800.0)
#: ... exercise 2: the float32 GEMM it runs, ℳ x 𝒦 by 𝒦 x 𝒩 with a thin inner dimension 𝒦 ...
THIN_GEMM = dict(m=2048, k=16, n=2048)
#: ... exercise 3: the plain SGD update w <- w - γ g of a model, float32, on the same device.
UPDATE = dict(params=250_000_000, bytes_per_number=4)


def _roof() -> Roofline:
    return Roofline(DEVICE["peak_tflops"] * 1e12, DEVICE["memory_bandwidth_gb_s"] * 1e9)


def ex1_winograd_multiplications(answer) -> Result:
    """Multiplications of F(2 x 2, 3 x 3)'s elementwise stage for ONE 2 x 2 output tile of a
    layer with :data:`WINOGRAD_LAYER`'s channels (every output channel, from every input one)."""
    c_in, c_out = WINOGRAD_LAYER["c_in"], WINOGRAD_LAYER["c_out"]
    tile = ((1, c_in, 4, 4), (c_out, c_in, 3, 3))  # a 4 x 4 input tile -> one 2 x 2 output tile
    expected = multiplication_count("winograd_f2", *tile)
    per_pair = expected // (c_in * c_out)  # products per channel pair
    return check_count(
        answer,
        expected,
        name=tr("multiplications per output tile"),
        noun="multiplication",
        round_up=False,
        hint=tr("the transformed kernel G_w w G_w^T and the transformed input tile B_x^T x B_x are "
                "4 x 4: one product per point, for every pair of input and output channels."),
        mistakes={
            multiplication_count("im2col", *tile): tr(
                "That is the direct count: 4 outputs x 9 taps = 36 products per channel pair. F(2 x 2, 3 x 3) "
                "multiplies the {pair} transformed values of the 4 x 4 tile instead (the transforms only add "
                "and subtract).", pair=per_pair),
            per_pair: tr("That is one pair of channels; the tile needs all {cin} x {cout} of them.", cin=c_in,
                         cout=c_out),
            36: tr("That is the direct count for one channel pair (4 outputs x 9 taps), and the tile "
                   "needs all {cin} x {cout} pairs.", cin=c_in, cout=c_out),
            per_pair * c_in: tr("That is one output channel; the layer has {cout}.", cout=c_out),
            per_pair * c_out: tr("That is one input channel; the layer has {cin}.", cin=c_in),
            9 * expected: tr("The 9 taps are already inside the transformed kernel G_w w G_w^T (computed "
                             "once per kernel): count one product per transform point, not per tap."),
            2 * expected: tr("That counts FLOPs (a multiply and an add); the question counts multiplications."),
        },
    )


def ex2_attainable_rate(answer) -> Result:
    """Attainable rate in TFLOP/s of :data:`THIN_GEMM` (float32) on :data:`DEVICE`."""
    roof = _roof()
    op = gemm_op(**THIN_GEMM)
    rate = roof.attainable(op.intensity) / 1e12
    return check(
        answer,
        rate,
        name=tr("attainable rate"),
        unit="TFLOP/s",
        hint=tr("I_a = 2·ℳ·𝒦·𝒩 FLOPs / ((ℳ𝒦 + 𝒦𝒩 + ℳ𝒩) x 4 bytes); the roof is min(peak, I_a x β_mem)."),
        mistakes={
            DEVICE["peak_tflops"]: tr("That is the peak. Compute I_a first (4 bytes per float32 "
                                      "number, the result written too): is it left or right of the ridge point "
                                      "peak / β_mem?"),
            op.intensity: tr("That is I_a in FLOP/B, not a rate: multiply it by β_mem (and keep the "
                             "smaller of that and the peak)."),
            roof.attainable(op.intensity / 2) / 1e12: tr("That counts MACs: 1 MAC = 2 FLOPs."),
            rate * 1e3: tr("Right rate, but in GFLOP/s: the answer is in TFLOP/s."),
            rate * 1e12: tr("Right rate, but in FLOP/s: the answer is in TFLOP/s."),
        },
    )


def ex3_update_time(answer) -> Result:
    """Least time in ms of the SGD update of :data:`UPDATE` on :data:`DEVICE` (the roofline's)."""
    roof, n, size = _roof(), UPDATE["params"], UPDATE["bytes_per_number"]
    op = elementwise_op(n, inputs=2, flops_per_element=2, itemsize=size, name="SGD update")
    ms = roof.time(op) * 1e3
    return check(
        answer,
        ms,
        name=tr("time of the update"),
        unit="ms",
        hint=tr("the update reads w and g and writes w: 3 numbers of 4 bytes per parameter, for 2 FLOPs. "
                "Its time is the larger of FLOPs / peak and bytes / β_mem."),
        mistakes={
            op.flops / roof.peak_flops * 1e3: tr("That is the time of the FLOPs at the peak; the update "
                                                 "is memory-bound (I_a far left of the ridge point): its bytes "
                                                 "take longer."),
            2 * n * size / roof.memory_bandwidth * 1e3: tr("That counts reading w and g only; the new w "
                                                           "is written back too: 3 numbers per parameter."),
            n * size / roof.memory_bandwidth * 1e3: tr("That moves each parameter once; the update reads "
                                                       "w and g and writes w."),
            3 * n * 8 / roof.memory_bandwidth * 1e3: tr("That counts 8 bytes per number (float64); the "
                                                        "update is float32."),
            3 * n / roof.memory_bandwidth * 1e3: tr("That counts one byte per number; float32 takes 4."),
        },
    )
