"""A progress bar for long runs: an ipywidgets bar in a notebook, a text line elsewhere.

Worker processes report their step counts through shared counters; the parent
(:meth:`course_lib.parallel.engine.workers.ProcessGroup.join`) shows them with
:class:`ProgressBar`. ipywidgets is imported only when a bar is shown in a notebook.

Examples
--------
>>> bar = ProgressBar(10, "steps", display=False)
>>> bar.update(3); bar.finish(ok=True)   # display=False: nothing shown
"""

from __future__ import annotations

import sys
import time

from .i18n import tr

__all__ = ["ProgressBar", "in_notebook"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (an IPython shell with a kernel)."""
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except Exception:  # noqa: BLE001 - IPython not initialised
        return False
    return ip is not None and getattr(ip, "kernel", None) is not None


class ProgressBar:
    """An ipywidgets progress bar shown for runs longer than ``delay`` seconds.

    ``display=None`` shows it only in a notebook kernel; False never; True always (a
    text line on stderr outside notebooks).
    """

    def __init__(self, total: int | None, label: str = "", display: bool | None = None,
                 delay: float = 1.5):
        self.total, self.label, self.delay = total, label, delay
        self.enabled = bool(total) and (display if display is not None else in_notebook())
        self.notebook = in_notebook()
        self.t0 = time.monotonic()
        self.value = 0
        self.widget = None
        self.handle = None
        self.shown = False

    @property
    def _name(self) -> str:
        """What the bar counts: its label, "steps" without one."""
        return self.label or tr("steps")

    def _show(self) -> None:
        self.shown = True
        if self.notebook:
            import ipywidgets as w
            from IPython.display import display

            self.widget = w.IntProgress(
                value=self.value, min=0, max=self.total, description=self._name,
                style={"description_width": "initial"},
            )
            self.handle = display(_BarBundle(self.widget, tr("{label}: running", label=self._name)),
                                  display_id=True)

    def tick(self) -> None:
        if self.enabled and not self.shown and time.monotonic() - self.t0 > self.delay:
            self._show()
            self.update(self.value)

    def update(self, value: int) -> None:
        self.value = int(value)
        if not (self.enabled and self.shown):
            return
        if self.widget is not None:
            self.widget.value = min(self.value, self.total)
        else:
            print(f"\r{self._name}: {self.value}/{self.total}", end="", file=sys.stderr)

    def finish(self, ok: bool) -> None:
        if not (self.enabled and self.shown):
            return
        elapsed = f"{time.monotonic() - self.t0:.1f} s"
        if self.widget is not None:
            text = (tr("{label}: done in {time}", label=self._name, time=elapsed) if ok
                    else tr("{label}: stopped in {time}", label=self._name, time=elapsed))
            self.widget.bar_style = "success" if ok else "danger"
            self.widget.description = text
            if self.handle is not None:
                self.handle.update(_BarBundle(self.widget, text))
        else:
            print(" " + (tr("done in {time}", time=elapsed) if ok else tr("stopped in {time}", time=elapsed)),
                  file=sys.stderr)


class _BarBundle:
    """A progress bar's output: the live widget plus a text/html line for static viewers."""

    def __init__(self, widget, text: str):
        self.widget, self.text = widget, text

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude) or {}
        if isinstance(bundle, tuple):  # pragma: no cover - (data, metadata) form
            bundle = bundle[0]
        bundle = dict(bundle)
        bundle["text/plain"] = self.text
        bundle["text/html"] = f"<code>{self.text}</code>"
        return bundle
