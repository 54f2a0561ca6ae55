"""The command line: parse options, call the package, print. Nothing else lives here.

Commands are listed in the order of the work: try it, run, watch, look, compare,
share, stop, and the tools.
"""

from __future__ import annotations

import typer

from ..emulator.command import emulator_command
from .results import compare, export, report, show, summarize, validate
from .runs import cancel, demo, list_command, run, status

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Run BedsideBench through the OpenAI Batch API, scored exactly like the reference.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"batchbench {version('batchbench')}")
        raise typer.Exit()


@app.callback()
def root(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Run BedsideBench through the OpenAI Batch API, scored exactly like the reference."""


app.command()(demo)
app.command()(run)
app.command()(status)
app.command("list")(list_command)
app.command()(show)
app.command()(compare)
app.command()(report)
app.command()(export)
app.command()(cancel)
app.command()(summarize)
app.command()(validate)
app.command("emulator")(emulator_command)


def main() -> None:
    app()


__all__ = ["app", "main"]
