"""Smoke test of benchmarks/bench_conv.py on its tiny shape, with and without torch.

The timings are not asserted (the ``--tiny`` run repeats each case once): only that the
benchmark runs to the end and prints the rows it promises. The run with torch is
skipped where torch is missing, unless ``DDL_REQUIRE_TORCH=1`` (CI).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_conv.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_conv", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(out: str) -> list[str]:
    """The table rows: the lines between the dashed rule and the first blank line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("-----")) + 1
    stop = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:stop]


def _threads(bench) -> list[int]:
    return sorted({1, bench.available_cores()})


@pytest.mark.slow  # more than 3 s on two free cores (make test runs it, make test-fast does not)
def test_tiny_run_with_torch_prints_every_row(monkeypatch, capsys):
    try:
        import torch
    except ImportError:
        message = "the benchmark's torch rows need torch (optional 'engines' extra)"
        if os.environ.get("DDL_REQUIRE_TORCH") == "1":
            pytest.fail(f"DDL_REQUIRE_TORCH=1 but {message}")
        pytest.skip(message)
    monkeypatch.delenv("DDL_BENCH_NO_TORCH", raising=False)
    bench = _bench()
    threads_before = torch.get_num_threads()
    try:
        assert bench.main(["--tiny"]) == 0
    finally:  # the benchmark leaves torch at all cores: restore this process's setting
        torch.set_num_threads(threads_before)
    out = capsys.readouterr().out
    assert f"torch {torch.__version__}" in out and "TINY smoke run" in out
    assert "allocator: freed memory kept for reuse" in out  # the same allocator state every run
    label = bench._label(bench.TINY)
    expected = [(f"im2col {label}", "fresh memcpy"), (f"im2col {label}", "torch unfold 1t")]
    expected += [(f"conv2d {label} {t}t", f"torch conv2d {t}t") for t in _threads(bench)]
    expected += [(f"GEMM of im2col {label} 1t", "torch conv2d 1t")]  # the im2col algorithm's floor
    expected += [(f"col2im {label} 1t", "torch fold 1t")]
    expected += [(f"conv2d_backward {label} {t}t", f"torch backward {t}t") for t in _threads(bench)]
    expected += [(f"conv2d {label} 1t", "conv2d_direct")]
    rows = _rows(out)
    assert len(rows) == len(expected), rows
    for row, (case, reference) in zip(rows, expected):
        assert row.startswith(case) and reference in row, (row, case, reference)
    assert re.search(r"<= 1.25\s+(met|MISSED)$", rows[2]), rows[2]
    assert re.search(r"\d+x\s+>= 100\s+(met|MISSED)$", rows[-1]), rows[-1]  # speedup over the loops


@pytest.mark.parametrize("how", ["switch", "not installed"])
def test_tiny_run_without_torch_says_so_and_skips_its_rows(how, monkeypatch, capsys):
    if how == "switch":
        monkeypatch.setenv("DDL_BENCH_NO_TORCH", "1")
        expected_note = "torch: NOT USED (DDL_BENCH_NO_TORCH=1) - the rows against torch are skipped"
    else:
        monkeypatch.delenv("DDL_BENCH_NO_TORCH", raising=False)
        monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
        expected_note = "torch: NOT INSTALLED - the rows against torch are skipped"
    bench = _bench()
    assert bench.main(["--tiny"]) == 0
    out = capsys.readouterr().out
    assert expected_note in out
    label = bench._label(bench.TINY)
    rows = _rows(out)
    cases = [f"im2col {label}"] + [f"conv2d {label} {t}t" for t in _threads(bench)] + [f"conv2d {label} 1t"]
    assert len(rows) == len(cases), rows
    assert all(row.startswith(case) for row, case in zip(rows, cases)), rows
    assert "fresh memcpy" in rows[0] and "conv2d_direct" in rows[-1]
    for row in rows[1:-1]:  # conv2d against torch: no time, no ratio, no verdict
        assert "torch (absent)" in row and row.endswith("n/a")
    assert not any(word in out for word in ("unfold", "torch fold", "torch backward", "torch conv2d"))
