"""The running example: a small fully connected network (MLP) in plain numpy.

Every chapter parallelises this same computation. The parameters live in ONE flat
float32 buffer, with named views per layer (``W0``, ``b0``, ``W1``, ...), so that a
data-parallel trainer can all-reduce one buffer and a pipeline can hand each stage
a contiguous slice.

Layer ``i`` computes ``z = a @ W_i + b_i`` with ``W_i`` of shape (fan_in, fan_out);
hidden layers apply ReLU, the last layer feeds a softmax cross-entropy loss.

Every model of the course (this MLP, :class:`course_lib.cnn.CNN`,
:class:`course_lib.transformer.Transformer`) speaks one protocol, :class:`Model`: the trainers
check their data and parameters with it once, at their entry point. :class:`TrainResult` is
what every trainer of the course returns (one process or many); the serial loop is
:func:`course_lib.parallel.train.reference.train_serial`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ._validate import check_float_dtype, check_int, check_positive, check_type

__all__ = [
    "MLP",
    "Model",
    "Slot",
    "TrainResult",
    "check_labels",
    "check_model",
    "layer_outputs",
    "layout_slots",
    "softmax_cross_entropy",
    "sgd_step",
]


def softmax_cross_entropy(logits: np.ndarray, y: np.ndarray, reduction: str = "mean"):
    """Softmax cross-entropy loss and its gradient with respect to the logits.

    Parameters
    ----------
    logits : numpy.ndarray
        (batch, classes) scores.
    y : numpy.ndarray
        (batch,) integer labels in [0, classes).
    reduction : {"mean", "sum"}
        Average or sum over the batch (a data-parallel worker uses "sum" on its shard,
        so that the shard gradients add up to the full-batch gradient).

    Returns
    -------
    loss : float
    dlogits : numpy.ndarray
        Gradient of the loss with respect to ``logits`` (same dtype).

    Examples
    --------
    >>> loss, d = softmax_cross_entropy(np.zeros((2, 4), np.float32), np.array([0, 3]))
    >>> round(loss, 6) == round(math.log(4), 6), d.shape
    (True, (2, 4))
    """
    check_type(logits, "logits", np.ndarray, "a numpy array of shape (batch, classes)")
    if logits.ndim != 2 or not np.issubdtype(logits.dtype, np.floating):
        raise ValueError(
            f"logits must be a float array of shape (batch, classes), got {logits.dtype} {logits.shape}"
        )
    y = check_labels(y, logits.shape[0], logits.shape[1])
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    sum_exp = exp.sum(axis=1, keepdims=True)
    rows = np.arange(logits.shape[0])
    log_prob = shifted[rows, y] - np.log(sum_exp[:, 0])
    probs = exp / sum_exp
    probs[rows, y] -= 1.0
    scale = 1.0 / logits.shape[0] if reduction == "mean" else 1.0
    loss = -float(log_prob.sum(dtype=np.float64)) * scale
    return loss, (probs * np.asarray(scale, dtype=logits.dtype)).astype(logits.dtype, copy=False)


def check_labels(y, batch: int, classes: int) -> np.ndarray:
    """``y`` as an integer array of shape (batch,) with labels in [0, classes)."""
    y = np.asarray(y) if not isinstance(y, np.ndarray) else y
    if y.shape != (batch,) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must be an integer array of shape ({batch},), got {y.dtype} {y.shape}")
    if batch and (y.min() < 0 or y.max() >= classes):
        raise ValueError(f"y must hold labels in [0, {classes - 1}]")
    return y


@dataclass(frozen=True)
class Slot:
    """One named view of a model's flat parameter buffer: ``name``, ``shape``, ``offset``."""

    name: str
    shape: tuple[int, ...]
    offset: int

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def layout_slots(shapes) -> tuple[Slot, ...]:
    """The :class:`Slot` of each ``(name, shape)``, packed one after the other in a flat
    buffer (the layout of every model's parameters: MLP, CNN, transformer).

    Examples
    --------
    >>> [(s.name, s.offset, s.size) for s in layout_slots([("W0", (2, 3)), ("b0", (3,))])]
    [('W0', 0, 6), ('b0', 6, 3)]
    """
    slots, offset = [], 0
    for name, shape in shapes:
        slots.append(Slot(name, tuple(shape), offset))
        offset += math.prod(shape)
    return tuple(slots)


@dataclass(frozen=True)
class MLP:
    """Layout and maths of a fully connected ReLU network with a softmax output.

    The object holds no parameters: it describes where each layer's weights sit in a
    flat buffer and computes with a buffer it is given (pure functions, no state).

    Parameters
    ----------
    sizes : sequence of int
        Layer widths from input to output, e.g. ``(64, 64, 10)``: 64 inputs, one hidden
        layer of 64 units, 10 classes.
    dtype : numpy dtype
        Parameter and activation dtype, float32 by default.

    Examples
    --------
    >>> model = MLP((64, 32, 10))
    >>> params = model.init_params(seed=0)
    >>> params.dtype, params.size == model.n_params == 64 * 32 + 32 + 32 * 10 + 10
    (dtype('float32'), True)
    >>> sorted(model.views(params))
    ['W0', 'W1', 'b0', 'b1']
    """

    sizes: tuple[int, ...]
    dtype: np.dtype = field(default=np.dtype(np.float32))

    def __post_init__(self):
        if isinstance(self.sizes, (str, bytes)) or not isinstance(self.sizes, Sequence):
            raise TypeError(f"sizes must be a sequence of layer widths, got {self.sizes!r}")
        sizes = tuple(check_int(s, f"sizes[{i}]", 1) for i, s in enumerate(self.sizes))
        if len(sizes) < 2:
            raise ValueError(f"sizes needs at least an input and an output width, got {sizes}")
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "dtype", check_float_dtype(self.dtype))

    # ----------------------------------------------------------------- layout
    @property
    def n_layers(self) -> int:
        """Number of weight layers (len(sizes) - 1)."""
        return len(self.sizes) - 1

    @functools.cached_property
    def slots(self) -> tuple[Slot, ...]:
        """Name, shape and offset of every parameter tensor in the flat buffer (computed once)."""
        return layout_slots((name, shape) for i, (fan_in, fan_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:]))
                            for name, shape in ((f"W{i}", (fan_in, fan_out)), (f"b{i}", (fan_out,))))

    @property
    def n_params(self) -> int:
        """Total number of parameters."""
        return sum(s.size for s in self.slots)

    def layer_range(self, start: int, stop: int) -> slice:
        """The slice of the flat buffer that holds layers ``start`` .. ``stop - 1``.

        Layers are stored in order, so any run of consecutive layers (a pipeline
        stage) owns one contiguous slice.
        """
        start = check_int(start, "start", 0, self.n_layers - 1)
        stop = check_int(stop, "stop", start + 1, self.n_layers)
        slots = self.slots
        first, last = slots[2 * start], slots[2 * stop - 1]
        return slice(first.offset, last.offset + last.size)

    def views(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """Named views (no copies) into a flat parameter or gradient buffer."""
        self.check_flat(flat, "flat")
        return {s.name: flat[s.offset : s.offset + s.size].reshape(s.shape) for s in self.slots}

    def layer(self, flat: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Views ``(W_i, b_i)`` of layer ``i`` in ``flat``."""
        i = check_int(i, "i", 0, self.n_layers - 1)
        w, b = self.slots[2 * i], self.slots[2 * i + 1]
        return (
            flat[w.offset : w.offset + w.size].reshape(w.shape),
            flat[b.offset : b.offset + b.size],
        )

    def init_params(self, seed: int = 0) -> np.ndarray:
        """He-initialised weights (normal, std sqrt(2 / fan_in)) and zero biases.

        Deterministic: the same seed gives the same buffer on every machine.
        """
        rng = np.random.default_rng(check_int(seed, "seed", 0))
        flat = np.zeros(self.n_params, dtype=self.dtype)
        for i in range(self.n_layers):
            w, _ = self.layer(flat, i)
            w[...] = rng.standard_normal(w.shape) * math.sqrt(2.0 / w.shape[0])
        return flat

    # ---------------------------------------------------------------- compute
    def layer_forward(self, params: np.ndarray, i: int, a: np.ndarray) -> np.ndarray:
        """Output of layer ``i`` for input activations ``a`` (ReLU except the last layer)."""
        w, b = self.layer(params, i)
        z = a @ w
        z += b
        if i < self.n_layers - 1:
            np.maximum(z, 0, out=z)
        return z

    def layer_backward(
        self,
        params: np.ndarray,
        i: int,
        a_in: np.ndarray,
        a_out: np.ndarray,
        grad_out: np.ndarray,
        grad: np.ndarray,
        *,
        need_input_grad: bool = True,
    ) -> np.ndarray | None:
        """Back-propagate through layer ``i``.

        Parameters
        ----------
        a_in, a_out : numpy.ndarray
            The layer's input and output from :meth:`layer_forward`.
        grad_out : numpy.ndarray
            Gradient of the loss with respect to ``a_out`` (for the last layer: the
            gradient with respect to the logits).
        grad : numpy.ndarray
            Flat gradient buffer; this layer's slots are ADDED to (accumulation over
            micro-batches works by calling this repeatedly).
        need_input_grad : bool
            Whether to return the gradient with respect to ``a_in`` (not needed for
            layer 0, which saves one GEMM).
        """
        w, _ = self.layer(params, i)
        gw, gb = self.layer(grad, i)
        dz = grad_out * (a_out > 0) if i < self.n_layers - 1 else grad_out
        gw += a_in.T @ dz
        gb += dz.sum(axis=0)
        return dz @ w.T if need_input_grad else None

    def forward(self, params: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Logits for a batch and the activations needed by :meth:`backward`.

        Returns
        -------
        logits : numpy.ndarray
            (batch, classes).
        acts : list of numpy.ndarray
            ``acts[0] = x`` and ``acts[i + 1]`` = output of layer ``i``.
        """
        self.check_flat(params, "params")
        x = self.check_x(x)
        acts = [x]
        for i in range(self.n_layers):
            acts.append(self.layer_forward(params, i, acts[-1]))
        return acts[-1], acts

    def backward(
        self,
        params: np.ndarray,
        acts: list[np.ndarray],
        y: np.ndarray,
        *,
        reduction: str = "mean",
        out: np.ndarray | None = None,
    ) -> tuple[float, np.ndarray]:
        """Loss and flat gradient from the activations of :meth:`forward`.

        ``out``, if given, is a flat buffer that receives the gradient (it is zeroed
        first); otherwise a new buffer is returned.
        """
        y = self.check_y(y, acts[0].shape[0])
        grad = np.zeros_like(params) if out is None else out
        if out is not None:
            self.check_flat(out, "out")
            grad.fill(0)
        loss, g = softmax_cross_entropy(acts[-1], y, reduction)
        for i in reversed(range(self.n_layers)):
            g = self.layer_backward(
                params, i, acts[i], acts[i + 1], g, grad, need_input_grad=i > 0
            )
        return loss, grad

    def loss_and_grad(
        self,
        params: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
        *,
        reduction: str = "mean",
        out: np.ndarray | None = None,
    ) -> tuple[float, np.ndarray]:
        """Forward and backward pass on one batch: ``(loss, flat gradient)``.

        Examples
        --------
        >>> model = MLP((4, 3, 2))
        >>> p = model.init_params(1)
        >>> x = np.ones((5, 4), np.float32); y = np.array([0, 1, 0, 1, 1])
        >>> loss, g = model.loss_and_grad(p, x, y)
        >>> g.shape == p.shape and loss > 0
        True
        """
        _, acts = self.forward(params, x)
        return self.backward(params, acts, y, reduction=reduction, out=out)

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Predicted class per row of ``x``."""
        logits, _ = self.forward(params, x)
        return logits.argmax(axis=1)

    def accuracy(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        """Fraction of rows of ``x`` classified correctly."""
        y = self.check_y(y, np.shape(x)[0])
        return float(np.mean(self.predict(params, x) == y))

    # ------------------------------------------------------------------ costs
    def flops_per_sample(self) -> dict[str, int]:
        """Floating-point operations of one sample's pass, counting GEMMs only.

        A GEMM of an (1 x k) row by a (k x n) matrix costs k*n multiply-accumulates
        = 2*k*n FLOPs (1 MAC = 2 FLOPs). Bias adds, ReLU and the softmax are O(width)
        and left out (they are below 2% for the course's sizes). Forward: one GEMM per
        layer. Backward: the weight gradient for every layer plus the input gradient
        for every layer except the first (this implementation skips that one), so
        backward is just under twice the forward cost.

        Examples
        --------
        >>> MLP((64, 32, 10)).flops_per_sample()
        {'forward': 4736, 'backward': 5376, 'total': 10112}
        """
        macs = [a * b for a, b in zip(self.sizes[:-1], self.sizes[1:])]
        forward = 2 * sum(macs)
        backward = 2 * sum(macs) + 2 * sum(macs[1:])
        return {"forward": forward, "backward": backward, "total": forward + backward}

    # --------------------------------------------------------------- checking
    def check_flat(self, flat, name: str) -> None:
        """Raise TypeError/ValueError (naming ``name``) unless ``flat`` is a flat buffer of
        :attr:`n_params` values, as a parameter or gradient buffer of this model."""
        check_type(flat, name, np.ndarray, "a numpy array")
        if flat.shape != (self.n_params,):
            raise ValueError(f"{name} must have shape ({self.n_params},), got {flat.shape}")

    def check_x(self, x) -> np.ndarray:
        """``x`` as a (batch, sizes[0]) array of this model's dtype, else TypeError/ValueError."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.sizes[0]:
            raise ValueError(f"x must have shape (batch, {self.sizes[0]}), got {x.shape}")
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"x must be a float array, got dtype {x.dtype}")
        return x.astype(self.dtype, copy=False)

    def check_y(self, y, batch: int) -> np.ndarray:
        """``y`` as ``batch`` integer labels in [0, classes), else TypeError/ValueError."""
        return check_labels(y, batch, self.sizes[-1])


@runtime_checkable
class Model(Protocol):
    """What every model of the course provides (:class:`MLP`, :class:`course_lib.cnn.CNN`,
    :class:`course_lib.transformer.Transformer`): a layout over one flat parameter buffer,
    its maths, and the checks a trainer runs once, at its entry point, on what it is given."""

    dtype: np.dtype
    n_params: int

    def init_params(self, seed: int = 0) -> np.ndarray: ...

    def loss_and_grad(self, params, x, y, reduction: str = "mean", out=None): ...

    def check_x(self, x) -> np.ndarray: ...

    def check_y(self, y, batch: int) -> np.ndarray: ...

    def check_flat(self, flat, name: str) -> None: ...


def check_model(model, allowed: tuple[type, ...] | None = None) -> Model:
    """``model`` if it is a course model (one of ``allowed``, if given), else TypeError.

    Examples
    --------
    >>> check_model(MLP((4, 2))).sizes
    (4, 2)
    >>> check_model("mlp")
    Traceback (most recent call last):
    ...
    TypeError: model must be a course model (course_lib.models.MLP, course_lib.cnn.CNN or course_lib.transformer.Transformer), got str
    """
    if not isinstance(model, Model):
        raise TypeError("model must be a course model (course_lib.models.MLP, course_lib.cnn.CNN or "
                        f"course_lib.transformer.Transformer), got {type(model).__name__}")
    if allowed is not None and not isinstance(model, allowed):
        names = " or ".join(f"{t.__module__}.{t.__qualname__}" for t in allowed)
        raise TypeError(f"model must be a {names} here, got {type(model).__name__}")
    return model


def layer_outputs(model: MLP, params: np.ndarray, lo: int, hi: int, a: np.ndarray) -> list[np.ndarray]:
    """``[a, out(lo), ..., out(hi - 1)]``: the input and the output of every layer in ``[lo, hi)``
    (what a pipeline stage owning those layers keeps for its backward).

    Examples
    --------
    >>> m = MLP((4, 3, 2)); p = m.init_params(0); a = np.ones((5, 4), np.float32)
    >>> [o.shape for o in layer_outputs(m, p, 0, 2, a)]
    [(5, 4), (5, 3), (5, 2)]
    >>> bool(np.array_equal(layer_outputs(m, p, 0, 2, a)[-1], m.forward(p, a)[0]))
    True
    """
    acts = [a]
    for i in range(lo, hi):
        acts.append(model.layer_forward(params, i, acts[-1]))
    return acts


def sgd_step(params: np.ndarray, grad: np.ndarray, lr: float) -> None:
    """Plain SGD, in place: ``params -= lr * grad``.

    Examples
    --------
    >>> p = np.ones(3, np.float32)
    >>> sgd_step(p, np.full(3, 2.0, np.float32), 0.25)
    >>> p
    array([0.5, 0.5, 0.5], dtype=float32)
    """
    check_type(params, "params", np.ndarray, "a numpy array")
    if not np.issubdtype(params.dtype, np.floating):
        raise TypeError(f"params must be a float array, got dtype {params.dtype}")
    check_type(grad, "grad", np.ndarray, "a numpy array")
    if grad.shape != params.shape:
        raise ValueError(f"grad must have the shape of params {params.shape}, got {grad.shape}")
    lr = check_positive(lr, "lr")
    params -= np.asarray(lr, dtype=params.dtype) * grad


@dataclass
class TrainResult:
    """What every trainer returns: the final parameters, the loss of every step, and where
    the time, the bytes and the memory went.

    One type for the one-process references (:func:`course_lib.parallel.train.reference.train_serial`,
    :func:`~course_lib.parallel.train.reference.train_simulated`,
    :func:`~course_lib.parallel.train.reference.train_microbatched`) and the process trainers (data parallel
    and ZeRO, tensor, pipeline and hybrid). Times are seconds. Arrays of shape
    ``(steps, workers)`` hold one value per step and process (for a pipeline, row
    ``replica * N_p + q`` is stage ``q`` of replica ``replica``, like its timeline's rows);
    one-process runs have one column.

    Examples
    --------
    >>> run = TrainResult.one_process(np.zeros(3, np.float32), [2.0, 1.5, 1.0], [0.3, 0.1, 0.2],
    ...                               "serial", batch_size=8)
    >>> run.steps, round(run.time_per_step(), 6), run.breakdown()["communication"]  # after step 0
    (3, 0.15, 0.0)
    >>> round(run.samples_per_second()), run.communication_share()
    (53, 0.0)
    """

    params: np.ndarray
    """Final flat parameters (a copy owned by the caller; of replica 0 in a hybrid run)."""
    loss: np.ndarray
    """(steps,) mean loss over each step's batch, before its update: the loss history."""
    step_time: np.ndarray
    """(steps,) wall-clock time of each step: the slowest worker's, or a pipeline's first
    forward to its last update."""
    compute: np.ndarray
    """(steps, workers) forward, backward and update."""
    communication: np.ndarray
    """(steps, workers) the exchange itself: all-reduces (for the gloo backend the waiting
    too, which gloo does not separate)."""
    waiting: np.ndarray
    """(steps, workers) the rest of the step: waiting for slower workers before an
    exchange; in a pipeline the bubble and the waits for a neighbour's hand-over."""
    backend: str
    """How the run was made: "serial", "simulated", "microbatched" (one process); "shm",
    "pipe", "gloo" (data parallel), "tensor", "pipeline" (pipeline and hybrid)."""
    batch_size: int
    """The global batch."""
    workers: int = 1
    """The columns of the ``(steps, workers)`` arrays: the processes (a pipeline: ``N_d * N_p``),
    the simulated workers of :func:`course_lib.parallel.train.reference.train_simulated`, else 1."""
    memory: list = field(default_factory=list)
    """What each process held, in bytes, by rank, measured. Data parallel, ZeRO, tensor
    parallel and the one-process references: ``parameters``, ``gradients`` and
    ``optimizer_states`` (:func:`course_lib.memory.measured_state_bytes`); pipeline stages:
    ``activations``, the peak of the activations kept for pending backward passes (the
    micro-batched reference: all four). Empty when not measured."""
    bytes_per_step: np.ndarray | None = None
    """(steps,) payload bytes moved in each step (one worker's all-reduce payload for data
    and tensor parallelism, every hand-over between stages for a pipeline); None for
    one-process runs."""
    replicas_in_sync: bool = True
    """Whether every replica ended with bitwise the same parameters."""
    start_method: str | None = None
    blas_threads: int | None = 1
    startup_time: float = 0.0
    """Seconds from the call until every worker was ready to compute."""
    wall_time: float = 0.0
    """Seconds of the whole call (start-up and shut-down included)."""
    extra: dict = field(default_factory=dict)
    """Details: ``worker_blas_threads`` (the BLAS threads each worker ran with, by rank)."""
    timeline: object = None
    """Pipelines: the measured :class:`course_lib.schedule.Timeline` (None otherwise)."""
    boundaries: tuple[int, ...] = ()
    """Pipelines: the layer boundaries of the stages."""
    schedule: str | None = None
    """Pipelines: "gpipe" or "1f1b" ("serial" for :func:`course_lib.parallel.train.reference.train_microbatched`)."""
    micro_batches: int = 1
    replicas: int = 1
    """Data-parallel replicas ``N_d`` of a pipeline (1 for a plain pipeline)."""
    recompute: bool = False
    """Whether the run recomputed activations in the backward."""
    recompute_time: np.ndarray | None = None
    """(steps, workers) seconds spent recomputing forwards inside the backwards (part of
    ``compute``); None for runs without pipeline stages."""
    epoch_loss: list = field(default_factory=list)
    """The serial reference given a test set: mean training loss of each epoch."""
    test_accuracy: list = field(default_factory=list)
    """The serial reference given a test set: test accuracy after each epoch (else empty)."""

    @classmethod
    def one_process(cls, params, loss, seconds, backend: str, **fields) -> TrainResult:
        """The result of a run in this process: ``seconds`` of every step, all compute."""
        seconds = np.asarray(seconds, dtype=float)
        zeros = np.zeros((seconds.size, 1))
        return cls(params=params, loss=np.asarray(loss, dtype=float), step_time=seconds,
                   compute=seconds[:, None].copy(), communication=zeros, waiting=zeros.copy(),
                   backend=backend, **fields)

    @property
    def steps(self) -> int:
        """Number of steps run."""
        return int(self.step_time.shape[0])

    def _after(self, skip: int) -> slice:
        return slice(skip, None) if self.steps > skip else slice(None)

    def time_per_step(self, skip: int = 1) -> float:
        """Median wall-clock time of a step, ignoring the first ``skip`` (warm-up) steps."""
        return float(np.median(self.step_time[self._after(skip)]))

    def samples_per_second(self, skip: int = 1) -> float:
        """Training throughput: global batch / time per step."""
        return self.batch_size / self.time_per_step(skip)

    def breakdown(self, skip: int = 1) -> dict[str, float]:
        """Median per-step seconds of compute, communication and waiting (mean over the
        workers), and the step time, ignoring the first ``skip`` steps."""
        sl = self._after(skip)
        parts = {k: float(np.median(getattr(self, k)[sl].mean(axis=1)))
                 for k in ("compute", "communication", "waiting")}
        return {**parts, "step": float(np.median(self.step_time[sl]))}

    def communication_share(self, skip: int = 1) -> float:
        """Fraction of the step spent communicating or waiting (0 for a one-process run)."""
        b = self.breakdown(skip)
        return (b["communication"] + b["waiting"]) / b["step"] if b["step"] > 0 else 0.0

    @property
    def stored_activation_bytes(self) -> np.ndarray | None:
        """Pipelines: the ``activations`` of :attr:`memory`, one per process (None otherwise)."""
        if not self.memory or any("activations" not in m for m in self.memory):
            return None
        return np.array([m["activations"] for m in self.memory], dtype=np.int64)

    def _timeline(self):
        if self.timeline is None:
            raise ValueError(f"this run ({self.backend!r}) has no timeline: only pipeline runs measure one")
        return self.timeline

    def bubble_per_step(self) -> np.ndarray:
        """Pipelines: the measured idle share of every step."""
        return self._timeline().bubble_per_step()

    def stage_costs(self, skip_first: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Pipelines: median measured forward and backward time of one micro-batch on each
        stage (feed them to :func:`course_lib.schedule.simulate_pipeline`); ``skip_first``
        leaves out the first step (warm-up: page faults, caches). Interleaved runs
        (``v > 1`` chunks per device): one entry per virtual stage ``c N_p + q``, in model
        order, as ``simulate_pipeline(..., virtual_stages=v)`` takes them."""
        tl = self._timeline()
        first = tl.steps[0] if skip_first and len(tl.steps) > 1 else None
        n, v = tl.n_stages, tl.virtual_stages
        fwd, bwd = np.zeros(v * n), np.zeros(v * n)
        for j in range(v * n):
            chunk, s = divmod(j, n)
            for kind, out in (("F", fwd), ("B", bwd)):
                out[j] = float(np.median([op.duration for op in tl.ops if op.stage == s and op.chunk == chunk
                                          and op.kind == kind and op.step != first]))
        return fwd, bwd

    def __repr__(self) -> str:
        final = f"{self.loss[-1]:.4g}" if len(self.loss) else "-"
        return (f"TrainResult(backend={self.backend!r}, workers={self.workers}, steps={self.steps}, "
                f"batch_size={self.batch_size}, time_per_step={self.time_per_step() * 1e3:.3g} ms, "
                f"final_loss={final})")
