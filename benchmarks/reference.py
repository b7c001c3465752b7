"""The reference run: the course's measuring experiments on this machine, in one JSON file.

``python -m benchmarks reference --out data/reference/NAME.json`` runs, at N = 1, 2, 4, 8,
16 ... up to the usable cores (and the core count itself when it is no power of two), each
experiment of the course with the course's own functions, called as the notebooks call
them (:mod:`benchmarks.reference_cpu`): chapter 01's pool, chapter 05's threads, chapter
06's roofline, chapter 07's strong and weak scaling, chapter 08's collectives (a
message-size sweep with alpha and beta fitted, :func:`course_lib.alpha_beta.fit_alpha_beta`)
and overlap, chapter 11's pipeline bubble, chapter 12's tensor split, chapter 14's hybrid run, and the course's
convolution algorithms on ResNet-50's 3x3 layers. Where a CUDA GPU is present it also
measures the GPU's roofline, places the running example's and a BERT-Large layer's
operators on it, and records which kernels cuDNN runs for ResNet-50's 3x3 layers
(:mod:`benchmarks.reference_gpu`).

The file holds the provenance (CPU model, cores and topology, memory, numpy and its BLAS,
Python, OS, torch/CUDA/cuDNN, the course's commit, the date, the command), the cores
check before and after, and every experiment with its status, wall time, the load average
and the hypervisor's steal time while it ran. Its schema is the ``reference`` entry of
``data/datapackage.json`` (``measurements``); notebooks read such files through
:func:`course_lib.reference.load_reference`, never by parsing them.

A failure of one experiment is recorded in the file (its error and traceback) and the
others go on; the exit status is 1 if any experiment failed or recorded an error, 130 on
an interrupt. The file is rewritten after every experiment (``"complete": false`` until
the end), so a run cut short keeps what it measured.

``--quick`` runs tiny sizes at N <= 2 in seconds (the tests; its numbers mean nothing);
``--only pool,scaling`` runs a subset; ``--list`` names the experiments.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from course_lib.alpha_beta import fit_alpha_beta  # noqa: F401 (the fit of the collectives' sweep, named here for the tests)

#: Version of the file's layout (``schema_version``); the schema in data/datapackage.json checks it.
SCHEMA_VERSION = 1
#: What the file says it is (``format``).
FORMAT = "ddl-course reference run"
ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ worker counts
def worker_counts(cores: int, most: int | None = None) -> list[int]:
    """N = 1, 2, 4, 8 ... up to ``cores`` (and ``cores`` itself), at most ``most``.

    >>> worker_counts(16), worker_counts(12), worker_counts(2), worker_counts(16, 2)
    ([1, 2, 4, 8, 16], [1, 2, 4, 8, 12], [1, 2], [1, 2])
    """
    top = max(1, int(cores) if most is None else min(int(cores), int(most)))
    counts = [2**k for k in range(top.bit_length()) if 2**k <= top]
    return counts + ([top] if counts[-1] != top else [])


@dataclasses.dataclass
class Plan:
    """What a run measures: ``quick`` (tiny sizes), the usable ``cores``, the ``workers`` N,
    the ``start_method`` of the workers, the ``gpu`` device choice ("auto", "cuda", "cpu", "off")."""

    quick: bool
    cores: int
    workers: list[int]
    start_method: str | None = None
    gpu: str = "auto"


# ------------------------------------------------------------------ JSON
def plain(value):
    """``value`` as JSON can hold it: arrays and tuples as lists, numpy scalars as numbers,
    dataclasses as dicts, NaN and infinities as None (strict JSON has neither).

    >>> plain({"a": np.array([1.0, np.nan]), "b": (np.int64(2), float("inf"))})
    {'a': [1.0, None], 'b': [2, None]}
    """
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)


def write_json(path: Path, document: dict) -> None:
    """Write ``document`` to ``path`` (strict JSON, indented), replacing it in one step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(plain(document), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# ------------------------------------------------------------------ provenance
def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _cpu_list(text: str | None) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]."""
    out: list[int] = []
    for part in (text or "").split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out += range(int(lo), int(hi) + 1)
        elif part.strip():
            out.append(int(part))
    return out


def _size_bytes(text: str | None) -> int | None:
    if not text:
        return None
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def local_cpu_topology() -> dict:
    """The CPU as Linux describes it (``/proc/cpuinfo`` and sysfs), for the usable CPUs:
    model, logical CPUs, physical cores (distinct package and core ids), hardware threads
    per core, sockets, NUMA nodes, L3 cache. Fields the OS does not give are None."""
    from course_lib.timing import available_cores

    info = {"model": None, "logical_cores": os.cpu_count(), "usable_cores": available_cores(),
            "physical_cores": None, "threads_per_core": None, "sockets": None, "numa_nodes": None,
            "l3_cache_bytes": None, "source": "benchmarks.reference.local_cpu_topology (/proc/cpuinfo, sysfs)"}
    cpuinfo = _read("/proc/cpuinfo") or ""
    for line in cpuinfo.splitlines():
        key, _, val = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and val.strip():
            info["model"] = val.strip()
            break
    info["model"] = info["model"] or platform.processor() or platform.machine()
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cores, packages, siblings, l3 = set(), set(), [], {}
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}"
        core, pkg = _read(f"{base}/topology/core_id"), _read(f"{base}/topology/physical_package_id")
        if core is None or pkg is None:
            continue
        cores.add((pkg, core))
        packages.add(pkg)
        siblings.append(len(_cpu_list(_read(f"{base}/topology/thread_siblings_list"))))
        for index in sorted(Path(f"{base}/cache").glob("index*")):
            if _read(f"{index}/level") == "3":
                l3[_read(f"{index}/shared_cpu_list")] = _size_bytes(_read(f"{index}/size"))
    if cores:
        info.update(physical_cores=len(cores), sockets=len(packages), threads_per_core=max(siblings))
    if l3 and all(v is not None for v in l3.values()):
        info["l3_cache_bytes"] = sum(l3.values())
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    info["numa_nodes"] = len(nodes) or None
    return info


def cpu_topology() -> dict:
    """The course's ``cpu_topology()`` where it exists (course_lib.parallel.train.cores or
    .topology), else :func:`local_cpu_topology`; the model name and the usable cores always."""
    local = local_cpu_topology()
    for module in ("course_lib.parallel.train.cores", "course_lib.parallel.train.topology"):
        try:
            fn = __import__(module, fromlist=["cpu_topology"]).cpu_topology
        except (ImportError, AttributeError):
            continue
        try:
            found = plain(fn())
        except Exception as exc:  # noqa: BLE001 - recorded, the local reading stands
            local["course_topology_error"] = f"{type(exc).__name__}: {exc}"
            return local
        found = found if isinstance(found, dict) else {"value": found}
        return {**local, "course": found, "source": f"{module}.cpu_topology (and the local reading)"}
    return local


def _memory_bytes() -> int | None:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def blas_info() -> list[dict]:
    """threadpoolctl's view of the thread pools (BLAS, OpenMP) without file paths."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("user_api", "internal_api", "prefix", "version", "num_threads", "threading_layer", "architecture")
    return [{k: i.get(k) for k in keep if k in i} for i in threadpool_info()]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def course_version() -> dict | None:
    """The course's git commit, and whether tracked files differ from it (None without git)."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return None
    changed = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(changed) if changed is not None else None}


def torch_versions(*, import_torch: bool = True) -> dict | None:
    """torch, CUDA and cuDNN versions and the GPUs, where torch is installed (None otherwise);
    ``import_torch=False``: only the installed version, read without importing torch."""
    if not import_torch:
        from importlib import metadata

        try:
            return {"torch": metadata.version("torch"), "imported": False}
        except metadata.PackageNotFoundError:
            return None
    try:
        import torch
    except ImportError:
        return None
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": None,
           "cuda_available": bool(torch.cuda.is_available()), "gpus": []}
    try:
        out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        for i in range(torch.cuda.device_count() if out["cuda_available"] else 0):
            p = torch.cuda.get_device_properties(i)
            out["gpus"].append({"name": p.name, "memory_bytes": int(p.total_memory),
                                "multiprocessors": int(p.multi_processor_count),
                                "capability": f"{p.major}.{p.minor}"})
    except Exception as exc:  # noqa: BLE001 - recorded
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def provenance(command: str, argv: Sequence[str], plan: Plan) -> dict:
    from course_lib.parallel.engine.workers import check_start_method

    return {
        "command": command,
        "argv": list(argv),
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "quick": plan.quick,
        "workers": plan.workers,
        "cpu": cpu_topology(),
        "memory_bytes": _memory_bytes(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "thread_pools": blas_info(),
        "start_method": check_start_method(plan.start_method),
        "course": course_version(),
        "torch": None,  # filled in by the GPU part, which imports torch (after the CPU experiments)
        "load_average_start": _load(),
    }


# ------------------------------------------------------------------ running experiments
def _load() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def cpu_times() -> tuple[float, float] | None:
    """(steal, total) jiffies of all CPUs from /proc/stat (None where there is none)."""
    line = (_read("/proc/stat") or "").split("\n", 1)[0].split()
    if not line or line[0] != "cpu":
        return None
    fields = [float(v) for v in line[1:9]]
    return (fields[7] if len(fields) > 7 else 0.0), sum(fields)


def steal_fraction(before, after) -> float | None:
    """Share of the CPUs' time the hypervisor gave to others between two :func:`cpu_times`."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def run_experiment(name: str, chapter: str, fn: Callable[[], dict]) -> dict:
    """Run one experiment: its result or its error, its wall time, load and steal time."""
    t0, cpu0, load0 = time.perf_counter(), cpu_times(), _load()
    entry: dict = {"chapter": chapter}
    try:
        result = fn()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - recorded; the other experiments go on
        entry.update(status="failed", error={"type": type(exc).__name__, "message": str(exc)[:2000],
                                             "traceback": traceback.format_exc()[-6000:]})
    else:
        if result.get("skipped"):
            entry.update(status="skipped", reason=str(result["skipped"]))
        else:
            errors = result.pop("errors", None) or []
            entry.update(status="partial" if errors else "ok", result=result)
            if errors:
                entry["errors"] = errors
    entry.update(seconds=time.perf_counter() - t0, load_average_before=load0, load_average_after=_load(),
                 steal_fraction=steal_fraction(cpu0, cpu_times()))
    return entry


def _cores_check(quick: bool, start_method: str | None = None) -> dict:
    from course_lib.parallel.train import check_cores

    check = check_cores(0.05, rounds=1, start_method=start_method) if quick else check_cores(start_method=start_method)
    return {**plain(check), "free": bool(check.free), "verdict": str(check)}


def _experiments() -> list[tuple[str, str, Callable[[Plan], dict]]]:
    from . import reference_cpu, reference_gpu

    return [*reference_cpu.EXPERIMENTS, *reference_gpu.EXPERIMENTS]


def experiment_names() -> list[str]:
    return [name for name, _, _ in _experiments()]


def main(argv: Sequence[str] | None = None, *, command: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks reference", description=__doc__.split("\n\n")[0],
        epilog="experiments: " + ", ".join(experiment_names()))
    parser.add_argument("--out", default="reference.json", help="the JSON file to write (default reference.json)")
    parser.add_argument("--only", default=None, help="comma-separated experiments to run (default all)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes, N <= 2, seconds (for tests: numbers mean nothing)")
    parser.add_argument("--max-workers", type=int, default=None, help="largest N (default: the usable cores)")
    parser.add_argument("--gpu", choices=("auto", "cuda", "cpu", "off"), default="auto",
                        help="device of the GPU part: auto = CUDA where present (with --quick: torch on the CPU "
                             "otherwise), cpu = torch on the CPU (tests its logic), off = skip it")
    parser.add_argument("--start-method", default=None, help="fork, forkserver or spawn (default: the course's)")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    args = parser.parse_args(argv)
    experiments = _experiments()
    if args.list:
        for name, chapter, fn in experiments:
            print(f"{name:13s} chapter {chapter}: {(fn.__doc__ or '').strip().splitlines()[0]}")
        return 0
    names = [n for n, _, _ in experiments]
    only = names if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(only) - set(names))
    if unknown:
        parser.error(f"unknown experiment(s) {unknown}; known: {', '.join(names)}")

    from course_lib.timing import available_cores

    cores = available_cores()
    most = 2 if args.quick else None
    if args.max_workers is not None:
        most = min(most or args.max_workers, args.max_workers)
    plan = Plan(args.quick, cores, worker_counts(cores, most), args.start_method, args.gpu)
    out = Path(args.out)
    if command is None:
        command = shlex.join(["python", "-m", "benchmarks", "reference", *argv])
    doc = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "complete": False,
           "provenance": provenance(command, argv, plan), "cores_check": {}, "experiments": {}}
    t_start, cpu_start = time.perf_counter(), cpu_times()
    print(f"reference run: {cores} usable cores, N = {plan.workers}{' (quick: tiny sizes)' if plan.quick else ''}; "
          f"writing {out}", flush=True)
    status = 0
    try:
        check = lambda: _cores_check(plan.quick, plan.start_method)  # noqa: E731
        doc["cores_check"]["start"] = run_experiment("cores_start", "-", check)
        print(f"  cores check: {doc['cores_check']['start'].get('result', {}).get('verdict', 'failed')}", flush=True)
        write_json(out, doc)
        for name, chapter, fn in experiments:
            if name not in only:
                continue
            print(f"- {name} (chapter {chapter}) ...", flush=True)
            entry = run_experiment(name, chapter, lambda fn=fn: fn(plan))
            doc["experiments"][name] = entry
            if name.startswith("gpu") and doc["provenance"]["torch"] is None and "torch" in sys.modules:
                doc["provenance"]["torch"] = torch_versions()
            detail = entry.get("reason") or (entry["error"]["type"] + ": " + entry["error"]["message"][:200]
                                             if "error" in entry else "")
            total = time.perf_counter() - t_start
            print(f"  {name}: {entry['status']} in {entry['seconds']:.1f} s (total {total:.0f} s)"
                  + (f" - {detail}" if detail else ""), flush=True)
            write_json(out, doc)
        doc["cores_check"]["end"] = run_experiment("cores_end", "-", check)
        doc["complete"] = True
    except KeyboardInterrupt:
        doc["interrupted"] = True
        status = 130
    if doc["provenance"]["torch"] is None:
        doc["provenance"]["torch"] = torch_versions(import_torch="torch" in sys.modules)
    doc["provenance"].update(wall_seconds=time.perf_counter() - t_start, load_average_end=_load(),
                             steal_fraction=steal_fraction(cpu_start, cpu_times()))
    write_json(out, doc)
    bad = [f"{n} ({e['status']})" for n, e in doc["experiments"].items() if e["status"] in ("failed", "partial")]
    bad += [f"cores check {k}" for k, e in doc["cores_check"].items() if e["status"] == "failed"]
    print(f"done in {doc['provenance']['wall_seconds']:.0f} s; wrote {out}"
          + (f"; with errors: {', '.join(bad)}" if bad else ""), flush=True)
    return status or (1 if bad else 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
