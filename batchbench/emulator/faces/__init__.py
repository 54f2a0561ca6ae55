"""The faces on the emulator's port, in the order they are asked whose a call is.

One registration per face: a face is its own module (its routes, its book, its
errors) and a line here. The OpenAI face comes last: it takes whatever no other
face claimed, as the openai SDK sends nothing that would tell its calls apart.
"""

from __future__ import annotations

from ..face import FaceFactory
from . import (
    anthropic,
    azure,
    bedrock,
    fireworks,
    gemini,
    groq,
    mistral,
    openai,
    openrouter,
    together,
    vertex,
    xai,
)

FACES: tuple[FaceFactory, ...] = (
    vertex.make,
    bedrock.make,
    azure.make,
    anthropic.make,
    gemini.make,
    fireworks.make,
    groq.make,
    xai.make,
    together.make,
    mistral.make,
    openrouter.make,
    openai.make,
)
