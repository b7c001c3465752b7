"""The torch.distributed (gloo) engine gives the same parameters as the toy trainer.

Tolerance: parameters within 1e-6 of ``train_serial`` (the same bound as the toy) and,
for two workers, bitwise equal to the toy (float addition is rounded but commutative:
``a + b == b + a`` bit for bit, so the order of two operands cannot matter). Skipped
with a message where torch is missing, unless ``DDL_REQUIRE_TORCH=1`` (CI), where a
missing torch is a failure.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from course_lib.models import MLP
from course_lib.parallel.engine import gloo
from course_lib.parallel.engine.gloo import TORCH_MISSING, torch_available
from course_lib.parallel.train import torch_engine
from course_lib.parallel.train.data import train_data_parallel
from course_lib.parallel.train.reference import train_serial, train_simulated

MODEL = MLP((10, 20, 4))
RNG = np.random.default_rng(3)
X = RNG.standard_normal((80, 10)).astype(np.float32)
Y = RNG.integers(0, 4, 80)


@pytest.fixture
def torch_required():
    if torch_available():
        # Importing torch here, once, lets forked workers inherit it instead of each
        # importing it again (about 1.5 s per process); the library itself never
        # imports torch in the parent.
        import torch  # noqa: F401

        return
    message = f"torch engine test needs torch: {TORCH_MISSING}"
    if os.environ.get("DDL_REQUIRE_TORCH") == "1":
        pytest.fail(f"DDL_REQUIRE_TORCH=1 but {message}")
    pytest.skip(message)


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "batch"), [(2, 16), (3, 16)])  # 3 does not divide 16
def test_gloo_matches_toy_and_serial(torch_required, workers, batch):
    kw = dict(batch_size=batch, steps=5, lr=0.3, seed=4)
    res = train_data_parallel(MODEL, X, Y, workers=workers, backend="gloo", start_method="fork",
                              progress=False, **kw)
    toy = train_data_parallel(MODEL, X, Y, workers=workers, start_method="fork", progress=False, **kw)
    ser = train_serial(MODEL, X, Y, **kw)
    assert res.backend == "gloo" and res.workers == workers and res.replicas_in_sync
    assert np.abs(res.params - ser.params).max() <= 1e-6
    assert np.abs(res.params - toy.params).max() <= 1e-6
    if workers == 2:
        np.testing.assert_array_equal(res.params, toy.params)
    np.testing.assert_allclose(res.loss, toy.loss, rtol=1e-6)
    assert res.communication.shape == (5, workers) and np.all(res.communication > 0)


def test_missing_torch_gives_install_hint(monkeypatch):
    monkeypatch.setattr(gloo, "torch_available", lambda: False)
    with pytest.raises(ImportError, match="engines"):
        train_data_parallel(MODEL, X, Y, workers=2, batch_size=8, steps=1, backend="gloo")


@pytest.mark.parametrize("torch_installed", [True, False], ids=["with-torch", "without-torch"])
def test_bad_arguments_checked_before_starting_anything(monkeypatch, torch_installed):
    """Bad arguments are reported before any process starts and before torch is looked
    for: a learner without torch is told what is wrong with the call (the ImportError's
    install hint comes only for a call that is otherwise fine)."""
    monkeypatch.setattr(gloo, "torch_available", lambda: torch_installed)
    with pytest.raises(ValueError, match="workers"):
        train_data_parallel(MODEL, X, Y, workers=0, batch_size=8, steps=1, backend="gloo")
    with pytest.raises(ValueError, match="batch_size"):
        train_data_parallel(MODEL, X, Y, workers=9, batch_size=8, steps=1, backend="gloo")
    with pytest.raises(ValueError, match="timeout"):
        train_data_parallel(MODEL, X, Y, workers=2, batch_size=8, steps=1, timeout=-1, backend="gloo")
    with pytest.raises(ValueError, match="start_method"):
        train_data_parallel(MODEL, X, Y, workers=2, batch_size=8, steps=1, start_method="x", backend="gloo")


def test_importing_the_course_does_not_import_torch():
    code = ("import sys, course_lib.parallel.train.torch_engine, course_lib.parallel.data; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.slow
def test_torchrun_runs_the_same_program(torch_required):
    """What a multi-node job does, on one node: torchrun sets RANK/WORLD_SIZE/MASTER_*,
    every process joins with env://; the parameters equal the toy's, bit for bit."""
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists() and shutil.which("torchrun") is None:
        pytest.skip("torchrun not found beside the interpreter")
    cmd = [str(torchrun if torchrun.exists() else shutil.which("torchrun")), "--standalone",
           "--nproc-per-node=2", "-m", "course_lib.parallel.train.torch_engine", "--sizes", "8,16,3",
           "--samples", "64", "--batch-size", "16", "--steps", "5", "--lr", "0.05"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    model = MLP((8, 16, 3))
    rng = np.random.default_rng(0)
    x = rng.random((64, 8), dtype=np.float32)
    y = rng.integers(0, 3, 64)
    sim = train_simulated(model, x, y, workers=2, batch_size=16, steps=5, lr=0.05, seed=0)
    digest = hashlib.sha256(sim.params.tobytes()).hexdigest()[:16]
    assert f"params sha256 {digest}" in out.stdout


def test_main_refuses_to_run_outside_torchrun(monkeypatch, capsys):
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(SystemExit):
        torch_engine.main(["--steps", "1"])
    assert "torchrun" in capsys.readouterr().err
