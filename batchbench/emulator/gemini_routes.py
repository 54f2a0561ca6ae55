"""Gemini's face: the Files API (resumable upload, download) and Batch Mode, as the
google-genai SDK calls them (``/v1`` or ``/v1beta``).

A call is Gemini's when it carries ``x-goog-api-key`` (or ``?key=``), or goes to
an upload session; the upload URL is the credential of its session, as at Google.
A missing key is a 403 and a wrong one a 400 ``API key not valid``, as Google says.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .gemini_model import error_body
from .objects import ApiFailure
from .routes import Route, int_param, json_body

if TYPE_CHECKING:
    from .server import Handler

KNOWN_MODELS = ("gemini-3.1-pro-preview", "gemini-3-flash-preview")  # any other is too


def authorised(h: Handler, query: dict) -> bool:
    if h.path.startswith("/upload/") and "upload_id" in query:
        return True  # the session's URL is its credential
    key = h.headers.get("x-goog-api-key") or query.get("key")
    if not key:
        h.send(403, error_body(403, "Method doesn't allow unregistered callers (callers without"
                                    " established identity). Please use API Key or other form of"
                                    " API consumer identity to call this API."))  # fmt: skip
        return False
    expected = h.server.api_key
    if expected is not None and key != expected:
        h.send(400, error_body(400, "API key not valid. Please pass a valid API key."))
        return False
    return True


def _base(h: Handler) -> str:
    host, port = h.server.server_address[:2]
    return f"http://{h.headers.get('Host') or f'{host!s}:{port}'}"


def upload(h: Handler, version: str, *, query: dict, body: bytes, reply: bool = True) -> None:
    """The resumable protocol: ``start`` opens a session (its URL in a header), then
    ``upload`` chunks at their offsets, the last with ``finalize``."""
    store = h.server.store
    command = h.headers.get("X-Goog-Upload-Command", "")
    with store.lock:
        if "upload_id" not in query:
            if command != "start":
                raise ApiFailure.gemini(400, "X-Goog-Upload-Command must be start")
            size = int(h.headers.get("X-Goog-Upload-Header-Content-Length") or 0)
            mime = h.headers.get("X-Goog-Upload-Header-Content-Type") or ""
            upload_id = store.gemini.start_upload(json_body(body), size, mime)
            url = (
                f"{_base(h)}/upload/{version}/files?upload_id={upload_id}&upload_protocol=resumable"
            )
            if reply:
                h.send(200, b"", {"x-goog-upload-url": url, "x-goog-upload-status": "active"})
            return
        offset = int(h.headers.get("X-Goog-Upload-Offset") or 0)
        final = "finalize" in command
        made = store.gemini.upload_chunk(query["upload_id"], offset, body, final)
    if made is None:
        h.send(200, b"", {"x-goog-upload-status": "active"})
    else:
        h.send(200, {"file": made.obj()}, {"x-goog-upload-status": "final"})


def get_file(h: Handler, version: str, name: str, *, query: dict, body: bytes) -> None:
    with h.server.store.lock:
        h.send(200, h.server.store.gemini.file(f"files/{name}").obj())


def delete_file(h: Handler, version: str, name: str, *, query: dict, body: bytes) -> None:
    store = h.server.store
    with store.lock:
        store.gemini.file(f"files/{name}")
        del store.gemini.files[f"files/{name}"]
    h.send(200, {})


def download(h: Handler, version: str, name: str, *, query: dict, body: bytes) -> None:
    with h.server.store.lock:
        data = h.server.store.gemini.file(f"files/{name}").data
    h.send_file(data, "application/octet-stream")


def create(h: Handler, version: str, model: str, *, query: dict, body: bytes,
           reply: bool = True) -> None:  # fmt: skip
    store = h.server.store
    with store.lock:
        obj = store.gemini.create(model, json_body(body)).obj()
    if reply:
        h.send(200, obj)


def batches(h: Handler, version: str, *, query: dict, body: bytes) -> None:
    store = h.server.store
    size = int_param(query, "pageSize", 50, 1, 1000)
    with store.lock:
        jobs, token = store.gemini.page(size, query.get("pageToken"))
        out: dict[str, Any] = {"operations": [j.obj() for j in jobs]}
    if token is not None:
        out["nextPageToken"] = token
    h.send(200, out)


def batch(h: Handler, version: str, name: str, *, query: dict, body: bytes) -> None:
    with h.server.store.lock:
        h.send(200, h.server.store.gemini.job(f"batches/{name}").obj())


def cancel(h: Handler, version: str, name: str, *, query: dict, body: bytes,
           reply: bool = True) -> None:  # fmt: skip
    with h.server.store.lock:
        h.server.store.gemini.cancel(f"batches/{name}")
    if reply:
        h.send(200, {})


def delete(h: Handler, version: str, name: str, *, query: dict, body: bytes,
           reply: bool = True) -> None:  # fmt: skip
    with h.server.store.lock:
        h.server.store.gemini.delete(f"batches/{name}")
    if reply:
        h.send(200, {})


def _model(name: str) -> dict[str, Any]:
    return {"name": f"models/{name}", "displayName": name, "version": "001",
            "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
            "supportedGenerationMethods": ["generateContent", "batchGenerateContent"]}  # fmt: skip


def model(h: Handler, version: str, name: str, *, query: dict, body: bytes) -> None:
    if name in h.server.store.settings.unknown_models:
        raise ApiFailure.gemini(
            404, f"models/{name} is not found for API version {version}, or is not supported"
            " for generateContent. Call ListModels to see the list of available models and"
            " their supported methods.",
        )  # fmt: skip
    h.send(200, _model(name))


def models(h: Handler, version: str, *, query: dict, body: bytes) -> None:
    h.send(200, {"models": [_model(m) for m in KNOWN_MODELS]})


V = r"(v1|v1beta)"


def _r(method: str, path: str, handle: Any, writes: bool = False) -> Route:
    return Route(method, re.compile(path.replace("{v}", V)), handle, "gemini", writes)


ROUTES = [
    _r("POST", r"^/upload/{v}/files$", upload, writes=True),
    _r("GET", r"^/{v}/files/([^/:]+)$", get_file),
    _r("DELETE", r"^/{v}/files/([^/:]+)$", delete_file),
    _r("GET", r"^/{v}/files/([^/:]+):download$", download),
    _r("POST", r"^/{v}/models/([^/:]+):batchGenerateContent$", create, writes=True),
    _r("GET", r"^/{v}/batches$", batches),
    _r("GET", r"^/{v}/batches/([^/:]+)$", batch),
    _r("POST", r"^/{v}/batches/([^/:]+):cancel$", cancel, writes=True),
    _r("DELETE", r"^/{v}/batches/([^/:]+)$", delete, writes=True),
    _r("GET", r"^/{v}/models$", models),
    _r("GET", r"^/{v}/models/([^/:]+)$", model),
]
