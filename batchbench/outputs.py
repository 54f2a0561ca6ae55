"""Downloaded batch output and error files → polars frames → one outcome per request.

The raw files stay on disk verbatim; everything here is a pure function of
their bytes and of the submission they answer, so it can be re-run at any time.
Files are read over a memory map with msgspec against a typed schema of just
the fields we use; when a file does not decode (a garbage line), it is read
again line by line only to name the line and the field. Message contents stay
encoded until something needs their text: judge replies are checked on their
JSON bytes (:mod:`batchbench.decisions`). Classification is frame operations.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np
import polars as pl

from .errors import BatchFileError

TRANSIENT_CODES = ("batch_expired", "batch_cancelled", "request_timeout")
USAGE_COLUMNS = ("prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")

FRAME_SCHEMA = {
    "file": pl.String,
    "lineno": pl.Int64,
    "row": pl.Int64,
    "custom_id": pl.String,
    "status_code": pl.Int64,
    "has_response": pl.Boolean,
    "has_error": pl.Boolean,
    "error_code": pl.String,
    "error_message": pl.String,
    "body_message": pl.String,
    **{c: pl.Int64 for c in USAGE_COLUMNS},
}

# The fields of an output line that batchbench reads, typed: msgspec checks every
# line is JSON and these fields have these types, and skips everything else
# without building it. ``content`` stays a zero-copy view of its JSON text (a
# Raw): judge replies are checked on those bytes and most are never decoded.
_NULL = msgspec.Raw(b"null")


class _Message(msgspec.Struct, gc=False):
    content: msgspec.Raw = _NULL


class _Choice(msgspec.Struct, gc=False):
    message: _Message | None = None


class _PromptDetails(msgspec.Struct, gc=False):
    cached_tokens: int | None = None


class _CompletionDetails(msgspec.Struct, gc=False):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None


class _BodyError(msgspec.Struct, gc=False):
    message: str | None = None


class _Body(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: _BodyError | None = None


class _Response(msgspec.Struct, gc=False):
    status_code: int | None = None
    body: _Body | str | None = None


class _LineError(msgspec.Struct, gc=False):
    code: str | None = None
    message: str | None = None


class _Line(msgspec.Struct, gc=False):
    custom_id: str | None = None
    response: _Response | None = None
    error: _LineError | None = None


_LINE = msgspec.json.Decoder(_Line)
_CONTENT = msgspec.json.Decoder(str | None)


class TruncatedFileError(BatchFileError):
    """The file ends in the middle of a line: download it again."""


def _check_tail(data: bytes | mmap.mmap, path: Path) -> None:
    if not len(data) or data[-1:] == b"\n":
        return
    last = data[data.rfind(b"\n") + 1 :]
    try:
        json.loads(last)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TruncatedFileError(f"{path}: ends mid-line (truncated download)") from None


def _map(path: Path) -> bytes | mmap.mmap:
    """The file's bytes without copying them (an empty file cannot be mapped)."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return b""
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def _decode_lines(data: bytes | mmap.mmap, path: Path) -> tuple[list[_Line], list[int]]:
    """Every line decoded, and its line number; a bad line is named with what is wrong."""
    try:
        lines = _LINE.decode_lines(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        lines = None
    newlines = np.count_nonzero(np.frombuffer(data, np.uint8) == 10) if len(data) else 0
    if lines is not None and len(lines) == newlines + (len(data) > 0 and data[-1:] != b"\n"):
        return lines, list(range(1, len(lines) + 1))
    # Blank lines, two values on a line, or a bad line: go line by line to say which.
    lines, numbers = [], []
    for lineno, line in enumerate(bytes(data).split(b"\n"), 1):
        if not line.strip():
            continue
        where = f"{path}: line {lineno}"
        try:
            lines.append(_LINE.decode(line))
        except msgspec.ValidationError as exc:
            raise BatchFileError(f"{where}: {_field_problem(exc)}") from None
        except msgspec.DecodeError:
            try:
                json.loads(line)
                problem = "not a JSON object"
            except json.JSONDecodeError as exc:
                problem = f"not JSON ({exc.msg})"
            except UnicodeDecodeError:
                problem = "not UTF-8 text"
            raise BatchFileError(f"{where}: {problem}") from None
        numbers.append(lineno)
    return lines, numbers


def _field_problem(exc: msgspec.ValidationError) -> str:
    text = str(exc)
    if text.startswith("Expected `object`, got") and "- at" not in text:
        return f"expected a JSON object, got {text.split('got `', 1)[1].rstrip('`')}"
    return text.replace("`$.", "`").replace(" - at ", " at ")


class Outputs:
    """Downloaded output/error files read once: one row per line, contents still encoded."""

    def __init__(self, frame: pl.DataFrame, raws: list[msgspec.Raw]):
        self.frame = frame  # FRAME_SCHEMA; ``row`` indexes ``raws``
        self.raws = raws  # each line's message content as JSON text (``null`` if none)

    def contents(self, rows: Sequence[int]) -> list[str | None]:
        """Decoded message contents; anything but a string reads as no content."""
        out: list[str | None] = []
        for i in rows:
            try:
                out.append(_CONTENT.decode(self.raws[i]))
            except msgspec.ValidationError:
                out.append(None)
        return out

    def with_content(self) -> pl.DataFrame:
        """The frame with a decoded ``content`` column (for answers and small files)."""
        content = pl.Series("content", self.contents(range(len(self.raws))), dtype=pl.String)
        return self.frame.with_columns(content)


def read_outputs(paths: Sequence[Path]) -> Outputs:
    """All lines of these files with the fields we use, each line checked."""
    files: list[str] = []
    numbers: list[int] = []
    lines: list[_Line] = []
    for p in paths:
        path = Path(p)
        data = _map(path)
        _check_tail(data, path)
        got, nums = _decode_lines(data, path)
        files.extend([str(path)] * len(got))
        numbers.extend(nums)
        lines.extend(got)
    responses = [ln.response for ln in lines]
    errors = [ln.error for ln in lines]
    bodies = [r.body if r is not None and not isinstance(r.body, str) else None for r in responses]
    usages = [b.usage if b is not None else None for b in bodies]
    messages = [b.choices[0].message if b is not None and b.choices else None for b in bodies]
    prompt = [u.prompt_tokens_details if u is not None else None for u in usages]
    completion = [u.completion_tokens_details if u is not None else None for u in usages]
    frame = pl.DataFrame(
        {
            "file": files,
            "lineno": numbers,
            "row": range(len(lines)),
            "custom_id": [ln.custom_id for ln in lines],
            "status_code": [r.status_code if r is not None else None for r in responses],
            "has_response": [r is not None for r in responses],
            "has_error": [e is not None for e in errors],
            "error_code": [e.code if e is not None else None for e in errors],
            "error_message": [e.message if e is not None else None for e in errors],
            "body_message": [
                b.error.message if b is not None and b.error is not None else None for b in bodies
            ],
            "prompt_tokens": [u.prompt_tokens if u is not None else None for u in usages],
            "cached_tokens": [d.cached_tokens if d is not None else None for d in prompt],
            "completion_tokens": [u.completion_tokens if u is not None else None for u in usages],
            "reasoning_tokens": [d.reasoning_tokens if d is not None else None for d in completion],
        },
        schema=FRAME_SCHEMA,
    ).with_columns(pl.col(c).fill_null(0) for c in USAGE_COLUMNS)
    raws = [m.content if m is not None else _NULL for m in messages]
    bad = frame.filter(
        pl.col("custom_id").is_null() | ~(pl.col("has_response") | pl.col("has_error"))
    )
    if bad.height:
        row = bad.row(0, named=True)
        where = f"{row['file']}: line {row['lineno']}"
        if row["custom_id"] is None:
            raise BatchFileError(f"{where}: no string 'custom_id'")
        raise BatchFileError(
            f"{where}: custom_id {row['custom_id']!r} has neither response nor error"
        )
    return Outputs(frame, raws)


def parse_files(paths: Sequence[Path]) -> pl.DataFrame:
    """All lines of these files with the fields we use and the decoded content."""
    return read_outputs(paths).with_content()


@dataclass
class Outcome:
    """What happened to one request line. ``kind``: ok, transient, no_temperature, failed."""

    case_id: str
    kind: str
    detail: str | None = None
    content: str | None = None
    source: str | None = None  # the raw file the successful line came from
    row: int | None = None  # the line's index in the Outputs it was read from


@dataclass
class Collected:
    outcomes: dict[str, Outcome]
    usage: dict[str, int] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)


def classify_frame(
    frame: pl.DataFrame, stage: str, expected: pl.DataFrame
) -> tuple[pl.DataFrame, dict[str, int], list[str]]:
    """Outcome per expected request (``expected``: custom_id, case_id, sent_temperature).

    Ids the submission never sent are reported and ignored; an id that appears
    more than once is reported and its lines are not used (the request runs
    again); an id with no line at all is transient (it runs again).
    """
    anomalies = [
        f"{r['file']}: line {r['lineno']}: unknown custom_id {r['custom_id']!r} (ignored)"
        for r in frame.join(expected, on="custom_id", how="anti").iter_rows(named=True)
    ]
    counts = frame.group_by("custom_id").len()
    dups = counts.filter(pl.col("len") > 1)["custom_id"].sort().to_list()
    anomalies += [f"custom_id {c!r} appears more than once (not used; resubmitted)" for c in dups]
    usable = frame.filter(~pl.col("custom_id").is_in(dups))
    ok = ~pl.col("has_error") & pl.col("status_code").is_between(200, 299)
    used = usable.filter(ok)
    usage = {c: int(used[c].sum()) for c in USAGE_COLUMNS}
    usage["requests"] = used.height

    status = pl.col("status_code")
    message = pl.col("body_message").fill_null("")
    if "content" in frame.columns:
        empty = pl.col("content").is_null() | (pl.col("content").str.strip_chars() == "")
    elif stage == "answers":
        raise ValueError("classifying answers needs the decoded content")
    else:
        empty = pl.lit(False)
    kind = (
        pl.when(pl.col("file").is_null())
        .then(pl.lit("transient"))
        .when(pl.col("has_error") & pl.col("error_code").is_in(TRANSIENT_CODES))
        .then(pl.lit("transient"))
        .when(pl.col("has_error"))
        .then(pl.lit("failed"))
        .when(status.is_null())
        .then(pl.lit("transient"))
        .when(ok & empty & pl.lit(stage == "answers"))
        .then(pl.lit("failed"))
        .when(ok)
        .then(pl.lit("ok"))
        .when((status == 429) | (status >= 500) | (status == 0))
        .then(pl.lit("transient"))
        .when(
            (status == 400)
            & message.str.contains("temperature", literal=True)
            & pl.col("sent_temperature")
        )
        .then(pl.lit("no_temperature"))
        .otherwise(pl.lit("failed"))
    )
    detail = (
        pl.when(pl.col("file").is_null())
        .then(
            pl.when(pl.col("custom_id").is_in(dups))
            .then(pl.lit("duplicated in the output"))
            .otherwise(pl.lit("no result line"))
        )
        .when(pl.col("has_error") & pl.col("error_code").is_in(TRANSIENT_CODES))
        .then(pl.col("error_code"))
        .when(pl.col("has_error"))
        .then(
            pl.format(
                "BatchLineError: {}: {}",
                pl.col("error_code").fill_null("?"),
                pl.col("error_message").fill_null(""),
            )
        )
        .when(status.is_null())
        .then(pl.lit("no status code"))
        .when(ok & empty & pl.lit(stage == "answers"))
        .then(pl.lit("ValueError: empty answer content"))
        .when(ok)
        .then(pl.lit(None, dtype=pl.String))
        .when((status == 429) | (status >= 500) | (status == 0))
        .then(pl.format("HTTP {}", status))
        .when(pl.col("kind") == "no_temperature")
        .then(message)
        .otherwise(pl.format("HTTPError: {}: {}", status, message).str.slice(0, 2000))
    )
    joined = expected.join(usable, on="custom_id", how="left").with_columns(kind.alias("kind"))
    outcomes = joined.with_columns(detail.alias("detail")).select(
        "custom_id",
        "case_id",
        "kind",
        "detail",
        *(c for c in ("content", "row") if c in frame.columns),
        pl.col("file").alias("source"),
    )
    return outcomes, usage, anomalies


def classify(frame: pl.DataFrame, stage: str, expected: dict[str, tuple[str, bool]]) -> Collected:
    """:func:`classify_frame` with Python dicts in and :class:`Outcome` objects out."""
    exp = pl.DataFrame(
        [(cid, case_id, sent) for cid, (case_id, sent) in expected.items()],
        schema={"custom_id": pl.String, "case_id": pl.String, "sent_temperature": pl.Boolean},
        orient="row",
    )
    outcomes, usage, anomalies = classify_frame(frame, stage, exp)
    result = {}
    for row in outcomes.iter_rows(named=True):
        ok = row["kind"] == "ok"
        result[row["custom_id"]] = Outcome(
            row["case_id"],
            row["kind"],
            row["detail"],
            row.get("content") if ok else None,
            row["source"] if ok else None,
            row.get("row") if ok else None,
        )
    return Collected(result, usage, anomalies)
