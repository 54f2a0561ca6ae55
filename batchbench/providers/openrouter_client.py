"""OpenRouter's Batch API through the openrouter SDK (Speakeasy-made: its errors are
:class:`OpenRouterError` with the status and body, its transport httpx's).

The requests travel inline in the create call (nothing is uploaded); the results come
inline in the batch object, which is kept verbatim as the batch's raw file (fetched with
the SDK's own HTTP client, so its bytes are the service's). A batch keeps no metadata:
after a lost create every batch of the submission's size made since is a candidate,
told apart by its results' ids (the run's mark is in each ``custom_id``), as on
Anthropic. Cancel is in OpenRouter's API reference but not in the SDK: it is sent over
the SDK's HTTP client.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..errors import ApiNotFoundError, ConfigError
from ..kinds import Ending, Phase
from . import retry, speakeasy, tls
from .base import (
    CLOCK_SKEW,
    LANDS_WITHIN,
    BatchError,
    BatchView,
    Marks,
    Service,
    Tag,
    cancel_unless_ended,
    walk_list,
)
from .client_base import phase_of
from .downloads import Sink, verbatim
from .http_errors import one_line, retry_after, status_error
from .one_by_one import CallKind, Calls
from .openai_wire import ENDPOINT
from .prefixes import OPENROUTER as PREFIX

if TYPE_CHECKING:
    from openrouter.operations.getmodels import GetModelsResponse

T = TypeVar("T")
TIMEOUT_MS = 60_000
ENDINGS: dict[str, Ending] = {
    "completed": "completed",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}
PHASES: dict[str, Phase] = {
    "validating": "pending",
    "in_progress": "running",
    "finalizing": "running",
    "cancelling": "cancelling",
}


def view(batch: dict[str, Any]) -> BatchView:
    """An OpenRouter batch object, normalised: its results are its one "file" (the batch
    object itself, fetched once it has ended)."""
    status, phase, ending = phase_of(batch, ENDINGS, PHASES)
    counts = batch.get("request_counts") or {}
    error = batch.get("error")
    return BatchView(
        id=str(batch["id"]),
        status=status,
        phase=phase,
        ending=ending,
        total=int(counts.get("total") or 0),
        completed=int(counts.get("completed") or 0),
        failed=int(counts.get("failed") or 0),
        files=(str(batch["id"]),) if ending is not None else (),
        errors=(BatchError(None, str(error.get("message"))),) if isinstance(error, dict) else None,
        created_at=float(batch["created_at"]) if batch.get("created_at") is not None else None,
    )


class OpenRouterClient(speakeasy.SpeakeasyClient):
    marks: Marks = "results"  # a batch keeps no metadata; its requests' ids carry the mark
    lands_within: float = LANDS_WITHIN  # a create of unknown outcome may land this late

    def make_sdk(self, service: Service, api_key: str) -> Any:
        import httpx
        from openrouter import OpenRouter
        from openrouter.utils import BackoffStrategy, RetryConfig

        self.http = httpx.Client(verify=tls.context(), timeout=TIMEOUT_MS / 1000)
        # the SDK's own retries off (they retry a silent server's connection for minutes,
        # and a create blind): batchbench's Retrier is the one that retries
        never = RetryConfig("none", BackoffStrategy(1, 1, 1, 1), False)
        return OpenRouter(
            api_key=api_key,
            server_url=service.base_url,
            client=self.http,
            # given, or the SDK makes its own with a TLS context of its own (20 ms a client)
            async_client=httpx.AsyncClient(verify=tls.context()),
            timeout_ms=TIMEOUT_MS,
            retry_config=never,
        )

    def error_class(self) -> type[Exception]:
        from openrouter.errors import OpenRouterError

        return OpenRouterError

    # the service ---------------------------------------------------------------
    def check_models(self, models: Iterable[str]) -> None:
        """Each model in OpenRouter's list of models (a page at a time)."""
        quick = int(retry.PREFLIGHT_TIMEOUT * 1000)
        listed = self.retry.preflight(
            "list models",
            functools.partial(self.sdk.models.list, timeout_ms=quick),
            url=self.service.base_url,
            where=self.context.where,
            errors=self._errors,
        )
        known: set[str] = set()
        while listed is not None:  # a page at a time (its next() asks for the next one)
            known |= {m.id for m in listed.result.data}
            listed = cast("GetModelsResponse | None", self._call("list models", listed.next))
        for model in dict.fromkeys(models):
            if model.removeprefix(PREFIX) not in known:
                raise ConfigError(
                    f"model {model!r} is not available at {self.service.base_url} (not in its"
                    " list of models); check its name"
                )

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """None: OpenRouter has no flex tier for a batch's tail."""
        return None

    def upload(self, path: Path, tag: Tag) -> str | None:
        """None: the requests travel in the create call."""
        return None

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        requests = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        with self._errors(f"create batch of {path.name}"):  # once: never retried blind
            made = self.sdk.batch.create_batches(
                endpoint=ENDPOINT, model=tag.model.removeprefix(PREFIX), requests=requests
            )
            return view(made.model_dump(by_alias=True))

    def _since(self, since: float) -> Iterator[dict[str, Any]]:
        """The key's batches, newest first, 100 a call, back to ``since``."""
        after: str | None = None
        while True:
            listed = self._call(
                "list batches", functools.partial(self.sdk.batch.list, limit=100, after=after)
            )
            page = listed.result if listed is not None else None
            data = [b.model_dump(by_alias=True) for b in (page.data if page else [])]
            yield from data
            oldest = min((b.get("created_at") or 0 for b in data), default=0)
            if page is None or not page.has_more or not data or oldest < since:
                return
            after = page.last_id

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        """Every batch of the submission's size made since (candidates: their results'
        ids tell the run's own)."""
        floor = since - CLOCK_SKEW
        found = []
        for batch in self._since(floor):
            candidate = view(batch)
            if candidate.id in known or candidate.total != tag.requests:
                continue
            if (candidate.created_at or since) >= floor:
                found.append(candidate)
        return found

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        listed = self._since(since) if batch_ids else iter(())
        return walk_list(listed, batch_ids, lambda b: str(b["id"]), view)

    def retrieve(self, batch_id: str) -> BatchView:
        batch = self._call(
            f"retrieve batch {batch_id}",
            functools.partial(self.sdk.batch.get_batches, id=batch_id),
            batch_id,
        )
        return view(batch.model_dump(by_alias=True))

    @contextlib.contextmanager
    def _send(self, method: str, path: str, what: str, batch_id: str) -> Iterator[Any]:
        """A call the installed SDK does not make, over its own HTTP client: the reply,
        streamed (its status checked)."""
        url = f"{self.service.base_url.rstrip('/')}/{path}"
        headers = {"Authorization": f"Bearer {self._secret}"}
        with self.http.stream(method, url, headers=headers) as reply:
            if reply.status_code >= 400:
                reply.read()
                raise status_error(
                    what,
                    reply.status_code,
                    one_line(reply.text, self._secret),
                    key_hint=self.context.key_hint,
                    batch_id=batch_id,
                    wait=retry_after(reply.headers),
                )
            yield reply

    def cancel(self, batch_id: str) -> BatchView | None:
        """``POST /batches/{id}/cancel`` (in OpenRouter's API reference; not in the SDK):
        the batch stays ``in_progress`` until its provider confirms. An organization
        without cancellation gets 403, said in one line."""
        what = f"cancel batch {batch_id}"

        def once() -> BatchView:
            def attempt() -> BatchView:
                with (
                    self._errors(what, batch_id),
                    self._send("POST", f"batches/{batch_id}/cancel", what, batch_id) as reply,
                ):
                    return view(json.loads(reply.read()))

            return self.retry(attempt)

        return cancel_unless_ended(once, functools.partial(self.retrieve, batch_id))

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        """The batch object with its results, verbatim (the SDK's own HTTP client)."""
        what = f"download batch {ref}"

        def fill(sink: Sink) -> None:
            with self._send("GET", f"batches/{ref}", what, batch_id) as reply:
                for chunk in reply.iter_bytes():
                    sink.write(chunk)

        def attempt() -> int:
            with self._errors(what, batch_id):
                return verbatim(dest, fill)

        return self.retry(attempt)

    def delete(self, refs: Sequence[str]) -> None:
        """The batch's stored requests and results, deleted on the service (the run keeps
        its copy)."""
        for ref in refs:
            with contextlib.suppress(ApiNotFoundError):
                self._call(f"delete {ref}", functools.partial(self.sdk.batch.delete, id=ref))
