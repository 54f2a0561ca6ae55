"""What the clients of the Speakeasy-made SDKs (mistralai's, openrouter's) share: the
exception map (one base error class with the HTTP status, body and headers, and
httpx's transport errors unwrapped), the one retry policy around each call, and the
state every client keeps. One home for it, as :mod:`.stainless` is the Stainless SDKs'."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..errors import NoAnswer, Unreachable
from ..errors import TransientApiError as Transient
from . import transport
from .base import Service
from .client_base import ClientBase
from .closing import shut
from .http_errors import one_line, retry_after, status_error

T = TypeVar("T")


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


class SpeakeasyClient(ClientBase):
    """A client over a Speakeasy-made SDK: ``make_sdk`` makes the SDK's client,
    ``error_class`` names its base error."""

    def connect(self, api_key: str) -> None:
        self._secret = api_key
        self.sdk = self.make_sdk(self.service, api_key)

    def make_sdk(self, service: Service, api_key: str) -> Any:
        raise NotImplementedError

    def error_class(self) -> type[Exception]:
        raise NotImplementedError

    def close(self) -> None:
        """The HTTP client handed to the SDK (it closes only the ones it made)."""
        shut(getattr(self.sdk.sdk_configuration, "client", None))

    @contextlib.contextmanager
    def _errors(self, what: str, batch_id: str | None = None) -> Iterator[None]:
        url, hint = self.service.base_url, self.context.key_hint
        with errors(self.error_class(), what, url, self._secret, hint, batch_id):
            yield

    def _call(self, what: str, fn: Callable[[], T], batch_id: str | None = None) -> T:
        def attempt() -> T:
            with self._errors(what, batch_id):
                return fn()

        return self.retry(attempt)
