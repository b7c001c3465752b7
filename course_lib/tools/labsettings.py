"""JupyterLab settings of the course environment: no news pop-up over the notebook.

On its first start JupyterLab 4 asks "Would you like to get notified about official Jupyter
news?" in a notification that stays until dismissed and covers the right part of every
figure. ``python -m course_lib lab-settings`` (run by ``make install`` and ``make lab``)
switches that off for the environment it runs in, in two files that JupyterLab reads at
start-up (JupyterLab's documented places for an environment's defaults):

- ``{prefix}/share/jupyter/lab/settings/overrides.json``: the notification settings
  ``fetchNews = "false"`` ("Never"; the pop-up asks only while it is ``"none"``) and
  ``checkForUpdates = false`` (no request to the internet at start-up);
- ``{prefix}/etc/jupyter/labconfig/page_config.json``: the plugin that shows news and
  update notices, :data:`ANNOUNCEMENTS_PLUGIN`, disabled (as ``jupyter labextension
  disable`` does).

Both files are merged with what is there already: other settings are kept. A learner can
still turn news on in Settings → Notifications.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._validate import check_type

__all__ = [
    "ANNOUNCEMENTS_PLUGIN",
    "LAB_OVERRIDES",
    "NOTIFICATION_PLUGIN",
    "lab_settings_files",
    "lab_settings_problems",
    "main",
    "write_lab_settings",
]

#: The settings of JupyterLab's notifications (news and update checks are among them).
NOTIFICATION_PLUGIN = "@jupyterlab/apputils-extension:notification"
#: The plugin that asks about, fetches and shows Jupyter news and update notices.
ANNOUNCEMENTS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
#: Default settings of the course environment (``overrides.json``).
LAB_OVERRIDES: dict[str, dict[str, Any]] = {
    NOTIFICATION_PLUGIN: {"fetchNews": "false", "checkForUpdates": False},
}


def _prefix(prefix: Path | str | None) -> Path:
    if prefix is None:
        return Path(sys.prefix)
    return Path(check_type(prefix, "prefix", (str, os.PathLike), "a path (str or pathlib.Path)"))


def lab_settings_files(prefix: Path | str | None = None) -> tuple[Path, Path]:
    """``(overrides.json, page_config.json)`` of the environment at ``prefix``.

    ``prefix`` is the environment's folder (``sys.prefix``, the default: the running one).

    Examples
    --------
    >>> [p.relative_to("/env").as_posix() for p in lab_settings_files("/env")]
    ['share/jupyter/lab/settings/overrides.json', 'etc/jupyter/labconfig/page_config.json']
    """
    root = _prefix(prefix)
    return (root / "share" / "jupyter" / "lab" / "settings" / "overrides.json",
            root / "etc" / "jupyter" / "labconfig" / "page_config.json")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}): fix or delete it, then run again") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object, it holds {type(data).__name__}")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def lab_settings_problems(prefix: Path | str | None = None) -> list[str]:
    """What is missing for a course without the news pop-up (empty when all is in place).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as env:
    ...     before = len(lab_settings_problems(env))
    ...     _ = write_lab_settings(env)
    ...     before, lab_settings_problems(env)
    (2, [])
    """
    overrides, page_config = lab_settings_files(prefix)
    problems = []
    wanted = LAB_OVERRIDES[NOTIFICATION_PLUGIN]
    have = _read(overrides).get(NOTIFICATION_PLUGIN, {})
    if any(have.get(key) != value for key, value in wanted.items()):
        problems.append(f"{overrides}: {NOTIFICATION_PLUGIN} does not set {wanted}")
    if _read(page_config).get("disabledExtensions", {}).get(ANNOUNCEMENTS_PLUGIN) is not True:
        problems.append(f"{page_config}: {ANNOUNCEMENTS_PLUGIN} is not disabled")
    return problems


def write_lab_settings(prefix: Path | str | None = None) -> tuple[Path, Path]:
    """Write the course's JupyterLab settings into the environment at ``prefix``.

    Merges :data:`LAB_OVERRIDES` into ``overrides.json`` and disables
    :data:`ANNOUNCEMENTS_PLUGIN` in ``page_config.json`` (see the module docstring);
    everything else in the two files is kept. Returns the two files.

    Raises
    ------
    ValueError
        When one of the files exists but is not a JSON object (the message names it).
    """
    overrides, page_config = lab_settings_files(prefix)
    data = _read(overrides)
    for plugin, settings in LAB_OVERRIDES.items():
        data[plugin] = {**data.get(plugin, {}), **settings}
    config = _read(page_config)
    disabled = config.get("disabledExtensions", {})
    if isinstance(disabled, list):  # the older form: a list of names
        disabled = dict.fromkeys(disabled, True)
    config["disabledExtensions"] = {**disabled, ANNOUNCEMENTS_PLUGIN: True}
    _write(overrides, data)
    _write(page_config, config)
    return overrides, page_config


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m course_lib lab-settings [--prefix DIR] [--check]``."""
    parser = argparse.ArgumentParser(
        prog="python -m course_lib lab-settings",
        description="Switch off JupyterLab's news pop-up in this environment (see course_lib.tools.labsettings).",
    )
    parser.add_argument("--prefix", default=sys.prefix, help="environment folder (default: this Python's, %(default)s)")
    parser.add_argument("--check", action="store_true", help="only report whether the settings are in place")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if args.check:
            problems = lab_settings_problems(args.prefix)
            for problem in problems:
                print(f"lab-settings: {problem}", file=sys.stderr)
            return 1 if problems else 0
        files = write_lab_settings(args.prefix)
    except (OSError, ValueError) as exc:
        print(f"lab-settings: error: {exc}", file=sys.stderr)
        return 1
    print(f"lab-settings: JupyterLab news pop-up switched off in {' and '.join(map(str, files))}")
    return 0
