"""The list of functions a learner writes, and the runner that grades them.

:data:`TEACHING_CORE` is the one list: the scratch edition stubs these functions
(:mod:`course_lib.tools.scratch`), its README lists them in this order (the order to write
them: chapter order, and within a chapter what a function needs first), and
:func:`grade_all` checks them. Each function's check lives in a grading module
(``course_lib.grading.check_*``): a function without arguments that runs the learner's code
against the course's references and raises :class:`Mistake`, whose message names the likely
cause, when something is wrong.

:func:`grade` turns whatever a check ends with into an :class:`Outcome`: passed; not written
yet (a stub's ``NotImplementedError``, or that of a function it needs); a :class:`Mistake`;
an exception of the learner's code, shown with the learner's own frames only
(:func:`learner_traceback`); a hang (``WorkerTimeout`` from a process run, naming the hung
worker, or a function run in this process that does not return within
:data:`IN_PROCESS_LIMIT` seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import os
import re
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._validate import check_sequence, check_type

__all__ = [
    "GRADER_TIMEOUT",
    "IN_PROCESS_LIMIT",
    "NOT_WRITTEN",
    "TEACHING_CORE",
    "Function",
    "Mistake",
    "Outcome",
    "grade",
    "grade_all",
    "learner_traceback",
    "main",
    "not_written_message",
    "select",
]

#: Seconds without progress after which a process run of the learner's code is stopped
#: (``WorkerTimeout``, naming the hung worker). The course's own runs take milliseconds here.
GRADER_TIMEOUT = 3.0
#: Seconds a function the check runs in this process may take before it counts as hung.
IN_PROCESS_LIMIT = 15.0
#: How a stub's ``NotImplementedError`` begins: "<qualname> is not written yet".
NOT_WRITTEN = re.compile(r"^(?P<qualname>[\w.]+) is not written yet")


class Mistake(AssertionError):
    """What a check found wrong, in words the learner can act on (the message starts with
    the function's name)."""


@dataclass(frozen=True)
class Function:
    """One function of the teaching core that the learner writes.

    ``module`` and ``qualname`` say where it is (``"course_lib.parallel.allreduce"``,
    ``"ShmAllReduce.reduce_scatter"``); ``grader`` names the grading module whose ``CHECKS``
    and ``HINTS`` hold its check and hints (``"check_allreduce"``: ``course_lib.grading.check_allreduce``);
    ``needs`` the qualnames of the functions its check runs besides it (graded first).
    """

    module: str
    qualname: str
    grader: str
    needs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The function's own name (``reduce_scatter``): what ``make check NAME=`` takes (with
        every function of that name: :attr:`check_name` names this one alone)."""
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def check_name(self) -> str:
        """What ``make check NAME=`` takes to check this function alone: its own name, or its
        qualname where that name also selects another function of :data:`TEACHING_CORE`
        (``Stage.forward`` and ``RingAttention.forward``; ``ShmAllReduce.allreduce``, whose name
        is its module's). ``im2col`` is both a function and its module: it has no other name."""
        same = [f for f in TEACHING_CORE if self.name in (f.name, f.module.rsplit(".", 1)[-1])]
        return self.name if len(same) <= 1 else self.qualname

    @property
    def path(self) -> str:
        """Its file, relative to the course folder (``course_lib/parallel/allreduce.py``)."""
        return self.module.replace(".", "/") + ".py"

    def obj(self):
        """The function as the library holds it now (a method from its class)."""
        obj = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        return obj

    def check(self):
        """Its check: a function without arguments (raises :class:`Mistake` when wrong)."""
        return importlib.import_module(f"{__package__}.{self.grader}").CHECKS[self.qualname]

    def hints(self) -> tuple[str, ...]:
        """Its hints, from the first nudge to the last (Markdown, for the edition's README)."""
        return tuple(importlib.import_module(f"{__package__}.{self.grader}").HINTS[self.qualname])


#: The shared-memory all-reduce: what the context- and expert-parallel trainers sum their gradients with.
_ALLREDUCE = ("ShmAllReduce.reduce_scatter", "ShmAllReduce.all_gather", "ShmAllReduce.allreduce")

#: The functions the learner writes, in the order to write them (one line each).
TEACHING_CORE: tuple[Function, ...] = (
    Function("course_lib.conv.im2col", "im2col", "check_conv"),
    Function("course_lib.conv.im2col", "col2im", "check_conv"),
    Function("course_lib.parallel.data", "worker_loop", "check_data"),
    Function("course_lib.parallel.allreduce", "ShmAllReduce.reduce_scatter", "check_allreduce"),
    Function("course_lib.parallel.allreduce", "ShmAllReduce.all_gather", "check_allreduce"),
    Function("course_lib.parallel.allreduce", "ShmAllReduce.allreduce", "check_allreduce",
             ("ShmAllReduce.reduce_scatter", "ShmAllReduce.all_gather")),
    Function("course_lib.parallel.allreduce", "BucketAllReduce.reduce_bucket", "check_allreduce"),
    Function("course_lib.parallel.data", "overlap_worker_loop", "check_data", ("BucketAllReduce.reduce_bucket",)),
    Function("course_lib.parallel.allreduce", "WireAllReduce.reduce_bucket", "check_allreduce",
             ("BucketAllReduce.reduce_bucket",)),
    Function("course_lib.staleness", "stale_loop", "check_staleness"),
    Function("course_lib.parallel.zero", "zero1_worker_loop", "check_data",
             ("ShmAllReduce.reduce_scatter", "ShmAllReduce.all_gather")),
    Function("course_lib.parallel.zero", "zero3_worker_loop", "check_data"),
    Function("course_lib.schedule", "stage_order", "check_pipeline"),
    Function("course_lib.parallel.pipeline", "Stage.layers_forward", "check_pipeline"),
    Function("course_lib.parallel.pipeline", "Stage.layers_backward", "check_pipeline"),
    Function("course_lib.parallel.pipeline", "Stage.forward", "check_pipeline", ("Stage.layers_forward",)),
    Function("course_lib.parallel.pipeline", "Stage.backward", "check_pipeline", ("Stage.layers_backward",)),
    Function("course_lib.parallel.pipeline", "stage_worker", "check_pipeline",
             ("stage_order", "Stage.layers_forward", "Stage.layers_backward", "Stage.forward", "Stage.backward")),
    Function("course_lib.parallel.tensor", "tensor_forward", "check_tensor"),
    Function("course_lib.parallel.tensor", "tensor_backward", "check_tensor", ("tensor_forward",)),
    Function("course_lib.parallel.context", "OnlineSoftmax.add", "check_context"),
    Function("course_lib.parallel.context", "RingAttention.forward", "check_context",
             ("OnlineSoftmax.add", *_ALLREDUCE)),
    Function("course_lib.parallel.context", "AllToAllAttention.to_heads", "check_context", _ALLREDUCE),
    Function("course_lib.parallel.experts", "ExpertShard.dispatch", "check_experts"),
    Function("course_lib.parallel.experts", "ExpertShard.combine", "check_experts",
             ("ExpertShard.dispatch", *_ALLREDUCE)),
    Function("course_lib.parallel.checkpoint", "save_shard", "check_checkpoint"),
    Function("course_lib.parallel.checkpoint", "write_checkpoint", "check_checkpoint", ("save_shard",)),
    Function("course_lib.parallel.checkpoint", "load_checkpoint", "check_checkpoint"),
    Function("course_lib.parallel.checkpoint", "latest_checkpoint", "check_checkpoint", ("load_checkpoint",)),
)


def not_written_message(function: Function, where: str) -> str:
    """The message of ``function``'s stub: not written yet, what to read (``where``: the
    chapter and section), where to write it and how to check it."""
    check_type(function, "function", Function, "a Function of TEACHING_CORE")
    check_type(where, "where", str, "the chapter and section to read (str)")
    return (f"{function.qualname} is not written yet. Read {where}; then write its body in "
            f"{function.path} (its docstring and comments say what it does) and run "
            f"`make check NAME={function.check_name}`.")


def select(names: Iterable[str] = ()) -> list[Function]:
    """The functions ``names`` asks for, in :data:`TEACHING_CORE`'s order (all of them when
    empty). A name is a function's qualname or own name (``ShmAllReduce.all_gather``,
    ``all_gather``) or its module's last part (``allreduce``: every function of that module).
    An unknown name is a ValueError that lists the known ones."""
    names = check_sequence(names, "names", str, "function or module names (str)")
    if not names:
        return list(TEACHING_CORE)
    chosen = []
    for name in names:
        found = [f for f in TEACHING_CORE
                 if name in (f.qualname, f.name, f.module.rsplit(".", 1)[-1], f.module)]
        if not found:
            known = ", ".join(dict.fromkeys(f.name for f in TEACHING_CORE))
            raise ValueError(f"no function or module named {name!r}; the functions you write: {known}")
        chosen += found
    return [f for f in TEACHING_CORE if f in chosen]


def _by_qualname(qualname: str) -> Function:
    return next(f for f in TEACHING_CORE if f.qualname == qualname)


# ----------------------------------------------------------------------- outcomes
@dataclass(frozen=True)
class Outcome:
    """How one function fared: ``status`` is ``"passed"``, ``"not written"``, ``"needs"``
    (a function it needs is not written or does not pass yet), ``"failed"`` (a
    :class:`Mistake`), ``"raised"`` (the learner's code raised: ``message`` holds its
    traceback) or ``"hangs"``; ``message`` says what to do; ``seconds`` how long it took."""

    function: Function
    status: str
    message: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def learner_files() -> set[str]:
    """The files the learner writes in (absolute paths): those of :data:`TEACHING_CORE`."""
    root = _course_root()
    return {os.path.realpath(root / f.path) for f in TEACHING_CORE}


def _course_root() -> Path:
    return Path(importlib.import_module("course_lib").__file__).resolve().parent.parent


def _shown(path: str) -> str:
    try:
        return os.path.relpath(os.path.realpath(path), _course_root())
    except ValueError:  # pragma: no cover - another drive (Windows)
        return path


def learner_traceback(exc: BaseException) -> str:
    """``exc`` as Python shows it, with only the frames of the learner's files (and the
    frame it was raised in, if that is elsewhere): the course's machinery left out.

    Works on an exception raised here and on a :class:`WorkerError` from a worker process
    (whose traceback is text).
    """
    from ..parallel.engine.errors import WorkerError

    check_type(exc, "exc", BaseException, "an exception")
    mine = learner_files()
    if isinstance(exc, WorkerError):
        frames = _parse_frames(exc.remote_traceback)
        last = exc.remote_traceback.rstrip().splitlines()[-1] if exc.remote_traceback.strip() else str(exc)
        head = f"worker {exc.rank} raised {exc.exc_type}"
    else:
        frames = [(f.filename, f.lineno, f.name, f.line or "") for f in traceback.extract_tb(exc.__traceback__)]
        last = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
        head = None
    kept = [fr for fr in frames if os.path.realpath(fr[0]) in mine]
    if frames and (not kept or kept[-1] != frames[-1]):
        kept.append(frames[-1])  # where it was raised: a library function your code called
    lines = ([head + ":"] if head else []) + ["Traceback (your code):"]
    for filename, lineno, name, code in kept:
        lines.append(f'  File "{_shown(filename)}", line {lineno}, in {name}')
        if code:
            lines.append(f"    {code.strip()}")
    return "\n".join(lines + [last])


_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')


def _parse_frames(text: str) -> list[tuple[str, int, str, str]]:
    lines, frames = text.splitlines(), []
    for i, line in enumerate(lines):
        m = _FRAME.match(line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and lines[i + 1].startswith("    ") else ""
            frames.append((m["file"], int(m["line"]), m["name"], code))
    return frames


class _Hang(Exception):
    """A function run in this process did not return in time."""


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`_Hang` in this thread after ``seconds`` (SIGALRM; a no-op where there is
    none, or off the main thread). An alarm set before (pytest-timeout's) is put back."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def ring(signum, frame):
        raise _Hang()

    t0 = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, ring)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:  # someone else's alarm: what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(old_delay - (time.monotonic() - t0), 1e-3), old_interval)


def _not_written(exc: BaseException) -> str | None:
    """The message of a stub's NotImplementedError in ``exc`` (or a worker's), else None."""
    from ..parallel.engine.errors import WorkerError

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, NotImplementedError) and NOT_WRITTEN.match(str(exc)):
            return str(exc)
        if isinstance(exc, WorkerError) and exc.exc_type == "NotImplementedError":
            if exc.original is not None and NOT_WRITTEN.match(str(exc.original)):
                return str(exc.original)
            text = str(exc).split(": ", 1)[-1].split("\n\n--- traceback", 1)[0]
            if NOT_WRITTEN.match(text):
                return text
        exc = exc.__cause__ or exc.__context__
    return None


def stub_message(function: Function) -> str | None:
    """The message of ``function``'s stub if its body is still the stub (nothing but
    ``raise NotImplementedError("... is not written yet ...")`` after the docstring), else None."""
    import ast
    import textwrap

    check_type(function, "function", Function, "a Function of TEACHING_CORE")
    try:
        node = ast.parse(textwrap.dedent(source_of(function))).body[0]
    except (OSError, TypeError, SyntaxError):  # pragma: no cover - no source to read
        return None
    body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if len(body) == 1 and isinstance(body[0], ast.Raise) and isinstance(body[0].exc, ast.Call):
        args = body[0].exc.args
        if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            if NOT_WRITTEN.match(args[0].value):
                return args[0].value
    return None


def grade(function: Function, *, run_stubs: bool = False) -> Outcome:
    """Run ``function``'s check and say how it fared (never raises for the learner's code;
    KeyboardInterrupt still stops it). A function whose body is still its stub is not run,
    unless ``run_stubs`` (the tests: its check must then end with "not written yet" too)."""
    from ..parallel.engine.errors import WorkerError, WorkerTimeout

    check_type(function, "function", Function, "a Function of TEACHING_CORE")
    t0 = time.perf_counter()

    def outcome(status: str, message: str = "") -> Outcome:
        return Outcome(function, status, message, time.perf_counter() - t0)

    stub = None if run_stubs else stub_message(function)
    if stub is not None:
        return outcome("not written", stub)
    try:
        with _deadline(IN_PROCESS_LIMIT):
            function.check()()
    except Mistake as exc:
        return outcome("failed", str(exc))
    except WorkerTimeout as exc:
        said = str(exc).replace(" Increase `timeout` if the work is just slow.", "")
        return outcome("hangs", f"{function.qualname} hangs: {said} A worker waits for something another never "
                                "does (a collective only some workers join, a message never sent).")
    except _Hang:
        return outcome("hangs", f"{function.qualname} did not return within {IN_PROCESS_LIMIT:g} s "
                                "(a loop that never ends?)")
    except Exception as exc:  # noqa: BLE001 - the learner's code: any exception
        text = _not_written(exc)
        if text is not None:
            qualname = NOT_WRITTEN.match(text)["qualname"]
            if qualname == function.qualname:
                return outcome("not written", text)
            return outcome("needs", f"{function.qualname} needs {qualname}, which is not written yet "
                                    f"(`make check NAME={_by_qualname(qualname).check_name}`)")
        if isinstance(exc, WorkerError) and isinstance(exc.original, Mistake):
            return outcome("failed", str(exc.original))
        return outcome("raised", f"{function.qualname} raised an exception:\n{learner_traceback(exc)}")
    return outcome("passed")


def grade_all(names: Iterable[str] = ()) -> list[Outcome]:
    """Grade the functions ``names`` selects (:func:`select`; all when empty) and those they
    need, in :data:`TEACHING_CORE`'s order. A function whose needs do not pass is not run:
    its outcome says which to fix first."""
    wanted = select(names)
    todo, stack = set(), list(wanted)
    while stack:
        f = stack.pop()
        if f not in todo:
            todo.add(f)
            stack += [_by_qualname(q) for q in f.needs]
    done: dict[str, Outcome] = {}
    for f in (f for f in TEACHING_CORE if f in todo):
        blocked = [q for q in f.needs if not done[q].passed]
        stub = stub_message(f)
        if stub is not None:
            done[f.qualname] = Outcome(f, "not written", stub)
        elif blocked:
            done[f.qualname] = Outcome(f, "needs", f"{f.qualname} needs " + ", ".join(
                f"{q} ({done[q].status})" for q in blocked) + ": make those pass first")
        else:
            done[f.qualname] = grade(f)
    return list(done.values())


_LABEL = {"passed": "passed", "not written": "not written yet", "needs": "waits", "failed": "FAILED",
          "raised": "RAISED", "hangs": "HANGS"}


def report(outcomes: Sequence[Outcome], out=None) -> None:
    """Print ``outcomes``, one block each, and a summary line with what to do next."""
    out = out or sys.stdout
    width = max((len(o.function.qualname) for o in outcomes), default=10)
    for i, o in enumerate(outcomes, 1):
        print(f"{i:2d}. {o.function.qualname:<{width}}  {_LABEL[o.status]}  ({o.seconds:.1f} s)", file=out)
        if not o.passed:
            print("\n".join("      " + line for line in o.message.splitlines()), file=out)
    counts = {s: sum(o.status == s for o in outcomes) for s in _LABEL}
    summary = ", ".join(f"{n} {_LABEL[s] if s != 'passed' else 'passed'}" for s, n in counts.items() if n)
    print(f"\n{summary}.", file=out)
    first = next((o for o in outcomes if not o.passed), None)
    if first is not None:
        print(f"Next: {first.function.qualname} (`make check NAME={first.function.check_name}`).", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m course_lib check [NAME ...] [--list]``: grade the functions you write."""
    parser = argparse.ArgumentParser(
        prog="python -m course_lib check",
        description="Check the functions of the teaching core against the course's references "
                    "(the scratch edition: `make check`, `make check NAME=allreduce`).")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="a function (reduce_scatter) or a module (allreduce); default: every function")
    parser.add_argument("--list", action="store_true", help="list the functions in the order to write them")
    args = parser.parse_args(sys.argv[1:] if argv is None else check_sequence(argv, "argv", str, "a list of str"))
    try:
        chosen = select(args.names)
    except ValueError as exc:
        print(f"check: error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for f in chosen:
            print(f"{f.qualname:<30} {f.path}")
        return 0
    print(f"Checking {len(chosen)} function(s) against the course's references ...\n", flush=True)
    outcomes = grade_all(args.names)
    report(outcomes)
    return 0 if all(o.passed for o in outcomes) else 1


def source_of(function: Function) -> str:
    """The source of ``function`` as the library holds it now (decorators included)."""
    return inspect.getsource(inspect.unwrap(function.obj()))
