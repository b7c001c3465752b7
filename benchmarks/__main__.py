"""Run the benchmarks: ``python -m benchmarks [NAME ...] [-- options for each]``."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def available() -> list[str]:
    """Names of the benchmark modules (``bench_<name>.py``)."""
    here = Path(__file__).parent
    return sorted(
        m.name[len("bench_") :] for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )


def main(argv: list[str]) -> int:
    names, rest = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    names = names or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available()}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        print(f"\n=== benchmark: {name} ===", flush=True)
        module = importlib.import_module(f"benchmarks.bench_{name}")
        status |= int(module.main(rest) or 0)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
