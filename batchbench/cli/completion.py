"""``--show-completion [SHELL]`` and ``--install-completion [SHELL]``, the shell named
or found.

Typer takes these as flags with no value whenever shellingham is installed, so the
shell a user names is dropped: ``--install-completion zsh`` installed bash's, and where
no shell can be found (a container, cron, a CI runner) ``--show-completion bash``
failed with "Shell  not supported". Here a named shell is the one used; with none, the
shell this runs under is found as Typer finds it, and when it cannot be, the error says
to name one. Typer's own scripts and installers write the files.
"""

from __future__ import annotations

from typing import Literal, get_args

import typer

Shell = Literal["bash", "zsh", "fish", "powershell", "pwsh"]
SHELLS: tuple[str, ...] = get_args(Shell)
FLAGS = ("--show-completion", "--install-completion")


def _shell(args: list[str]) -> str:
    """The shell named after the flag, else the one this runs under; one line if none."""
    named = args[1] if len(args) > 1 else None
    if named is not None and named not in SHELLS:
        raise _error(f"{args[0]}: unknown shell {named!r}: name one of {', '.join(SHELLS)}")
    if named is not None:
        return named
    from typer._completion_shared import _get_shell_name

    found = _get_shell_name()  # shellingham's, as Typer asks it; None when it cannot tell
    if found not in SHELLS:
        raise _error(
            f"{args[0]}: cannot tell which shell this is{f' ({found})' if found else ''}:"
            f" name it, e.g. `{args[0]} bash` ({', '.join(SHELLS)})"
        )
    return str(found)


def _error(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def take(prog_name: str, args: list[str]) -> None:
    """Answer a completion flag given as the whole command line (with its shell or
    not), then exit; anything else returns untouched for the command line's parser."""
    if not args or args[0] not in FLAGS or len(args) > 2:
        return
    from typer._completion_shared import get_completion_script, install

    shell = _shell(args)
    var = "_{}_COMPLETE".format(prog_name.replace("-", "_").upper())
    if args[0] == "--show-completion":
        typer.echo(get_completion_script(prog_name=prog_name, complete_var=var, shell=shell))
        raise typer.Exit(0)
    shell, path = install(shell=shell, prog_name=prog_name, complete_var=var)
    typer.echo(f"{shell} completion installed in {path}")
    typer.echo("Completion will take effect once you restart the terminal")
    raise typer.Exit(0)
