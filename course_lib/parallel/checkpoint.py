"""Training checkpoints (训练检查点) that are never half-written, and the resume from the last
complete one.

A checkpoint of step ``s`` (the steps done) is a folder ``step-0000000s`` of one file per
worker, its **shard** (an ``.npz``: its part of the flat parameters, its part of every
optimizer state array and the optimizer's step count, the step and the seed: the course's
batches are a function of the seed and the step, so these two are the data position and the
random state), and one ``manifest.json`` written last, which lists every shard with its size
and sha256 checksum. A checkpoint without a manifest was never finished.

Nothing is ever half-written because nothing is written in place:

1. each worker writes its shard to a temporary file, flushes it to the disk (``fsync``: the
   bytes leave the page cache, so a power cut cannot lose them) and renames it into place
   (``os.replace`` is atomic: a reader sees no shard or the whole shard) -
   :func:`save_shard`;
2. once every shard is in place (a barrier), worker 0 writes the manifest the same way -
   :func:`write_checkpoint`.

A worker, or the notebook that started it, killed at any moment leaves at worst a ``.tmp``
file or a folder without a manifest: the previous checkpoint is untouched. Reading checks
everything the manifest promises - every shard there, of its size, of its checksum - and
refuses a checkpoint that breaks a promise with a :class:`CheckpointError` naming the shard
(:func:`load_checkpoint`); resuming takes the newest checkpoint that passes, falling back
past the others (:func:`latest_checkpoint`).

A shard covers ``ranges`` of the flat parameter buffer: worker ``r``'s chunk of the
reduce-scatter in data parallelism (ZeRO or not: every worker writes ``1/N`` of the state),
a pipeline stage's layers. :func:`load_checkpoint` puts the pieces back into one flat
buffer, so a run may resume on another layout: fewer workers, another ZeRO stage, another
split into stages. The file operations are decorated with crash points
(:mod:`course_lib.parallel.engine.crash`), where the tests kill a worker on purpose; the
engine (:mod:`course_lib.parallel.engine.checkpointing`) calls these functions beside a
worker's loop.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..i18n import tr
from .engine.crash import crash_point

__all__ = ["MANIFEST", "Checkpoint", "CheckpointError", "latest_checkpoint", "load_checkpoint", "save_shard",
           "write_checkpoint"]

#: The file that makes a checkpoint complete, written last.
MANIFEST = "manifest.json"
#: What a manifest says it is (the storage format's version).
FORMAT = "ddl-course checkpoint 1"
#: Whether a write is flushed to the disk (fsync). False (a run's ``checkpoint_store="memory"``,
#: set by the engine): the files stay in the operating system's page cache, which outlives a
#: killed process but not a crashed machine - what an in-memory checkpoint trades for speed.
DURABLE = True


class CheckpointError(ValueError):
    """A checkpoint is incomplete or damaged (the message names the folder and the shard)."""


@dataclass
class Checkpoint:
    """A complete checkpoint, read back: the whole flat parameters and optimizer state."""

    step: int
    """Steps done when it was written."""
    folder: Path
    params: np.ndarray
    """(n_params,) the flat parameters, assembled from every shard."""
    optimizer: dict = field(default_factory=dict)
    """The optimizer's state arrays by attribute name, each (n_params,) (empty: no state)."""
    optimizer_steps: int = 0
    """The optimizer's count of updates made (its learning-rate schedule's step)."""
    manifest: dict = field(default_factory=dict)
    refused: tuple[str, ...] = ()
    """Why each newer checkpoint was refused (:func:`latest_checkpoint`)."""


def step_folder(step: int) -> str:
    """The folder name of the checkpoint of step ``step`` (zero-padded: names sort as steps)."""
    return f"step-{step:08d}"


def shard_name(rank: int) -> str:
    """The file name of worker ``rank``'s shard."""
    return f"shard-{rank}.npz"


# ------------------------------------------------------------------ writing
def save_shard(folder: Path, name: str, arrays: dict) -> None:
    """Write one shard so that it is never half-written: to a temporary file, flushed to
    the disk, then renamed into place."""
    tmp = folder / f"{name}.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)  # parameters, optimizer state, step, data position
        flush_to_disk(f)  # fsync: on the disk, not only in the page cache
    rename_into_place(tmp, folder / name)  # atomic: a reader sees no shard or the whole shard


def write_checkpoint(root: Path, step: int, rank: int, arrays: dict, all_saved, manifest: dict) -> Path:
    """Worker ``rank``'s part of the checkpoint of step ``step``: its shard, then (worker 0,
    once ``all_saved()`` has waited for every shard) the manifest, written last."""
    folder = Path(root) / step_folder(step)
    folder.mkdir(parents=True, exist_ok=True)
    save_shard(folder, shard_name(rank), {**arrays, "step": step})  # every worker: its own shard
    all_saved()  # a barrier: every shard is in place
    if rank == 0:  # one manifest, written last: it makes the checkpoint complete
        shards = [describe(folder / shard_name(r)) for r in range(manifest["writers"])]
        write_manifest(folder, {**manifest, "step": step, "shards": shards})
    return folder


@crash_point("before flush")
def flush_to_disk(f) -> None:
    """Flush ``f``'s bytes through Python's buffer and the page cache to the disk (only out of
    Python's buffer where :data:`DURABLE` is False)."""
    f.flush()
    if DURABLE:
        os.fsync(f.fileno())


@crash_point("before rename", "before manifest rename", after="after rename", manifest_after="after manifest")
def rename_into_place(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` to ``path`` (atomic on one file system) and make the rename durable."""
    os.replace(tmp, path)
    sync_folder(path.parent)


def sync_folder(folder: Path) -> None:
    """fsync a folder, so that a rename in it survives a power cut (no-op where folders cannot
    be opened, e.g. on Windows, and where :data:`DURABLE` is False)."""
    if not DURABLE:
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - a file system without folder fsync
        pass
    finally:
        os.close(fd)


def sha256_of(path: Path) -> str:
    """The sha256 checksum of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe(path: Path) -> dict:
    """A shard's entry in the manifest: its file name, size in bytes and sha256."""
    return {"file": path.name, "bytes": path.stat().st_size, "sha256": sha256_of(path)}


@crash_point("before manifest")
def write_manifest(folder: Path, manifest: dict) -> None:
    """Write the manifest as a shard is written: temporary file, fsync, atomic rename."""
    tmp = folder / f"{MANIFEST}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"format": FORMAT, **manifest}, f, indent=1)
        flush_to_disk(f)
    rename_into_place(tmp, folder / MANIFEST)


# ------------------------------------------------------------------ reading
def load_checkpoint(folder) -> Checkpoint:
    """The state in the checkpoint ``folder``, every shard checked against the manifest;
    a :class:`CheckpointError` naming the shard if one is missing, truncated or corrupted."""
    folder = Path(folder)
    manifest = read_manifest(folder)  # none: the checkpoint was never finished
    shards = []
    for entry in manifest["shards"]:
        path = folder / entry["file"]
        verify_shard(path, entry)  # there, of its size, of its checksum
        with np.load(path, allow_pickle=False) as npz:
            shards.append(dict(npz))
    return assemble(folder, manifest, shards)  # one flat buffer from the pieces


def latest_checkpoint(root) -> Checkpoint:
    """The newest complete checkpoint under ``root``, falling back past every newer one that
    is incomplete or damaged (their reasons in ``refused``)."""
    refused = []
    for folder in sorted(Path(root).glob("step-*"), reverse=True):  # the newest first
        try:
            checkpoint = load_checkpoint(folder)
        except CheckpointError as why:  # half-written or damaged: try the one before
            refused.append(str(why))
            continue
        checkpoint.refused = tuple(refused)
        return checkpoint
    raise CheckpointError(f"no complete checkpoint in {root}" + (": " + "; ".join(refused) if refused else ""))


def read_manifest(folder: Path) -> dict:
    """The manifest of ``folder`` (CheckpointError if it is missing or not one)."""
    path = folder / MANIFEST
    if not path.is_file():
        raise CheckpointError(f"checkpoint {folder.name} has no {MANIFEST}: it was never finished "
                              "(a worker or the run stopped while writing it)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise CheckpointError(f"checkpoint {folder.name}: {MANIFEST} is not valid JSON ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("shards"),
                                                                                           list):
        raise CheckpointError(f"checkpoint {folder.name}: {MANIFEST} is not a manifest of {FORMAT!r}")
    return manifest


def verify_shard(path: Path, entry: dict) -> None:
    """That the shard at ``path`` is the one the manifest's ``entry`` describes."""
    names = {"checkpoint": path.parent.name, "shard": path.name}
    if not path.is_file():
        raise CheckpointError(tr("checkpoint {checkpoint}: shard {shard} is missing", **names))
    size = path.stat().st_size
    if size != entry["bytes"]:
        sizes = {"size": f"{size:,}", "expected": f"{entry['bytes']:,}", **names}
        raise CheckpointError(tr("checkpoint {checkpoint}: shard {shard} is truncated: {size} bytes, the manifest "
                                 "says {expected}", **sizes) if size < entry["bytes"] else
                              tr("checkpoint {checkpoint}: shard {shard} has {size} bytes, the manifest says "
                                 "{expected}", **sizes))
    if sha256_of(path) != entry["sha256"]:
        raise CheckpointError(tr("checkpoint {checkpoint}: shard {shard} is corrupted: its sha256 differs from the "
                                 "manifest's", **names))


def assemble(folder: Path, manifest: dict, shards: list[dict]) -> Checkpoint:
    """The pieces of every shard put back into flat arrays of the manifest's ``n_params``."""
    n, dtype = manifest["n_params"], np.dtype(manifest["dtype"])
    names = sorted({k[len("opt."):] for s in shards for k in s if k.startswith("opt.") and k != "opt.t"})
    params, covered = np.zeros(n, dtype), np.zeros(n, bool)
    state = {name: np.zeros(n, dtype) for name in names}
    for rank, shard in enumerate(shards):
        offset = 0
        for lo, hi in shard["ranges"].tolist():
            params[lo:hi] = shard["params"][offset : offset + hi - lo]
            for name in names:
                state[name][lo:hi] = shard[f"opt.{name}"][offset : offset + hi - lo]
            covered[lo:hi] = True
            offset += hi - lo
        if int(shard["step"]) != manifest["step"]:
            raise CheckpointError(f"checkpoint {folder.name}: shard {shard_name(rank)} is of step {int(shard['step'])}")
    if not covered.all():
        raise CheckpointError(f"checkpoint {folder.name}: its shards cover {int(covered.sum())} of {n} parameters")
    steps = int(shards[0]["opt.t"]) if shards and "opt.t" in shards[0] else 0
    return Checkpoint(manifest["step"], folder, params, state, steps, manifest)
