"""The commands about results: summarize and validate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import SAMPLE_DATASET, DatasetOpt, LimitOpt, SmokeOpt, friendly


@friendly
def summarize(
    results: Annotated[Path, typer.Argument(help="A reference-format results JSONL file.")],
    dataset: Annotated[
        Path | None,
        typer.Option(
            "--dataset",
            help="BedsideBench checkout: its digest and selection define the expected cases."
            " Without it every case in RESULTS counts and the digest is null.",
        ),
    ] = None,
    smoke: SmokeOpt = False,
    limit: LimitOpt = None,
    benchmark: Annotated[
        list[str] | None, typer.Option("--benchmark", help="Only this benchmark (repeatable).")
    ] = None,
    bootstrap_samples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 10000,
    bootstrap_seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 42,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary JSON.")] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write the summary here (default: RESULTS.summary.json)."
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace a summary of another dataset or selection."),
    ] = False,
) -> None:
    """Write RESULTS.summary.json exactly as the reference runner would, and print it.

    Rows that cannot be true (a score outside 0..1, another benchmark, decisions
    that score otherwise) are refused, and so is replacing another selection's summary.
    """
    from ..jobs import summarize_results
    from ..report import summary_json, summary_table

    summary, out, notes = summarize_results(
        results,
        dataset,
        smoke=smoke,
        limit=limit,
        benchmarks=tuple(benchmark or ()),
        samples=bootstrap_samples,
        seed=bootstrap_seed,
        output=output,
        force=force,
    )
    for note in notes:
        typer.echo(note, err=True)
    if as_json:
        sys.stdout.write(summary_json(summary))
    else:
        typer.echo(summary_table(summary))
        typer.echo(f"wrote {out}")


@friendly
def validate(dataset: DatasetOpt = SAMPLE_DATASET) -> None:
    """Load and validate a dataset; print its case count and digest."""
    from ..dataset import load_dataset

    ds = load_dataset(dataset)
    typer.echo(f"{len(ds.cases)} cases in {len(ds.benchmarks)} benchmarks")
    typer.echo(f"dataset_sha256 {ds.sha256}")
