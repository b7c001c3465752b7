"""Every public function and class of course_lib rejects bad arguments cleanly.

"Cleanly" means: a ``TypeError`` or ``ValueError`` (or a subclass), or a normal return -
never an ``AttributeError``, ``IndexError``, ``OverflowError``, a hang or a worker
process started with input that is bad from the start.

The walk visits every module and subpackage of ``course_lib`` (``pkgutil.walk_packages``);
public means listed in the module's ``__all__`` (or, without ``__all__``, not starting with
``_`` and defined in that module). Each public callable gets every bad value (:data:`BAD`)
in every place it can go: into EVERY required parameter at once, and into each ONE of them
with the others set to a valid value (:data:`GOOD`, :data:`GOOD_FOR`; a parameter without a
known valid value gets the bad value too). A function without required parameters gets the
bad value in one of its optional parameters instead (never the default itself).

While the walk runs, starting a process (``multiprocessing`` or ``subprocess``) raises
:class:`ProcessStarted`, so a trainer that starts workers before it has checked its
arguments fails here, and every call has a time limit (:data:`CALL_TIMEOUT`).
What the walk skips, and why, is in :data:`SKIP` and :data:`SKIP_MODULES`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import math
import multiprocessing.process
import os
import pkgutil
import resource
import signal
import subprocess
import types
import warnings

import fast_schema  # noqa: F401 - before nbformat: see its docstring
import matplotlib
import nbformat
import numpy as np
import pytest

import course_lib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# ------------------------------------------------------------------------ bad values
#: The bad values, by the name shown in a failure report.
BAD = {
    "None": None,
    "'abc'": "abc",
    "[[1, [2]]]": [[1, [2]]],
    "nan": float("nan"),
    "inf": float("inf"),
    "10**400": 10**400,
}

#: Seconds one call may take before the walk reports it as hanging.
CALL_TIMEOUT = 10.0

# ------------------------------------------------------------------------ skips
#: Modules the walk does not enter, with the reason.
SKIP_MODULES = {
    "course_lib.__main__": "command line entry point: main() parses sys.argv",
    "course_lib._validate": "private module (leading underscore): the checks this test relies on",
}

#: Public callables the walk does not call, with the reason.
SKIP = {
    # command-line entry points: their argument is an argv list parsed by argparse, whose
    # errors are SystemExit by design
    "course_lib.tools.doctor.main": "CLI entry point: argv is parsed by argparse (SystemExit on bad input)",
    "course_lib.parallel.train.torch_engine.main": "CLI entry point: argv is parsed by argparse (SystemExit on bad input)",
    # no parameters: there is nothing to pass a bad value to
    "course_lib.datasets.data_dir": "takes no arguments",
    "course_lib.i18n.sentences": "only *parts, which the walk does not fill; a part that is no str is "
                                 "a TypeError (tests/test_i18n.py)",
    "course_lib.datasets.lamb_scaling_table": "takes no arguments",
    "course_lib.datasets.load_cpu_trends": "takes no arguments",
    "course_lib.datapackage.load_data_package": "takes no arguments",
    "course_lib.datasets.load_dnn_models": "takes no arguments",
    "course_lib.datasets.load_hardware": "takes no arguments",
    "course_lib.datasets.load_megatron_configs": "takes no arguments",
    "course_lib.datasets.load_parallel_layouts": "takes no arguments",
    "course_lib.datasets.load_failure_records": "takes no arguments",
    "course_lib.context_cost.parallelism_axes": "takes no arguments",
    "course_lib.datasets.load_training_records": "takes no arguments",
    "course_lib.exercises.serial_to_parallel.bert_flops": "takes no arguments",
    "course_lib.parallel.engine.shm.find_leftovers": "takes no arguments",
    "course_lib.timing.minor_faults": "takes no arguments",
    "course_lib.i18n.language": "takes no arguments",
    "course_lib.timing.cpu_ticks": "takes no arguments",
    "course_lib.parallel.engine.launch.LoggedBarrier": "process layer: built by Launcher.barrier(log_waits=...) around a checked barrier",
    "course_lib.parallel.engine.shm.remove_stale_segments": "takes no arguments",
    "course_lib.parallel.engine.workers.default_start_method": "takes no arguments",
    "course_lib.parallel.engine.workers.fastest_start_method": "takes no arguments",
    "course_lib.timing.keep_freed_memory": "takes no arguments",
    "course_lib.plots.cost.levers_figure": "takes no arguments",
    "course_lib.plots.style.rc_params": "takes no arguments",
    "course_lib.progress.in_notebook": "takes no arguments",
    "course_lib.testing.resource_snapshot": "takes no arguments",
    "course_lib.timing.available_cores": "takes no arguments",
    "course_lib.timing.current_blas_threads": "takes no arguments",
    "course_lib.tools.doctor.find_chromium": "takes no arguments",
    "course_lib.tools.slides.vendor_manifest": "takes no arguments",
    "course_lib.datasets.load_notation": "takes no arguments",
    "course_lib.datasets.notation_markdown": "takes no arguments",
    "course_lib.tools.student.main": "CLI entry point: argv is parsed by argparse (SystemExit on bad input)",
    "course_lib.tools.labsettings.main": "CLI entry point: argv is parsed by argparse (SystemExit on bad input)",
    # the algorithm floor (course_lib/parallel/*.py, tests/test_teaching_core.py): the code a
    # lecture reads holds no argument checks; the trainer's entry point checks everything
    # once (course_lib.parallel.engine.job.check_job), before any process starts
    "course_lib.parallel.data.worker_loop": "teaching core: checked once by train_data_parallel",
    "course_lib.parallel.data.overlap_worker_loop": "teaching core: checked once by train_data_parallel",
    "course_lib.parallel.zero.zero1_worker_loop": "teaching core: checked once by train_data_parallel",
    "course_lib.parallel.context.context_worker_loop": "teaching core: checked once by train_context_parallel",
    "course_lib.parallel.experts.expert_worker_loop": "teaching core: checked once by train_expert_parallel",
    "course_lib.parallel.experts.ExpertShard": "teaching core: built by train_expert_parallel's checked workers",
    "course_lib.parallel.zero.zero2_worker_loop": "teaching core: checked once by train_data_parallel",
    "course_lib.parallel.zero.zero3_worker_loop": "teaching core: checked once by train_data_parallel",
    "course_lib.parallel.zero.LayerChunks": "worker side: built from a checked run's ShmAllReduce",
    "course_lib.parallel.tensor.tensor_forward": "teaching core: checked once by train_tensor_parallel",
    "course_lib.parallel.tensor.tensor_backward": "teaching core: checked once by train_tensor_parallel",
    "course_lib.parallel.tensor.tensor_worker_loop": "teaching core: checked once by train_tensor_parallel",
    "course_lib.parallel.tensor.local_params": "worker side: its model and blocks come from a checked job",
    "course_lib.parallel.tensor_transformer.transformer_worker_loop": "teaching core: checked once by "
                                                                      "train_tensor_parallel",
    "course_lib.parallel.pipeline.stage_worker": "teaching core: checked once by train_pipeline",
    "course_lib.parallel.pipeline.Stage": "teaching core: checked once by train_pipeline",
    "course_lib.parallel.pipeline.Links": "worker side: the buffers a checked pipeline run attached",
    "course_lib.parallel.pool.pool_worker": "teaching core: its pool (WorkerPool) checked its arguments",
    "course_lib.parallel.allreduce.ShmAllReduce": "teaching core: checked once by the trainers",
    "course_lib.parallel.allreduce.PipeAllReduce": "teaching core: checked once by train_data_parallel",
    "course_lib.parallel.allreduce.GlooAllReduce": "teaching core: checked once by train_data_parallel",
    "course_lib.parallel.allreduce.BucketAllReduce": "teaching core: checked once by train_data_parallel",
    "course_lib.parallel.allreduce.ActivationAllReduce": "teaching core: checked once by train_tensor_parallel",
    "course_lib.parallel.train.data.run_worker": "worker side: its job comes from check_job",
    "course_lib.parallel.engine.gloo.free_port": "takes no arguments",
    "course_lib.parallel.engine.helpers.release_helpers": "takes no arguments",
    "course_lib.parallel.engine.helpers.watch_forkserver": "takes no arguments",
    "course_lib.parallel.engine.gloo.require_torch": "takes no arguments",
    "course_lib.parallel.engine.gloo.torch_available": "takes no arguments",
    "course_lib.conv.winograd.winograd_f2x2_3x3": "readable algorithm shown in chapter 06: its checked entry "
                                                  "point is conv2d_winograd",
    "course_lib.models.Model": "a typing.Protocol: the interface of the course's models, not called",
}
#: Besides: exception classes (any message is a valid argument) are not called.

# ------------------------------------------------------------------------ valid values
_RNG = np.random.default_rng(0)
_MODEL = course_lib.models.MLP((8, 6, 5, 3))
_X = _RNG.standard_normal((12, 8)).astype(np.float32)
_Y = _RNG.integers(0, 3, 12)
_PARAMS = _MODEL.init_params(0)
_IMAGE = _RNG.standard_normal((1, 2, 5, 5))
_KERNEL = _RNG.standard_normal((3, 2, 3, 3))


class Fresh:
    """A valid value made anew for every call (figures, widgets, mutable objects)."""

    def __init__(self, make):
        self.make = make


def _figure():
    fig, _ = plt.subplots()
    return fig


def _timeline():
    return course_lib.schedule.simulate_uniform(2, 3)


@functools.cache
def _live_figure(which: str = "a"):
    """A small live figure (made once per ``which``: rendering one takes 0.1 s)."""
    from course_lib.live.widgets import Slider, live_figure
    from course_lib.plots.scaling import laws_figure

    return live_figure(laws_figure, [Slider("p", "p", 0, 1, 0.1, 0.9)], n=4)


def _configs():
    from course_lib.planner import enumerate_configs

    return enumerate_configs(_MODEL, 8, 2, device_flops=1e9, bandwidth=1e9)


#: A valid value for each parameter name (a callable is called for a fresh value).
GOOD = {
    "model": _MODEL,
    "x": _X,
    "y": _Y,
    "params": _PARAMS,
    "grad": np.zeros_like(_PARAMS),
    "logits": _RNG.standard_normal((12, 3)).astype(np.float32),
    "lr": 0.1,
    "base_lr": 0.1,
    "batch_size": 8,
    "batch": 4,
    "base_batch": 4,
    "per_worker_batch": 4,
    "workers": 2,
    "processes": 2,
    "devices": 2,
    "data": 1,
    "pipeline": 2,
    "stages": 2,
    "micro_batches": 3,
    "boundaries": (0, 1, 3),
    "device_counts": (1, 2),
    "device_flops": 1e12,
    "bandwidth": 1e9,
    "nbytes": 1e6,
    "compute_time": 0.01,
    "samples": 1000,
    "flops_per_sample": 1e6,
    "forward_macs": 1e6,
    "time": 10.0,
    "reference": 12.0,
    "seconds": 100.0,
    "efficiency": 0.9,
    "utilisation": 0.5,
    "p": 0.9,
    "s": 8.0,
    "n": 8,
    "speedup": 2.0,
    "scaled_speedup": (1.0, 1.9),
    "t_serial": 10.0,
    "t_parallel": 4.0,
    "target_speedup": 4.0,
    "params_million": 340.0,
    "tokens_million": 1000.0,
    "tokens": 1e9,
    "images_million": 1.28,
    "epochs": 2,
    "device_id": "v100_sxm2_32gb",
    "compute_ms": 50.0,
    "gradient_mb": 100.0,
    "bandwidth_gb_s": 10.0,
    "bandwidth_gbit": 10.0,
    "latency_us": 10.0,
    "overlap": 0.0,
    "peak_flops": 1e14,
    "p_amdahl": 0.9,
    "p_gustafson": 0.9,
    "strong_speedup": (1.0, 1.8),
    "weak_speedup": (1.0, 1.9),
    "steps": 3,
    "sequence_length": 128,
    "in_channels": 3,
    "out_channels": 4,
    "in_features": 3,
    "out_features": 4,
    "kernel_size": 3,
    "input_size": 8,
    "input_shape": (1, 2, 5, 5),
    "weight": _KERNEL,
    "grad_out": _RNG.standard_normal((1, 3, 5, 5)),
    "cols": _RNG.standard_normal((25, 18)),
    "image": 8,
    "kernel": 3,
    "stride": 1,
    "c_in": 3,
    "c_out": 4,
    "n_items": 10,
    "parts": 3,
    "n_samples": 20,
    "seed": 0,
    "chapter": 2,
    "name": "hardware.csv",
    "record_type": course_lib.datasets.HardwareDevice,
    "fn": lambda: None,
    "fig": Fresh(_figure),
    "axis": Fresh(lambda: _figure().axes[0].xaxis),
    "hi": 64.0,
    "timeline": Fresh(_timeline),
    "configs": Fresh(_configs),
    "best": Fresh(lambda: [None, _configs()[0]]),
    "memory": 1e9,
    "measured": (0.4, 0.2),
    "labels": ("a", "b"),
    "runs": (),
    "results": (),
    "layers": (("conv0", "conv"), ("fc", "linear")),
    "graph": Fresh(lambda: course_lib.dataflow.training_graph((("conv0", "conv"), ("fc", "linear")))),
    "models": Fresh(lambda: course_lib.datasets.load_dnn_models()),
    "hardware": Fresh(lambda: course_lib.datasets.load_hardware()),
    "trends": Fresh(lambda: course_lib.datasets.load_cpu_trends()),
    "cells": ({"cell_type": "markdown", "source": "# t", "metadata": {}},),
    "nb": Fresh(lambda: nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t")])),
    "decks": (),
    "deck_dir": Fresh(lambda: os.path.join(os.getcwd(), "decks")),
    "vendor_dir": Fresh(lambda: os.path.join(os.getcwd(), "vendor")),
    "notebooks": ("missing.ipynb",),
    "plot": Fresh(lambda: course_lib.plots.scaling.laws_figure),
    "sliders": Fresh(lambda: [course_lib.live.widgets.Slider("p", "p", 0, 1, 0.1, 0.9)]),
    "names": ("p",),
    "answer": 1.0,
    "measurement": types.SimpleNamespace(
        processes=np.array([1, 2]), speedup=np.array([1.0, 1.6]), efficiency=np.array([1.0, 0.8])
    ),
}

#: Valid values where a parameter name means something else than in :data:`GOOD`.
GOOD_FOR = {
    "course_lib.parallel.partition.chunk_bounds": {"n": 100},
    "course_lib.scaling.fit_gustafson": {"n": (1, 2)},
    "course_lib.scaling.fit_amdahl": {"n": (1, 2, 4), "speedup": (1.0, 1.8, 3.0)},
    "course_lib.plots.scaling.measured_speedup_figure": {"n": (1, 2, 4), "speedup": (1.0, 1.8, 3.0)},
    "course_lib.plots.parallel.strong_weak_figure": {"n": (1, 2)},
    "course_lib.plots.pipeline.bubble_figure": {"stages": (2, 4), "micro_batches": (4, 8)},
    "course_lib.plots.pipeline.hybrid_explorer_figure": {"devices": 2, "device_counts": (1, 2)},
    "course_lib.cost.cnn_calculator_estimate": {"model": "ResNet-50"},
    "course_lib.plots.cost.cnn_calculator_figure": {"model": "ResNet-50"},
    "course_lib.plots.conv.im2col_numbers_figure": {"x": _IMAGE[:, :, :3, :3], "weight": _KERNEL[:1, :, :2, :2]},
    "course_lib.conv.im2col.im2col": {"x": _IMAGE},
    "course_lib.conv.algorithms.conv2d": {"x": _IMAGE},
    "course_lib.conv.im2col.conv2d_direct": {"x": _IMAGE},
    "course_lib.conv.algorithms.conv2d_backward": {"x": _IMAGE, "kernel_size": 3},
    "course_lib.conv.im2col.col2im": {"kernel_size": 3, "padding": 1},
    "course_lib.plots.cost.time_ladder_figure": {"seconds": (1.0, 60.0)},
    "course_lib.plots.conv.speed_bars_figure": {"seconds": (1.0, 2.0)},
    "course_lib.plots.trends.bert_estimates_figure": {"seconds": (1.0, 60.0)},
    "course_lib.exercises.data_parallelism.ex2_karp_flatt": {"speedup": 1.6, "workers": 2},
    "course_lib.exercises.pipeline_parallelism.smallest_micro_batches": {"stages": 4, "target": 0.2},
    "course_lib.datasets.read_csv": {"name": "hardware.csv"},
    "course_lib.slides.export_deck": {"name": "deck"},
    "course_lib.live.widgets.link_sliders": {"source": Fresh(lambda: _live_figure("a")), "target": Fresh(lambda: _live_figure("b"))},
    "course_lib.live.link_sliders": {"source": Fresh(lambda: _live_figure("a")), "target": Fresh(lambda: _live_figure("b"))},
}


# ------------------------------------------------------------------------ discovery
def _public(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n for n, v in vars(module).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        ]
    return [(n, getattr(module, n)) for n in names if callable(getattr(module, n))]


def _modules():
    yield course_lib
    for info in pkgutil.walk_packages(course_lib.__path__, "course_lib."):
        yield importlib.import_module(info.name)


def _walk():
    """(qualified name, callable, target parameters) of every public callable."""
    found, seen = [], set()
    for module in _modules():
        parts = module.__name__.split(".")
        if module.__name__ in SKIP_MODULES or any(part.startswith("_") for part in parts):
            continue  # private modules are no public API
        for name, fn in _public(module):
            qual = f"{module.__name__}.{name}"
            if qual in seen:
                continue
            seen.add(qual)
            found.append((qual, fn))
    return found


def _is_exception(fn):
    return isinstance(fn, type) and issubclass(fn, BaseException)


ALL = _walk()
WALKED = [(q, fn) for q, fn in ALL if q not in SKIP and not _is_exception(fn)]


@functools.cache  # asked for every case of a function (thousands of times): read its signature once
def _parameters(fn):
    sig = inspect.signature(fn)
    params = tuple(
        p for p in sig.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    )
    required = tuple(p for p in params if p.default is p.empty)
    return params, required


def _bad_for(param, key):
    """Whether BAD[key] is a bad value for ``param``."""
    value = BAD[key]
    if param.default is not param.empty and param.default is value:
        return False  # passing the default is not passing a bad value
    if isinstance(value, str) and "Path" in str(param.annotation):
        return False  # a string is a valid path
    return True


def _good(qual, name):
    """A valid value for parameter ``name`` of ``qual``, and whether one is known."""
    table = GOOD_FOR.get(qual, {})
    if name in table:
        value = table[name]
    elif name in GOOD:
        value = GOOD[name]
    else:
        return None, False
    return (value.make() if isinstance(value, Fresh) else value), True


def _arguments(qual, fn, key, where):
    """Keyword arguments with BAD[key] in parameter ``where`` (None: in every target)."""
    params, required = _parameters(fn)
    kwargs = {}
    for p in required or params:
        if where is None or p.name == where:
            kwargs[p.name] = BAD[key]
            continue
        value, known = _good(qual, p.name)
        if known:
            kwargs[p.name] = value
        elif p.default is p.empty:
            kwargs[p.name] = BAD[key]
    return kwargs


def _show(value):
    for key, bad in BAD.items():
        if value is bad:
            return key
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


# ------------------------------------------------------------------------ guard rails
class ProcessStarted(Exception):
    """Raised when a function under test starts a process (never a TypeError/ValueError)."""


class CallTimedOut(Exception):
    """Raised when one call takes longer than CALL_TIMEOUT."""


def _no_process(*args, **kwargs):
    raise ProcessStarted("started a process before rejecting its arguments")


def _alarm(signum, frame):
    raise CallTimedOut("no answer within the time limit")


@pytest.fixture(scope="module", autouse=True)
def _sandbox(tmp_path_factory):
    """Run the walk in a scratch folder, with process starts blocked."""
    old_cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("walk"))
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(multiprocessing.process.BaseProcess, "start", _no_process)
        mp.setattr(subprocess.Popen, "_execute_child", _no_process)
        try:
            yield
        finally:
            signal.signal(signal.SIGALRM, old_handler)
            os.chdir(old_cwd)
            plt.close("all")


def _call(fn, args, kwargs, timeout=None):
    """Call ``fn`` quietly with a time limit; return the exception it raised, or None."""
    signal.setitimer(signal.ITIMER_REAL, timeout or CALL_TIMEOUT)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)
    except BaseException as exc:  # the type is what is being tested
        if isinstance(exc, (KeyboardInterrupt,)):
            raise
        return exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        plt.close("all")
    return None


def _call_isolated(fn, args, kwargs):
    """Like :func:`_call`, in a forked child with a memory cap (for calls that blow up).

    Returns the exception type name and message, or None.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(read)
            with open("/proc/self/statm") as f:
                pages = int(f.read().split()[0])
            limit = pages * resource.getpagesize() + 512 * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            exc = _call(fn, args, kwargs, timeout=ISOLATED_TIMEOUT)
            text = "" if exc is None else f"{type(exc).__name__}\n{exc}"
            os.write(write, text.encode()[:4000])
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        out = f.read().decode()
    _, status = os.waitpid(pid, 0)
    if not out and status:
        return "killed", f"child ended with status {status}"
    if not out:
        return None
    name, _, message = out.partition("\n")
    return name, message


# ------------------------------------------------------------------------ expected failures
#: Public functions that do not yet reject bad input cleanly: name -> (what fails, isolate).
#: ``isolate``: the bad call exhausts memory or hangs, so every call of that function runs
#: in a forked child with a memory cap and a short time limit. Remove an entry once the
#: function is fixed (the strict xfail then fails as XPASS to say so).
KNOWN_FAILURES: dict[str, tuple[str, bool]] = {}

#: Seconds an isolated call may take (it runs in a child process).
ISOLATED_TIMEOUT = 0.5


def _param(qual, fn):
    marks = []
    if qual in KNOWN_FAILURES:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[qual][0]))
    return pytest.param(qual, fn, id=qual.removeprefix("course_lib."), marks=marks)


def _cases(fn) -> list[tuple[str | None, str]]:
    """Every (parameter, bad value) pair to try on ``fn``: each bad value that is bad for
    every required parameter at once (``where`` None), and each that is bad for one of them."""
    params, required = _parameters(fn)
    targets = required or params
    cases = []
    for where in [None, *(p.name for p in targets)]:
        target_params = targets if where is None else [p for p in targets if p.name == where]
        cases += [(where, key) for key in BAD if all(_bad_for(p, key) for p in target_params)]
    return cases


@pytest.mark.parametrize(("qual", "fn"), [_param(q, f) for q, f in WALKED])
def test_bad_arguments_raise_type_or_value_error(qual, fn):
    """Every pair of :func:`_cases`, in turn (all of them: the space is a few dozen pairs per
    function, cheaper to walk than to sample)."""
    params, required = _parameters(fn)
    if not (required or params):
        pytest.fail(f"{qual} takes no arguments: add it to SKIP")
    for where, key in _cases(fn):
        args, kwargs = [], _arguments(qual, fn, key, where)

        def call(kwargs=kwargs):  # the call as text, for a failure's message only (repr of arrays is slow)
            return ", ".join(f"{k}={_show(v)}" for k, v in kwargs.items())

        if qual in KNOWN_FAILURES and KNOWN_FAILURES[qual][1]:
            outcome = _call_isolated(fn, args, kwargs)
            if outcome is not None and outcome[0] not in ("TypeError", "ValueError"):
                raise AssertionError(f"{qual}({call()}) raised {outcome[0]}: {outcome[1][:300]}")
            continue
        exc = _call(fn, args, kwargs)
        if exc is not None and not isinstance(exc, (TypeError, ValueError)):
            raise AssertionError(f"{qual}({call()}) raised {type(exc).__name__}: {str(exc)[:300]}") from exc


def test_walk_covers_the_package():
    """The walk finds the modules' public functions and every skip names a real one."""
    names = {q for q, _ in ALL}
    for module in SKIP_MODULES:
        importlib.import_module(module)
    assert not set(SKIP) - names, f"stale SKIP entries: {set(SKIP) - names}"
    assert not set(KNOWN_FAILURES) - names, f"stale KNOWN_FAILURES: {set(KNOWN_FAILURES) - names}"
    for required in ("course_lib.parallel.train.reference.train_serial", "course_lib.planner.best_config",
                     "course_lib.plots.scaling.amdahl_figure", "course_lib.exercises.check"):
        assert required in names
    assert len(WALKED) > 150


# ------------------------------------------------------------------------ the reported bugs
def test_models_reject_wrong_types_naming_the_parameter():
    from course_lib.models import MLP, sgd_step, softmax_cross_entropy
    from course_lib.parallel.train.reference import train_serial

    y = np.array([0, 1])
    with pytest.raises(TypeError, match="logits"):
        softmax_cross_entropy(None, y)
    params = np.zeros(3, np.float32)
    with pytest.raises(TypeError, match="params"):
        sgd_step("abc", params, 0.1)
    with pytest.raises(TypeError, match=r"model must be a course model .*, got NoneType"):
        train_serial(None, np.zeros((2, 4), np.float32), y)
    with pytest.raises(ValueError, match="lr must be finite"):
        sgd_step(params, params, 10**400)
    assert math.isfinite(train_serial(MLP((4, 3, 2)), np.zeros((2, 4), np.float32), y, epochs=1, batch_size=2).loss[0])


def test_hybrid_rejects_wrong_types_naming_the_parameter():
    from course_lib import planner
    from course_lib.models import MLP

    model = MLP((8, 6, 5, 3))
    with pytest.raises(TypeError, match=r"model must be an MLP, got NoneType"):
        planner.best_config(None, 64, 8, device_flops=1e9, bandwidth=1e9)
    with pytest.raises(TypeError, match=r"model must be an MLP, got str"):
        planner.enumerate_configs("abc", 64, 8, device_flops=1e9, bandwidth=1e9)
    with pytest.raises(TypeError, match=r"model must be an MLP, got list"):
        planner.scheme_comparison([[1, [2]]], 64, 2)
    with pytest.raises(TypeError, match=r"model must be an MLP, got float"):
        planner.stage_params(float("nan"), (0, 1, 3))
    with pytest.raises(TypeError, match="boundaries"):
        planner.stage_activation_widths(model, "abc")
    with pytest.raises(TypeError, match="boundaries"):
        planner.stage_params(model, [[1, [2]]])
