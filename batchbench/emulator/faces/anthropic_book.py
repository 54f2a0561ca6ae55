"""The anthropic service's book, emulated: its records and their clock (the face,
:mod:`.anthropic`, serves them over HTTP)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..anomalies import missing_lines
from ..core import BASE58, Store, due_lines, last_line, rfc3339
from ..endpoints import tokens
from ..model import request_text

MAX_REQUESTS = 100_000
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# The Messages API's parameters (the installed SDK's MessageCreateParams); any other
# errors the request when it runs, as the service validates params asynchronously.
PARAMS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "metadata",
        "stop_sequences",
        "stream",
        "thinking",
        "tool_choice",
        "tools",
        "service_tier",
        "output_config",
        "container",
        "cache_control",
        "inference_geo",
        "diagnostics",
        "speed",
        "user_profile_id",
        "workspace_id",
    }
)
SAMPLING = frozenset({"temperature", "top_p", "top_k"})
# API versions: those up to 2023-06-01 still take the sampling parameters.
VERSIONS = {"2023-01-01": PARAMS | SAMPLING, "2023-06-01": PARAMS | SAMPLING, "2026-10-21": PARAMS}
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
# When Anthropic's models were made (GET /v1/models/{id}).
CREATED = {
    "claude-opus-5": "2026-09-24T00:00:00Z",
    "claude-opus-4-8": "2026-05-14T00:00:00Z",
    "claude-sonnet-4-6": "2026-02-17T00:00:00Z",
    "claude-sonnet-4-5": "2025-09-29T00:00:00Z",
    "claude-haiku-4-5": "2025-10-15T00:00:00Z",
}


def error_body(status: int, message: str, kind: str | None, request_id: str) -> dict[str, Any]:
    """Anthropic's error envelope."""
    return {
        "type": "error",
        "error": {"type": kind or TYPE_OF_STATUS.get(status, "api_error"), "message": message},
        "request_id": request_id,
    }


def check_params(params: Any, allowed: frozenset[str]) -> str | None:
    """Why the Messages API would refuse these params (None: it would not)."""
    if not isinstance(params, dict):
        return "params: Input should be a valid dictionary"
    for key in ("model", "max_tokens", "messages"):
        if key not in params:
            return f"{key}: Field required"
    unknown = sorted(set(params) - allowed)
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
    temperature = params.get("temperature")
    if temperature is not None and not (
        isinstance(temperature, (int, float)) and 0 <= temperature <= 1
    ):
        return "temperature: Input should be less than or equal to 1"
    return None


def input_tokens(params: dict[str, Any]) -> int:
    """A Messages request's input tokens, as its reply's usage (and CountTokens) says."""
    system = params.get("system")
    system_text = system if isinstance(system, str) else json.dumps(system or "")
    return tokens(system_text + request_text(params))


def message(
    params: dict[str, Any], text: str, message_id: str, tier: str = "batch"
) -> dict[str, Any]:
    """A Messages API reply holding one text block (``tier``: the usage's service tier)."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": params.get("model"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens(params),
            "output_tokens": tokens(text),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": tier,
        },
    }


@dataclass
class MessageBatch:
    id: str
    created: float
    seq: int
    requests: list[dict[str, Any]]
    order: list[int]  # requests run in parallel: any order
    version: str  # the API version the create named: its params are checked against it
    status: str = "in_progress"
    executed: int = 0
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom_id → result
    stamps: dict[str, float] = field(default_factory=dict)
    output: bytes | None = None  # the results file, once ended

    def counts(self) -> dict[str, int]:
        out = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if self.status != "ended":
            out["processing"] = len(self.requests)
            return out
        for result in self.results.values():
            out[result["type"]] += 1
        return out

    def obj(self, base: str, window: float, results_ready: bool = True) -> dict[str, Any]:
        ended = self.status == "ended" and results_ready
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
    """What the emulated anthropic service holds, and how its batches move with the clock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.batches: dict[str, MessageBatch] = {}
        self.made: list[MessageBatch] = []  # every batch created, deleted ones too
        self.seq = 0

    def _request_id(self) -> str:
        return "req_011" + self.store.decide.token(BASE58, 21)

    # the clock ----------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        settings = self.store.settings
        for batch in sorted(self.batches.values(), key=lambda b: b.seq):
            if batch.status == "ended":
                continue
            deadline = batch.created + settings.completion_window
            total = len(batch.requests)
            if batch.status == "in_progress":
                run = self.store.run_seconds("anthropic", batch.id)  # recorded turnaround
                due = due_lines(total, batch.created, min(now, deadline), run, flush)
                while batch.executed < due:
                    self._execute(batch, batch.order[batch.executed])
                    batch.executed += 1
                if batch.executed >= total:
                    done = now if flush else last_line(batch.created, total, run)
                    batch.stamps.setdefault("done", done)
                    # Results are written a while after the last line (long-finalizing).
                    ready = batch.stamps["done"] + settings.latency * settings.anomalies.get(
                        "long-finalizing", 1.0
                    )
                    if flush or now >= ready:
                        self._end(batch, now if flush else ready, None)
                elif now >= deadline and not flush:
                    self._end(batch, deadline, "expired")
            elif batch.status == "canceling":
                ready = batch.stamps["canceling"] + settings.latency
                if flush or now >= ready:
                    self._end(batch, now if flush else ready, "canceled")

    def _execute(self, batch: MessageBatch, index: int) -> None:
        request = batch.requests[index]
        line = f"{batch.id}/{request['custom_id']}"
        result = self._run(batch.version, batch.id, request.get("params"), line)
        batch.results[request["custom_id"]] = result
        status = (
            200
            if result["type"] == "succeeded"
            else ERROR_TYPES.get(str(result["error"].get("error", {}).get("type")), 500)
        )
        self.store.executed(
            "anthropic", batch.id, request["custom_id"], status, result.get("message")
        )

    def _errored(self, status: int, message: str, kind: str | None = None) -> dict[str, Any]:
        return {"type": "errored", "error": error_body(status, message, kind, self._request_id())}

    def sync(self, version: str, params: Any, name: str) -> tuple[int, dict[str, Any]]:
        """One Messages API call (``name``: what the ledger calls it), billed at the list
        price: ``(status, body)``, the message or the error envelope."""
        result = self._run(version, f"sync/{name}", params, f"sync/{name}", "standard")
        if result["type"] == "succeeded":
            status, body = 200, result["message"]
        else:
            body = result["error"]
            status = ERROR_TYPES.get(str(body.get("error", {}).get("type")), 500)
        self.store.executed("anthropic", "sync", name, status, body if status == 200 else None)
        return status, body

    def _run(
        self, version: str, batch_id: str, params: Any, line: str, tier: str = "batch"
    ) -> dict[str, Any]:
        """One executed request's ``result``: the responder's reply in this API's shapes
        (``batch_id``: where its cache writes are, which its batch's own lines cannot
        read)."""
        problem = check_params(params, VERSIONS.get(version, PARAMS))
        if problem is not None:
            return self._errored(400, problem)
        assert isinstance(params, dict)
        if not self.store.known_model(str(params["model"])):
            return self._errored(404, f"model: {params['model']}", "not_found_error")
        try:
            reply = self.store.model.reply(params, params, line, self.store.settings.judge_noise)
        except Exception as exc:  # a broken responder is an api_error for that line
            return self._errored(500, f"responder failed: {exc}")
        if isinstance(reply, str):
            message_id = "msg_01" + self.store.decide.token(BASE58, 22)
            made = message(params, reply, message_id, tier)
            self._cache(batch_id, params, made["usage"])
            return {"type": "succeeded", "message": made}
        if isinstance(reply, dict) and isinstance(reply.get("status_code"), int):
            status, body = reply["status_code"], reply.get("body")
            if 200 <= status < 300:
                return {"type": "succeeded", "message": body}
            if isinstance(body, dict) and body.get("type") == "error":
                return {"type": "errored", "error": body}
            return self._errored(status, json.dumps(body))
        if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
            return {"type": "errored", "error": {"type": "error", "error": reply["error"]}}
        return self._errored(
            500, f"responder returned {type(reply).__name__}; expected str or dict"
        )

    def _cache(self, batch_id: str, params: dict[str, Any], usage: dict[str, Any]) -> None:
        """A request marking a prefix (``cache_control``) reads or writes it, as Anthropic
        bills it (:meth:`...prompt_cache.PromptCache.marked`)."""
        total = int(usage["input_tokens"])
        use = self.store.cache.marked(
            str(params["model"]), params, batch_id, total, self.store.now()
        )
        usage["input_tokens"] = use["input"]
        usage["cache_read_input_tokens"] = use["read"]
        usage["cache_creation_input_tokens"] = use["write_5m"] + use["write_1h"]
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": use["write_5m"],
            "ephemeral_1h_input_tokens": use["write_1h"],
        }

    def _end(self, batch: MessageBatch, now: float, unfinished: str | None) -> None:
        store = self.store
        for request in batch.requests:
            cid = request["custom_id"]
            if cid not in batch.results:
                kind = unfinished or "canceled"
                if kind == "expired" and store.anomaly("expired-500", f"{batch.id}/{cid}"):
                    batch.results[cid] = self._errored(500, "Internal server error")
                else:
                    batch.results[cid] = {"type": kind}
        succeeded = [c for c, r in batch.results.items() if r["type"] == "succeeded"]
        gone = missing_lines(store, batch.id, succeeded)
        lines = [
            json.dumps({"custom_id": cid, "result": result})
            for cid, result in batch.results.items()
            if cid not in gone
        ]
        lines = store.mangled("results", store.decide.shuffled(lines, batch.id))  # in any order
        batch.output = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
        batch.status = "ended"
        batch.stamps["ended"] = now
