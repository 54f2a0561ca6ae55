"""Anthropic's face: the Message Batches and Models routes, as the anthropic SDK calls them.

A call is Anthropic's when it carries the ``anthropic-version`` header (the SDK
always sends it); the key comes in ``x-api-key``. ``results_url`` names the
address the client used, so the SDK's follow-the-URL download comes back here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .anthropic import rfc3339
from .objects import ApiFailure
from .routes import Route, int_param, json_body

if TYPE_CHECKING:
    from .server import Handler

KNOWN_MODELS = ("claude-opus-5", "claude-sonnet-4-6", "claude-haiku-4-5")  # any other is too


def _base(h: Handler) -> str:
    host, port = h.server.server_address[:2]
    return f"http://{h.headers.get('Host') or f'{host!s}:{port}'}"


def create(h: Handler, *, query: dict, body: bytes, reply: bool = True) -> None:
    store = h.server.store
    with store.lock:
        batch = store.anthropic.create(json_body(body), len(body))
        obj = batch.obj(_base(h), store.settings.completion_window)
    if reply:
        h.send(200, obj)


def batches(h: Handler, *, query: dict, body: bytes) -> None:
    store = h.server.store
    limit = int_param(query, "limit", 20, 1, 1000)
    with store.lock:
        found, more = store.anthropic.page(limit, query.get("after_id"), query.get("before_id"))
        data = [b.obj(_base(h), store.settings.completion_window) for b in found]
    h.send(
        200,
        {
            "data": data,
            "has_more": more,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        },
    )


def batch(h: Handler, batch_id: str, *, query: dict, body: bytes) -> None:
    store = h.server.store
    with store.lock:
        obj = store.anthropic.get(batch_id).obj(_base(h), store.settings.completion_window)
    h.send(200, obj)


def cancel(h: Handler, batch_id: str, *, query: dict, body: bytes, reply: bool = True) -> None:
    store = h.server.store
    with store.lock:
        obj = store.anthropic.cancel(batch_id).obj(_base(h), store.settings.completion_window)
    if reply:
        h.send(200, obj)


def delete(h: Handler, batch_id: str, *, query: dict, body: bytes, reply: bool = True) -> None:
    store = h.server.store
    with store.lock:
        obj = store.anthropic.delete(batch_id)
    if reply:
        h.send(200, obj)


def results(h: Handler, batch_id: str, *, query: dict, body: bytes) -> None:
    store = h.server.store
    with store.lock:
        data = store.anthropic.results(batch_id)
    h.send_file(data, "application/binary")


def _model(name: str) -> dict[str, Any]:
    return {
        "type": "model",
        "id": name,
        "display_name": name,
        "created_at": rfc3339(0),
        "lifecycle": "active",
    }


def model(h: Handler, name: str, *, query: dict, body: bytes) -> None:
    if name in h.server.store.settings.unknown_models:
        raise ApiFailure.anthropic(404, f"model: {name}", "not_found_error")
    h.send(200, _model(name))


def models(h: Handler, *, query: dict, body: bytes) -> None:
    data = [_model(m) for m in KNOWN_MODELS]
    h.send(200, {"data": data, "has_more": False, "first_id": data[0]["id"],
                 "last_id": data[-1]["id"]})  # fmt: skip


def _r(method: str, path: str, handle: Any, writes: bool = False) -> Route:
    return Route(method, re.compile(path), handle, "anthropic", writes)


ROUTES = [
    _r("POST", r"^/v1/messages/batches$", create, writes=True),
    _r("GET", r"^/v1/messages/batches$", batches),
    _r("GET", r"^/v1/messages/batches/([^/]+)$", batch),
    _r("POST", r"^/v1/messages/batches/([^/]+)/cancel$", cancel, writes=True),
    _r("DELETE", r"^/v1/messages/batches/([^/]+)$", delete, writes=True),
    _r("GET", r"^/v1/messages/batches/([^/]+)/results$", results),
    _r("GET", r"^/v1/models$", models),
    _r("GET", r"^/v1/models/(.+)$", model),
]
