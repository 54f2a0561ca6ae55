"""The emulator's HTTP: a threaded server on one loopback port, in front of the hub.

Built on the standard library's threaded HTTP server: each provider's official
SDK talks to it over real loopback HTTP exactly as it talks to the service.
This module only turns requests into :class:`~.face.Exchange` objects and
:class:`~.face.Reply` objects into responses (a file download the hub cuts off
promises its whole length, sends half and drops the connection); which face
answers and how is :mod:`.hub`'s business.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from .clock import Clock
from .face import Exchange, Reply
from .hub import Hub


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], hub: Hub, clock: Clock) -> None:
        super().__init__(address, Handler)
        self.hub = hub
        self.clock = clock
        self.lock = threading.Lock()
        self.connections: set[socket.socket] = set()  # open ones, so an outage can drop them

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Reset every open connection (kept-alive ones too), as a network outage does."""
        with self.lock:
            open_now = list(self.connections)
        for conn in open_now:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed mid-request is ordinary here (crash tests); say nothing."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, no delayed-ACK stall
    server: Server

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

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

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

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        host, port = self.server.server_address[:2]
        exchange = Exchange(
            method=method,
            path=url.path,
            query={k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()},
            headers={k.lower(): v for k, v in self.headers.items()},
            body=self._body(),
            base=f"http://{self.headers.get('Host') or f'{host!s}:{port}'}",
        )
        try:
            reply, cut = self.server.hub.handle(exchange, self.server.clock.sleep)
            self._send(reply, cut)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(self, reply: Reply, cut: bool) -> None:
        if isinstance(reply.body, bytes):
            data = reply.body
            ctype = reply.content_type or "application/octet-stream"
        else:
            data = json.dumps(reply.body).encode()
            ctype = reply.content_type or "application/json"
        self.send_response(reply.status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command == "HEAD":  # the headers a GET would have, no body (RFC 9110 §9.3.2)
            return
        if cut and len(data) > 1:
            # The whole length was promised: half is sent and the connection dropped.
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data)
