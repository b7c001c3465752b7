"""JupyterLab opens without its news pop-up: the settings are written into the course
environment by ``make install`` and ``make lab``, and JupyterLab honours them.

The pop-up ("Would you like to get notified about official Jupyter news?") is shown by the
plugin ``@jupyterlab/apputils-extension:announcements`` while the notification setting
``fetchNews`` is ``"none"`` (JupyterLab 4's default). The course disables that plugin and sets
``fetchNews`` to ``"false"`` (course_lib.tools.labsettings).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from course_lib.tools import labsettings
from course_lib.tools.labsettings import (
    ANNOUNCEMENTS_PLUGIN,
    NOTIFICATION_PLUGIN,
    lab_settings_files,
    lab_settings_problems,
    write_lab_settings,
)

ROOT = Path(__file__).resolve().parent.parent
IN_COURSE_VENV = Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()


def test_written_settings_merge_with_what_is_there(tmp_path):
    overrides, page_config = lab_settings_files(tmp_path)
    assert len(lab_settings_problems(tmp_path)) == 2
    overrides.parent.mkdir(parents=True)
    overrides.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
                                     NOTIFICATION_PLUGIN: {"doNotDisturbMode": True, "fetchNews": "true"}}))
    page_config.parent.mkdir(parents=True)
    page_config.write_text(json.dumps({"disabledExtensions": ["some-extension"], "other": 1}))
    assert write_lab_settings(tmp_path) == (overrides, page_config)
    assert json.loads(overrides.read_text()) == {
        "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
        NOTIFICATION_PLUGIN: {"doNotDisturbMode": True, "fetchNews": "false", "checkForUpdates": False},
    }
    assert json.loads(page_config.read_text()) == {
        "disabledExtensions": {"some-extension": True, ANNOUNCEMENTS_PLUGIN: True}, "other": 1}
    assert lab_settings_problems(tmp_path) == []
    write_lab_settings(tmp_path)  # idempotent
    assert lab_settings_problems(tmp_path) == []


def test_broken_settings_files_are_named(tmp_path, capsys):
    overrides, _ = lab_settings_files(tmp_path)
    overrides.parent.mkdir(parents=True)
    overrides.write_text("{not json")
    with pytest.raises(ValueError, match=r"overrides.json is not valid JSON"):
        write_lab_settings(tmp_path)
    overrides.write_text("[]")
    with pytest.raises(ValueError, match=r"overrides.json must hold a JSON object, it holds list"):
        write_lab_settings(tmp_path)
    assert labsettings.main(["--prefix", str(tmp_path)]) == 1
    assert "lab-settings: error:" in capsys.readouterr().err
    with pytest.raises(TypeError, match="prefix"):
        lab_settings_files(3)


def test_command_line(tmp_path, capsys):
    assert labsettings.main(["--prefix", str(tmp_path), "--check"]) == 1
    assert ANNOUNCEMENTS_PLUGIN in capsys.readouterr().err
    assert labsettings.main(["--prefix", str(tmp_path)]) == 0
    assert labsettings.main(["--prefix", str(tmp_path), "--check"]) == 0
    proc = subprocess.run([sys.executable, "-m", "course_lib", "lab-settings", "--help"], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, check=False)
    assert proc.returncode == 0 and "--check" in proc.stdout


def test_the_course_environment_has_the_settings():
    """What `make install` / `make lab` leave in .venv (and the conda route's one command)."""
    problems = lab_settings_problems(sys.prefix)
    assert problems == [], (f"{problems}: run `{Path(sys.executable).name} -m course_lib lab-settings` "
                            "(make install and make lab do)")


def _make_dry_run(*args: str) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    proc = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_make_lab_and_make_install_write_the_settings_into_the_venv_they_use():
    lab = _make_dry_run("lab")
    settings = [i for i, line in enumerate(lab) if line == ".venv/bin/python -m course_lib lab-settings"]
    start = [i for i, line in enumerate(lab) if line.startswith(".venv/bin/jupyter lab ")]
    assert settings and start and settings[-1] < start[0], lab
    install = _make_dry_run("-W", "pyproject.toml", "install")  # as if pyproject.toml had changed
    pip = [i for i, line in enumerate(install) if "-m pip install --quiet -e" in line]
    settings = [i for i, line in enumerate(install) if line == ".venv/bin/python -m course_lib lab-settings"]
    assert pip and settings and pip[-1] < settings[0], install


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str, deadline: float) -> bytes:
    """GET ``url``, retrying while the server starts, until ``deadline`` (time.monotonic)."""
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.skipif(not IN_COURSE_VENV, reason="starts the course's JupyterLab (.venv), run from it")
def test_jupyterlab_honours_the_settings(tmp_path):
    """A JupyterLab of the course environment, started as `make lab` starts it (user
    settings and runtime files in a scratch folder), reports fetchNews = "false" as the
    notification default and lists the announcements plugin as disabled in its page config:
    the two conditions under which the news pop-up is never shown."""
    jupyter = Path(sys.prefix) / "bin" / "jupyter"
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_DATA_DIR": str(tmp_path / "data"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "user-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    cmd = [str(jupyter), "lab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", "--ServerApp.root_dir=notebooks"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        base = f"http://127.0.0.1:{port}"
        settings = json.loads(_get(f"{base}/lab/api/settings/{NOTIFICATION_PLUGIN}", token, deadline))
        defaults = {key: spec.get("default") for key, spec in settings["schema"]["properties"].items()}
        assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False, defaults
        assert settings["settings"].get("fetchNews", "false") == "false"  # no user setting overrides it
        page = _get(f"{base}/lab?token={token}", token, deadline).decode()
        match = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S)
        assert match, "no page config in JupyterLab's page"
        page_config = json.loads(match.group(1))
        assert ANNOUNCEMENTS_PLUGIN in page_config["disabledExtensions"], page_config["disabledExtensions"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()


def test_the_conda_and_binder_routes_apply_the_same_settings():
    """README's conda commands include the one command; Binder runs it from postBuild."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    conda = readme[readme.index("### With conda"):]
    block = conda[conda.index("```bash"):conda.index("```", conda.index("```bash") + 3)]
    lines = [line.split("#")[0].strip() for line in block.splitlines()[1:]]
    assert lines.index("python -m course_lib lab-settings") < lines.index("jupyter lab notebooks/"), block
    post_build = ROOT / "postBuild"
    assert os.access(post_build, os.X_OK), "repo2docker runs postBuild only when it is executable"
    assert "\npython -m course_lib lab-settings\n" in post_build.read_text(encoding="utf-8")
