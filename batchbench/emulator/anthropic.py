"""Anthropic's Message Batches API, emulated: batches, their clock, and their results.

As the service runs them (``../shared/spec/provider-batch-apis.md`` §1): the
requests travel inline in the create call, whose envelope is checked at once
(``custom_id`` format and uniqueness, 100,000 requests, 256 MB: a 413), while
each request's ``params`` are checked only when it runs (an ``errored`` result).
A batch is ``in_progress`` from its creation, its lines run progressively, and
``request_counts`` say ``processing`` for every line until the batch has ended;
a cancel goes through ``canceling`` and ends the unfinished lines ``canceled``,
the completion window ends them ``expired``. Results come, in any order, from
``results_url`` (this emulator's own address), only once the batch has ended;
a batch is deleted only once it has ended.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .endpoints import request_text, tokens
from .model import default_content
from .objects import ApiFailure, due_lines

if TYPE_CHECKING:
    from .store import Store

MAX_REQUESTS = 100_000
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# The Messages API's parameters (the installed SDK's MessageCreateParams); any other
# errors the request when it runs, as the service validates params asynchronously.
PARAMS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
        "thinking", "tool_choice", "tools", "service_tier", "output_config", "container",
        "cache_control", "inference_geo", "diagnostics", "speed", "user_profile_id",
        "workspace_id",
    }
)  # fmt: skip
EFFORTS = ("low", "medium", "high", "xhigh", "max")
# An error type and the HTTP status it stands for (Anthropic's error documentation).
ERROR_TYPES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "conflict_error": 409,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
TYPE_OF_STATUS = {status: kind for kind, status in ERROR_TYPES.items()}


def error_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    """Anthropic's error envelope."""
    return {
        "type": "error",
        "error": {"type": kind or TYPE_OF_STATUS.get(status, "api_error"), "message": message},
    }


def rfc3339(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def check_params(params: Any) -> str | None:
    """Why the Messages API would refuse these params (None: it would not)."""
    if not isinstance(params, dict):
        return "params: Input should be a valid dictionary"
    for key in ("model", "max_tokens", "messages"):
        if key not in params:
            return f"{key}: Field required"
    unknown = sorted(set(params) - PARAMS)
    if unknown:
        return f"{unknown[0]}: Extra inputs are not permitted"
    if params.get("stream") is True:
        return "stream: streaming is not supported in a Message Batch"
    if "speed" in params:
        return "speed: fast mode is not supported in a Message Batch"
    max_tokens = params["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    messages = params["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if any(not isinstance(m, dict) or m.get("role") not in ("user", "assistant") for m in messages):
        return "messages: each message needs a role of user or assistant"
    if "system" in params and not isinstance(params["system"], (str, list)):
        return "system: Input should be a valid string or list of text blocks"
    effort = (params.get("output_config") or {}).get("effort")
    if effort is not None and effort not in EFFORTS:
        return f"output_config.effort: Input should be one of {', '.join(EFFORTS)}"
    return None


def message(params: dict[str, Any], text: str, request_id: str) -> dict[str, Any]:
    """A Messages API reply holding one text block."""
    system = params.get("system")
    system_text = system if isinstance(system, str) else json.dumps(system or "")
    return {
        "id": f"msg_{request_id}",
        "type": "message",
        "role": "assistant",
        "model": params.get("model"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": tokens(system_text + request_text(params)),
            "output_tokens": tokens(text),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "batch",
        },
    }


def run_request(store: Store, params: Any, request_id: str) -> dict[str, Any]:
    """One executed request's ``result``: the responder's reply in this API's shapes."""
    problem = check_params(params)
    if problem is not None:
        return {"type": "errored", "error": error_body(400, problem)}
    try:
        reply = store.responder(params) if store.responder else default_content(params)
    except Exception as exc:  # a broken responder is an api_error for that line
        return {"type": "errored", "error": error_body(500, f"responder failed: {exc}")}
    if isinstance(reply, str):
        return {"type": "succeeded", "message": message(params, reply, request_id)}
    if isinstance(reply, dict) and isinstance(reply.get("status_code"), int):
        status, body = reply["status_code"], reply.get("body")
        if 200 <= status < 300:
            return {"type": "succeeded", "message": body}
        if not (isinstance(body, dict) and body.get("type") == "error"):
            body = error_body(status, json.dumps(body))
        return {"type": "errored", "error": body}
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        return {"type": "errored", "error": {"type": "error", "error": reply["error"]}}
    raise TypeError(f"responder returned {type(reply).__name__}; expected str or dict")


@dataclass
class MessageBatch:
    id: str
    created: float
    seq: int
    requests: list[dict[str, Any]]
    order: list[int]  # requests run in parallel: any order
    status: str = "in_progress"
    executed: int = 0
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom_id → result
    stamps: dict[str, float] = field(default_factory=dict)
    output: bytes | None = None  # the results file, once ended

    def counts(self) -> dict[str, int]:
        if self.status != "ended":
            return {
                "processing": len(self.requests),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            }
        out = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for result in self.results.values():
            out[result["type"]] += 1
        return out

    def obj(self, base: str, window: float) -> dict[str, Any]:
        ended = self.status == "ended"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": self.counts(),
            "created_at": rfc3339(self.created),
            "expires_at": rfc3339(self.created + window),
            "ended_at": rfc3339(self.stamps.get("ended")),
            "cancel_initiated_at": rfc3339(self.stamps.get("canceling")),
            "archived_at": None,
            "results_url": f"{base}/v1/messages/batches/{self.id}/results" if ended else None,
        }


class AnthropicBook:
    """The Message Batches the emulated service holds; the store's lock guards them."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.batches: dict[str, MessageBatch] = {}
        self.made: list[MessageBatch] = []  # every batch created, deleted ones too

    def create(self, payload: Any, size: int) -> MessageBatch:
        settings = self.store.settings
        if size > settings.max_request_bytes:
            raise ApiFailure.anthropic(
                413, f"Request exceeds the maximum size of {settings.max_request_bytes} bytes",
                "request_too_large",
            )  # fmt: skip
        requests = payload.get("requests") if isinstance(payload, dict) else None
        if not isinstance(requests, list) or not requests:
            raise ApiFailure.anthropic(400, "requests: Field required (a non-empty list)")
        if len(requests) > MAX_REQUESTS:
            raise ApiFailure.anthropic(
                400, f"requests: at most {MAX_REQUESTS} requests in a Message Batch"
            )
        seen: set[str] = set()
        for n, request in enumerate(requests):
            cid = request.get("custom_id") if isinstance(request, dict) else None
            if not isinstance(cid, str) or not CUSTOM_ID.match(cid):
                raise ApiFailure.anthropic(
                    400, f"requests.{n}.custom_id: String should match pattern"
                    " '^[a-zA-Z0-9_-]{1,64}$'",
                )  # fmt: skip
            if cid in seen:
                raise ApiFailure.anthropic(
                    400, f"requests.{n}.custom_id: duplicate custom_id {cid!r}; custom_id"
                    " must be unique within a Message Batch",
                )  # fmt: skip
            if "params" not in request:
                raise ApiFailure.anthropic(400, f"requests.{n}.params: Field required")
            seen.add(cid)
        store = self.store
        order = list(range(len(requests)))
        store.rng.shuffle(order)
        store.seq += 1
        batch = MessageBatch(store.new_id("msgbatch_"), time.time(), store.seq, requests, order)
        self.batches[batch.id] = batch
        self.made.append(batch)
        return batch

    def get(self, batch_id: str) -> MessageBatch:
        batch = self.batches.get(batch_id)
        if batch is None:
            raise ApiFailure.anthropic(404, f"message batch {batch_id!r} not found")
        return batch

    def page(
        self, limit: int, after_id: str | None, before_id: str | None
    ) -> tuple[list[MessageBatch], bool]:
        """A page, newest first, and whether there is more beyond it: ``after_id``, the
        page of older batches after that one; ``before_id``, of newer ones before it."""
        ordered = sorted(self.batches.values(), key=lambda b: b.seq, reverse=True)
        ids = [b.id for b in ordered]
        for cursor in (after_id, before_id):
            if cursor is not None and cursor not in ids:
                raise ApiFailure.anthropic(400, f"invalid pagination cursor {cursor!r}")
        if before_id is not None:
            newer = ordered[: ids.index(before_id)]
            return newer[-limit:], len(newer) > limit
        older = ordered[ids.index(after_id) + 1 :] if after_id is not None else ordered
        return older[:limit], len(older) > limit

    def cancel(self, batch_id: str) -> MessageBatch:
        batch = self.get(batch_id)
        if batch.status == "ended":
            raise ApiFailure.anthropic(
                400, f"message batch {batch_id!r} has already ended and cannot be canceled"
            )
        if batch.status != "canceling":
            batch.status = "canceling"
            batch.stamps["canceling"] = time.time()
        return batch

    def delete(self, batch_id: str) -> dict[str, Any]:
        batch = self.get(batch_id)
        if batch.status != "ended":
            raise ApiFailure.anthropic(
                400, f"message batch {batch_id!r} is still processing; cancel it and wait for"
                " it to end before deleting it",
            )  # fmt: skip
        del self.batches[batch_id]
        return {"id": batch_id, "type": "message_batch_deleted"}

    def results(self, batch_id: str) -> bytes:
        batch = self.get(batch_id)
        if batch.output is None:
            raise ApiFailure.anthropic(
                400, f"message batch {batch_id!r} has not ended; its results are not ready"
            )
        return batch.output

    # the clock ----------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        settings = self.store.settings
        for batch in sorted(self.batches.values(), key=lambda b: b.seq):
            if batch.status == "ended":
                continue
            deadline = batch.created + settings.completion_window
            total = len(batch.requests)
            if batch.status == "in_progress":
                due = due_lines(total, batch.created, min(now, deadline), settings.latency, flush)
                while batch.executed < due:
                    self._execute(batch, batch.order[batch.executed])
                    batch.executed += 1
                if batch.executed >= total:
                    batch.stamps.setdefault("done", now)
                    # Results are written a while after the last line (long-finalizing).
                    delay = settings.latency * settings.anomalies.get("long-finalizing", 1.0)
                    if flush or now >= batch.stamps["done"] + delay:
                        self._end(batch, now, None)
                elif now >= deadline and not flush:
                    self._end(batch, now, "expired")
            elif batch.status == "canceling" and (
                flush or now >= batch.stamps["canceling"] + settings.latency
            ):
                self._end(batch, now, "canceled")

    def _execute(self, batch: MessageBatch, index: int) -> None:
        request = batch.requests[index]
        request_id = f"{self.store.rng.getrandbits(64):016x}"
        result = run_request(self.store, request.get("params"), request_id)
        batch.results[request["custom_id"]] = result
        status = (
            200
            if result["type"] == "succeeded"
            else ERROR_TYPES.get(str(result["error"].get("error", {}).get("type")), 500)
        )
        self.store.executions.append(
            {"batch_id": batch.id, "custom_id": request["custom_id"], "status_code": status}
        )

    def _end(self, batch: MessageBatch, now: float, unfinished: str | None) -> None:
        roll = self.store.roll
        for request in batch.requests:
            cid = request["custom_id"]
            if cid not in batch.results:
                kind = unfinished or "canceled"
                if kind == "expired" and roll("expired-500"):
                    batch.results[cid] = {
                        "type": "errored",
                        "error": error_body(500, "Internal server error"),
                    }
                else:
                    batch.results[cid] = {"type": kind}
        lines = [
            json.dumps({"custom_id": cid, "result": result})
            for cid, result in batch.results.items()
            if not (result["type"] == "succeeded" and roll("missing-lines"))
        ]
        self.store.rng.shuffle(lines)  # in any order
        if self.store.mangle is not None:
            lines = self.store.mangle("results", lines)
        batch.output = "".join(line + "\n" for line in lines).encode()
        batch.status = "ended"
        batch.stamps["ended"] = now

    def ledger(self) -> list[dict[str, Any]]:
        return [
            {
                "id": b.id,
                "provider": "anthropic",
                "status": b.status,
                "custom_ids": [r["custom_id"] for r in b.requests],
                "created_at": int(b.created),
            }
            for b in self.made
        ]
