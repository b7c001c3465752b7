"""Smoke test of the data/tensor-parallel benchmark: it runs every variant side by side,
beside its ceiling, with the diagnostics of where a shared-memory step's time goes, and prints
one row each (timings are reported, never asserted: only that the values are sane)."""

from __future__ import annotations

import json
import math
import platform

import pytest

from benchmarks import bench_data_parallel

X86 = platform.machine().lower() in ("x86_64", "amd64")


def _tiny(tmp_path, *extra):
    out = tmp_path / "bench.json"
    argv = ["--batches", "64", "--rounds", "1", "--step-budget", "0.001", "--cores", "2",
            "--no-gloo", "--start-method", "fork", "--pool-epochs", "1", "--json", str(out), *extra]
    assert bench_data_parallel.main(argv) == 0
    return json.loads(out.read_text())


@pytest.mark.slow  # a tiny benchmark run as typed: 3-5 s
def test_tiny_run_prints_every_variant_beside_its_ceiling(capsys, tmp_path):
    report = _tiny(tmp_path)
    text = capsys.readouterr().out
    names = ["serial, 1 BLAS thread", "serial, this process", "shared memory, 1 workers", "ceiling, 1 copies",
             "shared memory, 2 workers", "ceiling, 2 copies", "pipes, 2 workers", "tensor parallel, 2 workers",
             "tensor ceiling, 2 copies"]
    if X86:
        names += ["shm pinned, 2 workers", "shm flag barrier, 2 workers", "shm flag + pinned, 2 workers",
                  "ceiling pinned, 2 copies"]
    for name in names:
        assert name in text
    assert report["errors"] == []
    rows = {r["variant"]: r for r in report["results"]["64"]}
    assert set(names) <= set(rows)
    # the tensor-parallel run moves the (64 x 10) logits once a step: 2,560 bytes
    assert rows["tensor parallel, 2 workers"]["mb_per_step"] == 64 * 10 * 4 / 1e6
    assert rows["shared memory, 2 workers"]["mb_per_step"] == bench_data_parallel.MLP(
        bench_data_parallel.SIZES).n_params * 4 / 1e6
    assert rows["ceiling, 2 copies"]["mb_per_step"] == 0.0 and rows["ceiling, 2 copies"]["comm_share"] == 0.0
    assert rows["serial, 1 BLAS thread"]["speedup"] == 1.0  # the reference of every speedup
    for name in ("shared memory, 2 workers", "tensor parallel, 2 workers"):
        r = rows[name]
        assert r["ceiling_speedup"] > 0 and r["vs_ceiling"] > 0
        assert math.isclose(r["vs_ceiling"], r["speedup"] / r["ceiling_speedup"], rel_tol=1e-9)  # one round
    for r in rows.values():
        assert r["steps_per_s"] > 0 and r["speedup"] > 0 and 0 <= r["comm_share"] <= 1
    assert rows["shared memory, 2 workers"]["cpu_ms"] > 0 and rows["shared memory, 2 workers"]["faults"] >= 0
    assert "x ceil." in text and "target tensor parallel >= 0.7 x its ceiling" in text


@pytest.mark.slow  # a tiny benchmark run as typed: 3-5 s
def test_tiny_run_says_where_the_time_goes(capsys, tmp_path):
    report = _tiny(tmp_path, "--no-pool")
    text = capsys.readouterr().out
    assert "where the time goes" in text and "S(1) = serial time / one worker's time" in text
    sync = report["sync"]["64"]["shared memory, 2 workers"]
    parts = ("work", "straggler", "b1_latency", "reduce_scatter", "rs_imbalance", "b2_latency")
    assert all(sync[k] >= -1e-6 for k in parts) and sync["step"] > 0 and sync["rs_gbytes_per_s"] > 0
    s1 = report["s1"]["64"]
    assert s1["reference"]["wall"] > 0 and s1["reference"]["cpu"] > 0 and s1["this_process"]["wall"] > 0
    assert isinstance(s1["within_target"], bool)
    latency = report["barrier_latency"]
    assert latency["pipe, 2 workers"] > 0 and (not X86 or latency["flag, 2 workers"] > 0)
    assert "barrier with no work between the waits" in text and report["pool"] is None


@pytest.mark.slow  # a tiny benchmark run as typed: 3-5 s
def test_the_pool_section_and_the_options(capsys, tmp_path):
    report = _tiny(tmp_path, "--workers", "2", "--no-options")
    text = capsys.readouterr().out
    assert "chapter 01's pool" in text and "gradients back through shared memory" in text
    pool = report["pool"]
    assert [r["n"] for r in pool["rows"]] == [2] and pool["shared_reply"]["n"] == 2
    assert all(r["ceiling"] > 0 and r["speedup"] > 0 for r in (*pool["rows"], pool["shared_reply"]))
    assert pool["max_abs_difference"] < 1e-5
    rows = {r["variant"] for r in report["results"]["64"]}
    assert "shared memory, 2 workers" in rows and "shared memory, 1 workers" not in rows  # --workers 2 only
    assert not any("pinned" in r or "flag" in r for r in rows)  # --no-options
    assert report["s1"]["64"] == {}  # no one-worker run: no S(1) check


def test_the_budget_stops_new_rounds(capsys, tmp_path):
    report = _tiny(tmp_path, "--rounds", "3", "--budget", "0.001", "--no-pool", "--no-options", "--workers", "2")
    capsys.readouterr()
    assert report["results"]["64"] and all(r.get("steps_per_s") for r in report["results"]["64"])
    # one round only: every run's spread (max - min over rounds) is 0
    assert all(r["spread"] == 0 for r in report["results"]["64"] if r["variant"] != "serial, 1 BLAS thread")
