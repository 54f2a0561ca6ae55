"""Reference-format result rows: building, appending, ordering, reading and naming them."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import polars as pl

from . import protocol
from ._io import append_bytes, atomic_write_bytes, jsonl_lines
from .dataset import Case
from .errors import ResultsError
from .rundir import RunConfig
from .runs import RunState, Submission
from .scoring import score_joined, score_records

if TYPE_CHECKING:
    from .collection import Outcome
    from .decisions import Judged


def summary_path(results: str | Path) -> Path:
    """``x.jsonl`` → ``x.summary.json``, the name the reference gives it."""
    results = Path(results)
    if results.suffix == ".jsonl":
        return results.with_suffix(".summary.json")
    return results.with_name(results.name + ".summary.json")


def _check_row(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise ResultsError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if not isinstance(row.get("case_id"), str) or not row["case_id"]:
        raise ResultsError(f"{where}: field 'case_id' must be a non-empty string")
    if "error" in row:
        if not isinstance(row["error"], str):
            raise ResultsError(f"{where}: field 'error' must be a string")
        return row
    if "score" not in row:
        raise ResultsError(f"{where}: row has neither 'score' nor 'error'")
    score = row["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or math.isnan(score):
        raise ResultsError(f"{where}: field 'score' must be a number, got {score!r}")
    if not isinstance(row.get("benchmark"), str):
        raise ResultsError(f"{where}: field 'benchmark' must be a string")
    return row


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a results file; a malformed line is an error naming its number."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ResultsError(f"{path}: file not found") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    rows: list[dict[str, Any]] = []
    for lineno, line in jsonl_lines(data):
        where = f"{path}: line {lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{where}: invalid JSON ({exc.msg})") from None
        except UnicodeDecodeError:
            raise ResultsError(f"{where}: not UTF-8 text") from None
        rows.append(_check_row(row, where))
    return rows


def dump_row(row: Mapping[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False)


def rows_in_registry_order(path: Path, case_ids: Sequence[str]) -> list[dict[str, Any]]:
    """A run's rows, put in registry order on disk (stably, atomically) and returned.

    Rows arrive in whatever order batches finish, but the bootstrap draws cases
    by position, so the order changes the intervals. The reference runner (one
    worker) writes rows in registry order; so do we, which also makes an
    interrupted run's numbers equal an uninterrupted one's. A redone case's rows
    keep their order among themselves: its last row is the one that counts.
    """
    rows = read_rows(path) if path.exists() else []
    order = {cid: i for i, cid in enumerate(case_ids)}
    ordered = sorted(rows, key=lambda r: order.get(r["case_id"], len(order)))
    if ordered != rows:
        atomic_write_bytes(path, "".join(dump_row(r) + "\n" for r in ordered).encode("utf-8"))
    return ordered


def row_counts(path: Path) -> Counter[str]:
    """Rows per case already in a run's results file."""
    return Counter(r["case_id"] for r in read_rows(path)) if path.exists() else Counter()


def append_rows(path: Path, rows: Sequence[Mapping[str, Any]], case_ids: Sequence[str]) -> None:
    """Append rows (in registry order among themselves), fsynced; a crash tears at most
    the last line, which :meth:`Run.repair` drops before the rows are written again."""
    order = {cid: i for i, cid in enumerate(case_ids)}
    rows = sorted(rows, key=lambda r: order[r["case_id"]])
    data = "".join(dump_row(r) + "\n" for r in rows).encode("utf-8")
    append_bytes(path, data, "rows_half_written")


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=timezone.utc)


class Decision(TypedDict):
    item_id: str
    points: float
    matched: bool


class RowHead(TypedDict):
    """The keys every reference row starts with, in its order."""

    protocol_version: str
    case_id: str
    benchmark: str
    grading_method: str
    answer_model: str
    judge_model: str


class ErrorRow(RowHead):
    """The reference's row for a case that ended in an error (keys in its order)."""

    finished_at: str
    error: str


class ScoredRow(RowHead):
    """The reference's row for a scored case (keys in its order)."""

    answer_reasoning_effort: str | None
    answer_temperature: float | None
    judge_temperature: float | None
    started_at: str
    finished_at: str
    elapsed_seconds: float
    answer: str
    decisions: list[Decision]
    score: float
    score_components: dict[str, Any]


Row = ErrorRow | ScoredRow


def base_row(case: Case, config: RunConfig) -> RowHead:
    return RowHead(
        protocol_version=protocol.PROTOCOL_VERSION,
        case_id=case["case_id"],
        benchmark=case["benchmark"],
        grading_method=case["grading_method"],
        answer_model=config.answer_model,
        judge_model=config.judge_model,
    )


def error_row(case: Case, config: RunConfig, finished: float, error: str) -> ErrorRow:
    """The reference's error row: when the case ended and its ``Type: message``."""
    return ErrorRow(
        **base_row(case, config),
        finished_at=_utc(finished).isoformat(),
        error=error[: protocol.ERROR_TEXT_LIMIT],
    )


def score_row(
    case: Case,
    config: RunConfig,
    *,
    started: float,
    finished: float,
    answer: str,
    matched: dict[str, bool],
    score: float,
    components: dict[str, Any],
    answer_temperature: bool,
    judge_temperature: bool,
) -> ScoredRow:
    """The reference's successful row; timestamps as ``datetime.isoformat()`` writes them."""
    start, end = _utc(started), _utc(finished)
    return ScoredRow(
        **base_row(case, config),
        answer_reasoning_effort=config.reasoning_effort,
        answer_temperature=protocol.ANSWER_TEMPERATURE if answer_temperature else None,
        judge_temperature=protocol.JUDGE_TEMPERATURE if judge_temperature else None,
        started_at=start.isoformat(),
        finished_at=end.isoformat(),
        elapsed_seconds=(end - start).total_seconds(),
        answer=answer,
        decisions=[
            Decision(item_id=it["item_id"], points=it["points"], matched=matched[it["item_id"]])
            for it in case["rubric_items"]
        ],
        score=score,
        score_components=components,
    )


def rows_for(
    sub: Submission,
    outcomes: Mapping[str, Outcome],
    judged: Judged | None,
    cases: Mapping[str, Case],
    config: RunConfig,
    state: RunState,
    answer_text: Callable[[str], str],
    now: float,
) -> list[Row]:
    """The rows of the cases these outcomes end: an error row per failed request, a
    scored row per valid judge reply (scored from the decisions joined to the rubric)."""
    rows: list[Row] = [
        error_row(cases[o.case_id], config, now, o.detail or "")
        for o in outcomes.values()
        if o.kind == "failed"
    ]
    scored = [o.case_id for o in outcomes.values() if o.kind == "ok" and sub.stage == "judges"]
    if not scored or judged is None:
        return rows
    chosen = judged.decided.filter(pl.col("case_id").is_in(scored))
    sent = {line.case_id: line.sent_temperature for line in sub.lines}
    for case_id, (score, components) in score_records(score_joined(chosen)).items():
        case_state = state.cases[case_id]
        rows.append(
            score_row(
                cases[case_id],
                config,
                started=case_state.started or now,
                finished=now,
                answer=answer_text(case_id),
                matched=judged.verdicts[case_id],
                score=score,
                components=components,
                answer_temperature=bool(case_state.answers.used_temperature),
                judge_temperature=sent[case_id],
            )
        )
    return rows
