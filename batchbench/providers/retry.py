"""The one retry policy for every service call, and what the user is told about it.

Every SDK client is made with its own retries off, so which replies are tried
again is decided here, once, for all providers: a :class:`TransientApiError`
(429, 408, 500, 502, 503, 504, 529, timeouts, dropped connections, a service
not reachable) is tried again with exponential backoff, honouring the
service's ``retry-after``; anything else is final for the call — a 409 too (a
conflict: a cancel of a batch that has ended, a job id already taken), which the
caller reads for what it says. (A *line* a batch answered with 409 is another matter:
the wires retry it as the reference does, :data:`.openai_wire.RETRIED`.) The one call
never passed through here is a batch's create: after an ambiguous failure
the pipeline looks for the batch before creating again. Faults are said on
stderr, one line per burst, so silent retries stay visible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TypeVar

from ..clock import SYSTEM, Clock
from ..errors import ApiError, NoAnswer, TransientApiError, Unreachable

T = TypeVar("T")

ATTEMPTS = 5  # one call and four retries: about 8 s of backoff, plus each attempt's timeout
MAX_WAIT = 60.0
# The pre-flight's look-ups (before anything is paid): a server that takes the connection
# and says nothing is named after one attempt of this, not after five of a minute each.
PREFLIGHT_TIMEOUT = 20.0


class Retrier:
    """Calls with the retry policy; one warning line per burst of faults."""

    def __init__(
        self,
        warn: Callable[[str], None],
        *,
        attempts: int = ATTEMPTS,
        clock: Clock = SYSTEM,
    ) -> None:
        self.warn = warn
        self.attempts = attempts
        self.clock = clock
        self.counts: Counter[str] = Counter()
        self.said_at: float | None = None

    def __call__(self, call: Callable[[], T], attempts: int | None = None) -> T:
        tries = self.attempts if attempts is None else attempts
        attempt = 0
        while True:
            try:
                return call()
            except TransientApiError as exc:
                attempt += 1
                if attempt >= tries:
                    raise
                self._notice(str(exc.status) if exc.status else "connection error")
                self.clock.sleep(self.backoff(attempt - 1, exc.retry_after, self.clock.jitter()))

    def preflight(
        self,
        what: str,
        call: Callable[[], T],
        *,
        url: str,
        where: str,
        errors: Callable[[str], AbstractContextManager[object]] | None = None,
    ) -> T:
        """A pre-flight ``call`` under the policy, except that nothing listening at
        ``url``, or a server there that says nothing (one attempt of
        :data:`PREFLIGHT_TIMEOUT`), is said at once, naming ``where`` the base URL is set:
        before a run, that is a wrong URL, not an outage. Every client's one rule;
        ``errors(what)`` is the client's map from its SDK's exceptions to batchbench's."""

        def attempt() -> T:
            try:
                if errors is None:
                    return call()
                with errors(what):
                    return call()
            except Unreachable as exc:
                raise ApiError(str(exc)) from None
            except NoAnswer:
                raise ApiError(
                    f"{what}: {url} took the connection but sent no answer in"
                    f" {PREFLIGHT_TIMEOUT:g} s: check {where}, or whether the service is up"
                ) from None

        return self(attempt)

    @staticmethod
    def backoff(attempt: int, retry_after: float | None, jitter: float) -> float:
        """The service's ``retry-after`` when it gave one, else 0.5 s doubling to 8 s,
        spread by ``jitter`` (in [0, 1)) so that many clients do not retry in step."""
        if retry_after is not None:
            return float(min(max(retry_after, 0.0), MAX_WAIT))
        return float(min(0.5 * 2**attempt, 8.0) * (0.75 + jitter / 4))

    def _notice(self, fault: str) -> None:
        self.counts[fault] += 1
        now = self.clock.time()
        if self.said_at is None or now - self.said_at >= 60:
            faults = ", ".join(f"{n} × {s}" for s, n in sorted(self.counts.items()))
            since = "" if self.said_at is None else " in the last minute"
            self.warn(f"warning: {faults} from the API{since}; retrying")
            self.counts.clear()
            self.said_at = now
