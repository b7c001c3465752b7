"""Reference runs: the course's experiments measured on a named machine, to plot beside your own.

``python -m benchmarks reference --out data/reference/NAME.json`` runs the measuring
experiments of the course at N = 1, 2, 4, 8, 16 ... (up to the machine's cores) and writes
one JSON file (its schema: the ``reference`` entry of ``data/datapackage.json``, under
``measurements``; ``data/README.md`` names the machine, date and command of each file).
A notebook never parses such a file: :func:`load_reference` returns plain dicts, the lists
of numbers as numpy arrays, and :func:`experiment_result` one experiment's result (None
where it failed, was skipped or was not run).

What each chapter plots beside the learner's run (``r = experiment_result(ref, NAME)``):

=====================  ==============================================================
chapter, ``NAME``      fields of ``r``
=====================  ==============================================================
01 ``"pool"``          ``processes`` (N), ``seconds``, ``serial_seconds``, ``speedup``
                       (paired, as ``measure_parallel_speedup``), ``speedup_of_medians``
                       (= serial_seconds / seconds), ``efficiency``
05 ``"threads"``       ``threads`` (N); ``gemm["seconds"]``, ``gemm["speedup"]`` (1024²);
                       ``conv["seconds"]``, ``conv["speedup"]`` (im2col, 16x64x56x56);
                       ``conv_amdahl["p"]``
06 ``"roofline"``      ``one_core["peak_flops"]``, ``one_core["memory_bandwidth"]``,
                       ``cache_bandwidth``; ``gemm_rate_by_threads`` (``threads``,
                       ``flops_per_second``); ``training_steps`` (per batch:
                       ``intensity``, ``measured_rate``, ``predicted_rate``);
                       ``operators`` (``name``, ``flops``, ``nbytes``, ``intensity``)
07 ``"scaling"``       ``runs``, one per global batch (1024 and 8192): ``workers``,
                       ``strong_time``, ``strong_speedup`` (= serial_strong /
                       strong_time), ``weak_time``, ``weak_speedup``, ``karp_flatt``,
                       ``amdahl["p"]``, ``gustafson_p``
08 ``"collectives"``   ``runs``, one per N >= 2: ``message_bytes``, ``seconds`` (the
                       all-reduce), ``fit["alpha"]`` (s), ``fit["beta"]`` (B/s)
08 ``"overlap"``       ``runs`` (shared memory, per N): ``buckets``, ``measured_step``,
                       ``model_overlapped``, ``model_sequential``; ``wire_runs`` (the
                       modelled wire, per N): ``rows`` with ``measured_s``, ``model_s``
11 ``"pipeline"``      ``runs``: ``stages``, ``schedule``, ``micro_batches``,
                       ``bubble_measured``, ``bubble_formula``, ``bubble_simulated``
12 ``"tensor"``        ``runs``: ``workers``, ``time_per_step``, ``serial_time_per_step``,
                       ``speedup``, ``communication_share``
13 ``"hybrid"``        ``serial_time_per_step``; ``runs``: ``data``, ``processes``,
                       ``time_per_step``, ``speedup``, ``oversubscribed``
05/06 ``"conv"``       ``layers`` (ResNet-50's 3x3): ``by_threads`` with ``seconds`` per
                       algorithm and the ``fastest``, at 1 thread and all cores
03/06 ``"gpu_roofline"``  ``peaks[dtype]["flops_per_second"]`` (float32, tf32, bfloat16),
                       ``memory["bytes_per_second"]``; ``operators`` (``group``, ``name``,
                       ``intensity``, ``achieved_flops``, ``eta``, ``bound``): the
                       running example's and a BERT-Large layer's, on that roofline
05/06 ``"gpu_conv"``   ``layers``: ``by_dtype[dtype]`` with ``seconds``,
                       ``flops_per_second``, ``main`` (the kernel cuDNN ran) and
                       ``main_seconds`` (its time per call), and the same for NHWC
                       tensors under ``channels_last`` (no layout transposes)
=====================  ==============================================================

Every file also holds ``provenance`` (``cpu``, ``command``, ``date_utc`` ...; see
:func:`reference_label`) and ``cores_check`` (``start`` and ``end``: was the machine free).

Examples
--------
>>> isinstance(available_references(), list)
True
>>> reference_label({"provenance": {"cpu": {"model": "Intel Xeon", "usable_cores": 16},
...                                 "date_utc": "2026-11-28T10:00:00Z"},
...                  "experiments": {"gpu_roofline": {"status": "ok",
...                                                   "result": {"device": {"name": "NVIDIA H100"}}}}})
'Intel Xeon, 16 cores + NVIDIA H100 (2026-11-28)'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .datasets import DataFileError, data_dir
from .i18n import tr

__all__ = ["available_references", "experiment_result", "load_reference", "reference_label"]

#: What a reference file says it is, and the layout this module reads.
FORMAT, SCHEMA_VERSION = "ddl-course reference run", 1
#: Lists kept as tuples (shapes and layer sizes), not turned into arrays.
_TUPLE_KEYS = frozenset({"x_shape", "w_shape", "sizes", "model", "boundaries", "argv", "workers_list"})


def _reference_dir() -> Path:
    return data_dir() / "reference"


def available_references(folder: str | Path | None = None) -> list[str]:
    """Names of the reference files (``NAME`` of ``NAME.json``), sorted: those of
    ``data/reference/``, or of ``folder`` (a folder of your own runs; empty if it is none)."""
    if folder is not None and not isinstance(folder, (str, Path)):
        raise TypeError(f"folder must be a path (str or pathlib.Path) or None, got {type(folder).__name__}")
    folder = _reference_dir() if folder is None else Path(folder)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def _arrays(value: Any, key: str = "") -> Any:
    """Lists of numbers as numpy arrays (None as NaN), recursively; shapes and sizes as tuples."""
    if isinstance(value, dict):
        return {k: _arrays(v, k) for k, v in value.items()}
    if isinstance(value, list):
        if key in _TUPLE_KEYS:
            return tuple(value)
        numbers = value and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                                for v in value)
        if numbers:
            if all(isinstance(v, int) for v in value):
                return np.array(value, dtype=np.int64)
            return np.array([np.nan if v is None else v for v in value], dtype=float)
        return [_arrays(v) for v in value]
    return value


def load_reference(name: str) -> dict:
    """The reference file ``name``: one of :func:`available_references`, or a path to a
    ``.json`` file written by ``python -m benchmarks reference`` (your own run).

    Returns the file's content as dicts, with every list of numbers as a numpy array
    (missing values as NaN) and shapes and layer sizes as tuples.

    Raises
    ------
    course_lib.datasets.DataFileError
        No such reference, or a file that is no reference run (the message names it).
    """
    if not isinstance(name, (str, Path)):
        raise TypeError(f"name must be a reference name (str) or a path, got {type(name).__name__}")
    if isinstance(name, str) and name in available_references():
        path = _reference_dir() / f"{name}.json"
    elif str(name).endswith(".json"):
        path = Path(name)
    else:
        raise DataFileError(f"no reference named {str(name)!r}; available: {available_references()} "
                            "(or give the path of a .json file)")
    if not path.is_file():
        raise DataFileError(f"{path}: file not found")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataFileError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataFileError(f"{path}: not a reference run (its 'format' must be {FORMAT!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise DataFileError(f"{path}: schema_version {doc.get('schema_version')!r}, this course reads "
                            f"{SCHEMA_VERSION}")
    return _arrays(doc)


def _check_reference(ref) -> dict:
    if not isinstance(ref, dict) or not isinstance(ref.get("provenance"), dict):
        raise TypeError(f"ref must be a reference run (load_reference(name)), got {type(ref).__name__}")
    return ref


def experiment_result(ref: dict, name: str) -> dict | None:
    """The ``result`` of experiment ``name`` in ``ref`` (see the table above), or None where it
    failed, was skipped or was not run.

    >>> experiment_result({"provenance": {}, "experiments": {"pool": {"status": "failed"}}}, "pool") is None
    True
    """
    ref = _check_reference(ref)
    if not isinstance(name, str):
        raise TypeError(f"name must be an experiment name (str), got {type(name).__name__}")
    entry = (ref.get("experiments") or {}).get(name)
    if not isinstance(entry, dict) or entry.get("status") not in ("ok", "partial"):
        return None
    return entry.get("result")


def reference_label(ref: dict) -> str:
    """A plot label for ``ref``: CPU model, usable cores, the GPU if one was measured, the date."""
    prov = _check_reference(ref)["provenance"]
    cpu = prov.get("cpu") or {}
    label = tr("{cpu}, {cores} cores", cpu=cpu.get("model") or tr("unknown CPU"), cores=cpu.get("usable_cores", "?"))
    gpu = experiment_result(ref, "gpu_roofline")
    if gpu and str((gpu.get("device") or {}).get("device", "cuda")).startswith("cuda"):
        label += f" + {gpu['device'].get('name', 'GPU')}"
    date = str(prov.get("date_utc") or "")[:10]
    return tr("{machine} ({date})", machine=label, date=date) if date else label
