"""Context parallelism (course_lib.parallel.context, train_context_parallel) against the serial
transformer: outputs, gradients and trained parameters for every worker count, both methods,
both splits, with and without the causal mask; its bytes, attention memory and work against
course_lib.context_cost; the causal split's busy times; the wire's overlap; bad input."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import context_cost as cc
from course_lib.datasets import load_parallel_layouts
from course_lib.models import TrainResult
from course_lib.parallel.allreduce import ActivationAllReduce, Wire
from course_lib.parallel.context import (
    AllToAllAttention,
    OnlineSoftmax,
    RingAttention,
    context_backward,
    context_forward,
    pair_work,
    sequence_chunks,
    token_positions,
)
from course_lib.parallel.exchange import ShmAllToAll, ShmRing
from course_lib.parallel.partition import batches
from course_lib.parallel.train.context import (
    check_context_split,
    ring_overlap,
    train_context_parallel,
)
from course_lib.parallel.train.reference import train_serial
from course_lib.transformer import (
    Transformer,
    _heads,
    _merge,
    attention,
    causal_mask,
    digit_sequences,
)

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean

#: L = 16 tokens of 2 features, 4 heads of size 2, 2 blocks: every N in 1, 2, 4, 8 divides L
#: (and 2 N for the zig-zag split up to 8), 1, 2, 4 the heads.
MODEL = Transformer(seq_length=16, token_size=2, hidden=8, heads=4, n_layers=2, ffn=6, classes=3)
RNG = np.random.default_rng(5)
X = RNG.standard_normal((30, 16, 2))
Y = RNG.integers(0, 3, 30)
KW = dict(batch_size=8, steps=3, lr=0.3, seed=2)  # batches 8, 8, 8
RUN = dict(start_method="fork", progress=False)
CASES = [(method, split, n) for method in ("ring", "all_to_all") for split in ("even", "zigzag")
         for n in (1, 2, 4, 8) if not (method == "all_to_all" and n > 4) and not (split == "zigzag" and n > 8)]
#: On processes: 8 workers (0.6 s a run) in make test only; the threads above check their sums.
PROCESS_CASES = [pytest.param(*case, marks=pytest.mark.slow) if case[2] == 8 else case for case in CASES]


# ------------------------------------------------------------------ the model's option
def test_digits_as_64_one_pixel_tokens():
    x = np.arange(128.0).reshape(2, 64)
    assert digit_sequences(x).shape == (2, 8, 8)  # chapter 12's reading is the default
    assert digit_sequences(x, 64).shape == (2, 64, 1)
    assert digit_sequences(x, 64)[1, :, 0].tolist() == x[1].tolist()  # pixel order, row by row
    assert digit_sequences(x, 16)[0, 1].tolist() == [4.0, 5.0, 6.0, 7.0]
    for bad in (3, 0, 128, -8):
        with pytest.raises(ValueError, match="tokens must be one of"):
            digit_sequences(x, bad)
    for bad in (8.0, True, "8", None):
        with pytest.raises(TypeError, match="tokens must be an integer"):
            digit_sequences(x, bad)


def test_the_causal_mask_hides_the_later_tokens():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 5, 4)) for _ in range(3))
    out, probs = attention(q, k, v, 2, causal=True)
    assert np.all(probs[..., ~causal_mask(5)] == 0) and np.allclose(probs.sum(-1), 1)
    first = attention(q[:, :1], k[:, :1], v[:, :1], 2)[0]  # token 0 sees itself only
    assert np.allclose(out[:, :1], first)
    causal = dataclasses.replace(MODEL, causal=True)
    assert causal.attend(q, k, v, 2)[1][..., 0, 1].max() == 0 and not MODEL.causal
    with pytest.raises(TypeError, match="causal must be True or False"):
        Transformer(causal="yes")


def test_the_causal_models_gradient_is_the_numerical_one():
    model = Transformer(seq_length=4, token_size=2, hidden=4, heads=2, n_layers=1, ffn=3, classes=3, causal=True)
    p, x, y = model.init_params(1), RNG.standard_normal((3, 4, 2)), np.array([0, 2, 1])
    loss, g = model.loss_and_grad(p, x, y)
    num = np.zeros_like(p)
    for i in range(p.size):
        d = np.zeros_like(p)
        d[i] = 1e-6
        num[i] = (model.loss_and_grad(p + d, x, y)[0] - model.loss_and_grad(p - d, x, y)[0]) / 2e-6
    assert np.abs(num - g).max() < 1e-7


# ------------------------------------------------------------------ the pieces
@settings(max_examples=30, deadline=None)
@given(blocks=st.lists(st.integers(1, 5), min_size=1, max_size=4), seed=st.integers(0, 10**6),
       reverse=st.booleans())
def test_the_online_softmax_over_blocks_in_any_order_is_attention(blocks, seed, reverse):
    rng = np.random.default_rng(seed)
    keys = sum(blocks)
    q, k, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, keys, 4)), rng.standard_normal((2, keys, 4))
    state = OnlineSoftmax((2, 2, 3, 2))
    qh, kh, vh = (_heads(t, 2) for t in (q, k, v))
    edges = np.cumsum([0, *blocks])
    order = range(len(blocks))[::-1] if reverse else range(len(blocks))
    for b in order:
        cols = slice(edges[b], edges[b + 1])
        state.add(slice(0, 3), 10 * qh @ kh[..., cols, :].swapaxes(-1, -2), vh[..., cols, :])  # large scores
    out, lse = state.result()
    scores = 10 * qh @ kh.swapaxes(-1, -2)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    assert np.allclose(_merge(out), _merge(expected @ vh), atol=1e-12)
    assert np.allclose(lse[..., 0], np.log(np.exp(scores - scores.max(-1, keepdims=True)).sum(-1)) + scores.max(-1))


def test_the_splits_hand_out_every_token_once():
    assert sequence_chunks(8, 2) == [[(0, 4)], [(4, 8)]]
    assert sequence_chunks(16, 4, "zigzag")[1] == [(2, 4), (12, 14)]
    for split in ("even", "zigzag"):
        for n in (1, 2, 4):
            chunks = sequence_chunks(16, n, split)
            assert sorted(np.concatenate([token_positions(c) for c in chunks]).tolist()) == list(range(16))


@settings(max_examples=40, deadline=None)
@given(n=st.sampled_from([1, 2, 4, 8]), per=st.sampled_from([1, 2, 3]), split=st.sampled_from(["even", "zigzag"]),
       causal=st.booleans())
def test_the_pairs_the_ring_computes_are_the_formulas_work(n, per, split, causal):
    L = 2 * n * per
    assert pair_work(L, n, split, causal).tolist() == cc.attention_work(L, n, split, causal).tolist()


def test_the_causal_work_of_the_splits_by_hand():
    assert cc.attention_work(64, 4, "even").tolist() == [256, 512, 768, 1024]  # 1, 2, 3, 4 blocks of 16 x 16
    assert cc.attention_work(64, 4, "zigzag").tolist() == [10 * 64] * 4  # 3 halves of 4 chunk pairs, 1 whole, 8 x 8
    assert cc.attention_work(64, 4, "even", causal=False).tolist() == [1024] * 4
    assert cc.causal_imbalance(64, 4, "even") == pytest.approx(1024 / 640)  # 2 N / (N + 1)
    assert cc.causal_imbalance(64, 4, "zigzag") == 1.0


class _ThreadBarrier:
    """A barrier for threads with the workers' interface ``wait(rank, timeout)``."""

    def __init__(self, parties):
        self.barrier = threading.Barrier(parties)

    def wait(self, rank, timeout):
        self.barrier.wait(timeout)


class _Ctx:
    def __init__(self, rank, world):
        self.rank, self.world_size, self.wait_timeout = rank, world, 10.0


def _threads(model, method, split, workers, x, y, params):
    """One forward and backward of every worker, as threads sharing numpy arrays: the logits
    and every worker's gradient (its tokens' share)."""
    chunks = sequence_chunks(model.seq_length, workers, split)
    barrier, batch = _ThreadBarrier(workers), x.shape[0]
    block = batch * (model.seq_length // workers) * model.hidden
    slots, stamps = np.zeros((workers, 2, 2 * block)), np.zeros((workers, 2))
    boxes = np.zeros((2, workers, workers, block // workers))
    rows, reduced = np.zeros((workers, batch * model.hidden)), np.zeros(batch * model.hidden)
    out, errors = [None] * workers, []

    def run(rank):
        try:
            ctx = _Ctx(rank, workers)
            if method == "ring":
                attend = RingAttention(ShmRing(ctx, slots, stamps, barrier), chunks, rank, model.causal)
            else:
                attend = AllToAllAttention(ShmAllToAll(ctx, boxes, barrier), chunks, rank, model.causal)
            pooled, mine = ActivationAllReduce(ctx, rows, reduced, barrier), token_positions(chunks[rank])
            w, grad = model.views(params), np.zeros_like(params)
            logits, cache = context_forward(w, x[:, mine], mine, model, attend, pooled)
            from course_lib.models import softmax_cross_entropy

            _, dlogits = softmax_cross_entropy(logits, y, reduction="mean")
            context_backward(w, cache, dlogits, model.views(grad), mine, model, attend)
            out[rank] = (logits, grad)
        except Exception as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)
            barrier.barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    if errors:
        raise errors[0]
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("method", "split", "workers"), CASES)
def test_outputs_and_gradients_equal_the_serial_model(method, split, workers, causal):
    model = dataclasses.replace(MODEL, causal=causal)
    p = model.init_params(3)
    x, y = X[:5], Y[:5]
    logits, cache = model.forward(p, x)
    _, grad = model.backward(p, cache, y, logits=logits)
    out = _threads(model, method, split, workers, x, y, p)
    for worker_logits, _ in out:
        assert np.abs(worker_logits - logits).max() < 1e-12  # every worker: all the logits
    total = sum(g for _, g in out)  # the all-reduce of the tokens' shares
    assert np.abs(total - grad).max() < 1e-12


# ------------------------------------------------------------------ on processes
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("method", "split", "workers"), PROCESS_CASES)
def test_trained_parameters_equal_the_serial_run(method, split, workers, causal):
    model = dataclasses.replace(MODEL, causal=causal)
    ref = train_serial(model, X, Y, **KW)
    run = train_context_parallel(model, X, Y, workers=workers, method=method, split=split, **KW, **RUN)
    assert np.abs(run.params - ref.params).max() <= 1e-6
    np.testing.assert_allclose(run.loss, ref.loss, rtol=1e-9)
    assert run.replicas_in_sync and run.backend == "context" and run.workers == workers
    assert run.extra["causal"] is causal and run.extra["method"] == method
    # bytes: every step, what the formula says (nothing with one worker)
    formula = cc.ring_bytes if method == "ring" else cc.all_to_all_bytes
    expected = [formula(16, idx.size, 8, workers, n_layers=2) for idx in batches(30, 8, 2, steps=3)]
    assert run.bytes_per_step.tolist() == expected
    assert np.all(run.extra["bytes"] == run.bytes_per_step[:, None])  # every worker receives the same
    # attention memory: the largest block of scores each worker held
    assert {m["scores"] for m in run.memory} == {cc.score_bytes(16, 8, 4, workers, method)}
    # work: the scores each worker computed (the ring: forward and backward; the all-to-all: its
    # heads' L x L, forward), every layer and step
    if method == "ring":
        expected_work = 2 * 2 * 3 * 8 * 4 * cc.attention_work(16, workers, split, causal)
    else:
        expected_work = np.full(workers, 2 * 3 * 8 * (4 // workers) * 16 * 16)
    assert run.extra["computed"] == expected_work.tolist()


def test_the_causal_argument_overrides_the_model():
    ref = train_serial(dataclasses.replace(MODEL, causal=True), X, Y, **KW)
    run = train_context_parallel(MODEL, X, Y, workers=2, causal=True, **KW, **RUN)
    assert np.abs(run.params - ref.params).max() <= 1e-6 and run.extra["causal"] is True


def test_the_bytes_by_hand():
    # L = 16 on 4 workers, B = 8, h = 8, float64: a worker's key block is 8 x 4 x 8 = 256 values
    assert cc.ring_bytes(16, 8, 8, 4) == (2 * 3 + 2 * 3 + 2 * 4) * 256 * 8  # forward, backward K V, dK dV
    assert cc.ring_bytes(16, 8, 8, 4, backward=False) == 2 * 3 * 256 * 8
    assert cc.all_to_all_bytes(16, 8, 8, 4) == 8 * 3 * 64 * 8  # 8 all-to-alls, 3 blocks of 8 x 4 x 2
    assert cc.ring_bytes(16, 8, 8, 1) == cc.all_to_all_bytes(16, 8, 8, 1) == 0
    assert cc.score_bytes(16, 8, 4, 1) == 8 * 4 * 16 * 16 * 8
    assert cc.score_bytes(16, 8, 4, 4, "ring") == 8 * 4 * 4 * 4 * 8
    assert cc.score_bytes(16, 8, 4, 4, "all_to_all") == 8 * 1 * 16 * 16 * 8


def test_a_ring_with_a_wire_overlaps_what_the_timeline_says():
    run = train_context_parallel(MODEL, X, Y, workers=2, wire=Wire(1e-4, 2e8), **KW, **RUN)
    assert np.abs(run.params - train_serial(MODEL, X, Y, **KW).params).max() <= 1e-6  # the wire changes no bit
    o = ring_overlap(run)
    w = 1e-4 + 2 * 8 * 8 * 8 * 8 / 2e8
    assert o["message_time"] == pytest.approx(w)
    # 2 layers x (1 forward hop + 1 backward hop of keys and values + 2 of their gradients)
    assert o["messages"].tolist() == [8.0, 8.0]
    assert np.allclose(o["wire"], 2 * 8 * w)
    assert np.all(o["overlapped"] <= o["wire"] + 1e-9) and np.all(o["model_overlapped"] <= o["wire"] + 1e-9)
    assert np.all(o["exposed"] >= 0) and np.all(o["exposed"] <= o["wire"] + 1e-9)
    with pytest.raises(ValueError, match="ring_overlap needs"):
        ring_overlap(train_context_parallel(MODEL, X, Y, workers=2, **KW, **RUN))


def test_the_overlap_of_a_hand_made_timeline():
    # worker 1 sends at 0, computes 0-2 ms, asks at 3 ms; worker 0 likewise, 1 ms later; w = 2.5 ms
    ops = [(0, 0, "S", -1, 0.001, 0.001), (0, 0, "F", 0, 0.001, 0.003), (0, 0, "R", -1, 0.004, 0.004),
           (1, 0, "S", -1, 0.000, 0.000), (1, 0, "F", 0, 0.000, 0.002), (1, 0, "R", -1, 0.003, 0.003)]
    result = TrainResult.one_process(np.zeros(1), [0.0], [0.01], "context", batch_size=1)
    result.workers = 2
    result.extra.update(method="ring", wire=Wire(0.0025, 1e30), chunks=[[(0, 1)], [(1, 2)]], hidden=1, ops=ops,
                        exposed=np.array([[0.0, 0.0005]]))
    o = ring_overlap(result, skip=0)
    # worker 0's block (sent by 1 at 0) is on the wire 0-2.5 ms, worker 0 computes 1-3 ms: 1.5 ms
    # worker 1's block (sent by 0 at 1 ms) is on the wire 1-3.5 ms, worker 1 computes 0-2 ms: 1 ms
    assert o["overlapped"].tolist() == pytest.approx([0.0015, 0.001])
    assert o["model_overlapped"].tolist() == pytest.approx([0.002, 0.002])  # min(w, the hop's 2 ms)
    assert o["exposed"].tolist() == [0.0, 0.0005]


@pytest.mark.slow  # several runs of 4 processes: a few seconds
def test_the_causal_even_split_loads_the_last_worker_and_the_zigzag_split_balances():
    model = Transformer(seq_length=64, token_size=1, hidden=16, heads=4, n_layers=1, ffn=16, causal=True)
    rng = np.random.default_rng(0)
    x, y = rng.random((128, 64, 1)), rng.integers(0, 10, 128)
    busy = {}
    for split in ("even", "zigzag"):
        run = train_context_parallel(model, x, y, workers=4, split=split, batch_size=128, steps=4, lr=0.1, **RUN)
        busy[split] = np.median(run.extra["busy"][1:], axis=0)  # CPU seconds in attention per step
        work = np.array(run.extra["computed"])
        assert work.tolist() == (2 * 4 * 128 * 4 * cc.attention_work(64, 4, split)).tolist()
    even, zigzag = busy["even"], busy["zigzag"]
    assert np.all(np.diff(even) > 0), even  # worker j computes j + 1 blocks: each busier than the last
    assert even[-1] > 1.8 * even[0], even  # the counted work says 4 times
    assert zigzag.max() < 1.3 * zigzag.min(), zigzag  # the counted work is equal
    # the busiest against the mean (the counted work: 1.00 against 1.60); not the busiest's time itself,
    # which also depends on how fast each split computes a score (two chunks are two smaller products)
    assert zigzag.max() / zigzag.mean() < even.max() / even.mean(), (zigzag, even)


# ------------------------------------------------------------------ where they fit, a real case
def test_the_long_context_case_from_the_llama_3_paper():
    row = {r.model: r for r in load_parallel_layouts()}["Llama 3 405B"]
    assert (row.sequence_length, row.context_parallel, row.tensor_parallel, row.pipeline_parallel,
            row.data_parallel, row.gpus) == (131072, 16, 8, 16, 8, 16384)
    assert "arXiv:2407.21783" in row.source
    case = cc.long_context_case()
    assert case.tokens_per_rank == 8192 and case.chunk == 4096  # 2 chunks per rank, zig-zag
    # 8 key/value heads of 128 over 8 tensor-parallel GPUs: 1 head of 128; K and V, bf16, 15 other ranks
    assert case.kv_bytes_per_layer == 15 * 8192 * 2 * 128 * 2
    assert case.scores_per_head_serial == 131072**2 * 2 and case.scores_per_head_rank == 8192 * 131072 * 2
    assert case.imbalance_even == pytest.approx(32 / 17) and case.imbalance_zigzag == 1.0
    with pytest.raises(ValueError, match="model must be one of"):
        cc.long_context_case("GPT-5")


def test_the_axes_table_places_context_and_experts_beside_the_others():
    axes = {a.scheme: a for a in cc.parallelism_axes()}
    assert list(axes) == ["data", "pipeline", "tensor", "context", "expert"]
    assert "sequence" in axes["context"].splits and "all-to-all" in axes["expert"].sends
    assert all(a.needed_when for a in axes.values())


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(("kwargs", "error", "match"), [
    (dict(workers=3), ValueError, r"workers = 3 must split the sequence of L = 16"),
    (dict(workers=0), ValueError, r"workers must be an integer in \[1,"),
    (dict(workers=32), ValueError, r"workers must be an integer in \[1, 16\]"),
    (dict(workers=2.0), TypeError, "workers must be an integer"),
    (dict(workers=16, split="zigzag"), ValueError, "32 equal chunks"),
    (dict(workers=8, method="all_to_all"), ValueError, "workers must divide 4"),
    (dict(workers=2, method="ulysses"), ValueError, "method must be one of"),
    (dict(workers=2, split="striped"), ValueError, "split must be one of"),
    (dict(workers=2, causal="yes"), TypeError, "causal must be True or False"),
    (dict(workers=2, method="all_to_all", wire=Wire()), ValueError, "wire models the ring"),
    (dict(workers=2, wire="fast"), TypeError, "wire must be a Wire"),
    (dict(workers=2, wire=(0.0, -1.0)), ValueError, r"wire.beta \(bytes per second\) must be in"),
    (dict(workers=2, wire=(0.0, 1.0)), ValueError, "keep it under timeout / 4"),
    (dict(workers=2, batch_size=0), ValueError, "batch_size must be an integer"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        train_context_parallel(MODEL, X, Y, **{"steps": 1, "batch_size": 8, **kwargs}, **RUN)


def test_a_model_that_is_no_transformer_is_refused():
    from course_lib.models import MLP

    with pytest.raises(TypeError, match="model must be a course_lib.transformer.Transformer"):
        train_context_parallel(MLP((4, 3)), np.zeros((4, 4)), np.zeros(4, int), workers=1)
    with pytest.raises(TypeError, match="model must be"):
        check_context_split("model", 2)
    assert check_context_split(MODEL, 4, "all_to_all", "zigzag") == ("all_to_all", "zigzag")


# ------------------------------------------------------------------ the chapter's names and givens
def test_the_pixel_transformer_is_as_documented():
    from course_lib.transformer import DIGITS_PIXEL_TRANSFORMER as m

    assert (m.seq_length, m.token_size, m.hidden, m.heads, m.n_layers, m.ffn) == (64, 1, 16, 4, 1, 32)
    assert m.n_params == 3482 and m.seq_length**2 == 4096 and m.seq_length * m.hidden == 1024


def test_the_new_trainers_share_the_run_keywords():
    import inspect

    from course_lib.parallel.train.experts import train_expert_parallel

    common = {"batch_size": 32, "steps": None, "epochs": None, "lr": 0.1, "seed": 0, "params": None,
              "blas_threads": 1, "timeout": 60.0, "start_method": None, "progress": None, "fault": None}
    for trainer in (train_context_parallel, train_expert_parallel):
        sig = inspect.signature(trainer).parameters
        assert {k: sig[k].default for k in common} == common, trainer.__name__
    sig = inspect.signature(train_context_parallel).parameters
    assert (sig["method"].default, sig["split"].default, sig["causal"].default, sig["wire"].default) == (
        "ring", "even", None, None)


def test_the_exercises_accept_the_answers_and_name_the_slips():
    from course_lib.exercises import context_experts as ex

    g = ex.RING_BYTES
    block = g["micro_batch"] * g["seq_length"] // g["workers"] * g["hidden"] * g["bytes_per_value"] / 1e6
    assert ex.ex_ring_bytes(7 * 2 * block).correct and ex.ex_ring_bytes(f"{7 * 2 * block:.1f}").correct
    assert "one step of the ring" in ex.ex_ring_bytes(2 * block).message
    assert "keys only" in ex.ex_ring_bytes(7 * block).message
    assert "whole training step" in ex.ex_ring_bytes(cc.ring_bytes(32768, 1, 5120, 8, bytes_per_value=2) / 1e6).message
    assert ex.ex_causal_imbalance(16 / 9).correct and ex.ex_causal_imbalance(1.78).correct
    assert "least busy" in ex.ex_causal_imbalance(8).message and "zig-zag" in ex.ex_causal_imbalance(1).message
    for right in (1.3203125, 1.32, "1.3203"):  # any factor that gives the capacity 169
        assert ex.ex_capacity_factor(right).correct, right
    assert "drops nothing" in ex.ex_capacity_factor(179 / 128).message
    assert not ex.ex_capacity_factor(1.0).correct and not ex.ex_capacity_factor(1.35).correct


def test_the_chapters_glossary_and_notation_rows():
    from course_lib.datasets import load_glossary, load_notation

    terms = {g.term: g.term_zh for g in load_glossary(13)}
    assert {"context parallelism": "上下文并行", "ring attention": "环形注意力", "expert parallelism": "专家并行",
            "mixture of experts": "混合专家", "causal mask": "因果掩码", "capacity factor": "容量因子",
            "gating network": "门控网络", "load-balancing loss": "负载均衡损失"}.items() <= terms.items()
    symbols = {e.symbol for e in load_notation()}
    assert {"N_c", "N_e", "E", r"k_{\text{top}}", r"\phi", "f_e", r"\pi_e"} <= symbols


def test_the_layouts_schema_and_loader_agree():
    import json
    from pathlib import Path

    from course_lib.datasets import ParallelLayout

    package = json.loads((Path(__file__).resolve().parent.parent / "data" / "datapackage.json").read_text())
    fields = next(r for r in package["resources"] if r["name"] == "parallel_layouts")["schema"]["fields"]
    assert [f["name"] for f in fields] == [f.name for f in dataclasses.fields(ParallelLayout)]
    for schema_field, record_field in zip(fields, dataclasses.fields(ParallelLayout), strict=True):
        assert ("None" in str(record_field.type)) == (not schema_field["constraints"]["required"])
