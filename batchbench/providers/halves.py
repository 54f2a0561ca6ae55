"""Each provider's two halves — its wire (offline) and its client (its SDK) — made on
first use, so that ``status``, ``list`` and ``--help`` import no SDK; each checked by the
type checker against the seam's protocols (:mod:`.base`). The records that name them are
:mod:`.registry`'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..clock import Clock
    from .base import Client, Service, Wire
    from .spec import ClientContext


def anthropic_wire() -> Wire:
    from .anthropic_wire import AnthropicWire

    return AnthropicWire()


def anthropic_client(
    service: Service,
    api_key: str,
    *,
    warn: Callable[[str], None],
    clock: Clock,
    context: ClientContext,
) -> Client:
    from .anthropic_client import AnthropicClient

    return AnthropicClient(service, api_key, warn=warn, clock=clock, context=context)


def gemini_wire() -> Wire:
    from .gemini_wire import GeminiWire

    return GeminiWire()


def gemini_client(
    service: Service,
    api_key: str,
    *,
    warn: Callable[[str], None],
    clock: Clock,
    context: ClientContext,
) -> Client:
    from .gemini_client import GeminiClient

    return GeminiClient(service, api_key, warn=warn, clock=clock, context=context)


def fireworks_wire() -> Wire:
    from .fireworks_wire import FireworksWire

    return FireworksWire()


def fireworks_client(
    service: Service,
    api_key: str,
    *,
    warn: Callable[[str], None],
    clock: Clock,
    context: ClientContext,
) -> Client:
    from .fireworks_client import FireworksClient

    return FireworksClient(service, api_key, warn=warn, clock=clock, context=context)


def openai_wire() -> Wire:
    from .openai_wire import OpenAIWire

    return OpenAIWire()


def openai_client(
    service: Service,
    api_key: str,
    *,
    warn: Callable[[str], None],
    clock: Clock,
    context: ClientContext,
) -> Client:
    from .openai_client import OpenAIClient

    return OpenAIClient(service, api_key, warn=warn, clock=clock, context=context)


def azure_wire() -> Wire:
    from .azure_wire import AzureWire

    return AzureWire()


def azure_client(
    service: Service,
    api_key: str,
    *,
    warn: Callable[[str], None],
    clock: Clock,
    context: ClientContext,
) -> Client:
    from .azure_client import AzureClient

    return AzureClient(service, api_key, warn=warn, clock=clock, context=context)


def bedrock_wire() -> Wire:
    from .bedrock_wire import BedrockWire

    return BedrockWire()


def bedrock_client(
    service: Service,
    api_key: str,
    *,
    warn: Callable[[str], None],
    clock: Clock,
    context: ClientContext,
) -> Client:
    from .bedrock_client import BedrockClient

    return BedrockClient(service, api_key, warn=warn, clock=clock, context=context)


def vertex_gemini_wire() -> Wire:
    from .vertex_wire import VertexGeminiWire

    return VertexGeminiWire()


def vertex_claude_wire() -> Wire:
    from .vertex_wire import VertexClaudeWire

    return VertexClaudeWire()


def vertex_gemini_client(
    service: Service,
    api_key: str,
    *,
    warn: Callable[[str], None],
    clock: Clock,
    context: ClientContext,
) -> Client:
    from .vertex_client import VertexClient

    made = VertexClient(
        service, api_key, warn=warn, clock=clock, context=context, publisher="google"
    )
    return made


def vertex_claude_client(
    service: Service,
    api_key: str,
    *,
    warn: Callable[[str], None],
    clock: Clock,
    context: ClientContext,
) -> Client:
    from .vertex_client import VertexClient

    return VertexClient(
        service, api_key, warn=warn, clock=clock, context=context, publisher="anthropic"
    )
