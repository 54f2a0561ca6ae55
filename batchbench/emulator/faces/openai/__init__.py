"""OpenAI's face: the Files, Batches and Models routes under ``/v1``, as the openai SDK
calls them, with the key as a bearer token and errors in OpenAI's envelope.

It is the catch-all face: a call no other face claims is OpenAI's (its SDK sends
nothing else that would tell it apart). :class:`OpenAIFace` takes the path prefix
and the book's limits, so Azure OpenAI's face is this one under Azure's paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from ...core import HEX, ApiFailure, Store
from ...endpoints import check_body
from ...face import Exchange, FaultKind, Reply, Route, bearer, route
from ...multipart import multipart
from .book import OpenAIBook
from .lines import reply
from .records import ENDPOINTS
from .validate import Limits

# When OpenAI's models were made (GET /v1/models/{id}): real dates where known.
CREATED = {
    "gpt-4o-mini": 1721172741,
    "gpt-4o": 1715367049,
    "gpt-4.1": 1744316542,
    "gpt-4.1-mini": 1744318173,
    "gpt-4.1-nano": 1744321707,
    "o3": 1744225308,
    "o4-mini": 1744225351,
    "gpt-5": 1754425777,
    "gpt-5-mini": 1754425928,
    "gpt-5-nano": 1754426384,
}
DEFAULT_CREATED = 1767225600  # 2026-01-01, for models this table has no date for
OPENAI_LIMITS = Limits(
    max_lines=50_000,
    endpoints={e: e for e in ENDPOINTS},
    file_expiry=(3600, 2_592_000),
)


class OpenAIFace:
    name = "openai"
    key_variable = "OPENAI_API_KEY"  # what its SDK reads (any value is taken)

    def __init__(
        self,
        store: Store,
        *,
        prefix: str = "/v1",
        limits: Limits = OPENAI_LIMITS,
        provider: str = "openai",
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.book = OpenAIBook(store, provider, limits, self.model_known)
        self.routes: Sequence[Route] = self.routes_under(prefix)

    def routes_under(self, prefix: str) -> list[Route]:
        """The Files, Batches and Models routes under one path prefix."""
        p = "^" + prefix
        return [
            route("POST", p + r"/files$", self.upload, writes=True),
            route("GET", p + r"/files$", self.list_files),
            route("GET", p + r"/files/([^/]+)$", self.get_file),
            route("DELETE", p + r"/files/([^/]+)$", self.delete_file, writes=True),
            route("GET", p + r"/files/([^/]+)/content$", self.content),
            route("POST", p + r"/batches$", self.create_batch, creates=True),
            route("GET", p + r"/batches$", self.list_batches),
            route("GET", p + r"/batches/([^/]+)$", self.get_batch),
            route("POST", p + r"/batches/([^/]+)/cancel$", self.cancel, writes=True),
            route("POST", p + r"/chat/completions$", self.chat, writes=True),
            route("GET", p + r"/models$", self.models),
            route("GET", p + r"/models/(.+)$", self.model),
        ]

    # the face ---------------------------------------------------------------
    def claims(self, x: Exchange) -> bool:
        return True  # the last face asked: whatever no other face claimed

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        token = bearer(x)
        if not token or (api_key is not None and token != api_key):
            return self.key_refused(token)
        return None

    def key_refused(self, token: str) -> ApiFailure:
        """What the service answers a call without a key (``token`` empty) or with one it
        does not know, in its own status and words: OpenAI's here; each vendor whose
        differ says its own (with the source it was read from)."""
        if not token:
            return ApiFailure(401, "You didn't provide an API key.", code="invalid_api_key")
        return ApiFailure(401, "Incorrect API key provided.", code="invalid_api_key")

    def error(self, failure: ApiFailure) -> Reply:
        kind = failure.kind or ("invalid_request_error" if failure.status < 500 else "server_error")
        body = {
            "error": {
                "message": failure.message,
                "type": kind,
                "param": failure.param,
                "code": failure.code,
            }
        }
        return Reply(body, failure.status, dict(failure.headers))

    def fault(self, kind: FaultKind) -> ApiFailure:
        if kind == "429":
            return ApiFailure(
                429,
                "Rate limit reached for requests. Please try again shortly.",
                kind="requests",
                code="rate_limit_exceeded",
                headers={"retry-after": "0", "retry-after-ms": "10"},
            )
        return ApiFailure(500, "The server had an error while processing your request.")

    def advance(self, now: float, flush: bool) -> None:
        self.book.advance(now, flush)

    def ledger(self) -> list[dict[str, Any]]:
        return self.book.ledger()

    def restore(self, state: Mapping[str, Any]) -> None:
        self.book.restore(state)

    def tamper(self, batch_id: str, change: Mapping[str, Any]) -> None:
        self.book.tamper(batch_id, change)

    def base_url(self, url: str) -> str:
        return f"{url}{self.prefix}"

    def environment(self, url: str) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url(url)}

    def model_known(self, name: str) -> bool:
        return self.store.known_model(name)

    # files ------------------------------------------------------------------
    def upload(self, x: Exchange) -> Reply:
        fields, files = multipart(x.header("Content-Type"), x.body)
        if "file" not in files:
            raise ApiFailure(400, "Missing required parameter: 'file'.", param="file")
        if "purpose" not in fields:
            raise ApiFailure(400, "Missing required parameter: 'purpose'.", param="purpose")
        expires = None
        if "expires_after[anchor]" in fields or "expires_after[seconds]" in fields:
            try:
                seconds = int(fields.get("expires_after[seconds]", ""))
            except ValueError:
                raise ApiFailure(
                    400, "Invalid expires_after[seconds]", param="expires_after"
                ) from None
            expires = {"anchor": fields.get("expires_after[anchor]"), "seconds": seconds}
        filename, data = files["file"]
        return Reply(self.book.upload(filename, fields["purpose"], data, expires))

    def list_files(self, x: Exchange) -> Reply:
        limit = x.int_param("limit", 10000, 1, 10000)
        order = x.query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise ApiFailure(400, "order must be 'asc' or 'desc'", param="order")
        return Reply(
            self.book.list_files(x.query.get("purpose"), order, limit, x.query.get("after"))
        )

    def get_file(self, x: Exchange, file_id: str) -> Reply:
        return Reply(self.book.get_file(file_id).obj())

    def delete_file(self, x: Exchange, file_id: str) -> Reply:
        return Reply(self.book.delete_file(file_id))

    def content(self, x: Exchange, file_id: str) -> Reply:
        return Reply(self.book.read_file(file_id), file=True)

    # batches ----------------------------------------------------------------
    def create_batch(self, x: Exchange) -> Reply:
        return Reply(self.book.create_batch(x.json()))

    def list_batches(self, x: Exchange) -> Reply:
        limit = x.int_param("limit", 20, 1, 100)
        return Reply(self.book.list_batches(limit, x.query.get("after")))

    def get_batch(self, x: Exchange, batch_id: str) -> Reply:
        return Reply(self.book.batch_obj(batch_id))

    def cancel(self, x: Exchange, batch_id: str) -> Reply:
        return Reply(self.book.cancel(batch_id))

    # one synchronous call ------------------------------------------------------
    def chat(self, x: Exchange) -> Reply:
        """A chat completion, on the default tier or on flex: slower, at the batch price,
        and refused 429 (unbilled, nothing run) when flex has no capacity, a seeded share
        of calls. ``X-Client-Request-Id`` names the call in the ledger."""
        body = x.json()
        if not isinstance(body, dict):
            raise ApiFailure(400, "We could not parse the JSON body of your request.")
        tier = body.pop("service_tier", None)
        name = x.header("X-Client-Request-Id") or f"call-{self.store.decide.nth('chat')}"
        store = self.store
        if tier == "flex" and store.shed(name):
            raise ApiFailure(
                429,
                "Resource unavailable: flex processing has no capacity right now;"
                " please retry later.",
                code="resource_unavailable",
            )
        if not self.model_known(str(body.get("model"))):
            raise ApiFailure(
                404, f"The model `{body.get('model')}` does not exist.", code="model_not_found"
            )
        request_id = f"req_{store.decide.token(HEX, 32)}"
        response = check_body("/v1/chat/completions", body)
        if response is None:
            where = f"{tier or 'sync'}/{name}"
            made, error = reply(store, where, "/v1/chat/completions", body, request_id, store.now())
            if made is not None and isinstance(made.get("body"), dict):
                # "the response body will include the service_tier value based on the
                # processing mode actually used" (the chat completion object)
                made["body"]["service_tier"] = tier or "default"
            response = made or {"status_code": 500, "body": {"error": error}}
        status = int(response["status_code"])
        store.executed(self.book.provider, tier or "sync", name, status, response["body"])
        return Reply(response["body"], status, {"x-request-id": request_id})

    # models -----------------------------------------------------------------
    def _model(self, name: str) -> dict[str, Any]:
        created = CREATED.get(name, DEFAULT_CREATED)
        return {"id": name, "object": "model", "created": created, "owned_by": "system"}

    def model(self, x: Exchange, name: str) -> Reply:
        name = unquote(name)  # a model id with a slash comes percent-encoded, as SDKs send it
        if not self.model_known(name):
            raise ApiFailure(
                404,
                f"The model `{name}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        return Reply(self._model(name))

    def models(self, x: Exchange) -> Reply:
        names = [
            n
            for n in self.store.catalogue.listed()
            if not n.startswith(("claude", "gemini", "accounts/"))
        ]
        return Reply({"object": "list", "data": [self._model(n) for n in names]})


def make(store: Store) -> OpenAIFace:
    return OpenAIFace(store)
