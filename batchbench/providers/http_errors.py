"""What an HTTP failure of a service call means, for every provider's exception map.

Each client catches its own SDK's exceptions (the map is per provider) and
hands the status, the service's words and its ``retry-after`` to
:func:`status_error`, so the same status means the same thing whichever
service said it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ApiConflictError, ApiError, ApiNotFoundError, TransientApiError

# Statuses worth trying again (the reference's, and 529: overloaded).
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the service asked for (``retry-after-ms`` or ``retry-after``), if any."""
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / scale
        except ValueError:
            continue
    return None


def status_error(
    what: str,
    status: int,
    message: str,
    *,
    key_hint: str,
    batch_id: str | None = None,
    param: str | None = None,
    wait: float | None = None,
) -> ApiError:
    """The typed error for an HTTP failure of a call (after the SDK parsed it)."""
    if status == 401:
        return ApiError(
            f"{what}: the service refused the key (HTTP 401); check {key_hint}",
            status=status,
            batch_id=batch_id,
        )
    detail = f"{what}: HTTP {status}: {message}"
    kind: type[ApiError] = ApiError
    if status == 404:
        kind = ApiNotFoundError
    elif status == 409:
        kind = ApiConflictError
    elif status in TRANSIENT_STATUSES:
        kind = TransientApiError
    return kind(detail, status=status, batch_id=batch_id, param=param, retry_after=wait)


def one_line(text: object, secret: str = "", limit: int = 300) -> str:
    """A service's message on one line, the key (if it echoes it) masked, capped."""
    flat = " ".join(str(text).split())
    return (flat.replace(secret, "***") if secret else flat)[:limit]
