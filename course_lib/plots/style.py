"""The course's figure style: one place sets size, type, colour and pixel density.

Every figure of the course is drawn inside :func:`styled` (a decorator on each public
plot function) and rendered by :func:`course_lib.plots.figure_to_png` at :data:`DPI`.
The numbers, and why:

* **Pixel density 2x.** A figure is shown at :data:`DISPLAY_DPI` CSS pixels per inch of
  figure and rendered at twice that (:data:`DPI`), so it stays crisp on a HiDPI screen
  and a projector. :func:`display_width` gives the width to show a PNG at.
* **Text at least** :data:`MIN_FONT_PT` **pt at display size**: a full-width figure is
  between :data:`MIN_WIDTH_IN` and :data:`MAX_WIDTH_IN` inches wide, so JupyterLab never
  has to shrink it (which would shrink its text) and it is at least 1,000 pixels wide.
* **Colour-blind safe colours**: the Okabe-Ito palette (:data:`COLORS`), in an order
  whose neighbours differ in lightness as well as hue.
* **Chinese text** (only when :func:`course_lib.i18n.language` is Chinese): DejaVu Sans
  stays the font of every Latin letter and digit, and the first installed font of
  :data:`CJK_FONTS` (:func:`cjk_font`) draws the Chinese glyphs, so an English figure is
  unchanged and a Chinese one has no empty boxes.

:func:`audit` checks a figure against these rules; a figure that breaks one raises a
:class:`StyleWarning` (the test suite turns it into an error).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["CJK_FONTS", "COLORS", "DENSITY", "DISPLAY_DPI", "DPI", "MAX_WIDTH_IN", "MIN_FONT_PT",
           "MIN_WIDTH_IN", "RC", "StyleWarning", "audit", "display_width", "rc_params", "styled"]

#: Okabe & Ito (2008) colour-blind safe palette: blue, vermillion, bluish green,
#: reddish purple, orange, sky blue, yellow, black. Neighbours in the cycle differ in
#: lightness too, so the first four series also read in grey.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")

#: CSS pixels per inch of figure when shown (a 6.4-inch figure is shown 640 px wide).
DISPLAY_DPI = 100
#: Pixel density: rendered pixels per displayed pixel.
DENSITY = 2
#: Resolution every figure is rendered at.
DPI = DISPLAY_DPI * DENSITY
#: Smallest type size, in points at display size.
MIN_FONT_PT = 10.0
#: Narrowest figure (inches): rendered at :data:`DPI` it is 1,000 pixels wide.
MIN_WIDTH_IN = 5.0
#: Widest figure (inches): shown at :data:`DISPLAY_DPI` it fits a notebook column
#: (and a 960-pixel slide) without being shrunk.
MAX_WIDTH_IN = 9.6

#: Matplotlib settings applied while a figure is built and drawn.
RC: dict[str, Any] = {
    "font.size": 11.0,
    "axes.titlesize": 12.0,
    "axes.titleweight": "normal",
    "axes.labelsize": 11.0,
    "xtick.labelsize": 10.5,
    "ytick.labelsize": 10.5,
    "legend.fontsize": 10.5,
    "legend.title_fontsize": 10.5,
    "legend.frameon": True,
    "legend.framealpha": 0.9,
    "legend.edgecolor": "0.8",
    "figure.titlesize": 13.0,
    "lines.linewidth": 2.0,
    "lines.markersize": 6.5,
    "axes.linewidth": 0.9,
    "axes.prop_cycle": None,  # set from COLORS on first use (needs matplotlib)
    "grid.linewidth": 0.7,
    "savefig.dpi": DPI,
    "figure.dpi": DISPLAY_DPI,
}

#: Fonts with Chinese glyphs, the first installed one is used: Noto Sans CJK / Source Han Sans
#: (Debian's fonts-noto-cjk), WenQuanYi Zen Hei (fonts-wqy-zenhei), Microsoft YaHei and SimHei
#: (Windows), PingFang SC and Heiti SC (macOS). Noto's collection file may register as its
#: Japanese face first: the same glyph set.
CJK_FONTS = ("Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Zen Hei", "Microsoft YaHei",
             "PingFang SC", "Heiti SC", "SimHei", "Noto Sans SC", "Source Han Sans CN",
             "Noto Sans CJK JP", "WenQuanYi Micro Hei", "Droid Sans Fallback", "AR PL UMing CN")

F = TypeVar("F", bound=Callable[..., Any])


class StyleWarning(UserWarning):
    """A figure breaks one of the course's style rules (see :func:`audit`)."""


def rc_params() -> dict[str, Any]:
    """The matplotlib settings of the course style: :data:`RC` with the :data:`COLORS` cycle.

    Examples
    --------
    >>> rc_params()["axes.titlesize"]
    12.0
    """
    from cycler import cycler

    from ..i18n import language

    params = {**RC, "axes.prop_cycle": cycler(color=COLORS)}
    if language() != "en":
        cjk = cjk_font()
        if cjk is not None:  # the CJK font first: a text with $math$ is laid out by mathtext,
            # which draws the words around the formula in the first family only (DejaVu Sans
            # first drew them as boxes). Named families, not "sans-serif": a text keeps them
            # when it is drawn outside this style (figure_to_png renders after the plot returned).
            params["font.family"] = [cjk, "DejaVu Sans"]
    return params


@functools.lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The first installed font of :data:`CJK_FONTS` that matplotlib can use (None: none).

    Looks in matplotlib's font list, then asks fontconfig (``fc-list :lang=zh``, where it
    exists) for Chinese fonts installed after matplotlib built its font cache and adds
    them, so that installing one needs no cache to be deleted. Without one, a Chinese
    figure warns once and names the font to install (the doctor does too).
    """
    import shutil
    import subprocess

    from matplotlib import font_manager

    def first() -> str | None:
        names = {f.name for f in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FONTS if name in names), None)

    found = first()
    fc_list = shutil.which("fc-list")
    if found is None and fc_list is not None:
        try:
            out = subprocess.run([fc_list, ":lang=zh", "file", "family"], capture_output=True, text=True,
                                 timeout=20, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        families = []
        for line in sorted(set(out.splitlines())):
            path, _, family = line.partition(": ")
            if path.lower().endswith((".ttf", ".otf", ".ttc")):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):  # a font matplotlib cannot read
                    continue
                families.append(family.split(",")[0].strip())
        names = {f.name for f in font_manager.fontManager.ttflist}
        found = first() or next((f for f in families if f in names), None)
    if found is not None:  # e.g. WenQuanYi has weight 500 only: using it for 400 is intended
        import logging

        logging.getLogger("matplotlib.font_manager").addFilter(
            lambda record: not ("Failed to find font weight" in record.getMessage() and found in record.getMessage()))
    if found is None:
        warnings.warn("no font with Chinese glyphs found: Chinese figure text shows as empty boxes. "
                      f"Install one of {', '.join(CJK_FONTS[:3])} (Debian: apt-get install fonts-noto-cjk, "
                      "or the smaller fonts-wqy-zenhei)", UserWarning, stacklevel=2)
    return found


def styled(plot: F) -> F:
    """Decorator: build the figure under the course style, then :func:`audit` it.

    Examples
    --------
    >>> from course_lib.plots import new_figure
    >>> @styled
    ... def tiny():
    ...     fig, ax = new_figure(size=(6.4, 3.0))
    ...     ax.set_title("a title")
    ...     return fig
    >>> tiny().axes[0].title.get_fontsize()
    12.0
    """

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context(rc_params()):
            fig = plot(*args, **kwargs)
            _latin_tick_labels(fig)
            problems = audit(fig)
        for problem in problems:
            warnings.warn(f"{plot.__name__}: {problem}", StyleWarning, stacklevel=2)
        return fig

    wrapper.__styled__ = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def _latin_tick_labels(fig: Figure) -> None:
    """Tick labels (numbers) in DejaVu Sans when a CJK font leads the family: a log axis
    writes ``$\\mathdefault{10^{-3}}$``, drawn in the first family's font, and a CJK font
    may lack the minus sign U+2212 (WenQuanYi does: a box)."""
    import matplotlib

    from ..i18n import language

    if language() == "en" or matplotlib.rcParams["font.family"][:1] != [cjk_font()]:  # English: as it was
        return
    for ax in fig.axes:
        try:
            ax.tick_params(which="both", labelfontfamily="DejaVu Sans")
        except (TypeError, ValueError, AttributeError):  # matplotlib < 3.8: no such parameter
            return


def audit(fig: Figure) -> list[str]:
    """Every way ``fig`` breaks the style rules: too narrow or too wide, type too small.

    Checks the figure's width against [:data:`MIN_WIDTH_IN`, :data:`MAX_WIDTH_IN`] and
    every visible, non-empty text (titles, labels, tick labels, legends, annotations)
    against :data:`MIN_FONT_PT`.

    Examples
    --------
    >>> from course_lib.plots import new_figure
    >>> fig, ax = new_figure(size=(4.0, 3.0))
    >>> _ = ax.text(0.5, 0.5, "small", fontsize=7)
    >>> for problem in audit(fig):
    ...     print(problem)
    figure is 4 in wide, narrower than 5 in (1,000 px at 200 dpi)
    text 'small' is 7 pt, smaller than 10 pt
    """
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    from .._validate import check_type

    check_type(fig, "fig", Figure, "a matplotlib Figure")
    problems = []
    width = fig.get_figwidth()
    if width < MIN_WIDTH_IN - 1e-9:
        problems.append(f"figure is {width:g} in wide, narrower than {MIN_WIDTH_IN:g} in "
                        f"({MIN_WIDTH_IN * DPI:,.0f} px at {DPI} dpi)")
    if width > MAX_WIDTH_IN + 1e-9:
        problems.append(f"figure is {width:g} in wide, wider than {MAX_WIDTH_IN:g} in "
                        "(a notebook would shrink it and its text)")
    for ax in fig.axes:  # tick labels are made when drawn: check what they will be
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks()[:1]:
                if tick.label1.get_visible() and tick.label1.get_fontsize() < MIN_FONT_PT:
                    problems.append(f"{axis.axis_name} tick labels are {tick.label1.get_fontsize():g} pt, "
                                    f"smaller than {MIN_FONT_PT:g} pt")
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text().strip() and text.get_fontsize() < MIN_FONT_PT - 1e-9:
            problems.append(f"text {text.get_text()[:40]!r} is {text.get_fontsize():g} pt, "
                            f"smaller than {MIN_FONT_PT:g} pt")
    return problems


def display_width(png: bytes, dpi: float = DPI) -> int:
    """Width in CSS pixels to show a PNG rendered at ``dpi``: :data:`DISPLAY_DPI` per inch of figure.

    At the default ``dpi`` this is the pixel width / :data:`DENSITY`.

    Examples
    --------
    >>> import struct, zlib
    >>> header = b"\\x89PNG\\r\\n\\x1a\\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 1280, 800)
    >>> display_width(header)
    640
    """
    import struct

    if not isinstance(png, (bytes, bytearray)) or png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        raise ValueError("png must be the bytes of a PNG image")
    width = struct.unpack(">I", bytes(png[16:20]))[0]
    return max(1, round(width * DISPLAY_DPI / dpi))
