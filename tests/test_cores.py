"""The cores check, free for a GEMM: the CPU topology (fake sysfs trees), the steal time of
/proc/stat, the decision on hand-made measurements, the verdict's text, the argument checks,
real runs (one against competing memory streams started here) and the GEMM's thread gain.

tests/test_core_check.py keeps the older checks (the command line, make notebooks).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course_lib.parallel.train import cores as cores_module
from course_lib.parallel.train.cores import (
    CoreCheck,
    CpuTopology,
    ThreadGain,
    check_cores,
    cpu_topology,
    gemm_thread_gain,
)
from course_lib.timing import available_cores

pytest_plugins = ["leak_fixtures"]  # the fixture clean


# ------------------------------------------------------------------ fake sysfs trees
def fake_tree(root: Path, cpus: dict[int, dict[str, str]], *, cpuinfo: str | None = "model name\t: Fake CPU 3000\n",
              nodes: dict[int, str] | None = None, caches: list[tuple[str, str, str]] = ()) -> Path:
    """A root with sys/devices/system/cpu/cpuN/topology/<file> = text for each cpu's dict,
    proc/cpuinfo, NUMA nodes {k: cpulist} and cpu0's caches [(level, type, size)]."""
    base = root / "sys" / "devices" / "system" / "cpu"
    for cpu, files in cpus.items():
        topo = base / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        for name, text in files.items():
            (topo / name).write_text(text + "\n")
    for i, (level, kind, size) in enumerate(caches):
        d = base / "cpu0" / "cache" / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(level + "\n")
        (d / "type").write_text(kind + "\n")
        (d / "size").write_text(size + "\n")
    for k, cpulist in (nodes or {}).items():
        d = root / "sys" / "devices" / "system" / "node" / f"node{k}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpulist + "\n")
    if cpuinfo is not None:
        (root / "proc").mkdir(exist_ok=True)
        (root / "proc" / "cpuinfo").write_text(cpuinfo)
    return root


def hyperthreaded(root: Path) -> Path:
    """4 logical CPUs on 2 physical cores (Linux numbers siblings 0,2 and 1,3)."""
    return fake_tree(root, {c: {"thread_siblings_list": "0,2" if c % 2 == 0 else "1,3", "physical_package_id": "0",
                                "core_id": str(c % 2)} for c in range(4)},
                     nodes={0: "0-3"}, caches=[("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                               ("2", "Unified", "2048K"), ("3", "Unified", "105M")])


def test_a_hyperthreaded_machine(tmp_path):
    top = cpu_topology(hyperthreaded(tmp_path), cpus=range(4))
    assert (top.logical, top.physical, top.hyperthreads, top.threads_per_core) == (4, 2, 2, 2.0)
    assert top.cores == ((0, 2), (1, 3)) and top.sibling_pair == (0, 2) and top.core_pair == (0, 1)
    assert (top.packages, top.numa_nodes, top.model, top.source) == (1, 1, "Fake CPU 3000", "sysfs")
    assert top.llc_bytes == 105 << 20  # the highest level's data cache, not the instruction cache
    assert top.describe() == ("4 logical CPUs on 2 physical cores (Fake CPU 3000): the 2 extra are "
                              "hyper-threads, which share a core's arithmetic units; a compute-bound GEMM "
                              "gains little from them")


def test_sixteen_cores_one_thread_each(tmp_path):
    root = fake_tree(tmp_path, {c: {"core_cpus_list": str(c), "thread_siblings_list": "0-15",  # core_cpus_list wins
                                    "physical_package_id": "0"} for c in range(16)})
    top = cpu_topology(root, cpus=range(16))
    assert (top.logical, top.physical, top.hyperthreads, top.sibling_pair) == (16, 16, 0, None)
    assert top.describe() == "16 logical CPUs on 16 physical cores (Fake CPU 3000), no hyper-threads"


def test_an_affinity_mask_counts_only_the_cpus_it_allows(tmp_path):
    root = hyperthreaded(tmp_path)
    two_cores = cpu_topology(root, cpus=[1, 0])
    assert (two_cores.cpus, two_cores.physical, two_cores.hyperthreads, two_cores.sibling_pair) == ((0, 1), 2, 0, None)
    one_core = cpu_topology(root, cpus={0, 2})
    assert (one_core.physical, one_core.hyperthreads, one_core.sibling_pair, one_core.core_pair) == (1, 1, (0, 2), None)


def test_without_sibling_lists_package_and_core_ids_count(tmp_path):
    """Two sockets, each with cores 0 and 1: core_id alone would count 2 cores, not 4."""
    root = fake_tree(tmp_path, {c: {"physical_package_id": str(c // 2), "core_id": str(c % 2)} for c in range(4)},
                     nodes={0: "0-1", 1: "2-3"})
    top = cpu_topology(root, cpus=range(4))
    assert (top.physical, top.packages, top.numa_nodes) == (4, 2, 2)
    assert "on 2 NUMA nodes" in top.describe()
    assert cpu_topology(root, cpus=[2, 3]).numa_nodes == 1


def test_missing_files_give_unknown_not_a_guess(tmp_path):
    root = fake_tree(tmp_path, {0: {"core_cpus_list": "0"}, 1: {}}, cpuinfo=None)  # cpu1 says nothing
    top = cpu_topology(root, cpus=[0, 1])
    assert (top.physical, top.hyperthreads, top.threads_per_core, top.source) == (None, None, None, "unknown")
    assert (top.cores, top.sibling_pair, top.numa_nodes, top.llc_bytes) == ((), None, None, None)
    assert isinstance(top.model, str) and top.model  # platform's answer, else "unknown"
    assert "physical cores unknown" in top.describe()
    empty = cpu_topology(tmp_path / "nothing-here", cpus=[0])
    assert (empty.logical, empty.physical) == (1, None)


def test_macos_asks_sysctl(tmp_path, monkeypatch):
    answers = {"hw.physicalcpu": "8", "hw.packages": "1", "hw.l3cachesize": "", "hw.l2cachesize": "4194304",
               "machdep.cpu.brand_string": "Apple M2"}
    monkeypatch.setattr(cores_module, "_sysctl", lambda name: answers.get(name) or None)
    top = cpu_topology(tmp_path, cpus=range(10))
    assert (top.physical, top.packages, top.llc_bytes, top.model, top.source) == (8, 1, 4 << 20, "Apple M2", "sysctl")
    assert top.hyperthreads == 2 and top.cores == ()


@pytest.mark.parametrize(("text", "cpus"), [("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}), ("5", {5}), ("", set()),
                                            ("0-x", None), (None, None)])
def test_the_kernels_cpu_lists(text, cpus):
    assert cores_module._cpu_list(text) == cpus


def test_this_machine():
    top = cpu_topology()
    assert top.logical == available_cores() and set(top.cpus) == set(os.sched_getaffinity(0))
    assert top.physical is None or 1 <= top.physical <= top.logical
    assert json.loads(json.dumps(top.as_dict()))["logical"] == top.logical  # provenance for a JSON file


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"root": 3}, TypeError, "root"),
    ({"cpus": []}, ValueError, "cpus"),
    ({"cpus": [-1]}, ValueError, r"cpus\[0\]"),
    ({"cpus": "01"}, TypeError, "cpus"),
    ({"cpus": [0, True]}, TypeError, r"cpus\[1\]"),
    ({"cpus": [0.0]}, TypeError, r"cpus\[0\]"),
])
def test_topology_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        cpu_topology(**kwargs)


# ------------------------------------------------------------------ steal time
def test_steal_is_read_per_usable_cpu(tmp_path):
    (tmp_path / "proc").mkdir()
    stat = tmp_path / "proc" / "stat"

    def write(steal0, steal1, busy):
        stat.write_text(f"cpu  {2 * busy} 0 0 0 0 0 0 {steal0 + steal1} 0 0\n"
                        f"cpu0 {busy} 0 0 0 0 0 0 {steal0} 0 0\ncpu1 {busy} 0 0 0 0 0 0 {steal1} 7 7\n")

    write(0, 0, 100)
    before = cores_module._cpu_ticks(tmp_path, [0, 1])
    write(30, 0, 170)  # cpu0 lost 30 ticks of 100 to the hypervisor; guest ticks are not counted twice
    after = cores_module._cpu_ticks(tmp_path, [0, 1])
    assert before == (0, 200) and after == (30, 370)
    assert cores_module._steal_share(before, after) == pytest.approx(30 / 170)
    assert cores_module._steal_share(after, after) != cores_module._steal_share(after, after)  # NaN: no time
    assert cores_module._cpu_ticks(tmp_path, [5]) == (30, 370)  # no line for cpu5: the machine's line
    assert cores_module._cpu_ticks(tmp_path / "none", [0]) is None
    assert math.isnan(cores_module._steal_share(None, after))


# ------------------------------------------------------------------ the decision
HT = CpuTopology(tuple(range(16)), tuple((c, c + 8) for c in range(8)), 8, 1, 1, "Fake Xeon", 32 << 20, "sysfs")
FLAT = CpuTopology((0, 1), ((0,), (1,)), 2, 1, 1, "Fake EPYC", 32 << 20, "sysfs")
QUIET = dict(cores=2, load=0.3, slowdown=1.02, bandwidth_alone=10.0, bandwidth_side=8.0, bandwidth_spread=0.05,
             steal=0.001, topology=FLAT)


@pytest.mark.parametrize(("change", "clause"), [
    ({}, None),
    ({"slowdown": 1.6}, "busy loops"),
    ({"load": 2.0}, "load average"),
    ({"steal": 0.12}, "hypervisor gave 12%"),
    ({"bandwidth_side": 3.0}, "moved only 0.60x"),          # 2 x 3 GB/s < 0.8 x 10 GB/s
    ({"bandwidth_spread": 0.45}, "changed by 45%"),
    ({"bandwidth_side": 2.5, "cores": 16, "topology": HT, "load": 3.0}, None),  # 16 x 2.5 = 4x one alone: the bus
    ({"cores": 1, "bandwidth_side": 2.0}, None),            # one core: nothing side by side to compare
    ({"steal": math.nan, "bandwidth_alone": math.nan, "bandwidth_spread": math.nan}, None),  # unknown decides nothing
    ({"slowdown": 1.25, "steal": 0.05, "bandwidth_spread": 0.3, "bandwidth_side": 4.0}, None),  # the limits are free
])
def test_the_decision(change, clause):
    check = CoreCheck(**{**QUIET, **change})
    assert check.free is (clause is None)
    assert (clause is None) == (check.reasons == ())
    if clause is not None:
        assert len(check.reasons) == 1 and clause in check.reasons[0] and clause in str(check)


def test_every_reason_at_once():
    check = CoreCheck(**{**QUIET, "slowdown": 2.0, "load": 5.0, "steal": 0.3, "bandwidth_side": 1.0,
                         "bandwidth_spread": 0.9})
    assert len(check.reasons) == 5 and not check.free
    assert str(check).count("\n") == 1 and "run the cell again later (steal comes from the host)" in str(check)


def test_the_derived_figures():
    check = CoreCheck(**QUIET)
    assert (check.bandwidth_ratio, check.memory_gain, check.physical, check.hyperthreads) == (0.8, 1.6, 2, 0)
    ht = CoreCheck(**{**QUIET, "cores": 16, "topology": HT})
    assert (ht.physical, ht.hyperthreads) == (8, 8)
    old = CoreCheck(2, 0.2, 1.0)  # as the command-line test builds it: no topology, nothing else measured
    assert (old.physical, old.hyperthreads, old.free) == (None, 0, True)


# ------------------------------------------------------------------ the verdict's text
def test_a_free_verdict_prints_what_it_measured():
    text = str(CoreCheck(**QUIET))
    first, second = text.split("\n")
    assert first.startswith("your 2 cores are free (2 busy loops side by side took 1.02x the time of one alone; ")
    for shown in ("8.0 GB/s each, 0.80x of one alone (10.0 GB/s)", "5% apart between rounds", "steal 0.1%",
                  "load average 0.30", "the speedups below are your machine's."):
        assert shown in first
    assert second == ("CPUs: 2 logical CPUs on 2 physical cores (Fake EPYC), no hyper-threads; memory-bound work "
                      "gains at most 1.6x on these 2 cores (they share one memory bus).")


def test_a_shared_verdict_says_why():
    text = str(CoreCheck(**{**QUIET, "slowdown": 1.9}))
    assert text.startswith("your 2 cores were shared with other work (2 busy loops side by side took 1.90x")
    assert "not your machine's: other work slowed the busy loops side by side (1.90x > 1.25x). Close other " \
           "programs and run the cell again." in text


def test_hyperthreads_are_named_in_the_verdict():
    text = str(CoreCheck(**{**QUIET, "cores": 16, "bandwidth_side": 2.5, "topology": HT}))
    assert ("16 logical CPUs on 8 physical cores (Fake Xeon): the 8 extra are hyper-threads, which share a "
            "core's arithmetic units; a compute-bound GEMM gains little from them") in text
    assert "memory-bound work gains at most 4.0x on these 16 cores" in text


def test_a_bare_verdict_is_one_line():
    text = str(CoreCheck(2, math.nan, 1.1))
    assert text == ("your 2 cores are free (2 busy loops side by side took 1.10x the time of one alone; load "
                    "average nan): the speedups below are your machine's.")


# ------------------------------------------------------------------ arguments
@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"seconds": 0}, ValueError, "seconds"),
    ({"seconds": 11}, ValueError, "seconds"),
    ({"seconds": math.nan}, ValueError, "seconds"),
    ({"seconds": "1"}, TypeError, "seconds"),
    ({"rounds": 0}, ValueError, "rounds"),
    ({"rounds": 21}, ValueError, "rounds"),
    ({"rounds": 1.5}, TypeError, "rounds"),
    ({"array_mb": 0}, ValueError, "array_mb"),
    ({"array_mb": 2048}, ValueError, "array_mb"),
    ({"array_mb": 8.0}, TypeError, "array_mb"),
    ({"start_method": "teleport"}, ValueError, "start_method"),
])
def test_check_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        check_cores(**{"seconds": 0.05, **kwargs})


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"n": 8}, ValueError, "n must"),
    ({"n": 2.0}, TypeError, "n must"),
    ({"repeat": 0}, ValueError, "repeat"),
    ({"topology": "2 cores"}, TypeError, "topology"),
    ({"topology": CpuTopology((0, 4096))}, ValueError, "topology"),
    ({"start_method": 3}, ValueError, "start_method"),
])
def test_gemm_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        gemm_thread_gain(**kwargs)


# ------------------------------------------------------------------ real runs
def test_a_real_check(clean):
    t0 = time.perf_counter()
    check = check_cores(0.05, rounds=2, array_mb=8)
    assert time.perf_counter() - t0 < 60
    assert check.cores == available_cores() == check.topology.logical
    assert 0.2 < check.slowdown < 50 and check.bandwidth_alone > 0.05 and check.bandwidth_side > 0.01
    assert check.bandwidth_spread >= 0 and (math.isnan(check.steal) or 0 <= check.steal <= 1)
    text = str(check)
    assert text.startswith(f"your {check.cores} cores ") and ("are free (" in text) is check.free
    assert f"{check.slowdown:.2f}x" in text and "GB/s" in text


COMPETITOR = ("import numpy as np\na = np.ones(8 << 20, np.float32); b = np.empty_like(a)\n"
              "while True:\n    np.copyto(b, a)\n")


@pytest.mark.slow
@pytest.mark.skipif(available_cores() < 2, reason="one core: nothing runs side by side")
def test_competing_memory_streams_make_it_shared(clean):
    """A memory-heavy program on all cores but one, started here: the check must not call the
    cores free. One alone still finds a free core; N side by side share N cores with N - 1
    others: (2N - 1) / N = 1.5x on 2 cores, 1.9x on 16 (the tolerance is 1.25x). More
    competitors would slow the one alone too, and the ratio less."""
    n = available_cores()
    others = [subprocess.Popen([sys.executable, "-c", COMPETITOR]) for _ in range(n - 1)]
    try:
        time.sleep(0.5)
        assert all(p.poll() is None for p in others)
        check = check_cores(0.1, rounds=3, array_mb=16)
    finally:
        for p in others:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)
    assert not check.free and check.reasons
    assert "were shared with other work" in str(check)


@pytest.mark.skipif(available_cores() < 2, reason="needs two CPUs to place two threads")
def test_the_gemm_on_placed_threads(clean):
    a, b = sorted(os.sched_getaffinity(0))[:2]
    as_siblings = CpuTopology((a, b), ((a, b),), 1)  # the two CPUs taken as one core's two threads
    gain = gemm_thread_gain(128, repeat=1, topology=as_siblings)
    assert gain.hyperthread is not None and gain.second_core is None and "no second physical core" in gain.reason
    assert gain.cpus == {"one": (a,), "hyperthread": (a, b)} and gain.hyperthread_gain > 0
    as_cores = CpuTopology((a, b), ((a,), (b,)), 2)
    gain = gemm_thread_gain(128, repeat=1, topology=as_cores)
    assert gain.hyperthread is None and gain.core_gain > 0 and "each usable core runs one thread" in gain.reason
    assert str(gain).startswith("a 128x128 float32 GEMM, 1 thread: ") and "2 threads on 2 physical cores" in str(gain)
    unknown = gemm_thread_gain(128, repeat=1, topology=CpuTopology((a, b)))
    assert (unknown.hyperthread, unknown.second_core) == (None, None) and "topology is unknown" in unknown.reason


def test_a_thread_gain_reads_out():
    gain = ThreadGain(1024, 50.0, 52.5, 98.0, {"one": (0,), "hyperthread": (0, 8), "second_core": (0, 1)})
    assert (gain.hyperthread_gain, gain.core_gain) == (1.05, 1.96)
    assert str(gain) == ("a 1024x1024 float32 GEMM, 1 thread: 50.0 GFLOP/s; 2 threads on the 2 hyper-threads "
                         "of one core: 1.05x; 2 threads on 2 physical cores: 1.96x")
