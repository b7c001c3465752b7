"""Checks of expert parallelism: ``ExpertShard.dispatch`` and ``ExpertShard.combine``.

Both run on threads of this process, one per worker, through the course's shared-memory
all-to-all (on plain arrays) seen through a proxy that checks every block a worker hands it:
a mixture of 4 experts on 2 workers (top-2, capacity factor 1: some assignments dropped) and
on 4 workers (top-1, capacity factor 0.75). Each worker routes its shard of a batch of 24
tokens as :func:`course_lib.parallel.experts.moe_forward` does.

``dispatch``: every worker sends exactly its kept assignments (the capacity drops the rest),
one block per worker, grouped by expert; then a second exchange sends a tag of every
assignment through the plan ``dispatch`` returned (the course's ``send``): each of a
worker's experts must receive the tokens routed to it that it keeps, every one once, and
the rows ``dispatch`` returned must be those tokens, in the plan's order.

``combine`` (with your ``dispatch``): each worker sends its experts' outputs back to the
workers their tokens came from; what comes back must be the outputs of its own tokens'
experts, in the plan's order (float64, within 1e-12). Then the whole forward and backward of
every worker (:func:`~course_lib.parallel.experts.moe_forward`,
:func:`~course_lib.parallel.experts.moe_backward`) must give the serial model's logits and,
summed over the workers, its gradient (within 1e-10); and the course's trainer,
:func:`course_lib.parallel.train.experts.train_expert_parallel`, on two processes with the
graders' short timeout, the parameters of :func:`course_lib.parallel.train.reference.train_serial`
within 1e-6, as the course's own code does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..moe import MoE, expert_forward, expert_weights, kept_assignments, route, route_counts
from ..parallel.experts import kept_counts
from ..parallel.partition import shard_bounds
from .core import GRADER_TIMEOUT, Mistake
from .harness import (
    arrays_differ,
    counted,
    learner,
    require_trained_as_serial,
    run_threads,
    start_method,
)

__all__ = ["CHECKS", "HINTS"]

MODULE = "course_lib.parallel.experts"
TOKENS = 24
#: (workers, top_k, capacity factor) of the thread runs.
CASES = ((2, 2, 1.0), (4, 1, 0.75))


@dataclass(frozen=True)
class _Ctx:
    rank: int
    world_size: int
    wait_timeout: float = GRADER_TIMEOUT


def _model(top_k: int, phi: float) -> MoE:
    return MoE(inputs=8, hidden=6, experts=4, expert_hidden=5, classes=3, top_k=top_k, capacity_factor=phi,
               aux_weight=0.05)


class _Routing:
    """One case: the model, parameters, data, and every worker's routing as moe_forward makes it."""

    def __init__(self, workers: int, top_k: int, phi: float, seed: int = 4):
        self.workers, self.model = workers, _model(top_k, phi)
        rng = np.random.default_rng(seed)
        self.params = self.model.init_params(1) + 0.3 * rng.standard_normal(self.model.n_params)
        self.x, self.y = rng.standard_normal((TOKENS, 8)), rng.integers(0, 3, TOKENS)
        self.bounds = shard_bounds(TOKENS, workers)
        self.cap = self.model.capacity(TOKENS)
        w = self.model.views(self.params)
        self.u, self.choice, self.weight = [], [], []
        for lo, hi in self.bounds:
            u = np.maximum(self.x[lo:hi] @ w["in.W"] + w["in.b"], 0)
            g = u @ w["gate.W"]
            probs = np.exp(g - g.max(axis=1, keepdims=True))
            probs /= probs.sum(axis=1, keepdims=True)
            choice, weight = route(probs, top_k)
            self.u.append(u)
            self.choice.append(choice)
            self.weight.append(weight)
        self.counts = np.stack([route_counts(c, self.model.experts) for c in self.choice])
        self.kept_n = kept_counts(self.counts, self.cap)
        total = self.counts.sum(axis=0)
        self.kept = [kept_assignments(c, (np.cumsum(total, axis=0) - total) + self.counts[:r].sum(axis=0), self.cap)
                     for r, c in enumerate(self.choice)]
        self.per = self.model.experts // workers

    def mine(self, rank: int) -> list[int]:
        return list(range(rank * self.per, (rank + 1) * self.per))

    def incoming(self, rank: int) -> np.ndarray:
        """(N, per): tokens worker i sends to my expert k."""
        return self.kept_n[:, :, self.mine(rank)].sum(axis=1)

    def sends(self, rank: int) -> np.ndarray:
        """(N,): kept assignments of worker ``rank`` to the experts of each worker."""
        return self.kept_n[rank].sum(axis=0).reshape(self.workers, self.per).sum(axis=1)


class _Exchange:
    """The course's all-to-all seen through a proxy that checks what a worker hands it in
    ``dispatch`` (``mode``: "dispatch") or ``combine`` ("combine"); other calls pass."""

    def __init__(self, inner, case: _Routing, rank: int):
        self._inner, self.case, self.rank, self.mode, self.calls = inner, case, rank, None, 0

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __call__(self, blocks, shapes=None):
        self.calls += 1
        if self.mode == "dispatch":
            self._dispatched(list(blocks))
        elif self.mode == "combine":
            self._combined(list(blocks), shapes)
        return self._inner(blocks, shapes)

    def _dispatched(self, blocks) -> None:
        case, r = self.case, self.rank
        said = f"ExpertShard.dispatch: worker {r}"
        wanted = case.sends(r)
        routed = case.choice[r].size
        if len(blocks) != case.workers:
            raise Mistake(f"{said} handed the all-to-all {len(blocks)} blocks: one block per WORKER "
                          f"(N = {case.workers}), each holding the tokens for that worker's experts; count the "
                          "assignments per worker, e // self.per, not per expert")
        sizes = np.array([np.shape(b)[0] if np.ndim(b) == 2 else -1 for b in blocks])
        if sizes.sum() == routed and routed > wanted.sum():
            raise Mistake(f"{said} dispatched all {routed} of its assignments, but the experts keep only "
                          f"{int(wanted.sum())} of them (capacity C = {case.cap}): an assignment beyond its "
                          "expert's capacity is dropped (the token goes on through the residual alone); dispatch "
                          "only the kept ones, np.nonzero(kept)")
        if sizes.sum() < wanted.sum():
            raise Mistake(f"{said} dispatched {int(sizes.sum())} assignments; {int(wanted.sum())} are kept: every "
                          "kept assignment goes to its expert (a token may go to k_top experts: its second "
                          "choice too), np.nonzero(kept) over every choice rank")
        if not np.array_equal(sizes, wanted):
            raise Mistake(f"{said} sent blocks of {sizes.tolist()} tokens to the workers, which expect "
                          f"{wanted.tolist()} (its kept assignments to each worker's experts): block j holds the "
                          "kept assignments whose expert lives on worker j")

    def _combined(self, blocks, shapes) -> None:
        case, r = self.case, self.rank
        said = f"ExpertShard.combine: worker {r}"
        back = case.incoming(r).sum(axis=1)  # rows worker i sent me: what it gets back
        if len(blocks) != case.workers:
            raise Mistake(f"{said} handed the all-to-all {len(blocks)} blocks (one per expert?): one per WORKER; "
                          "regroup the experts' rows by the worker they came from, _by_worker(rows, incoming)")
        sizes = [np.shape(b)[0] if np.ndim(b) == 2 else -1 for b in blocks]
        if sizes != back.tolist():
            raise Mistake(f"{said} sends back blocks of {sizes} rows; the workers sent it {back.tolist()}: each "
                          "worker gets back exactly the rows it dispatched, its tokens' outputs from every one of "
                          "my experts, _by_worker(rows, incoming)")
        sent = case.sends(r).tolist()
        got = None if shapes is None else [int(s[0]) for s in shapes]
        if got != sent:
            raise Mistake(f"{said} expects back blocks of {got} rows from the workers; it dispatched {sent} to "
                          "them: what comes back from worker j is what it sent to j, the plan's sizes (not "
                          "incoming, what it received)")


def _setup(case: _Routing):
    from ..parallel.exchange import ShmAllToAll

    n, width = case.workers, case.model.hidden
    boxes = np.zeros((2, n, n, TOKENS * case.model.top_k * width))
    count_boxes = np.zeros((2, n, n, case.model.top_k * case.model.experts), dtype=np.int64)

    def shard_of(rank, barrier, grad):
        cls = learner(MODULE, "ExpertShard")
        exchange = _Exchange(ShmAllToAll(_Ctx(rank, n), boxes, barrier), case, rank)
        model = case.model
        shard = cls(model, model.views(case.params), model.views(grad), exchange, rank, n)
        return shard, exchange, ShmAllToAll(_Ctx(rank, n), count_boxes, barrier)

    return shard_of


def _unmatched(name: str):
    def message(waits, returned):
        return (f"{name}: the workers did not all join the same all-to-alls ({counted(waits, 'waits')}): every worker "
                "calls the exchange once per dispatch (and per combine), even with nothing to send")

    return message


def _check_plan(plan, case: _Routing, r: int) -> tuple:
    said = f"ExpertShard.dispatch: worker {r}"
    if not isinstance(plan, tuple) or len(plan) != 4:
        raise Mistake(f"{said} returned a plan of {type(plan).__name__}: return (t, c, sizes, incoming), the token "
                      "and choice rank of every assignment sent, in the order sent, the tokens sent to each "
                      "worker and `incoming`")
    t, c, sizes, incoming = (np.asarray(a) for a in plan)
    kept = set(zip(*np.nonzero(case.kept[r])))
    pairs = list(zip(t.tolist(), c.tolist()))
    if len(pairs) != len(set(pairs)) or set(pairs) != {(int(a), int(b)) for a, b in kept}:
        raise Mistake(f"{said}: the plan's (t, c) are not its kept assignments, each once: t, c = np.nonzero(kept), "
                      "then put in the order they are sent")
    if not np.array_equal(sizes, case.sends(r)):
        raise Mistake(f"{said}: the plan's sizes are {sizes.tolist()}, the tokens it sends to each worker are "
                      f"{case.sends(r).tolist()}")
    return t, c


def check_dispatch() -> None:
    name = "ExpertShard.dispatch"
    for workers, top_k, phi in CASES:
        case = _Routing(workers, top_k, phi)
        shard_of = _setup(case)
        said = f"{name} ({workers} workers, top-{top_k})"

        def work(rank, barrier, case=case, shard_of=shard_of):
            shard, exchange, _ = shard_of(rank, barrier, np.zeros_like(case.params))
            exchange.mode = "dispatch"
            rows, plan = shard.dispatch(case.u[rank], case.choice[rank], case.kept[rank], case.incoming(rank))
            exchange.mode = None
            t, c = _check_plan(plan, case, rank)
            tags = np.zeros((t.size, case.model.hidden))
            tags[:, 0], tags[:, 1], tags[:, 2] = rank, t, c
            return rows, shard.send(tags, plan)

        results = run_threads(workers, work, _unmatched(name))
        for r, (rows, tags) in enumerate(results):
            mine = case.mine(r)
            if not isinstance(rows, (list, tuple)) or len(rows) != case.per:
                raise Mistake(f"{said}: worker {r} returned {type(rows).__name__} as the rows: a list of "
                              f"{case.per} arrays, the tokens each of its experts serves")
            for k, e in enumerate(mine):
                seen = [tuple(int(v) for v in row[:3]) for row in tags[k]]
                wrong = [(i, t, c) for i, t, c in seen if case.choice[i][t, c] != e]
                if wrong:
                    i, t, c = wrong[0]
                    raise Mistake(f"{said}: expert {e} (worker {r}) received worker {i}'s token {t}, routed to expert "
                                  f"{case.choice[i][t, c]}: the rows sent to a worker are split among its experts "
                                  "in order, so worker i sorts its assignments by expert (hence by worker) before "
                                  "it splits them into blocks, np.lexsort((t, c, e)), and keeps t, c in that order")
                expected = sorted((i, int(t), int(c)) for i in range(workers)
                                  for t, c in zip(*np.nonzero((case.choice[i] == e) & case.kept[i])))
                if sorted(seen) != expected:
                    raise Mistake(f"{said}: expert {e} (worker {r}) received the assignments {sorted(seen)}, not the "
                                  f"ones it keeps {expected}")
                got = np.asarray(rows[k])
                want = np.array([case.u[i][t] for i, t, _ in seen]).reshape(-1, case.model.hidden)
                if got.shape != want.shape or not np.array_equal(got, want):
                    raise Mistake(f"{said}: worker {r}'s rows for expert {e} are not the tokens it received, in the "
                                  f"order the plan sends them: {arrays_differ(got, want)}")


def _full_run(case: _Routing):
    """moe_forward and moe_backward on every worker (threads): logits and gradients."""
    from ..models import softmax_cross_entropy
    from ..parallel.experts import moe_backward, moe_forward

    shard_of = _setup(case)

    def work(rank, barrier):
        grad = np.zeros_like(case.params)
        shard, _, gather = shard_of(rank, barrier, grad)
        lo, hi = case.bounds[rank]
        w, g = case.model.views(case.params), case.model.views(grad)
        logits, cache = moe_forward(w, case.x[lo:hi], case.model, shard, gather, TOKENS, rank)
        _, dlogits = softmax_cross_entropy(logits, case.y[lo:hi], reduction="sum")
        moe_backward(w, g, cache, dlogits, case.model, shard, TOKENS)
        return logits, grad

    return run_threads(case.workers, work, _unmatched("ExpertShard.combine"))


def _check_trainer(name: str) -> None:
    from ..parallel.train.experts import train_expert_parallel
    from ..parallel.train.reference import train_serial

    model = _model(2, 1.0)
    rng = np.random.default_rng(7)
    x, y = rng.random((48, 8)), rng.integers(0, 3, 48)
    kw = dict(batch_size=24, steps=2, lr=0.5, seed=1)
    ref = train_serial(model, x, y, **kw)
    run = train_expert_parallel(model, x, y, workers=2, timeout=GRADER_TIMEOUT, start_method=start_method(),
                                progress=False, **kw)
    require_trained_as_serial(run, ref, f"{name}: train_expert_parallel on 2 processes")


def check_combine() -> None:
    name = "ExpertShard.combine"
    for workers, top_k, phi in CASES:
        case = _Routing(workers, top_k, phi)
        shard_of = _setup(case)
        said = f"{name} ({workers} workers, top-{top_k})"

        def work(rank, barrier, case=case, shard_of=shard_of):
            shard, exchange, _ = shard_of(rank, barrier, np.zeros_like(case.params))
            rows, plan = shard.dispatch(case.u[rank], case.choice[rank], case.kept[rank], case.incoming(rank))
            outputs = [expert_forward(shard.w[k], r)[0] for k, r in enumerate(rows)]
            exchange.mode = "combine"
            back = shard.combine(outputs, plan)
            exchange.mode = None
            return back, plan

        results = run_threads(workers, work, _unmatched(name))
        w = case.model.views(case.params)
        for r, (back, plan) in enumerate(results):
            t, c = plan[0], plan[1]
            want = np.array([expert_forward(expert_weights(w, case.choice[r][a, b]), case.u[r][a][None])[0][0]
                             for a, b in zip(t, c)]).reshape(-1, case.model.hidden)
            if isinstance(back, (list, tuple)):
                raise Mistake(f"{said}: worker {r} returned a {type(back).__name__} of the blocks that came back: "
                              "return one array, np.concatenate(...), in plan order (block j: the outputs of the "
                              "tokens it sent to worker j)")
            back = np.asarray(back)
            if back.shape != want.shape:
                raise Mistake(f"{said}: worker {r} returned {back.shape}, expected {want.shape}: one output per "
                              "assignment it dispatched, in the plan's order")
            if not np.allclose(back, want, rtol=1e-12, atol=1e-12):
                raise Mistake(f"{said}: worker {r}'s outputs came back to the wrong assignments (not in the plan's "
                              "order: worker 0's block first, then worker 1's ...): "
                              f"{arrays_differ(back, want)}")
        # the whole forward and backward against the serial model
        logits_ref, cache = case.model.forward(case.params, case.x)
        _, grad_ref = case.model.backward(case.params, cache, case.y, reduction="sum", logits=logits_ref)
        out = _full_run(case)
        for r, (logits, _) in enumerate(out):
            lo, hi = case.bounds[r]
            if not np.allclose(logits, logits_ref[lo:hi], rtol=0, atol=1e-10):
                raise Mistake(f"{said}: worker {r}'s logits differ from the serial model's: "
                              f"{arrays_differ(logits, logits_ref[lo:hi])}")
        total = sum(g for _, g in out)
        if not np.allclose(total, grad_ref, rtol=0, atol=1e-10):
            raise Mistake(f"{said}: the workers' gradients, summed, differ from the serial model's: "
                          f"{arrays_differ(total, grad_ref)}")
    _check_trainer(name)


CHECKS = {
    "ExpertShard.dispatch": check_dispatch,
    "ExpertShard.combine": check_combine,
}

HINTS = {
    "ExpertShard.dispatch": (
        "`kept` says which of this worker's assignments (token t, choice rank c) their experts keep: the "
        "capacity drops the others. `t, c = np.nonzero(kept)`; the expert of each: `e = choice[t, c]`.",
        "The all-to-all sends one block per worker, and the receiver splits each block among its experts in "
        "order: sort the assignments by expert (hence by worker), then by choice rank and token, "
        "`order = np.lexsort((t, c, e))`, and reorder t, c, e with it.",
        "The plan: `(t, c, np.bincount(e // self.per, minlength=self.workers), incoming)`, the tokens sent to "
        "each worker. Return `self.send(u[t], plan), plan`.",
    ),
    "ExpertShard.combine": (
        "The way back of dispatch: `rows[k]` holds my expert k's outputs for the tokens every worker sent it, "
        "worker 0's first. Each worker must get back exactly the rows it sent.",
        "Regroup them by worker: `_by_worker(rows, incoming)` (block i: worker i's tokens, from each of my "
        "experts), and hand those to `self.exchange`, with the shapes to expect back: from worker j, the "
        "rows I sent it, `[(n, self.width) for n in sizes]`.",
        "What comes back, block j from worker j, is in the plan's order once joined: "
        "`np.concatenate(returned)`.",
    ),
}
