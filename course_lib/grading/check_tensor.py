"""Checks of the Megatron split: ``tensor_forward`` and ``tensor_backward``.

The workers run as threads of this process, one per worker, and meet in an all-reduce that
writes down what each worker hands it (its shape, how often) and sums the parts in rank
order; a worker that skips an all-reduce the others join leaves them waiting, which ends
after a few seconds with the count of each worker's calls. With one worker the split is the
plain network: logits and gradient bit for bit :class:`course_lib.models.MLP`'s; with two
and three workers, equal within float32 rounding (the sums are added in another order).
"""

from __future__ import annotations

import threading

import numpy as np

from ..models import MLP, softmax_cross_entropy
from ..parallel.tensor import gather_params, layer_blocks, local_params
from .core import GRADER_TIMEOUT, Mistake
from .harness import arrays_differ, learner

__all__ = ["CHECKS", "HINTS"]

MODULE = "course_lib.parallel.tensor"
#: Two pairs; one pair; a pair and a replicated last layer.
MODELS = ((8, 12, 6, 10, 5), (8, 12, 5), (8, 12, 6, 5))
BATCH = 7


class _Stuck(Exception):
    """A worker waited at an all-reduce that not every worker joined."""


class _AllReduce:
    """The workers' all-reduce (threads): every call written down, the parts of one round
    summed in rank order once every worker has handed its part over."""

    def __init__(self, workers: int):
        self.workers, self.arrived, self.round, self.broken = workers, 0, 0, False
        self.parts: list = [None] * workers
        self.sums: dict[int, np.ndarray] = {}
        self.calls: list[list[tuple]] = [[] for _ in range(workers)]
        self.ready = threading.Condition()

    def of(self, rank: int):
        def allreduce(part):
            with self.ready:
                self.calls[rank].append(np.shape(part))
                self.parts[rank] = np.array(part, copy=True)
                mine, self.arrived = self.round, self.arrived + 1
                if self.arrived == self.workers:  # the last to arrive adds the parts up
                    shapes = {p.shape for p in self.parts}
                    if len(shapes) > 1:
                        self.broken = True
                        self.ready.notify_all()
                        raise Mistake(f"the workers all-reduced parts of different shapes {sorted(shapes)}: every "
                                      "worker all-reduces the same activation, its own partial sum of it")
                    total = self.parts[0].copy()
                    for p in self.parts[1:]:
                        total += p
                    self.sums[mine], self.arrived, self.round = total, 0, self.round + 1
                    self.ready.notify_all()
                elif not self.ready.wait_for(lambda: self.round > mine or self.broken, timeout=GRADER_TIMEOUT):
                    self.broken = True
                    self.ready.notify_all()
                if self.broken:
                    raise _Stuck()
                return self.sums[mine].copy()

        return allreduce


def _run_workers(workers: int, work) -> list:
    """``work(rank, allreduce)`` on ``workers`` threads; their results (a hang or a mismatched
    number of all-reduces: a Mistake that counts each worker's calls)."""
    comm = _AllReduce(workers)
    results, errors = [None] * workers, [None] * workers

    def run(rank):
        try:
            results[rank] = work(rank, comm.of(rank))
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the checking thread
            errors[rank] = exc
            with comm.ready:  # the others stop waiting for this worker
                comm.broken = True
                comm.ready.notify_all()

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GRADER_TIMEOUT * 3)
    hung = [r for r, t in enumerate(threads) if t.is_alive()]
    real = [e for e in errors if e is not None and not isinstance(e, _Stuck)]
    if real:
        raise real[0]
    if hung or any(errors) or comm.arrived:
        counts = ", ".join(f"worker {r}: {len(c)}" for r, c in enumerate(comm.calls))
        raise Mistake(f"the workers did not all join the same all-reduces (calls per worker: {counts}); a worker "
                      "that skips one leaves the others waiting for ever: every worker all-reduces the same "
                      "activations, in the same order")
    return results, comm.calls


def _setup(sizes, workers: int, seed: int = 1):
    model = MLP(sizes)
    rng = np.random.default_rng(seed)
    p = (rng.standard_normal(model.n_params) * 0.5).astype(model.dtype)  # biases too: none is zero
    x = rng.standard_normal((BATCH, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], BATCH)
    blocks = [layer_blocks(model, workers, r) for r in range(workers)]
    local = [local_params(model, p, b) for b in blocks]
    return model, p, x, y, blocks, local


def _close(got, expected, workers: int) -> bool:
    return np.array_equal(got, expected) if workers == 1 else np.allclose(got, expected, rtol=1e-5, atol=1e-5)


def check_tensor_forward() -> None:
    for sizes in MODELS:
        for workers in (1, 2, 3):
            _forward_case(sizes, workers)


def _forward_case(sizes, workers: int) -> None:
    tensor_forward = learner(MODULE, "tensor_forward")
    model, p, x, _, blocks, local = _setup(sizes, workers)
    said = f"tensor_forward ({workers} worker(s), MLP{sizes})"
    results, calls = _run_workers(workers, lambda r, ar: tensor_forward(local[r], blocks[r], x.copy(), ar))
    logits, acts = model.forward(p, x)
    rows = [s for s in blocks[0] if s.role == "row"]
    for r, got in enumerate(results):
        if not isinstance(got, list) or len(got) != model.n_layers + 1:
            raise Mistake(f"{said}: worker {r} returned {type(got).__name__}"
                          f"{'' if not hasattr(got, '__len__') else f' of length {len(got)}'}: return acts, "
                          f"the input and every layer's output ({model.n_layers + 1} arrays)")
        if len(calls[r]) != len(rows):
            if not calls[r]:
                raise Mistake(f"{said}: worker {r} never all-reduces: after a row block each worker holds "
                              "only its partial sum of the output; add them over the workers with "
                              "allreduce (the \"g\" operator), then the bias")
            raise Mistake(f"{said}: worker {r} all-reduced {len(calls[r])} times, once per row block "
                          f"({len(rows)}) is right: the column blocks' hidden units need no communication")
        for shape, s in zip(calls[r], rows):
            if shape != (BATCH, model.sizes[s.layer + 1]):
                raise Mistake(f"{said}: worker {r} all-reduced an array of shape {shape} at layer {s.layer}: "
                              f"all-reduce the row block's partial output, {(BATCH, model.sizes[s.layer + 1])}")
        for s in blocks[r]:
            i = s.layer
            want = acts[i + 1][:, s.cols] if s.role == "column" else acts[i + 1]
            if _close(got[i + 1], want, workers):
                continue
            w, b = model.layer(p, i)
            z = acts[i] @ w + b
            what = f"worker {r}'s output of layer {i} (a {s.role} block)"
            if s.role == "row" and workers > 1:
                twice = z + (workers - 1) * b
                if np.allclose(got[i + 1], np.maximum(twice, 0) if i < model.n_layers - 1 else twice,
                               rtol=1e-5, atol=1e-5):
                    raise Mistake(f"{said}: the bias of a row block is added before the all-reduce, so the "
                                  "sum holds it N times: all-reduce the partial products, then add the "
                                  "bias once")
            if i == model.n_layers - 1 and np.allclose(got[i + 1], np.maximum(want, 0), rtol=1e-5, atol=1e-5):
                raise Mistake(f"{said}: the logits went through a ReLU: the last layer has none (ReLU "
                              "after every layer but the last)")
            raise Mistake(f"{said}: {what} is not the plain network's: {arrays_differ(got[i + 1], want)}")
        if not all(np.array_equal(got[-1], other[-1]) for other in results):
            raise Mistake(f"{said}: the workers' logits differ: after the all-reduce every worker holds "
                          "the same sum, and adds the same bias")


def check_tensor_backward() -> None:
    for sizes in MODELS:
        for workers in (1, 2, 3):
            _backward_case(sizes, workers)


def _backward_case(sizes, workers: int) -> None:
    tensor_forward = learner(MODULE, "tensor_forward")
    tensor_backward = learner(MODULE, "tensor_backward")
    model, p, x, y, blocks, local = _setup(sizes, workers)
    said = f"tensor_backward ({workers} worker(s), MLP{sizes})"
    logits, acts = model.forward(p, x)
    _, expected = model.backward(p, acts, y, reduction="sum")
    columns = [s for s in blocks[0] if s.role == "column" and s.layer > 0]

    def work(r, allreduce):
        acts_r = tensor_forward(local[r], blocks[r], x.copy(), allreduce)
        _, d = softmax_cross_entropy(acts_r[-1], y, reduction="sum")
        grads = [(np.ones_like(w), np.ones_like(b)) for w, b in local[r]]  # it must ADD into them
        tensor_backward(local[r], blocks[r], acts_r, d, grads, allreduce)
        return grads

    results, calls = _run_workers(workers, work)
    for r in range(workers):
        backward_calls = calls[r][sum(s.role == "row" for s in blocks[r]):]
        if len(backward_calls) != len(columns):
            if not backward_calls and columns:
                raise Mistake(f"{said}: worker {r} never all-reduces in the backward: the gradient of a "
                              "pair's input is a sum over the workers' column blocks (dH_r A_r^T): "
                              "all-reduce it after the column layer (the \"f\" operator's backward)")
            if any(shape == (BATCH, model.sizes[0]) for shape in backward_calls):
                raise Mistake(f"{said}: worker {r} all-reduced the gradient of the data, before layer 0: "
                              "nothing needs it; stop after the first layer's weight gradient")
            raise Mistake(f"{said}: worker {r} all-reduced {len(backward_calls)} times in the backward; "
                          f"once per pair but the first ({len(columns)}) is right")
        for shape, s in zip(backward_calls, columns):
            if shape != (BATCH, model.sizes[s.layer]):
                raise Mistake(f"{said}: worker {r} all-reduced an array of shape {shape}; the sum over the "
                              f"workers is the gradient of the pair's input, {(BATCH, model.sizes[s.layer])}, "
                              "after the column layer (the row layer's input gradient is the worker's own "
                              "hidden block: nothing to add)")
    flat = gather_params(model, [grads for grads in results])  # they started at one
    if _close(flat, 1 + expected, workers):
        return
    if _close(flat, expected, workers):
        raise Mistake(f"{said}: the gradients were written over what `grads` held: tensor_backward ADDS "
                      "its blocks' gradients into grads (gw += ..., gb += ...)")
    flat = flat - 1
    worst = max(range(model.n_layers), key=lambda i: float(np.abs(
        model.layer(flat, i)[0] - model.layer(expected, i)[0]).max()))
    w_got, w_exp = model.layer(flat, worst)[0], model.layer(expected, worst)[0]
    raise Mistake(f"{said}: the weight gradient of layer {worst} is not the plain network's "
                  f"({arrays_differ(w_got, w_exp)}): check the ReLU's mask (the layer's OUTPUT > 0) and "
                  "which activation multiplies which gradient (a_in.T @ dz)")


CHECKS = {"tensor_forward": check_tensor_forward, "tensor_backward": check_tensor_backward}

HINTS = {
    "tensor_forward": (
        "Worker r holds column block `A[:, c_r]` of a pair's first layer and row block `B[c_r, :]` of its "
        "second. ReLU acts element by element, so `relu(X A[:, c_r] + b[c_r])` needs nothing from the others.",
        "The row block gives `H_r B[c_r, :]`, this worker's PART of the pair's output: the output is the sum "
        "of all workers' parts, `allreduce(part)`; the bias (whole, on every worker) comes after the sum.",
        "ReLU after every layer but the last; an unpaired last layer (`role == \"replicated\"`) is computed "
        "whole by every worker. Return the input and every layer's output.",
    ),
    "tensor_backward": (
        "The mirror image: going back through a row block, the gradient of the worker's hidden block is "
        "`dz @ W.T` with its own rows: nothing to add.",
        "Going back through a column block, `dz @ W.T` is only this worker's part of the pair's input "
        "gradient: all-reduce it (the \"f\" operator's backward). Before layer 0 nothing needs it: stop.",
        "ADD every block's gradient into `grads` (`gw += a_in.T @ dz`, `gb += dz.sum(axis=0)`), the ReLU's "
        "mask taken from the layer's output (`a_out > 0`), none for the last layer.",
    ),
}
