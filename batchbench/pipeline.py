"""The state machine that advances a run, one journaled action at a time.

``Pipeline.step()`` reads the folded state, picks the single next useful action,
journals the intent, does it, and journals the outcome. After a crash the loop
repeats at most one action, and every action is safe to repeat: an upload is
merely orphaned, a create is preceded by a look for a batch carrying this
submission's metadata, a download rewrites the same bytes, and a case's rows
are written once (the journal counts them). What a collected batch means is
decided by :mod:`batchbench.collection`; rows are built by :mod:`batchbench.results`.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from . import _failpoints, protocol
from .api import BatchApi
from .collection import Collection, Limits, check_download, collect
from .costs import prompt_tokens, token_counter
from .dataset import Case
from .errors import ApiError, ApiNotFoundError, BatchFileError, TransientApiError
from .outputs import TruncatedFileError, read_outputs
from .requests import MAX_BYTES, answer_request, check_file, judge_request, write_shards
from .results import append_rows, error_row, row_counts, score_row
from .rundir import Run, RunConfig
from .runs import (
    BATCH_STATUSES,
    BatchSeen,
    Created,
    CreateStarted,
    Downloaded,
    Event,
    Line,
    Plan,
    RemoteDeleted,
    RunState,
    Stage,
    Submission,
    Uploaded,
    UploadStarted,
    fold,
)
from .scoring import rubric_frame, score_joined, score_records


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
    outage_seconds: float = 600.0  # give up when the API has failed this long without a break
    max_ambiguous_creates: int = 8  # creates in a row that failed without saying whether


class Pipeline:
    def __init__(
        self,
        run: Run,
        config: RunConfig,
        cases: Mapping[str, Case],
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
        self.limits = Limits(settings.max_retries, settings.max_attempts, settings.hold_seconds)
        self._last_poll = 0.0
        self._answers: dict[str, dict[str, str]] = {}
        self._rows_on_disk: Counter[str] | None = None
        self._ambiguous_creates = 0
        self._rubric: pl.DataFrame | None = None

    @property
    def rubric(self) -> pl.DataFrame:
        """The run's rubric rows, for joining judge decisions (built on first use)."""
        if self._rubric is None:
            self._rubric = rubric_frame([self.cases[c] for c in self.config.case_ids])
        return self._rubric

    def _api(self) -> BatchApi:
        if self.api is None:
            raise RuntimeError("this pipeline was opened without an API")
        return self.api

    # journal ----------------------------------------------------------------
    def record(self, event: Event) -> None:
        self.state.apply(self.run.record(event))

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
        files = [f for f in (sub.file_id, *sub.result_files()) if f]
        for file_id in files:
            self._api().delete_file(file_id)
        self.record(RemoteDeleted(sub=sub.id, file_ids=files))
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
            if stage == "answers":
                wanted = case.answers.status == "pending"
            else:
                wanted = case.answers.status == "ok" and case.judges.status == "pending"
            if wanted:
                out.append(case_id)
        return out

    def in_flight(self) -> list[Submission]:
        return [s for s in self.state.subs.values() if s.in_flight]

    # planning -----------------------------------------------------------------
    def _plan(self, stage: Stage) -> str:
        """Write the request files for every pending case of a stage, then journal them."""
        model = self._model(stage)
        budget = self.settings.max_enqueued_tokens
        count = token_counter(model)[1] if budget is not None else None

        def entries() -> Iterator[tuple[Line, bytes, int]]:
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
                line = Line(case_id, request.attempt, "temperature" in request.body)
                yield line, request.line(), tokens

        seq = self.state.next_seq(stage)
        cap = min(self.settings.max_requests_per_batch, self.state.caps.get(stage, 10**9))
        files = write_shards(
            entries(),
            lambda k: self.run.requests_dir / f"{stage}-{seq + k:04d}.jsonl",
            max_lines=cap,
            max_bytes=self.settings.max_bytes_per_batch,
            max_tokens=budget,
        )
        for offset, (path, lines, tokens) in enumerate(files):
            _failpoints.hit("planned")
            self.record(
                Plan(
                    sub=path.stem,
                    stage=stage,
                    seq=seq + offset,
                    path=path.name,
                    lines=lines,
                    tokens=tokens,
                )
            )
        requests = sum(len(lines) for _, lines, _ in files)
        return f"planned {requests} {stage} request(s) in {len(files)} file(s)"

    # submitting ----------------------------------------------------------------
    def _metadata(self, sub: Submission) -> dict[str, str]:
        return {
            "batchbench_run": self.config.name[:512],
            "batchbench_run_id": self.config.run_id,
            "batchbench_stage": sub.stage,
            "batchbench_shard": str(sub.seq),
            "batchbench_attempt": str(max(line.attempt for line in sub.lines)),
            "batchbench_sub": sub.id,
        }

    def _upload(self, sub: Submission) -> str:
        path = self.run.requests_dir / sub.path
        check_file(path.read_bytes().splitlines(keepends=True), str(path))
        self.record(UploadStarted(sub=sub.id))
        file_id = self._api().upload(path)
        _failpoints.hit("uploaded")
        self.record(Uploaded(sub=sub.id, file_id=file_id))
        return f"uploaded {sub.id} as {file_id}"

    def _find_on_server(self, sub: Submission) -> dict[str, Any] | None:
        """The batch an earlier, interrupted create may have made for this submission."""
        since = (sub.create_started or self.clock()) - 600
        after = None
        while True:
            page, more = self._api().list_page(after=after, limit=100)
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
        """Create once; after an ambiguous failure, look for the batch before creating again."""
        assert sub.file_id is not None
        if sub.create_started is not None:
            found = self._find_on_server(sub)
            if found is not None:
                self.record(Created(sub=sub.id, batch_id=found["id"], adopted=True))
                self._record_batch(sub, found)
                return f"adopted {found['id']} for {sub.id}"
        self.record(CreateStarted(sub=sub.id, file_id=sub.file_id))
        try:
            batch = self._api().create(sub.file_id, self._metadata(sub))
        except TransientApiError:
            self._ambiguous_creates += 1
            if self._ambiguous_creates >= self.settings.max_ambiguous_creates:
                raise
            self.sleep(min(0.1 * 2**self._ambiguous_creates, 10.0))
            return f"create of {sub.id} failed; will look for it, then create again"
        self._ambiguous_creates = 0
        _failpoints.hit("created")
        self.record(Created(sub=sub.id, batch_id=batch["id"]))
        self._record_batch(sub, batch)
        return f"created {batch['id']} for {sub.id}"

    def _record_batch(self, sub: Submission, batch: dict[str, Any]) -> None:
        """Journal what the API says of a batch whenever it changes (counts included)."""
        status = batch.get("status")
        if status not in BATCH_STATUSES:
            raise ApiError(
                f"batch {batch.get('id')} has an unknown status {status!r}",
                batch_id=batch.get("id"),
            )
        reported = batch.get("request_counts") or {}
        counts = {k: int(v) for k, v in reported.items() if v is not None}
        seen = BatchSeen(
            sub=sub.id,
            batch_id=batch["id"],
            status=status,
            output_file_id=batch.get("output_file_id"),
            error_file_id=batch.get("error_file_id"),
            errors=(batch.get("errors") or {}).get("data") if batch.get("errors") else None,
            counts=counts,
        )
        now = (sub.status, sub.output_file_id, sub.error_file_id, sub.errors, sub.counts)
        if now != (status, seen.output_file_id, seen.error_file_id, seen.errors, counts):
            self.record(seen)

    # polling -----------------------------------------------------------------
    def poll(self) -> None:
        """Refresh every in-flight batch, one list page per 100 batches when possible."""
        self._last_poll = self.clock()
        waiting = {s.batch_id: s for s in self.in_flight() if s.batch_id is not None}
        if not waiting:
            return
        oldest = min(s.planned_at for s in waiting.values()) - 600
        after = None
        while waiting:
            page, more = self._api().list_page(after=after, limit=100)
            for batch in page:
                sub = waiting.pop(batch["id"], None)
                if sub is not None:
                    self._record_batch(sub, batch)
            if not more or not page or (page[-1].get("created_at") or 0) < oldest:
                break
            after = page[-1]["id"]
        for batch_id, sub in waiting.items():
            try:
                self._record_batch(sub, self._api().retrieve(batch_id))
            except ApiNotFoundError:
                raise ApiError(
                    f"batch {batch_id} ({sub.id}) vanished from the API (404);"
                    " its requests cannot be collected",
                    status=404,
                    batch_id=batch_id,
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
        final = self.run.raw_path(file_id)
        staging = final.with_name(f".{final.name}.check")
        where = f"{file_id} (batch {sub.batch_id})"
        try:
            for attempt in range(1, 4):
                size = self._api().download(file_id, staging)
                try:
                    earlier: set[str] = set()
                    for other in sub.downloaded:
                        earlier.update(read_outputs([self.run.raw_path(other)])["custom_id"])
                    check_download(read_outputs([staging]), sub, earlier, where)
                    break
                except TruncatedFileError:
                    if attempt == 3:
                        raise BatchFileError(
                            f"{where}: three downloads were all truncated"
                        ) from None
            os.replace(staging, final)
        finally:
            if staging.exists():
                staging.unlink()
        self.record(Downloaded(sub=sub.id, file_id=file_id))
        return f"downloaded {file_id} ({size} bytes) for {sub.id}"

    def _collect(self, sub: Submission) -> str:
        frame = None
        if sub.status != "failed":
            frame = read_outputs([self.run.raw_path(f) for f in sub.result_files()])
        items = {
            c: [it["item_id"] for it in case["rubric_items"]] for c, case in self.cases.items()
        }
        result = collect(sub, frame, self.state, self.limits, self.rubric, items, self.clock())
        for line in result.anomalies:
            self.say(f"warning: {line}")
        if result.notice:
            self.say(result.notice)
        self._write_rows(sub, result)
        _failpoints.hit("rows_written")
        self.record(result.event(sub))
        kinds = Counter(o.kind for o in result.outcomes.values())
        return f"collected {sub.id}: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))

    # results -------------------------------------------------------------------
    def answer_text(self, case_id: str) -> str:
        st = self.state.cases[case_id].answers
        if st.source is None or st.custom_id is None:
            raise BatchFileError(f"no answer recorded for case {case_id}")
        if st.source not in self._answers:
            frame = read_outputs([self.run.raw_path(st.source)])
            self._answers[st.source] = dict(zip(frame["custom_id"], frame["content"]))
        return self._answers[st.source][st.custom_id]

    def _write_rows(self, sub: Submission, result: Collection) -> None:
        """Append the rows of the cases this collection ends, each case's row once."""
        if self._rows_on_disk is None:
            self._rows_on_disk = row_counts(self.run.results_path)
        written = self._rows_on_disk
        now = self.clock()
        rows: list[dict[str, Any]] = []
        scored: list[str] = []
        for o in result.outcomes.values():
            if written[o.case_id] > self.state.cases[o.case_id].rows:
                continue  # written before a crash kept this collection out of the journal
            if o.kind == "failed":
                rows.append(error_row(self.cases[o.case_id], self.config, now, o.detail or ""))
            elif o.kind == "ok" and sub.stage == "judges":
                scored.append(o.case_id)
        if scored and result.decided is not None:
            chosen = result.decided.filter(pl.col("case_id").is_in(scored))
            matched: dict[str, dict[str, bool]] = {}
            for case_id, item_id, hit in chosen.select("case_id", "item_id", "matched").iter_rows():
                matched.setdefault(case_id, {})[item_id] = hit
            sent = {line.case_id: line.sent_temperature for line in sub.lines}
            for case_id, (score, components) in score_records(score_joined(chosen)).items():
                state = self.state.cases[case_id]
                rows.append(
                    score_row(
                        self.cases[case_id],
                        self.config,
                        started=state.started or now,
                        finished=now,
                        answer=self.answer_text(case_id),
                        matched=matched[case_id],
                        score=score,
                        components=components,
                        answer_temperature=bool(state.answers.used_temperature),
                        judge_temperature=sent[case_id],
                    )
                )
        if rows:
            append_rows(self.run.results_path, rows, self.config.case_ids)
            written.update(r["case_id"] for r in rows)

    # the loop --------------------------------------------------------------------
    def advance(self, *, wait: bool, on_progress: Callable[[Pipeline], None] | None = None) -> bool:
        """Steps and polls until every case is final; without ``wait``, until only waiting is left.

        A call that still fails once the API client's retries are spent is tried
        again at the next tick (the journal makes that safe), until the API has
        failed for ``outage_seconds`` without a break. Returns whether every case
        is final.
        """
        polled = False
        failing_since: float | None = None
        while True:
            try:
                action = self.step()
                if action is None and self.in_flight() and (self.poll_due() or not polled):
                    self.poll()
                    polled = True
                    action = "polled"
                failing_since = None
            except TransientApiError as exc:
                failing_since = failing_since or self.clock()
                if self.clock() - failing_since >= self.settings.outage_seconds:
                    raise
                self.say(f"warning: {exc}; trying again at the next tick")
                self.sleep(min(self.settings.poll_interval, 5.0))
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
