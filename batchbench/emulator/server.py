"""The HTTP face of the emulator: the real routes, error envelope and faults.

Built on the standard library's threaded HTTP server: the openai SDK talks to
it over real loopback HTTP exactly as it talks to api.openai.com. Routes under
``/_emulator/`` are for tests (ledger, clock, settings) and need no key.
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import json
import random
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from .store import ApiFailure, Store


@dataclass
class Faults:
    """Seeded fault injection for ``/v1`` calls."""

    rate: float = 0.0  # fraction answered 429 (with retry-after) or 500
    slow_rate: float = 0.0  # fraction delayed by slow_seconds
    slow_seconds: float = 1.0
    truncate_rate: float = 0.0  # fraction of file downloads cut off mid-body


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    store: Store
    faults: Faults
    rng: random.Random
    rng_lock: threading.Lock
    api_key: str | None

    injected: dict[str, int]
    connections: set[socket.socket]  # open client connections, so an outage can drop them

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.rng_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.rng_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Reset every open connection (kept-alive ones too), as a network outage does."""
        with self.rng_lock:
            open_now = list(self.connections)
        for conn in open_now:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed mid-request is ordinary here (crash tests); say nothing."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)

    def count(self, kind: str) -> None:
        with self.rng_lock:
            self.injected[kind] = self.injected.get(kind, 0) + 1

    def roll(self, p: float) -> bool:
        if p <= 0:
            return False
        with self.rng_lock:
            return self.rng.random() < p


Route = tuple[str, re.Pattern[str], str]
ROUTES: list[Route] = [
    ("POST", re.compile(r"^/v1/files$"), "upload"),
    ("GET", re.compile(r"^/v1/files$"), "list_files"),
    ("GET", re.compile(r"^/v1/files/([^/]+)$"), "get_file"),
    ("DELETE", re.compile(r"^/v1/files/([^/]+)$"), "delete_file"),
    ("GET", re.compile(r"^/v1/files/([^/]+)/content$"), "content"),
    ("POST", re.compile(r"^/v1/batches$"), "create_batch"),
    ("GET", re.compile(r"^/v1/batches$"), "list_batches"),
    ("GET", re.compile(r"^/v1/batches/([^/]+)$"), "get_batch"),
    ("POST", re.compile(r"^/v1/batches/([^/]+)/cancel$"), "cancel"),
    ("GET", re.compile(r"^/v1/models$"), "models"),
    ("GET", re.compile(r"^/v1/models/(.+)$"), "model"),
    ("GET", re.compile(r"^/_emulator/ledger$"), "ledger"),
    ("GET", re.compile(r"^/_emulator/health$"), "health"),
    ("POST", re.compile(r"^/_emulator/flush$"), "flush"),
    ("POST", re.compile(r"^/_emulator/config$"), "config"),
    ("POST", re.compile(r"^/_emulator/batches/([^/]+)$"), "tamper"),
]


def _route(method: str, path: str) -> tuple[str, re.Match[str]] | None:
    for verb, pattern, name in ROUTES:
        match = pattern.match(path)
        if match and verb == method:
            return name, match
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, no delayed-ACK stall
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    # plumbing -------------------------------------------------------------
    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        ctype = "application/octet-stream" if isinstance(payload, bytes) else "application/json"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(
        self,
        status: int,
        message: str,
        code: Any = None,
        etype: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        kind = etype or ("invalid_request_error" if status < 500 else "server_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        self._send(status, body, headers)

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._body()
        found = _route(method, url.path)
        if found is None:
            if any(pattern.match(url.path) for _, pattern, _ in ROUTES):
                self._error(405, f"Method {method} is not allowed for {url.path}.",
                            code="method_not_allowed")  # fmt: skip
            else:
                self._error(404, f"Unknown request URL: {method} {url.path}.", code="unknown_url")
            return
        name, match = found
        try:
            if url.path.startswith("/v1/"):
                if not self._authorised():
                    return
                if self._inject_fault(name, match, query, body):
                    return
            getattr(self, f"_r_{name}")(*match.groups(), query=query, body=body)
        except ApiFailure as failure:
            self._send(failure.status, failure.body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _authorised(self) -> bool:
        auth = self.headers.get("Authorization", "")
        token = auth[7:].strip() if auth.startswith("Bearer ") else ""
        expected = self.server.api_key
        if not token or (expected is not None and token != expected):
            self._error(
                401,
                "Incorrect API key provided." if token else "You didn't provide an API key.",
                code="invalid_api_key",
            )
            return False
        return True

    def _inject_fault(self, name: str, match: re.Match[str], query: dict, body: bytes) -> bool:
        faults = self.server.faults
        if self.server.roll(faults.slow_rate):
            time.sleep(faults.slow_seconds)
        if not self.server.roll(faults.rate):
            return False
        if self.server.roll(0.5):
            self.server.count("429")
            self._error(
                429,
                "Rate limit reached for requests. Please try again shortly.",
                code="rate_limit_exceeded",
                etype="requests",
                headers={"retry-after": "0", "retry-after-ms": "10"},
            )
            return True
        # A 500 on a write may come after the write took effect: the caller
        # cannot tell, which is exactly what exactly-once submission must survive.
        if name in ("upload", "create_batch", "cancel") and self.server.roll(0.5):
            with contextlib.suppress(ApiFailure):
                getattr(self, f"_r_{name}")(*match.groups(), query=query, body=body, reply=False)
        self.server.count("500")
        self._error(500, "The server had an error while processing your request.")
        return True

    # routes ---------------------------------------------------------------
    def _r_upload(self, *, query: dict, body: bytes, reply: bool = True) -> None:
        fields, files = _multipart(self.headers.get("Content-Type", ""), body)
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
        obj = self.server.store.upload(filename, fields["purpose"], data, expires)
        if reply:
            self._send(200, obj)

    def _r_list_files(self, *, query: dict, body: bytes) -> None:
        limit = _int_param(query, "limit", 10000, 1, 10000)
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise ApiFailure(400, "order must be 'asc' or 'desc'", param="order")
        page = self.server.store.list_files(query.get("purpose"), order, limit, query.get("after"))
        self._send(200, page)

    def _r_get_file(self, file_id: str, *, query: dict, body: bytes) -> None:
        self._send(200, self.server.store.get_file(file_id).obj())

    def _r_delete_file(self, file_id: str, *, query: dict, body: bytes) -> None:
        self._send(200, self.server.store.delete_file(file_id))

    def _r_content(self, file_id: str, *, query: dict, body: bytes) -> None:
        data = self.server.store.get_file(file_id).data
        if len(data) > 1 and self.server.roll(self.server.faults.truncate_rate):
            # Promise the whole file, send half, drop the connection.
            self.server.count("truncated")
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(200, data)

    def _r_create_batch(self, *, query: dict, body: bytes, reply: bool = True) -> None:
        payload = _json(body)
        obj = self.server.store.create_batch(payload)
        if reply:
            self._send(200, obj)

    def _r_list_batches(self, *, query: dict, body: bytes) -> None:
        limit = _int_param(query, "limit", 20, 1, 100)
        self._send(200, self.server.store.list_batches(limit, query.get("after")))

    def _r_get_batch(self, batch_id: str, *, query: dict, body: bytes) -> None:
        self._send(200, self.server.store.batch_obj(batch_id))

    def _r_cancel(self, batch_id: str, *, query: dict, body: bytes, reply: bool = True) -> None:
        obj = self.server.store.cancel(batch_id)
        if reply:
            self._send(200, obj)

    def _r_ledger(self, *, query: dict, body: bytes) -> None:
        self._send(200, {**self.server.store.ledger(), "faults": dict(self.server.injected)})

    def _r_model(self, model: str, *, query: dict, body: bytes) -> None:
        if model in self.server.store.settings.unknown_models:
            raise ApiFailure(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        self._send(
            200, {"id": model, "object": "model", "created": 0, "owned_by": "batchbench-emulator"}
        )

    def _r_models(self, *, query: dict, body: bytes) -> None:
        known = ["gpt-4o-mini", "gpt-4.1", "gpt-5.4-mini", "gpt-5.6-sol"]  # any other is too
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "batchbench-emulator"}
                for m in known]  # fmt: skip
        self._send(200, {"object": "list", "data": data})

    def _r_health(self, *, query: dict, body: bytes) -> None:
        self._send(200, {"ok": True})

    def _r_flush(self, *, query: dict, body: bytes) -> None:
        self.server.store.tick(flush=True)
        self._send(200, {"ok": True})

    def _r_tamper(self, batch_id: str, *, query: dict, body: bytes) -> None:
        change = _json(body)
        if not isinstance(change, dict):
            raise ApiFailure(400, "change must be a JSON object")
        self.server.store.tamper(batch_id, change)
        self._send(200, {"ok": True})

    def _r_config(self, *, query: dict, body: bytes) -> None:
        payload = _json(body)
        if not isinstance(payload, dict):
            raise ApiFailure(400, "config must be a JSON object")
        store, faults = self.server.store, self.server.faults
        with store.lock:
            for key, value in payload.items():
                if key in (
                    "latency",
                    "completion_window",
                    "enqueued_token_limit",
                    "paused",
                    "max_lines",
                    "max_batch_bytes",
                    "unknown_models",
                    "anomalies",
                ):
                    setattr(store.settings, key, value)
                elif key in ("fault_rate", "slow_rate", "slow_seconds", "truncate_rate"):
                    setattr(faults, "rate" if key == "fault_rate" else key, value)
                else:
                    raise ApiFailure(400, f"unknown setting {key!r}")
        self._send(200, {"ok": True})


def _json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiFailure(400, "We could not parse the JSON body of your request.") from None


def _int_param(query: dict, name: str, default: int, low: int, high: int) -> int:
    if name not in query:
        return default
    try:
        value = int(query[name])
    except ValueError:
        raise ApiFailure(400, f"Invalid '{name}': must be an integer", param=name) from None
    if not low <= value <= high:
        raise ApiFailure(400, f"Invalid '{name}': must be between {low} and {high}", param=name)
    return value


def _multipart(
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
