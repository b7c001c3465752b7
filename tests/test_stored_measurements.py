"""The stored outputs of the measuring notebooks are the course's claims: they must come from
a machine whose cores were free.

A contended re-execution once replaced chapter 05's S(2) = 1.82 with 0.94 and fits with
p = 0.000, and nothing noticed. These tests read the committed outputs: a stored speedup on
N >= 2 workers below 1.2, or a stored fit that says p = 0, fails (re-execute on a quiet
machine: ``make notebooks`` checks the cores first).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MEASURING = ["01_serial_to_parallel", "05_operator_parallelism", "07_data_parallelism"]
LEAST_SPEEDUP = 1.2


def _texts(stem: str) -> list[str]:
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    if not path.exists():
        pytest.skip(f"{path.name} is not in this checkout")
    out = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        for o in cell.get("outputs", []):
            out.append("".join(o.get("text", "")) if o.get("output_type") == "stream"
                       else "".join(o.get("data", {}).get("text/plain", "")))
    return out


def speedup_rows(text: str) -> list[tuple[int, float]]:
    """(N, speedup) of every row N >= 2 of a stored speedup table: chapter 01's (column
    ``paired S``) and chapter 07's scaling table (columns ``S(N)`` and ``scaled S``)."""
    lines = text.splitlines()
    rows = []
    for k, header in enumerate(lines):
        cols = header.split()
        if "paired" in cols and cols[:1] == ["N"]:  # N, time, Tser/T(N), paired S, ...
            for line in lines[k + 1:]:
                parts = line.split()
                if parts[:1] == ["ser"]:
                    continue
                if not parts or not parts[0].isdigit():
                    break
                if int(parts[0]) >= 2:
                    rows.append((int(parts[0]), float(parts[3])))
        if cols[:2] == ["N", "strong"] and "S(N)" in cols:
            for line in lines[k + 1:]:
                parts = line.split()
                if not parts or not parts[0].isdigit():
                    break
                if int(parts[0]) >= 2:
                    rows.append((int(parts[0]), float(parts[2])))  # strong S(N)
                    rows.append((int(parts[0]), float(parts[6])))  # scaled S
    return rows


def test_the_parser_reads_both_tables():
    ch01 = """  N  time [s]  Tser/T(N)  paired S  efficiency  spread start-up [s]
ser     0.191       1.00      1.00        1.00
  1     0.197       0.97      1.01        1.01     19%         0.19
  2     0.105       1.82      1.80        0.90     28%         0.02
Tser/T(N): the definition"""
    ch07 = """  N  strong ms   S(N)  eff.  Karp-Flatt e  weak ms  scaled S  eff.
  1       38.7   1.00  1.00             -     20.1      1.00  1.00
  2       41.3   0.94  0.47         1.127     41.3      0.97  0.49
serial (1 BLAS thread): 38.8 ms"""
    assert speedup_rows(ch01) == [(2, 1.80)]
    assert speedup_rows(ch07) == [(2, 0.94), (2, 0.97)]


@pytest.mark.parametrize("stem", MEASURING)
def test_no_stored_speedup_of_a_shared_machine(stem):
    rows = [row for text in _texts(stem) for row in speedup_rows(text)]
    low = [(n, s) for n, s in rows if s < LEAST_SPEEDUP]
    assert low == [], (f"{stem} stores speedups below {LEAST_SPEEDUP} on N >= 2 workers {low}: "
                       "a contended run; re-execute it on a quiet machine (make notebooks)")


@pytest.mark.parametrize("stem", MEASURING)
def test_no_stored_fit_says_p_is_zero(stem):
    zero = [line.strip() for text in _texts(stem) for line in text.splitlines()
            if re.search(r"\bp = 0\.0+\b(?!\d)", line)]
    assert zero == [], f"{stem} stores a fit with p = 0: {zero}"
