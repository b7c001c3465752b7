"""Run the benchmarks: ``python -m benchmarks [NAME ...] [-- options for each]``.

``python -m benchmarks reference [options]`` is the reference run instead
(:mod:`benchmarks.reference`: the course's experiments at N = 1, 2, 4 ... into one JSON
file); it takes its options directly, e.g. ``python -m benchmarks reference --out
data/reference/NAME.json`` (``--help`` lists them).
"""

from __future__ import annotations

import importlib
import pkgutil
import shlex
import sys
from pathlib import Path


def available() -> list[str]:
    """Names of the benchmark modules (``bench_<name>.py``)."""
    here = Path(__file__).parent
    return sorted(
        m.name[len("bench_") :] for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )


def _typed_command(argv: list[str]) -> str:
    """The command line as typed (``sys.orig_argv``, Python 3.10+), else rebuilt from ``argv``."""
    orig = getattr(sys, "orig_argv", None)
    if orig and "benchmarks" in orig:
        return shlex.join(orig)
    return shlex.join(["python", "-m", "benchmarks", *argv])


def main(argv: list[str]) -> int:
    if argv[:1] == ["reference"]:
        from . import reference

        return reference.main(argv[1:], command=_typed_command(argv))
    names, rest = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    names = names or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available()} (and 'reference': "
              "python -m benchmarks reference --help)", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        print(f"\n=== benchmark: {name} ===", flush=True)
        module = importlib.import_module(f"benchmarks.bench_{name}")
        status |= int(module.main(rest) or 0)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
