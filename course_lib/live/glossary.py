"""The glossary as a search box: live in JupyterLab, the whole table everywhere else.

:class:`GlossarySearch` displays as ONE output bundle, like a live figure
(:mod:`course_lib.live.widgets`): a text box and the table of the terms that match what is
typed (the widget view, which JupyterLab renders), and the whole table as ``text/html`` for
every viewer without a widget manager (GitHub, nbviewer, slides). :func:`glossary_table`
writes the table; the terms come from :func:`course_lib.datasets.load_glossary`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._validate import check_sequence, check_type
from ..i18n import tr

__all__ = ["GlossarySearch", "glossary_table"]


def glossary_table(entries: Sequence, query: str = "") -> str:
    """HTML table of the glossary ``entries`` whose English, Chinese or definition contain ``query``.

    A Chinese term that is not the source text's own wording (``zh_from_source`` false) is
    marked with ``*``.

    Examples
    --------
    >>> from course_lib.datasets import load_glossary
    >>> html = glossary_table(load_glossary(), "parameter server")
    >>> html.startswith("<p>1 of ") and "<td>parameter server</td>" in html
    True
    """
    import html

    from ..datasets import GlossaryEntry

    entries = check_sequence(entries, "entries", GlossaryEntry, "a GlossaryEntry (load_glossary())")
    check_type(query, "query", str, "a str")
    q = query.strip().lower()
    rows = [e for e in entries if q in f"{e.term} {e.term_zh} {e.definition}".lower()]
    body = "".join(
        f"<tr><td>{html.escape(e.term)}</td><td>{html.escape(e.term_zh)}{'' if e.zh_from_source else ' *'}</td>"
        f"<td>{e.chapter:02d}</td><td style='text-align:left'>{html.escape(e.definition)}</td></tr>"
        for e in rows)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in (
        tr("term", context="glossary"), "中文", tr("chapter", context="glossary"), tr("definition", context="glossary")))
    count = tr("{shown} of {total} terms", shown=len(rows), total=len(entries))
    return (f"<p>{count}</p><table class='ddl-glossary-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
            "</table>")


class GlossarySearch:
    """A search box over the glossary: live in JupyterLab, the whole table everywhere else.

    Parameters
    ----------
    entries : sequence of GlossaryEntry
        ``course_lib.datasets.load_glossary()``.
    """

    def __init__(self, entries: Sequence):
        import ipywidgets as w

        from ..datasets import GlossaryEntry

        self.entries = check_sequence(entries, "entries", GlossaryEntry, "a GlossaryEntry (load_glossary())")
        self.search = w.Text(placeholder=tr("filter, e.g. all-reduce or 并行"), description=tr("search"))
        self.table = w.HTML(glossary_table(self.entries))
        self.search.observe(lambda change: setattr(self.table, "value", glossary_table(self.entries, change["new"])),
                            names="value")
        self.widget = w.VBox([self.search, self.table])
        self.widget.add_class("ddl-glossary")

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle.update({"text/html": glossary_table(self.entries),
                       "text/plain": f"<glossary: {len(self.entries)} terms>"})
        return bundle
