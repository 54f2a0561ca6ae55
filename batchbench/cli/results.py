"""The commands about results: show, compare, plan, export, summarize and validate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from ..scores.sources import Named

from ..exports import FORMATS as EXPORT_FORMATS
from .common import (
    AllowPartialOpt,
    FilesDatasetOpt,
    JobsDirOpt,
    JsonOpt,
    LabelOpt,
    LimitOpt,
    MarginOpt,
    RunArg,
    SmokeOpt,
    SourcesArg,
    friendly,
    strict_json,
    warn,
)
from .folders import complete_runs


@friendly
def summarize(
    results: Annotated[
        str,
        typer.Argument(
            metavar="RESULTS",
            help="A reference-format results JSONL file (a run's in a bucket by its URI).",
        ),
    ],
    dataset: Annotated[
        Path | None,
        typer.Option(
            "--dataset",
            help="BedsideBench checkout: its digest and selection define the expected cases."
            " Without it every case in RESULTS counts and the digest is null.",
            metavar="DIR",
        ),
    ] = None,
    smoke: SmokeOpt = False,
    limit: LimitOpt = None,
    benchmark: Annotated[
        list[str] | None,
        typer.Option("--benchmark", help="Only this benchmark (repeatable).", metavar="TEXT"),
    ] = None,
    bootstrap_samples: Annotated[
        int, typer.Option(help="Bootstrap resamples.", metavar="N")
    ] = 10000,
    bootstrap_seed: Annotated[int, typer.Option(help="Bootstrap seed.", metavar="N")] = 42,
    as_json: Annotated[
        bool, typer.Option("--json", metavar="", help="Print the summary JSON.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the summary here (default: RESULTS.summary.json).",
            metavar="FILE",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", metavar="", help="Replace a summary of another dataset or selection."
        ),
    ] = False,
) -> None:
    """Write RESULTS.summary.json exactly as the reference runner would, and print it.

    Rows that cannot be true (a score outside 0..1, another benchmark, decisions
    that score otherwise) are refused, and so is replacing another selection's summary.

    Example: batchbench summarize results.jsonl --dataset ../bedside-bench --smoke
    """
    from ..errors import ConfigError
    from ..scores.results_summary import summarize_results
    from ..scores.summary_file import summary_json, summary_table
    from ..storage import object_path

    fetched = object_path(results)  # a run's results in a bucket, as the run said
    if fetched is not None and output is None:
        raise ConfigError(
            f"{results}: the summary of a results file in a bucket is written to a local"
            " file: give -o FILE"
        )
    summary, out, notes = summarize_results(
        fetched or Path(results),
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
def show(
    run_name: RunArg,
    case_id: Annotated[str, typer.Argument(metavar="CASE_ID", help="Case id.")],
    jobs_dir: JobsDirOpt = Path("jobs"),
    dataset: Annotated[
        Path | None,
        typer.Option(help="The run's dataset, if it moved since the run was made.", metavar="DIR"),
    ] = None,
) -> None:
    """Print one case: prompt, answer, each rubric item's points and verdict, the score,
    and every attempt with its error and raw reply.

    Example: batchbench show gpt-5.4-mini 1e5677631491079c4988b5458cec4632
    """
    from ..engine.rundir import existing_run
    from ..views.show import show_case

    typer.echo(show_case(existing_run(jobs_dir, run_name), case_id, dataset))


@friendly
def export(
    runs: SourcesArg,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="The file to write (eee: a folder).", metavar="FILE"),
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            autocompletion=lambda: list(EXPORT_FORMATS),
            help="parquet or csv (default: from -o's suffix); eee: Every Eval Ever records"
            " (schema 0.3.0) of each run, under -o as the datastore lays them out; inspect:"
            " an Inspect log that `inspect view` opens (-o FILE.eval; a folder for several"
            " runs), written by inspect_ai (the \\[inspect] extra).",
            metavar="FORMAT",
        ),
    ] = None,
    decisions: Annotated[
        bool,
        typer.Option(
            "--decisions", metavar="", help="One row per rubric item instead of per case."
        ),
    ] = False,
    dataset: FilesDatasetOpt = None,
    jobs_dir: JobsDirOpt = Path("jobs"),
    label: LabelOpt = None,
    labels: Annotated[
        list[Path] | None,
        typer.Option(
            "--labels",
            metavar="FILE...",
            help="eee: physicians' labels of the run; each benchmark's PPI++ corrected"
            " score is then a second result (formats as `calibrate` reads them).",
        ),
    ] = None,
) -> None:
    """Write runs' rows as one table: model, benchmark, case, score and its components;
    or each run as Every Eval Ever records.

    Example: batchbench export gpt-5.4-mini gpt-5.5 -o scores.parquet;
    batchbench export gpt-5.4-mini --format eee -o eee/
    """
    from ..exports import export as write
    from ..exports import format_of
    from ..scores.sources import resolve_all

    sources = resolve_all(runs, jobs_dir, label or ())
    kind = format_of(fmt, output)
    said = write(
        sources,
        output,
        kind,
        dataset=dataset,
        labels=labels or [],
        decisions=decisions,
        warn=warn,
    )
    typer.echo("\n".join(said))


@friendly
def compare(
    runs: SourcesArg,
    baseline: Annotated[
        str | None,
        typer.Option(help="The run the others are compared with (default: first).", metavar="RUN"),
    ] = None,
    dataset: FilesDatasetOpt = None,
    bootstrap_samples: Annotated[
        int, typer.Option(help="Bootstrap resamples.", metavar="N")
    ] = 10000,
    bootstrap_seed: Annotated[int, typer.Option(help="Bootstrap seed.", metavar="N")] = 42,
    as_json: JsonOpt = False,
    jobs_dir: JobsDirOpt = Path("jobs"),
    label: LabelOpt = None,
    margin: MarginOpt = None,
    allow_partial: AllowPartialOpt = False,
) -> None:
    """A leaderboard, and each run against the baseline: the paired difference per
    benchmark and overall, with its 95% interval, standard error, minimum detectable
    difference (80% power) and p-value (Holm-adjusted overall), over the cases both
    scored.

    Example: batchbench compare gpt-5.4-mini gpt-5.5 --baseline gpt-5.4-mini
    """

    from ..bench.dataset import load_dataset
    from ..scores import healthbench_compare as hb
    from ..scores.compare import compare as make_comparison
    from ..scores.compare import load_side
    from ..scores.judge_rankings import rankings, rankings_text
    from ..scores.sources import resolve_all
    from ..views.comparison import compare_text

    named = resolve_all(runs, jobs_dir, label or ())
    healthbench = hb.loaded(named)  # HealthBench runs: simple-evals' metrics, paired
    if healthbench is not None:
        paired = hb.compare(healthbench, baseline, bootstrap_samples, bootstrap_seed)
        typer.echo(strict_json(paired) if as_json else hb.compare_text(paired))
        return
    ds = load_dataset(dataset) if dataset is not None else None
    sides = [load_side(n, ds, warn) for n in named]
    result = make_comparison(
        sides,
        baseline,
        bootstrap_samples,
        bootstrap_seed,
        margin=margin,
        allow_partial=allow_partial,
    )
    found = [n.run for n in named if n.run is not None]  # their judge panels, if any
    panel = rankings(found) if len(found) == len(named) else []
    if as_json:
        typer.echo(strict_json({**result, **({"panel": panel} if panel else {})}))
    else:
        typer.echo("\n".join([compare_text(result), *rankings_text(panel)]))


@friendly
def plan(
    runs: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN_A RUN_B",
            help="Two finished runs: the pilot.",
            autocompletion=complete_runs,
        ),
    ],
    mde: Annotated[
        float,
        typer.Option(metavar="D", help="The macro difference to detect (e.g. 0.02)."),
    ],
    power: Annotated[float, typer.Option(metavar="P", help="Power to detect it.")] = 0.8,
    alpha: Annotated[float, typer.Option(metavar="A", help="Two-sided level.")] = 0.05,
    dataset: FilesDatasetOpt = None,
    as_json: JsonOpt = False,
    jobs_dir: JobsDirOpt = Path("jobs"),
    label: LabelOpt = None,
    allow_partial: AllowPartialOpt = False,
    labels: Annotated[
        list[Path] | None,
        typer.Option(
            "--labels",
            metavar="FILE...",
            help="Two judges' runs of the same answers (a judge panel's) and physicians'"
            " labels of them: how many labelled cases tell the judges' agreement apart by D.",
        ),
    ] = None,
    seal: Annotated[
        Path | None,
        typer.Option(
            "--seal",
            metavar="FILE",
            help="Write the analysis plan (endpoint, models, judge, dataset digest, seed,"
            " these targets, the cases they need) to FILE, sealed by its SHA-256: give it to"
            " `run --plan` before the runs are bought.",
        ),
    ] = None,
    margin: MarginOpt = None,
) -> None:
    """How many cases per benchmark (and dollars) a comparison needs to detect a macro
    difference of D, from the spread of two pilot runs' paired differences; with
    --labels, how many labelled cases tell two judges' agreement with physicians apart.

    Example: batchbench plan gpt-5.4-mini-smoke gpt-5.5-smoke --mde 0.02
    """

    from ..bench.dataset import load_dataset
    from ..errors import ConfigError
    from ..scores.compare import load_side
    from ..scores.power import check_targets, plan_text
    from ..scores.power import plan as make_plan
    from ..scores.sources import resolve_all

    if len(runs) != 2:
        raise ConfigError(f"plan takes two pilot runs, not {len(runs)}")
    check_targets(mde, power, alpha)
    ds = load_dataset(dataset) if dataset is not None else None
    named = resolve_all(runs, jobs_dir, label or ())
    if labels:
        typer.echo(_judges_plan(named, labels, mde, power, alpha, as_json))
        return
    a, b = ((n, load_side(n, ds, warn)) for n in named)
    result = make_plan((a, b), mde, power, alpha, allow_partial=allow_partial)
    typer.echo(strict_json(result) if as_json else plan_text(result))
    if seal is not None:
        _seal(seal, [a[1], b[1]], result, margin)


def _seal(path: Path, sides: list[Any], result: dict[str, Any], margin: float | None) -> None:
    """The analysis plan written and its hash said (:mod:`..scores.sealed`)."""
    import hashlib
    import time

    from .._io import atomic_write_text
    from ..errors import ConfigError
    from ..scores.sealed import ENDPOINT, seal_text

    judges = {s.judge_model for s in sides}
    if len(judges) != 1:
        raise ConfigError(f"--seal: the pilot runs have different judges ({', '.join(judges)})")
    summary = sides[0].summary
    text = seal_text(
        {
            "primary_endpoint": ENDPOINT,
            "models": [s.answer_model for s in sides],
            "judge": judges.pop(),
            "dataset_sha256": sides[0].dataset_sha256,
            "seed": summary["bootstrap_seed"],
            "samples": summary["bootstrap_samples"],
            "mde": result["mde"],
            "power": result["power"],
            "alpha": result["alpha"],
            "cases_per_benchmark": result["cases_per_benchmark"],
            "margin": margin,
        },
        time.time(),
    )
    atomic_write_text(path, text, mode=0o644)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    typer.echo(f"sealed the analysis plan in {path} (sha256 {digest}): run --plan {path}")


def _judges_plan(
    named: list[Named], labels: list[Path], mde: float, power: float, alpha: float, as_json: bool
) -> str:
    """``plan A B --labels``: the labels that tell two judges' agreement apart (#50)."""
    from ..calibration import load_run
    from ..calibration.judge_choice import judges_plan, judges_plan_text
    from ..calibration.labels import read_labels

    a, b = (load_run(n, warn=warn) for n in named)
    found = read_labels(labels, a.name, a.cases, None)
    result = judges_plan(a, b, found, mde, power, alpha)
    return strict_json(result) if as_json else judges_plan_text(result)
