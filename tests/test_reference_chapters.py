"""The measuring chapters beside the reference machines, and sentences printed from the
measurement (issue 37, points 1, 3, 6 and 7, the notebook side of chapters 01, 05, 06, 07,
pipeline, tensor and hybrid).

Each measuring chapter draws the learner's run beside every reference file that has its
experiment, through :mod:`course_lib.plots.reference` (never a typed number); a sentence
that interprets a result that can go either way is printed by code from the measurement;
a run on shared cores says so where it is interpreted.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import types
from pathlib import Path

import numpy as np
import pytest

from course_lib import datasets
from course_lib.parallel.train.cores import CoreCheck
from course_lib.plots import reference as pr

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def _path(prefix: str) -> Path:
    (path,) = NOTEBOOKS.glob(f"{prefix}_*.ipynb")
    return path


def _cells(prefix: str) -> list[dict]:
    nb = json.loads(_path(prefix).read_text(encoding="utf-8"))
    return [dict(c, text="".join(c["source"])) for c in nb["cells"]]


def _code(prefix: str) -> str:
    return "\n".join(c["text"] for c in _cells(prefix) if c["cell_type"] == "code")


def _prose(prefix: str) -> str:
    return " ".join("\n".join(c["text"] for c in _cells(prefix) if c["cell_type"] == "markdown").split())


def _cell(prefix: str, needle: str) -> str:
    (text,) = [c["text"] for c in _cells(prefix) if c["cell_type"] == "code" and needle in c["text"]]
    return text


#: chapter -> (the reference_runs call, the curve names its own run uses, the figure)
BESIDE = {
    "01": ('reference_runs("pool")', ['"speedup"'], "beside_references_figure("),
    "05": ('reference_runs("threads")', ['"GEMM"', '"conv2d"'], "beside_references_figure("),
    "06": ('reference_runs(("roofline", "gpu_roofline"))', ['"CPU roof, 1 core"', '"training steps, measured"'],
           "beside_references_figure("),
    "07": ('reference_runs("scaling")', ['f"strong, B = {B}"', 'f"weak, b = {b_weak}"'], "beside_references_figure("),
    "11": ('reference_runs("pipeline")', ['"GPipe, 2 stages"', '"1F1B, 2 stages"'], "beside_references_figure("),
    "12": ('reference_runs("tensor")', ['"speedup"'], "beside_references_figure("),
    "14": ('reference_runs("hybrid")', ['"N_d x 2 stages"'], "beside_references_figure("),
}


@pytest.mark.parametrize("prefix", sorted(BESIDE))
def test_each_measuring_chapter_draws_its_run_beside_the_references(prefix):
    call, names, figure = BESIDE[prefix]
    cell = _cell(prefix, call)
    variable = re.search(r"(\w+) :?= " + re.escape(call), cell).group(1)
    assert f"print({variable}" in cell, "the cell prints which reference files it drew, or how to make one"
    assert figure in cell and all(name in cell for name in names)


def test_the_chapters_curve_names_are_the_references_curve_names():
    """The same kind of curve gets the same line style on your machine and on the references."""
    synthetic = {
        "pool": {"processes": [1, 2], "speedup": [1, 2]},
        "threads": {"threads": [1], "gemm": {"speedup": [1]}, "conv": {"speedup": [1]}},
        "roofline": {"one_core": {"peak_flops": 1e10, "memory_bandwidth": 1e9},
                     "training_steps": [{"intensity": 1.0, "measured_rate": 1e9}]},
        "scaling": {"runs": [{"batch_size": 1024, "per_worker_batch": 768, "workers": [1],
                              "strong_speedup": [1], "weak_speedup": [1]}]},
        "pipeline": {"runs": [{"stages": 2, "schedule": s, "micro_batches": 8, "bubble_measured": 0.1}
                              for s in ("gpipe", "1f1b")]},
        "tensor": {"runs": [{"workers": 1, "speedup": 1.0}]},
        "hybrid": {"runs": [{"processes": 2, "speedup": 1.0}]},
    }
    names = {e: set(pr._CURVES[e](r)) for e, r in synthetic.items()}
    assert names["threads"] == {"GEMM", "conv2d"} and names["pool"] == names["tensor"] == {"speedup"}
    assert names["roofline"] == {"CPU roof, 1 core", "training steps, measured"}
    assert names["scaling"] == {"strong, B = 1024", "weak, b = 768"}  # chapter 07's B and b_weak
    assert "B, b_weak = 1024, 768" in _code("07")
    assert names["pipeline"] == {"GPipe, 2 stages", "1F1B, 2 stages"} and names["hybrid"] == {"N_d x 2 stages"}


def test_chapter_05_draws_cudnns_kernels_beside_the_course_algorithms():
    cell = _cell("05", 'reference_runs(("gpu_conv", "conv"))')
    assert "print(conv_refs)" in cell and "conv_rows(conv_refs)" in cell and "conv_figure(conv_refs" in cell
    assert "row['kind']" in cell and "row['kernel']" in cell  # the algorithm cuDNN picked, by its kernel's name
    prose = _prose("05")
    assert "the kernel cuDNN chose for each (its name says the algorithm" in prose


def test_chapter_06_prints_the_gpus_peaks_and_each_operators_measured_eta():
    cell = _cell("06", "for label, found in roof_refs.results.items():")
    assert '["peaks"]' in cell and "op['eta']" in cell and "bert_layer_forward_backward" in cell
    assert "$\\eta$ is that rate's share of the measured bfloat16 peak" in _prose("06")


# ------------------------------------------------------------------ point 3: hyper-threads
def test_chapter_05_says_what_a_hyper_thread_gives_a_gemm():
    cell = _cell("05", "print(gemm_thread_gain())")
    assert "threads = list(range(1, (core_check.physical or cores) + 1))" in cell  # capped at physical cores
    prose = _prose("05")
    assert "**hyper-thread** (超线程)" in prose
    assert "The second line of the output says what it added on your machine, or why it could not be tried" in prose
    (row,) = [e for e in datasets.load_glossary() if e.term == "hyper-thread"]
    assert row.term_zh == "超线程" and row.chapter == 5


# ------------------------------------------------------------------ point 7: printed from the measurement
def _run_cell(source: str, **namespace) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<cell>", "exec"), namespace)  # noqa: S102 - the notebook's own cell
    return out.getvalue()


@pytest.mark.parametrize("speedups, free, expected", [
    ([1.0, 0.78], True, "no faster than one thread: its threads did not get a core each, though the check found "
                        "the cores free: other work started meanwhile; run the cell again."),
    ([1.0, 0.78], False, "no faster than one thread: its threads did not get a core each, as the check above warned."),
    ([1.0, 1.9], True, "close to the ideal: a compute-bound GEMM gains from every core it gets."),
    ([1.0, 1.5], True, "faster, short of the ideal: smaller tiles per thread, one shared memory bus."),
    ([1.0, 2.5], True, "above the ideal"),
])
def test_chapter_05_reads_its_gemm_from_the_measurement(speedups, free, expected):
    """The stored S = 0.78 on 'free' cores (issue 37) can no longer sit under prose that says
    otherwise: the sentence is printed from the speedup and the check."""
    from course_lib import scaling

    cell = _cell("05", "s_gemm, s_conv = [t_gemm[0] / t for t in t_gemm]")
    check = CoreCheck(cores=2, load=0.0 if free else 5.0, slowdown=1.0)
    text = _run_cell(cell, threads=[1, 2], t_gemm=[0.04 / s for s in speedups], t_conv=[0.1, 0.07],
                     core_check=check, scaling=scaling)
    assert f"The GEMM on 2 threads: {speedups[1]:.2f}x, {expected}" in text


def test_chapter_07_explains_s1_from_the_runs_own_counters():
    cell = _cell("07", 'scal.runs["serial strong"], scal.runs["strong 1"]')
    prose = _prose("07")
    assert "the serial reference runs in a worker process started like the workers" in prose

    def run(step, cpu, faults):
        return types.SimpleNamespace(time_per_step=lambda: step, extra={"cpu_time": np.full((6, 1), cpu),
                                                                        "minor_faults": np.full((6, 1), faults)})

    def printed(serial, one):
        scal = types.SimpleNamespace(runs={"serial strong": serial, "strong 1": one},
                                     strong_speedup=np.array([serial.time_per_step() / one.time_per_step(), 1.5]),
                                     workers=np.array([1, 2]), weak_speedup=np.array([1.0, 1.8]))
        return _run_cell(cell, scal=scal, np=np, B=1024, b_weak=768, scal_check=CoreCheck(2, 0.0, 1.0),
                         reference_runs=pr.reference_runs, beside_references_figure=pr.beside_references_figure,
                         machine_label=pr.machine_label, show=lambda fig: None)

    same = printed(run(0.050, 0.049, 10), run(0.051, 0.050, 10))
    assert "S(1) = 0.98. Per step, serial / 1 worker: 50.0 / 51.0 ms, of CPU time 49.0 / 50.0 ms, page faults 10 / 10" in same
    assert "within 10% of 1, the same work at the same speed" in same
    slower_work = printed(run(0.050, 0.049, 10), run(0.070, 0.069, 900))
    assert "the CPU time differs too: the work itself ran at another speed" in slower_work
    waited = printed(run(0.050, 0.049, 10), run(0.070, 0.049, 10))
    assert "the CPU time agrees: a process waited for its core (other work)" in waited
    assert "a process had its core for only 70% of its step: other work ran" in waited
    shared = printed(run(0.040, 0.020, 0), run(0.037, 0.021, 0))
    assert shared.splitlines()[0].endswith("within 10% of 1, the same work at the same speed; a process had its "
                                           "core for only 50% of its step: other work ran")


def test_chapter_01_shows_the_pools_ceiling_beside_its_speedup():
    cell = _cell("01", "measurement = measure_parallel_speedup(")
    assert "measurement.ceiling[-1]" in cell and "the messages and the slowest shard cost" in cell
    assert '"ceiling: the work alone, nothing sent": (measurement.processes, measurement.ceiling)' in _code("01")
    assert "The **ceiling** is what $N$ processes give this work when they send nothing" in _prose("01")


def test_the_pipeline_chapter_prints_how_1f1b_and_gpipe_compared():
    """Issue 37: the prose explained a 1F1B penalty its stored run did not show; now it is
    written for both outcomes and the comparison is printed."""
    prose = _prose("11")
    assert "So 1F1B's measured bubble can come out above GPipe's" not in prose
    assert "whether they add up to more than a run's noise depends on the machine and its load" in prose
    cell = _cell("11", 'schedule="1f1b", **run_kw)')
    assert "schedule.simulate_pipeline(*run.stage_costs(), micro_batches=8, schedule=s)" in cell
    assert "measured here, 1F1B's bubble is {rel[0]} GPipe's, and its rest is {rel[1]} GPipe's rest" in cell


@pytest.mark.parametrize("prefix, check", [("11", "pipe_check"), ("12", "tp_check"), ("12", "heads_check"),
                                           ("14", "hyb_check")])
def test_a_cores_check_is_kept_and_read(prefix, check):
    code = _code(prefix)
    assert f"{check} = check_cores()" in code and f"print({check})" in code
    assert "print(check_cores())" not in code  # every verdict can be read where it is interpreted
    assert f"{check}.free" in code or f"machine_label({check})" in code


def test_a_run_on_shared_cores_is_not_interpreted_as_this_machines():
    """Issue 37: chapter 12 (now the hybrid chapter) stored 'cores were shared ... run the cell
    again' above an interpreted verdict."""
    tensor = _cell("12", "tp = train_tensor_parallel(")
    assert '("" if tp_check.free else " - on shared cores, so not this machine\'s verdict: run the cell again")' in tensor
    assert "if not heads_check.free:" in _code("12")
    verdicts = _cell("14", 'print("median time per step after step 0, and the verdict against the serial loop:")')
    assert "if not hyb_check.free:" in verdicts and "the times and verdicts below are not this machine's" in verdicts
    assert '" (shared cores)"' in verdicts


@pytest.mark.parametrize("prefix", ["01", "05", "07", "11", "12", "14"])
def test_the_learners_curve_is_labelled_with_its_cores_check(prefix):
    assert "yours_label=machine_label(" in _code(prefix)
