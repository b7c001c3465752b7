"""Side-by-side benchmarks (ratios against a reference measured in the same run).

Run all with ``make bench`` (``python -m benchmarks``) or one with
``python -m benchmarks NAME`` where NAME is a module ``benchmarks/bench_NAME.py``
that defines ``main(argv: list[str]) -> int``.
"""
