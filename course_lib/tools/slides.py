"""Lecture slides: every notebook as a reveal.js deck that works offline.

``python -m course_lib slides`` (``make slides``) takes each notebook with its stored
outputs (the course's claims: ``make notebooks`` refreshes them, on a quiet machine only;
``--execute`` runs each notebook in a fresh kernel first), drops the cells tagged ``solution``,
``setup`` or ``remove``, keeps ``notes`` cells as speaker notes, and exports a reveal.js
deck per notebook to ``build/slides/NN_name.slides.html`` plus an ``index.html`` that
lists the decks in chapter order.

nbconvert's default export loads reveal.js, require.js, jQuery, MathJax and the widget
renderer from CDNs and falls apart without a network. Here those front-end packages
(:data:`VENDOR_PACKAGES`, pinned) are installed once with ``npm`` into
``build/slides/vendor`` and the decks point at them with relative URLs; the template
``course_lib/templates/ddl_reveal`` extends nbconvert's ``reveal`` template without its
mermaid CDN import. A slide show has no kernel, so a live figure appears as the static
PNG that :func:`course_lib.live.widgets.live_figure` stores beside the widget view, without
sliders that would move nothing; speaker notes, stored in the notebook as closed
``<details>`` blocks, are shown open, with their formulas as text (:func:`deck_notebook`).

The Chinese decks (``python -m course_lib slides --lang zh_CN``, ``make slides-zh``) are
exported the same way from the Chinese edition ``notebooks/zh/`` that ``make zh`` generates
(:mod:`course_lib.tools.i18n`) into ``build/slides/zh/``, with their own index and the
vendor folder of the English decks. Their prose and speaker notes are the translations;
the Chinese notebooks are generated without outputs, so each code cell shows the stored
outputs of the same cell of the English notebook (:func:`stored_outputs_from`): the same
measurements as the English decks, printed and drawn in English. ``--execute`` runs the
Chinese notebooks instead, and the decks show the library's output in Chinese.

The module also holds :func:`slide_structure`, which says from the cell metadata alone
how many slides a deck must have; the browser tests compare it with the rendered deck.
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._validate import check_sequence, check_type
from .cells import cell_source, cell_tags, details_parts, slide_type
from .i18n_code import code_shape
from .paths import repo_root
from .texmath import math_as_text

__all__ = [
    "DECK_LANGUAGES",
    "Deck",
    "REMOVE_CELL_TAGS",
    "SLIDE_TYPES",
    "VENDOR_PACKAGES",
    "build_slides",
    "deck_notebook",
    "deck_title",
    "ensure_vendor",
    "export_deck",
    "exporter_config",
    "kept_cells",
    "math_as_text",
    "missing_vendor_packages",
    "notebook_title",
    "slide_problems",
    "slide_structure",
    "stored_outputs_from",
    "vendor_manifest",
    "write_index",
]

#: Front-end packages installed from the npm registry into the vendor folder (pinned).
VENDOR_PACKAGES: dict[str, str] = {
    "reveal.js": "4.6.0",
    "requirejs": "2.3.8",
    "jquery": "2.2.3",
    "@jupyter-widgets/html-manager": "1.0.15",
    "mathjax": "2.7.9",
}
#: Files of those packages that a deck loads, relative to ``vendor/node_modules``.
VENDOR_FILES: dict[str, str] = {
    "reveal": "reveal.js",  # a folder: dist/reveal.js, dist/theme/..., plugin/notes/...
    "require": "requirejs/require.js",
    "jquery": "jquery/dist/jquery.min.js",
    "mathjax": "mathjax/MathJax.js",
    "widgets": "@jupyter-widgets/html-manager/dist/embed-amd.js",
}
MATHJAX_CONFIG = "?config=TeX-AMS_CHTML-full,Safe"

#: Cells with one of these tags are dropped from the decks.
REMOVE_CELL_TAGS = ("solution", "setup", "remove", "remove-cell")
#: Cells with one of these tags show their outputs only.
REMOVE_INPUT_TAGS = ("remove-input", "hide-input")
#: Cells with one of these tags show their input only.
REMOVE_OUTPUT_TAGS = ("remove-output",)
SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "ddl_reveal"

#: The languages of the decks (gettext names, as ``course_lib.i18n.LANGUAGES``) -> the
#: ``lang`` of the decks' HTML (ISO 639-1, what nbconvert accepts) and of the index (BCP 47).
DECK_LANGUAGES: dict[str, tuple[str, str]] = {"en": ("en", "en"), "zh_CN": ("zh", "zh-CN")}
#: ``metadata.language`` of a notebook of the Chinese edition (``course_lib.tools.i18n``).
CHINESE_NOTEBOOK_LANGUAGE = "zh-CN"
#: The text of the index page in each deck language. (A page the build writes, not text the
#: notebooks print: it is kept here rather than in the gettext catalogue of ``course_lib``.)
INDEX_TEXT: dict[str, dict[str, str]] = {
    "en": {
        "title": "ddl-course slides",
        "heading": "Introduction to distributed deep learning computation: slides",
        "count": "{sections} sections, {slides} slides",
        "print": "print version",
        "open": "(",
        "sep": "; ",
        "close": ")",
        "keys": "Keys: arrows or space to move, <kbd>S</kbd> speaker view (notes, timer, next slide), "
                "<kbd>F</kbd> full screen, <kbd>Esc</kbd> overview. PDF: open a deck's print version "
                "and print to PDF from the browser (landscape, no margins, background graphics on).",
    },
    "zh_CN": {
        "title": "ddl-course 幻灯片（中文版）",
        "heading": "分布式深度学习计算简介：幻灯片（中文版）",
        "count": "{sections} 节，{slides} 张幻灯片",
        "print": "打印版",
        "open": "（",
        "sep": "；",
        "close": "）",
        "keys": "按键：方向键或空格翻页，<kbd>S</kbd> 打开演讲者视图（备注、计时器、下一张幻灯片），"
                "<kbd>F</kbd> 全屏，<kbd>Esc</kbd> 总览。PDF：打开一套幻灯片的打印版，在浏览器中打印为 PDF"
                "（横向、无页边距、打印背景图形）。",
    },
}


@dataclass(frozen=True)
class Deck:
    """One exported deck.

    Attributes
    ----------
    source : Path
        The notebook.
    path : Path
        The ``.slides.html`` file.
    title : str
        Title of the deck (:func:`deck_title`: the notebook's first ``#`` heading).
    structure : tuple of int
        Slides in each column: ``len(structure)`` horizontal slides, ``sum(structure)``
        slides in all (see :func:`slide_structure`).
    seconds : float
        Time taken to execute and export it.
    """

    source: Path
    path: Path
    title: str
    structure: tuple[int, ...]
    seconds: float


# ------------------------------------------------------------------ argument checks
def _check_cells(cells: Any) -> list:
    return check_sequence(cells, "cells", Mapping, "a notebook cell (a dict)")


def _check_notebook(nb: Any) -> Any:
    check_type(nb, "nb", Mapping, "a notebook (a dict with a 'cells' list)")
    if "cells" not in nb:
        raise ValueError("nb must be a notebook (a dict with a 'cells' list), it has no 'cells'")
    _check_cells(nb["cells"])
    return nb


def _check_path(value: Any, name: str) -> Path:
    return Path(check_type(value, name, (str, os.PathLike), "a path (str or pathlib.Path)"))


def _check_language(language: Any) -> str:
    check_type(language, "language", str, f"one of {tuple(DECK_LANGUAGES)}")
    if language not in DECK_LANGUAGES:
        raise ValueError(f"language must be one of {tuple(DECK_LANGUAGES)}, got {language!r}")
    return language


# ------------------------------------------------------------------ cell metadata

def kept_cells(cells: Iterable[Any], remove_tags: Iterable[str] = REMOVE_CELL_TAGS) -> list[Any]:
    """The cells that stay in a deck: all but those tagged with one of ``remove_tags``.

    Examples
    --------
    >>> cells = [{"metadata": {"tags": ["setup"]}}, {"metadata": {}}, {"metadata": {"tags": ["x"]}}]
    >>> len(kept_cells(cells))
    2
    """
    remove = set(check_sequence(remove_tags, "remove_tags", str, "a tag (str)"))
    return [c for c in _check_cells(cells) if not (cell_tags(c) & remove)]


def slide_structure(cells: Iterable[Any], remove_tags: Iterable[str] = REMOVE_CELL_TAGS) -> tuple[int, ...]:
    """How many slides the deck of these cells has, from their slide metadata alone.

    Cells tagged with one of ``remove_tags`` are ignored. The first cell that is
    neither ``skip`` nor ``notes`` opens the first slide; every later ``slide`` cell
    opens a new column (a horizontal slide) and every ``subslide`` cell a new slide
    below the current one. ``fragment``, ``-``, ``skip`` and ``notes`` cells add none.

    Returns
    -------
    tuple of int
        Number of slides in each column (empty if every cell is hidden).

    Examples
    --------
    >>> def cell(kind, *tags):
    ...     return {"metadata": {"slideshow": {"slide_type": kind}, "tags": list(tags)}}
    >>> slide_structure([cell("slide"), cell("skip", "setup"), cell("subslide"), cell("fragment"),
    ...                  cell("slide", "solution"), cell("notes"), cell("slide"), cell("-")])
    (2, 1)
    """
    columns: list[int] = []
    for cell in kept_cells(cells, remove_tags):
        kind = slide_type(cell)
        if not columns:
            if kind not in ("skip", "notes"):
                columns.append(1)
        elif kind == "slide":
            columns.append(1)
        elif kind == "subslide":
            columns[-1] += 1
    return tuple(columns)


def slide_problems(cells: Sequence[Any]) -> list[str]:
    """Cells whose slide metadata is missing or not one of :data:`SLIDE_TYPES`.

    Examples
    --------
    >>> slide_problems([{"metadata": {"slideshow": {"slide_type": "slide"}}}, {"metadata": {}}])
    ['cell 1: no slideshow.slide_type']
    """
    problems = []
    for i, cell in enumerate(_check_cells(cells)):
        slideshow = cell.get("metadata", {}).get("slideshow")
        if not slideshow or "slide_type" not in slideshow:
            problems.append(f"cell {i}: no slideshow.slide_type")
        elif slideshow["slide_type"] not in SLIDE_TYPES:
            problems.append(f"cell {i}: slide_type {slideshow['slide_type']!r} is not one of {SLIDE_TYPES}")
    return problems


def notebook_title(nb: Any, default: str = "") -> str:
    """The first level-1 Markdown heading of a notebook (``default`` if there is none).

    Examples
    --------
    >>> notebook_title({"cells": [{"cell_type": "markdown", "source": "# 02 Scaling laws\\ntext"}]})
    '02 Scaling laws'
    """
    check_type(default, "default", str, "a str")
    for cell in _check_notebook(nb)["cells"]:
        if cell.get("cell_type") != "markdown":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for line in source.splitlines():
            match = re.match(r"#\s+(.+?)\s*#*\s*$", line)
            if match:
                return match.group(1)
    return default


# ------------------------------------------------------------------ what a deck shows
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
#: Static forms of an output that a slide shows instead of a widget view (a slide show has
#: no kernel, so a widget's controls would move nothing).
STATIC_MIMES = ("image/png", "text/html")


def deck_notebook(nb: Any) -> Any:
    """A copy of notebook ``nb`` as the deck shows it (``nb`` is not modified).

    - A speaker-notes cell (slide type ``notes``) is stored in the notebook as a closed
      ``<details>`` block (so it stays closed in JupyterLab and on GitHub); the deck takes
      its body, so the speaker view shows the notes open, with their formulas as text
      (:func:`math_as_text`).
    - An output that holds a widget view and a static form of it (a live figure's PNG, a
      table's HTML) keeps only the static form: a slide show has no kernel, so the
      widget's sliders would move nothing. The notebook's saved widget state goes too
      when no widget view is left.

    Examples
    --------
    >>> nb = {"metadata": {"widgets": {}}, "cells": [
    ...     {"cell_type": "markdown", "metadata": {"slideshow": {"slide_type": "notes"}},
    ...      "source": "<details><summary>Speaker notes</summary>\\n\\nAsk for $N_p$.\\n\\n</details>"},
    ...     {"cell_type": "code", "metadata": {}, "source": "fig", "outputs": [{"output_type": "display_data",
    ...      "metadata": {}, "data": {WIDGET_VIEW_MIME: {}, "image/png": "iVBO", "text/plain": "<live figure>"}}]}]}
    >>> out = deck_notebook(nb)
    >>> out["cells"][0]["source"], sorted(out["cells"][1]["outputs"][0]["data"]), "widgets" in out["metadata"]
    ('Ask for <span class="ddl-math">N<sub>p</sub></span>.', ['image/png', 'text/plain'], False)
    """
    import copy

    _check_notebook(nb)
    out = copy.deepcopy(nb)
    views_left = False
    for cell in out["cells"]:
        if slide_type(cell) == "notes" and cell.get("cell_type") == "markdown":
            parts = details_parts(cell)
            cell["source"] = math_as_text(parts[1] if parts else cell_source(cell))
        for output in cell.get("outputs", []) or []:
            data = output.get("data", {})
            if WIDGET_VIEW_MIME in data:
                if any(mime in data for mime in STATIC_MIMES):
                    del data[WIDGET_VIEW_MIME]
                else:
                    views_left = True
    if not views_left:
        out.get("metadata", {}).pop("widgets", None)
    return out


def _code_lines(cell: Any) -> list[str]:
    """A code cell's lines without the lines the Chinese edition adds to its setup cell."""
    from .i18n import SETUP_LINES

    added = {line.rstrip("\n") for line in SETUP_LINES}
    return [line for line in cell_source(cell).splitlines() if line not in added]


def stored_outputs_from(nb: Any, english: Any) -> tuple[Any, list[str]]:
    """A copy of notebook ``nb`` whose code cells carry the stored outputs of ``english``.

    The Chinese edition (``notebooks/zh/``) is generated from the English notebooks with
    the same cells and cell ids and no outputs (it is run, not read stored). Its deck shows
    the English notebook's stored outputs: each code cell of ``nb`` takes the outputs and
    execution count of the English cell with its id, when that cell holds the same code
    (the lines the Chinese edition adds to the setup cell and its translated string
    literals aside: :func:`.i18n_code.code_shape`); the English notebook's saved widget
    state comes along (so a deck's printed lines are the English notebook's). ``nb`` and ``english`` are not modified.

    Returns
    -------
    (notebook, list of str)
        The copy, and the ids of the code cells that found no English cell with their id
        and code (they keep no output: the Chinese edition is older than its English
        notebook; ``make zh`` rebuilds it).

    Examples
    --------
    >>> english = {"metadata": {}, "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "source": "1 + 1",
    ...            "execution_count": 3, "outputs": [{"output_type": "execute_result", "data": {"text/plain": "2"},
    ...            "metadata": {}, "execution_count": 3}]}]}
    >>> zh = {"metadata": {"language": "zh-CN"}, "cells": [
    ...       {"cell_type": "code", "id": "a", "metadata": {}, "source": "1 + 1", "execution_count": None, "outputs": []},
    ...       {"cell_type": "code", "id": "b", "metadata": {}, "source": "2", "execution_count": None, "outputs": []}]}
    >>> out, unmatched = stored_outputs_from(zh, english)
    >>> out["cells"][0]["outputs"][0]["data"], unmatched, zh["cells"][0]["outputs"]
    ({'text/plain': '2'}, ['b'], [])
    """
    import copy

    _check_notebook(nb)
    check_type(english, "english", Mapping, "a notebook (a dict with a 'cells' list)")
    if "cells" not in english:
        raise ValueError("english must be a notebook (a dict with a 'cells' list), it has no 'cells'")
    _check_cells(english["cells"])
    by_id = {c.get("id"): c for c in english["cells"] if c.get("cell_type") == "code"}
    out = copy.deepcopy(nb)
    unmatched = []
    for cell in out["cells"]:
        if cell.get("cell_type") != "code":
            continue
        twin = by_id.get(cell.get("id"))
        if twin is None or code_shape("\n".join(_code_lines(twin))) != code_shape("\n".join(_code_lines(cell))):
            unmatched.append(str(cell.get("id")))
            continue
        cell["outputs"] = copy.deepcopy(twin.get("outputs", []))
        cell["execution_count"] = twin.get("execution_count")
    widgets = (english.get("metadata") or {}).get("widgets")
    if widgets is not None:
        out.setdefault("metadata", {})["widgets"] = copy.deepcopy(widgets)
    return out, unmatched


# ------------------------------------------------------------------ vendor folder
def _installed_version(vendor_dir: Path, package: str) -> str | None:
    manifest = vendor_dir / "node_modules" / package / "package.json"
    try:
        return json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def missing_vendor_packages(vendor_dir: Path) -> list[str]:
    """``name@version`` of every vendor package absent from ``vendor_dir`` (or another version)."""
    vendor_dir = _check_path(vendor_dir, "vendor_dir")
    return [
        f"{name}@{version}"
        for name, version in VENDOR_PACKAGES.items()
        if _installed_version(vendor_dir, name) != version
    ]


def vendor_manifest() -> dict[str, Any]:
    """The ``package.json`` of the vendor folder: every vendor package, pinned exactly.

    npm 7 and later delete from ``node_modules`` whatever ``package.json`` does not list
    ("extraneous" packages), so all of :data:`VENDOR_PACKAGES` must be dependencies here,
    not only the ones being installed.

    Examples
    --------
    >>> vendor_manifest()["dependencies"] == VENDOR_PACKAGES
    True
    """
    return {"name": "ddl-course-slides-vendor", "private": True, "dependencies": dict(VENDOR_PACKAGES)}


#: Seconds npm may take to fetch the front-end packages (about 20 s on the course machines).
NPM_TIMEOUT_S = 900


def ensure_vendor(
    vendor_dir: Path,
    *,
    npm: str | None = None,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    log: Callable[[str], None] = print,
) -> bool:
    """Install the front-end packages into ``vendor_dir/node_modules`` unless present.

    When any package is missing (or has another version, e.g. after a version bump or
    an interrupted install), the vendor ``package.json`` is rewritten with the full pinned
    set (:func:`vendor_manifest`) and ``npm install`` is asked for all of them: installing
    only the missing ones would let npm prune the others as extraneous.

    Parameters
    ----------
    vendor_dir : Path
        The vendor folder (``node_modules`` and ``package.json`` live here).
    npm : str, optional
        The npm executable; found on PATH by default.
    run : callable
        Runs the npm command (``subprocess.run``; the tests pass a fake).
    log : callable
        Receives progress messages.

    Returns
    -------
    bool
        True if npm ran, False if everything was already there.

    Raises
    ------
    RuntimeError
        With the fix, when npm is missing or fails, or leaves a package missing.
    """
    vendor_dir = _check_path(vendor_dir, "vendor_dir")
    missing = missing_vendor_packages(vendor_dir)
    if not missing:
        return False
    npm = npm or shutil.which("npm")
    if not npm:
        raise RuntimeError(
            "npm not found: the offline decks need reveal.js, MathJax ... from the npm registry "
            "once. Install Node.js (e.g. `apt-get install npm`) or copy a build/slides/vendor "
            "folder from another machine."
        )
    vendor_dir.mkdir(parents=True, exist_ok=True)
    (vendor_dir / "package.json").write_text(json.dumps(vendor_manifest(), indent=2) + "\n", encoding="utf-8")
    specs = [f"{name}@{version}" for name, version in VENDOR_PACKAGES.items()]
    cmd = [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--loglevel=error",
           "--prefix", str(vendor_dir), *specs]
    log(f"slides: missing {' '.join(missing)}; npm install {' '.join(specs)} -> {vendor_dir}")
    t0 = time.perf_counter()
    try:
        proc = run(cmd, capture_output=True, text=True, check=False, timeout=NPM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"npm install took longer than {NPM_TIMEOUT_S} s (is the npm registry reachable?); "
            f"nothing was exported. Run make slides again, or copy a build/slides/vendor folder"
        ) from None
    if proc.returncode != 0:
        raise RuntimeError(
            f"npm install failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-800:]}"
        )
    still = missing_vendor_packages(vendor_dir)
    if still:
        raise RuntimeError(f"npm install ran but {still} are still missing in {vendor_dir}")
    log(f"slides: vendor packages installed in {time.perf_counter() - t0:.1f} s")
    return True


# ------------------------------------------------------------------ export
def _url(target: Path, start: Path) -> str:
    """Relative URL from the folder ``start`` to ``target`` (forward slashes)."""
    return Path(os.path.relpath(target, start)).as_posix()


def exporter_config(deck_dir: Path, vendor_dir: Path, language: str = "en"):
    """nbconvert configuration of the offline decks written to ``deck_dir`` (their HTML
    in ``language``, one of :data:`DECK_LANGUAGES`)."""
    from traitlets.config import Config

    deck_dir = _check_path(deck_dir, "deck_dir")
    html_lang = DECK_LANGUAGES[_check_language(language)][0]
    modules = _check_path(vendor_dir, "vendor_dir") / "node_modules"
    rel = {key: _url(modules / path, Path(deck_dir)) for key, path in VENDOR_FILES.items()}
    c = Config()
    c.SlidesExporter.template_name = TEMPLATE_NAME
    c.SlidesExporter.extra_template_basedirs = [str(TEMPLATE_DIR)]
    c.SlidesExporter.reveal_url_prefix = rel["reveal"]
    c.SlidesExporter.reveal_theme = "white"  # "simple" pulls web fonts from Google
    c.SlidesExporter.reveal_transition = "slide"
    c.SlidesExporter.reveal_number = "c/t"
    c.SlidesExporter.require_js_url = rel["require"]
    c.SlidesExporter.jquery_url = rel["jquery"]
    c.SlidesExporter.mathjax_url = rel["mathjax"] + MATHJAX_CONFIG
    c.SlidesExporter.widget_renderer_url = rel["widgets"]
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    c.SlidesExporter.language_code = html_lang
    c.TagRemovePreprocessor.enabled = True
    c.TagRemovePreprocessor.remove_cell_tags = set(REMOVE_CELL_TAGS)
    c.TagRemovePreprocessor.remove_input_tags = set(REMOVE_INPUT_TAGS)
    c.TagRemovePreprocessor.remove_all_outputs_tags = set(REMOVE_OUTPUT_TAGS)
    return c


def execute_notebook(path: Path, *, timeout: int = 600):
    """Run a notebook top to bottom in a fresh kernel of this Python; return the node.

    The kernel works in the notebook's folder, widget state is stored in the metadata
    (for the decks), and cells tagged ``skip-execution`` are not run.
    """
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
        resources={"metadata": {"path": str(Path(path).parent)}},
    )
    client.execute()
    return nb


def deck_title(nb: Any, default: str = "") -> str:
    """Title of a notebook's deck: its ``title`` metadata if set (nbconvert's own rule),
    else its first level-1 heading (:func:`notebook_title`), else ``default``.

    Examples
    --------
    >>> deck_title({"metadata": {}, "cells": [{"cell_type": "markdown", "source": "# 11 Summary"}]}, "16_summary")
    '11 Summary'
    """
    _check_notebook(nb)
    return (nb.get("metadata", {}) or {}).get("title") or notebook_title(nb, default)


@functools.lru_cache(maxsize=4)
def _exporter(deck_dir: str, vendor_dir: str, language: str = "en"):
    """The nbconvert exporter of the decks written to ``deck_dir``, made once per output and
    vendor folder (and language): its templates are compiled once (about 0.2 s a deck), not
    for every deck. An exporter converts one notebook after another as a fresh one would
    (nbconvert's own command line uses one for all its notebooks)."""
    from nbconvert import SlidesExporter

    return SlidesExporter(config=exporter_config(Path(deck_dir), Path(vendor_dir), language))


def export_deck(nb: Any, name: str, deck_dir: Path, vendor_dir: Path, *, language: str = "en") -> Path:
    """Write the deck of notebook node ``nb`` to ``deck_dir/<name>.slides.html``.

    The page title is :func:`deck_title` (the notebook's first heading) rather than the
    file name that nbconvert would use; the page's ``lang`` is ``language`` (one of
    :data:`DECK_LANGUAGES`); ``nb`` itself is not modified.
    """
    from nbformat import NotebookNode

    _check_notebook(nb)
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str (the deck's file name), got {name!r}")
    deck_dir = _check_path(deck_dir, "deck_dir")
    vendor_dir = _check_path(vendor_dir, "vendor_dir")
    language = _check_language(language)
    deck_dir.mkdir(parents=True, exist_ok=True)
    # nbconvert's reveal template titles the page with nb.metadata.title, else the name.
    metadata = NotebookNode({**nb.get("metadata", {}), "title": deck_title(nb, name)})
    nb = NotebookNode(deck_notebook({**nb, "metadata": metadata}))
    exporter = _exporter(str(deck_dir), str(vendor_dir), language)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": name, "path": str(deck_dir)}})
    out = deck_dir / f"{name}.slides.html"
    out.write_text(body, encoding="utf-8")
    return out


def write_index(decks: Sequence[Deck], deck_dir: Path, *, language: str = "en") -> Path:
    """``index.html`` linking every deck in chapter (file name) order, its text in
    ``language`` (one of :data:`DECK_LANGUAGES`)."""
    decks = check_sequence(decks, "decks", Deck, "a Deck")
    deck_dir = _check_path(deck_dir, "deck_dir")
    text = INDEX_TEXT[_check_language(language)]
    items = []
    for deck in sorted(decks, key=lambda d: d.path.name):
        href = html.escape(deck.path.name, quote=True)
        slides = text["count"].format(sections=len(deck.structure), slides=sum(deck.structure))
        items.append(
            f'  <li><a href="{href}">{html.escape(deck.title)}</a> <small>{text["open"]}{slides}{text["sep"]}'
            f'<a href="{href}?print-pdf">{text["print"]}</a>{text["close"]}</small></li>'
        )
    page = "\n".join([
        "<!DOCTYPE html>",
        f'<html lang="{DECK_LANGUAGES[language][1]}">',
        f'<head><meta charset="utf-8"><title>{text["title"]}</title>',
        "<style>body{font-family:sans-serif;max-width:46em;margin:2em auto;line-height:1.5}"
        "li{margin:.4em 0}small{color:#555}</style></head>",
        "<body>",
        f"<h1>{text['heading']}</h1>",
        "<ol>",
        *items,
        "</ol>",
        f"<p>{text['keys']}</p>",
        "</body>",
        "</html>",
        "",
    ])
    out = Path(deck_dir) / "index.html"
    out.write_text(page, encoding="utf-8")
    return out


def build_slides(
    notebooks: Sequence[Path],
    deck_dir: Path,
    *,
    vendor_dir: Path | None = None,
    execute: bool = False,
    timeout: int = 600,
    language: str = "en",
    log: Callable[[str], None] = print,
) -> list[Deck]:
    """Export ``notebooks`` to offline decks in ``deck_dir`` plus its ``index.html``.

    Parameters
    ----------
    notebooks : sequence of Path
        The notebooks, in any order (the index sorts them by file name).
    deck_dir : Path
        Output folder.
    vendor_dir : Path, optional
        Where the front-end packages live (installed there when missing);
        ``deck_dir / "vendor"`` by default. Decks refer to it by relative URLs.
    execute : bool
        Run each notebook in a fresh kernel first. False (the default) exports the stored
        outputs as they are: the measurements ``make notebooks`` stored on a quiet machine,
        not those of a lecturer's busy laptop at export time.
    timeout : int
        Seconds allowed per cell.
    language : str
        ``"en"``, or ``"zh_CN"`` for the decks of the Chinese edition: ``notebooks`` are then
        notebooks of ``notebooks/zh/`` (``make zh``), the index is in Chinese, and without
        ``execute`` each deck shows the stored outputs of the English notebook of the same
        name one folder up (:func:`stored_outputs_from`).
    """
    import nbformat

    notebooks = check_sequence(notebooks, "notebooks", (str, os.PathLike), "a path (str or Path)")
    deck_dir = _check_path(deck_dir, "deck_dir")
    vendor_dir = _check_path(vendor_dir, "vendor_dir") if vendor_dir is not None else deck_dir / "vendor"
    language = _check_language(language)
    if not notebooks:
        raise ValueError("notebooks must name at least one .ipynb file, got none")
    for path in notebooks:
        if Path(path).suffix != ".ipynb" or not Path(path).is_file():
            raise ValueError(f"notebooks: {path} is not an existing .ipynb file")
    chinese = language == "zh_CN"
    if chinese:
        for path in map(Path, notebooks):
            if _notebook_language(path) != CHINESE_NOTEBOOK_LANGUAGE:
                raise ValueError(f"notebooks: {path} is no notebook of the Chinese edition (metadata.language "
                                 f"{CHINESE_NOTEBOOK_LANGUAGE!r}): make zh writes them to notebooks/zh/")
            if not execute and not (path.parent.parent / path.name).is_file():
                raise ValueError(f"notebooks: {path} has no English notebook {path.parent.parent / path.name} "
                                 "to take its stored outputs from (or pass execute=True, --execute)")
    ensure_vendor(vendor_dir, log=log)
    decks = []
    for path in sorted(map(Path, notebooks), key=lambda p: p.name):
        t0 = time.perf_counter()
        if execute:
            try:
                nb = execute_notebook(path, timeout=timeout)
            except Exception as exc:  # CellExecutionError, timeouts, dead kernel
                ename = getattr(exc, "ename", None)
                what = f"{ename}: {getattr(exc, 'evalue', '')}" if ename else f"{type(exc).__name__}: {exc}"
                raise RuntimeError(f"{path}: execution failed: {what}") from exc
        else:
            nb = nbformat.read(path, as_version=4)
            if chinese:
                english = nbformat.read(path.parent.parent / path.name, as_version=4)
                nb, unmatched = stored_outputs_from(nb, english)
                nb = nbformat.from_dict(nb)
                if unmatched:
                    log(f"slides: warning: {path.name}: {len(unmatched)} code cells differ from the English "
                        f"notebook and show no output (first: cell {unmatched[0]}): run make zh")
        for problem in slide_problems(nb.cells):
            log(f"slides: warning: {path.name}: {problem}")
        out = export_deck(nb, path.stem, deck_dir, vendor_dir, language=language)
        deck = Deck(path, out, deck_title(nb, path.stem), slide_structure(nb.cells),
                    time.perf_counter() - t0)
        how = ("executed in a fresh kernel" if execute else
               "stored outputs of the English notebook" if chinese else "stored outputs")
        log(f"slides: {out} ({sum(deck.structure)} slides, {how}, {deck.seconds:.1f} s)")
        decks.append(deck)
    write_index(decks, deck_dir, language=language)
    return decks


def _notebook_language(path: Path) -> str | None:
    """``metadata.language`` of the notebook at ``path`` (None if unset or unreadable)."""
    try:
        metadata = json.loads(Path(path).read_text(encoding="utf-8")).get("metadata") or {}
    except (OSError, ValueError, AttributeError):
        return None
    return metadata.get("language") if isinstance(metadata, dict) else None


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_lib slides",
        description="Export notebooks to offline reveal.js decks (see course_lib.slides).",
    )
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to export (default: notebooks/*.ipynb; with --lang zh_CN notebooks/zh/*.ipynb)")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="output folder (default: build/slides at the repository root; build/slides/zh with --lang zh_CN)")
    parser.add_argument("--vendor", type=Path, default=None,
                        help="folder of the front-end packages (default: OUTPUT/vendor; build/slides/vendor with --lang zh_CN)")
    parser.add_argument("--execute", action="store_true",
                        help="run each notebook in a fresh kernel first (default: export the stored outputs)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    parser.add_argument("--lang", choices=tuple(DECK_LANGUAGES), default="en",
                        help="zh_CN: the Chinese decks, from notebooks/zh/ (make zh builds it) to "
                             "build/slides/zh/, with the English decks' vendor folder (default: en)")
    args = parser.parse_args(list(argv))
    t0 = time.perf_counter()
    chinese = args.lang == "zh_CN"
    try:
        if args.output is None or not args.notebooks:  # paths from the repository root
            root = repo_root()
            if args.output is None:
                args.output = root / "build" / "slides"
                if chinese:  # beside the English decks, with their vendor folder
                    args.output, args.vendor = args.output / "zh", args.vendor or args.output / "vendor"
        folder = root / "notebooks" / "zh" if chinese and not args.notebooks else None
        if folder is not None and not sorted(folder.glob("[0-9]*.ipynb")):
            raise ValueError(f"no Chinese notebooks in {folder}: run make zh first (make slides-zh does)")
        notebooks = args.notebooks or sorted((folder or root / "notebooks").glob("[0-9]*.ipynb"))
        decks = build_slides(notebooks, args.output, vendor_dir=args.vendor,
                             execute=args.execute, timeout=args.timeout, language=args.lang)
    except (RuntimeError, ValueError) as exc:
        print(f"slides: error: {exc}", file=sys.stderr)
        return 1
    index = args.output / "index.html"
    print(f"slides: {len(decks)} decks in {time.perf_counter() - t0:.1f} s; open {index}")
    return 0
