"""Each provider's two halves — its wire (offline) and its client (its SDK) — made on
first use, so that ``status``, ``list`` and ``--help`` import no SDK. Each loader names
its class, which the type checker holds to the seam's protocols (:mod:`.base`). The
records that name them are :mod:`.registry`'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..clock import Clock
    from .anthropic_client import AnthropicClient
    from .azure_client import AzureClient
    from .base import Client, Service, Wire
    from .bedrock_client import BedrockClient
    from .fireworks_client import FireworksClient
    from .gemini_client import GeminiClient
    from .groq_client import GroqClient
    from .mistral_client import MistralClient
    from .openai_client import OpenAIClient
    from .openrouter_client import OpenRouterClient
    from .spec import ClientContext, ClientFactory
    from .together_client import TogetherClient
    from .vertex_client import VertexClaudeClient, VertexGeminiClient
    from .xai_client import XAIClient


def _client(load: Callable[[], ClientFactory]) -> ClientFactory:
    """A provider's client factory: its class loaded when the first client is made. The
    class itself must be a :class:`.spec.ClientFactory` — its constructor (each takes
    :class:`.client_base.ClientBase`'s) and its instances (a :class:`.base.Client`) —
    which the type checker holds every loader below to."""

    def make(
        service: Service,
        api_key: str,
        *,
        warn: Callable[[str], None],
        clock: Clock,
        context: ClientContext,
    ) -> Client:
        return load()(service, api_key, warn=warn, clock=clock, context=context)

    return make


def anthropic_wire() -> Wire:
    from .anthropic_wire import AnthropicWire

    return AnthropicWire()


def _anthropic() -> type[AnthropicClient]:
    from .anthropic_client import AnthropicClient

    return AnthropicClient


def gemini_wire() -> Wire:
    from .gemini_wire import GeminiWire

    return GeminiWire()


def _gemini() -> type[GeminiClient]:
    from .gemini_client import GeminiClient

    return GeminiClient


def fireworks_wire() -> Wire:
    from .fireworks_wire import FireworksWire

    return FireworksWire()


def _fireworks() -> type[FireworksClient]:
    from .fireworks_client import FireworksClient

    return FireworksClient


def openai_wire() -> Wire:
    from .openai_wire import OpenAIWire

    return OpenAIWire()


def _openai() -> type[OpenAIClient]:
    from .openai_client import OpenAIClient

    return OpenAIClient


def xai_wire() -> Wire:
    from .xai_wire import XAIWire

    return XAIWire()


def _xai() -> type[XAIClient]:
    from .xai_client import XAIClient

    return XAIClient


def groq_wire() -> Wire:
    from .groq_wire import GroqWire

    return GroqWire()


def _groq() -> type[GroqClient]:
    from .groq_client import GroqClient

    return GroqClient


def together_wire() -> Wire:
    from .together_wire import TogetherWire

    return TogetherWire()


def _together() -> type[TogetherClient]:
    from .together_client import TogetherClient

    return TogetherClient


def mistral_wire() -> Wire:
    from .mistral_wire import MistralWire

    return MistralWire()


def _mistral() -> type[MistralClient]:
    from .mistral_client import MistralClient

    return MistralClient


def openrouter_wire() -> Wire:
    from .openrouter_wire import OpenRouterWire

    return OpenRouterWire()


def _openrouter() -> type[OpenRouterClient]:
    from .openrouter_client import OpenRouterClient

    return OpenRouterClient


def azure_wire() -> Wire:
    from .azure_wire import AzureWire

    return AzureWire()


def _azure() -> type[AzureClient]:
    from .azure_client import AzureClient

    return AzureClient


def bedrock_wire() -> Wire:
    from .bedrock_wire import BedrockWire

    return BedrockWire()


def _bedrock() -> type[BedrockClient]:
    from .bedrock_client import BedrockClient

    return BedrockClient


def vertex_gemini_wire() -> Wire:
    from .vertex_wire import VertexGeminiWire

    return VertexGeminiWire()


def vertex_claude_wire() -> Wire:
    from .vertex_wire import VertexClaudeWire

    return VertexClaudeWire()


def _vertex_gemini() -> type[VertexGeminiClient]:
    from .vertex_client import VertexGeminiClient

    return VertexGeminiClient


def _vertex_claude() -> type[VertexClaudeClient]:
    from .vertex_client import VertexClaudeClient

    return VertexClaudeClient


anthropic_client = _client(_anthropic)
gemini_client = _client(_gemini)
fireworks_client = _client(_fireworks)
openai_client = _client(_openai)
azure_client = _client(_azure)
groq_client = _client(_groq)
xai_client = _client(_xai)
together_client = _client(_together)
mistral_client = _client(_mistral)
openrouter_client = _client(_openrouter)
bedrock_client = _client(_bedrock)
vertex_gemini_client = _client(_vertex_gemini)
vertex_claude_client = _client(_vertex_claude)
