"""Tests of course_lib.slides without a browser: slide counting (against nbconvert's own
preprocessors), the offline export (no CDN URL, tagged cells dropped, notes kept), the
vendor cache, the index and the command line. The decks in a real browser are tested in
tests/browser/test_slides_browser.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import fast_schema  # noqa: F401 - before nbformat: see its docstring
import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from readme_support import SLIDES_TIME_LIMIT, readme_slides_fixture  # noqa: F401 - readme_slides

from course_lib.tools import slides

ROOT = Path(__file__).resolve().parent.parent


def cell(kind="-", *tags, source="text", cell_type="markdown"):
    maker = nbformat.v4.new_markdown_cell if cell_type == "markdown" else nbformat.v4.new_code_cell
    c = maker(source)
    c.metadata["slideshow"] = {"slide_type": kind}
    if tags:
        c.metadata["tags"] = list(tags)
    return c


@pytest.fixture
def vendor(tmp_path):
    """A vendor folder that looks installed (package.json of every pinned package)."""
    root = tmp_path / "vendor"
    for name, version in slides.VENDOR_PACKAGES.items():
        pkg = root / "node_modules" / name
        pkg.mkdir(parents=True)
        (pkg / "package.json").write_text(json.dumps({"name": name, "version": version}))
    return root


# ------------------------------------------------------------------ slide structure
def test_structure_hand_derived():
    cells = [
        cell("skip", "setup"), cell("notes"),  # before the first visible cell: no slide
        cell("-"),  # first visible cell opens slide 1 whatever its type
        cell("subslide"), cell("fragment"), cell("notes"),
        cell("slide", "solution"),  # removed: does not open a slide
        cell("skip"), cell("subslide"),  # third slide of column 1
        cell("slide"), cell("-"), cell("slide", "remove"), cell("slide"),
    ]
    assert slides.slide_structure(cells) == (3, 1, 1)
    assert slides.slide_structure(cells, remove_tags=()) == (2, 2, 1, 1, 1)
    assert slides.slide_structure([cell("skip"), cell("notes")]) == ()
    assert slides.slide_structure([]) == ()


def _nbconvert_structure(cells):
    """Slides per column as nbconvert's own preprocessors mark them (the reference)."""
    from nbconvert.preprocessors import TagRemovePreprocessor

    reveal = pytest.importorskip("nbconvert.exporters.slides")._RevealMetadataPreprocessor
    nb = nbformat.v4.new_notebook(cells=cells)
    remover = TagRemovePreprocessor(enabled=True, remove_cell_tags=set(slides.REMOVE_CELL_TAGS))
    nb, _ = remover.preprocess(nb, {})
    if not nb.cells:
        return ()
    try:
        nb, _ = reveal().preprocess(nb, {})
    except ValueError:  # "All cells are hidden"
        return ()
    columns = []
    for c in nb.cells:
        if c.metadata.get("slide_start"):
            columns.append(0)
        if c.metadata.get("subslide_start"):
            columns[-1] += 1
    return tuple(columns)


cells_strategy = st.lists(
    st.tuples(
        st.sampled_from(slides.SLIDE_TYPES),
        st.lists(st.sampled_from(["solution", "setup", "remove", "nbval-check-output"]), max_size=2, unique=True),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(cells_strategy)
def test_structure_matches_nbconvert(spec):
    cells = [cell(kind, *tags) for kind, tags in spec]
    assert slides.slide_structure(cells) == _nbconvert_structure(cells)


def test_slide_problems_and_title():
    bad = [cell("slide"), nbformat.v4.new_markdown_cell("x"), cell("sub")]
    problems = slides.slide_problems(bad)
    assert problems[0] == "cell 1: no slideshow.slide_type"
    assert problems[1].startswith("cell 2: slide_type 'sub' is not one of")
    nb = nbformat.v4.new_notebook(cells=[cell(source="no heading"), cell(source="## Sub\n# 03 Training cost #")])
    assert slides.notebook_title(nb) == "03 Training cost"
    assert slides.notebook_title(nbformat.v4.new_notebook(), "fallback") == "fallback"


# ------------------------------------------------------------------ export
def demo_notebook():
    return nbformat.v4.new_notebook(
        cells=[
            cell("slide", source="# 99 Demo\n\n## Learning goals\n- goal"),
            cell("skip", "setup", source="import SETUP_MARKER", cell_type="code"),
            cell("slide", source="Formula $$S = \\frac{1}{1-p}$$"),
            cell("notes", source="SPEAKER_NOTE_MARKER"),
            cell("skip", "solution", source="SOLUTION_MARKER = 1", cell_type="code"),
            cell("slide", "remove", source="REMOVED_MARKER"),
            cell("subslide", "remove-input", source="HIDDEN_INPUT_MARKER = 1", cell_type="code"),
            cell("slide", source="## Summary"),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )


def test_export_is_offline_and_drops_tagged_cells(tmp_path, vendor):
    out = slides.export_deck(demo_notebook(), "99_demo", tmp_path / "decks", vendor)
    html = out.read_text()
    urls = re.findall(r'<(?:script|link)\b[^>]*?(?:src|href)="([^"]+)"', html)
    assert urls, "the deck loads no script or style sheet"
    remote = [u for u in urls if re.match(r"(https?:)?//", u)]
    assert not remote, f"CDN URLs left in the deck: {remote}"
    assert "import mermaid" not in html and '<script type="module">' not in html
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html and "cdnjs" not in html
    for u in urls:  # every local URL points at a file of the vendor folder
        target = (out.parent / u.split("?")[0]).resolve()
        assert target.is_relative_to(vendor.resolve()), u
    for marker in ("SETUP_MARKER", "SOLUTION_MARKER", "REMOVED_MARKER", "HIDDEN_INPUT_MARKER"):
        assert marker not in html, marker
    assert re.search(r'<aside class="notes">.*SPEAKER_NOTE_MARKER', html, re.S)
    structure = slides.slide_structure(demo_notebook().cells)
    assert structure == (1, 2, 1)
    assert html.count("<section") == len(structure) + sum(structure)
    assert "vendor/node_modules/reveal.js/dist/theme/white.css" in html


def test_one_exporter_serves_a_folder_and_gives_the_decks_of_a_fresh_one(tmp_path, vendor):
    """export_deck keeps one nbconvert exporter per output and vendor folder (its templates
    compiled once): a deck it makes after another notebook's is the deck a fresh exporter
    makes, byte for byte, and another folder gets its own exporter (its own relative URLs)."""
    first, second = demo_notebook(), demo_notebook()
    first.cells[0].source = "# 01 · Another deck\n\nwith other text"
    decks = tmp_path / "decks"
    slides.export_deck(first, "01_first", decks, vendor)
    kept = slides.export_deck(second, "02_second", decks, vendor).read_text()
    assert slides._exporter(str(decks), str(vendor)) is slides._exporter(str(decks), str(vendor))
    slides._exporter.cache_clear()
    assert slides.export_deck(second, "02_second", decks, vendor).read_text() == kept
    nested = slides.export_deck(second, "02_second", decks / "deeper", vendor).read_text()
    assert "../../vendor/node_modules/reveal.js" in nested and "../vendor/node_modules/reveal.js" in kept
    assert "../../vendor" not in kept


def test_deck_title_is_the_first_heading(tmp_path, vendor):
    nb = demo_notebook()
    nb.cells[0].source = "# 07 · Summary & <discussion>\n\ntext"
    out = slides.export_deck(nb, "07_summary", tmp_path, vendor)
    assert "<title>07 · Summary &amp; &lt;discussion&gt; slides</title>" in out.read_text()
    assert "title" not in nb.metadata  # the caller's notebook is left alone
    nb.metadata["title"] = "Set in the metadata"
    assert slides.deck_title(nb, "x") == "Set in the metadata"
    assert "<title>Set in the metadata slides</title>" in slides.export_deck(nb, "07_summary", tmp_path, vendor).read_text()
    no_heading = nbformat.v4.new_notebook(cells=[cell("slide", source="just text")])
    assert "<title>08_x slides</title>" in slides.export_deck(no_heading, "08_x", tmp_path, vendor).read_text()


def test_template_is_package_data():
    template = slides.TEMPLATE_DIR / slides.TEMPLATE_NAME
    conf = json.loads((template / "conf.json").read_text())
    assert conf["base_template"] == "reveal"
    text = (template / "index.html.j2").read_text()
    assert "extends 'reveal/index.html.j2'" in text
    assert "{%- block html_head_js_mermaidjs -%}\n{%- endblock html_head_js_mermaidjs -%}" in text


# ------------------------------------------------------------------ vendor cache
def test_vendor_present_skips_npm(vendor):
    def fail(*a, **k):
        raise AssertionError("npm must not run when the vendor folder is complete")

    assert slides.missing_vendor_packages(vendor) == []
    assert slides.ensure_vendor(vendor, npm="npm", run=fail, log=lambda m: None) is False


def _installed(folder: Path) -> dict[str, str]:
    """name -> version of the packages in ``folder/node_modules`` (scoped ones too)."""
    modules = folder / "node_modules"
    dirs = [d for top in modules.iterdir() for d in ([*top.iterdir()] if top.name.startswith("@") else [top])]
    return {d.relative_to(modules).as_posix(): json.loads((d / "package.json").read_text()).get("version")
            for d in dirs if (d / "package.json").is_file()}


def npm7(calls):
    """A fake ``npm install --prefix DIR SPEC...`` that behaves like npm 7+: it installs the
    dependencies of DIR/package.json and the specs named, and prunes every other package
    of node_modules as extraneous (``--no-save`` specs are installed but not saved)."""

    def run(cmd, **kw):
        calls.append(cmd)
        assert cmd[1] == "install"
        prefix = Path(cmd[cmd.index("--prefix") + 1])
        specs = [a for a in cmd[cmd.index("--prefix") + 2 :] if not a.startswith("-")]
        manifest = json.loads((prefix / "package.json").read_text())
        wanted = dict(manifest.get("dependencies", {}))
        wanted.update(spec.rsplit("@", 1) for spec in specs)
        modules = prefix / "node_modules"
        for name in set(_installed(prefix)) - set(wanted):
            shutil.rmtree(modules / name)  # extraneous: pruned
        for name, version in wanted.items():
            (modules / name).mkdir(parents=True, exist_ok=True)
            (modules / name / "package.json").write_text(json.dumps({"name": name, "version": version}))
        if "--no-save" not in cmd and specs:
            manifest.setdefault("dependencies", {}).update(spec.rsplit("@", 1) for spec in specs)
            (prefix / "package.json").write_text(json.dumps(manifest))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def test_vendor_installs_missing_and_wrong_versions(vendor):
    (vendor / "node_modules" / "mathjax" / "package.json").write_text('{"version": "3.2.2"}')
    (vendor / "node_modules" / "jquery" / "package.json").unlink()
    assert slides.missing_vendor_packages(vendor) == ["jquery@2.2.3", "mathjax@2.7.9"]
    calls = []
    assert slides.ensure_vendor(vendor, npm="/usr/bin/npm", run=npm7(calls), log=lambda m: None) is True
    (cmd,) = calls
    assert cmd[:2] == ["/usr/bin/npm", "install"] and "--prefix" in cmd and "--no-save" not in cmd
    # npm 7+ prunes what package.json does not list: all packages are asked for and listed,
    # not only the two that were missing.
    everything = [f"{name}@{version}" for name, version in slides.VENDOR_PACKAGES.items()]
    assert cmd[-len(everything) :] == everything
    manifest = json.loads((vendor / "package.json").read_text())
    assert manifest["dependencies"] == slides.VENDOR_PACKAGES
    assert slides.missing_vendor_packages(vendor) == []
    assert _installed(vendor) == slides.VENDOR_PACKAGES


def test_vendor_version_bump_keeps_the_other_packages(vendor, monkeypatch):
    """A pinned version changes: the rerun must end with every package present (installing
    only the bumped one with --no-save into a package.json without dependencies made npm
    prune all the others, and the build failed with "still missing")."""
    (vendor / "package.json").write_text(json.dumps({"name": "ddl-course-slides-vendor", "private": True}))
    monkeypatch.setitem(slides.VENDOR_PACKAGES, "requirejs", "2.3.7")
    assert slides.missing_vendor_packages(vendor) == ["requirejs@2.3.7"]
    calls = []
    assert slides.ensure_vendor(vendor, npm="npm", run=npm7(calls), log=lambda m: None) is True
    assert slides.missing_vendor_packages(vendor) == []
    assert _installed(vendor) == slides.VENDOR_PACKAGES
    assert slides.ensure_vendor(vendor, npm="npm", run=npm7(calls), log=lambda m: None) is False
    assert len(calls) == 1


def test_vendor_errors(tmp_path, monkeypatch):
    empty = tmp_path / "v"
    monkeypatch.setattr(slides.shutil, "which", lambda cmd: None)
    with pytest.raises(RuntimeError, match="npm not found"):
        slides.ensure_vendor(empty, log=lambda m: None)

    def broken(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, "", "npm ERR! network unreachable")

    with pytest.raises(RuntimeError, match="npm install failed.*network unreachable"):
        slides.ensure_vendor(empty, npm="npm", run=broken, log=lambda m: None)

    def silent(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 0, "", "")

    with pytest.raises(RuntimeError, match="still missing"):
        slides.ensure_vendor(empty, npm="npm", run=silent, log=lambda m: None)


# ------------------------------------------------------------------ build, index, CLI
def write_notebooks(folder: Path, names):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        nb = demo_notebook()
        nb.cells[0].source = f"# Title of {name}\n\ntext"
        path = folder / f"{name}.ipynb"
        nbformat.write(nb, path)
        paths.append(path)
    return paths


def test_build_without_execution_and_index_order(tmp_path, vendor):
    paths = write_notebooks(tmp_path / "nb", ["10_b", "02_a", "01_<z>"])
    messages = []
    decks = slides.build_slides(paths, tmp_path / "out", vendor_dir=vendor, execute=False, log=messages.append)
    assert [d.path.name for d in decks] == ["01_<z>.slides.html", "02_a.slides.html", "10_b.slides.html"]
    assert all(d.structure == (1, 2, 1) for d in decks)
    index = (tmp_path / "out" / "index.html").read_text()
    hrefs = re.findall(r'<li><a href="([^"]+)">', index)
    assert hrefs == ["01_&lt;z&gt;.slides.html", "02_a.slides.html", "10_b.slides.html"]
    assert "Title of 01_&lt;z&gt;" in index and "print-pdf" in index
    assert "<title>Title of 02_a slides</title>" in decks[1].path.read_text()
    assert len(messages) == 3


def test_build_rejects_bad_input(tmp_path, vendor):
    with pytest.raises(ValueError, match="at least one"):
        slides.build_slides([], tmp_path, vendor_dir=vendor)
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(ValueError, match="not an existing .ipynb"):
        slides.build_slides([tmp_path / "x.txt"], tmp_path, vendor_dir=vendor)
    with pytest.raises(ValueError, match="not an existing .ipynb"):
        slides.build_slides([tmp_path / "missing.ipynb"], tmp_path, vendor_dir=vendor)


@pytest.mark.slow
def test_build_executes_in_a_fresh_kernel(tmp_path, vendor):
    """execute=True runs the notebook first: outputs that were never stored appear."""
    nb = demo_notebook()
    nb.cells.insert(1, cell("-", source="print(6 * 7, 'FRESH')", cell_type="code"))
    nb.cells[2].source = "import os"  # the setup cell must run without error (and is dropped)
    path = tmp_path / "01_run.ipynb"
    nbformat.write(nb, path)
    (deck,) = slides.build_slides([path], tmp_path / "out", vendor_dir=vendor, execute=True, log=lambda m: None)
    assert "42 FRESH" in deck.path.read_text()
    failing = demo_notebook()
    failing.cells[1].source = "1 / 0"
    nbformat.write(failing, path)
    with pytest.raises(RuntimeError, match="01_run.ipynb: execution failed.*ZeroDivisionError"):
        slides.build_slides([path], tmp_path / "out", vendor_dir=vendor, execute=True, log=lambda m: None)


def test_command_line(tmp_path, vendor, capsys):
    paths = write_notebooks(tmp_path / "nb", ["01_a"])
    out = tmp_path / "out"
    code = slides.main([*map(str, paths), "-o", str(out), "--vendor", str(vendor)])
    assert code == 0
    assert (out / "index.html").is_file() and (out / "01_a.slides.html").is_file()
    assert "1 decks" in capsys.readouterr().out
    assert slides.main([str(tmp_path / "nope.ipynb"), "-o", str(out), "--vendor", str(vendor)]) == 1
    assert "slides: error:" in capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "course_lib", "slides", "--help"], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, check=False)
    assert proc.returncode == 0 and "--execute" in proc.stdout


# ------------------------------------------------------------------ the decks of `make slides`
@pytest.mark.slow
@pytest.mark.serial  # shares `make slides` with the README and browser tests (run 3 of make test): built once
@pytest.mark.timeout(SLIDES_TIME_LIMIT + 300)
def test_make_slides_decks_load_only_files_of_their_vendor_folder(readme_slides):
    """The decks that `make slides` wrote (built once per session by the readme_slides
    fixture, tests/readme_support.py): each loads only local files, and every one of them exists in
    the vendor folder that npm filled - the decks open offline."""
    decks = sorted(readme_slides.deck_dir.glob("*.slides.html"))
    assert decks
    vendor = (readme_slides.deck_dir / "vendor").resolve()
    for deck in decks:
        html = deck.read_text(encoding="utf-8")
        urls = re.findall(r'<(?:script|link)\b[^>]*?(?:src|href)="([^"]+)"', html)
        assert urls and not [u for u in urls if re.match(r"(https?:)?//", u)], deck.name
        for url in urls:
            target = (deck.parent / url.split("?")[0]).resolve()
            assert target.is_relative_to(vendor) and target.exists(), f"{deck.name}: {url}"


def test_npm_that_never_answers_ends_with_a_clear_error(tmp_path):
    """Every wait has an end: npm's fetch gets a time limit, and running over it says why."""
    seen = {}

    def stalled(cmd, **kw):
        seen.update(kw)
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    with pytest.raises(RuntimeError, match=r"npm install took longer than \d+ s"):
        slides.ensure_vendor(tmp_path / "vendor", npm="npm", run=stalled, log=lambda m: None)
    assert 0 < seen["timeout"] <= 1800
