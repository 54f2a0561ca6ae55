"""OpenAI's Batch API through the openai SDK: files, batches, models, and its exception map.

The SDK's own retries are off (:mod:`.retry` is the one policy); each attempt
is bounded in time (60 s, 5 s to connect). A batch is tagged with metadata
naming the run and submission, so one whose create outcome was lost is found
again by listing (:meth:`OpenAIClient.find`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import openai

from .. import _failpoints
from .._io import durable_replace, storage
from ..errors import (
    ApiConflictError,
    ApiError,
    ApiNotFoundError,
    ConfigError,
    FileNotYetVisible,
    Unreachable,
)
from ..errors import TransientApiError as Transient
from ..kinds import Ending, Phase
from .base import BatchView, Service, Tag
from .http_errors import one_line, retry_after, status_error
from .openai_wire import ENDPOINT
from .retry import Retrier

try:  # openai 3.x uses httpx2; 1.x/2.x use httpx. Streaming errors are theirs, unwrapped.
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx as _httpx  # type: ignore[no-redef]

T = TypeVar("T")
TIMEOUT = 60.0
ENDINGS: dict[str, Ending] = {
    "completed": "completed",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}
STATUSES = ("validating", "in_progress", "finalizing", "cancelling", *ENDINGS)


def view(batch: dict[str, Any]) -> BatchView:
    """An OpenAI batch object, normalised."""
    status = batch.get("status")
    if status not in STATUSES:
        raise ApiError(
            f"batch {batch.get('id')} has an unknown status {status!r}", batch_id=batch.get("id")
        )
    counts = batch.get("request_counts") or {}
    ending = ENDINGS.get(status)
    ended = ending is not None
    phase: Phase = (
        "ended"
        if ended
        else "pending"
        if status == "validating"
        else "cancelling"
        if status == "cancelling"
        else "running"
    )
    errors = (batch.get("errors") or {}).get("data")
    files = (batch.get("output_file_id"), batch.get("error_file_id"))
    return BatchView(
        id=batch["id"],
        status=status,
        phase=phase,
        ending=ending,
        total=int(counts.get("total") or 0),
        completed=int(counts.get("completed") or 0),
        failed=int(counts.get("failed") or 0),
        files=tuple(f for f in files if f) if ended else (),
        errors=tuple(errors) if errors else None,
        created_at=batch.get("created_at"),
    )


class OpenAIClient:
    """Batch API calls, SDK errors turned into batchbench's typed errors."""

    def __init__(self, service: Service, api_key: str, *, warn: Callable[[str], None]) -> None:
        self.service = service
        self.retry = Retrier(warn)
        self.sdk = openai.OpenAI(
            api_key=api_key,
            base_url=service.base_url,
            max_retries=0,
            timeout=_httpx.Timeout(TIMEOUT, connect=5.0),
        )
        self._secret = api_key

    @contextlib.contextmanager
    def _errors(self, what: str, batch_id: str | None = None) -> Iterator[None]:
        """The SDK's exceptions → typed errors naming the call (the exception map)."""
        try:
            yield
        except (openai.APIConnectionError, _httpx.TransportError) as exc:
            cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
            text = one_line(cause or exc, self._secret) or type(exc).__name__
            url = self.service.base_url
            if isinstance(cause, _httpx.ConnectError):
                unreachable = f"{what}: cannot connect to {url} ({text})"
                raise Unreachable(unreachable, batch_id=batch_id) from None
            raise Transient(f"{what}: {text} ({url})", batch_id=batch_id) from None
        except openai.APIStatusError as exc:
            param = getattr(exc, "param", None)
            if exc.status_code == 400 and param == "file_id":
                raise FileNotYetVisible(
                    f"{what}: {one_line(exc.message)}", status=400, param=param
                ) from None
            raise status_error(
                what,
                exc.status_code,
                one_line(exc.message, self._secret),
                key_hint="OPENAI_API_KEY",
                batch_id=batch_id,
                param=param if isinstance(param, str) else None,
                wait=retry_after(exc.response.headers),
            ) from None
        except openai.APIResponseValidationError as exc:
            raise ApiError(f"{what}: the reply is not what the Batch API sends: {exc}") from None

    def _call(self, what: str, fn: Callable[[], T], batch_id: str | None = None) -> T:
        def attempt() -> T:
            with self._errors(what, batch_id):
                return self._reply(fn())

        return self.retry(attempt)

    def _reply(self, obj: T) -> T:
        """A reply that is not JSON (an HTML page served with 200) reaches us as a str."""
        if isinstance(obj, (str, bytes)):
            raise ApiError(
                f"{self.service.base_url} answered with something that is not the OpenAI API"
                f" (not JSON: {str(obj)[:60]!r}...); check --base-url"
            )
        return obj

    # the service ---------------------------------------------------------------
    def check_models(self, models: Iterable[str]) -> None:
        """Before anything is paid: each model exists for this key (and the API answers)."""
        for model in dict.fromkeys(models):
            try:
                self._call(f"look up model {model!r}", self._look_up(model))
            except ApiNotFoundError:
                self._check_base_url()
                raise ConfigError(
                    f"model {model!r} is not available at {self.service.base_url} (HTTP 404);"
                    " check its name"
                ) from None

    def _check_base_url(self) -> None:
        """A 404 for a model may be a base URL that is not the API's (no ``/v1``, say):
        if the list of models is not found either, it is the URL that is wrong."""
        try:
            self._call("list models", self.sdk.models.list)
        except ApiNotFoundError:
            raise ConfigError(
                f"{self.service.base_url} is not the OpenAI API's base URL: it answers 404 to"
                " GET /models too (does it end in /v1?); check --base-url or OPENAI_BASE_URL"
            ) from None

    def _look_up(self, model: str) -> Callable[[], Any]:
        def retrieve() -> Any:
            try:
                return self.sdk.models.retrieve(model)
            except openai.APIConnectionError as exc:
                cause = exc.__cause__
                if isinstance(cause, _httpx.ConnectError):  # before a run: a wrong URL, not
                    url, why = self.service.base_url, one_line(cause)  # an outage: said at once
                    what = f"look up model {model!r}: cannot connect to {url} ({why})"
                    raise ApiError(what) from None
                raise

        return retrieve

    def upload(self, path: Path, tag: Tag) -> str:
        def send() -> Any:
            with open(path, "rb") as fh:
                return self.sdk.files.create(file=(path.name, fh), purpose="batch")

        return self._call(f"upload {path.name}", send).id

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        if input_ref is None:
            raise ValueError("an OpenAI batch needs its uploaded file")
        metadata = {
            "batchbench_run": tag.run[:512],
            "batchbench_run_id": tag.run_id,
            "batchbench_stage": tag.stage,
            "batchbench_shard": str(tag.seq),
            "batchbench_attempt": str(tag.attempt),
            "batchbench_sub": tag.sub,
        }
        with self._errors(f"create batch for {input_ref}"):  # once: never retried blind
            batch = self.sdk.batches.create(
                input_file_id=input_ref,
                endpoint=ENDPOINT,
                completion_window="24h",
                metadata=metadata,
            )
            return view(self._reply(batch).model_dump())

    def _batches_since(self, since: float) -> Iterator[dict[str, Any]]:
        """The project's batches, newest first, 100 a call, until the page that reaches
        back before ``since`` (a Unix time)."""
        after: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": 100, **({"after": after} if after else {})}
            page = self._call("list batches", functools.partial(self.sdk.batches.list, **kwargs))
            data = [self._reply(b).model_dump() for b in page.data]
            yield from data
            if not page.has_more or not data or (data[-1].get("created_at") or 0) < since:
                return
            after = data[-1]["id"]

    def find(self, tag: Tag, since: float, known: Collection[str]) -> BatchView | None:
        for batch in self._batches_since(since):
            meta = batch.get("metadata") or {}
            if (
                meta.get("batchbench_run_id") == tag.run_id
                and meta.get("batchbench_sub") == tag.sub
            ):
                return view(batch)
        return None

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        wanted, found = set(batch_ids), {}
        for batch in self._batches_since(since):
            if batch["id"] in wanted:
                found[batch["id"]] = view(batch)
                if len(found) == len(wanted):
                    break
        return found

    def retrieve(self, batch_id: str) -> BatchView:
        batch = self._call(
            f"retrieve batch {batch_id}", lambda: self.sdk.batches.retrieve(batch_id), batch_id
        )
        return view(batch.model_dump())

    def cancel(self, batch_id: str) -> BatchView | None:
        try:
            batch = self._call(
                f"cancel batch {batch_id}", lambda: self.sdk.batches.cancel(batch_id), batch_id
            )
        except ApiConflictError:
            return None
        return view(batch.model_dump())

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        """Stream a file's bytes verbatim to ``dest`` (temporary name, fsync, rename)."""
        tmp = dest.with_name(f".{dest.name}.part")

        def fetch() -> int:
            size = 0
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with (
                self.sdk.files.with_streaming_response.content(ref) as resp,
                os.fdopen(fd, "wb") as fh,
            ):
                for chunk in resp.iter_bytes():
                    fh.write(chunk)
                    size += len(chunk)
                    _failpoints.hit("downloading")
                fh.flush()
                os.fsync(fh.fileno())
            durable_replace(tmp, dest)
            return size

        def attempt() -> int:
            with self._errors(f"download {ref}", batch_id), storage(tmp):
                return fetch()

        try:
            return self.retry(attempt)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def delete(self, refs: Sequence[str]) -> None:
        for ref in refs:
            with contextlib.suppress(ApiNotFoundError):
                self._call(f"delete {ref}", functools.partial(self.sdk.files.delete, ref))
