"""OpenRouter's face: its Batch API calls as the openrouter SDK makes them.

As the service documents them (openrouter.ai/docs batch quickstart; the SDK's types):

- ``POST /batches`` carries the requests inline (``{"custom_id", "body"}``, up to 5,000
  and 200 MB), one model and endpoint; the batch keeps no metadata;
- a batch object says ``validating``, ``in_progress``, ``finalizing``, ``completed``,
  ``failed``, ``expired``, ``cancelling`` or ``cancelled``, with ``request_counts``, and
  once ended carries its ``results`` inline (``custom_id``, ``response`` with
  ``status_code`` and ``body``, or ``error``);
- ``GET /batches/{id}/results`` pages a finished batch's results (``cursor``, ``limit``;
  ``next_cursor``, ``has_more``), the same rows as the inline ones;
- a request whose ``body.model`` is not the batch's is refused with the batch (the
  quickstart: one model a batch); ``completion_window`` is ``24h`` or absent;
- ``GET /batches`` pages with ``limit`` and ``after``; ``DELETE /batches/{id}`` deletes
  an ended batch (409 while it runs); ``POST /batches/{id}/cancel`` (in the API
  reference, not in the SDK) answers the batch still ``in_progress`` until its provider
  confirms, 409 once it has ended; a cancelled batch returns no result rows;
- models are one list, a page at a time (``offset``, ``limit``).

The batches run in an OpenAI book (lifecycle, bad days); its output and error lines are
the batch's results. On this emulator's port the face lives under ``/openrouter``
(its base URL ``{url}/openrouter/api/v1``).
"""

from __future__ import annotations

import json
from typing import Any

from ..core import ApiFailure, Store
from ..face import Exchange, Reply, route
from .openai import OPENAI_LIMITS, OpenAIFace
from .openai.validate import Limits

MOUNT = "/openrouter/api/v1"
ENDPOINT = "/v1/chat/completions"
MAX_REQUESTS = 5_000
MAX_BYTES = 200 * 1024 * 1024
OPENROUTER_LIMITS = Limits(
    max_lines=MAX_REQUESTS, endpoints={ENDPOINT: ENDPOINT}, file_expiry=OPENAI_LIMITS.file_expiry
)
# an upstream reply's HTTP status → OpenRouter's canonical error type (the SDK's
# APIErrorType; openrouter.ai/docs api errors)
ERROR_TYPES = {
    400: "invalid_request",
    401: "authentication",
    402: "payment_required",
    403: "permission_denied",
    404: "not_found",
    408: "timeout",
    413: "payload_too_large",
    422: "unprocessable",
    429: "rate_limit_exceeded",
    500: "server",
    502: "provider_unavailable",
    503: "provider_overloaded",
}
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})


class OpenRouterFace(OpenAIFace):
    name = "openrouter"
    key_variable = "OPENROUTER_API_KEY"

    def __init__(self, store: Store) -> None:
        super().__init__(store, prefix=MOUNT, limits=OPENROUTER_LIMITS, provider="openrouter")
        self.models_of: dict[str, str] = {}  # batch id → its model
        self.sizes: dict[str, int] = {}  # batch id → how many requests it was given
        p = "^" + MOUNT
        self.routes = [
            route("POST", p + r"/batches$", self.create_batch, creates=True),
            route("GET", p + r"/batches$", self.list_batches),
            route("GET", p + r"/batches/([^/]+)$", self.get_batch),
            route("GET", p + r"/batches/([^/]+)/results$", self.get_results),
            route("DELETE", p + r"/batches/([^/]+)$", self.delete_batch, writes=True),
            route("POST", p + r"/batches/([^/]+)/cancel$", self.cancel_batch, writes=True),
            route("GET", p + r"/models$", self.models),
        ]

    def claims(self, x: Exchange) -> bool:
        return x.path.startswith("/openrouter/")

    def key_refused(self, token: str) -> ApiFailure:
        """OpenRouter's 401s (openrouter.ai/docs, errors): ``No auth credentials found``
        without a key, ``User not found.`` for a key it does not know."""
        return ApiFailure(401, "User not found." if token else "No auth credentials found")

    def error(self, failure: ApiFailure) -> Reply:
        body = {"error": {"code": failure.status, "message": failure.message}}
        return Reply(body, failure.status, dict(failure.headers))

    def base_url(self, url: str) -> str:
        return url + MOUNT

    def environment(self, url: str) -> dict[str, str]:
        return {"OPENROUTER_BASE_URL": self.base_url(url)}

    def model_known(self, name: str) -> bool:
        return self.store.known_model(name) or self.store.known_model(f"openrouter/{name}")

    # batches --------------------------------------------------------------------
    def _results(self, batch: dict[str, Any]) -> list[bytes]:
        """Each result as JSON bytes; a line a test broke stays as broken as it was: bytes
        that are not UTF-8 stay in place, a line that is not JSON (a proxy's page) is
        raised as the page the whole reply becomes."""
        out = []
        for key in ("output_file_id", "error_file_id"):
            if batch.get(key):
                out += [ln for ln in self.book.read_file(str(batch[key])).splitlines() if ln]
        parts = []
        for line in out:
            text = line.decode("utf-8", "surrogateescape")
            try:
                made = result(json.loads(text))
            except json.JSONDecodeError:
                raise Page(line) from None
            parts.append(json.dumps(made, ensure_ascii=False).encode("utf-8", "surrogateescape"))
        return parts

    def _object(self, batch: dict[str, Any]) -> dict[str, Any]:
        status = "in_progress" if batch["status"] == "cancelling" else str(batch["status"])
        errors = (batch.get("errors") or {}).get("data") or []
        counts = batch.get("request_counts") or {}
        return {
            "id": batch["id"],
            "object": "batch",
            "endpoint": ENDPOINT,
            "model": self.models_of.get(batch["id"], ""),
            "completion_window": "24h",
            "created_at": batch.get("created_at"),
            "expires_at": batch.get("expires_at"),
            "finalized_at": batch.get("completed_at") or batch.get("failed_at"),
            "provider": None,
            "status": status,
            "request_counts": {
                "total": int(counts.get("total") or self.sizes.get(batch["id"], 0)),
                "completed": int(counts.get("completed") or 0),
                "failed": int(counts.get("failed") or 0),
            },
            "error": {"message": "; ".join(str(e.get("message")) for e in errors)}
            if errors
            else None,
            "results": None,
            "usage": None,
        }

    def create_batch(self, x: Exchange) -> Reply:
        if len(x.body) > MAX_BYTES:
            raise ApiFailure(413, "Request body too large: a batch holds up to 200 MB")
        payload = x.json()
        if not isinstance(payload, dict):
            raise ApiFailure(400, "Request body must be a JSON object")
        model, requests = payload.get("model"), payload.get("requests")
        order = [k for k in payload if k in ("endpoint", "model", "requests")]
        if order and order[-1] != "requests":  # the service reads the body as a stream
            raise ApiFailure(400, "endpoint and model must come before requests")
        if payload.get("endpoint") != ENDPOINT:
            raise ApiFailure(400, f"Invalid endpoint: {payload.get('endpoint')!r}")
        if not isinstance(model, str) or not self.model_known(model):
            raise ApiFailure(400, f"{model} is not a valid model ID")
        if not isinstance(requests, list) or not 0 < len(requests) <= MAX_REQUESTS:
            raise ApiFailure(400, f"A batch holds 1 to {MAX_REQUESTS} requests")
        window = payload.get("completion_window", "24h")
        if window != "24h":  # the SDK's BatchObjectCompletionWindow: "24h" alone
            raise ApiFailure(400, f"Invalid completion_window {window!r}: only '24h' is supported")
        for i, r in enumerate(requests):
            body = r.get("body") if isinstance(r, dict) else None
            named = body.get("model") if isinstance(body, dict) else None
            if named is not None and named != model:  # the quickstart: one model a batch
                raise ApiFailure(
                    400,
                    f"requests[{i}].body.model {named!r} does not match the batch's model"
                    f" {model!r}: a batch runs one model",
                )
        lines = []
        for r in requests:
            body = r.get("body") if isinstance(r, dict) else None
            line = dict(r) if isinstance(r, dict) else r
            if isinstance(body, dict):
                line = {**r, "method": "POST", "url": ENDPOINT, "body": {"model": model, **body}}
            lines.append(json.dumps(line))
        data = "".join(line + "\n" for line in lines).encode()
        made_file = self.book.upload("inline.jsonl", "batch", data, None)
        made = self.book.create_batch(
            {"input_file_id": made_file["id"], "endpoint": ENDPOINT, "completion_window": "24h"}
        )
        self.models_of[made["id"]] = model
        self.sizes[made["id"]] = len(requests)  # counted at once: they came inline
        return Reply(self._object(made), 202)

    def list_batches(self, x: Exchange) -> Reply:
        limit = x.int_param("limit", 20, 1, 100, coerce=True)
        found = self.book.list_batches(limit, x.query.get("after"))
        data = [self._object(b) for b in found["data"]]
        return Reply({**found, "data": data})

    def get_batch(self, x: Exchange, batch_id: str) -> Reply:
        """The batch with its results once it has ended (a cancelled batch returns no
        result rows: its finished requests are billed all the same)."""
        batch = self.book.batch_obj(batch_id)
        found = self._object(batch)
        if found["status"] not in ENDED - {"cancelled"}:
            return Reply(found)
        try:
            parts = self._results(batch)
        except Page as page:
            return Reply(page.body, 200, content_type="text/html")
        head = json.dumps({**found, "results": None}).encode()
        spliced = head.replace(b'"results": null', b'"results": [' + b", ".join(parts) + b"]")
        return Reply(spliced, content_type="application/json")

    def get_results(self, x: Exchange, batch_id: str) -> Reply:
        """A finished batch's results a page at a time (the API reference's ``GET
        /batches/{id}/results``): ``limit`` rows from ``cursor`` (the previous page's
        ``next_cursor``), the same rows as the batch object's inline ``results``."""
        batch = self.book.batch_obj(batch_id)
        if self._object(batch)["status"] not in ENDED - {"cancelled"}:
            raise ApiFailure(409, f"Batch {batch_id} has not finished: no results yet")
        limit = x.int_param("limit", 100, 1, 1000, coerce=True)
        cursor = x.query.get("cursor") or "r0"
        if not cursor.startswith("r") or not cursor[1:].isdigit():
            raise ApiFailure(400, f"Invalid cursor {cursor!r}")
        start = int(cursor[1:])
        try:
            parts = self._results(batch)
        except Page as page:
            return Reply(page.body, 200, content_type="text/html")
        page_rows = parts[start : start + limit]
        more = start + limit < len(parts)
        head = {
            "object": "list",
            "data": None,
            "has_more": more,
            "next_cursor": f"r{start + limit}" if more else None,
        }
        text = json.dumps(head).encode()
        return Reply(
            text.replace(b'"data": null', b'"data": [' + b", ".join(page_rows) + b"]"),
            content_type="application/json",
        )

    def cancel_batch(self, x: Exchange, batch_id: str) -> Reply:
        """The batch in its current status (``in_progress`` until its provider confirms);
        409 once it has ended."""
        return Reply(self._object(self.book.cancel(batch_id)))

    def delete_batch(self, x: Exchange, batch_id: str) -> Reply:
        batch = self.book.batch_obj(batch_id)
        if batch["status"] not in ENDED:
            raise ApiFailure(
                409, f"Batch {batch_id} is still {batch['status']}: it cannot be deleted"
            )
        del self.book.batches[batch_id]
        return Reply({"id": batch_id, "object": "batch", "deletion": {"openrouter": "deleted"}})

    # models ---------------------------------------------------------------------
    def models(self, x: Exchange) -> Reply:
        offset = x.int_param("offset", 0, 0, 10**6, coerce=True)
        limit = x.int_param("limit", 500, 1, 1000, coerce=True)
        names = [n.removeprefix("openrouter/") for n in self.store.catalogue.listed("openrouter/")]
        page = names[offset : offset + limit]
        more = offset + limit < len(names)
        nxt = f"{MOUNT}/models?offset={offset + limit}&limit={limit}" if more else None
        data = [model_object(n) for n in page]
        return Reply({"data": data, "links": {"next": nxt}, "total_count": len(names)})


class Page(Exception):
    """A result line that is not JSON: the reply is that page, as a proxy's would be."""

    def __init__(self, body: bytes) -> None:
        self.body = body


def result(line: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI output or error line as OpenRouter's result: a completion's choices carry
    ``native_finish_reason``, ``refusal`` and ``logprobs``; a request that failed has its
    ``error`` (``message``, ``type``, ``param``) and no response."""
    response = line.get("response") or None
    error = line.get("error") or None
    if response is not None and response.get("status_code") != 200:
        status = int(response.get("status_code") or 500)
        body = response.get("body") or {}
        found = body.get("error") if isinstance(body, dict) else None
        message = found.get("message") if isinstance(found, dict) else json.dumps(body)
        known = found if isinstance(found, dict) else {}
        error = {
            "message": message,
            "type": known.get("type"),
            "param": known.get("param"),
            "error_type": ERROR_TYPES.get(status),
        }
        response = None
    if response is not None:
        body = dict(response.get("body") or {})
        body["choices"] = [
            {
                "logprobs": None,
                "native_finish_reason": c.get("finish_reason"),
                **c,
                "message": {"refusal": None, **(c.get("message") or {})},
            }
            for c in body.get("choices") or []
        ]
        response = {**response, "body": body}
    if error is not None:
        kind = error.get("type") or error.get("code") or "server_error"
        made = {
            "message": str(error.get("message")),
            "type": str(kind),
            "param": error.get("param"),
        }
        error = {**made, "error_type": error.get("error_type") or "unmapped"}
    return {
        **line,  # anything else a line carries stays (a test's broken bytes included)
        "id": line.get("id"),
        "custom_id": line.get("custom_id"),
        "response": response,
        "error": error,
    }


def model_object(name: str) -> dict[str, Any]:
    """A model as OpenRouter's list holds one (the SDK's ``Model``: every required field)."""
    return {
        "id": name,
        "canonical_slug": name,
        "name": name,
        "created": 1767225600,
        "context_length": 200_000,
        "architecture": {
            "input_modalities": ["text"],
            "output_modalities": ["text"],
            "modality": "text->text",
        },
        "default_parameters": None,
        "links": {"details": f"/api/v1/models/{name}/endpoints"},
        "per_request_limits": None,
        "pricing": {"prompt": "0.000005", "completion": "0.000025"},
        "supported_parameters": ["max_tokens", "temperature", "response_format"],
        "supported_voices": None,
        "top_provider": {"is_moderated": False, "context_length": 200_000},
    }


def make(store: Store) -> OpenRouterFace:
    return OpenRouterFace(store)
