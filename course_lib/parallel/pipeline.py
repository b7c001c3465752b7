"""Pipeline parallelism (流水并行): one process's stages and its step.

Model parallelism (模型并行) splits the *layers* of :class:`course_lib.models.MLP` into
``N_p`` consecutive stages (流水阶段), one process each. Stage ``q`` owns the contiguous
slice ``model.layer_range(start, stop)`` of the flat parameter buffer; activations travel
forward to the next stage, activation gradients backward to the previous one, and every
stage updates its own parameters. Pipeline parallelism cuts the batch into ``M``
micro-batches (微批次) so that stages work on different micro-batches at the same time, in
the order of a schedule (:func:`course_lib.schedule.stage_order`: GPipe, 1F1B, interleaved
1F1B). Every schedule is synchronous: the parameters equal those of the serial run (up to
floating-point summation order).

Interleaved 1F1B (``v`` virtual stages, Megatron-LM, Narayanan et al. 2021, section 2.2.2):
the layers are cut into ``v N_p`` model chunks and process ``q`` holds chunks ``q, q + N_p,
...``, one :class:`Stage` each; every hand-over between consecutive chunks goes through a
shared buffer and a pipe like any other (chunk ``c`` of the last process hands over to chunk
``c + 1`` of the first).

Activation recomputation (激活重计算): with ``job.recompute`` a stage keeps only the *input*
of every micro-batch in flight and re-runs its forward at the start of the backward (GPipe's
trade of compute for memory). Same floating-point operations, so the parameters are bitwise
those without.

Hybrid runs (data x pipeline): ``N_d`` replicas of the pipeline; after its micro-batches,
every stage adds its gradient to the same stage's of the other replicas (an all-reduce
through shared memory, in replica order) before the update.

:func:`stage_worker` is one process's step loop; a :class:`Stage` is one model chunk with
its forward and backward of one micro-batch.
:func:`course_lib.parallel.train.pipeline.train_pipeline` connects the stages and runs them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..models import layer_outputs, sgd_step, softmax_cross_entropy
from ..schedule import schedule_order
from .engine.clock import recorded, timed
from .partition import replica_rows, sum_rows

__all__ = ["Links", "Stage", "stage_worker"]

_MSG = struct.Struct("<qq")  # (step, micro-batch) of a hand-over


def stage_worker(chunks: list[Stage], job, batches) -> None:
    """One pipeline process's steps: the forwards and backwards of its chunks (one; ``v`` when
    interleaved) in the schedule's order, then for each chunk (hybrid runs) the all-reduce of
    its gradient with the same stage of the other replicas, and its update."""
    for idx in batches:  # this step's global batch
        grads = [st.begin_step() for st in chunks]
        rows = replica_rows(idx.size, job.workers, job.micro_batches)[chunks[0].replica]  # my micro-batches
        scale = np.asarray(1.0 / idx.size, dtype=job.model.dtype)
        for kind, m, c in chunks[0].order(len(rows)):  # micro-batch m on my chunk c
            if kind == "F":
                chunks[c].forward(m, rows[m], idx)
            else:
                chunks[c].backward(m, rows[m], idx, grads[c], scale)
        for st, grad in zip(chunks, grads):
            st.update(st.allreduce(grad) if job.workers > 1 else grad[st.params_slice])


@dataclass
class Links:
    """What one stage is connected to: shared arrays (attached) and pipe ends; None where a
    stage needs none (the first stage receives no activations, the last sends none)."""

    params: np.ndarray
    """(replicas, n_params): each replica's flat parameters."""
    x: np.ndarray | None
    y: np.ndarray | None
    act_in: np.ndarray | None
    act_out: np.ndarray | None
    grad_in: np.ndarray | None
    grad_out: np.ndarray | None
    reduce: np.ndarray | None
    """(2, replicas, n_params): every replica's gradient, in two alternating steps (hybrid)."""
    recv_act: Any = None
    send_act: Any = None
    recv_grad: Any = None
    send_grad: Any = None
    barrier: Any = None
    """The barrier of this stage's copies in every replica (hybrid)."""


class _Stash(dict):
    """Activations kept from a micro-batch's forward until its backward, keyed by
    ``(chunk, micro)``; ``peak_bytes`` is the most they ever held at once (what 1F1B keeps small)."""

    peak_bytes = 0

    def __setitem__(self, key, acts):
        super().__setitem__(key, acts)
        self.peak_bytes = max(self.peak_bytes, sum(a.nbytes for stored in self.values() for a in stored))


class Stage:
    """One pipeline stage of one replica: its layers, its buffers, and its forward and
    backward of one micro-batch.

    Virtual stage ``s`` of replica ``replica`` owns layers ``lo .. hi - 1``: chunk ``chunk``
    of process ``q`` is ``s = chunk N_p + q``. Activations and their gradients travel through
    shared arrays, one per boundary between stages; a short message on a pipe says
    "micro-batch ``m`` is ready" (:meth:`receive`, :meth:`hand_over`). The stash keeps each
    micro-batch's activations from its forward until its backward (with ``job.recompute``
    only the stage's input). ``monitor`` records every forward, backward, all-reduce and
    update as an operation of the run's timeline.
    """

    def __init__(self, wctx, job, links: Links, chunk: int = 0, stash: _Stash | None = None, monitor=None):
        self.wctx, self.job, self.model, self.chunk, self.monitor = wctx, job, job.model, chunk, monitor
        self.links = links
        self.n_stages = job.grid.stages  # processes N_p of a replica
        self.replica, self.q = job.grid.coords(wctx.rank)
        self.s = chunk * self.n_stages + self.q  # the (virtual) stage: my layers' chunk of the model
        self.lo, self.hi = job.boundaries[self.s], job.boundaries[self.s + 1]
        self.first, self.last = self.s == 0, self.s == len(job.boundaries) - 2
        self.params_slice = job.model.layer_range(self.lo, self.hi)
        self.params = links.params[self.replica]
        self.x, self.y = links.x, links.y
        self.act_in, self.act_out, self.grad_in, self.grad_out = links.act_in, links.act_out, links.grad_in, links.grad_out
        self.recv_act, self.send_act = links.recv_act, links.send_act
        self.recv_grad, self.send_grad = links.recv_grad, links.send_grad
        self.own = np.zeros(job.model.n_params, job.model.dtype) if links.reduce is None else None
        self.total = np.zeros(self.params_slice.stop - self.params_slice.start, dtype=job.model.dtype)
        self.stash = _Stash() if stash is None else stash
        self.step, self.losses, self.sent = -1, [], []
        self._orders: dict[int, list] = {}

    def order(self, micro_batches: int) -> list[tuple[str, int, int]]:
        """This process's operations ``(kind, micro, chunk)`` of one step
        (:func:`course_lib.schedule.schedule_order`; chunk 0 unless interleaved), computed once."""
        if micro_batches not in self._orders:
            orders = schedule_order(self.n_stages, micro_batches, self.job.schedule,
                                    virtual_stages=self.job.virtual_stages)
            self._orders[micro_batches] = [(*op, 0)[:3] for op in orders[self.q]]
        return self._orders[micro_batches]

    def begin_step(self) -> np.ndarray:
        """A new step: its flat gradient buffer, my layers' slice zeroed (hybrid runs: in shared
        memory, where the other replicas read it, alternating between two steps)."""
        self.step += 1
        self.losses.append(0.0)
        self.sent.append(0)
        grad = self.own if self.own is not None else self.links.reduce[self.step % 2, self.replica]
        grad[self.params_slice] = 0
        return grad

    def receive(self, conn, what: str, micro: int, buffer: np.ndarray) -> np.ndarray:
        """Wait for the neighbour's message that ``buffer`` holds micro-batch ``micro``."""
        if not conn.poll(self.wctx.wait_timeout):
            raise TimeoutError(f"stage {self.wctx.rank} waited {self.wctx.wait_timeout:g} s for {what} "
                               f"of micro-batch {micro}")
        got = _MSG.unpack(conn.recv_bytes())
        if got != (self.step, micro):  # pragma: no cover - would be a bug in the schedules
            raise RuntimeError(f"stage {self.wctx.rank} expected {what} of (step, micro) {(self.step, micro)}, "
                               f"got {got}")
        return buffer

    def hand_over(self, conn, buffer: np.ndarray, values: np.ndarray, micro: int) -> None:
        """Write ``values`` into the shared ``buffer`` and tell the neighbour."""
        buffer[...] = values
        self.sent[-1] += values.nbytes
        conn.send_bytes(_MSG.pack(self.step, micro))

    def forward(self, m: int, rows: tuple[int, int], idx: np.ndarray) -> None:
        """Forward of micro-batch ``m`` through my layers; hand the output to the next stage."""
        r0, r1 = rows  # its input: the data (first stage) or the previous stage's output
        a = self.x[idx[r0:r1]] if self.first else self.receive(self.recv_act, "activations", m, self.act_in[r0:r1])
        acts = self.layers_forward(m, a)
        self.stash[self.chunk, m] = acts[:1] if self.job.recompute else acts  # recomputation keeps the input
        if not self.last:  # my output, to the next stage
            self.hand_over(self.send_act, self.act_out[r0:r1], acts[-1], m)

    def backward(self, m: int, rows: tuple[int, int], idx: np.ndarray, grad: np.ndarray, scale) -> None:
        """Backward of micro-batch ``m``: add my layers' gradients into ``grad``, hand the
        gradient of my input back to the previous stage."""
        r0, r1 = rows  # its gradient: from the loss (last stage) or from the next stage
        g = None if self.last else self.receive(self.recv_grad, "gradients", m, self.grad_in[r0:r1])
        g = self.layers_backward(m, g, idx[r0:r1], grad, scale)  # my layers, adding into grad
        if not self.first:  # my input's gradient, back to the previous stage
            self.hand_over(self.send_grad, self.grad_out[r0:r1], g, m)

    @recorded("F")
    def layers_forward(self, m: int, a: np.ndarray) -> list[np.ndarray]:
        """My layers' forward of micro-batch ``m``: the input and every layer's output."""
        return layer_outputs(self.model, self.params, self.lo, self.hi, a)  # the input, each layer's output

    @recorded("B")
    def layers_backward(self, m: int, g, samples: np.ndarray, grad: np.ndarray, scale) -> np.ndarray:
        """My layers' backward of micro-batch ``m`` from ``g`` (the last stage: from the loss
        of ``samples``), adding into ``grad``; returns the gradient of my input."""
        acts = self.stash.pop((self.chunk, m))  # this micro-batch's activations, out of the stash
        if self.job.recompute:  # the forward again, from the stored input: the same operations
            acts = self.recompute(acts[0])
        if self.last:  # the loss of my samples, its gradient scaled by 1 / B
            loss, g = softmax_cross_entropy(acts[-1], self.y[samples], "sum")
            g *= scale
            self.losses[-1] += loss
        for i in reversed(range(self.lo, self.hi)):  # my layers, last to first
            g = self.model.layer_backward(self.params, i, acts[i - self.lo], acts[i - self.lo + 1], g, grad,
                                          need_input_grad=i > 0)
        return g

    @timed("recompute")
    def recompute(self, a: np.ndarray) -> list[np.ndarray]:
        """The forward of my layers again, from their stored input."""
        return layer_outputs(self.model, self.params, self.lo, self.hi, a)

    @recorded("A")
    def allreduce(self, grad: np.ndarray) -> np.ndarray:
        """Hybrid runs: my layers' gradient summed over the replicas (in replica order), once
        every replica's copy of this stage has written its own."""
        self.links.barrier.wait(self.replica, self.wctx.wait_timeout)
        return sum_rows(self.links.reduce[self.step % 2, :, self.params_slice], self.total)

    @recorded("U")
    def update(self, grad: np.ndarray) -> None:
        """Plain SGD on my layers' parameters."""
        sgd_step(self.params[self.params_slice], grad, self.job.lr)
