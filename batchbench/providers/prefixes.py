"""The prefix that names each venue's models (``groq/ID`` is Groq's ``ID``): stated once,
here, for the registry's routing rule and each wire's stripping (a leaf module, so that
neither imports the other)."""

from __future__ import annotations

from typing import Final

GROQ: Final = "groq/"
TOGETHER: Final = "together/"
MISTRAL: Final = "mistral/"
XAI: Final = "xai/"
OPENROUTER: Final = "openrouter/"
