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
from dataclasses import dataclass, field
from typing import Any

from .model import Responder, prompt_tokens, run_line

ENDPOINTS = (
    "/v1/responses",
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/completions",
    "/v1/moderations",
    "/v1/images/generations",
    "/v1/images/edits",
    "/v1/videos",
)
UPLOAD_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
TERMINAL = ("completed", "failed", "expired", "cancelled")
MAX_LINES = 50_000
MAX_BATCH_BYTES = 200 * 1024 * 1024
MAX_FILE_BYTES = 512 * 1024 * 1024


class ApiFailure(Exception):
    """An HTTP error reply with the real error envelope."""

    def __init__(self, status: int, message: str, param: str | None = None, code: Any = None):
        super().__init__(message)
        self.status = status
        self.body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": code,
            }
        }


@dataclass
class Settings:
    latency: float = 0.05
    completion_window: float = 86400.0
    enqueued_token_limit: int | None = None
    paused: bool = False
    max_lines: int = MAX_LINES
    max_batch_bytes: int = MAX_BATCH_BYTES


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int
    expires_at: int | None = None

    def obj(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": self.expires_at,
            "status_details": None,
        }


@dataclass
class Batch:
    id: str
    endpoint: str
    input_file_id: str
    metadata: dict[str, str] | None
    created: float
    seq: int
    status: str = "validating"
    model: str | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # lines run in parallel: any order
    tokens: int = 0
    executed: int = 0
    results: list[tuple[str, dict | None, dict | None]] = field(default_factory=list)
    stamps: dict[str, float] = field(default_factory=dict)
    errors: list[dict[str, Any]] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts_reset: bool = False

    def obj(self, window: float) -> dict[str, Any]:
        ok = sum(1 for _, r, e in self.results if e is None and r and 200 <= r["status_code"] < 300)
        failed = len(self.results) - ok
        if self.status in ("validating", "failed"):
            counts = {"total": 0, "completed": 0, "failed": 0}
        else:
            counts = {"total": len(self.lines), "completed": ok, "failed": failed}
            if self.counts_reset:  # observed on cancelled batches: completed reset to 0
                counts["completed"] = 0
        usage = {"input_tokens": 0, "output_tokens": 0, "cached": 0, "reasoning": 0}
        for _, response, error in self.results:
            if error is None and response and 200 <= response["status_code"] < 300:
                u = (response.get("body") or {}).get("usage") or {}
                usage["input_tokens"] += int(u.get("prompt_tokens") or 0)
                usage["output_tokens"] += int(u.get("completion_tokens") or 0)
                usage["cached"] += int(
                    (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                )
                usage["reasoning"] += int(
                    (u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
                )

        def stamp(name: str) -> int | None:
            value = self.stamps.get(name)
            return None if value is None else int(value)

        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "model": self.model,
            "errors": None if self.errors is None else {"object": "list", "data": self.errors},
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.created),
            "in_progress_at": stamp("in_progress"),
            "expires_at": int(self.created + window),
            "finalizing_at": stamp("finalizing"),
            "completed_at": stamp("completed"),
            "failed_at": stamp("failed"),
            "expired_at": stamp("expired"),
            "cancelling_at": stamp("cancelling"),
            "cancelled_at": stamp("cancelled"),
            "request_counts": counts,
            "usage": {
                "input_tokens": usage["input_tokens"],
                "input_tokens_details": {"cached_tokens": usage["cached"]},
                "output_tokens": usage["output_tokens"],
                "output_tokens_details": {"reasoning_tokens": usage["reasoning"]},
                "total_tokens": usage["input_tokens"] + usage["output_tokens"],
            },
            "metadata": self.metadata,
        }


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
        self._rng = random.Random(seed)
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, Batch] = {}
        self._seq = 0
        self.ledger_batches: list[str] = []
        self.executions: list[dict[str, Any]] = []

    # ids ------------------------------------------------------------------
    def _id(self, prefix: str) -> str:
        return f"{prefix}{self._rng.getrandbits(96):024x}"

    # files ----------------------------------------------------------------
    def upload(
        self, filename: str, purpose: str, data: bytes, expires_after: dict | None
    ) -> dict[str, Any]:
        with self.lock:
            if purpose not in UPLOAD_PURPOSES:
                raise ApiFailure(400, f"Invalid purpose: {purpose!r}", param="purpose")
            if len(data) > MAX_FILE_BYTES:
                raise ApiFailure(400, "File is too large.", param="file")
            if purpose == "batch" and not filename.endswith(".jsonl"):
                raise ApiFailure(400, "Invalid file format for Batch API. Must be .jsonl", "file")
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
            f = StoredFile(self._id("file-"), filename, purpose, data, now, expires)
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
            return _page([f.obj() for f in items], limit, after)

    def delete_file(self, file_id: str) -> dict[str, Any]:
        with self.lock:
            self.get_file(file_id)
            del self.files[file_id]
            return {"id": file_id, "object": "file", "deleted": True}

    # batches --------------------------------------------------------------
    def create_batch(self, payload: Any) -> dict[str, Any]:
        with self.lock:
            if not isinstance(payload, dict):
                raise ApiFailure(400, "Request body must be a JSON object")
            for key in ("input_file_id", "endpoint", "completion_window"):
                if key not in payload:
                    raise ApiFailure(400, f"Missing required parameter: '{key}'.", param=key)
            if payload["endpoint"] not in ENDPOINTS:
                raise ApiFailure(400, f"Invalid endpoint: {payload['endpoint']!r}", "endpoint")
            if payload["completion_window"] != "24h":
                raise ApiFailure(
                    400, "Invalid completion_window: only '24h' is supported", "completion_window"
                )
            metadata = payload.get("metadata")
            if metadata is not None:
                _check_metadata(metadata)
            f = self.files.get(payload["input_file_id"])
            if f is None or f.purpose != "batch":
                raise ApiFailure(
                    400,
                    f"Cannot find file {payload['input_file_id']}, or project does not have"
                    " access to it.",
                    param="file_id",
                )
            self._seq += 1
            batch = Batch(
                id=self._id("batch_"),
                endpoint=payload["endpoint"],
                input_file_id=f.id,
                metadata=dict(metadata) if metadata else None,
                created=time.time(),
                seq=self._seq,
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
            return self.get_batch(batch_id).obj(self.settings.completion_window)

    def list_batches(self, limit: int, after: str | None) -> dict[str, Any]:
        with self.lock:
            ordered = sorted(self.batches.values(), key=lambda b: b.seq, reverse=True)
            objs = [b.obj(self.settings.completion_window) for b in ordered]
            return _page(objs, limit, after)

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
            if self.settings.paused and not flush:
                return
            now = time.time() if now is None else now
            for batch in sorted(self.batches.values(), key=lambda b: b.seq):
                self._advance(batch, now, flush)

    def _advance(self, batch: Batch, now: float, flush: bool) -> None:
        lat = self.settings.latency
        window = self.settings.completion_window
        deadline = batch.created + window
        if batch.status == "validating" and (flush or now >= batch.created + lat):
            self._validate(batch, min(now, deadline))
        if batch.status == "in_progress":
            # Line i runs at start + latency * i / total (the first at once), never
            # past the deadline: a batch always makes progress, but not all at once.
            start = batch.stamps["in_progress"]
            total = len(batch.lines)
            t = min(now, deadline)
            due = total if flush or lat <= 0 else min(total, int(total * (t - start) / lat) + 1)
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
        if batch.status == "finalizing" and (flush or now >= batch.stamps["finalizing"] + lat):
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
            error = self._parse_lines(batch, f.data)
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

    def _parse_lines(self, batch: Batch, data: bytes) -> dict[str, Any] | None:
        def fail(code: str, message: str, line: int | None) -> dict[str, Any]:
            return {"code": code, "message": message, "line": line}

        limit = self.settings.max_batch_bytes
        if len(data) > limit:
            return fail(
                "file_too_large", f"The batch input file is larger than {limit} bytes.", None
            )
        raw_lines = data.decode("utf-8", "replace").split("\n")
        if raw_lines and raw_lines[-1] == "":
            raw_lines.pop()
        if not raw_lines:
            return fail("empty_file", "The input file is empty.", None)
        if len(raw_lines) > self.settings.max_lines:
            return fail(
                "too_many_tasks",
                f"The batch has {len(raw_lines)} requests; the limit is {self.settings.max_lines}.",
                None,
            )
        seen: set[str] = set()
        model = None
        lines: list[dict[str, Any]] = []
        tokens = 0
        for n, text in enumerate(raw_lines, 1):
            try:
                obj = json.loads(text)
            except json.JSONDecodeError:
                return fail("invalid_json_line", f"Line {n} is not valid JSON.", n)
            if not isinstance(obj, dict):
                return fail("invalid_json_line", f"Line {n} is not a JSON object.", n)
            for key in ("custom_id", "method", "url", "body"):
                if key not in obj:
                    return fail(
                        "missing_required_parameter",
                        f"Missing required parameter '{key}' on line {n}.",
                        n,
                    )
            if not isinstance(obj["custom_id"], str):
                return fail("invalid_request", f"custom_id must be a string on line {n}.", n)
            if obj["custom_id"] in seen:
                return fail(
                    "duplicate_custom_id",
                    f"The custom_id '{obj['custom_id']}' on line {n} is not unique.",
                    n,
                )
            seen.add(obj["custom_id"])
            if obj["method"] != "POST":
                return fail("invalid_request", f"Only POST is supported (line {n}).", n)
            if obj["url"] != batch.endpoint:
                return fail(
                    "invalid_url",
                    f"The url '{obj['url']}' on line {n} does not match the batch"
                    f" endpoint '{batch.endpoint}'.",
                    n,
                )
            body = obj["body"]
            if not isinstance(body, dict):
                return fail("invalid_request", f"body must be an object on line {n}.", n)
            if body.get("stream") is True:
                return fail("streaming_unsupported", f"Streaming is not supported (line {n}).", n)
            line_model = body.get("model")
            if not isinstance(line_model, str) or not line_model:
                return fail("missing_required_parameter", f"Missing 'model' on line {n}.", n)
            if model is None:
                model = line_model
            elif line_model != model:
                return fail(
                    "mismatched_model",
                    f"Line {n} uses model '{line_model}' but the file uses '{model}';"
                    " a batch may use only one model.",
                    n,
                )
            tokens += prompt_tokens(body)
            lines.append(obj)
        batch.model = model
        batch.lines = lines
        batch.order = list(range(len(lines)))
        self._rng.shuffle(batch.order)
        batch.tokens = tokens
        return None

    def _execute(self, batch: Batch, index: int) -> None:
        line = batch.lines[index]
        request_id = f"req_{self._rng.getrandbits(64):016x}"
        try:
            response, error = run_line(line["body"], request_id, self.responder)
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
                "id": self._id("batch_req_"),
                "custom_id": custom_id,
                "response": response,
                "error": error,
            }
            ok = error is None and response is not None and 200 <= response["status_code"] < 300
            (out_lines if ok else err_lines).append(json.dumps(record))
        for custom_id in unfinished if code else []:
            record = {
                "id": self._id("batch_req_"),
                "custom_id": custom_id,
                "response": None,
                "error": {"code": code, "message": message},
            }
            err_lines.append(json.dumps(record))
        self._rng.shuffle(out_lines)
        self._rng.shuffle(err_lines)
        if self.mangle is not None:  # tests: a service that returns broken files
            out_lines = self.mangle("output", out_lines)
            err_lines = self.mangle("error", err_lines)
        batch.output_file_id = self._store_output(batch, "output", out_lines)
        batch.error_file_id = self._store_output(batch, "error", err_lines)
        batch.status = status
        batch.stamps[status] = now

    def _store_output(self, batch: Batch, kind: str, lines: list[str]) -> str | None:
        if not lines:
            return None
        data = ("\n".join(lines) + "\n").encode("utf-8")
        f = StoredFile(
            self._id("file-"),
            f"{batch.id}_{kind}.jsonl",
            "batch_output",
            data,
            int(time.time()),
            int(time.time()) + 2_592_000,
        )
        self.files[f.id] = f
        return f.id

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
                        "status": b.status,
                        "metadata": b.metadata,
                        "input_file_id": b.input_file_id,
                        "created_at": int(b.created),
                    }
                    for b in (self.batches[i] for i in self.ledger_batches)
                ],
                "executions": list(self.executions),
            }


def _check_metadata(metadata: Any) -> None:
    if not isinstance(metadata, dict):
        raise ApiFailure(400, "metadata must be an object", param="metadata")
    if len(metadata) > 16:
        raise ApiFailure(400, "metadata may have at most 16 keys", param="metadata")
    for key, value in metadata.items():
        if not isinstance(key, str) or len(key) > 64:
            raise ApiFailure(
                400, "metadata keys must be strings of at most 64 characters", param="metadata"
            )
        if not isinstance(value, str) or len(value) > 512:
            raise ApiFailure(
                400,
                f"metadata value for {key!r} must be a string of at most 512 characters",
                param="metadata",
            )


def _page(items: list[dict[str, Any]], limit: int, after: str | None) -> dict[str, Any]:
    start = 0
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise ApiFailure(400, f"Invalid 'after' cursor: {after}", param="after")
        start = ids.index(after) + 1
    page = items[start : start + limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": start + limit < len(items),
    }
