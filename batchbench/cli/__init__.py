"""The command line: parse options, call the package, print. Nothing else lives here.

Commands are listed in the order of the work: try it, check a service, run, watch,
look, compare, share, stop, and the tools.
"""

from __future__ import annotations

import gc

import typer

from ..emulator.command import emulator_command
from .calibrate import CalibrateCommand, calibrate
from .check import check
from .common import Command, Group
from .demo import demo
from .report import report
from .results import compare, export, plan, show, summarize
from .start import run
from .validate import validate
from .watch import cancel, list_command, move, remove, status

app = typer.Typer(
    cls=Group,
    add_completion=True,  # --install-completion, --show-completion (bash, zsh, fish, pwsh)
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Run BedsideBench through the providers' batch APIs, scored exactly like the reference.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"batchbench {version('bedside-batchbench')}")
        raise typer.Exit()


@app.callback()
def root(
    show_version: bool = typer.Option(
        False,
        "--version",
        metavar="",
        callback=_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
) -> None:
    """Run BedsideBench through the providers' batch APIs, scored exactly like the reference."""


app.command(cls=Command)(demo)
app.command(cls=Command)(check)
app.command(cls=Command)(run)
app.command(cls=Command)(status)
app.command("list", cls=Command)(list_command)
app.command(cls=Command)(show)
app.command(cls=Command)(compare)
app.command(cls=Command)(plan)
app.command(cls=Command)(report)
app.command(cls=CalibrateCommand)(calibrate)
app.command(cls=Command)(export)
app.command(cls=Command)(cancel)
app.command(cls=Command)(remove)
app.command(cls=Command)(move)
app.command(cls=Command)(summarize)
app.command(cls=Command)(validate)
app.command("emulator", cls=Command)(emulator_command)


# A command holds a dataset and often a run's state for its whole life: hundreds of
# thousands of objects at scale, which CPython's collector (by default, every 700 new
# objects) scans over and over. Collections still run, less often: a 100,000-case run
# 113 -> 100 s, its compare 47 -> 43 s (#52.4).
GC_THRESHOLDS = (50_000, 20, 100)


def main() -> None:
    gc.set_threshold(*GC_THRESHOLDS)
    app()


__all__ = ["app", "main"]
