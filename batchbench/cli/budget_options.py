"""The options of ``batchbench run`` that say what a run may cost and by when it ends
(the Budget panel): what it is estimated to cost, what it may spend, and its deadline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..engine.deadline import TARGET
from ..providers.registry import PROVIDERS
from .run_options import BUDGET

FLEX = ", ".join(spec.label for spec in reversed(PROVIDERS) if spec.flex)
LISTED = ", ".join(spec.label for spec in reversed(PROVIDERS) if spec.on_demand)

MaxCostOpt = Annotated[
    float | None,
    typer.Option(
        metavar="USD",
        rich_help_panel=BUDGET,
        help="Refuse to submit when the estimated batch cost exceeds this.",
    ),
]

MaxSpendOpt = Annotated[
    float | None,
    typer.Option(
        metavar="USD",
        rich_help_panel=BUDGET,
        help="A hard cap on what the run spends: what was billed and what is in flight at"
        " its worst; a batch that could cross it is not bought, and the run stops (exit 6)"
        " until the cap is raised.",
    ),
]

MaxSpendOverOpt = Annotated[
    str,
    typer.Option(
        metavar="SCOPE",
        rich_help_panel=BUDGET,
        help="What --max-spend holds together: run (each run its own cap), group (the"
        " runs of this command) or jobs-folder (every run there: a team's bucket).",
    ),
]

PricingOpt = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        rich_help_panel=BUDGET,
        help="Prices (the built-in pricing.json's layout) for models it lacks.",
    ),
]

AssumedAnswerTokensOpt = Annotated[
    int,
    typer.Option(
        metavar="N",
        rich_help_panel=BUDGET,
        help="Answer length assumed when estimating the judge stage.",
    ),
]

MaxEnqueuedTokensOpt = Annotated[
    int | None,
    typer.Option(
        metavar="N",
        rich_help_panel=BUDGET,
        help="Keep each model's estimated prompt tokens in flight under N.",
    ),
]

DeadlineOpt = Annotated[
    str | None,
    typer.Option(
        metavar="WHEN",
        rich_help_panel=BUDGET,
        help="End the run by WHEN (2026-12-08T09:00, local time unless it names its zone;"
        " or +14h, +90m, +2d: from the invocation that first gives it) as cheaply as"
        " possible: each batch is waited for while the"
        f" forecast (the jobs folder's own batches, else each service's stated turnaround)"
        f" gives it a {TARGET:.0%} chance of ending in time; at its latest safe moment its"
        f" unfinished lines go on the flex tier, at the batch price ({FLEX}). `status`"
        " shows each batch's chance.",
    ),
]

AllowListPriceOpt = Annotated[
    bool,
    typer.Option(
        "--allow-list-price",
        metavar="",
        rich_help_panel=BUDGET,
        help="With --deadline, on a service with no flex tier: a batch that may not end in"
        f" time is finished one call at a time, at the list price ({LISTED}); without it,"
        " such a batch is waited for and `status` says the deadline is at risk.",
    ),
]

PlaceAmongOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="MODEL",
        rich_help_panel=BUDGET,
        help="With --deadline: the answer model as another service names it (Claude as"
        " bedrock/… or vertex/…; gpt-oss as groq/…, together/…, fireworks/…, bedrock/…);"
        " repeat for each. At the run's start its answers go where the forecast gives their"
        f" batch a {TARGET:.0%} chance of ending in time, the cheapest of those (else the"
        " likeliest), and stay there; the run keeps the first model's name.",
    ),
]
