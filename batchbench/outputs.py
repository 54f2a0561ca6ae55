"""Downloaded batch output and error files → polars frames → one outcome per request.

The raw files stay on disk verbatim; everything here is a pure function of
their bytes and of the submission they answer, so it can be re-run at any time.
Files are read with polars' NDJSON reader against a schema of just the fields
we use; when a file does not fit (a garbage line), it is read again line by
line only to name the culprit. Classification and judge-reply checking are
frame operations; the strict Python parser only sees replies that are not in
the canonical shape, so its verdicts and messages stay the reference's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from . import protocol
from .errors import BatchFileError, JudgeReplyError

TRANSIENT_CODES = ("batch_expired", "batch_cancelled", "request_timeout")
USAGE_COLUMNS = ("prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")

_RESULT_SCHEMA = {
    "custom_id": pl.String,
    "response": pl.Struct(
        {
            "status_code": pl.Int64,
            "body": pl.Struct(
                {
                    "choices": pl.List(pl.Struct({"message": pl.Struct({"content": pl.String})})),
                    "usage": pl.Struct(
                        {
                            "prompt_tokens": pl.Int64,
                            "completion_tokens": pl.Int64,
                            "prompt_tokens_details": pl.Struct({"cached_tokens": pl.Int64}),
                            "completion_tokens_details": pl.Struct({"reasoning_tokens": pl.Int64}),
                        }
                    ),
                    "error": pl.Struct({"message": pl.String}),
                }
            ),
        }
    ),
    "error": pl.Struct({"code": pl.String, "message": pl.String}),
}

FRAME_SCHEMA = {
    "file": pl.String,
    "lineno": pl.Int64,
    "custom_id": pl.String,
    "status_code": pl.Int64,
    "has_response": pl.Boolean,
    "has_error": pl.Boolean,
    "error_code": pl.String,
    "error_message": pl.String,
    "body_message": pl.String,
    "content": pl.String,
    **{c: pl.Int64 for c in USAGE_COLUMNS},
}


class TruncatedFileError(BatchFileError):
    """The file ends in the middle of a line: download it again."""


def _check_tail(path: Path) -> None:
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        if size == 0:
            return
        fh.seek(max(0, size - 1))
        if fh.read(1) == b"\n":
            return
        fh.seek(max(0, size - (1 << 20)))
        last = fh.read().rsplit(b"\n", 1)[-1]
    try:
        json.loads(last)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TruncatedFileError(f"{path}: ends mid-line (truncated download)") from None


def _culprit(path: Path) -> BatchFileError:
    """Read a file that polars refused line by line, to say which line is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return BatchFileError(f"{path}: not UTF-8 text")
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{path}: line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            return BatchFileError(f"{where}: not JSON ({exc.msg})")
        if not isinstance(obj, dict):
            return BatchFileError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        for key, kind in (("response", dict), ("error", dict)):
            if obj.get(key) is not None and not isinstance(obj[key], kind):
                return BatchFileError(f"{where}: '{key}' must be an object or null")
    return BatchFileError(f"{path}: does not have the batch output line format")


def _read_one(path: Path) -> pl.DataFrame:
    _check_tail(path)
    try:
        raw = pl.read_ndjson(path, schema=_RESULT_SCHEMA)
    except Exception:  # polars says little about where: find the line ourselves
        raise _culprit(path) from None
    response = pl.col("response")
    body = response.struct.field("body")
    usage = body.struct.field("usage")
    return raw.select(
        pl.lit(str(path)).alias("file"),
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("lineno"),
        "custom_id",
        response.struct.field("status_code").alias("status_code"),
        response.is_not_null().alias("has_response"),
        pl.col("error").is_not_null().alias("has_error"),
        pl.col("error").struct.field("code").alias("error_code"),
        pl.col("error").struct.field("message").alias("error_message"),
        body.struct.field("error").struct.field("message").alias("body_message"),
        body.struct.field("choices")
        .list.first()
        .struct.field("message")
        .struct.field("content")
        .alias("content"),
        usage.struct.field("prompt_tokens").fill_null(0).alias("prompt_tokens"),
        usage.struct.field("prompt_tokens_details")
        .struct.field("cached_tokens")
        .fill_null(0)
        .alias("cached_tokens"),
        usage.struct.field("completion_tokens").fill_null(0).alias("completion_tokens"),
        usage.struct.field("completion_tokens_details")
        .struct.field("reasoning_tokens")
        .fill_null(0)
        .alias("reasoning_tokens"),
    )


def parse_files(paths: Sequence[Path]) -> pl.DataFrame:
    """All lines of these files with the fields we use, each line checked."""
    frames = [_read_one(Path(p)) for p in paths]
    frame = pl.concat(frames) if frames else pl.DataFrame(schema=FRAME_SCHEMA)
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
    empty = pl.col("content").is_null() | (pl.col("content").str.strip_chars() == "")
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
        "content",
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
        content = row["content"] if row["kind"] == "ok" else None
        source = row["source"] if row["kind"] == "ok" else None
        result[row["custom_id"]] = Outcome(
            row["case_id"], row["kind"], row["detail"], content, source
        )
    return Collected(result, usage, anomalies)


# ---------------------------------------------------------------------------
# Judge replies → decisions, checked as frames.

# The canonical reply: exactly {"decisions": [{"item_id": "...", "matched": true|false}, ...]}
# with plain ids. Replies in this shape are read with regexes; any other reply goes
# to the strict Python parser, which accepts or rejects it with the reference's message.
_OBJ = r'\{\s*"item_id"\s*:\s*"[^"\\]*"\s*,\s*"matched"\s*:\s*(?:true|false)\s*\}'
CANONICAL_REPLY = rf'^\s*\{{\s*"decisions"\s*:\s*\[\s*(?:{_OBJ}(?:\s*,\s*{_OBJ})*)?\s*\]\s*\}}\s*$'
_ID_KEY = r'"item_id"\s*:\s*"[^"\\]*"'
_ID_PREFIX = r'^"item_id"\s*:\s*"'
_MATCHED = r"(?:true|false)\s*\}"
DECISION_SCHEMA = {"case_id": pl.String, "item_id": pl.String, "matched": pl.Boolean}


def judge_decisions(
    replies: pl.DataFrame, rubric: pl.DataFrame
) -> tuple[pl.DataFrame, dict[str, str]]:
    """``(decided, invalid)`` from judge replies (``case_id``, ``content``).

    ``decided`` is the rubric rows of every valid reply's case, in rubric order,
    each with its ``matched`` decision (ready for :func:`scoring.score_joined`);
    ``invalid`` maps each rejected case to what was wrong (no partial credit).
    A canonical reply is valid when its decisions, its distinct ids and its ids
    found in the case's rubric all number exactly the rubric's items.
    """
    content = pl.col("content")
    # In a canonical reply every object is "item_id" then "matched" then "}", and
    # ids hold no quote or backslash: one id match and one true|false-before-}
    # match per object. An id that itself contains "true}" adds a match, so the
    # counts differ and the reply is left to the strict parser.
    flagged = (
        replies.with_columns(
            content.fill_null("").str.contains(CANONICAL_REPLY).alias("canonical"),
        )
        .with_columns(
            pl.when("canonical").then(content.str.extract_all(_ID_KEY)).alias("ids"),
            pl.when("canonical").then(content.str.extract_all(_MATCHED)).alias("flags"),
        )
        .with_columns(
            (pl.col("canonical") & (pl.col("ids").list.len() == pl.col("flags").list.len()))
            .fill_null(False)
            .alias("canonical")
        )
    )
    canonical = flagged.filter("canonical")
    decoded = (
        canonical.select("case_id", "ids", "flags")
        .explode("ids", "flags")
        .filter(pl.col("ids").is_not_null())
        .select(
            "case_id",
            pl.col("ids").str.replace(_ID_PREFIX, "").str.head(-1).alias("item_id"),
            pl.col("flags").str.starts_with("t").alias("matched"),
        )
    )
    items = rubric.join(replies.select("case_id"), on="case_id", how="semi")
    joined = items.join(decoded, on=["case_id", "item_id"], how="inner", maintain_order="left")
    counts = (
        canonical.select("case_id")
        .join(items.group_by("case_id").len("n_items"), on="case_id", how="left")
        .join(
            decoded.group_by("case_id").agg(
                pl.len().alias("n_decided"), pl.col("item_id").n_unique().alias("n_ids")
            ),
            on="case_id",
            how="left",
        )
        .join(joined.group_by("case_id").len("n_found"), on="case_id", how="left")
        .fill_null(0)
    )
    n = pl.col("n_items")
    exact = (pl.col("n_decided") == n) & (pl.col("n_ids") == n) & (pl.col("n_found") == n)
    good_ids = counts.filter(exact).select("case_id")
    # Everything not certified here goes through the reference-strict parser.
    recheck = pl.concat(
        [
            flagged.filter(~pl.col("canonical")).select("case_id", "content"),
            canonical.join(good_ids, on="case_id", how="anti").select("case_id", "content"),
        ]
    )
    invalid: dict[str, str] = {}
    rescued: list[tuple[str, str, bool]] = []
    if recheck.height:
        ids = dict(
            items.join(recheck.select("case_id"), on="case_id", how="semi")
            .group_by("case_id", maintain_order=True)
            .agg("item_id")
            .iter_rows()
        )
        for case_id, content in recheck.iter_rows():
            try:
                found = protocol.parse_judge_reply(content, ids.get(case_id, []))
            except JudgeReplyError as exc:
                invalid[case_id] = str(exc)
                continue
            rescued.extend((case_id, item, matched) for item, matched in found.items())
    decided = joined.join(good_ids, on="case_id", how="semi", maintain_order="left")
    if rescued:
        extra = pl.DataFrame(rescued, schema=DECISION_SCHEMA, orient="row")
        more = items.join(extra, on=["case_id", "item_id"], how="inner", maintain_order="left")
        decided = pl.concat([decided, more])
    return decided, invalid


def decisions_lists(decided: pl.DataFrame) -> pl.DataFrame:
    """Per case, the row's ``decisions`` list: ``{item_id, points, matched}`` in rubric order."""
    return decided.group_by("case_id", maintain_order=True).agg(
        pl.struct("item_id", "points", "matched").alias("decisions")
    )
