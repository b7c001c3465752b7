"""Formulas as HTML text, for reveal.js's speaker view (which runs no MathJax).

:func:`math_as_text` turns every ``$...$`` and ``$$...$$`` of a speaker note into HTML text:
Greek letters and operators as characters, sub- and superscripts as ``<sub>``/``<sup>``,
fractions as ``a/b``. :mod:`course_lib.tools.slides` applies it to the notes of every deck.
"""

from __future__ import annotations

import html
import re

from .._validate import check_type

__all__ = ["math_as_text"]

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
