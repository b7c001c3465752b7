"""environment.yml (conda, Binder) stays consistent with pyproject.toml."""

import re
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

# tomllib is in the standard library from Python 3.11; on 3.10 use tomli if present.
tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
ROOT = Path(__file__).resolve().parent.parent
# PyPI name -> conda-forge name, where they differ.
CONDA_NAMES = {"matplotlib": "matplotlib-base"}


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _conda_deps():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    specs, pip_section = {}, None
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip_section = dep["pip"]
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", dep.strip())
        name, spec = match.group(1).lower(), match.group(2).replace(" ", "")
        assert name not in specs, f"{name} is listed twice in environment.yml"
        specs[name] = spec
    return env, specs, pip_section


def test_channels_and_pip_section():
    env, specs, pip_section = _conda_deps()
    assert env["channels"][0] == "conda-forge"
    assert "pip" in specs, "environment.yml must list pip"
    assert pip_section == ["-e ."], "the course itself is installed from the pip section"


def test_python_bound_matches_requires_python():
    _, specs, _ = _conda_deps()
    assert SpecifierSet(specs["python"]) == SpecifierSet(_pyproject()["project"]["requires-python"])


def test_every_dependency_present_with_the_same_range():
    project = _pyproject()["project"]
    required = project["dependencies"] + project["optional-dependencies"]["test"]
    _, specs, _ = _conda_deps()
    expected_names = {"python", "pip"}
    for line in required:
        req = Requirement(line)
        name = CONDA_NAMES.get(req.name.lower(), req.name.lower())
        expected_names.add(name)
        assert name in specs, f"{req.name} (conda: {name}) missing from environment.yml"
        assert SpecifierSet(specs[name]) == req.specifier, (
            f"{name}: environment.yml has {specs[name]!r}, pyproject.toml has {str(req.specifier)!r}"
        )
    extra = set(specs) - expected_names
    assert not extra, f"environment.yml lists packages pyproject.toml does not: {extra}"


def test_no_hard_pins():
    project = _pyproject()["project"]
    for line in project["dependencies"] + sum(project["optional-dependencies"].values(), []):
        assert "==" not in line, f"hard pin in pyproject.toml: {line}"


def test_every_test_has_a_time_limit(request):
    """pytest-timeout is a test dependency and gives every test a limit: a stuck test fails
    by name instead of hanging the suite (and with it CI)."""
    project = _pyproject()
    assert any(Requirement(r).name == "pytest-timeout" for r in project["project"]["optional-dependencies"]["test"])
    limit = project["tool"]["pytest"]["ini_options"]["timeout"]
    assert 60 <= limit <= 1800
    assert request.config.pluginmanager.hasplugin("timeout"), "pytest-timeout is not active"
    assert float(request.config.getini("timeout")) == limit


@pytest.mark.timeout(0.5)  # the body only sleeps: no start-up to wait for, any limit proves it
@pytest.mark.xfail(strict=True, raises=pytest.fail.Exception, reason="a test that outlives its limit must fail, not hang")
def test_a_stuck_test_is_stopped_by_its_time_limit():
    import time

    time.sleep(30)
