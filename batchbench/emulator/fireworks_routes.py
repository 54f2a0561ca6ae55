"""Fireworks' face: datasets, batch inference jobs and models under ``/v1/accounts/{id}``,
as the fireworks-ai SDK calls them (the key as a bearer token), and the signed URLs
its output datasets are fetched from (the URL is the credential)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .fireworks import error_body
from .objects import ApiFailure
from .openai_routes import multipart
from .routes import Route, int_param, json_body

if TYPE_CHECKING:
    from .server import Handler


def _base(h: Handler) -> str:
    host, port = h.server.server_address[:2]
    return f"http://{h.headers.get('Host') or f'{host!s}:{port}'}"


def authorised(h: Handler, query: dict) -> bool:
    if h.path.startswith("/_fireworks/blobs/"):
        return True  # a signed URL
    auth = h.headers.get("Authorization", "")
    token = auth[7:].strip() if auth.startswith("Bearer ") else ""
    expected = h.server.api_key
    if not token or (expected is not None and token != expected):
        h.send(401, error_body(401, "invalid API key" if token else "missing API key"))
        return False
    return True


def create_dataset(h: Handler, account: str, *, query: dict, body: bytes,
                   reply: bool = True) -> None:  # fmt: skip
    store = h.server.store
    with store.lock:
        obj = store.fireworks.create_dataset(account, json_body(body)).obj()
    if reply:
        h.send(200, obj)


def get_dataset(h: Handler, account: str, name: str, *, query: dict, body: bytes) -> None:
    with h.server.store.lock:
        h.send(200, h.server.store.fireworks.dataset(f"accounts/{account}/datasets/{name}").obj())


def delete_dataset(h: Handler, account: str, name: str, *, query: dict, body: bytes,
                   reply: bool = True) -> None:  # fmt: skip
    book = h.server.store.fireworks
    with h.server.store.lock:
        book.dataset(f"accounts/{account}/datasets/{name}")
        del book.datasets[f"accounts/{account}/datasets/{name}"]
    if reply:
        h.send(200, {})


def upload(h: Handler, account: str, name: str, *, query: dict, body: bytes,
           reply: bool = True) -> None:  # fmt: skip
    _, files = multipart(h.headers.get("Content-Type", ""), body)
    if "file" not in files:
        raise ApiFailure.fireworks(400, "a file is required")
    filename, data = files["file"]
    with h.server.store.lock:
        made = h.server.store.fireworks.upload(f"accounts/{account}/datasets/{name}", filename,
                                               data)  # fmt: skip
    if reply:
        h.send(200, {"id": made.name, "bytes": len(data), "filename": filename,
                     "object": "file"})  # fmt: skip


def download_endpoint(h: Handler, account: str, name: str, *, query: dict, body: bytes) -> None:
    with h.server.store.lock:
        urls = h.server.store.fireworks.signed_urls(f"accounts/{account}/datasets/{name}", _base(h))
    h.send(200, {"filenameToSignedUrls": urls})


def blob(h: Handler, token: str, *, query: dict, body: bytes) -> None:
    with h.server.store.lock:
        data = h.server.store.fireworks.blob(token)
    h.send_file(data, "application/octet-stream")


def create_job(h: Handler, account: str, *, query: dict, body: bytes, reply: bool = True) -> None:
    store = h.server.store
    with store.lock:
        job = store.fireworks.create_job(account, query.get("batchInferenceJobId"), json_body(body))
        obj = job.obj()
    if reply:
        h.send(200, obj)


def jobs(h: Handler, account: str, *, query: dict, body: bytes) -> None:
    size = int_param(query, "pageSize", 50, 1, 200)
    with h.server.store.lock:
        found, token = h.server.store.fireworks.page(account, size, query.get("pageToken"))
        out: dict[str, Any] = {"batchInferenceJobs": [j.obj() for j in found]}
    if token is not None:
        out["nextPageToken"] = token
    h.send(200, out)


def job(h: Handler, account: str, name: str, *, query: dict, body: bytes) -> None:
    with h.server.store.lock:
        h.send(
            200, h.server.store.fireworks.job(f"accounts/{account}/batchInferenceJobs/{name}").obj()
        )


def cancel(h: Handler, account: str, name: str, *, query: dict, body: bytes,
           reply: bool = True) -> None:  # fmt: skip
    with h.server.store.lock:
        obj = h.server.store.fireworks.cancel(f"accounts/{account}/batchInferenceJobs/{name}").obj()
    if reply:
        h.send(200, obj)


def delete_job(h: Handler, account: str, name: str, *, query: dict, body: bytes,
               reply: bool = True) -> None:  # fmt: skip
    with h.server.store.lock:
        h.server.store.fireworks.delete(f"accounts/{account}/batchInferenceJobs/{name}")
    if reply:
        h.send(200, {})


def model(h: Handler, account: str, kind: str, name: str, *, query: dict, body: bytes) -> None:
    full = f"accounts/{account}/{kind}/{name}"
    if (
        full in h.server.store.settings.unknown_models
        or name in h.server.store.settings.unknown_models
    ):
        raise ApiFailure.fireworks(404, f"Model not found: {full}")
    h.send(200, {"name": full, "displayName": name, "kind": "HF_BASE_MODEL", "state": "READY",
                 "supportsBatchInference": True})  # fmt: skip


def models(h: Handler, account: str, *, query: dict, body: bytes) -> None:
    h.send(200, {"models": [], "totalSize": 0})


A = r"^/v1/accounts/([^/:]+)"


def _r(method: str, path: str, handle: Any, writes: bool = False) -> Route:
    return Route(method, re.compile(path), handle, "fireworks", writes)


ROUTES = [
    _r("POST", A + r"/datasets$", create_dataset, writes=True),
    _r("GET", A + r"/datasets/([^/:]+)$", get_dataset),
    _r("DELETE", A + r"/datasets/([^/:]+)$", delete_dataset, writes=True),
    _r("POST", A + r"/datasets/([^/:]+):upload$", upload, writes=True),
    _r("GET", A + r"/datasets/([^/:]+):getDownloadEndpoint$", download_endpoint),
    _r("POST", A + r"/batchInferenceJobs$", create_job, writes=True),
    _r("GET", A + r"/batchInferenceJobs$", jobs),
    _r("GET", A + r"/batchInferenceJobs/([^/:]+)$", job),
    _r("POST", A + r"/batchInferenceJobs/([^/:]+):cancel$", cancel, writes=True),
    _r("DELETE", A + r"/batchInferenceJobs/([^/:]+)$", delete_job, writes=True),
    _r("GET", A + r"/(models|routers)/([^/:]+)$", model),
    _r("GET", A + r"/models$", models),
    _r("GET", r"^/_fireworks/blobs/([0-9a-f]+)$", blob),
]
