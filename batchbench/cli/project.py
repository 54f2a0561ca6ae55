"""The project file: the flags a team repeats on every command (the judge, the dataset,
the jobs folder, the prices), written once.

It is found as uv and ruff find theirs: from the working folder upward, the first
``batchbench.toml``, or ``pyproject.toml`` with a ``[tool.batchbench]`` table (one
without it is passed over); ``BATCHBENCH_PROJECT_FILE`` names one instead, or ``none``
for none. A relative path in it is relative to its folder. Flags and environment
variables win over it: its values are click's ``default_map``, which sits below both.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io import read_bounded
from ..errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

OWN_FILE = "batchbench.toml"
VARIABLE = "BATCHBENCH_PROJECT_FILE"
# key (as the flag is spelt) → the commands' parameter it gives a default to
KEYS = {
    "judge-model": "judge_model",
    "dataset": "dataset",
    "jobs-dir": "jobs_dir",
    "pricing": "pricing",
    "max-spend": "max_spend",
}
PATHS = frozenset({"dataset", "jobs-dir", "pricing"})
AMOUNTS = frozenset({"max-spend"})  # a number of US dollars, not text
# The demo rehearses the bundled sample in a folder of its own, whatever the project says.
UNTOUCHED = frozenset({"demo"})


@dataclass(frozen=True)
class Project:
    path: Path
    values: dict[str, str]  # key → value (a path made absolute)

    def said(self) -> str:
        """``project file /x/batchbench.toml (judge-model, dataset)``: where defaults came from."""
        return f"project file {self.path} ({', '.join(self.values) or 'empty'})"


def find(start: Path | None = None) -> Path | None:
    """The project file for a command run in ``start`` (the working folder), or None.

    Found upward, as ruff finds its own: a ``pyproject.toml`` is ours only with a
    ``[tool.batchbench]`` table, so one that cannot be read or parsed (another
    project's broken file, another user's unreadable one) is passed over, never a stop.
    A file found so must belong to this user or to root (as git refuses a repository
    owned by someone else, CVE-2022-24765): a stranger's file in a shared folder (a
    /tmp) would choose this user's bucket, dataset, prices or judge."""
    named = os.environ.get(VARIABLE, "").strip()
    if named:
        return None if named.lower() == "none" else Path(named).expanduser()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        own = folder / OWN_FILE
        if own.is_file():
            return _owned(own)
        shared = folder / "pyproject.toml"
        if shared.is_file():
            try:
                ours = _table(shared) is not None
            except ConfigError:
                ours = False  # not readable as ours: another project's file
            if ours:
                return _owned(shared)
    return None


def _owned(path: Path) -> Path:
    """A found project file, if this user or root owns it; else one line naming it."""
    owner = path.stat().st_uid
    if owner not in (os.getuid(), 0):
        raise ConfigError(
            f"{path} belongs to another user (uid {owner}): a project file found in a shared"
            f" folder is not obeyed; move it, or name one with {VARIABLE}"
        )
    return path


def _amount(where: str, key: str, value: object) -> str:
    """A dollar amount (``max-spend = 25``): a finite number, at least 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: {key} must be a number of US dollars, not {value!r}")
    if not 0 <= value < float("inf"):
        raise ConfigError(f"{where}: {key} must be a finite number, at least 0, not {value!r}")
    return repr(float(value))


def load(path: Path) -> Project:
    """The file's values, checked: one line naming the file (and key or line) when not."""
    table = _table(path) if path.name == "pyproject.toml" else _read(path)
    where = f"{path} [tool.batchbench]" if path.name == "pyproject.toml" else str(path)
    values: dict[str, str] = {}
    for key, value in (table or {}).items():
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(KEYS)})")
        if key in AMOUNTS:
            values[key] = _amount(where, key, value)
            continue
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {key} must be a non-empty string")
        if _SECRET.search(value):
            raise ConfigError(
                f"{where}: {key} holds credentials in a URL: a project file is shared and"
                " never holds a secret (set the service's own variables instead)"
            )
        if key in PATHS and "://" not in value:  # a bucket's URI is taken as written
            value = str((path.parent / Path(value).expanduser()).resolve())
        values[key] = value
    return Project(path.resolve(), values)


def current_project() -> Project | None:
    """The project file this command read (checked when the command began)."""
    found = find()
    return None if found is None else load(found)


def default_map(project: Project, commands: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """For each command with such an option, the project's value as its default."""
    out: dict[str, dict[str, Any]] = {}
    for name, command in commands.items():
        if name in UNTOUCHED:
            continue
        params = {p.name: p for p in command.params}
        given = {  # an option given many times (a judge panel) takes a list
            KEYS[k]: ([v] if getattr(params[KEYS[k]], "multiple", False) else v)
            for k, v in project.values.items()
            if KEYS[k] in params
        }
        if given:
            out[name] = given
    return out


MAX_BYTES = 1 << 20  # a project file is a few lines: more is not one (a /dev/zero)
_SECRET = re.compile(r"://[^/@\s]*@")  # user:password@ in a URL


def _read(path: Path) -> dict[str, Any]:
    """The TOML of a project file: a regular file, UTF-8, of sensible size and depth;
    anything else one line naming it (never a traceback, never a hang)."""
    try:
        regular = path.is_file()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not regular:
        raise ConfigError(f"{path}: not a regular file (a project file is a TOML file)")
    too_big = f"over {MAX_BYTES >> 20} MiB, not a project file"
    data = read_bounded(path, MAX_BYTES, ConfigError, str(path), too_big)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not TOML ({exc})") from None
    except RecursionError:
        raise ConfigError(f"{path}: not TOML a project file holds (nested too deep)") from None


def _table(pyproject: Path) -> dict[str, Any] | None:
    """``[tool.batchbench]`` of a pyproject.toml, or None when it has none."""
    tool = _read(pyproject).get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{pyproject}: tool must be a table")
    found = tool.get("batchbench")
    if found is not None and not isinstance(found, dict):
        raise ConfigError(f"{pyproject}: tool.batchbench must be a table")
    return found
