"""The jobs folder a command works in, as the user named it or not: parsed (a bucket's
working folder), its runs offered to a TAB, and who chose it when the user did not type
it (the project file, or ``BATCHBENCH_JOBS_DIR``) said beside every error naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..errors import BatchbenchError


def _context() -> Any:
    """The running command's context (Typer's own copy of click since 0.2x, else click's),
    or None outside a command."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # a Typer on click itself
        from click import get_current_context  # type: ignore[no-redef]
    return get_current_context(silent=True)


def jobs_origin() -> str | None:
    """Who chose the command's jobs folder when the user did not type it: the project
    file (its path) or ``BATCHBENCH_JOBS_DIR``; None when typed, or the default."""
    ctx = _context()
    if ctx is None or "jobs_dir" not in ctx.params:
        return None
    source = getattr(ctx.get_parameter_source("jobs_dir"), "name", None)
    if source == "ENVIRONMENT":
        return "BATCHBENCH_JOBS_DIR"
    if source == "DEFAULT_MAP":
        from . import project

        return str(project.find() or "the project file")
    return None


def with_origin(message: str) -> str:
    """An error naming the jobs folder says who chose it, when the user did not (#63.10):
    a project file found upward, read without a word, is the last place one looks."""
    from ..storage import shown

    origin = jobs_origin()
    ctx = _context()
    if origin is None or ctx is None:
        return message
    folder = shown(Path(ctx.params["jobs_dir"]))
    return f"{message} (the jobs folder {origin} names)" if folder in message else message


def jobs_folder(value: str | Path) -> Path:
    """The jobs folder the commands work in: a local folder, or a bucket's working
    folder (:mod:`..storage`); a URI they cannot read is one line."""
    from ..storage import jobs_path, refuse

    try:
        return jobs_path(value)
    except BatchbenchError as exc:  # said in one line when the command starts (friendly)
        refuse(exc)
        return Path(str(value))


def complete_runs(ctx: typer.Context, incomplete: str) -> list[str]:
    """A TAB where a run's name goes: the runs of the jobs folder typed (or its default,
    the project file's or ``jobs``). A local folder only: a TAB never asks a bucket (its
    working folder is let go at once)."""
    from ..engine.rundir import list_runs
    from ..storage import bucket_of, close_all

    folder = ctx.params.get("jobs_dir") or Path("jobs")
    if bucket_of(Path(folder)) is not None:
        close_all(write_back=False)
        return []
    try:
        names = [run.root.name for run in list_runs(Path(folder))]
    except (OSError, BatchbenchError):
        return []
    return [name for name in names if name.startswith(incomplete)]
