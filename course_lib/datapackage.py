"""Checks of ``data/`` against its machine-readable schema, ``data/datapackage.json``.

:func:`validate_data` checks every file (CSV and npz) against the schema and returns the
problems, each naming file and line; the tests call it, and so does a maintainer after
editing a data file. The loaders themselves are in :mod:`course_lib.datasets`.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .datasets import DataFileError, data_dir

__all__ = ["load_data_package", "validate_data"]

_TRUE, _FALSE = ("true", "True", "TRUE"), ("false", "False", "FALSE")


def load_data_package() -> dict[str, Any]:
    """The machine-readable schema of ``data/`` (``data/datapackage.json``, Frictionless style)."""
    import json

    path = data_dir() / "datapackage.json"
    if not path.is_file():
        raise DataFileError(f"{path}: file not found")
    try:
        package = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}, line {exc.lineno}: invalid JSON ({exc.msg})") from exc
    if not isinstance(package.get("resources"), list):
        raise DataFileError(f"{path}: needs a 'resources' list")
    return package


def validate_data(names: Sequence[str] | None = None) -> list[str]:
    """Check data files against ``data/datapackage.json``; return the problems found.

    For CSV resources: the header lists exactly the schema's fields in order; every
    cell parses as its field's type (string, number, integer, boolean); required
    cells are not empty; values respect ``minimum``, ``maximum`` and ``enum``; fields
    marked ``unique`` (and the primary key) have no repeats; the row count lies in
    the resource's ``rows`` range if given. For ``npz`` resources: every listed
    array exists with its dtype, shape (``null`` = any length) and value range, and
    no object arrays are needed to read it. Every resource must name its sources
    and licences.

    Parameters
    ----------
    names : sequence of str, optional
        Resource names to check (default: all).

    Returns
    -------
    list of str
        One message per problem, each naming file and line; empty when all is well.

    Examples
    --------
    >>> validate_data()
    []
    """
    package = load_data_package()
    resources = package["resources"]
    known = [r.get("name") for r in resources]
    if names is not None:
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"names must be among {known}, got unknown {unknown}")
        resources = [r for r in resources if r.get("name") in names]
    problems: list[str] = []
    for res in resources:
        path = data_dir() / str(res.get("path", ""))
        if not res.get("sources") or not res.get("licenses"):
            problems.append(f"{path}: resource {res.get('name')!r} must list sources and licenses")
        if not path.is_file():
            problems.append(f"{path}: file not found")
            continue
        if res.get("format") == "npz":
            problems.extend(_validate_npz(path, res))
        else:
            problems.extend(_validate_csv(path, res))
    return problems


def _validate_csv(path: Path, res: dict[str, Any]) -> list[str]:
    fields_ = res.get("schema", {}).get("fields", [])
    names = [f["name"] for f in fields_]
    problems: list[str] = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header != names:
            return [f"{path}, line 1: header must be {names}, got {header}"]
        primary = res.get("schema", {}).get("primaryKey")
        unique = {f["name"] for f in fields_ if f.get("constraints", {}).get("unique")}
        if primary:
            unique.add(primary)
        seen: dict[str, set[str]] = {n: set() for n in unique}
        n_rows = 0
        for line_no, row in enumerate(reader, start=2):
            n_rows += 1
            if len(row) != len(names):
                problems.append(f"{path}, line {line_no}: expected {len(names)} cells, got {len(row)}")
                continue
            for spec, cell in zip(fields_, row, strict=True):
                msg = _check_cell(spec, cell.strip())
                if msg:
                    problems.append(f"{path}, line {line_no}: {spec['name']} {msg}")
                if spec["name"] in seen and cell.strip():
                    if cell.strip() in seen[spec["name"]]:
                        problems.append(f"{path}, line {line_no}: {spec['name']} {cell!r} repeats")
                    seen[spec["name"]].add(cell.strip())
    low, high = res.get("rows", [0, None]) if isinstance(res.get("rows"), list) else (0, None)
    if n_rows < (low or 0) or (high is not None and n_rows > high):
        problems.append(f"{path}: {n_rows} data rows, expected between {low} and {high}")
    return problems


def _check_cell(spec: dict[str, Any], cell: str) -> str | None:
    cons = spec.get("constraints", {})
    if cell == "":
        return "is empty but required" if cons.get("required") else None
    kind = spec.get("type", "string")
    value: Any
    if kind == "string":
        value = cell
    elif kind == "boolean":
        if cell not in _TRUE + _FALSE:
            return f"= {cell!r} is not a boolean (true/false)"
        value = cell in _TRUE
    elif kind in ("number", "integer"):
        try:
            value = int(cell) if kind == "integer" else float(cell)
        except ValueError:
            return f"= {cell!r} is not a valid {kind}"
        if kind == "number" and not np.isfinite(value):
            return f"= {cell!r} is not finite"
    else:
        return f"has unsupported type {kind!r} in the schema"
    if "enum" in cons and value not in cons["enum"]:
        return f"= {cell!r} is not one of {cons['enum']}"
    if "minimum" in cons and value < cons["minimum"]:
        return f"= {cell} is below the minimum {cons['minimum']}"
    if "maximum" in cons and value > cons["maximum"]:
        return f"= {cell} is above the maximum {cons['maximum']}"
    if "exclusiveMinimum" in cons and value <= cons["exclusiveMinimum"]:
        return f"= {cell} must be > {cons['exclusiveMinimum']}"
    return None


def _validate_npz(path: Path, res: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (ValueError, OSError) as exc:
        return [f"{path}: cannot read with allow_pickle=False ({exc})"]
    specs = res.get("arrays", [])
    lengths = set()
    for spec in specs:
        name = spec["name"]
        if name not in arrays:
            problems.append(f"{path}: array {name!r} missing")
            continue
        arr = arrays[name]
        if str(arr.dtype) != spec["dtype"]:
            problems.append(f"{path}: {name} dtype must be {spec['dtype']}, got {arr.dtype}")
        shape = spec["shape"]
        if len(shape) != arr.ndim or any(s is not None and s != a for s, a in zip(shape, arr.shape, strict=True)):
            problems.append(f"{path}: {name} shape must be {shape}, got {list(arr.shape)}")
        if arr.ndim:
            lengths.add(arr.shape[0])
        if arr.size and ("minimum" in spec and arr.min() < spec["minimum"]):
            problems.append(f"{path}: {name} minimum {arr.min()} below {spec['minimum']}")
        if arr.size and ("maximum" in spec and arr.max() > spec["maximum"]):
            problems.append(f"{path}: {name} maximum {arr.max()} above {spec['maximum']}")
    extra = set(arrays) - {s["name"] for s in specs}
    if extra:
        problems.append(f"{path}: arrays not in the schema: {sorted(extra)}")
    if len(lengths) > 1:
        problems.append(f"{path}: arrays disagree on the number of samples {sorted(lengths)}")
    if "rows" in res and lengths and lengths != {res["rows"]}:
        problems.append(f"{path}: expected {res['rows']} samples, got {sorted(lengths)}")
    return problems
