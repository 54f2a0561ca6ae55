"""Anthropic's Message Batches API, emulated: batches, their clock, their results, its face.

As the service runs them (``../shared/spec/provider-batch-apis.md`` §1): the
requests travel inline in the create call, whose envelope is checked at once
(``custom_id`` format and uniqueness, 100,000 requests, 256 MB: a 413), while
each request's ``params`` are checked only when it runs (an ``errored`` result),
against the API version the create named (``anthropic-version``: clients that
send ``2023-06-01`` may still send ``temperature``, ``top_p`` and ``top_k``; the
newest version refuses them). A batch is ``in_progress`` from its creation, its
lines run progressively, and ``request_counts`` say ``processing`` for every
line until the batch has ended; a cancel goes through ``canceling`` and ends
the unfinished lines ``canceled``, the completion window ends them ``expired``.
Results come, in any order, from ``results_url`` (this emulator's own address),
only once the batch has ended; a batch is deleted only once it has ended.

A call is Anthropic's when it carries ``anthropic-version``; the key comes in
``x-api-key`` or, as the anthropic SDK 2.x sends it, as a bearer token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core import BASE58, ApiFailure, Store
from ..face import Exchange, FaultKind, Reply, Route, bearer, route
from .anthropic_book import (
    CREATED,
    CUSTOM_ID,
    MAX_REQUESTS,
    VERSIONS,
    AnthropicBook,
    MessageBatch,
    error_body,
)


class AnthropicFace(AnthropicBook):
    """The Message Batches the emulated service holds, and the routes that reach them."""

    name = "anthropic"
    key_variable = "ANTHROPIC_API_KEY"  # what its SDK reads (any value is taken)

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        b = r"^/v1/messages/batches"
        self.routes: Sequence[Route] = [
            route("POST", b + r"$", self.create, creates=True),
            route("GET", b + r"$", self.list),
            route("GET", b + r"/([^/]+)$", self.retrieve),
            route("POST", b + r"/([^/]+)/cancel$", self.cancel, writes=True),
            route("DELETE", b + r"/([^/]+)$", self.delete, writes=True),
            route("GET", b + r"/([^/]+)/results$", self.results),
            route("POST", r"^/v1/messages$", self.message, writes=True),
            route("GET", r"^/v1/models$", self.models),
            route("GET", r"^/v1/models/(.+)$", self.model),
        ]

    # the face ---------------------------------------------------------------
    def claims(self, x: Exchange) -> bool:
        return bool(x.header("anthropic-version"))

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        token = x.header("x-api-key") or bearer(x)
        if not token:
            return ApiFailure(401, "x-api-key header is required", kind="authentication_error")
        if api_key is not None and token != api_key:
            return ApiFailure(401, "invalid x-api-key", kind="authentication_error")
        version = x.header("anthropic-version")
        if version not in VERSIONS:
            return ApiFailure(400, f"anthropic-version: {version!r} is not a valid version")
        return None

    def error(self, failure: ApiFailure) -> Reply:
        request_id = self._request_id()
        body = error_body(failure.status, failure.message, failure.kind, request_id)
        return Reply(body, failure.status, {"request-id": request_id, **failure.headers})

    def fault(self, kind: FaultKind) -> ApiFailure:
        if kind == "429":
            return ApiFailure(
                429,
                "Number of request tokens has exceeded your rate limit.",
                kind="rate_limit_error",
                headers={"retry-after": "0"},
            )
        if kind == "overloaded":
            return ApiFailure(529, "Overloaded", kind="overloaded_error")
        return ApiFailure(500, "Internal server error", kind="api_error")

    def base_url(self, url: str) -> str:
        return url

    def environment(self, url: str) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": url}

    def ledger(self) -> list[dict[str, Any]]:
        return [
            {
                "id": b.id,
                "provider": "anthropic",
                "status": b.status,
                "custom_ids": [r["custom_id"] for r in b.requests],
                "created_at": int(b.created),
            }
            for b in self.made
        ]

    def restore(self, state: Mapping[str, Any]) -> None:
        for b in state.get("batches", []):
            self._add(b["id"], b["requests"], float(b["created_at"]), "2023-06-01")

    # the routes -------------------------------------------------------------
    def _reply(self, body: Any, status: int = 200) -> Reply:
        return Reply(body, status, {"request-id": self._request_id()})

    def _obj(self, batch: MessageBatch, x: Exchange) -> dict[str, Any]:
        ready = not (
            "ended" in batch.stamps
            and self.store.anomaly("ended-before-results", batch.id)
            and self.store.now() < batch.stamps["ended"] + 4 * self.store.settings.latency
        )
        return batch.obj(x.base, self.store.settings.completion_window, ready)

    def create(self, x: Exchange) -> Reply:
        settings = self.store.settings
        if len(x.body) > settings.max_request_bytes:
            raise ApiFailure(
                413,
                f"Request exceeds the maximum size of {settings.max_request_bytes} bytes",
                kind="request_too_large",
            )
        payload = x.json()
        requests = payload.get("requests") if isinstance(payload, dict) else None
        if not isinstance(requests, list) or not requests:
            raise ApiFailure(400, "requests: Field required (a non-empty list)")
        if len(requests) > MAX_REQUESTS:
            raise ApiFailure(400, f"requests: at most {MAX_REQUESTS} requests in a Message Batch")
        seen: set[str] = set()
        for n, request in enumerate(requests):
            cid = request.get("custom_id") if isinstance(request, dict) else None
            if not isinstance(cid, str) or not CUSTOM_ID.match(cid):
                raise ApiFailure(
                    400,
                    f"requests.{n}.custom_id: String should match pattern"
                    " '^[a-zA-Z0-9_-]{1,64}$'",
                )
            if cid in seen:
                raise ApiFailure(
                    400,
                    f"requests.{n}.custom_id: duplicate custom_id {cid!r};"
                    " custom_id must be unique within a Message Batch",
                )
            if "params" not in request:
                raise ApiFailure(400, f"requests.{n}.params: Field required")
            seen.add(cid)
        batch_id = "msgbatch_01" + self.store.decide.token(BASE58, 22)
        batch = self._add(batch_id, requests, self.store.now(), x.header("anthropic-version"))
        return self._reply(self._obj(batch, x))

    def message(self, x: Exchange) -> Reply:
        """The Messages API: one request answered now, at the list price, by the same
        simulated model as a batch's. ``X-Client-Request-Id`` (which the service
        ignores) names the call in the ledger."""
        params = x.json()
        name = x.header("X-Client-Request-Id") or f"call-{self.store.decide.nth('messages')}"
        status, body = self.sync(x.header("anthropic-version"), params, name)
        return Reply(body, status, {"request-id": self._request_id()})

    def _add(
        self, batch_id: str, requests: list[dict[str, Any]], created: float, version: str
    ) -> MessageBatch:
        self.seq += 1
        order = self.store.decide.shuffled(range(len(requests)), batch_id)
        batch = MessageBatch(batch_id, created, self.seq, requests, order, version)
        self.batches[batch.id] = batch
        self.made.append(batch)
        return batch

    def _get(self, batch_id: str, polled: bool = False) -> MessageBatch:
        batch = self.batches.get(batch_id)
        if batch is not None and polled and self._hidden(batch):
            batch = None  # the service's known fault: 404 for a while, then found again
        if batch is None:
            raise ApiFailure(404, f"message batch {batch_id!r} not found", kind="not_found_error")
        return batch

    def _hidden(self, batch: MessageBatch) -> bool:
        if not self.store.anomaly("not-found-after-create", batch.id):
            return False
        now, window = self.store.now(), 2 * self.store.settings.latency
        ended = batch.stamps.get("ended")
        return now < batch.created + window or (ended is not None and now < ended + window)

    def list(self, x: Exchange) -> Reply:
        limit = x.int_param("limit", 20, 1, 1000)
        after, before = x.query.get("after_id"), x.query.get("before_id")
        ordered = sorted(self.batches.values(), key=lambda b: b.seq, reverse=True)
        ids = [b.id for b in ordered]
        for cursor in (after, before):
            if cursor is not None and cursor not in ids:
                raise ApiFailure(400, f"invalid pagination cursor {cursor!r}")
        if before is not None:
            newer = ordered[: ids.index(before)]
            found, more = newer[-limit:], len(newer) > limit
        else:
            older = ordered[ids.index(after) + 1 :] if after is not None else ordered
            found, more = older[:limit], len(older) > limit
        data = [self._obj(b, x) for b in found]
        return self._reply(
            {
                "data": data,
                "has_more": more,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )

    def retrieve(self, x: Exchange, batch_id: str) -> Reply:
        return self._reply(self._obj(self._get(batch_id, polled=True), x))

    def cancel(self, x: Exchange, batch_id: str) -> Reply:
        batch = self._get(batch_id)
        if batch.status == "ended":
            raise ApiFailure(
                400, f"message batch {batch_id!r} has already ended and cannot be canceled"
            )
        if batch.status != "canceling":
            batch.status = "canceling"
            batch.stamps["canceling"] = self.store.now()
        return self._reply(self._obj(batch, x))

    def delete(self, x: Exchange, batch_id: str) -> Reply:
        batch = self._get(batch_id)
        if batch.status != "ended":
            raise ApiFailure(
                400,
                f"message batch {batch_id!r} is still processing; cancel it and"
                " wait for it to end before deleting it",
            )
        del self.batches[batch_id]
        return self._reply({"id": batch_id, "type": "message_batch_deleted"})

    def results(self, x: Exchange, batch_id: str) -> Reply:
        batch = self._get(batch_id)
        if batch.output is None:
            raise ApiFailure(
                400, f"message batch {batch_id!r} has not ended; its results are not ready"
            )
        # empty-results: the file reads empty while that bad day lasts, whole after it
        empty = self.store.anomaly("empty-results", batch.id)
        return Reply(
            b"" if empty else batch.output,
            file=True,
            content_type="application/binary",
            headers={"request-id": self._request_id()},
        )

    def _model(self, name: str) -> dict[str, Any]:
        return {
            "type": "model",
            "id": name,
            "display_name": name,
            "created_at": CREATED.get(name, "2026-01-01T00:00:00Z"),
        }

    def model(self, x: Exchange, name: str) -> Reply:
        if not self.store.known_model(name):
            raise ApiFailure(404, f"model: {name}", kind="not_found_error")
        return self._reply(self._model(name))

    def models(self, x: Exchange) -> Reply:
        data = [self._model(m) for m in self.store.catalogue.listed("claude")]
        return self._reply(
            {
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )


def make(store: Store) -> AnthropicFace:
    return AnthropicFace(store)
