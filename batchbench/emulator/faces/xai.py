"""xAI's face: its Batch API's REST calls, as xAI documents them and its clients make them.

What xAI's REST API takes and answers (docs.x.ai batch API; the xai-sdk's batch proto,
whose JSON these are; third-party clients that drive it: batchwork, litellm):

- ``POST /v1/files`` is OpenAI's upload (the OpenAI SDK drives it unchanged), its lines
  OpenAI's (``custom_id``, ``method``, ``url: /v1/chat/completions``, ``body``);
- ``POST /v1/batches`` takes ``{"name", "input_file_id"}`` — or ``{"name"}`` alone, the
  requests then added with ``POST /v1/batches/{id}/requests`` (docs.x.ai: create, then
  add) — and answers the batch:
  ``batch_id``, ``name`` (kept: a batch's own label), ``create_time``, ``expire_time``,
  ``cancel_time``, ``input_file_id`` and ``state`` with ``num_requests``,
  ``num_pending``, ``num_success``, ``num_error``, ``num_cancelled`` — no status word:
  a batch has ended when nothing is pending;
- ``GET /v1/batches`` pages with ``limit`` and ``pagination_token`` (``{"batches",
  "pagination_token"}``); ``POST /v1/batches/{id}:cancel`` cancels what is pending;
- ``GET /v1/batches/{id}/results`` pages the results (``{"results",
  "pagination_token"}``), each ``{"batch_request_id", "batch_result": {"response":
  {"chat_get_completion": <a chat completion>}}}`` or, failed, ``{"batch_request_id",
  "batch_result": {"error": {"code", "message"}}}`` (a ``google.rpc.Status``: gRPC
  codes);
- a request naming a model xAI does not serve refuses the create or add call, naming
  it (never a batch silently holding nothing);
- models are OpenAI's list (``/v1/models``).

xai-sdk itself speaks gRPC only: this face serves the REST surface above, not gRPC.

The batches run in an OpenAI book (its lifecycle, bad days, result and error lines).
On this emulator's port the face lives under ``/xai`` (its base URL ``{url}/xai/v1``).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from ..core import HEX, ApiFailure, Store
from ..face import Exchange, Reply, route
from .openai import OPENAI_LIMITS, OpenAIFace
from .openai.validate import Limits

MOUNT = "/xai/v1"
ENDPOINT = "/v1/chat/completions"
XAI_LIMITS = Limits(
    max_lines=OPENAI_LIMITS.max_lines,
    endpoints={ENDPOINT: ENDPOINT},
    file_expiry=OPENAI_LIMITS.file_expiry,
)
INVALID = "Client specified an invalid argument"  # xAI's code word for a 400
# an HTTP status → the gRPC code xAI's results carry (google.rpc.Code)
GRPC = {400: 3, 401: 16, 403: 7, 404: 5, 408: 4, 409: 10, 429: 8, 500: 13, 503: 14, 504: 4}


def _time(t: float | None) -> str | None:
    """A proto Timestamp as JSON: RFC 3339, UTC."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class XAIFace(OpenAIFace):
    name = "xai"
    key_variable = "XAI_API_KEY"

    def __init__(self, store: Store) -> None:
        super().__init__(store, prefix=MOUNT, limits=XAI_LIMITS, provider="xai")
        self.names: dict[str, str] = {}  # batch id → its name
        # A batch made by name alone (the proto's CreateBatchRequest without a file),
        # its requests added later: id → when made, its cancel time; and the book's
        # batches that run each added group.
        self.shells: dict[str, dict[str, float | None]] = {}
        self.parts: dict[str, list[str]] = {}
        p = "^" + MOUNT
        kept = [r for r in self.routes_under(MOUNT) if "batches" not in r.pattern.pattern]
        self.routes = [
            *kept,
            route("POST", p + r"/batches$", self.create_batch, creates=True),
            route("GET", p + r"/batches$", self.list_batches),
            route("GET", p + r"/batches/([^/:]+)$", self.get_batch),
            route("POST", p + r"/batches/([^/:]+):cancel$", self.cancel, writes=True),
            route("GET", p + r"/batches/([^/:]+)/results$", self.results),
            route("POST", p + r"/batches/([^/:]+)/requests$", self.add_requests, writes=True),
        ]

    def claims(self, x: Exchange) -> bool:
        return x.path.startswith("/xai/")

    def error(self, failure: ApiFailure) -> Reply:
        """xAI's errors: ``{"code", "error"}`` (a gRPC status's name and its message)."""
        body = {"code": failure.code or str(failure.status), "error": failure.message}
        return Reply(body, failure.status, dict(failure.headers))

    def key_refused(self, token: str) -> ApiFailure:
        """xAI's answer to a key it does not know: 400, ``Client specified an invalid
        argument``, the key's first and last two characters shown (as its API answers it,
        e.g. openai/codex#1352, i-am-bee/beeai-framework#447); a call with none, likewise."""
        shown = f"{token[:2]}***{token[-2:]}" if token else "none"
        return ApiFailure(
            400,
            f"Incorrect API key provided: {shown}. You can obtain an API key from"
            " https://console.x.ai.",
            code=INVALID,
        )

    def base_url(self, url: str) -> str:
        return url + MOUNT

    def environment(self, url: str) -> dict[str, str]:
        return {"XAI_BASE_URL": self.base_url(url)}

    def model_known(self, name: str) -> bool:
        return self.store.known_model(name) or self.store.known_model(f"xai/{name}")

    # batches --------------------------------------------------------------------
    def _batch(self, batch: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI book's batch as xAI's: counts, no status word."""
        counts = batch.get("request_counts") or {}
        total = int(counts.get("total") or 0)
        done, failed = int(counts.get("completed") or 0), int(counts.get("failed") or 0)
        status = str(batch["status"])
        ended = status in ("completed", "failed", "expired", "cancelled")
        cancelled = max(total - done - failed, 0) if ended else 0
        return {
            "batch_id": batch["id"],
            "name": self.names.get(batch["id"], ""),
            "create_time": _time(batch.get("created_at")),
            "expire_time": _time(batch.get("expires_at")),
            "cancel_time": _time(batch.get("cancelling_at") or batch.get("cancelled_at")),
            "cancel_by_xai_message": "",
            "input_file_id": batch.get("input_file_id"),
            "state": {
                "num_requests": total,
                # a request is pending until its result can be read (the book writes a
                # batch's results when it finalizes)
                "num_pending": 0 if ended else max(total - done - failed, 1 if total else 0),
                "num_success": done,
                "num_error": failed,
                "num_cancelled": cancelled,
            },
        }

    def _shell(self, batch_id: str) -> dict[str, Any]:
        """A batch made by name, as xAI's: its added groups' counts summed."""
        made = self.shells[batch_id]
        created = float(made["created"] or 0)
        state = dict.fromkeys(("num_pending", "num_success", "num_error", "num_cancelled"), 0)
        total = 0
        for part in self.parts.get(batch_id, []):
            seen = self._batch(self.book.batch_obj(part))["state"]
            total += seen["num_requests"]
            for key in state:
                state[key] += seen[key]
        return {
            "batch_id": batch_id,
            "name": self.names.get(batch_id, ""),
            "create_time": _time(created),
            "expire_time": _time(created + self.store.settings.completion_window),
            "cancel_time": _time(made["cancelled"]),
            "cancel_by_xai_message": "",
            "input_file_id": None,
            "state": {"num_requests": total, **state},
        }

    def _lines_known(self, lines: list[dict[str, Any]]) -> None:
        """A request naming a model xAI does not serve is refused with the call, naming
        it (not a batch that silently holds nothing)."""
        for n, line in enumerate(lines, 1):
            body = line.get("body") if isinstance(line, dict) else None
            model = body.get("model") if isinstance(body, dict) else None
            if isinstance(model, str) and not self.model_known(model):
                raise ApiFailure(
                    404,
                    f"request {n} ({line.get('custom_id')}): the model {model} does not exist"
                    " or your team does not have access to it",
                    code="Some requested entity was not found",
                )

    def create_batch(self, x: Exchange) -> Reply:
        """A batch of an uploaded file, or — without ``input_file_id`` — an empty batch by
        name, its requests added afterwards (docs.x.ai: create, then add requests)."""
        payload = x.json()
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            raise ApiFailure(400, "a batch needs a name", code=INVALID)
        if not payload.get("input_file_id"):
            batch_id = "batch_" + self.store.decide.token(HEX, 32)
            self.shells[batch_id] = {"created": self.store.now(), "cancelled": None}
            self.names[batch_id] = payload["name"]
            return Reply(self._shell(batch_id))
        source = self.book.files.get(str(payload["input_file_id"]))
        if source is not None:
            rows = [json.loads(r) for r in source.data.splitlines() if r.strip()[:1] == b"{"]
            self._lines_known(rows)
        given = {k: v for k, v in payload.items() if k not in ("name",)}
        made = self.book.create_batch({**given, "endpoint": ENDPOINT, "completion_window": "24h"})
        self.names[made["id"]] = payload["name"]
        return Reply(self._batch(made))

    def add_requests(self, x: Exchange, batch_id: str) -> Reply:
        """``POST /v1/batches/{id}/requests``: ``{"batch_requests": [{"batch_request_id",
        "batch_request": {"chat_get_completion": <a chat request>}}]}`` (the proto's
        AddBatchRequestsRequest in xAI's REST words, as tryAGI's client generated from
        xAI's OpenAPI sends it), run as one group of the batch."""
        if batch_id not in self.shells and batch_id not in self.book.batches:
            raise ApiFailure(
                404, f"batch {batch_id} not found", code="Some requested entity was not found"
            )
        if batch_id not in self.shells or self.shells[batch_id]["cancelled"] is not None:
            raise ApiFailure(400, f"batch {batch_id} takes no more requests", code=INVALID)
        payload = x.json()
        asked = payload.get("batch_requests") if isinstance(payload, dict) else None
        if not isinstance(asked, list) or not asked:
            raise ApiFailure(400, "batch_requests must hold at least one request", code=INVALID)
        lines = []
        for n, r in enumerate(asked, 1):
            inner = r.get("batch_request") if isinstance(r, dict) else None
            body = inner.get("chat_get_completion") if isinstance(inner, dict) else None
            if not isinstance(body, dict) or not isinstance(r.get("batch_request_id"), str):
                raise ApiFailure(
                    400,
                    f"batch_requests[{n - 1}] needs a batch_request_id and a"
                    " batch_request.chat_get_completion",
                    code=INVALID,
                )
            lines.append(
                {
                    "custom_id": r["batch_request_id"],
                    "method": "POST",
                    "url": ENDPOINT,
                    "body": body,
                }
            )
        self._lines_known(lines)
        data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        made_file = self.book.upload("added.jsonl", "batch", data, None)
        made = self.book.create_batch(
            {"input_file_id": made_file["id"], "endpoint": ENDPOINT, "completion_window": "24h"}
        )
        self.parts.setdefault(batch_id, []).append(str(made["id"]))
        return Reply({})

    def _hidden(self) -> set[str]:
        return {part for parts in self.parts.values() for part in parts}

    def list_batches(self, x: Exchange) -> Reply:
        """Newest first, ``limit`` a page; the token is where the next page starts."""
        limit = x.int_param("limit", 100, 1, 100, coerce=True)
        start = int(x.query.get("pagination_token") or 0)
        hidden = self._hidden()
        books = self.book.list_batches(10**9, None)["data"]
        found = [(float(b.get("created_at") or 0), b["id"]) for b in books if b["id"] not in hidden]
        found += [(float(v["created"] or 0), k) for k, v in self.shells.items()]
        found.sort(key=lambda t: t[0], reverse=True)
        by_id = {b["id"]: b for b in books}
        page = [
            self._shell(i) if i in self.shells else self._batch(by_id[i])
            for _, i in found[start : start + limit]
        ]
        token = str(start + limit) if start + limit < len(found) else None
        return Reply({"batches": page, "pagination_token": token})

    def get_batch(self, x: Exchange, batch_id: str) -> Reply:
        if batch_id in self.shells:
            return Reply(self._shell(batch_id))
        return Reply(self._batch(self.book.batch_obj(batch_id)))

    def cancel(self, x: Exchange, batch_id: str) -> Reply:
        if batch_id not in self.shells:
            return Reply(self._batch(self.book.cancel(batch_id)))
        self.shells[batch_id]["cancelled"] = self.shells[batch_id]["cancelled"] or self.store.now()
        for part in self.parts.get(batch_id, []):
            if self.book.batch_obj(part)["status"] not in (
                "completed",
                "failed",
                "expired",
                "cancelled",
            ):
                self.book.cancel(part)
        return Reply(self._shell(batch_id))

    def results(self, x: Exchange, batch_id: str) -> Reply:
        """A page of the results so far, in the order they were written."""
        limit = x.int_param("limit", 100, 1, 100, coerce=True)
        start = int(x.query.get("pagination_token") or 0)
        parts = self.parts.get(batch_id, []) if batch_id in self.shells else [batch_id]
        lines: list[bytes] = []
        for part in parts:
            batch = self.book.batch_obj(part)
            for key in ("output_file_id", "error_file_id"):
                if batch.get(key):
                    lines += [ln for ln in self.book.read_file(str(batch[key])).splitlines() if ln]
        lines = [ln for ln in lines if not _unfinished(ln)]  # not in xAI's results
        page = [_result(line) for line in lines[start : start + limit]]
        broken = next((p for p in page if not p.lstrip().startswith(b"{")), None)
        if broken is not None:  # a line that is not JSON: the reply is that page
            return Reply(broken, content_type="text/html")
        token = str(start + limit) if start + limit < len(lines) else None
        head = json.dumps({"results": [], "pagination_token": token}).encode()
        return Reply(head.replace(b'"results": []', b'"results": [' + b", ".join(page) + b"]"))


def _unfinished(line: bytes) -> bool:
    """A request the batch never ran (cancelled, or still pending when it expired): xAI
    counts it, and returns no result for it."""
    return b'"batch_expired"' in line or b'"batch_cancelled"' in line


def _result(line: bytes) -> bytes:
    """An OpenAI output or error line as xAI's result (bytes a test broke stay broken)."""
    text = line.decode("utf-8", "surrogateescape")
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        return line  # not JSON: served as it is
    response = found.get("response") or None
    error = found.get("error") or None
    result: dict[str, Any]
    if response is not None and response.get("status_code") == 200:
        result = {"response": {"chat_get_completion": response.get("body")}}
    else:
        status = int(response.get("status_code") or 500) if response else 500
        body = response.get("body") if response else None
        inner = body.get("error") if isinstance(body, dict) else None
        message = (inner or {}).get("message") if isinstance(inner, dict) else None
        if error is not None:
            message = error.get("message")
        code = GRPC.get(status, 2)  # 2: UNKNOWN
        result = {"error": {"code": code, "message": str(message or json.dumps(body))}}
    extra = {k: v for k, v in found.items() if k not in ("id", "custom_id", "response", "error")}
    out = {**extra, "batch_request_id": found.get("custom_id"), "batch_result": result}
    return json.dumps(out, ensure_ascii=False).encode("utf-8", "surrogateescape")


def make(store: Store) -> XAIFace:
    return XAIFace(store)
