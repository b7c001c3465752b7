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
from .paths import repo_root

__all__ = [
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

_TEX_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "pi": "π",
    "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "varphi": "φ", "omega": "ω",
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Pi": "Π", "Sigma": "Σ", "Phi": "Φ",
    "Omega": "Ω", "times": "×", "cdot": "·", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥",
    "approx": "≈", "ne": "≠", "neq": "≠", "in": "∈", "notin": "∉", "infty": "∞", "to": "→",
    "rightarrow": "→", "leftarrow": "←", "Rightarrow": "⇒", "sum": "Σ", "prod": "Π",
    "ldots": "…", "dots": "…", "cdots": "⋯", "pm": "±", "sim": "~", "propto": "∝", "ll": "≪",
    "gg": "≫", "lfloor": "⌊", "rfloor": "⌋", "lceil": "⌈", "rceil": "⌉", "log": "log",
    "ln": "ln", "exp": "exp", "max": "max", "min": "min", "quad": " ", "qquad": " ",
    "{": "{", "}": "}", ",": " ", ";": " ", ":": " ", "!": "", "%": "%", " ": " ", "\\": " ",
}
_TEX_TEXT = ("text", "textrm", "mathrm", "mathit", "mathbf", "mathsf", "operatorname", "textit", "textbf")
_TEX_IGNORED = ("left", "right", "big", "Big", "bigl", "bigr", "Bigl", "Bigr", "displaystyle", "limits")
_MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\s)(.+?)(?<![\\\s])\$(?!\d)", re.S)
_MARKDOWN_SPECIAL = {"*": "&#42;", "_": "&#95;", "`": "&#96;", "\\": "&#92;", "~": "&#126;"}


def _tex_char(ch: str) -> str:
    return _MARKDOWN_SPECIAL.get(ch) or html.escape(ch)


def _tex_group(tex: str, i: int) -> tuple[str, int]:
    """HTML of the TeX argument starting at ``tex[i]`` ({...}, a command or one
    character) and the index after it."""
    while i < len(tex) and tex[i] == " ":
        i += 1
    if i >= len(tex):
        return "", i
    if tex[i] == "{":
        depth, j = 0, i
        while j < len(tex):
            if tex[j] == "\\":  # \{ and \} are characters, not braces
                j += 2
                continue
            depth += {"{": 1, "}": -1}.get(tex[j], 0)
            if depth == 0:
                break
            j += 1
        return _tex_html(tex[i + 1 : j]), j + 1
    if tex[i] == "\\":
        match = re.compile(r"\\([A-Za-z]+|.)").match(tex, i)
        return _tex_html(match.group(0)), match.end()
    return _tex_char(tex[i]), i + 1


def _tex_paren(html_text: str) -> str:
    plain = re.sub(r"<[^>]+>", "", html_text)
    return f"({html_text})" if re.search(r"[\s+\-−·×/]", plain.strip()) else html_text


def _tex_html(tex: str) -> str:
    """HTML text of a TeX formula: Greek letters and operators as characters,
    sub- and superscripts as ``<sub>``/``<sup>``, ``\\frac{a}{b}`` as ``a/b``."""
    out, i = [], 0
    while i < len(tex):
        ch = tex[i]
        if ch == "\\":
            match = re.compile(r"\\([A-Za-z]+|.)").match(tex, i)
            name, i = match.group(1), match.end()
            if name in ("frac", "dfrac", "tfrac"):
                num, i = _tex_group(tex, i)
                den, i = _tex_group(tex, i)
                out.append(f"{_tex_paren(num)}/{_tex_paren(den)}")
            elif name == "sqrt":
                arg, i = _tex_group(tex, i)
                out.append(f"√{_tex_paren(arg)}")
            elif name in _TEX_TEXT:
                arg, i = _tex_group(tex, i)
                out.append(arg)
            elif name in _TEX_IGNORED:
                pass
            else:
                out.append(_TEX_SYMBOLS.get(name, _tex_char("\\") + html.escape(name)))
        elif ch in "_^":
            arg, i = _tex_group(tex, i + 1)
            tag = "sub" if ch == "_" else "sup"
            out.append(f"<{tag}>{arg}</{tag}>")
        elif ch == "{":
            arg, i = _tex_group(tex, i)
            out.append(arg)
        elif ch == "}":
            i += 1
        else:
            out.append(_tex_char(ch))
            i += 1
    return "".join(out)


def math_as_text(markdown: str) -> str:
    r"""Markdown with every ``$...$`` and ``$$...$$`` formula turned into HTML text.

    reveal.js's speaker view shows the notes' HTML in a window of its own, which has no
    MathJax: a formula left as TeX would vanish there ("has only . Then ...").
    As text (Greek letters and operators as characters, sub- and superscripts as
    ``<sub>``/``<sup>``, fractions as ``a/b``) it reads the same in the speaker view,
    the deck and the printout. Each formula becomes a ``<span class="ddl-math">``.

    Examples
    --------
    >>> math_as_text("idle share $2(N_p-1)/(2(M+N_p-1))$, bandwidth term $2m/\\beta$")
    'idle share <span class="ddl-math">2(N<sub>p</sub>-1)/(2(M+N<sub>p</sub>-1))</span>, bandwidth term <span class="ddl-math">2m/β</span>'
    >>> math_as_text(r"$\frac{t_f + t_b}{2}$, $N \in \{1, 2\}$ and $10^{-3}$ cost \$5")
    '<span class="ddl-math">(t<sub>f</sub> + t<sub>b</sub>)/2</span>, <span class="ddl-math">N ∈ {1, 2}</span> and <span class="ddl-math">10<sup>-3</sup></span> cost \\$5'
    """
    check_type(markdown, "markdown", str, "Markdown text (str)")

    def one(match: re.Match) -> str:
        return f'<span class="ddl-math">{_tex_html((match.group(1) or match.group(2)).strip())}</span>'

    return _MATH.sub(one, markdown)


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


def exporter_config(deck_dir: Path, vendor_dir: Path):
    """nbconvert configuration of the offline decks written to ``deck_dir``."""
    from traitlets.config import Config

    deck_dir = _check_path(deck_dir, "deck_dir")
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
def _exporter(deck_dir: str, vendor_dir: str):
    """The nbconvert exporter of the decks written to ``deck_dir``, made once per output and
    vendor folder: its templates are compiled once (about 0.2 s a deck), not for every deck.
    An exporter converts one notebook after another as a fresh one would (nbconvert's own
    command line uses one for all its notebooks)."""
    from nbconvert import SlidesExporter

    return SlidesExporter(config=exporter_config(Path(deck_dir), Path(vendor_dir)))


def export_deck(nb: Any, name: str, deck_dir: Path, vendor_dir: Path) -> Path:
    """Write the deck of notebook node ``nb`` to ``deck_dir/<name>.slides.html``.

    The page title is :func:`deck_title` (the notebook's first heading) rather than the
    file name that nbconvert would use; ``nb`` itself is not modified.
    """
    from nbformat import NotebookNode

    _check_notebook(nb)
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str (the deck's file name), got {name!r}")
    deck_dir = _check_path(deck_dir, "deck_dir")
    vendor_dir = _check_path(vendor_dir, "vendor_dir")
    deck_dir.mkdir(parents=True, exist_ok=True)
    # nbconvert's reveal template titles the page with nb.metadata.title, else the name.
    metadata = NotebookNode({**nb.get("metadata", {}), "title": deck_title(nb, name)})
    nb = NotebookNode(deck_notebook({**nb, "metadata": metadata}))
    exporter = _exporter(str(deck_dir), str(vendor_dir))
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": name, "path": str(deck_dir)}})
    out = deck_dir / f"{name}.slides.html"
    out.write_text(body, encoding="utf-8")
    return out


def write_index(decks: Sequence[Deck], deck_dir: Path) -> Path:
    """``index.html`` linking every deck in chapter (file name) order."""
    decks = check_sequence(decks, "decks", Deck, "a Deck")
    deck_dir = _check_path(deck_dir, "deck_dir")
    items = []
    for deck in sorted(decks, key=lambda d: d.path.name):
        href = html.escape(deck.path.name, quote=True)
        slides = f"{len(deck.structure)} sections, {sum(deck.structure)} slides"
        items.append(
            f'  <li><a href="{href}">{html.escape(deck.title)}</a> <small>({slides}; '
            f'<a href="{href}?print-pdf">print version</a>)</small></li>'
        )
    page = "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8"><title>ddl-course slides</title>',
        "<style>body{font-family:sans-serif;max-width:46em;margin:2em auto;line-height:1.5}"
        "li{margin:.4em 0}small{color:#555}</style></head>",
        "<body>",
        "<h1>Introduction to distributed deep learning computation: slides</h1>",
        "<ol>",
        *items,
        "</ol>",
        "<p>Keys: arrows or space to move, <kbd>S</kbd> speaker view (notes, timer, next slide), "
        "<kbd>F</kbd> full screen, <kbd>Esc</kbd> overview. PDF: open a deck's print version "
        "and print to PDF from the browser (landscape, no margins, background graphics on).</p>",
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
    """
    import nbformat

    notebooks = check_sequence(notebooks, "notebooks", (str, os.PathLike), "a path (str or Path)")
    deck_dir = _check_path(deck_dir, "deck_dir")
    vendor_dir = _check_path(vendor_dir, "vendor_dir") if vendor_dir is not None else deck_dir / "vendor"
    if not notebooks:
        raise ValueError("notebooks must name at least one .ipynb file, got none")
    for path in notebooks:
        if Path(path).suffix != ".ipynb" or not Path(path).is_file():
            raise ValueError(f"notebooks: {path} is not an existing .ipynb file")
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
        for problem in slide_problems(nb.cells):
            log(f"slides: warning: {path.name}: {problem}")
        out = export_deck(nb, path.stem, deck_dir, vendor_dir)
        deck = Deck(path, out, deck_title(nb, path.stem), slide_structure(nb.cells),
                    time.perf_counter() - t0)
        how = "executed in a fresh kernel" if execute else "stored outputs"
        log(f"slides: {out} ({sum(deck.structure)} slides, {how}, {deck.seconds:.1f} s)")
        decks.append(deck)
    write_index(decks, deck_dir)
    return decks


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_lib slides",
        description="Export notebooks to offline reveal.js decks (see course_lib.slides).",
    )
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to export (default: notebooks/*.ipynb)")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="output folder (default: build/slides at the repository root)")
    parser.add_argument("--vendor", type=Path, default=None,
                        help="folder of the front-end packages (default: OUTPUT/vendor)")
    parser.add_argument("--execute", action="store_true",
                        help="run each notebook in a fresh kernel first (default: export the stored outputs)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    args = parser.parse_args(list(argv))
    t0 = time.perf_counter()
    try:
        if args.output is None or not args.notebooks:  # paths from the repository root
            root = repo_root()
            args.output = args.output or root / "build" / "slides"
        notebooks = args.notebooks or sorted((root / "notebooks").glob("[0-9]*.ipynb"))
        decks = build_slides(notebooks, args.output, vendor_dir=args.vendor,
                             execute=args.execute, timeout=args.timeout)
    except (RuntimeError, ValueError) as exc:
        print(f"slides: error: {exc}", file=sys.stderr)
        return 1
    index = args.output / "index.html"
    print(f"slides: {len(decks)} decks in {time.perf_counter() - t0:.1f} s; open {index}")
    return 0
