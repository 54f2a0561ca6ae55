"""What a provider's face is: its routes, its book, its errors, behind one interface.

The server (:mod:`.server`) knows faces only through :class:`Face`: it asks each
registered face in turn whether a call is its (by what that service's SDK
sends: a header, a path), advances every face's book to the clock's time,
routes the call among that face's routes only (an unknown path is answered in
that face's own error shape), lets the face check the key the way its service
does, injects the seeded faults in the face's words, and writes the face's
:class:`Reply`. A route handler is a plain function of an :class:`Exchange`:
no HTTP, no server, so faces import nothing of the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .core import ApiFailure, Store

FaultKind = Literal["429", "500", "overloaded"]


@dataclass
class Exchange:
    """One call as a face sees it."""

    method: str
    path: str
    query: dict[str, str]
    headers: Mapping[str, str]  # names in lower case
    body: bytes
    base: str  # this emulator's address as the caller reached it (http://host:port)

    def header(self, name: str) -> str:
        return self.headers.get(name.lower()) or ""

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ApiFailure(400, "We could not parse the JSON body of your request.") from None

    def int_param(
        self, name: str, default: int, low: int, high: int, *, coerce: bool = False
    ) -> int:
        """An integer query parameter in [low, high]; ``coerce``: out of range is clamped
        (as services that document "values above N will be coerced to N" do)."""
        if name not in self.query:
            return default
        try:
            value = int(self.query[name])
        except ValueError:
            raise ApiFailure(400, f"Invalid '{name}': must be an integer", param=name) from None
        if coerce:
            return max(low, min(high, value)) if value > 0 else default
        if not low <= value <= high:
            raise ApiFailure(400, f"Invalid '{name}': must be between {low} and {high}", param=name)
        return value


@dataclass
class Reply:
    """What a route answers: JSON (any JSON-able value) or bytes (a file)."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    file: bool = False  # a file download: subject to the truncation fault
    content_type: str | None = None


Handle = Callable[..., Reply]


@dataclass(frozen=True)
class Route:
    """``handle(exchange, *groups)`` answers ``method`` on ``pattern``.

    ``writes``: the call changes the service's state, so an injected 500 may come
    after the change took effect (the caller cannot tell: exactly what
    exactly-once submission must survive).
    """

    method: str
    pattern: re.Pattern[str]
    handle: Handle
    writes: bool = False
    creates: bool = False  # the call that creates a batch (a billable one)


def route(
    method: str, path: str, handle: Handle, writes: bool = False, creates: bool = False
) -> Route:
    return Route(method, re.compile(path), handle, writes or creates, creates)


class Face(Protocol):
    """One provider's service on the emulator's port."""

    name: str
    routes: Sequence[Route]

    def claims(self, x: Exchange) -> bool:
        """Whether this call is for this face (what its SDK sends says so)."""
        ...

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        """Why the key is refused, as the service says it (None: accepted)."""
        ...

    def error(self, failure: ApiFailure) -> Reply:
        """A failure in this service's error envelope."""
        ...

    def fault(self, kind: FaultKind) -> ApiFailure:
        """This service's own words for a seeded fault."""
        ...

    def advance(self, now: float, flush: bool) -> None:
        """Every batch of this face's book to where ``now`` puts it (``flush``: to its end)."""
        ...

    def ledger(self) -> list[dict[str, Any]]:
        """Every batch this face was asked to create."""
        ...

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take over in-flight batches a snapshot holds (this face's section of it)."""
        ...

    def base_url(self, url: str) -> str:
        """The base URL its SDK is given for an emulator at ``url``."""
        ...

    def environment(self, url: str) -> dict[str, str]:
        """The variables a client of this face sets for an emulator at ``url``: its base
        URL's, and the account it grades in (the emulator takes any; none is a secret)."""
        ...


FaceFactory = Callable[[Store], Face]


@runtime_checkable
class Tampers(Protocol):
    """A face whose batches a test can make vanish or misreport (``/_emulator/batches``)."""

    def tamper(self, batch_id: str, change: Mapping[str, Any]) -> None: ...


@runtime_checkable
class Closes(Protocol):
    """A face that leaves something behind while it runs (Vertex's credentials file):
    removed when the emulator stops, however it is stopped."""

    def close(self) -> None: ...


def match(routes: Sequence[Route], method: str, path: str) -> tuple[Route, tuple[str, ...]] | None:
    for r in routes:
        if r.method == method:
            found = r.pattern.match(path)
            if found:
                return r, found.groups()
    return None


def bearer(x: Exchange) -> str:
    auth = x.header("Authorization")
    return auth[7:].strip() if auth.startswith("Bearer ") else ""
