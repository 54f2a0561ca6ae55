"""The CLI as a test calls it: in this process on the test's clock, or as a subprocess."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures"  # synthetic dataset + the reference's goldens over it
SAMPLE = REPO / "batchbench" / "sample"

# The clock an in-process command reads and waits on: the test's fake clock, shared
# with its emulator (set by the autouse ``clock`` fixture in conftest.py).
_clock: list[Any] = []


def use_clock(clock: Any) -> None:
    _clock[:] = [clock]


def run_cli(
    *args: str,
    env: dict | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
    real: bool = False,
    clock: Any = None,
) -> subprocess.CompletedProcess:
    """The CLI, in this process through typer's runner on the test's clock (or the
    ``clock`` given); ``real=True`` (or a ``cwd``) runs ``python -m batchbench`` as a
    subprocess, on real time. Either way the result has ``returncode``, ``stdout`` and
    ``stderr``; an exception that escaped the CLI shows as a traceback on stderr, as in
    a terminal."""
    if not real and cwd is None:
        return _in_process(args, env, clock if clock is not None else (_clock or [None])[0])
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return _process(list(args), full_env, cwd or REPO, timeout)


# The modules a run imports, loaded once by a fork server: a ``real`` command is a fresh
# process of its own (forked from that single-threaded server, killed as any process is)
# that does not pay half a second of imports each time.
_PRELOAD = [
    "batchbench.cli",
    "batchbench.launch",
    "batchbench.engine.pipeline",
    "polars",
    "numpy",
    "openai",
    "anthropic",
    "google.genai",
    "boto3",
    "groq",
    "together",
    "mistralai.client",
    "openrouter",
]


def _process(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess:
    """``python -m batchbench ARGS`` in a process of its own: its exit code (``-9`` for a
    SIGKILL), stdout and stderr, as ``subprocess.run`` gives them."""
    import multiprocessing
    import pkgutil
    import tempfile

    import batchbench.providers

    context = multiprocessing.get_context("forkserver")
    providers = [  # each provider's modules too: a run imports its own on the way
        f"batchbench.providers.{m.name}"
        for m in pkgutil.iter_modules(batchbench.providers.__path__)
    ]
    context.set_forkserver_preload([*_PRELOAD, *providers])
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        child = context.Process(target=_main, args=(args, env, str(cwd), str(out), str(err)))
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(["batchbench", *args], timeout)
        return subprocess.CompletedProcess(
            ["batchbench", *args], child.exitcode, out.read_text(), err.read_text()
        )


def _main(args: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """The child: the environment, folder, argv and standard streams a fresh
    ``python -m batchbench`` would have, then the CLI's own ``main``."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the process's own streams
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.argv = ["batchbench", *args]
    from batchbench.cli import main

    main()


def _cached_commands() -> None:
    """Build the click command of the app once per process, as the real CLI does (typer's
    runner rebuilds it, re-evaluating every annotation, on every call)."""
    import typer.testing

    if not hasattr(typer.testing._get_command, "cache_info"):
        typer.testing._get_command = functools.lru_cache(maxsize=None)(typer.testing._get_command)


def _in_process(args: tuple[str, ...], env: dict | None, clock: Any) -> subprocess.CompletedProcess:
    from typer.testing import CliRunner

    from batchbench.cli import app

    _cached_commands()

    obj = {"clock": clock} if clock is not None else None
    result = CliRunner().invoke(app, list(args), env=env, obj=obj)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, stderr)


def spawn(
    args: list[str], env: dict[str, str], stdout: Any = subprocess.DEVNULL
) -> subprocess.Popen:
    """``python -m batchbench ARGS`` in the background (real time), stderr captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "batchbench", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        cwd=REPO,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    """A failed command: non-zero exit, and its last stderr line is the one error line
    naming the culprit (progress lines may come before it, nothing after)."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("error:", "internal error"))]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def read_lines(stream: Any, count: int, timeout: float = 60, until: Any = None) -> list[str]:
    """Up to ``count`` lines of a child's output (or up to the first that ``until``
    accepts), failing the test (never hanging it) when the child falls silent for
    ``timeout`` seconds; fewer at its end."""
    import queue
    import threading

    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for _ in range(count):
            line = stream.readline()
            lines.put(line)
            if not line:
                return

    threading.Thread(target=pump, daemon=True).start()
    out: list[str] = []
    while len(out) < count:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"the process printed nothing for {timeout:g}s after {out}"
            ) from None
        if not line:
            break
        out.append(line)
        if until is not None and until(line):
            break
    return out
