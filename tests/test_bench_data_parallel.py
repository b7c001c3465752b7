"""Smoke test of the data/tensor-parallel benchmark: it runs every variant side by side
and prints one row each (timings are reported, never asserted)."""

from __future__ import annotations

from benchmarks import bench_data_parallel


def test_tiny_run_prints_every_variant(capsys, tmp_path):
    out = tmp_path / "bench.json"
    argv = ["--batches", "64", "--rounds", "1", "--step-budget", "0.001", "--cores", "2",
            "--no-gloo", "--start-method", "fork", "--json", str(out)]
    assert bench_data_parallel.main(argv) == 0
    text = capsys.readouterr().out
    for name in ("serial, 1 BLAS thread", "shared memory, 2 workers", "pipes, 2 workers",
                 "tensor parallel, 2 workers"):
        assert name in text
    import json

    rows = {r["variant"]: r for r in json.loads(out.read_text())["results"]["64"]}
    # the tensor-parallel run moves the (64 x 10) logits once a step: 2,560 bytes
    assert rows["tensor parallel, 2 workers"]["mb_per_step"] == 64 * 10 * 4 / 1e6
    assert rows["shared memory, 2 workers"]["mb_per_step"] == bench_data_parallel.MLP(
        bench_data_parallel.SIZES).n_params * 4 / 1e6
