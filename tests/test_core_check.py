"""Are the cores free? The check that guards every stored speedup (make notebooks) and that
the measuring notebooks print before they measure."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from course_lib.__main__ import main as cli
from course_lib.parallel.train import cores
from course_lib.parallel.train.cores import CoreCheck, check_cores

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("cores", "load", "slowdown", "free"), [
    (2, 0.1, 1.02, True),          # a quiet machine
    (2, 0.1, 1.9, False),          # another program takes a core: two loops take twice as long
    (2, 2.4, 1.05, False),         # a full core's worth of other work per core in the last minute
    (2, math.nan, 1.1, True),      # no load average (Windows): the loops decide
    (4, 3.9, 1.2, True),
    (1, 0.0, 1.26, False),
])
def test_the_verdict_follows_the_measurement(cores, load, slowdown, free):
    check = CoreCheck(cores, load, slowdown)
    assert check.free is free
    text = str(check)
    assert f"{slowdown:.2f}x" in text
    assert ("are free" in text) is free and ("were shared with other work" in text) is (not free)


def test_the_check_measures_loops_side_by_side():
    check = check_cores(0.05, rounds=2)
    assert check.cores >= 1
    assert 0.3 < check.slowdown < 20  # a ratio of two similar loops, not a time


def test_bad_seconds_and_rounds():
    with pytest.raises(ValueError, match="seconds"):
        check_cores(0)
    with pytest.raises(ValueError, match="rounds"):
        check_cores(0.05, rounds=0)


@pytest.mark.parametrize("free", [True, False])
def test_the_command_exits_1_on_a_shared_machine(free, monkeypatch, capsys):
    monkeypatch.setattr(cores, "check_cores", lambda: CoreCheck(2, 0.2, 1.0 if free else 1.8))
    assert cli(["cores"]) == (0 if free else 1)
    assert "cores: your 2 cores" in capsys.readouterr().out


def test_make_notebooks_runs_the_check_first_and_says_why_it_refuses():
    dry = subprocess.run(["make", "-n", "notebooks"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=False)
    if dry.returncode != 0:
        pytest.skip(f"make -n notebooks: {dry.stderr.strip()[:200]}")
    lines = dry.stdout.splitlines()
    check = next(i for i, line in enumerate(lines) if "-m course_lib cores" in line)
    execute = next(i for i, line in enumerate(lines) if "nbconvert" in line and "--execute" in line)
    assert check < execute
    assert "would be those of a shared machine" in dry.stdout and "BUSY_OK=1" in dry.stdout
