"""``batchbench check``: try each named service for free before the first run there."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import friendly, warn
from .run_options import BaseUrlOpt


@friendly
def check(
    answer_model: Annotated[
        list[str] | None,
        typer.Option(metavar="MODEL", help="A model under test (repeat it for several)."),
    ] = None,
    judge_model: Annotated[
        list[str] | None,
        typer.Option(metavar="MODEL", help="A judge model (repeat it for several)."),
    ] = None,
    base_url: BaseUrlOpt = None,
) -> None:
    """Try each named model's service with calls that cost nothing — the key, the right to
    use its Batch API, the model — and print one table. Nothing is bought; quota is told
    by no free call (a run's canary meets it).

    Exit status: 0 when every check passed, 5 when one failed.

    Example: batchbench check --answer-model claude-opus-5 --judge-model gpt-5.6-sol
    """
    from ..checking import check_services, check_text
    from ..errors import ConfigError

    if not answer_model and not judge_model:
        raise ConfigError("check needs --answer-model or --judge-model (the models to try)")
    rows = check_services(answer_model or [], judge_model or [], base_url, warn)
    typer.echo(check_text(rows))
    if not all(r.ok for r in rows):
        raise typer.Exit(5)
