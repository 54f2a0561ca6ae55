"""``batchbench demo``: the bundled sample, end to end, against the in-process emulator."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from ..engine.rundir import Run
from ..errors import ConfigError
from ..kinds import Stage
from .common import SAMPLE_DATASET, DatasetOpt, clock_of, friendly
from .finish import run_group
from .folders import jobs_folder
from .run_options import TailFlexOpt


@friendly
def demo(
    ctx: typer.Context,
    jobs_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR_OR_URI",
            parser=jobs_folder,
            help="Keep the demo run here, a folder or a bucket (default: a temporary folder).",
        ),
    ] = None,
    dataset: DatasetOpt = SAMPLE_DATASET,
    answer_model: Annotated[
        list[str] | None,
        typer.Option(
            metavar="MODEL",
            help="The simulated model under test (repeat it to rehearse a group), routed"
            " as a real one is to its service's face of the emulator: sim-answer (OpenAI),"
            " claude-sim (Anthropic), gemini-sim (Gemini), accounts/sim/models/sim-x"
            " (Fireworks), azure/NAME, bedrock/anthropic.claude-sim-v1:0,"
            " vertex/gemini-sim and vertex/claude-sim, groq/sim-x, xai/sim-x,"
            " together/sim-x, mistral/sim-x, openrouter/openai/sim-x: all thirteen.",
        ),
    ] = None,
    anomaly: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME[=RATE]",
            help="One of the emulator's bad days (as `batchbench emulator --anomaly`):"
            " stuck-tail with --tail-flex shows a tail finished on flex in seconds.",
        ),
    ] = None,
    tail_flex: TailFlexOpt = None,
) -> None:
    """Run the bundled sample end to end against the in-process emulator.

    Example: batchbench demo --jobs-dir /tmp/demo-run --answer-model claude-sim
    """
    from ..emulator.anomalies import parse_anomaly

    try:
        anomalies = dict(parse_anomaly(spec) for spec in anomaly or ())
    except ValueError as exc:
        raise ConfigError(f"--anomaly: {exc}") from None
    import tempfile

    from ..emulator import Emulator
    from ..engine.options import Cases, Services
    from ..engine.settings import Settings
    from ..launch import RunOptions
    from ..lineup import lineup
    from ..providers import PROVIDERS

    models = list(dict.fromkeys(answer_model or ["sim-answer"]))
    clock = clock_of(ctx)
    with (
        tempfile.TemporaryDirectory() as tmp,
        Emulator(latency=0.3, clock=clock, anomalies=anomalies, models=models) as emu,
        # the emulator's faces and accounts, while it lives
        _defaults({**emu.environment(), "BATCHBENCH_BEDROCK_MIN_RECORDS": "1"}),
    ):
        emu.store.settings.bedrock_min_records = 1  # the sample is smaller than a real minimum
        typer.echo(f"emulator on {emu.url}; simulated models {', '.join(models)} and sim-judge")
        services = Services(
            base_urls={p.name: emu.base_urls[p.name] for p in PROVIDERS if p.name in emu.base_urls},
            credentials={p.name: "demo-key-not-secret" for p in PROVIDERS},
        )
        options = RunOptions(
            answer_model=models[0],
            judge_model="sim-judge",
            cases=Cases(dataset),
            run="demo",
            jobs_dir=jobs_dir or Path(tmp),
            services=services,
            # Batches of five show several at once; a flex tail needs a batch of 20 lines
            # or more (5% of fewer is none), so with --tail-flex each stage is one batch.
            settings=Settings(
                max_requests_per_batch=5 if tail_flex is None else 1000,
                poll_interval=0.2,
                tail_flex=tail_flex,
            ),
            clock=clock,
        )
        group = lineup(options, models, ["sim-judge"], "demo", False, None)
        if jobs_dir is None:
            typer.echo("(the run lives in a temporary folder; pass --jobs-dir to keep it)")
        run_group(group, clock, kept=jobs_dir is not None, cost_note=_rehearsal_cost)


@contextlib.contextmanager
def _defaults(values: dict[str, str]) -> Iterator[None]:
    """These variables, where the environment does not set them, for as long as the
    demo's emulator lives (in this process only; a second demo in it gets its own)."""
    import os

    added = {name: value for name, value in values.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


# What the demo's simulated models stand in for when it says what its run would cost.
DEMO_STAND_INS: dict[Stage, str] = {"answers": "gpt-5.4-mini", "judges": "gpt-4.1"}


def _rehearsal_cost(run: Run) -> str:
    """What the demo's tokens would have cost on real models (simulated ones have no price)."""
    from ..costs.pricing import load_pricing
    from ..costs.rollup import run_cost, total_text

    if not run.exists():
        return "nothing was spent: the run did not start"
    config = run.load_config()
    stand_ins = {config.models[s]: real for s, real in DEMO_STAND_INS.items()}
    pricing = load_pricing().priced_as(stand_ins)
    cost = run_cost(run.state(config.case_ids).usage, config.models, pricing, config.providers)
    sync = cost["total"]["sync_usd"]
    return (
        f"with {DEMO_STAND_INS['answers']} answers and {DEMO_STAND_INS['judges']} judges, these"
        f" tokens would have cost {total_text(cost)} at batch price"
        + (f" (sync ${sync:,.4f})" if sync is not None else "")
    )
