"""The gettext function every sentence the library prints goes through (English and 简体中文).

The course is written in English; the Chinese edition (``notebooks/zh/``, built by
``python -m course_lib i18n build``) selects Chinese in its setup cell with
:func:`set_language`. A sentence is marked for translation where it is written::

    print(tr("{workers} workers took {time}", workers=n, time=f"{t:.2f} s"))

:func:`tr` translates the message first and fills its fields afterwards, so the
translator sees the whole sentence with its named fields and may reorder them; an
f-string (``tr(f"...")``) or ``tr("...").format(...)`` with positional fields cannot be
translated and is refused by the extractor. Numbers and units are formatted by the code
and passed as fields: they are never part of a translation. :func:`tr_n` chooses between
a singular and a plural form, :func:`N_` marks a module constant for extraction and
leaves it English (translate it with :func:`tr` where it is printed).

The translations are read from ``locale/<language>/LC_MESSAGES/course_lib.po`` beside the
package (the gettext catalogue translators edit; ``polib``, extra ``[i18n]``), once per
language and process: there is no compiled ``.mo`` file and no build step. Fuzzy and
untranslated entries are not used, so an edited English sentence shows in English until a
translator has looked at it.

The current language is the environment variable ``DDL_LANG`` (``en`` when unset):
:func:`set_language` sets it for this process and the worker processes it starts
afterwards, :func:`language` reads it. That variable is the module's only state.

Examples
--------
>>> tr("{n} of {total} steps", n=3, total=10)
'3 of 10 steps'
>>> tr_n("{count} worker", "{count} workers", 1), tr_n("{count} worker", "{count} workers", 4)
('1 worker', '4 workers')
"""

from __future__ import annotations

import functools
import numbers
import os
import re
import string
import warnings
from pathlib import Path

__all__ = ["ENV", "LANGUAGES", "N_", "language", "sentences", "set_language", "tr", "tr_n"]

#: The languages of the course: English (the source) and Simplified Chinese.
LANGUAGES = ("en", "zh_CN")
#: The environment variable that holds the current language.
ENV = "DDL_LANG"
#: The gettext domain of the library's printed text (its catalogue's name).
DOMAIN = "course_lib"


def _normalise(lang: str) -> str:
    """``zh-CN``, ``zh_cn``, ``zh`` -> ``zh_CN``; ``en_US``, ``EN`` -> ``en``; anything else unchanged."""
    key = lang.strip().replace("-", "_").lower()
    if key in ("zh", "zh_cn", "zh_hans", "zh_hans_cn"):
        return "zh_CN"
    if key == "en" or key.startswith("en_"):
        return "en"
    return lang


def set_language(lang: str) -> None:
    """Print the library's text in ``lang`` from now on: ``"en"`` or ``"zh_CN"``.

    Sets ``DDL_LANG`` in this process's environment, so worker processes started
    afterwards print in the same language. ``"zh-CN"`` (the notebooks' metadata spelling)
    and ``"zh"`` mean ``"zh_CN"``. Choosing Chinese reads its catalogue at once, so a
    missing catalogue or ``polib`` is reported here, not at the first printed sentence.

    Examples
    --------
    >>> set_language("fr")
    Traceback (most recent call last):
    ...
    ValueError: lang must be one of 'en', 'zh_CN' (or 'zh-CN'), got 'fr'
    """
    if not isinstance(lang, str):
        raise TypeError(f"lang must be a language code (str), one of {', '.join(map(repr, LANGUAGES))}, "
                        f"got {type(lang).__name__}")
    code = _normalise(lang)
    if code not in LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(map(repr, LANGUAGES))} (or 'zh-CN'), got {lang!r}")
    if code != "en":
        _catalogue(code)  # raises now, with the fix, if it cannot be read
        _table.cache_clear()  # forget an English fallback of an earlier, failed read
    os.environ[ENV] = code


def language() -> str:
    """The current language: ``DDL_LANG`` (normalised), ``"en"`` when unset.

    An unknown value warns once and counts as English.

    Examples
    --------
    >>> language() in LANGUAGES
    True
    """
    value = os.environ.get(ENV, "")
    if not value:
        return "en"
    code = _normalise(value)
    if code not in LANGUAGES:
        _warn_unknown(value)
        return "en"
    return code


@functools.cache
def _warn_unknown(value: str) -> None:
    warnings.warn(f"{ENV}={value!r} is not a course language ({', '.join(LANGUAGES)}): printing in English",
                  UserWarning, stacklevel=4)


def locale_dir() -> Path:
    """The folder of the catalogues: ``locale/`` beside the package (the repository layout)."""
    return Path(__file__).resolve().parent.parent / "locale"


@functools.cache
def _catalogue(lang: str) -> dict:
    """``{(msgctxt, msgid): msgstr or {index: msgstr}}`` of the translated, not fuzzy entries of
    ``lang``'s course_lib catalogue, read once per process; plus ``None: plural(n) -> index``."""
    path = locale_dir() / lang / "LC_MESSAGES" / f"{DOMAIN}.po"
    try:
        import polib
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"the {lang} edition reads its catalogue with polib: pip install -e '.[i18n]' "
            "(make zh installs it)") from exc
    if not path.is_file():
        raise FileNotFoundError(f"no catalogue for {lang}: {path} (run from a clone of the course)")
    po = polib.pofile(str(path))
    out: dict = {}
    for e in po:
        if e.obsolete or "fuzzy" in e.flags:
            continue
        if e.msgid_plural:
            forms = {int(k): v for k, v in e.msgstr_plural.items() if v}
            if forms and len(forms) == len(e.msgstr_plural):
                out[(e.msgctxt, e.msgid)] = forms
        elif e.msgstr:
            out[(e.msgctxt, e.msgid)] = e.msgstr
    out[None] = _plural_rule(po.metadata.get("Plural-Forms", ""))
    return out


@functools.cache
def _table(lang: str) -> dict:
    """:func:`_catalogue`, or English with one warning where it cannot be read (``DDL_LANG``
    set outside the course, without polib): printing never fails for a translation."""
    try:
        return _catalogue(lang)
    except (ImportError, OSError, ValueError) as exc:
        warnings.warn(f"printing in English: {exc}", UserWarning, stacklevel=4)
        return {None: _plural_rule("")}


def _plural_rule(header: str):
    """The plural index function of a ``Plural-Forms`` header (``nplurals=1; plural=0;``)."""
    import gettext

    expr = header.partition("plural=")[2].strip().rstrip(";") or "n != 1"
    return gettext.c2py(expr)


def _fill(message: str, source: str, fields: dict) -> str:
    """``message`` with its named fields filled; the English ``source`` if a translation's
    fields do not match (``msgfmt -c`` and the tests keep that from happening)."""
    if not fields:
        return message
    try:
        return message.format(**fields)
    except (KeyError, IndexError, ValueError, AttributeError):
        return source.format(**fields)


def tr(message: str, /, *, context: str | None = None, **fields) -> str:
    """``message`` in the current language, its named ``{fields}`` filled from ``fields``.

    ``context`` tells apart two meanings of one English text (gettext's msgctxt).

    Examples
    --------
    >>> tr("✓ Correct: {name} = {value}.", name="S", value="4")
    '✓ Correct: S = 4.'
    """
    _check_text(message, "message")
    lang = language()
    text = message if lang == "en" else _table(lang).get((context, message), message)
    if not isinstance(text, str):  # a plural entry used as a singular
        text = text.get(0, message)
    return _fill(text, message, fields)


def tr_n(singular: str, plural: str, count: int, /, *, context: str | None = None, **fields) -> str:
    """The form of ``singular``/``plural`` for ``count`` in the current language; ``{count}``
    and the other named fields filled.

    Examples
    --------
    >>> tr_n("one step", "{count} steps", 3)
    '3 steps'
    """
    _check_text(singular, "singular")
    _check_text(plural, "plural")
    if isinstance(count, bool) or not isinstance(count, numbers.Integral):
        raise TypeError(f"count must be an integer, got {type(count).__name__}")
    source = singular if count == 1 else plural
    lang = language()
    text = source
    if lang != "en":
        table = _table(lang)
        forms = table.get((context, singular))
        if isinstance(forms, dict):
            text = forms.get(table[None](count), source)
    return _fill(text, source, {"count": count, **fields})


def N_(message: str) -> str:
    """Mark ``message`` for extraction and return it unchanged (a module constant that is
    translated with :func:`tr` where it is printed).

    Examples
    --------
    >>> N_("worked solution's output")
    "worked solution's output"
    """
    return _check_text(message, "message")


#: The spaces Chinese does not write: after a full-width punctuation mark, before an opening one.
_NO_SPACE = re.compile(r"(?<=[。！？；：，、）」』])[ \t]+|[ \t]+(?=[（「『])")


def sentences(*parts: str) -> str:
    """Sentences (translated with :func:`tr`) one after another, as their language writes
    them: a space between English sentences, none after a Chinese full-width mark such as
    。 or ：. Empty parts are left out; one part is tidied alone.

    Examples
    --------
    >>> sentences("✗ S = 3 is not right.", "Hint: S = 1/(1-p).")
    '✗ S = 3 is not right. Hint: S = 1/(1-p).'
    >>> sentences("✗ S = 3 不对。", "提示：S = 1/(1-p)。")
    '✗ S = 3 不对。提示：S = 1/(1-p)。'
    """
    for i, part in enumerate(parts):
        _check_text(part, f"parts[{i}]")
    return _NO_SPACE.sub("", " ".join(p.strip() for p in parts if p.strip()))


def _check_text(value: str, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be the English text (str), got {type(value).__name__}")
    return value


def field_names(message: str) -> list[str]:
    """The replacement fields of ``message`` as written, spec included (``{t:.2f}`` -> ``t:.2f``).

    Examples
    --------
    >>> field_names("{n} workers, {{literal}}, {t:.2f} s")
    ['n', 't:.2f']
    """
    out = []
    for _, name, spec, conversion in string.Formatter().parse(message):
        if name is not None:
            out.append(name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else ""))
    return out
