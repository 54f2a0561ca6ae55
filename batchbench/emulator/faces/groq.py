"""Groq's face: OpenAI's Files, Batches and Models under Groq's ``/openai/v1`` paths.

What the groq SDK sends and Groq answers (console.groq.com/docs/batch): the SDK's base
URL is the host (``https://api.groq.com``) and its paths start ``/openai/v1``; the key
is a bearer token; a batch's ``completion_window`` is 24 hours to 7 days; ``metadata``
is kept and the window named is the batch's (its deadline, ``expires_at``); files are
``.jsonl`` of up to 100 MB with purpose ``batch`` only (the SDK's ``files.create``); the
batch list is one whole list, no pages; models are Groq's ids
(``openai/gpt-oss-120b``: the catalogue's ``groq/openai/gpt-oss-120b``). On this
emulator's port the face lives under ``/groq`` (its base URL ``{url}/groq``), where
OpenAI's and Azure's faces cannot take its calls.
"""

from __future__ import annotations

from ..core import ApiFailure, Store
from ..face import Exchange, Reply
from .openai import OPENAI_LIMITS, OpenAIFace
from .openai.validate import Limits

MOUNT = "/groq"
WINDOWS = frozenset({"24h", *(f"{d}d" for d in range(1, 8)), *(f"{h}h" for h in (48, 72))})
GROQ_LIMITS = Limits(
    max_lines=OPENAI_LIMITS.max_lines,
    endpoints={"/v1/chat/completions": "/v1/chat/completions"},
    file_expiry=OPENAI_LIMITS.file_expiry,
    windows=WINDOWS,
    # The groq SDK's files.create: "The Batch API only supports `.jsonl` files up to
    # 100 MB in size", and its one purpose is "batch".
    batch_file_bytes=100 * 1024 * 1024,
    purposes=("batch",),
)


class GroqFace(OpenAIFace):
    name = "groq"
    key_variable = "GROQ_API_KEY"

    def __init__(self, store: Store) -> None:
        super().__init__(store, prefix=f"{MOUNT}/openai/v1", limits=GROQ_LIMITS, provider="groq")

    def claims(self, x: Exchange) -> bool:
        return x.path.startswith(f"{MOUNT}/")

    def base_url(self, url: str) -> str:
        return url + MOUNT  # the SDK adds /openai/v1

    def environment(self, url: str) -> dict[str, str]:
        return {"GROQ_BASE_URL": self.base_url(url)}

    def key_refused(self, token: str) -> ApiFailure:
        """Groq's 401 for a key it does not know, or none: ``Invalid API Key`` (as its API
        answers it, e.g. spring-projects/spring-ai#997)."""
        return ApiFailure(401, "Invalid API Key", code="invalid_api_key")

    def list_batches(self, x: Exchange) -> Reply:
        """Every batch of the key, newest first, in one list (the groq SDK's list takes no
        page and has no ``has_more``: the list is whole)."""
        found = self.book.list_batches(10**9, None)
        return Reply({"object": "list", "data": found["data"]})

    def model_known(self, name: str) -> bool:
        return self.store.known_model(name) or self.store.known_model(f"groq/{name}")


def make(store: Store) -> GroqFace:
    return GroqFace(store)
