"""The google-genai SDK's exceptions as batchbench's typed errors: one map for the Gemini
API and Vertex AI, which the SDK speaks to alike."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from google.genai import errors as genai_errors_module

from ..errors import ApiError, NoAnswer, Unreachable
from ..errors import TransientApiError as Transient
from . import transport
from .http_errors import one_line, retry_after, status_error


@contextlib.contextmanager
def genai_errors(
    what: str, url: str, secret: str, key_hint: str, batch_id: str | None = None
) -> Iterator[None]:
    """The SDK's exceptions → typed errors naming the call (the exception map)."""
    try:
        yield
    except genai_errors_module.APIError as exc:
        headers = getattr(getattr(exc, "response", None), "headers", None)
        raise status_error(
            what,
            int(exc.code),
            one_line(exc.message or exc.status or "", secret),
            key_hint=key_hint,
            batch_id=batch_id,
            wait=retry_after(headers),
        ) from None
    except Exception as exc:  # the transport's own (httpx or httpx2), unwrapped
        names = {c.__name__ for c in type(exc).__mro__}
        if "ValidationError" in names:  # pydantic: a reply the SDK cannot type
            first: dict[str, Any] = (getattr(exc, "errors", lambda: [{}])() or [{}])[0]
            field = ".".join(str(p) for p in first.get("loc", ())) or "a field"
            raise ApiError(
                f"{what}: the reply is not what the service sends ({field}:"
                f" {first.get('msg', exc)})",
                batch_id=batch_id,
            ) from None
        found = transport.fault(exc)
        if found is None:
            raise
        text = one_line(exc, secret) or type(exc).__name__
        if found == "connect":
            unreachable = f"{what}: cannot connect to {url} ({text})"
            raise Unreachable(unreachable, batch_id=batch_id) from None
        if found == "timeout":
            silent = f"{what}: {url} took the connection but sent no answer in time"
            raise NoAnswer(silent, batch_id=batch_id) from None
        raise Transient(f"{what}: {text} ({url})", batch_id=batch_id) from None
