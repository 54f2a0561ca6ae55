"""Together AI's Batch API, offline: OpenAI's body and result lines, Together's input
lines (docs.together.ai batch inference).

A line is ``{"custom_id", "body"}`` — no ``method`` or ``url``: the batch names its
endpoint — its ``custom_id`` at most 64 characters; a file holds up to 50,000 lines of
up to 100 MB. The body is the reference's OpenAI body (the reference's rules for an
OpenAI-shaped API), its model Together's id (``together/ID`` names it here:
``together/openai/gpt-oss-120b`` → ``openai/gpt-oss-120b``). Result and error lines are
read as OpenAI's (``custom_id``, ``response.status_code``, ``response.body``, ``error``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import PlanError
from ..kinds import ProviderName
from .base import Limits, LineRules, Rendered
from .checks import encode_line, request_lines
from .openai_wire import ALLOWED_BODY_FIELDS, RETRIED, OpenAIWire
from .prefixes import TOGETHER as PREFIX

MAX_LINES = 50_000
MAX_BYTES = 100 * 1024 * 1024
MAX_ID = 64


@dataclass
class TogetherWire(OpenAIWire):
    name: ProviderName = "together"
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("Together", RETRIED))
    model_prefix: str = PREFIX

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        return encode_line({"custom_id": custom_id, "body": rendered.body})

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """Together's rules: lines and size, unique ids of at most 64 characters, one
        model, the chat body's own fields."""
        if len(lines) > self.limits.max_lines:
            raise PlanError(f"{where}: {len(lines)} lines, over the {self.limits.max_lines} limit")
        models: set[str] = set()
        limit = f"the {MAX_BYTES} bytes of a Together batch file"
        for n, obj in request_lines(
            lines, where, id_key="custom_id", max_bytes=MAX_BYTES, limit=limit
        ):
            if len(obj["custom_id"]) > MAX_ID:
                raise PlanError(f"{where}: line {n}: custom_id over {MAX_ID} characters")
            body = obj.get("body")
            if not isinstance(body, dict):
                raise PlanError(f"{where}: line {n}: no body")
            models.add(str(body.get("model")))
            unknown = sorted(set(body) - ALLOWED_BODY_FIELDS)
            if unknown:
                raise PlanError(f"{where}: line {n}: body fields not allowed: {unknown}")
        if len(models) > 1:
            raise PlanError(f"{where}: {len(models)} models in one file")
