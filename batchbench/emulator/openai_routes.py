"""OpenAI's face: the Files, Batches and Models routes, as the openai SDK calls them."""

from __future__ import annotations

import email.parser
import email.policy
import re
from typing import TYPE_CHECKING, Any

from .objects import ApiFailure
from .routes import Route, int_param, json_body

if TYPE_CHECKING:
    from .server import Handler


def upload(h: Handler, *, query: dict, body: bytes, reply: bool = True) -> None:
    fields, files = multipart(h.headers.get("Content-Type", ""), body)
    if "file" not in files:
        raise ApiFailure(400, "Missing required parameter: 'file'.", param="file")
    if "purpose" not in fields:
        raise ApiFailure(400, "Missing required parameter: 'purpose'.", param="purpose")
    expires = None
    if "expires_after[anchor]" in fields or "expires_after[seconds]" in fields:
        try:
            seconds = int(fields.get("expires_after[seconds]", ""))
        except ValueError:
            raise ApiFailure(400, "Invalid expires_after[seconds]", "expires_after") from None
        expires = {"anchor": fields.get("expires_after[anchor]"), "seconds": seconds}
    filename, data = files["file"]
    obj = h.server.store.upload(filename, fields["purpose"], data, expires)
    if reply:
        h.send(200, obj)


def list_files(h: Handler, *, query: dict, body: bytes) -> None:
    limit = int_param(query, "limit", 10000, 1, 10000)
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiFailure(400, "order must be 'asc' or 'desc'", param="order")
    h.send(200, h.server.store.list_files(query.get("purpose"), order, limit, query.get("after")))


def get_file(h: Handler, file_id: str, *, query: dict, body: bytes) -> None:
    h.send(200, h.server.store.get_file(file_id).obj())


def delete_file(h: Handler, file_id: str, *, query: dict, body: bytes) -> None:
    h.send(200, h.server.store.delete_file(file_id))


def content(h: Handler, file_id: str, *, query: dict, body: bytes) -> None:
    h.send_file(h.server.store.get_file(file_id).data, "application/octet-stream")


def create_batch(h: Handler, *, query: dict, body: bytes, reply: bool = True) -> None:
    obj = h.server.store.create_batch(json_body(body))
    if reply:
        h.send(200, obj)


def list_batches(h: Handler, *, query: dict, body: bytes) -> None:
    limit = int_param(query, "limit", 20, 1, 100)
    h.send(200, h.server.store.list_batches(limit, query.get("after")))


def get_batch(h: Handler, batch_id: str, *, query: dict, body: bytes) -> None:
    h.send(200, h.server.store.batch_obj(batch_id))


def cancel(h: Handler, batch_id: str, *, query: dict, body: bytes, reply: bool = True) -> None:
    obj = h.server.store.cancel(batch_id)
    if reply:
        h.send(200, obj)


def model(h: Handler, name: str, *, query: dict, body: bytes) -> None:
    if name in h.server.store.settings.unknown_models:
        raise ApiFailure(
            404,
            f"The model `{name}` does not exist or you do not have access to it.",
            code="model_not_found",
        )
    h.send(200, {"id": name, "object": "model", "created": 0, "owned_by": "batchbench-emulator"})


KNOWN_MODELS = ("gpt-4o-mini", "gpt-4.1", "gpt-5.4-mini", "gpt-5.6-sol")  # any other is too


def models(h: Handler, *, query: dict, body: bytes) -> None:
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "batchbench-emulator"}
            for m in KNOWN_MODELS]  # fmt: skip
    h.send(200, {"object": "list", "data": data})


def multipart(
    content_type: str, body: bytes
) -> tuple[dict[str, str], dict[str, tuple[str, bytes]]]:
    if not content_type.startswith("multipart/form-data"):
        raise ApiFailure(400, "Expected multipart/form-data")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, str] = {}
    files: dict[str, tuple[str, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            continue
        decoded = part.get_payload(decode=True)
        payload = decoded if isinstance(decoded, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = (filename, payload)
        else:
            fields[name] = payload.decode("utf-8")
    return fields, files


def _r(method: str, path: str, handle: Any, writes: bool = False) -> Route:
    return Route(method, re.compile(path), handle, "openai", writes)


ROUTES = [
    _r("POST", r"^/v1/files$", upload, writes=True),
    _r("GET", r"^/v1/files$", list_files),
    _r("GET", r"^/v1/files/([^/]+)$", get_file),
    _r("DELETE", r"^/v1/files/([^/]+)$", delete_file),
    _r("GET", r"^/v1/files/([^/]+)/content$", content),
    _r("POST", r"^/v1/batches$", create_batch, writes=True),
    _r("GET", r"^/v1/batches$", list_batches),
    _r("GET", r"^/v1/batches/([^/]+)$", get_batch),
    _r("POST", r"^/v1/batches/([^/]+)/cancel$", cancel, writes=True),
    _r("GET", r"^/v1/models$", models),
    _r("GET", r"^/v1/models/(.+)$", model),
]
