"""What a notebook's own code prints, as messages: the string literals of its code cells.

A notebook prints sentences of its own (``print(f"{n} workers: {t:.2f} s")``), labels its
widgets and figures (``xlabel="workers"``). The Chinese edition translates them like the
prose: each such literal is one message of the notebook's catalogue, in the context
``code`` (:data:`CONTEXT`), located by its cell id; the build writes the translated literal
in its place, and nothing else of the code changes.

A message is the literal as a *template*: its text, with each field of an f-string written
``{expression!conversion:spec}`` as Python would print the expression (:func:`ast.unparse`),
and a literal brace doubled (``{{``); several literals side by side (``"a " f"{b}"``) are
one message, the string Python makes of them. A translation must keep every field's
expression and conversion (the spec may change: a wider column for Chinese); the strings
inside a field's expression (``{'serial':>7}``, ``{'fits' if ok else 'does not fit'}``) may be
translated too.

Which literals are messages: those with prose (two English words; a word and more than a
name, such as ``"before:"``; a word in a label keyword such as ``title=`` or ``xlabel=``),
except docstrings and bare string statements and the keyword arguments that name things
rather than say them (``loc="upper left"``, :data:`NAMING_KEYWORDS`). Dictionary keys,
subscripts and compared strings are messages too: one English text has one translation in a
notebook, so a key that the notebook writes in one cell and looks up in another stays one
key. A literal that must stay English (a key of the library's, an option it compares) is
translated as itself.

Examples
--------
>>> [m for m, _ in code_messages('print(f"{n} workers took {t:.2f} s")\\nd["a key"] = 1')]
['{n} workers took {t:.2f} s', 'a key']
>>> translate_code('print(f"{n} workers took {t:.2f} s")', {"{n} workers took {t:.2f} s": "{n} 个工作进程用时 {t:.2f} s"})
'print(f"{n} 个工作进程用时 {t:.2f} s")'
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping

__all__ = ["CONTEXT", "NAMING_KEYWORDS", "code_messages", "code_shape", "field_signature", "literal_problems",
           "translate_code"]

#: The msgctxt of a message taken from a code cell (a Markdown sentence of the same words is
#: another message).
CONTEXT = "code"
#: Keywords whose string names a thing (a legend position, a colour, a start method), never
#: prose: their literals are never messages.
NAMING_KEYWORDS = frozenset({
    "loc", "ha", "va", "horizontalalignment", "verticalalignment", "cmap", "color", "colors",
    "marker", "linestyle", "ls", "dtype", "family", "fontfamily", "start_method", "backend",
    "schedule", "kind", "method", "mode", "sep", "end", "encoding", "errors", "fmt", "key",
    "column", "columns", "by", "scheme", "loss", "y_axis", "x_axis", "layout", "orientation",
})
#: Keywords whose string is shown to the reader even when it is one word.
LABEL_KEYWORDS = frozenset({"title", "xlabel", "ylabel", "label", "description", "help",
                            "caption", "legend", "text", "suptitle", "header", "placeholder"})
#: The course's widgets (course_lib.live.widgets), whose second argument is the label a reader
#: sees (``Slider("bandwidth_gbit", "link", ...)``); their unit is a name the widget reads
#: (it translates the unit it shows itself).
WIDGETS = frozenset({"Slider", "Choice"})
_PROSE = re.compile(r"[A-Za-z]{2,}[^\w\s]*\s+[^\w\s]*[A-Za-z]{2,}")
_WORD = re.compile(r"[A-Za-z]{3,}")


def _mask_magics(source: str) -> str:
    """The cell with its IPython lines (``%magic``, ``%%cell``, ``!shell``) turned into
    comments of the same length, so that lines and columns stay where they are."""
    return re.sub(r"(?m)^(\s*)[%!]", r"\1#", source)


def _expression(node: ast.AST) -> str:
    text = ast.unparse(node)
    return f" {text}" if text.startswith("{") else text  # "{ {...}" is no doubled brace


def _template(node: ast.AST) -> str:
    """``node`` (a str constant or an f-string) as a template: f-string syntax, braces of
    the text doubled, so that a single ``{`` always opens a field."""
    if isinstance(node, ast.Constant):
        return node.value.replace("{", "{{").replace("}", "}}")
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(value.value.replace("{", "{{").replace("}", "}}"))
            continue
        conversion = "" if value.conversion == -1 else f"!{chr(value.conversion)}"
        spec = f":{_template(value.format_spec)}" if value.format_spec is not None else ""
        parts.append(f"{{{_expression(value.value)}{conversion}{spec}}}")
    return "".join(parts)


def _skipped(parents: list[ast.AST], node: ast.AST) -> bool:
    """Whether the literal ``node`` (with its ancestors ``parents``, nearest last) names a
    thing rather than saying something."""
    parent = parents[-1] if parents else None
    if isinstance(parent, ast.Expr):
        return True  # a docstring, or a string on its own
    # A dictionary key, a subscript or a compared string is a message like any other: one
    # English text has one translation in its notebook, so a key the notebook writes and
    # looks up stays one key; a key of the library's (step["L0 ReLU"]) is translated as itself.
    return isinstance(parent, ast.keyword) and parent.arg in NAMING_KEYWORDS


def _is_label(parents: list[ast.AST], node: ast.AST) -> bool:
    """Whether the literal ``node`` labels something a reader sees, so that one word is a message."""
    parent = parents[-1] if parents else None
    if isinstance(parent, ast.keyword):
        return parent.arg in LABEL_KEYWORDS
    name = getattr(getattr(parent, "func", None), "id", getattr(getattr(parent, "func", None), "attr", None))
    return isinstance(parent, ast.Call) and name in WIDGETS and len(parent.args) > 1 and parent.args[1] is node


def _has_prose(text: str, label: bool) -> bool:
    """Two words, or a word and more than a name (``"before:"``, ``"limit 1/(1-p) = {x}"``);
    one word in a label keyword. A name alone (``"BERT-Large"``, ``"v100_sxm2"``) is none."""
    bare = re.sub(r"\{\{|\}\}|\{[^{}]*(\{[^{}]*\}[^{}]*)*\}|\$[^$]*\$", " ", text)
    if _PROSE.search(bare) or (label and _WORD.search(bare)):
        return True
    return bool(_WORD.search(bare)) and not re.fullmatch(r"\s*[\w.\-/]*\s*", bare)


def _words_in_fields(node: ast.AST) -> bool:
    """Whether a field of the f-string ``node`` shows words: a string that is the field's value
    (``{'latency':>9}``, a table heading; ``{'above' if d > 0 else 'below'}``), not one that
    names something inside it (``{row['seconds']}``, ``{f(x, algorithm='im2col')}``)."""
    def shown(expr: ast.AST) -> list[ast.AST]:
        if isinstance(expr, ast.IfExp):
            return shown(expr.body) + shown(expr.orelse)
        if isinstance(expr, ast.BinOp):
            return shown(expr.left) + shown(expr.right)
        if isinstance(expr, ast.JoinedStr):
            return [v for v in expr.values if isinstance(v, ast.Constant)]
        return [expr]

    return isinstance(node, ast.JoinedStr) and any(
        isinstance(inner, ast.Constant) and isinstance(inner.value, str) and _WORD.search(inner.value)
        for value in node.values if isinstance(value, ast.FormattedValue) for inner in shown(value.value))


def _literals(source: str) -> list[tuple[ast.AST, str]]:
    """The message literals of a cell: (node, template), in source order."""
    try:
        tree = ast.parse(_mask_magics(source))
    except SyntaxError:
        return []
    found = []

    def walk(node: ast.AST, parents: list[ast.AST]) -> None:
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            if not _skipped(parents, node):
                label = _is_label(parents, node)
                text = _template(node)
                if _has_prose(text, label) or _words_in_fields(node):
                    found.append((node, text))
            return  # a field's own strings belong to this message
        for child in ast.iter_child_nodes(node):
            walk(child, [*parents, node])

    walk(tree, [])
    return sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset))


def code_messages(source: str) -> list[tuple[str, int]]:
    """The messages of one code cell, in order, with the line (1-based) each starts on.

    A cell that is not Python (a ``%%bash`` cell) has none.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be the code of a cell (str), got {type(source).__name__}")
    return [(text, node.lineno) for node, text in _literals(source)]


def _split_fields(template: str) -> list[tuple[str, str]]:
    """A template cut into ("text", t) and ("field", "{...}") pieces; a field ends at the
    brace that closes it (brackets and quoted strings inside are skipped)."""
    pieces, text, i = [], [], 0
    while i < len(template):
        c = template[i]
        if template.startswith(("{{", "}}"), i):
            text.append(c)
            i += 2
            continue
        if c == "}":
            raise ValueError(f"a single '}}' at {i}: write '}}}}' for a brace")
        if c != "{":
            text.append(c)
            i += 1
            continue
        depth, j, quote = 0, i, None
        while j < len(template):
            d = template[j]
            if quote:
                quote = None if d == quote else quote
            elif d in "'\"":
                quote = d
            elif d in "{[(":
                depth += 1
            elif d in "}])":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j == len(template):
            raise ValueError(f"the field at {i} is never closed")
        if text:
            pieces.append(("text", "".join(text)))
            text = []
        pieces.append(("field", template[i:j + 1]))
        i = j + 1
    if text:
        pieces.append(("text", "".join(text)))
    return pieces


def _code(template: str) -> str:
    """The Python literal of a (translated) template: an f-string if it has fields."""
    pieces = _split_fields(template)
    if all(kind == "text" for kind, _ in pieces):
        return repr("".join(p for _, p in pieces))
    inside = "".join(p for kind, p in pieces if kind == "field")
    quote = next((q for q in ('"', "'", '"""') if q not in inside), "'''")
    out = []
    for kind, piece in pieces:
        if kind == "field":
            out.append(piece)
        else:
            escaped = piece.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
            escaped = escaped.replace(quote[0], "\\" + quote[0]).replace("{", "{{").replace("}", "}}")
            out.append(escaped)
    return f"f{quote}{''.join(out)}{quote}"


def field_signature(template: str) -> list[tuple[str, str]]:
    """The fields a translation must keep: (expression, conversion) of each field in order
    of the expressions, every string inside an expression written ``''`` (a translator may
    translate ``{'fits' if ok else 'does not fit'}``, not change ``ok``)."""
    if not isinstance(template, str):
        raise TypeError(f"template must be a message (str), got {type(template).__name__}")
    node = ast.parse(_code(template), mode="eval").body
    out = []
    for value in getattr(node, "values", []):
        if isinstance(value, ast.FormattedValue):
            expr = ast.unparse(_Blank().visit(value.value))  # its strings may be translated
            out.append((expr, "" if value.conversion == -1 else chr(value.conversion)))
    return sorted(out)


class _Blank(ast.NodeTransformer):
    """An expression with every string in it made ``''``."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant("") if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return ast.Constant("")


def literal_problems(msgid: str, msgstr: str) -> list[str]:
    """Why ``msgstr`` cannot stand for the code message ``msgid`` (empty when it can): it
    must make valid Python and keep the English fields' expressions and conversions."""
    for name, value in (("msgid", msgid), ("msgstr", msgstr)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a message (str), got {type(value).__name__}")
    try:
        want, got = field_signature(msgid), field_signature(msgstr)
    except (SyntaxError, ValueError) as exc:
        return [f"{msgid[:60]!r}: the translation is no valid f-string ({exc})"]
    if want != got:
        return [f"{msgid[:60]!r}: fields {[e for e, _ in got]} in the translation, {[e for e, _ in want]} in the English"]
    return []


def _rewrite(source: str, new_literal: Callable[[str], str | None]) -> str:
    """``source`` with each message literal replaced by ``new_literal(template)`` (Python
    code), where that is not None."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:  # ast's columns count UTF-8 bytes
        line = lines[lineno - 1]
        return starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8"))

    out = source
    for node, template in reversed(_literals(source)):
        new = new_literal(template)
        if new is not None:
            start, end = offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)
            out = out[:start] + new + out[end:]
    return out


def translate_code(source: str, table: Mapping[str, str]) -> str:
    """One code cell with each message literal replaced by its translation in ``table``
    (English template -> translated template); literals without one stay as they are."""
    if not isinstance(source, str):
        raise TypeError(f"source must be the code of a cell (str), got {type(source).__name__}")
    return _rewrite(source, lambda t: _code(table[t]) if table.get(t, t) != t else None)


def code_shape(source: str) -> list[str]:
    """The tokens of a cell, each run of string literals side by side as one ``<str>`` and
    the line breaks inside brackets left out: a cell and its Chinese twin have one shape
    (only what they print differs); an edited line, a new comment, have another.

    Examples
    --------
    >>> code_shape('print("a b"\\n      "c d")  # note') == code_shape("print('甲乙')  # note")
    True
    >>> code_shape('print("a b")') == code_shape('# edited\\nprint("a b")')
    False
    """
    import io
    import tokenize

    if not isinstance(source, str):
        raise TypeError(f"source must be the code of a cell (str), got {type(source).__name__}")
    out: list[str] = []
    depth = 0  # inside an f-string (Python 3.12 and later tokenize its parts)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(_mask_magics(source)).readline):
            name = tokenize.tok_name[tok.type]
            if name == "NL":
                continue
            depth += name == "FSTRING_START"
            in_string = depth > 0 or tok.type == tokenize.STRING
            depth -= name == "FSTRING_END"
            if in_string:
                if not out or out[-1] != "<str>":
                    out.append("<str>")
            else:
                out.append(f"{name} {tok.string}")
    except (tokenize.TokenError, SyntaxError):  # not Python (a %%bash cell): its lines
        return source.splitlines()
    return out
