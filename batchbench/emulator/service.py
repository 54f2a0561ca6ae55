"""The emulator on a loopback port: its threads, its clock, start and stop."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .model import Responder
from .server import Faults, Handler, _Server
from .store import Settings, Store


class Emulator:
    """The emulator on a free loopback port, in background threads.

    ``with Emulator(latency=0.05) as emu: OpenAI(base_url=emu.base_url, ...)``
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        latency: float = 0.05,
        completion_window: float = 86400.0,
        responder: Responder | None = None,
        fault_rate: float = 0.0,
        slow_rate: float = 0.0,
        slow_seconds: float = 1.0,
        truncate_rate: float = 0.0,
        seed: int = 0,
        enqueued_token_limit: int | None = None,
        api_key: str | None = None,
        mangle: Callable[[str, list[str]], list[str]] | None = None,
        unknown_models: Sequence[str] = (),
        anomalies: Mapping[str, float] | None = None,
        paused: bool = False,
    ) -> None:
        settings = Settings(latency, completion_window, enqueued_token_limit, paused)
        settings.unknown_models = list(unknown_models)
        settings.anomalies = dict(anomalies or {})
        self.store = Store(settings, seed=seed, responder=responder, mangle=mangle)
        self.faults = Faults(fault_rate, slow_rate, slow_seconds, truncate_rate)
        self._api_key = api_key
        self._rng = random.Random(seed + 1)
        self._injected: dict[str, int] = {}
        self._server = self._listen((host, port))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _listen(self, address: tuple[str, int]) -> _Server:
        server = _Server(address, Handler)
        server.store = self.store
        server.faults = self.faults
        server.rng = self._rng
        server.rng_lock = threading.Lock()
        server.api_key = self._api_key
        server.injected = self._injected
        server.connections = set()
        return server

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """OpenAI's base URL here (the openai SDK's ``base_url``)."""
        return f"{self.url}/v1"

    @property
    def base_urls(self) -> dict[str, str]:
        """Each provider's face, as its SDK's base URL (Anthropic's, Gemini's and Fireworks',
        as their ``*_BASE_URL`` variables, have no /v1)."""
        return {
            "openai": self.base_url,
            "anthropic": self.url,
            "gemini": self.url,
            "fireworks": self.url,
        }

    def _clock(self) -> None:
        """The emulated service's clock; ``paused`` stops it (a test then drives
        :meth:`tick` by hand)."""
        while not self._stop.is_set():
            if not self.store.settings.paused:
                self.store.tick()
            interval = min(0.05, max(0.002, self.store.settings.latency / 10))
            self._stop.wait(interval)

    def start(self) -> Emulator:
        for target in (self._server.serve_forever, self._clock):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def ledger(self) -> dict[str, Any]:
        """Every batch created and line executed, and the faults injected so far."""
        return {**self.store.ledger(), "faults": dict(self._server.injected)}

    def outage(self, seconds: float) -> None:
        """Tests: stop listening for ``seconds`` (connections are refused), then come back
        on the same port with everything the service held, as after a network outage."""
        address = self._server.server_address[:2]
        self._server.shutdown()
        self._server.server_close()
        self._server.drop_connections()

        def come_back() -> None:
            if self._stop.wait(seconds):
                return
            self._server = self._listen((str(address[0]), int(address[1])))
            self._server.serve_forever()

        thread = threading.Thread(target=come_back, daemon=True)
        thread.start()
        self._threads.append(thread)

    def flush(self) -> None:
        """Every batch to its end, now."""
        self.store.tick(flush=True)

    def tick(self, now: float) -> None:
        """Advance every batch to where the clock puts it at ``now`` (a Unix time)."""
        self.store.tick(now)


def serve(emulator: Emulator, announce: Callable[[str], None] = print) -> None:
    """Run until interrupted (the ``batchbench emulator`` command)."""
    emulator.start()
    announce(f"Batch API emulator listening on {emulator.base_url}")
    announce(
        f"  OPENAI_BASE_URL={emulator.base_urls['openai']}"
        f"  ANTHROPIC_BASE_URL={emulator.base_urls['anthropic']}"
        f"  GOOGLE_GEMINI_BASE_URL={emulator.base_urls['gemini']}"
        f"  FIREWORKS_BASE_URL={emulator.base_urls['fireworks']}"
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
