"""Exercises of chapter 04 (intra-operator parallelism).

Expected values come from :mod:`course_lib.im2col`, :mod:`course_lib.cost`,
:mod:`course_lib.dataflow`, :mod:`course_lib.roofline` and :mod:`course_lib.conv_algorithms`;
the layer of exercises 1-4 is :data:`LAYER`, the network of exercise 5 is
:data:`DEEP_CNN_LAYERS` (deeper than the running example's :data:`CNN_LAYERS`, whose critical
path section 2 prints), the device and GEMM of exercise 6 are :data:`DEVICE` and
:data:`THIN_GEMM`, the channels of exercise 7 are :data:`WINOGRAD_LAYER`.
GEMM sizes are written ℳ x 𝒦 by 𝒦 x 𝒩 as in the notebook (``gemm_sizes`` keys M, K, N).
"""

from __future__ import annotations

from ..conv_algorithms import multiplication_count
from ..cost import conv2d_macs
from ..dataflow import training_graph
from ..im2col import conv_output_shape, gemm_sizes
from ..roofline import Roofline, gemm_op
from . import Result, check, check_count

__all__ = [
    "LAYER",
    "CNN_LAYERS",
    "DEEP_CNN_LAYERS",
    "ex1_output_shape",
    "ex2_im2col_size",
    "ex3_macs",
    "ex4_depthwise_macs",
    "ex5_critical_path",
    "DEVICE",
    "THIN_GEMM",
    "ex6_attainable_rate",
    "WINOGRAD_LAYER",
    "ex7_winograd_multiplications",
]

#: The convolution of exercises 1-4: a ResNet-style down-sampling layer.
LAYER = dict(batch=16, c_in=64, c_out=128, image=56, kernel=3, stride=2, padding=1)
#: The layers of the convolutional running example (course_lib.cnn.CNN).
CNN_LAYERS = (("conv0", "conv"), ("conv1", "conv"), ("fc", "linear"))
#: Exercise 5: a deeper CNN, seven convolutions and a linear classifier.
DEEP_CNN_LAYERS = tuple((f"conv{i}", "conv") for i in range(7)) + (("fc", "linear"),)
#: Exercise 6: a hypothetical accelerator (peak in TFLOP/s, memory bandwidth in GB/s) ...
DEVICE = dict(peak_tflops=20.0, memory_bandwidth_gb_s=800.0)
#: ... and the float32 GEMM it runs, ℳ x 𝒦 by 𝒦 x 𝒩 with a thin inner dimension 𝒦.
THIN_GEMM = dict(m=2048, k=16, n=2048)
#: Exercise 7: the channels of a 3 x 3, stride-1 layer computed with Winograd's F(2 x 2, 3 x 3).
WINOGRAD_LAYER = dict(c_in=64, c_out=128)


def _out_hw(stride=LAYER["stride"], padding=LAYER["padding"]) -> tuple[int, int]:
    shape = (LAYER["batch"], LAYER["c_in"], LAYER["image"], LAYER["image"])
    return conv_output_shape(shape, LAYER["kernel"], stride, padding)


def ex1_output_shape(answer) -> Result:
    """Output shape (B, C_o, H_o, W_o) of the convolution :data:`LAYER`."""
    expected = (LAYER["batch"], LAYER["c_out"], *_out_hw())
    return check(
        answer,
        expected,
        rtol=0,
        name="output shape (B, C_o, H_o, W_o)",
        hint="H_o = (H + 2*padding - kernel) // stride + 1, and the same for W_o.",
        mistakes={
            (LAYER["batch"], LAYER["c_out"], *_out_hw(padding=0)): "You left out the padding.",
            (LAYER["batch"], LAYER["c_out"], *_out_hw(stride=1)): "You left out the stride.",
            (LAYER["batch"], LAYER["c_in"], *_out_hw()): "The output has C_o channels, not C_i.",
        },
    )


def ex2_im2col_size(answer) -> Result:
    """Shape (ℳ, 𝒦) of the im2col matrix of :data:`LAYER` (the chapter's orientation)."""
    s = gemm_sizes(LAYER["batch"], LAYER["image"], LAYER["kernel"], LAYER["stride"],
                   LAYER["c_in"], LAYER["c_out"], LAYER["padding"])
    return check(
        answer,
        (s["M"], s["K"]),
        rtol=0,
        name="im2col matrix (ℳ, 𝒦)",
        hint="ℳ = B x H_o x W_o (one row per output pixel), 𝒦 = C_i x k_h x k_w.",
        mistakes={
            (s["K"], s["M"]): "That is (𝒦, ℳ): torch's unfold layout. The chapter's figure has one "
            "row per output pixel.",
            (s["M"], LAYER["c_out"] * LAYER["kernel"] ** 2): "𝒦 counts INPUT channels x kernel taps.",
        },
    )


def ex3_macs(answer) -> Result:
    """Multiply-accumulates of :data:`LAYER`'s forward pass."""
    macs = conv2d_macs(
        LAYER["c_in"], LAYER["c_out"], LAYER["kernel"], LAYER["image"],
        stride=LAYER["stride"], padding=LAYER["padding"], batch=LAYER["batch"],
    )
    return check(
        answer,
        macs,
        name="MACs of the forward pass",
        hint="the GEMM of ℳ x 𝒦 by 𝒦 x 𝒩 costs ℳ·𝒦·𝒩 multiply-accumulates.",
        mistakes={2 * macs: "That is the FLOP count: 1 MAC = 2 FLOPs."},
    )


def ex4_depthwise_macs(answer) -> Result:
    """MACs of a depthwise version of :data:`LAYER`: groups = C_i = C_o = 64."""
    c = LAYER["c_in"]
    macs = conv2d_macs(
        c, c, LAYER["kernel"], LAYER["image"], stride=LAYER["stride"],
        padding=LAYER["padding"], groups=c, batch=LAYER["batch"],
    )
    dense = conv2d_macs(c, c, LAYER["kernel"], LAYER["image"], stride=LAYER["stride"],
                        padding=LAYER["padding"], batch=LAYER["batch"])
    return check(
        answer,
        macs,
        name="MACs of the depthwise convolution",
        hint="with groups = g, each output channel sees only C_i / g input channels: 𝒦 = (C_i/g) x k_h x k_w.",
        mistakes={dense: f"That is the dense {c} -> {c} convolution; depthwise (groups = {c}) "
                  f"divides K by {c}."},
    )


def ex5_critical_path(answer) -> Result:
    """Fewest steps of one training step of :data:`DEEP_CNN_LAYERS` with unlimited devices."""
    graph = training_graph(DEEP_CNN_LAYERS)
    layers = len(DEEP_CNN_LAYERS)
    return check_count(
        answer,
        graph.critical_path,
        name="steps with unlimited devices",
        noun="step",
        round_up=False,
        unit="steps",
        hint="count the operators on the longest chain of dependencies: forward, loss, backward "
        "down to the first layer's weight gradient, then its update.",
        mistakes={
            len(graph.ops): "That is every operator one after the other (one device).",
            training_graph(CNN_LAYERS).critical_path: f"That is the critical path of section 2's "
            f"{len(CNN_LAYERS)}-layer CNN; this network has {layers} layers, and the chain grows "
            "with every layer, forward and backward.",
        },
    )


def ex6_attainable_rate(answer) -> Result:
    """Attainable rate in TFLOP/s of :data:`THIN_GEMM` (float32) on :data:`DEVICE`."""
    roof = Roofline(DEVICE["peak_tflops"] * 1e12, DEVICE["memory_bandwidth_gb_s"] * 1e9)
    op = gemm_op(**THIN_GEMM)
    rate = roof.attainable(op.intensity) / 1e12
    return check(
        answer,
        rate,
        name="attainable rate",
        unit="TFLOP/s",
        hint="I_a = 2·ℳ·𝒦·𝒩 FLOPs / ((ℳ𝒦 + 𝒦𝒩 + ℳ𝒩) x 4 bytes); the roof is min(peak, I_a x β_mem).",
        mistakes={
            DEVICE["peak_tflops"]: "That is the peak. Compute I_a first (4 bytes per float32 "
            "number, the result written too): is it left or right of the ridge point peak / β_mem?",
            op.intensity: "That is I_a in FLOP/B, not a rate: multiply it by β_mem (and keep the "
            "smaller of that and the peak).",
            roof.attainable(op.intensity / 2) / 1e12: "That counts MACs: 1 MAC = 2 FLOPs.",
            rate * 1e3: "Right rate, but in GFLOP/s: the answer is in TFLOP/s.",
            rate * 1e12: "Right rate, but in FLOP/s: the answer is in TFLOP/s.",
        },
    )


def ex7_winograd_multiplications(answer) -> Result:
    """Multiplications of F(2 x 2, 3 x 3)'s elementwise stage for ONE 2 x 2 output tile of a
    layer with :data:`WINOGRAD_LAYER`'s channels (every output channel, from every input one)."""
    c_in, c_out = WINOGRAD_LAYER["c_in"], WINOGRAD_LAYER["c_out"]
    tile = ((1, c_in, 4, 4), (c_out, c_in, 3, 3))  # a 4 x 4 input tile -> one 2 x 2 output tile
    expected = multiplication_count("winograd_f2", *tile)
    per_pair = expected // (c_in * c_out)  # products per channel pair
    return check_count(
        answer,
        expected,
        name="multiplications per output tile",
        noun="multiplication",
        round_up=False,
        hint="the transformed kernel U = G g G^T and the transformed input tile V = B^T d B are "
        "4 x 4: one product per point, for every pair of input and output channels.",
        mistakes={
            multiplication_count("im2col", *tile): f"That is the direct count: 4 outputs x 9 taps = "
            f"36 products per channel pair. F(2 x 2, 3 x 3) multiplies the {per_pair} transformed "
            "values of the 4 x 4 tile instead (the transforms only add and subtract).",
            per_pair: f"That is one pair of channels; the tile needs all {c_in} x {c_out} of them.",
            36: f"That is the direct count for one channel pair (4 outputs x 9 taps), and the tile "
            f"needs all {c_in} x {c_out} pairs.",
            per_pair * c_in: f"That is one output channel; the layer has {c_out}.",
            per_pair * c_out: f"That is one input channel; the layer has {c_in}.",
            9 * expected: "The 9 taps are already inside the transformed kernel G g G^T (computed "
            "once per kernel): count one product per transform point, not per tap.",
            2 * expected: "That counts FLOPs (a multiply and an add); the question counts multiplications.",
        },
    )
