"""The training loop behind :func:`course_lib.optim.steps_to_target` (private helper).

Plain SGD on the running example until the loss on the whole training split reaches a
target. The loss is computed after EVERY step, so the step count is exact; the time of a
step is measured without that evaluation. (Kept apart from :mod:`course_lib.optim` only so
that no module grows beyond what a lecturer reads in one go.)
"""

from __future__ import annotations

import time

import numpy as np

from .models import sgd_step, softmax_cross_entropy


def run_to_target(model, x, y, batch_size, lr, target_loss, max_steps, seed):
    """Steps until the loss on all of ``x`` is <= ``target_loss``, and the median seconds of
    one training step (forward, backward, update; not the evaluation).

    The steps are None if the target is not reached within ``max_steps`` or the run
    diverges (the loss grows to 10x its start, or NaN). Every step draws ``batch_size``
    samples without replacement; a new shuffle starts when fewer are left.
    """
    params, rng = model.init_params(seed), np.random.default_rng(seed + 1)
    grad = np.zeros_like(params)

    def loss_on_all():
        return softmax_cross_entropy(model.forward(params, x)[0], y)[0]

    start = loss_on_all()
    order, pos, times = rng.permutation(len(y)), 0, []
    for step in range(1, max_steps + 1):
        if pos + batch_size > len(y):
            order, pos = rng.permutation(len(y)), 0
        idx, pos = order[pos : pos + batch_size], pos + batch_size
        t0 = time.perf_counter()
        model.loss_and_grad(params, x[idx], y[idx], out=grad)
        sgd_step(params, grad, lr)
        times.append(time.perf_counter() - t0)
        loss = loss_on_all()
        if not loss <= 10 * start or loss <= target_loss:  # diverged (or NaN), or there
            return (step if loss <= target_loss else None), float(np.median(times))
    return None, float(np.median(times))
