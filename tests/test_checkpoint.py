"""The checkpoint files (course_lib.parallel.checkpoint), without processes: written as promised,
read back only when every promise holds, refused with a message naming the shard otherwise,
and the newest complete one found past damaged ones."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from course_lib.parallel import checkpoint as ck
from course_lib.parallel.engine import checkpointing as cp
from course_lib.parallel.engine.crash import armed
from course_lib.parallel.engine.errors import Fault, FaultInjected

N = 10  # parameters of the made-up model
DTYPE = np.float64


def _run_meta(writers: int) -> dict:
    return {"trainer": "data parallel", "n_params": N, "dtype": "float64", "n_samples": 20, "batch_size": 4,
            "seed": 0, "optimizer": "SGD", "workers": writers, "zero_stage": 1, "writers": writers}


def _write(root, step: int, writers: int = 2, scale: float = 1.0) -> None:
    """A checkpoint of step ``step`` by ``writers`` workers, each writing its chunk (one process:
    the barrier is a no-op, worker 0 last so that every shard is in place for its manifest)."""
    params = scale * np.arange(N, dtype=DTYPE) + step
    velocity = -params
    bounds = [(0, 6), (6, N)] if writers == 2 else [(0, N)]
    for rank in reversed(range(writers)):
        lo, hi = bounds[rank]
        arrays = {"params": params[lo:hi], "ranges": np.array([[lo, hi]]), "opt.t": np.int64(step),
                  "opt._velocity": velocity[lo:hi]}
        ck.write_checkpoint(root, step, rank, arrays, lambda: None, _run_meta(writers))


def test_a_checkpoint_reads_back_whole(tmp_path):
    _write(tmp_path, 4)
    got = ck.load_checkpoint(tmp_path / "step-00000004")
    assert got.step == 4 and got.optimizer_steps == 4
    np.testing.assert_array_equal(got.params, np.arange(N) + 4.0)
    np.testing.assert_array_equal(got.optimizer["_velocity"], -(np.arange(N) + 4.0))
    manifest = json.loads((tmp_path / "step-00000004" / ck.MANIFEST).read_text())
    assert [s["file"] for s in manifest["shards"]] == ["shard-0.npz", "shard-1.npz"]
    for entry in manifest["shards"]:
        path = tmp_path / "step-00000004" / entry["file"]
        assert entry["bytes"] == path.stat().st_size and entry["sha256"] == ck.sha256_of(path)
    assert not list(tmp_path.rglob("*.tmp")), "no temporary file is left once written"


@pytest.mark.parametrize("damage", ["missing", "truncated", "corrupted", "longer"])
def test_a_damaged_shard_is_refused_naming_it(tmp_path, damage):
    _write(tmp_path, 4)
    shard = tmp_path / "step-00000004" / "shard-1.npz"
    data = shard.read_bytes()
    if damage == "missing":
        shard.unlink()
    elif damage == "truncated":
        shard.write_bytes(data[: len(data) // 2])
    elif damage == "corrupted":
        shard.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    else:
        shard.write_bytes(data + b"\0")
    words = {"missing": "is missing", "truncated": "is truncated", "corrupted": "is corrupted",
             "longer": "has [0-9,]+ bytes, the manifest says"}[damage]
    with pytest.raises(ck.CheckpointError, match=rf"checkpoint step-00000004: shard shard-1.npz {words}"):
        ck.load_checkpoint(tmp_path / "step-00000004")


def test_no_manifest_means_never_finished(tmp_path):
    _write(tmp_path, 4)
    (tmp_path / "step-00000004" / ck.MANIFEST).unlink()
    with pytest.raises(ck.CheckpointError, match="step-00000004 has no manifest.json: it was never finished"):
        ck.load_checkpoint(tmp_path / "step-00000004")


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"format": "another", "shards": []}'])
def test_a_broken_manifest_is_refused(tmp_path, text):
    _write(tmp_path, 4)
    (tmp_path / "step-00000004" / ck.MANIFEST).write_text(text)
    with pytest.raises(ck.CheckpointError, match="manifest.json is not"):
        ck.load_checkpoint(tmp_path / "step-00000004")


def test_shards_that_leave_parameters_out_are_refused(tmp_path):
    folder = tmp_path / "step-00000002"
    folder.mkdir()
    arrays = {"params": np.zeros(4), "ranges": np.array([[0, 4]])}
    ck.write_checkpoint(tmp_path, 2, 0, arrays, lambda: None, {**_run_meta(1), "writers": 1})
    with pytest.raises(ck.CheckpointError, match="cover 4 of 10 parameters"):
        ck.load_checkpoint(folder)


def test_resuming_falls_back_past_incomplete_and_damaged_checkpoints(tmp_path):
    for step in (2, 4, 6, 8):
        _write(tmp_path, step)
    (tmp_path / "step-00000008" / ck.MANIFEST).unlink()  # never finished
    shard = tmp_path / "step-00000006" / "shard-0.npz"
    shard.write_bytes(shard.read_bytes()[:-7])  # truncated
    got = ck.latest_checkpoint(tmp_path)
    assert got.step == 4
    assert len(got.refused) == 2
    assert "step-00000008 has no manifest.json" in got.refused[0]
    assert "step-00000006: shard shard-0.npz is truncated" in got.refused[1]


def test_no_complete_checkpoint_is_an_error_that_says_why(tmp_path):
    with pytest.raises(ck.CheckpointError, match="no complete checkpoint in"):
        ck.latest_checkpoint(tmp_path)
    _write(tmp_path, 2)
    (tmp_path / "step-00000002" / "shard-1.npz").unlink()
    with pytest.raises(ck.CheckpointError, match="shard-1.npz is missing"):
        ck.latest_checkpoint(tmp_path)


def test_prune_keeps_the_newest_complete_checkpoints(tmp_path):
    for step in (2, 4, 6, 8):
        _write(tmp_path, step)
    (tmp_path / "step-00000010").mkdir()  # a newer one in progress: kept
    cp.prune(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000006", "step-00000008", "step-00000010"]


@pytest.mark.parametrize(("point", "rank", "left"), [
    ("before flush", 1, {"shard-1.npz.tmp"}),
    ("before rename", 1, {"shard-1.npz.tmp"}),
    ("after rename", 1, {"shard-1.npz"}),
    ("before manifest", 0, {"shard-0.npz", "shard-1.npz"}),
    ("before manifest rename", 0, {"shard-0.npz", "shard-1.npz", "manifest.json.tmp"}),
    ("after manifest", 0, {"shard-0.npz", "shard-1.npz", "manifest.json"}),
])
def test_a_fault_fires_at_its_point_of_the_write_and_leaves_what_it_says(tmp_path, point, rank, left):
    fault = Fault("raise", rank=rank, step=4, point=point)
    with pytest.raises(FaultInjected, match=f"{point} of the checkpoint of step 4"), armed(fault, rank, 4):
        if rank == 0:
            _write(tmp_path, 4)
        else:
            arrays = {"params": np.zeros(4), "ranges": np.array([[6, N]])}
            ck.write_checkpoint(tmp_path, 4, 1, arrays, lambda: None, _run_meta(2))
    assert {p.name for p in (tmp_path / "step-00000004").iterdir()} == left
    with armed(fault, rank, 6):  # another step: nothing fires
        _write(tmp_path, 6)


def test_memory_store_skips_fsync(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd))
    _write(tmp_path, 2)
    durable = len(calls)
    assert durable >= 6  # 2 shards and the manifest, each file and its folder
    monkeypatch.setattr(ck, "DURABLE", False)
    _write(tmp_path, 4)
    assert len(calls) == durable
    assert ck.load_checkpoint(tmp_path / "step-00000004").step == 4


def test_shard_state_takes_the_pieces_of_a_replica_or_a_chunk():
    class Opt:
        def __init__(self):
            self.t, self._velocity, self.lr = 3, np.arange(10.0), 0.1

    whole = cp.shard_state(np.arange(10.0) * 2, [(2, 5), (7, 9)], Opt())
    assert whole["params"].tolist() == [4, 6, 8, 14, 16] and whole["opt._velocity"].tolist() == [2, 3, 4, 7, 8]
    assert int(whole["opt.t"]) == 3 and whole["ranges"].tolist() == [[2, 5], [7, 9]]
    chunk = cp.shard_state(np.arange(3.0), [(4, 7)], None, sharded=True)
    assert chunk["params"].tolist() == [0, 1, 2] and "opt.t" not in chunk
