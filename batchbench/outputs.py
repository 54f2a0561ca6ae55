"""Downloaded batch output and error files → polars frames → one outcome per request.

The raw files stay on disk verbatim; everything here is a pure function of
their bytes and of the submission they answer, so it can be re-run at any time.
Lines are read as strings and their fields picked with JSON paths, which copes
with the very different shapes of success and error lines without a schema.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from . import protocol
from .errors import BatchFileError
from .requests import parse_custom_id

TRANSIENT_CODES = ("batch_expired", "batch_cancelled", "request_timeout")

_FIELDS = {
    "custom_id": "$.custom_id",
    "status_code": "$.response.status_code",
    "response": "$.response",
    "error": "$.error",
    "error_code": "$.error.code",
    "error_message": "$.error.message",
    "body_message": "$.response.body.error.message",
    "content": "$.response.body.choices[0].message.content",
    "prompt_tokens": "$.response.body.usage.prompt_tokens",
    "cached_tokens": "$.response.body.usage.prompt_tokens_details.cached_tokens",
    "completion_tokens": "$.response.body.usage.completion_tokens",
    "reasoning_tokens": "$.response.body.usage.completion_tokens_details.reasoning_tokens",
}
USAGE_COLUMNS = ("prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")


class TruncatedFileError(BatchFileError):
    """The file ends in the middle of a line: download it again."""


def read_lines(path: Path) -> pl.DataFrame:
    """One row per non-empty line: ``file``, ``lineno``, ``line``."""
    data = path.read_bytes()
    truncated = bool(data) and not data.endswith(b"\n")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BatchFileError(f"{path}: not UTF-8 text") from None
    lines = text.split("\n")
    frame = pl.DataFrame(
        {"lineno": range(1, len(lines) + 1), "line": lines},
        schema={"lineno": pl.Int64, "line": pl.String},
    ).filter(pl.col("line").str.strip_chars() != "")
    frame = frame.with_columns(pl.lit(str(path)).alias("file"))
    if truncated and frame.height:
        last = frame["line"][-1]
        try:
            json.loads(last)
        except json.JSONDecodeError:
            raise TruncatedFileError(f"{path}: ends mid-line (truncated download)") from None
    return frame


def parse_files(paths: Sequence[Path]) -> pl.DataFrame:
    """All lines of these files with their fields extracted, each line checked."""
    frames = [read_lines(p) for p in paths]
    if not frames:
        frame = pl.DataFrame(schema={"lineno": pl.Int64, "line": pl.String, "file": pl.String})
    else:
        frame = pl.concat(frames)
    line = pl.col("line")
    frame = frame.with_columns(line.str.json_path_match(p).alias(k) for k, p in _FIELDS.items())
    frame = frame.with_columns(
        pl.col("status_code").cast(pl.Int64, strict=False),
        *(pl.col(c).cast(pl.Int64, strict=False).fill_null(0) for c in USAGE_COLUMNS),
    )
    bad = frame.filter(
        pl.col("custom_id").is_null() | (pl.col("response").is_null() & pl.col("error").is_null())
    )
    if bad.height:
        _raise_bad_line(bad.row(0, named=True))
    return frame


def _raise_bad_line(row: dict) -> None:
    where = f"{row['file']}: line {row['lineno']}"
    try:
        obj = json.loads(row["line"])
    except json.JSONDecodeError as exc:
        raise BatchFileError(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise BatchFileError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if not isinstance(obj.get("custom_id"), str):
        raise BatchFileError(f"{where}: no string 'custom_id'")
    raise BatchFileError(f"{where}: custom_id {obj['custom_id']!r} has neither response nor error")


@dataclass
class Outcome:
    """What happened to one request line. ``kind``: ok, transient, no_temperature, failed."""

    case_id: str
    kind: str
    detail: str | None = None
    content: str | None = None
    source: str | None = None  # the raw file the successful line came from


@dataclass
class Collected:
    outcomes: dict[str, Outcome]
    usage: dict[str, int] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)


def classify(
    frame: pl.DataFrame,
    stage: str,
    expected: dict[str, tuple[str, bool]],
) -> Collected:
    """One outcome per expected custom id (``{custom_id: (case_id, sent_temperature)}``).

    Ids the submission never sent are reported and ignored; an id that appears
    more than once is reported and its lines are not used (the request runs
    again); an id with no line at all is transient (it runs again).
    """
    anomalies: list[str] = []
    known = frame.filter(pl.col("custom_id").is_in(list(expected)))
    unknown = frame.filter(~pl.col("custom_id").is_in(list(expected)))
    for row in unknown.select("file", "lineno", "custom_id").iter_rows(named=True):
        anomalies.append(
            f"{row['file']}: line {row['lineno']}: unknown custom_id {row['custom_id']!r} (ignored)"
        )
    counts = known.group_by("custom_id").len()
    dup_ids = set(counts.filter(pl.col("len") > 1)["custom_id"].to_list())
    for cid in sorted(dup_ids):
        anomalies.append(f"custom_id {cid!r} appears more than once (not used; resubmitted)")
    usable = known.filter(~pl.col("custom_id").is_in(list(dup_ids)))
    ok = pl.col("error").is_null() & pl.col("status_code").is_between(200, 299)
    usage_rows = usable.filter(ok)
    usage = {c: int(usage_rows[c].sum()) for c in USAGE_COLUMNS}
    usage["requests"] = usage_rows.height

    outcomes: dict[str, Outcome] = {}
    for row in usable.iter_rows(named=True):
        cid = row["custom_id"]
        case_id, sent_temperature = expected[cid]
        outcomes[cid] = _outcome(row, stage, case_id, sent_temperature)
    for cid, (case_id, _) in expected.items():
        if cid not in outcomes:
            why = "duplicated in the output" if cid in dup_ids else "no result line"
            outcomes[cid] = Outcome(case_id, "transient", why)
    return Collected(outcomes, usage, anomalies)


def _outcome(row: dict, stage: str, case_id: str, sent_temperature: bool) -> Outcome:
    status = row["status_code"]
    code = row["error_code"]
    if row["error"] is not None and row["error"] != "null":
        if code in TRANSIENT_CODES:
            return Outcome(case_id, "transient", code)
        return Outcome(case_id, "failed", f"BatchLineError: {code}: {row['error_message']}")
    if status is None:
        return Outcome(case_id, "transient", "no status code")
    if 200 <= status < 300:
        content = row["content"]
        if stage == "answers" and (content is None or not content.strip()):
            return Outcome(case_id, "failed", "ValueError: empty answer content")
        return Outcome(case_id, "ok", None, content or "", row["file"])
    message = row["body_message"] or ""
    if status == 429 or status >= 500 or status == 0:
        return Outcome(case_id, "transient", f"HTTP {status}")
    body = {"error": {"message": message}}
    if sent_temperature and protocol.rejects_temperature(status, body):
        return Outcome(case_id, "no_temperature", message)
    return Outcome(case_id, "failed", f"HTTPError: {status}: {message}"[:2000])


def expected_ids(custom_ids: Sequence[str]) -> dict[str, str]:
    """``{custom_id: case_id}`` for ids batchbench made."""
    out = {}
    for cid in custom_ids:
        parsed = parse_custom_id(cid)
        if parsed is not None:
            out[cid] = parsed[1]
    return out
