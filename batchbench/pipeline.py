"""The state machine that advances a run, one journaled action at a time.

``Pipeline.step()`` reads the folded state, picks the single next useful action,
journals the intent, does it, and journals the outcome. After a crash the loop
repeats at most one action, and every action is safe to repeat: an upload is
merely orphaned, a create is preceded by a look for a batch carrying this
submission's metadata, a download rewrites the same bytes, and result rows for
cases already written are skipped.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from . import _failpoints, protocol
from ._io import append_bytes
from .api import BatchApi
from .costs import prompt_tokens, token_counter
from .decisions import judge_decisions
from .errors import (
    ApiError,
    ApiNotFoundError,
    BatchFileError,
    TransientApiError,
)
from .outputs import (
    Collected,
    Outcome,
    TruncatedFileError,
    classify,
    read_outputs,
)
from .requests import (
    MAX_BYTES,
    answer_request,
    custom_id,
    judge_request,
    write_shards,
)
from .results import dump_row, read_rows
from .runs import Run, RunConfig, RunState, Submission, fold
from .scoring import rubric_frame, score_joined, score_records

FREE_RETRY_CODES = ("token_limit_exceeded", "too_many_tasks", "file_too_large")


@dataclass
class Settings:
    max_requests_per_batch: int = 50_000
    max_bytes_per_batch: int = MAX_BYTES
    max_attempts: int = 3  # judge replies per answer before an invalid one is an error
    max_retries: int = 6  # attempts per request, as the reference's --max-retries
    poll_interval: float = 30.0
    hold_seconds: float = 60.0  # wait after token_limit_exceeded before creating again
    max_enqueued_tokens: int | None = None  # estimated prompt tokens in flight per model
    delete_remote_files: bool = False  # delete a batch's files on the server once collected


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=timezone.utc)


class Pipeline:
    def __init__(
        self,
        run: Run,
        config: RunConfig,
        cases: dict[str, dict[str, Any]],
        api: BatchApi | None,
        settings: Settings,
        *,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.run = run
        self.config = config
        self.cases = cases
        self.api = api
        self.settings = settings
        self.say = say
        self.clock = clock
        self.sleep = sleep
        run.repair()  # the caller holds the run's lock
        self.state: RunState = fold(config.case_ids, run.events())
        self._last_poll = 0.0
        self._answers: dict[str, dict[str, str]] = {}
        self._rows_on_disk: Counter[str] | None = None
        self._create_failures = 0
        self._rubric: pl.DataFrame | None = None

    @property
    def rubric(self) -> pl.DataFrame:
        """The run's rubric rows, for joining judge decisions (built on first use)."""
        if self._rubric is None:
            self._rubric = rubric_frame([self.cases[c] for c in self.config.case_ids])
        return self._rubric

    # journal ----------------------------------------------------------------
    def record(self, event: str, **data: Any) -> None:
        entry = self.run.record(event, **data)
        self.state.apply(entry)

    # decisions --------------------------------------------------------------
    def done(self) -> bool:
        return all(c.final for c in self.state.cases.values())

    def step(self) -> str | None:
        """Do the next action that needs no waiting; None when only waiting remains."""
        st = self.state
        for sub in st.subs.values():
            if sub.file_id is None:
                return self._upload(sub)
        for sub in st.subs.values():
            if sub.batch_id is None and not st.cancelled:
                if st.holds.get(sub.stage, 0) > self.clock() or not self._fits_budget(sub):
                    continue
                return self._create(sub)
        # Plan before collecting the next file: the judges of a collected answer
        # file go out at once, not after every answer file is in.
        if not st.cancelled:
            for stage in ("answers", "judges"):
                if self._pending(stage):
                    return self._plan(stage)
        for sub in st.subs.values():
            if sub.terminal and not sub.collected:
                missing = [f for f in sub.result_files() if f not in sub.downloaded]
                if missing:
                    return self._download(sub, missing[0])
                return self._collect(sub)
        if self.settings.delete_remote_files:
            for sub in st.subs.values():
                if sub.collected and not sub.remote_deleted:
                    return self._delete_remote(sub)
        return None

    def _delete_remote(self, sub: Submission) -> str:
        """Free the project's file storage: the raw copies on disk are the source of truth."""
        assert self.api is not None
        files = [f for f in (sub.file_id, *sub.result_files()) if f]
        for file_id in files:
            self.api.delete_file(file_id)
        self.record("remote_deleted", sub=sub.id, file_ids=files)
        return f"deleted {len(files)} file(s) of {sub.id} on the server"

    def _model(self, stage: str) -> str:
        return self.config.answer_model if stage == "answers" else self.config.judge_model

    def _fits_budget(self, sub: Submission) -> bool:
        """Release a file only while the model's estimated in-flight tokens stay in budget."""
        budget = self.settings.max_enqueued_tokens
        if budget is None:
            return True
        model = self._model(sub.stage)
        flying = sum(s.tokens for s in self.in_flight() if self._model(s.stage) == model)
        return flying == 0 or flying + sub.tokens <= budget

    def _pending(self, stage: str) -> list[str]:
        out = []
        for case_id in self.config.case_ids:
            case = self.state.cases[case_id]
            if case.final:
                continue
            if (
                stage == "answers"
                and case.answers.status == "pending"
                or (
                    stage == "judges"
                    and case.answers.status == "ok"
                    and case.judges.status == "pending"
                )
            ):
                out.append(case_id)
        return out

    def in_flight(self) -> list[Submission]:
        return [s for s in self.state.subs.values() if s.in_flight]

    # planning -----------------------------------------------------------------
    def _plan(self, stage: str) -> str:
        """Write the request files for every pending case of a stage, then journal them."""
        model = self._model(stage)
        budget = self.settings.max_enqueued_tokens
        count = token_counter(model)[1] if budget is not None else None

        def entries() -> Iterator[tuple[list[Any], bytes, int]]:
            for case_id in self._pending(stage):
                case = self.cases[case_id]
                st = self.state.cases[case_id].stage(stage)
                if stage == "answers":
                    request = answer_request(
                        case,
                        model,
                        st.attempt + 1,
                        reasoning_effort=self.config.reasoning_effort,
                        temperature=protocol.ANSWER_TEMPERATURE if st.temperature else None,
                    )
                else:
                    request = judge_request(
                        case,
                        self.answer_text(case_id),
                        model,
                        st.attempt + 1,
                        temperature=protocol.JUDGE_TEMPERATURE if st.temperature else None,
                    )
                tokens = prompt_tokens(request.body, count) if count is not None else 0
                meta = [case_id, request.attempt, "temperature" in request.body]
                yield meta, request.line(), tokens

        seq = self.state.next_seq(stage)
        cap = min(self.settings.max_requests_per_batch, self.state.caps.get(stage, 10**9))
        files = write_shards(
            entries(),
            lambda k: self.run.requests_dir / f"{stage}-{seq + k:04d}.jsonl",
            max_lines=cap,
            max_bytes=self.settings.max_bytes_per_batch,
            max_tokens=budget,
        )
        for offset, (path, metas, tokens) in enumerate(files):
            _failpoints.hit("planned")
            self.record(
                "plan",
                sub=path.stem,
                stage=stage,
                seq=seq + offset,
                path=path.name,
                lines=metas,
                tokens=tokens,
            )
        requests = sum(len(metas) for _, metas, _ in files)
        return f"planned {requests} {stage} request(s) in {len(files)} file(s)"

    # submitting ----------------------------------------------------------------
    def _metadata(self, sub: Submission) -> dict[str, str]:
        return {
            "batchbench_run": self.config.name[:512],
            "batchbench_run_id": self.config.run_id,
            "batchbench_stage": sub.stage,
            "batchbench_shard": str(sub.seq),
            "batchbench_attempt": str(max(line[1] for line in sub.lines)),
            "batchbench_sub": sub.id,
        }

    def _upload(self, sub: Submission) -> str:
        assert self.api is not None
        self.record("upload_started", sub=sub.id)
        file_id = self.api.upload(self.run.requests_dir / sub.path)
        _failpoints.hit("uploaded")
        self.record("uploaded", sub=sub.id, file_id=file_id)
        return f"uploaded {sub.id} as {file_id}"

    def _find_on_server(self, sub: Submission) -> dict[str, Any] | None:
        """The batch an earlier, interrupted create may have made for this submission."""
        assert self.api is not None
        since = (sub.create_started or self.clock()) - 600
        after = None
        while True:
            page, more = self.api.list_page(after=after, limit=100)
            for batch in page:
                meta = batch.get("metadata") or {}
                if (
                    meta.get("batchbench_run_id") == self.config.run_id
                    and meta.get("batchbench_sub") == sub.id
                ):
                    return batch
            if not more or not page or (page[-1].get("created_at") or 0) < since:
                return None
            after = page[-1]["id"]

    def _create(self, sub: Submission) -> str:
        assert self.api is not None and sub.file_id is not None
        if sub.create_started is not None:
            found = self._find_on_server(sub)
            if found is not None:
                self.record("created", sub=sub.id, batch_id=found["id"], adopted=True)
                self._record_batch(sub, found)
                return f"adopted {found['id']} for {sub.id}"
        self.record("create_started", sub=sub.id, file_id=sub.file_id)
        try:
            batch = self.api.create(sub.file_id, self._metadata(sub))
        except TransientApiError as exc:
            self._create_failures += 1
            self.sleep(min(0.1 * 2**self._create_failures, 10.0))
            return f"create of {sub.id} failed ({exc}); will look for it, then retry"
        self._create_failures = 0
        _failpoints.hit("created")
        self.record("created", sub=sub.id, batch_id=batch["id"])
        self._record_batch(sub, batch)
        return f"created {batch['id']} for {sub.id}"

    def _record_batch(self, sub: Submission, batch: dict[str, Any]) -> None:
        sub.counts = dict(batch.get("request_counts") or {})
        status = batch.get("status")
        if status not in (
            "validating",
            "in_progress",
            "finalizing",
            "completed",
            "failed",
            "expired",
            "cancelling",
            "cancelled",
        ):
            raise ApiError(f"batch {batch.get('id')} has an unknown status {status!r}")
        if (status, batch.get("output_file_id"), batch.get("error_file_id")) == (
            sub.status,
            sub.output_file_id,
            sub.error_file_id,
        ):
            return
        errors = (batch.get("errors") or {}).get("data") if batch.get("errors") else None
        self.record(
            "batch",
            sub=sub.id,
            batch_id=batch["id"],
            status=status,
            output_file_id=batch.get("output_file_id"),
            error_file_id=batch.get("error_file_id"),
            errors=errors,
        )

    # polling -----------------------------------------------------------------
    def poll(self) -> None:
        """Refresh every in-flight batch, one list page per 100 batches when possible."""
        assert self.api is not None
        self._last_poll = self.clock()
        waiting = {s.batch_id: s for s in self.in_flight() if s.batch_id is not None}
        if not waiting:
            return
        oldest = min(s.planned_at for s in waiting.values()) - 600
        after = None
        while waiting:
            page, more = self.api.list_page(after=after, limit=100)
            for batch in page:
                sub = waiting.pop(batch["id"], None)
                if sub is not None:
                    self._record_batch(sub, batch)
            if not more or not page or (page[-1].get("created_at") or 0) < oldest:
                break
            after = page[-1]["id"]
        for batch_id, sub in waiting.items():
            try:
                self._record_batch(sub, self.api.retrieve(batch_id))
            except ApiNotFoundError:
                raise ApiError(
                    f"batch {batch_id} ({sub.id}) vanished from the API (404);"
                    " its requests cannot be collected"
                ) from None

    def poll_due(self) -> bool:
        return (
            bool(self.in_flight()) and self.clock() - self._last_poll >= self.settings.poll_interval
        )

    # downloading and collecting ------------------------------------------------
    def _download(self, sub: Submission, file_id: str) -> str:
        """Download to a staging name, check it, and only then keep and journal it.

        A truncated transfer is fetched again; a file that breaks the format or
        names requests this submission never sent stops the run with the
        culprit named, leaving the run's state as it was.
        """
        assert self.api is not None
        final = self.run.raw_path(file_id)
        staging = final.with_name(f".{final.name}.check")
        try:
            for attempt in range(1, 4):
                size = self.api.download(file_id, staging)
                try:
                    self._check_file(sub, file_id, staging)
                    break
                except TruncatedFileError:
                    if attempt == 3:
                        raise BatchFileError(
                            f"{file_id} (batch {sub.batch_id}): three downloads were all truncated"
                        ) from None
            os.replace(staging, final)
        finally:
            if staging.exists():
                staging.unlink()
        self.record("downloaded", sub=sub.id, file_id=file_id)
        return f"downloaded {file_id} ({size} bytes) for {sub.id}"

    def _expected(self, sub: Submission) -> dict[str, tuple[str, bool]]:
        return {
            custom_id(sub.stage, case_id, attempt): (case_id, bool(sent))
            for case_id, attempt, sent in sub.lines
        }

    def _check_file(self, sub: Submission, file_id: str, path: Path) -> None:
        frame = read_outputs([path])
        expected = self._expected(sub)
        where = f"{file_id} (batch {sub.batch_id})"
        earlier: set[str] = set()
        for other in sub.downloaded:
            earlier.update(read_outputs([self.run.raw_path(other)])["custom_id"].to_list())
        seen: set[str] = set()
        for lineno, cid in zip(frame["lineno"].to_list(), frame["custom_id"].to_list()):
            if cid not in expected:
                raise BatchFileError(f"{where}: line {lineno}: unknown custom_id {cid!r}")
            if cid in seen or cid in earlier:
                raise BatchFileError(f"{where}: line {lineno}: duplicate custom_id {cid!r}")
            seen.add(cid)

    def _collect(self, sub: Submission) -> str:
        expected = self._expected(sub)
        extra: dict[str, Any] = {}
        if sub.status == "failed":
            collected, extra = self._failed_batch(sub, expected)
        else:
            frame = read_outputs([self.run.raw_path(f) for f in sub.result_files()])
            collected = classify(frame, expected)
        for line in collected.anomalies:
            self.say(f"warning: {line}")
        outcomes, decided = self._finalise_outcomes(sub, collected)
        self._write_rows(sub, outcomes, decided)
        _failpoints.hit("rows_written")
        self.record(
            "collected",
            sub=sub.id,
            outcomes={
                o.case_id: [o.kind, o.detail, _file_id(o.source), cid]
                for cid, o in outcomes.items()
            },
            usage=collected.usage,
            anomalies=collected.anomalies,
            **extra,
        )
        kinds: dict[str, int] = {}
        for o in outcomes.values():
            kinds[o.kind] = kinds.get(o.kind, 0) + 1
        return f"collected {sub.id}: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))

    def _failed_batch(
        self, sub: Submission, expected: dict[str, tuple[str, bool]]
    ) -> tuple[Collected, dict[str, Any]]:
        error = (sub.errors or [{}])[0] or {}
        code, message = error.get("code"), error.get("message")
        extra: dict[str, Any] = {}
        if code == "token_limit_exceeded" or (code in FREE_RETRY_CODES and len(sub.lines) > 1):
            # Not the requests' fault: send them again later, in smaller files. A
            # single request that still does not fit counts against its retries.
            kind, detail = "transient", f"batch failed: {code}"
            extra["free_retry"] = len(sub.lines) > 1
            extra["cap"] = max(1, len(sub.lines) // 2)
            if code == "token_limit_exceeded":
                extra["hold_until"] = self.clock() + self.settings.hold_seconds
            self.say(
                f"{sub.id}: {code}; resubmitting in files of at most {extra['cap']}"
                " requests"
                + (f" after {self.settings.hold_seconds:g}s" if "hold_until" in extra else "")
            )
        else:
            kind, detail = "failed", f"BatchValidationError: {code}: {message}"
        outcomes = {cid: Outcome(case_id, kind, detail) for cid, (case_id, _) in expected.items()}
        return Collected(outcomes, {}, []), extra

    def _finalise_outcomes(
        self, sub: Submission, collected: Collected
    ) -> tuple[dict[str, Outcome], pl.DataFrame | None]:
        """Apply retry caps and, for judges, check every reply strictly.

        Returns the final outcomes and, for valid judge replies, their decisions
        (rubric rows with ``matched``).
        """
        decided = None
        invalid: dict[str, str] = {}
        if sub.stage == "judges":
            replies = [
                (o.case_id, o.content or "") for o in collected.outcomes.values() if o.kind == "ok"
            ]
            items = {
                case_id: [it["item_id"] for it in self.cases[case_id]["rubric_items"]]
                for case_id, _ in replies
            }
            decided, invalid = judge_decisions(replies, self.rubric, items)
        out: dict[str, Outcome] = {}
        for cid, o in collected.outcomes.items():
            st = self.state.cases[o.case_id].stage(sub.stage)
            # A temperature refusal uses up an attempt, as in the reference.
            retry = o.kind in ("transient", "no_temperature")
            if retry and st.transients + 1 >= self.settings.max_retries:
                text = protocol.gave_up(st.transients + 1, o.detail or "")
                o = Outcome(o.case_id, "failed", text)
            if o.kind == "ok" and o.case_id in invalid:
                message = invalid[o.case_id]
                if st.invalid + 1 >= self.settings.max_attempts:
                    o = Outcome(o.case_id, "failed", message)
                else:
                    o = Outcome(o.case_id, "invalid", message)
            out[cid] = o
        return out, decided

    # results -------------------------------------------------------------------
    def answer_text(self, case_id: str) -> str:
        st = self.state.cases[case_id].answers
        if st.source is None or st.custom_id is None:
            raise BatchFileError(f"no answer recorded for case {case_id}")
        if st.source not in self._answers:
            frame = read_outputs([self.run.raw_path(st.source)])
            self._answers[st.source] = dict(
                zip(frame["custom_id"].to_list(), frame["content"].to_list())
            )
        return self._answers[st.source][st.custom_id]

    def _rows_written(self) -> Counter[str]:
        """Rows per case in ``results.jsonl`` (a torn last row was repaired at start)."""
        if self._rows_on_disk is None:
            path = self.run.results_path
            rows = read_rows(path) if path.exists() else []
            self._rows_on_disk = Counter(r["case_id"] for r in rows)
        return self._rows_on_disk

    def _write_rows(
        self,
        sub: Submission,
        outcomes: dict[str, Outcome],
        decided: pl.DataFrame | None,
    ) -> None:
        written = self._rows_written()
        now = self.clock()
        rows: list[dict[str, Any]] = []
        scored: list[str] = []
        sent = {line[0]: bool(line[2]) for line in sub.lines}
        for o in outcomes.values():
            if written[o.case_id] > self.state.cases[o.case_id].rows:
                continue  # written before a crash kept this collection out of the journal
            if o.kind == "failed":
                rows.append(self._error_row(o.case_id, o.detail or "Error: failed", now))
            elif o.kind == "ok" and sub.stage == "judges":
                scored.append(o.case_id)
        if scored and decided is not None:
            chosen = decided.filter(pl.col("case_id").is_in(scored))
            records = score_records(score_joined(chosen))
            decisions: dict[str, dict[str, bool]] = {}
            for case_id, item_id, matched in chosen.select(
                "case_id", "item_id", "matched"
            ).iter_rows():
                decisions.setdefault(case_id, {})[item_id] = matched
            for case_id, (score, components) in records.items():
                rows.append(
                    self._score_row(
                        case_id, decisions[case_id], score, components, now, sent[case_id]
                    )
                )
        if not rows:
            return
        order = {cid: i for i, cid in enumerate(self.config.case_ids)}
        rows.sort(key=lambda r: order[r["case_id"]])
        data = "".join(dump_row(r) + "\n" for r in rows).encode("utf-8")
        append_bytes(self.run.results_path, data, "rows_half_written")
        written.update(r["case_id"] for r in rows)

    def _base_row(self, case_id: str) -> dict[str, Any]:
        case = self.cases[case_id]
        return {
            "protocol_version": protocol.PROTOCOL_VERSION,
            "case_id": case_id,
            "benchmark": case["benchmark"],
            "grading_method": case["grading_method"],
            "answer_model": self.config.answer_model,
            "judge_model": self.config.judge_model,
        }

    def _error_row(self, case_id: str, error: str, now: float) -> dict[str, Any]:
        return {
            **self._base_row(case_id),
            "finished_at": _utc(now).isoformat(),
            "error": error[: protocol.ERROR_TEXT_LIMIT],
        }

    def _score_row(
        self,
        case_id: str,
        decisions: dict[str, bool],
        score: float,
        components: dict[str, Any],
        now: float,
        judge_sent: bool,
    ) -> dict[str, Any]:
        state = self.state.cases[case_id]
        started, finished = _utc(state.started or now), _utc(now)
        items = self.cases[case_id]["rubric_items"]
        answer_temp = protocol.ANSWER_TEMPERATURE if state.answers.used_temperature else None
        return {
            **self._base_row(case_id),
            "answer_reasoning_effort": self.config.reasoning_effort,
            "answer_temperature": answer_temp,
            "judge_temperature": protocol.JUDGE_TEMPERATURE if judge_sent else None,
            "started_at": started.isoformat(),
            "finished_at": finished.isoformat(),
            "elapsed_seconds": (finished - started).total_seconds(),
            "answer": self.answer_text(case_id),
            "decisions": [
                {
                    "item_id": it["item_id"],
                    "points": it["points"],
                    "matched": decisions[it["item_id"]],
                }
                for it in items
            ],
            "score": score,
            "score_components": components,
        }

    # the loop --------------------------------------------------------------------
    def advance(self, *, wait: bool, on_progress: Callable[[Pipeline], None] | None = None) -> bool:
        """Steps and polls until every case is final; without ``wait``, until only waiting is left.

        Returns whether every case is final.
        """
        assert self.api is not None
        polled = False
        streak = 0
        while True:
            try:
                action = self.step()
                if action is None and self.in_flight() and (self.poll_due() or not polled):
                    self.poll()
                    polled = True
                    action = "polled"
                streak = 0
            except TransientApiError as exc:
                streak += 1
                if streak >= 20:
                    raise
                self.say(f"warning: {exc}; retrying")
                self.sleep(min(self.settings.poll_interval, 0.5 * streak))
                continue
            if on_progress is not None:
                on_progress(self)
            if action is not None:
                continue
            if self.done():
                return True
            if not wait or (self.state.cancelled and not self.in_flight()):
                return False
            now = self.clock()
            wake = [self._last_poll + self.settings.poll_interval] if self.in_flight() else []
            wake += [t for t in self.state.holds.values() if t > now]
            self.sleep(max(0.01, min(wake, default=now + self.settings.poll_interval) - now))


def _file_id(source: str | None) -> str | None:
    return None if source is None else Path(source).stem
