"""Groq's Batch API, offline: OpenAI's wire for the models Groq serves.

Groq takes OpenAI's batch shape under ``/openai/v1/`` (console.groq.com/docs/batch): the
same request lines (``custom_id``, ``method``, ``url: /v1/chat/completions``, ``body``),
result and error files and statuses. What is Groq's own: the model a line names is
Groq's id (``groq/ID`` names it here, ``groq/openai/gpt-oss-120b`` → ``openai/gpt-oss-120b``),
and a file holds up to 50,000 lines of up to 100 MB (the groq SDK's ``files.create``:
"The Batch API only supports `.jsonl` files up to 100 MB in size").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from ..kinds import ProviderName
from .base import Limits, LineRules
from .openai_wire import MAX_LINES, RETRIED, OpenAIWire
from .prefixes import GROQ as PREFIX

MAX_BYTES: Final = 100 * 1024 * 1024


@dataclass
class GroqWire(OpenAIWire):
    name: ProviderName = "groq"
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("Groq", RETRIED))
    model_prefix: str = PREFIX
