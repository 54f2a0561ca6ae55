"""A sealed analysis plan (#66.7): what will be compared, and how, written down before
the runs are bought, with its own hash; the runs record it; the report says whether the
analysis went as planned or names each deviation.

``plan A B --mde D --seal FILE`` writes the plan (TOML, one key a line) from the pilot
runs: the primary endpoint (the overall macro mean, the paired difference between the
answer models), the models, the judge, the dataset's digest, the bootstrap's seed and
resamples, the power calculation's targets and the cases it asks for, and, if given,
the non-inferiority margin. ``run --plan FILE`` records the file's SHA-256 and text in
the run's configuration, once, when the run starts. The report checks every run it
shows against the plan it recorded.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._io import read_bounded
from ..errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ENDPOINT = "overall macro mean; the paired difference between the answer models"
MAX_BYTES = 64 * 1024  # a plan is a page of keys
REQUIRED = ("primary_endpoint", "models", "judge", "dataset_sha256", "seed", "samples")


def _toml(value: Any) -> str:
    """A TOML value for the plan's simple types (JSON's strings, numbers and arrays are
    TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def seal_text(fields: Mapping[str, Any], now: float) -> str:
    """The plan as TOML: a comment saying what it is, then one key a line."""
    stamped = {**fields, "sealed_at": datetime.fromtimestamp(now, timezone.utc).isoformat()}
    lines = [
        "# batchbench analysis plan, sealed before the runs: `batchbench run --plan THIS_FILE`",
        "# records its SHA-256; the report checks each run against it.",
        *(f"{key} = {_toml(value)}" for key, value in stamped.items() if value is not None),
    ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Sealed:
    """A plan as a run records it: its hash, its text and what the text says."""

    sha256: str
    text: str
    fields: dict[str, Any]

    def record(self) -> dict[str, str]:
        return {"sha256": self.sha256, "text": self.text}


def parse(text: str, where: str) -> dict[str, Any]:
    try:
        fields = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not a TOML analysis plan ({exc})") from None
    missing = [k for k in REQUIRED if k not in fields]
    if missing:
        raise ConfigError(f"{where}: not a sealed analysis plan: no {', '.join(missing)}")
    return dict(fields)


def read_plan(path: Path) -> Sealed:
    """A plan file, checked: one line naming the file and what is wrong."""
    if not path.exists():
        raise ConfigError(f"--plan {path}: no such file")
    if not path.is_file():  # a folder, a device (/dev/zero would be read for ever)
        raise ConfigError(f"--plan {path}: not a file (a sealed plan is a TOML file)")
    too_big = f"over {MAX_BYTES:,} bytes, not a sealed plan"
    data = read_bounded(path, MAX_BYTES, ConfigError, f"--plan {path}", too_big)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"--plan {path}: not UTF-8 text") from None
    return Sealed(hashlib.sha256(data).hexdigest(), text, parse(text, f"--plan {path}"))


def recorded(record: Mapping[str, str]) -> Sealed:
    """The plan a run recorded (its configuration's ``analysis_plan``)."""
    return Sealed(record["sha256"], record["text"], parse(record["text"], "the run's plan"))


@dataclass(frozen=True)
class Shown:
    """What the report shows of a run, to check against its plan."""

    name: str
    answer_model: str
    judge_model: str
    dataset_sha256: str
    seed: Any
    samples: Any


def deviations(plan: Sealed, runs: Sequence[Shown], margin: float | None) -> list[str]:
    """Each way the analysis shown departs from the plan (none: as planned)."""
    said = plan.fields
    out = []
    planned = list(said.get("models", []))
    shown = [r.answer_model for r in runs]
    if sorted(shown) != sorted(planned):
        out.append(f"models: planned {', '.join(planned)}; shown {', '.join(shown)}")
    for run in runs:
        for key, value, what in (
            ("judge", run.judge_model, "judge"),
            ("dataset_sha256", run.dataset_sha256, "dataset digest"),
            ("seed", run.seed, "bootstrap seed"),
            ("samples", run.samples, "bootstrap resamples"),
        ):
            if said.get(key) != value:
                out.append(f"{run.name}: {what} planned {said.get(key)}, used {value}")
    if said.get("margin") != margin:
        out.append(f"non-inferiority margin: planned {said.get('margin')}, used {margin}")
    return out
