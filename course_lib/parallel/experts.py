r"""Expert parallelism (专家并行): the experts of a mixture-of-experts layer placed on workers,
the tokens sent to them and back with an all-to-all.

The model is :class:`course_lib.moe.MoE`. Worker :math:`j` of :math:`N_e` holds the dense
parameters (the input layer, the gate, the head: replicated, as in data parallelism) and
:math:`E/N_e` experts, :math:`j E/N_e \ldots (j+1)E/N_e - 1`; it computes on its shard of
every batch (:func:`course_lib.parallel.partition.shard_bounds`). One step:

1. every worker routes its tokens (the gate, top-:math:`k_{\text{top}}`) and the workers
   exchange how many they route to each expert (an all-gather of :math:`k_{\text{top}} E`
   counts): from these every worker knows which assignments the experts keep, the same ones
   the serial model keeps (first choices first, in batch order, up to the capacity
   :math:`C`), and how many tokens it will receive;
2. **dispatch**: an all-to-all sends each kept token to the worker of its expert
   (:meth:`ExpertShard.dispatch`); each worker runs its experts on what arrived;
3. **combine**: an all-to-all sends the outputs back (:meth:`ExpertShard.combine`); each token
   adds its experts' outputs, weighted by the gate, to itself;
4. backward, the mirror image: the outputs' gradients go to the experts, the inputs'
   gradients come back: two more all-to-alls. Each expert's gradient is complete on its
   worker (every token it served came to it); the dense gradients are summed by an all-reduce.

The result equals the serial model's (:meth:`course_lib.moe.MoE.loss_and_grad` on the whole
batch) within rounding. The all-to-alls carry only kept tokens, in blocks of different sizes
(an all-to-all-v); :func:`kept_counts` gives every block's size, so the bytes are known
before they move (:func:`alltoall_rows`).

Examples
--------
Worker 0 of 2 with experts 0 and 1 of 4; 2 tokens of its own to each of expert 1 and 2 (the
all-to-all played by hand: every worker sends the same):

>>> counts = np.array([[[0, 2, 2, 0]], [[0, 2, 2, 0]]])   # (workers, top_k, E): routed
>>> kept = kept_counts(counts, cap=3)                      # expert 1 takes 2 of worker 0, 1 of worker 1
>>> kept[:, 0].tolist()
[[0, 2, 2, 0], [0, 1, 1, 0]]
>>> alltoall_rows(kept, workers=2).tolist()               # rows worker j receives from worker i
[[2, 2], [1, 1]]
"""

from __future__ import annotations

import numpy as np

from ..models import softmax_cross_entropy
from ..moe import (
    expert_backward,
    expert_forward,
    expert_weights,
    gate_backward,
    kept_assignments,
    route,
    route_backward,
    route_counts,
)
from .engine.clock import recorded
from .partition import shard_bounds

__all__ = ["ExpertShard", "expert_worker_loop", "moe_backward", "moe_forward"]
# The pieces (kept_counts, alltoall_rows) are importable but not listed: the trainer calls
# them with the counts the workers exchanged.


def kept_counts(counts: np.ndarray, cap: int) -> np.ndarray:
    """``(N, top_k, E)``: the assignments each expert keeps of every worker's choice-``c``
    ones, from what every worker routed (``counts``, the same shape). Expert ``e`` serves
    every first choice before any second one, each in worker (batch) order, and keeps ``cap``."""
    total = counts.sum(axis=0)  # (top_k, E) over the workers
    before = (np.cumsum(total, axis=0) - total)[None] + (np.cumsum(counts, axis=0) - counts)
    return np.clip(cap - before, 0, counts)


def alltoall_rows(kept: np.ndarray, workers: int) -> np.ndarray:
    """``(N, N)``: the tokens worker ``i`` sends to worker ``j`` in a dispatch (row ``i``,
    column ``j``); the combine sends them back, the backward repeats both."""
    per = kept.shape[-1] // workers
    return kept.sum(axis=1).reshape(workers, workers, per).sum(axis=-1)


def _by_expert(blocks: list[np.ndarray], incoming: np.ndarray) -> list[np.ndarray]:
    """[from worker i: rows of each of my experts] -> [my expert k: rows from every worker]."""
    pieces = [np.split(b, np.cumsum(incoming[i])[:-1]) for i, b in enumerate(blocks)]
    return [np.concatenate([p[k] for p in pieces]) for k in range(incoming.shape[1])]


def _by_worker(rows: list[np.ndarray], incoming: np.ndarray) -> list[np.ndarray]:
    """The inverse of :func:`_by_expert`: [my expert k: rows] -> [to worker i: its rows of each]."""
    pieces = [np.split(r, np.cumsum(incoming[:, k])[:-1]) for k, r in enumerate(rows)]
    return [np.concatenate([p[i] for p in pieces]) for i in range(incoming.shape[0])]


class ExpertShard:
    """The experts one worker holds and the all-to-alls that bring them tokens.

    ``w`` and ``g``: views of the whole parameter and gradient buffers (of which the worker
    uses the dense ones and its experts'); ``exchange``: a
    :class:`course_lib.parallel.exchange.ShmAllToAll`. ``served[k]`` counts the tokens its
    expert ``k`` has served.
    """

    monitor = None  # the step monitor that records its experts' work (set by the engine)

    def __init__(self, model, w: dict, g: dict, exchange, rank: int, workers: int):
        self.per, self.exchange, self.workers, self.width = model.experts // workers, exchange, workers, model.hidden
        self.mine = list(range(rank * self.per, (rank + 1) * self.per))  # my experts
        self.w, self.g = [expert_weights(w, e) for e in self.mine], [expert_weights(g, e) for e in self.mine]
        self.served = np.zeros(self.per, dtype=np.int64)

    def dispatch(self, u: np.ndarray, choice: np.ndarray, kept: np.ndarray, incoming: np.ndarray):
        """Send every kept assignment's token to the worker holding its expert; return the
        tokens each of my experts serves, and the plan: which token went where, in which order.
        ``incoming[i, k]``: tokens worker ``i`` sends to my expert ``k`` (:func:`kept_counts`)."""
        t, c = np.nonzero(kept)  # my kept assignments: token, choice rank
        e = choice[t, c]
        order = np.lexsort((t, c, e))  # by expert (hence by worker), then choice rank, then token
        t, c, e = t[order], c[order], e[order]
        plan = (t, c, np.bincount(e // self.per, minlength=self.workers), incoming)  # tokens to each worker
        return self.send(u[t], plan), plan

    def send(self, rows: np.ndarray, plan) -> list[np.ndarray]:
        """``rows`` (one per kept assignment, in plan order) to the workers of their experts;
        return the rows each of my experts receives, from every worker in rank order."""
        _, _, sizes, incoming = plan
        blocks = np.split(rows, np.cumsum(sizes)[:-1])  # block j: for worker j's experts
        arrived = self.exchange(blocks, [(n, self.width) for n in incoming.sum(axis=1)])  # all-to-all
        return _by_expert(arrived, incoming)

    def combine(self, rows: list[np.ndarray], plan) -> np.ndarray:
        """Send my experts' ``rows`` (outputs, or their inputs' gradients) back to the workers
        of their tokens; return what comes back for mine, in plan order."""
        _, _, sizes, incoming = plan
        returned = self.exchange(_by_worker(rows, incoming), [(n, self.width) for n in sizes])  # all-to-all
        return np.concatenate(returned)

    @recorded("E")
    def serve(self, k: int, rows: np.ndarray):
        """My expert ``k`` on the tokens that came to it: output and hidden units."""
        self.served[k] += rows.shape[0]
        return expert_forward(self.w[k], rows)

    @recorded("G")
    def serve_backward(self, k: int, rows: np.ndarray, hidden: np.ndarray, dout: np.ndarray) -> np.ndarray:
        """Its backward: its weight gradients (complete here), the gradient of its tokens."""
        return expert_backward(self.w[k], rows, hidden, dout, self.g[k])


def moe_forward(w: dict, x: np.ndarray, model, shard: ExpertShard, gather, tokens: int, rank: int):
    """Logits of my tokens ``x`` (a shard of a batch of ``tokens``), the experts reached by
    all-to-all; ``gather`` shares every worker's routing counts (an all-gather)."""
    u = np.maximum(x @ w["in.W"] + w["in.b"], 0)
    g = u @ w["gate.W"]
    probs = np.exp(g - g.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    choice, weight = route(probs, model.top_k)
    counts = np.stack(gather([route_counts(choice, model.experts)] * shard.workers))  # (N, top_k, E)
    cap, total = model.capacity(tokens), counts.sum(axis=0)
    before = (np.cumsum(total, axis=0) - total) + counts[:rank].sum(axis=0)  # served before my choices
    kept_n = kept_counts(counts, cap)
    rows, plan = shard.dispatch(u, choice, kept_assignments(choice, before, cap), kept_n[:, :, shard.mine].sum(axis=1))
    served = [shard.serve(k, r) for k, r in enumerate(rows)]
    out = shard.combine([o for o, _ in served], plan)  # my tokens' expert outputs, in plan order
    t, c = plan[0], plan[1]
    z = u.copy()
    np.add.at(z, t, weight[t, c, None] * out)  # the residual plus the weighted outputs
    cache = {"x": x, "u": u, "probs": probs, "choice": choice, "weight": weight, "z": z, "rows": rows,
             "served": served, "plan": plan, "out": out, "counts": counts, "kept": kept_n}
    return z @ w["out.W"] + w["out.b"], cache


def moe_backward(w: dict, g: dict, cache: dict, dlogits: np.ndarray, model, shard: ExpertShard, tokens: int):
    """ADD my shard's gradient into ``g`` (the dense part is the caller's to all-reduce) and
    return my tokens' part of the load-balancing loss (of the batch's, times ``tokens``)."""
    t, c = cache["plan"][0], cache["plan"][1]
    g["out.W"] += cache["z"].T @ dlogits
    g["out.b"] += dlogits.sum(axis=0)
    dz = dlogits @ w["out.W"].T
    dweight = np.zeros_like(cache["weight"])
    dweight[t, c] = (dz[t] * cache["out"]).sum(axis=1)
    douts = shard.send(cache["weight"][t, c, None] * dz[t], cache["plan"])  # the outputs' gradients go out
    drows = [shard.serve_backward(k, cache["rows"][k], cache["served"][k][1], d) for k, d in enumerate(douts)]
    du = dz.copy()
    np.add.at(du, t, shard.combine(drows, cache["plan"]))  # the gradients of my tokens come back
    f = cache["counts"].sum(axis=0)[0] / tokens  # the batch's first choices, every worker's
    dprobs = route_backward(cache["probs"], cache["choice"], dweight) + model.aux_weight * model.experts * f
    dg = gate_backward(cache["probs"], dprobs)
    g["gate.W"] += cache["u"].T @ dg
    du = (du + dg @ w["gate.W"].T) * (cache["u"] > 0)
    g["in.W"] += cache["x"].T @ du
    g["in.b"] += du.sum(axis=0)
    return model.aux_weight * model.experts * float((f * cache["probs"].sum(axis=0)).sum())


def expert_worker_loop(wctx, job, x, y, params, grad, shard: ExpertShard, comm, gather, batches):
    """One worker's steps: its shard of each batch, its experts; the dense gradients all-reduced,
    the experts' (complete on their worker) applied where they live."""
    model, dense = job.model, job.model.n_dense
    w, g, update, losses = model.views(params), model.views(grad), np.zeros_like(params), []
    comm.start()  # every worker is ready: the clocks start together
    for idx in batches:
        lo, hi = shard_bounds(idx.size, wctx.world_size)[wctx.rank]
        mine = idx[lo:hi]  # my shard of the batch
        logits, cache = moe_forward(w, x[mine], model, shard, gather, idx.size, wctx.rank)
        loss, dlogits = softmax_cross_entropy(logits, y[mine], reduction="sum")
        grad.fill(0)
        loss += moe_backward(w, g, cache, dlogits, model, shard, idx.size)
        comm.gradient_buffer()[:] = grad[:dense]
        comm.wait()  # every worker has its dense gradient
        job.update(params[:dense], comm.allreduce(), idx.size, None, update[:dense])
        job.update(params[dense:], grad[dense:], idx.size, None, update[dense:])  # only my experts' are nonzero
        losses.append(loss)
    return losses
