"""Are the cores free for a GEMM? The check before every measured speedup.

A speedup measured while other programs run is not the machine's. :func:`check_cores` starts
one process per core (a :class:`~course_lib.parallel.engine.workers.ProcessGroup`, like every
run's) and, in each of ``rounds`` rounds, runs two probes side by side on all of them, then
on one of them alone while the others wait:

* a **busy loop** (pure Python, on one core's integer units): side by side it takes about
  as long as alone when every core is free; another program on the cores makes it slower;
* a **memory stream** (``numpy.copyto`` between two arrays larger than the last-level
  cache, the bytes read and written per second): N streams side by side share the
  machine's memory bus *anyway*, so their ratio to one alone is a property of the machine
  (reported: memory-bound work cannot gain more than ``cores x ratio``), not a verdict.
  What the verdict takes from the streams is what an idle machine does not show: N streams
  that together move fewer bytes than one alone (other work holds their cores) and a
  bandwidth that changes by more than 30 % between rounds (another program's memory traffic
  came and went). A memory-heavy program on these cores also slows the busy loops. A
  *steady* one on cores this process may not use (another container's, another VM's) is
  seen by no probe: it lowers every bandwidth alike, and the check has no reference to
  compare with;
* the **steal time** of ``/proc/stat`` (Linux) over the whole check: the share of CPU time
  the hypervisor gave to other guests of the host (a cloud VM's cores are then not free);
* the one-minute **load average** before the check.

Then :func:`cpu_topology` says what the cores are: logical CPUs, physical cores and the
hyper-threads (超线程) that share one core's arithmetic units, which a compute-bound GEMM
gains little from (:func:`gemm_thread_gain` measures how little). The verdict,
:class:`CoreCheck`, prints all of it.
"""

from __future__ import annotations

import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..._validate import check_int, check_positive, check_sequence, check_type
from ...i18n import tr, tr_n
from ...timing import blas_threads
from ..engine.launch import Launcher

__all__ = ["CoreCheck", "CpuTopology", "ThreadGain", "check_cores", "cpu_topology", "gemm_thread_gain"]

_PRELOAD = ("course_lib.parallel.engine.workers", "course_lib.parallel.train.cores")


def _join(clauses) -> str:
    """Clauses of one sentence, separated by "; " (its translation: "；")."""
    return tr("; ", context="list separator").join(clauses)


# ---------------------------------------------------------------------------- topology
@dataclass(frozen=True)
class CpuTopology:
    """The CPUs this process may use (:func:`cpu_topology`).

    Attributes
    ----------
    cpus : tuple of int
        The logical CPUs this process may run on (its affinity mask), sorted.
    cores : tuple of tuple of int
        Those CPUs grouped by physical core; a group of two or more are hyper-threads of
        one core. Empty where the grouping is unknown.
    physical : int or None
        Physical cores among ``cpus`` (None: unknown).
    packages : int or None
        CPU packages (sockets) among them.
    numa_nodes : int or None
        NUMA nodes (memory nodes) holding them.
    model : str
        The CPU's model name ("unknown" where the OS does not say).
    llc_bytes : int or None
        Size of one last-level cache.
    source : str
        Where ``physical`` comes from: ``"sysfs"`` (Linux), ``"sysctl"`` (macOS) or
        ``"unknown"``.
    """

    cpus: tuple[int, ...]
    cores: tuple[tuple[int, ...], ...] = ()
    physical: int | None = None
    packages: int | None = None
    numa_nodes: int | None = None
    model: str = "unknown"
    llc_bytes: int | None = None
    source: str = "unknown"

    @property
    def logical(self) -> int:
        """Logical CPUs this process may use."""
        return len(self.cpus)

    @property
    def threads_per_core(self) -> float | None:
        """Logical CPUs per physical core (1.0: no hyper-threads in use; None: unknown)."""
        return None if not self.physical else self.logical / self.physical

    @property
    def hyperthreads(self) -> int | None:
        """Logical CPUs beyond one per physical core (None: unknown)."""
        return None if self.physical is None else self.logical - self.physical

    @property
    def sibling_pair(self) -> tuple[int, int] | None:
        """Two usable hyper-threads of one core, or None where there are none (or unknown)."""
        return next((g[:2] for g in self.cores if len(g) >= 2), None)

    @property
    def core_pair(self) -> tuple[int, int] | None:
        """One usable CPU on each of two physical cores, or None."""
        return (self.cores[0][0], self.cores[1][0]) if len(self.cores) >= 2 else None

    def as_dict(self) -> dict:
        """The fields and the derived counts, for a JSON file's provenance."""
        return {**asdict(self), "logical": self.logical, "hyperthreads": self.hyperthreads}

    def describe(self) -> str:
        """One line a learner reads: logical CPUs, physical cores, what the extra ones are."""
        known = self.model != "unknown"
        if self.numa_nodes and self.numa_nodes > 1:
            model = (tr(" ({model}) on {nodes} NUMA nodes", model=self.model, nodes=self.numa_nodes) if known
                     else tr(" on {nodes} NUMA nodes", nodes=self.numa_nodes))
        else:
            model = tr(" ({model})", model=self.model) if known else ""
        logical = tr_n("{count} logical CPU", "{count} logical CPUs", self.logical)
        if self.physical is None:
            return tr("{cpus}{model}; physical cores unknown", cpus=logical, model=model)
        extra = self.logical - self.physical
        head = tr("{cpus} on {cores}{model}", cpus=logical, model=model,
                  cores=tr_n("{count} physical core", "{count} physical cores", self.physical))
        if extra <= 0:
            return tr("{cpus}, no hyper-threads", cpus=head)
        return tr("{cpus}: the {extra} extra are hyper-threads, which share a core's arithmetic units; a "
                  "compute-bound GEMM gains little from them", cpus=head, extra=extra)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _cpu_list(text: str | None) -> set[int] | None:
    """``"0-3,8,10-11"`` (the kernel's list format) as a set; None if absent or unreadable."""
    if text is None:
        return None
    out: set[int] = set()
    for part in filter(None, text.replace("\n", ",").split(",")):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", part)
        if not m:
            return None
        low, high = int(m[1]), int(m[2] or m[1])
        out.update(range(low, high + 1))
    return out


def _size_bytes(text: str | None) -> int | None:
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text or "")
    return None if not m else int(m[1]) << {"": 0, "K": 10, "M": 20, "G": 30}[m[2]]


def _sysctl(name: str) -> str | None:
    """``sysctl -n name`` on macOS; None elsewhere or when it fails."""
    if sys.platform != "darwin":
        return None
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _model_name(root: Path) -> str:
    info = _read(root / "proc" / "cpuinfo") or ""
    for key in ("model name", "Hardware", "cpu model", "Processor"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", info, re.M)
        if m and m[1].strip():
            return m[1].strip()
    return _sysctl("machdep.cpu.brand_string") or platform.processor() or platform.machine() or "unknown"


def _usable_cpus() -> set[int]:
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))  # pragma: no cover - macOS, Windows


def cpu_topology(root: str | os.PathLike = "/", *, cpus: Iterable[int] | None = None) -> CpuTopology:
    """The CPUs this process may use: logical CPUs, physical cores, hyper-threads, model.

    Linux: ``root/sys/devices/system/cpu/cpuN/topology`` (``core_cpus_list`` or
    ``thread_siblings_list``, else ``physical_package_id`` with ``core_id``), the NUMA nodes
    of ``root/sys/devices/system/node``, the model of ``root/proc/cpuinfo``. Elsewhere
    ``sysctl`` (macOS), else unknown (``physical`` None). Reads files only (milliseconds).

    Parameters
    ----------
    root : path
        The file-system root to read below (tests pass a fake tree).
    cpus : iterable of int, optional
        The logical CPUs to describe; default: this process's affinity mask
        (``os.sched_getaffinity``).

    Returns
    -------
    CpuTopology

    Examples
    --------
    >>> top = cpu_topology()
    >>> top.logical >= 1 and (top.physical is None or 1 <= top.physical <= top.logical)
    True
    """
    check_type(root, "root", (str, os.PathLike), "a path (str or os.PathLike)")
    root = Path(root)
    if cpus is None:
        usable = sorted(_usable_cpus())
    else:
        items = check_sequence(cpus, "cpus", (int, np.integer), "an int (a CPU number)")
        usable = sorted({check_int(c, f"cpus[{i}]", 0, 1 << 20) for i, c in enumerate(items)})
        if not usable:
            raise ValueError("cpus must name at least one CPU, got none")
    base = root / "sys" / "devices" / "system" / "cpu"
    groups: dict[object, list[int]] = {}
    packages: set[str] = set()
    known = True
    for c in usable:
        topo = base / f"cpu{c}" / "topology"
        package = _read(topo / "physical_package_id")
        siblings = _cpu_list(_read(topo / "core_cpus_list") or _read(topo / "thread_siblings_list"))
        core_id = _read(topo / "core_id")
        if siblings:
            key: object = frozenset(siblings)
        elif package is not None and core_id is not None:
            key = (package, _read(topo / "die_id"), core_id)
        else:
            known = False
            break
        groups.setdefault(key, []).append(c)
        if package is not None:
            packages.add(package)
    llc = None
    caches = base / f"cpu{usable[0]}" / "cache"
    levels = [(int(lv), _size_bytes(_read(d / "size"))) for d in sorted(caches.glob("index*"))
              if (lv := _read(d / "level") or "").isdigit() and _read(d / "type") != "Instruction"]
    if levels:
        llc = max(levels)[1]
    nodes = [_cpu_list(_read(d / "cpulist")) for d in (root / "sys/devices/system/node").glob("node[0-9]*")]
    numa = sum(1 for n in nodes if n and n & set(usable)) or None
    model = _model_name(root)
    if known and groups:
        cores = tuple(sorted(tuple(g) for g in groups.values()))
        return CpuTopology(tuple(usable), cores, len(cores), len(packages) or None, numa, model, llc, "sysfs")
    physical = _sysctl("hw.physicalcpu") if not base.is_dir() else None
    if physical and physical.isdigit():
        count = min(int(physical), len(usable))
        packages_text = _sysctl("hw.packages") or ""
        llc = _size_bytes(_sysctl("hw.l3cachesize") or _sysctl("hw.l2cachesize"))
        return CpuTopology(tuple(usable), (), count, int(packages_text) if packages_text.isdigit() else None,
                           numa, model, llc, "sysctl")
    return CpuTopology(tuple(usable), (), None, len(packages) or None, numa, model, llc, "unknown")


# ---------------------------------------------------------------------------- steal time
def _cpu_ticks(root: Path, cpus: Iterable[int]) -> tuple[int, int] | None:
    """(steal, total) clock ticks of ``cpus`` since boot (``/proc/stat``); None if unreadable.

    The columns: user nice system idle iowait irq softirq steal guest guest_nice; guest
    time is already counted in user and nice, so the total is the first eight.
    """
    text = _read(root / "proc" / "stat")
    if text is None:
        return None
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("cpu"):
            rows[parts[0]] = [int(v) for v in parts[1:9] if v.isdigit()]
    wanted = [rows.get(f"cpu{c}") for c in cpus]
    if any(r is None or len(r) < 8 for r in wanted):
        wanted = [rows.get("cpu")]
        if wanted[0] is None or len(wanted[0]) < 8:
            return None
    return sum(r[7] for r in wanted), sum(sum(r[:8]) for r in wanted)


def _steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float:
    if before is None or after is None or after[1] <= before[1]:
        return math.nan
    return (after[0] - before[0]) / (after[1] - before[1])


# ---------------------------------------------------------------------------- the probes
def _spin(spins: int) -> float:
    """A fixed pure-Python loop; its seconds."""
    t0 = time.perf_counter()
    total = 0
    for i in range(spins):
        total += i & 7
    return time.perf_counter() - t0


def _stream(src: np.ndarray, dst: np.ndarray, seconds: float) -> float:
    """Copy ``src`` into ``dst`` for about ``seconds``; bytes read and written per second."""
    copies, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds or copies < 2:
        np.copyto(dst, src)
        copies += 1
    return 2 * src.nbytes * copies / elapsed


def _probe_worker(wctx, barrier, spins: int, floats: int, stream_seconds: float, rounds: int) -> list:
    """One process of the check, all rounds: per round (busy loop side by side, alone, stream
    side by side, alone) - seconds, seconds, bytes/s, bytes/s; the alone ones None except on
    the round's one process (rank ``round % world_size``: each round another core).

    Both arrays are written before the first barrier (their pages faulted in, not timed). The
    barriers line the processes up, so that side by side they overlap; while one runs alone
    the others wait at the next barrier, blocked on a pipe (no CPU).
    """
    src = np.ones(floats, dtype=np.float32)
    dst = np.ones(floats, dtype=np.float32)
    out = []
    for r in range(rounds):
        alone = r % wctx.world_size == wctx.rank
        barrier.wait(wctx.rank, wctx.wait_timeout)
        busy_side = _spin(spins)
        barrier.wait(wctx.rank, wctx.wait_timeout)
        busy_alone = _spin(spins) if alone else None
        barrier.wait(wctx.rank, wctx.wait_timeout)
        stream_side = _stream(src, dst, stream_seconds)
        barrier.wait(wctx.rank, wctx.wait_timeout)
        stream_alone = _stream(src, dst, stream_seconds) if alone else None
        out.append((busy_side, busy_alone, stream_side, stream_alone))
        wctx.progress(r + 1)
    return out


def _spread(values: list[float]) -> float:
    """(max - min) / median; NaN for fewer than two values."""
    if len(values) < 2:
        return math.nan
    return (max(values) - min(values)) / statistics.median(values)


# ---------------------------------------------------------------------------- the verdict
@dataclass(frozen=True)
class CoreCheck:
    """Whether this machine's cores are free to measure speedups on (:func:`check_cores`).

    Attributes
    ----------
    cores : int
        Logical CPUs this process may use (one probe process on each).
    load : float
        The one-minute load average before the check (NaN where the OS has none).
    slowdown : float
        Time of one busy loop when ``cores`` of them run side by side, over its time
        alone: about 1 when every core is free, about 2 when half the machine is taken.
    bandwidth_alone : float
        GB/s one memory stream moves alone (bytes read + written; NaN: not measured).
    bandwidth_side : float
        GB/s each of ``cores`` streams moves side by side.
    bandwidth_spread : float
        (max - min) / median of the bandwidths between rounds, the larger of alone and
        side by side (NaN for one round).
    steal : float
        Share of the CPU time of these cores that the hypervisor gave to others during the
        check (``/proc/stat``; NaN where unknown).
    topology : CpuTopology or None
        What the cores are (:func:`cpu_topology`).
    """

    cores: int
    load: float
    slowdown: float
    bandwidth_alone: float = math.nan
    bandwidth_side: float = math.nan
    bandwidth_spread: float = math.nan
    steal: float = math.nan
    topology: CpuTopology | None = None

    #: The limits of a free machine. The load is a one-minute average that also holds this
    #: notebook's own last minute, so only a full core's worth per core counts as other work;
    #: N streams side by side must move at least 0.8x the bytes of one alone together; the
    #: bandwidth may change by 30 % between rounds, the hypervisor may take 5 % of the time.
    MAX_SLOWDOWN = 1.25
    MAX_LOAD_PER_CORE = 1.0
    MIN_MEMORY_GAIN = 0.8
    MAX_BANDWIDTH_SPREAD = 0.3
    MAX_STEAL = 0.05

    @property
    def bandwidth_ratio(self) -> float:
        """Bandwidth of each stream side by side over one alone (the memory bus's sharing)."""
        return self.bandwidth_side / self.bandwidth_alone

    @property
    def memory_gain(self) -> float:
        """Bytes per second of ``cores`` streams together over one alone: the most that
        memory-bound work gains on these cores (a property of the machine)."""
        return self.cores * self.bandwidth_ratio

    @property
    def physical(self) -> int | None:
        """Physical cores among :attr:`cores` (None: unknown): stop at these for a GEMM."""
        return None if self.topology is None else self.topology.physical

    @property
    def hyperthreads(self) -> int:
        """Logical CPUs beyond one per physical core (0 where unknown)."""
        return (self.topology.hyperthreads or 0) if self.topology is not None else 0

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the cores were not free, one clause per measurement out of its limit (empty
        when free; a NaN measurement is unknown and decides nothing)."""
        out = []
        if self.slowdown > self.MAX_SLOWDOWN:
            out.append(tr("other work slowed the busy loops side by side ({slowdown} > {limit})",
                          slowdown=f"{self.slowdown:.2f}x", limit=f"{self.MAX_SLOWDOWN}x"))
        if self.load >= self.MAX_LOAD_PER_CORE * self.cores:  # False for NaN
            out.append(tr("the load average ({load}) is a full core's worth of other work per core",
                          load=f"{self.load:.2f}"))
        if self.steal > self.MAX_STEAL:
            out.append(tr("the hypervisor gave {steal} of the CPU time to other guests of its host "
                          "(steal > {limit})", steal=f"{self.steal:.0%}", limit=f"{self.MAX_STEAL:.0%}"))
        if self.cores > 1 and self.memory_gain < self.MIN_MEMORY_GAIN:
            out.append(tr("{cores} memory streams together moved only {gain} the bytes of one alone "
                          "(< {limit}): they did not get their cores", cores=self.cores,
                          gain=f"{self.memory_gain:.2f}x", limit=f"{self.MIN_MEMORY_GAIN}x"))
        if self.bandwidth_spread > self.MAX_BANDWIDTH_SPREAD:
            out.append(tr("the memory bandwidth changed by {spread} between rounds (> {limit}): other "
                          "memory traffic came and went", spread=f"{self.bandwidth_spread:.0%}",
                          limit=f"{self.MAX_BANDWIDTH_SPREAD:.0%}"))
        return tuple(out)

    @property
    def free(self) -> bool:
        """True when the speedups measured now are this machine's, not a shared one's."""
        return not self.reasons

    def _measured(self) -> str:
        many = self.cores > 1
        slowdown = f"{self.slowdown:.2f}x"
        parts = [tr("{cores} busy loops side by side took {slowdown} the time of one alone",
                    cores=self.cores, slowdown=slowdown) if many
                 else tr("a busy loop took {slowdown} the time of the one before", slowdown=slowdown)]
        if not math.isnan(self.bandwidth_alone + self.bandwidth_side):
            bw = {"side": f"{self.bandwidth_side:.1f} GB/s", "ratio": f"{self.bandwidth_ratio:.2f}x",
                  "alone": f"{self.bandwidth_alone:.1f} GB/s"}
            if math.isnan(self.bandwidth_spread):
                stream = (tr("{cores} memory streams side by side {side} each, {ratio} of one alone ({alone})",
                             cores=self.cores, **bw) if many
                          else tr("a memory stream {alone}", alone=bw["alone"]))
            else:
                spread = f"{self.bandwidth_spread:.0%}"
                stream = (tr("{cores} memory streams side by side {side} each, {ratio} of one alone ({alone}), "
                             "{spread} apart between rounds", cores=self.cores, spread=spread, **bw) if many
                          else tr("a memory stream {alone}, {spread} apart between rounds", alone=bw["alone"],
                                  spread=spread))
            parts.append(stream)
        if not math.isnan(self.steal):
            parts.append(tr("steal {steal}", steal=f"{self.steal:.1%}"))
        parts.append(tr("load average {load}", load=f"{self.load:.2f}"))
        return _join(parts)

    def __str__(self) -> str:
        if self.free:
            head = tr("your {cores} cores are free ({measured}): the speedups below are your machine's.",
                      cores=self.cores, measured=self._measured())
        else:
            advice = (tr("Close other programs and run the cell again later (steal comes from the host)")
                      if self.steal > self.MAX_STEAL else tr("Close other programs and run the cell again"))
            head = tr("your {cores} cores were shared with other work ({measured}): the speedups below "
                      "are not your machine's: {reasons}. {advice}.", cores=self.cores,
                      measured=self._measured(), reasons=_join(self.reasons), advice=advice)
        lines = [head]
        cpus = None if self.topology is None else self.topology.describe()
        gain = (f"{self.memory_gain:.1f}x" if self.cores > 1 and self.free and not math.isnan(self.bandwidth_ratio)
                else None)
        if cpus is not None and gain is not None:
            lines.append(tr("CPUs: {cpus}; memory-bound work gains at most {gain} on these {cores} cores (they "
                            "share one memory bus).", cpus=cpus, gain=gain, cores=self.cores))
        elif cpus is not None:
            lines.append(tr("CPUs: {cpus}.", cpus=cpus))
        elif gain is not None:
            lines.append(tr("memory-bound work gains at most {gain} on these {cores} cores (they share one "
                            "memory bus).", gain=gain, cores=self.cores))
        return "\n".join(lines)


def check_cores(seconds: float = 0.2, *, rounds: int = 3, array_mb: int | None = None,
                start_method: str | None = None) -> CoreCheck:
    """Are the cores free for a GEMM? Busy loops and memory streams, one per core side by
    side, then one alone, in ``rounds`` rounds; the steal time and load average around them.

    One :class:`~course_lib.parallel.engine.workers.ProcessGroup` of one process per core runs
    every round (started once: about 2 s on 2 cores with the defaults); in each round
    another of its processes runs alone while the others wait.

    Parameters
    ----------
    seconds : float
        Length of one busy loop, in (0, 10]; each stream runs half as long.
    rounds : int
        Rounds (1..20): the slowdown and the bandwidths are medians over them, their
        spread a verdict of its own.
    array_mb : int, optional
        MB of each of a stream's two float32 arrays (1..1024); default: the last-level
        cache's size, within 32..64 MB (and all processes' arrays within an eighth of the
        RAM, at least 8 MB each).
    start_method : {"fork", "forkserver", "spawn"} or None
        None: the course's default.

    Returns
    -------
    CoreCheck

    Examples
    --------
    >>> check = check_cores(0.05, rounds=1, array_mb=8)
    >>> check.cores >= 1 and check.slowdown > 0 and check.bandwidth_alone > 0
    True
    """
    seconds = check_positive(seconds, "seconds")
    if seconds > 10:
        raise ValueError(f"seconds must be in (0, 10], got {seconds:g}")
    rounds = check_int(rounds, "rounds", 1, 20)
    if array_mb is not None:
        array_mb = check_int(array_mb, "array_mb", 1, 1024)
    Launcher(start_method)  # checks start_method, starts nothing
    topology = cpu_topology()
    cores = topology.logical
    if array_mb is None:  # the last-level cache's size within 32..64 MB, all arrays within 1/8 of the RAM
        array_mb = min(64, max(32, (topology.llc_bytes or 0) >> 20))
        try:
            ram_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
        except (AttributeError, ValueError, OSError):  # pragma: no cover - Windows
            ram_mb = 0
        if ram_mb:
            array_mb = max(8, min(array_mb, ram_mb // (8 * 2 * cores)))
    floats = (array_mb << 20) // 4
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - Windows
        load = float("nan")
    root = Path("/")
    ticks = _cpu_ticks(root, topology.cpus)
    spins = 200_000
    spins = max(10_000, int(spins * seconds / max(_spin(spins), 1e-6)))

    with Launcher(start_method) as launch:  # one process per core for every round
        per_rank = launch.run(_probe_worker, cores, args=(launch.barrier(cores), spins, floats, seconds / 2, rounds),
                              timeout=60 + 4 * seconds, name="ddl-cores", preload=_PRELOAD)
    slow, alone, side = [], [], []
    for r in range(rounds):  # a host's jitter: medians of rounds, and their spread
        rows = [rank[r] for rank in per_rank]
        lone = rows[r % cores]
        slow.append(statistics.median(row[0] for row in rows) / lone[1])
        side.append(statistics.median(row[2] for row in rows) / 1e9)
        alone.append(lone[3] / 1e9)
    spread = max(_spread(alone), _spread(side)) if rounds > 1 else math.nan
    return CoreCheck(cores, float(load), statistics.median(slow), statistics.median(alone),
                     statistics.median(side), spread, _steal_share(ticks, _cpu_ticks(root, topology.cpus)),
                     topology)


# ---------------------------------------------------------------------------- GEMM threads
@dataclass(frozen=True)
class ThreadGain:
    """What a second thread gives a compute-bound GEMM (:func:`gemm_thread_gain`).

    Attributes
    ----------
    n : int
        The GEMM's size (``n x n`` float32 matrices).
    one : float
        GFLOP/s of one BLAS thread on one logical CPU.
    hyperthread : float or None
        GFLOP/s of two threads on the two hyper-threads of one core (None: none to try).
    second_core : float or None
        GFLOP/s of two threads on two physical cores (None: fewer than two).
    cpus : dict
        The CPUs each figure ran on (``"one"``, ``"hyperthread"``, ``"second_core"``).
    reason : str
        Why a figure is None ("" when none is).
    """

    n: int
    one: float
    hyperthread: float | None
    second_core: float | None
    cpus: dict
    reason: str = ""

    @property
    def hyperthread_gain(self) -> float | None:
        """Rate of two threads on one core's hyper-threads over one thread (None: not measured)."""
        return None if self.hyperthread is None else self.hyperthread / self.one

    @property
    def core_gain(self) -> float | None:
        """Rate of two threads on two physical cores over one thread (None: not measured)."""
        return None if self.second_core is None else self.second_core / self.one

    def __str__(self) -> str:
        parts = [tr("a {size} float32 GEMM, 1 thread: {rate}", size=f"{self.n}x{self.n}",
                    rate=f"{self.one:.1f} GFLOP/s")]
        if self.hyperthread is not None:
            parts.append(tr("2 threads on the 2 hyper-threads of one core: {gain}",
                            gain=f"{self.hyperthread_gain:.2f}x"))
        if self.second_core is not None:
            parts.append(tr("2 threads on 2 physical cores: {gain}", gain=f"{self.core_gain:.2f}x"))
        text = _join(parts)
        return tr("{measured} ({reason})", measured=text, reason=self.reason) if self.reason else text


def _pin(cpus: tuple[int, ...]) -> None:
    """Every thread of this process (the BLAS pool's too) onto ``cpus``; new threads inherit it."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # a thread that just ended
            pass


def _gemm_worker(wctx, n: int, repeat: int, configs: tuple) -> dict:
    """GFLOP/s (median of ``repeat``) of each ``(label, cpus, threads)`` (``cpus`` empty: not
    pinned), the placements interleaved."""
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    out = np.empty_like(a)
    rates: dict[str, list[float]] = {label: [] for label, _, _ in configs}
    for _ in range(repeat):
        for label, cpus, threads in configs:
            if cpus:
                _pin(cpus)
            with blas_threads(threads):
                np.matmul(a, b, out=out)  # warm: the pool's threads start on these CPUs
                t0 = time.perf_counter()
                np.matmul(a, b, out=out)
                rates[label].append(2 * n**3 / (time.perf_counter() - t0) / 1e9)
    return {label: statistics.median(v) for label, v in rates.items()}


def gemm_thread_gain(n: int = 1024, *, repeat: int = 5, topology: CpuTopology | None = None,
                     start_method: str | None = None) -> ThreadGain:
    """What a hyper-thread gives a compute-bound GEMM, and what a second core gives.

    One worker process (:class:`~course_lib.parallel.engine.workers.ProcessGroup`) times an
    ``n x n`` float32 GEMM with one BLAS thread pinned to one logical CPU, with two threads
    pinned to the two hyper-threads of that CPU's core, and with two threads on two physical
    cores, interleaved, ``repeat`` times each (medians). The notebook's own process is not
    touched. Where a figure cannot be measured (no hyper-threads, one core, an OS without
    ``sched_setaffinity``) it is None and :attr:`ThreadGain.reason` says why.

    Parameters
    ----------
    n : int
        Matrix size, 64..8192.
    repeat : int
        Timings of each placement, 1..50.
    topology : CpuTopology, optional
        Default: :func:`cpu_topology`.
    start_method : {"fork", "forkserver", "spawn"} or None
        None: the course's default.

    Returns
    -------
    ThreadGain

    Examples
    --------
    >>> gain = gemm_thread_gain(128, repeat=1)
    >>> gain.one > 0 and (gain.core_gain is None or gain.core_gain > 0)
    True
    """
    n = check_int(n, "n", 64, 8192)
    repeat = check_int(repeat, "repeat", 1, 50)
    top = cpu_topology() if topology is None else check_type(topology, "topology", CpuTopology, "a CpuTopology")
    if not set(top.cpus) <= _usable_cpus():
        raise ValueError(f"topology must describe CPUs this process may use ({sorted(_usable_cpus())}), "
                         f"got {list(top.cpus)}")
    Launcher(start_method)  # checks start_method, starts nothing
    reasons = []
    pair, pinnable = top.sibling_pair, hasattr(os, "sched_setaffinity") and os.path.isdir("/proc/self/task")
    first = pair[0] if pair else top.cpus[0]
    other = next((g[0] for g in top.cores if first not in g), None)
    configs: list[tuple[str, tuple[int, ...], int]] = [("one", (first,) if pinnable else (), 1)]
    if not pinnable:
        reasons.append(tr("this OS lets no program choose its CPUs, so no placement could be tried"))
    if pair is None:
        reasons.append(tr("no hyper-threads to try: each usable core runs one thread") if top.physical is not None
                       else tr("no hyper-threads to try: the topology is unknown"))
    elif pinnable:
        configs.append(("hyperthread", pair, 2))
    if other is None:
        reasons.append(tr("no second physical core to try") if top.physical is not None
                       else tr("which CPUs are separate cores is unknown"))
    elif pinnable:
        configs.append(("second_core", (first, other), 2))
    with Launcher(start_method) as launch:
        rates = launch.run(_gemm_worker, 1, args=(n, repeat, tuple(configs)), timeout=120,
                           name="ddl-gemm", preload=_PRELOAD)[0]
    return ThreadGain(n, rates["one"], rates.get("hyperthread"), rates.get("second_core"),
                      {label: cpus for label, cpus, _ in configs}, _join(reasons))
