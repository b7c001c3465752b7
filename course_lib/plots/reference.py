"""Your run beside the reference machines': one figure style for every chapter that measures.

A reference file (``data/reference/NAME.json``, written by ``python -m benchmarks reference``
and read by :mod:`course_lib.reference`) holds the course's measuring experiments run on a
named machine: a 2-core laptop-sized machine, a 16-core server with a GPU. A chapter that
measures draws the learner's own run and, beside it, every reference file that has the same
experiment, so that a slide shows curves past the learner's core count and a learner sees
where their machine stands.

* :func:`reference_runs` - every reference file's result of one or more experiments,
  labelled with :func:`course_lib.reference.reference_label` and turned into curves
  ``{name: (x, y)}`` (the table below); ``print`` it for one line saying which files it
  read, or, where none has the experiment, how to make one (:data:`MAKE_ONE`);
* :func:`beside_references_figure` - the learner's curves (drawn first, thick, in the
  palette's first colour, filled markers) beside every reference's (thinner, one colour per
  machine, open markers), the same line style for the same kind of curve; optional guides
  (the ideal line, a formula) in grey; the legends outside the axes;
* :func:`machine_label` - the legend text of your run: your cores, and whether the cores
  check found them free;
* :func:`conv_rows` and :func:`conv_figure` - the kernels cuDNN ran for ResNet-50's 3x3
  layers on a reference GPU and their times, beside the course's own convolution
  algorithms on the reference CPUs (and the learner's).

Curves per experiment (the names a notebook gives its own run, so that the same kind of
curve gets the same line style on every machine):

==================  ==========================================  ==========================
experiment          curve names                                 x, y
==================  ==========================================  ==========================
``pool``            ``"speedup"``                               processes, paired S(N)
``threads``         ``"GEMM"``, ``"conv2d"``                    BLAS threads, speedup
``roofline``        ``"CPU roof, 1 core"``,                     FLOP/B, TFLOP/s
                    ``"training steps, measured"`` (points)
``gpu_roofline``    ``"GPU roof, <dtype>"``,                    FLOP/B, TFLOP/s (achieved)
                    ``"GPU: <group>"`` (points: operators)
``scaling``         ``"strong, B = <B>"``, ``"weak, b = <b>"``  workers, speedup
``collectives``     ``"all-reduce, N = <N>"``                   message bytes, seconds
``overlap``         ``"shared memory, N = <N>"``                buckets, seconds per step
``pipeline``        ``"GPipe, <N_p> stages"``,                  micro-batches, bubble share
                    ``"1F1B, <N_p> stages"`` (points)
``tensor``          ``"speedup"``                               workers, speedup
``hybrid``          ``"N_d x 2 stages"``                        processes, speedup
==================  ==========================================  ==========================

Plot functions here are pure (curves in, :class:`matplotlib.figure.Figure` out); only
:func:`reference_runs` reads files.

Examples
--------
>>> runs = reference_runs("pool")
>>> isinstance(str(runs), str) and all(set(c) == {"speedup"} for c in runs.curves.values())
True
>>> fig = beside_references_figure({"speedup": ([1, 2], [0.98, 1.7])}, runs, title="pool",
...                                xlabel="processes N", ylabel="speedup S(N)", ideal=True)
>>> fig.axes[0].get_title()
'pool'
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._validate import check_type
from ..i18n import N_, tr
from . import COLORS, SUPERSCRIPT, new_figure, styled, time_axis

__all__ = ["MAKE_ONE", "ReferenceRuns", "beside_references_figure", "conv_figure", "conv_rows", "machine_label",
           "reference_runs"]

#: The command that writes a reference file of this machine (run it in a terminal, in the
#: course's folder; a few minutes on 16 cores).
MAKE_ONE = "python -m benchmarks reference --out data/reference/NAME.json"

#: What each experiment is, for the one line :class:`ReferenceRuns` prints.
_SUBJECT = {
    "pool": N_("the pool's speedups"), "threads": N_("the thread experiment (GEMM and conv2d)"),
    "roofline": N_("a CPU's roofline"), "gpu_roofline": N_("a GPU's roofline"),
    "scaling": N_("strong and weak scaling"), "collectives": N_("the all-reduce sweep"),
    "overlap": N_("the overlap runs"), "pipeline": N_("the pipeline's bubble"),
    "tensor": N_("the tensor split's speedups"), "hybrid": N_("the hybrid run"),
    "conv": N_("the course's convolution algorithms"), "gpu_conv": N_("cuDNN's convolution kernels"),
}
#: Intensities (FLOP/B) the roofs are drawn over.
_GRID = np.geomspace(0.125, 1000.0, 53)
#: Line styles and markers of the curve kinds, in the order the kinds first appear.
_DASHES = ("-", "--", ":", "-.", (0, (10, 3)), (0, (8, 2, 1, 2, 1, 2)))
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
#: Colours of the reference machines, in file order (yours is COLORS[0]); no yellow on white.
_REF_COLORS = COLORS[1:6]
#: Curves with more points than this are models drawn over a grid: lines without markers.
_MAX_MARKED = 24


def _xy(x, y) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(x, dtype=float).reshape(-1), np.asarray(y, dtype=float).reshape(-1)


def _pool(r):
    return {"speedup": _xy(r["processes"], r["speedup"])}


def _threads(r):
    return {"GEMM": _xy(r["threads"], r["gemm"]["speedup"]), "conv2d": _xy(r["threads"], r["conv"]["speedup"])}


def _roofline(r):
    one = r["one_core"]
    roof = np.minimum(one["peak_flops"], _GRID * one["memory_bandwidth"]) / 1e12
    steps = r["training_steps"]
    return {"CPU roof, 1 core": (_GRID.copy(), roof),
            "training steps, measured": _xy([s["intensity"] for s in steps],
                                            [s["measured_rate"] / 1e12 for s in steps])}


def _gpu_roofline(r):
    bw, out = r["memory"]["bytes_per_second"], {}
    for dtype in ("bfloat16", "tf32", "float32"):
        if dtype in r["peaks"]:
            out[f"GPU roof, {dtype}"] = (_GRID.copy(), np.minimum(r["peaks"][dtype]["flops_per_second"], _GRID * bw) / 1e12)
    groups: dict[str, list] = {}
    for op in r["operators"]:
        groups.setdefault(f"GPU: {op['group']}", []).append((op["intensity"], op["achieved_flops"] / 1e12))
    return out | {name: _xy(*zip(*pts, strict=True)) for name, pts in groups.items()}


def _scaling(r):
    out = {f"strong, B = {run['batch_size']}": _xy(run["workers"], run["strong_speedup"]) for run in r["runs"]}
    first = r["runs"][0]
    return out | {f"weak, b = {first['per_worker_batch']}": _xy(first["workers"], first["weak_speedup"])}


def _collectives(r):
    return {f"all-reduce, N = {run['workers']}": _xy(run["message_bytes"], run["seconds"]) for run in r["runs"]}


def _overlap(r):
    return {f"shared memory, N = {run['workers']}": _xy(run["buckets"], run["measured_step"]) for run in r["runs"]}


def _pipeline(r):
    out: dict[str, list] = {}
    for run in r["runs"]:
        name = f"{'GPipe' if run['schedule'] == 'gpipe' else '1F1B'}, {run['stages']} stages"
        out.setdefault(name, []).append((run["micro_batches"], run["bubble_measured"]))
    return {name: _xy(*zip(*sorted(pts), strict=True)) for name, pts in out.items()}


def _tensor(r):
    return {"speedup": _xy([run["workers"] for run in r["runs"]], [run["speedup"] for run in r["runs"]])}


def _hybrid(r):
    return {"N_d x 2 stages": _xy([run["processes"] for run in r["runs"]], [run["speedup"] for run in r["runs"]])}


#: The built-in curves of each experiment (see the module's table).
_CURVES: dict[str, Callable[[dict], dict]] = {
    "pool": _pool, "threads": _threads, "roofline": _roofline, "gpu_roofline": _gpu_roofline,
    "scaling": _scaling, "collectives": _collectives, "overlap": _overlap, "pipeline": _pipeline,
    "tensor": _tensor, "hybrid": _hybrid,
}
#: Curve names drawn as points (measured operators and steps, a schedule at one M).
_POINTS = ("training steps, measured", "GPU: ", "1F1B, ")
#: How a legend writes the curve names of the table and the variants of :func:`conv_rows` in
#: the current language: a name is a key (your curve meets a reference's by its English
#: name), so only its legend text is translated. A pattern's groups fill its message's fields;
#: any other name is looked up whole (:func:`_shown`).
_SHOWN = tuple((re.compile(pattern), message) for pattern, message in (
    (r"GPU roof, (?P<dtype>.+)", N_("GPU roof, {dtype}")),
    (r"GPU: (?P<group>.+)", N_("GPU: {group}")),
    (r"strong, B = (?P<batch>.+)", N_("strong, B = {batch}")),
    (r"weak, b = (?P<batch>.+)", N_("weak, b = {batch}")),
    (r"all-reduce, N = (?P<workers>.+)", N_("all-reduce, N = {workers}")),
    (r"shared memory, N = (?P<workers>.+)", N_("shared memory, N = {workers}")),
    (r"wire, measured, N = (?P<workers>.+)", N_("wire, measured, N = {workers}")),
    (r"wire, model, N = (?P<workers>.+)", N_("wire, model, N = {workers}")),
    (r"GPipe, (?P<stages>\d+) stages", N_("GPipe, {stages} stages")),
    (r"1F1B, (?P<stages>\d+) stages", N_("1F1B, {stages} stages")),
    (r"course's fastest, (?P<threads>\d+) threads", N_("course's fastest, {threads} threads")),
    (r"cuDNN (?P<dtype>.+), channels_last", N_("cuDNN {dtype}, channels_last")),
))
#: Curve and variant names translated whole.
_NAMES = (N_("speedup"), N_("CPU roof, 1 core"), N_("training steps, measured"), N_("N_d x 2 stages"),
          N_("course's fastest, 1 thread"), N_("course's fastest, all cores"))


def _shown(name: str) -> str:
    """The legend text of curve (or variant) ``name`` in the current language.

    >>> _shown("strong, B = 1024"), _shown("GEMM")
    ('strong, B = 1024', 'GEMM')
    """
    for pattern, message in _SHOWN:
        match = pattern.fullmatch(name)
        if match:
            return tr(message, **match.groupdict())
    return tr(name)


def _subjects(experiments: Sequence[str]) -> str:
    """The experiments' subjects as one phrase: "a, b and c" (:data:`_SUBJECT`)."""
    names = [tr(_SUBJECT[e]) if e in _SUBJECT else repr(e) for e in experiments]
    text = names[-1]
    for name in reversed(names[:-1]):
        text = tr("{first} and {rest}", first=name, rest=text)
    return text


def _is_points(name: str, points: Collection[str]) -> bool:
    return name in points or any(name.startswith(p) for p in _POINTS)


@dataclass(frozen=True)
class ReferenceRuns:
    """The reference files' results of some experiments (:func:`reference_runs`).

    Attributes
    ----------
    experiments : tuple of str
        The experiments asked for.
    results : dict
        ``{label: {experiment: result}}`` for every reference file that has at least one
        of them (:func:`course_lib.reference.experiment_result`), labelled by
        :func:`course_lib.reference.reference_label`; files in name order.
    curves : dict
        ``{label: {curve name: (x, y)}}``: the curves of those results (module table), as
        float arrays.
    files : dict
        ``{label: file name}`` of every file in ``results``.
    without : tuple of str
        Files (names) that have none of the experiments, or whose file could not be read.
    order : dict
        ``{label: position of its file among all reference files}``: a machine keeps its
        colour from figure to figure.
    """

    experiments: tuple[str, ...]
    results: dict = field(default_factory=dict)
    curves: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    without: tuple[str, ...] = ()
    order: dict = field(default_factory=dict)

    def color(self, label: str) -> str:
        """The colour of machine ``label`` in every figure of this module."""
        return _REF_COLORS[self.order.get(label, list(self.results).index(label) if label in self.results else 0)
                           % len(_REF_COLORS)]

    def __len__(self) -> int:
        return len(self.results)

    def __str__(self) -> str:
        subject = _subjects(self.experiments)
        if not self.results:
            return tr("No reference file has {subject} yet: make one on a machine to compare with, "
                      "in a terminal in the course's folder: {command}", subject=subject, command=MAKE_ONE)
        fields = dict(subject=subject, count=len(self.results), files=", ".join(self.without),
                      runs="; ".join(f"{label} [{self.files[label]}]" for label in self.results))
        if self.without:
            return tr("{subject} beside {count} reference run(s): {runs} (not in: {files})", **fields)
        return tr("{subject} beside {count} reference run(s): {runs}", **fields)


def reference_runs(experiments: str | Sequence[str], *, folder: str | Path | None = None,
                   curves: Callable[[str, dict], Mapping] | None = None) -> ReferenceRuns:
    """Every reference file's result of ``experiments``, with its curves.

    Parameters
    ----------
    experiments : str or sequence of str
        Experiment names (``"pool"``, ``"threads"``, ...; the table of
        :mod:`course_lib.reference`). Several: their curves are merged per machine (a
        CPU's and a GPU's roofline of the same file share its colour).
    folder : str or pathlib.Path, optional
        A folder of reference files (your own runs); default ``data/reference``.
    curves : callable, optional
        ``curves(experiment, result) -> {name: (x, y)}``, for experiments without built-in
        curves or to draw other fields; default: the module's table.

    Returns
    -------
    ReferenceRuns
        A file that cannot be read, or whose result lacks a field the curves need, is
        listed in ``without`` instead of stopping the notebook.

    Examples
    --------
    >>> str(reference_runs("pool", folder="/nonexistent")).startswith("No reference file has the pool's")
    True
    """
    from ..datasets import DataFileError
    from ..reference import available_references, experiment_result, load_reference, reference_label

    if isinstance(experiments, str):
        experiments = (experiments,)
    check_type(experiments, "experiments", (tuple, list), "an experiment name (str) or a sequence of them")
    if not experiments or not all(isinstance(e, str) and e for e in experiments):
        raise TypeError(f"experiments must name at least one experiment (str), got {experiments!r}")
    if folder is not None:
        check_type(folder, "folder", (str, Path), "a folder (str or pathlib.Path)")
    if curves is not None and not callable(curves):
        raise TypeError(f"curves must be a function (experiment, result) -> {{name: (x, y)}}, got "
                        f"{type(curves).__name__}")
    experiments = tuple(experiments)
    results, all_curves, files, without, order = {}, {}, {}, [], {}
    for position, name in enumerate(available_references(folder)):
        try:
            ref = load_reference(str(Path(folder) / f"{name}.json") if folder is not None else name)
            found = {e: r for e in experiments if (r := experiment_result(ref, e)) is not None}
            drawn = {}
            for e, r in found.items():
                made = curves(e, r) if curves is not None else _CURVES[e](r) if e in _CURVES else {}
                drawn.update({str(k): _xy(*v) for k, v in made.items()})
        except (DataFileError, KeyError, TypeError, ValueError, IndexError):
            without.append(name)
            continue
        if not found:
            without.append(name)
            continue
        label = reference_label(ref)
        if label in results:  # two runs of one machine on one day: tell them apart by file
            label = f"{label} [{name}]"
        results[label], all_curves[label], files[label], order[label] = found, drawn, name, position
    return ReferenceRuns(experiments, results, all_curves, files, tuple(without), order)


def machine_label(check) -> str:
    """Legend text of your run from the cores check it ran after
    (:func:`course_lib.parallel.train.check_cores`): your cores, and a warning where they were
    shared (then the run measured the other work too).

    Examples
    --------
    >>> from course_lib.parallel.train.cores import CoreCheck
    >>> machine_label(CoreCheck(cores=4, load=0.1, slowdown=1.0))
    'your machine, 4 cores'
    >>> machine_label(CoreCheck(cores=2, load=0.1, slowdown=1.6))
    'your machine, 2 cores (shared with other work: not its own speed)'
    """
    from ..parallel.train.cores import CoreCheck

    check_type(check, "check", CoreCheck, "the result of check_cores()")
    if check.free:
        return tr("your machine, {cores} cores", cores=check.cores)
    return tr("your machine, {cores} cores (shared with other work: not its own speed)", cores=check.cores)


def _check_curves(curves, name: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    check_type(curves, name, Mapping, "a mapping {curve name: (x, y)}")
    out = {}
    for key, pair in curves.items():
        if not isinstance(key, str):
            raise TypeError(f"{name} keys must be curve names (str), got {key!r}")
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{name}[{key!r}] must be a pair (x, y)")
        try:
            x, y = _xy(*pair)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name}[{key!r}] must be two sequences of numbers (x, y): {exc}") from None
        if x.size != y.size:
            raise ValueError(f"{name}[{key!r}]: x and y differ in length ({x.size} and {y.size})")
        out[key] = (x, y)
    return out


def _log_ticks(axis, values: np.ndarray, base: int) -> None:
    """Log scale over ``values``, major ticks at powers of ``base`` (2 or 10), plain labels."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    lo, hi = float(np.min(values)), float(np.max(values))
    k0, k1 = math.floor(math.log(lo, base) + 1e-9), math.ceil(math.log(hi, base) - 1e-9)
    step = max(1, math.ceil((k1 - k0 + 1) / 9))
    ticks = [float(base) ** k for k in range(k0, k1 + 1, step)]

    def label(v, _pos):
        if base == 10 and not 1e-3 <= v < 1e5:
            return f"10{str(round(math.log10(v))).translate(SUPERSCRIPT)}"
        return f"{v:g}"

    getattr(axis.axes, f"set_{axis.axis_name}scale")("log", base=base)
    getattr(axis.axes, f"set_{axis.axis_name}lim")(ticks[0] / base**0.15, ticks[-1] * base**0.15)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(label))


@styled
def beside_references_figure(yours: Mapping, references: ReferenceRuns | Mapping, *, title: str, xlabel: str,
                             ylabel: str, yours_label: str = N_("your machine, now"), guides: Mapping | None = None,
                             ideal: bool = False, points: Collection[str] = (), x_axis: str = "log2",
                             y_axis: str = "linear"):
    """The learner's curves beside every reference machine's, one colour per machine.

    Your curves come first and stand out (the palette's first colour, thick lines, filled
    markers, drawn on top); each reference machine gets the next colour, thinner lines and
    open markers. A curve kind (its name: ``"GEMM"``, ``"strong, B = 1024"``) has one line
    style and marker on every machine. Below the axes: one legend entry per machine; to the
    right: one per curve kind (when there are several) and per guide. Points with NaN are
    left out (a missing measurement).

    Parameters
    ----------
    yours : mapping
        ``{curve name: (x, y)}``: your run (may be empty: references only).
    references : ReferenceRuns or mapping
        :func:`reference_runs`, or ``{machine label: {curve name: (x, y)}}``.
    title, xlabel, ylabel : str
    yours_label : str
        Legend text of your machine (the default in the current language).
    guides : mapping, optional
        ``{label: (x, y)}``: models to read the curves against (a formula), thin and grey.
    ideal : bool
        Add the guide ``y = x`` (ideal speedup) over the x range.
    points : collection of str
        Curve names drawn as markers without lines, besides the built-in ones that always
        are: ``"training steps, measured"``, ``"GPU: ..."`` (measured operators) and
        ``"1F1B, ..."`` (one micro-batch count).
    x_axis, y_axis : {"log2", "log", "linear"}
        ``"log2"``: counts, ticks at powers of two; ``"log"``: ticks at powers of ten.

    Examples
    --------
    >>> refs = {"16 cores": {"GEMM": ([1, 2, 4, 8, 16], [1, 2, 3.9, 7.5, 14])}}
    >>> fig = beside_references_figure({"GEMM": ([1, 2], [1, 1.9])}, refs, title="threads",
    ...                                xlabel="threads", ylabel="speedup", ideal=True, y_axis="log2")
    >>> [t.get_text() for t in fig.legends[0].get_texts()]
    ['your machine, now', '16 cores']
    """
    from matplotlib.lines import Line2D

    mine = _check_curves(yours, "yours")
    runs = references if isinstance(references, ReferenceRuns) else None
    if runs is not None:
        references = runs.curves
    check_type(references, "references", Mapping, "reference_runs(...) or a mapping {label: {name: (x, y)}}")
    refs = {}
    for label, curves in references.items():
        check_type(label, "references label", str, "a machine label (str)")
        refs[label] = _check_curves(curves, f"references[{label!r}]")
    for name, value in (("title", title), ("xlabel", xlabel), ("ylabel", ylabel), ("yours_label", yours_label)):
        check_type(value, name, str, "a str")
    extra = _check_curves(guides, "guides") if guides is not None else {}
    check_type(ideal, "ideal", bool, "True or False")
    if isinstance(points, str) or not isinstance(points, Collection):
        raise TypeError(f"points must be a collection of curve names, got {points!r}")
    for name, value in (("x_axis", x_axis), ("y_axis", y_axis)):
        if value not in ("log2", "log", "linear"):
            raise ValueError(f"{name} must be 'log2', 'log' or 'linear', got {value!r}")
    sources = [(yours_label, mine)] + list(refs.items())
    kinds: list[str] = []
    for _, curves in sources:
        kinds += [k for k in curves if k not in kinds]
    xs = [x[np.isfinite(x) & np.isfinite(y)] for _, c in sources for x, y in c.values()]
    xs = np.concatenate(xs + [np.zeros(0)])
    if ideal and xs.size:
        extra = {N_("ideal: y = x"): (np.array([xs.min(), xs.max()]), np.array([xs.min(), xs.max()]))} | extra

    fig, ax = new_figure(size=(9.6, 5.2))
    style = {k: (_DASHES[i % len(_DASHES)], _MARKERS[i % len(_MARKERS)]) for i, k in enumerate(kinds)}
    everything, dense = [], set()
    colors = [COLORS[0]] + [runs.color(label) if runs is not None else _REF_COLORS[i % len(_REF_COLORS)]
                            for i, label in enumerate(refs)]
    for rank, (_label, curves) in enumerate(sources):
        color = colors[rank]
        for kind, (x, y) in curves.items():
            keep = np.isfinite(x) & np.isfinite(y)
            if x_axis != "linear":
                keep &= x > 0
            if y_axis != "linear":
                keep &= y > 0
            x, y = x[keep], y[keep]
            everything.append((x, y))
            dash, marker = style[kind]
            line = "none" if _is_points(kind, points) else dash
            if x.size > _MAX_MARKED:  # a model drawn over a grid (a roof): a line, no markers
                marker = None
                dense.add(kind)
            if rank == 0:
                ax.plot(x, y, linestyle=line, marker=marker, color=color, lw=3.0, ms=8.5, zorder=5)
            else:
                ax.plot(x, y, linestyle=line, marker=marker, color=color, lw=1.6, ms=7, mfc="white", mew=1.6,
                        zorder=3, alpha=0.95)
    guide_handles = []
    for i, (label, (x, y)) in enumerate(extra.items()):
        ls = (":", "-.", "--")[i % 3]
        ax.plot(x, y, ls, color="0.45", lw=1.3, zorder=2)
        everything.append((x, y))
        guide_handles.append((Line2D([], [], ls=ls, color="0.45", lw=1.3), _shown(label)))

    allx = np.concatenate([x for x, _ in everything] + [np.zeros(0)])
    ally = np.concatenate([y for _, y in everything] + [np.zeros(0)])
    for axis, kind, values in ((ax.xaxis, x_axis, allx), (ax.yaxis, y_axis, ally)):
        values = values[np.isfinite(values)]
        if kind != "linear":
            values = values[values > 0]
            if values.size:
                _log_ticks(axis, values, 2 if kind == "log2" else 10)
        elif values.size and axis is ax.yaxis:
            ax.set_ylim(min(0.0, float(values.min())), float(values.max()) * 1.08 or 1.0)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)

    machines = [Line2D([], [], color=COLORS[0], lw=3.0, marker="o", ms=8)]
    machines += [Line2D([], [], color=c, lw=1.6, marker="o", ms=7, mfc="white", mew=1.6) for c in colors[1:]]
    names = [tr(yours_label)] + list(refs)
    fig.legend(machines, names, loc="outside lower center", ncols=1, alignment="left",
               title=tr("your run, then the reference runs (data/reference)") if refs else None)
    handles = []
    if len(kinds) > 1:
        handles += [(Line2D([], [], ls="none" if _is_points(k, points) else style[k][0],
                            marker=None if k in dense else style[k][1],
                            color="0.3", lw=1.6, ms=7), _shown(k)) for k in kinds]
    handles += guide_handles
    if handles:
        fig.legend([h for h, _ in handles], [t for _, t in handles], loc="outside right upper", handlelength=3.2)
    return fig


# ------------------------------------------------------------------ convolutions: GPU and CPU
def _kernel_kind(names: Sequence[str]) -> str:
    """What a convolution's kernels are, from their names (cuDNN's naming)."""
    text = " ".join(names).lower()
    if "fft" in text:
        return "FFT"
    if "winograd" in text:
        return "Winograd"
    if "implicit_gemm" in text or "fprop" in text:
        return "implicit GEMM"
    if "gemm" in text:
        return "GEMM"
    return "direct" if "conv" in text else "other"


def _short_kernel(name: str) -> str:
    """The main kernel's name without its template arguments and parameter list.

    >>> _short_kernel("void fft2d_r2c_16x16<float>(float2*, float const*)")
    'fft2d_r2c_16x16'
    >>> _short_kernel("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_s1688fprop_tf32>(Params)")
    'cutlass_tensorop_s1688fprop_tf32'
    """
    base, _, args = name.removeprefix("void ").split("(")[0].partition("<")
    if base.endswith("Kernel") and args:  # a generic launcher (CUTLASS): the kernel is its argument
        return args.rstrip(">").split(",")[0].strip()
    return base


def conv_rows(references: ReferenceRuns) -> list[dict]:
    """One row per (machine, layer, variant): cuDNN's kernels on a GPU, the course's algorithms on a CPU.

    From :func:`reference_runs` of ``("gpu_conv", "conv")``. Each row: ``machine``,
    ``layer`` (ResNet-50's 3x3 layer, ``conv2_x`` ...), ``device`` (``"GPU"`` or
    ``"CPU"``), ``variant`` (``"cuDNN float32"`` ..., ``"cuDNN bfloat16, channels_last"`` where the
    file has NHWC runs, or ``"course's fastest, 1 thread"`` /
    ``"course's fastest, all cores"``), ``threads`` (the CPU's; 0 on a GPU), ``seconds`` per call, ``batch``, ``per_image`` (seconds per
    image), ``kind`` (``"implicit GEMM"``, ``"FFT"``, ``"Winograd"`` ... for a GPU;
    the fastest algorithm for a CPU), ``kernel`` (the main kernel's short name; ``""``
    for a CPU) and ``kernel_seconds`` (its time per call; NaN where not recorded).

    Examples
    --------
    >>> conv_rows(ReferenceRuns(("gpu_conv", "conv")))
    []
    """
    check_type(references, "references", ReferenceRuns, "reference_runs(('gpu_conv', 'conv'))")
    rows = []
    for machine, found in references.results.items():
        gpu = found.get("gpu_conv")
        for layer in (gpu or {}).get("layers", []):
            batch = layer["x_shape"][0]
            entries = [(f"cuDNN {d}", e) for d, e in layer.get("by_dtype", {}).items()]
            entries += [(f"cuDNN {d}, channels_last", e) for d, e in (layer.get("channels_last") or {}).items()]
            for variant, entry in entries:
                if not isinstance(entry, dict) or entry.get("seconds") is None:
                    continue
                names = [k["name"] for k in entry.get("kernels", [])] or [entry.get("main", "")]
                rows.append({"machine": machine, "layer": layer["name"], "device": "GPU",
                             "variant": variant, "threads": 0, "seconds": float(entry["seconds"]), "batch": batch,
                             "per_image": float(entry["seconds"]) / batch, "kind": _kernel_kind(names),
                             "kernel": _short_kernel(entry.get("main") or ""),
                             "kernel_seconds": float(entry.get("main_seconds") or math.nan)})
        cpu = found.get("conv")
        for layer in (cpu or {}).get("layers", []):
            batch, most = layer["x_shape"][0], max(t["threads"] for t in layer["by_threads"])
            for by in layer["by_threads"]:
                if not by.get("seconds"):
                    continue
                best = by["fastest"] or min(by["seconds"], key=by["seconds"].get)
                threads = by["threads"]
                variant = _shown("course's fastest, 1 thread" if threads == 1 else "course's fastest, all cores"
                                 if threads == most else f"course's fastest, {threads} threads")  # as printed
                rows.append({"machine": machine, "layer": layer["name"], "device": "CPU", "variant": variant,
                             "threads": threads, "seconds": float(by["seconds"][best]), "batch": batch,
                             "per_image": float(by["seconds"][best]) / batch, "kind": best, "kernel": "",
                             "kernel_seconds": math.nan})
    return rows


@styled
def conv_figure(references: ReferenceRuns, *, yours: Mapping | None = None,
                yours_label: str = N_("your machine, now"), title: str = N_("ResNet-50's 3x3 layers: time per image")):
    """Time per image of ResNet-50's 3x3 layers: cuDNN on each reference GPU (one marker per
    number format), the course's fastest algorithm on each reference CPU (1 thread and all
    cores), and yours.

    One row per layer, one band of markers per machine and device within it; colours are
    machines as in :func:`beside_references_figure` (yours first), markers the variants. A
    log time axis: the GPU's microseconds and the CPU's milliseconds on one figure.

    Parameters
    ----------
    references : ReferenceRuns
        :func:`reference_runs` of ``("gpu_conv", "conv")`` (:func:`conv_rows` reads it).
    yours : mapping, optional
        ``{layer name: {variant: seconds per image}}``, e.g. ``{"conv2_x": {"im2col, 1 thread":
        3e-3}}``: your own measurement.
    yours_label, title : str
        Legend text of your machine and the title (the defaults in the current language).

    Examples
    --------
    >>> fig = conv_figure(ReferenceRuns(("gpu_conv", "conv")), yours={"conv2_x": {"im2col, 1 thread": 4e-3}})
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['conv2_x']
    """
    from matplotlib.lines import Line2D

    rows = conv_rows(references)
    check_type(yours_label, "yours_label", str, "a str")
    check_type(title, "title", str, "a str")
    if yours is not None:
        check_type(yours, "yours", Mapping, "a mapping {layer: {variant: seconds per image}}")
        for layer, variants in yours.items():
            check_type(variants, f"yours[{layer!r}]", Mapping, "a mapping {variant: seconds per image}")
            for variant, value in variants.items():
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                    raise ValueError(f"yours[{layer!r}][{variant!r}] must be seconds > 0, got {value!r}")
                rows.append({"machine": yours_label, "layer": str(layer), "device": "CPU", "variant": str(variant),
                             "per_image": float(value)})
    machines = [yours_label] if yours else []
    machines += [m for m in references.results if m not in machines]
    layers, bands, variants = [], [], []
    for row in rows:
        band = (row["machine"], row["device"])
        layers += [row["layer"]] if row["layer"] not in layers else []
        bands += [band] if band not in bands else []
        variants += [row["variant"]] if row["variant"] not in variants else []
    fig, ax = new_figure(size=(9.6, 1.6 + 0.55 * max(1, len(layers)) * max(1, len(bands)) ** 0.5 + 0.9))
    offsets = {b: 0.32 * (i - (len(bands) - 1) / 2) / max(1, len(bands) - 1) * 2 for i, b in enumerate(bands)}
    colour = {m: COLORS[0] if (yours and m == yours_label) else references.color(m) for m in machines}
    marker = {v: _MARKERS[i % len(_MARKERS)] for i, v in enumerate(variants)}
    values = []
    for row in rows:
        y = len(layers) - 1 - layers.index(row["layer"]) + offsets[(row["machine"], row["device"])]
        mine = yours is not None and row["machine"] == yours_label
        ax.plot([row["per_image"]], [y], marker[row["variant"]], color=colour[row["machine"]],
                ms=9 if mine else 8, mfc=None if mine else "white", mew=1.8, zorder=4 if mine else 3)
        values.append(row["per_image"])
    ax.set_yticks(range(len(layers))[::-1] if layers else [], layers)
    ax.set_ylim(-0.7, max(1, len(layers)) - 0.3)
    if values:
        lo, hi = min(values), max(values)
        time_axis(ax.xaxis, lo / 2, hi * 2)
    ax.set(title=tr(title), xlabel=tr("time per image (log scale; shorter is faster)"))
    ax.tick_params(axis="y", length=0)
    fig.legend([Line2D([], [], ls="none", marker="o", color=colour[m], ms=8, mfc=None if (yours and m == yours_label)
                       else "white", mew=1.8) for m in machines], [tr(m) if m == yours_label else m for m in machines],
               loc="outside lower center",
               title=tr("your run, then the reference runs (data/reference)") if references.results else None,
               alignment="left")
    if variants:
        fig.legend([Line2D([], [], ls="none", marker=marker[v], color="0.3", ms=8) for v in variants],
                   [_shown(v) for v in variants],
                   loc="outside right upper")
    return fig
