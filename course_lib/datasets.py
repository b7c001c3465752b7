"""Loaders for the course data in ``data/`` (numpy and the csv module only).

Every loader checks what it reads and raises ``DataFileError`` (a ``ValueError``)
naming the file, and the line where it applies, when a file is missing or malformed.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DataFileError",
    "Digits",
    "TrainingRecord",
    "data_dir",
    "lamb_scaling_table",
    "load_digits",
    "load_training_records",
    "read_csv",
]


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
        raise DataFileError(
            f"course data directory not found: {path} (set DDL_COURSE_DATA or run from a clone)"
        )
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


def read_csv(name: str, record_type: type) -> tuple[Any, ...]:
    """Read ``data/<name>`` into a tuple of ``record_type`` dataclass instances.

    The header must list exactly the dataclass's fields, in order. A field annotated
    ``X | None`` may be empty (giving ``None``); any other empty cell, a value that does
    not parse, or a wrong header raises :class:`DataFileError` naming file and line.
    """
    path = data_dir() / name
    if not path.is_file():
        raise DataFileError(f"{path}: file not found")
    spec = [(f.name, _field_type(f.type)) for f in fields(record_type)]
    rows = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        expected = [n for n, _ in spec]
        if header != expected:
            raise DataFileError(f"{path}, line 1: header must be {expected}, got {header}")
        for line_no, row in enumerate(reader, start=2):
            if len(row) != len(spec):
                raise DataFileError(
                    f"{path}, line {line_no}: expected {len(spec)} cells, got {len(row)}"
                )
            values = {}
            for (field_name, (typ, optional)), cell in zip(spec, row):
                cell = cell.strip()
                if cell == "":
                    if not optional:
                        raise DataFileError(f"{path}, line {line_no}: {field_name} is empty")
                    values[field_name] = None
                    continue
                try:
                    values[field_name] = _PARSERS[typ](cell)
                except ValueError as exc:
                    raise DataFileError(
                        f"{path}, line {line_no}: {field_name} = {cell!r} is not a valid "
                        f"{typ.__name__} ({exc})"
                    ) from exc
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
