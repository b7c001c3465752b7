"""Figures of the overlap of communication with the backward pass: the model and a measured timeline.

* :func:`overlap_timeline_figure` - one measured step of ``train_data_parallel(buckets=k)``:
  per worker a compute lane (forward, backward, update) and a communication lane (each
  bucket's wait for the other workers and its all-reduce, by the communication thread);
* :func:`overlap_model_figure` - the same two lanes from the model
  :func:`course_lib.overlap.overlapped_step_time`, one bucket above k buckets;
* :func:`overlap_curves` - the step times of an overlap measurement (yours, from
  :func:`course_lib.parallel.train.measure_overlap`, or a reference file's) as the curves
  :func:`course_lib.plots.reference.beside_references_figure` draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .._validate import check_int, check_sequence, check_type
from ..i18n import N_, tr
from ..overlap import overlapped_step_time
from . import COLORS, new_figure, styled

__all__ = ["overlap_curves", "overlap_model_figure", "overlap_timeline_figure"]

_COMPUTE = {"F": (COLORS[0], N_("forward")), "B": (COLORS[5], N_("backward")), "U": ("0.3", N_("update"))}
#: Consecutive buckets' all-reduces alternate between two colours, so that their edges show.
_BUCKET_COLORS = (COLORS[1], COLORS[4])
_WAIT = dict(facecolor="0.94", edgecolor="0.55", hatch="///", linewidth=0.0)


def _lanes(ax, lanes: list[tuple[str, list[tuple[str, int, float, float]]]], scale: float) -> list:
    """Draw ``(name, [(kind, bucket, start, end), ...])`` lanes top to bottom; return legend handles."""
    from matplotlib.patches import Patch

    used = set()
    ends = [end for _, ops in lanes for *_, end in ops]
    least = 0.004 * (max(ends, default=1.0) or 1.0)  # an all-reduce of a few kB stays visible
    for row, (_, ops) in enumerate(lanes):
        for kind, bucket, start, end in ops:
            if kind in _COMPUTE:
                style = dict(facecolor=_COMPUTE[kind][0], edgecolor="white", linewidth=0.6)
            elif kind == "W":
                style = dict(_WAIT)
            else:
                style = dict(facecolor=_BUCKET_COLORS[bucket % 2], edgecolor="white", linewidth=0.6)
            ax.broken_barh([(start * scale, max(end - start, least) * scale)], (row - 0.38, 0.76), **style)
            used.add(kind)
    ax.set_yticks(range(len(lanes)), [name for name, _ in lanes])  # translated by the caller
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.grid(False, axis="y")
    handles = [Patch(facecolor=color, label=tr(name)) for kind, (color, name) in _COMPUTE.items() if kind in used]
    if "A" in used:
        handles += [Patch(facecolor=_BUCKET_COLORS[0], label=tr("all-reduce, bucket 0, 2, ...")),
                    Patch(facecolor=_BUCKET_COLORS[1], label=tr("all-reduce, bucket 1, 3, ..."))]
    if "W" in used:
        handles.append(Patch(**_WAIT, label=tr("waiting for the others")))
    return handles


def _typical_step(rows: list[tuple]) -> int:
    """The step (after the first) whose duration is the median one."""
    steps = sorted({r[1] for r in rows})
    later = steps[1:] or steps
    span = {s: max(r[5] for r in rows if r[1] == s) - min(r[4] for r in rows if r[1] == s) for s in later}
    order = sorted(later, key=lambda s: span[s])
    return order[len(order) // 2]


@styled
def overlap_timeline_figure(timeline: Sequence[tuple], *, step: int | None = None, title: str | None = None):
    """One measured step of a bucketed data-parallel run, drawn as lanes.

    Parameters
    ----------
    timeline : sequence of (rank, step, kind, bucket, start, end)
        ``result.extra["timeline"]`` of ``train_data_parallel(..., buckets=k)``
        (:func:`course_lib.parallel.train.data.overlap_timeline`), seconds.
    step : int, optional
        The step to draw; default: the step (after the first) of median duration.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Milliseconds from the step's first operation on the x axis; per worker a compute
        lane and a communication lane: where a bucket's all-reduce lies under the backward,
        communication overlaps computation.

    Examples
    --------
    >>> rows = [(0, 0, "F", -1, 0.0, 1.0), (0, 0, "B", -1, 1.0, 3.0), (0, 0, "W", 0, 2.0, 2.2),
    ...         (0, 0, "A", 0, 2.2, 3.5), (0, 0, "U", -1, 3.5, 3.7)]
    >>> fig = overlap_timeline_figure(rows)
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['worker 0: compute', 'worker 0: communication']
    """
    rows = check_sequence(timeline, "timeline", (tuple, list), "a (rank, step, kind, bucket, start, end) row")
    if not rows:
        raise ValueError("timeline must hold at least one operation")
    steps = {int(r[1]) for r in rows}
    step = _typical_step(rows) if step is None else check_int(step, "step", min(steps), max(steps))
    mine = [r for r in rows if r[1] == step]
    origin = min(r[4] for r in mine)
    lanes = []
    for rank in sorted({r[0] for r in mine}):
        ops = [(r[2], int(r[3]), r[4] - origin, r[5] - origin) for r in mine if r[0] == rank]
        lanes.append((tr("worker {rank}: compute", rank=rank), [op for op in ops if op[0] in _COMPUTE]))
        lanes.append((tr("worker {rank}: communication", rank=rank), [op for op in ops if op[0] not in _COMPUTE]))
    fig, ax = new_figure(size=(8.0, 1.0 + 0.55 * len(lanes)))
    handles = _lanes(ax, lanes, 1e3)
    buckets = len({r[3] for r in mine if r[2] == "A"})
    ax.set_xlabel(tr("milliseconds from the start of the step"))
    ax.set_title(title or tr("step {step} as measured: {buckets} buckets, {workers} workers", step=step,
                             buckets=buckets, workers=len(lanes) // 2))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


@styled
def overlap_model_figure(compute_fwd, compute_bwd, comm_times, *, update: float = 0.0, unit: str = "ms"):
    """The model's step (:func:`course_lib.overlap.overlapped_step_time`): one bucket (no
    overlap) above ``k`` buckets, each a compute lane and a communication lane.

    Parameters
    ----------
    compute_fwd, compute_bwd, comm_times, update
        As :func:`course_lib.overlap.overlapped_step_time` (``comm_times``: one per bucket).
    unit : str
        Label of the time axis (the times are drawn as given).

    Examples
    --------
    >>> fig = overlap_model_figure(1.0, [1.0, 1.0], [1.5, 1.5])
    >>> len(fig.axes[0].get_yticklabels())
    4
    """
    t = overlapped_step_time(compute_fwd, compute_bwd, comm_times, update=update)
    k = t["comm_start"].size
    fwd = float(compute_fwd)  # checked by the model
    bwd_end = float(t["backward_end"][-1])
    comm = t["comm_end"] - t["comm_start"]
    one_comm = (bwd_end, bwd_end + float(comm.sum()))
    lanes = [
        (tr("1 bucket: compute"), [("F", -1, 0.0, fwd), ("B", -1, fwd, bwd_end),
                                   ("U", -1, one_comm[1], one_comm[1] + update)]),
        (tr("1 bucket: communication"), [("A", 0, *one_comm)]),
        (tr("{buckets} buckets: compute", buckets=k), [("F", -1, 0.0, fwd), ("B", -1, fwd, bwd_end),
                                                        ("U", -1, t["overlapped"] - update, t["overlapped"])]),
        (tr("{buckets} buckets: communication", buckets=k),
         [("A", j, float(a), float(b)) for j, (a, b) in enumerate(zip(t["comm_start"], t["comm_end"]))]),
    ]
    fig, ax = new_figure(size=(8.0, 3.2))
    handles = _lanes(ax, lanes, 1.0)
    for row, end in ((0, t["sequential"]), (2, t["overlapped"])):
        ax.annotate(tr("step {time}", time=f"{end:.3g} {unit}"), (end, row), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=10)
    ax.set_xlim(0, t["sequential"] * 1.35)
    ax.set_xlabel(unit)
    ax.set_title(tr("model: the all-reduce after the backward vs in {buckets} buckets during it", buckets=k))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def overlap_curves(experiment: str, result: Mapping, *, workers: int = 2) -> dict:
    """Milliseconds per step against the bucket count, for
    :func:`course_lib.plots.reference.beside_references_figure`: ``"shared memory, N = n"`` (the
    measured step), ``"wire, measured, N = n"`` and ``"wire, model, N = n"`` (over the modelled
    wire: the measured step and :func:`course_lib.overlap.overlapped_step_time`'s).

    Parameters
    ----------
    experiment : str
        ``"overlap"`` (the signature of ``reference_runs(..., curves=...)``).
    result : mapping
        :func:`course_lib.parallel.train.measure_overlap`'s result (your run: ``rows`` with
        ``measured_s``, ``model_s`` and, when it ran the shared memory beside, ``shm_s``), or a
        reference file's ``"overlap"`` result (``runs``: shared memory; ``wire_runs``: the wire).
    workers : int
        The runs on this many workers, >= 2 (the chapter's run has 2).

    Examples
    --------
    >>> mine = {"workers": 2, "rows": [{"buckets": 1, "measured_s": 0.03, "model_s": 0.029, "shm_s": 0.025},
    ...                                {"buckets": 4, "measured_s": 0.024, "model_s": 0.024, "shm_s": 0.027}]}
    >>> {name: y.tolist() for name, (x, y) in overlap_curves("overlap", mine).items()}["wire, model, N = 2"]
    [29.0, 24.0]
    """
    if experiment != "overlap":
        raise ValueError(f"experiment must be 'overlap', got {experiment!r}")
    check_type(result, "result", Mapping, "measure_overlap's result or a reference file's overlap result")
    n = check_int(workers, "workers", 2)
    out = {}
    wire = [result] if "rows" in result else list(result.get("wire_runs") or [])
    for run in (r for r in wire if r.get("workers") == n):
        rows = run["rows"]
        buckets = np.array([r["buckets"] for r in rows], dtype=float)
        out[f"wire, measured, N = {n}"] = (buckets, 1e3 * np.array([r["measured_s"] for r in rows], dtype=float))
        out[f"wire, model, N = {n}"] = (buckets, 1e3 * np.array([r["model_s"] for r in rows], dtype=float))
        if all("shm_s" in r for r in rows):
            out[f"shared memory, N = {n}"] = (buckets, 1e3 * np.array([r["shm_s"] for r in rows], dtype=float))
    for run in (r for r in result.get("runs") or [] if r.get("workers") == n):
        out[f"shared memory, N = {n}"] = (np.asarray(run["buckets"], dtype=float),
                                          1e3 * np.asarray(run["measured_step"], dtype=float))
    return out
