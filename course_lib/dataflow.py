"""The data-flow graph (数据流图) of one training step.

:func:`training_graph` builds the graph of one SGD step of a layered model - forward,
loss, backward (input and weight gradients), update - with, for every operator, the
dimensions it can be split along inside (intra-operator parallelism).
:meth:`DataflowGraph.concurrent` lists the operators that could run at the same time
(inter-operator parallelism); :func:`course_lib.plots.conv.dataflow_figure` draws it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._validate import check_sequence

__all__ = ["PARALLEL_DIMS", "DataflowGraph", "Op", "training_graph"]

#: Dimensions along which one operator of each kind can be split (intra-operator).
PARALLEL_DIMS = {
    ("forward", "conv"): "batch B · space Ho×Wo · channels C_out",
    ("forward", "linear"): "batch B · outputs",
    ("forward", "rnn"): "batch B · hidden units (time: sequential)",
    ("loss", ""): "batch B · classes",
    ("grad_input", "conv"): "batch B · space H×W · channels C_in",
    ("grad_input", "linear"): "batch B · inputs",
    ("grad_weight", "conv"): "C_out · C_in·kh·kw (sum over B·Ho·Wo)",
    ("grad_weight", "linear"): "inputs · outputs (sum over B)",
    ("update", ""): "every parameter",
}

@dataclass(frozen=True)
class Op:
    """One operator of the training step."""

    name: str
    kind: str  # forward | loss | grad_input | grad_weight | update
    layer: int
    parallel_dims: str


@dataclass(frozen=True)
class DataflowGraph:
    """Operators and data dependencies (edges ``(producer, consumer)``) of one step."""

    ops: tuple[Op, ...]
    edges: tuple[tuple[str, str], ...]

    def levels(self) -> dict[str, int]:
        """Earliest step of each operator in a schedule with unlimited devices.

        The level is the length of the longest dependency chain leading to the
        operator; operators on the same level do not depend on each other and could
        run concurrently.
        """
        level = {}
        preds: dict[str, list[str]] = {op.name: [] for op in self.ops}
        for a, b in self.edges:
            preds[b].append(a)
        for op in self.ops:  # ops are stored in a topological order
            level[op.name] = 1 + max((level[p] for p in preds[op.name]), default=-1)
        return level

    def concurrent(self) -> list[list[str]]:
        """Groups of two or more operators that could run at the same time."""
        by_level: dict[int, list[str]] = {}
        for name, lv in self.levels().items():
            by_level.setdefault(lv, []).append(name)
        return [names for _, names in sorted(by_level.items()) if len(names) > 1]

    @property
    def critical_path(self) -> int:
        """Number of steps with unlimited devices (levels), vs len(ops) one at a time."""
        return 1 + max(self.levels().values())


def training_graph(layers: Sequence[tuple[str, str]]) -> DataflowGraph:
    """The data-flow graph of one SGD step of a layered network.

    Parameters
    ----------
    layers : sequence of (name, kind)
        The layers from input to output; kind is ``"conv"``, ``"linear"`` or ``"rnn"``.

    Returns
    -------
    DataflowGraph
        Forward ops ``name``, the ``loss``, backward ops ``d_in:name`` (input gradient,
        not for the first layer) and ``d_w:name`` (weight gradient), and ``update:name``.

    Examples
    --------
    >>> g = training_graph([("conv0", "conv"), ("conv1", "conv"), ("fc", "linear")])
    >>> len(g.ops), g.critical_path
    (12, 8)
    >>> g.concurrent()[0]        # right after the loss: both gradients of the last layer
    ['d_in:fc', 'd_w:fc']
    """
    layers = check_sequence(layers, "layers", tuple, "a (name, kind) tuple")
    if not layers:
        raise ValueError("layers must hold at least one (name, kind) pair")
    for i, layer in enumerate(layers):
        if len(layer) != 2 or not all(isinstance(v, str) for v in layer):
            raise ValueError(f"layers[{i}] must be a (name, kind) pair of str, got {layer!r}")
    for name, kind in layers:
        if kind not in ("conv", "linear", "rnn"):
            raise ValueError(f"layer {name!r}: kind must be 'conv', 'linear' or 'rnn', got {kind!r}")
    ops, edges = [], []
    prev = None
    for i, (name, kind) in enumerate(layers):
        ops.append(Op(name, "forward", i, PARALLEL_DIMS[("forward", kind)]))
        if prev is not None:
            edges.append((prev, name))
        prev = name
    ops.append(Op("loss", "loss", len(layers), PARALLEL_DIMS[("loss", "")]))
    edges.append((prev, "loss"))
    upstream = "loss"
    for i in reversed(range(len(layers))):
        name, kind = layers[i]
        kind_key = "linear" if kind == "rnn" else kind
        dw = f"d_w:{name}"
        if i > 0:
            din = f"d_in:{name}"
            ops.append(Op(din, "grad_input", i, PARALLEL_DIMS[("grad_input", kind_key)]))
            edges.append((upstream, din))
        ops.append(Op(dw, "grad_weight", i, PARALLEL_DIMS[("grad_weight", kind_key)]))
        edges.append((upstream, dw))
        if i > 0:
            upstream = din
    for i in reversed(range(len(layers))):
        name = layers[i][0]
        ops.append(Op(f"update:{name}", "update", i, PARALLEL_DIMS[("update", "")]))
        edges.append((f"d_w:{name}", f"update:{name}"))
    return DataflowGraph(tuple(ops), tuple(edges))
