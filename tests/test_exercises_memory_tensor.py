"""Exercises of notebooks 12 (what a tensor split moves, the crossover batch) and 10
(1: memory per device, 2: activations of the first stage, 3: how many checkpoints).

The expected values come from the library; these tests check them against the
formulas by hand, that every known mistake gets its own explanation, and that the
notebook's statements give the learner the checkers' givens.
"""

import json
import re
from pathlib import Path

import pytest

from course_lib.exercises import activations as mem_ex
from course_lib.exercises import tensor_parallelism as ex
from course_lib.models import MLP

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


# ------------------------------------------------------------------ notebook 12, exercise 1
def test_tensor_bytes_accepts_the_hand_count():
    g = ex.TENSOR_BYTES
    s, batch = g["sizes"], g["batch_size"]
    # pairs (0, 1) and (2, 3); layer 4 is replicated. Forward: outputs of both pairs;
    # backward: the input gradient of the second pair only (the first pair's input is the data).
    by_hand = batch * 4 * (s[2] + s[4] + s[2]) / 1e6
    assert ex.ex_tensor_bytes(by_hand).correct
    assert ex.ex_tensor_bytes(round(by_hand, 2)).correct  # three significant digits will do


@pytest.mark.parametrize(
    ("wrong", "phrase"),
    [
        (lambda s, b: b * 4 * (s[2] + s[4]), "forward pass only"),
        (lambda s, b: b * 4 * (s[2] + s[4] + s[2] + s[0]), "needs no gradient"),
        (lambda s, b: b * 4 * (s[2] + s[4] + s[2] + s[5]), "replicated"),
        (lambda s, b: b * 4 * (s[2] + s[4] + s[2]) / ex.TENSOR_BYTES["workers"], "does not shrink"),
        (lambda s, b: MLP(s).n_params * 4, "data parallelism"),
        # issue 44, item 8: the ring's 2(N_t - 1)/N_t applied to the payload (what a worker sends)
        (lambda s, b: b * 4 * (s[2] + s[4] + s[2]) * 2 * 3 / 4, "ring's factor 2(N_t - 1)/N_t"),
        (lambda s, b: b * 4 * (s[2] + s[4] + s[2]) * 3 / 4, "ring factor (N_t - 1)/N_t"),
    ],
)
def test_tensor_bytes_names_the_usual_mistakes(wrong, phrase):
    g = ex.TENSOR_BYTES
    result = ex.ex_tensor_bytes(wrong(g["sizes"], g["batch_size"]) / 1e6)
    assert not result.correct and phrase in result.message


# ------------------------------------------------------------------ notebook 10, exercise 2
def _sbh_units(tensor):
    g = mem_ex.STAGE_ACTIVATIONS
    a, s, h = g["heads"], g["seq_length"], g["hidden"]
    return 10 + 24 / tensor + 5 * a * s / (h * tensor)  # Korthikanti et al., section 4


def test_stage_activations_accepts_the_hand_count():
    g = mem_ex.STAGE_ACTIVATIONS
    sbh = g["seq_length"] * g["micro_batch"] * g["hidden"]
    held = min(g["pipeline"], g["micro_batches"])  # 1F1B: p micro-batches on the first stage
    by_hand = held * g["layers"] // g["pipeline"] * sbh * _sbh_units(g["tensor"]) / 1e9
    assert _sbh_units(g["tensor"]) == 23  # 10 + 24/8 + 10
    assert mem_ex.ex_stage_activations(by_hand).correct
    assert mem_ex.ex_stage_activations(round(by_hand, 1)).correct


@pytest.mark.parametrize(
    ("factor", "phrase"),
    [
        (lambda g: g["pipeline"] * _sbh_units(1), "tensor split"),
        (lambda g: g["micro_batches"] * _sbh_units(g["tensor"]), "GPipe"),
        (lambda g: _sbh_units(g["tensor"]), "one micro-batch"),
        (lambda g: g["pipeline"] * 2, "full recomputation"),
        (lambda g: g["pipeline"] * _sbh_units(1) / g["tensor"], "divides every term"),
    ],
)
def test_stage_activations_names_the_usual_mistakes(factor, phrase):
    g = mem_ex.STAGE_ACTIVATIONS
    sbh = g["seq_length"] * g["micro_batch"] * g["hidden"]
    wrong = factor(g) * g["layers"] // g["pipeline"] * sbh / 1e9
    result = mem_ex.ex_stage_activations(wrong)
    assert not result.correct and phrase in result.message


# ------------------------------------------------------------------ notebook 10, exercises 1 and 3
def test_checkpoint_mb_names_the_segment_count_for_the_size():
    """Issue 44, item 8: the best n_ckpt typed where the MB are asked gets its own hint; a size in kB
    or in bytes is told its unit."""
    from course_lib.memory import mlp_activation_bytes

    model, b = MLP(mem_ex.CHECKPOINT["sizes"]), mem_ex.CHECKPOINT["batch_size"]
    peaks = {k: mlp_activation_bytes(model, b, segments=k) for k in range(1, model.n_layers + 1)}
    best = min(peaks, key=peaks.get)
    assert best == 5 and mem_ex.ex_checkpoint_mb(peaks[best] / 1e6).correct
    result = mem_ex.ex_checkpoint_mb(best)
    assert not result.correct and "number of segments, n_ckpt = 5" in result.message
    assert "kB" in mem_ex.ex_checkpoint_mb(peaks[best] / 1e3).message
    assert "kB" in mem_ex.ex_memory_per_device(268_829).message  # 268.829 MB typed in kB


# ------------------------------------------------------------------ notebook 12, exercise 2
def test_crossover_batch_by_hand():
    s = ex.CROSSOVER["sizes"]
    params = MLP(s).n_params
    # pairs (0, 1) and (2, 3): forward the outputs of both pairs (widths s[2], s[4]), backward the
    # input gradient of the second pair (width s[2]); layer 4 is replicated
    per_sample = 4 * (s[2] + s[4] + s[2])
    expected = -(-4 * params // per_sample)  # the fewest samples with B * per_sample >= 4 * params
    assert (expected - 1) * per_sample < 4 * params <= expected * per_sample
    assert ex.ex_crossover_batch(expected).correct
    assert not ex.ex_crossover_batch(expected - 1).correct
    assert "forward all-reduces only" in ex.ex_crossover_batch(-(-params // (s[2] + s[4]))).message


# ------------------------------------------------------------------ the notebooks
def _statements(name):
    cells = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))["cells"]
    out = {}
    for cell in cells:
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        match = re.match(r"### Exercise (\d+):", text) or re.search(r"^### Exercise (\d+):", text, re.M)
        if match:
            out[int(match.group(1))] = text
    return out


def test_notebooks_state_the_givens():
    t, a, c = ex.TENSOR_BYTES, mem_ex.STAGE_ACTIVATIONS, ex.CROSSOVER
    expected = {
        ("12_tensor_parallelism.ipynb", 1): [f"MLP({t['sizes']})", f"batch of {t['batch_size']}",
                                             f"{t['workers']} workers"],
        ("12_tensor_parallelism.ipynb", 2): [f"MLP({c['sizes']})"],
        # in the course's notation (data/notation.csv): L, n_layers, N_t, N_p
        ("10_activations.ipynb", 2): [
            f"$L = {a['seq_length']:,}$".replace(",", "{,}"), f"$h = {a['hidden']:,}$".replace(",", "{,}"),
            f"$a = {a['heads']}$", f"$n_{{\\text{{layers}}}} = {a['layers']}$", f"$b = {a['micro_batch']}$",
            f"$N_t = {a['tensor']}$", f"$N_p = {a['pipeline']}$", f"$M = {a['micro_batches']}$"],
    }
    for (name, number), phrases in expected.items():
        questions = _statements(name)
        assert number in questions, f"{name}: exercise {number} is missing"
        for phrase in phrases:
            assert phrase in questions[number], f"{name} exercise {number} should state {phrase!r}"
