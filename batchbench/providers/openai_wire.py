"""OpenAI's Batch API, offline: chat-completion bodies, file lines and rules, result files.

OpenAI-compatible batch services (Azure, Groq, Together…) are this wire with
another base URL and, where theirs are smaller, other limits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import polars as pl

from ..bench.protocol import Prompt
from ..errors import PlanError
from ..kinds import ProviderName, Stage
from .base import Adjust, BatchError, BatchFailure, Limits, LineRules, Rendered
from .checks import encode_line, request_lines, sends_temperature, temperature_fallback
from .ids import safe_id
from .openai_results import read_outputs

ENDPOINT: Final = "/v1/chat/completions"
MAX_LINES = 50_000
MAX_BYTES = 200 * 1024 * 1024
# HTTP statuses the reference retries; any other status fails the case at once.
RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504})
EMPTY_MESSAGE = "API returned an empty message"
# Whole-batch failures that are not the requests' fault: send them again, smaller
# (and, for the enqueued-token limit, later).
_SMALLER = ("too_many_tasks", "file_too_large")

# Body fields the chat completions endpoint accepts in a batch; anything else fails it.
ALLOWED_BODY_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_completion_tokens",
        "max_tokens",
        "temperature",
        "top_p",
        "n",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "seed",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "user",
        "reasoning_effort",
        "metadata",
        "store",
        "service_tier",
        "modalities",
        "prediction",
        "verbosity",
        "stream",
        "stream_options",
    }
)


@dataclass
class OpenAIWire:
    name: ProviderName = "openai"
    endpoint: str = ENDPOINT  # a line's url and the batch's endpoint, in this service's spelling
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("API", RETRIED))
    # The routing prefix a venue's model names carry (``groq/``): not part of its model id.
    model_prefix: str = ""

    def effort(self, asked: str | None) -> str | None:
        """The reference sends ``max`` to OpenAI models as ``xhigh``."""
        return "xhigh" if asked == "max" else asked

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        """The reference's chat-completions body, key order included."""
        body: dict[str, Any] = {
            "model": model.removeprefix(self.model_prefix),
            "messages": [{"role": "system", "content": prompt.system}, *prompt.messages()],
        }
        if prompt.json_mode:
            body["response_format"] = {"type": "json_object"}
        body["max_completion_tokens"] = prompt.max_tokens
        temperature = sends_temperature(adjust)
        if temperature:
            body["temperature"] = prompt.temperature
        effort = self.effort(prompt.reasoning_effort)
        if effort is not None:
            body["reasoning_effort"] = effort
        return Rendered(body, temperature)

    def fallback(
        self, status: int, body_text: str, sent: Mapping[str, Any] | None, adjust: Adjust
    ) -> Adjust | None:
        """The reference's temperature rule (:func:`.checks.temperature_fallback`)."""
        return temperature_fallback(status, body_text, adjust)

    def custom_id(
        self, stage: Stage, case_id: str, attempt: int, run_id: str, judge_pass: int = 1
    ) -> str:
        return safe_id(stage, case_id, attempt, run_id, judge_pass)

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        obj = {
            "custom_id": custom_id,
            "method": "POST",
            "url": self.endpoint,
            "body": rendered.body,
        }
        return encode_line(obj)

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """The Batch API's file rules: size, line count, unique ids, one model, known fields.

        Run on every file the dry run plans and on every file a run uploads.
        """
        if len(lines) > self.limits.max_lines:
            raise PlanError(f"{where}: {len(lines)} lines, over the {self.limits.max_lines} limit")
        models: set[str] = set()
        limit = f"the {self.limits.max_bytes} limit"
        for n, obj in request_lines(
            lines, where, id_key="custom_id", max_bytes=self.limits.max_bytes, limit=limit
        ):
            body = obj["body"]
            models.add(body.get("model"))
            unknown = sorted(set(body) - ALLOWED_BODY_FIELDS)
            if unknown:
                raise PlanError(f"{where}: line {n}: body fields not allowed: {unknown}")
            if body.get("stream") is True:
                raise PlanError(f"{where}: line {n}: stream=true is not allowed in a batch")
            if obj.get("method") != "POST" or obj.get("url") != self.endpoint:
                raise PlanError(f"{where}: line {n}: method/url must be POST {self.endpoint}")
        if len(models) > 1:
            raise PlanError(f"{where}: more than one model: {sorted(map(str, models))}")

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure:
        """A batch that failed validation: the enqueued-token limit and the size limits
        are not the requests' fault (sent again in halves; the token limit after a
        wait); anything else refuses every request with the service's words."""
        error = (list(errors or []) or [BatchError(None, None)])[0]
        code, message = error.code, error.message
        if code == "token_limit_exceeded":
            return BatchFailure("later_smaller", code, f"batch failed: {code}")
        if code in _SMALLER and requests > 1:
            return BatchFailure("smaller", code, f"batch failed: {code}")
        return BatchFailure("fail", code, f"BatchValidationError: {code}: {message}")

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        return read_outputs(paths, EMPTY_MESSAGE)

    def check_replies(self, frame: pl.DataFrame, requests: Sequence[bytes], where: str) -> None:
        """Nothing: this service is not known to file a reply under another request."""
