"""Tests of ``python -m course_lib doctor``: the real environment passes, and every
failure path (faked by monkeypatching the probes) gives the right status and a fix."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from course_lib import __main__ as cli
from course_lib.tools import doctor
from course_lib.tools.doctor import FAIL, INFO, OK, WARN, Check

ROOT = Path(__file__).resolve().parent.parent


def fake_versions(monkeypatch, **versions):
    """Make _dist_version report ``versions`` (None = not installed), else the truth."""
    real = doctor._dist_version
    table = {k.replace("_", "-"): v for k, v in versions.items()}

    def fake(dist):
        key = dist.replace("_", "-")
        return table[key] if key in table else real(dist)

    monkeypatch.setattr(doctor, "_dist_version", fake)


# ------------------------------------------------------------ the real environment
def test_this_environment_is_healthy(capsys):
    assert doctor.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ddl-course doctor\n")
    for name in ("Python", "jupyterlab", "ipywidgets", "widget front-end", "numpy / BLAS",
                 "CPU cores", "start method", "/dev/shm", "torch (optional)"):
        assert f" {name} " in out
    assert "Everything required is in place" in out
    from course_lib.parallel.engine.workers import default_start_method

    line = next(line for line in out.splitlines() if " start method " in line)
    assert f"{default_start_method()} (" in line and "the course's default" in line  # not multiprocessing's
    assert str(ROOT) not in out and str(Path.home()) + "/" not in out  # paths relative to the course or ~


def test_command_line_entry_point():
    proc = subprocess.run([sys.executable, "-m", "course_lib", "doctor"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "jupyterlab" in proc.stdout


def test_cli_usage_and_unknown_command(capsys):
    assert cli.main([]) == 2
    usage = capsys.readouterr().out
    for command in ("doctor", "notation", "student", "slides", "lab-settings"):
        assert f"\n  {command} " in usage, command
    assert cli.main(["--help"]) == 0
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err
    assert doctor.main(["--bogus"]) == 2


def test_required_ranges_match_pyproject():
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {}
    for text in project["dependencies"]:
        req = Requirement(text)
        lo = next(s.version for s in req.specifier if s.operator == ">=")
        hi = next(s.version for s in req.specifier if s.operator == "<")
        declared[req.name] = (lo, hi)
    assert declared == doctor.REQUIRED
    assert project["requires-python"] == ">=" + ".".join(map(str, doctor.PYTHON_MIN))


@pytest.mark.parametrize(
    "text, expected",
    [("8.1.9", (8, 1, 9)), ("2.13.0+cpu", (2, 13, 0)), ("4.0.0rc1", (4, 0, 0)), ("10", (10,)),
     ("1.24.dev0", (1, 24))],
)
def test_version_tuple(text, expected):
    assert doctor._vtuple(text) == expected


def test_check_rejects_unknown_status():
    with pytest.raises(ValueError, match="status"):
        Check("x", "bad", "")


# ------------------------------------------------------------ failure paths
def test_missing_required_package_fails_with_pip_fix(monkeypatch, capsys):
    fake_versions(monkeypatch, ipywidgets=None)
    result = doctor.check_ipywidgets()
    assert result.status == FAIL and result.detail == "not installed"
    assert "-m pip install 'ipywidgets>=8.1,<9'" in result.fix
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert "FAIL  ipywidgets" in out and "fix: " in out and "must be fixed" in out


def test_version_outside_range_fails(monkeypatch):
    fake_versions(monkeypatch, jupyterlab="3.6.7")
    result = doctor.check_jupyterlab()
    assert result.status == FAIL
    assert "3.6.7 is outside the supported range [4.2, 5)" in result.detail
    fake_versions(monkeypatch, jupyterlab="5.0.0")
    assert doctor.check_jupyterlab().status == FAIL


def test_old_python_fails(monkeypatch):
    monkeypatch.setattr(doctor, "PYTHON_MIN", (99, 0))
    result = doctor.check_python()
    assert result.status == FAIL and "99.0" in result.fix


def make_extension(prefix: Path) -> None:
    ext = prefix / "share" / "jupyter" / "labextensions" / "@jupyter-widgets" / "jupyterlab-manager"
    ext.mkdir(parents=True)
    (ext / "package.json").write_text("{}")


def only_prefix_dirs(prefix: Path) -> list[Path]:
    return [prefix / "share" / "jupyter" / "labextensions"]


def test_widget_frontend_missing_in_own_environment(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor, "_which", lambda cmd: None)
    monkeypatch.setattr(doctor, "_labextension_dirs", lambda prefix: [tmp_path])
    result = doctor.check_widget_frontend()
    assert result.status == FAIL
    assert "widgets will show as text" in result.detail
    assert "jupyterlab_widgets>=3,<4" in result.fix


def test_widget_frontend_of_other_jupyterlab_on_path(monkeypatch, tmp_path):
    other = tmp_path / "otherenv"
    monkeypatch.setattr(doctor, "_which", lambda cmd: str(other / "bin" / "jupyter-lab"))
    monkeypatch.setattr(doctor, "_labextension_dirs", only_prefix_dirs)
    missing = doctor.check_widget_frontend()
    assert missing.status == FAIL
    assert str(other) in missing.detail and "make lab" in missing.fix
    make_extension(other)
    present = doctor.check_widget_frontend()
    assert present.status == WARN and "another environment" in present.detail


def test_widget_frontend_major_version_mismatch(monkeypatch, tmp_path):
    make_extension(tmp_path)
    monkeypatch.setattr(doctor, "_which", lambda cmd: None)
    monkeypatch.setattr(doctor, "_labextension_dirs", lambda prefix: only_prefix_dirs(tmp_path))
    fake_versions(monkeypatch, ipywidgets="8.1.9", jupyterlab_widgets="1.1.7")
    result = doctor.check_widget_frontend()
    assert result.status == FAIL and "does not match ipywidgets 8.1.9" in result.detail
    fake_versions(monkeypatch, ipywidgets="8.1.9", jupyterlab_widgets="3.0.17")
    assert doctor.check_widget_frontend().status == OK


def test_widget_frontend_follows_a_symlinked_jupyter_lab(monkeypatch, tmp_path):
    """pipx and shims put a symlink on PATH (~/.local/bin/jupyter-lab -> the real env)."""
    real = tmp_path / "pipx" / "venvs" / "jupyterlab"
    (real / "bin").mkdir(parents=True)
    (real / "bin" / "jupyter-lab").write_text("#!/bin/sh\n")
    shim = tmp_path / ".local" / "bin" / "jupyter-lab"
    shim.parent.mkdir(parents=True)
    shim.symlink_to(real / "bin" / "jupyter-lab")
    monkeypatch.setattr(doctor, "_which", lambda cmd: str(shim))
    monkeypatch.setattr(doctor, "_labextension_dirs", only_prefix_dirs)
    missing = doctor.check_widget_frontend()
    assert missing.status == FAIL and f"({real.resolve()})" in missing.detail
    assert str(real.resolve() / "bin" / "python") in missing.fix
    make_extension(real)
    present = doctor.check_widget_frontend()
    assert present.status == WARN and "another environment" in present.detail
    assert str(real.resolve()) in present.detail


def test_widget_frontend_symlink_into_own_environment(monkeypatch, tmp_path):
    own = tmp_path / "venv"
    (own / "bin").mkdir(parents=True)
    (own / "bin" / "jupyter-lab").write_text("#!/bin/sh\n")
    make_extension(own)
    shim = tmp_path / "shims" / "bin" / "jupyter-lab"
    shim.parent.mkdir(parents=True)
    shim.symlink_to(own / "bin" / "jupyter-lab")
    monkeypatch.setattr(doctor, "_own_prefix", lambda: own.resolve())
    monkeypatch.setattr(doctor, "_which", lambda cmd: str(shim))
    monkeypatch.setattr(doctor, "_labextension_dirs", only_prefix_dirs)
    fake_versions(monkeypatch, ipywidgets="8.1.9", jupyterlab_widgets="3.0.17")
    result = doctor.check_widget_frontend()
    assert result.status == OK and "3.0.17" in result.detail


OWN_LABEXT = Path(sys.prefix).resolve() / "share" / "jupyter" / "labextensions"


def _system_labext_dirs() -> list[Path]:
    from jupyter_core.paths import SYSTEM_JUPYTER_PATH

    return [Path(p, "labextensions").resolve() for p in SYSTEM_JUPYTER_PATH]


def _resolved(dirs):
    return [d.resolve() for d in dirs]


@pytest.mark.parametrize("case", ["default", "JUPYTER_PATH", "user paths first"])
def test_labextension_dirs(monkeypatch, tmp_path, case):
    """The doctor's own environment directory is found by name, wherever jupyter_core
    puts it (first only in a virtual environment without $JUPYTER_PATH)."""
    pytest.importorskip("jupyter_core")
    if OWN_LABEXT in _system_labext_dirs():
        pytest.skip("the tests run in a system Python: its directory is a system one")
    monkeypatch.delenv("JUPYTER_PATH", raising=False)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user"))
    extra = tmp_path / "extra"
    if case == "JUPYTER_PATH":
        monkeypatch.setenv("JUPYTER_PATH", str(extra))
    if case == "user paths first":  # as outside a virtual environment
        monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "0")
    own = _resolved(doctor._labextension_dirs(Path(sys.prefix)))
    assert OWN_LABEXT in own and (tmp_path / "user" / "labextensions").resolve() in own
    other = _resolved(doctor._labextension_dirs(Path("/nonexistent/env")))
    assert other[0] == Path("/nonexistent/env/share/jupyter/labextensions")
    assert OWN_LABEXT not in other
    assert (tmp_path / "user" / "labextensions").resolve() in other  # the user's directory stays
    assert set(_system_labext_dirs()) <= set(other)
    if case == "JUPYTER_PATH":
        assert (extra / "labextensions").resolve() in own and (extra / "labextensions").resolve() in other
    assert len(other) == len(set(other))


def test_labextension_dirs_jupyter_path_naming_own_environment(monkeypatch):
    """$JUPYTER_PATH is searched by every JupyterLab: if it names the doctor's own
    environment, that directory stays in the list of another environment too."""
    pytest.importorskip("jupyter_core")
    monkeypatch.setenv("JUPYTER_PATH", str(OWN_LABEXT.parent))
    other = _resolved(doctor._labextension_dirs(Path("/nonexistent/env")))
    assert OWN_LABEXT in other


# ------------------------------------------------------------ chromium
def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_find_chromium_order(monkeypatch, tmp_path):
    """$DDL_CHROMIUM, then /usr/bin/chromium, then chromium / chromium-browser on PATH."""
    monkeypatch.delenv("DDL_CHROMIUM", raising=False)
    default = tmp_path / "usr-bin-chromium"
    monkeypatch.setattr(doctor, "CHROMIUM_DEFAULT", default)
    on_path: dict[str, str] = {}
    monkeypatch.setattr(doctor, "_which", on_path.get)
    assert doctor.find_chromium() is None
    on_path["chromium-browser"] = "/snap/bin/chromium-browser"
    assert doctor.find_chromium() == Path("/snap/bin/chromium-browser")
    on_path["chromium"] = "/opt/bin/chromium"
    assert doctor.find_chromium() == Path("/opt/bin/chromium")
    default.write_text("")  # not executable: skipped
    assert doctor.find_chromium() == Path("/opt/bin/chromium")
    _executable(default)
    assert doctor.find_chromium() == default
    custom = _executable(tmp_path / "my chromium")
    monkeypatch.setenv("DDL_CHROMIUM", str(custom))
    assert doctor.find_chromium() == custom
    monkeypatch.setenv("DDL_CHROMIUM", "chromium-browser")  # a command name on PATH
    assert doctor.find_chromium() == Path("/snap/bin/chromium-browser")
    monkeypatch.setenv("DDL_CHROMIUM", str(tmp_path / "missing"))  # no silent fallback
    assert doctor.find_chromium() is None


def test_browser_check_uses_find_chromium(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor, "CHROMIUM_DEFAULT", tmp_path / "none")
    monkeypatch.setattr(doctor, "_which", lambda cmd: None)
    monkeypatch.delenv("DDL_CHROMIUM", raising=False)
    fake_versions(monkeypatch, playwright="1.50.0")
    absent = doctor.check_browser_tools()
    assert absent.status == INFO and "chromium not installed" in absent.detail
    assert "apt-get install chromium" in absent.fix
    monkeypatch.setenv("DDL_CHROMIUM", str(tmp_path / "missing"))
    wrong = doctor.check_browser_tools()
    assert wrong.status == INFO and "chromium" in wrong.detail
    assert f"$DDL_CHROMIUM={tmp_path / 'missing'} is not an executable" in wrong.fix
    custom = _executable(tmp_path / "chromium")
    monkeypatch.setenv("DDL_CHROMIUM", str(custom))
    found = doctor.check_browser_tools()
    assert found.status == OK and str(custom) in found.detail


def test_browser_tests_use_the_doctors_chromium(monkeypatch, tmp_path):
    """tests/browser launches exactly the chromium that the doctor reports."""
    custom = _executable(tmp_path / "chromium")
    monkeypatch.setenv("DDL_CHROMIUM", str(custom))
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "browser"))
    monkeypatch.delitem(sys.modules, "browser_support", raising=False)
    import browser_support

    try:
        assert browser_support.CHROMIUM == doctor.find_chromium() == custom
        missing = browser_support.browser_missing()
        assert missing is None or "playwright" in missing  # chromium is not what is missing
        monkeypatch.setenv("DDL_CHROMIUM", str(tmp_path / "missing"))
        monkeypatch.setattr(browser_support, "CHROMIUM", doctor.find_chromium())
        assert "DDL_CHROMIUM" in browser_support.browser_missing()
    finally:
        sys.modules.pop("browser_support", None)


def test_kernel_checks(monkeypatch):
    monkeypatch.setattr(doctor, "_kernel_argv", lambda: ["python", "-m", "ipykernel_launcher"])
    assert doctor.check_kernel().status == OK
    monkeypatch.setattr(doctor, "_kernel_argv", lambda: ["/nonexistent/bin/python", "-m", "x"])
    broken = doctor.check_kernel()  # the real _run_python cannot start it
    assert broken.status == FAIL and "/nonexistent/bin/python" in broken.detail
    assert "ipykernel install --sys-prefix" in broken.fix
    monkeypatch.setattr(doctor, "_run_python", lambda exe, code: (0, ""))
    assert doctor.check_kernel().status == OK
    monkeypatch.setattr(doctor, "_kernel_argv", lambda: None)
    fake_versions(monkeypatch, ipykernel=None)
    assert doctor.check_kernel().status == FAIL


def test_matplotlib_without_agg_fails(monkeypatch):
    real_import = doctor.importlib.import_module

    def no_agg(name, *a):
        if name == "matplotlib.backends.backend_agg":
            raise ImportError("no agg")
        return real_import(name, *a)

    monkeypatch.setattr(doctor.importlib, "import_module", no_agg)
    assert doctor.check_matplotlib().status == FAIL


def test_blas_oversubscription_warns(monkeypatch):
    lib = {"user_api": "blas", "internal_api": "openblas", "version": "0.3.31", "num_threads": 8}
    monkeypatch.setattr(doctor, "_blas_info", lambda: [lib])
    monkeypatch.setattr(doctor, "_cpu_counts", lambda: (2, 2))
    result = doctor.check_numpy_blas()
    assert result.status == WARN
    assert "openblas 0.3.31, 8 threads" in result.detail
    assert result.fix == "export OMP_NUM_THREADS=2 before starting JupyterLab"
    monkeypatch.setattr(doctor, "_cpu_counts", lambda: (16, 16))
    assert doctor.check_numpy_blas().status == OK


def test_blas_missing_or_broken(monkeypatch):
    monkeypatch.setattr(doctor, "_blas_info", lambda: [])
    assert doctor.check_numpy_blas().status == WARN

    def boom():
        raise ImportError("numpy core broken")

    monkeypatch.setattr(doctor, "_blas_info", boom)
    result = doctor.check_numpy_blas()
    assert result.status == FAIL and "numpy core broken" in result.detail
    fake_versions(monkeypatch, threadpoolctl=None)
    assert doctor.check_numpy_blas().status == FAIL


def test_single_core_warns(monkeypatch):
    monkeypatch.setattr(doctor, "_cpu_counts", lambda: (8, 1))
    result = doctor.check_cpu()
    assert result.status == WARN and "1 usable of 8" in result.detail and result.fix


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/dev/shm is Linux only")
def test_shm_paths(monkeypatch):
    monkeypatch.setattr(doctor, "_disk_free", lambda path: None)
    assert doctor.check_shm().status == FAIL
    monkeypatch.setattr(doctor, "_disk_free", lambda path: 10 * 2**20)
    small = doctor.check_shm()
    assert small.status == WARN and "10 MiB free" in small.detail and "--shm-size" in small.fix
    monkeypatch.setattr(doctor, "_disk_free", lambda path: 2**30)
    assert doctor.check_shm().status == OK


def test_optional_parts_do_not_fail(monkeypatch, capsys):
    fake_versions(monkeypatch, torch=None, playwright=None)
    monkeypatch.setattr(doctor, "_which", lambda cmd: None)
    torch = doctor.check_torch()
    assert torch.status == INFO and "torch==2.13.0" in torch.fix
    assert doctor.check_slide_tools().status == INFO
    assert "playwright" in doctor.check_browser_tools().detail
    monkeypatch.setattr(doctor, "CHECKS", (doctor.check_torch, doctor.check_slide_tools,
                                           doctor.check_browser_tools, doctor.check_cpu))
    assert doctor.main([]) == 0
    assert "Everything required is in place" in capsys.readouterr().out


def test_warnings_alone_exit_zero_and_crashes_are_failures(monkeypatch, capsys):
    def crashes():
        raise RuntimeError("kaboom")

    monkeypatch.setattr(doctor, "CHECKS", (lambda: Check("x", WARN, "meh", "do y"),))
    assert doctor.main([]) == 0
    assert "1 warning" in capsys.readouterr().out
    monkeypatch.setattr(doctor, "CHECKS", (crashes,))
    assert doctor.main([]) == 1
    assert "check crashed: RuntimeError: kaboom" in capsys.readouterr().out


def test_cjk_font_check_reads_fontconfig(monkeypatch):
    monkeypatch.setattr(doctor, "_which", lambda cmd: None)
    assert doctor.check_cjk_font().status == INFO  # no fontconfig: not checked

    def fake_fc_list(stdout):
        def run(cmd, **kwargs):
            assert cmd[1:] == [":lang=zh", "family"]
            return subprocess.CompletedProcess(cmd, 0, stdout=stdout, stderr="")
        return run

    monkeypatch.setattr(doctor, "_which", lambda cmd: "/usr/bin/fc-list")
    monkeypatch.setattr(doctor.subprocess, "run", fake_fc_list(""))
    missing = doctor.check_cjk_font()
    assert missing.status == WARN and "empty boxes" in missing.detail and "fonts-noto-cjk" in missing.fix
    monkeypatch.setattr(doctor.subprocess, "run",
                        fake_fc_list("Noto Sans CJK SC,Noto Sans CJK SC Regular\nNoto Serif CJK SC\n"))
    found = doctor.check_cjk_font()
    assert found.status == OK and found.detail == "Noto Sans CJK SC and 1 more"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and /dev/shm")
def test_leftover_workers_and_segments_are_reported_with_the_fix():
    """A process mapping a segment of a dead creator is an orphaned worker; it and the
    segment are reported, with the commands that remove them."""
    # pid 4194305 is above the kernel's limit: never alive, like a kernel killed with SIGKILL
    code = ("import sys, time\nfrom multiprocessing import resource_tracker, shared_memory\n"
            "s = shared_memory.SharedMemory(name='ddl_4194305_orphan', create=True, size=16)\n"
            "resource_tracker.unregister(s._name, 'shared_memory')  # the test removes it\n"
            "print('mapped', flush=True)\ntime.sleep(60)\n")
    orphan = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert orphan.stdout.readline().strip() == "mapped"
        segment = Path("/dev/shm/ddl_4194305_orphan")
        deadline = time.monotonic() + 30
        while True:
            # Under pytest-xdist a ProcessGroup starting in another test process removes
            # stale segments (remove_stale_segments), this one too: put it back and look again,
            # for as long as it takes (on a loaded machine the others start many groups while
            # this one looks), not a fixed number of times.
            segment.touch()  # the orphan keeps its mapping either way
            check = doctor.check_leftovers()
            if segment.name in check.detail or time.monotonic() > deadline:
                break
        assert check.status == WARN
        assert str(orphan.pid) in check.detail and "ddl_4194305_orphan" in check.detail
        assert f"kill {orphan.pid}" in check.fix and "rm /dev/shm/ddl_4194305_orphan" in check.fix
    finally:
        orphan.kill()
        orphan.wait()
        Path("/dev/shm/ddl_4194305_orphan").unlink(missing_ok=True)
