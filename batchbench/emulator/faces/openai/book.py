"""OpenAI's files and batches and their lifecycle, as the real Batch API runs them.

``advance()`` moves every batch to where the clock says it should be:
validation (``validate.parse_input``), progressive execution of lines (so expiry
and cancellation leave partial output), finalizing, and the output and error
files. Azure OpenAI's Global Batch keeps a book of its own of the same kind
(:class:`Limits` says where the two differ).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ...anomalies import SERVER_ERROR, damage_results, stuck_tail
from ...core import ALNUM, HEX, ApiFailure, Store, due_lines, last_line
from ...endpoints import check_body
from .lines import reply
from .records import (
    MAX_FILE_BYTES,
    TERMINAL,
    UPLOAD_PURPOSES,
    Batch,
    StoredFile,
    _ok,
    check_create,
    page,
)
from .validate import Limits, Parsed, parse_input


class OpenAIBook:
    """The files and batches one OpenAI-shaped service holds (the store's lock guards it)."""

    def __init__(
        self,
        store: Store,
        provider: str,
        limits: Limits,
        knows: Callable[[str], bool] | None = None,
    ) -> None:
        self.store = store
        self.knows = knows or store.known_model  # which models a batch line may name
        self.provider = provider
        self.limits = limits
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, Batch] = {}
        self.made: list[Batch] = []  # every batch created, in order (forgotten ones too)
        self.seq = 0
        self._create_tried: set[str] = set()  # file ids a create was tried for

    def _id(self, prefix: str, alphabet: str = HEX, n: int = 32) -> str:
        return prefix + self.store.decide.token(alphabet, n)

    # files ------------------------------------------------------------------
    def upload(
        self, filename: str, purpose: str, data: bytes, expires_after: dict[str, Any] | None
    ) -> dict[str, Any]:
        if purpose not in (self.limits.purposes or UPLOAD_PURPOSES):
            raise ApiFailure(400, f"Invalid purpose: {purpose!r}", param="purpose")
        limit = self.store.settings.max_batch_bytes if purpose == "batch" else MAX_FILE_BYTES
        if purpose == "batch" and self.limits.batch_file_bytes is not None:
            limit = min(limit, self.limits.batch_file_bytes)
        if len(data) > limit:
            raise ApiFailure(400, "File is too large.", param="file")
        # Not judged by its name (clients that upload bytes name it "upload"), and
        # its lines are checked when a batch is created, as the service does.
        now = int(self.store.now())
        expires = None
        if expires_after is not None:
            seconds = expires_after.get("seconds")
            if expires_after.get("anchor") != "created_at" or not isinstance(seconds, int):
                raise ApiFailure(400, "Invalid expires_after", param="expires_after")
            low, high = self.limits.file_expiry
            if not low <= seconds <= high:
                raise ApiFailure(400, "expires_after.seconds out of range", param="expires_after")
            expires = now + seconds
        elif purpose == "batch":
            expires = now + 2_592_000
        f = StoredFile(self._id("file-", ALNUM, 22), filename, purpose, data, now, expires)
        self.files[f.id] = f
        return f.obj()

    def get_file(self, file_id: str) -> StoredFile:
        f = self.files.get(file_id)
        if f is None:
            raise ApiFailure(404, f"No such File object: {file_id}", param="id")
        return f

    def list_files(
        self, purpose: str | None, order: str, limit: int, after: str | None
    ) -> dict[str, Any]:
        items = [f for f in self.files.values() if purpose is None or f.purpose == purpose]
        if order == "desc":
            items.reverse()
        return page([f.obj() for f in items], limit, after)

    def delete_file(self, file_id: str) -> dict[str, Any]:
        self.get_file(file_id)
        del self.files[file_id]
        return {"id": file_id, "object": "file", "deleted": True}

    # batches ----------------------------------------------------------------
    def create_batch(self, payload: Any) -> dict[str, Any]:
        check_create(payload, self.limits.endpoints, self.limits.windows)
        f = self.files.get(payload["input_file_id"])
        first_try = f is not None and f.id not in self._create_tried
        if f is not None:
            self._create_tried.add(f.id)
        lost = f is not None and first_try and self.store.anomaly("file-not-found", f.id)
        if f is None or f.purpose != "batch" or lost:
            raise ApiFailure(
                400,
                f"Cannot find file {payload['input_file_id']}, or project does not have"
                " access to it.",
                param="file_id",
            )
        expires_after = payload.get("output_expires_after")
        self.seq += 1
        batch = Batch(
            id=self._id("batch_"),
            endpoint=self.limits.endpoints[payload["endpoint"]],
            input_file_id=f.id,
            metadata=dict(payload["metadata"]) if payload.get("metadata") else None,
            created=self.store.now(),
            seq=self.seq,
            output_expires_after=expires_after["seconds"] if expires_after else None,
            window=payload["completion_window"],
        )
        self.batches[batch.id] = batch
        self.made.append(batch)
        return batch.obj(self.store.settings.completion_window)

    def get_batch(self, batch_id: str) -> Batch:
        batch = self.batches.get(batch_id)
        if batch is None:
            raise ApiFailure(404, f"No batch found with id '{batch_id}'.", param="id")
        return batch

    def batch_obj(self, batch_id: str) -> dict[str, Any]:
        return self._polled(self.get_batch(batch_id))

    def list_batches(self, limit: int, after: str | None) -> dict[str, Any]:
        ordered = sorted(self.batches.values(), key=lambda b: b.seq, reverse=True)
        return page([self._polled(b) for b in ordered], limit, after)

    def _polled(self, batch: Batch) -> dict[str, Any]:
        """The batch as a poll sees it (under lagging-counts, with the last poll's counts)."""
        batch.polls += 1
        counts = batch.counts()
        shown = counts
        if batch.reported is not None and self.store.anomaly(
            "lagging-counts", f"{batch.id}#{batch.polls}"
        ):
            shown = batch.reported
        batch.reported = counts
        found = batch.obj(self.store.settings.completion_window, shown)
        ended = batch.stamps.get("completed")
        if (
            ended is not None
            and self.store.anomaly("ended-before-results", batch.id)
            and self.store.now() < ended + 4 * max(self.store.settings.latency, 0.05)
        ):  # completed, its files not yet named
            found |= {"output_file_id": None, "error_file_id": None}
        return found

    def cancel(self, batch_id: str) -> dict[str, Any]:
        batch = self.get_batch(batch_id)
        if batch.status in TERMINAL:
            raise ApiFailure(409, f"Cannot cancel a batch with status '{batch.status}'.")
        if batch.status != "cancelling":
            batch.status = "cancelling"
            batch.stamps["cancelling"] = self.store.now()
        return batch.obj(self.store.settings.completion_window)

    # lifecycle --------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        for batch in sorted(self.batches.values(), key=lambda b: b.seq):
            self._advance(batch, now, flush)

    def _advance(self, batch: Batch, now: float, flush: bool) -> None:
        """Each phase ends when the clock says it did (not when a call first notices), so
        a batch polled an hour late is where an hour puts it."""
        settings = self.store.settings
        lat, window = settings.latency, settings.completion_window * batch.span
        deadline = batch.created + window
        if batch.status == "validating" and (flush or now >= batch.created + lat):
            self._validate(batch, now if flush else min(batch.created + lat, deadline))
        if batch.status == "in_progress":
            # Never past the deadline: a batch always makes progress, but not all at once.
            start = batch.stamps["in_progress"]
            total = len(batch.lines)
            t = min(now, deadline)
            run = self.store.run_seconds(self.provider, batch.id)
            due = min(due_lines(total, start, t, run, flush), total - stuck_tail(self.store, total))
            while batch.executed < due:
                self._execute(batch, batch.order[batch.executed], t)
                batch.executed += 1
            if batch.executed >= total:  # finalizing from when its last line ran
                batch.status = "finalizing"
                batch.stamps["finalizing"] = now if flush else min(t, last_line(start, total, run))
        if batch.status in ("validating", "in_progress") and now >= deadline and not flush:
            self._finish(
                batch,
                deadline,
                "expired",
                "batch_expired",
                "This request could not be executed before the completion window expired.",
            )
            return
        finalizing = lat * settings.anomalies.get("long-finalizing", 1.0)
        if batch.status == "finalizing":
            ready = batch.stamps["finalizing"] + finalizing
            if flush or now >= ready:
                self._finish(batch, now if flush else ready, "completed", None, None)
        elif batch.status == "cancelling":
            ready = batch.stamps["cancelling"] + lat
            if flush or now >= ready:
                batch.counts_reset = True
                self._finish(
                    batch,
                    now if flush else ready,
                    "cancelled",
                    "batch_cancelled",
                    "This request was not executed because the batch was cancelled.",
                )

    def _validate(self, batch: Batch, now: float) -> None:
        f = self.files.get(batch.input_file_id)
        read = (
            parse_input(batch.endpoint, f.data, self.store, self.limits, self.knows)
            if f is not None
            else {"code": "invalid_request", "message": "Input file was deleted.", "line": None}
        )
        error: dict[str, Any] | None = None
        if isinstance(read, Parsed):
            batch.lines, batch.model, batch.tokens = read.lines, read.model, read.tokens
        else:
            error = read
        if error is None and self.store.settings.enqueued_token_limit is not None:
            in_flight = sum(
                b.tokens
                for b in self.batches.values()
                if b is not batch
                and b.model == batch.model
                and b.status in ("in_progress", "finalizing", "cancelling")
            )
            limit = self.store.settings.enqueued_token_limit
            if in_flight + batch.tokens > limit:
                error = {
                    "code": "token_limit_exceeded",
                    "message": f"Enqueued token limit reached for {batch.model} in organization"
                    f" org-emulator. Limit: {limit:,} enqueued tokens. Please try again once"
                    " some in_progress batches have been completed.",
                    "line": None,
                }
        if error is not None:
            batch.status = "failed"
            batch.stamps["failed"] = now
            batch.errors = [{"param": None, **error}]
            batch.lines = []
            return
        batch.order = self.store.decide.shuffled(range(len(batch.lines)), batch.id)
        batch.status = "in_progress"
        batch.stamps["in_progress"] = now

    def _execute(self, batch: Batch, index: int, now: float) -> None:
        line = batch.lines[index]
        request_id = f"req_{self.store.decide.token(HEX, 32)}"
        body = line["body"]
        refusal = check_body(batch.endpoint, body)
        response: dict[str, Any] | None
        error: dict[str, Any] | None = None
        if refusal is not None:
            response = {**refusal, "request_id": request_id}
        else:
            where = f"{batch.id}/{line['custom_id']}"
            response, error = reply(
                self.store, where, batch.endpoint, body, request_id, now, self.provider
            )
        batch.results.append((line["custom_id"], response, error))
        status = None if response is None else response["status_code"]
        self.store.executed(
            self.provider, batch.id, line["custom_id"], status, (response or {}).get("body")
        )

    def _finish(
        self, batch: Batch, now: float, status: str, code: str | None, message: str | None
    ) -> None:
        done = {cid for cid, _, _ in batch.results}
        unfinished = [ln["custom_id"] for ln in batch.lines if ln["custom_id"] not in done]
        out_lines: list[str] = []
        err_lines: list[str] = []
        for custom_id, response, error in batch.results:
            record = {
                "id": self._id("batch_req_"),
                "custom_id": custom_id,
                "response": response,
                "error": error,
            }
            (out_lines if _ok(response, error) else err_lines).append(json.dumps(record))
        for custom_id in unfinished if code else []:
            record = {
                "id": self._id("batch_req_"),
                "custom_id": custom_id,
                "response": None,
                "error": {"code": code, "message": message},
            }
            if code == "batch_expired" and self.store.anomaly(
                "expired-500", f"{batch.id}/{custom_id}"
            ):
                record["response"], record["error"] = SERVER_ERROR, None
            err_lines.append(json.dumps(record))
        out_lines, err_lines = damage_results(out_lines, err_lines, self.store, batch.id)
        out_lines = self.store.decide.shuffled(out_lines, f"{batch.id}/output")
        err_lines = self.store.decide.shuffled(err_lines, f"{batch.id}/errors")
        out_lines = self.store.mangled("output", out_lines)  # tests: broken files
        err_lines = self.store.mangled("error", err_lines)
        batch.output_file_id = self._store_output(batch, "output", out_lines, now)
        batch.error_file_id = self._store_output(batch, "error", err_lines, now)
        batch.status = status
        batch.stamps[status] = now

    def _store_output(self, batch: Batch, kind: str, lines: list[str], now: float) -> str | None:
        if not lines:
            return None
        data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
        f = StoredFile(
            self._id("file-", ALNUM, 22),
            f"{batch.id}_{kind}.jsonl",
            "batch_output",
            data,
            int(now),
            int(now) + (batch.output_expires_after or 2_592_000),
            withheld=batch.id if kind == "output" else None,
        )
        self.files[f.id] = f
        return f.id

    def read_file(self, file_id: str) -> bytes:
        """A file's content: an output file reads empty while the empty-results bad day
        strikes its batch (the counts say every line ran; the file says nothing), and in
        full once that day is over (the anomaly switched off)."""
        f = self.get_file(file_id)
        if f.withheld is not None and self.store.anomaly("empty-results", f.withheld):
            return b""
        return f.data

    # tests --------------------------------------------------------------------
    def restore(self, state: Mapping[str, Any]) -> None:
        """Take over in-flight batches a snapshot holds (their files and batch objects)."""
        for f in state.get("files", []):
            self.files[f["id"]] = StoredFile(
                f["id"],
                f["filename"],
                f["purpose"],
                f["data"].encode("utf-8"),
                int(f.get("created_at", self.store.now())),
            )
        for b in state.get("batches", []):
            self.seq += 1
            batch = Batch(
                id=b["id"],
                endpoint=b["endpoint"],
                input_file_id=b["input_file_id"],
                metadata=b["metadata"],
                created=float(b.get("created_at", self.store.now())),
                seq=self.seq,
            )
            self.batches[batch.id] = batch
            self.made.append(batch)

    def tamper(self, batch_id: str, change: Mapping[str, Any]) -> None:
        """Make a batch vanish (``forget``), report another ``status``, or misreport any
        other field (``{"created_at": "yesterday"}``)."""
        batch = self.get_batch(batch_id)
        if change.get("forget"):
            del self.batches[batch_id]
        if "status" in change:
            batch.status = str(change["status"])
        batch.overrides.update({k: v for k, v in change.items() if k not in ("forget", "status")})

    def ledger(self) -> list[dict[str, Any]]:
        return [
            {
                "id": b.id,
                "provider": self.provider,
                "status": b.status,
                "metadata": b.metadata,
                "input_file_id": b.input_file_id,
                "created_at": int(b.created),
                "custom_ids": [ln["custom_id"] for ln in b.lines],
            }
            for b in self.made
        ]
