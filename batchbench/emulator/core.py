"""What every face shares and none owns: failures, settings, seeded decisions, the ledger.

The store knows no provider: each face (:mod:`.faces`) keeps its own book of
files and batches and renders its own errors; the store holds the clock, the
settings, the simulated model, the catalogue of model names, the seeded
decisions and the ledger of executed lines (what a real service would bill).
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar

from .catalogue import Catalogue
from .clock import Clock
from .model import Model, token_ids
from .prompt_cache import PromptCache

T = TypeVar("T")
# Tests: a service that returns broken files. Called with the kind of file ("output",
# "error", "results", "responses") and its lines; returns the lines to write.
Mangle = Callable[[str, list[str]], list[str]]


class ApiFailure(Exception):
    """An HTTP error reply. The face being spoken to writes it in its own envelope
    (:meth:`.face.Face.error`); ``kind`` is the error's type in that service's words
    when it has one (Anthropic's ``not_found_error``, say)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str | None = None,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code
        self.headers = headers or {}


@dataclass
class Settings:
    """What a test or a rehearsal can change while the emulator runs."""

    latency: float = 0.05  # seconds each phase of a batch takes
    completion_window: float = 86400.0  # the "24h" window
    enqueued_token_limit: int | None = None  # OpenAI: in-flight prompt tokens per model
    paused: bool = False  # batches do not move (a test moves them: tick, flush)
    max_lines: int | None = None  # lines a batch file may hold (None: each service's own)
    max_batch_bytes: int = 200 * 1024 * 1024  # OpenAI: bytes a batch file may hold
    max_request_bytes: int = 256 * 1024 * 1024  # Anthropic: one create call's body
    unknown_models: list[str] = field(default_factory=list)  # answered as unknown anyway
    anomalies: dict[str, float] = field(default_factory=dict)  # name → rate (.anomalies)
    judge_noise: float = 0.0  # share of the simulated judge's verdicts flipped (seeded)
    azure_deployments: dict[str, str] = field(default_factory=dict)  # deployment → model
    bedrock_min_records: int = 100  # Bedrock: the account's minimum records per job
    # A flex tier (OpenAI's, Gemini's): the share of calls refused for want of capacity
    # (unbilled), and how long each served call takes (on the emulator's clock).
    flex_busy: float = 0.2
    flex_busy_tries: int = 0  # and each flex call's first tries refused so, every time
    flex_seconds: float = 0.01
    # Vertex AI: access tokens given before this time (the emulator's clock) have expired.
    expired_tokens: float = 0.0
    # How long a batch runs, per face, as recorded turnaround quantiles in seconds
    # ``[p50, p90, p99]`` (a face not named runs its batches in ``latency``).
    turnaround: dict[str, list[float]] = field(default_factory=dict)


class Decider:
    """Seeded decisions that depend only on what they are about, never on their order.

    ``chance(kind, key)`` is a fixed number in [0, 1) for each (seed, kind, key):
    whether a line lands in the error file, a poll lags or a call fails does not
    move with how often anything else was polled. Ids come from their own stream,
    drawn only when something is created.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._ids = random.Random(seed)
        self._counters: dict[str, int] = {}

    def chance(self, kind: str, key: str) -> float:
        digest = hashlib.sha256(f"{self.seed}\0{kind}\0{key}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def roll(self, kind: str, key: str, rate: float) -> bool:
        return rate > 0 and self.chance(kind, key) < rate

    def nth(self, counter: str) -> int:
        """How many times ``counter`` was asked for before (0 the first time)."""
        n = self._counters.get(counter, 0)
        self._counters[counter] = n + 1
        return n

    def shuffled(self, items: Sequence[T], key: str) -> list[T]:
        out = list(items)
        random.Random(f"{self.seed}/{key}").shuffle(out)
        return out

    def token(self, alphabet: str, n: int) -> str:
        return "".join(self._ids.choice(alphabet) for _ in range(n))


HEX = "0123456789abcdef"
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
DIGITS = "0123456789"


class Store:
    """The shared state of the emulated services (every face's book keeps its own)."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        model: Model,
        catalogue: Catalogue,
        seed: int = 0,
        mangle: Mangle | None = None,
    ) -> None:
        self.settings = settings
        self.mangle = mangle
        self.clock = clock
        self.model = model
        self.catalogue = catalogue
        self.decide = Decider(seed)
        self.lock = threading.RLock()
        self.executions: list[dict[str, Any]] = []
        self.cache = PromptCache(token_ids)
        self.faults: dict[str, int] = {}

    def now(self) -> float:
        return self.clock.time()

    def anomaly(self, name: str, key: str) -> bool:
        """Whether the bad day ``name`` (when switched on) strikes this object."""
        rate = self.settings.anomalies.get(name)
        return rate is not None and self.decide.roll(name, key, rate)

    def shed(self, name: str) -> bool:
        """Whether a flex call (``name``, each try of it counted) is refused for want of
        capacity — nothing runs, nothing is billed; else it is served, slowly."""
        tries = self.decide.nth("flex/" + name)
        busy = tries < self.settings.flex_busy_tries
        if busy or self.decide.roll("flex-busy", f"{name}/{tries}", self.settings.flex_busy):
            self.faults["flex-busy"] = self.faults.get("flex-busy", 0) + 1
            return True
        self.clock.sleep(self.settings.flex_seconds)
        return False

    def executed(
        self,
        provider: str,
        batch_id: str,
        custom_id: str,
        status: int | None,
        reply: Any = None,
    ) -> None:
        """A line ran: what the service bills (``reply``: the body it answered with, whose
        usage is the tokens billed)."""
        self.executions.append(
            {
                "provider": provider,
                "batch_id": batch_id,
                "custom_id": custom_id,
                "status_code": status,
                "billed": billed(reply),
            }
        )

    def run_seconds(self, face: str, batch_id: str) -> float:
        """How long a batch of ``face`` runs: drawn, once per batch and seeded, from the
        face's recorded turnaround (:func:`quantile`), else the settings' latency."""
        recorded = self.settings.turnaround.get(face)
        if not recorded:
            return self.settings.latency
        return quantile(recorded, self.decide.chance("turnaround", batch_id))

    def mangled(self, kind: str, lines: list[str]) -> list[str]:
        return self.mangle(kind, lines) if self.mangle is not None else lines

    def known_model(self, name: str) -> bool:
        return name not in self.settings.unknown_models and self.catalogue.knows(name)


def quantile(recorded: Sequence[float], u: float) -> float:
    """The ``u`` quantile of a turnaround recorded as ``[p50, p90, p99]`` seconds: log-linear
    between them, from a tenth of the median at 0 to a heavy tail of 4x p99 at 1."""
    p50, p90, p99 = recorded
    points = [(0.0, p50 / 10), (0.5, p50), (0.9, p90), (0.99, p99), (1.0, 4 * p99)]
    for (u0, v0), (u1, v1) in zip(points, points[1:]):
        if u <= u1:
            return float(v0 * (v1 / v0) ** ((u - u0) / (u1 - u0)))
    return float(points[-1][1])


def billed(reply: Any) -> dict[str, int]:
    """The tokens a reply's usage bills, whatever its service's shape (OpenAI's chat and
    Responses, Anthropic's Messages, Gemini's ``usageMetadata``): ``input`` (cached and
    written included), ``cached``, ``cache_write_5m``, ``cache_write_1h``, ``output``."""
    out = dict.fromkeys(("input", "cached", "cache_write_5m", "cache_write_1h", "output"), 0)
    if not isinstance(reply, dict):
        return out
    u = reply.get("usage") or {}
    meta = reply.get("usageMetadata") or {}
    if "cache_read_input_tokens" in u or "cache_creation_input_tokens" in u:  # Anthropic
        split = u.get("cache_creation") or {}
        written = int(u.get("cache_creation_input_tokens") or 0)
        hour = int(split.get("ephemeral_1h_input_tokens") or 0)
        out["cached"] = int(u.get("cache_read_input_tokens") or 0)
        out["cache_write_1h"], out["cache_write_5m"] = hour, written - hour
        out["input"] = int(u.get("input_tokens") or 0) + out["cached"] + written
        out["output"] = int(u.get("output_tokens") or 0)
    elif meta:  # Gemini
        out["input"] = int(meta.get("promptTokenCount") or 0)
        out["cached"] = int(meta.get("cachedContentTokenCount") or 0)
        out["output"] = int(meta.get("candidatesTokenCount") or 0)
    else:  # OpenAI's shapes
        details = u.get("prompt_tokens_details") or u.get("input_tokens_details") or {}
        out["input"] = int(u.get("prompt_tokens", u.get("input_tokens")) or 0)
        out["cached"] = int(details.get("cached_tokens") or 0)
        out["output"] = int(u.get("completion_tokens", u.get("output_tokens")) or 0)
    return out


def due_lines(total: int, start: float, now: float, latency: float, flush: bool) -> int:
    """How many of a batch's lines have run by ``now``: line i runs at ``start + latency *
    i / total`` (the first at once), so a batch makes progress, but not all at once."""
    if flush or latency <= 0:
        return total
    return max(0, min(total, int(total * (now - start) / latency) + 1))


def last_line(start: float, total: int, latency: float) -> float:
    """When the last of a batch's lines runs (:func:`due_lines`' schedule)."""
    return start + (latency * (total - 1) / total if total else 0.0)


def rfc3339(t: float | None) -> str | None:
    """A time as Google and Anthropic write it (``2026-12-03T10:00:00.123456Z``)."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def iso8601(t: float | None) -> str | None:
    """A time as AWS writes it in JSON (``2026-12-03T10:00:00.123000Z``)."""
    return rfc3339(t)
