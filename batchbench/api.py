"""The only module that talks to the openai SDK, and the home of the one retry policy.

Everything the pipeline needs from the Batch API is a method here returning
plain dicts, so another OpenAI-compatible batch service can be added by
building a different client in :func:`make_client` without touching the
pipeline.

The retry policy is the SDK's own (it backs off, honours ``retry-after`` and
retries 408/409/429/5xx, timeouts and dropped connections), bounded in count
and, through the client's timeout, in time. The one exception is
``batches.create``: it is made once, never retried blind, because a retry after
an ambiguous failure could pay for a batch twice; the pipeline first looks for
the batch that failure may have made (the domain rule). SDK errors become the
typed errors of :mod:`batchbench.errors`, carrying the status and batch id.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import openai

from . import _failpoints
from ._io import _fsync_dir, storage
from .errors import (
    ApiConflictError,
    ApiError,
    ApiNotFoundError,
    ConfigError,
    FileNotYetVisible,
    TransientApiError,
)

try:  # openai 3.x uses httpx2; 1.x/2.x use httpx. Streaming errors are theirs, unwrapped.
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx as _httpx  # type: ignore[no-redef]

T = TypeVar("T")

KEY_VARIABLES = ("OPENAI_API_KEY", "OPENAI_ACCESS_TOKEN")
_TRANSIENT = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APIConnectionError,
    openai.APITimeoutError,
    _httpx.TransportError,
)


def api_key_from_env() -> str:
    for name in KEY_VARIABLES:
        value = os.environ.get(name)
        if value:
            return value
    raise ConfigError("no API key: set OPENAI_API_KEY (or OPENAI_ACCESS_TOKEN)")


def _is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


MAX_RETRIES = 4  # the SDK's: about 8 s of backoff, plus each attempt's timeout
TIMEOUT = 60.0


# Statuses worth trying again later (as the reference retries them); any other
# failure is final for the call. The SDK retries these itself first (and 409,
# a lock timeout), never a 501 or another 5xx that says the call cannot work.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
SDK_RETRIED = TRANSIENT_STATUSES | {409}


class _Client(openai.OpenAI):
    """The SDK's client with its retry rule narrowed to :data:`SDK_RETRIED`."""

    def _should_retry(self, response: Any) -> bool:
        return response.status_code in SDK_RETRIED and super()._should_retry(response)


class RetryNotices:
    """Makes the SDK's silent retries visible: one stderr line per burst of faults.

    An httpx response hook counts the replies the SDK will retry; the first
    fault of a burst is said at once, later ones at most once a minute, summed.
    """

    def __init__(self, warn: Callable[[str], None], clock: Callable[[], float] = time.monotonic):
        self.warn = warn
        self.clock = clock
        self.counts: Counter[int] = Counter()
        self.said_at: float | None = None

    def on_response(self, response: Any) -> None:
        status = response.status_code
        if status not in SDK_RETRIED:
            return
        self.counts[status] += 1
        now = self.clock()
        if self.said_at is None or now - self.said_at >= 60:
            faults = ", ".join(f"{n} × {s}" for s, n in sorted(self.counts.items()))
            since = "" if self.said_at is None else " in the last minute"
            self.warn(f"warning: {faults} from the API{since}; retrying")
            self.counts.clear()
            self.said_at = now


def make_client(
    base_url: str | None = None,
    *,
    timeout: float = TIMEOUT,
    api_key: str | None = None,
    max_retries: int = MAX_RETRIES,
    warn: Callable[[str], None] | None = None,
) -> openai.OpenAI:
    """An SDK client from the environment; organisation/project come from the SDK's variables.

    ``timeout`` bounds each attempt (5 s to connect) and ``max_retries`` the
    attempts, so a call's whole retry budget is bounded in time.
    """
    key = api_key or api_key_from_env()
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    if url:
        host, scheme = check_base_url(url)
        if scheme == "http" and not _is_loopback(host):
            print(
                f"warning: {url} is plain http to a host that is not loopback:"
                " the API key would cross the network unencrypted",
                file=sys.stderr,
            )
    notices = RetryNotices(warn or (lambda line: print(line, file=sys.stderr)))
    http_client = openai.DefaultHttpxClient(event_hooks={"response": [notices.on_response]})
    return _Client(
        api_key=key,
        base_url=url,
        max_retries=max_retries,
        timeout=_httpx.Timeout(timeout, connect=5.0),
        http_client=http_client,
    )


def check_base_url(url: str) -> tuple[str, str]:
    """``(host, scheme)`` of an http(s) base URL, or a one-line error naming it."""
    try:
        parsed = urlparse(url)
        host, _ = parsed.hostname, parsed.port
    except ValueError as exc:
        raise ConfigError(f"--base-url {url!r} is not a valid URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not host:
        raise ConfigError(f"--base-url {url!r} is not an http(s) URL")
    return host, parsed.scheme


class BatchApi:
    """Batch API calls with SDK errors turned into batchbench's typed errors."""

    def __init__(self, client: openai.OpenAI) -> None:
        self.client = client
        self._once = client.with_options(max_retries=0)  # for the one call never retried
        self._secret = client.api_key or ""

    def _describe(self, exc: BaseException) -> str:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        text = " ".join(str(message).split())
        return (text.replace(self._secret, "***") if self._secret else text)[:300]

    @contextlib.contextmanager
    def _errors(self, what: str, batch_id: str | None = None) -> Iterator[None]:
        """SDK exceptions (after the SDK's retries) → typed errors naming the call."""
        try:
            yield
        except (openai.APIConnectionError, _httpx.TransportError) as exc:
            cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
            if isinstance(cause, _httpx.ConnectError) and not isinstance(
                exc, openai.APITimeoutError
            ):
                raise ApiError(  # nothing listens there: retrying later will not help
                    f"{what}: cannot connect to {self.client.base_url} ({self._describe(cause)})",
                    batch_id=batch_id,
                ) from None
            raise TransientApiError(
                f"{what}: {self._describe(exc)} ({self.client.base_url})", batch_id=batch_id
            ) from None
        except AttributeError as exc:
            if not str(exc).startswith("'str' object"):
                raise
            raise ApiError(self._not_the_api()) from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            detail = f"{what}: HTTP {status}: {self._describe(exc)}"
            if isinstance(exc, openai.AuthenticationError):
                detail = f"{what}: the API refused the key (HTTP {status}); check OPENAI_API_KEY"
            kind: type[ApiError] = ApiError
            param = getattr(exc, "param", None)
            if status == 400 and param == "file_id":
                kind = FileNotYetVisible
            elif isinstance(exc, openai.NotFoundError):
                kind = ApiNotFoundError
            elif isinstance(exc, openai.ConflictError):
                kind = ApiConflictError
            elif status in TRANSIENT_STATUSES:
                kind = TransientApiError
            raise kind(
                detail,
                status=status,
                batch_id=batch_id,
                param=param if isinstance(param, str) else None,
            ) from None
        except openai.APIResponseValidationError as exc:
            raise ApiError(f"{what}: the reply is not what the Batch API sends: {exc}") from None

    # files ------------------------------------------------------------------
    def upload(self, path: Path) -> str:
        with self._errors(f"upload {path.name}"), open(path, "rb") as fh:
            return self._reply(self.client.files.create(file=(path.name, fh), purpose="batch")).id

    def download(self, file_id: str, dest: Path) -> int:
        """Stream a file's bytes verbatim to ``dest`` (temporary name, fsync, rename)."""
        tmp = dest.with_name(f".{dest.name}.part")

        def call() -> int:
            size = 0
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with (
                self.client.files.with_streaming_response.content(file_id) as resp,
                os.fdopen(fd, "wb") as fh,
            ):
                for chunk in resp.iter_bytes():
                    fh.write(chunk)
                    size += len(chunk)
                    _failpoints.hit("downloading")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, dest)
            _fsync_dir(dest.parent)
            return size

        try:
            with self._errors(f"download {file_id}"), storage(tmp):
                return call()
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def delete_file(self, file_id: str) -> None:
        with contextlib.suppress(ApiNotFoundError), self._errors(f"delete {file_id}"):
            self.client.files.delete(file_id)

    # batches ----------------------------------------------------------------
    def create(self, file_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        """One attempt only: after an ambiguous failure the caller must look before retrying."""
        with self._errors(f"create batch for {file_id}"):
            batch = self._once.batches.create(
                input_file_id=file_id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata=metadata,
            )
            return self._reply(batch).model_dump()

    def list_page(self, after: str | None = None, limit: int = 100) -> tuple[list[dict], bool]:
        kwargs: dict[str, Any] = {"limit": limit}
        if after:
            kwargs["after"] = after
        with self._errors("list batches"):
            page = self._reply(self.client.batches.list(**kwargs))
            return [self._reply(b).model_dump() for b in page.data], bool(page.has_more)

    def batches_since(self, since: float) -> Iterator[dict[str, Any]]:
        """The project's batches, newest first, page by page (100 a call), until the
        page that reaches back before ``since`` (a Unix time)."""
        after = None
        while True:
            page, more = self.list_page(after=after, limit=100)
            yield from page
            if not more or not page or (page[-1].get("created_at") or 0) < since:
                return
            after = page[-1]["id"]

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        with self._errors(f"retrieve batch {batch_id}", batch_id):
            return self._reply(self.client.batches.retrieve(batch_id)).model_dump()

    def cancel(self, batch_id: str) -> dict[str, Any] | None:
        """Cancel; None when the batch had already finished (HTTP 409)."""
        try:
            with self._errors(f"cancel batch {batch_id}", batch_id):
                return self._reply(self.client.batches.cancel(batch_id)).model_dump()
        except ApiConflictError:
            return None

    def _reply(self, obj: T) -> T:
        """A reply that is not JSON (an HTML page served with 200) reaches us as a str."""
        if isinstance(obj, (str, bytes)):
            raise ApiError(self._not_the_api(f" (not JSON: {str(obj)[:60]!r}...)"))
        return obj

    def _not_the_api(self, detail: str = "") -> str:
        return (
            f"{self.client.base_url} answered with something that is not the OpenAI API"
            f"{detail}; check --base-url"
        )

    def check_models(self, models: Iterable[str]) -> None:
        """Before anything is paid: each model exists for this key (and the API answers)."""
        for model in dict.fromkeys(models):
            try:
                with self._errors(f"look up model {model!r}"):
                    self._reply(self.client.models.retrieve(model))
            except ApiNotFoundError:
                raise ConfigError(
                    f"model {model!r} is not available at {self.client.base_url} (HTTP 404);"
                    " check its name"
                ) from None
