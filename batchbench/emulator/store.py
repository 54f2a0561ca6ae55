"""Files, batches and their lifecycle on a clock, as the real Batch API runs them.

Everything here is in memory and guarded by one lock. ``tick()`` advances every
batch to where the clock says it should be: validation, progressive execution
of lines (so expiry and cancellation leave partial output), finalizing and the
output and error files.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from .anomalies import SERVER_ERROR, damage_results
from .anthropic import AnthropicBook
from .fireworks import FireworksBook
from .gemini import GeminiBook
from .model import Responder, run_line
from .objects import (
    MAX_FILE_BYTES,
    TERMINAL,
    UPLOAD_PURPOSES,
    ApiFailure,
    Batch,
    Settings,
    StoredFile,
    check_create,
    due_lines,
    page,
)
from .validate import parse_input


class Store:
    """The emulated service's state. All public methods take the lock."""

    def __init__(
        self,
        settings: Settings,
        seed: int = 0,
        responder: Responder | None = None,
        mangle: Callable[[str, list[str]], list[str]] | None = None,
    ):
        self.settings = settings
        self.responder = responder
        self.mangle = mangle
        self.lock = threading.RLock()
        self.rng = random.Random(seed)
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, Batch] = {}
        self.seq = 0
        self.ledger_batches: list[str] = []
        self.executions: list[dict[str, Any]] = []
        self._create_tried: set[str] = set()  # file ids a create was tried for
        self.anthropic = AnthropicBook(self)  # Anthropic's Message Batches, same clock
        self.gemini = GeminiBook(self)  # Gemini's files and batch jobs, same clock
        self.fireworks = FireworksBook(self)  # Fireworks' datasets and jobs, same clock

    # ids ------------------------------------------------------------------
    def new_id(self, prefix: str) -> str:
        return f"{prefix}{self.rng.getrandbits(96):024x}"

    # files ----------------------------------------------------------------
    def upload(
        self, filename: str, purpose: str, data: bytes, expires_after: dict | None
    ) -> dict[str, Any]:
        with self.lock:
            if purpose not in UPLOAD_PURPOSES:
                raise ApiFailure(400, f"Invalid purpose: {purpose!r}", param="purpose")
            limit = self.settings.max_batch_bytes if purpose == "batch" else MAX_FILE_BYTES
            if len(data) > limit:
                raise ApiFailure(400, "File is too large.", param="file")
            # Not judged by its name (clients that upload bytes name it "upload"), and
            # its lines are checked when a batch is created, as the service does.
            now = int(time.time())
            expires = None
            if expires_after is not None:
                seconds = expires_after.get("seconds")
                if expires_after.get("anchor") != "created_at" or not isinstance(seconds, int):
                    raise ApiFailure(400, "Invalid expires_after", param="expires_after")
                if not 3600 <= seconds <= 2_592_000:
                    raise ApiFailure(400, "expires_after.seconds out of range", "expires_after")
                expires = now + seconds
            elif purpose == "batch":
                expires = now + 2_592_000
            f = StoredFile(self.new_id("file-"), filename, purpose, data, now, expires)
            self.files[f.id] = f
            return f.obj()

    def get_file(self, file_id: str) -> StoredFile:
        with self.lock:
            f = self.files.get(file_id)
            if f is None:
                raise ApiFailure(404, f"No such File object: {file_id}", param="id")
            return f

    def list_files(self, purpose: str | None, order: str, limit: int, after: str | None):
        with self.lock:
            items = [f for f in self.files.values() if purpose is None or f.purpose == purpose]
            if order == "desc":
                items.reverse()
            return page([f.obj() for f in items], limit, after)

    def delete_file(self, file_id: str) -> dict[str, Any]:
        with self.lock:
            self.get_file(file_id)
            del self.files[file_id]
            return {"id": file_id, "object": "file", "deleted": True}

    # batches --------------------------------------------------------------
    def create_batch(self, payload: Any) -> dict[str, Any]:
        with self.lock:
            check_create(payload)
            metadata = payload.get("metadata")
            expires_after = payload.get("output_expires_after")
            f = self.files.get(payload["input_file_id"])
            first_try = f is not None and f.id not in self._create_tried
            if f is not None:
                self._create_tried.add(f.id)
            if f is None or f.purpose != "batch" or (first_try and self.roll("file-not-found")):
                raise ApiFailure(
                    400,
                    f"Cannot find file {payload['input_file_id']}, or project does not have"
                    " access to it.",
                    param="file_id",
                )
            self.seq += 1
            batch = Batch(
                id=self.new_id("batch_"),
                endpoint=payload["endpoint"],
                input_file_id=f.id,
                metadata=dict(metadata) if metadata else None,
                created=time.time(),
                seq=self.seq,
                output_expires_after=expires_after["seconds"] if expires_after else None,
            )
            self.batches[batch.id] = batch
            self.ledger_batches.append(batch.id)
            return batch.obj(self.settings.completion_window)

    def get_batch(self, batch_id: str) -> Batch:
        batch = self.batches.get(batch_id)
        if batch is None:
            raise ApiFailure(404, f"No batch found with id '{batch_id}'.", param="id")
        return batch

    def batch_obj(self, batch_id: str) -> dict[str, Any]:
        with self.lock:
            return self._obj(self.get_batch(batch_id))

    def list_batches(self, limit: int, after: str | None) -> dict[str, Any]:
        with self.lock:
            ordered = sorted(self.batches.values(), key=lambda b: b.seq, reverse=True)
            objs = [self._obj(b) for b in ordered]
            return page(objs, limit, after)

    def cancel(self, batch_id: str) -> dict[str, Any]:
        with self.lock:
            batch = self.get_batch(batch_id)
            if batch.status in TERMINAL:
                raise ApiFailure(409, f"Cannot cancel a batch with status '{batch.status}'.")
            if batch.status != "cancelling":
                batch.status = "cancelling"
                batch.stamps["cancelling"] = time.time()
            return batch.obj(self.settings.completion_window)

    # lifecycle ------------------------------------------------------------
    def tick(self, now: float | None = None, flush: bool = False) -> None:
        """Advance every batch to where the clock puts it (``flush``: to the end)."""
        with self.lock:
            now = time.time() if now is None else now
            for batch in sorted(self.batches.values(), key=lambda b: b.seq):
                self._advance(batch, now, flush)
            self.anthropic.advance(now, flush)
            self.gemini.advance(now, flush)
            self.fireworks.advance(now, flush)

    def _advance(self, batch: Batch, now: float, flush: bool) -> None:
        lat = self.settings.latency
        window = self.settings.completion_window
        deadline = batch.created + window
        if batch.status == "validating" and (flush or now >= batch.created + lat):
            self._validate(batch, min(now, deadline))
        if batch.status == "in_progress":
            # Never past the deadline: a batch always makes progress, but not all at once.
            start = batch.stamps["in_progress"]
            total = len(batch.lines)
            t = min(now, deadline)
            due = due_lines(total, start, t, lat, flush)
            while batch.executed < due:
                self._execute(batch, batch.order[batch.executed])
                batch.executed += 1
            if batch.executed >= total:
                batch.status = "finalizing"
                batch.stamps["finalizing"] = t
        if batch.status in ("validating", "in_progress") and now >= deadline and not flush:
            self._finish(
                batch,
                now,
                "expired",
                "batch_expired",
                "This request could not be executed before the completion window expired.",
            )
            return
        finalizing = lat * self.settings.anomalies.get("long-finalizing", 1.0)
        if batch.status == "finalizing" and (
            flush or now >= batch.stamps["finalizing"] + finalizing
        ):
            self._finish(batch, now, "completed", None, None)
        elif batch.status == "cancelling" and (flush or now >= batch.stamps["cancelling"] + lat):
            batch.counts_reset = True
            self._finish(
                batch,
                now,
                "cancelled",
                "batch_cancelled",
                "This request was not executed because the batch was cancelled.",
            )

    def _validate(self, batch: Batch, now: float) -> None:
        f = self.files.get(batch.input_file_id)
        error = None
        if f is None:
            error = {"code": "invalid_request", "message": "Input file was deleted.", "line": None}
        else:
            error = parse_input(batch, f.data, self.settings, self.rng)
        if error is None and self.settings.enqueued_token_limit is not None:
            in_flight = sum(
                b.tokens
                for b in self.batches.values()
                if b is not batch
                and b.model == batch.model
                and b.status in ("in_progress", "finalizing", "cancelling")
            )
            limit = self.settings.enqueued_token_limit
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
        batch.status = "in_progress"
        batch.stamps["in_progress"] = now

    def _execute(self, batch: Batch, index: int) -> None:
        line = batch.lines[index]
        request_id = f"req_{self.rng.getrandbits(64):016x}"
        try:
            response, error = run_line(line["body"], request_id, self.responder, batch.endpoint)
        except Exception as exc:  # a broken responder is a 500 for that line, not a crash
            response = {
                "status_code": 500,
                "request_id": request_id,
                "body": {
                    "error": {
                        "message": f"responder failed: {exc}",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                },
            }
            error = None
        batch.results.append((line["custom_id"], response, error))
        self.executions.append(
            {
                "batch_id": batch.id,
                "custom_id": line["custom_id"],
                "status_code": None if response is None else response["status_code"],
            }
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
                "id": self.new_id("batch_req_"),
                "custom_id": custom_id,
                "response": response,
                "error": error,
            }
            ok = error is None and response is not None and 200 <= response["status_code"] < 300
            (out_lines if ok else err_lines).append(json.dumps(record))
        for custom_id in unfinished if code else []:
            record = {
                "id": self.new_id("batch_req_"),
                "custom_id": custom_id,
                "response": None,
                "error": {"code": code, "message": message},
            }
            if code == "batch_expired" and self.roll("expired-500"):
                record["response"], record["error"] = SERVER_ERROR, None
            err_lines.append(json.dumps(record))
        out_lines, err_lines = damage_results(out_lines, err_lines, self.roll)
        self.rng.shuffle(out_lines)
        self.rng.shuffle(err_lines)
        if self.mangle is not None:  # tests: a service that returns broken files
            out_lines = self.mangle("output", out_lines)
            err_lines = self.mangle("error", err_lines)
        batch.output_file_id = self._store_output(batch, "output", out_lines)
        batch.error_file_id = self._store_output(batch, "error", err_lines)
        batch.status = status
        batch.stamps[status] = now

    def _obj(self, batch: Batch) -> dict[str, Any]:
        """The batch as a poll sees it (its counts a poll behind, under lagging-counts)."""
        batch.lag = self.roll("lagging-counts")
        return batch.obj(self.settings.completion_window)

    def roll(self, anomaly: str) -> bool:
        rate = self.settings.anomalies.get(anomaly)
        return rate is not None and self.rng.random() < rate

    def _store_output(self, batch: Batch, kind: str, lines: list[str]) -> str | None:
        if not lines:
            return None
        data = ("\n".join(lines) + "\n").encode("utf-8")
        f = StoredFile(
            self.new_id("file-"),
            f"{batch.id}_{kind}.jsonl",
            "batch_output",
            data,
            int(time.time()),
            int(time.time()) + (batch.output_expires_after or 2_592_000),
        )
        self.files[f.id] = f
        return f.id

    def restore(self, state: dict[str, Any]) -> None:
        """Tests: take over in-flight batches another emulator held (a snapshot's
        ``files`` and ``batches``), as a service outlives a client's process. Their
        clocks restart now, in the snapshot's order."""
        with self.lock:
            now = time.time()
            for f in state["files"]:
                data = f["data"].encode("utf-8")
                stored = StoredFile(f["id"], f["filename"], f["purpose"], data, int(now))
                self.files[f["id"]] = stored
            for b in state["batches"]:
                self.seq += 1
                batch = Batch(
                    id=b["id"],
                    endpoint=b["endpoint"],
                    input_file_id=b["input_file_id"],
                    metadata=b["metadata"],
                    created=now,
                    seq=self.seq,
                )
                self.batches[batch.id] = batch
                self.ledger_batches.append(batch.id)

    def tamper(self, batch_id: str, change: dict[str, Any]) -> None:
        """Tests: make a batch vanish (``forget``) or report another ``status``."""
        with self.lock:
            batch = self.get_batch(batch_id)
            if change.get("forget"):
                del self.batches[batch_id]
            if "status" in change:
                batch.status = change["status"]

    def ledger(self) -> dict[str, Any]:
        with self.lock:
            return {
                "batches": [
                    {
                        "id": b.id,
                        "provider": "openai",
                        "status": b.status,
                        "metadata": b.metadata,
                        "input_file_id": b.input_file_id,
                        "created_at": int(b.created),
                    }
                    for b in (self.batches[i] for i in self.ledger_batches)
                ]
                + self.anthropic.ledger()
                + self.gemini.ledger()
                + self.fireworks.ledger(),
                "executions": list(self.executions),
            }
