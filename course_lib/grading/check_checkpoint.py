"""Checks of the checkpoint files: ``save_shard``, ``write_checkpoint``, ``load_checkpoint``
and ``latest_checkpoint``.

``save_shard`` runs in this process, in a temporary folder, with the module's file helpers
seen through spies (``flush_to_disk``, ``rename_into_place``: each writes down what it was
given, then does its work): the shard must read back with ``np.load`` as the arrays given,
by name, bit for bit; it must have been written to a temporary file beside it, flushed, then
renamed into place, nothing left behind. Then it runs twice more with a crash (an exception)
at the flush and at the rename: neither may leave a file under the shard's name, the
promise of a write that is never half done.

``write_checkpoint`` runs on three threads of this process (one per worker, ``all_saved``
a barrier of the three; worker 0 the quickest), with ``save_shard``, ``describe`` and
``write_manifest`` seen through spies: every worker writes its own shard, with the step;
worker 0, once every worker has passed the barrier, writes one manifest, the run's fields
and the step and every shard's size and sha256. A worker that never reaches the barrier
ends the run at once (with the others' counts of waits); one that hangs, with
``WorkerTimeout`` after a few seconds.

``load_checkpoint`` reads checkpoints the check writes itself (the course's format, two
shards of unequal size, float64 parameters and optimizer state): a complete one must give
what the course's :func:`course_lib.parallel.checkpoint.assemble` gives, bit for bit; one
without a manifest, with a shard missing, truncated, longer than the manifest says or with
a changed byte must be refused with a ``CheckpointError`` naming that shard.

``latest_checkpoint`` (with your ``load_checkpoint``) reads a folder of five checkpoints,
the three newest unfinished or damaged: it must return the newest complete one (step 4) with
the reasons of the three refused, newest first; and raise a ``CheckpointError`` when no
checkpoint is complete.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .core import Mistake
from .harness import arrays_differ, counted, learner, replaced, run_threads

__all__ = ["CHECKS", "HINTS"]

MODULE = "course_lib.parallel.checkpoint"
#: Parameters of the made-up model, and each worker's range of them (unequal chunks).
N_PARAMS = 11
RANGES = ((0, 4), (4, 8), (8, 11))
WORKERS = len(RANGES)
STEP = 7


def _ck():
    import importlib

    return importlib.import_module(MODULE)


@contextlib.contextmanager
def _folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ddl-check-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _state(seed: int = 0):
    """Flat parameters and momentum (float64) of the made-up model."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(N_PARAMS), rng.standard_normal(N_PARAMS)


def _arrays(rank: int, params, velocity, step: int) -> dict:
    """What worker ``rank`` hands write_checkpoint: its part of the state."""
    lo, hi = RANGES[rank]
    return {"params": params[lo:hi].copy(), "ranges": np.array([[lo, hi]]), "opt.t": np.int64(step),
            "opt._velocity": velocity[lo:hi].copy()}


def _run_meta(writers: int = WORKERS) -> dict:
    return {"trainer": "data parallel", "n_params": N_PARAMS, "dtype": "float64", "n_samples": 40,
            "batch_size": 8, "seed": 0, "optimizer": "SGD", "workers": writers, "zero_stage": 1,
            "writers": writers}


def _same(got: dict, expected: dict) -> str:
    """What differs between two dicts of arrays ("" when equal, bit for bit and dtype)."""
    if sorted(got) != sorted(expected):
        return f"it holds {sorted(got)}, expected {sorted(expected)}"
    for key in expected:
        a, b = np.asarray(got[key]), np.asarray(expected[key])
        if a.dtype != b.dtype:
            return f"{key!r} is {a.dtype}, expected {b.dtype}"
        wrong = arrays_differ(a, b)
        if wrong:
            return f"{key!r}: {wrong}"
    return ""


# ------------------------------------------------------------------ save_shard
class _Crash(Exception):
    """The machine went down here (raised by a spy)."""


class _FileSpy:
    """Spies on save_shard's file helpers: what each was given, in order; ``crash`` makes
    one of them ("flush", "rename") raise :class:`_Crash` before it does its work."""

    def __init__(self, crash: str | None = None):
        ck = _ck()
        self.flush_to_disk, self.rename_into_place = ck.flush_to_disk, ck.rename_into_place
        self.events: list[tuple] = []
        self.crash = crash

    def flush(self, f) -> None:
        self.events.append(("flush", Path(getattr(f, "name", "?")), bool(getattr(f, "closed", False))))
        if self.crash == "flush":
            raise _Crash()
        self.flush_to_disk(f)

    def rename(self, tmp, path) -> None:
        self.events.append(("rename", Path(tmp), Path(path), Path(tmp).is_file()))
        if self.crash == "rename":
            raise _Crash()
        self.rename_into_place(tmp, path)

    def patch(self):
        return replaced(MODULE, flush_to_disk=self.flush, rename_into_place=self.rename)


def _shard_arrays(seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    return {"params": rng.standard_normal(5).astype(np.float32), "ranges": np.array([[3, 8]]),
            "opt.t": np.int64(12), "opt._velocity": rng.standard_normal(5).astype(np.float32),
            "step": np.int64(12)}


def _read_shard(path: Path, name: str) -> dict:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return dict(npz)
    except ValueError as err:
        if "pickle" in str(err):
            raise Mistake(f"save_shard: {name} holds a pickled object, not arrays by name (np.savez(f, arrays) "
                          "saves the dict itself as one object): pass the arrays by name, np.savez(f, **arrays), "
                          "so that np.load gives params, ranges, ... back") from None
        raise Mistake(f"save_shard: {name} does not read back with np.load ({err}): write it with "
                      "np.savez(f, **arrays) into the open file") from None


def check_save_shard() -> None:
    save_shard = learner(MODULE, "save_shard")
    name = "shard-1.npz"
    arrays = _shard_arrays()
    with _folder() as folder:
        spy = _FileSpy()
        with spy.patch():
            save_shard(folder, name, {k: np.copy(v) for k, v in arrays.items()})
        final = folder / name
        left = sorted(p.name for p in folder.iterdir() if p.name != name)
        if not final.is_file():
            raise Mistake(f"save_shard: no file {name} in the folder afterwards (it holds {left}): the shard ends "
                          f"up under its name, folder / name")
        stray = [p for p in left if p.endswith(".tmp")]
        if stray:
            raise Mistake(f"save_shard left {stray} behind: the temporary file is renamed into place "
                          "(rename_into_place from tmp to folder / name), not copied")
        if left:
            raise Mistake(f"save_shard wrote {left} besides {name}: write the shard only (np.savez adds .npz to a "
                          "file NAME that lacks it: hand it the open file, np.savez(f, **arrays))")
        wrong = _same(_read_shard(final, name), arrays)
        if wrong:
            raise Mistake(f"save_shard: {name} does not read back as the arrays given: {wrong}")
        flushes = [e for e in spy.events if e[0] == "flush"]
        renames = [e for e in spy.events if e[0] == "rename"]
        if any(e[1] == final for e in flushes):
            raise Mistake(f"save_shard wrote the shard in place, under its final name {name}: a reader (or a crash "
                          "half-way) finds a file that looks whole and is not; write to a temporary file, "
                          f"folder / f'{{name}}.tmp', then rename it into place")
        if not flushes:
            raise Mistake("save_shard never flushed the shard to the disk (flush_to_disk(f), inside the `with`, "
                          "after np.savez): after a power cut the rename may be on the disk and the bytes not, "
                          "a shard of the right name full of zeros")
        if not renames:
            raise Mistake("save_shard moved the shard into place without rename_into_place (tmp to folder / name): "
                          "it renames atomically AND fsyncs the folder, without which the rename itself may be "
                          "lost at a power cut")
        if any(e[2] for e in flushes):
            raise Mistake("save_shard called flush_to_disk(f) after the file was closed: flush inside the `with` "
                          "block, while f is open")
        if spy.events.index(renames[0]) < spy.events.index(flushes[0]):
            raise Mistake("save_shard renamed the shard into place before flushing it to the disk: a reader may "
                          "then see the whole name and not yet the whole bytes; np.savez, flush_to_disk(f), close, "
                          "then rename_into_place")
        tmp = renames[0][1]
        if tmp.parent != folder:
            raise Mistake(f"save_shard wrote its temporary file in {tmp.parent}, not beside the shard: a rename is "
                          "atomic only within one file system; folder / f'{name}.tmp'")
    for crash, when in (("flush", "while its bytes were flushed"), ("rename", "just before the rename")):
        with _folder() as folder:
            spy = _FileSpy(crash)
            with spy.patch(), contextlib.suppress(_Crash):
                save_shard(folder, name, {k: np.copy(v) for k, v in arrays.items()})
            if (folder / name).exists():
                raise Mistake(f"save_shard: a crash {when} left a file named {name}: a reader takes it for the "
                              "whole shard; nothing may appear under the shard's name before the rename")


# ------------------------------------------------------------------ write_checkpoint
def _rank_of_thread() -> int:
    name = threading.current_thread().name
    return int(name.rsplit("-", 1)[-1]) if name.startswith("ddl-check-") else -1


def check_write_checkpoint() -> None:
    ck = _ck()
    name = "write_checkpoint"
    write_checkpoint = learner(MODULE, name)
    params, velocity = _state()
    meta = _run_meta()
    with _folder() as root:
        saved: list[tuple] = []
        manifests: list[tuple] = []
        waits: list[int] = [0] * WORKERS
        real_save, real_describe, real_manifest = ck.save_shard, ck.describe, ck.write_manifest
        folder = root / ck.step_folder(STEP)

        def passed_barrier() -> bool:
            return all(w >= 1 for w in waits)

        def save(folder_, shard, arrays):
            r = _rank_of_thread()
            if r > 0:
                time.sleep(0.02 * r)  # worker 0 the quickest: a manifest written too early finds shards missing
            saved.append((r, Path(folder_), shard, sorted(arrays), arrays.get("step")))
            if r >= 0 and shard != ck.shard_name(r):  # at once: another worker's shard is overwritten
                raise Mistake(f"{name}: worker {r} wrote {shard}, not its own {ck.shard_name(r)}: the file name is "
                              "shard_name(rank) (workers writing the same name overwrite each other's part)")
            return real_save(folder_, shard, arrays)

        def describe(path):
            r = _rank_of_thread()
            if not passed_barrier():
                raise Mistake(f"{name}: worker {r} described the shards for the manifest before every worker had "
                              f"saved its shard ({counted(waits, 'calls of all_saved()')}): all_saved() first, "
                              "then the manifest")
            return real_describe(path)

        def manifest(folder_, content):
            r = _rank_of_thread()
            manifests.append((r, passed_barrier(), sorted(p.name for p in Path(folder_).iterdir())))
            if r != 0:  # at once: several writers race on manifest.json.tmp
                raise Mistake(f"{name}: worker {r} wrote the manifest too: one worker writes it (rank == 0), after "
                              "the barrier; several writers race on manifest.json.tmp")
            return real_manifest(folder_, content)

        def work(rank, barrier):
            def all_saved():
                waits[rank] += 1
                barrier.wait(rank, 3.0)

            try:
                return write_checkpoint(root, STEP, rank, _arrays(rank, params, velocity, STEP), all_saved, dict(meta))
            except FileExistsError as err:
                raise Mistake(f"{name}: worker {rank} raised FileExistsError ({err}): every worker creates the "
                              "step's folder, and all but the first find it there: "
                              "folder.mkdir(parents=True, exist_ok=True)") from None

        def unmatched(calls, returned):
            done = [r for r, ok in enumerate(returned) if ok]
            return (f"{name}: the workers did not all wait for every shard ({counted(waits, 'calls of all_saved()')}; "
                    f"worker(s) {done} returned while another waited): every worker calls all_saved() once, after "
                    "its own shard, before worker 0 writes the manifest (on processes: a hang)")

        with replaced(MODULE, save_shard=save, describe=describe, write_manifest=manifest):
            results = run_threads(WORKERS, work, unmatched)
        for r, got in enumerate(results):
            if got is None or Path(got) != folder:
                raise Mistake(f"{name}: worker {r} returned {got!r}: return the step's folder, "
                              f"root / step_folder(step) = {folder}")
        by_rank = {}
        for r, where, shard, keys, step in saved:
            if r in by_rank:
                raise Mistake(f"{name}: worker {r} saved more than one shard ({by_rank[r][1]}, {shard}): each worker "
                              "writes its own shard once")
            by_rank[r] = (where, shard, keys, step)
        for r in range(WORKERS):
            if r not in by_rank:
                raise Mistake(f"{name}: worker {r} saved no shard: every worker writes its own, "
                              "save_shard(folder, shard_name(rank), ...)")
            where, shard, keys, step = by_rank[r]
            if where != folder:
                raise Mistake(f"{name}: worker {r} saved its shard in {where}, not in the step's folder {folder}")
            if shard != ck.shard_name(r):
                raise Mistake(f"{name}: worker {r} wrote {shard}, not its own {ck.shard_name(r)}: the file name is "
                              "shard_name(rank) (workers writing the same name overwrite each other's part)")
            if "step" not in keys:
                raise Mistake(f"{name}: worker {r}'s shard holds {keys}, no 'step': save {{**arrays, 'step': step}}, "
                              "so that a reader can tell a shard of another step (load_checkpoint checks it)")
            if step is None or int(step) != STEP:
                raise Mistake(f"{name}: worker {r}'s shard says step {step}, not {STEP}")
        if len(manifests) == 0:
            raise Mistake(f"{name}: no worker wrote the manifest: worker 0 writes it, write_manifest(folder, ...), "
                          "once every shard is in place; without it the checkpoint was never finished")
        writers = sorted(r for r, *_ in manifests)
        if len(manifests) > 1:
            raise Mistake(f"{name}: worker(s) {writers} each wrote the manifest: one worker writes it (rank == 0), "
                          "after the barrier; several writers race on manifest.json.tmp")
        r, after, present = manifests[0]
        if r != 0:
            raise Mistake(f"{name}: worker {r} wrote the manifest: worker 0 does (rank == 0)")
        if not after:
            raise Mistake(f"{name}: worker 0 wrote the manifest before every worker had saved its shard "
                          f"({counted(waits, 'calls of all_saved()')}): all_saved() first, then the manifest")
        with (folder / ck.MANIFEST).open(encoding="utf-8") as f:
            written = json.load(f)
        shards = [real_describe(folder / ck.shard_name(k)) for k in range(WORKERS)]
        expected = {"format": ck.FORMAT, **meta, "step": STEP, "shards": shards}
        for key in expected:
            if key not in written:
                raise Mistake(f"{name}: the manifest has no {key!r}: write {{**manifest, 'step': step, 'shards': "
                              "shards}, the run's fields, the step and one entry per shard")
            if written[key] != expected[key]:
                raise Mistake(f"{name}: the manifest's {key!r} is {written[key]!r:.120}, expected "
                              f"{expected[key]!r:.120} (each shard: describe(folder / shard_name(r)), for every "
                              "writer r, in rank order)")
        for k in range(WORKERS):
            with np.load(folder / ck.shard_name(k), allow_pickle=False) as npz:
                got = dict(npz)
            wrong = _same(got, {**_arrays(k, params, velocity, STEP), "step": np.int64(STEP)})
            if wrong:
                raise Mistake(f"{name}: worker {k}'s shard does not hold its arrays and the step: {wrong}")


# ------------------------------------------------------------------ load_checkpoint
def _write_checkpoint(root: Path, step: int, seed: int = 0, writers: int = 2) -> Path:
    """A checkpoint in the course's format, written here without the learner's code."""
    ck = _ck()
    params, velocity = _state(seed + step)
    bounds = ((0, 7), (7, N_PARAMS)) if writers == 2 else ((0, N_PARAMS),)
    folder = root / ck.step_folder(step)
    folder.mkdir(parents=True)
    for r, (lo, hi) in enumerate(bounds):
        with open(folder / ck.shard_name(r), "wb") as f:
            np.savez(f, params=params[lo:hi], ranges=np.array([[lo, hi]]), **{"opt.t": np.int64(step + 1)},
                     **{"opt._velocity": velocity[lo:hi]}, step=np.int64(step))
    shards = [ck.describe(folder / ck.shard_name(r)) for r in range(writers)]
    ck.write_manifest(folder, {**_run_meta(writers), "step": step, "shards": shards})
    return folder


def _damage(folder: Path, how: str) -> str:
    """Damage ``folder``'s checkpoint ``how``; the name of the file damaged."""
    ck = _ck()
    if how == "no manifest":
        (folder / ck.MANIFEST).unlink()
        return ck.MANIFEST
    shard = folder / ck.shard_name(1)
    data = shard.read_bytes()
    if how == "missing":
        shard.unlink()
    elif how == "truncated":
        shard.write_bytes(data[: len(data) // 2])
    elif how == "longer":
        shard.write_bytes(data + b"\0" * 64)
    elif how == "corrupted":  # one byte of the parameters' numbers changed: same size
        i = data.index(b"\x93NUMPY") + 140
        shard.write_bytes(data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1 :])
    return shard.name


def _same_checkpoint(got, expected) -> str:
    for field in ("step", "optimizer_steps", "manifest"):
        if getattr(got, field, None) != getattr(expected, field):
            return f"its {field} is {getattr(got, field, None)!r:.80}, expected {getattr(expected, field)!r:.80}"
    if Path(getattr(got, "folder", "")) != expected.folder:
        return f"its folder is {getattr(got, 'folder', None)!r}, expected {expected.folder}"
    wrong = arrays_differ(got.params, expected.params)
    if wrong or np.asarray(got.params).dtype != expected.params.dtype:
        return f"its params: {wrong or np.asarray(got.params).dtype}"
    wrong = _same(dict(getattr(got, "optimizer", {})), expected.optimizer)
    return f"its optimizer state: {wrong}" if wrong else ""


def check_load_checkpoint() -> None:
    ck = _ck()
    name = "load_checkpoint"
    load_checkpoint = learner(MODULE, name)
    with _folder() as root:
        folder = _write_checkpoint(root, 6)
        manifest = json.loads((folder / ck.MANIFEST).read_text(encoding="utf-8"))
        shards = []
        for item in manifest["shards"]:
            with np.load(folder / item["file"], allow_pickle=False) as npz:
                shards.append(dict(npz))
        expected = ck.assemble(folder, manifest, shards)
        got = load_checkpoint(folder)
        if not isinstance(got, ck.Checkpoint):
            raise Mistake(f"{name} returned {type(got).__name__}: return the Checkpoint that "
                          "assemble(folder, manifest, shards) makes of the pieces")
        wrong = _same_checkpoint(got, expected)
        if wrong:
            raise Mistake(f"{name}: the checkpoint of step 6 read back wrong: {wrong}")
    for how in ("no manifest", "missing", "truncated", "longer", "corrupted"):
        with _folder() as root:
            folder = _write_checkpoint(root, 6)
            damaged = _damage(folder, how)
            said = (f"{name}: a checkpoint without its {damaged}" if how in ("no manifest", "missing")
                    else f"{name}: a checkpoint whose {damaged} is {how}")
            try:
                got = load_checkpoint(folder)
            except ck.CheckpointError as err:
                if damaged not in str(err):
                    raise Mistake(f"{said} was refused with \"{err}\", which does not name {damaged}: let the "
                                  "CheckpointError of read_manifest or verify_shard through, it names the file") from None
                continue
            except Exception as err:  # noqa: BLE001 - the learner's reading: any exception
                why = ("a checkpoint without a manifest was never finished: read_manifest(folder) says so"
                       if how == "no manifest" else
                       "check each shard against the manifest (verify_shard(path, entry): there, of its size, of "
                       "its checksum) BEFORE reading it")
                raise Mistake(f"{said} raised {type(err).__name__} ({str(err)[:200]}), not a CheckpointError naming "
                              f"{damaged}: {why}. latest_checkpoint falls back past a CheckpointError only") from None
            raise Mistake(f"{said} was read back as if whole (step {getattr(got, 'step', '?')}): check every shard "
                          "against the manifest, verify_shard(path, entry), before reading it; a damaged checkpoint "
                          "is refused with a CheckpointError naming the shard")


# ------------------------------------------------------------------ latest_checkpoint
#: The checkpoints of the folder latest_checkpoint reads, oldest first: (step, damage or None).
HISTORY = ((2, None), (4, None), (6, "truncated"), (8, "no manifest"), (10, "corrupted"))


def check_latest_checkpoint() -> None:
    ck = _ck()
    name = "latest_checkpoint"
    latest = learner(MODULE, name)
    with _folder() as root:
        reasons = {}
        for step, how in HISTORY:
            folder = _write_checkpoint(root, step)
            if how is not None:
                reasons[step] = _damage(folder, how)
        (root / "notes.txt").write_text("not a checkpoint\n", encoding="utf-8")
        try:
            got = latest(root)
        except ck.CheckpointError as err:
            raise Mistake(f"{name} let a CheckpointError through (\"{str(err)[:100]}\"): the newest checkpoints of a "
                          "run killed while writing are unfinished or damaged; catch the CheckpointError, keep its "
                          "reason, and try the one before") from None
        newest = max(s for s, how in HISTORY if how is None)
        step = getattr(got, "step", None)
        if step != newest:
            oldest = min(s for s, _ in HISTORY)
            why = (": the oldest complete one; try the newest first, sorted(..., reverse=True)" if step == oldest
                   else "")
            raise Mistake(f"{name} returned the checkpoint of step {step}, not {newest}, the newest complete one "
                          f"(steps {[s for s, _ in HISTORY]} are there){why}")
        refused = tuple(getattr(got, "refused", ()))
        damaged = [s for s, how in sorted(HISTORY, reverse=True) if how is not None]
        if len(refused) != len(damaged):
            raise Mistake(f"{name}: the checkpoint's `refused` holds {len(refused)} reason(s); {len(damaged)} newer "
                          f"checkpoints were refused (steps {damaged}): append str(why) for each, newest first, and "
                          "set checkpoint.refused = tuple(refused) on the one returned")
        for s, text in zip(damaged, refused):
            if ck.step_folder(s) not in str(text) or reasons[s] not in str(text):
                raise Mistake(f"{name}: the reasons in `refused` are {list(refused)}; the newest first, each the "
                              f"CheckpointError's message (it names the folder and the file: {ck.step_folder(s)}, "
                              f"{reasons[s]})")
        expected = load_checkpoint_reference(root / ck.step_folder(newest))
        wrong = _same_checkpoint(got, expected)
        if wrong:
            raise Mistake(f"{name}: the checkpoint of step {newest} read back wrong: {wrong}")
    with _folder() as root:
        for step in (3, 5):
            _damage(_write_checkpoint(root, step), "truncated")
        try:
            got = latest(root)
        except ck.CheckpointError as err:
            if "no complete checkpoint" not in str(err) or ck.step_folder(5) not in str(err):
                raise Mistake(f"{name}: with no complete checkpoint it raised \"{err}\"; say so and give every "
                              "reason: CheckpointError(f\"no complete checkpoint in {root}: \" + \"; \".join(refused))"
                              ) from None
            return
        raise Mistake(f"{name} returned {got!r:.60} from a folder whose every checkpoint is damaged: raise a "
                      "CheckpointError (no complete checkpoint, and why each was refused); the caller then starts "
                      "from step 0 knowingly")


def load_checkpoint_reference(folder: Path):
    """The course's reading, written out here (the learner's ``load_checkpoint`` is what is checked
    with it)."""
    ck = _ck()
    manifest = ck.read_manifest(folder)
    shards = []
    for item in manifest["shards"]:
        ck.verify_shard(folder / item["file"], item)
        with np.load(folder / item["file"], allow_pickle=False) as npz:
            shards.append(dict(npz))
    return ck.assemble(folder, manifest, shards)


CHECKS = {
    "save_shard": check_save_shard,
    "write_checkpoint": check_write_checkpoint,
    "load_checkpoint": check_load_checkpoint,
    "latest_checkpoint": check_latest_checkpoint,
}

HINTS = {
    "save_shard": (
        "Never write under the shard's own name: a reader, or a crash half-way, would find a file that looks "
        "whole and is not. Write to a temporary file beside it, `tmp = folder / f\"{name}.tmp\"`.",
        "`with open(tmp, \"wb\") as f:` then `np.savez(f, **arrays)` (the arrays by name; an open file, so that "
        "numpy adds no `.npz` to the name) and `flush_to_disk(f)`, while the file is open: the bytes reach the "
        "disk.",
        "After the `with`: `rename_into_place` from `tmp` to `folder / name`, an atomic rename (a reader sees no shard or "
        "the whole shard) that also makes the rename itself durable.",
    ),
    "write_checkpoint": (
        "Every worker writes its own shard into the step's folder, `folder = Path(root) / step_folder(step)`, "
        "created by whichever worker comes first: `folder.mkdir(parents=True, exist_ok=True)`.",
        "`save_shard(folder, shard_name(rank), {**arrays, \"step\": step})`, then `all_saved()`: every worker "
        "waits there until every shard is in place.",
        "Then worker 0 alone (`if rank == 0:`) writes the manifest, last: `shards = [describe(folder / "
        "shard_name(r)) for r in range(manifest[\"writers\"])]` and `write_manifest(folder, {**manifest, "
        "\"step\": step, \"shards\": shards})`. Return `folder`.",
    ),
    "load_checkpoint": (
        "Trust nothing you have not checked: read the manifest with `read_manifest(folder)` (a CheckpointError if there is "
        "none: the checkpoint was never finished).",
        "For each entry of `manifest[\"shards\"]`: `verify_shard(path, entry)` first (there, of its size, of its "
        "checksum), then `with np.load(path, allow_pickle=False) as npz: shards.append(dict(npz))` (a dict: the "
        "file is closed after the `with`).",
        "Return what `assemble(folder, manifest, shards)` makes of the pieces: one flat buffer.",
    ),
    "latest_checkpoint": (
        "The folders are named `step-00000008`: sorted by name is sorted by step. Try the newest first, "
        "`sorted(Path(root).glob(\"step-*\"), reverse=True)`.",
        "`load_checkpoint(folder)` for each; on a `CheckpointError as why`, append `str(why)` to a list "
        "`refused` and go on to the one before.",
        "The first that loads: set `checkpoint.refused = tuple(refused)` and return it. None at all: "
        "`raise CheckpointError(f\"no complete checkpoint in {root}\" + ...)` with the reasons.",
    ),
}
