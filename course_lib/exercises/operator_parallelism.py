"""Exercises of chapter 05 (operator parallelism: im2col, GEMM sizes, the data-flow graph).

Expected values come from :mod:`course_lib.conv.im2col` and :mod:`course_lib.dataflow`; the layer
of exercises 1-2 is :data:`LAYER`, the network of exercise 3 is :data:`DEEP_CNN_LAYERS`
(deeper than the running example's :data:`CNN_LAYERS`, whose critical path section 2
prints). GEMM sizes are written ℳ x 𝒦 by 𝒦 x 𝒩 as in the notebook (``gemm_sizes`` keys
M, K, N).
"""

from __future__ import annotations

from ..conv.im2col import gemm_sizes
from ..dataflow import training_graph
from ..i18n import tr
from . import Result, check, check_count

__all__ = [
    "LAYER",
    "CNN_LAYERS",
    "DEEP_CNN_LAYERS",
    "ex1_gemm_sizes",
    "ex2_im2col_megabytes",
    "ex3_critical_path",
]

#: The convolution of exercises 1-2: a ResNet-style down-sampling layer.
LAYER = dict(batch=16, c_in=64, c_out=128, image=56, kernel=3, stride=2, padding=1)
#: The layers of the convolutional running example (course_lib.cnn.CNN).
CNN_LAYERS = (("conv0", "conv"), ("conv1", "conv"), ("fc", "linear"))
#: Exercise 3: a deeper CNN, seven convolutions and a linear classifier.
DEEP_CNN_LAYERS = tuple((f"conv{i}", "conv") for i in range(7)) + (("fc", "linear"),)


def _sizes(**change) -> dict[str, float]:
    """:func:`course_lib.conv.im2col.gemm_sizes` of :data:`LAYER`, with some of its numbers changed."""
    layer = {**LAYER, **change}
    return gemm_sizes(layer["batch"], layer["image"], layer["kernel"], layer["stride"],
                      layer["c_in"], layer["c_out"], layer["padding"], itemsize=layer.get("itemsize", 4))


def ex1_gemm_sizes(answer) -> Result:
    """Sizes (ℳ, 𝒦, 𝒩) of the GEMM im2col makes of :data:`LAYER`."""
    s = _sizes()
    m, k, n = s["M"], s["K"], s["N"]
    return check(
        answer,
        (m, k, n),
        rtol=0,
        name=tr("GEMM sizes (ℳ, 𝒦, 𝒩)"),
        hint=tr("ℳ = B x H_o x W_o (one row per output pixel) with H_o = (H + 2*padding - k) // stride + 1; "
                "𝒦 = C_i x k_h x k_w; 𝒩 = C_o."),
        mistakes={
            (_sizes(stride=1)["M"], k, n): tr("You left out the stride: it shrinks H_o and W_o, so ℳ."),
            (_sizes(padding=0)["M"], k, n): tr("You left out the padding: H_o = (H + 2*padding - k) // stride + 1."),
            (k, m, n): tr("That is (𝒦, ℳ, 𝒩): the first two are swapped (torch's unfold stores 𝒦 x ℳ). "
                          "ℳ counts the output pixels of the whole batch."),
            (m, LAYER["c_out"] * LAYER["kernel"] ** 2, n): tr("𝒦 counts INPUT channels x kernel taps."),
            (m, k, LAYER["c_in"]): tr("𝒩 is the number of OUTPUT channels."),
            (m // LAYER["batch"], k, n): tr("That ℳ is one image's output pixels; the GEMM holds the whole batch."),
        },
    )


def ex2_im2col_megabytes(answer) -> Result:
    """MB (10^6 bytes) of the float32 im2col matrix of :data:`LAYER`."""
    s = _sizes()
    mb = s["im2col_bytes"] / 1e6
    return check(
        answer,
        mb,
        name=tr("im2col matrix"),
        unit="MB",
        hint=tr("the matrix holds ℳ x 𝒦 numbers of 4 bytes each (float32); 1 MB = 10^6 bytes."),
        mistakes={
            _sizes(stride=1)["im2col_bytes"] / 1e6: tr("You left out the stride: with stride 2 only every "
                                                       "second window in each direction is taken, so ℳ is 4 "
                                                       "times smaller."),
            _sizes(itemsize=8)["im2col_bytes"] / 1e6: tr("That counts 8 bytes per number (float64); the "
                                                         "layer is float32: 4 bytes."),
            s["input_bytes"] / 1e6: tr("That is the input itself; the im2col matrix copies each pixel into "
                                       "every window that covers it."),
            s["blowup"]: tr("That is the ratio to the input, not the size in MB."),
            s["im2col_bytes"] / 4 / 1e6: tr("That is the number of entries in millions; each float32 takes "
                                            "4 bytes."),
        },
    )


def ex3_critical_path(answer) -> Result:
    """Fewest steps of one training step of :data:`DEEP_CNN_LAYERS` with unlimited devices."""
    graph = training_graph(DEEP_CNN_LAYERS)
    layers = len(DEEP_CNN_LAYERS)
    return check_count(
        answer,
        graph.critical_path,
        name=tr("steps with unlimited devices"),
        noun="step",
        round_up=False,
        unit="steps",
        hint=tr("count the operators on the longest chain of dependencies: forward, loss, backward "
                "down to the first layer's weight gradient, then its update."),
        mistakes={
            len(graph.ops): tr("That is every operator one after the other (one device)."),
            training_graph(CNN_LAYERS).critical_path: tr(
                "That is the critical path of section 2's {small}-layer CNN; this network has {layers} layers, "
                "and the chain grows with every layer, forward and backward.", small=len(CNN_LAYERS),
                layers=layers),
        },
    )
