"""Exercises of chapter 04 (intra-operator parallelism).

Expected values come from :mod:`course_lib.im2col`, :mod:`course_lib.cost` and
:mod:`course_lib.plots.conv`; the layer of exercises 1-4 is :data:`LAYER`.
"""

from __future__ import annotations

from ..cost import conv2d_macs
from ..dataflow import training_graph
from ..im2col import conv_output_shape, gemm_sizes
from . import Result, check

__all__ = [
    "LAYER",
    "CNN_LAYERS",
    "ex1_output_shape",
    "ex2_im2col_size",
    "ex3_macs",
    "ex4_depthwise_macs",
    "ex5_critical_path",
]

#: The convolution of exercises 1-4: a ResNet-style down-sampling layer.
LAYER = dict(batch=16, c_in=64, c_out=128, image=56, kernel=3, stride=2, padding=1)
#: The layers of the convolutional running example (course_lib.cnn.CNN).
CNN_LAYERS = (("conv0", "conv"), ("conv1", "conv"), ("fc", "linear"))


def _out_hw(stride=LAYER["stride"], padding=LAYER["padding"]) -> tuple[int, int]:
    shape = (LAYER["batch"], LAYER["c_in"], LAYER["image"], LAYER["image"])
    return conv_output_shape(shape, LAYER["kernel"], stride, padding)


def ex1_output_shape(answer) -> Result:
    """Output shape (N, C_out, H_out, W_out) of the convolution :data:`LAYER`."""
    expected = (LAYER["batch"], LAYER["c_out"], *_out_hw())
    return check(
        answer,
        expected,
        rtol=0,
        name="output shape (N, C_out, H_out, W_out)",
        hint="H_out = (H + 2*padding - kernel) // stride + 1, and the same for W.",
        mistakes={
            (LAYER["batch"], LAYER["c_out"], *_out_hw(padding=0)): "You left out the padding.",
            (LAYER["batch"], LAYER["c_out"], *_out_hw(stride=1)): "You left out the stride.",
            (LAYER["batch"], LAYER["c_in"], *_out_hw()): "The output has C_out channels, not C_in.",
        },
    )


def ex2_im2col_size(answer) -> Result:
    """Shape (M, K) of the im2col matrix of :data:`LAYER` (the chapter's orientation)."""
    s = gemm_sizes(LAYER["batch"], LAYER["image"], LAYER["kernel"], LAYER["stride"],
                   LAYER["c_in"], LAYER["c_out"], LAYER["padding"])
    return check(
        answer,
        (s["M"], s["K"]),
        rtol=0,
        name="im2col matrix (M, K)",
        hint="M = batch x H_out x W_out (one row per output pixel), K = C_in x kh x kw.",
        mistakes={
            (s["K"], s["M"]): "That is (K, M): torch's unfold layout. The chapter's figure has one "
            "row per output pixel.",
            (s["M"], LAYER["c_out"] * LAYER["kernel"] ** 2): "K counts INPUT channels x kernel taps.",
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
        hint="the GEMM of M x K by K x N costs M * K * N multiply-accumulates.",
        mistakes={2 * macs: "That is the FLOP count: 1 MAC = 2 FLOPs."},
    )


def ex4_depthwise_macs(answer) -> Result:
    """MACs of a depthwise version of :data:`LAYER`: groups = C_in = C_out = 64."""
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
        hint="with groups = g, each output channel sees only C_in / g input channels: K = (C_in/g) x kh x kw.",
        mistakes={dense: f"That is the dense {c} -> {c} convolution; depthwise (groups = {c}) "
                  f"divides K by {c}."},
    )


def ex5_critical_path(answer) -> Result:
    """Fewest steps of one training step of the CNN with unlimited devices."""
    graph = training_graph(CNN_LAYERS)
    return check(
        answer,
        graph.critical_path,
        rtol=0,
        name="steps with unlimited devices",
        unit="steps",
        hint="count the operators on the longest chain of dependencies: forward, loss, backward "
        "down to the first layer's weight gradient, then its update.",
        mistakes={len(graph.ops): "That is every operator one after the other (one device)."},
    )
