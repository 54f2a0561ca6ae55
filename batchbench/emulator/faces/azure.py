"""Azure OpenAI's face: OpenAI's Files and Batches under Azure's v1 paths.

What the openai SDK's Azure client sends, and what the service answers:
``/openai/v1/...`` (the SDK's ``base_url`` is ``{endpoint}/openai/v1``), the key in
an ``api-key`` header, an ``api-version`` query the v1 API accepts as ``v1``,
``preview`` or ``latest``; the dated API's paths (``/openai/files``, ``/openai/batches``)
reach the same book and need a dated ``api-version`` that has batches. A model is
a *deployment*: the face knows one deployment per catalogue
model, named after it, and those the ``azure_deployments`` setting adds
(deployment → model); a batch naming another fails validation as Azure's does.
A line's ``url`` may be ``/chat/completions`` (Azure's docs) or
``/v1/chat/completions``; a file holds up to 100,000 lines; uploads expire in 14 to
30 days.
"""

from __future__ import annotations

import re

from ..core import ApiFailure, Store
from ..face import Exchange, bearer
from .openai import OpenAIFace
from .openai.records import ENDPOINTS
from .openai.validate import Limits

V1_VERSIONS = frozenset({"v1", "preview", "latest"})
DATED = re.compile(r"^\d{4}-\d{2}-\d{2}(-preview)?$")
BATCH_SINCE = "2024-07-01-preview"  # the first dated version with Global Batch
AZURE_LIMITS = Limits(
    max_lines=100_000,
    endpoints={
        **{e: e for e in ENDPOINTS},
        **{e.removeprefix("/v1"): e for e in ENDPOINTS},
    },
    file_expiry=(1_209_600, 2_592_000),
)
MISSING_KEY = (
    "Access denied due to missing subscription key. Make sure to include subscription key"
    " when making requests to an API."
)
WRONG_KEY = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to"
    " provide a valid key for an active subscription and use a correct regional API"
    " endpoint for your resource."
)


class AzureFace(OpenAIFace):
    name = "azure"
    key_variable = "AZURE_OPENAI_API_KEY"

    def __init__(self, store: Store) -> None:
        super().__init__(store, prefix="/openai/v1", limits=AZURE_LIMITS, provider="azure")
        # The dated API's paths (``/openai/files?api-version=2024-10-21``) reach the same book.
        self.routes = [*self.routes, *self.routes_under("/openai")]

    def claims(self, x: Exchange) -> bool:
        return x.path.startswith("/openai/")

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        version = x.query.get("api-version")
        if x.path.startswith("/openai/v1/"):
            if version is not None and version not in V1_VERSIONS:
                return ApiFailure(
                    400,
                    f"API version {version!r} is not supported on the v1 API; use 'v1' or"
                    " 'preview', or no api-version",
                    code="BadRequest",
                )
        elif version is None:
            return ApiFailure(
                400,
                "Missing required query parameter 'api-version' (the dated API's paths)",
                code="BadRequest",
            )
        elif not DATED.match(version) or version < BATCH_SINCE:
            return ApiFailure(
                404,
                f"Resource not found: api-version {version!r} has no batch API (from"
                f" {BATCH_SINCE})",
                code="404",
            )
        key = x.header("api-key") or bearer(x)
        if not key:
            return ApiFailure(401, MISSING_KEY, code="401")
        if api_key is not None and key != api_key:
            return ApiFailure(401, WRONG_KEY, code="401")
        return None

    def base_url(self, url: str) -> str:
        return url  # the resource's endpoint: the SDK adds /openai/v1

    def environment(self, url: str) -> dict[str, str]:
        return {"AZURE_OPENAI_ENDPOINT": self.base_url(url)}

    def model_known(self, name: str) -> bool:
        deployments = self.store.settings.azure_deployments
        if name in deployments:
            return self.store.known_model(deployments[name])
        return self.store.known_model(name)


def make(store: Store) -> AzureFace:
    return AzureFace(store)
