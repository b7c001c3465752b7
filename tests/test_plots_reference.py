"""course_lib.plots.reference: your run beside the reference machines' (issue 37, point 6).

Synthetic reference files in a temporary folder test what :func:`reference_runs` reads and
what it leaves out; the shipped files (``data/reference``) are only checked for being
readable by every built-in curve, never for their numbers (they are regenerated).
"""

from __future__ import annotations

import json
import math

import matplotlib
import numpy as np
import pytest

from course_lib.parallel.train.cores import CoreCheck
from course_lib.plots import COLORS
from course_lib.plots import reference as pr
from course_lib.reference import available_references, experiment_result, load_reference

matplotlib.use("Agg")


def _ref(model: str, cores: int, experiments: dict, date: str = "2026-01-02T03:04:05Z") -> dict:
    """A minimal reference file: provenance and ``experiments`` (name -> result, all "ok")."""
    return {"format": "ddl-course reference run", "schema_version": 1, "complete": True,
            "provenance": {"cpu": {"model": model, "usable_cores": cores}, "date_utc": date},
            "cores_check": {},
            "experiments": {name: {"status": "ok", "result": result} for name, result in experiments.items()}}


POOL_2 = {"processes": [1, 2], "speedup": [0.97, 1.8]}
POOL_16 = {"processes": [1, 2, 4, 8, 16], "speedup": [0.99, 1.9, 3.7, 6.8, 11.5]}
THREADS = {"threads": [1, 2, 4], "gemm": {"speedup": [1.0, 1.9, 3.6]}, "conv": {"speedup": [1.0, 1.7, None]}}
GPU_ROOF = {"memory": {"bytes_per_second": 4e12},
            "peaks": {"bfloat16": {"flops_per_second": 7.6e14}, "float32": {"flops_per_second": 5e13}},
            "operators": [{"group": "BERT-Large layer", "name": "FFN up", "intensity": 780.0,
                           "achieved_flops": 6.9e14, "eta": 0.9, "bound": "compute"},
                          {"group": "BERT-Large layer", "name": "GeLU", "intensity": 2.0,
                           "achieved_flops": 6e12, "eta": 0.008, "bound": "memory"}]}


def _conv_layer(name: str, kernels: dict) -> dict:
    return {"name": name, "x_shape": [32, 64, 56, 56], "w_shape": [64, 64, 3, 3],
            "by_dtype": {dtype: {"seconds": s, "main": main, "kernels": [{"name": k} for k in names]}
                         for dtype, (s, main, names) in kernels.items()}}


GPU_CONV = {"layers": [
    _conv_layer("conv2_x", {"float32": (2.5e-4, "void fft2d_r2c_16x16<float>(float2*)", ["void fft2d_r2c_16x16<float>(float2*)",
                                                                                         "sm80_xmma_gemm_cf32"]),
                            "bfloat16": (1e-4, "sm90_xmma_fprop_implicit_gemm_bf16_nhwc", ["sm90_xmma_fprop_implicit_gemm_bf16_nhwc"])}),
]}
GPU_CONV["layers"][0]["channels_last"] = {"bfloat16": {"seconds": 8e-5, "main": "winograd_kernel<bf16>(p)",
                                                       "main_seconds": 7e-5}}
CPU_CONV = {"layers": [{"name": "conv2_x", "x_shape": [32, 64, 56, 56],
                        "by_threads": [{"threads": 1, "seconds": {"im2col": 0.10, "winograd_f4": 0.06}, "fastest": "winograd_f4"},
                                       {"threads": 2, "seconds": {"im2col": 0.06, "winograd_f4": 0.03}, "fastest": "winograd_f4"}]}]}


@pytest.fixture
def folder(tmp_path):
    """Three reference files: 2 cores (pool, threads, conv), 16 cores + GPU (pool, gpu_roofline,
    gpu_conv), and one that is no reference run."""
    files = {"a-2-core": _ref("CPU A", 2, {"pool": POOL_2, "threads": THREADS, "conv": CPU_CONV}),
             "b-16-core": _ref("CPU B", 16, {"pool": POOL_16, "gpu_roofline": GPU_ROOF, "gpu_conv": GPU_CONV})}
    files["b-16-core"]["experiments"]["gpu_roofline"]["result"]["device"] = {"device": "cuda", "name": "GPU X"}
    files["b-16-core"]["experiments"]["threads"] = {"status": "failed", "error": "no"}
    for name, doc in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "c-broken.json").write_text("{not json", encoding="utf-8")
    return tmp_path


# ------------------------------------------------------------------ reference_runs
def test_reference_runs_labels_every_file_that_has_the_experiment(folder):
    runs = pr.reference_runs("pool", folder=folder)
    assert list(runs.results) == ["CPU A, 2 cores (2026-01-02)", "CPU B, 16 cores + GPU X (2026-01-02)"]
    assert runs.files == {"CPU A, 2 cores (2026-01-02)": "a-2-core", "CPU B, 16 cores + GPU X (2026-01-02)": "b-16-core"}
    assert runs.without == ("c-broken",) and len(runs) == 2
    x, y = runs.curves["CPU B, 16 cores + GPU X (2026-01-02)"]["speedup"]
    assert x.dtype == float and x.tolist() == [1, 2, 4, 8, 16] and y[-1] == 11.5
    text = str(runs)
    assert text.startswith("the pool's speedups beside 2 reference run(s): CPU A, 2 cores (2026-01-02) [a-2-core]")
    assert text.endswith("(not in: c-broken)")


def test_a_failed_or_missing_experiment_is_left_out_and_nan_kept(folder):
    runs = pr.reference_runs("threads", folder=folder)
    assert list(runs.files.values()) == ["a-2-core"] and runs.without == ("b-16-core", "c-broken")
    conv = runs.curves["CPU A, 2 cores (2026-01-02)"]["conv2d"][1]
    assert conv[:2].tolist() == [1.0, 1.7] and math.isnan(conv[2])  # None in the file: a missing point


def test_no_file_with_the_experiment_says_how_to_make_one(folder, tmp_path_factory):
    empty = pr.reference_runs("hybrid", folder=folder)
    assert not empty.results and len(empty) == 0
    assert str(empty) == ("No reference file has the hybrid run yet: make one on a machine to compare with, in a "
                          "terminal in the course's folder: python -m benchmarks reference --out "
                          "data/reference/NAME.json")
    assert pr.MAKE_ONE in str(pr.reference_runs("pool", folder=tmp_path_factory.mktemp("none")))


def test_a_machine_keeps_its_colour_from_figure_to_figure(folder):
    pool, gpu = pr.reference_runs("pool", folder=folder), pr.reference_runs("gpu_roofline", folder=folder)
    label = "CPU B, 16 cores + GPU X (2026-01-02)"
    assert pool.color(label) == gpu.color(label) == COLORS[2]  # the second file of the folder
    assert pool.color("CPU A, 2 cores (2026-01-02)") == COLORS[1]


def test_several_experiments_merge_per_machine_and_custom_curves(folder):
    runs = pr.reference_runs(("pool", "gpu_roofline"), folder=folder)
    b = runs.curves["CPU B, 16 cores + GPU X (2026-01-02)"]
    assert set(b) == {"speedup", "GPU roof, bfloat16", "GPU roof, float32", "GPU: BERT-Large layer"}
    x, y = b["GPU: BERT-Large layer"]
    assert x.tolist() == [780.0, 2.0] and y.tolist() == pytest.approx([690.0, 6.0])  # TFLOP/s
    roof_x, roof_y = b["GPU roof, bfloat16"]
    assert roof_y.max() == pytest.approx(760.0) and roof_y[0] == pytest.approx(roof_x[0] * 4.0)
    own = pr.reference_runs("pool", folder=folder, curves=lambda e, r: {"efficiency": (r["processes"], r["speedup"])})
    assert all(set(c) == {"efficiency"} for c in own.curves.values())


def test_a_result_without_the_fields_its_curves_need_is_listed_as_without(tmp_path):
    (tmp_path / "odd.json").write_text(json.dumps(_ref("CPU", 4, {"pool": {"processes": [1]}})), encoding="utf-8")
    runs = pr.reference_runs("pool", folder=tmp_path)
    assert runs.without == ("odd",) and not runs.results


@pytest.mark.parametrize("bad", [None, 3, [], [""], ("pool", 2)])
def test_reference_runs_rejects_bad_experiments(bad):
    with pytest.raises(TypeError):
        pr.reference_runs(bad)


def test_reference_runs_rejects_bad_folder_and_curves():
    with pytest.raises(TypeError):
        pr.reference_runs("pool", folder=3)
    with pytest.raises(TypeError):
        pr.reference_runs("pool", curves="speedup")


def test_every_shipped_file_draws_every_experiment_it_has():
    """The built-in curves read every shipped reference file: a file that has an experiment is
    in its results, never left out for a field the curves miss."""
    for experiment in ("pool", "threads", "roofline", "gpu_roofline", "scaling", "collectives", "overlap",
                       "pipeline", "tensor", "hybrid"):
        runs = pr.reference_runs(experiment)
        having = [n for n in available_references() if experiment_result(load_reference(n), experiment) is not None]
        assert sorted(runs.files.values()) == having, experiment
        for curves in runs.curves.values():
            assert curves and all(x.size == y.size > 0 for x, y in curves.values()), experiment


# ------------------------------------------------------------------ the figure
def _lines(fig):
    return [line for line in fig.axes[0].get_lines()]


def test_yours_first_thick_and_in_the_first_colour(folder):
    runs = pr.reference_runs("pool", folder=folder)
    fig = pr.beside_references_figure({"speedup": ([1, 2], [0.98, 1.7])}, runs, title="pool", xlabel="N",
                                      ylabel="S", ideal=True, y_axis="log2", yours_label="mine")
    lines = _lines(fig)
    assert matplotlib.colors.to_hex(lines[0].get_color()) == COLORS[0].lower()
    assert lines[0].get_linewidth() > max(line.get_linewidth() for line in lines[1:])
    assert lines[0].get_zorder() > max(line.get_zorder() for line in lines[1:])
    assert [matplotlib.colors.to_hex(line.get_color()) for line in lines[1:3]] == [c.lower() for c in COLORS[1:3]]
    machines = [t.get_text() for t in fig.legends[0].get_texts()]
    assert machines == ["mine", *runs.results]
    assert [t.get_text() for t in fig.legends[1].get_texts()] == ["ideal: y = x"]  # one kind: no kind legend
    assert fig.axes[0].get_yscale() == "log" and fig.axes[0].get_xscale() == "log"


def test_kinds_share_a_style_across_machines_and_points_have_no_line():
    refs = {"big": {"GPipe, 2 stages": ([1, 2, 4, 8], [0.5, 0.34, 0.21, 0.12]), "1F1B, 2 stages": ([8], [0.13])}}
    fig = pr.beside_references_figure({"GPipe, 2 stages": ([1, 2], [0.5, np.nan]), "1F1B, 2 stages": ([8], [0.2])},
                                      refs, title="t", xlabel="M", ylabel="bubble",
                                      guides={"formula": ([1, 8], [0.5, 1 / 9])})
    mine_gpipe, mine_1f1b, ref_gpipe, ref_1f1b, formula = _lines(fig)
    assert mine_gpipe.get_linestyle() == ref_gpipe.get_linestyle() and mine_gpipe.get_marker() == ref_gpipe.get_marker()
    assert mine_1f1b.get_linestyle() == ref_1f1b.get_linestyle() == "None"
    assert mine_gpipe.get_xdata().tolist() == [1.0]  # the NaN point is left out
    assert formula.get_color() == "0.45"
    assert [t.get_text() for t in fig.legends[1].get_texts()] == ["GPipe, 2 stages", "1F1B, 2 stages", "formula"]
    assert fig.axes[0].get_ylim()[0] == 0.0  # a linear axis starts at 0


def test_a_dense_model_curve_has_no_markers():
    grid = np.geomspace(0.1, 100, 50)
    fig = pr.beside_references_figure({"roof": (grid, np.minimum(1.0, grid)), "steps": ([1, 2], [0.1, 0.2])}, {},
                                      title="t", xlabel="I", ylabel="r", x_axis="log", y_axis="log")
    roof, steps = _lines(fig)
    assert roof.get_marker() in ("None", None, "") and steps.get_marker() == "s"


def test_references_only_and_the_figure_keeps_the_style():
    fig = pr.beside_references_figure({}, {"m": {"speedup": ([1, 2], [1, 2])}}, title="t", xlabel="x", ylabel="y")
    assert fig.get_figwidth() == 9.6 and len(_lines(fig)) == 1


@pytest.mark.parametrize("kwargs, error", [
    (dict(yours=None), TypeError), (dict(yours={"a": (1, 2, 3)}), TypeError),
    (dict(yours={"a": ([1, 2], [1])}), ValueError), (dict(yours={1: ([1], [1])}), TypeError),
    (dict(references=None), TypeError), (dict(references={"m": None}), TypeError),
    (dict(x_axis="cubic"), ValueError), (dict(ideal="yes"), TypeError), (dict(points="GEMM"), TypeError),
    (dict(title=None), TypeError), (dict(guides={"g": "x"}), TypeError),
])
def test_the_figure_rejects_bad_arguments(kwargs, error):
    args = dict(yours={"a": ([1, 2], [1, 2])}, references={}, title="t", xlabel="x", ylabel="y") | kwargs
    with pytest.raises(error):
        pr.beside_references_figure(**args)


def test_machine_label_says_when_the_cores_were_shared():
    assert pr.machine_label(CoreCheck(cores=16, load=0.1, slowdown=1.0)) == "your machine, 16 cores"
    assert pr.machine_label(CoreCheck(cores=2, load=3.0, slowdown=1.0)).endswith("(shared with other work: not its own speed)")
    with pytest.raises(TypeError):
        pr.machine_label("free")


# ------------------------------------------------------------------ convolutions
def test_conv_rows_name_the_kernel_kind_and_the_fastest_cpu_algorithm(folder):
    rows = pr.conv_rows(pr.reference_runs(("gpu_conv", "conv"), folder=folder))
    gpu = {r["variant"]: r for r in rows if r["device"] == "GPU"}
    assert {v: r["kind"] for v, r in gpu.items()} == {"cuDNN float32": "FFT", "cuDNN bfloat16": "implicit GEMM",
                                                      "cuDNN bfloat16, channels_last": "Winograd"}
    assert gpu["cuDNN float32"]["kernel"] == "fft2d_r2c_16x16" and math.isnan(gpu["cuDNN float32"]["kernel_seconds"])
    assert gpu["cuDNN bfloat16, channels_last"]["kernel_seconds"] == 7e-5
    assert gpu["cuDNN bfloat16"]["per_image"] == pytest.approx(1e-4 / 32)
    cpu = [r for r in rows if r["device"] == "CPU"]
    assert [(r["variant"], r["kind"], r["threads"], r["seconds"]) for r in cpu] == [
        ("course's fastest, 1 thread", "winograd_f4", 1, 0.06), ("course's fastest, all cores", "winograd_f4", 2, 0.03)]


def test_conv_figure_puts_every_layer_on_a_row_and_yours_first(folder):
    runs = pr.reference_runs(("gpu_conv", "conv"), folder=folder)
    fig = pr.conv_figure(runs, yours={"conv2_x": {"im2col, 1 thread": 5e-3}, "conv3_x": {"im2col, 1 thread": 4e-3}},
                         yours_label="mine")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["conv2_x", "conv3_x"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["mine", *runs.results]
    mine = [line for line in _lines(fig) if line.get_xdata()[0] in (5e-3, 4e-3)]
    assert len(mine) == 2 and all(matplotlib.colors.to_hex(m.get_color()) == COLORS[0].lower() for m in mine)
    with pytest.raises(ValueError):
        pr.conv_figure(runs, yours={"conv2_x": {"im2col": -1.0}})
    with pytest.raises(TypeError):
        pr.conv_rows({"gpu_conv": {}})
