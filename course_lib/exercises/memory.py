"""Exercises of notebook 09 (memory, part 1: model states, mixed precision, ZeRO).

Expected values come from :mod:`course_lib.memory` and :mod:`course_lib.precision`. The
givens of each exercise are module constants, so the notebook can print them.
"""

from __future__ import annotations

from ..i18n import tr
from ..memory import model_state_bytes, zero_step_bytes
from ..precision import FLOAT16_MAX, largest_loss_scale
from . import Result, check

__all__ = ["LOSS_SCALE", "ZERO", "ZERO3", "ex_loss_scale", "ex_zero3_traffic", "ex_zero_gb"]

#: Givens of :func:`ex_zero_gb`: a 13-billion-parameter model, mixed-precision Adam (2 + 2 + 12
#: bytes per parameter, the ZeRO paper's accounting), 32 data-parallel GPUs, ZeRO stage 2.
ZERO = {"n_params": 13e9, "devices": 32, "zero_stage": 2}
#: Givens of :func:`ex_zero3_traffic`: 2 billion parameters sent as 16-bit values (2 bytes) over
#: 16 data-parallel GPUs with ZeRO stage 3, ring collectives.
ZERO3 = {"n_params": 2e9, "devices": 16, "grad_bytes": 2.0}
#: Givens of :func:`ex_loss_scale`: the largest gradient magnitude of a float16 backward pass.
LOSS_SCALE = {"max_grad": 3.2}



def ex_zero_gb(answer) -> Result:
    """GB (1e9 bytes) of model states per GPU for :data:`ZERO`."""
    g = ZERO
    per_stage = {k: model_state_bytes(g["n_params"], g["devices"], k).total / 1e9 for k in range(4)}
    one_less = model_state_bytes(g["n_params"], g["devices"] - 1, g["zero_stage"]).total / 1e9
    return check(
        answer,
        per_stage[g["zero_stage"]],
        rtol=2e-3,  # 31.7 will do; the same sum over 31 GPUs (31.87) is 0.6% off
        name=tr("model states per GPU"),
        unit="GB",
        hint=tr("stage 2 keeps the 2-byte parameters whole and shards the 2-byte gradients and the "
                "12 bytes of optimizer states over the 32 GPUs: (2 + (2 + 12) / 32) x 13e9 bytes."),
        mistakes={
            per_stage[0]: tr("That is plain data parallelism (stage 0): 16 bytes per parameter on every GPU."),
            per_stage[1]: tr("That is stage 1: only the optimizer states are sharded; stage 2 shards the "
                             "gradients too."),
            per_stage[3]: tr("That is stage 3: it also shards the parameters."),
            one_less: tr("That shards over {fewer} GPUs; all {gpus} data-parallel GPUs hold a share.",
                         fewer=g["devices"] - 1, gpus=g["devices"]),
        },
    )


def ex_zero3_traffic(answer) -> Result:
    """GB one GPU sends per step for :data:`ZERO3` (ring reduce-scatter and all-gathers)."""
    g = ZERO3
    n, d, b = g["n_params"], g["devices"], g["grad_bytes"]
    expected = zero_step_bytes(n, d, 3, grad_bytes=b) / 1e9
    return check(
        answer,
        expected,
        name=tr("bytes sent per GPU and step"),
        unit="GB",
        hint=tr("a ring reduce-scatter or all-gather of X bytes sends (N - 1)/N X per device; stage 3 does "
                "three of them per step (all-gather before the forward, again before the backward, "
                "reduce-scatter of the gradient), each of 2 x 2e9 bytes."),
        mistakes={
            zero_step_bytes(n, d, 2, grad_bytes=b) / 1e9: tr("That is stages 0-2 (one all-reduce). Stage 3 "
                                                             "gathers the parameters twice per step: 1.5 times as "
                                                             "much."),
            3 * n * b / 1e9: tr("That leaves out the (N - 1)/N: a device does not send its own share."),
            zero_step_bytes(n, d, 3, grad_bytes=4.0) / 1e9: tr("That sends 4-byte values; the givens say 16-bit "
                                                               "(2 bytes)."),
            zero_step_bytes(n, d, 3, grad_bytes=b) / 1e9 / d: tr("That divides by N once more: each collective "
                                                                 "moves the whole parameter size around the ring, "
                                                                 "(N - 1)/N of it through each device."),
        },
    )


def ex_loss_scale(answer) -> Result:
    """The largest power-of-two loss scale for :data:`LOSS_SCALE` without float16 overflow."""
    m = LOSS_SCALE["max_grad"]
    expected = largest_loss_scale(m)
    return check(
        answer,
        expected,
        name=tr("loss scale σ"),
        rtol=1e-9,
        hint=tr("float16's largest value is {largest}: the largest power of two σ with {grad} x σ <= {largest}.",
                largest=f"{FLOAT16_MAX:,.0f}", grad=m),
        mistakes={
            2 * expected: tr("{grad} x {scale} = {product} overflows float16 (largest {largest}).", grad=m,
                             scale=f"{2 * expected:,.0f}", product=f"{m * 2 * expected:,.0f}",
                             largest=f"{FLOAT16_MAX:,.0f}"),
            65536.0: tr("2**16 is a common starting scale, but {grad} x 65,536 overflows; dynamic scaling "
                        "would halve it until it fits.", grad=m),
            FLOAT16_MAX / m: tr("That is not a power of two; powers of two scale without rounding error."),
        },
    )
