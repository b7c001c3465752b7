"""Check of ``stale_loop``: SGD whose every update uses the gradient of ``delay`` steps before.

Run in this process on the small running example with delays 2, 0, 1 and 3; the reference
keeps every step's parameters and takes the gradient at those of ``delay`` steps before (the
first ``delay`` steps: at the initial ones), the loss at the current ones. The losses and the
parameters must be the reference's bit for bit (``delay = 0`` is plain SGD, bitwise
:func:`course_lib.parallel.train.reference.train_serial`). A wrong result is compared with the
same loop run with another delay, and with the loss taken at the old parameters.
"""

from __future__ import annotations

import numpy as np

from ..models import softmax_cross_entropy
from ..parallel.partition import batches
from .core import Mistake
from .harness import arrays_differ, learner, small_data

__all__ = ["CHECKS", "HINTS"]

STEPS, BATCH, LR = 8, 16, 0.5


def _reference(model, x, y, steps, params, delay: int, lr, stop_above=np.inf, loss_at="current"):
    """Stale SGD written the long way: every step's parameters kept (``loss_at="old"``: the
    loss taken at the old parameters, a usual mistake)."""
    history, losses = [params.copy()], []
    for idx in steps:
        old = history[max(0, len(history) - 1 - delay)]  # the parameters of `delay` steps ago
        loss, grad = model.loss_and_grad(old, x[idx], y[idx])
        if delay > 0 and loss_at == "current":
            loss = softmax_cross_entropy(model.forward(params, x[idx])[0], y[idx])[0]
        losses.append(float(loss))
        if not loss <= stop_above:
            break
        grad *= lr
        params -= grad
        history.append(params.copy())
    return losses, params


def check_stale_loop() -> None:
    stale_loop = learner("course_lib.staleness", "stale_loop")
    model, x, y = small_data(sizes=(8, 16, 3))
    p0, lr = model.init_params(0), model.dtype.type(LR)
    steps = list(batches(x.shape[0], BATCH, seed=0, steps=STEPS))
    for delay in (2, 0, 1, 3):
        params = p0.copy()
        got = stale_loop(model, x, y, iter(steps), params, delay, lr)
        expected, ref = _reference(model, x, y, steps, p0.copy(), delay, lr)
        said = f"stale_loop with delay={delay}"
        if not isinstance(got, list) or len(got) != STEPS:
            raise Mistake(f"{said} returned {got!r:.60}: return the list of every step's loss ({STEPS} steps)")
        if np.array_equal(params, p0):
            raise Mistake(f"{said} left params as they were: change them in place (params -= ...), the caller "
                          "reads the trained parameters from the array it passed")
        if np.array_equal(got, expected) and np.array_equal(params, ref):
            continue
        for other in sorted({0, delay - 1, delay + 1, delay + 2} - {delay}):
            if other >= 0:
                losses, p = _reference(model, x, y, steps, p0.copy(), other, lr)
                if np.array_equal(p, params):
                    raise Mistake(f"{said} uses the gradient of {other} step(s) before, not {delay}: every "
                                  f"update applies the gradient computed at the parameters of `delay` steps ago "
                                  f"(the first `delay` steps: at the initial ones)")
        losses, _ = _reference(model, x, y, steps, p0.copy(), delay, lr, loss_at="old")
        if np.array_equal(params, ref) and np.array_equal(got, losses):
            raise Mistake(f"{said} reports the loss at the old parameters (those the gradient was taken at): "
                          "report each step's loss at the CURRENT parameters, before its update")
        if not np.array_equal(params, ref):
            raise Mistake(f"{said}: the parameters after {STEPS} steps differ from the reference's: "
                          f"{arrays_differ(params, ref)}")
        raise Mistake(f"{said}: the losses differ from the reference's: {arrays_differ(np.array(got), np.array(expected))}")
    # a run that climbs above `stop_above` stops at that step, before its update
    first, _ = _reference(model, x, y, steps, p0.copy(), 1, lr)
    params = p0.copy()
    got = stale_loop(model, x, y, iter(steps), params, 1, lr, first[0] / 2)
    if not isinstance(got, list) or len(got) != 1:
        raise Mistake(f"stale_loop with stop_above={first[0] / 2:.3g} (below the first loss, {first[0]:.3g}) "
                      f"returned {len(got) if isinstance(got, list) else got!r} losses: stop at the first loss "
                      "above stop_above (or not finite), after appending it")
    if not np.array_equal(params, p0):
        raise Mistake("stale_loop updated the parameters in the step whose loss was above stop_above: stop "
                      "before that step's update (a diverging run is not pushed further)")


CHECKS = {"stale_loop": check_stale_loop}

HINTS = {
    "stale_loop": (
        "Keep the parameters of the last `delay + 1` steps (a `collections.deque` with `maxlen=delay + 1` "
        "drops the oldest by itself); at the start it holds only a copy of the initial parameters.",
        "Each step: the gradient at the OLDEST kept parameters, `model.loss_and_grad(seen[0], x[idx], y[idx])`; "
        "the loss to report is that of the CURRENT parameters (with `delay > 0` a forward pass at `params`).",
        "Stop once the loss is not `<= stop_above`; otherwise `params -= lr * grad` in place and append a copy "
        "of the new parameters to the deque.",
    ),
}
