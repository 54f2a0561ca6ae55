"""``batchbench emulator``: serve the emulator from the command line.

It lives with the emulator (which shares no code with the pipeline) and says
its own one-line errors. Like the package's CLI, it imports the server only
when the command runs, so every other command starts without it.
"""

from __future__ import annotations

import math
from typing import Annotated, NoReturn

import typer

from .anomalies import ANOMALIES, parse_anomaly


def fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


Host = Annotated[str, typer.Option(help="Address to listen on (keep it loopback).", metavar="HOST")]
Port = Annotated[int, typer.Option(help="Port; 0 picks a free one.", metavar="PORT")]
Latency = Annotated[
    float,
    typer.Option(
        help="Seconds each phase takes: validating, in_progress, finalizing.", metavar="SECONDS"
    ),
]
Window = Annotated[
    float,
    typer.Option(help="Seconds the emulated '24h' window lasts before expiry.", metavar="SECONDS"),
]
Responder = Annotated[
    str | None,
    typer.Option(
        help="FILE.py:FUNCTION called once per executed line with the request body;"
        " returns the reply content (str) or {'status_code', 'body'}.",
        metavar="FILE.py:FUNCTION",
    ),
]
FaultRate = Annotated[
    float, typer.Option(help="Fraction of API calls answered 429 or 500.", metavar="RATE")
]
SlowRate = Annotated[float, typer.Option(help="Fraction of API calls delayed.", metavar="RATE")]
SlowSeconds = Annotated[float, typer.Option(help="Delay of a slow call.", metavar="SECONDS")]
TruncateRate = Annotated[
    float, typer.Option(help="Fraction of file downloads cut off mid-body.", metavar="RATE")
]
Seed = Annotated[int, typer.Option(help="Seed for ids, shuffling and faults.", metavar="N")]
TokenLimit = Annotated[
    int | None,
    typer.Option(
        help="Per-model in-flight prompt tokens; over it a batch fails with token_limit_exceeded.",
        metavar="N",
    ),
]
ApiKey = Annotated[
    str | None, typer.Option(help="Accept only this bearer token (default: any).", metavar="KEY")
]
Models = Annotated[
    list[str] | None,
    typer.Option(
        help="A model name every face knows, besides the price table's and the simulated"
        " ones (sim-answer, claude-sim...); repeatable.",
        metavar="NAME",
    ),
]
UnknownModels = Annotated[
    list[str] | None,
    typer.Option(help="A model answered as unknown anyway (repeatable).", metavar="MODEL"),
]
JudgeNoise = Annotated[
    float,
    typer.Option(
        help="Share of the simulated judge's verdicts flipped (seeded per line and item),"
        " so --judge-passes can be rehearsed.",
        metavar="RATE",
    ),
]
Anomalies = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME[=RATE]",
        help="The real service's bad days (repeatable): "
        + "; ".join(
            f"{name}: {what} (default {rate:g})" for name, (what, rate) in ANOMALIES.items()
        ),
    ),
]


def _check(port: int, seconds: dict[str, float], rates: dict[str, float]) -> None:
    """Each number in its range, or one line naming the option."""
    if not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535, got {port}")
    for name, value in seconds.items():
        if not math.isfinite(value) or value < 0:
            fail(f"--{name} must be a finite number of seconds, at least 0; got {value}")
    for name, rate in rates.items():
        if not 0 <= rate <= 1:
            fail(f"--{name} must be between 0 and 1, got {rate}")


def emulator_command(
    host: Host = "127.0.0.1",
    port: Port = 8765,
    latency: Latency = 1.0,
    completion_window: Window = 86400.0,
    responder: Responder = None,
    fault_rate: FaultRate = 0.0,
    slow_rate: SlowRate = 0.0,
    slow_seconds: SlowSeconds = 1.0,
    truncate_rate: TruncateRate = 0.0,
    seed: Seed = 0,
    enqueued_token_limit: TokenLimit = None,
    api_key: ApiKey = None,
    model: Models = None,
    unknown_model: UnknownModels = None,
    judge_noise: JudgeNoise = 0.0,
    anomaly: Anomalies = None,
) -> None:
    """Serve the providers' batch APIs on one loopback port (every face) until Ctrl-C.
    What it executed, as a real service would bill it (each request, batch and fault),
    is JSON at GET /_emulator/ledger.

    Each face is the service's HTTP API, driven by its own SDK; xAI's is its REST batch
    API only (files, create by file or by name then add requests, get, list, cancel,
    results): xai-sdk speaks gRPC, which is not served.

    Example: batchbench emulator --port 8765 --latency 2 --fault-rate 0.1
    """
    from .model import load_responder  # the server only when it is asked for
    from .service import Emulator, serve

    _check(
        port,
        {"latency": latency, "completion-window": completion_window, "slow-seconds": slow_seconds},
        {
            "fault-rate": fault_rate,
            "slow-rate": slow_rate,
            "truncate-rate": truncate_rate,
            "judge-noise": judge_noise,
        },
    )
    try:
        fn = load_responder(responder) if responder else None
    except ValueError as exc:
        fail(f"--responder: {exc}")
    try:
        anomalies = dict(parse_anomaly(spec) for spec in anomaly or ())
    except ValueError as exc:
        fail(f"--anomaly: {exc}")
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
            unknown_models=unknown_model or (),
            models=model or (),
            anomalies=anomalies,
            judge_noise=judge_noise,
        )
    except OSError as exc:
        hint = "; choose another with --port (0 picks a free one)" if exc.errno == 98 else ""
        fail(f"cannot listen on {host}:{port}: {exc.strerror}{hint}")
    serve(emu, announce=lambda line: typer.echo(line))
