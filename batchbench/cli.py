"""The command line: parse options, call the package, print. Nothing else lives here."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from .errors import BatchbenchError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Run BedsideBench through the OpenAI Batch API, scored exactly like the reference.",
)

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DATASET = Path(__file__).resolve().parent.parent / "data" / "sample"


def friendly(fn: F) -> F:
    """Turn a BatchbenchError into one line on stderr and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BatchbenchError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper  # type: ignore[return-value]


@app.callback()
def root() -> None:
    """Run BedsideBench through the OpenAI Batch API, scored exactly like the reference."""


DatasetOpt = Annotated[
    Path, typer.Option("--dataset", help="BedsideBench checkout (registry.json at its root).")
]
SmokeOpt = Annotated[bool, typer.Option("--smoke", help="Only the first case of each benchmark.")]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", help="Keep the first N cases of the selection.")
]


@app.command()
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
) -> None:
    """Write RESULTS.summary.json exactly as the reference runner would, and print it."""
    from .dataset import load_dataset, select_cases
    from .errors import ConfigError
    from .report import summary_json, summary_table, write_summary
    from .results import read_rows, summary_path
    from .summary import summarize as make_summary

    if bootstrap_samples < 1:
        raise ConfigError(f"--bootstrap-samples must be at least 1, got {bootstrap_samples}")
    expected_ids: list[str] | None = None
    digest: str | None = None
    if dataset is not None:
        ds = load_dataset(dataset)
        selected = select_cases(ds, smoke=smoke, limit=limit, benchmarks=benchmark or ())
        expected_ids = [c["case_id"] for c in selected]
        digest = ds.sha256
    elif smoke or limit is not None or benchmark:
        raise ConfigError("--smoke, --limit and --benchmark select from a dataset: pass --dataset")
    rows = read_rows(results)
    summary = make_summary(
        rows,
        samples=bootstrap_samples,
        seed=bootstrap_seed,
        expected_case_ids=expected_ids,
        dataset_sha256=digest,
    )
    out = summary_path(results)
    write_summary(out, summary)
    if as_json:
        sys.stdout.write(summary_json(summary))
    else:
        typer.echo(summary_table(summary))
        typer.echo(f"wrote {out}")


@app.command()
@friendly
def validate(dataset: DatasetOpt = DEFAULT_DATASET) -> None:
    """Load and validate a dataset; print its case count and digest."""
    from .dataset import load_dataset

    ds = load_dataset(dataset)
    typer.echo(f"{len(ds.cases)} cases in {len(ds.benchmarks)} benchmarks")
    typer.echo(f"dataset_sha256 {ds.sha256}")


@app.command()
@friendly
def emulator(
    host: Annotated[str, typer.Option(help="Address to listen on (keep it loopback).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port; 0 picks a free one.")] = 8765,
    latency: Annotated[
        float, typer.Option(help="Seconds each phase takes: validating, in_progress, finalizing.")
    ] = 1.0,
    completion_window: Annotated[
        float, typer.Option(help="Seconds the emulated '24h' window lasts before expiry.")
    ] = 86400.0,
    responder: Annotated[
        str | None,
        typer.Option(
            help="FILE.py:FUNCTION called once per executed line with the request body;"
            " returns the reply content (str) or {'status_code', 'body'}."
        ),
    ] = None,
    fault_rate: Annotated[
        float, typer.Option(help="Fraction of API calls answered 429 or 500.")
    ] = 0.0,
    slow_rate: Annotated[float, typer.Option(help="Fraction of API calls delayed.")] = 0.0,
    slow_seconds: Annotated[float, typer.Option(help="Delay of a slow call.")] = 1.0,
    truncate_rate: Annotated[
        float, typer.Option(help="Fraction of file downloads cut off mid-body.")
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed for ids, shuffling and faults.")] = 0,
    enqueued_token_limit: Annotated[
        int | None,
        typer.Option(
            help="Per-model in-flight prompt tokens; over it a batch fails"
            " with token_limit_exceeded."
        ),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(help="Accept only this bearer token (default: any).")
    ] = None,
) -> None:
    """Serve a loopback OpenAI Batch API (files, batches, lifecycle, faults) until Ctrl-C."""
    from .emulator import Emulator, load_responder, serve
    from .errors import ConfigError

    for name, rate in (("fault", fault_rate), ("slow", slow_rate), ("truncate", truncate_rate)):
        if not 0 <= rate <= 1:
            raise ConfigError(f"--{name}-rate must be between 0 and 1, got {rate}")
    try:
        fn = load_responder(responder) if responder else None
    except ValueError as exc:
        raise ConfigError(f"--responder: {exc}") from None
    try:
        emu = Emulator(
            host,
            port,
            latency=latency,
            completion_window=completion_window,
            responder=fn,
            fault_rate=fault_rate,
            slow_rate=slow_rate,
            slow_seconds=slow_seconds,
            truncate_rate=truncate_rate,
            seed=seed,
            enqueued_token_limit=enqueued_token_limit,
            api_key=api_key,
        )
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    serve(emu, announce=lambda line: typer.echo(line))


def main() -> None:
    app()


__all__ = ["app", "main"]
