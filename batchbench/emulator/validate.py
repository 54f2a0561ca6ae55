"""Validating a batch's input file, line by line, as the service does before running it."""

from __future__ import annotations

import json
import random
from typing import Any

from .endpoints import input_count
from .model import prompt_tokens
from .objects import Batch, Settings

MAX_EMBEDDING_INPUTS = 50_000  # per /v1/embeddings batch, inputs across all lines


def parse_input(
    batch: Batch, data: bytes, settings: Settings, rng: random.Random
) -> dict[str, Any] | None:
    """Check a batch's input file as the service validates it; fill in its lines.

    Returns the batch-level error (code, message, line) that fails it, or None.
    """

    def fail(code: str, message: str, line: int | None) -> dict[str, Any]:
        return {"code": code, "message": message, "line": line}

    limit = settings.max_batch_bytes
    if len(data) > limit:
        return fail("file_too_large", f"The batch input file is larger than {limit} bytes.", None)
    raw_lines = data.decode("utf-8", "replace").split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines.pop()
    if not raw_lines:
        return fail("empty_file", "The input file is empty.", None)
    if len(raw_lines) > settings.max_lines:
        return fail(
            "too_many_tasks",
            f"The batch has {len(raw_lines)} requests; the limit is {settings.max_lines}.",
            None,
        )
    seen: set[str] = set()
    model = None
    lines: list[dict[str, Any]] = []
    tokens = 0
    for n, text in enumerate(raw_lines, 1):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return fail("invalid_json_line", f"Line {n} is not valid JSON.", n)
        if not isinstance(obj, dict):
            return fail("invalid_json_line", f"Line {n} is not a JSON object.", n)
        for key in ("custom_id", "method", "url", "body"):
            if key not in obj:
                return fail(
                    "missing_required_parameter",
                    f"Missing required parameter '{key}' on line {n}.",
                    n,
                )
        if not isinstance(obj["custom_id"], str):
            return fail("invalid_request", f"custom_id must be a string on line {n}.", n)
        if obj["custom_id"] in seen:
            return fail(
                "duplicate_custom_id",
                f"The custom_id '{obj['custom_id']}' on line {n} is not unique.",
                n,
            )
        seen.add(obj["custom_id"])
        if obj["method"] != "POST":
            return fail("invalid_request", f"Only POST is supported (line {n}).", n)
        if obj["url"] != batch.endpoint:
            return fail(
                "invalid_url",
                f"The url '{obj['url']}' on line {n} does not match the batch"
                f" endpoint '{batch.endpoint}'.",
                n,
            )
        body = obj["body"]
        if not isinstance(body, dict):
            return fail("invalid_request", f"body must be an object on line {n}.", n)
        if body.get("stream") is True:
            return fail("streaming_unsupported", f"Streaming is not supported (line {n}).", n)
        line_model = body.get("model")
        if not isinstance(line_model, str) or not line_model:
            return fail("missing_required_parameter", f"Missing 'model' on line {n}.", n)
        if model is None:
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
    if batch.endpoint == "/v1/embeddings":
        inputs = sum(input_count(line["body"]) for line in lines)
        if inputs > MAX_EMBEDDING_INPUTS:
            return fail(
                "too_many_inputs",
                f"The batch has {inputs} embedding inputs; the limit is {MAX_EMBEDDING_INPUTS}.",
                None,
            )
    batch.model = model
    batch.lines = lines
    batch.order = list(range(len(lines)))
    rng.shuffle(batch.order)
    batch.tokens = tokens
    return None
