r"""Cost models of collective communication (集合通信) and of a data-parallel step.

All formulas use the **alpha-beta model** (α-β 模型): sending one message of
:math:`m` bytes over one link takes :math:`\alpha + m / \beta`, with latency
:math:`\alpha` (seconds per message) and bandwidth :math:`\beta` (bytes per second).
Every device has one full-duplex link (it can send and receive :math:`\beta` bytes/s
at the same time); links do not share bandwidth; computing the sums is free.

Units, everywhere: ``nbytes`` in bytes, ``bandwidth`` in bytes/s, ``latency`` and
every returned time in seconds. (A "25 GB/s" link is ``bandwidth=25e9``; a
"100 Gbit/s" network is ``bandwidth=100e9 / 8``.)

The latency has no default: every call states :math:`\alpha`, either the course's one set
of assumptions (:data:`NETWORK_LATENCY`, :data:`NVLINK_LATENCY`) or ``0.0`` when a
bandwidth term alone is meant, so the latency term is never dropped by omission.

Every cost function broadcasts its arguments and returns a Python ``float`` when all of them are scalars;
``devices`` must hold whole numbers >= 1. (:func:`fit_alpha_beta` goes the other way: times in, α and β out.)

The collectives family (集合通信原语), one algorithm each (:data:`COLLECTIVES`,
:func:`collective_time`): broadcast and reduce as a pipelined chain
(:func:`ring_broadcast_time`, :func:`ring_reduce_time`), all-gather and reduce-scatter as
a ring, all-reduce as reduce-scatter + all-gather, all-to-all by pairwise exchange
(:func:`pairwise_alltoall_time`; not a ring: every pair of devices exchanges directly, so it
needs a full-bisection network). :func:`collective_lower_bound` is the bandwidth term
no algorithm can beat; :func:`simulate_collective` runs each algorithm step by step on
small numpy arrays: who holds what before and after, and the rounds and bytes that the
formulas price.

References: Thakur, Rabenseifner, Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1), 2005 (ring and tree costs, pairwise exchange);
Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
workstations", JPDC 69(2), 2009 (the ring all-reduce is bandwidth-optimal); Chan,
Heimlich, Purkayastha, van de Geijn, "Collective communication: theory, practice, and
experience", CCPE 19(13), 2007 (the lower bounds of every collective); Sanders, Speck,
Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel
Computing 35(12), 2009 (pipelined broadcast and reduction along a chain).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._validate import (
    as_real,
    broadcast,
    check_array,
    check_int,
    check_positive,
    check_range,
    scalar_or_array,
)

__all__ = ["ALGORITHMS", "COLLECTIVES", "AllReduceTerms", "NETWORK_LATENCY", "NVLINK_LATENCY",
    "allreduce_time", "collective_lower_bound", "collective_time", "communication_crossover", "fit_alpha_beta",
    "data_parallel_efficiency", "data_parallel_speedup", "data_parallel_step_time",
    "hierarchical_allreduce_terms", "hierarchical_allreduce_time", "optimal_segments",
    "pairwise_alltoall_time", "parameter_server_time", "ring_allgather_time", "ring_allreduce_terms",
    "ring_allreduce_time", "ring_broadcast_time", "ring_reduce_scatter_time", "ring_reduce_time",
    "simulate_collective", "tree_allreduce_time"]

#: Names accepted by :func:`allreduce_time` and the data-parallel step model.
ALGORITHMS = ("ring", "tree", "ps")

#: The collectives family, in the order the course draws them (:func:`collective_time`).
COLLECTIVES = ("broadcast", "reduce", "all-gather", "reduce-scatter", "all-to-all", "all-reduce")

#: The course's one set of latency assumptions (alpha, seconds per message): a message between machines over Ethernet or InfiniBand ...
NETWORK_LATENCY = 10e-6
#: ... and between the GPUs of one server over NVLink. Both are assumptions of the right order,
#: not measurements; every notebook that prices a message uses one of them and prints it.
NVLINK_LATENCY = 5e-6


def _args(nbytes, devices, bandwidth, latency, **more):
    """The checked arguments, broadcast: nbytes >= 0, devices whole >= 1, bandwidth in (0, inf], latency >= 0."""
    m, b, a = as_real(nbytes, "nbytes"), as_real(bandwidth, "bandwidth", allow_inf=True), as_real(latency, "latency")
    check_range(m, "nbytes", 0.0, np.inf)
    check_range(b, "bandwidth", 0.0, np.inf, low_open=True, high_open=False)
    check_range(a, "latency", 0.0, np.inf)
    return broadcast(nbytes=m, devices=check_array(devices, "devices", 1, whole=True), bandwidth=b, latency=a, **more)


def ring_allreduce_time(nbytes, devices, bandwidth, latency):
    r"""Time of a ring all-reduce (环形All-Reduce) of ``nbytes`` on ``devices`` devices.

    The buffer is cut into :math:`N` chunks; a reduce-scatter (:math:`N-1` steps) then
    an all-gather (:math:`N-1` steps) each move one chunk of :math:`m/N` bytes per
    device per step:

    .. math:: t = 2\,\frac{N-1}{N}\,\frac{m}{\beta} + 2\,(N-1)\,\alpha

    The bandwidth term tends to :math:`2 m / \beta` as :math:`N` grows - independent of
    :math:`N` - while the latency term grows linearly. One device: 0.

    Parameters
    ----------
    nbytes : float or array_like
        :math:`m`, bytes of the buffer every device holds (e.g. 4 x parameters for float32 gradients), >= 0.
    devices : float or array_like
        :math:`N`, whole number >= 1.
    bandwidth : float or array_like
        :math:`\beta`, bytes/s per link, > 0.
    latency : float or array_like
        :math:`\alpha`, seconds per message, >= 0.

    Returns
    -------
    float or numpy.ndarray
        Seconds.

    Examples
    --------
    >>> ring_allreduce_time(1e9, 4, 1e9, latency=0.0)          # 2 x 3/4 x 1 s
    1.5
    >>> ring_allreduce_time(1e9, 4, 1e9, latency=1e-3)
    1.506
    >>> ring_allreduce_time(1e9, 1, 1e9, 1e-3)
    0.0
    """
    m, n, b, a = _args(nbytes, devices, bandwidth, latency)
    result = 2.0 * (n - 1.0) / n * m / b + 2.0 * (n - 1.0) * a
    return scalar_or_array(result, nbytes, devices, bandwidth, latency)


def ring_reduce_scatter_time(nbytes, devices, bandwidth, latency):
    r"""Time of a ring reduce-scatter: :math:`\frac{N-1}{N}\frac{m}{\beta} + (N-1)\alpha`.

    Afterwards device :math:`i` holds the sum of chunk :math:`i` (:math:`m/N` bytes).
    Half of :func:`ring_allreduce_time`.

    Examples
    --------
    >>> ring_reduce_scatter_time(1e9, 4, 1e9, latency=0.0)
    0.75
    """
    m, n, b, a = _args(nbytes, devices, bandwidth, latency)
    result = (n - 1.0) / n * m / b + (n - 1.0) * a
    return scalar_or_array(result, nbytes, devices, bandwidth, latency)


def ring_allgather_time(nbytes, devices, bandwidth, latency):
    r"""Time of a ring all-gather of a buffer of ``nbytes`` in total (:math:`m/N` per device).

    :math:`\frac{N-1}{N}\frac{m}{\beta} + (N-1)\alpha` - the same cost as a reduce-scatter.

    Examples
    --------
    >>> ring_allgather_time(1e9, 4, 1e9, latency=0.0)
    0.75
    """
    return ring_reduce_scatter_time(nbytes, devices, bandwidth, latency)


def optimal_segments(nbytes, devices, bandwidth, latency):
    r"""The number of segments :math:`n_{\text{seg}}` that makes a pipelined chain fastest.

    A chain of :math:`N` devices cut into :math:`n_{\text{seg}}` segments takes
    :math:`(N-2+n_{\text{seg}})(\alpha + m/(n_{\text{seg}}\beta))` (:func:`ring_broadcast_time`);
    its minimum over real :math:`n_{\text{seg}}` is at
    :math:`n_{\text{seg}}^* = \sqrt{(N-2)\,m\beta^{-1}/\alpha}`. Returned: the better of the two
    whole numbers around :math:`n_{\text{seg}}^*`, at least 1 and at most :math:`m` (no segment
    below one byte); 1 for :math:`N \le 2`.

    Examples
    --------
    >>> optimal_segments(1e9, 4, 1e9, 1e-3)    # sqrt(2 x 1 s / 1 ms) = 44.7
    45.0
    >>> optimal_segments(1e9, 2, 1e9, 1e-3)
    1.0
    """
    m, n, b, a = _args(nbytes, devices, bandwidth, latency)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a tiny alpha: S* = inf
        star = np.where(a > 0, np.sqrt(np.maximum(n - 2.0, 0.0) * (m / b) / np.where(a > 0, a, 1.0)), np.inf)
    top = np.maximum(np.floor(m), 1.0)
    lo, hi = (np.clip(rounded(star), 1.0, top) for rounded in (np.floor, np.ceil))

    def chain(s):
        return (n - 2.0 + s) * a + (1.0 + (n - 2.0) / s) * m / b

    result = np.where(n <= 2, 1.0, np.where(chain(hi) < chain(lo), hi, lo))
    return scalar_or_array(result, nbytes, devices, bandwidth, latency)


def ring_broadcast_time(nbytes, devices, bandwidth, latency, segments=None):
    r"""Time of a pipelined-chain broadcast (广播) of ``nbytes`` from one root to ``devices``.

    The ring with one link left out, as NCCL runs it: the message is cut into :math:`n_{\text{seg}}`
    segments that flow down the chain root :math:`\to 1 \to \dots \to N-1`, every device passing
    segment :math:`s` on while it receives :math:`s+1` (Sanders, Speck and Träff 2009 analyse this
    pipeline). The last device gets the last segment after :math:`N - 2 + n_{\text{seg}}` rounds of one
    segment each:

    .. math:: t = (N - 2 + n_{\text{seg}})\left(\alpha + \frac{m}{n_{\text{seg}}\beta}\right)

    With many segments the bandwidth term tends to :math:`m/\beta`, the lower bound
    (:func:`collective_lower_bound`: every device must receive all :math:`m` bytes). The textbook
    alternative for long messages, scatter + all-gather (Thakur et al. 2005), moves
    :math:`2\frac{N-1}{N}m` instead. One device: 0.

    Parameters
    ----------
    nbytes, devices, bandwidth, latency
        As in :func:`ring_allreduce_time`; ``nbytes`` is the message :math:`m`.
    segments : float or array_like or None
        :math:`n_{\text{seg}}`, whole number >= 1; None: :func:`optimal_segments`.

    Examples
    --------
    >>> ring_broadcast_time(1e9, 4, 1e9, latency=0.0, segments=1)   # store and forward: 3 x 1 s
    3.0
    >>> ring_broadcast_time(1e9, 4, 1e9, latency=0.0, segments=4)   # 6 rounds of 0.25 s
    1.5
    >>> round(ring_broadcast_time(1e9, 4, 1e9, latency=1e-3), 4)    # n_seg = 45: 1 s + 2 sqrt(2 ms s) + 2 ms
    1.0914
    """
    m, n, b, a = _args(nbytes, devices, bandwidth, latency)
    s = optimal_segments(m, n, b, a) if segments is None else check_array(segments, "segments", 1, whole=True)
    m, n, b, a, s = broadcast(nbytes=m, devices=n, bandwidth=b, latency=a, segments=np.asarray(s, dtype=np.float64))
    result = np.where(n > 1, (n - 2.0 + s) * (a + m / (s * b)), 0.0)
    return scalar_or_array(result, nbytes, devices, bandwidth, latency, segments)


def ring_reduce_time(nbytes, devices, bandwidth, latency, segments=None):
    r"""Time of a pipelined-chain reduce (归约) of ``nbytes`` per device to one root.

    The broadcast run backwards: segments flow from the far end of the chain to the root, each
    device adding its own segment before it passes the sum on (additions are free in the α-β model),
    so the time is that of :func:`ring_broadcast_time`: :math:`(N-2+n_{\text{seg}})(\alpha +
    m/(n_{\text{seg}}\beta))`. Lower bound :math:`m/\beta`: the root must receive :math:`m` bytes.

    Examples
    --------
    >>> ring_reduce_time(1e9, 4, 1e9, latency=0.0, segments=4)
    1.5
    >>> ring_reduce_time(1e9, 2, 1e9, 1e-3) == 1.001    # N = 2: one message
    True
    """
    return ring_broadcast_time(nbytes, devices, bandwidth, latency, segments)


def pairwise_alltoall_time(nbytes, devices, bandwidth, latency):
    r"""Time of an all-to-all (全交换) by pairwise exchange; ``nbytes`` per device.

    Every device holds :math:`m` bytes in :math:`N` blocks, block :math:`j` meant for device
    :math:`j` (the experts' inputs of a mixture-of-experts layer; a transpose of the data layout). In
    round :math:`k = 1 \dots N-1` device :math:`i` sends its block for :math:`i+k` and receives the
    one from :math:`i-k` (Thakur et al. 2005, the long-message algorithm):

    .. math:: t = (N-1)\left(\alpha + \frac{m}{N\beta}\right)

    Its bandwidth term :math:`\frac{N-1}{N}\frac{m}{\beta}` is the lower bound: every
    device must send :math:`N-1` distinct blocks.

    This is not a ring algorithm: over the :math:`N-1` rounds every device talks to every other one
    directly, the :math:`N` messages of a round all at once. The formula holds only on a
    **full-bisection** network, in which any half of the devices can send to the other half at full
    link speed at the same time: a crossbar such as NVSwitch inside a server, or a non-blocking fat
    tree. On a ring of links a block for the device :math:`k` places on would cross :math:`k` links
    and share them with other blocks.

    Examples
    --------
    >>> pairwise_alltoall_time(1e9, 4, 1e9, latency=0.0)    # 3 rounds of 0.25 s
    0.75
    >>> pairwise_alltoall_time(1e9, 2, 1e9, 1e-3)
    0.501
    """
    m, n, b, a = _args(nbytes, devices, bandwidth, latency)
    result = (n - 1.0) * (a + m / (n * b))
    return scalar_or_array(result, nbytes, devices, bandwidth, latency)


def _collective(name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"collective must be one of {COLLECTIVES}, got {type(name).__name__}")
    if name not in COLLECTIVES:
        raise ValueError(f"collective must be one of {COLLECTIVES}, got {name!r}")
    return name


def collective_time(collective: str, nbytes, devices, bandwidth, latency, *, segments=None):
    r"""Time of ``collective`` (one of :data:`COLLECTIVES`) by the algorithm the course prices.

    ``nbytes`` is :math:`m`, the size of the full buffer: the message (broadcast), each
    device's input (reduce, reduce-scatter, all-reduce, all-to-all) or each device's
    output (all-gather). ``segments``: broadcast and reduce; the others ignore it.

    * broadcast, reduce: :math:`(N-2+n_{\text{seg}})(\alpha + m/(n_{\text{seg}}\beta))`;
      lower bound :math:`m/\beta`;
    * all-gather, reduce-scatter (ring), all-to-all (pairwise exchange on a full-bisection
      network, not a ring): :math:`(N-1)(\alpha + m/(N\beta))`; lower bound
      :math:`\frac{N-1}{N}m/\beta`;
    * all-reduce: reduce-scatter + all-gather; lower bound :math:`2\frac{N-1}{N}m/\beta`.

    Examples
    --------
    >>> [collective_time(c, 1e9, 4, 1e9, 0.0, segments=4) for c in COLLECTIVES]
    [1.5, 1.5, 0.75, 0.75, 0.75, 1.5]
    """
    name = _collective(collective)
    if name in ("broadcast", "reduce"):
        return ring_broadcast_time(nbytes, devices, bandwidth, latency, segments)
    if name == "all-gather":
        return ring_allgather_time(nbytes, devices, bandwidth, latency)
    if name == "reduce-scatter":
        return ring_reduce_scatter_time(nbytes, devices, bandwidth, latency)
    if name == "all-to-all":
        return pairwise_alltoall_time(nbytes, devices, bandwidth, latency)
    return ring_allreduce_time(nbytes, devices, bandwidth, latency)


def collective_lower_bound(collective: str, nbytes, devices, bandwidth):
    r"""The bandwidth lower bound of ``collective``: seconds no algorithm can beat.

    What some device must receive (or send) through its one link of :math:`\beta` bytes/s,
    whatever the algorithm (Chan et al. 2007; Patarasuk and Yuan 2009 for all-reduce):
    :math:`m/\beta` for broadcast and reduce (a device receives the whole message; the
    root of a reduce receives :math:`m` bytes of sums), :math:`\frac{N-1}{N}m/\beta` for
    all-gather, reduce-scatter and all-to-all (the :math:`N-1` chunks a device lacks, or
    must hand on), :math:`2\frac{N-1}{N}m/\beta` for all-reduce (Patarasuk and Yuan's
    bound). One device: 0. The ring forms of :func:`collective_time` meet each bound
    up to the latency terms (and, for broadcast and reduce, the pipeline's fill).

    Examples
    --------
    >>> collective_lower_bound("all-reduce", 1e9, 4, 1e9)      # 2 x 3/4 x 1 s
    1.5
    >>> [collective_lower_bound(c, 1e9, 2, 1e9) for c in COLLECTIVES]
    [1.0, 1.0, 0.5, 0.5, 0.5, 1.0]
    """
    name = _collective(collective)
    m, n, b, _ = _args(nbytes, devices, bandwidth, 0.0)
    share = {"broadcast": 1.0, "reduce": 1.0, "all-reduce": 2.0 * (n - 1.0) / n}.get(name, (n - 1.0) / n)
    result = np.where(n > 1, share * m / b, 0.0)
    return scalar_or_array(result, nbytes, devices, bandwidth)


def _chain_rounds(n: int, root: int, reverse: bool) -> list[list[tuple[int, int, int, int]]]:
    """Messages ``(src, dst, slot, slot)`` of a pipelined chain over ``n`` segments, by round."""
    order = [(root + p) % n for p in range(n)]
    hops = [(order[p + 1], order[p]) if reverse else (order[p], order[p + 1]) for p in range(n - 1)]
    if reverse:
        hops = hops[::-1]  # the far end of the chain starts
    return [[(src, dst, t - h, t - h) for h, (src, dst) in enumerate(hops) if 0 <= t - h < n]
            for t in range(2 * n - 2)]


def simulate_collective(collective: str, devices: int, root: int = 0) -> dict:
    r"""Run ``collective``'s ring algorithm on small numpy arrays: who holds what, and the cost.

    A reference independent of the cost formulas. Every device's buffer has :math:`N`
    slots (chunks, blocks or segments of :math:`m/N` bytes). A slot's content is a vector
    over the :math:`N` source devices: entry :math:`s` is nonzero if device :math:`s`'s
    data is summed in, and its value is the number of the chunk, plus one (so a summed
    chunk 2 is ``[3, 3, 3, 3]``); NaN where the device holds nothing. Each round every
    device sends at most one slot and receives at most one (checked), all at once.

    Parameters
    ----------
    collective, devices, root : str, int, int
        One of :data:`COLLECTIVES`; :math:`N`, 1 to 16; the root of broadcast and reduce, ``0 <= root < N``.

    Returns
    -------
    dict
        ``"before"``, ``"after"``: arrays ``(N, N, N)`` (device, slot, source), the
        input and the output the collective defines (NaN elsewhere: for reduce-scatter
        each device's own chunk only, for reduce the root only); ``"rounds"``: number of
        rounds; ``"received"``: slots each device received (``(N,)`` int). One round
        costs :math:`\alpha + m/(N\beta)`, so ``rounds`` times that is
        :func:`collective_time` (``segments=N`` for broadcast and reduce), and
        ``received`` times :math:`m/N` is what each device took in.

    Examples
    --------
    >>> out = simulate_collective("all-reduce", 2)
    >>> out["after"][1].tolist()          # device 1: chunk 0 and chunk 1, summed over both
    [[1.0, 1.0], [2.0, 2.0]]
    >>> out["rounds"], out["received"].tolist()
    (2, [2, 2])
    """
    name = _collective(collective)
    n = check_int(devices, "devices", 1, 16)
    root = check_int(root, "root", 0, n - 1)
    full = np.arange(1.0, n + 1.0)[None, :, None] * np.eye(n)[:, None, :]  # device d, slot c: (c + 1) e_d
    before = full.copy()
    if name == "all-gather":
        before[:] = np.nan
        for d in range(n):
            before[d, d] = full[d, d]
    elif name == "broadcast":
        before[:] = np.nan
        before[root] = full[root]
    work = before.copy()
    rounds: list[list[tuple[int, int, int, int]]] = []
    ring_rs = [[(d, (d + 1) % n, (d - k - 1) % n, (d - k - 1) % n) for d in range(n)] for k in range(n - 1)]
    ring_ag = [[(d, (d + 1) % n, (d - k) % n, (d - k) % n) for d in range(n)] for k in range(n - 1)]
    if name == "reduce-scatter":
        rounds = ring_rs
    elif name == "all-gather":
        rounds = ring_ag
    elif name == "all-reduce":
        rounds = ring_rs + ring_ag
    elif name == "all-to-all":
        rounds = [[(d, (d + k) % n, (d + k) % n, d) for d in range(n)] for k in range(1, n)]
        work = np.full_like(before, np.nan)
        for d in range(n):
            work[d, d] = before[d, d]
    else:
        rounds = _chain_rounds(n, root, reverse=name == "reduce")
    received = np.zeros(n, dtype=int)
    for k, messages in enumerate(rounds):
        senders, receivers = [m[0] for m in messages], [m[1] for m in messages]
        assert len(set(senders)) == len(senders) and len(set(receivers)) == len(receivers)
        source = before if name == "all-to-all" else work.copy()  # everyone sends what it held
        add = name in ("reduce", "reduce-scatter") or (name == "all-reduce" and k < n - 1)
        for src, dst, slot_src, slot_dst in messages:
            work[dst, slot_dst] = work[dst, slot_dst] + source[src, slot_src] if add else source[src, slot_src]
            received[dst] += 1
    after = work
    if name == "reduce-scatter":
        after = np.full_like(work, np.nan)
        for d in range(n):
            after[d, d] = work[d, d]
    elif name == "reduce":
        after = np.full_like(work, np.nan)
        after[root] = work[root]
    return {"before": before, "after": after, "rounds": len(rounds), "received": received}


class AllReduceTerms(NamedTuple):
    """An all-reduce time split into its two terms, seconds: ``latency`` (the ``messages`` a
    device sends one after the other, times their latency) and ``bandwidth`` (bytes over links)."""

    latency: float
    bandwidth: float
    messages: int

    @property
    def total(self) -> float:
        """Latency term + bandwidth term, seconds."""
        return self.latency + self.bandwidth


def ring_allreduce_terms(nbytes, devices, bandwidth, latency) -> AllReduceTerms:
    r"""The two terms of :func:`ring_allreduce_time` for one buffer on one ring (scalars).

    Latency :math:`2(N-1)\alpha` (:math:`2(N-1)` messages in sequence), bandwidth
    :math:`2\frac{N-1}{N}\frac{m}{\beta}`.

    Examples
    --------
    >>> ring_allreduce_terms(1e9, 4, 1e9, 1e-3)        # 6 messages of 1 ms; 2 x 3/4 x 1 s
    AllReduceTerms(latency=0.006, bandwidth=1.5, messages=6)
    >>> ring_allreduce_terms(1e9, 4, 1e9, 1e-3).total == ring_allreduce_time(1e9, 4, 1e9, 1e-3)
    True
    """
    return _ring_terms(check_positive(nbytes, "nbytes", allow_zero=True), check_int(devices, "devices", 1, 2**40),
                       check_positive(bandwidth, "bandwidth"), check_positive(latency, "latency", allow_zero=True))


def _ring_terms(m: float, n: int, b: float, a: float) -> AllReduceTerms:
    messages = 2 * (n - 1)
    return AllReduceTerms(latency=messages * a, bandwidth=2.0 * (n - 1) / n * m / b, messages=messages)


def hierarchical_allreduce_terms(nbytes, nodes, node_devices, node_bandwidth, network_bandwidth,
                                 node_latency=NVLINK_LATENCY, network_latency=NETWORK_LATENCY) -> AllReduceTerms:
    r"""The two terms of :func:`hierarchical_allreduce_time` (arguments as there).

    Latency :math:`2(G-1)\alpha_{in} + 2(N/G-1)\alpha_{net}` (:math:`2(G-1) + 2(N/G-1)`
    messages in sequence), bandwidth
    :math:`2\frac{G-1}{G}\frac{m}{\beta_{in}} + 2\frac{N/G-1}{N/G}\frac{m}{\beta_{net}}`.

    Examples
    --------
    >>> t = hierarchical_allreduce_terms(1e9, 2, 4, 1e9, 2e9, 1e-3, 1e-2)
    >>> round(t.latency, 6), t.bandwidth, t.messages        # 6 x 1 ms + 2 x 10 ms; 1.5 s + 0.5 s
    (0.026, 2.0, 8)
    """
    m = check_positive(nbytes, "nbytes", allow_zero=True)
    nodes, node_devices = check_int(nodes, "nodes", 1, 2**40), check_int(node_devices, "node_devices", 1, 2**40)
    inside = _ring_terms(m, node_devices, check_positive(node_bandwidth, "node_bandwidth"),
                         check_positive(node_latency, "node_latency", allow_zero=True))
    between = _ring_terms(m, nodes, check_positive(network_bandwidth, "network_bandwidth"),
                          check_positive(network_latency, "network_latency", allow_zero=True))
    return AllReduceTerms(*(a + b for a, b in zip(inside, between)))  # the two rings' terms added


def hierarchical_allreduce_time(nbytes, nodes, node_devices, node_bandwidth, network_bandwidth,
                                node_latency=NVLINK_LATENCY, network_latency=NETWORK_LATENCY):
    r"""Time of a two-level all-reduce: inside every server, then between the servers.

    With :math:`N/G` servers of :math:`G` devices (fast links of bandwidth
    :math:`\beta_{in}` per device and direction inside a server; the server's network of
    :math:`\beta_{net}` per direction to the others):

    1. a ring reduce-scatter inside each server: device :math:`j` holds the server's sum
       of chunk :math:`j` (:math:`m/G` bytes);
    2. :math:`G` ring all-reduces between the servers at once, one per chunk, sharing the
       server's network (:math:`\beta_{net}/G` each);
    3. a ring all-gather inside each server.

    .. math:: t = 2\Big(\frac{G-1}{G}\frac{m}{\beta_{in}} + (G-1)\,\alpha_{in}\Big)
              + 2\frac{N/G-1}{N/G}\frac{m}{\beta_{net}} + 2\,(N/G-1)\,\alpha_{net}

    Against a flat ring over all :math:`N` devices at the fast links' speed
    (:func:`ring_allreduce_time`), hierarchy trades bandwidth for latency: the slower network
    carries the whole buffer once in each direction, but a device sends :math:`2(G-1) +
    2(N/G-1)` messages in sequence instead of :math:`2(N-1)`. Which is faster depends on
    :math:`\alpha` and :math:`\beta`; with many devices the flat ring's latency term can be
    most of its time (:func:`hierarchical_allreduce_terms`, :func:`ring_allreduce_terms`).

    Arguments: ``nbytes`` :math:`m` (bytes every device holds, >= 0); ``nodes``, ``node_devices``
    :math:`N/G` servers of :math:`G` devices (>= 1); ``node_bandwidth`` :math:`\beta_{in}`
    (bytes/s per device and direction), ``network_bandwidth`` :math:`\beta_{net}` (bytes/s per
    server and direction), > 0; ``node_latency``, ``network_latency`` :math:`\alpha_{in}`,
    :math:`\alpha_{net}` (seconds per message; by default :data:`NVLINK_LATENCY`, :data:`NETWORK_LATENCY`).

    Examples
    --------
    >>> round(hierarchical_allreduce_time(1e9, 2, 4, 1e9, 1e9, 0, 0), 3)  # 2 x 0.75 + 2 x 0.5
    2.5
    >>> hierarchical_allreduce_time(1e9, 1, 4, 1e9, 1e9, 0, 0) == ring_allreduce_time(1e9, 4, 1e9, latency=0.0)
    True
    """
    return hierarchical_allreduce_terms(nbytes, nodes, node_devices, node_bandwidth, network_bandwidth,
                                        node_latency, network_latency).total


def tree_allreduce_time(nbytes, devices, bandwidth, latency):
    r"""Time of a binary-tree all-reduce: reduce to a root, then broadcast, whole buffer.

    Each of the :math:`\lceil \log_2 N \rceil` levels is crossed twice with the full
    message (no pipelining):

    .. math:: t = 2 \lceil \log_2 N \rceil \left(\alpha + \frac{m}{\beta}\right)

    Latency grows only logarithmically, but every step sends all :math:`m` bytes: it
    beats the ring for small messages and loses for large ones.

    Examples
    --------
    >>> tree_allreduce_time(1e6, 8, 1e9, 1e-5)   # 6 x (10 µs + 1 ms)
    0.00606
    """
    m, n, b, a = _args(nbytes, devices, bandwidth, latency)
    levels = np.maximum(np.ceil(np.log2(n) - 1e-12), 0.0)
    result = 2.0 * levels * (a + m / b)
    return scalar_or_array(result, nbytes, devices, bandwidth, latency)


def parameter_server_time(nbytes, devices, bandwidth, latency, servers=1):
    r"""Time of one gradient exchange through parameter servers (参数服务器).

    Model: :math:`N` workers each push their whole gradient (:math:`m` bytes) to the
    servers, which hold the parameters in :math:`N_s` equal shards and add the
    gradients; then every worker pulls the updated parameters (:math:`m` bytes). Each
    server's link carries :math:`N m / N_s` bytes in each phase, each worker's link
    :math:`m`; the slower of the two limits each phase, and each phase costs one
    latency:

    .. math:: t = 2\left(\max\!\left(\frac{N}{N_s}, 1\right)\frac{m}{\beta} + \alpha\right)

    With one server the time grows linearly with :math:`N` (the server's link is
    the bottleneck) - unlike the ring all-reduce. One device: 0, as for every scheme here:
    a device alone keeps its parameters and has no one to exchange gradients with (the
    baseline of :func:`data_parallel_efficiency`, so :math:`\eta(1) = 1`).

    Parameters
    ----------
    nbytes, devices, bandwidth, latency
        As in :func:`ring_allreduce_time`; ``devices`` counts workers.
    servers : float or array_like
        :math:`S`, number of server processes (each with its own link), whole number >= 1.

    Examples
    --------
    >>> parameter_server_time(1e9, 4, 1e9, latency=0.0)               # 2 x 4 s
    8.0
    >>> parameter_server_time(1e9, 4, 1e9, latency=0.0, servers=4)    # sharded: 2 x 1 s
    2.0
    >>> parameter_server_time(1e9, 1, 1e9, latency=1e-3)              # one device: nothing to exchange
    0.0
    """
    m, n, b, a, s = _args(nbytes, devices, bandwidth, latency, servers=check_array(servers, "servers", 1, whole=True))
    result = np.where(n > 1, 2.0 * (np.maximum(n / s, 1.0) * m / b + a), 0.0)
    return scalar_or_array(result, nbytes, devices, bandwidth, latency, servers)


def allreduce_time(nbytes, devices, bandwidth, latency, *, algorithm: str = "ring", servers=1):
    """Gradient-exchange time of ``algorithm`` in {"ring", "tree", "ps"}.

    ``"ps"`` is :func:`parameter_server_time` with ``servers``; the others ignore it.

    Examples
    --------
    >>> allreduce_time(1e9, 4, 1e9, latency=0.0, algorithm="ps")
    8.0
    """
    if algorithm in ("ring", "tree"):
        return (ring_allreduce_time if algorithm == "ring" else tree_allreduce_time)(nbytes, devices, bandwidth, latency)
    if algorithm == "ps":
        return parameter_server_time(nbytes, devices, bandwidth, latency, servers)
    raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")


def _scaling(scaling: str) -> str:
    if scaling not in ("strong", "weak"):
        raise ValueError(f"scaling must be 'strong' or 'weak', got {scaling!r}")
    return scaling


def data_parallel_step_time(compute_time, devices, nbytes, bandwidth, latency, *, algorithm: str = "ring",
                           overlap=0.0, servers=1, scaling: str = "strong"):
    r"""Time of one data-parallel training step: compute, then the gradient exchange.

    Each device computes its share of the batch, then the gradients (:math:`m` bytes)
    are exchanged with ``algorithm``, taking :math:`t_m(N)`. A fraction ``overlap`` of
    the communication can run while the backward pass still computes (gradient
    bucketing), but never more than the compute there is:

    .. math:: t(N) = t_d + t_m(N) - \min\!\left(o \, t_m(N), t_d\right)

    where the per-device compute :math:`t_d` depends on ``scaling``:

    * ``"strong"`` (强扩展, fixed global batch): ``compute_time`` :math:`t_c` is the
      global batch's forward + backward on ONE device, split evenly: :math:`t_d = t_c / N`;
    * ``"weak"`` (弱扩展, fixed per-device batch, the global batch grows with
      :math:`N`): ``compute_time`` is each device's own batch, :math:`t_d = t_c`.

    With ``overlap=0`` this is the plain sum :math:`t_d + t_m(N)`. For every algorithm
    :math:`t(1) = t_c`: a device alone communicates nothing.

    Parameters
    ----------
    compute_time, devices : float or array_like
        :math:`t_c` in seconds, >= 0 (see ``scaling``); :math:`N`, whole number >= 1.
    nbytes, bandwidth, latency, algorithm, servers
        As in :func:`allreduce_time`: gradient bytes, link bytes/s, seconds per message; the
        collective used for the gradients, {"ring", "tree", "ps"}; parameter servers (``"ps"`` only).
    overlap : float or array_like
        :math:`o \in [0, 1]`, fraction of the communication that may overlap compute.
    scaling : {"strong", "weak"}
        Whether ``compute_time`` is the global batch's (split N ways) or each device's.

    Examples
    --------
    >>> data_parallel_step_time(1.0, 4, 1e9, 1e9, latency=0.0)                 # 0.25 + 1.5
    1.75
    >>> data_parallel_step_time(1.0, 4, 1e9, 1e9, latency=0.0, overlap=1.0)    # 0.25 hidden
    1.5
    >>> data_parallel_step_time(1.0, 4, 1e9, 1e9, latency=0.0, scaling="weak") # 1 + 1.5
    2.5
    """
    weak = _scaling(scaling) == "weak"
    tc = as_real(compute_time, "compute_time")
    check_range(tc, "compute_time", 0.0, np.inf)
    o = as_real(overlap, "overlap")
    check_range(o, "overlap", 0.0, 1.0)
    n = check_array(devices, "devices", 1, whole=True)
    tm = np.asarray(allreduce_time(nbytes, devices, bandwidth, latency, algorithm=algorithm, servers=servers), float)
    tc, n, tm, o = broadcast(compute_time=tc, devices=n, communication=tm, overlap=o)
    compute = tc if weak else tc / n
    result = compute + tm - np.minimum(o * tm, compute)
    return scalar_or_array(result, compute_time, devices, nbytes, bandwidth, latency, overlap, servers)


def data_parallel_speedup(compute_time, devices, nbytes, bandwidth, latency, *, algorithm: str = "ring",
                         overlap=0.0, servers=1, scaling: str = "strong"):
    r"""Modelled speedup over one device without communication.

    ``"strong"``: :math:`S(N) = t_c / t(N)` (the same batch, faster).
    ``"weak"``: the scaled speedup (throughput ratio) :math:`S(N) = N t_c / t(N)`: N
    times the samples per step, in :math:`t(N)` instead of :math:`t_c`.

    Examples
    --------
    >>> data_parallel_speedup(1.0, 4, 1e9, 1e9, latency=0.0)
    0.5714285714285714
    >>> data_parallel_speedup(1.0, 4, 1e9, 1e9, latency=0.0, scaling="weak")
    1.6
    """
    weak = _scaling(scaling) == "weak"
    tc = as_real(compute_time, "compute_time")
    check_range(tc, "compute_time", 0.0, np.inf, low_open=True)
    t = data_parallel_step_time(compute_time, devices, nbytes, bandwidth, latency,
                                algorithm=algorithm, overlap=overlap, servers=servers, scaling=scaling)
    tc, t, n = broadcast(compute_time=tc, step_time=np.asarray(t, dtype=np.float64),
                         devices=check_array(devices, "devices", 1, whole=True))
    result = n * tc / t if weak else tc / t
    return scalar_or_array(result, compute_time, devices, nbytes, bandwidth, latency, overlap, servers)


def data_parallel_efficiency(compute_time, devices, nbytes, bandwidth, latency, *, algorithm: str = "ring",
                            overlap=0.0, servers=1, scaling: str = "strong"):
    r"""Modelled parallel efficiency :math:`\eta(N) = S(N) / N` of data parallelism.

    Strong scaling: :math:`\eta = t_c / (N\, t(N))`; weak scaling: :math:`\eta = t_c / t(N)`,
    the fraction of each step a device spends computing. This is the :math:`\eta` of the
    training-time decomposition (:func:`course_lib.cost.training_time`): the fraction
    of the ideal N-fold speed that survives the gradient exchange. The baseline is one
    device, which communicates nothing, so :math:`\eta(1) = 1` for every algorithm.

    Examples
    --------
    >>> data_parallel_efficiency(1.0, 4, 1e9, 1e9, latency=0.0)        # 1 / (4 x 1.75)
    0.14285714285714285
    >>> data_parallel_efficiency(1.0, 4, 1e9, 1e9, latency=0.0, scaling="weak")   # 1 / 2.5
    0.4
    >>> round(data_parallel_efficiency(1.0, 4, 1e6, 1e10, latency=0.0), 4)   # small model, fast link
    0.9994
    >>> [data_parallel_efficiency(0.001, 1, 1e6, 1e9, 1e-5, algorithm=a) for a in ALGORITHMS]  # one device
    [1.0, 1.0, 1.0]
    """
    s = data_parallel_speedup(compute_time, devices, nbytes, bandwidth, latency,
                              algorithm=algorithm, overlap=overlap, servers=servers, scaling=scaling)
    s, n = broadcast(speedup=np.asarray(s, dtype=np.float64), devices=check_array(devices, "devices", 1, whole=True))
    return scalar_or_array(s / n, compute_time, devices, nbytes, bandwidth, latency, overlap, servers)


def communication_crossover(compute_time, nbytes, bandwidth, latency, *, algorithm: str = "ring",
                            servers=1, n_max: int = 1 << 20) -> int | float:
    """Fewest devices at which the gradient exchange takes at least as long as the compute.

    With a fixed global batch (strong scaling) each of N devices computes for
    ``compute_time / N`` while the exchange time of :mod:`course_lib.alpha_beta` stays or
    grows: from the returned N on, a step is mostly communication. Returns
    ``math.inf`` if that does not happen up to ``n_max`` devices.

    Parameters
    ----------
    compute_time, n_max : float, int
        Forward + backward of the global batch on ONE device, seconds, > 0; the largest N searched.
    nbytes, bandwidth, latency, algorithm, servers
        As in :func:`allreduce_time`.

    Examples
    --------
    >>> communication_crossover(1.0, 1e9, 1e9, latency=0.0)          # ring: 1/N <= 2(N-1)/N s
    2
    >>> communication_crossover(1.0, 1e6, 1e9, latency=0.0, algorithm="ps")   # 1/N <= 2 N ms
    23
    """
    tc = check_positive(compute_time, "compute_time")
    n_max = check_int(n_max, "n_max", 1)
    ns = np.arange(1, n_max + 1, dtype=np.float64)
    exchange = np.asarray(allreduce_time(nbytes, ns, bandwidth, latency, algorithm=algorithm, servers=servers))
    hit = np.flatnonzero(exchange >= tc / ns)
    return int(ns[hit[0]]) if hit.size else math.inf


def fit_alpha_beta(nbytes, seconds, devices) -> dict:
    r"""Fit :math:`\alpha` and :math:`\beta` to measured times of the ring all-reduce (a message-size sweep).

    The cost :math:`t = 2(N-1)\alpha + 2\frac{N-1}{N}\frac{m}{\beta}` (:func:`ring_allreduce_time`) is a line
    :math:`a + b\,m`, fitted by least squares of the *relative* residuals :math:`\sum_i ((a + b\,m_i)/t_i - 1)^2`:
    a sweep spans orders of magnitude of :math:`m`, and plain least squares of the times lets the largest
    messages decide :math:`a` alone (often below zero). A negative :math:`a` is set to 0 and :math:`b`
    refitted. :math:`\alpha = a / (2(N-1))`, :math:`\beta = 2\frac{N-1}{N} / b`; a ValueError if the
    times do not grow with :math:`m` (no bandwidth to fit).

    Parameters
    ----------
    nbytes, seconds : array_like
        :math:`m_i`, the bytes of each message, and :math:`t_i`, its measured all-reduce in
        seconds: 1-D, the same length >= 2, every value > 0.
    devices : int
        :math:`N`, the workers, >= 2 (one worker exchanges nothing).

    Returns
    -------
    dict
        ``alpha`` (s), ``beta`` (bytes/s), ``intercept`` :math:`a` (s), ``slope`` :math:`b` (s/byte),
        ``relative_rms`` (the rms of the relative residuals) and ``points`` (their count).

    Examples
    --------
    >>> m = np.array([1e3, 1e4, 1e5, 1e6, 1e7])
    >>> fit = fit_alpha_beta(m, ring_allreduce_time(m, 4, 1e9, 1e-5), 4)   # alpha = 10 us, beta = 1 GB/s
    >>> round(fit["alpha"] * 1e6, 6), round(fit["beta"] / 1e9, 6), fit["points"]
    (10.0, 1.0, 5)
    """
    n = check_int(devices, "devices", 2)
    m, t = as_real(nbytes, "nbytes", allowed="> 0"), as_real(seconds, "seconds", allowed="> 0")
    if m.ndim != 1 or m.size < 2 or t.shape != m.shape:
        raise ValueError(f"nbytes and seconds must be 1-D of the same length >= 2, got shapes {m.shape}, {t.shape}")
    for values, name in ((m, "nbytes"), (t, "seconds")):
        check_range(values, name, 0.0, np.inf, low_open=True)
    (a, b), *_ = np.linalg.lstsq(np.column_stack([1.0 / t, m / t]), np.ones_like(t), rcond=None)
    if a < 0:  # clipped: the line through the origin, relative residuals again
        a, b = 0.0, float(np.sum(m / t) / np.sum((m / t) ** 2))
    if b <= 0:  # no bandwidth to fit
        raise ValueError("seconds must grow with nbytes: the times do not grow with the message size")
    return {"alpha": float(a) / (2.0 * (n - 1)), "beta": 2.0 * (n - 1) / n / float(b), "intercept": float(a),
            "slope": float(b), "relative_rms": float(np.sqrt(np.mean(((a + b * m) / t - 1.0) ** 2))), "points": m.size}
