"""Checks of the data-parallel step loops: ``worker_loop``, ``overlap_worker_loop``,
``zero1_worker_loop`` and ``zero3_worker_loop``.

Each loop runs on three worker processes (shards of 7, 7 and 6 samples of every batch of
20) with a communicator and a job that write down how the loop used them: when it waited,
all-reduced, handed a layer over, updated (with which gradient, divided by how many
samples). ``worker_loop`` communicates through :class:`~course_lib.parallel.allreduce.PipeAllReduce`
(the same sums in rank order, and independent of the shared-memory all-reduce you write),
``overlap_worker_loop`` through the course's buckets, ``zero1_worker_loop`` through your
:class:`~course_lib.parallel.allreduce.ShmAllReduce`, ``zero3_worker_loop`` through the course's
layer-by-layer collectives (:class:`~course_lib.parallel.zero.LayerChunks`). The parameters must be those of
:func:`course_lib.parallel.train.reference.train_simulated` bit for bit: the same arithmetic
in one process.
"""

from __future__ import annotations

import numpy as np

from ..parallel.engine.job import check_job
from ..parallel.partition import shard_bounds
from .core import Mistake
from .harness import Recorder, arrays_differ, launch, learner, progress, run_workers, small_data

__all__ = ["CHECKS", "HINTS"]

WORKERS = 3
RUN = dict(batch_size=20, steps=4, lr=0.5, seed=1)


def _setup(**kw):
    model, x, y = small_data()
    x, y, p0, job = check_job(model, x, y, workers=WORKERS, **RUN, **kw)
    return model, x, y, p0, job


def _origin(total, comm) -> str:
    """Where the gradient given to an update comes from: the all-reduce's result, the
    worker's own (unreduced) gradient buffer, or elsewhere."""
    last = getattr(comm, "last", None)
    if last is not None and (total is last or np.shares_memory(total, last)):
        return "reduced"
    if np.shares_memory(total, comm.buffer):
        return "own"
    return "other"


class _Job:
    """The run's job as the learner's loop sees it: ``update`` is written down (how many
    numbers, divided by how many samples, which gradient) with the parameters after it."""

    def __init__(self, job, record: Recorder, comm, model=None):
        self._job, self._record, self._comm = job, record, comm
        self.model = job.model if model is None else model

    def __getattr__(self, name):
        return getattr(self._job, name)

    def update(self, params, total, samples, optimizer, buffer):
        origin = _origin(total, self._comm)
        self._job.update(params, total, samples, optimizer, buffer)
        self._record("update", int(np.size(params)), int(samples), origin, np.array(params, copy=True))


class _Comm:
    """A communicator seen through a :class:`Recorder`: every call written down, the last
    all-reduced (or reduce-scattered) array kept to recognise it in an update."""

    def __init__(self, inner, record: Recorder):
        self._inner, self._record, self.last, self.buffer = inner, record, None, np.zeros(0)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def gradient_buffer(self):
        self.buffer = self._inner.gradient_buffer()
        return self.buffer

    def start(self):
        self._record("start")
        return self._inner.start()

    def wait(self):
        self._record("wait")
        return self._inner.wait()

    def allreduce(self):
        self._record("allreduce")
        self.last = self._inner.allreduce()
        return self.last

    def reduce_scatter(self):
        self._record("reduce_scatter")
        self.last = self._inner.reduce_scatter()
        return self.last

    def all_gather(self, chunk=None):
        self._record("all_gather")
        return self._inner.all_gather(chunk)


# ------------------------------------------------------------------ worker targets
def _attach_all(stack, specs):
    return [stack.enter_context(spec.attach()) for spec in specs]


def _pipe_worker(wctx, job, specs, conns, barrier) -> tuple:
    """worker_loop over pipes to rank 0 (sums in rank order), with everything written down."""
    import contextlib

    from ..parallel.allreduce import PipeAllReduce

    with contextlib.ExitStack() as stack:
        x, y, p0 = _attach_all(stack, specs)
        record = Recorder()
        comm = _Comm(PipeAllReduce(wctx, p0.size, p0.dtype, conns, barrier), record)
        loop = learner("course_lib.parallel.data", "worker_loop")
        out = loop(wctx, _Job(job, record, comm), x, y, p0, comm, progress(wctx, job.batches()))
        return _report(out, record, "worker_loop")


def _report(out, record: Recorder, name: str) -> tuple:
    if not isinstance(out, tuple) or len(out) < 4:
        raise Mistake(f"{name} returned {type(out).__name__}: return params, grad, opt, losses (as the docstring "
                      "of the module says)")
    params, _, _, losses = out[:4]
    return np.array(params, copy=True), [float(v) for v in losses], record.events


class _Model:
    """The model as overlap_worker_loop sees it: each forward (a new step) and every
    layer_backward written down, and the gradient buffer checked to be zero when a step's
    backward starts."""

    def __init__(self, model, record: Recorder):
        self._model, self._record, self._fresh = model, record, False

    def __getattr__(self, name):
        return getattr(self._model, name)

    def forward(self, params, x):
        self._fresh = True
        self._record("forward")
        return self._model.forward(params, x)

    def layer_backward(self, params, i, a_in, a_out, grad_out, grad, **kw):
        if self._fresh and np.any(grad):
            raise Mistake("overlap_worker_loop: the gradient buffer still holds the last step's gradient when "
                          "the backward starts; layer_backward ADDS into it: zero it first (grad.fill(0))")
        self._fresh = False
        self._record("backward", i)
        return self._model.layer_backward(params, i, a_in, a_out, grad_out, grad, **kw)


class _Buckets(_Comm):
    """The bucketed communicator: a layer may be handed over only after its backward (in
    this step), and finish() only once every layer has been."""

    def __init__(self, inner, record: Recorder, n_layers: int):
        super().__init__(inner, record)
        self.n_layers = n_layers

    def _this_step(self, kind: str) -> set:
        """The layers of this step's events ``kind`` (since the last forward)."""
        layers = set()
        for event in reversed(self._record.events):
            if event[0] == "forward":
                break
            if event[0] == kind:
                layers.add(event[1])
        return layers

    def layer_done(self, i):
        if i not in self._this_step("backward"):
            raise Mistake(f"overlap_worker_loop handed layer {i} over (comm.layer_done({i})) before its backward "
                          "wrote its gradient: its bucket would be summed before it is complete; call "
                          "comm.layer_done(i) right AFTER layer i's backward")
        self._record("layer_done", i)
        return self._inner.layer_done(i)

    def finish(self):
        missing = sorted(set(range(self.n_layers)) - self._this_step("layer_done"))
        if missing:
            raise Mistake(f"overlap_worker_loop called comm.finish() but never handed over layer(s) {missing} "
                          "(comm.layer_done(i) after layer i's backward): their buckets would never be "
                          "all-reduced and finish() would wait for ever")
        self._record("finish")
        self.last = self._inner.finish()
        return self.last


def _bucket_worker(wctx, job, specs, barrier) -> tuple:
    import contextlib

    from ..parallel.allreduce import BucketAllReduce
    from ..parallel.train.data import bucket_bounds

    with contextlib.ExitStack() as stack:
        x, y, p0, grads, reduced = _attach_all(stack, specs)
        record = Recorder()
        inner = stack.enter_context(BucketAllReduce(wctx, grads, reduced, barrier, bucket_bounds(job.model, 2)))
        comm = _Buckets(inner, record, job.model.n_layers)
        model = _Model(job.model, record)
        loop = learner("course_lib.parallel.data", "overlap_worker_loop")
        out = loop(wctx, _Job(job, record, comm, model), x, y, p0, comm, progress(wctx, job.batches()))
        return _report(out, record, "overlap_worker_loop")


def _zero1_worker(wctx, job, specs, barrier) -> tuple:
    import contextlib

    with contextlib.ExitStack() as stack:
        x, y, p0, grads, reduced = _attach_all(stack, specs)
        record = Recorder()
        shm = learner("course_lib.parallel.allreduce", "ShmAllReduce")
        comm = _Comm(shm(wctx, grads, reduced, barrier), record)
        loop = learner("course_lib.parallel.zero", "zero1_worker_loop")
        out = loop(wctx, _Job(job, record, comm), x, y, p0, comm, progress(wctx, job.batches()))
        result = _report(out, record, "zero1_worker_loop")
        del comm
        return result


class _Layers:
    """ZeRO-3's collectives, layer by layer (:class:`~course_lib.parallel.zero.LayerChunks`),
    seen through a :class:`Recorder`."""

    def __init__(self, inner, record: Recorder):
        self._inner, self._record, self.last = inner, record, None
        self.buffer = inner.comm.grads[inner.comm.wctx.rank]  # this worker's send row

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def start(self):
        self._record("start")
        return self._inner.start()

    def all_gather(self, mine, i=None):
        self._record("all_gather", i)
        return self._inner.all_gather(mine, i)

    def reduce_scatter(self, i, out):
        self._record("reduce_scatter", i)
        self.last = out
        return self._inner.reduce_scatter(i, out)


class _LayerModel(_Model):
    """The model as zero3_worker_loop sees it: every layer's forward and backward written down."""

    def layer_forward(self, params, i, a):
        self._record("layer_forward", i)
        return self._model.layer_forward(params, i, a)

    def layer_backward(self, params, i, a_in, a_out, grad_out, grad, **kw):
        self._record("backward", i)
        return self._model.layer_backward(params, i, a_in, a_out, grad_out, grad, **kw)


def _zero3_worker(wctx, job, specs, barrier) -> tuple:
    import contextlib

    from ..parallel.allreduce import ShmAllReduce
    from ..parallel.zero import LayerChunks

    with contextlib.ExitStack() as stack:
        x, y, p0, grads, reduced = _attach_all(stack, specs)
        record = Recorder()
        layers = _Layers(LayerChunks(ShmAllReduce(wctx, grads, reduced, barrier), job.model), record)
        loop = learner("course_lib.parallel.zero", "zero3_worker_loop")
        out = loop(wctx, _Job(job, record, layers, _LayerModel(job.model, record)), x, y, p0, layers,
                   progress(wctx, job.batches()))
        result = _report(out, record, "zero3_worker_loop")
        del layers
        return result


def _run(kind: str):
    """Run the loop ``kind`` ("pipe", "buckets", "zero1", "zero3") on WORKERS processes; its job, data
    and the workers' reports."""
    model, x, y, p0, job = _setup(backend="shm", **({"buckets": 2} if kind == "buckets" else {}))
    with launch() as launcher:
        specs = [launcher.shared(a.shape, a.dtype, a).spec for a in (x, y.astype(np.int64), p0)]
        barrier = launcher.barrier(WORKERS)
        if kind == "pipe":  # rank 0 holds a pipe to each other rank
            pipes = [launcher.pipe(duplex=True) for _ in range(WORKERS - 1)]
            ends = [[a for a, _ in pipes]] + [[b] for _, b in pipes]
            results = run_workers(launcher, _pipe_worker, WORKERS, args=(job, specs),
                                  rank_args=[(e, barrier) for e in ends])
        else:
            grads = launcher.shared((WORKERS, p0.size), p0.dtype)
            reduced = launcher.shared(p0.size, p0.dtype)
            target = {"buckets": _bucket_worker, "zero1": _zero1_worker, "zero3": _zero3_worker}[kind]
            results = run_workers(launcher, target, WORKERS, args=(job, specs + [grads.spec, reduced.spec], barrier))
    return model, x, y, p0, job, results


# ------------------------------------------------------------------ what the results say
def _references(model, x, y, steps: int) -> list[np.ndarray]:
    """The parameters after every step (train_simulated: the same arithmetic in one process)."""
    from ..parallel.train.reference import train_simulated

    kw = dict(RUN, steps=1)
    return [train_simulated(model, x, y, workers=WORKERS, **{**kw, "steps": k}).params for k in range(1, steps + 1)]


def _shard_loss_mistake(name: str, model, x, y, params, job, r: int, got: float) -> str:
    """Why worker ``r``'s loss of the first step is ``got`` ("" if it is right)."""
    idx = next(iter(job.batches()))
    lo, hi = shard_bounds(idx.size, WORKERS)[r]

    def loss(rows) -> float:
        return float(model.loss_and_grad(params, x[rows], y[rows], reduction="sum")[0])

    expected = loss(idx[lo:hi])
    if np.isclose(got, expected, rtol=1e-6):
        return ""
    if np.isclose(got, expected / (hi - lo), rtol=1e-5):
        return (f"{name}: worker {r}'s gradient is a MEAN over its shard (reduction=\"mean\"): the workers' "
                "gradients must be sums (reduction=\"sum\"), added by the all-reduce and divided once, by the "
                "batch size, in the update")
    if np.isclose(got, loss(np.arange(lo, hi)), rtol=1e-6):
        return (f"{name}: worker {r} computed on rows {lo}:{hi} of the data set, x[lo:hi]; its shard is rows "
                f"idx[lo:hi] of this step's batch: x[idx[lo:hi]], y[idx[lo:hi]]")
    a, b = shard_bounds(idx.size, WORKERS)[0]
    if r > 0 and np.isclose(got, loss(idx[a:b]), rtol=1e-6):
        return (f"{name}: worker {r} computed on shard 0 of the batch: take its own shard, "
                "shard_bounds(idx.size, job.workers)[wctx.rank]")
    if np.isclose(got, loss(idx), rtol=1e-6):
        return f"{name}: worker {r} computed on the whole batch; it computes on its shard only (1/N of the work)"
    return f"{name}: worker {r}'s loss of the first step is {got!r}, expected {expected!r} (the sum over its shard)"


def _check_trace(name: str, events: list, r: int, steps: int, collective: str, *, waits: bool = True,
                 chunk: int | None = None, per_step: int = 1) -> None:
    """The calls worker ``r``'s loop made on the communicator and the job, in order:
    ``collective`` (the call that sums the gradients) once per step, after a wait
    (``waits``), and one update per step with the summed gradient over the whole batch."""
    kinds = [e[0] for e in events]
    if "start" not in kinds or any(k in kinds[: kinds.index("start")] for k in ("wait", collective, "update")):
        raise Mistake(f"{name}: worker {r} never called comm.start() before its first step: every worker "
                      "waits there until all are ready (the clocks start together)")
    waited = False
    for kind in kinds:
        if kind == "wait":
            waited = True
        elif kind == collective:
            if waits and not waited:
                raise Mistake(f"{name}: worker {r} called comm.{collective}() without comm.wait() first: the "
                              "other workers may still be writing their gradients (in shared memory it would "
                              "read them half-written)")
            waited = False
    if kinds.count(collective) != steps * per_step:
        raise Mistake(f"{name}: worker {r} called {collective}() {kinds.count(collective)} times in "
                      f"{steps} steps: " + ("once per step" if per_step == 1 else "once per layer and step"))
    updates = [e for e in events if e[0] == "update"]
    if len(updates) != steps:
        raise Mistake(f"{name}: worker {r} called job.update {len(updates)} times in {steps} steps: once per "
                      f"step, after comm.{collective}()")
    for _, size, samples, origin, _ in updates:
        if origin == "own":
            raise Mistake(f"{name}: worker {r} updated with its own gradient (the gradient buffer), not the sum "
                          f"over all workers that comm.{collective}() returns: the replicas would drift apart")
        if samples != RUN["batch_size"]:
            raise Mistake(f"{name}: worker {r} divided the summed gradient by {samples} samples (job.update(..., "
                          f"{samples}, ...)); the sum covers the whole batch: divide by idx.size "
                          f"({RUN['batch_size']})")
        if chunk is not None and size != chunk:
            raise Mistake(f"{name}: worker {r} updated {size} numbers; ZeRO-1 updates its chunk only "
                          f"(mine = params[comm.lo:comm.hi], {chunk} numbers), with optimizer state for that "
                          "chunk only")


def _check_values(name: str, model, x, y, p0, job, results, refs) -> None:
    """Each worker's first loss, its parameters after every update (where it updates them
    whole) and at the end: bit for bit the reference's."""
    for r, (_, losses, _) in enumerate(results):
        if len(losses) != job.steps:
            raise Mistake(f"{name}: worker {r} returned {len(losses)} losses for {job.steps} steps: one per step")
        mistake = _shard_loss_mistake(name, model, x, y, p0, job, r, losses[0])
        if mistake:
            raise Mistake(mistake)
    for r, (params, _, events) in enumerate(results):
        after = [e[4] for e in events if e[0] == "update" and e[1] == p0.size]
        seen = list(zip(range(1, len(after) + 1), after, refs)) or [(len(refs), params, refs[-1])]
        for step, got, ref in seen:
            if np.array_equal(got, ref):
                continue
            if np.allclose(got, ref, rtol=1e-5, atol=1e-6):
                raise Mistake(f"{name}: worker {r}'s parameters after step {step} equal the reference's up to "
                              "rounding, not bit for bit: update with job.update(params, total, idx.size, opt, "
                              "update), the same arithmetic as the reference")
            raise Mistake(f"{name}: worker {r}'s parameters after step {step} differ from the reference "
                          f"(train_simulated, the same arithmetic in one process): {arrays_differ(got, ref)}")
    if not all(np.array_equal(results[0][0], p) for p, _, _ in results[1:]):
        raise Mistake(f"{name}: the workers' parameters differ at the end: every replica must apply the same update")
    wrong = arrays_differ(results[0][0], refs[-1])
    if wrong:
        raise Mistake(f"{name}: the final parameters are not the reference's (train_simulated): {wrong}")


def check_worker_loop() -> None:
    model, x, y, p0, job, results = _run("pipe")
    for r, (_, _, events) in enumerate(results):
        _check_trace("worker_loop", events, r, job.steps, "allreduce")
    _check_values("worker_loop", model, x, y, p0, job, results, _references(model, x, y, job.steps))


def check_overlap_worker_loop() -> None:
    model, x, y, p0, job, results = _run("buckets")
    for r, (_, _, events) in enumerate(results):
        _check_trace("overlap_worker_loop", events, r, job.steps, "finish", waits=False)
    _check_values("overlap_worker_loop", model, x, y, p0, job, results, _references(model, x, y, job.steps))


def check_zero1_worker_loop() -> None:
    from ..parallel.partition import chunk_bounds

    model, x, y, p0, job, results = _run("zero1")
    bounds = chunk_bounds(p0.size, WORKERS)
    refs = _references(model, x, y, job.steps)
    for r, (params, _, events) in enumerate(results):
        lo, hi = bounds[r]
        if [e[0] for e in events].count("all_gather") == 0:
            raise Mistake("zero1_worker_loop never calls comm.all_gather(mine): each worker updated only its "
                          "own chunk, so the others' chunks of its parameters never change; after the update "
                          "share the chunks: params[...] = comm.all_gather(mine)")
        _check_trace("zero1_worker_loop", events, r, job.steps, "reduce_scatter", chunk=hi - lo)
        outside = np.ones(p0.size, bool)
        outside[lo:hi] = False
        if np.array_equal(params[outside], p0[outside]) and not np.array_equal(params[lo:hi], p0[lo:hi]):
            raise Mistake(f"zero1_worker_loop: worker {r}'s parameters outside its chunk [{lo}, {hi}) never change: "
                          "the all-gather's result must become the parameters, params[...] = comm.all_gather(mine)")
    _check_values("zero1_worker_loop", model, x, y, p0, job, results, refs)


def _zero3_trace(events: list, r: int, n_layers: int) -> None:
    """Per step: each layer all-gathered before its forward and again before its backward,
    its gradient reduce-scattered after its backward."""
    name = "zero3_worker_loop"
    step: list = []
    for event in events:
        if event[0] != "update":
            step.append(event)
            continue
        for i in range(n_layers):
            at = {kind: [k for k, e in enumerate(step) if e[0] == kind and e[1] == i]
                  for kind in ("all_gather", "layer_forward", "backward", "reduce_scatter")}
            if at["layer_forward"] and not [k for k in at["all_gather"] if k < at["layer_forward"][0]]:
                raise Mistake(f"{name}: worker {r} ran layer {i}'s forward without all-gathering its parameters "
                              f"first: w = layers.all_gather(mine, {i}) (this worker holds only its chunk)")
            if len(at["all_gather"]) == 1 and at["backward"]:
                raise Mistake(f"{name}: worker {r} all-gathers layer {i}'s parameters once per step: ZeRO-3 frees "
                              "a layer's parameters after its forward, so they are all-gathered again before its "
                              "backward (w = layers.all_gather(mine, i) in the backward loop too)")
            if at["reduce_scatter"] and at["backward"] and at["reduce_scatter"][0] < at["backward"][0]:
                raise Mistake(f"{name}: worker {r} reduce-scattered layer {i}'s gradient before its backward wrote "
                              "it: layers.reduce_scatter(i, out=grad) right AFTER layer i's backward")
            if len(at["reduce_scatter"]) != 1:
                raise Mistake(f"{name}: worker {r} reduce-scattered layer {i}'s gradient {len(at['reduce_scatter'])} "
                              "times in a step: once, as soon as its backward is done")
        step = []


def check_zero3_worker_loop() -> None:
    from ..parallel.partition import chunk_bounds

    model, x, y, p0, job, results = _run("zero3")
    bounds = chunk_bounds(p0.size, WORKERS)
    for r, (_, _, events) in enumerate(results):
        _check_trace("zero3_worker_loop", events, r, job.steps, "reduce_scatter", waits=False,
                     chunk=bounds[r][1] - bounds[r][0], per_step=model.n_layers)
        _zero3_trace(events, r, model.n_layers)
    _check_values("zero3_worker_loop", model, x, y, p0, job, results, _references(model, x, y, job.steps))


CHECKS = {
    "worker_loop": check_worker_loop,
    "overlap_worker_loop": check_overlap_worker_loop,
    "zero1_worker_loop": check_zero1_worker_loop,
    "zero3_worker_loop": check_zero3_worker_loop,
}

HINTS = {
    "worker_loop": (
        "Every worker holds the same parameters and, each step, computes the gradient of ITS shard of the "
        "batch: `shard_bounds(idx.size, job.workers)[wctx.rank]` gives its rows of `idx`.",
        "The shard's gradient is a SUM (`reduction=\"sum\"`), written straight into the communicator's buffer "
        "(`out=grad`); then `comm.wait()` (everyone has written) and `comm.allreduce()` (the sum of all).",
        "Every worker then applies the same update, `job.update(params, total, idx.size, opt, update)`: "
        "divided by the whole batch, so the replicas stay identical without sending parameters.",
    ),
    "overlap_worker_loop": (
        "The same step as worker_loop, but the backward runs one layer at a time, last layer first, so that "
        "the all-reduce of the last layers can start while the first ones are still being computed.",
        "Forward with `model.forward`, the loss gradient with `softmax_cross_entropy(..., reduction=\"sum\")`, "
        "then `model.layer_backward(...)` for each layer, adding into the (zeroed) gradient buffer.",
        "After each layer's backward, `comm.layer_done(i)`; after the last, `total = comm.finish()` waits "
        "for every bucket; then the update as in worker_loop.",
    ),
    "zero3_worker_loop": (
        "ZeRO-3 keeps only chunk r of the parameters, `mine = p0[layers.lo : layers.hi].copy()`, and of "
        "their gradient and optimizer state. A layer's whole parameters exist only while it computes.",
        "Forward layer by layer: `w = layers.all_gather(mine, i)` (everyone's part of layer i), then "
        "`job.model.layer_forward(w, i, a)`. The backward, last layer first: all-gather layer i AGAIN (a "
        "device freed it after the forward), `layer_backward` into `layers.send_buffer(i)`, then "
        "`layers.reduce_scatter(i, out=grad)`.",
        "After the backward, `job.update(mine, grad, idx.size, opt, update)`; after the last step return "
        "`layers.all_gather(mine).copy()` (the whole parameters, for the result), `grad`, `opt`, the losses "
        "and `mine`.",
    ),
    "zero1_worker_loop": (
        "ZeRO-1 keeps the optimizer state of one chunk only: worker r's chunk `[comm.lo, comm.hi)` of the "
        "parameters, `mine = params[comm.lo : comm.hi]` (a view).",
        "Each step: the shard's gradient sum as in worker_loop, `comm.wait()`, then `comm.reduce_scatter()` "
        "gives chunk r of the summed gradient, exactly the chunk whose state this worker keeps.",
        "Update `mine` with it (`job.update(mine, total, idx.size, opt, update)`, the state sized for the "
        "chunk), then `params[...] = comm.all_gather(mine)`: everyone's new chunks for everyone.",
    ),
}
