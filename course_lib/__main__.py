"""Command line: ``python -m course_lib doctor | notation | student | scratch | check | slides | lab-settings | i18n | cores``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """usage: python -m course_lib COMMAND [options]

commands:
  doctor   check the environment (Python, JupyterLab, widgets, BLAS, cores, /dev/shm ...)
  notation write the notation page notebooks/notation.md from data/notation.csv
  student  write the student edition (no solutions, notes or stored answers) to build/student/,
           a folder that installs and opens on its own (its README.md says how)
  scratch  write the scratch edition to build/scratch/: the student edition in which the learner
           writes the teaching core (python -m course_lib scratch --help for --fill)
  check    check the functions of the teaching core against the course's references, naming the
           mistake (the scratch edition's `make check`; python -m course_lib check --help)
  slides   export every notebook to an offline reveal.js deck under build/slides/
           (python -m course_lib slides --help for the options)
  lab-settings  switch off JupyterLab's news pop-up in this environment (make install runs it)
  i18n     the Chinese edition: extract the catalogues locale/zh_CN/, build notebooks/zh/
           (python -m course_lib i18n --help)
  cores    are this machine's cores free to measure speedups on? (exit 1 if not; make notebooks
           runs it first, so that no contended measurement is stored)
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "doctor":
        from .tools.doctor import main as doctor_main

        return doctor_main(rest)
    if command == "notation":
        from pathlib import Path

        from .datasets import notation_markdown
        from .tools.paths import RepoNotFoundError, repo_root

        if rest and rest[0].startswith("-"):  # "notation --help" must not write a file named --help
            print("usage: python -m course_lib notation [TARGET.md]  (default: notebooks/notation.md)")
            return 0 if rest[0] in ("-h", "--help") else 2
        try:
            target = Path(rest[0]) if rest else repo_root() / "notebooks" / "notation.md"
        except RepoNotFoundError as exc:
            print(f"notation: error: {exc}", file=sys.stderr)
            return 2
        target.write_text(notation_markdown(), encoding="utf-8")
        print(f"wrote {target}")
        return 0
    if command == "student":
        from .tools.student import main as student_main

        return student_main(rest)
    if command == "scratch":
        from .tools.scratch import main as scratch_main

        return scratch_main(rest)
    if command == "check":
        from .grading.core import main as check_main

        return check_main(rest)
    if command == "slides":
        from .tools.slides import main as slides_main

        return slides_main(rest)
    if command == "lab-settings":
        from .tools.labsettings import main as lab_settings_main

        return lab_settings_main(rest)
    if command == "i18n":
        from .tools.i18n import main as i18n_main

        return i18n_main(rest)
    if command == "cores":
        from .parallel.train.cores import check_cores

        check = check_cores()
        print(f"cores: {check}")
        return 0 if check.free else 1
    print(f"unknown command {command!r}\n\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
