"""One call in, one reply out: which face, the clock, the key, the seeded faults.

The hub is the emulator without its HTTP: :mod:`.server` turns each request into
an :class:`Exchange` and writes back the :class:`Reply` the hub gives. For every
call the hub asks the registered faces in turn whose call it is, moves every
face's batches to the clock's time, routes the call among that face's routes
only (a path it does not serve is answered 404, or 405 for a method it does not
take, in its own error shape), lets the face check the key, and injects the
seeded faults in the face's words. Routes under ``/_emulator/`` are for tests
and rehearsals (ledger, flush, settings, a batch's fate) and need no key.

A fault is decided by the call's route and how many calls that route has had,
never by a stream other calls also draw from: however often a client polls,
its creates meet the same faults.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .anomalies import parse_anomaly
from .core import ApiFailure, Store
from .face import Exchange, Face, FaultKind, Reply, Route, Tampers, match
from .model import tokenizer_name, tokenizers

_SETTINGS = (
    "latency",
    "turnaround",
    "completion_window",
    "enqueued_token_limit",
    "paused",
    "max_lines",
    "max_batch_bytes",
    "max_request_bytes",
    "unknown_models",
    "anomalies",
    "judge_noise",
    "azure_deployments",
    "bedrock_min_records",
    "flex_busy",
    "flex_busy_tries",
    "expired_tokens",
    "flex_seconds",
)
_FAULTS = {
    "fault_rate": "rate",
    "slow_rate": "slow_rate",
    "slow_seconds": "slow_seconds",
    "truncate_rate": "truncate_rate",
    "lost_creates": "lost_creates",
}


# What a front door (a load balancer, a CDN) answers when the service behind it has not
# answered in time: the request may still be worked on (RFC 9110 §15.6.5, 504).
GATEWAY_TIMEOUT = ApiFailure(
    504, "Gateway Timeout: the upstream server did not answer in time", code="gateway_timeout"
)


@dataclass
class Faults:
    """Seeded fault injection for API calls (not ``/_emulator/`` ones)."""

    rate: float = 0.0  # share answered 429 (with retry-after) or a server error
    slow_rate: float = 0.0  # share delayed by slow_seconds
    slow_seconds: float = 1.0
    truncate_rate: float = 0.0  # share of file downloads cut off mid-body
    # face → how many of its next batch creates take effect and then lose their reply
    # (a 500 after the write: the caller cannot tell whether the batch exists)
    lost_creates: dict[str, int] = field(default_factory=dict)
    # faces where, right after a lost create, a colleague creates a batch of the same
    # size (inline requests, other ids): two candidates only their results tell apart
    colleagues: set[str] = field(default_factory=set)
    # face → how many of its next batch creates answer 503 without taking effect (a
    # service that makes no batches for a while; everything else answers)
    refused_creates: dict[str, int] = field(default_factory=dict)
    refusal_delay: float = 0.0  # seconds each such create hangs before it fails
    # face → how many of its next batch creates time out at its front door (504) and
    # reach the service later, ``landing_delay`` seconds of the clock after the caller
    # gave up: the batch appears then, as a create held in a queue does
    late_creates: dict[str, int] = field(default_factory=dict)
    landing_delay: float = 90.0


class Hub:
    def __init__(self, store: Store, faces: Sequence[Face], faults: Faults, api_key: str | None):
        self.store = store
        self.faces = list(faces)
        self.faults = faults
        self.api_key = api_key
        # face → "METHOD path" → calls answered (a client's cost in requests, e.g. a
        # bucket's per tick); control routes not counted
        self.calls: dict[str, dict[str, int]] = {}
        # creates held on their way in (a late create): when each lands, and the call
        self.landing: list[tuple[float, Route, Exchange, tuple[str, ...]]] = []
        self.control: list[Route] = [
            Route("GET", re.compile(r"^/_emulator/ledger$"), self._ledger),
            Route("GET", re.compile(r"^/_emulator/calls$"), lambda x: Reply(self.calls)),
            Route("GET", re.compile(r"^/_emulator/health$"), lambda x: Reply({"ok": True})),
            Route("POST", re.compile(r"^/_emulator/flush$"), self._flush),
            Route("POST", re.compile(r"^/_emulator/config$"), self._config),
            Route("POST", re.compile(r"^/_emulator/batches/([^/]+)$"), self._tamper),
        ]

    def face(self, name: str) -> Face:
        for face in self.faces:
            if face.name == name:
                return face
        raise KeyError(name)

    # the clock ----------------------------------------------------------------
    def advance(self, now: float | None = None, flush: bool = False) -> None:
        """Every face's batches to where ``now`` (the clock's time) puts them."""
        with self.store.lock:
            when = self.store.now() if now is None else now
            self._land(when)  # a held create lands on time, batches paused or not
            if self.store.settings.paused and now is None and not flush:
                return
            for face in self.faces:
                face.advance(when, flush)

    def _land(self, when: float) -> None:
        """The held creates whose time has come take effect, in the order they were sent."""
        due = [held for held in self.landing if held[0] <= when]
        self.landing = [held for held in self.landing if held[0] > when]
        for _, route, x, groups in due:
            with contextlib.suppress(ApiFailure):  # refused on landing: nothing made
                route.handle(x, *groups)
            self._count("late create landed")

    def ledger(self) -> dict[str, Any]:
        with self.store.lock:
            self.advance()
            return {
                "batches": [b for face in self.faces for b in face.ledger()],
                "executions": list(self.store.executions),
                "faults": dict(self.store.faults),
                "tokenizer": tokenizer_name(),  # what counted the tokens the replies report
                "tokenizers": tokenizers([face.name for face in self.faces]),  # per face
            }

    # one call -----------------------------------------------------------------
    def handle(self, x: Exchange, sleep: Callable[[float], None]) -> tuple[Reply, bool]:
        """The reply to one call, and whether a download is to be cut off mid-body."""
        control = match(self.control, x.method, x.path)
        if control is not None:
            route, groups = control
            try:
                return route.handle(x, *groups), False
            except ApiFailure as refusal:
                return self.face("openai").error(refusal), False
        face = next(f for f in self.faces if f.claims(x))
        found = match(face.routes, x.method, x.path)
        if found is None:
            if any(r.pattern.match(x.path) for r in face.routes):
                failure = ApiFailure(
                    405,
                    f"Method {x.method} is not allowed for {x.path}.",
                    code="method_not_allowed",
                )
            else:
                failure = ApiFailure(
                    404,
                    f"Unknown request URL: {x.method} {x.path}.",
                    kind="not_found_error",
                    code="unknown_url",
                )
            return face.error(failure), False
        route, groups = found
        with self.store.lock:
            mine = self.calls.setdefault(face.name, {})
            mine[f"{x.method} {x.path}"] = mine.get(f"{x.method} {x.path}", 0) + 1
        refused = face.authorise(x, self.api_key)
        if refused is not None:
            return face.error(refused), False
        key = f"{face.name} {route.method} {route.pattern.pattern}"
        n = self.store.decide.nth(key)
        decide = self.store.decide
        if decide.roll("slow", f"{key}#{n}", self.faults.slow_rate):
            sleep(self.faults.slow_seconds)
        if route.creates and self.faults.refused_creates.get(face.name, 0) > 0:
            sleep(self.faults.refusal_delay)  # a create that hangs, then fails
            with self.store.lock:
                self.faults.refused_creates[face.name] -= 1
                self._count("refused create")
            return face.error(face.fault("overloaded")), False
        with self.store.lock:
            self.advance()
            if route.creates and self.faults.late_creates.get(face.name, 0) > 0:
                self.faults.late_creates[face.name] -= 1
                land_at = self.store.now() + self.faults.landing_delay
                self.landing.append((land_at, route, x, groups))
                self._count("late create")
                return face.error(GATEWAY_TIMEOUT), False
            if route.creates and self.faults.lost_creates.get(face.name, 0) > 0:
                self.faults.lost_creates[face.name] -= 1
                with contextlib.suppress(ApiFailure):
                    route.handle(x, *groups)
                    if face.name in self.faults.colleagues:
                        route.handle(_colleagues(x), *groups)
                self._count("lost create")
                return face.error(face.fault("500")), False
            if decide.roll("fault", f"{key}#{n}", self.faults.rate):
                return self._fault(face, route, x, groups, f"{key}#{n}"), False
            try:
                reply = route.handle(x, *groups)
            except ApiFailure as failure:
                return face.error(failure), False
        cut = reply.file and decide.roll("truncate", f"{key}#{n}", self.faults.truncate_rate)
        if cut:
            self._count("truncated")
        return reply, cut

    def _fault(
        self, face: Face, route: Route, x: Exchange, groups: tuple[str, ...], key: str
    ) -> Reply:
        pick = self.store.decide.chance("fault-kind", key)
        if pick < 0.5:
            self._count("429")
            return face.error(face.fault("429"))
        # A 500 on a write may come after the write took effect: the caller cannot
        # tell, which is exactly what exactly-once submission must survive.
        if route.writes and self.store.decide.chance("fault-after-write", key) < 0.5:
            with contextlib.suppress(ApiFailure):
                route.handle(x, *groups)
        kind: FaultKind = "overloaded" if pick < 0.75 else "500"
        failure = face.fault(kind)
        self._count(str(failure.status))
        return face.error(failure)

    def _count(self, kind: str) -> None:
        self.store.faults[kind] = self.store.faults.get(kind, 0) + 1

    # /_emulator/ --------------------------------------------------------------
    def _ledger(self, x: Exchange) -> Reply:
        return Reply(self.ledger())

    def _flush(self, x: Exchange) -> Reply:
        self.advance(flush=True)
        return Reply({"ok": True})

    def _config(self, x: Exchange) -> Reply:
        payload = x.json()
        if not isinstance(payload, dict):
            raise ApiFailure(400, "config must be a JSON object")
        with self.store.lock:
            for key, value in payload.items():
                if key == "anomalies":  # each a bad day the emulator has, at a rate
                    value = _anomalies(value)
                if key in _SETTINGS:
                    setattr(self.store.settings, key, value)
                elif key in _FAULTS:
                    setattr(self.faults, _FAULTS[key], value)
                else:
                    raise ApiFailure(400, f"unknown setting {key!r}")
        return Reply({"ok": True})

    def _tamper(self, x: Exchange, batch_id: str) -> Reply:
        """Make an OpenAI-shaped batch vanish (``{"forget": true}``) or report another
        ``status``: the batch of whichever face's book holds it."""
        change = x.json()
        if not isinstance(change, dict):
            raise ApiFailure(400, "change must be a JSON object")
        with self.store.lock:
            for face in self.faces:
                if isinstance(face, Tampers):
                    try:
                        face.tamper(batch_id, change)
                    except ApiFailure as failure:
                        if failure.status == 404:
                            continue  # another face's batch
                        raise
                    return Reply({"ok": True})
        raise ApiFailure(404, f"no face has a batch {batch_id}")


def _anomalies(value: Any) -> dict[str, float]:
    """``{name: rate}``, each name a bad day of :data:`.anomalies.ANOMALIES` (a name it
    does not have would switch nothing on: refused, naming the known ones)."""
    if not isinstance(value, dict):
        raise ApiFailure(400, "anomalies must be an object of name: rate")
    out = {}
    for name, rate in value.items():
        try:
            out[name] = parse_anomaly(f"{name}={rate}")[1]
        except ValueError as exc:
            raise ApiFailure(400, str(exc)) from None
    return out


def _colleagues(x: Exchange) -> Exchange:
    """The same create as a colleague's: its inline requests under ids of their own."""
    payload = x.json()
    for n, request in enumerate(payload.get("requests") or []):
        request["custom_id"] = f"colleague-{n}"
    return dataclasses.replace(x, body=json.dumps(payload).encode())
