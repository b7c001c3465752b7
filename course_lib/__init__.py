"""ddl-course: the tested library behind the notebooks.

Submodules are imported lazily so that ``import course_lib`` stays fast; heavy
dependencies (matplotlib, ipywidgets, torch) are only imported by the modules that
need them, when they are first used.

>>> import course_lib
>>> course_lib.scaling.amdahl(0.9, 10)
5.2631578947368425
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = frozenset(
    {
        "cnn",
        "alpha_beta",
        "context_cost",
        "conv",
        "critical_batch",
        "cost",
        "dataflow",
        "datapackage",
        "datasets",
        "exercises",
        "failures",
        "grading",
        "i18n",
        "live",
        "megatron",
        "memory",
        "models",
        "moe",
        "optim",
        "overlap",
        "parallel",
        "planner",
        "precision",
        "plots",
        "progress",
        "typed_numbers",
        "rate",
        "reference",
        "roofline",
        "scaling",
        "schedule",
        "staleness",
        "tensor_cost",
        "testing",
        "timing",
        "tools",
        "transformer",
    }
)

def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES)
