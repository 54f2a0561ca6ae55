"""A real Chromium, driven over the DevTools protocol on a pipe (no websocket, no
third-party client): open a page, run a script in it, read what it returns.

``--remote-debugging-pipe`` makes Chromium read commands on fd 3 and write replies
on fd 4, each a JSON message ended by a NUL byte.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,1600",
]


class Browser:
    def __init__(self, binary: str, profile: Path, offline: bool = True) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire() -> None:  # in the child: its fd 3 reads our commands, fd 4 writes replies
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)
            for fd in (3, 4):  # dup2 onto itself (a pipe that already was fd 3) keeps CLOEXEC
                os.set_inheritable(fd, True)

        cut_off = (
            ["unshare", "-n"] if offline and os.geteuid() == 0 and shutil.which("unshare") else []
        )
        self.proc = subprocess.Popen(
            [*cut_off, binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            close_fds=False,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._buffer = b""
        self.session: str | None = None

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> Any:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no reply to {method}")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buffer += chunk

    def open(self, url: str) -> None:
        """A new tab on ``url``, once it has loaded (its scripts have run)."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        self.call("Page.navigate", {"url": url})
        loaded = f"location.href === {json.dumps(url)} && document.readyState === 'complete'"
        for _ in range(1200):
            if self.evaluate(loaded):
                return
            time.sleep(0.05)
        raise TimeoutError(f"{url} never finished loading")

    def evaluate(self, expression: str) -> Any:
        found = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in found:
            raise RuntimeError(f"{expression}: {found['exceptionDetails']}")
        return found["result"].get("value")

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=10)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
