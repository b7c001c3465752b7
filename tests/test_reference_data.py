"""The reference runs (data/reference/*.json) against their schema and against themselves.

Every file in ``data/reference/`` must satisfy the JSON Schema of the ``reference`` entry of
``data/datapackage.json`` (under ``measurements``), be named in ``data/README.md`` with its
date, and agree with itself: every N within the cores it ran on, every speedup the stored
times' ratio, every fitted alpha and beta what the stored sweep gives, every bubble formula
the course's. The command that writes them, ``python -m benchmarks reference``, is run here
as a user types it (``--quick``: tiny sizes, seconds) and its file checked the same way; its
parts (the alpha-beta fit, the worker counts, the profiler's parser, the GPU operators' FLOPs)
are tested on their own; and :mod:`course_lib.reference` reads what it writes.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import reference, reference_gpu
from course_lib import reference as loader
from course_lib import roofline as rl
from course_lib.datasets import DataFileError
from course_lib.models import MLP
from course_lib.schedule import bubble_fraction

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
PACKAGE = json.loads((DATA / "datapackage.json").read_text(encoding="utf-8"))
RESOURCE = {m["name"]: m for m in PACKAGE["measurements"]}["reference"]
SCHEMA = RESOURCE["jsonSchema"]
FILES = sorted((DATA / RESOURCE["path"]).glob(RESOURCE["pattern"]))


def _close(a, b, rel: float = 1e-9) -> bool:
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-15)


def _all_close(a, b, rel: float = 1e-9) -> bool:
    return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))


def schema_problems(doc: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in validator.iter_errors(doc)]


def consistency_problems(doc: dict) -> list[str]:
    """What a valid file can still get wrong: numbers that disagree with each other."""
    out: list[str] = []
    prov = doc["provenance"]
    cores = prov["cpu"]["usable_cores"]

    def within(where: str, counts, limit: int = cores) -> None:
        bad = [int(n) for n in np.atleast_1d(counts) if int(n) > limit]
        if bad:
            out.append(f"{where}: N = {bad} above the {limit} usable cores")

    try:
        dt.datetime.fromisoformat(prov["date_utc"].replace("Z", "+00:00"))
    except ValueError:
        out.append(f"provenance.date_utc {prov['date_utc']!r} is no date")
    within("provenance.workers", prov["workers"])
    if prov["workers"] != sorted(set(prov["workers"])) or prov["workers"][0] != 1:
        out.append(f"provenance.workers {prov['workers']} must rise from 1")
    if doc["complete"] and "end" not in doc["cores_check"]:
        out.append("a complete run has a cores check at its end")
    results = {name: e["result"] for name, e in doc["experiments"].items() if e["status"] in ("ok", "partial")}

    if (r := results.get("pool")) is not None:
        within("pool.processes", r["processes"])
        if not _all_close(r["speedup_of_medians"], [r["serial_seconds"] / t for t in r["seconds"]]):
            out.append("pool: speedup_of_medians != serial_seconds / seconds")
        if not _all_close(r["efficiency"], [s / n for s, n in zip(r["speedup"], r["processes"], strict=True)]):
            out.append("pool: efficiency != speedup / N")
    if (r := results.get("threads")) is not None:
        within("threads.threads", r["threads"])
        for part in ("gemm", "conv"):
            t = r[part]["seconds"]
            if not _all_close(r[part]["speedup"], [t[0] / x for x in t]) or len(t) != len(r["threads"]):
                out.append(f"threads.{part}: speedup != t(1) / t(N)")
    if (r := results.get("roofline")) is not None:
        one = r["one_core"]
        if not _close(one["ridge"], one["peak_flops"] / one["memory_bandwidth"]):
            out.append("roofline: ridge != peak / bandwidth")
        within("roofline.gemm_rate_by_threads", r["gemm_rate_by_threads"]["threads"])
        for s in r["training_steps"]:
            if not (_close(s["share_of_peak"], s["measured_rate"] / one["peak_flops"])
                    and _close(s["share_of_roofline"], s["measured_rate"] / s["predicted_rate"])):
                out.append(f"roofline: training step B = {s['batch_size']}: shares disagree with the rates")
    if (r := results.get("scaling")) is not None:
        for run in r["runs"]:
            n = np.array(run["workers"], dtype=float)
            within(f"scaling B={run['batch_size']}", run["workers"])
            if not _all_close(run["strong_speedup"], run["serial_strong"] / np.array(run["strong_time"])):
                out.append(f"scaling B={run['batch_size']}: strong_speedup != serial_strong / strong_time")
            if not _all_close(run["weak_speedup"], n * run["serial_weak"] / np.array(run["weak_time"])):
                out.append(f"scaling B={run['batch_size']}: weak_speedup != N serial_weak / weak_time")
    if (r := results.get("collectives")) is not None:
        for run in r["runs"]:
            n = run["workers"]
            within("collectives", n)
            if "fit" in run:
                again = reference.fit_alpha_beta(run["message_bytes"], run["seconds"], n)
                if not all(_close(again[k], run["fit"][k], 1e-6) for k in ("alpha", "beta", "relative_rms")):
                    out.append(f"collectives N={n}: the stored alpha, beta are not the fit of the stored sweep")
            if "bytes_check" in run:
                check = run["bytes_check"]
                total = sum(row[0] for row in check["bytes_in"])
                if total != (n - 1) * check["message_bytes"] or not check["sum_correct"]:
                    out.append(f"collectives N={n}: reduce-scatter read {total} bytes, not (N-1) m")
    if (r := results.get("overlap")) is not None:
        for run in r["runs"]:
            within("overlap", run["workers"])
            k = len(run["buckets"])
            if any(len(run[f]) != k for f in ("measured_step", "model_overlapped", "same_params_as_one_bucket")):
                out.append(f"overlap N={run['workers']}: one value per bucket count")
            if not all(run["same_params_as_one_bucket"]):
                out.append(f"overlap N={run['workers']}: buckets changed the parameters")
        for run in r["wire_runs"]:
            within("overlap (wire)", run["workers"])
    if (r := results.get("pipeline")) is not None:
        for run in r["runs"]:
            within("pipeline stages", run["stages"], max(2, cores))
            if not _close(run["bubble_formula"], bubble_fraction(run["stages"], run["micro_batches"])):
                out.append(f"pipeline {run['schedule']} M={run['micro_batches']}: bubble_formula is not the course's")
            if run.get("same_params_as_gpipe") is False:
                out.append("pipeline: 1F1B's parameters differ from GPipe's")
    if (r := results.get("tensor")) is not None:
        for run in r["runs"]:
            within("tensor", run["workers"])
            if not _close(run["speedup"], run["serial_time_per_step"] / run["time_per_step"]):
                out.append(f"tensor N={run['workers']}: speedup != serial / time")
    if (r := results.get("hybrid")) is not None:
        for run in r["runs"]:
            if run["processes"] != run["data"] * run["stages"]:
                out.append(f"hybrid data={run['data']}: processes != data x stages")
            if run["oversubscribed"] != (run["processes"] > cores):
                out.append(f"hybrid data={run['data']}: 'oversubscribed' disagrees with the cores")
            if not _close(run["speedup"], r["serial_time_per_step"] / run["time_per_step"]):
                out.append(f"hybrid data={run['data']}: speedup != serial / time")
    if (r := results.get("conv")) is not None:
        within("conv threads", r["threads"])
        for layer in r["layers"]:
            for row in layer["by_threads"]:
                if row["seconds"] and row["fastest"] != min(row["seconds"], key=row["seconds"].get):
                    out.append(f"conv {layer['name']} {row['threads']}t: 'fastest' is not the fastest")
    if (r := results.get("gpu_roofline")) is not None:
        peak, bw = r["peaks"]["bfloat16"]["flops_per_second"], r["memory"]["bytes_per_second"]
        for name, p in r["peaks"].items():
            if not _close(p["flops_per_second"], p["flops"] / p["seconds"]) or p["dtype"] != name:
                out.append(f"gpu peak {name}: flops_per_second != flops / seconds")
        for op in r["operators"]:
            ok = (_close(op["achieved_flops"], op["flops"] / op["seconds"])
                  and _close(op["eta"], op["achieved_flops"] / peak)
                  and _close(op["attainable_flops"], min(peak, op["intensity"] * bw))
                  and op["bound"] == ("compute" if op["intensity"] >= peak / bw else "memory"))
            if not ok:
                out.append(f"gpu operator {op['group']}: {op['name']} is not placed on the stored roofline")
    if (r := results.get("gpu_conv")) is not None:
        for layer in r["layers"]:
            for dtype, row in layer["by_dtype"].items():
                for layout, run in (("NCHW", row), ("channels_last", row.get("channels_last"))):
                    if run is not None and not _close(run["flops_per_second"], 2 * layer["macs"] / run["seconds"]):
                        out.append(f"gpu conv {layer['name']} {dtype} {layout}: flops_per_second != 2 MACs / seconds")
    return out


# ------------------------------------------------------------------ the committed files
def test_the_schema_is_a_valid_json_schema_and_the_package_describes_the_folder():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert RESOURCE["path"] == "reference" and RESOURCE["format"] == "json"
    assert RESOURCE["sources"] and RESOURCE["licenses"]
    assert SCHEMA["properties"]["schema_version"]["const"] == reference.SCHEMA_VERSION == loader.SCHEMA_VERSION
    assert SCHEMA["properties"]["format"]["const"] == reference.FORMAT == loader.FORMAT
    named = set(SCHEMA["properties"]["experiments"]["properties"])
    assert named == set(reference.experiment_names()), "the schema names every experiment of the command"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_reference_file_satisfies_the_schema_and_itself(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert schema_problems(doc) == []
    assert consistency_problems(doc) == []
    assert doc["complete"] and not doc["provenance"]["quick"], "a committed reference is a whole run, not --quick"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_the_readme_names_the_source_of_every_reference_file(path):
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## reference/\n", 1)[1].split("\n## ", 1)[0]
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert f"`{path.name}`" in section, f"data/README.md, section reference/, does not name {path.name}"
    assert doc["provenance"]["date_utc"][:10] in section, f"data/README.md does not give {path.name}'s date"


def test_the_readme_has_a_section_for_the_reference_folder():
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## reference/\n", 1)[1].split("\n## ", 1)[0]
    for part in ("**What.**", "**Source", "**Licence.**", "python -m benchmarks reference"):
        assert part in section


# ------------------------------------------------------------------ the command, as a user types it
@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "quick.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "reference", "--quick", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc, out


@pytest.mark.slow  # about 20 s on two cores (processes at N = 1, 2; torch on the CPU for the GPU part)
def test_the_quick_run_writes_a_valid_consistent_file(quick_run):
    proc, out = quick_run
    doc = json.loads(out.read_text(encoding="utf-8"))
    failed = {n: e.get("error", e.get("errors")) for n, e in doc["experiments"].items() if e["status"] == "failed"}
    assert failed == {}, proc.stdout[-3000:]
    # rc 1: an experiment recorded an error in a part (e.g. a fit that the noise of a shared
    # machine defeats in a tiny sweep); the file says which, and the rest was measured
    partial = [n for n, e in doc["experiments"].items() if e["status"] == "partial"]
    assert proc.returncode == (1 if partial else 0), proc.stderr[-3000:]
    assert schema_problems(doc) == []
    assert consistency_problems(doc) == []
    assert doc["complete"] and doc["provenance"]["quick"] and doc["provenance"]["workers"][-1] <= 2
    assert doc["provenance"]["command"].endswith(f"-m benchmarks reference --quick --out {out}")
    assert set(doc["experiments"]) == set(reference.experiment_names())
    for name, entry in doc["experiments"].items():
        assert f"- {name} (chapter {entry['chapter']}) ..." in proc.stdout  # progress, with each time
        assert f"  {name}: {entry['status']} in " in proc.stdout
    try:
        import torch  # noqa: F401
    except ImportError:
        assert doc["experiments"]["gpu_roofline"]["status"] == "skipped"
    else:  # the GPU part's logic, with torch on the CPU
        gpu = doc["experiments"]["gpu_roofline"]["result"]
        assert gpu["device"]["device"] in ("cpu", "cuda") and set(gpu["peaks"]) == set(reference_gpu.DTYPES)
        groups = {op["group"] for op in gpu["operators"]}
        assert len(groups) == 3 and len(gpu["operators"]) == 7 + 11 + 9
        conv = doc["experiments"]["gpu_conv"]["result"]["layers"][0]["by_dtype"]
        assert set(conv) == set(reference_gpu.DTYPES) and all(row["main"] for row in conv.values())
        assert all(row["channels_last"]["main"] and row["busy_seconds"] > 0 for row in conv.values())


@pytest.mark.slow
def test_the_loader_reads_what_the_command_writes(quick_run):
    _, out = quick_run
    ref = loader.load_reference(str(out))
    pool = loader.experiment_result(ref, "pool")
    assert isinstance(pool["processes"], np.ndarray) and pool["processes"].dtype.kind == "i"
    assert np.allclose(pool["speedup_of_medians"], pool["serial_seconds"] / pool["seconds"])
    scaling = loader.experiment_result(ref, "scaling")["runs"][0]
    assert isinstance(scaling["strong_speedup"], np.ndarray) and isinstance(ref["provenance"]["cpu"]["model"], str)
    assert isinstance(loader.experiment_result(ref, "conv")["layers"][0]["x_shape"], tuple)
    assert loader.experiment_result(ref, "no such experiment") is None
    assert ref["provenance"]["cpu"]["model"] in loader.reference_label(ref)


def test_schema_and_consistency_checks_catch_broken_files(tmp_path):
    """A small valid document, then each kind of damage the checks must see."""
    doc = _minimal_doc()
    assert schema_problems(doc) == [] and consistency_problems(doc) == []
    damaged = {
        "format": lambda d: d.update(format="something else"),
        "status ok without result": lambda d: d["experiments"]["pool"].pop("result"),
        "negative time": lambda d: d["experiments"]["pool"]["result"]["seconds"].__setitem__(0, -1.0),
        "unknown experiment": lambda d: d["experiments"].update(mystery=d["experiments"]["pool"]),
        "failed without error": lambda d: d["experiments"]["pool"].update(status="failed"),
        "wrong chapter": lambda d: d["experiments"]["pool"].update(chapter="07"),
        "complete without end check": lambda d: d["cores_check"].pop("end"),
        "bad date": lambda d: d["provenance"].update(date_utc="yesterday"),
    }
    for what, damage in damaged.items():
        broken = copy.deepcopy(doc)
        damage(broken)
        assert schema_problems(broken), f"the schema misses: {what}"
    inconsistent = {
        "speedup": lambda d: d["experiments"]["pool"]["result"]["speedup_of_medians"].__setitem__(1, 9.0),
        "N above the cores": lambda d: d["experiments"]["pool"]["result"]["processes"].__setitem__(1, 64),
    }
    for what, damage in inconsistent.items():
        broken = copy.deepcopy(doc)
        damage(broken)
        assert consistency_problems(broken), f"the consistency check misses: {what}"


def _minimal_doc() -> dict:
    cores = 2
    t, serial = [0.2, 0.11], 0.2
    entry = {"chapter": "-", "status": "ok", "seconds": 1.0, "result": {"cores": cores, "slowdown": 1.0, "free": True,
                                                                       "verdict": "free", "load": 0.1}}
    return {
        "format": reference.FORMAT, "schema_version": reference.SCHEMA_VERSION, "complete": True,
        "provenance": {
            "command": "python -m benchmarks reference --out data/reference/x.json", "argv": ["--out", "x.json"],
            "date_utc": "2026-11-28T10:00:00Z", "quick": False, "workers": [1, 2],
            "cpu": {"model": "CPU", "logical_cores": cores, "usable_cores": cores, "physical_cores": cores,
                    "threads_per_core": 1, "source": "test"},
            "memory_bytes": 2**30, "os": "Linux", "machine": "x86_64", "python": "3.12", "numpy": "2.0",
            "thread_pools": [], "start_method": "forkserver", "course": None, "torch": None, "wall_seconds": 1.0},
        "cores_check": {"start": entry, "end": entry},
        "experiments": {"pool": {
            "chapter": "01", "status": "ok", "seconds": 2.0,
            "result": {"processes": [1, 2], "seconds": t, "serial_seconds": serial, "speedup": [1.0, 1.8],
                       "speedup_of_medians": [serial / x for x in t], "efficiency": [1.0, 0.9],
                       "spread": [0.0, 0.1], "startup_seconds": [0.1, 0.1], "start_method": "forkserver",
                       "max_abs_difference": 0.0, "repeat": 3,
                       "workload": {"sizes": [64, 256, 10], "batch_size": 64, "epochs": 12}}}},
    }


def test_the_help_and_the_old_benchmark_command_still_work():
    def run(*args):
        return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)

    helped = run("reference", "--help")
    assert helped.returncode == 0 and "--out" in helped.stdout and "--quick" in helped.stdout
    assert "pool" in helped.stdout and "gpu_conv" in helped.stdout
    listed = run("reference", "--list")
    assert listed.returncode == 0 and "scaling" in listed.stdout and "chapter 07" in listed.stdout
    assert run("reference", "--only", "nonsense").returncode == 2
    wrong = run("nonsense")
    assert wrong.returncode == 2 and "reference" in wrong.stderr


# ------------------------------------------------------------------ the command's parts
def test_a_failing_experiment_is_recorded_and_the_others_go_on(tmp_path, monkeypatch, capsys):
    from benchmarks import reference_cpu

    def boom(plan):
        """An experiment that breaks."""
        raise RuntimeError("the cores melted")

    def fine(plan):
        """An experiment that works."""
        return {"workers": plan.workers, "errors": []}

    def half(plan):
        """An experiment with a broken part."""
        return {"value": 1.0, "errors": [{"part": "one part", "type": "ValueError", "message": "noise"}]}

    monkeypatch.setattr(reference_cpu, "EXPERIMENTS", [("pool", "01", boom), ("threads", "05", fine),
                                                       ("roofline", "06", half)])
    monkeypatch.setattr(reference_gpu, "EXPERIMENTS", [])
    monkeypatch.setattr(reference, "_cores_check", lambda quick, start_method=None: {"cores": 1, "free": True})
    out = tmp_path / "run.json"
    assert reference.main(["--quick", "--out", str(out)]) == 1
    doc = json.loads(out.read_text(encoding="utf-8"))
    pool, threads, roof = (doc["experiments"][n] for n in ("pool", "threads", "roofline"))
    assert pool["status"] == "failed" and pool["error"]["message"] == "the cores melted"
    assert "RuntimeError" in pool["error"]["traceback"] and "result" not in pool
    assert threads["status"] == "ok" and threads["result"] == {"workers": [1, 2]} and "errors" not in threads
    assert roof["status"] == "partial" and roof["errors"][0]["part"] == "one part"
    assert doc["complete"] and set(doc["cores_check"]) == {"start", "end"}
    text = capsys.readouterr().out
    assert "pool: failed in" in text and "RuntimeError: the cores melted" in text
    assert "with errors: pool (failed), roofline (partial)" in text
    assert reference.main(["--quick", "--only", "threads", "--out", str(out)]) == 0
    assert list(json.loads(out.read_text(encoding="utf-8"))["experiments"]) == ["threads"]


def test_worker_counts():
    assert reference.worker_counts(16) == [1, 2, 4, 8, 16]
    assert reference.worker_counts(6) == [1, 2, 4, 6]
    assert reference.worker_counts(1) == [1]
    assert reference.worker_counts(16, 2) == [1, 2] and reference.worker_counts(3, 8) == [1, 2, 3]


def test_fit_alpha_beta_recovers_the_ring_model():
    from course_lib.alpha_beta import ring_allreduce_time

    m = np.array([2.0**k for k in range(10, 25, 2)])
    for n, alpha, beta in ((2, 5e-6, 4e9), (16, 2e-5, 1e10)):
        fit = reference.fit_alpha_beta(m, ring_allreduce_time(m, n, beta, alpha), n)
        assert _close(fit["alpha"], alpha, 1e-9) and _close(fit["beta"], beta, 1e-9) and fit["relative_rms"] < 1e-9
    noisy = ring_allreduce_time(m, 4, 1e9, 1e-5) * (1 + 0.05 * np.sin(np.arange(m.size)))
    fit = reference.fit_alpha_beta(m, noisy, 4)
    assert 0.5e-5 < fit["alpha"] < 2e-5 and 0.8e9 < fit["beta"] < 1.2e9
    flat_start = np.array([1e-3, 1e-3, 1e-3, 2e-3])  # intercept would be negative: clipped to 0
    assert reference.fit_alpha_beta(np.array([1e3, 1e4, 1e5, 1e7]), flat_start, 2)["alpha"] >= 0
    for bad in (dict(devices=1), dict(seconds=[1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])):
        with pytest.raises(ValueError):
            reference.fit_alpha_beta(m, bad.get("seconds", ring_allreduce_time(m, 2, 1e9, 1e-5)), bad.get("devices", 2))
    with pytest.raises(ValueError, match="do not grow"):
        reference.fit_alpha_beta([1e3, 1e6], [1e-3, 1e-4], 2)


def test_plain_makes_strict_json():
    doc = reference.plain({"a": np.arange(3), "b": np.float32(0.5), "c": float("nan"), "d": (1, np.bool_(True))})
    assert json.loads(json.dumps(doc, allow_nan=False)) == {"a": [0, 1, 2], "b": 0.5, "c": None, "d": [1, True]}


def test_the_cpu_topology_is_recorded_with_its_source():
    topo = reference.cpu_topology()
    assert topo["usable_cores"] >= 1 and isinstance(topo["model"], str) and topo["source"]
    local = reference.local_cpu_topology()
    assert local["physical_cores"] is None or 1 <= local["physical_cores"] <= local["logical_cores"]


def test_pick_kernels_reads_gpu_and_cpu_profiles():
    gpu_rows = [("aten::conv2d", "DeviceType.CPU", 40.0, 0.0, 3),
                ("aten::cudnn_convolution", "DeviceType.CPU", 90.0, 60.0, 3),
                ("cudaLaunchKernel", "DeviceType.CPU", 12.0, 0.0, 9),
                ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32", "DeviceType.CUDA", 0.0, 54.0, 3),
                ("void nchwToNhwcKernel<__nv_bfloat16>", "DeviceType.CUDA", 0.0, 6.0, 6)]
    k = reference_gpu.pick_kernels(gpu_rows)
    assert k["kind"] == "gpu kernels" and k["main"].startswith("sm90_xmma_fprop")
    assert [r["name"] for r in k["kernels"]][1] == "void nchwToNhwcKernel<__nv_bfloat16>"
    # a kernel row whose device type the profiler left as CPU is still seen (no CPU time of its own)
    k = reference_gpu.pick_kernels([("aten::cudnn_convolution", "CPU", 90.0, 60.0, 3),
                                    ("implicit_gemm", "CPU", 0.0, 55.0, 3)])
    assert k["main"] == "implicit_gemm"
    cpu_rows = [("aten::conv2d", "CPU", 10.0, 0.0, 3), ("aten::convolution", "CPU", 8.0, 0.0, 3),
                ("aten::mkldnn_convolution", "CPU", 700.0, 0.0, 3), ("aten::empty", "CPU", 2.0, 0.0, 3)]
    k = reference_gpu.pick_kernels(cpu_rows)
    assert k["kind"] == "cpu operators" and k["main"] == "aten::mkldnn_convolution" and len(k["kernels"]) == 1
    assert reference_gpu.pick_kernels([])["main"] is None


def test_the_gpu_operators_count_as_the_course_counts():
    """The MLP operators timed on the GPU have the FLOPs and bytes (at 2 bytes per number) that
    course_lib.roofline.mlp_step_ops gives its operators of the same name; BERT's GEMMs are
    2 x the multiply-adds of its layer."""
    for sizes, batch in (((64, 64, 10), 64), ((4096, 4096, 4096, 10), 1024)):
        course = {op.name: op for op in rl.mlp_step_ops(MLP(sizes), batch, itemsize=2)}
        specs = reference_gpu.mlp_specs(sizes, batch, "g")
        assert len(specs) == (7 if len(sizes) == 3 else 11)
        for spec in specs:
            assert spec.op == course[spec.op.name], spec.op.name
    b, s, h, heads, f = reference_gpu.BERT_LARGE_LAYER
    gemms = sum(sp.op.flops for sp in reference_gpu.bert_layer_specs(b, s, h, heads, f)
                if sp.op.name in reference_gpu.BERT_GEMMS)
    assert gemms == 2 * b * s * (3 * h * h + h * h + 2 * h * f + 2 * s * h)  # projections, FFN, scores and AV


def test_place_puts_an_operator_on_the_roofline():
    op = rl.gemm_op(1024, 1024, 1024, itemsize=2)
    p = reference_gpu.place(op, op.flops / 5e14, 1e15, 3e12)
    assert _close(p["eta"], 0.5) and p["bound"] == "compute" and _close(p["share_of_roofline"], 0.5)
    relu = rl.elementwise_op(10**8, itemsize=2)
    p = reference_gpu.place(relu, relu.nbytes / 1.5e12, 1e15, 3e12)
    assert p["bound"] == "memory" and _close(p["share_of_bandwidth"], 0.5) and _close(p["share_of_roofline"], 0.5)


@pytest.mark.slow  # importing torch and its profiler: about 5 s
def test_the_gpu_part_runs_with_torch_on_the_cpu():
    torch = pytest.importorskip("torch")
    plan = reference.Plan(quick=True, cores=2, workers=[1, 2], gpu="cpu")
    assert reference_gpu.choose_device(plan) == (torch, "cpu")
    off = reference_gpu.choose_device(reference.Plan(True, 2, [1], gpu="off"))
    assert off.startswith("the GPU part was switched off")
    peak = reference_gpu.gemm_peak(torch, "cpu", "tf32", 32, repeat=2)
    assert peak["flops"] == 2 * 32**3 and peak["flops_per_second"] > 0
    assert reference_gpu.copy_bandwidth(torch, "cpu", 2**16, repeat=2)["bytes_moved"] == 2 * 2**16
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with reference_gpu.tf32(torch, True):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    x = torch.randn(1, 2, 6, 6)
    w = torch.randn(2, 2, 3, 3)
    rows = reference_gpu.profile_rows(torch, "cpu", lambda: torch.nn.functional.conv2d(x, w, padding=1))
    assert reference_gpu.pick_kernels(rows)["kind"] == "cpu operators"


# ------------------------------------------------------------------ the loader
def test_the_loader_lists_and_rejects():
    assert loader.available_references() == sorted(p.stem for p in FILES)
    with pytest.raises(DataFileError, match="no reference named"):
        loader.load_reference("no-such-machine")
    with pytest.raises(TypeError):
        loader.load_reference(None)
    with pytest.raises(TypeError):
        loader.reference_label({"no": "provenance"})


def test_the_loader_reads_a_file_and_rejects_other_json(tmp_path):
    good = tmp_path / "mine.json"
    good.write_text(json.dumps(_minimal_doc()), encoding="utf-8")
    ref = loader.load_reference(str(good))
    assert np.array_equal(loader.experiment_result(ref, "pool")["processes"], [1, 2])
    assert ref["provenance"]["argv"] == ("--out", "x.json")
    assert loader.reference_label(ref) == "CPU, 2 cores (2026-11-28)"
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "a notebook"}), encoding="utf-8")
    with pytest.raises(DataFileError, match="not a reference run"):
        loader.load_reference(str(other))
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(DataFileError, match="not valid JSON"):
        loader.load_reference(str(broken))


@pytest.mark.parametrize("name", [p.stem for p in FILES])
def test_every_reference_file_loads(name):
    ref = loader.load_reference(name)
    assert loader.reference_label(ref)
