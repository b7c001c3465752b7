"""Loaders for the course data in ``data/`` (numpy and the csv module only).

Every loader checks what it reads and raises ``DataFileError`` (a ``ValueError``)
naming the file, and the line where it applies, when a file is missing or malformed.
The whole of ``data/`` is checked against its schema by :mod:`course_lib.datapackage`.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ._validate import check_int
from .i18n import language, tr

__all__ = ["CPU_TRENDS_ATTRIBUTION", "CPU_TREND_SERIES", "CpuTrend", "DataFileError", "Digits",
           "DnnModel", "FailureRecord", "GlossaryEntry", "HardwareDevice", "MegatronConfig",
           "ParallelLayout", "TrainingRecord", "data_dir", "get_device", "glossary_markdown",
           "lamb_scaling_table", "load_cpu_trends", "load_digits", "load_dnn_models",
           "load_failure_records", "load_glossary", "load_notation", "notation_markdown",
           "load_hardware", "load_megatron_configs", "load_parallel_layouts",
           "load_training_records", "read_csv"]


class DataFileError(ValueError):
    """A course data file is missing or malformed (the message names file and line)."""


def data_dir() -> Path:
    """Directory holding the course data.

    ``$DDL_COURSE_DATA`` if set, else the ``data/`` folder beside the package (the
    repository layout; the course is installed in editable mode).
    """
    env = os.environ.get("DDL_COURSE_DATA")
    path = Path(env) if env else Path(__file__).resolve().parent.parent / "data"
    if not path.is_dir():
        raise DataFileError(f"course data directory not found: {path} (set DDL_COURSE_DATA or run from a clone)")
    return path


@dataclass(frozen=True)
class Digits:
    """A split of the UCI 8x8 handwritten digits, ready for the running example.

    Attributes
    ----------
    x : numpy.ndarray
        float32 array (n, 64), pixel intensities scaled from 0..16 to [0, 1].
    y : numpy.ndarray
        int64 array (n,), the digit 0-9.
    images : numpy.ndarray
        uint8 array (n, 8, 8), the raw images (0..16).
    """

    x: np.ndarray
    y: np.ndarray
    images: np.ndarray

    def __len__(self) -> int:
        return int(self.y.shape[0])


def load_digits(split: str = "train", *, test_fraction: float = 0.2, seed: int = 0) -> Digits:
    """Load the UCI handwritten digits (1,797 images of 8x8 pixels, 10 classes).

    Parameters
    ----------
    split : {"train", "test", "all"}
        Which part to return. The split is a seeded, stratified shuffle, so it is the
        same on every machine.
    test_fraction : float
        Fraction of every class held out for "test", in (0, 1).
    seed : int
        Seed of the shuffle.

    Examples
    --------
    >>> train, test = load_digits("train"), load_digits("test")
    >>> len(train), len(test), train.x.shape[1]
    (1438, 359, 64)
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    path = data_dir() / "digits.npz"
    if not path.is_file():
        raise DataFileError(f"{path}: file not found")
    try:
        with np.load(path, allow_pickle=False) as npz:
            images, labels = npz["images"], npz["labels"]
    except (KeyError, ValueError, OSError) as exc:
        raise DataFileError(f"{path}: cannot read images/labels arrays ({exc})") from exc
    if images.shape[1:] != (8, 8) or images.shape[0] != labels.shape[0]:
        raise DataFileError(f"{path}: expected images (n, 8, 8) and labels (n,)")
    if images.max() > 16 or labels.max() > 9:
        raise DataFileError(f"{path}: pixel values must be 0..16 and labels 0..9")
    if split == "all":
        idx = np.arange(labels.shape[0])
    else:
        rng = np.random.default_rng(seed)
        test_idx = []
        for digit in range(10):
            members = np.flatnonzero(labels == digit)
            rng.shuffle(members)
            test_idx.append(members[: int(round(test_fraction * members.size))])
        is_test = np.zeros(labels.shape[0], dtype=bool)
        is_test[np.concatenate(test_idx)] = True
        idx = np.flatnonzero(is_test if split == "test" else ~is_test)
    imgs = images[idx]
    x = (imgs.reshape(len(idx), 64).astype(np.float32)) / np.float32(16.0)
    return Digits(x=x, y=labels[idx].astype(np.int64), images=imgs)


# ---------------------------------------------------------------------- CSV files
def _parse_bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


_PARSERS: dict[Any, Callable[[str], Any]] = {int: int, float: float, str: str, bool: _parse_bool}


#: The suffix of a column that holds a text field in a language: read instead of the English.
TRANSLATED = {"zh_CN": "_zh"}


def read_csv(name: str, record_type: type) -> tuple[Any, ...]:
    """Read ``data/<name>`` into a tuple of ``record_type`` dataclass instances.

    The header must list exactly the dataclass's fields, in order, then, optionally, text
    fields in Chinese (``definition_zh``, :data:`TRANSLATED`): read instead of the English
    in the course's language (:func:`course_lib.i18n.language`), where the cell is not empty.
    A field annotated ``X | None`` may be empty (giving ``None``); any other empty cell, a
    value that does not parse, or a wrong header raises :class:`DataFileError` naming file and line.
    """
    path = data_dir() / name
    if not path.is_file():
        raise DataFileError(f"{path}: file not found")
    spec = [(f.name, _field_type(f.type)) for f in fields(record_type)]
    expected, texts = [n for n, _ in spec], {n for n, (typ, _) in spec if typ is str}
    rows = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None) or []
        if header[:len(expected)] != expected or any(not (c.endswith("_zh") and c[:-3] in texts)
                                                     or header.count(c) > 1 for c in header[len(expected):]):
            raise DataFileError(f"{path}, line 1: header must be {expected}, then optional translations of its "
                                f"text fields (definition_zh), got {header}")
        suffix = TRANSLATED.get(language())
        use = {i: expected.index(c[: -len(suffix)]) for i, c in enumerate(header[len(expected):], len(expected))
               if suffix and c.endswith(suffix)}
        for line_no, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise DataFileError(f"{path}, line {line_no}: expected {len(header)} cells, got {len(row)}")
            for i, at in use.items():  # the field in the course's language, where it is written
                row[at] = row[i] if row[i].strip() else row[at]
            values = {}
            for (field_name, (typ, optional)), cell in zip(spec, row[: len(spec)], strict=True):
                cell = cell.strip()
                if cell == "":
                    if not optional:
                        raise DataFileError(f"{path}, line {line_no}: {field_name} is empty")
                    values[field_name] = None
                    continue
                try:
                    values[field_name] = _PARSERS[typ](cell)
                except ValueError as exc:
                    raise DataFileError(f"{path}, line {line_no}: {field_name} = {cell!r} is not a valid "
                                        f"{typ.__name__} ({exc})") from exc
            rows.append(record_type(**values))
    return tuple(rows)


def _field_type(annotation: Any) -> tuple[type, bool]:
    """(base type, optional) from a dataclass annotation such as ``"float | None"``."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    parts = [p.strip() for p in str(text).split("|")]
    optional = "None" in parts
    base = next(p for p in parts if p != "None")
    types = {"int": int, "float": float, "str": str, "bool": bool}
    if base not in types:
        raise TypeError(f"unsupported field type {annotation!r}")
    return types[base], optional


@dataclass(frozen=True)
class TrainingRecord:
    """One row of ``data/training_records.csv``: a BERT-Large training run."""

    record_id: str
    system: str
    model: str
    optimizer: str
    global_batch_size: int | None
    iterations: int | None
    devices: int
    device_type: str
    time_minutes: float
    squad_v1_f1: float | None
    full_pretraining: bool
    """False for benchmark results (MLPerf) that do not train BERT from scratch."""
    source: str
    note: str | None


def load_training_records() -> tuple[TrainingRecord, ...]:
    """BERT-Large training records with their sources (``data/training_records.csv``).

    Examples
    --------
    >>> recs = load_training_records()
    >>> [r.time_minutes for r in recs if r.record_id == "nvidia_2019_47min"]
    [47.0]
    """
    return read_csv("training_records.csv", TrainingRecord)


def lamb_scaling_table() -> dict[str, np.ndarray]:
    """The LAMB paper's Table 1 rows with a single batch size, as arrays.

    Returns the LAMB runs from 16 to 1,024 TPUv3 chips (the mixed-batch 76-minute run
    and the non-LAMB baseline are left out), keys ``devices``, ``global_batch_size``,
    ``iterations`` and ``time_minutes``, sorted by device count.

    Examples
    --------
    >>> t = lamb_scaling_table()
    >>> t["devices"].tolist()
    [16, 32, 64, 128, 256, 512, 1024]
    """
    rows = sorted(
        (
            r
            for r in load_training_records()
            if r.record_id.startswith("lamb_t1_")
            and r.optimizer == "LAMB"
            and r.record_id != "lamb_t1_64k32k"
        ),
        key=lambda r: r.devices,
    )
    return {
        "devices": np.array([r.devices for r in rows]),
        "global_batch_size": np.array([r.global_batch_size for r in rows]),
        "iterations": np.array([r.iterations for r in rows]),
        "time_minutes": np.array([r.time_minutes for r in rows]),
    }


# ------------------------------------------------------------------ hardware.csv
@dataclass(frozen=True)
class HardwareDevice:
    """One row of ``data/hardware.csv``: a device the course names, with its sources.

    Throughputs are in TFLOP/s (10^12 floating-point operations per second, an FMA
    counted as 2), bandwidths in GB/s (10^9 bytes per second), memory in GB as the
    vendor states it.
    """

    device_id: str
    device: str
    kind: str
    """One of ``cpu_core``, ``cpu_socket``, ``gpu``, ``tpu_chip``."""
    year: int
    peak_fp32_tflops: float | None
    peak_tensor_tflops: float | None
    """Dense matrix-unit peak at ``tensor_precision`` (no structured sparsity)."""
    tensor_precision: str | None
    memory_bandwidth_gb_s: float
    memory_gib: float | None
    """Memory capacity in GiB (2**30 bytes): a "32GB" V100 holds 32 GiB = 34.4e9 bytes."""
    link_bandwidth_gb_s: float | None
    """Device-to-device link (NVLink/NVSwitch), total over both directions."""
    node_gpus: int | None
    """Devices per server (the DGX-2H of the BERT record: 16)."""
    node_network_gb_s: float | None
    """One server's network bandwidth to the others (all its NICs), both directions together."""
    sustained_fraction: float
    """Typical fraction of the peak named by ``sustained_of`` reached in training."""
    sustained_of: str
    """``fp32`` or ``tensor``: which peak ``sustained_fraction`` applies to."""
    sustained_estimate: bool
    """True when ``sustained_fraction`` is an assumption rather than a published measurement."""
    sustained_basis: str
    source: str
    note: str | None

    @property
    def peak_tflops(self) -> float:
        """The peak that ``sustained_fraction`` refers to (tensor or FP32), TFLOP/s."""
        value = self.peak_tensor_tflops if self.sustained_of == "tensor" else self.peak_fp32_tflops
        if value is None:  # guarded by the loader; kept for hand-built instances
            raise ValueError(f"{self.device_id}: no {self.sustained_of} peak given")
        return value

    @property
    def sustained_tflops(self) -> float:
        """Typical sustained training throughput: ``sustained_fraction * peak_tflops``."""
        return self.sustained_fraction * self.peak_tflops

    @property
    def memory_bytes(self) -> float | None:
        """:attr:`memory_gib` in bytes (None where the table gives no memory).

        Examples
        --------
        >>> get_device("v100_sxm2_32gb").memory_bytes / 1e9
        34.359738368
        """
        return None if self.memory_gib is None else self.memory_gib * 2**30

    @property
    def sustained_flops(self) -> float:
        """:attr:`sustained_tflops` in FLOP/s (for :func:`course_lib.cost.training_time`)."""
        return self.sustained_tflops * 1e12


_DEVICE_KINDS = ("cpu_core", "cpu_socket", "gpu", "tpu_chip")


def load_hardware() -> tuple[HardwareDevice, ...]:
    """Devices of the course with peak and typical sustained throughput (``data/hardware.csv``).

    Every row cites its source; ``sustained_estimate`` marks assumed utilisations.

    Examples
    --------
    >>> hw = {d.device_id: d for d in load_hardware()}
    >>> hw["v100_sxm2_32gb"].peak_tensor_tflops, hw["v100_sxm2_32gb"].memory_bandwidth_gb_s
    (125.0, 900.0)
    >>> round(hw["v100_sxm2_32gb"].sustained_tflops, 1)
    37.5
    """
    rows = read_csv("hardware.csv", HardwareDevice)
    path = data_dir() / "hardware.csv"
    seen: set[str] = set()
    for line_no, d in enumerate(rows, start=2):
        where = f"{path}, line {line_no}"
        if d.device_id in seen:
            raise DataFileError(f"{where}: duplicate device_id {d.device_id!r}")
        seen.add(d.device_id)
        if d.kind not in _DEVICE_KINDS:
            raise DataFileError(f"{where}: kind must be one of {_DEVICE_KINDS}, got {d.kind!r}")
        if d.sustained_of not in ("fp32", "tensor"):
            raise DataFileError(f"{where}: sustained_of must be 'fp32' or 'tensor', got {d.sustained_of!r}")
        if not 0.0 < d.sustained_fraction <= 1.0:
            raise DataFileError(f"{where}: sustained_fraction must be in (0, 1], got {d.sustained_fraction}")
        peak = d.peak_tensor_tflops if d.sustained_of == "tensor" else d.peak_fp32_tflops
        if peak is None or peak <= 0:
            raise DataFileError(f"{where}: sustained_of={d.sustained_of!r} needs a positive peak")
        if (d.peak_tensor_tflops is None) != (d.tensor_precision is None):
            raise DataFileError(f"{where}: peak_tensor_tflops and tensor_precision go together")
    return rows


def get_device(device_id: str) -> HardwareDevice:
    """The row of ``data/hardware.csv`` with this ``device_id``.

    Examples
    --------
    >>> get_device("tpuv3_chip").peak_tensor_tflops
    123.0
    """
    devices = load_hardware()
    for d in devices:
        if d.device_id == device_id:
            return d
    known = ", ".join(d.device_id for d in devices)
    raise ValueError(f"device_id must be one of {known}; got {device_id!r}")


# ---------------------------------------------------------------- dnn_models.csv
@dataclass(frozen=True)
class DnnModel:
    """One row of ``data/dnn_models.csv``: a model of Bianco et al. (2018)'s figure.

    ``gmacs_per_forward`` counts multiply-accumulates (10^9 MACs) of one forward pass
    of one image; 1 MAC = 2 FLOPs. (The source figure labels this axis "G-FLOPs".)
    """

    model: str
    family: str
    top1_pct: float | None
    top5_pct: float
    gmacs_per_forward: float
    params_million: float
    input_px: int
    accuracy_source: str
    complexity_source: str
    note: str | None

    @property
    def gflops_per_forward(self) -> float:
        """Forward-pass cost in GFLOPs (2 FLOPs per multiply-accumulate)."""
        return 2.0 * self.gmacs_per_forward


def load_dnn_models() -> tuple[DnnModel, ...]:
    """ImageNet models with accuracy, compute and size (``data/dnn_models.csv``).

    Examples
    --------
    >>> models = {m.model: m for m in load_dnn_models()}
    >>> models["ResNet-50"].gmacs_per_forward, models["ResNet-50"].gflops_per_forward
    (4.089, 8.178)
    >>> len(models), sorted({m.family for m in models.values()})[:3]
    (44, ['AlexNet', 'DPN', 'DenseNet'])
    """
    rows = read_csv("dnn_models.csv", DnnModel)
    path = data_dir() / "dnn_models.csv"
    seen: set[str] = set()
    for line_no, m in enumerate(rows, start=2):
        where = f"{path}, line {line_no}"
        if m.model in seen:
            raise DataFileError(f"{where}: duplicate model {m.model!r}")
        seen.add(m.model)
        for name in ("top1_pct", "top5_pct"):
            value = getattr(m, name)
            if value is not None and not 0.0 < value <= 100.0:
                raise DataFileError(f"{where}: {name} must be in (0, 100], got {value}")
        if m.top1_pct is not None and m.top1_pct > m.top5_pct:
            raise DataFileError(f"{where}: top1_pct {m.top1_pct} exceeds top5_pct {m.top5_pct}")
        if m.gmacs_per_forward <= 0 or m.params_million <= 0 or m.input_px <= 0:
            raise DataFileError(f"{where}: gmacs_per_forward, params_million, input_px must be > 0")
    return rows


# ----------------------------------------------------------- megatron_configs.csv
@dataclass(frozen=True)
class MegatronConfig:
    """One row of ``data/megatron_configs.csv``: a GPT configuration of Narayanan et al.
    (SC 2021), Table 1, with the settings of the run script that produced it."""

    model: str
    params_billion: float
    attention_heads: int
    hidden_size: int
    layers: int
    tensor_parallel: int
    pipeline_parallel: int
    gpus: int
    batch_size: int
    micro_batch_size: int
    layers_per_virtual_stage: int | None
    """Layers per model chunk of the interleaved 1F1B schedule (None: not interleaved)."""
    activation_recomputation: str
    achieved_tflops_per_gpu: float
    peak_pct: float
    aggregate_pflops: float
    sequence_length: int
    vocab_size: int
    device_id: str
    source: str
    note: str | None
    train_tokens_billion: float | None = None
    """Tokens of the paper's end-to-end training-time estimate (the 1T row only)."""
    reported_train_days: float | None = None
    """The training time the paper reports for that estimate, days."""


def load_megatron_configs() -> tuple[MegatronConfig, ...]:
    """Published Megatron-LM configurations, 1.7 billion to 1 trillion parameters.

    Checks that the parallel sizes divide the GPUs, layers and batch as a run needs
    (model names are unique by the schema, ``validate_data``).

    Examples
    --------
    >>> rows = {c.model: c for c in load_megatron_configs()}
    >>> one_t = rows["1T"]
    >>> one_t.tensor_parallel, one_t.pipeline_parallel, one_t.gpus, one_t.achieved_tflops_per_gpu
    (8, 64, 3072, 163.0)
    """
    rows = read_csv("megatron_configs.csv", MegatronConfig)
    for line_no, c in enumerate(rows, start=2):
        where = f"{data_dir() / 'megatron_configs.csv'}, line {line_no}"
        tp, per_stage = c.tensor_parallel * c.pipeline_parallel, c.layers // max(c.pipeline_parallel, 1)
        if min(c.hidden_size, c.layers, tp, c.gpus, c.micro_batch_size, c.layers_per_virtual_stage or 1) < 1:
            raise DataFileError(f"{where}: sizes and counts must be >= 1")
        if c.gpus % tp or c.layers % c.pipeline_parallel or c.batch_size % (c.gpus // tp * c.micro_batch_size):
            raise DataFileError(f"{where}: t x p must divide gpus, p the layers, d x micro_batch_size the batch")
        if per_stage % (c.layers_per_virtual_stage or 1) or c.activation_recomputation not in ("none", "full"):
            raise DataFileError(f"{where}: bad layers_per_virtual_stage or activation_recomputation")
    return rows



# ----------------------------------------------------------- parallel_layouts.csv
@dataclass(frozen=True)
class ParallelLayout:
    """One row of ``data/parallel_layouts.csv``: the parallel layout of a published run
    (Llama 3 405B's long-context stage, DeepSeek-V3's pre-training)."""

    model: str
    stage: str
    params_billion: float
    active_params_billion: float
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int | None
    sequence_length: int
    gpus: int
    device: str
    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    data_parallel: int | None
    expert_parallel: int
    moe_layers: int
    routed_experts: int
    shared_experts: int
    active_experts: int
    expert_ffn_size: int | None
    max_nodes_per_token: int | None
    network_gb_per_s: float
    """One GPU's network bandwidth to the other nodes, GB/s."""
    source: str
    note: str | None


def load_parallel_layouts() -> tuple[ParallelLayout, ...]:
    """Published parallel layouts (context and expert parallelism at scale).

    Checks that the parallel degrees fit the run: ``N_t N_c N_p`` (and ``N_d``, if given)
    divide the GPUs, ``N_c`` the sequence, ``N_e`` the routed experts, ``k_top`` at most ``E``.

    Examples
    --------
    >>> rows = {r.model: r for r in load_parallel_layouts()}
    >>> rows["Llama 3 405B"].context_parallel, rows["DeepSeek-V3"].expert_parallel
    (16, 64)
    """
    rows = read_csv("parallel_layouts.csv", ParallelLayout)
    for line_no, r in enumerate(rows, start=2):
        where = f"{data_dir() / 'parallel_layouts.csv'}, line {line_no}"
        grid = r.tensor_parallel * r.context_parallel * r.pipeline_parallel * (r.data_parallel or 1)
        if r.gpus % grid or (r.data_parallel and grid != r.gpus) or r.sequence_length % r.context_parallel:
            raise DataFileError(f"{where}: N_t x N_c x N_p (x N_d) must divide (equal) the GPUs, N_c the sequence")
        if r.routed_experts % r.expert_parallel or r.active_experts > r.routed_experts or r.gpus % r.expert_parallel:
            raise DataFileError(f"{where}: N_e must divide the routed experts and the GPUs, k_top <= E")
    return rows

# ----------------------------------------------------------- failure_records.csv
@dataclass(frozen=True)
class FailureRecord:
    """One row of ``data/failure_records.csv``: a published run's job interruptions over ``days``."""

    run: str
    gpus: int
    device: str
    days: float
    unexpected_interruptions: int
    planned_interruptions: int | None
    hardware_share_pct: float | None
    effective_training_pct: float | None
    storage_tb_per_s: float | None
    source: str
    note: str | None


def load_failure_records() -> tuple[FailureRecord, ...]:
    """Published interruption counts of large training runs (:mod:`course_lib.failures`).

    >>> {r.run: r for r in load_failure_records()}["Llama 3 405B pre-training"].unexpected_interruptions
    419
    """
    return read_csv("failure_records.csv", FailureRecord)


# ---------------------------------------------------------------- cpu_trends.csv
@dataclass(frozen=True)
class _TrendPoint:
    series: str
    year: float
    value: float
    unit: str


#: Series of ``data/cpu_trends.csv`` and their units (K. Rupp / Horowitz et al., CC BY 4.0).
CPU_TREND_SERIES: dict[str, str] = {
    "transistors_thousands": "thousands of transistors",
    "single_thread_specint_x1000": "SpecINT x 1000 (single thread)",
    "frequency_mhz": "MHz",
    "typical_power_w": "W",
    "logical_cores": "count",
}


@dataclass(frozen=True)
class CpuTrend:
    """One series of the microprocessor trend data: ``year`` and ``value`` arrays, sorted by year."""

    series: str
    unit: str
    year: np.ndarray
    value: np.ndarray

    def __len__(self) -> int:
        return int(self.year.shape[0])


#: Attribution that must accompany any use of ``data/cpu_trends.csv`` (CC BY 4.0).
CPU_TRENDS_ATTRIBUTION = (
    "Microprocessor trend data: K. Rupp, https://github.com/karlrupp/microprocessor-trend-data "
    "(CC BY 4.0); data up to 2010 by M. Horowitz, F. Labonte, O. Shacham, K. Olukotun, "
    "L. Hammond and C. Batten; 2010-2021 by K. Rupp."
)


def load_cpu_trends() -> dict[str, CpuTrend]:
    """50 years of microprocessor trends, one :class:`CpuTrend` per series.

    Keys are those of :data:`CPU_TREND_SERIES`. Any use must carry
    :data:`CPU_TRENDS_ATTRIBUTION`.

    Examples
    --------
    >>> trends = load_cpu_trends()
    >>> sorted(trends) == sorted(CPU_TREND_SERIES)
    True
    >>> f = trends["frequency_mhz"]
    >>> f.unit, int(f.year.min()), bool(f.value.max() < 10_000)
    ('MHz', 1971, True)
    """
    points = read_csv("cpu_trends.csv", _TrendPoint)
    path = data_dir() / "cpu_trends.csv"
    grouped: dict[str, list[tuple[float, float]]] = {s: [] for s in CPU_TREND_SERIES}
    for line_no, p in enumerate(points, start=2):
        where = f"{path}, line {line_no}"
        if p.series not in CPU_TREND_SERIES:
            raise DataFileError(f"{where}: unknown series {p.series!r}")
        if p.unit != CPU_TREND_SERIES[p.series]:
            raise DataFileError(
                f"{where}: unit of {p.series} must be {CPU_TREND_SERIES[p.series]!r}, got {p.unit!r}"
            )
        if not (1950.0 <= p.year <= 2100.0) or not (p.value > 0 and np.isfinite(p.value)):
            raise DataFileError(f"{where}: year must be in [1950, 2100] and value > 0")
        grouped[p.series].append((p.year, p.value))
    result = {}
    for series, pairs in grouped.items():
        if not pairs:
            raise DataFileError(f"{path}: series {series} has no data")
        arr = np.array(sorted(pairs), dtype=np.float64)
        result[series] = CpuTrend(series, CPU_TREND_SERIES[series], arr[:, 0], arr[:, 1])
    return result


# ------------------------------------------------------------------ glossary.csv
@dataclass(frozen=True)
class GlossaryEntry:
    """One row of ``data/glossary.csv``: a key concept of the course."""

    term: str
    term_zh: str
    zh_from_source: bool
    """True when ``term_zh`` is the source chapter's own wording (AI-System ch. 6)."""
    definition: str
    chapter: int
    source_section: str | None
    """Section of the source chapter where the Chinese term appears (e.g. ``6.2.3``)."""


#: The course's notebooks are numbered 01 to 12 (12: the appendix); a glossary or notation row's
#: chapter is one of them.
LAST_CHAPTER = 17


def load_glossary(chapter: int | None = None) -> tuple[GlossaryEntry, ...]:
    """Key terms in English and Chinese with a one-line definition (``data/glossary.csv``).

    Parameters
    ----------
    chapter : int, optional
        Only the terms introduced in this course chapter (1 to ``LAST_CHAPTER``).

    Examples
    --------
    >>> {e.term: e.term_zh for e in load_glossary()}["speedup"]
    '加速比'
    >>> all(e.chapter == 5 for e in load_glossary(5))
    True
    """
    if chapter is not None:
        chapter = check_int(chapter, "chapter", 1, LAST_CHAPTER)
    rows = read_csv("glossary.csv", GlossaryEntry)
    path = data_dir() / "glossary.csv"
    seen: set[str] = set()
    for line_no, e in enumerate(rows, start=2):
        if e.term in seen:
            raise DataFileError(f"{path}, line {line_no}: duplicate term {e.term!r}")
        seen.add(e.term)
        if not 1 <= e.chapter <= LAST_CHAPTER:
            raise DataFileError(f"{path}, line {line_no}: chapter must be in [1, {LAST_CHAPTER}], got {e.chapter}")
    return tuple(e for e in rows if chapter is None or e.chapter == chapter)


def glossary_markdown(chapter: int) -> str:
    """A Markdown table of one chapter's terms (English, 中文, definition) for a notebook.

    Examples
    --------
    >>> print(glossary_markdown(2).splitlines()[0])
    | term | 中文 | definition |
    """
    lines = [f"| {tr('term', context='glossary')} | 中文 | {tr('definition', context='glossary')} |", "|---|---|---|"]
    for e in load_glossary(chapter):
        lines.append(f"| {e.term} | {e.term_zh} | {e.definition} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ notation.csv
@dataclass(frozen=True)
class NotationEntry:
    """One row of ``data/notation.csv``: a symbol of the course and its one meaning."""

    symbol: str
    """The symbol as LaTeX (``\\eta``, ``N_d``, ``\\mathcal{M}``)."""
    text: str
    """The symbol in plain text or Unicode, as figure labels write it (``η``, ``N_d``, ``ℳ``)."""
    meaning: str
    unit: str
    chapter: int
    replaces: str | None
    """What earlier versions of the course (or the sources) wrote for it, if anything."""


def load_notation() -> tuple[NotationEntry, ...]:
    """The course's notation table (``data/notation.csv``): one symbol, one meaning.

    Examples
    --------
    >>> {e.symbol: e.meaning for e in load_notation()}["N_p"]
    'pipeline-parallel degree: pipeline stages'
    """
    rows = read_csv("notation.csv", NotationEntry)
    path = data_dir() / "notation.csv"
    seen: set[str] = set()
    for line_no, e in enumerate(rows, start=2):
        for key in {e.symbol, e.text}:
            if key in seen:
                raise DataFileError(f"{path}, line {line_no}: symbol {key!r} has a second meaning")
            seen.add(key)
    return rows


def notation_markdown() -> str:
    """The notation page (``notebooks/notation.md``), generated from ``data/notation.csv``.

    ``python -m course_lib notation`` writes it; a test keeps the page and the table equal.

    Examples
    --------
    >>> notation_markdown().splitlines()[0]
    '# Notation (符号表)'
    """
    lines = [
        "# Notation (符号表)",
        "",
        "One symbol, one meaning, in every chapter, figure and docstring of the course. "
        "The table is `data/notation.csv`; this page is generated from it "
        "(`python -m course_lib notation`). Where a source writes another letter "
        "(the chapter's im2col figure, ZeRO's Ψ, Megatron-LM's p and t), the last column "
        "says so. Chapter = where the symbol first appears.",
        "",
        "| symbol | meaning | unit | chapter | instead of |",
        "|---|---|---|---|---|",
    ]
    for e in sorted(load_notation(), key=lambda e: (e.chapter, e.symbol.lower())):
        lines.append(f"| ${e.symbol}$ | {e.meaning} | {e.unit} | {e.chapter:02d} | {e.replaces or ''} |")
    return "\n".join(lines) + "\n"
