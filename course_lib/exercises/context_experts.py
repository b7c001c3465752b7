"""Exercises of the chapter on context and expert parallelism (ring attention, the causal
split, the capacity of experts).

Expected values come from :mod:`course_lib.context_cost` and :mod:`course_lib.moe`. The
givens of each exercise are module constants, so the notebook can print them.
"""

from __future__ import annotations

from ..context_cost import causal_imbalance, ring_bytes
from ..i18n import tr
from ..moe import capacity_factor_for
from . import Result, check

__all__ = [
    "CAPACITY_LOAD",
    "CAUSAL_SPLIT",
    "RING_BYTES",
    "ex_capacity_factor",
    "ex_causal_imbalance",
    "ex_ring_bytes",
]

#: Givens of :func:`ex_ring_bytes`: one layer, sequence length 32,768, micro-batch 1, keys and
#: values each h = 5,120 wide (no grouped-query attention), 16-bit values, N_c = 8 workers.
RING_BYTES = {"seq_length": 32768, "micro_batch": 1, "hidden": 5120, "workers": 8, "bytes_per_value": 2}
#: Givens of :func:`ex_causal_imbalance`: ring attention with a causal mask, the sequence split
#: evenly (one block of L / N_c tokens per worker) over N_c = 8 workers.
CAUSAL_SPLIT = {"workers": 8, "seq_length": 8192}
#: Givens of :func:`ex_capacity_factor`: assignments routed to each of E = 8 experts in one batch
#: of B L = 1,024 tokens, top-1 routing; at most 1 % of the assignments may be dropped.
CAPACITY_LOAD = {"load": (130, 95, 160, 110, 88, 140, 122, 179), "top_k": 1, "share": 0.01}


def ex_ring_bytes(answer) -> Result:
    """MB (1e6 bytes) each worker receives in the forward pass of one layer of ring attention."""
    g = RING_BYTES
    L, b, h, n, item = g["seq_length"], g["micro_batch"], g["hidden"], g["workers"], g["bytes_per_value"]
    expected = ring_bytes(L, b, h, n, bytes_per_value=item, backward=False) / 1e6
    block = b * (L // n) * h * item / 1e6  # one worker's keys (or values)
    return check(
        answer,
        expected,
        name=tr("bytes a worker receives, forward, one layer"),
        unit="MB",
        rtol=5e-3,
        hint=tr("every step of the ring brings the keys AND the values of L / N_c tokens, h values each; "
                "a worker meets the N_c - 1 other blocks, its own it already holds."),
        mistakes={
            2 * block: tr("That is one step of the ring. A worker receives N_c - 1 blocks: every other worker's."),
            (n - 1) * block: tr("That counts the keys only: the values travel with them, as many bytes again."),
            2 * n * block: tr("A worker's own block never travels: N_c - 1 steps bring the others'."),
            2 * (n - 1) * block * n: tr("A block holds L / N_c tokens, not L."),
            2 * (n - 1) * block * 2: tr("16-bit values are 2 bytes, not 4."),
            ring_bytes(L, b, h, n, bytes_per_value=item) / 1e6: tr(
                "That is the whole training step: the backward pass sends the keys and values round again, and "
                "their gradients. The question asks the forward pass."),
        },
    )


def ex_causal_imbalance(answer) -> Result:
    """The busiest worker's attention work over the mean, causal mask, even split."""
    g = CAUSAL_SPLIT
    n = g["workers"]
    expected = causal_imbalance(g["seq_length"], n, "even")
    return check(
        answer,
        expected,
        name=tr("busiest worker's work over the mean"),
        rtol=5e-3,
        hint=tr("worker j computes the blocks of workers 0 ... j: j + 1 blocks (its own masked, computed "
                "whole). Divide the largest count by the mean count."),
        mistakes={
            float(n): tr("That is the busiest over the least busy (N_c blocks against 1). The question asks "
                         "against the mean, what the step would take if the work were even."),
            2.0: tr("2 is the limit for many workers; with N_c = 8 the ratio is 2 N_c / (N_c + 1)."),
            1.0: tr("1 is the zig-zag split's ratio: every worker one early and one late chunk. The even split "
                    "gives the last worker the most."),
            (n + 1) / 2: tr("That is the mean number of blocks; divide the busiest worker's blocks by it."),
            (2 * n - 1) / n: tr("Count the worker's own block too: worker j computes j + 1 blocks."),
        },
    )


def ex_capacity_factor(answer) -> Result:
    """The smallest capacity factor that drops at most 1 % of the assignments of :data:`CAPACITY_LOAD`."""
    g = CAPACITY_LOAD
    load, k = g["load"], g["top_k"]
    expected = capacity_factor_for(load, k, g["share"])
    experts, tokens = len(load), sum(load) / k
    one_token = experts / (k * tokens)  # the factor that adds one assignment to the capacity
    return check(
        answer,
        expected,
        name=tr("capacity factor"),
        rtol=0,
        atol=one_token,
        hint=tr("an expert keeps C = ceil(phi k_top B L / E) assignments; find the smallest C whose drops, "
                "sum of max(0, load - C), stay within 1 % of the assignments, then phi = C E / (k_top B L)."),
        mistakes={
            max(load) * experts / (k * tokens): tr("That capacity drops nothing (it fits the busiest expert). "
                                                   "Up to 1 % may be dropped: a smaller factor does."),
            1.0: tr("At phi = 1 every expert takes the mean load: the busy experts drop far more than 1 %."),
        },
    )
