"""The exception map of the Speakeasy-made SDKs (mistralai's, openrouter's): one base
error class with the HTTP status, body and headers, and httpx's transport errors
unwrapped. One home for it, as :mod:`.stainless` is the Stainless SDKs'."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..errors import NoAnswer, Unreachable
from ..errors import TransientApiError as Transient
from . import transport
from .http_errors import one_line, retry_after, status_error


@contextlib.contextmanager
def errors(
    base: type[Exception],
    what: str,
    url: str,
    secret: str,
    key_hint: str,
    batch_id: str | None = None,
) -> Iterator[None]:
    """``base`` (the SDK's error: ``status_code``, ``body``, ``message``, ``headers``) as
    batchbench's typed error for its status; a transport failure as unreachable, silent
    or transient; the key never in a message."""
    try:
        yield
    except base as exc:
        found: object = exc
        raise status_error(
            what,
            getattr(found, "status_code", 0),
            one_line(getattr(found, "body", None) or getattr(found, "message", exc), secret),
            key_hint=key_hint,
            batch_id=batch_id,
            wait=retry_after(getattr(found, "headers", None)),
        ) from None
    except Exception as exc:  # the transport's own, unwrapped
        kind = transport.fault(exc)
        if kind is None:
            raise
        text = one_line(exc, secret) or type(exc).__name__
        if kind == "connect":
            raise Unreachable(
                f"{what}: cannot connect to {url} ({text})", batch_id=batch_id
            ) from None
        if kind == "timeout":
            silent = f"{what}: {url} took the connection but sent no answer in time"
            raise NoAnswer(silent, batch_id=batch_id) from None
        raise Transient(f"{what}: {text} ({url})", batch_id=batch_id) from None
