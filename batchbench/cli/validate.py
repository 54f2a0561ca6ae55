"""``batchbench validate``: a dataset read and checked — a BedsideBench checkout, or a
HealthBench JSONL (told apart by what it is) — its count and digest printed."""

from __future__ import annotations

from typing import Any, cast

import typer

from .common import SAMPLE_DATASET, DatasetFormatOpt, DatasetOpt, friendly


@friendly
def validate(dataset: DatasetOpt = SAMPLE_DATASET, dataset_format: DatasetFormatOpt = None) -> None:
    """Load and validate a dataset; print its case count and digest.

    Example: batchbench validate --dataset ../bedside-bench
    """
    from ..bench import grading
    from ..bench.dataset import load_dataset
    from ..bench.healthbench import load_healthbench

    dataset = dataset or SAMPLE_DATASET
    found = grading.dataset_format(dataset, dataset_format)
    if found == "healthbench-meta":
        ds, _ = grading.load(dataset, found)
        labels = sum(len(cast(dict[str, Any], c)["binary_labels"]) for c in ds.cases)
        typer.echo(f"{len(ds.cases)} HealthBench meta-eval lines, {labels} physicians' labels")
        typer.echo(f"dataset_sha256 {ds.sha256}")
        return
    if found == "healthbench":
        hb = load_healthbench(dataset)
        items = sum(len(e.rubrics) for e in hb.examples)
        themes = {t for e in hb.examples for t in e.example_tags if t.startswith("theme:")}
        typer.echo(
            f"{len(hb.examples)} HealthBench examples, {items} rubric items (one grader"
            f" request each), {len(themes)} themes"
        )
        typer.echo(f"dataset_sha256 {hb.sha256}")
        return
    ds = load_dataset(dataset)
    typer.echo(f"{len(ds.cases)} cases in {len(ds.benchmarks)} benchmarks")
    typer.echo(f"dataset_sha256 {ds.sha256}")
