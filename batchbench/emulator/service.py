"""The emulator on a loopback port: its faces, its clock, start and stop.

Nothing runs in the background: every batch is moved to the clock's time when
a call arrives (or :meth:`Emulator.tick` is called), so with a
:class:`~.clock.FakeClock` shared with the client under test, the emulated
services are exactly where that client's own waits have put them.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .anomalies import ANOMALIES
from .catalogue import Catalogue
from .clock import Clock, SystemClock
from .core import Mangle, Settings, Store
from .face import Closes, Face, FaceFactory
from .faces import FACES
from .hub import Faults, Hub
from .model import Model, Responder
from .server import Server


class Emulator:
    """The emulator on a free loopback port, in background threads.

    ``with Emulator(latency=0.05) as emu: OpenAI(base_url=emu.base_url, ...)``
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        clock: Clock | None = None,
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
        mangle: Mangle | None = None,
        unknown_models: Sequence[str] = (),
        models: Iterable[str] = (),
        anomalies: Mapping[str, float] | None = None,
        judge_noise: float = 0.0,
        paused: bool = False,
        faces: Sequence[FaceFactory] = FACES,
        turnaround: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        settings = Settings(latency, completion_window, enqueued_token_limit, paused)
        settings.unknown_models = list(unknown_models)
        unknown = sorted(set(anomalies or {}) - set(ANOMALIES))
        if unknown:
            raise ValueError(f"unknown anomaly {unknown[0]!r} (known: {', '.join(ANOMALIES)})")
        settings.anomalies = dict(anomalies or {})
        settings.judge_noise = judge_noise
        settings.turnaround = {face: list(q) for face, q in (turnaround or {}).items()}
        self.store = Store(
            settings, self.clock, Model(responder, seed), Catalogue(models), seed, mangle
        )
        self.faults = Faults(fault_rate, slow_rate, slow_seconds, truncate_rate)
        self.hub = Hub(self.store, [make(self.store) for make in faces], self.faults, api_key)
        self._server = Server((host, port), self.hub, self.clock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

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
        """Each face's base URL, as its SDK (or its ``*_BASE_URL`` variable) takes it."""
        return {face.name: face.base_url(self.url) for face in self.hub.faces}

    def environment(self) -> dict[str, str]:
        """Every face's variables (:meth:`.face.Face.environment`): what a client sets to
        reach this emulator, whichever provider it grades."""
        found: dict[str, str] = {}
        for face in self.hub.faces:
            found.update(face.environment(self.url))
        return found

    def face(self, name: str) -> Face:
        """The face of that name; a name no face has is a ValueError naming the faces (a
        fault aimed at no face would inject nothing, and a test would pass unharmed)."""
        try:
            return self.hub.face(name)
        except KeyError:
            faces = ", ".join(f.name for f in self.hub.faces)
            raise ValueError(f"the emulator has no face {name!r} (its faces: {faces})") from None

    def start(self) -> Emulator:
        thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        for face in self.hub.faces:
            if isinstance(face, Closes):
                face.close()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def ledger(self) -> dict[str, Any]:
        """Every batch created and line executed (what a real service would bill), and the
        faults injected so far."""
        return self.hub.ledger()

    def calls(self, face: str) -> dict[str, int]:
        """The calls one face has answered so far, by ``"METHOD path"`` (a copy)."""
        with self.store.lock:
            return dict(self.hub.calls.get(face, {}))

    def outage(self, seconds: float) -> None:
        """Stop listening for ``seconds`` of the emulator's clock (connections are refused,
        open ones dropped), then come back on the same port with everything the services
        held, as after a network outage. On a fake clock it comes back exactly when the
        clock passes that moment; on real time, after a real wait."""
        address = (str(self._server.server_address[0]), int(self._server.server_address[1]))
        self._server.shutdown()
        self._server.server_close()
        self._server.drop_connections()

        def listen() -> None:
            self._server = Server(address, self.hub, self.clock)
            thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)
            thread.start()
            self._threads.append(thread)

        call_at = getattr(self.clock, "call_at", None)
        if call_at is not None:
            call_at(self.clock.time() + seconds, listen)
            return

        def come_back() -> None:
            if not self._stop.wait(seconds):
                listen()

        thread = threading.Thread(target=come_back, daemon=True)
        thread.start()
        self._threads.append(thread)

    def lose_creates(self, face: str, count: int = 1, *, colleague: bool = False) -> None:
        """The next ``count`` batch creates on ``face`` take effect, then answer 500: the
        caller cannot tell that its batch exists (a lost create). With ``colleague``, a
        batch of the same size (other request ids) is created right after each."""
        self.face(face)
        with self.hub.store.lock:
            self.hub.faults.lost_creates[face] = self.hub.faults.lost_creates.get(face, 0) + count
            if colleague:
                self.hub.faults.colleagues.add(face)

    def delay_creates(self, face: str, count: int = 1, after: float = 90.0) -> None:
        """The next ``count`` batch creates on ``face`` answer 504 at once (the front door
        gave up waiting) and take effect ``after`` seconds of the emulator's clock later:
        a create that lands after its caller gave up."""
        self.face(face)
        with self.hub.store.lock:
            self.hub.faults.landing_delay = after
            self.hub.faults.late_creates[face] = self.hub.faults.late_creates.get(face, 0) + count

    def refuse_creates(self, face: str, count: int = 1, after: float = 0.0) -> None:
        """The next ``count`` batch creates on ``face`` fail (overloaded) and make nothing,
        each ``after`` seconds (the emulator's clock) of hanging first."""
        self.face(face)
        with self.hub.store.lock:
            self.hub.faults.refusal_delay = after
            self.hub.faults.refused_creates[face] = (
                self.hub.faults.refused_creates.get(face, 0) + count
            )

    def flush(self) -> None:
        """Every batch to its end, now."""
        self.hub.advance(flush=True)

    def tick(self, now: float | None = None) -> None:
        """Advance every batch to where the clock puts it at ``now`` (default: the clock's
        time), even while paused."""
        self.hub.advance(self.clock.time() if now is None else now)

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take over the in-flight batches a snapshot holds (as a service outlives a
        client's process): each face restores its own section (``openai``,
        ``anthropic``, ``gemini``, ``fireworks``...)."""
        with self.store.lock:
            for face in self.hub.faces:
                section = state.get(face.name)
                if section:
                    face.restore(section)


def serve(emulator: Emulator, announce: Callable[[str], None] = print) -> None:
    """Run until interrupted (the ``batchbench emulator`` command)."""

    # SIGTERM (a service manager, `kill`) stops it as Ctrl-C does: what its faces left
    # behind (Vertex's credentials file, a private key) is removed on the way out. The
    # handler only says so (an event): raising from it could land inside a print, and a
    # SIGTERM in the middle of the banner once left the process unable to exit.
    stopping = threading.Event()

    def terminate(*_: object) -> None:
        stopping.set()

    emulator.start()
    # Before this, SIGTERM's default ends the process (the next emulator sweeps what it
    # left); from here on, at any moment — announcing included — it stops the emulator.
    signal.signal(signal.SIGTERM, terminate)
    try:
        _announce(emulator, announce)
        while not stopping.wait(1.0):  # a second at most between a SIGTERM and the stop
            pass
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()


def _announce(emulator: Emulator, announce: Callable[[str], None]) -> None:
    """Where the emulator listens and what to export to point each SDK at it."""
    announce(f"Batch API emulator listening on {emulator.url}")
    key = emulator.hub.api_key
    taken = f"the key {key!r} only" if key else "any key is taken"
    announce(f"Point a client at it with (every provider's face; {taken}):")
    keys: dict[str, str] = {}
    for face in emulator.hub.faces:  # the faces whose SDK reads a key from a variable
        variable = getattr(face, "key_variable", None)
        if isinstance(variable, str):
            keys[variable] = key or "rehearsal-not-secret"
    for name, value in {**emulator.environment(), **keys}.items():
        announce(f"  export {name}={value}")
    announce(
        f"# what it executed, as a real service would bill it: curl {emulator.url}/_emulator/ledger"
    )
