"""What the clients of the Stainless-generated SDKs (openai, anthropic) share.

Both SDKs raise the same family of exceptions (``APIConnectionError`` with the
transport's error as its cause, ``APIStatusError`` with the status and the
service's message, ``APIResponseValidationError``) and stream a body through
``with_streaming_response``. So the exception map, the pre-flight look-up of
models and the verbatim download are written once, here; each client passes
its SDK module and says what is its own (the key's variable, a special 400).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from ..clock import SYSTEM, Clock
from ..errors import ApiError, ApiNotFoundError, ConfigError, NoAnswer, Unreachable
from ..errors import TransientApiError as Transient
from . import retry, transport
from .base import Service
from .downloads import Sink, verbatim
from .http_errors import one_line, retry_after, status_error
from .retry import Retrier


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The transport errors a streamed body can raise unwrapped: httpx2's (the SDKs of
    late 2026) and httpx's (older ones), whichever are installed."""
    found: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        with contextlib.suppress(ImportError):
            found.append(importlib.import_module(name).TransportError)
    return tuple(found)


_TRANSPORT = _transport_errors()
T = TypeVar("T")
TIMEOUT = 60.0


def timeout(sdk: ModuleType) -> Any:
    """Each attempt bounded: 60 s, 5 s to connect (the SDK's own retries are off)."""
    return sdk.Timeout(TIMEOUT, connect=5.0)


class SdkCalls:
    """Calls through one SDK client: its exceptions → batchbench's typed errors (the
    exception map), the one retry policy, and streamed downloads."""

    def __init__(
        self,
        sdk: ModuleType,
        service: Service,
        secret: str,
        *,
        display: str,
        key_hint: str,
        warn: Callable[[str], None],
        refine: Callable[[str, Any], ApiError | None] = lambda what, exc: None,
        clock: Clock = SYSTEM,
    ) -> None:
        self.sdk = sdk
        self.service = service
        self.display = display  # the service's name, for people
        self.secret = secret
        self.key_hint = key_hint
        self.retry = Retrier(warn, clock=clock)
        self.refine = refine  # a provider's own reading of a status error, if any

    @contextlib.contextmanager
    def errors(self, what: str, batch_id: str | None = None) -> Iterator[None]:
        try:
            yield
        except (self.sdk.APIConnectionError, *_TRANSPORT) as exc:
            cause = exc.__cause__ if isinstance(exc, self.sdk.APIConnectionError) else exc
            text = one_line(cause or exc, self.secret) or type(exc).__name__
            url = self.service.base_url
            found = transport.fault(exc)
            if found == "connect":
                unreachable = f"{what}: cannot connect to {url} ({text})"
                raise Unreachable(unreachable, batch_id=batch_id) from None
            if found == "timeout":
                silent = f"{what}: {url} took the connection but sent no answer in time"
                raise NoAnswer(silent, batch_id=batch_id) from None
            raise Transient(f"{what}: {text} ({url})", batch_id=batch_id) from None
        except self.sdk.APIStatusError as exc:
            special = self.refine(what, exc)
            if special is not None:
                raise special from None
            param = getattr(exc, "param", None)
            raise status_error(
                what,
                exc.status_code,
                one_line(exc.message, self.secret),
                key_hint=self.key_hint,
                batch_id=batch_id,
                param=param if isinstance(param, str) else None,
                wait=retry_after(exc.response.headers),
            ) from None
        except self.sdk.APIResponseValidationError as exc:
            raise ApiError(f"{what}: the reply is not what the service sends: {exc}") from None

    def __call__(self, what: str, fn: Callable[[], T], batch_id: str | None = None) -> T:
        """``fn`` under the retry policy, its failures typed."""

        def attempt() -> T:
            with self.errors(what, batch_id):
                return self.reply(fn())

        return self.retry(attempt)

    def reply(self, obj: T) -> T:
        """A reply that is not JSON (an HTML page served with 200) reaches us as a str."""
        if isinstance(obj, (str, bytes)):
            raise ApiError(
                f"{self.service.base_url} answered with something that is not the"
                f" {self.display} API (not JSON: {str(obj)[:60]!r}...); check its base URL"
            )
        return obj

    def check_models(
        self,
        models: Iterable[str],
        retrieve: Callable[..., Any],
        list_models: Callable[..., Any],
        where: str,
        service_id: Callable[[str], str] = lambda model: model,
    ) -> None:
        """Before anything is paid: each model exists for this key (``retrieve(model,
        timeout=...)`` and ``list_models(timeout=...)`` are the SDK's calls). A model the service
        does not know is a one-line error naming it, unless the list of models is not
        found either: then it is the base URL (``where`` says how it is set) that is
        wrong. The service is asked for ``service_id(model)`` (``groq/ID`` is ``ID``
        there); the message names the model as given. Nothing listening there is said at
        once: before a run, a wrong URL is likelier than an outage."""
        url = self.service.base_url

        preflight = functools.partial(self.preflight, where=where)
        for model in dict.fromkeys(models):
            what = f"look up model {model!r}"
            try:
                preflight(what, functools.partial(retrieve, service_id(model)))
            except ApiNotFoundError:
                try:
                    preflight("list models", list_models)
                except ApiNotFoundError:
                    raise ConfigError(
                        f"{url} is not the {self.display} API's base URL: it answers"
                        f" 404 to the list of models too; check {where}"
                    ) from None
                raise ConfigError(
                    f"model {model!r} is not available at {url} (HTTP 404); check its name"
                ) from None

    def preflight(self, what: str, fn: Callable[..., Any], where: str) -> Any:
        """``fn(timeout=...)`` as a pre-flight call (:meth:`.retry.Retrier.preflight`;
        ``where``: how the base URL is set, to check)."""

        def call() -> Any:
            return self.reply(fn(timeout=retry.PREFLIGHT_TIMEOUT))

        url = self.service.base_url
        return self.retry.preflight(what, call, url=url, where=where, errors=self.errors)

    def download(
        self,
        stream: Callable[[], AbstractContextManager[Any]],
        what: str,
        batch_id: str,
        dest: Path,
    ) -> int:
        """A body's bytes verbatim to ``dest`` (:func:`.downloads.verbatim`); its size.
        ``stream`` opens the SDK's streamed response (``with_streaming_response``)."""

        def fill(sink: Sink) -> None:
            with stream() as resp:
                for chunk in resp.iter_bytes():
                    sink.write(chunk)

        def attempt() -> int:
            with self.errors(what, batch_id):
                return verbatim(dest, fill)

        return self.retry(attempt)
