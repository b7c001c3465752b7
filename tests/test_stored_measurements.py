"""The stored outputs of the notebooks are the course's claims: they must come from a machine
whose cores were free, and no sentence may read them the other way round (issue 37 point 7).

A contended re-execution once replaced chapter 05's S(2) = 1.82 with 0.94 and fits with
p = 0.000, and nothing noticed; later the stored runs contradicted their prose (05's GEMM slower
on two "free" cores, 08's overlap making the step 13 % slower under a summary that said it hid
the waiting, 1F1B's bubble below GPipe's under a summary that said it paid for its waits, the
hybrid run interpreted although its own check said "shared"). This guard reads the stored
outputs of EVERY notebook (it runs nothing, so it cannot be flaky) and fails on:

1. a stored cores verdict that says "shared" (:data:`SHARED`): that run measured other programs;
2. a stored speedup on N >= 2 workers (processes or threads) that the notebook calls a
   speedup and that is below :data:`LEAST_SPEEDUP` (the printed tables of :data:`READERS`);
3. a printed interpretation that does not match the numbers printed beside it ("speedup 0.78"
   from 39.2 and 50.6 ms, "1.15x faster" from 100 and 87 ms, "4.1 points below");
4. a sentence of the prose (summary, questionnaire answers, notes) stating an outcome that the
   notebook's own stored run contradicts (:data:`CLAIMS`);
5. a stored fit that says p = 0;
6. a measuring chapter whose stored outputs hold none of the lines the guard reads
   (:data:`MUST_READ`): a new format would leave the guard blind, so it fails until its reader
   is added below.

Where a result can go either way on a learner's machine, the sentence that interprets it must
be printed by code from the measurement (rule 3 checks it) or written for both outcomes (then
:data:`CLAIMS` has nothing to match). Re-execute the measuring notebooks on a quiet machine:
``make notebooks`` checks the cores first.

Chapters are found by subject (``*_collectives.ipynb``), not by number, so a renumbering
leaves the guard in place. :func:`problems` runs every rule on one notebook file, any file:
``tests/test_stored_measurements.py`` checks it against notebooks of the course's history too.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LEAST_SPEEDUP = 1.2
#: A cores verdict of a shared machine, as ``check_cores`` prints it, or a cell that says it
#: fitted nothing because the cores were shared.
SHARED = re.compile(r"were shared with other work|cores were shared|the speedups below are not your machine's|"
                    r"\(shared cores\)|on shared cores, so not this machine's")
#: A fit of a shared machine's measurement.
P_ZERO = re.compile(r"\bp = 0\.0+\b(?!\d)")


# ------------------------------------------------------------------------- reading a notebook
@dataclass
class Stored:
    """One notebook's stored outputs (per code cell) and prose (per markdown cell)."""

    name: str
    outputs: list[tuple[int, str]]
    prose: list[tuple[int, str]]
    found: dict = field(default_factory=dict)  # reader name -> what it read

    @property
    def subject(self) -> str:
        """The notebook's name without its number: ``collectives`` for ``08_collectives.ipynb``."""
        return re.sub(r"^\d+_", "", Path(self.name).stem)

    def lines(self):
        """(cell, line) of every stored output line."""
        for cell, text in self.outputs:
            for line in text.splitlines():
                yield cell, line


def read_notebook(path: Path | str) -> Stored:
    path = Path(path)
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    outputs, prose = [], []
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            prose.append((i, "".join(cell["source"])))
        printed = {"stdout": "", "stderr": ""}  # a cell's prints, joined: Jupyter may split them anywhere
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                printed[o.get("name", "stdout")] = printed.get(o.get("name", "stdout"), "") + "".join(o.get("text", ""))
            else:
                data = o.get("data", {})
                outputs += [(i, "".join(data[k])) for k in ("text/plain", "text/markdown") if k in data]
        outputs += [(i, text) for text in printed.values() if text]
    return Stored(path.name, outputs, prose)


# ------------------------------------------------------------------ numbers as they were printed
def _interval(text: str) -> tuple[float, float]:
    """The values a number printed as ``text`` can stand for (half a unit of its last digit)."""
    text = text.replace(",", "")
    decimals = len(text.split(".")[1]) if "." in text else 0
    half = 0.5 * 10.0**-decimals
    value = float(text)
    return value - half, value + half


def ratio_agrees(printed: str, numerator: str, denominator: str) -> bool:
    """Whether ``printed`` (a ratio as printed) can be ``numerator / denominator`` (as printed)."""
    (n_lo, n_hi), (d_lo, d_hi), (p_lo, p_hi) = _interval(numerator), _interval(denominator), _interval(printed)
    if d_lo <= 0:
        return True  # a zero as printed: any ratio
    return n_lo / d_hi <= p_hi + 1e-12 and n_hi / d_lo >= p_lo - 1e-12


def verdict_agrees(verdict: str, time: str, reference: str, tie: float = 0.05) -> bool:
    """Whether ``verdict`` (``course_lib.timing.compare``'s "1.15x faster", "1.50x slower",
    "ties (within 3%)") says how ``time`` compares with ``reference``, both as printed."""
    (t_lo, t_hi), (r_lo, r_hi) = _interval(time), _interval(reference)
    if (m := re.fullmatch(r"([\d.]+)x (faster|slower)", verdict.strip())) is not None:
        if m.group(2) == "faster":
            return t_lo < r_hi and ratio_agrees(m.group(1), reference, time)
        return t_hi > r_lo and ratio_agrees(m.group(1), time, reference)
    if (m := re.fullmatch(r"ties \(within (\d+)%\)", verdict.strip())) is not None:
        if min(t_lo, r_lo) <= 0:
            return True
        lowest = max(1.0, t_lo / r_hi, r_lo / t_hi)  # max(t, ref) / min(t, ref) over the printed intervals
        highest = max(t_hi / r_lo, r_hi / t_lo)
        said = int(m.group(1))
        lo, hi = max(lowest, 1 + (said - 0.5) / 100), min(highest, 1 + tie, 1 + (said + 0.5) / 100)
        return lo <= hi + 1e-12
    return False


@dataclass(frozen=True)
class Speedup:
    """A stored speedup: ``workers`` (processes or threads), the speedup, what it is, where."""

    workers: int
    value: float
    what: str
    cell: int


# --------------------------------------------------------------------------------- the readers
# Each reader takes a notebook's stored lines and returns (speedups, problems) and records what
# it read in ``nb.found[name]``. A speedup is listed only where the notebook calls it one.
#
# ==== PLUG IN HERE ====: the lines the rewritten chapters print (issue 37: 01, 05, 06, 07, 11,
# 12, 13). Read today: 01's ceiling line, 05's "The GEMM on N threads" line, 07's S(1) line, 11's
# per-schedule bubble lines and the "rest" relation, 13's "(shared cores)" verdicts. For each new
# format add a reader (the pattern of its lines, the speedups it holds, the numbers its printed
# interpretation must match), list it in READERS and its chapter in MUST_READ. Old formats stay
# readable as long as an old notebook may hold them.

_NUM = r"[-+]?\d[\d,]*(?:\.\d+)?"
#: A verdict of ``course_lib.timing.compare``.
_VERDICT = r"\d+\.\d+x (?:faster|slower)|ties \(within \d+%\)"


def read_pool_table(nb: Stored):
    """Chapter 01's pool: ``N  time [s]  Tser/T(N)  paired S  efficiency ...`` with a ``ser`` row."""
    speedups, problems, rows = [], [], []
    for cell, text in nb.outputs:
        lines = text.splitlines()
        for k, header in enumerate(lines):
            cols = header.split()
            if cols[:1] != ["N"] or "paired" not in cols:
                continue
            serial = None
            for line in lines[k + 1:]:
                parts = line.split()
                if parts[:1] == ["ser"]:
                    serial = parts[1]
                    continue
                if not parts or not parts[0].isdigit():
                    break
                n, t, definition, paired = int(parts[0]), parts[1], parts[2], float(parts[3])
                rows.append((n, paired))
                if n >= 2:
                    speedups.append(Speedup(n, paired, "paired S(N) of the pool", cell))
                if serial is not None and not ratio_agrees(definition, serial, t):
                    problems.append(f"cell {cell}: Tser/T({n}) = {definition} is not {serial} / {t}")
    nb.found["pool table"] = rows
    for cell, line in nb.lines():  # the line that reads the last row against the ceiling (issue 37 point 2)
        m = re.search(rf"ceiling with (\d+) processes \(the same work, nothing sent\): ({_NUM}); your paired S: "
                      rf"({_NUM}): (.*)", line)
        if m is None:
            continue
        n, c, s, said = int(m.group(1)), float(m.group(2)), float(m.group(3)), m.group(4)
        if any(k == n and abs(v - s) > 0.0051 for k, v in rows):
            problems.append(f"cell {cell}: the ceiling line's paired S {s} is not the table's at N = {n}")
        if (cost := re.match(r"the messages and the slowest shard cost (\d+)% of the ceiling", said)) is not None:
            if s > 0.97 * c + 0.01 or abs(int(cost.group(1)) - 100 * (1 - s / c)) > 1.5:
                problems.append(f"cell {cell}: {cost.group(0)!r} does not follow from S = {s} and a ceiling {c}")
        elif said.startswith("at the ceiling") and s < 0.97 * c - 0.01:
            problems.append(f"cell {cell}: 'at the ceiling' for S = {s} against a ceiling {c}")
        if ("a ceiling below" in said) != (c < 0.8 * n) and abs(c - 0.8 * n) > 0.006:
            problems.append(f"cell {cell}: the line says {'' if 'a ceiling below' in said else 'not '}below "
                            f"{0.8 * n:.1f} for a ceiling {c}")
    return speedups, problems


def read_scaling_table(nb: Stored):
    """Chapter 07's ``N  strong ms  S(N)  eff.  Karp-Flatt e  weak ms  scaled S  eff.`` with the
    serial times under it, and the line that interprets its last row."""
    speedups, problems, rows = [], [], {}
    for cell, text in nb.outputs:
        lines = text.splitlines()
        serial = re.search(rf"serial \(1 BLAS thread\): ({_NUM}) ms at batch \d+, ({_NUM}) ms at batch", text)
        for k, header in enumerate(lines):
            cols = header.split()
            if cols[:2] != ["N", "strong"] or "S(N)" not in cols:
                continue
            for line in lines[k + 1:]:
                parts = line.split()
                if not parts or not parts[0].isdigit():
                    break
                n = int(parts[0])
                rows[n] = parts
                if n >= 2:
                    speedups += [Speedup(n, float(parts[2]), "strong S(N)", cell),
                                 Speedup(n, float(parts[6]), "scaled S(N)", cell)]
                if serial is not None:
                    if not ratio_agrees(parts[2], serial.group(1), parts[1]):
                        problems.append(f"cell {cell}: S({n}) = {parts[2]} is not {serial.group(1)} / {parts[1]} ms")
                    scaled = f"{n * float(serial.group(2)):.4f}"
                    if not ratio_agrees(parts[6], scaled, parts[5]):
                        problems.append(f"cell {cell}: scaled S({n}) = {parts[6]} is not {n} x "
                                        f"{serial.group(2)} / {parts[5]} ms")
    for cell, line in nb.lines():
        m = re.search(rf"strong scaling on (\d+) workers: S = ({_NUM}), Karp-Flatt e = ({_NUM}): (.*)", line)
        if m is None:
            continue
        n, s = int(m.group(1)), float(m.group(2))
        if n in rows and abs(float(rows[n][2]) - s) > 0.0051:
            problems.append(f"cell {cell}: the line says S = {s} on {n} workers, the table {rows[n][2]}")
        if (lost := re.match(r"(\d+)% of the workers' time went to overhead", m.group(4))) is not None:
            if s < 1 or abs(int(lost.group(1)) - 100 * (1 - s / n)) > 1.0:
                problems.append(f"cell {cell}: {lost.group(0)!r} does not follow from S = {s} on {n} workers")
        elif m.group(4).startswith("S < 1") and s >= 1:
            problems.append(f"cell {cell}: the line says S < 1 for S = {s}")
    nb.found["scaling table"] = rows
    for cell, line in nb.lines():  # the line that explains S(1) (issue 37 point 1)
        m = re.search(rf"S\(1\) = ({_NUM})\. Per step, serial / 1 worker: ({_NUM}) / ({_NUM}) ms, of CPU time "
                      rf"({_NUM}) / ({_NUM}) ms, page faults \d+ / \d+: (.*)", line)
        if m is None:
            continue
        s1, (w0, w1, c0, c1), said = float(m.group(1)), (float(g) for g in m.group(2, 3, 4, 5)), m.group(6)
        if 1 in rows and abs(float(rows[1][2]) - s1) > 0.0051:
            problems.append(f"cell {cell}: S(1) = {s1} is not the table's {rows[1][2]}")
        within = abs(s1 - 1) <= 0.1
        if said.startswith("within 10% of 1") != within and abs(abs(s1 - 1) - 0.1) > 0.0051:
            problems.append(f"cell {cell}: {said[:40]!r}... does not follow from S(1) = {s1}")
        if not within and min(w0, c0) > 0:
            gap, moved = abs(c1 / c0 - w1 / w0), abs(w1 / w0 - 1) / 2
            if abs(gap - moved) > 0.01 and said.startswith("the CPU time differs too") != (gap < moved):
                problems.append(f"cell {cell}: {said[:40]!r}... does not follow from the times printed")
        busy = min(c0 / w0, c1 / w1) if min(w0, w1) > 0 else 1.0
        if ("had its core for only" in said) != (busy <= 0.8) and abs(busy - 0.8) > 0.01:
            problems.append(f"cell {cell}: the line {'says' if busy > 0.8 else 'does not say'} a process lacked "
                            f"its core, with CPU / wall time {busy:.2f}")
    return speedups, problems


def read_thread_table(nb: Stored):
    """Chapter 05's ``N thread(s): GEMM t ms (speedup S), conv2d t ms (speedup S)``."""
    pattern = re.compile(rf"^(\d+) thread\(s\): GEMM ({_NUM}) ms \(speedup ({_NUM})\), "
                         rf"conv2d ({_NUM}) ms \(speedup ({_NUM})\)")
    speedups, problems, rows = [], [], {}
    for cell, line in nb.lines():
        if (m := pattern.match(line.strip())) is None:
            continue
        n = int(m.group(1))
        rows[n] = m.groups()
        if n >= 2:
            speedups += [Speedup(n, float(m.group(3)), "GEMM speedup on threads", cell),
                         Speedup(n, float(m.group(5)), "conv2d speedup on threads", cell)]
        if 1 in rows:
            for what, t, s, t1 in (("GEMM", m.group(2), m.group(3), rows[1][1]),
                                   ("conv2d", m.group(4), m.group(5), rows[1][3])):
                if not ratio_agrees(s, t1, t):
                    problems.append(f"cell {cell}: {what} speedup {s} on {n} threads is not {t1} / {t} ms")
    nb.found["thread table"] = rows
    for cell, line in nb.lines():  # the line that reads the GEMM's last row (issue 37 point 3)
        m = re.search(r"The GEMM on (\d+) threads: (\d+\.\d\d)x, (.*)", line)
        if m is None:
            continue
        n, s, said = int(m.group(1)), float(m.group(2)), m.group(3)
        if n in rows and abs(float(rows[n][2]) - s) > 0.0051:
            problems.append(f"cell {cell}: the GEMM line's {s}x is not the table's {rows[n][2]} on {n} threads")
        reading = ("above the ideal" if s > 1.15 * n else "close to the ideal" if s >= 0.8 * n
                   else "faster, short of the ideal" if s >= 1.1 else "no faster than one thread")
        edges = (1.15 * n, 0.8 * n, 1.1)
        if not said.startswith(reading) and all(abs(s - e) > 0.0051 for e in edges):
            problems.append(f"cell {cell}: {said[:40]!r}... does not follow from {s}x on {n} threads")
    return speedups, problems


def read_tensor_verdict(nb: Stored):
    """Chapter 12's ``tensor parallel, N workers, per step: ... step T ms`` and
    ``serial loop: X ms per step; tensor parallel against it: <verdict>``."""
    speedups, problems, found = [], [], []
    step = None
    for cell, line in nb.lines():
        if (m := re.search(rf"tensor parallel, (\d+) workers, per step: .*step ({_NUM}) ms", line)) is not None:
            step = (int(m.group(1)), m.group(2))
        m = re.search(rf"serial loop: ({_NUM}) ms per step; tensor parallel against it: ({_VERDICT})", line)
        if m is None or step is None:
            continue
        found.append((step, m.groups()))
        if not verdict_agrees(m.group(2), step[1], m.group(1)):
            problems.append(f"cell {cell}: {m.group(2)!r} does not follow from {step[1]} ms against {m.group(1)} ms")
        if step[0] >= 2 and m.group(2).endswith("faster"):
            speedups.append(Speedup(step[0], float(m.group(2).split("x")[0]), "tensor parallel, faster", cell))
    nb.found["tensor verdict"] = found
    return speedups, problems


def read_hybrid_verdict(nb: Stored):
    """Chapter 14's rows ``label  N proc.  T ms  baseline | <verdict>`` against the serial loop."""
    row = re.compile(rf"^\s+(.+?)\s+(\d+) proc\.\s+({_NUM}) ms\s+(baseline|{_VERDICT})(?: \(shared cores\))?\s*$")
    speedups, problems, rows = [], [], []
    base = None
    for cell, line in nb.lines():
        if (m := row.match(line)) is None:
            continue
        label, procs, t, verdict = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        rows.append((label, procs, t, verdict))
        if verdict == "baseline":
            base = t
            continue
        if base is not None and not verdict_agrees(verdict, t, base):
            problems.append(f"cell {cell}: {label}: {verdict!r} does not follow from {t} ms against {base} ms")
        if procs >= 2 and verdict.endswith("faster"):
            speedups.append(Speedup(procs, float(verdict.split("x")[0]), f"{label}, faster", cell))
    nb.found["hybrid verdict"] = rows
    return speedups, problems


def read_overlap(nb: Stored):
    """Chapter 08's overlap in shared memory: ``median step: A ms with one all-reduce, B ms with K
    buckets``; the line that compares them with the model (``measured: A ms and B ms on C cores;
    K buckets against one all-reduce: <verdict> (the model: <verdict>)``); and the run over the
    modelled wire: its table (``buckets  measured ms  model ms  error ...``) and the line that
    interprets it."""
    problems, found = [], {}
    model = None
    for cell, line in nb.lines():
        if (m := re.search(rf"median step: ({_NUM}) ms with one all-reduce, ({_NUM}) ms with (\d+) buckets",
                           line)) is not None:
            found["shm"] = {"plain_ms": float(m.group(1)), "overlap_ms": float(m.group(2)), "buckets": int(m.group(3))}
        if (m := re.search(rf"model: ({_NUM}) ms without overlap, ({_NUM}) ms with it", line)) is not None:
            model = m.groups()
        m = re.search(rf"measured: ({_NUM}) ms and ({_NUM}) ms on \d+ cores; (\d+) buckets against one all-reduce: "
                      rf"({_VERDICT}) \(the model: ({_VERDICT})\)", line)
        if m is not None:
            found["verdict"] = m.groups()
            if not verdict_agrees(m.group(4), m.group(2), m.group(1)):
                problems.append(f"cell {cell}: {m.group(4)!r} does not follow from {m.group(2)} ms against "
                                f"{m.group(1)} ms")
            if model is not None and not verdict_agrees(m.group(5), model[1], model[0]):
                problems.append(f"cell {cell}: the model's {m.group(5)!r} does not follow from {model[1]} ms "
                                f"against {model[0]} ms")
    wire_rows = []
    for cell, text in nb.outputs:
        lines = text.splitlines()
        for k, header in enumerate(lines):
            if not header.split()[:4] == ["buckets", "measured", "ms", "model"]:
                continue
            for line in lines[k + 1:]:
                parts = line.split()
                if not parts or not parts[0].isdigit():
                    break
                wire_rows.append({"buckets": int(parts[0]), "measured": parts[1], "model": parts[2],
                                  "error": float(parts[3].rstrip("%")) / 100, "sequential": parts[4],
                                  "shm": parts[5] if len(parts) > 5 else None})
        for line in lines:
            m = re.search(r"over the wire the measured step (is within|is off by up to) (\d+)% of the model", line)
            if m is not None and wire_rows:
                worst = max(abs(r["error"]) for r in wire_rows)
                said_within = m.group(1) == "is within"
                if abs(100 * worst - int(m.group(2))) > 1.0 or (said_within and worst > 0.1005) or (
                        not said_within and worst < 0.0995):
                    problems.append(f"cell {cell}: {m.group(0)!r} does not follow from the table's errors "
                                    f"(the largest {worst:.1%})")
            m = re.search(rf"(\d+) buckets against none overlapped: ({_VERDICT})", line)
            if m is not None:
                last = [r for r in wire_rows if r["buckets"] == int(m.group(1))]
                if last and not verdict_agrees(m.group(2), last[-1]["measured"], last[-1]["sequential"]):
                    problems.append(f"cell {cell}: {m.group(0)!r} does not follow from the table's "
                                    f"{last[-1]['measured']} ms against {last[-1]['sequential']} ms")
            m = re.search(rf"in shared memory (\d+) buckets against 1 bucket: ({_VERDICT})", line)
            shm = {r["buckets"]: r["shm"] for r in wire_rows if r.get("shm") is not None}
            if m is not None and int(m.group(1)) in shm and 1 in shm:
                if not verdict_agrees(m.group(2), shm[int(m.group(1))], shm[1]):
                    problems.append(f"cell {cell}: {m.group(0)!r} does not follow from the table's shared-memory "
                                    f"{shm[int(m.group(1))]} ms against {shm[1]} ms")
    if wire_rows:
        found["wire"] = wire_rows
    nb.found["overlap"] = found
    return [], problems


def read_bubbles(nb: Stored):
    """Chapter 11's ``bubble, measured: GPipe X%, 1F1B Y%`` and ``measured here, 1F1B's bubble is
    <relation> GPipe's``; the interleaved runs' ``v = k: ... bubble measured X%`` and ``measured
    here, v = 2's bubble is <relation> v = 1's``."""
    problems, found, claims = [], {}, []
    relation = r"(within 1 point of|(\d+\.\d) points (above|below))"
    for cell, line in nb.lines():
        if (m := re.search(r"bubble, measured: GPipe (\d+\.\d)%, 1F1B (\d+\.\d)%", line)) is not None:
            found["gpipe"], found["1f1b"] = float(m.group(1)), float(m.group(2))
        m = re.match(r"(GPipe|1F1B)\s+bubble measured (\d+\.\d)%; its simulator (\d+\.\d)%; the rest "
                     r"\(hand-overs, waits\) ([-+]\d+\.\d) points", line.strip())
        if m is not None:
            measured, simulated, rest = float(m.group(2)), float(m.group(3)), float(m.group(4))
            found[m.group(1).lower()], found[f"rest {m.group(1).lower()}"] = measured, rest
            if abs(measured - simulated - rest) > 0.15:
                problems.append(f"cell {cell}: the rest {rest:+} points is not {measured}% - {simulated}%")
        if (m := re.search(rf"and its rest is {relation} GPipe's rest", line)) is not None:
            claims.append((cell, m.group(0), "rest 1f1b", "rest gpipe", m.groups()))
        if (m := re.match(r"v = (\d+): .*bubble measured (\d+\.\d)%", line.strip())) is not None:
            found[f"v = {m.group(1)}"] = float(m.group(2))
        if (m := re.search(rf"measured here, 1F1B's bubble is {relation} GPipe's(?!\w)", line)) is not None:
            claims.append((cell, m.group(0), "1f1b", "gpipe", m.groups()))
        if (m := re.search(rf"measured here, v = (\d+)'s bubble is {relation} v = (\d+)'s", line)) is not None:
            claims.append((cell, m.group(0), f"v = {m.group(1)}", f"v = {m.group(5)}", m.groups()[1:4]))
    for cell, text, mine, other, (said, points, side) in claims:
        if mine not in found or other not in found:
            continue
        gap = found[mine] - found[other]
        if said.startswith("within"):
            ok = abs(gap) < 1.0 + 0.1
        else:
            ok = abs(abs(gap) - float(points)) <= 0.11 and (gap > 0) == (side == "above")
        if not ok:
            problems.append(f"cell {cell}: {text!r} does not follow from {found[mine]}% against {found[other]}%")
    nb.found["bubbles"] = found
    return [], problems


#: Every reader, by the name ``nb.found`` records.
READERS: dict[str, Callable] = {
    "pool table": read_pool_table,
    "scaling table": read_scaling_table,
    "thread table": read_thread_table,
    "tensor verdict": read_tensor_verdict,
    "hybrid verdict": read_hybrid_verdict,
    "overlap": read_overlap,
    "bubbles": read_bubbles,
    # ==== PLUG IN HERE ====: the readers of new formats (see the note above the readers).
}

#: What each measuring chapter must hold, by subject: (reader, what it must have read). A
#: chapter without it has not been executed, or prints a format the guard cannot read yet.
MUST_READ: dict[str, list[tuple[str, Callable[[object], bool]]]] = {
    "serial_to_parallel": [("pool table", lambda rows: any(n >= 2 for n, _ in rows))],
    "operator_parallelism": [("thread table", lambda rows: any(n >= 2 for n in rows))],
    "data_parallelism": [("scaling table", lambda rows: any(n >= 2 for n in rows))],
    "collectives": [("overlap", lambda f: "shm" in f and "verdict" in f and "wire" in f)],
    "pipeline_parallelism": [("bubbles", lambda f: "gpipe" in f and "1f1b" in f)],
    "tensor_parallelism": [("tensor verdict", bool)],
    "hybrid_parallelism": [("hybrid verdict", lambda rows: any(v == "baseline" for *_, v in rows))],
    # ==== PLUG IN HERE ====: a chapter whose new lines the guard must find.
}


# ------------------------------------------------------------------------------- the claims
@dataclass(frozen=True)
class Claim:
    """A sentence of the prose that states an outcome: it holds only where ``holds`` says so of
    what the readers found."""

    subject: str
    pattern: str
    outcome: str
    holds: Callable[[dict], bool | None]  # None: the run that would decide is not stored


def _overlap_faster(found: dict) -> bool | None:
    shm = found.get("overlap", {}).get("shm")
    return None if shm is None else shm["overlap_ms"] < shm["plain_ms"]


def _one_f_one_b_above(found: dict) -> bool | None:
    b = found.get("bubbles", {})
    return None if "gpipe" not in b or "1f1b" not in b else b["1f1b"] > b["gpipe"]


def _below_ideal(found: dict) -> bool | None:
    rows = found.get("pool table") or []
    return None if not rows else all(s < n for n, s in rows if n >= 2)


#: Sentences that state one outcome of a measurement (case-insensitive patterns). Each was
#: once stored beside a run that showed the other outcome; a rewrite that holds for both
#: outcomes, or that prints the outcome from the measurement, matches none of them.
CLAIMS = [
    Claim("collectives", r"two cores show mostly the waiting hidden",
          "overlap made the shared-memory step shorter", _overlap_faster),
    Claim("collectives", r"what overlap hides there is mostly waiting",
          "overlap made the shared-memory step shorter", _overlap_faster),
    Claim("pipeline_parallelism", r"measured bubble pays for its extra waits",
          "1F1B's measured bubble above GPipe's", _one_f_one_b_above),
    Claim("pipeline_parallelism", r"1F1B's measured bubble (?:is|comes out) (?:larger|higher|above)",
          "1F1B's measured bubble above GPipe's", _one_f_one_b_above),
    Claim("serial_to_parallel", r"speedup below the ideal line", "every measured S(N) below N", _below_ideal),
    # ==== PLUG IN HERE ====: a sentence of a rewritten chapter that states an outcome (better: print it).
]


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence (or list item) around ``text[start:end]``, on one line."""
    left = max(text.rfind(stop, 0, start) + len(stop) for stop in (". ", "\n\n", "\n- ", "\n1", "\n2", "\n3", "\n4",
                                                                  "\n5", "\n6", "\n7", "\n8", "\n9"))
    right = min([i for i in (text.find(stop, end) for stop in (". ", ".\n", "\n\n", "\n- ")) if i >= 0] or [len(text)])
    return " ".join(text[max(left, 0):right + 1].split())


# -------------------------------------------------------------------------------- the rules
def problems(path: Path | str) -> dict[str, list[str]]:
    """Every rule on one notebook: ``{rule: [what is wrong, ...]}`` (empty lists: all is well)."""
    nb = read_notebook(path)
    out: dict[str, list[str]] = {"shared": [], "speedup": [], "interpretation": [], "claim": [], "p = 0": [],
                                 "unread": []}
    for cell, line in nb.lines():
        if SHARED.search(line):
            out["shared"].append(f"cell {cell}: {line.strip()[:160]}")
        if P_ZERO.search(line):
            out["p = 0"].append(f"cell {cell}: {line.strip()[:160]}")
    for reader in READERS.values():
        speedups, wrong = reader(nb)
        out["interpretation"] += wrong
        out["speedup"] += [f"cell {s.cell}: {s.what} {s.value:g} on {s.workers} workers (below {LEAST_SPEEDUP})"
                           for s in speedups if s.workers >= 2 and s.value < LEAST_SPEEDUP]
    for claim in (c for c in CLAIMS if c.subject == nb.subject):
        for cell, text in nb.prose:
            for m in re.finditer(claim.pattern, text, flags=re.IGNORECASE):
                if claim.holds(nb.found) is False:
                    out["claim"].append(f"cell {cell} says {_sentence(text, m.start(), m.end())!r}, but its "
                                        f"stored run does not show that {claim.outcome}")
    for name, enough in MUST_READ.get(nb.subject, []):
        if not enough(nb.found.get(name)):
            out["unread"].append(f"no stored lines the {name!r} reader can read (not executed, or a new format: "
                                 "add its reader in tests/test_stored_measurements.py)")
    return out


def _problems_or_skip(path: Path) -> dict[str, list[str]]:
    if not path.exists():
        pytest.skip(f"{path.name} is not in this checkout")
    return problems(path)


IDS = [p.stem for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_stored_verdict_says_the_cores_were_shared(path):
    found = _problems_or_skip(path)["shared"]
    assert found == [], (f"{path.name} stores a run on shared cores: {found}; re-execute it on a quiet machine "
                         "(make notebooks)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_stored_speedup_of_a_shared_machine(path):
    low = _problems_or_skip(path)["speedup"]
    assert low == [], f"{path.name}: {low}: a contended run; re-execute it on a quiet machine (make notebooks)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_printed_interpretations_match_their_numbers(path):
    wrong = _problems_or_skip(path)["interpretation"]
    assert wrong == [], f"{path.name}: {wrong}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_sentence_states_what_the_stored_run_contradicts(path):
    wrong = _problems_or_skip(path)["claim"]
    assert wrong == [], (f"{path.name}: {wrong}: print the interpretation from the measurement or write it "
                         "for both outcomes")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_stored_fit_says_p_is_zero(path):
    zero = _problems_or_skip(path)["p = 0"]
    assert zero == [], f"{path.name} stores a fit with p = 0: {zero}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_guard_reads_every_measuring_chapter(path):
    unread = _problems_or_skip(path)["unread"]
    assert unread == [], f"{path.name}: {unread}"


def test_every_measuring_chapter_is_in_the_checkout():
    subjects = {re.sub(r"^\d+_", "", p.stem) for p in NOTEBOOKS}
    assert set(MUST_READ) <= subjects, f"MUST_READ names chapters that do not exist: {set(MUST_READ) - subjects}"


# ------------------------------------------------------------------------- the guard's own tests
def _synthetic(tmp_path, name: str, outputs: list[str], prose: list[str] = ()) -> Path:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": text} for text in prose]
    cells += [{"cell_type": "code", "metadata": {}, "source": "", "execution_count": 1,
               "outputs": [{"output_type": "stream", "name": "stdout", "text": text}]} for text in outputs]
    path = tmp_path / name
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    return path


CH01 = """  N  time [s]  Tser/T(N)  paired S  efficiency  spread start-up [s]
ser     0.191       1.00      1.00        1.00
  1     0.197       0.97      1.01        1.01     19%         0.19
  2     0.105       1.82      1.80        0.90     28%         0.02
Tser/T(N): the definition"""
CH07 = """  N  strong ms   S(N)  eff.  Karp-Flatt e  weak ms  scaled S  eff.
  1       38.7   1.00  1.00             -     20.1      1.00  1.00
  2       41.3   0.94  0.47         1.127     41.3      0.97  0.49
serial (1 BLAS thread): 38.8 ms at batch 1024, 20.1 ms at batch 768"""


def test_the_readers_read_the_tables_of_01_and_07(tmp_path):
    one = read_notebook(_synthetic(tmp_path, "01_serial_to_parallel.ipynb", [CH01]))
    assert read_pool_table(one) == ([Speedup(2, 1.80, "paired S(N) of the pool", 0)], [])
    seven = read_notebook(_synthetic(tmp_path, "07_data_parallelism.ipynb", [CH07]))
    speedups, wrong = read_scaling_table(seven)
    assert [(s.workers, s.value) for s in speedups] == [(2, 0.94), (2, 0.97)] and wrong == []
    assert problems(tmp_path / "07_data_parallelism.ipynb")["speedup"] != []
    tampered = CH01.replace("0.105       1.82", "0.105       1.60")
    assert problems(_synthetic(tmp_path, "01_serial_to_parallel.ipynb", [tampered]))["interpretation"] != []


def test_the_guard_fails_on_each_stored_contradiction_of_issue_37(tmp_path):
    """The lines the notebooks stored when the issue was filed (commit 77d663b), one per rule."""
    cases = {
        "05_operator_parallelism.ipynb": (["your 2 cores are free (2 busy loops side by side took 1.10x the time of "
                                           "one alone; load average 1.43): the speedups below are your machine's.\n",
                                           "1 thread(s): GEMM 39.2 ms (speedup 1.00), conv2d 146.4 ms (speedup 1.00)\n"
                                           "2 thread(s): GEMM 50.6 ms (speedup 0.78), conv2d 110.8 ms (speedup 1.32)\n"],
                                          [], "speedup"),
        "08_collectives.ipynb": (["median step: 34.8 ms with one all-reduce, 39.5 ms with 4 buckets\n"],
                                 ["- **Overlap** starts each bucket's all-reduce ...; on CPU cores that both compute "
                                  "and communicate, two cores show mostly the waiting hidden."], "claim"),
        "10_pipeline_parallelism.ipynb": (["bubble, measured: GPipe 23.7%, 1F1B 19.6%; simulator with equal stages: "
                                           "11.1% for both\nmeasured here, 1F1B's bubble is 4.1 points below GPipe's\n"],
                                          ["1F1B holds at most $N_p$ micro-batches' activations instead of $M$, while "
                                           "its measured bubble pays for its extra waits on the neighbours."], "claim"),
        "12_hybrid_parallelism.ipynb": (["your 2 cores were shared with other work (2 busy loops side by side took "
                                         "1.51x the time of one alone; load average 0.83): the speedups below are "
                                         "not your machine's. Close other programs and run the cell again.\n",
                                         "  serial loop, whole batch                   1 proc.    100 ms   baseline\n"
                                         "  pipeline 1 x 2, M = 4                      2 proc.     87 ms   1.15x faster\n"],
                                        [], "shared"),
    }
    for name, (outputs, prose, rule) in cases.items():
        found = problems(_synthetic(tmp_path, name, outputs, prose))
        assert found[rule], (name, rule, found)
    hybrid = problems(tmp_path / "12_hybrid_parallelism.ipynb")
    assert hybrid["speedup"] and hybrid["interpretation"] == []  # 1.15x on 2 processes: below 1.2, yet 100/87


def test_printed_interpretations_are_checked_against_their_numbers(tmp_path):
    assert verdict_agrees("1.15x faster", "87", "100") and verdict_agrees("1.50x slower", "150", "100")
    assert verdict_agrees("ties (within 3%)", "103", "100") and not verdict_agrees("1.15x slower", "87", "100")
    assert not verdict_agrees("ties (within 3%)", "120", "100") and not verdict_agrees("1.30x faster", "87", "100")
    lines = ["bubble, measured: GPipe 23.7%, 1F1B 19.6%\nmeasured here, 1F1B's bubble is 4.1 points above GPipe's\n",
             "v = 1: chunks (0, 3, 6), bitwise equal: True; bubble measured 20.3%, formula 11.1%\n"
             "v = 2: chunks (0, 2, 3, 4, 6), bitwise equal: True; bubble measured 24.9%, formula 5.9%\n"
             "measured here, v = 2's bubble is 4.6 points below v = 1's\n"]
    assert len(problems(_synthetic(tmp_path, "11_pipeline_parallelism.ipynb", lines))["interpretation"]) == 2
    overlap = ["median step: 34.8 ms with one all-reduce, 39.5 ms with 4 buckets\n",
               "model: 36.0 ms without overlap, 34.1 ms with it (all-reduces 2.9 ms in all)\n"
               "measured: 34.8 ms and 39.5 ms on 2 cores; 4 buckets against one all-reduce: 1.14x faster "
               "(the model: 1.06x faster)\n",
               "buckets  measured ms  model ms  error  no overlap ms  shared memory ms\n"
               "      1         26.8      25.8   +3.7%           25.8              23.3\n"
               "      4         24.8      24.5  +12.6%           29.4              27.9\n"
               "over the wire the measured step is within 4% of the model for every bucket count; "
               "4 buckets against none overlapped: 1.19x faster\n"]
    wrong = problems(_synthetic(tmp_path, "08_collectives.ipynb", overlap))["interpretation"]
    assert len(wrong) == 2 and "1.14x faster" in wrong[0] and "within 4%" in wrong[1], wrong
    ok = [overlap[0], overlap[1].replace("1.14x faster", "1.14x slower"),
          overlap[2].replace("is within 4%", "is off by up to 13%")]
    assert problems(_synthetic(tmp_path, "08_collectives.ipynb", ok))["interpretation"] == []


def test_a_claim_written_for_both_outcomes_passes(tmp_path):
    stored = ["median step: 34.8 ms with one all-reduce, 39.5 ms with 4 buckets\n"]
    hedged = ["On two CPU cores overlap can hide only what is not CPU work, if anything: the lines above say "
              "whether it did."]
    assert problems(_synthetic(tmp_path, "08_collectives.ipynb", stored, hedged))["claim"] == []
    faster = ["median step: 39.5 ms with one all-reduce, 34.8 ms with 4 buckets\n"]
    claim = ["two cores show mostly the waiting hidden."]
    assert problems(_synthetic(tmp_path, "08_collectives.ipynb", faster, claim))["claim"] == []


#: The commit at which issue 37 listed the stored contradictions, and each notebook's file then.
ISSUE_COMMIT = "77d663b"
CONTRADICTED = {"05_operator_parallelism": "speedup", "08_collectives": "claim", "10_pipeline_parallelism": "claim",
                "12_hybrid_parallelism": "shared"}


@pytest.mark.parametrize(("stem", "rule"), CONTRADICTED.items())
def test_the_guard_fails_on_the_notebooks_stored_when_issue_37_was_filed(tmp_path, stem, rule):
    """Reverting a notebook to its stored outputs of then makes the guard fail (skipped without
    the repository's history, as in a copy of the course without .git)."""
    try:
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{ISSUE_COMMIT}:notebooks/{stem}.ipynb"],
                              capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip(f"the repository's history (commit {ISSUE_COMMIT}) is not available")
    path = tmp_path / f"{stem}.ipynb"
    path.write_text(text, encoding="utf-8")
    assert problems(path)[rule], f"the guard passes {stem} as stored at {ISSUE_COMMIT}"


def test_the_readers_of_the_rewritten_chapters_check_their_lines(tmp_path):
    """The lines chapters 01, 05, 07, 11 and 14 print since issue 37, each read against its numbers."""
    pool = CH01 + "\nceiling with 2 processes (the same work, nothing sent): 1.95; your paired S: 1.80: the messages " \
                  "and the slowest shard cost 8% of the ceiling\n"
    assert problems(_synthetic(tmp_path, "01_serial_to_parallel.ipynb", [pool]))["interpretation"] == []
    wrong = pool.replace("cost 8% of the ceiling", "cost 20% of the ceiling")
    assert problems(_synthetic(tmp_path, "01_serial_to_parallel.ipynb", [wrong]))["interpretation"]
    threads = ("1 thread(s): GEMM 39.2 ms (speedup 1.00), conv2d 146.4 ms (speedup 1.00)\n"
               "2 thread(s): GEMM 20.6 ms (speedup 1.90), conv2d 110.8 ms (speedup 1.32)\n"
               "The GEMM on 2 threads: 1.90x, close to the ideal: a compute-bound GEMM gains from every core it gets.\n")
    five = problems(_synthetic(tmp_path, "05_operator_parallelism.ipynb", [threads]))
    assert five["interpretation"] == [] and five["speedup"] == []
    slow = threads.replace("20.6 ms (speedup 1.90)", "50.6 ms (speedup 0.78)").replace(
        "1.90x, close to the ideal", "0.78x, close to the ideal")
    five = problems(_synthetic(tmp_path, "05_operator_parallelism.ipynb", [slow]))
    assert len(five["interpretation"]) == 1 and five["speedup"]
    seven = CH07.replace("38.8 ms at batch", "41.0 ms at batch").replace("   0.94  0.47", "   0.99  0.50").replace(
        "  1.00  1.00             -", "  1.06  1.06             -") + (
        "\nS(1) = 1.06. Per step, serial / 1 worker: 41.0 / 38.7 ms, of CPU time 40.8 / 38.5 ms, page faults 3 / 3: "
        "within 10% of 1, the same work at the same speed\n")
    assert problems(_synthetic(tmp_path, "07_data_parallelism.ipynb", [seven]))["interpretation"] == []
    bad = seven.replace("within 10% of 1, the same work at the same speed", "the CPU time agrees: a process waited")
    assert problems(_synthetic(tmp_path, "07_data_parallelism.ipynb", [bad]))["interpretation"]
    bubbles = ("GPipe bubble measured 23.7%; its simulator 12.0%; the rest (hand-overs, waits) +11.7 points\n"
               "1F1B  bubble measured 19.6%; its simulator 11.5%; the rest (hand-overs, waits) +8.1 points\n"
               "measured here, 1F1B's bubble is 4.1 points below GPipe's, and its rest is 3.6 points below GPipe's rest\n")
    eleven = _synthetic(tmp_path, "11_pipeline_parallelism.ipynb", [bubbles],
                        ["while its measured bubble pays for its extra waits on the neighbours."])
    found = problems(eleven)
    assert found["interpretation"] == [] and found["claim"] and found["unread"] == []
    swapped = bubbles.replace("3.6 points below GPipe's rest", "3.6 points above GPipe's rest")
    assert problems(_synthetic(tmp_path, "11_pipeline_parallelism.ipynb", [swapped]))["interpretation"]
    hybrid = ("  serial loop, whole batch                   1 proc.    100 ms   baseline\n"
              "  pipeline 1 x 2, M = 4                      2 proc.     62 ms   1.61x faster (shared cores)\n")
    found = problems(_synthetic(tmp_path, "14_hybrid_parallelism.ipynb", [hybrid]))
    assert found["shared"] and found["interpretation"] == [] and found["unread"] == []
