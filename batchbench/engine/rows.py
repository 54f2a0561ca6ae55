"""The reference's rows of a run's cases, built from the outcomes that end them.

An error row per failed request; a scored row per valid judge reply, scored from
the decisions joined to the rubric. Keys and timestamps as the reference writes
them (``../shared/spec/reference-behaviour.md`` §5). With ``--judge-passes K``
every pass's verdicts become a pass row of ``judge_passes.jsonl`` too (read back by
:mod:`batchbench.scores.noise`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypedDict

import polars as pl

from .._io import append_bytes
from ..bench import protocol
from ..bench.dataset import Case
from ..bench.results import dump_row
from ..bench.scoring import score_joined, score_records
from ..errors import BatchFileError, InvariantError
from . import lines
from .cases import GIVEN
from .runconfig import RunConfig
from .rundir import Run
from .state import RunState
from .submission import Submission

if TYPE_CHECKING:
    from ..bench.decisions import Judged
    from ..providers.base import Wire
    from .collection import Outcome


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


@functools.lru_cache(maxsize=4096)
def _span(started: float, finished: float) -> tuple[str, str, str]:
    """A scored row's ``started_at``, ``finished_at`` and ``elapsed_seconds``, written
    (timestamps as ``datetime.isoformat()`` writes them; the cases a collection ends
    share their end, and mostly their start: each worked out once)."""
    start, end = _utc(started), _utc(finished)
    return (
        lines.value(start.isoformat()),
        lines.value(end.isoformat()),
        lines.value((end - start).total_seconds()),
    )


def scored_template(config: RunConfig, effort: str | None) -> lines.Template:
    """The lines of a run's scored rows: what every one of them says written once."""
    shared = {
        "protocol_version": protocol.PROTOCOL_VERSION,
        "answer_model": config.answer_model,
        "judge_model": config.judge_model,
        "answer_reasoning_effort": effort,
    }
    return lines.Template(ScoredRow.__annotations__, shared, lists=("decisions",))


# The values each scored line takes, in the order its template writes them (checked).
_HEAD = (
    *("case_id", "benchmark", "grading_method", "answer_temperature", "judge_temperature"),
    *("started_at", "finished_at", "elapsed_seconds", "answer"),
)
_TAIL = ("score", "score_components")
# A request's temperature as its row says it: null when it was not sent.
_ANSWER_TEMPERATURE = (lines.value(None), lines.value(protocol.ANSWER_TEMPERATURE))
_JUDGE_TEMPERATURE = (lines.value(None), lines.value(protocol.JUDGE_TEMPERATURE))


def rows_for(
    sub: Submission,
    outcomes: Mapping[str, Outcome],
    judged: Judged | None,
    cases: Mapping[str, Case],
    config: RunConfig,
    effort: str | None,
    state: RunState,
    answer_text: Callable[[str], str],
    now: float,
    errors: Callable[[Case, RunConfig, float, str], Mapping[str, Any]] = error_row,
) -> list[tuple[str, str]]:
    """The ``(case_id, line)`` of each case these outcomes end: an error row per failed
    request, a scored row per valid judge reply (scored from the decisions joined to the
    rubric). ``effort`` is the reasoning effort as the answer model's service was sent it;
    ``errors`` writes an error row (the benchmark's shape)."""
    out = [
        (o.case_id, dump_row(errors(cases[o.case_id], config, now, o.detail or "")))
        for o in outcomes.values()
        if o.kind in ("failed", "unknown")
    ]
    scored = [o.case_id for o in outcomes.values() if o.kind == "ok" and sub.stage == "judges"]
    if not scored or judged is None:
        return out
    chosen = _decided(judged, scored)
    sent = {line.case_id: line.sent_temperature for line in sub.lines}
    head, tail = scored_template(config, effort).split("decisions")
    if (head.keys, tail.keys) != (_HEAD, _TAIL):
        raise InvariantError(f"a scored row's keys are not {_HEAD + _TAIL}")
    value = lines.value
    with ThreadPoolExecutor(1) as pool:
        # The decisions' text is polars' work, which runs beside this thread's (the GIL
        # released): the rest of each line is written meanwhile.
        decisions = pool.submit(lines.decisions, chosen)
        parts = []
        for case_id, score, components in lines.score_texts(score_joined(chosen)):
            case, case_state = cases[case_id], state.cases[case_id]
            before = head.fill(
                (
                    value(case_id),
                    value(case["benchmark"]),
                    value(case["grading_method"]),
                    _ANSWER_TEMPERATURE[bool(case_state.answers.used_temperature)],
                    _JUDGE_TEMPERATURE[sent[case_id]],
                    *_span(case_state.started or now, now),
                    value(answer_text(case_id)),
                )
            )
            parts.append((case_id, before, tail.fill((score, components))))
        decided = decisions.result()
    for case_id, before, after in parts:
        out.append((case_id, "".join((before, decided.pop(case_id), after))))
    return out


def _decided(judged: Judged, scored: Sequence[str]) -> pl.DataFrame:
    """The decided rubric rows of the ``scored`` cases (a copy only when some are not)."""
    if len(scored) == len(judged.verdicts) and judged.verdicts.keys() >= set(scored):
        return judged.decided
    return judged.decided.filter(pl.col("case_id").is_in(scored))


def pass_rows(
    judge_pass: int,
    outcomes: Mapping[str, Outcome],
    judged: Judged | None,
    cases: Mapping[str, Case],
) -> list[dict[str, Any]]:
    """One row per case this pass judged validly: its decisions (rubric order) and score."""
    scored = [o.case_id for o in outcomes.values() if o.kind == "ok"]
    if not scored or judged is None:
        return []
    chosen = _decided(judged, scored)
    rows = []
    for case_id, (score, _) in score_records(score_joined(chosen)).items():
        decisions = [
            {"item_id": it["item_id"], "points": it["points"], "matched": matched}
            for it, matched in zip(cases[case_id]["rubric_items"], judged.verdicts[case_id])
        ]
        rows.append(
            {"case_id": case_id, "pass": judge_pass, "decisions": decisions, "score": score}
        )
    return rows


def append_pass_rows(run: Run, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
        append_bytes(run.passes_path, data, "rows_half_written")


def answer_usage(run: Run) -> dict[str, dict[str, int]]:
    """Each answered case's tokens, from the raw file its answer came from (the rows,
    the reference's format, carry none)."""
    from ..providers.frames import USAGE_COLUMNS

    return {
        case: {k: int(line[k] or 0) for k in USAGE_COLUMNS}
        for case, line in answer_columns(run, USAGE_COLUMNS).items()
    }


def answer_columns(run: Run, columns: Sequence[str]) -> dict[str, dict[str, Any]]:
    """These columns of each answered case's line, read from the raw file its answer
    came from (its tokens, the model the service says served it)."""
    from ..providers import route, wire

    config = run.load_config()
    state = run.state(config.case_ids)
    recorded = state.services.get("answers")
    answers_wire = wire(recorded[0] if recorded else route(config.answer_model))
    wanted: dict[str, dict[str, str]] = {}  # raw file → custom id → case
    for case_id, case in state.cases.items():
        st = case.answers
        if st.status == "ok" and st.source and st.custom_id and st.source != GIVEN:
            wanted.setdefault(st.source, {})[st.custom_id] = case_id
    out: dict[str, dict[str, Any]] = {}
    for source, ids in wanted.items():
        frame = run.read_results(answers_wire, [source])
        frame = frame.filter(pl.col("custom_id").is_in(list(ids)))
        for line in frame.select("custom_id", *columns).iter_rows(named=True):
            out[ids[line["custom_id"]]] = line
    return out


class Answers:
    """Each case's answer text, read from the raw file it came from (each file once)."""

    def __init__(
        self,
        run: Run,
        wire: Wire,
        state: Callable[[], RunState],
        given: Mapping[str, str] | None = None,
    ) -> None:
        self.run, self.wire, self.state = run, wire, state
        self.given = given or {}  # the dataset's own answers (--physician-completions)
        self._files: dict[str, dict[str, str]] = {}  # raw file → custom id → content

    def __call__(self, case_id: str) -> str:
        st = self.state().cases[case_id].answers
        if st.source is None or st.custom_id is None:
            raise BatchFileError(f"no answer recorded for case {case_id}")
        if st.source == GIVEN:
            return self.given[case_id]
        if st.source not in self._files:
            frame = self.run.read_results(self.wire, [st.source])
            self._files[st.source] = dict(zip(frame["custom_id"], frame["content"]))
        return self._files[st.source][st.custom_id]
