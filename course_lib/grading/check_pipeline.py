"""Checks of the pipeline: ``stage_order`` (the schedules), a :class:`Stage`'s
``layers_forward``, ``layers_backward``, ``forward`` and ``backward``, and ``stage_worker``.

``stage_order`` is checked by the schedules' rules, for every stage of pipelines of one to
four stages and one to six micro-batches: each forward and backward once, in micro-batch
order, a backward after its forward; GPipe every forward first; 1F1B ``N_p - q - 1``
warm-up forwards (at most ``M``), then one forward and one backward, then the remaining
backwards; interleaved (``virtual_stages > 1``) :func:`course_lib.schedule.interleaved_order`.

The stage's methods run in this process, on a stage of a two-stage pipeline whose pipes
are stand-ins that write down every message and whose neighbour's messages are put in
place beforehand; their results must be bit for bit those of the model's own layers
(:func:`course_lib.models.layer_outputs`, ``MLP.layer_backward``). ``stage_worker`` runs
first with stand-in stages that write down every call (the order of the schedule, the rows
and the scale of every micro-batch, the update), then for real on processes
(:func:`course_lib.parallel.train.pipeline.train_pipeline`, GPipe, 1F1B, recomputation,
two replicas), whose parameters must be those of
:func:`course_lib.parallel.train.reference.train_microbatched` bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..models import layer_outputs, softmax_cross_entropy
from ..parallel.engine.job import check_job
from ..parallel.partition import replica_rows
from .core import GRADER_TIMEOUT, Mistake
from .harness import arrays_differ, learner, small_data, start_method

__all__ = ["CHECKS", "HINTS"]

PIPELINE = "course_lib.parallel.pipeline"
SIZES = (8, 16, 12, 10, 3)  # four layers: stage 0 holds layers 0-1, stage 1 layers 2-3
RUN = dict(batch_size=20, steps=3, lr=0.5, seed=1)


# ------------------------------------------------------------------ stage_order
def _pattern(order) -> str:
    return "".join(op[0] for op in order)


def check_stage_order() -> None:
    from ..schedule import interleaved_order

    stage_order = learner("course_lib.schedule", "stage_order")
    for schedule in ("gpipe", "1f1b"):
        for stages in range(1, 5):
            for micro in range(1, 7):
                for q in range(stages):
                    got = stage_order(q, stages, micro, schedule)
                    said = f"stage_order(q={q}, stages={stages}, micro_batches={micro}, {schedule!r})"
                    _check_order(said, got, q, stages, micro, schedule)
    for stages, micro, v in ((2, 4, 2), (3, 6, 2), (2, 2, 3)):
        for q in range(stages):
            got = stage_order(q, stages, micro, "1f1b", v)
            if got != interleaved_order(q, stages, micro, v):
                raise Mistake(f"stage_order(q={q}, stages={stages}, micro_batches={micro}, '1f1b', virtual_stages={v}) "
                              "is not interleaved 1F1B: with virtual_stages > 1 hand over to "
                              "interleaved_order(q, stages, micro_batches, virtual_stages)")


def _check_order(said: str, got, q: int, stages: int, micro: int, schedule: str) -> None:
    if not isinstance(got, list) or not all(isinstance(op, tuple) and len(op) == 2 and op[0] in ("F", "B")
                                            for op in got):
        raise Mistake(f"{said} returned {got!r:.80}: a list of ('F', m) and ('B', m) tuples")
    for kind, what in (("F", "forwards"), ("B", "backwards")):
        seen = [m for k, m in got if k == kind]
        if sorted(seen) != list(range(micro)):
            raise Mistake(f"{said} gives {what} of micro-batches {seen}: each of 0 .. {micro - 1} exactly once")
        if seen != list(range(micro)):
            why = (" (the gradients must add up in micro-batch order: bit for bit the serial run's)"
                   if kind == "B" else "")
            raise Mistake(f"{said} runs the {what} in the order {seen}: in micro-batch order, 0, 1, 2, ...{why}")
    for m in range(micro):
        if got.index(("B", m)) < got.index(("F", m)):
            raise Mistake(f"{said} runs the backward of micro-batch {m} before its forward")
    pattern = _pattern(got)
    if schedule == "gpipe":
        if pattern != "F" * micro + "B" * micro:
            raise Mistake(f"{said} is {pattern}: GPipe runs every forward, then every backward")
        return
    warmup = min(stages - q - 1, micro)
    if pattern == "F" * warmup + "FB" * (micro - warmup) + "B" * warmup:
        return
    for other in range(micro + 1):
        if pattern == "F" * other + "FB" * (micro - other) + "B" * other:
            raise Mistake(f"{said} runs {other} warm-up forward(s) before it alternates one forward and one "
                          f"backward; 1F1B's warm-up on stage q of N_p stages is N_p - q - 1 forwards (at most M): "
                          f"{warmup} here")
    raise Mistake(f"{said} is {pattern}: after its warm-up forwards ({warmup} here), 1F1B alternates one forward "
                  "and one backward, then runs the remaining backwards")


# ------------------------------------------------------------------ a stage, in this process
class _Pipe:
    """A pipe end that writes down what is sent and hands out messages put in beforehand."""

    def __init__(self):
        self.inbox, self.sent = [], []

    def poll(self, timeout=0.0) -> bool:
        return bool(self.inbox)

    def recv_bytes(self) -> bytes:
        return self.inbox.pop(0)

    def send_bytes(self, data) -> None:
        self.sent.append(bytes(data))


@dataclass(frozen=True)
class _Ctx:
    rank: int
    world_size: int = 2
    wait_timeout: float = GRADER_TIMEOUT


def _message(step: int, micro: int) -> bytes:
    from ..parallel.pipeline import _MSG

    return _MSG.pack(step, micro)


def _stage(q: int, recompute: bool = False):
    """Stage ``q`` of a two-stage pipeline in this process, its step begun; the model, data,
    job and the stand-in pipes (``recv_act, send_act, recv_grad, send_grad``)."""
    from ..parallel.pipeline import Links

    stage_class = learner(PIPELINE, "Stage")
    model, x, y = small_data(sizes=SIZES)
    x, y, p0, job = check_job(model, x, y, workers=1, boundaries=(0, 2, 4), micro_batches=4, schedule="gpipe",
                              recompute=recompute, backend="pipeline", **RUN)
    first, last = q == 0, q == 1
    width = model.sizes[2]
    buffer = lambda: np.full((RUN["batch_size"], width), np.nan, dtype=p0.dtype)  # noqa: E731
    pipes = {name: _Pipe() for name in ("recv_act", "send_act", "recv_grad", "send_grad")}
    links = Links(p0[None, :].copy(), x if first else None, y if last else None,
                  buffer() if not first else None, buffer() if not last else None,
                  buffer() if not last else None, buffer() if not first else None, None,
                  pipes["recv_act"] if not first else None, pipes["send_act"] if not last else None,
                  pipes["recv_grad"] if not last else None, pipes["send_grad"] if not first else None, None)
    stage = stage_class(_Ctx(q), job, links)
    stage.begin_step()
    return stage, model, x, y, job, pipes


def _micro(job, m: int = 1):
    """Micro-batch ``m`` of the first step: its rows in the batch and the batch's indices."""
    idx = next(iter(job.batches()))
    return replica_rows(idx.size, 1, job.micro_batches)[0][m], idx


def _backward_by_layers(model, params, acts, lo, hi, g, grad, last_y=None, scale=None):
    """The model's own layer_backward over layers hi-1 .. lo (from the loss when ``last_y``)."""
    loss = 0.0
    if last_y is not None:
        loss, g = softmax_cross_entropy(acts[-1], last_y, "sum")
        g *= scale
    for i in reversed(range(lo, hi)):
        g = model.layer_backward(params, i, acts[i - lo], acts[i - lo + 1], g, grad, need_input_grad=i > 0)
    return g, loss


def check_layers_forward() -> None:
    for q in (0, 1):
        stage, model, x, _, job, _ = _stage(q)
        (r0, r1), idx = _micro(job)
        a = x[idx[r0:r1]] if q == 0 else np.random.default_rng(2).random((r1 - r0, model.sizes[2]), dtype=np.float32)
        got = stage.layers_forward(1, a.copy())
        expected = layer_outputs(model, stage.params, stage.lo, stage.hi, a)
        said = f"Stage.layers_forward on stage {q} (layers {stage.lo} .. {stage.hi - 1})"
        if not isinstance(got, list) or len(got) != len(expected):
            raise Mistake(f"{said} returned {type(got).__name__} of length {len(got) if hasattr(got, '__len__') else '-'}: "
                          f"return [input, output of layer {stage.lo}, ..., output of layer {stage.hi - 1}] "
                          "(layer_outputs(self.model, self.params, self.lo, self.hi, a))")
        for i, (g, e) in enumerate(zip(got, expected)):
            wrong = arrays_differ(g, e)
            if wrong:
                what = "the input" if i == 0 else f"the output of layer {stage.lo + i - 1}"
                raise Mistake(f"{said}: element {i}, {what}, is wrong ({wrong}): run this stage's own layers "
                              "self.lo .. self.hi - 1 on its parameters self.params")


def check_layers_backward() -> None:
    for q, recompute in ((1, False), (0, False), (1, True), (0, True)):
        stage, model, x, y, job, _ = _stage(q, recompute)
        (r0, r1), idx = _micro(job)
        rng = np.random.default_rng(3)
        a = x[idx[r0:r1]] if q == 0 else rng.random((r1 - r0, model.sizes[2]), dtype=np.float32)
        acts = layer_outputs(model, stage.params, stage.lo, stage.hi, a)
        stage.stash[stage.chunk, 1] = acts[:1] if recompute else acts
        scale = np.asarray(1.0 / idx.size, dtype=model.dtype)
        g_in = None if q == 1 else rng.standard_normal((r1 - r0, model.sizes[2])).astype(np.float32)
        grad = np.zeros(model.n_params, model.dtype)
        expected_grad = grad.copy()
        expected, loss = _backward_by_layers(model, stage.params, acts, stage.lo, stage.hi,
                                             None if g_in is None else g_in.copy(), expected_grad,
                                             y[idx[r0:r1]] if q == 1 else None, scale)
        got = stage.layers_backward(1, None if g_in is None else g_in.copy(), idx[r0:r1], grad, scale)
        said = f"Stage.layers_backward on stage {q} ({'the last' if q == 1 else 'the first'}" + (
            ", with recomputation)" if recompute else ")")
        if (stage.chunk, 1) in stage.stash:
            raise Mistake(f"{said} left micro-batch 1's activations in the stash: take them out "
                          "(self.stash.pop((self.chunk, m))); what the backward frees is the memory 1F1B saves")
        if not np.array_equal(grad, expected_grad):
            if q == 1 and np.allclose(grad, expected_grad / scale, rtol=1e-4, atol=1e-6):
                raise Mistake(f"{said}: the gradient is {idx.size} times too large: the last stage multiplies the "
                              "loss gradient by `scale` (1 / the batch size) before its layers' backward")
            raise Mistake(f"{said}: the gradient added into `grad` is wrong ({arrays_differ(grad, expected_grad)}): "
                          "go through the layers last to first, each layer_backward(params, i, its input, its "
                          "output, g, grad) adding into grad")
        if q == 1 and stage.losses[-1] != loss:
            raise Mistake(f"{said}: self.losses[-1] is {stage.losses[-1]!r}, expected {loss!r}: the last stage adds "
                          "each micro-batch's loss (summed over its rows) to self.losses[-1]")
        if expected is None and got is not None:
            raise Mistake(f"{said} returned an input gradient for layer 0: the first layer's input is the data, "
                          "which needs none (need_input_grad=i > 0)")
        if expected is not None and (got is None or arrays_differ(got, expected)):
            raise Mistake(f"{said} returned {'None' if got is None else 'a wrong gradient'}: return the gradient "
                          f"of this stage's input, what layer_backward of layer {stage.lo} returns")


def check_forward() -> None:
    for q, recompute in ((0, False), (1, False), (0, True)):
        stage, model, x, _, job, pipes = _stage(q, recompute)
        (r0, r1), idx = _micro(job)
        said = f"Stage.forward on stage {q} ({'the first' if q == 0 else 'the last'}" + (
            ", with recomputation)" if recompute else ")")
        if q == 0:
            a = x[idx[r0:r1]]
        else:
            a = np.random.default_rng(4).random((r1 - r0, model.sizes[2]), dtype=np.float32)
            stage.act_in[r0:r1] = a
            pipes["recv_act"].inbox.append(_message(0, 1))
        stage.forward(1, (r0, r1), idx)
        expected = layer_outputs(model, stage.params, stage.lo, stage.hi, a)
        if q == 1 and pipes["recv_act"].inbox:
            raise Mistake(f"{said} did not wait for the previous stage's message before reading its activations: "
                          "a = self.receive(self.recv_act, 'activations', m, self.act_in[r0:r1])")
        kept = stage.stash.get((stage.chunk, 1))
        want = expected[:1] if recompute else expected
        if kept is None:
            raise Mistake(f"{said} kept nothing in the stash under (self.chunk, m): the backward needs the "
                          "activations of the micro-batch")
        if len(kept) != len(want) or any(arrays_differ(k, w) for k, w in zip(kept, want)):
            if recompute and len(kept) == len(expected):
                raise Mistake(f"{said} stashed every layer's output: with job.recompute a stage keeps only the "
                              "input (acts[:1]) and recomputes the rest at the start of the backward")
            if q == 0 and len(kept) == len(want) and not arrays_differ(kept[0], x[r0:r1]):
                raise Mistake(f"{said} took rows {r0}:{r1} of the data set; the micro-batch is rows idx[r0:r1] "
                              "of this step's batch: self.x[idx[r0:r1]]")
            raise Mistake(f"{said} stashed the wrong activations: the input and every layer's output of "
                          "self.layers_forward(m, a)" + (" (the input only, with recomputation)" if recompute else ""))
        if q == 0:
            if pipes["send_act"].sent != [_message(0, 1)]:
                raise Mistake(f"{said} did not hand its output over to the next stage: "
                              "self.hand_over(self.send_act, self.act_out[r0:r1], acts[-1], m)")
            wrong = arrays_differ(stage.act_out[r0:r1], expected[-1])
            rest = np.delete(stage.act_out, np.s_[r0:r1], axis=0)
            if wrong or not np.isnan(rest).all():
                raise Mistake(f"{said} wrote the wrong rows of the shared buffer act_out: its output goes to rows "
                              f"[{r0}, {r1}), those of the micro-batch")


def check_backward() -> None:
    for q in (1, 0):
        stage, model, x, y, job, pipes = _stage(q)
        (r0, r1), idx = _micro(job)
        rng = np.random.default_rng(5)
        a = x[idx[r0:r1]] if q == 0 else rng.random((r1 - r0, model.sizes[2]), dtype=np.float32)
        acts = layer_outputs(model, stage.params, stage.lo, stage.hi, a)
        stage.stash[stage.chunk, 1] = acts
        scale = np.asarray(1.0 / idx.size, dtype=model.dtype)
        g_in = None
        if q == 0:
            g_in = rng.standard_normal((r1 - r0, model.sizes[2])).astype(np.float32)
            stage.grad_in[r0:r1] = g_in
            pipes["recv_grad"].inbox.append(_message(0, 1))
        grad, expected_grad = np.zeros(model.n_params, model.dtype), np.zeros(model.n_params, model.dtype)
        expected, _ = _backward_by_layers(model, stage.params, acts, stage.lo, stage.hi, g_in, expected_grad,
                                          y[idx[r0:r1]] if q == 1 else None, scale)
        stage.backward(1, (r0, r1), idx, grad, scale)
        said = f"Stage.backward on stage {q} ({'the last' if q == 1 else 'the first'})"
        if q == 0 and pipes["recv_grad"].inbox:
            raise Mistake(f"{said} did not wait for the next stage's message before reading the gradient: "
                          "g = self.receive(self.recv_grad, 'gradients', m, self.grad_in[r0:r1])")
        if arrays_differ(grad, expected_grad):
            raise Mistake(f"{said}: the gradient added into `grad` is wrong: self.layers_backward(m, g, idx[r0:r1], "
                          "grad, scale), with g the next stage's gradient (None on the last stage: it starts "
                          "from the loss of samples idx[r0:r1])")
        if q == 1:
            if pipes["send_grad"].sent != [_message(0, 1)]:
                raise Mistake(f"{said} did not hand the gradient of its input back to the previous stage: "
                              "self.hand_over(self.send_grad, self.grad_out[r0:r1], g, m)")
            if arrays_differ(stage.grad_out[r0:r1], expected):
                raise Mistake(f"{said} wrote the wrong rows of grad_out: the input gradient goes to rows "
                              f"[{r0}, {r1}), those of the micro-batch")


# ------------------------------------------------------------------ stage_worker
class _Chunk:
    """A stand-in stage: writes down every call stage_worker makes."""

    def __init__(self, c: int, replica: int, record: list, n: int, ops):
        self.chunk, self.replica, self.record, self.ops = c, replica, record, ops
        self.params_slice = slice(c * n // 2, (c + 1) * n // 2)
        self.grad = np.zeros(n, np.float32)

    def begin_step(self):
        self.record.append(("begin", self.chunk))
        return self.grad

    def order(self, micro_batches):
        return self.ops(micro_batches)

    def forward(self, m, rows, idx):
        self.record.append(("F", m, self.chunk, tuple(rows), idx))

    def backward(self, m, rows, idx, grad, scale):
        self.record.append(("B", m, self.chunk, tuple(rows), idx, grad is self.grad, scale))

    def allreduce(self, grad):
        self.record.append(("A", self.chunk, grad is self.grad))
        return np.full(self.params_slice.stop - self.params_slice.start, 7.0, np.float32)

    def update(self, grad):
        self.record.append(("U", self.chunk, np.array(grad, copy=True)))


def _ops(chunks: int):
    def ops(micro):  # forwards through the chunks, then backwards back (a valid, unusual order)
        return ([("F", m, c) for m in range(micro) for c in range(chunks)]
                + [("B", m, c) for m in range(micro) for c in reversed(range(chunks))])
    return ops


def check_stage_worker() -> None:
    stage_worker = learner(PIPELINE, "stage_worker")
    model, x, y = small_data(sizes=SIZES)
    for replicas, replica, chunks in ((1, 0, 1), (2, 1, 2)):
        _, _, _, job = check_job(model, x, y, workers=replicas, boundaries=(0, 2, 4) if chunks == 1 else (0, 1, 2, 3, 4),
                                 micro_batches=4, schedule="1f1b" if chunks > 1 else "gpipe",
                                 virtual_stages=chunks, backend="pipeline", **{**RUN, "steps": 2})
        record: list = []
        stages = [_Chunk(c, replica, record, model.n_params, _ops(chunks)) for c in range(chunks)]
        stage_worker(stages, job, job.batches())
        _check_worker_record(record, stages, job, replicas, replica, chunks)
    _check_pipeline_runs()


def _check_worker_record(record, stages, job, replicas, replica, chunks) -> None:
    said = f"stage_worker ({replicas} replica(s), {chunks} chunk(s) per process)"
    steps = list(job.batches())
    at = 0
    for step, idx in enumerate(steps):
        begun = record[at : at + chunks]
        if sorted(e[:2] for e in begun) != [("begin", c) for c in range(chunks)]:
            raise Mistake(f"{said}: step {step} does not start with st.begin_step() for each of its chunks: it "
                          "gives each chunk its zeroed gradient buffer (grads = [st.begin_step() for st in chunks])")
        at += chunks
        rows = replica_rows(idx.size, replicas, job.micro_batches)[replica]
        for kind, m, c in stages[0].ops(len(rows)):
            e = record[at] if at < len(record) else ("nothing",)
            if e[0] in ("U", "A"):
                raise Mistake(f"{said}: step {step} updates chunk {e[1]} in the middle of its micro-batches (before "
                              f"operation ({kind!r}, {m}, {c})): each chunk updates once, after every micro-batch's "
                              "forward and backward (the gradient of the whole batch)")
            if e[0] != kind or e[1:3] != (m, c):
                raise Mistake(f"{said}: step {step}'s operation {at} is {e[:3]}, expected ({kind!r}, {m}, {c}): run "
                              "the operations of chunks[0].order(len(rows)) in that order, F as "
                              "chunks[c].forward, B as chunks[c].backward")
            if e[3] != tuple(rows[m]):
                mine = "" if replica == 0 else f" (replica {replica}'s rows are replica_rows(...)[chunks[0].replica])"
                raise Mistake(f"{said}: micro-batch {m} got rows {e[3]}, expected {tuple(rows[m])}: rows[m] of "
                              f"replica_rows(idx.size, job.workers, job.micro_batches){mine}")
            if e[4] is not idx and not np.array_equal(e[4], idx):
                raise Mistake(f"{said}: the forward or backward got other sample indices than the step's batch idx")
            if kind == "B":
                if not e[5]:
                    raise Mistake(f"{said}: chunk {c}'s backward did not get chunk {c}'s gradient buffer: "
                                  "chunks[c].backward(m, rows[m], idx, grads[c], scale)")
                if not np.isclose(float(e[6]), 1.0 / idx.size, rtol=1e-6):
                    raise Mistake(f"{said}: the backward's scale is {float(e[6]):.6g}; the batch's gradient is the "
                                  f"sum over its {idx.size} samples divided by their number: scale = 1 / idx.size")
            at += 1
        for c, st in enumerate(stages):
            if replicas > 1:
                e = record[at] if at < len(record) else ("nothing",)
                if e[0] != "A" or e[1] != c or not e[2]:
                    raise Mistake(f"{said}: after the micro-batches each chunk's gradient is all-reduced with the "
                                  "same stage of the other replicas before the update: st.update(st.allreduce(grad))")
                at += 1
            e = record[at] if at < len(record) else ("nothing",)
            if e[0] != "U" or e[1] != c:
                raise Mistake(f"{said}: step {step} ends with {e[0]!r} where chunk {c}'s update belongs: after every "
                              "micro-batch's forward and backward, each chunk updates once (st.update(...))")
            want = np.full(e[2].size, 7.0, np.float32) if replicas > 1 else st.grad[st.params_slice]
            if e[2].shape != want.shape or (replicas > 1 and not np.array_equal(e[2], want)):
                what = "the all-reduced gradient" if replicas > 1 else "grad[st.params_slice], its layers' slice"
                raise Mistake(f"{said}: chunk {c}'s update got {e[2].size} numbers; it takes {what}")
            at += 1
    if at != len(record):
        raise Mistake(f"{said}: after its last step it called {record[at][0]!r} again")


def _check_pipeline_runs() -> None:
    """The whole pipeline on processes: bitwise the one-process reference."""
    from ..parallel.train.pipeline import train_pipeline
    from ..parallel.train.reference import train_microbatched

    model, x, y = small_data(sizes=SIZES)
    for schedule, data, recompute in (("gpipe", 1, False), ("1f1b", 1, True), ("1f1b", 2, False)):
        got = train_pipeline(model, x, y, stages=2, micro_batches=4, schedule=schedule, data=data,
                             recompute=recompute, start_method=start_method(), timeout=GRADER_TIMEOUT, **RUN)
        ref = train_microbatched(model, x, y, micro_batches=4, data=data, recompute=recompute, **RUN)
        wrong = arrays_differ(got.params, ref.params)
        if wrong or not got.replicas_in_sync:
            raise Mistake(f"stage_worker: a {schedule} pipeline of 2 stages, {data} replica(s), 4 micro-batches"
                          f"{', recomputing' if recompute else ''}, on processes, ends with other parameters than "
                          f"the one-process reference (train_microbatched): {wrong or 'the replicas differ'}")


CHECKS = {
    "stage_order": check_stage_order,
    "Stage.layers_forward": check_layers_forward,
    "Stage.layers_backward": check_layers_backward,
    "Stage.forward": check_forward,
    "Stage.backward": check_backward,
    "stage_worker": check_stage_worker,
}

HINTS = {
    "stage_order": (
        "GPipe first: every forward `(\"F\", m)`, then every backward `(\"B\", m)`, both in micro-batch order. "
        "With `virtual_stages > 1`, return `interleaved_order(...)` at once.",
        "1F1B: stage q first runs a few forwards alone, the warm-up: the later stages need micro-batches in "
        "flight before the first backward can come back. How many? The last stage none, the first `N_p - 1`.",
        "`warmup = min(N_p - q - 1, M)` forwards; then for each remaining micro-batch one forward and one "
        "backward, `(\"F\", warmup + i), (\"B\", i)`; then the backwards left over.",
    ),
    "Stage.layers_forward": (
        "The stage owns layers `self.lo .. self.hi - 1`; its forward returns what its backward will need: "
        "the input and every layer's output.",
        "`layer_outputs(self.model, self.params, self.lo, self.hi, a)` does exactly that.",
    ),
    "Stage.layers_backward": (
        "First take the micro-batch's activations out of the stash (`self.stash.pop((self.chunk, m))`); "
        "with `self.job.recompute` only the input is there: `self.recompute(acts[0])` gives them all again.",
        "The last stage starts from the loss: `softmax_cross_entropy(acts[-1], self.y[samples], \"sum\")`, "
        "its gradient multiplied by `scale`, the loss added to `self.losses[-1]`.",
        "Then the layers last to first: `g = self.model.layer_backward(self.params, i, acts[i - self.lo], "
        "acts[i - self.lo + 1], g, grad, need_input_grad=i > 0)`; return `g`.",
    ),
    "Stage.forward": (
        "Where does the input come from? The first stage reads the data, `self.x[idx[r0:r1]]`; the others "
        "wait for the previous stage's message (`self.receive(self.recv_act, ...)`) and read `self.act_in[r0:r1]`.",
        "`acts = self.layers_forward(m, a)`; keep them in `self.stash[self.chunk, m]` (only `acts[:1]` with "
        "`self.job.recompute`).",
        "Every stage but the last hands its output over: `self.hand_over(self.send_act, self.act_out[r0:r1], "
        "acts[-1], m)`.",
    ),
    "Stage.backward": (
        "The mirror of forward: the last stage starts from the loss (`g = None`), the others wait for the "
        "next stage's gradient (`self.receive(self.recv_grad, ...)`, `self.grad_in[r0:r1]`).",
        "`g = self.layers_backward(m, g, idx[r0:r1], grad, scale)`; every stage but the first hands `g` back: "
        "`self.hand_over(self.send_grad, self.grad_out[r0:r1], g, m)`.",
    ),
    "stage_worker": (
        "Each step: `grads = [st.begin_step() for st in chunks]`, this replica's micro-batches "
        "`replica_rows(idx.size, job.workers, job.micro_batches)[chunks[0].replica]`, and `scale = 1 / idx.size` "
        "in the model's dtype.",
        "Then the schedule: `for kind, m, c in chunks[0].order(len(rows))`, a forward or a backward of "
        "micro-batch m on chunk c.",
        "After the last micro-batch, each chunk updates once: `st.update(st.allreduce(grad) if job.workers > 1 "
        "else grad[st.params_slice])`.",
    ),
}
