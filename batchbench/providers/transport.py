"""What went wrong below HTTP, whichever library the SDK is built on (httpx, httpx2,
requests, urllib3): nothing listening, no answer in time, or another transport fault.

The SDKs wrap their transport's exceptions (or not), and the transports name theirs
alike across versions, so the classes are told apart by name along the exception's
``__cause__`` chain, here once for every client.
"""

from __future__ import annotations

from typing import Literal

Fault = Literal["connect", "timeout", "other"]

# Checked in this order: requests' ConnectTimeout is a ConnectionError and a Timeout.
_TIMEOUT = frozenset(
    {"TimeoutException", "Timeout", "TimeoutError", "APITimeoutError", "ReadTimeoutError"}
)
_CONNECT = frozenset({"ConnectError", "ConnectionError", "NewConnectionError"})
# httpx's (and httpx2's) base of every transport fault, and the SDKs' wrapper of it; a
# body cut short through requests (Cloud Storage) is its caller's to read as such.
_OTHER = frozenset({"TransportError", "APIConnectionError"})


def fault(exc: BaseException | None) -> Fault | None:
    """``connect`` (nothing listening: the request never ran), ``timeout`` (it may have
    run), ``other`` (the connection failed otherwise), or None: not a transport fault."""
    found: Fault | None = None
    seen = 0
    while exc is not None and seen < 8:
        names = {c.__name__ for c in type(exc).__mro__}
        if names & _TIMEOUT:
            return "timeout"
        if names & _CONNECT:
            return "connect"
        if found is None and names & _OTHER:
            found = "other"  # a wrapper: its cause may say more
        exc, seen = exc.__cause__, seen + 1
    return found
