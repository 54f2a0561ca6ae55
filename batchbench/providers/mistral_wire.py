"""Mistral's Batch API, offline: one model a job, lines ``{custom_id, body}`` without a
model (docs.mistral.ai batch processing), result lines read as OpenAI's.

The body is the reference's OpenAI body as Mistral's chat API takes it: the system and
user messages, ``max_tokens`` (Mistral's name for the cap), temperature 1 (dropped after
a 400 that names it, the reference's rule), and for a judge ``response_format``
``json_object`` and temperature 0. Mistral's chat takes no reasoning effort: a run that
asks for one is refused before anything is sent. ``mistral/ID`` names Mistral's model
``ID``; a job holds up to 1,000,000 requests (files sharded under 200 MB here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..bench.protocol import Prompt
from ..errors import ConfigError, PlanError
from ..kinds import ProviderName
from .base import Adjust, Limits, LineRules, Rendered
from .checks import encode_line, request_lines, sends_temperature
from .openai_wire import RETRIED, OpenAIWire

MAX_LINES = 1_000_000
MAX_BYTES = 200 * 1024 * 1024


@dataclass
class MistralWire(OpenAIWire):
    name: ProviderName = "mistral"
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("Mistral", RETRIED))

    def effort(self, asked: str | None) -> str | None:
        """None: Mistral's chat takes no reasoning effort."""
        return None

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        """The body a line carries; the model is the job's (the client names it)."""
        if prompt.reasoning_effort is not None:
            raise ConfigError(
                f"{model}: Mistral's batch API takes no reasoning effort (leave out"
                " --reasoning-effort for Mistral models)"
            )
        body: dict[str, Any] = {
            "messages": [{"role": "system", "content": prompt.system}, *prompt.messages()],
        }
        if prompt.json_mode:  # a judge (ours: the reference judges on OpenAI)
            body["response_format"] = {"type": "json_object"}
        body["max_tokens"] = prompt.max_tokens
        temperature = sends_temperature(adjust)
        if temperature:
            body["temperature"] = prompt.temperature
        return Rendered(body, temperature)

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        return encode_line({"custom_id": custom_id, "body": rendered.body})

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """A job's rules: its size, unique ids, bodies without a model (the job's)."""
        if len(lines) > self.limits.max_lines:
            raise PlanError(f"{where}: {len(lines)} lines, over the {MAX_LINES} limit")
        limit = f"the {MAX_BYTES} bytes of a file here"
        for n, obj in request_lines(
            lines, where, id_key="custom_id", max_bytes=MAX_BYTES, limit=limit
        ):
            body = obj.get("body")
            if not isinstance(body, dict) or "model" in body:
                raise PlanError(f"{where}: line {n}: a body without a model (the job names it)")
