"""A downloaded batch → one outcome per request: pure functions, no I/O.

Given a submission (from the journal's fold), the frame of its result files, the cases'
states and the run's limits, this decides what each request came to — ok, retried (and
why), resent without temperature, judged again, or failed with the reference's error
text — and, for judges, the verdicts of every valid reply (joined to the rubric, or a
part of it). The protocol's rules are :mod:`batchbench.bench`'s; this module applies
them to frames. The pipeline journals the result and writes the rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import polars as pl

from ..bench import protocol
from ..bench.decisions import Judged, judge_decisions, part_verdicts
from ..errors import BatchFileError
from ..kinds import OutcomeKind
from ..providers.base import BatchFailure, LineRules, Wire
from ..providers.frames import USAGE_COLUMNS, served_counts
from .event_records import CaseOutcome
from .events import Collected
from .state import RunState
from .submission import Submission

# Lines lost with their batch (expired, cancelled): sent again, no --max-retries spent.
LOST_CODES = ("batch_expired", "batch_cancelled")
# A line error that is the request's own but passing: it runs again, spending a retry.
TRANSIENT_CODES = ("request_timeout",)
# How often one request may be lost by the service before it fails (per max_retries).
LOSSES_PER_RETRY = 3


@dataclass(slots=True)
class Outcome:
    """What one request came to (:data:`~batchbench.kinds.OutcomeKind`)."""

    case_id: str
    kind: OutcomeKind
    detail: str | None = None
    content: str | None = None  # a judge reply's text, for ok lines, until it is parsed
    source: str | None = None  # the ref (file id) of the kept file the good line came from
    adjust: dict[str, Any] | None = None  # ``retry``: the wire's fallback to send it with


@dataclass
class RetryLimits:
    max_retries: int  # attempts per request for retried replies (the reference's)
    max_attempts: int  # judge replies per answer before an invalid one is an error
    hold_seconds: float  # wait after token_limit_exceeded


@dataclass
class Collection:
    """Everything one collection decides, ready to journal (:meth:`event`)."""

    outcomes: dict[str, Outcome]  # by custom id
    judged: Judged | None = None  # what the judge replies said (judges only)
    usage: dict[str, int] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)
    free_retry: bool = False
    cap: int | None = None
    hold_until: float | None = None
    notice: str | None = None  # what the user should be told
    served: dict[str, int] = field(default_factory=dict)  # served model → good replies
    fingerprints: dict[str, int] = field(default_factory=dict)
    tiers: dict[str, int] = field(default_factory=dict)  # service tier → good replies
    stop: str | None = None  # why the run cannot go on as asked (BatchFailure.stop)
    graded: dict[str, str | None] | None = None  # cases whose last part this ended (per item)

    def event(self, sub: Submission) -> Collected:
        by_id = sub.packed  # by case; a packed submission's by request id (a case a pass)
        return Collected(
            graded=self.graded,
            sub=sub.id,
            outcomes={
                cid if by_id else o.case_id: CaseOutcome(o.kind, o.detail, o.source, cid, o.adjust)
                for cid, o in self.outcomes.items()
            },
            usage=self.usage,
            anomalies=self.anomalies,
            free_retry=self.free_retry,
            cap=self.cap,
            hold_until=self.hold_until,
            served=self.served,
            fingerprints=self.fingerprints,
            tiers=self.tiers,
        )


class Sent(NamedTuple):
    """A request the submission sent: its case, its wire's note, the fallbacks it carried."""

    case_id: str
    note: dict[str, Any] | None
    adjust: dict[str, Any]


def expected_lines(sub: Submission, state: RunState | None = None) -> dict[str, Sent]:
    """``custom_id → Sent`` for every request the submission sent."""
    out = {}
    for line in sub.lines:
        st = state.cases[line.case_id].stage(sub.stage, sub.pass_of(line)) if state else None
        adjust = st.adjust if st is not None else {}
        out[line.id(sub.stage)] = Sent(line.case_id, line.note(), adjust)
    return out


def check_download(frame: pl.DataFrame, sub: Submission, earlier: set[str], where: str) -> None:
    """A downloaded file may only name requests the submission sent, each once."""
    expected = expected_lines(sub)
    seen: set[str] = set()
    for lineno, cid in zip(frame["lineno"].to_list(), frame["custom_id"].to_list()):
        if cid not in expected:
            raise BatchFileError(f"{where}: line {lineno}: unknown custom_id {cid!r}")
        if cid in seen or cid in earlier:
            raise BatchFileError(f"{where}: line {lineno}: duplicate custom_id {cid!r}")
        seen.add(cid)


def classify(
    frame: pl.DataFrame,
    expected: Mapping[str, Sent],
    wire: Wire,
    expired: bool = False,
    replies: bool = False,
) -> tuple[dict[str, Outcome], dict[str, int], list[str]]:
    """Outcome per expected request.

    Ids the submission never sent are reported and ignored. What the service lost
    is ``lost`` (sent again without spending the request's retries): an id with no
    line at all, one that appears more than once (its lines are not used), a line
    expired or cancelled with its batch, a status-0 line, and an expired batch's
    5xx rows. The rest follows the reference: an empty content and the HTTP
    statuses it retries are transient, a refusal the wire has a fallback for
    (:meth:`Wire.fallback`: a temperature, an effort) is ``retry`` with it, any other
    failed reply fails the case with the reference's ``RuntimeError`` text.
    ``replies``: each ok outcome carries its reply's text (a judge's, to be parsed; an
    answer's is read from its raw file when its row is written, never held for all).
    """
    exp = pl.DataFrame(
        {"custom_id": list(expected), "case_id": [e.case_id for e in expected.values()]},
        schema={"custom_id": pl.String, "case_id": pl.String},
    )
    anomalies = [
        f"{r['file']}: line {r['lineno']}: unknown custom_id {r['custom_id']!r} (ignored)"
        for r in frame.join(exp, on="custom_id", how="anti").iter_rows(named=True)
    ]
    counts = frame.group_by("custom_id").len()
    dups = counts.filter(pl.col("len") > 1)["custom_id"].sort().to_list()
    anomalies += [f"custom_id {c!r} appears more than once (not used; resubmitted)" for c in dups]
    usable = frame.filter(~pl.col("custom_id").is_in(dups))
    used = usable.filter(_OK)
    usage = {c: int(used[c].sum()) for c in USAGE_COLUMNS}
    usage["requests"] = used.height
    joined = _with_fallbacks(exp.join(usable, on="custom_id", how="left"), expected, wire, expired)
    kind, detail = _verdict(wire.rules, expired, dups)
    rows = joined.with_columns(kind.alias("kind"), detail.alias("detail")).select(
        "custom_id",
        "case_id",
        "kind",
        "detail",
        "content" if replies else pl.lit(None, pl.String).alias("content"),
        pl.col("file").alias("source"),
        "retry_with",
    )
    result = {}
    for cid, case_id, kind_, detail_, content, source, again in zip(
        *(rows.get_column(c).to_list() for c in rows.columns)
    ):
        good = kind_ == "ok"
        result[cid] = Outcome(
            case_id,
            kind_,
            detail_,
            content if good else None,
            source if good else None,
            json.loads(again) if kind_ == "retry" else None,
        )
    return result, usage, anomalies


_OK = ~pl.col("has_error") & pl.col("status_code").is_between(200, 299)


def _with_fallbacks(
    joined: pl.DataFrame, expected: Mapping[str, Sent], wire: Wire, expired: bool
) -> pl.DataFrame:
    """Each line with the wire's fallback for it (``retry_with``: asked of the failed
    replies whose status the reference does not simply retry) and the reference's
    words for its HTTP error (``http_error``)."""
    status = pl.col("status_code")
    refused = (  # answered, neither ok nor a status the reference simply retries
        pl.col("file").is_not_null()
        & ~pl.col("has_error")
        & status.is_not_null()
        & (status != 0)
        & ~status.is_between(200, 299)
        & ~status.is_in(sorted(wire.rules.retried))
    )
    if expired:  # an expired batch's 5xx rows were lost, not refused
        refused = refused & (status < 500)
    retry_with: list[str | None] = [None] * joined.height
    asked = joined.with_row_index("at").filter(refused)
    for at, cid, code, text in asked.select("at", "custom_id", "status_code", "body_text").rows():
        sent = expected[cid]
        adjust = wire.fallback(code, text or "", sent.note, sent.adjust)
        retry_with[at] = None if adjust is None else json.dumps(adjust)
    codes, texts = joined["status_code"].to_list(), joined["body_text"].to_list()
    return joined.with_columns(
        pl.Series("retry_with", retry_with, dtype=pl.String),
        pl.Series(
            "http_error",
            [None if t is None else protocol.http_error(c, t) for c, t in zip(codes, texts)],
            dtype=pl.String,
        ),
    )


def _verdict(rules: LineRules, expired: bool, dups: list[str]) -> tuple[pl.Expr, pl.Expr]:
    """Each line's kind of outcome and its detail, as two expressions over the joined
    lines: the rules of :func:`classify`, in the order they are tried."""
    status = pl.col("status_code")
    empty = pl.col("content").is_null() | (pl.col("content") == "")
    retried = status.is_in(sorted(rules.retried))
    line_lost = pl.col("has_error") & pl.col("error_code").is_in(LOST_CODES)
    line_transient = pl.col("has_error") & pl.col("error_code").is_in(TRANSIENT_CODES)
    lost = (
        pl.col("file").is_null()
        | line_lost
        | (~pl.col("has_error") & ((status == 0) | (pl.lit(expired) & (status >= 500))))
    )
    fallback = pl.col("retry_with").is_not_null()
    kind = (
        pl.when(lost)
        .then(pl.lit("lost"))
        .when(line_transient)
        .then(pl.lit("transient"))
        .when(pl.col("has_error"))
        .then(pl.lit("failed"))
        .when(status.is_null())
        .then(pl.lit("transient"))
        .when(_OK & empty)
        .then(pl.lit("transient"))
        .when(_OK)
        .then(pl.lit("ok"))
        .when(retried)
        .then(pl.lit("transient"))
        .when(fallback)
        .then(pl.lit("retry"))
        .otherwise(pl.lit("failed"))
    )
    detail = (
        pl.when(pl.col("file").is_null())
        .then(
            pl.when(pl.col("custom_id").is_in(dups))
            .then(pl.lit("duplicated in the output"))
            .otherwise(pl.lit("no result line"))
        )
        .when(line_lost | line_transient)
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
        .when(_OK & empty)
        .then(pl.col("empty_error"))
        .when(_OK)
        .then(pl.lit(None, dtype=pl.String))
        .when(retried | fallback | lost)
        .then(pl.col("http_error"))
        .otherwise(
            pl.format("RuntimeError: {}", pl.col("http_error")).str.slice(
                0, protocol.ERROR_TEXT_LIMIT
            )
        )
    )
    return kind, detail


def _failed_batch(sub: Submission, failure: BatchFailure, hold: float, now: float) -> Collection:
    """A batch that failed as a whole, leaving no result file: what its wire says it means."""
    expected = expected_lines(sub)
    if failure.kind == "fail":
        return Collection(
            {
                cid: Outcome(sent.case_id, "failed", failure.detail)
                for cid, sent in expected.items()
            },
            stop=failure.stop and f"{failure.code}: {failure.stop}",
        )
    free = failure.kind == "resubmit" or len(sub.lines) > 1  # one request still too big: its own
    cap = max(1, len(sub.lines) // 2) if failure.kind != "resubmit" else None
    hold_until = now + hold if failure.kind == "later_smaller" else None
    notice = (
        f"{sub.id}: {failure.code or 'failed'}; resubmitting"
        + (f" in files of at most {cap} requests" if cap else "")
        + (f" after {hold:g}s" if hold_until is not None else "")
    )
    return Collection(
        {cid: Outcome(sent.case_id, "transient", failure.detail) for cid, sent in expected.items()},
        free_retry=free,
        cap=cap,
        hold_until=hold_until,
        notice=notice,
    )


def collect(
    sub: Submission,
    frame: pl.DataFrame | None,
    state: RunState,
    limits: RetryLimits,
    rubric: pl.DataFrame,
    item_ids: Mapping[str, Sequence[str]],
    now: float,
    wire: Wire,
    unknown: Mapping[str, str] | None = None,
    *,
    read: Callable[[str, str], list[bool]] | None = None,
) -> Collection:
    """The outcome of every request of ``sub``, with retry caps applied.

    ``frame`` is the submission's result files read (None for a batch that failed as a
    whole). A retried reply that has used up ``max_retries`` attempts fails with the
    reference's ``<service> request failed after <n> attempts`` text; an invalid judge
    reply is judged again until ``max_attempts``, then fails with the reference's text
    for it. ``unknown``: the requests whose call's outcome is unknown (id → its error).
    ``read``: ``(case_id, text)`` → the verdicts of a reply that decides a part of its case.
    """
    if frame is None:
        errors = sub.view.errors if sub.view is not None else None
        failure = wire.failure(errors, len(sub.lines))
        result = _failed_batch(sub, failure, limits.hold_seconds, now)
    else:
        expired = sub.view is not None and sub.view.ending == "expired"
        expected = expected_lines(sub, state)
        judges = sub.stage == "judges"
        outcomes, usage, anomalies = classify(frame, expected, wire, expired, replies=judges)
        for cid, detail in (unknown or {}).items():  # sent one call at a time, never answered
            outcomes[cid] = Outcome(expected[cid].case_id, "unknown", detail)
        served, fingerprints, tiers = served_counts(frame)
        result = Collection(outcomes, usage=usage, anomalies=anomalies, served=served)
        result.fingerprints, result.tiers = fingerprints, tiers
    invalid: dict[str, str] = {}
    if sub.stage == "judges" and frame is not None:
        replies = []
        for o in result.outcomes.values():
            if o.kind == "ok":
                replies.append((o.case_id, o.content or ""))
                o.content = None  # the text is not kept beside its decisions
        if read is not None:
            result.judged = part_verdicts(replies, read)
        else:
            result.judged = judge_decisions(replies, rubric, item_ids)
        del replies
        invalid = result.judged.invalid
    for cid, o in result.outcomes.items():
        if o.kind == "ok" and o.case_id not in invalid:
            continue  # as it is: no cap applies
        st = state.cases[o.case_id].stage(sub.stage, sub.judge_pass)
        # A temperature refusal uses up an attempt, as in the reference.
        retried = o.kind in ("transient", "retry")
        if retried and not result.free_retry and st.transients + 1 >= limits.max_retries:
            detail = protocol.gave_up(wire.rules.label, st.transients + 1, o.detail or "")
            o = Outcome(o.case_id, "failed", detail)
        elif (
            o.kind == "lost"
            and not sub.tailed  # a tail cut short goes to flex: not the service's loss
            and st.losses + 1 >= LOSSES_PER_RETRY * limits.max_retries
        ):
            detail = protocol.error_text(
                f"the batch service lost this request {st.losses + 1} times (last: {o.detail})",
                "RuntimeError",
            )
            o = Outcome(o.case_id, "failed", detail)
        elif o.kind == "ok" and o.case_id in invalid:
            message = invalid[o.case_id]
            kind: OutcomeKind = "failed" if st.invalid + 1 >= limits.max_attempts else "invalid"
            o = Outcome(o.case_id, kind, message)
        result.outcomes[cid] = o
    return result
