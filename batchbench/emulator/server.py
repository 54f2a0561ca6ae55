"""The HTTP plumbing of the emulator: one port, a face per provider, the faults.

Built on the standard library's threaded HTTP server: each provider's official
SDK talks to it over real loopback HTTP exactly as it talks to the service.
Each face (:mod:`.openai_routes`, :mod:`.anthropic_routes`,
:mod:`.gemini_routes`) brings its routes; this module picks the face of a call
by what its SDK sends (``anthropic-version``; Google's ``x-goog-api-key`` or an
upload session; Fireworks' ``/v1/accounts/…``; else OpenAI's), since some
paths (``/v1/models/…``, ``/v1/files/…``) are served by several, checks the key the way that service
does, injects the seeded faults and writes every error in that service's
envelope. Routes under ``/_emulator/`` are for tests (ledger,
clock, settings) and need no key.
"""

from __future__ import annotations

import contextlib
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

from . import (
    anthropic,
    anthropic_routes,
    fireworks,
    fireworks_routes,
    gemini_model,
    gemini_routes,
    openai_routes,
)
from .routes import Face, Route, json_body
from .store import ApiFailure, Store


@dataclass
class Faults:
    """Seeded fault injection for ``/v1`` calls."""

    rate: float = 0.0  # fraction answered 429 (retry-after) or 500 (Anthropic: or 529; Gemini: 503)
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


def _ledger(h: Handler, *, query: dict, body: bytes) -> None:
    h.send(200, {**h.server.store.ledger(), "faults": dict(h.server.injected)})


def _health(h: Handler, *, query: dict, body: bytes) -> None:
    h.send(200, {"ok": True})


def _flush(h: Handler, *, query: dict, body: bytes) -> None:
    h.server.store.tick(flush=True)
    h.send(200, {"ok": True})


def _tamper(h: Handler, batch_id: str, *, query: dict, body: bytes) -> None:
    change = json_body(body)
    if not isinstance(change, dict):
        raise ApiFailure(400, "change must be a JSON object")
    h.server.store.tamper(batch_id, change)
    h.send(200, {"ok": True})


_SETTINGS = ("latency", "completion_window", "enqueued_token_limit", "paused", "max_lines",
             "max_batch_bytes", "max_request_bytes", "unknown_models", "anomalies")  # fmt: skip
_FAULTS = {"fault_rate": "rate", "slow_rate": "slow_rate", "slow_seconds": "slow_seconds",
           "truncate_rate": "truncate_rate"}  # fmt: skip


def _config(h: Handler, *, query: dict, body: bytes) -> None:
    payload = json_body(body)
    if not isinstance(payload, dict):
        raise ApiFailure(400, "config must be a JSON object")
    store, faults = h.server.store, h.server.faults
    with store.lock:
        for key, value in payload.items():
            if key in _SETTINGS:
                setattr(store.settings, key, value)
            elif key in _FAULTS:
                setattr(faults, _FAULTS[key], value)
            else:
                raise ApiFailure(400, f"unknown setting {key!r}")
    h.send(200, {"ok": True})


def _e(method: str, path: str, handle: Any) -> Route:
    return Route(method, re.compile(path), handle, "emulator")


ROUTES: list[Route] = [
    *openai_routes.ROUTES,
    *anthropic_routes.ROUTES,
    *gemini_routes.ROUTES,
    *fireworks_routes.ROUTES,
    _e("GET", r"^/_emulator/ledger$", _ledger),
    _e("GET", r"^/_emulator/health$", _health),
    _e("POST", r"^/_emulator/flush$", _flush),
    _e("POST", r"^/_emulator/config$", _config),
    _e("POST", r"^/_emulator/batches/([^/]+)$", _tamper),
]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, no delayed-ACK stall
    server: _Server
    face: Face = "openai"

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

    # replies ----------------------------------------------------------------
    def send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        ctype = "application/octet-stream" if isinstance(payload, bytes) else "application/json"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if self.face == "anthropic":
            self.send_header("request-id", f"req_{random.getrandbits(64):016x}")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def send_file(self, data: bytes, ctype: str) -> None:
        """A file's bytes; under ``--truncate-rate`` the whole length is promised, half
        is sent and the connection dropped."""
        if len(data) > 1 and self.server.roll(self.server.faults.truncate_rate):
            self.server.count("truncated")
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send(200, data)

    def error(
        self, status: int, message: str, code: Any = None, kind: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        """An error in the envelope of the face being spoken to."""
        if self.face == "anthropic":
            self.send(status, anthropic.error_body(status, message, kind), headers)
            return
        if self.face == "gemini":
            self.send(status, gemini_model.error_body(status, message), headers)
            return
        if self.face == "fireworks":
            self.send(status, fireworks.error_body(status, message), headers)
            return
        kind = kind or ("invalid_request_error" if status < 500 else "server_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        self.send(status, body, headers)

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

    def _face(self, path: str, query: dict) -> Face:
        """Whose SDK is calling, from what it sends."""
        if "anthropic-version" in self.headers:
            return "anthropic"
        if "x-goog-api-key" in self.headers or "key" in query or path.startswith("/upload/"):
            return "gemini"
        if path.startswith(("/v1/accounts/", "/_fireworks/")):
            return "fireworks"
        return "openai"

    def _route(self, method: str, path: str) -> tuple[Route, re.Match[str]] | None:
        found = [(r, m) for r in ROUTES if r.method == method and (m := r.pattern.match(path))]
        for route, match in found:
            if route.face in (self.face, "emulator"):
                return route, match
        return found[0] if found else None

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._body()
        self.face = self._face(url.path, query)
        found = self._route(method, url.path)
        if found is None:
            if any(route.pattern.match(url.path) for route in ROUTES):
                self.error(405, f"Method {method} is not allowed for {url.path}.",
                           code="method_not_allowed")  # fmt: skip
            else:
                kind = "not_found_error" if self.face == "anthropic" else None
                self.error(404, f"Unknown request URL: {method} {url.path}.", code="unknown_url",
                           kind=kind)  # fmt: skip
            return
        route, match = found
        self.face = route.face if route.face != "emulator" else self.face
        try:
            if route.face != "emulator":
                if not self._authorised(query):
                    return
                if self._inject_fault(route, match, query, body):
                    return
            route.handle(self, *match.groups(), query=query, body=body)
        except ApiFailure as failure:
            envelope = failure.body
            if self.face == "anthropic" and envelope.get("type") != "error":
                envelope = anthropic.error_body(failure.status, str(failure))
            if self.face == "gemini" and "status" not in envelope.get("error", {}):
                envelope = gemini_model.error_body(failure.status, str(failure))
            if self.face == "fireworks" and "code" not in envelope:
                envelope = fireworks.error_body(failure.status, str(failure))
            self.send(failure.status, envelope)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _authorised(self, query: dict) -> bool:
        """The key where that service looks for it: OpenAI's bearer token; Anthropic's
        ``x-api-key`` or bearer token (the anthropic SDK 2.x sends the key as a bearer
        token, older ones and curl examples as ``x-api-key``); Google's own way."""
        if self.face == "gemini":
            return gemini_routes.authorised(self, query)
        if self.face == "fireworks":
            return fireworks_routes.authorised(self, query)
        expected = self.server.api_key
        auth = self.headers.get("Authorization", "")
        token = auth[7:].strip() if auth.startswith("Bearer ") else ""
        if self.face == "anthropic":
            token = self.headers.get("x-api-key", "") or token
            if not token:
                self.error(401, "x-api-key header is required", kind="authentication_error")
                return False
            if expected is not None and token != expected:
                self.error(401, "invalid x-api-key", kind="authentication_error")
                return False
            return True
        if not token or (expected is not None and token != expected):
            self.error(
                401,
                "Incorrect API key provided." if token else "You didn't provide an API key.",
                code="invalid_api_key",
            )
            return False
        return True

    def _inject_fault(self, route: Route, match: re.Match[str], query: dict, body: bytes) -> bool:
        faults = self.server.faults
        if self.server.roll(faults.slow_rate):
            time.sleep(faults.slow_seconds)
        if not self.server.roll(faults.rate):
            return False
        if self.server.roll(0.5):
            self.server.count("429")
            self.error(
                429,
                "Rate limit reached for requests. Please try again shortly.",
                code="rate_limit_exceeded",
                kind="rate_limit_error" if self.face == "anthropic" else "requests",
                headers={"retry-after": "0", "retry-after-ms": "10"},
            )
            return True
        # A 500 on a write may come after the write took effect: the caller
        # cannot tell, which is exactly what exactly-once submission must survive.
        if route.writes and self.server.roll(0.5):
            with contextlib.suppress(ApiFailure):
                route.handle(self, *match.groups(), query=query, body=body, reply=False)
        if self.face == "anthropic" and self.server.roll(0.5):
            self.server.count("529")
            self.error(529, "Overloaded", kind="overloaded_error")
            return True
        if self.face in ("gemini", "fireworks") and self.server.roll(0.5):
            self.server.count("503")
            self.error(503, "The model is overloaded. Please try again later.")
            return True
        self.server.count("500")
        self.error(500, "The server had an error while processing your request.")
        return True
