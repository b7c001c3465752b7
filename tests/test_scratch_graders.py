"""The scratch edition's graders name the mistake: planted bugs, each caught and explained.

Every bug is a realistic mistake in one function of the teaching core, written as an edit of
the course's own source (``old`` -> ``new``, applied to the function's text as the library
holds it now, so the bugs follow the algorithm files; an edit that no longer applies fails
by name). The buggy function is compiled under its file's name, with its module's globals
(so that a check's spies on the module's helpers see it, as they see the learner's) and, for a
method, its real class (so that ``super()`` works), and patched in place of the course's (in
every module that imported it by name); the graders run their workers with fork, so the
workers run it too. Each test grades that function alone and
asserts the outcome (failed, raised, hangs) and that the message names the cause.

The course's own code passes every grader (:func:`test_the_course_passes_its_graders`).
tests/test_scratch.py builds the edition and grades it with stubs and filled.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import textwrap
import time
import types
from dataclasses import dataclass

import pytest

from course_lib.grading import TEACHING_CORE, grade, grade_all
from course_lib.grading.core import learner_traceback

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the graders' workers need fork (Linux, macOS)")


@dataclass(frozen=True)
class Bug:
    """A planted mistake: in ``function`` (a qualname of TEACHING_CORE), each ``old`` text of
    its source becomes ``new``; the grader must end with ``status`` and a message that
    matches ``says``."""

    function: str
    name: str
    edits: tuple[tuple[str, str], ...]
    says: str
    status: str = "failed"

    @property
    def id(self) -> str:
        return f"{self.function}:{self.name}"


def _edit(function, old, new, name, says, status="failed", *more):
    return Bug(function, name, ((old, new), *zip(more[::2], more[1::2], strict=True)), says, status)


BUGS = (
    # ---- im2col and col2im (chapter: operator parallelism)
    Bug("im2col", "stride ignored",
        (("rows = slice(i * g.dh, i * g.dh + g.sh * g.ho, g.sh)", "rows = slice(i * g.dh, i * g.dh + g.ho)"),
         ("columns = slice(j * g.dw, j * g.dw + g.sw * g.wo, g.sw)", "columns = slice(j * g.dw, j * g.dw + g.wo)")),
        r"windows step by 1, not by the stride"),
    _edit("im2col", "np.pad(x, ((0, 0), (0, 0), (g.ph, g.ph), (g.pw, g.pw)))",
          "np.pad(x, ((0, 0), (0, 0), (0, 2 * g.ph), (0, 2 * g.pw)))", "padding on one side",
          r"padding is all on one side"),
    Bug("im2col", "dilation ignored",
        (("rows = slice(i * g.dh, i * g.dh + g.sh * g.ho, g.sh)", "rows = slice(i, i + g.sh * g.ho, g.sh)"),
         ("columns = slice(j * g.dw, j * g.dw + g.sw * g.wo, g.sw)", "columns = slice(j, j + g.sw * g.wo, g.sw)")),
        r"taps are adjacent: with dilation"),
    Bug("im2col", "rows in (offset, channel) order",
        (("cols = np.empty((g.n, g.c, g.kh, g.kw, g.ho, g.wo), dtype=x.dtype)",
          "cols = np.empty((g.n, g.kh, g.kw, g.c, g.ho, g.wo), dtype=x.dtype)"),
         ("cols[:, :, i, j] = padded[:, :, rows, columns]", "cols[:, i, j] = padded[:, :, rows, columns]")),
        r"rows are in the wrong order: row c \* kh \* kw \+ i \* kw \+ j"),
    _edit("col2im", "padded[:, :, rows, columns] += windows[:, :, i, j]",
          "padded[:, :, rows, columns] -= windows[:, :, i, j]", "wrong sign in the accumulation",
          r"wrong sign: col2im ADDS"),
    _edit("col2im", "padded[:, :, rows, columns] += windows[:, :, i, j]",
          "padded[:, :, rows, columns] = windows[:, :, i, j]", "overlaps overwritten, not added",
          r"receives their SUM \(\+=, not =\)"),
    _edit("col2im", "return padded[:, :, g.ph : g.ph + g.h, g.pw : g.pw + g.w].copy()",
          "return padded[:, :, : g.h, : g.w].copy()", "crop at the wrong place",
          r"cut from the wrong place"),
    # ---- the data-parallel step
    _edit("worker_loop", 'reduction="sum", out=grad)', 'reduction="mean", out=grad)', "mean instead of sum",
          r"worker 0's gradient is a MEAN over its shard"),
    _edit("worker_loop", "        comm.wait()  # every worker has its gradient\n", "", "missing wait",
          r"called comm\.allreduce\(\) without comm\.wait\(\) first"),
    _edit("worker_loop", "job.update(params, total, idx.size, opt, update)",
          "job.update(params, grad, idx.size, opt, update)", "update with the unreduced gradient",
          r"updated with its own gradient \(the gradient buffer\), not the sum"),
    _edit("worker_loop", "job.update(params, total, idx.size, opt, update)",
          "job.update(params, total, hi - lo, opt, update)", "divided by the shard, not the batch",
          r"divided the summed gradient by 7 samples .* divide by idx\.size \(20\)"),
    _edit("worker_loop", "x[idx[lo:hi]], y[idx[lo:hi]]", "x[lo:hi], y[lo:hi]", "rows of the data set, not of the batch",
          r"computed on rows 0:7 of the data set, x\[lo:hi\]"),
    _edit("worker_loop", "shard_bounds(idx.size, job.workers)[wctx.rank]", "shard_bounds(idx.size, job.workers)[0]",
          "every worker on shard 0", r"worker 1 computed on shard 0 of the batch"),
    _edit("worker_loop", "total = comm.allreduce()", "total = comm.allreduce() if wctx.rank == 0 else grad",
          "a collective only rank 0 joins (deadlock)", r"worker_loop hangs: no worker made progress for 3 s.*\[0\]",
          "hangs"),
    # ---- the shared-memory all-reduce
    _edit("ShmAllReduce.reduce_scatter", "mine = self.reduced[self.lo : self.hi]  # my chunk of the sum (a view)\n",
          "mine = self.reduced[self.lo : self.hi]  # my chunk of the sum (a view)\n"
          "        mine /= self.wctx.world_size\n", "mean instead of sum",
          r"worker 0's chunk \[0, 48\) is the mean of the rows, not the sum: did you divide by N\?"),
    _edit("ShmAllReduce.reduce_scatter", "sum_rows(self.grads, self.reduced, self.lo, self.hi)",
          "sum_rows(self.grads, self.reduced, *chunk_bounds(self.reduced.size, self.wctx.world_size)"
          "[self.wctx.rank - 1])", "the wrong rank's chunk",
          r"worker 0 reduced chunk 2 \[96, 100\), not its own chunk 0 \[0, 48\)"),
    _edit("ShmAllReduce.reduce_scatter", "sum_rows(self.grads, self.reduced, self.lo, self.hi)",
          "self.reduced[self.lo : self.hi] = self.grads[self.wctx.rank, self.lo : self.hi]", "its own row only",
          r"holds only worker 0's own gradient: add chunk 0 of EVERY worker's row"),
    _edit("ShmAllReduce.reduce_scatter", "sum_rows(self.grads, self.reduced, self.lo, self.hi)",
          "sum_rows(self.grads[:-1], self.reduced, self.lo, self.hi)", "a loop one row short",
          r"misses worker 2's row"),
    _edit("ShmAllReduce.reduce_scatter", "sum_rows(self.grads, self.reduced, self.lo, self.hi)",
          "sum_rows(self.grads[::-1], self.reduced, self.lo, self.hi)", "not in rank order",
          r"sum up to rounding but not bit for bit: add the rows in rank order"),
    _edit("ShmAllReduce.reduce_scatter", "sum_rows(self.grads, self.reduced, self.lo, self.hi)",
          "self.reduced[self.lo : self.hi] += self.grads[:, self.lo : self.hi].sum(axis=0)",
          "added into reduced without setting it", r"added into self\.reduced without setting it first"),
    _edit("ShmAllReduce.all_gather",
          "        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)  # every worker has put its own\n", "",
          "missing barrier: a chunk read before it is reduced",
          r"returned without waiting on the barrier, so it can read the other workers' chunks before they are written"),
    _edit("ShmAllReduce.all_gather", "        if chunk is not None:\n",
          "        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)\n        if chunk is not None:\n",
          "barrier before writing the chunk",
          r"worker 0 waited on the barrier before writing its chunk, so the others can leave the barrier and read it "
          r"before it is there.*: wait AFTER writing your own chunk",
          "failed",
          "        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)  # every worker has put its own\n", ""),
    _edit("ShmAllReduce.all_gather",
          "        if chunk is not None:\n            self.reduced[self.lo : self.hi] = chunk  # my chunk, where the others "
          "read it\n", "", "the chunk given is never put", r"worker 0's chunk was not put into self\.reduced\[0:48\]"),
    _edit("ShmAllReduce.all_gather", "self.reduced[self.lo : self.hi] = chunk", "self.reduced[self.lo : self.hi + 1] = chunk",
          "an off-by-one slice (raises)", r"(?s)Traceback \(your code\):\n  File \"course_lib/parallel/allreduce\.py\", "
          r"line \d+, in all_gather\n.*ValueError", "raised"),
    _edit("ShmAllReduce.allreduce", "        self.reduce_scatter()  # step 1: every worker sums its chunk\n"
          "        return self.all_gather()  # step 2: every worker reads every chunk\n",
          "        return self.reduce_scatter()\n", "forgets the all-gather",
          r"stops after self\.reduce_scatter\(\): each worker then holds only its own chunk"),
    _edit("ShmAllReduce.allreduce", "        self.reduce_scatter()  # step 1: every worker sums its chunk\n"
          "        return self.all_gather()  # step 2: every worker reads every chunk\n",
          "        out = self.all_gather()\n        self.reduce_scatter()\n        return out\n",
          "shares before it reduces", r"called all_gather then reduce_scatter: reduce first"),
    # ---- overlap, staleness
    _edit("overlap_worker_loop", "        grad.fill(0)\n", "", "the gradient buffer not zeroed",
          r"still holds the last step's gradient .* zero it first \(grad\.fill\(0\)\)"),
    _edit("overlap_worker_loop",
          "            g = model.layer_backward(params, i, acts[i], acts[i + 1], g, grad, need_input_grad=i > 0)\n"
          "            comm.layer_done(i)  # a complete bucket is all-reduced now, while the backward goes on\n",
          "            comm.layer_done(i)\n"
          "            g = model.layer_backward(params, i, acts[i], acts[i + 1], g, grad, need_input_grad=i > 0)\n",
          "a layer handed over before its backward", r"handed layer 2 over \(comm\.layer_done\(2\)\) before its backward"),
    _edit("overlap_worker_loop",
          "            comm.layer_done(i)  # a complete bucket is all-reduced now, while the backward goes on\n", "",
          "a bucket never handed over", r"never handed over layer\(s\) \[0, 1, 2\]"),
    _edit("stale_loop", "maxlen=delay + 1", "maxlen=delay if delay else 1", "the wrong delay (one step short)",
          r"delay=2 uses the gradient of 1 step\(s\) before, not 2"),
    _edit("stale_loop", "model.loss_and_grad(seen[0], x[idx], y[idx])", "model.loss_and_grad(params, x[idx], y[idx])",
          "a fresh gradient: no delay at all", r"delay=2 uses the gradient of 0 step\(s\) before, not 2"),
    _edit("stale_loop", "        if delay > 0:\n", "        if False:\n", "the loss at the stale weights",
          r"reports the loss at the old parameters"),
    # ---- ZeRO-1
    _edit("zero1_worker_loop", "        params[...] = comm.all_gather(mine)  # my new chunk for everyone, everyone's for me\n",
          "", "forgets the ZeRO all-gather", r"never calls comm\.all_gather\(mine\)"),
    _edit("zero1_worker_loop", "job.update(mine, total, idx.size, opt, update)",
          "job.update(mine, grad[comm.lo : comm.hi], idx.size, opt, update)", "updates with the unreduced gradient",
          r"updated with its own gradient \(the gradient buffer\), not the sum"),
    _edit("zero1_worker_loop", "        comm.wait()\n", "", "missing wait",
          r"called comm\.reduce_scatter\(\) without comm\.wait\(\) first"),
    _edit("zero1_worker_loop", "        params[...] = comm.all_gather(mine)", "        comm.all_gather(mine)",
          "all-gathers but drops the result", r"parameters outside its chunk \[0, \d+\) never change"),
    # ---- ZeRO-3
    _edit("zero3_worker_loop", "            w = layers.all_gather(mine, i)  # again: a device freed them after the forward\n",
          "", "no all-gather before the backward",
          r"all-gathers layer \d's parameters once per step: ZeRO-3 frees a layer's parameters after its forward"),
    _edit("zero3_worker_loop", "            g = job.model.layer_backward(w, i, acts[i], acts[i + 1], g, layers.send_buffer(i),\n"
          "                                         need_input_grad=i > 0)\n"
          "            layers.reduce_scatter(i, out=grad)  # my chunk of layer i's summed gradient\n",
          "            layers.reduce_scatter(i, out=grad)\n"
          "            g = job.model.layer_backward(w, i, acts[i], acts[i + 1], g, layers.send_buffer(i),\n"
          "                                         need_input_grad=i > 0)\n",
          "reduce-scatter before the backward", r"reduce-scattered layer \d's gradient before its backward wrote it"),
    _edit("zero3_worker_loop", "w = layers.all_gather(mine, i)  # layer i's parameters, from every worker", "w = p0",
          "the forward on the initial parameters", r"ran layer 0's forward without all-gathering its parameters"),
    # ---- the pipeline
    _edit("stage_order", "warmup = min(stages - q - 1, micro_batches)", "warmup = min(stages - q, micro_batches)",
          "off by one in 1F1B's warm-up", r"stages=1, .* runs 1 warm-up forward\(s\) before it alternates one forward "
          r"and one backward; 1F1B's warm-up on stage q of N_p stages is N_p - q - 1 forwards \(at most M\): 0 here"),
    _edit("stage_order", '+ [("B", m) for m in range(micro_batches)]', '+ [("B", m) for m in reversed(range(micro_batches))]',
          "GPipe's backwards in reverse order", r"runs the backwards in the order \[1, 0\]: in micro-batch order"),
    _edit("stage_order", "warmup = min(stages - q - 1, micro_batches)", "warmup = min(q, micro_batches)",
          "warm-up counted from the wrong end", r"q=0, stages=2, .* runs 0 warm-up forward\(s\) .*: 1 here"),
    _edit("Stage.layers_backward", "            g *= scale\n", "", "forgets the 1/B scale",
          r"the gradient is 20 times too large: the last stage multiplies the loss gradient by `scale`"),
    _edit("Stage.layers_backward", "acts = self.stash.pop((self.chunk, m))", "acts = self.stash[self.chunk, m]",
          "the stash never freed", r"left micro-batch 1's activations in the stash"),
    _edit("Stage.forward", "        if not self.last:  # my output, to the next stage\n"
          "            self.hand_over(self.send_act, self.act_out[r0:r1], acts[-1], m)\n", "",
          "never hands its output over", r"did not hand its output over to the next stage"),
    _edit("Stage.forward", "acts[:1] if self.job.recompute else acts", "acts", "recomputation that stores everything",
          r"stashed every layer's output: with job\.recompute a stage keeps only the input"),
    _edit("Stage.backward", 'self.receive(self.recv_grad, "gradients", m, self.grad_in[r0:r1])', "self.grad_in[r0:r1]",
          "reads the gradient without waiting for it", r"did not wait for the next stage's message"),
    _edit("stage_worker", "scale = np.asarray(1.0 / idx.size, dtype=job.model.dtype)",
          "scale = np.asarray(1.0 / len(rows), dtype=job.model.dtype)", "scale 1/M, not 1/B",
          r"the backward's scale is 0\.25; .* scale = 1 / idx\.size"),
    _edit("stage_worker", "        for st, grad in zip(chunks, grads):\n"
          "            st.update(st.allreduce(grad) if job.workers > 1 else grad[st.params_slice])\n",
          "            for st, grad in zip(chunks, grads):\n"
          "                st.update(st.allreduce(grad) if job.workers > 1 else grad[st.params_slice])\n",
          "updates inside the micro-batch loop", r"updates chunk 0 in the middle of its micro-batches"),
    _edit("stage_worker", "[chunks[0].replica]", "[0]", "replica 0's rows on every replica",
          r"replica 1's rows are replica_rows\(\.\.\.\)\[chunks\[0\]\.replica\]"),
    _edit("stage_worker", "st.update(st.allreduce(grad) if job.workers > 1 else grad[st.params_slice])",
          "st.update(grad[st.params_slice])", "hybrid without the replicas' all-reduce",
          r"all-reduced with the same stage of the other replicas before the update"),
    # ---- the tensor split
    _edit("tensor_forward", '            if s.role == "row":\n                z = allreduce(z)  # "g": add the partial '
          'outputs of all workers\n', "", "tensor_forward's missing all-reduce", r"worker 0 never all-reduces"),
    _edit("tensor_forward", '            if s.role == "row":\n                z = allreduce(z)  # "g": add the partial '
          'outputs of all workers\n            z += b\n',
          '            z += b\n            if s.role == "row":\n                z = allreduce(z)\n',
          "the bias added before the all-reduce", r"bias of a row block is added before the all-reduce"),
    _edit("tensor_forward", "            if s.layer < last:\n                np.maximum(z, 0, out=z)\n",
          "            np.maximum(z, 0, out=z)\n", "a ReLU on the logits", r"the logits went through a ReLU"),
    _edit("tensor_backward", '        if s.role == "column":  # the pair\'s input gradient: a sum over workers\n'
          "            g = allreduce(g)\n", "", "tensor_backward's missing all-reduce",
          r"never all-reduces in the backward: the gradient of a pair's input is a sum"),
    _edit("tensor_backward", "        gw += a_in.T @ dz\n        gb += dz.sum(axis=0)\n",
          "        gw[...] = a_in.T @ dz\n        gb[...] = dz.sum(axis=0)\n", "gradients overwritten, not added",
          r"written over what `grads` held: tensor_backward ADDS"),
    _edit("tensor_backward", "dz = g * (a_out > 0) if", "dz = g * (a_in > 0) if", "the ReLU mask of the input (raises)",
          r"(?s)Traceback \(your code\):\n  File \"course_lib/parallel/tensor\.py\", line \d+, in tensor_backward\n"
          r"    dz = g \* \(a_.*ValueError: operands could not be broadcast", "raised"),
    # ---- the all-reduce in buckets, and over the modelled wire
    _edit("BucketAllReduce.reduce_bucket", "        sum_rows(self.grads, self.reduced, lo + c_lo, lo + c_hi)\n",
          "        sum_rows(self.grads, self.reduced, lo + c_lo, lo + c_hi)\n"
          "        self.reduced[lo + c_lo : lo + c_hi] /= self.wctx.world_size\n", "mean instead of sum",
          r"worker 0's chunk \[150, 182\) of bucket 0 \[150, 240\) is the mean of the rows, not the sum: did you divide by N\?"),
    _edit("BucketAllReduce.reduce_bucket", "sum_rows(self.grads, self.reduced, lo + c_lo, lo + c_hi)",
          "sum_rows(self.grads, self.reduced, c_lo, c_hi)", "the chunk counted from 0, not from the bucket",
          r"its chunk of the bucket counted from 0, not from the bucket's start: .*= \[150, 182\) of the gradient"),
    _edit("BucketAllReduce.reduce_bucket", "sum_rows(self.grads, self.reduced, lo + c_lo, lo + c_hi)",
          "sum_rows(self.grads, self.reduced, lo, hi)", "every worker sums the whole bucket",
          r"worker 0 summed the whole bucket 0 \[150, 240\), not its chunk \[150, 182\)"),
    _edit("BucketAllReduce.reduce_bucket", "chunk_bounds(hi - lo, self.wctx.world_size)",
          "chunk_bounds(self.reduced.size, self.wctx.world_size)", "chunks of the whole gradient, not of the bucket",
          r"worker 0 summed \[150, 230\): a chunk of the whole gradient's size \(chunk_bounds\(240, N\)\), not "
          r"of bucket 0's 90 numbers"),
    _edit("BucketAllReduce.reduce_bucket", "        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)\n", "",
          "missing barrier", r"returned without waiting on the barrier: finish\(\) would hand over bucket 0 before"),
    _edit("BucketAllReduce.reduce_bucket", "        sum_rows(self.grads, self.reduced, lo + c_lo, lo + c_hi)\n"
          "        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)\n",
          "        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)\n"
          "        sum_rows(self.grads, self.reduced, lo + c_lo, lo + c_hi)\n", "waits before it adds",
          r"waited on the barrier before adding its chunk of bucket 0: .* add first, then wait"),
    _edit("WireAllReduce.reduce_bucket",
          "        arrival = self.clock() + self.wire_time[b]  # on the wire now: its sum is there at `arrival`\n"
          "        super().reduce_bucket(b)  # the arithmetic: the shared-memory sum, in rank order\n",
          "        super().reduce_bucket(b)\n        arrival = self.clock() + self.wire_time[b]\n",
          "the wire's time counted after the sum",
          r"arrived 42 ms after it was put on the wire: the sum's 12 ms plus the wire's 30 ms\. The sum runs INSIDE"),
    _edit("WireAllReduce.reduce_bucket", "            if self.pause(left):  # True: the communicator was closed, stop "
          "waiting\n                break\n", "            pass\n", "a busy wait",
          r"reads the clock in a loop without waiting \(a busy wait"),
    _edit("WireAllReduce.reduce_bucket", "            if self.pause(left):  # True: the communicator was closed, stop "
          "waiting\n                break\n", "            self.pause(left)\n", "waits on after the close",
          r"kept waiting after the communicator was closed: self\.pause\(left\) returns True then"),
    _edit("WireAllReduce.reduce_bucket", "self.clock() + self.wire_time[b]", "self.clock() + self.wire_time[0]",
          "the first bucket's wire time for every bucket",
          r"bucket 1 arrived 30 ms after it was put on the wire: that is bucket 0's wire time; use bucket b's"),
    _edit("WireAllReduce.reduce_bucket", "        super().reduce_bucket(b)  # the arithmetic: the shared-memory sum, "
          "in rank order\n", "", "the wire without the sum",
          r"summed nothing of bucket 0: the wire decides only WHEN the sum arrives; .*super\(\)\.reduce_bucket\(b\)"),
    # ---- context parallelism
    Bug("OnlineSoftmax.add", "the old sums not rescaled",
        (("self.s[..., rows, :] * rescale +", "self.s[..., rows, :] +"),
         ("self.o[..., rows, :] * rescale +", "self.o[..., rows, :] +")),
        r"block 1 .*the running sum s was not rescaled when the maximum changed .* multiply the old self\.s by "
        r"exp\(m_old - m_new\)"),
    _edit("OnlineSoftmax.add", "p = np.exp(scores - m_new)", "p = np.exp(scores)", "exp of the raw scores",
          r"block 0 .*this block's weights are exp\(score\), not exp\(score - m_new\)"),
    _edit("OnlineSoftmax.add", "m_new = np.maximum(self.m[..., rows, :], scores.max(axis=-1, keepdims=True))",
          "m_new = scores.max(axis=-1, keepdims=True)", "the block's maximum, not the running one",
          r"block 2 .*self\.m is this block's largest score, not the largest so far"),
    _edit("OnlineSoftmax.add", "        self.m[..., rows, :] = m_new\n", "", "the maximum never stored",
          r"block 0 .*self\.m was never updated"),
    _edit("OnlineSoftmax.add", "self.o[..., rows, :] = self.o[..., rows, :] * rescale + p @ v",
          "self.o[..., rows, :] = p @ v", "the values' sum overwritten",
          r"block 1 .*self\.o holds this block's part only: add it to the old self\.o"),
    _edit("RingAttention.forward", "owner = (owner - 1) % self.workers", "owner = (owner + 1) % self.workers",
          "the owner moved the wrong way round the ring",
          r"\(3 workers, zigzag split, causal\): worker \d moved `owner` the wrong way round the ring"),
    _edit("RingAttention.forward", "for rows, cols, mask in self.pairs(owner):",
          "for rows, cols, mask in self.pairs(self.rank):", "every block masked as its own",
          r"computed every block with the chunk pairs of its own tokens, self\.pairs\(rank\)"),
    _edit("RingAttention.forward", "        state, owner = OnlineSoftmax(q.shape), self.rank\n"
          "        for step in range(self.workers):\n",
          "        owner = self.rank\n        for step in range(self.workers):\n"
          "            state = OnlineSoftmax(q.shape)\n", "a new softmax state every step",
          r"kept only the last block: one OnlineSoftmax for the whole ring, created before the loop"),
    _edit("RingAttention.forward", "            if step < self.workers - 1:\n                self.ring.send(k, v)",
          "            if step < self.workers - 1:\n                k, v = self.ring.recv()\n"
          "                owner = (owner - 1) % self.workers\n            if step < self.workers - 1:\n"
          "                self.ring.send(k, v)", "receives before it sends",
          r"\(2 workers, even split\): worker \d received before it sent: .*send your block first", "failed",
          "            if step < self.workers - 1:\n                k, v = self.ring.recv()  # the block of the "
          "worker before me\n                owner = (owner - 1) % self.workers\n", ""),
    _edit("RingAttention.forward", "            if step < self.workers - 1:\n                self.ring.send(k, v)",
          "            if True:\n                self.ring.send(k, v)", "sends in the last step too",
          r"worker 0 sent 2 and received 1 blocks; with N = 2 workers a block makes N - 1 = 1 hops"),
    _edit("AllToAllAttention.to_heads", "np.split(t, self.workers, axis=-1)", "np.split(t, self.workers, axis=1)",
          "the tokens split, not the heads", r"worker 0 split its tokens \(axis 1\) into the blocks it sends"),
    _edit("AllToAllAttention.to_heads", "axis=1)[:, self.order]", "axis=1)", "the zig-zag order not undone",
          r"\(3 workers, zigzag split\): worker 0's tokens are in the order the workers hold them, not the "
          r"sequence's: .*\[:, self\.order\]"),
    _edit("AllToAllAttention.to_heads", "np.concatenate(self.exchange(blocks), axis=1)",
          "np.concatenate(self.exchange(blocks), axis=-1)", "the blocks joined along the columns",
          r"worker 0 raised IndexError .* after a right exchange: the N blocks it receives are N parts of the "
          r"SEQUENCE .*join them along the tokens, np\.concatenate\(\.\.\., axis=1\)"),
    # ---- expert parallelism
    _edit("ExpertShard.dispatch", "t, c = np.nonzero(kept)", "t, c = np.nonzero(choice >= 0)",
          "the capacity ignored", r"worker 0 dispatched all 24 of its assignments, but the "
          r"experts keep only \d+ of them \(capacity C = \d+\)"),
    _edit("ExpertShard.dispatch", "t, c = np.nonzero(kept)", "t, c = np.nonzero(kept[:, :1])",
          "the first choice only", r"dispatched \d+ assignments; \d+ are kept: .*its second choice too"),
    _edit("ExpertShard.dispatch", "        t, c, e = t[order], c[order], e[order]\n", "",
          "not sorted by expert", r"received worker \d's token \d+, routed to expert \d: .*np\.lexsort\(\(t, c, e\)\)"),
    _edit("ExpertShard.dispatch", "np.bincount(e // self.per, minlength=self.workers)",
          "np.bincount(e, minlength=self.workers)", "counted per expert, not per worker",
          r"worker 0 handed the all-to-all 4 blocks: one block per WORKER \(N = 2\).*e // self\.per"),
    _edit("ExpertShard.combine", "return np.concatenate(returned)", "return returned", "the blocks not joined",
          r"worker 0 returned a list of the blocks that came back: return one array, np\.concatenate"),
    _edit("ExpertShard.combine", "[(n, self.width) for n in sizes]",
          "[(n, self.width) for n in incoming.sum(axis=1)]", "expects back what it received, not what it sent",
          r"expects back blocks of \[\d+, \d+\] rows from the workers; it dispatched \[\d+, \d+\] to them"),
    _edit("ExpertShard.combine", "self.exchange(_by_worker(rows, incoming),", "self.exchange(rows,",
          "the experts' rows not regrouped by worker",
          r"sends back blocks of \[\d+, \d+\] rows; the workers sent it \[\d+, \d+\]: .*_by_worker\(rows, incoming\)"),
    # ---- checkpoints
    _edit("save_shard", 'tmp = folder / f"{name}.tmp"', "tmp = folder / name", "written in place",
          r"wrote the shard in place, under its final name shard-1\.npz"),
    _edit("save_shard", "        flush_to_disk(f)  # fsync: on the disk, not only in the page cache\n", "",
          "no fsync", r"never flushed the shard to the disk \(flush_to_disk\(f\)"),
    _edit("save_shard", "        flush_to_disk(f)  # fsync: on the disk, not only in the page cache\n"
          "    rename_into_place(tmp, folder / name)  # atomic: a reader sees no shard or the whole shard\n",
          "        rename_into_place(tmp, folder / name)\n        flush_to_disk(f)\n", "renamed before flushed",
          r"renamed the shard into place before flushing it to the disk"),
    _edit("save_shard", "np.savez(f, **arrays)", "np.savez(f, arrays)", "the dict saved as one object",
          r"shard-1\.npz holds a pickled object, not arrays by name .*np\.savez\(f, \*\*arrays\)"),
    _edit("save_shard", "rename_into_place(tmp, folder / name)", "os.replace(tmp, folder / name)",
          "os.replace, the folder never synced", r"moved the shard into place without rename_into_place"),
    _edit("save_shard", "np.savez(f, **arrays)", "np.savez(tmp, **arrays)", "np.savez given the file's name",
          r"wrote \['shard-1\.npz\.tmp\.npz'\] besides shard-1\.npz: .*np\.savez adds \.npz"),
    Bug("write_checkpoint", "every worker writes the manifest",
        (("    if rank == 0:  # one manifest, written last: it makes the checkpoint complete\n", ""),
         ("        shards = [describe", "    shards = [describe"), ("        write_manifest(folder,", "    write_manifest(folder,")),
        r"worker [12] wrote the manifest too: one worker writes it \(rank == 0\)"),
    _edit("write_checkpoint", "    all_saved()  # a barrier: every shard is in place\n", "",
          "the manifest before the barrier", r"worker 0 described the shards for the manifest before every worker had "
          r"saved its shard", "failed",
          "        write_manifest(folder, {**manifest, \"step\": step, \"shards\": shards})\n",
          "        write_manifest(folder, {**manifest, \"step\": step, \"shards\": shards})\n    all_saved()\n"),
    _edit("write_checkpoint", "    all_saved()  # a barrier: every shard is in place\n"
          "    if rank == 0:  # one manifest, written last: it makes the checkpoint complete\n",
          "    if rank == 0:  # one manifest, written last: it makes the checkpoint complete\n        all_saved()\n",
          "only worker 0 waits for the shards", r"the workers did not all wait for every shard \(worker 0: 1 calls of "
          r"all_saved\(\), worker 1: 0 .*every worker calls all_saved\(\) once"),
    _edit("write_checkpoint", '{**arrays, "step": step}', "arrays", "the shard without its step",
          r"worker 0's shard holds \[.*\], no 'step'"),
    _edit("write_checkpoint", '{**manifest, "step": step, "shards": shards}', '{**manifest, "shards": shards}',
          "the manifest without its step", r"the manifest has no 'step'"),
    _edit("write_checkpoint", "folder.mkdir(parents=True, exist_ok=True)", "folder.mkdir(parents=True)",
          "the folder made by every worker", r"raised FileExistsError .*folder\.mkdir\(parents=True, exist_ok=True\)"),
    _edit("write_checkpoint", "save_shard(folder, shard_name(rank),", "save_shard(folder, shard_name(0),",
          "every worker writes shard 0", r"worker [12] wrote shard-0\.npz, not its own shard-[12]\.npz"),
    _edit("load_checkpoint", "        verify_shard(path, entry)  # there, of its size, of its checksum\n", "",
          "the shards read unchecked", r"a checkpoint without its shard-1\.npz raised FileNotFoundError .*not a "
          r"CheckpointError naming shard-1\.npz: check each shard against the manifest \(verify_shard"),
    _edit("load_checkpoint", "manifest = read_manifest(folder)", "manifest = json.loads((folder / MANIFEST).read_text())",
          "the manifest read without read_manifest",
          r"a checkpoint without its manifest\.json raised FileNotFoundError .*read_manifest\(folder\) says so"),
    _edit("load_checkpoint", "        verify_shard(path, entry)  # there, of its size, of its checksum\n",
          "        try:\n            verify_shard(path, entry)\n        except CheckpointError:\n            continue\n",
          "a damaged shard skipped", r"a checkpoint without its shard-1\.npz was refused with \"checkpoint step-00000006:"
          r" its shards cover 7 of 11 parameters\", which does not name shard-1\.npz"),
    _edit("latest_checkpoint", 'sorted(Path(root).glob("step-*"), reverse=True)', 'sorted(Path(root).glob("step-*"))',
          "the oldest first", r"returned the checkpoint of step 2, not 4, .*the oldest complete one; try the newest "
          r"first"),
    _edit("latest_checkpoint", "        try:\n            checkpoint = load_checkpoint(folder)\n"
          "        except CheckpointError as why:  # half-written or damaged: try the one before\n"
          "            refused.append(str(why))\n            continue\n",
          "        checkpoint = load_checkpoint(folder)\n", "no fall-back",
          r"let a CheckpointError through \(\"checkpoint step-00000010: shard shard-1\.npz is corrupted"),
    _edit("latest_checkpoint", "            refused.append(str(why))\n", "", "the reasons not kept",
          r"`refused` holds 0 reason\(s\); 3 newer checkpoints were refused \(steps \[10, 8, 6\]\)"),
    _edit("latest_checkpoint", '    raise CheckpointError(f"no complete checkpoint in {root}"', '    return None  # (',
          "None when none is complete", r"returned None from a folder whose every checkpoint is damaged: raise a "
          r"CheckpointError"),
)


def _function(qualname):
    return next(f for f in TEACHING_CORE if f.qualname == qualname)


def plant(monkeypatch, bug: Bug):
    """Replace the course's function with the buggy one, everywhere it is bound by name."""
    f = _function(bug.function)
    current = f.obj()
    original = inspect.unwrap(current)
    lines, start = inspect.getsourcelines(original)
    source = "".join(lines)  # as the file holds it (a method indented)
    for old, new in bug.edits:
        assert source.count(old) == 1, (f"planted bug {bug.id!r}: {old!r} is not once in {bug.function}'s source "
                                        "any more: update the bug to the course's code")
        source = source.replace(old, new)
    module = importlib.import_module(f.module)
    owner = getattr(module, f.qualname.split(".")[0]) if "." in f.qualname else None
    if owner is not None:  # compiled in a class body, so that super() finds its class (the real one, below)
        source = "class _Owner:\n" + textwrap.indent(textwrap.dedent(source), "    ")
        start -= 1
    else:
        source = textwrap.dedent(source)
    namespace = dict(vars(module))
    exec(compile("\n" * (start - 1) + source, inspect.getsourcefile(original), "exec"), namespace)  # noqa: S102
    compiled = getattr(namespace["_Owner"], original.__name__) if owner is not None else namespace[original.__name__]
    # the buggy function lives in its module, as the learner's would: its globals are the module's
    # (so a check's spies on the module's helpers see it), and its class is the real one
    closure = tuple(types.CellType(owner) if name == "__class__" else cell
                    for name, cell in zip(compiled.__code__.co_freevars, compiled.__closure__ or ()))
    buggy = types.FunctionType(compiled.__code__, vars(module), compiled.__name__, compiled.__defaults__,
                               closure or None)
    buggy.__kwdefaults__, buggy.__qualname__ = compiled.__kwdefaults__, original.__qualname__
    if owner is not None:
        monkeypatch.setattr(owner, f.name, buggy)
        return
    for name, mod in list(sys.modules.items()):
        if name.startswith("course_lib") and getattr(mod, f.name, None) is current:
            monkeypatch.setattr(mod, f.name, buggy)


def test_there_are_enough_planted_bugs():
    assert len(BUGS) >= 25
    assert len({b.id for b in BUGS}) == len(BUGS)
    # every function of the core has its planted bugs (but layers_forward, a one-line call)
    assert {f.qualname for f in TEACHING_CORE} - {"Stage.layers_forward"} <= {b.function for b in BUGS}


def _first_of_each_function_fast(bugs):
    """make test-fast grades the first planted bug of each function (every grader runs once);
    make test all of them (the others are marked slow)."""
    seen: set = set()
    out = []
    for b in bugs:
        out.append(pytest.param(b, id=b.id, marks=[pytest.mark.slow] if b.function in seen else []))
        seen.add(b.function)
    return out


@pytest.mark.parametrize("bug", _first_of_each_function_fast(BUGS))
def test_a_planted_bug_is_caught_and_named(monkeypatch, bug):
    plant(monkeypatch, bug)
    t0 = time.monotonic()
    outcome = grade(_function(bug.function))
    took = time.monotonic() - t0
    assert outcome.status == bug.status, f"{bug.id}: {outcome.status}: {outcome.message}"
    assert re.search(bug.says, outcome.message), f"{bug.id}: the grader said:\n{outcome.message}"
    assert took < (15 if bug.status == "hangs" else 8), f"{bug.id} took {took:.1f} s"
    if bug.status == "raised":  # the learner's frames only, not the course's machinery
        assert "grading" not in outcome.message and "engine" not in outcome.message, outcome.message


def test_the_course_passes_its_graders():
    outcomes = grade_all()
    assert [o.function.qualname for o in outcomes] == [f.qualname for f in TEACHING_CORE]
    failed = [(o.function.qualname, o.status, o.message) for o in outcomes if not o.passed]
    assert failed == []
    assert sum(o.seconds for o in outcomes) < 60


def test_a_learner_traceback_keeps_only_the_learners_frames():
    from course_lib.conv import im2col as module

    try:
        module.im2col([[[[1, 2], [3, 4]]]], 3)  # a kernel larger than the image: the course's check raises
    except ValueError as exc:
        text = learner_traceback(exc)
    lines = text.splitlines()
    assert lines[0] == "Traceback (your code):"
    assert lines[1].startswith('  File "course_lib/conv/im2col.py"') and "in im2col" in lines[1]
    assert 'File "course_lib/conv/geometry.py"' in text  # where it was raised: a library function it called
    assert lines[-1].startswith("ValueError: kernel")


def test_a_function_that_never_returns_is_stopped(monkeypatch):
    """A function the check runs in this process and that loops for ever counts as hung."""
    from course_lib.grading import core

    monkeypatch.setattr(core, "IN_PROCESS_LIMIT", 1.0)
    # an endless loop that allocates nothing: one that appends (the 1F1B loop made endless) grew a
    # pytest worker to 23 GB once, on a loaded machine, until the kernel's out-of-memory killer ended it
    plant(monkeypatch, Bug("stage_order", "an endless loop", (
        ("    for i in range(micro_batches - warmup):  # then one forward, one backward\n",
         "    while True:  # waits for ever\n        pass\n"
         "    for i in range(micro_batches - warmup):  # then one forward, one backward\n"),), ""))
    t0 = time.monotonic()
    outcome = grade(_function("stage_order"))
    assert outcome.status == "hangs" and "did not return within 1 s" in outcome.message, outcome
    assert time.monotonic() - t0 < 5


def test_a_worker_thread_that_never_returns_ends_as_worker_timeout_naming_it(monkeypatch):
    """The checks that run workers as threads of this process (context, experts, checkpoints):
    a worker stuck outside the barrier ends the run with WorkerTimeout naming it, after
    2 GRADER_TIMEOUT seconds; one that returned while another waits at the barrier, at once."""
    import threading

    from course_lib.grading import Mistake, harness
    from course_lib.parallel.engine.errors import WorkerTimeout

    monkeypatch.setattr(harness, "GRADER_TIMEOUT", 0.5)
    never = threading.Event()

    def work(rank, barrier):
        barrier.wait(rank, 10.0)
        if rank == 1:
            never.wait()  # stuck: neither returns nor waits at the barrier

    t0 = time.monotonic()
    try:
        with pytest.raises(WorkerTimeout, match=r"no worker made progress for 1 s.*probably \[1\]"):
            harness.run_threads(3, work, lambda waits, returned: "unmatched")
    finally:
        never.set()
    assert time.monotonic() - t0 < 3
    t0 = time.monotonic()
    with pytest.raises(Mistake, match=r"^waits \[1, 2, 1\], returned \[True, False, True\]$"):
        harness.run_threads(3, lambda rank, barrier: [barrier.wait(rank, 10.0) for _ in range(1 + (rank == 1))],
                            lambda waits, returned: f"waits {waits}, returned {returned}")
    assert time.monotonic() - t0 < 2


def test_the_readmes_quote_the_graders_as_they_speak(monkeypatch):
    """The message both READMEs quote is the one the grader gives for that mistake."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    mean = next(b for b in BUGS if b.id == "ShmAllReduce.reduce_scatter:mean instead of sum")
    plant(monkeypatch, mean)
    said = grade(_function(mean.function)).message
    scratch = (root / "course_lib" / "tools" / "templates" / "scratch" / "README.md").read_text(encoding="utf-8")
    lecturers = (root / "README.md").read_text(encoding="utf-8")
    for text in (scratch, lecturers):
        quoted = re.search(r'"(reduce_scatter: worker \d.*?did you\s+divide by N\?)"', text, re.S)
        assert quoted and " ".join(quoted[1].split()) == said, (quoted and quoted[1], said)
    quoted = re.search(r'"(all_gather: worker 0 returned without waiting on the\s+barrier)"', scratch)
    assert quoted
    monkeypatch.undo()
    gather = next(b for b in BUGS if b.id.startswith("ShmAllReduce.all_gather:missing barrier"))
    plant(monkeypatch, gather)
    assert " ".join(quoted[1].split()) in grade(_function(gather.function)).message
