"""Validating a batch's input file, line by line, as the service does before running it.

OpenAI and Azure OpenAI validate the same way; :class:`Limits` holds what
differs (lines a file may hold, the endpoint spellings a line's ``url`` may use,
the upload expiry range).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core import Store
from ...endpoints import input_count
from ...model import prompt_tokens

MAX_EMBEDDING_INPUTS = 50_000  # per /v1/embeddings batch, inputs across all lines


@dataclass(frozen=True)
class Limits:
    """What one OpenAI-shaped batch service allows."""

    max_lines: int  # lines a batch file may hold (OpenAI 50,000; Azure 100,000)
    endpoints: dict[str, str]  # endpoint a create may name → the endpoint it is
    file_expiry: tuple[int, int]  # upload expires_after.seconds range
    windows: frozenset[str] = frozenset({"24h"})  # completion windows a create may name
    batch_file_bytes: int | None = None  # a batch file's size limit, where the service's own
    purposes: tuple[str, ...] | None = None  # the upload purposes it takes (None: OpenAI's)
    max_id: int | None = None  # the characters a custom_id may have, where limited

    def url_ok(self, url: Any, endpoint: str) -> bool:
        """Whether a line's ``url`` names the batch's endpoint (in any spelling allowed)."""
        return isinstance(url, str) and self.endpoints.get(url) == endpoint


@dataclass
class Parsed:
    """A batch input file as the service read it: its lines, model and prompt tokens."""

    lines: list[dict[str, Any]]
    model: str | None
    tokens: int


def _request(
    n: int, text: str, endpoint: str, limits: Limits, seen: set[str]
) -> dict[str, Any] | tuple[str, str]:
    """Line ``n`` as the service reads its envelope (JSON, its four keys, a new
    ``custom_id``, ``POST`` to the batch's endpoint, a body that does not stream), or the
    code and message it fails the batch with."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return "invalid_json_line", f"Line {n} is not valid JSON."
    if not isinstance(obj, dict):
        return "invalid_json_line", f"Line {n} is not a JSON object."
    for key in ("custom_id", "method", "url", "body"):
        if key not in obj:
            return "missing_required_parameter", f"Missing required parameter '{key}' on line {n}."
    custom_id = obj["custom_id"]
    if not isinstance(custom_id, str):
        return "invalid_request", f"custom_id must be a string on line {n}."
    if limits.max_id is not None and len(custom_id) > limits.max_id:
        return (
            "invalid_request",
            f"custom_id on line {n} has {len(custom_id)} characters; at most"
            f" {limits.max_id} are allowed.",
        )
    if custom_id in seen:
        return "duplicate_custom_id", f"The custom_id '{custom_id}' on line {n} is not unique."
    seen.add(custom_id)
    if obj["method"] != "POST":
        return "invalid_request", f"Only POST is supported (line {n})."
    if not limits.url_ok(obj["url"], endpoint):
        return (
            "invalid_url",
            f"The url '{obj['url']}' on line {n} does not match the batch endpoint '{endpoint}'.",
        )
    if not isinstance(obj["body"], dict):
        return "invalid_request", f"body must be an object on line {n}."
    if obj["body"].get("stream") is True:
        return "streaming_unsupported", f"Streaming is not supported (line {n})."
    return obj


def parse_input(
    endpoint: str, data: bytes, store: Store, limits: Limits, knows: Callable[[str], bool]
) -> Parsed | dict[str, Any]:
    """Check a batch's input file as the service validates it (``endpoint``: the batch's).

    Returns the lines read, or the batch-level error (code, message, line) that fails it.
    """

    def fail(code: str, message: str, line: int | None) -> dict[str, Any]:
        return {"code": code, "message": message, "line": line}

    settings = store.settings
    size_limit = settings.max_batch_bytes
    if len(data) > size_limit:
        return fail(
            "file_too_large", f"The batch input file is larger than {size_limit} bytes.", None
        )
    raw_lines = data.decode("utf-8", "replace").split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines.pop()
    if not raw_lines:
        return fail("empty_file", "The input file is empty.", None)
    max_lines = limits.max_lines
    if settings.max_lines is not None:
        max_lines = min(settings.max_lines, max_lines)
    if len(raw_lines) > max_lines:
        return fail(
            "too_many_tasks",
            f"The batch has {len(raw_lines)} requests; the limit is {max_lines}.",
            None,
        )
    seen: set[str] = set()
    model = None
    lines: list[dict[str, Any]] = []
    tokens = 0
    for n, text in enumerate(raw_lines, 1):
        obj = _request(n, text, endpoint, limits, seen)
        if isinstance(obj, tuple):
            return fail(*obj, n)
        body = obj["body"]
        line_model = body.get("model")
        if not isinstance(line_model, str) or not line_model:
            return fail("missing_required_parameter", f"Missing 'model' on line {n}.", n)
        if model is None:
            if not knows(line_model):
                return fail(
                    "model_not_found",
                    f"The model `{line_model}` does not exist or you do not have access to it.",
                    n,
                )
            model = line_model
        elif line_model != model:
            return fail(
                "mismatched_model",
                f"Line {n} uses model '{line_model}' but the file uses '{model}';"
                " a batch may use only one model.",
                n,
            )
        tokens += prompt_tokens(body)
        lines.append(obj)
    if endpoint == "/v1/embeddings":
        inputs = sum(input_count(line["body"]) for line in lines)
        if inputs > MAX_EMBEDDING_INPUTS:
            return fail(
                "too_many_inputs",
                f"The batch has {inputs} embedding inputs; the limit is {MAX_EMBEDDING_INPUTS}.",
                None,
            )
    return Parsed(lines, model, tokens)
