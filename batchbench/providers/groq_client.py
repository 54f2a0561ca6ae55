"""Groq's Batch API through the groq SDK (Stainless-made, as openai's is: the same files,
batches and models calls, the same exception family). Batches carry the run's mark as
``metadata``, which Groq keeps, so a lost create is found by listing, as on OpenAI
(:class:`.openai_client.OpenAIClient`) — Groq's list is one whole list, no pages. Its
flex tier costs what on demand does: a deadline's fallback is on demand, at the list
price."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

from .base import Service
from .client_base import stainless_sdk
from .one_by_one import CallKind, Calls
from .openai_client import OpenAIClient
from .openai_flex import chat_calls
from .prefixes import GROQ as PREFIX


class GroqClient(OpenAIClient):
    def module(self) -> ModuleType:
        import groq

        return groq

    def make_sdk(self, service: Service, api_key: str) -> Any:
        import groq

        return stainless_sdk(groq, groq.Groq, service, api_key)

    def _batches_since(self, since: float) -> Iterator[dict[str, Any]]:
        """The key's batches, newest first: Groq lists them all in one reply (its SDK's
        list takes no page)."""
        listed = self._call("list batches", self.sdk.batches.list)
        data = [self._call.reply(b).model_dump(warnings=False) for b in listed.data]
        yield from sorted(data, key=lambda b: -int(b.get("created_at") or 0))

    def service_id(self, model: str) -> str:
        """``groq/ID`` → ``ID``, Groq's own (:mod:`.groq_wire`)."""
        return model.removeprefix(PREFIX)

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """On demand, each request one chat completion at the list price (a deadline's
        fallback, with --allow-list-price). Groq's flex tier is priced as on demand
        ("Pricing matches the on-demand tier", its Flex Processing page), so it is no
        cheaper fallback than this."""
        return chat_calls(self.sdk, "ondemand", self.module()) if kind == "ondemand" else None
