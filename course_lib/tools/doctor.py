"""Environment diagnosis: ``python -m course_lib doctor``.

Prints what a learner needs when something does not work - Python, JupyterLab,
ipywidgets and its JupyterLab front-end extension, matplotlib, numpy's BLAS and its
threads, CPU cores, the multiprocessing start method, free space in ``/dev/shm`` and the
optional parts (torch, the slide and browser-test tools) - each problem with a one-line
fix. The exit status is 1 when something required is missing, else 0.

Every check is a small function returning a :class:`Check`; what it probes (package
versions, files, the CPU count ...) goes through the module-level helpers ``_dist_version``,
``_which``, ``_disk_free`` ... so tests can replace them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..i18n import tr, tr_n

__all__ = ["Check", "REQUIRED", "find_chromium", "run_checks", "format_report", "main"]

OK, WARN, FAIL, INFO = "ok", "warn", "FAIL", "--"

#: Minimum and exclusive maximum versions of the required packages (as in
#: pyproject.toml; ``tests/test_doctor.py`` checks the two agree).
REQUIRED: dict[str, tuple[str, str]] = {
    "jupyterlab": ("4.2", "5"),
    "ipywidgets": ("8.1", "9"),
    "matplotlib": ("3.7", "4"),
    "numpy": ("1.24", "3"),
    "threadpoolctl": ("3.1", "4"),
}
PYTHON_MIN = (3, 10)
#: /dev/shm below this many bytes free: the data-parallel chapter's shared-memory
#: all-reduce (a few MB per worker) and torch's DataLoader may fail.
SHM_WARN_BYTES = 64 * 2**20
WIDGET_EXTENSION = ("@jupyter-widgets", "jupyterlab-manager")


@dataclass(frozen=True)
class Check:
    """One line of the report.

    Attributes
    ----------
    name : str
        What was checked.
    status : str
        ``"ok"``, ``"warn"`` (works, but something will be slow or fragile), ``"FAIL"``
        (required and missing or broken: the exit status becomes 1) or ``"--"``
        (optional part absent; nothing breaks).
    detail : str
        What was found.
    fix : str
        One line that fixes the problem (empty when there is none).
    """

    name: str
    status: str
    detail: str
    fix: str = ""

    def __post_init__(self):
        if self.status not in (OK, WARN, FAIL, INFO):
            raise ValueError(f"status must be one of ok, warn, FAIL, --; got {self.status!r}")


# ------------------------------------------------------------------ probes (patchable)
def _dist_version(dist: str) -> str | None:
    """Installed version of distribution ``dist`` in this environment, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _which(cmd: str) -> str | None:
    return shutil.which(cmd)


def _disk_free(path: str) -> int | None:
    """Free bytes on the file system holding ``path`` (None if it does not exist)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _cpu_counts() -> tuple[int | None, int | None]:
    """(logical CPUs of the machine, CPUs this process may run on)."""
    total = os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = total
    return total, usable


def _blas_info() -> list[dict]:
    """threadpoolctl's description of the BLAS libraries numpy loaded."""
    import numpy  # noqa: F401  (loads the BLAS so threadpoolctl can see it)
    from threadpoolctl import threadpool_info

    return [i for i in threadpool_info() if i.get("user_api") == "blas"]


def _start_method() -> str:
    import multiprocessing

    return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_context().get_start_method()


def _matplotlib_backend() -> str:
    """The configured backend, without importing pyplot or resolving 'auto'."""
    import matplotlib

    backend = matplotlib.rcParams._get_backend_or_none()  # None: auto-select (fine)
    return backend or "auto"


def _kernel_argv() -> list[str] | None:
    """argv of the ``python3`` kernel that JupyterLab from this environment starts."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError:
        return None
    try:
        return list(KernelSpecManager().get_kernel_spec("python3").argv)
    except NoSuchKernel:
        return None


def _run_python(python: str, code: str) -> tuple[int, str]:
    """Run ``python -c code``; (return code, stripped stdout+stderr)."""
    try:
        proc = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _own_prefix() -> Path:
    """The environment the doctor runs in (``sys.prefix``, symlinks resolved)."""
    return Path(sys.prefix).resolve()


def _same_path(a: Path | str, b: Path | str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def shown(path: Path | str) -> str:
    """``path`` as the report shows it: relative to the course folder when inside it, else
    under ``~`` when in the home folder (a report stored in a notebook names no machine's
    folders), else as it is (a system path such as ``/usr/bin/npm``).

    Examples
    --------
    >>> from course_lib.tools.paths import repo_root
    >>> shown(repo_root() / ".venv" / "bin" / "python")
    '.venv/bin/python'
    >>> shown(Path.home() / "bin" / "jupyter").startswith("~")
    True
    >>> shown("/usr/bin/npm")
    '/usr/bin/npm'
    """
    path = Path(path)
    try:
        from .paths import repo_root

        return path.relative_to(repo_root()).as_posix()
    except (ValueError, OSError):
        pass
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except (ValueError, RuntimeError):
        return str(path)


def lecturer_edition() -> bool:
    """True in a clone of the course's repository (it has tests/ and ``make slides``), False
    in the student edition, which has neither: its report leaves out the lecturer's tools."""
    try:
        from .paths import repo_root

        return (repo_root() / "tests").is_dir()
    except ValueError:
        return False


def _labextension_dirs(prefix: Path) -> list[Path]:
    """Where a JupyterLab installed in ``prefix`` looks for prebuilt extensions.

    That is ``prefix/share/jupyter/labextensions`` plus the directories every JupyterLab
    of this user searches (``$JUPYTER_PATH``, the user's and the system's). jupyter_core's
    list for the doctor also holds the doctor's own environment, ``sys.prefix/share/jupyter``
    (first in a virtual environment, after the user's otherwise, later still with
    ``$JUPYTER_PATH`` set); for a JupyterLab of another environment that directory is
    removed by name, not by position, unless ``$JUPYTER_PATH`` or the system paths name it.
    """
    dirs = [prefix / "share" / "jupyter" / "labextensions"]
    try:
        from jupyter_core.paths import SYSTEM_JUPYTER_PATH, jupyter_path
    except ImportError:
        return dirs
    searched = [Path(p) for p in jupyter_path("labextensions")]
    if _same_path(prefix, _own_prefix()):
        return searched
    own = _own_prefix() / "share" / "jupyter" / "labextensions"
    shared = [Path(p, "labextensions") for p in SYSTEM_JUPYTER_PATH]
    shared += [Path(p, "labextensions") for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    own_only = not any(_same_path(own, d) for d in shared)
    for d in searched:
        if own_only and _same_path(d, own):
            continue
        if not any(_same_path(d, seen) for seen in dirs):
            dirs.append(d)
    return dirs


# ------------------------------------------------------------------ chromium
#: Environment variable naming the Chromium binary of the browser tests.
CHROMIUM_ENV = "DDL_CHROMIUM"
#: Debian's chromium, used when ``$DDL_CHROMIUM`` is not set.
CHROMIUM_DEFAULT = Path("/usr/bin/chromium")
#: Names looked up on PATH when ``CHROMIUM_DEFAULT`` does not exist.
CHROMIUM_NAMES = ("chromium", "chromium-browser")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_chromium() -> Path | None:
    """The system Chromium that the browser tests drive, or None.

    In this order: ``$DDL_CHROMIUM`` (a path, or a command name on PATH; when it is set
    nothing else is tried, so a wrong value is reported rather than silently replaced),
    :data:`CHROMIUM_DEFAULT` (Debian's ``/usr/bin/chromium``), then ``chromium`` and
    ``chromium-browser`` on PATH. The doctor and ``tests/browser`` both use this
    function, so the doctor reports the browser that the tests will launch.
    """
    named = os.environ.get(CHROMIUM_ENV, "").strip()
    if named:
        path = Path(named).expanduser()
        if _executable(path):
            return path
        found = None if os.sep in named else _which(named)
        return Path(found) if found else None
    if _executable(CHROMIUM_DEFAULT):
        return CHROMIUM_DEFAULT
    for name in CHROMIUM_NAMES:
        found = _which(name)
        if found:
            return Path(found)
    return None


# ------------------------------------------------------------------ helpers
def _vtuple(version: str) -> tuple[int, ...]:
    """Leading numeric release of a version string: '8.1.9rc1' -> (8, 1, 9)."""
    out = []
    for part in version.split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if len(digits) != len(part):
            break
    return tuple(out)


def _join(clauses) -> str:
    """Clauses of one line, separated by "; " (its translation: "；")."""
    return tr("; ", context="list separator").join(clauses)


def _column(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` screen columns, a Chinese character counting two
    (``course_lib.timing.pad``'s rule; not imported from there: it imports numpy)."""
    wide = sum(unicodedata.east_asian_width(c) in "WF" for c in text)
    return f"{text:<{max(0, width - wide)}}"


def _python() -> str:
    """This Python as a fix command names it, typed in the course folder: :func:`shown`'s path,
    quoted for the shell (``~/`` left outside the quotes, so that the shell expands it)."""
    path = shown(sys.executable)
    return "~/" + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)


def _pip(spec: str) -> str:
    return f"{_python()} -m pip install {shlex.quote(spec)}"


def _requirement(dist: str) -> str:
    lo, hi = REQUIRED[dist]
    return f"{dist}>={lo},<{hi}"


def _package_check(dist: str, label: str | None = None) -> Check:
    """A required package: installed, and its version in the supported range."""
    label = label or dist
    version = _dist_version(dist)
    if version is None:
        return Check(label, FAIL, tr("not installed"), _pip(_requirement(dist)))
    lo, hi = REQUIRED[dist]
    if not _vtuple(lo) <= _vtuple(version) < _vtuple(hi):
        return Check(
            label, FAIL, tr("{version} is outside the supported range {range}", version=version, range=f"[{lo}, {hi})"),
            _pip(_requirement(dist)),
        )
    return Check(label, OK, version)


# ------------------------------------------------------------------ the checks
def check_python() -> Check:
    """Python version (the course needs 3.10 or newer) and which interpreter runs."""
    version = ".".join(map(str, sys.version_info[:3]))
    detail = f"{version} ({shown(sys.executable)})"
    if tuple(sys.version_info[:2]) < PYTHON_MIN:
        need = ".".join(map(str, PYTHON_MIN))
        return Check("Python", FAIL, detail, tr("install Python >= {version} and re-run `make install`", version=need))
    return Check("Python", OK, detail)


def check_jupyterlab() -> Check:
    return _package_check("jupyterlab")


def check_ipywidgets() -> Check:
    return _package_check("ipywidgets")


def check_widget_frontend() -> Check:
    """Is the widget front-end (jupyterlab_widgets) installed where JupyterLab runs?

    Widgets that show as text (``VBox(children=...)``) almost always mean that the
    JupyterLab serving the notebook comes from an environment without
    ``jupyterlab_widgets``, or that its major version does not match ipywidgets'.
    """
    name = tr("widget front-end")
    own_prefix = _own_prefix()
    on_path = _which("jupyter-lab")
    # Resolved first: a pipx or shim jupyter-lab is a symlink into the environment it runs in.
    lab_prefix = Path(on_path).resolve().parent.parent if on_path else own_prefix
    where = "" if lab_prefix == own_prefix else tr(" of the jupyter-lab on PATH ({path})", path=on_path)
    found = [
        d / Path(*WIDGET_EXTENSION)
        for d in _labextension_dirs(lab_prefix)
        if (d / Path(*WIDGET_EXTENSION) / "package.json").is_file()
    ]
    if not found:
        if lab_prefix == own_prefix:
            fix = _pip("jupyterlab_widgets>=3,<4")
        else:
            fix = tr("start JupyterLab from this environment (`make lab`), or run {command}",
                     command=f"{shlex.quote(str(lab_prefix / 'bin' / 'python'))} -m pip install "
                             "'jupyterlab_widgets>=3,<4'")
        return Check(
            name, FAIL,
            tr("jupyterlab_widgets is not installed in the environment{where} ({prefix}): widgets will show as text",
               where=where, prefix=lab_prefix),
            fix,
        )
    detail = tr("jupyterlab_widgets in {path}", path=shown(found[0].parent.parent))
    widgets_version = _dist_version("jupyterlab_widgets") if lab_prefix == own_prefix else None
    ipyw = _dist_version("ipywidgets")
    if widgets_version:
        detail = f"jupyterlab_widgets {widgets_version} ({shown(found[0].parent.parent)})"
        # ipywidgets 8 pairs with jupyterlab_widgets 3, ipywidgets 7 with 1.
        if ipyw and _vtuple(ipyw)[:1] == (8,) and _vtuple(widgets_version)[:1] != (3,):
            return Check(
                name, FAIL,
                tr("jupyterlab_widgets {version} does not match ipywidgets {ipywidgets} (needs 3.x)",
                   version=widgets_version, ipywidgets=ipyw),
                _pip("jupyterlab_widgets>=3,<4"),
            )
    if lab_prefix != own_prefix:
        return Check(
            name, WARN,
            tr("the jupyter-lab on PATH ({path}) belongs to another environment; {detail}", path=on_path,
               detail=detail),
            tr("use `make lab` (it starts JupyterLab from .venv)"),
        )
    return Check(name, OK, detail)


def check_kernel() -> Check:
    """Does the ``python3`` kernel run in this environment (where course_lib is)?"""
    name = tr("notebook kernel")
    argv = _kernel_argv()
    if argv is None:
        if _dist_version("ipykernel") is None:
            return Check(name, FAIL, tr("ipykernel is not installed"), _pip("ipykernel"))
        return Check(name, FAIL, tr("no 'python3' kernel found"),
                     f"{_python()} -m ipykernel install --sys-prefix")
    exe = argv[0] if argv else ""
    major, minor = sys.version_info[:2]
    # jupyter_client runs these names with the server's own interpreter.
    if exe in ("python", f"python{major}", f"python{major}.{minor}") or exe == sys.executable:
        return Check(name, OK, tr("python3 runs {path}", path=shown(sys.executable)))
    code, out = _run_python(exe, "import ipywidgets, course_lib")
    if code != 0:
        last = out.splitlines()[-1] if out else tr("cannot run it")
        return Check(
            name, FAIL,
            tr("the python3 kernel runs {path}, which cannot import the course ({error})", path=exe, error=last),
            f"{_python()} -m ipykernel install --sys-prefix",
        )
    return Check(name, OK, tr("python3 runs {path}", path=shown(exe)))


def check_matplotlib() -> Check:
    base = _package_check("matplotlib")
    if base.status != OK:
        return base
    try:
        backend = _matplotlib_backend()
        importlib.import_module("matplotlib.backends.backend_agg")
    except ImportError as exc:
        return Check("matplotlib", FAIL, tr("{version}, Agg backend unavailable ({error})", version=base.detail,
                                            error=exc), _pip(_requirement("matplotlib")))
    return Check(
        "matplotlib", OK,
        tr("{version}, backend {backend} (course figures render with Agg, no pyplot)", version=base.detail,
           backend=backend),
    )


def check_numpy_blas() -> Check:
    """numpy version, its BLAS library and thread count (oversubscription check)."""
    base = _package_check("numpy")
    if base.status != OK:
        return Check("numpy / BLAS", base.status, base.detail, base.fix)
    if _dist_version("threadpoolctl") is None:
        return Check("numpy / BLAS", FAIL, tr("numpy {version}; threadpoolctl not installed", version=base.detail),
                     _pip(_requirement("threadpoolctl")))
    try:
        libs = _blas_info()
    except Exception as exc:  # a broken numpy import must not crash the doctor
        return Check("numpy / BLAS", FAIL, tr("numpy {version} does not import ({error})", version=base.detail,
                                              error=exc), _pip(_requirement("numpy")))
    if not libs:
        return Check(
            "numpy / BLAS", WARN,
            tr("numpy {version}; no BLAS library found (matrix products will be slow)", version=base.detail),
            _pip("numpy") + " --force-reinstall",
        )
    parts = []
    threads = max(int(lib.get("num_threads") or 1) for lib in libs)
    for lib in libs:
        arch = f" {lib['architecture']}" if lib.get("architecture") else ""
        library = f"{lib.get('internal_api')} {lib.get('version') or '?'}{arch}"
        parts.append(tr("{library}, {threads} threads", library=library, threads=lib.get("num_threads")))
    detail = tr("numpy {version}; {libraries}", version=base.detail, libraries=_join(parts))
    _, usable = _cpu_counts()
    if usable and threads > usable:
        return Check(
            "numpy / BLAS", WARN,
            tr("{blas} > {usable} usable cores (oversubscribed: parallel runs get slower)", blas=detail, usable=usable),
            tr("{command} before starting JupyterLab", command=f"export OMP_NUM_THREADS={usable}"),
        )
    return Check("numpy / BLAS", OK, detail)


def check_cpu() -> Check:
    total, usable = _cpu_counts()
    name = tr("CPU cores")
    if not total:
        return Check(name, WARN, tr("unknown"))
    if (usable or total) < 2:
        return Check(
            name, WARN,
            tr("{usable} usable of {total} logical: parallel runs cannot be faster than serial ones here",
               usable=usable, total=total),
            tr("give the machine (or container) at least 2 cores, e.g. `docker run --cpus 2`"),
        )
    return Check(name, OK, tr("{usable} usable of {total} logical", usable=usable, total=total))


def check_start_method() -> Check:
    """The start method the course's runs use when none is given (course_lib's default,
    which on Linux is not multiprocessing's own)."""
    try:
        from ..parallel.engine.workers import default_start_method  # imports numpy: may fail

        method = default_start_method()
    except Exception:  # the doctor must report even where numpy is broken
        method = _start_method()
    notes = {
        "fork": lambda: tr("{method} (fast start-up; the course's workers are spawn-safe too)", method="fork"),
        "spawn": lambda: tr("{method} (each worker re-imports course_lib: about {time} start-up per process)",
                            method="spawn", time="0.3 s"),
        "forkserver": lambda: tr("{method} (the first run starts a server, about {time}; later workers start in "
                                 "milliseconds)", method="forkserver", time="0.2 s"),
    }
    note = notes[method]() if method in notes else method
    return Check(tr("start method"), OK, tr("{method}: the course's default", method=note))


def check_shm() -> Check:
    """Free space in /dev/shm (shared-memory all-reduce in the data-parallel chapter)."""
    if not sys.platform.startswith("linux"):
        return Check("/dev/shm", OK, tr("not used on {platform} (shared memory is managed by the OS)",
                                        platform=sys.platform))
    free = _disk_free("/dev/shm")
    if free is None:
        return Check(
            "/dev/shm", FAIL, tr("missing: multiprocessing.shared_memory cannot work"),
            tr("mount a tmpfs on /dev/shm (in Docker: `docker run --shm-size=1g ...`)"),
        )
    size = f"{free / 2**20:,.0f} MiB"
    if free < SHM_WARN_BYTES:
        return Check(
            "/dev/shm", WARN, tr("{free} free (< {limit}: shared-memory runs may fail)", free=size,
                                 limit=f"{SHM_WARN_BYTES // 2**20} MiB"),
            tr("in Docker: `docker run --shm-size=1g ...`; else free space in /dev/shm"),
        )
    return Check("/dev/shm", OK, tr("{free} free", free=size))


def check_leftovers() -> Check:
    """Orphaned workers or shared-memory segments left by earlier runs (e.g. a kernel restart)."""
    from ..parallel.engine.shm import find_leftovers

    name = tr("leftover workers")
    if not sys.platform.startswith("linux"):
        return Check(name, OK, tr("not checked on {platform}", platform=sys.platform))
    found = find_leftovers()
    if not found.orphans and not found.segments:
        return Check(name, OK, tr("no orphaned worker, no stale segment in /dev/shm"))
    parts, fixes = [], []
    if found.orphans:
        parts.append(tr("{count} orphaned worker process(es): {pids}", count=len(found.orphans),
                        pids=" ".join(map(str, found.orphans))))
        fixes.append("kill " + " ".join(map(str, found.orphans)))
    if found.segments:
        parts.append(tr("{count} stale segment(s) in /dev/shm: {names}", count=len(found.segments),
                        names=", ".join(found.segments[:4]) + (" ..." if len(found.segments) > 4 else "")))
        fixes.append(tr("{command}  (the next training run also removes them)",
                        command="rm " + " ".join(f"/dev/shm/{n}" for n in found.segments)))
    return Check(name, WARN, _join(parts), " ; ".join(fixes))


def check_torch() -> Check:
    """Optional: torch (extra ``engines``) for the real data-parallel engine."""
    version = _dist_version("torch")
    if version is None:
        return Check(
            tr("torch (optional)"), INFO,
            tr("not installed: chapter 07's torch comparison is skipped"),
            tr("{command}  # CPU build", command=f"{_python()} -m pip install torch==2.13.0"),
        )
    return Check(tr("torch (optional)"), OK, version)


def check_slide_tools() -> Check:
    """Optional: npm, used by ``make slides`` to fetch reveal.js, MathJax ... once."""
    npm = _which("npm")
    if npm is None:
        return Check(
            tr("npm (make slides)"), INFO, tr("not found: `make slides` cannot fetch reveal.js"),
            tr("install Node.js (e.g. `apt-get install npm`)"),
        )
    return Check(tr("npm (make slides)"), OK, shown(npm))


def check_browser_tools() -> Check:
    """Optional: a system chromium (:func:`find_chromium`) and playwright, for the
    real-browser tests."""
    missing, fixes = [], []
    chromium = find_chromium()
    named = os.environ.get(CHROMIUM_ENV, "").strip()
    if chromium is None:
        missing.append("chromium")
        if named:
            fixes.append(tr("{setting} is not an executable: point it at a chromium binary or unset it",
                            setting=f"${CHROMIUM_ENV}={named}"))
        else:
            fixes.append("apt-get install chromium")
    if _dist_version("playwright") is None:
        missing.append("playwright")
        fixes.append(_pip("playwright>=1.40,<2"))
    name = tr("browser tests (optional)")
    if missing:
        return Check(
            name, INFO,
            tr("skipped by `make test`: {missing} not installed",
               missing=missing[0] if len(missing) == 1 else tr("{first} and {second}", first=missing[0],
                                                               second=missing[1])),
            tr("{fixes} (never `playwright install`)", fixes=_join(fixes)),
        )
    return Check(name, OK, tr("chromium ({path}) and playwright present", path=shown(chromium)))


def check_cjk_font() -> Check:
    """A font with Chinese glyphs, for the Chinese terms in JupyterLab and the slide decks.

    Checked with fontconfig's ``fc-list`` where it exists (Linux); macOS and Windows ship
    such fonts. Without one the browser draws every Chinese term as empty boxes.
    """
    name = tr("Chinese font")
    fc_list = _which("fc-list")
    if fc_list is None:
        return Check(name, INFO, tr("not checked (no fc-list; macOS and Windows ship one)"))
    try:
        proc = subprocess.run([fc_list, ":lang=zh", "family"], capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, INFO, tr("not checked ({error})", error=exc))
    families = sorted({line.split(",")[0].strip() for line in proc.stdout.splitlines() if line.strip()})
    if not families:
        return Check(
            name, WARN, tr("none installed: the Chinese terms show as empty boxes"),
            tr("{command}  (or fonts-wqy-zenhei, or your distribution's CJK font package)",
               command="apt-get install fonts-noto-cjk"),
        )
    if len(families) > 1:
        return Check(name, OK, tr("{family} and {count} more", family=families[0], count=len(families) - 1))
    return Check(name, OK, families[0])


def _cjk_font_install() -> str:
    """How to install a font with Chinese glyphs on this system."""
    if sys.platform == "darwin":
        return tr("macOS ships PingFang SC; if it was removed: {command}",
                  command="brew install --cask font-noto-sans-cjk-sc")
    if sys.platform.startswith("win"):
        return tr("Windows ships Microsoft YaHei; add the Chinese language pack's fonts in Settings > Fonts")
    return tr("{command}  (or the smaller fonts-wqy-zenhei; another distribution: its Noto CJK package)",
              command="apt-get install fonts-noto-cjk")


def check_figure_font() -> Check:
    """A font for the Chinese text of the figures (course_lib.plots.style.CJK_FONTS) that
    matplotlib can use: a warning in the Chinese edition (``DDL_LANG=zh_CN``), else a note."""
    from ..i18n import language

    chinese = language() != "en"
    name = tr("Chinese figure font")
    try:
        import warnings

        from ..plots.style import cjk_font

        with warnings.catch_warnings():  # the doctor says it below, with the fix
            warnings.simplefilter("ignore")
            font = cjk_font()
    except ImportError as exc:
        return Check(name, INFO, tr("not checked ({error})", error=exc))
    if font is None:
        return Check(name, WARN if chinese else INFO,
                     tr("none that matplotlib can use: Chinese figure titles and labels show as empty boxes") if chinese
                     else tr("none that matplotlib can use: Chinese figure titles and labels show as empty boxes "
                             "(only the Chinese edition draws any)"), _cjk_font_install())
    return Check(name, OK, f"{font} (matplotlib)")


CHECKS: tuple[Callable[[], Check], ...] = (
    check_python,
    check_jupyterlab,
    check_ipywidgets,
    check_widget_frontend,
    check_kernel,
    check_matplotlib,
    check_numpy_blas,
    check_cpu,
    check_start_method,
    check_shm,
    check_leftovers,
    check_torch,
    check_cjk_font,
    check_figure_font,
    check_slide_tools,
    check_browser_tools,
)


#: The checks of tools only the lecturer's repository uses (``make slides``, the browser tests).
LECTURER_CHECKS = (check_slide_tools, check_browser_tools)


def run_checks(checks: Sequence[Callable[[], Check]] | None = None) -> list[Check]:
    """Run ``checks`` (default: all of :data:`CHECKS`; in the student edition, which has no
    slides and no tests, all but :data:`LECTURER_CHECKS`).

    A check that crashes is reported as a failure, never raised.
    """
    if checks is not None:
        from .._validate import check_sequence  # here, not at the top: it imports numpy

        checks = check_sequence(checks, "checks")
        for i, fn in enumerate(checks):
            if not callable(fn):
                raise TypeError(f"checks[{i}] must be a function returning a Check, got {type(fn).__name__}")
    if checks is None:  # the student edition has no slides and no browser tests: nothing to report
        checks = CHECKS if lecturer_edition() else tuple(c for c in CHECKS if c not in LECTURER_CHECKS)
    results = []
    for fn in checks:
        try:
            results.append(fn())
        except Exception as exc:  # the doctor must always print its report
            label = fn.__name__.removeprefix("check_")
            results.append(Check(label, FAIL, tr("check crashed: {error}", error=f"{type(exc).__name__}: {exc}")))
    return results


def _check_results(results) -> list[Check]:
    """``results`` as a list of Check. The doctor must report even where numpy is broken,
    so the shared check (whose module imports numpy) is imported only for bad input."""
    try:
        items = None if isinstance(results, (str, bytes)) else list(results)
    except TypeError:
        items = None
    if items is None or not all(isinstance(r, Check) for r in items):
        from .._validate import check_sequence

        return check_sequence(results, "results", Check, "a Check")
    return items


def format_report(results: Sequence[Check]) -> str:
    """The report as text: one line per check, its fix indented below.

    Examples
    --------
    >>> print(format_report([Check("Python", "ok", "3.11.2"),
    ...                      Check("ipywidgets", "FAIL", "not installed", "pip install ipywidgets")]))
    ddl-course doctor
      ok    Python                   3.11.2
      FAIL  ipywidgets               not installed
            fix: pip install ipywidgets
    1 problem must be fixed (FAIL); 0 warnings.
    """
    results = _check_results(results)
    lines = ["ddl-course doctor"]
    for r in results:
        lines.append(f"  {r.status:<5} {_column(r.name, 24)} {r.detail}")
        if r.fix and r.status != OK:
            lines.append("        " + tr("fix: {fix}", fix=r.fix))
    fails = sum(r.status == FAIL for r in results)
    warns = sum(r.status == WARN for r in results)
    warnings = tr_n("{count} warning", "{count} warnings", warns)
    if fails:
        lines.append(tr("{problems} must be fixed (FAIL); {warnings}.", warnings=warnings,
                        problems=tr_n("{count} problem", "{count} problems", fails)))
    else:
        lines.append(tr("Everything required is in place; {warnings}.", warnings=warnings))
    return "\n".join(lines)


def main(argv: Sequence[str] = ()) -> int:
    """Print the report; return 1 if a required part is missing or broken, else 0."""
    if argv and argv[0] in ("-h", "--help"):
        print("usage: python -m course_lib doctor\n\n" + __doc__.split("\n\n")[1])
        return 0
    if argv:
        print(tr("doctor takes no arguments, got {arguments}", arguments=list(argv)), file=sys.stderr)
        return 2
    results = run_checks()
    print(format_report(results))
    return 1 if any(r.status == FAIL for r in results) else 0
