"""A run in a bucket, as the tests read it: its files pulled into a folder, the way any
machine reads them (through batchbench's own storage seam, in a command of its own)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The variables that reach the emulator's S3 face (any key; a region).
AWS = {
    "AWS_ACCESS_KEY_ID": "team-not-secret",
    "AWS_SECRET_ACCESS_KEY": "team-not-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def emulator_s3(emu) -> dict[str, str]:
    return {**AWS, "AWS_ENDPOINT_URL_S3": emu.base_urls["bedrock"]}


def emulator_gcs(emu) -> dict[str, str]:
    """The emulator's service account (a key made for it) and its Cloud Storage XML API."""
    found = emu.environment()
    return {k: found[k] for k in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_BASE_URL")}


@contextmanager
def variables(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def pull(uri: str, run: str, values: dict[str, str], into: Path) -> Path:
    """The run's files a reader needs (journal, rows, judge pass rows, summary, config)
    under ``into/run``."""
    from batchbench.engine.rundir import Run
    from batchbench.storage import close_all, jobs_path

    with variables(values):
        try:
            found = Run(jobs_path(uri) / run)
            (into / run).mkdir(parents=True, exist_ok=True)
            for name in (
                "config_path",
                "journal_path",
                "results_path",
                "summary_path",
                "passes_path",
            ):
                path = getattr(found, name)
                if path.exists():
                    (into / run / path.name).write_bytes(path.read_bytes())
        finally:
            close_all()
    return into
