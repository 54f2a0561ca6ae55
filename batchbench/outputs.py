"""Downloaded batch output and error files → polars frames → one outcome per request.

The raw files stay on disk verbatim; everything here is a pure function of
their bytes and of the submission they answer, so it can be re-run at any time.
Files are read over a memory map with msgspec against a typed schema of just
the fields we use; when a file does not decode (a garbage line), it is read
again line by line only to name the line and the field. Classification is
frame operations; the protocol's rules (what is retried, what a temperature
refusal is, what an error row says) come from :mod:`batchbench.protocol`.
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

from . import protocol
from ._io import jsonl_lines
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
    "body_text": pl.String,
    "content": pl.String,
    **{c: pl.Int64 for c in USAGE_COLUMNS},
}

# The fields of an output line that batchbench reads, typed: msgspec checks every
# line is JSON and these fields have these types, and skips everything else
# without building it. ``content`` and ``body`` are kept as their JSON text (a
# Raw): a content that is not a string reads as none, and a failed reply's body
# is wanted as text (the temperature rule and error rows read it so).
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


class _Body(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None


class _Response(msgspec.Struct, gc=False):
    status_code: int | None = None
    body: msgspec.Raw = _NULL


class _LineError(msgspec.Struct, gc=False):
    code: str | None = None
    message: str | None = None


class _Line(msgspec.Struct, gc=False):
    custom_id: str | None = None
    response: _Response | None = None
    error: _LineError | None = None


_LINE = msgspec.json.Decoder(_Line)
_BODY = msgspec.json.Decoder(_Body | str | None)
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
    for lineno, line in jsonl_lines(bytes(data)):
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


def _content(raw: msgspec.Raw) -> str | None:
    """A message content's text; anything but a string reads as no content."""
    try:
        return _CONTENT.decode(raw)
    except msgspec.ValidationError:
        return None


def read_outputs(paths: Sequence[Path]) -> pl.DataFrame:
    """All lines of these files with the fields we use (``FRAME_SCHEMA``), each checked."""
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
    bodies: list[_Body | None] = []
    texts: list[str | None] = []
    for file, lineno, r in zip(files, numbers, responses):
        body = None
        if r is not None:
            try:
                decoded = _BODY.decode(r.body)
            except msgspec.ValidationError as exc:
                where = f"{file}: line {lineno}"
                raise BatchFileError(f"{where}: {_field_problem(exc)} in response.body") from None
            body = decoded if isinstance(decoded, _Body) else None
        ok = r is not None and r.status_code is not None and 200 <= r.status_code < 300
        bodies.append(body)
        texts.append(None if r is None or ok else bytes(r.body).decode("utf-8", "replace"))
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
            "body_text": texts,
            "content": [_content(m.content) if m is not None else None for m in messages],
            "prompt_tokens": [u.prompt_tokens if u is not None else None for u in usages],
            "cached_tokens": [d.cached_tokens if d is not None else None for d in prompt],
            "completion_tokens": [u.completion_tokens if u is not None else None for u in usages],
            "reasoning_tokens": [d.reasoning_tokens if d is not None else None for d in completion],
        },
        schema=FRAME_SCHEMA,
    ).with_columns(pl.col(c).fill_null(0) for c in USAGE_COLUMNS)
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
    return frame


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


def classify_frame(
    frame: pl.DataFrame, expected: pl.DataFrame
) -> tuple[pl.DataFrame, dict[str, int], list[str]]:
    """Outcome per expected request (``expected``: custom_id, case_id, sent_temperature).

    Ids the submission never sent are reported and ignored; an id that appears
    more than once is reported and its lines are not used (the request runs
    again); an id with no line at all is transient (it runs again). The rest
    follows the reference: an empty content and the HTTP statuses it retries
    are transient, a temperature refusal is resent without it, any other
    failed reply fails the case with the reference's ``RuntimeError`` text.
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

    codes, texts = usable["status_code"].to_list(), usable["body_text"].to_list()
    usable = usable.with_columns(
        pl.Series(
            "refuses_temperature",
            [protocol.rejects_temperature(c, t) for c, t in zip(codes, texts)],
            dtype=pl.Boolean,
        ),
        pl.Series(
            "http_error",
            [None if t is None else protocol.http_error(c, t) for c, t in zip(codes, texts)],
            dtype=pl.String,
        ),
    )
    status = pl.col("status_code")
    empty = pl.col("content").is_null() | (pl.col("content") == "")
    retried = status.is_in(sorted(protocol.RETRIED_STATUSES)) | (status == 0)
    line_transient = pl.col("has_error") & pl.col("error_code").is_in(TRANSIENT_CODES)
    refused = pl.col("refuses_temperature") & pl.col("sent_temperature")
    kind = (
        pl.when(pl.col("file").is_null() | line_transient | status.is_null())
        .then(pl.lit("transient"))
        .when(pl.col("has_error"))
        .then(pl.lit("failed"))
        .when(ok & empty)
        .then(pl.lit("transient"))
        .when(ok)
        .then(pl.lit("ok"))
        .when(retried)
        .then(pl.lit("transient"))
        .when(refused)
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
        .when(line_transient)
        .then(pl.col("error_code"))
        .when(pl.col("has_error"))
        .then(
            pl.format(
                "BatchLineError: {}: {}",
                pl.col("error_code").fill_null("?"),
                pl.col("error_message").fill_null(""),
            ).str.slice(0, protocol.ERROR_TEXT_LIMIT)
        )
        .when(status.is_null())
        .then(pl.lit("no status code"))
        .when(ok & empty)
        .then(pl.lit(protocol.EMPTY_MESSAGE))
        .when(ok)
        .then(pl.lit(None, dtype=pl.String))
        .when(retried | refused)
        .then(pl.col("http_error"))
        .otherwise(
            pl.format("RuntimeError: {}", pl.col("http_error")).str.slice(
                0, protocol.ERROR_TEXT_LIMIT
            )
        )
    )
    joined = expected.join(usable, on="custom_id", how="left")
    outcomes = joined.with_columns(kind.alias("kind"), detail.alias("detail")).select(
        "custom_id",
        "case_id",
        "kind",
        "detail",
        "content",
        pl.col("file").alias("source"),
    )
    return outcomes, usage, anomalies


def classify(frame: pl.DataFrame, expected: dict[str, tuple[str, bool]]) -> Collected:
    """:func:`classify_frame` with Python dicts in and :class:`Outcome` objects out."""
    exp = pl.DataFrame(
        [(cid, case_id, sent) for cid, (case_id, sent) in expected.items()],
        schema={"custom_id": pl.String, "case_id": pl.String, "sent_temperature": pl.Boolean},
        orient="row",
    )
    outcomes, usage, anomalies = classify_frame(frame, exp)
    result = {}
    for row in outcomes.iter_rows(named=True):
        ok = row["kind"] == "ok"
        result[row["custom_id"]] = Outcome(
            row["case_id"],
            row["kind"],
            row["detail"],
            row["content"] if ok else None,
            row["source"] if ok else None,
        )
    return Collected(result, usage, anomalies)
