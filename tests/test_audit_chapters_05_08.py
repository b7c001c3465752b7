"""Chapters 05-08 after the teaching audit (issue 38) and the student's walk (issue 44).

Each test holds one fixed claim: a number the notes or the prose state is what the library
computes, a retired claim stays retired, a moved section stays where it went.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def _cells(stem: str) -> list[dict]:
    nb = json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return [dict(c, text="".join(c["source"])) for c in nb["cells"]]


def _markdown(stem: str) -> str:
    return "\n".join(c["text"] for c in _cells(stem) if c["cell_type"] == "markdown")


def _code(stem: str) -> str:
    return "\n".join(c["text"] for c in _cells(stem) if c["cell_type"] == "code")


# ------------------------------------------------------------------ M3: the flat ring is no bound
def test_optimistic_bound_appears_nowhere():
    """Issue 38 M3: in the course's alpha-beta model a flat ring over 1,472 GPUs at NVLink speed
    is no optimistic bound of the two-level all-reduce (62 % of its time is latency)."""
    texts = [(p.name, p.read_text(encoding="utf-8")) for p in sorted(NOTEBOOKS.glob("*.ipynb"))]
    texts += [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in sorted((ROOT / "course_lib").rglob("*.py"))]
    assert [name for name, text in texts if "optimistic bound" in text.lower()] == []


def test_chapter_07_prints_both_terms_of_both_algorithms():
    code = _code("07_data_parallelism")
    assert "alpha_beta.ring_allreduce_terms(" in code and "alpha_beta.hierarchical_allreduce_terms(" in code
    text = " ".join(_markdown("07_data_parallelism").split())
    assert "**Hierarchy trades inter-node bandwidth for far fewer latency steps.**" in text
    assert "The flat ring is no lower bound: its latency term is most of its time." in text
    assert "chapter 16 prints both" not in text


# ------------------------------------------------------------------ M6: backward / forward
def test_backward_over_forward_is_below_two_in_both_running_examples():
    """Issue 38 M6: 1.82x for the CNN (chapter 05) against 1.14x for the MLP 64-64-10 (chapter 03):
    the backward costs more than the forward in both, and less than twice it, because the first
    layer's input gradient is skipped."""
    from course_lib.cnn import CNN
    from course_lib.models import MLP

    cnn, mlp = CNN().flops_per_sample(), MLP((64, 64, 10)).flops_per_sample()
    assert (mlp["forward"], mlp["backward"]) == (9_472, 10_752)
    assert f"{cnn['backward'] / cnn['forward']:.2f}" == "1.82" and f"{mlp['backward'] / mlp['forward']:.2f}" == "1.14"
    # every layer's weight gradient (= its forward) and every input gradient but the first layer's
    first = 2 * 64 * 64  # the MLP's first layer: 64 inputs x 64 outputs, a multiply and an add each
    assert mlp["backward"] == 2 * mlp["forward"] - first
    notes = next(c["text"] for c in _cells("05_operator_parallelism") if "Point at the printed ratios" in c["text"])
    assert "1.82x" in notes and "1.14x" in notes and "first layer's input gradient is skipped" in notes
    assert "while it was less in the MLP" not in _markdown("05_operator_parallelism")
    assert 'print("backward / forward:"' in _code("05_operator_parallelism")


# ------------------------------------------------------------------ M8: threads vs processes moved
def test_threads_versus_processes_lives_in_chapter_05():
    """Issue 38 M8: chapter 07's section "More threads or more processes?" moved into chapter
    05's threads section; chapter 07's sections are renumbered."""
    assert "**More threads or more processes?**" in _markdown("05_operator_parallelism")
    assert "(oversubscribed)" in _code("05_operator_parallelism")
    text07 = _markdown("07_data_parallelism")
    assert "More threads or more processes" not in text07 and "(oversubscribed)" not in _code("07_data_parallelism")
    headings = re.findall(r"^## (\d) · ", text07, re.M)
    assert headings == [str(k) for k in range(1, len(headings) + 1)] and headings[-1] == "6"
    assert "oversubscription, chapter 07" not in _markdown("05_operator_parallelism")


# ------------------------------------------------------------------ L4, L7, L9, L10, L16
def test_the_time_step_is_xi():
    """Issue 38 L4: the notation table's position (time step) is xi, never t (a time)."""
    text = _markdown("05_operator_parallelism")
    assert "$x_\\xi$" in text and "$x_t$" not in text


def test_staleness_is_delta_in_chapter_08():
    """Issue 38 L7: the staleness is delta (k is ZeRO's bytes per parameter)."""
    text = _markdown("08_collectives")
    assert "k = 16" not in text and "$\\delta = 16$" in text


def test_the_winograd_gap_is_edge_tiles_alone():
    """Issue 38 L9: the table counts no transform, so ResNet-50 v1's 3.41x against F(4x4, 3x3)'s
    4x per tile comes from edge tiles alone: the 56x56 and 28x28 maps save exactly 4x."""
    from course_lib.conv import algorithms

    total = {"im2col": 0, "winograd_f4": 0}
    for layer in algorithms.resnet50_3x3_layers():
        n = algorithms.multiplication_counts(layer.x_shape, layer.w_shape, padding=1)
        size = layer.x_shape[-1]
        tiles = -(-size // 4)  # whole 4x4 output tiles per side
        assert n["winograd_f4"] == 36 * tiles**2 * layer.x_shape[1] * layer.w_shape[0]
        assert n["im2col"] / n["winograd_f4"] == pytest.approx(4 * size**2 / (4 * tiles) ** 2)
        assert (n["im2col"] == 4 * n["winograd_f4"]) == (size % 4 == 0) and size in (56, 28, 14, 7)
        total = {a: total[a] + layer.count * n[a] for a in total}
    assert f"{total['im2col'] / total['winograd_f4']:.1f}" == "3.4"
    text = _markdown("06_operator_algorithms")
    assert "comes from edge tiles alone" in text and "are not in it" in text
    assert "56×56 and 28×28 maps save exactly 4×" in text


def test_resnet50_is_named_v1_with_sixteen_stride_one_layers():
    """Issue 38 L10: the course models ResNet-50 v1 (He et al. 2016: every 3x3 layer stride 1);
    torchvision's v1.5 gives the first 3x3 layer of conv3_x, conv4_x and conv5_x stride 2, which
    this course's Winograd cannot compute (13 layers would be left)."""
    from course_lib.conv import algorithms

    layers = algorithms.resnet50_3x3_layers()
    assert sum(layer.count for layer in layers) == 16
    assert all(layer.x_shape[1] == layer.w_shape[0] == layer.w_shape[1] and layer.padding == 1 for layer in layers)
    stride_two_in_v15 = [layer.name for layer in layers[1:]]  # each later stage's first block down-samples
    assert stride_two_in_v15 == ["conv3_x", "conv4_x", "conv5_x"]
    assert sum(layer.count for layer in layers) - len(stride_two_in_v15) == 13
    text = _markdown("06_operator_algorithms")
    assert "ResNet-50 **v1**" in text and "conv3_x, conv4_x and conv5_x" in text
    assert "ResNet-50's sixteen" not in text and "ResNet-50 v1's 16 3x3 layers" in _code("06_operator_algorithms")


def test_all_to_all_is_no_ring_and_needs_full_bisection():
    """Issue 38 L16: pairwise exchange is not a ring algorithm; it needs a full-bisection network."""
    from course_lib import alpha_beta

    text = _markdown("08_collectives")
    assert "all-to-all by **pairwise exchange**: the same rounds and time, but no ring" in text
    assert "**full-bisection** network" in text
    assert "all-gather, reduce-scatter and all-to-all (pairwise exchange)" not in text
    assert "full-bisection" in alpha_beta.pairwise_alltoall_time.__doc__
    assert "not a ring" in alpha_beta.pairwise_alltoall_time.__doc__


# ------------------------------------------------------------------ issue 44 item 1
def test_chapter_07_exercise_3_names_its_model_and_the_checker_knows_the_other():
    """Issue 44 item 1: "the running example's gradients" let a student take the 64-64-10 digits
    model (4,810 parameters) and get N = 40, rejected with a generic hint."""
    from course_lib.exercises import data_parallelism as ex

    g = ex.EX3_PS
    assert (g["model"], g["params"], g["bytes_per_param"]) == ("MLP 784-1024-10", 814_090, 4)
    question = next(c["text"] for c in _cells("07_data_parallelism") if "### Exercise 3:" in c["text"])
    assert "MLP 784-1024-10" in question and f"{g['params']:,}" in question and "running example's" not in question
    right = ex.ex3_ps_crossover(4)
    assert right and "MLP 784-1024-10" in right.message  # says which model it assumed
    digits = ex.ex3_ps_crossover(40)  # the hint's formula with the digits model's 19,240 bytes
    assert not digits and "MLP 64-64-10" in digits.message and "4,810" in digits.message
    assert "MLP 784-1024-10" in digits.message and "814,090" in digits.message
    assert "ring" in ex.ex3_ps_crossover(11).message  # the ring's crossover, named as before
    assert "Gbit/s as 10 GB/s" in ex.ex3_ps_crossover(9).message
    assert "784-1024-10" in ex.ex3_ps_crossover(7).message  # the generic hint names the model too
