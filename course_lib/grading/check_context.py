"""Checks of context parallelism: ``OnlineSoftmax.add``, ``RingAttention.forward`` and
``AllToAllAttention.to_heads``.

``OnlineSoftmax.add`` runs in this process on blocks of scores whose largest value rises,
falls and rises again (once far beyond what ``exp`` can take without the maximum taken
off), some for a part of the query rows only: after every block the running maximum, the
sum of the weights and the weighted sum of the values must be what the blocks seen so far
give (float64, within 1e-10), and the result attention over all of them.

``RingAttention.forward`` and ``AllToAllAttention.to_heads`` first run on threads of this
process, one per worker, through the course's shared-memory ring and all-to-all (on plain
arrays) seen through proxies that write down what each worker sends and when: with 2 and 3
workers, both splits, with and without the causal mask. Every worker's output must be
attention of its queries over every key (float64, within 1e-10; the all-to-all moves
numbers, so its result must be exact). Then the course's trainer,
:func:`course_lib.parallel.train.context.train_context_parallel`, runs with them on two
processes (the zig-zag split, the causal mask), with the graders' short timeout: its trained
parameters must equal :func:`course_lib.parallel.train.reference.train_serial`'s within 1e-6
(float64), as the course's own code does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..parallel.context import chunk_pairs, sequence_chunks, token_positions
from ..transformer import _heads, _merge
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

MODULE = "course_lib.parallel.context"
#: Sequences of the thread runs: B sequences of L tokens, hidden size H in 6 heads of 2.
B, L, H, HEAD = 2, 12, 12, 2
#: (workers, split, causal) of the thread runs of the ring.
RING_CASES = ((2, "even", False), (3, "zigzag", True), (3, "even", True), (2, "zigzag", True))
#: (workers, split) of the thread runs of the all-to-all.
A2A_CASES = ((2, "even"), (3, "zigzag"), (2, "zigzag"))
TOLERANCE = 1e-10


@dataclass(frozen=True)
class _Ctx:
    rank: int
    world_size: int
    wait_timeout: float = GRADER_TIMEOUT


def _qkv(seed: int = 3):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((B, L, H)) for _ in range(3))


# ------------------------------------------------------------------ OnlineSoftmax.add
#: (rows, keys, shift) of each block folded: its scores are normal numbers plus ``shift``.
#: The maximum rises (block 1), stays (block 2, rows 1-3 only), rises far beyond exp's range
#: for rows 0-1 (block 3), and a block with hidden keys (-inf) comes last.
BLOCKS = ((slice(0, 5), 4, 0.0), (slice(0, 5), 3, 6.0), (slice(1, 4), 5, -3.0), (slice(0, 2), 2, 720.0),
          (slice(0, 5), 3, 2.0))
SHAPE = (2, 2, 5, 3)  # (B, heads, queries, head size)


def _blocks(seed: int = 0):
    rng = np.random.default_rng(seed)
    out = []
    for k, (rows, keys, shift) in enumerate(BLOCKS):
        n = rows.stop - rows.start
        scores = 2.0 * rng.standard_normal(SHAPE[:2] + (n, keys)) + shift
        if k == len(BLOCKS) - 1:
            scores[..., 0] = -np.inf  # a hidden key: weight 0
        out.append((rows, scores, rng.standard_normal(SHAPE[:2] + (keys, SHAPE[3]))))
    return out


def _fold(m, s, o, rows, scores, v):
    """The running state after one block, the long way (copies)."""
    m, s, o = m.copy(), s.copy(), o.copy()
    new = np.maximum(m[..., rows, :], scores.max(axis=-1, keepdims=True))
    rescale = np.exp(m[..., rows, :] - new)
    p = np.exp(scores - new)
    s[..., rows, :] = s[..., rows, :] * rescale + p.sum(axis=-1, keepdims=True)
    o[..., rows, :] = o[..., rows, :] * rescale + p @ v
    m[..., rows, :] = new
    return m, s, o


def _near(a, b) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=TOLERANCE, atol=1e-300, equal_nan=False))


def _add_mistake(k: int, before, after, ref, rows, scores, v) -> str:
    """Why the state after block ``k`` (``after``: the learner's m, s, o) is not ``ref``."""
    names = ("m", "s", "o")
    said = f"OnlineSoftmax.add, block {k} (query rows {rows.start}-{rows.stop - 1})"
    for name, got, old in zip(names, after, before):
        outside = np.ones(got.shape[-2], bool)
        outside[rows] = False
        if got.shape == old.shape and not np.array_equal(got[..., outside, :], old[..., outside, :]):
            return (f"{said} changed self.{name} of query rows outside `rows`: a block holds the scores of those "
                    f"rows only; read and write self.{name}[..., rows, :]")
    m0, s0, o0 = (x[..., rows, :] for x in before)
    m1, s1, o1 = (x[..., rows, :] for x in after)
    top = scores.max(axis=-1, keepdims=True)
    new = np.maximum(m0, top)
    rose = bool((top > m0).any() and np.isfinite(m0).all())
    if not _near(after[0], ref[0]):
        if _near(m1, top):
            return (f"{said}: self.m is this block's largest score, not the largest so far: the new maximum is "
                    "np.maximum(old m, the block's largest score)")
        if _near(m1, m0):
            return f"{said}: self.m was never updated: store the new maximum, self.m[..., rows, :] = m_new"
        return f"{said}: self.m is not the largest score seen so far: {arrays_differ(after[0], ref[0])}"
    rescale, p = np.exp(m0 - new), np.exp(scores - new)
    with np.errstate(all="ignore"):
        raw = np.exp(scores)
        for name, got, old, block, want in (("s", s1, s0, p.sum(axis=-1, keepdims=True), after[1]),
                                            ("o", o1, o0, p @ v, after[2])):
            wanted = ref[1] if name == "s" else ref[2]
            if _near(want, wanted):
                continue
            if not np.isfinite(got).all() and not np.isfinite(raw).all():
                return (f"{said}: self.{name} overflowed (inf or nan): exp of a score of "
                        f"{float(scores.max()):.0f} is beyond float64; take the maximum off first, "
                        "p = exp(scores - m_new)")
            if rose and _near(got, old + block):
                which = "running sum s" if name == "s" else "weighted sum of the values o"
                return (f"{said}: the {which} was not rescaled when the maximum changed (it rose from "
                        f"{float(m0.max()):.3g} to {float(new.max()):.3g} here): multiply the old self.{name} by "
                        "exp(m_old - m_new) before adding this block's part, as if the new maximum had been "
                        "taken off from the start")
            if _near(got, block):
                return (f"{said}: self.{name} holds this block's part only: add it to the old self.{name} "
                        "(rescaled by exp(m_old - m_new)), which holds every block before")
            part = raw.sum(axis=-1, keepdims=True) if name == "s" else raw @ v
            if _near(got, old * rescale + part):
                return (f"{said}: this block's weights are exp(score), not exp(score - m_new): take the new "
                        f"maximum off, so that self.{name} stays on the same scale as before")
            return f"{said}: self.{name} is not what the blocks so far give: {arrays_differ(want, wanted)}"
    return ""


def check_online_softmax_add() -> None:
    cls = learner(MODULE, "OnlineSoftmax")
    state = cls(SHAPE)
    m, s, o = state.m.copy(), state.s.copy(), state.o.copy()
    blocks = _blocks()
    for k, (rows, scores, v) in enumerate(blocks):
        before = (state.m.copy(), state.s.copy(), state.o.copy())
        state.add(rows, scores.copy(), v.copy())
        m, s, o = _fold(m, s, o, rows, scores, v)
        after = (np.asarray(state.m), np.asarray(state.s), np.asarray(state.o))
        if any(np.shape(a) != np.shape(r) for a, r in zip(after, (m, s, o))):
            raise Mistake(f"OnlineSoftmax.add changed the shapes of the state (m {np.shape(after[0])}, s "
                          f"{np.shape(after[1])}, o {np.shape(after[2])}): update self.m, self.s, self.o in place, "
                          "rows `rows` only")
        mistake = _add_mistake(k, before, after, (m, s, o), rows, scores, v)
        if mistake:
            raise Mistake(mistake)
    # the result: attention of every query row over every key it saw, at once
    out, lse = state.result()
    for q in range(SHAPE[2]):
        seen = [(sc[..., q - r.start, :], v) for r, sc, v in blocks if r.start <= q < r.stop]
        scores = np.concatenate([sc for sc, _ in seen], axis=-1)
        values = np.concatenate([v for _, v in seen], axis=-2)
        top = scores.max(axis=-1, keepdims=True)
        w = np.exp(scores - top)
        expected = (w / w.sum(axis=-1, keepdims=True))[..., None, :] @ values
        if not _near(out[..., q, :], expected[..., 0, :]):
            raise Mistake(f"OnlineSoftmax.add: o / s for query row {q} is not attention over every key folded: "
                          f"{arrays_differ(out[..., q, :], expected[..., 0, :])}")
        if not _near(lse[..., q, 0], (top + np.log(w.sum(axis=-1, keepdims=True)))[..., 0]):
            raise Mistake(f"OnlineSoftmax.add: m + log s for query row {q} is not the log-sum-exp of its scores")


# ------------------------------------------------------------------ RingAttention.forward
class _Ring:
    """The course's ring seen through a log: ("send", arrays) and ("recv",) of each worker."""

    def __init__(self, inner, log: list, said: str = "RingAttention.forward", rank: int = 0):
        self._inner, self.log, self.said, self.rank = inner, log, said, rank

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def send(self, *arrays):
        self.log.append(("send", [np.array(a, copy=True) for a in arrays]))
        return self._inner.send(*arrays)

    def recv(self):
        self.log.append(("recv",))
        kinds = [e[0] for e in self.log]
        if kinds.count("recv") > kinds.count("send"):  # at once: what it would read was never sent
            raise Mistake(_RECV_FIRST.format(said=self.said, rank=self.rank))
        return self._inner.recv()


_RECV_FIRST = ("{said}: worker {rank} received before it sent: every worker waits in recv() for the block of the "
               "worker before it, which nobody has sent yet this step (it reads a stale buffer); send your block "
               "first (self.ring.send(k, v)), compute with it, then receive")


def _expected(q_all, k_all, v_all, chunks, rank: int, causal: bool, plan=None):
    """Worker ``rank``'s attention output (B, my tokens, H), the heads' output and the
    log-sum-exp, over the blocks of ``plan``: (whose keys, whose chunk pairs) of each block
    folded (default: every worker's, with its own pairs)."""
    workers = len(chunks)
    plan = [((rank - s) % workers,) * 2 for s in range(workers)] if plan is None else plan
    mine = chunks[rank]
    q = _heads(q_all[:, token_positions(mine)], HEAD)
    scores, values = [], []
    for owner, pairs_of in plan:
        theirs = token_positions(chunks[owner])
        k, v = _heads(k_all[:, theirs], HEAD), _heads(v_all[:, theirs], HEAD)
        block = np.full(q.shape[:-1] + (theirs.size,), -np.inf)
        for rows, cols, mask in chunk_pairs(mine, chunks[pairs_of], causal):
            part = q[..., rows, :] @ k[..., cols, :].swapaxes(-1, -2) / math.sqrt(HEAD)
            block[..., rows, cols] = part if mask is None else np.where(mask, part, -np.inf)
        scores.append(block)
        values.append(v)
    scores, values = np.concatenate(scores, axis=-1), np.concatenate(values, axis=-2)
    with np.errstate(all="ignore"):
        top = scores.max(axis=-1, keepdims=True)
        w = np.exp(scores - top)
        total = w.sum(axis=-1, keepdims=True)
        out = (w / total) @ values
    return _merge(out), out, top + np.log(total)


def _ring_run(workers: int, split: str, causal: bool):
    """The learner's forward on ``workers`` threads: each worker's result and log."""
    from ..parallel.exchange import ShmRing

    cls = learner(MODULE, "RingAttention")
    q_all, k_all, v_all = _qkv()
    chunks = sequence_chunks(L, workers, split)
    block = B * (L // workers) * H
    slots, stamps = np.zeros((workers, 2, 2 * block)), np.zeros((workers, 2))
    logs = [[] for _ in range(workers)]

    def work(rank, barrier):
        said = f"RingAttention.forward ({workers} workers, {split} split{', causal' if causal else ''})"
        ring = _Ring(ShmRing(_Ctx(rank, workers), slots, stamps, barrier), logs[rank], said, rank)
        pos = token_positions(chunks[rank])
        return cls(ring, chunks, rank, causal).forward(q_all[:, pos], k_all[:, pos], v_all[:, pos], HEAD)

    def unmatched(waits, returned):
        left = [r for r, done in enumerate(returned) if done]
        return (f"RingAttention.forward: the workers did not make the same steps round the ring "
                f"({counted(waits, 'receives')}; worker(s) {left} returned while others waited for a block): every "
                f"worker sends and receives N - 1 = {workers - 1} blocks, in the same order; one that skips a "
                "step leaves the others waiting for ever (on processes: a hang)")

    results = run_threads(workers, work, unmatched)
    return q_all, k_all, v_all, chunks, results, logs


def _check_ring_log(log: list, rank: int, workers: int, q_all, k_all, v_all, chunks, said: str) -> None:
    """What worker ``rank`` sent, and in which order it sent and received."""
    kinds = [e[0] for e in log]
    if workers > 1 and kinds and kinds[0] == "recv":
        raise Mistake(_RECV_FIRST.format(said=said, rank=rank))
    sends = [e[1] for e in log if e[0] == "send"]
    if kinds.count("send") != workers - 1 or kinds.count("recv") != workers - 1:
        raise Mistake(f"{said}: worker {rank} sent {kinds.count('send')} and received {kinds.count('recv')} blocks; "
                      f"with N = {workers} workers a block makes N - 1 = {workers - 1} hops: send and receive in "
                      "every step but the last (the last block needs no passing on)")
    mine = token_positions(chunks[rank])
    q_mine = _heads(q_all[:, mine], HEAD)
    for s, arrays in enumerate(sends):
        owner = (rank - s) % workers
        theirs = token_positions(chunks[owner])
        k, v = _heads(k_all[:, theirs], HEAD), _heads(v_all[:, theirs], HEAD)
        if any(a.shape == q_mine.shape and np.array_equal(a, q_mine) for a in arrays) or any(
                a.shape == q_all[:, mine].shape and np.array_equal(a, q_all[:, mine]) for a in arrays):
            raise Mistake(f"{said}: worker {rank} sends its query block round the ring: the queries stay where they "
                          "are (each worker computes the output of its own tokens); the KEY and VALUE blocks "
                          "travel, self.ring.send(k, v)")
        if len(arrays) == 2 and all(a.shape == k.shape for a in arrays) and np.array_equal(arrays[0], k) \
                and np.array_equal(arrays[1], v):
            continue
        own = _heads(k_all[:, mine], HEAD)
        if s > 0 and arrays and arrays[0].shape == own.shape and np.array_equal(arrays[0], own):
            raise Mistake(f"{said}: worker {rank} sends its own key block again at step {s}: pass on the block it "
                          "received, k, v = self.ring.recv(), the one it computes with next")
        raise Mistake(f"{said}: at step {s} worker {rank} sent {len(arrays)} array(s) of shape(s) "
                      f"{[a.shape for a in arrays]}; it sends the key and value blocks it holds, split into heads, "
                      f"(B, heads, tokens, head size) = {k.shape}, self.ring.send(k, v)")


def _ring_values_mistake(got, rank, workers, q_all, k_all, v_all, chunks, causal, said) -> str:
    """Why worker ``rank``'s output is not attention over every key ("" if it is)."""
    expected, _, _ = _expected(q_all, k_all, v_all, chunks, rank, causal)
    if np.shape(got) == expected.shape and np.allclose(got, expected, rtol=0, atol=TOLERANCE):
        return ""
    ring = [(rank - s) % workers for s in range(workers)]
    variants = (
        ([(rank, rank)], "folded its own key/value block only: fold the block of every step, including each one "
                         "it receives (k, v = self.ring.recv())"),
        ([(o, rank) for o in ring], "computed every block with the chunk pairs of its own tokens, self.pairs(rank): "
                                    "after each receive the block is the previous worker's, owner = (owner - 1) % N, "
                                    "and the pairs (which keys each query sees) are self.pairs(owner)"),
        ([(o, (rank + s) % workers) for s, o in enumerate(ring)],
         "moved `owner` the wrong way round the ring: a block comes from the worker BEFORE, owner = (owner - 1) % N"),
        ([(ring[-1], ring[-1])], "kept only the last block: one OnlineSoftmax for the whole ring, created before "
                                 "the loop, folds every block"),
        ([(o, o) for o in ring[:-1]], "never folded the last block it received: fold in every one of the N steps, "
                                      "receive in the first N - 1"),
    )
    for plan, why in variants:
        if len(plan) == workers and plan == [(o, o) for o in ring]:
            continue
        out, _, _ = _expected(q_all, k_all, v_all, chunks, rank, causal, plan)
        if np.shape(got) == out.shape and np.allclose(got, out, rtol=0, atol=TOLERANCE, equal_nan=True):
            return f"{said}: worker {rank} {why}"
    return (f"{said}: worker {rank}'s output is not attention of its queries over every key: "
            f"{arrays_differ(np.asarray(got), expected)}")


def _check_trainer(method: str, name: str) -> None:
    """The course's context-parallel trainer with the learner's function, against train_serial."""
    from ..parallel.train.context import train_context_parallel
    from ..parallel.train.reference import train_serial
    from ..transformer import Transformer

    model = Transformer(seq_length=8, token_size=2, hidden=8, heads=4, n_layers=1, ffn=6, classes=3, causal=True)
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((16, 8, 2)), rng.integers(0, 3, 16)
    kw = dict(batch_size=8, steps=2, lr=0.3, seed=2)
    ref = train_serial(model, x, y, **kw)
    run = train_context_parallel(model, x, y, workers=2, method=method, split="zigzag", timeout=GRADER_TIMEOUT,
                                 start_method=start_method(), progress=False, **kw)
    require_trained_as_serial(run, ref, f"{name}: train_context_parallel(method={method!r}) on 2 processes "
                                        "(zig-zag split, causal)")


def check_ring_forward() -> None:
    name = "RingAttention.forward"
    for workers, split, causal in RING_CASES:
        said = f"{name} ({workers} workers, {split} split{', causal' if causal else ''})"
        q_all, k_all, v_all, chunks, results, logs = _ring_run(workers, split, causal)
        for rank, (got, log) in enumerate(zip(results, logs)):
            _check_ring_log(log, rank, workers, q_all, k_all, v_all, chunks, said)
            if not isinstance(got, tuple) or len(got) != 2:
                raise Mistake(f"{said}: worker {rank} returned {type(got).__name__}: return the output "
                              "_merge(out) and, for the backward, (out, lse) = state.result()")
            mistake = _ring_values_mistake(got[0], rank, workers, q_all, k_all, v_all, chunks, causal, said)
            if mistake:
                raise Mistake(mistake)
            _, out, lse = _expected(q_all, k_all, v_all, chunks, rank, causal)
            aux = got[1]
            if not (isinstance(aux, tuple) and len(aux) == 2 and np.shape(aux[0]) == out.shape
                    and np.shape(aux[1]) == lse.shape and np.allclose(aux[0], out, atol=TOLERANCE)
                    and np.allclose(aux[1], lse, atol=TOLERANCE)):
                raise Mistake(f"{said}: worker {rank}'s output is right, but what it keeps for the backward is not "
                              "(out, lse) = state.result(): the heads' output and each query's log-sum-exp, "
                              f"of shapes {out.shape} and {lse.shape}")
    _check_trainer("ring", name)


# ------------------------------------------------------------------ AllToAllAttention.to_heads
class _AllToAll:
    """The course's all-to-all seen through a log: the blocks each worker hands it."""

    def __init__(self, inner, log: list, rank: int, workers: int, width: int):
        self._inner, self.log, self.rank, self.workers, self.width = inner, log, rank, workers, width

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def post(self, blocks):
        blocks = list(blocks)
        self.log.append([np.array(b, copy=True) for b in blocks])
        mine = L // self.workers
        wanted = (B, mine, self.width // self.workers)
        shapes = [np.shape(b) for b in blocks]
        if len(blocks) != self.workers:
            raise Mistake(f"AllToAllAttention.to_heads: worker {self.rank} handed the all-to-all {len(blocks)} "
                          f"blocks: one per worker, N = {self.workers} (block j goes to worker j)")
        if any(s == (B, mine // self.workers, self.width) for s in shapes) or any(
                len(s) == 3 and s[1] != mine for s in shapes):
            raise Mistake(f"AllToAllAttention.to_heads: worker {self.rank} split its tokens (axis 1) into the blocks "
                          f"it sends, of shapes {shapes}: split the COLUMNS, axis -1, so that block j holds worker "
                          f"j's heads for every token it has, {wanted}")
        if any(s != wanted for s in shapes):
            raise Mistake(f"AllToAllAttention.to_heads: worker {self.rank} sends blocks of shapes {shapes}; block j "
                          f"holds the columns of worker j's heads for its own tokens, {wanted}: "
                          "np.split(t, N, axis=-1)")
        return self._inner.post(blocks)

    def __call__(self, blocks, shapes=None):
        self.post(blocks)
        return self._inner.collect(shapes)


def _to_heads_run(workers: int, split: str):
    from ..parallel.exchange import ShmAllToAll

    cls = learner(MODULE, "AllToAllAttention")
    t_all = np.random.default_rng(11).standard_normal((B, L, H))
    chunks = sequence_chunks(L, workers, split)
    boxes = np.zeros((2, workers, workers, B * (L // workers) * (H // workers)))
    logs = [[] for _ in range(workers)]
    errors = [None] * workers

    def work(rank, barrier):
        exchange = _AllToAll(ShmAllToAll(_Ctx(rank, workers), boxes, barrier), logs[rank], rank, workers, H)
        attend = cls(exchange, chunks, rank, False)
        try:
            return attend.to_heads(t_all[:, token_positions(chunks[rank])])
        except Mistake:
            raise
        except Exception as exc:  # noqa: BLE001 - named below if it happened after a right exchange
            if not logs[rank]:
                raise
            errors[rank] = exc
            return None

    def unmatched(waits, returned):
        return (f"AllToAllAttention.to_heads: the workers did not all join the all-to-all ({counted(waits, 'waits')}): "
                "every worker calls self.exchange(blocks) once, with one block for each worker")

    return t_all, chunks, run_threads(workers, work, unmatched), logs, errors


def check_to_heads() -> None:
    name = "AllToAllAttention.to_heads"
    for workers, split in A2A_CASES:
        said = f"{name} ({workers} workers, {split} split)"
        t_all, chunks, results, logs, errors = _to_heads_run(workers, split)
        width = H // workers
        for rank, got in enumerate(results):
            if not logs[rank]:
                raise Mistake(f"{said}: worker {rank} never called the all-to-all (self.exchange(blocks)): it holds "
                              "its own tokens only, and needs every worker's tokens of its heads")
            if errors[rank] is not None:
                exc = errors[rank]
                raise Mistake(f"{said}: worker {rank} raised {type(exc).__name__} ({exc}) after a right exchange: the "
                              f"N blocks it receives are N parts of the SEQUENCE (worker i's tokens, each (B, tokens, "
                              f"{width})): join them along the tokens, np.concatenate(..., axis=1), then reorder with "
                              "[:, self.order]")
            expected = t_all[:, :, rank * width:(rank + 1) * width]
            if np.shape(got) == expected.shape and np.array_equal(got, expected):
                continue
            gathered = t_all[:, np.concatenate([token_positions(c) for c in chunks]), rank * width:(rank + 1) * width]
            if np.shape(got) == expected.shape and np.array_equal(got, gathered):
                raise Mistake(f"{said}: worker {rank}'s tokens are in the order the workers hold them, not the "
                              "sequence's: with the zig-zag split worker j holds two chunks, one early and one late; "
                              "put them back in order with [:, self.order]")
            if np.shape(got) == expected.shape:
                for k in range(workers):
                    if k != rank and np.array_equal(got, t_all[:, :, k * width:(k + 1) * width]):
                        raise Mistake(f"{said}: worker {rank} ended with worker {k}'s heads: block j of what a worker "
                                      "sends goes to worker j (np.split(t, N, axis=-1), in order)")
            raise Mistake(f"{said}: worker {rank} should end with every token of its heads' columns "
                          f"[{rank * width}, {(rank + 1) * width}), shape {expected.shape}: "
                          f"{arrays_differ(np.asarray(got), expected)}")
    _check_trainer("all_to_all", name)


CHECKS = {
    "OnlineSoftmax.add": check_online_softmax_add,
    "RingAttention.forward": check_ring_forward,
    "AllToAllAttention.to_heads": check_to_heads,
}

HINTS = {
    "OnlineSoftmax.add": (
        "For each query row the state holds the largest score so far `m`, and two sums taken as if `m` had "
        "been subtracted from every score: `s`, the sum of `exp(score - m)`, and `o`, the sum of "
        "`exp(score - m) * v`. Work on the rows `rows` only: `self.m[..., rows, :]` and so on.",
        "A new block may raise the maximum: `m_new = np.maximum(old m, scores.max(axis=-1, keepdims=True))`. "
        "The old sums were taken with the old maximum; multiplied by `exp(m_old - m_new)` they are as if "
        "`m_new` had been subtracted from the start.",
        "The block's own weights: `p = np.exp(scores - m_new)`. Then `s = s * rescale + p.sum(axis=-1, "
        "keepdims=True)`, `o = o * rescale + p @ v`, and store `m_new`.",
    ),
    "RingAttention.forward": (
        "Split q, k, v into heads (`_heads(t, head_size)`). Each worker keeps its queries; the key/value "
        "blocks travel round the ring, one hop per step, N steps in all: in step s a worker holds the block "
        "of worker `(rank - s) % N`.",
        "One `OnlineSoftmax(q.shape)` for the whole ring. In each step: send the block you hold on "
        "(`self.ring.send(k, v)`, not in the last step), fold it (`self.fold(step, state, q, k, v, rows, cols, "
        "mask)` for each pair of `self.pairs(owner)`), then receive the next (`k, v = self.ring.recv()`) and "
        "move `owner` one back.",
        "After the loop: `out, lse = state.result()`; return `_merge(out)` and `(out, lse)`, which the "
        "backward needs.",
    ),
    "AllToAllAttention.to_heads": (
        "A worker holds its own tokens with every head's columns, `(B, my tokens, h)`; afterwards it holds "
        "every token with its own heads' columns, `(B, L, h / N)`.",
        "Split the columns into N blocks, `np.split(t, self.workers, axis=-1)`: block j holds worker j's "
        "heads. `self.exchange(blocks)` returns the block each worker sent you: worker i's tokens of your heads.",
        "Join those along the tokens (`axis=1`): worker 0's tokens, then worker 1's ... With the zig-zag split "
        "that is not the sequence's order: `[:, self.order]` puts it back.",
    ),
}
