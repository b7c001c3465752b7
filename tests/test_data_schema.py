"""Every file in data/ against data/datapackage.json, and the validator against broken copies."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from data_support import data_copy_fixture  # noqa: F401 - the data_copy fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import datapackage as dp
from course_lib import datasets as ds

DATA = Path(__file__).resolve().parent.parent / "data"
PACKAGE = json.loads((DATA / "datapackage.json").read_text(encoding="utf-8"))
RESOURCES = {r["name"]: r for r in PACKAGE["resources"]}
RECORD_TYPES = {
    "hardware": ds.HardwareDevice,
    "dnn_models": ds.DnnModel,
    "training_records": ds.TrainingRecord,
    "glossary": ds.GlossaryEntry,
    "megatron_configs": ds.MegatronConfig,
}


def test_every_data_file_validates():
    assert dp.validate_data() == []


def test_every_file_in_data_is_described():
    described = {r["path"] for r in PACKAGE["resources"]}
    files = {p.name for p in DATA.iterdir() if p.is_file()} - {"README.md", "datapackage.json"}
    assert files == described
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for path in described:
        section = readme.split(f"\n## {path}\n", 1)
        assert len(section) == 2, f"README.md has no section '## {path}'"
        body = section[1].split("\n## ", 1)[0]
        for part in ("**What.**", "**Source", "**Licence.**"):
            assert part in body, f"README section {path} lacks {part}"


def test_every_resource_has_sources_licences_and_documented_fields():
    for res in PACKAGE["resources"]:
        assert res["sources"] and res["licenses"], res["name"]
        for field in res.get("schema", {}).get("fields", []):
            assert field.get("description"), f"{res['name']}.{field['name']} lacks a description"
            assert field["type"] in ("string", "number", "integer", "boolean")
            assert "required" in field.get("constraints", {})


def test_numeric_columns_carry_units():
    unitless = {("cpu_trends", "value"), ("glossary", "chapter")}  # unit is in another column / a count
    for res in PACKAGE["resources"]:
        for field in res.get("schema", {}).get("fields", []):
            if field["type"] in ("number", "integer") and (res["name"], field["name"]) not in unitless:
                assert field.get("unit"), f"{res['name']}.{field['name']} has no unit"


@pytest.mark.parametrize("name", sorted(RECORD_TYPES))
def test_schema_and_loader_agree(name):
    """The schema's fields are the loader's dataclass fields, with matching optionality."""
    record_fields = dataclasses.fields(RECORD_TYPES[name])
    schema_fields = RESOURCES[name]["schema"]["fields"][:len(record_fields)]
    translations = RESOURCES[name]["schema"]["fields"][len(record_fields):]  # <field>_zh (read_csv)
    assert [f["name"] for f in schema_fields] == [f.name for f in record_fields]
    texts = {f.name for f in record_fields if str(f.type).split("|")[0].strip() == "str"}
    assert all(t["name"].endswith("_zh") and t["name"][:-3] in texts and not t["constraints"]["required"]
               for t in translations), translations
    for sf, rf in zip(schema_fields, record_fields, strict=True):
        optional = "None" in str(rf.type)
        assert optional == (not sf["constraints"]["required"]), sf["name"]


def test_digits_arrays_match_the_schema():
    spec = RESOURCES["digits"]
    with np.load(DATA / "digits.npz", allow_pickle=False) as npz:
        images, labels = npz["images"], npz["labels"]
    assert images.shape == (spec["rows"], 8, 8) and images.dtype == np.uint8
    assert labels.shape == (spec["rows"],) and labels.dtype == np.uint8
    assert images.max() == 16 and images.min() == 0 and set(np.unique(labels)) == set(range(10))


# ----------------------------------------------------------- the validator catches
def _edit_cell(path: Path, line_no: int, field: str, value: str) -> None:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    rows[line_no - 1][rows[0].index(field)] = value
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)


@pytest.mark.parametrize(
    "name, line, field, value, message",
    [
        ("hardware.csv", 3, "source", "", "source is empty but required"),
        ("hardware.csv", 4, "sustained_fraction", "1.2", "above the maximum 1"),
        ("hardware.csv", 4, "kind", "fpga", "is not one of"),
        ("hardware.csv", 5, "year", "2019.5", "is not a valid integer"),
        ("hardware.csv", 5, "sustained_estimate", "yes", "is not a boolean"),
        ("hardware.csv", 6, "device_id", "xeon_8280_core", "repeats"),
        ("dnn_models.csv", 10, "top5_pct", "101", "above the maximum 100"),
        ("dnn_models.csv", 10, "gmacs_per_forward", "0", "must be > 0"),
        ("dnn_models.csv", 10, "family", "Transformer", "is not one of"),
        ("training_records.csv", 3, "devices", "0", "below the minimum 1"),
        ("training_records.csv", 3, "time_minutes", "nan", "is not finite"),
        ("cpu_trends.csv", 7, "year", "1900", "below the minimum 1970"),
        ("glossary.csv", 9, "chapter", "18", "above the maximum 17"),
    ],
)
def test_validator_reports_file_line_and_field(data_copy, name, line, field, value, message):
    _edit_cell(data_copy / name, line, field, value)
    problems = dp.validate_data()
    assert len(problems) == 1, problems
    assert f"{name}, line {line}: {field}" in problems[0] and message in problems[0]


def test_validator_header_and_row_count(data_copy):
    path = data_copy / "hardware.csv"
    lines = path.read_text(encoding="utf-8").split("\n")
    path.write_text("\n".join([lines[0].replace("memory_gib", "memory_GiB")] + lines[1:]), encoding="utf-8")
    assert any("hardware.csv, line 1: header must be" in p for p in dp.validate_data(["hardware"]))
    path.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")  # 2 rows, schema asks >= 6
    assert dp.validate_data(["hardware"]) == [f"{path}: 2 data rows, expected between 6 and 50"]


def test_validator_checks_the_npz(data_copy):
    path = data_copy / "digits.npz"
    images = np.zeros((1797, 8, 8), np.uint8)
    images[0, 0, 0] = 17
    np.savez(path, images=images, labels=np.zeros(1797, np.int64), extra=np.zeros(3))
    problems = dp.validate_data(["digits"])
    assert any("images maximum 17 above 16" in p for p in problems)
    assert any("labels dtype must be uint8, got int64" in p for p in problems)
    assert any("arrays not in the schema: ['extra']" in p for p in problems)
    np.savez(path, images=np.zeros((5, 8, 8), np.uint8), labels=np.zeros(5, np.uint8))
    assert dp.validate_data(["digits"]) == [f"{path}: expected 1797 samples, got [5]"]
    np.savez(path, images=np.zeros((5, 8, 7), np.uint8), labels=np.zeros(4, np.uint8))
    problems = dp.validate_data(["digits"])
    assert any("images shape must be [None, 8, 8], got [5, 8, 7]" in p for p in problems)
    assert any("disagree on the number of samples" in p for p in problems)


def test_validator_missing_file_sources_and_bad_json(data_copy):
    (data_copy / "glossary.csv").unlink()
    assert dp.validate_data(["glossary"]) == [f"{data_copy / 'glossary.csv'}: file not found"]
    package = json.loads((data_copy / "datapackage.json").read_text(encoding="utf-8"))
    package["resources"][0]["sources"] = []
    (data_copy / "datapackage.json").write_text(json.dumps(package), encoding="utf-8")
    assert any("must list sources and licenses" in p for p in dp.validate_data(["hardware"]))
    (data_copy / "datapackage.json").write_text('{"resources": [\n}', encoding="utf-8")
    with pytest.raises(ds.DataFileError, match="datapackage.json, line 2: invalid JSON"):
        dp.validate_data()


def test_validator_unknown_resource_name():
    with pytest.raises(ValueError, match="names must be among"):
        dp.validate_data(["hardwares"])


_NUMERIC = [
    (res["path"], f["name"])
    for res in PACKAGE["resources"]
    if res.get("format") != "npz"
    for f in res["schema"]["fields"]
    if f["type"] in ("number", "integer")
]


@settings(max_examples=25, deadline=None)
@given(
    target=st.sampled_from(_NUMERIC),
    junk=st.text(alphabet="abcxyz%$ ", min_size=1, max_size=6).filter(lambda s: s.strip()),
    row=st.integers(min_value=2, max_value=7),
)
def test_any_non_numeric_cell_is_caught_at_its_line(tmp_path_factory, target, junk, row):
    """Property: junk in any numeric column of any CSV is reported at the right line."""
    name, field = target
    folder = tmp_path_factory.mktemp("data")
    shutil.copytree(DATA, folder, dirs_exist_ok=True)
    lines = len((folder / name).read_text(encoding="utf-8").splitlines())
    row = 2 + (row - 2) % (lines - 1)  # a data line of this file (some files have fewer than 6 rows)
    _edit_cell(folder / name, row, field, junk)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DDL_COURSE_DATA", str(folder))
        problems = dp.validate_data([RESOURCES_BY_PATH[name]])
    assert len(problems) == 1 and f"{name}, line {row}: {field}" in problems[0]


RESOURCES_BY_PATH = {r["path"]: r["name"] for r in PACKAGE["resources"]}
