"""Loaders of data/: the facts they return, and their errors on broken files.

Error paths run on a copy of data/ in tmp_path selected with DDL_COURSE_DATA, so the
real files are never touched.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from data_support import data_copy_fixture  # noqa: F401 - the data_copy fixture

from course_lib import datasets as ds
from course_lib.datasets import DataFileError

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


def _rewrite(path: Path, line_no: int, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in line ``line_no`` (1-based) of a text file."""
    lines = path.read_text(encoding="utf-8").split("\n")
    assert old in lines[line_no - 1], f"{old!r} not in line {line_no}: {lines[line_no - 1]!r}"
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    path.write_text("\n".join(lines), encoding="utf-8")


def _line_of(path: Path, startswith: str) -> int:
    for i, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.startswith(startswith):
            return i
    raise AssertionError(f"no line starting with {startswith!r} in {path}")


# ------------------------------------------------------------------ hardware.csv
def test_hardware_devices_the_course_names():
    ids = {d.device_id for d in ds.load_hardware()}
    assert {
        "xeon_8280_core", "xeon_8280_socket", "v100_sxm2_32gb", "v100_sxm3_32gb",
        "a100_sxm_40gb", "a100_sxm_80gb", "h100_sxm", "tpuv3_chip",
    } <= ids


def test_hardware_datasheet_figures():
    hw = {d.device_id: d for d in ds.load_hardware()}
    # NVIDIA V100 datasheet: 15.7 FP32, 125 tensor TFLOPS, 900 GB/s
    assert (hw["v100_sxm2_32gb"].peak_fp32_tflops, hw["v100_sxm2_32gb"].peak_tensor_tflops) == (15.7, 125.0)
    assert hw["v100_sxm2_32gb"].memory_bandwidth_gb_s == 900.0
    # A100 datasheet: 312 dense FP16/BF16; 1,555 (40GB) vs 2,039 GB/s (80GB); same compute
    a40, a80 = hw["a100_sxm_40gb"], hw["a100_sxm_80gb"]
    assert a40.peak_tensor_tflops == a80.peak_tensor_tflops == 312.0
    assert (a40.memory_bandwidth_gb_s, a80.memory_bandwidth_gb_s) == (1555.0, 2039.0)
    # H100 datasheet quotes 1,979 with sparsity: the dense figure is half
    assert hw["h100_sxm"].peak_tensor_tflops == pytest.approx(1979 / 2, abs=1)
    # Google Cloud TPU v3: 123 TFLOPS bf16 per chip, 900 GBps
    assert hw["tpuv3_chip"].peak_tensor_tflops == 123.0
    assert hw["tpuv3_chip"].tensor_precision == "bf16"


def test_hardware_derived_values_follow_their_stated_derivation():
    hw = {d.device_id: d for d in ds.load_hardware()}
    core, socket = hw["xeon_8280_core"], hw["xeon_8280_socket"]
    # 2.70 GHz x (2 AVX-512 FMA units x 16 FP32 lanes x 2 FLOPs) per core, 28 cores
    assert core.peak_fp32_tflops == pytest.approx(2.70e9 * 2 * 16 * 2 / 1e12)
    assert socket.peak_fp32_tflops == pytest.approx(28 * core.peak_fp32_tflops)
    # 6 channels x 2933 MT/s x 8 bytes; one core gets 1/28
    assert socket.memory_bandwidth_gb_s == pytest.approx(6 * 2933 * 8 / 1000, rel=1e-3)
    assert core.memory_bandwidth_gb_s == pytest.approx(socket.memory_bandwidth_gb_s / 28, rel=1e-2)
    # DGX-2H: 2.1 PFLOPS for 16 GPUs; FP32 = tensor / 8 on Volta
    sxm3 = hw["v100_sxm3_32gb"]
    assert sxm3.peak_tensor_tflops == pytest.approx(2100 / 16, rel=5e-3)
    assert sxm3.peak_fp32_tflops == pytest.approx(sxm3.peak_tensor_tflops / 8, rel=5e-3)


def test_hardware_sustained_throughput_and_estimate_flags():
    for d in ds.load_hardware():
        peak = d.peak_tensor_tflops if d.sustained_of == "tensor" else d.peak_fp32_tflops
        assert d.sustained_tflops == pytest.approx(d.sustained_fraction * peak)
        assert d.sustained_flops == pytest.approx(d.sustained_tflops * 1e12)
        assert d.sustained_tflops < peak
        assert d.source.strip() and d.sustained_basis.strip()
        # the basis text says what the flag says
        assert d.sustained_basis.startswith("estimate" if d.sustained_estimate else "measured")
    cpu = ds.get_device("xeon_8280_socket")
    assert cpu.sustained_estimate and cpu.sustained_of == "fp32"


def test_get_device_names_the_known_ids_on_a_typo():
    with pytest.raises(ValueError, match="device_id must be one of .*v100_sxm2_32gb"):
        ds.get_device("v100")


@pytest.mark.parametrize(
    "old, new, message",
    [
        (",gpu,", ",fpga,", "kind must be one of"),
        (",0.3,tensor,", ",1.5,tensor,", "sustained_fraction must be in"),
        (",0.3,tensor,", ",0.3,int8,", "sustained_of must be"),
        (",125,fp16,", ",125,,", "peak_tensor_tflops and tensor_precision go together"),
        (",125,fp16,", ",,fp16,", "sustained_of=.tensor. needs a positive peak"),
        (",900,32,", ",fast,32,", "memory_bandwidth_gb_s = 'fast' is not a valid float"),
    ],
)
def test_hardware_malformed_rows_name_file_and_line(data_copy, old, new, message):
    path = data_copy / "hardware.csv"
    line = _line_of(path, "v100_sxm2_32gb")
    _rewrite(path, line, old, new)
    with pytest.raises(DataFileError, match=message) as info:
        ds.load_hardware()
    assert f"hardware.csv, line {line}" in str(info.value)


def test_hardware_duplicate_id(data_copy):
    path = data_copy / "hardware.csv"
    _rewrite(path, _line_of(path, "a100_sxm_80gb"), "a100_sxm_80gb", "a100_sxm_40gb")
    with pytest.raises(DataFileError, match="duplicate device_id 'a100_sxm_40gb'"):
        ds.load_hardware()


# ---------------------------------------------------------------- dnn_models.csv
def test_dnn_models_table():
    models = {m.model: m for m in ds.load_dnn_models()}
    assert len(models) == 44
    assert models["ResNet-50"].gmacs_per_forward == 4.089
    assert models["NASNet-A-Large"].input_px == 331
    assert models["Inception-v3"].input_px == 299
    assert models["MobileNet-v2"].top1_pct is None  # only top-5 recorded
    for m in models.values():
        assert m.gflops_per_forward == pytest.approx(2 * m.gmacs_per_forward)
        assert m.top1_pct is None or m.top1_pct < m.top5_pct
    families = {m.family for m in models.values()}
    assert {"VGG", "ResNet", "Inception", "MobileNet", "DenseNet"} <= families


def _vgg16_macs_and_params() -> tuple[int, int]:
    """VGG-16 (configuration D) counted by hand, layer by layer, 224 x 224 input."""
    convs = [(3, 64, 224), (64, 64, 224), (64, 128, 112), (128, 128, 112),
             (128, 256, 56), (256, 256, 56), (256, 256, 56),
             (256, 512, 28), (512, 512, 28), (512, 512, 28),
             (512, 512, 14), (512, 512, 14), (512, 512, 14)]
    fcs = [(512 * 7 * 7, 4096), (4096, 4096), (4096, 1000)]
    macs = sum(side * side * cin * cout * 9 for cin, cout, side in convs) + sum(i * o for i, o in fcs)
    params = sum(cin * cout * 9 + cout for cin, cout, _ in convs) + sum(i * o + o for i, o in fcs)
    return macs, params


def test_dnn_complexity_is_multiply_accumulates_not_flops():
    """An independent count of VGG-16 matches the column only if it counts MACs."""
    macs, params = _vgg16_macs_and_params()
    vgg = {m.model: m for m in ds.load_dnn_models()}["VGG-16"]
    assert vgg.gmacs_per_forward == pytest.approx(macs / 1e9, rel=5e-3)
    assert vgg.gflops_per_forward == pytest.approx(2 * macs / 1e9, rel=5e-3)
    assert vgg.params_million == pytest.approx(params / 1e6, rel=1e-3)


def test_dnn_models_top1_above_top5_is_rejected(data_copy):
    path = data_copy / "dnn_models.csv"
    line = _line_of(path, "ResNet-50,")
    _rewrite(path, line, "76.002", "99.5")
    with pytest.raises(DataFileError, match=rf"dnn_models.csv, line {line}: top1_pct 99.5 exceeds"):
        ds.load_dnn_models()


# ---------------------------------------------------------- training_records.csv
def test_training_records_bert_claims():
    recs = {r.record_id: r for r in ds.load_training_records()}
    nv = recs["nvidia_2019_47min"]
    assert (nv.devices, nv.time_minutes, nv.full_pretraining) == (92 * 16, 47.0, True)
    assert recs["nvidia_2019_53min"].time_minutes == 53.0
    assert recs["mlperf_v3.1_eos"].full_pretraining is False
    lamb = ds.lamb_scaling_table()
    # chips x2 and batch x2 halve the iterations (as printed, within rounding)
    ratio = lamb["iterations"][:-1] / lamb["iterations"][1:]
    assert np.allclose(ratio, 2.0, rtol=0.02)
    assert np.array_equal(lamb["global_batch_size"] // lamb["devices"], np.full(7, 32))


# ---------------------------------------------------------------- cpu_trends.csv
def test_cpu_trends_series_and_the_multicore_turn():
    trends = ds.load_cpu_trends()
    assert set(trends) == set(ds.CPU_TREND_SERIES)
    for t in trends.values():
        assert np.all(np.diff(t.year) >= 0) and len(t) >= 70
    freq, cores = trends["frequency_mhz"], trends["logical_cores"]
    power, transistors = trends["typical_power_w"], trends["transistors_thousands"]
    before, after = freq.year < 2005, freq.year >= 2005
    # frequency stops rising around 2005: nothing after it is even 1.5x the earlier best
    assert freq.value[after].max() < 1.5 * freq.value[before].max()
    # while cores multiply (single core before, dozens after) ...
    assert cores.value[cores.year < 2004].max() <= 2 and cores.value[cores.year >= 2015].max() >= 32
    # ... and transistors keep growing by orders of magnitude after 2005
    assert transistors.value[transistors.year > 2015].max() > 100 * transistors.value[
        transistors.year < 2005].max()
    assert power.value.max() <= 500
    assert "Rupp" in ds.CPU_TRENDS_ATTRIBUTION and "Horowitz" in ds.CPU_TRENDS_ATTRIBUTION


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("frequency_mhz,", "clock_mhz,", "unknown series 'clock_mhz'"),
        (",MHz", ",GHz", "unit of frequency_mhz must be 'MHz'"),
        (",MHz", "", "expected 4 cells, got 3"),
    ],
)
def test_cpu_trends_malformed(data_copy, old, new, message):
    path = data_copy / "cpu_trends.csv"
    line = _line_of(path, "frequency_mhz,")
    _rewrite(path, line, old, new)
    with pytest.raises(DataFileError, match=message) as info:
        ds.load_cpu_trends()
    assert f"line {line}" in str(info.value)


# ------------------------------------------------------------------ glossary.csv
REQUIRED_TERMS = [
    "serial computing", "parallel computing", "speedup", "parallel efficiency", "Amdahl's law",
    "Gustafson's law", "strong scaling", "weak scaling", "training time", "compute rate",
    "multiply-accumulate (MAC)", "floating-point operation (FLOP)", "intra-operator parallelism",
    "inter-operator parallelism", "im2col", "GEMM", "SIMD", "data parallelism",
    "model parallelism", "pipeline parallelism", "hybrid parallelism", "all-reduce",
    "parameter server", "bubble", "micro-batch", "large-batch training", "LARS", "LAMB",
    "learning-rate warm-up", "batch size",
]


def test_glossary_covers_the_course():
    entries = {e.term: e for e in ds.load_glossary()}
    missing = [t for t in REQUIRED_TERMS if t not in entries]
    assert not missing, f"glossary lacks {missing}"
    chapters = {int(p.name[:2]) for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert {e.chapter for e in entries.values()} <= chapters
    for e in entries.values():
        has_cjk = any("\u4e00" <= ch <= "\u9fff" for ch in e.term_zh)
        assert has_cjk or e.term_zh in ("im2col", "col2im", "All-Reduce", "Reduce-Scatter", "All-Gather"), e.term
        assert e.definition.endswith(".") and len(e.definition) < 200
        assert (e.source_section is not None) or not e.zh_from_source
    assert entries["speedup"].term_zh == "加速比" and entries["bubble"].term_zh == "气泡"
    assert all(e.chapter == 4 for e in ds.load_glossary(chapter=4))


def test_a_terms_chapter_is_where_its_chinese_term_first_appears():
    """The glossary's chapter column is the first notebook whose prose writes the term's Chinese
    name (the house rule puts it beside the concept the first time it appears)."""
    prose = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        prose[int(path.name[:2])] = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    wrong = []
    for e in ds.load_glossary():
        first = next((n for n, text in sorted(prose.items()) if e.term_zh in text), None)
        if first is not None and e.chapter != first:
            wrong.append(f"{e.term}: chapter {e.chapter}, first written in {first:02d}")
    assert not wrong, wrong


def test_glossary_markdown_table():
    table = ds.glossary_markdown(1).splitlines()
    assert table[:2] == ["| term | 中文 | definition |", "|---|---|---|"]
    assert len(table) == 2 + len(ds.load_glossary(1))
    assert any("串行计算" in row for row in table)


@pytest.mark.parametrize("bad", [0, ds.LAST_CHAPTER + 1, 2.5, "1", True])
def test_glossary_chapter_argument(bad):
    with pytest.raises((ValueError, TypeError), match="chapter"):
        ds.load_glossary(bad)


def test_glossary_bad_boolean(data_copy):
    path = data_copy / "glossary.csv"
    line = _line_of(path, "speedup,")
    _rewrite(path, line, ",true,", ",maybe,")
    with pytest.raises(DataFileError, match=rf"line {line}: zh_from_source = 'maybe'"):
        ds.load_glossary()


# --------------------------------------------------------------------- digits.npz
def test_digits_split_is_stratified_and_disjoint():
    train, test, full = ds.load_digits("train"), ds.load_digits("test"), ds.load_digits("all")
    assert len(train) + len(test) == len(full) == 1797
    assert train.x.dtype == np.float32 and 0 <= train.x.min() and train.x.max() <= 1
    counts_full, counts_test = np.bincount(full.y), np.bincount(test.y)
    assert np.all(np.abs(counts_test - 0.2 * counts_full) <= 1)
    rows = {r.tobytes() for r in test.images}
    assert sum(r.tobytes() in rows for r in train.images) < 10  # (a few duplicate images exist)


def test_digits_errors(data_copy):
    np.savez(data_copy / "digits.npz", images=np.zeros((3, 8, 8), np.uint8), labels=np.array([1, 2]))
    with pytest.raises(DataFileError, match="digits.npz: expected images"):
        ds.load_digits()
    np.savez(data_copy / "digits.npz", images=np.array([object()], dtype=object), labels=[1])
    with pytest.raises(DataFileError, match="digits.npz: cannot read"):
        ds.load_digits()
    (data_copy / "digits.npz").unlink()
    with pytest.raises(DataFileError, match="digits.npz: file not found"):
        ds.load_digits()


# ---------------------------------------------------------------- generic errors
LOADERS = {
    "hardware.csv": ds.load_hardware,
    "dnn_models.csv": ds.load_dnn_models,
    "training_records.csv": ds.load_training_records,
    "cpu_trends.csv": ds.load_cpu_trends,
    "glossary.csv": ds.load_glossary,
    "megatron_configs.csv": ds.load_megatron_configs,
}


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_missing_file_is_named(data_copy, name):
    (data_copy / name).unlink()
    with pytest.raises(DataFileError, match=rf"{name}: file not found"):
        LOADERS[name]()


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_wrong_header_is_line_1(data_copy, name):
    path = data_copy / name
    text = path.read_text(encoding="utf-8")
    path.write_text("x" + text, encoding="utf-8")
    with pytest.raises(DataFileError, match=rf"{name}, line 1: header must be"):
        LOADERS[name]()


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_empty_required_cell_names_field_and_line(data_copy, name):
    path = data_copy / name
    lines = path.read_text(encoding="utf-8").split("\n")
    first_field = lines[0].split(",")[0]
    lines[2] = "," + lines[2].split(",", 1)[1]  # blank the first cell of data line 3
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(DataFileError, match=rf"{name}, line 3: {first_field} is empty"):
        LOADERS[name]()


def test_missing_data_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("DDL_COURSE_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(DataFileError, match="course data directory not found"):
        ds.load_hardware()


def test_values_are_finite():
    for d in ds.load_hardware():
        for v in (d.peak_fp32_tflops, d.peak_tensor_tflops, d.memory_bandwidth_gb_s):
            assert v is None or math.isfinite(v)


def test_the_schema_and_the_loader_agree_on_the_last_chapter():
    """data/datapackage.json's chapter maximum is datasets.LAST_CHAPTER: the notebooks' numbers."""
    package = json.loads((DATA / "datapackage.json").read_text(encoding="utf-8"))
    maxima = {r["name"]: f["constraints"]["maximum"] for r in package["resources"] if "schema" in r
              for f in r["schema"]["fields"] if f["name"] == "chapter"}
    assert maxima == {"glossary": ds.LAST_CHAPTER, "notation": ds.LAST_CHAPTER}
    assert ds.LAST_CHAPTER == max(int(p.name[:2]) for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_a_text_field_is_read_in_the_courses_language(data_copy, monkeypatch):
    """A ``<field>_zh`` column after a record's fields replaces the English in Chinese; an
    empty cell keeps the English; a column that translates no text field is refused."""
    import csv

    path = data_copy / "glossary.csv"
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    at = rows[0].index("definition_zh")
    rows[1][at] = "一个处理器依次执行程序的指令。"
    for row in rows[2:]:
        row[at] = ""

    def write(rows):
        with path.open("w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(rows)

    write(rows)
    monkeypatch.setenv("DDL_LANG", "en")
    english = ds.load_glossary()
    monkeypatch.setenv("DDL_LANG", "zh_CN")
    chinese = ds.load_glossary()
    assert chinese[0].definition == "一个处理器依次执行程序的指令。" != english[0].definition
    assert chinese[1:] == english[1:]  # empty cells: the English
    for bad in (["chapter_zh"], ["colour_zh"], ["definition_zh", "definition_zh"]):  # a number, no field, twice
        write([rows[0][:at] + bad] + [r[:at] + [""] * len(bad) for r in rows[1:]])
        with pytest.raises(ds.DataFileError, match="translations of its text fields"):
            ds.load_glossary()


def test_every_translated_data_text_is_there_in_chinese():
    """The Chinese edition's glossary, hardware notes and training-record notes: every
    definition has its Chinese, with the English's numbers."""
    import csv
    import re

    for name, columns in (("glossary.csv", ["definition"]), ("hardware.csv", ["sustained_basis", "note"]),
                          ("training_records.csv", ["note"])):
        with (ds.data_dir() / name).open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                for c in columns:
                    english, chinese = row[c], row[f"{c}_zh"]
                    assert bool(english) == bool(chinese), (name, c, english)
                    assert sorted(re.findall(r"\d+", english)) == sorted(re.findall(r"\d+", chinese)), (name, c, english)
                    prose = re.search(r"[A-Za-z]{2,}\W+[A-Za-z]{2,}", english)  # not "81.4 h"
                    assert not prose or re.search(r"[\u4e00-\u9fff]", chinese), (name, c, chinese)
