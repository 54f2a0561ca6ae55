"""Azure OpenAI's Global Batch through the openai SDK's Azure client.

The client is :class:`openai.AzureOpenAI` on the resource's v1 API
(``{AZURE_OPENAI_ENDPOINT}/openai/v1``), the key in the ``api-key`` header, and
``api-version`` from ``OPENAI_API_VERSION`` (``v1``, the v1 API's own, when it is unset
or names a dated version, which is for the dated API's paths).
The batch is created for ``/v1/chat/completions`` (the SDK's type allows only that
spelling; Azure takes it as the lines' ``/chat/completions``). Everything else —
files, batches, metadata tags, the list walk that finds a batch whose create was
lost — is OpenAI's (:class:`.openai_client.OpenAIClient`).

Before a run nothing is asked of the deployment itself: Azure's data plane has no
call that names a deployment without running it, so the pre-flight checks the
endpoint and key (the list of models), and a wrong deployment name fails the
first batch's validation in the service's own words.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import openai

from ..errors import ApiNotFoundError, ConfigError
from . import tls
from .base import Service
from .closing import shut
from .one_by_one import CallKind, Calls
from .openai_client import OpenAIClient
from .openai_flex import chat_calls
from .stainless import timeout

V1_PATH = "/openai/v1"
API_VERSION = "v1"  # the v1 API's api-version when none is named


V1_VERSIONS = ("v1", "preview", "latest")  # what the v1 API takes as api-version


def api_version() -> tuple[str, str | None]:
    """The v1 API's api-version, from ``OPENAI_API_VERSION`` when it names one of the v1
    API's; a dated one (``2024-10-21``, common in Azure users' environments, for the
    dated API) is the v1 API's own instead, with a note saying so."""
    given = os.environ.get("OPENAI_API_VERSION") or API_VERSION
    if given in V1_VERSIONS:
        return given, None
    return API_VERSION, (
        f"note: OPENAI_API_VERSION={given} is for Azure OpenAI's dated API; batchbench"
        f" speaks its v1 API ({V1_PATH}), as api-version {API_VERSION}"
    )


class AzureClient(OpenAIClient):
    def connect(self, api_key: str) -> None:
        super().connect(api_key)
        note = api_version()[1]
        if note is not None:
            self.warn(note)
        # Chat Completions on the v1 API through the plain client, as Microsoft's flex
        # example sends them: AzureOpenAI would rewrite the path to /deployments/…
        self._chat = openai.OpenAI(
            api_key=api_key,
            base_url=f"{self.service.base_url}{V1_PATH}",
            max_retries=0,
            timeout=timeout(openai),
            http_client=tls.http_client(openai),
        )

    def close(self) -> None:
        super().close()
        shut(self._chat)

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """The flex tier (preview), at the batch price: "a 50% discount compared with
        Standard processing", ``service_tier: "flex"`` on Chat Completions (Microsoft
        Learn, "Use Flex processing with Azure OpenAI"); a deployment whose model has no
        flex answers 400, and those requests fail as any 400 does."""
        return chat_calls(self._chat) if kind == "flex" else None

    def make_sdk(self, service: Service, api_key: str) -> openai.OpenAI:
        return openai.AzureOpenAI(
            api_key=api_key,
            base_url=f"{service.base_url}{V1_PATH}",
            api_version=api_version()[0],
            max_retries=0,
            timeout=timeout(openai),
            http_client=tls.http_client(openai),
        )

    def check_models(self, models: Iterable[str]) -> None:
        where = "AZURE_OPENAI_ENDPOINT (the resource's https://NAME.openai.azure.com)"
        try:
            self._call.preflight("list models", self.sdk.models.list, where)
        except ApiNotFoundError:
            raise ConfigError(
                f"{self.service.base_url} is not an Azure OpenAI endpoint: it answers 404 to"
                f" {V1_PATH}/models; check {where}"
            ) from None
