"""Downloaded result files → one frame, whatever service wrote them.

Every provider's reader (:meth:`Wire.read_results`) turns its service's result
lines into rows of :data:`FRAME_SCHEMA`, so what a line means for its case is
decided once, in :mod:`batchbench.engine.collection`. The columns:

- ``file``, ``lineno``, ``row``: where the line is;
- ``custom_id``: the request it answers;
- ``status_code``: the HTTP status of the reply (null when the line carries none);
- ``has_response`` / ``has_error``: a reply, or a failure of the line itself
  (``error_code``/``error_message``; services' cancelled and expired lines read
  as ``batch_cancelled``/``batch_expired``);
- ``body_text``: a failed reply's body as text (error rows and the temperature
  rule read it so);
- ``content``: the answer text by the provider's reading rule (null: none);
- ``empty_error``: what the reference calls an empty answer from this service;
- usage: tokens the line was billed for;
- ``served_model`` / ``served_version``: what the reply says served it (its ``model``
  or Gemini's ``modelVersion``; OpenAI's ``system_fingerprint``), null where the
  service says nothing (#66.1: provenance beside the model asked for).
"""

from __future__ import annotations

import codecs
import json
import mmap
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import msgspec
import numpy as np
import polars as pl

from .._io import jsonl_lines
from ..errors import BatchFileError, TruncatedFileError

_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins pairs: any left is lone
# Input tokens include those read from cache (``cached_tokens``) and those written to it
# (Anthropic's cache writes, by their lifetime: billed above the input price).
USAGE_COLUMNS = (
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
)

FRAME_SCHEMA: dict[str, Any] = {
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
    "empty_error": pl.String,
    **{c: pl.Int64 for c in USAGE_COLUMNS},
    "served_model": pl.String,
    "served_version": pl.String,
    "service_tier": pl.String,  # the tier the reply says served it (batch, flex, default…)
}
# Columns a reader may leave out (a line that says nothing of them): read as nulls.
OPTIONAL_COLUMNS = (
    "served_model",
    "served_version",
    "service_tier",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
)


def check_tail(data: bytes | mmap.mmap, path: Path) -> None:
    """A file that ends in the middle of a line was cut off: download it again. One that
    is not JSON lines at all (an HTML page a proxy or the service answered with) is not
    a cut file: said as what it is."""
    head = bytes(data[:256]).lstrip()
    if head and head[:1] != b"{":
        shown = head[:60].decode("utf-8", "replace").replace("\n", " ")
        page = head[:15].lower().startswith((b"<!doctype html", b"<html"))
        what = " an HTML page (a proxy's or the service's error page)," if page else ""
        raise BatchFileError(
            f"{path}: not JSON lines — it starts with {shown!r}:{what} not the batch's results"
        )
    if not len(data) or data[-1:] == b"\n":
        return
    last = data[data.rfind(b"\n") + 1 :]
    try:
        json.loads(last)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TruncatedFileError(f"{path}: ends mid-line (truncated download)") from None


def check_utf8(data: bytes | mmap.mmap, path: Path, chunk: int = 1 << 20) -> None:
    """Every byte of a result file is UTF-8 text (JSON's encoding), checked a chunk at a
    time: a line that is not is named by its number, before any of it is read as text."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for start in range(0, len(data), chunk):
            piece = data[start : start + chunk]
            if piece.isascii() and not decoder.getstate()[0]:
                continue  # ASCII is UTF-8, and no character was left half read
            decoder.decode(piece, final=start + chunk >= len(data))
    except UnicodeDecodeError:
        for lineno, line in enumerate(bytes(data).split(b"\n"), 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                raise BatchFileError(f"{path}: line {lineno}: not UTF-8 text") from None


def non_utf8_result(data: bytes) -> int | None:
    """The place (from 1) of the first of a JSON document's ``results`` that holds bytes
    that are not UTF-8 (results that come in one document, a page or a batch object, are
    named by their place, as lines are by their number); None when none does or the
    document is not JSON."""
    try:
        doc = json.loads(data.decode("utf-8", "surrogateescape"))
    except (json.JSONDecodeError, RecursionError):
        return None
    results = doc.get("results") if isinstance(doc, dict) else None
    for n, r in enumerate(results if isinstance(results, list) else [], 1):
        try:
            json.dumps(r, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            return n
    return None


def map_file(path: Path) -> bytes | mmap.mmap:
    """The file's bytes without copying them (an empty file cannot be mapped). A kept
    raw file that cannot be read is named as such."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return b""
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise BatchFileError(f"cannot read {path}: {exc.strerror or exc}") from None


def line_problem(line: bytes) -> str:
    """Why a line that does not decode is not a result line."""
    try:
        json.loads(line)
        return "not a JSON object"
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})"
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except (ValueError, RecursionError):
        return "unreadable JSON"


T = TypeVar("T")


class RequestId(msgspec.Struct, gc=False):
    """A result line's request id alone (OpenAI's and Anthropic's ``custom_id``, Gemini's
    ``key``): what tells whose line one that does not fit is."""

    custom_id: str | None = None
    key: str | None = None


IDS = msgspec.json.Decoder(RequestId)


class Unfit(msgspec.Struct, frozen=True):
    """A result line that is JSON but not in the service's documented form (a usage
    counter that is text, say): that line's failure, not the file's (:func:`unfit_rows`)."""

    custom_id: str | None
    problem: str


def decode_lines(
    data: bytes | mmap.mmap,
    path: Path,
    decoder: msgspec.json.Decoder[T],
    ids: msgspec.json.Decoder[Any] | None = None,
) -> tuple[list[T | Unfit], list[int]]:
    """Every line of a result file decoded against a service's typed schema, and its line
    number; a bad line is named with what is wrong. The whole file is decoded at once;
    only when that fails (blank lines, two values on a line, a bad line) is it read
    again line by line, to say which. With ``ids`` (a decoder of the line's request id
    alone), a line of JSON whose fields do not fit is an :class:`Unfit`, that line's
    failure, when its request can be told."""
    whole: list[T] | None
    try:
        whole = decoder.decode_lines(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        whole = None
    newlines = np.count_nonzero(np.frombuffer(data, np.uint8) == 10) if len(data) else 0
    if whole is not None and len(whole) == newlines + (len(data) > 0 and data[-1:] != b"\n"):
        return cast("list[T | Unfit]", whole), list(range(1, len(whole) + 1))
    lines: list[T | Unfit] = []
    numbers = []
    for lineno, line in jsonl_lines(bytes(data)):
        where = f"{path}: line {lineno}"
        try:
            lines.append(_decode_line(line, decoder))
        except msgspec.ValidationError as exc:
            request = _request_id(line, ids)
            if request is None:
                raise BatchFileError(f"{where}: {field_problem(exc)}") from None
            lines.append(Unfit(request, field_problem(exc)))
        except msgspec.DecodeError:
            raise BatchFileError(f"{where}: {line_problem(line)}") from None
        numbers.append(lineno)
    return lines, numbers


def read_files(paths: Sequence[Path], decoder: msgspec.json.Decoder[T]) -> list[tuple[str, int, T]]:
    """Every line of these result files, each checked and typed: ``(file, line number,
    line)``. A file cut off mid-line is a :class:`TruncatedFileError` (download again)."""
    return read_fitting(paths, decoder, None)[0]


def read_fitting(
    paths: Sequence[Path], decoder: msgspec.json.Decoder[T], ids: msgspec.json.Decoder[Any] | None
) -> tuple[list[tuple[str, int, T]], list[tuple[str, int, Unfit]]]:
    """As :func:`read_files`, the lines that do not fit the service's form (their request
    told by ``ids``) apart: each that line's failure (:func:`with_unfit`)."""
    out: list[tuple[str, int, T]] = []
    unfit: list[tuple[str, int, Unfit]] = []
    for p in paths:
        path = Path(p)
        data = map_file(path)
        check_tail(data, path)
        check_utf8(data, path)
        lines, numbers = decode_lines(data, path, decoder, ids)
        for n, line in zip(numbers, lines):
            if isinstance(line, Unfit):
                unfit.append((str(path), n, line))
            else:
                out.append((str(path), n, line))
    return out, unfit


def _request_id(line: bytes, ids: msgspec.json.Decoder[Any] | None) -> str | None:
    """The request id of a line that does not fit, read alone (None: it cannot be told)."""
    if ids is None:
        return None
    try:
        found = ids.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    value = getattr(found, "custom_id", None) or getattr(found, "key", None)
    return value if isinstance(value, str) else None


def with_unfit(frame: pl.DataFrame, unfit: Sequence[tuple[str, int, Unfit]]) -> pl.DataFrame:
    """The frame with a row for each line that did not fit: a 500 whose body says what did
    not fit — retried as the service's own passing failure is, never scored, and never
    the whole file's stop."""
    if not unfit:
        return frame
    rows = build(
        {
            "file": [f for f, _, _ in unfit],
            "lineno": [n for _, n, _ in unfit],
            "row": [0] * len(unfit),
            "custom_id": [u.custom_id for _, _, u in unfit],
            "status_code": [500] * len(unfit),
            "has_response": [True] * len(unfit),
            "has_error": [False] * len(unfit),
            "error_code": [None] * len(unfit),
            "error_message": [None] * len(unfit),
            "body_text": [
                f"{f}: line {n}: not in the service's documented form ({u.problem})"
                for f, n, u in unfit
            ],
            "content": [None] * len(unfit),
            "empty_error": [None] * len(unfit),
            **{c: [None] * len(unfit) for c in USAGE_COLUMNS},
        }
    )
    joined = pl.concat([frame, rows])
    return joined.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("row"))


def _decode_line(line: bytes, decoder: msgspec.json.Decoder[T]) -> T:
    """One line; one msgspec cannot take (a lone surrogate in a reply) is read by the
    json module and its text cleaned (:func:`clean`) before it is typed."""
    try:
        return decoder.decode(line)
    except msgspec.DecodeError:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            raise msgspec.DecodeError("not JSON") from None
        if not isinstance(value, dict):
            raise
        return decoder.decode(json.dumps(clean(value), ensure_ascii=False).encode())


def field_problem(exc: msgspec.ValidationError) -> str:
    """A schema mismatch in the words of the file: which field, what was expected."""
    text = str(exc)
    if text.startswith("Expected `object`, got") and "- at" not in text:
        return f"expected a JSON object, got {text.split('got `', 1)[1].rstrip('`')}"
    return text.replace("`$.", "`").replace(" - at ", " at ")


def clean(value: Any) -> Any:
    """A decoded JSON value with every lone surrogate (valid JSON, ``\\ud800``, but not
    text: no UTF-8 holds it) read as U+FFFD, so a reply carrying one is an answer like
    any other; the raw file keeps the original."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    return value


def from_rows(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """The frame of rows, one a line, each a mapping of the frame's columns (a column a
    row says nothing of — a cache write on a service that has none — is null: 0 for
    usage). Every reader of a service's lines one at a time builds its frame here."""
    columns = {k: [row.get(k) for row in rows] for k in FRAME_SCHEMA if k != "row"}
    return build({**columns, "row": list(range(len(rows)))})


def build(columns: Mapping[str, Sequence[Any] | str]) -> pl.DataFrame:
    """The frame of these columns (a ``str`` stands for every line; usage nulls read
    0), every line checked to name a request and to carry a reply or a line error."""
    height = next((len(v) for v in columns.values() if not isinstance(v, str)), 0)
    columns = {**{k: [None] * height for k in OPTIONAL_COLUMNS}, **columns}
    lists = {k: v for k, v in columns.items() if not isinstance(v, str)}
    frame = (
        pl.DataFrame(lists, schema={k: FRAME_SCHEMA[k] for k in lists})
        .with_columns(
            pl.lit(v, dtype=pl.String).alias(k) for k, v in columns.items() if isinstance(v, str)
        )
        .with_columns(pl.col(c).fill_null(0) for c in USAGE_COLUMNS)
        .select(list(FRAME_SCHEMA))
    )
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


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=FRAME_SCHEMA)


def served_counts(frame: pl.DataFrame) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """How many good replies each served model, each fingerprint (#66.1) and each service
    tier the replies name (#67.2) answered."""
    ok = frame.filter(~pl.col("has_error") & pl.col("status_code").is_between(200, 299))

    def counts(column: str) -> dict[str, int]:
        values = ok.get_column(column).drop_nulls().to_list()
        return dict(sorted(Counter(values).items()))

    return counts("served_model"), counts("served_version"), counts("service_tier")
