"""The only module that talks to the openai SDK.

Everything the pipeline needs from the Batch API is a method here returning
plain dicts, so another OpenAI-compatible batch service (Azure OpenAI, a
self-hosted gateway) can be added by building a different client in
:func:`make_client` without touching the pipeline. Retries live here too: the
SDK's own retries are off, because a blind retry of ``batches.create`` after an
ambiguous 500 could pay for a batch twice.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import openai

from . import _failpoints
from ._io import _fsync_dir
from .errors import ApiError, ApiNotFoundError, ConfigError, TransientApiError

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


def make_client(
    base_url: str | None = None, *, timeout: float = 120.0, api_key: str | None = None
) -> openai.OpenAI:
    """An SDK client from the environment; organisation/project come from the SDK's variables."""
    key = api_key or api_key_from_env()
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    if url:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConfigError(f"--base-url {url!r} is not an http(s) URL")
        if parsed.scheme == "http" and not _is_loopback(parsed.hostname):
            print(
                f"warning: {url} is plain http to a host that is not loopback:"
                " the API key would cross the network unencrypted",
                file=sys.stderr,
            )
    return openai.OpenAI(api_key=key, base_url=url, max_retries=0, timeout=timeout)


class BatchApi:
    """Batch API calls with bounded, backed-off retries of transient failures."""

    def __init__(
        self,
        client: openai.OpenAI,
        *,
        attempts: int = 8,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.attempts = attempts
        self.sleep = sleep
        self.calls = 0
        self._secret = client.api_key or ""

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _call(self, what: str, fn: Callable[[], T], *, retry: bool = True) -> T:
        delay = 0.2
        for attempt in range(1, self.attempts + 1):
            self.calls += 1
            try:
                return fn()
            except _TRANSIENT as exc:
                if not retry or attempt == self.attempts:
                    raise TransientApiError(
                        f"{what}: {self._describe(exc)}"
                        + ("" if not retry else f" (gave up after {attempt} attempts)")
                    ) from None
                self.sleep(self._retry_after(exc, delay))
                delay = min(delay * 2, 10.0)
            except openai.AuthenticationError as exc:
                raise ApiError(
                    f"{what}: the API refused the key (HTTP {exc.status_code});"
                    " check OPENAI_API_KEY"
                ) from None
            except openai.NotFoundError as exc:
                raise ApiNotFoundError(
                    f"{what}: not found (HTTP 404): {self._describe(exc)}"
                ) from None
            except openai.APIStatusError as exc:
                raise ApiError(f"{what}: HTTP {exc.status_code}: {self._describe(exc)}") from None
        raise AssertionError("unreachable")

    def _describe(self, exc: BaseException) -> str:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        return self._scrub(" ".join(str(message).split()))[:300]

    @staticmethod
    def _retry_after(exc: BaseException, default: float) -> float:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        with contextlib.suppress(TypeError, ValueError):
            if "retry-after-ms" in headers:
                return min(float(headers["retry-after-ms"]) / 1000, 30.0)
            if "retry-after" in headers:
                return min(float(headers["retry-after"]), 30.0)
        return default

    # files ------------------------------------------------------------------
    def upload(self, path: Path) -> str:
        def call() -> str:
            with open(path, "rb") as fh:
                return self.client.files.create(file=(path.name, fh), purpose="batch").id

        return self._call(f"upload {path.name}", call)

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
            return self._call(f"download {file_id}", call)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def delete_file(self, file_id: str) -> None:
        with contextlib.suppress(ApiNotFoundError):
            self._call(f"delete {file_id}", lambda: self.client.files.delete(file_id))

    # batches ----------------------------------------------------------------
    def create(self, file_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        """One attempt only: after an ambiguous failure the caller must look before retrying."""
        return self._call(
            f"create batch for {file_id}",
            lambda: self.client.batches.create(
                input_file_id=file_id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata=metadata,
            ).model_dump(),
            retry=False,
        )

    def list_page(self, after: str | None = None, limit: int = 100) -> tuple[list[dict], bool]:
        def call() -> tuple[list[dict], bool]:
            kwargs: dict[str, Any] = {"limit": limit}
            if after:
                kwargs["after"] = after
            page = self.client.batches.list(**kwargs)
            return [b.model_dump() for b in page.data], bool(page.has_more)

        return self._call("list batches", call)

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        return self._call(
            f"retrieve batch {batch_id}",
            lambda: self.client.batches.retrieve(batch_id).model_dump(),
        )

    def cancel(self, batch_id: str) -> dict[str, Any] | None:
        """Cancel; None when the batch had already finished (HTTP 409)."""
        try:
            return self._call(
                f"cancel batch {batch_id}",
                lambda: self.client.batches.cancel(batch_id).model_dump(),
            )
        except ApiError as exc:
            if "HTTP 409" in str(exc):
                return None
            raise
