"""Fixtures of the real-browser tests: one JupyterLab server and one headless Chromium
per session, the Chinese notebooks built once into that server's ``notebooks/zh/``
(``zh_edition``), and the offline slide decks built once.

The tests drive a system chromium through playwright (never a browser that playwright
downloads): ``$DDL_CHROMIUM``, else Debian's ``/usr/bin/chromium``, else ``chromium`` on
PATH, as found by ``course_lib.tools.doctor.find_chromium``. When chromium or playwright is
missing they are skipped with a one-line reason, or fail instead when
``DDL_REQUIRE_BROWSER=1`` (set by ``.ci/run``). Screenshots go to ``test-artifacts/``
(git-ignored), and so does ``browser-report.json``: the measured slider latencies and
whether their median met the goal, the time the decks took to build, and other timings.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: readme_support
from browser_support import (  # noqa: E402
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    CORES_BUSY,
    DURATIONS,
    LATENCIES,
    LATENCY_GOAL_MS,
    ROOT,
    SLIDE_BUILD,
    ZH,
    browser_missing,
    i18n_missing,
    notebooks,
    unavailable,
)
from readme_support import readme_slides_fixture  # noqa: E402,F401 - readme_slides: make slides, once


# ------------------------------------------------------------------ order
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the browser tests last, keeping every other order.

    The Chromium of these tests stays open for the session and starts helper processes
    lazily, at any time; the leak checks of the process-based tests count every new
    descendant of the pytest process and would blame such a helper on whatever test
    was running. (A hook in any conftest sees every collected item.)
    """
    browser = [item for item in items if item.get_closest_marker("browser") is not None]
    if browser:
        items[:] = [item for item in items if item.get_closest_marker("browser") is None] + browser


# ------------------------------------------------------------------ chromium
@pytest.fixture(scope="session")
def browser():
    reason = browser_missing()
    if reason:
        unavailable(reason)
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    except Exception as exc:
        pw.stop()
        pytest.fail(f"cannot launch {CHROMIUM}: {exc}", pytrace=False)
    try:
        yield chromium
    finally:
        chromium.close()
        pw.stop()


# ------------------------------------------------------------------ JupyterLab
@dataclass
class LabServer:
    url: str
    token: str
    root: Path
    log: Path

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _prepare_notebook(src: Path, dst: Path) -> None:
    """Copy a notebook for Lab: outputs cleared (all that shows is fresh), cells tagged
    ``skip-execution`` (too heavy for CI) left out."""
    import nbformat

    nb = nbformat.read(src, as_version=4)
    nb.cells = [c for c in nb.cells if "skip-execution" not in c.metadata.get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, dst)


@pytest.fixture(scope="session")
def lab_server(browser, tmp_path_factory):
    """JupyterLab from this environment on 127.0.0.1, a random port and a token, serving
    copies of the notebooks, with temporary user settings (autosave and windowing off)."""
    t0 = time.perf_counter()
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "root"
    (root / "notebooks").mkdir(parents=True)
    for nb in notebooks():
        _prepare_notebook(nb, root / "notebooks" / nb.name)
    # The news pop-up is NOT switched off here: the course environment's own settings
    # (python -m course_lib lab-settings, run by make install) must do it, and the tests
    # check that nothing covers the notebook.
    settings = tmp / "settings"
    _write_json(settings / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings",
                {"autosave": False})
    # Render every cell (no virtual scrolling), so every live figure is in the DOM.
    _write_json(settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings",
                {"windowingMode": "none"})
    port, token = _free_port(), secrets.token_hex(16)
    log = tmp / "lab.log"
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True", f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
        f"--LabApp.user_settings_dir={settings}",
    ]
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--allow-root")
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp / "config"))
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=root, env=env)
    server = LabServer(f"http://127.0.0.1:{port}", token, root, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{server.log_tail()}", pytrace=False)
            try:
                urllib.request.urlopen(f"{server.url}/api/status?token={token}", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not start in 90 s:\n{server.log_tail()}", pytrace=False)
                time.sleep(0.2)
        DURATIONS["lab server start"] = time.perf_counter() - t0
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@dataclass
class ZhEdition:
    """The Chinese notebooks in the Lab server's ``notebooks/zh/`` (``names``), or why there
    are none: ``missing`` (no ``[i18n]`` extra: a skip, a failure under DDL_REQUIRE_I18N=1)
    or ``error`` (the build failed: a failure)."""

    names: list[str]
    missing: str | None = None
    error: str | None = None


@pytest.fixture(scope="session")
def zh_edition(lab_server, tmp_path_factory) -> ZhEdition:
    """The Chinese edition, built once from the checkout's notebooks and catalogues
    (``course_lib.tools.i18n.build(ROOT, out=...)``, never into the repository's
    notebooks/zh/) and prepared like the English copies into the Lab server's
    ``notebooks/zh/``: one folder below the English notebooks, where its relative links
    (``../notation.md``) expect it. Never skips by itself: each test decides."""
    missing = i18n_missing()
    if missing:
        return ZhEdition([], missing=missing)
    from course_lib.tools import i18n

    t0 = time.perf_counter()
    built = tmp_path_factory.mktemp("zh-build") / ZH
    try:
        written = i18n.build(ROOT, out=built)
    except Exception as exc:  # I18nError (a catalogue missing), an mdpo failure, ...
        return ZhEdition([], error=f"building the Chinese notebooks failed: {type(exc).__name__}: {exc}")
    folder = lab_server.root / "notebooks" / ZH
    folder.mkdir(parents=True, exist_ok=True)
    for nb in written:
        _prepare_notebook(nb, folder / nb.name)
    DURATIONS["zh edition build"] = time.perf_counter() - t0
    return ZhEdition([nb.name for nb in written])


@pytest.fixture(scope="session")
def lab_page(browser, lab_server):
    """One JupyterLab page for the whole session; notebooks are opened in it in turn."""
    t0 = time.perf_counter()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    page.goto(f"{lab_server.url}/lab?token={lab_server.token}&reset")
    page.wait_for_function("window.jupyterapp && window.jupyterapp.shell", timeout=90_000)
    page.evaluate("async () => { await window.jupyterapp.started; await window.jupyterapp.restored; }")
    DURATIONS["lab page load"] = time.perf_counter() - t0
    yield page
    page.close()


# ------------------------------------------------------------------ slide decks
@pytest.fixture(scope="session")
def decks(readme_slides):
    """The decks that the README's ``make slides`` exported from every notebook's stored
    outputs (``readme_slides`` in tests/readme_support.py runs the README's commands once per
    test run, so the decks are built once, not once per test); the slide tests open them.
    """
    import nbformat

    from course_lib.tools import slides

    reason = browser_missing()
    if reason:
        unavailable(reason)
    if not notebooks():
        pytest.skip("no notebooks in notebooks/")
    built = {}
    for path in notebooks():
        html = readme_slides.deck_dir / f"{path.stem}.slides.html"
        if not html.is_file():
            pytest.fail(f"make slides wrote no {html.name}", pytrace=False)
        nb = nbformat.read(path, as_version=4)
        built[path.name] = slides.Deck(path, html, slides.deck_title(nb, path.stem),
                                       slides.slide_structure(nb.cells), 0.0)
    SLIDE_BUILD["seconds"] = readme_slides.seconds
    SLIDE_BUILD["notebooks"] = len(built)
    return built


# ------------------------------------------------------------------ report
def _verdict(median_ms: float) -> str:
    met = median_ms < LATENCY_GOAL_MS
    return f"{'meets' if met else 'MISSES'} the {LATENCY_GOAL_MS} ms goal"


def pytest_terminal_summary(terminalreporter):
    """Latencies (with the verdict on the median), slide build time and other timings,
    printed and written to test-artifacts/browser-report.json (reported, not asserted)."""
    if not LATENCIES and not DURATIONS and not SLIDE_BUILD:
        return
    tr = terminalreporter
    tr.section(f"browser tests: slider-to-figure latency (goal: median < {LATENCY_GOAL_MS} ms)")
    report = {
        "latency_goal_ms": LATENCY_GOAL_MS,
        "latency_ms": {},
        "latency_overall": None,
        "slide_build_seconds": SLIDE_BUILD.get("seconds"),
        "slide_build_notebooks": SLIDE_BUILD.get("notebooks"),
        "durations_s": dict(DURATIONS),
    }
    everything = []
    for name, rows in LATENCIES.items():
        values = [ms for _, ms in rows]
        if not values:
            tr.write_line(f"{name}: no sliders")
            continue
        everything += values
        med, worst = statistics.median(values), max(values)
        load = f", {CORES_BUSY[name]:.2f} of {os.cpu_count()} cores busy" if CORES_BUSY.get(name) is not None else ""
        tr.write_line(f"{name}: {len(values)} slider changes, median {med:.0f} ms ({_verdict(med)}), "
                      f"max {worst:.0f} ms{load}")
        report["latency_ms"][name] = {"median": med, "max": worst, "goal_met": med < LATENCY_GOAL_MS,
                                      "cores_busy": CORES_BUSY.get(name), "each": rows}
    if everything:
        med, worst = statistics.median(everything), max(everything)
        met = med < LATENCY_GOAL_MS
        report["latency_overall"] = {"count": len(everything), "median": med, "max": worst, "goal_met": met}
        tr.write_line(f"all notebooks: {len(everything)} slider changes, median {med:.0f} ms "
                      f"({_verdict(med)}), max {worst:.0f} ms")
    if "seconds" in SLIDE_BUILD:
        tr.write_line(f"slide decks: {SLIDE_BUILD['notebooks']} notebooks exported from their stored outputs "
                      f"in {SLIDE_BUILD['seconds']:.1f} s (make slides)")
    for phase, seconds in DURATIONS.items():
        tr.write_line(f"{phase}: {seconds:.1f} s")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "browser-report.json").write_text(json.dumps(report, indent=1))
