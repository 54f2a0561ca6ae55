"""xAI's Batch API through the OpenAI SDK pointed at xAI (``https://api.x.ai/v1``), as
xAI's docs show: the upload and the model list are OpenAI's calls; the batch calls are
xAI's own REST paths, sent with the same SDK's generic ``get``/``post`` (its auth, its
exception family, its transport), since the official xai-sdk speaks gRPC only.

A batch is created as ``{"name", "input_file_id"}``; its ``name`` carries the run's mark
(``batchbench-<run id>-<submission>``), and xAI keeps and lists it, so a lost create is
found by listing, as on OpenAI. A batch has no status word: it has ended when nothing
is pending (its counts say how), been cancelled when it has a cancel time, expired when
its expiry has passed with requests unrun. Its results are pages (100 a call), written
one a line, verbatim, as its raw file. No flex tier; xAI keeps no batch to delete.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from ..errors import ApiError
from ..kinds import Ending, Phase
from .base import BatchError, BatchView, Service, Tag, cancel_unless_ended, walk_list
from .client_base import stainless_sdk
from .downloads import Sink, verbatim
from .one_by_one import CallKind, Calls
from .openai_client import OpenAIClient
from .openai_flex import chat_calls
from .prefixes import XAI as PREFIX
from .xai_wire import result_page

PAGE = 100


def _seconds(stamp: Any) -> float | None:
    """A proto Timestamp's JSON (RFC 3339) as a Unix time."""
    if not stamp:
        return None
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def mark(tag: Tag) -> str:
    """The name a run's batch carries: its run and submission."""
    return f"batchbench-{tag.run_id}-{tag.sub}"


def view(batch: dict[str, Any], now: float) -> BatchView:
    """An xAI batch, normalised: its phase from its counts and its times."""
    state = batch.get("state") or {}
    total, pending = int(state.get("num_requests") or 0), int(state.get("num_pending") or 0)
    done, failed = int(state.get("num_success") or 0), int(state.get("num_error") or 0)
    cancelled = int(state.get("num_cancelled") or 0)
    expires = _seconds(batch.get("expire_time"))
    ending: Ending | None = None
    phase: Phase
    if batch.get("cancel_time") or batch.get("cancel_by_xai_message"):
        phase, ending = ("ended", "cancelled") if pending == 0 else ("cancelling", None)
    elif total and pending == 0:  # requests unrun without a cancel: the batch expired
        phase, ending = "ended", "completed" if cancelled == 0 else "expired"
    elif expires is not None and now > expires:
        phase, ending = "ended", "expired"
    else:
        phase = "running" if total and pending < total else "pending"
    refusal = batch.get("cancel_by_xai_message")
    ident = str(batch["batch_id"])
    return BatchView(
        id=ident,
        status=ending or phase,
        phase=phase,
        ending=ending,
        total=total,
        completed=done,
        failed=failed,
        files=(ident,) if ending is not None else (),
        errors=(BatchError(None, str(refusal)),) if refusal else None,
        created_at=_seconds(batch.get("create_time")),
    )


class XAIClient(OpenAIClient):
    def make_sdk(self, service: Service, api_key: str) -> Any:
        import openai

        return stainless_sdk(openai, openai.OpenAI, service, api_key)

    def refine(self, what: str, exc: Any) -> ApiError | None:
        """xAI refuses a key with a 400 (``Incorrect API key provided: xa***yz…``), not a
        401: read as the key refused, naming its variable (the key is never echoed)."""
        body = getattr(exc, "body", None)  # the SDK keeps the body's "error" (a string)
        said = body.get("error") if isinstance(body, dict) else body
        if exc.status_code == 400 and isinstance(said, str) and "API key" in said:
            return ApiError(
                f"{what}: the service refused the key (HTTP 400: incorrect API key);"
                f" check {self.context.key_hint}",
                status=401,
            )
        return super().refine(what, exc)

    def service_id(self, model: str) -> str:
        """``xai/ID`` → ``ID``, xAI's own (:mod:`.xai_wire`)."""
        return model.removeprefix(PREFIX)

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """On demand, each request one chat completion at the list price (a deadline's
        fallback, with --allow-list-price; xAI has no flex tier), written as a results
        page."""
        if kind != "ondemand":
            return None
        import openai

        return chat_calls(self.sdk, "ondemand", openai, write=result_page)

    def _get(self, what: str, path: str, batch_id: str | None = None, **params: Any) -> Any:
        options: Any = {"params": {k: v for k, v in params.items() if v is not None}}
        return self._call(
            what, lambda: self.sdk.get(path, cast_to=object, options=options), batch_id
        )

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        if input_ref is None:
            raise ApiError("an xAI batch needs its uploaded file")
        body = {"name": mark(tag), "input_file_id": input_ref}
        with self._call.errors(f"create batch for {input_ref}"):  # once: never retried blind
            made: Any = self._call.reply(self.sdk.post("/batches", cast_to=object, body=body))
            return view(made, self.clock.time())

    def _batches_since(self, since: float) -> Iterator[dict[str, Any]]:
        """The team's batches, a page at a time, until one reaches back before ``since``."""
        token: str | None = None
        while True:
            page = self._get("list batches", "/batches", limit=PAGE, pagination_token=token)
            data = list(page.get("batches") or [])
            yield from data
            token = page.get("pagination_token") or None
            oldest = min((_seconds(b.get("create_time")) or 0 for b in data), default=0)
            if not token or not data or oldest < since:
                return

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        """The batch named for this run and submission."""
        now = self.clock.time()
        return [
            view(b, now)
            for b in self._batches_since(since)
            if b.get("name") == mark(tag) and str(b["batch_id"]) not in known
        ][:1]

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        listed = self._batches_since(since) if batch_ids else iter(())
        now = self.clock.time()
        return walk_list(listed, batch_ids, lambda b: str(b["batch_id"]), lambda b: view(b, now))

    def retrieve(self, batch_id: str) -> BatchView:
        found = self._get(f"retrieve batch {batch_id}", f"/batches/{batch_id}", batch_id)
        return view(found, self.clock.time())

    def cancel(self, batch_id: str) -> BatchView | None:
        def once() -> BatchView:
            sent: Any = self._call(
                f"cancel batch {batch_id}",
                lambda: self.sdk.post(f"/batches/{batch_id}:cancel", cast_to=object),
                batch_id,
            )
            return view(sent, self.clock.time())

        return cancel_unless_ended(once, lambda: self.retrieve(batch_id))

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        """Every page of the batch's results, one a line, each as the service sent it (its
        line breaks, never inside a JSON string, dropped)."""
        what = f"download results of {ref}"

        def fill(sink: Sink) -> None:
            token: str | None = None
            while True:
                params = {"limit": PAGE, **({"pagination_token": token} if token else {})}
                options: Any = {"params": params}
                path = f"/batches/{ref}/results"
                reply = self.sdk.get(path, cast_to=httpx.Response, options=options)
                page = reply.content.replace(b"\r", b"").replace(b"\n", b"")
                sink.write(page + b"\n")
                try:
                    token = json.loads(page).get("pagination_token") or None
                except (ValueError, AttributeError):
                    return  # not a page: kept as it came, and said so when read
                if not token:
                    return

        def attempt() -> int:
            with self._call.errors(what, batch_id):
                return verbatim(dest, fill)

        return self._call.retry(attempt)

    def delete(self, refs: Sequence[str]) -> None:
        """Nothing: xAI keeps no results file to delete (the run keeps its copy)."""
