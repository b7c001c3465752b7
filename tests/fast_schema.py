"""One start-up cost of the test processes taken away: import this before nbformat.

nbformat validates notebooks with jsonschema, and jsonschema, on import, looks for the optional
``rfc3987_syntax`` (installed with JupyterLab's dependencies) to check the "iri" string format;
that module compiles 38 lark grammars as it is imported: 1.5 s on a quiet core, 3-4 s on a
busy one, in every pytest worker that reads a notebook. The notebook schema uses no "iri"
format (``nbformat/v4/nbformat.v4.5.schema.json``), so the test processes go without it:
jsonschema then simply has no "iri" checker. The notebooks, the lab and the course are not
affected (this runs in pytest's processes only). The test modules that import nbformat as
they are collected import this module first (a ``tests/conftest.py`` would clash with
``tests/browser/conftest.py`` under ``--doctest-modules``); under ``make test`` nbval has
imported nbformat already, so the saving is make test-fast's.
"""

import sys

if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)  # None: `import rfc3987_syntax` raises ImportError
