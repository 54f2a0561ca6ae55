"""What each batch endpoint accepts and answers: bodies checked, replies shaped.

A line whose body its endpoint would refuse (no ``messages``, ``temperature: 5``,
an unknown parameter) becomes a 400 row with the real error envelope, as the
service writes HTTP-level failures to the error file. A good line gets the
endpoint's own reply shape: a chat completion, a Response object, embeddings,
a text completion or moderation results.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .model import estimate_tokens, prompt_tokens, texts

COMMON = {"model", "user", "metadata", "store", "service_tier", "stream", "stream_options"}
SAMPLING = {"temperature", "top_p", "n", "stop", "presence_penalty", "frequency_penalty", "seed"}
ALLOWED = {
    "/v1/chat/completions": COMMON
    | SAMPLING
    | {
        "messages",
        "max_completion_tokens",
        "max_tokens",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "modalities",
        "prediction",
        "verbosity",
        "audio",
        "web_search_options",
        "prompt_cache_key",
        "safety_identifier",
    },
    "/v1/responses": COMMON
    | {
        "input",
        "instructions",
        "max_output_tokens",
        "temperature",
        "top_p",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "text",
        "truncation",
        "include",
        "previous_response_id",
        "background",
        "prompt",
        "prompt_cache_key",
        "safety_identifier",
        "max_tool_calls",
        "top_logprobs",
        "conversation",
    },
    "/v1/embeddings": COMMON | {"input", "dimensions", "encoding_format"},
    "/v1/completions": COMMON
    | SAMPLING
    | {"prompt", "max_tokens", "logit_bias", "logprobs", "echo", "suffix", "best_of"},
    "/v1/moderations": COMMON | {"input"},
}
CATEGORIES = (
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/instructions",
    "self-harm/intent",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
)
REQUIRED = {
    "/v1/chat/completions": "messages",
    "/v1/responses": "input",
    "/v1/embeddings": "input",
    "/v1/completions": "prompt",
    "/v1/moderations": "input",
}


def _refusal(message: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {
        "status_code": 400,
        "body": {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": code,
            }
        },
    }


def check_body(endpoint: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 reply the endpoint gives this body, or None when it would run it."""
    required = REQUIRED.get(endpoint)
    if required is None:
        return None  # images and videos: not modelled, run as given
    unknown = sorted(set(body) - ALLOWED[endpoint])
    if unknown:
        return _refusal(
            f"Unrecognized request argument supplied: {unknown[0]}", unknown[0], "unknown_parameter"
        )
    value = body.get(required)
    if value is None or value == [] or value == "":
        return _refusal(
            f"Missing required parameter: '{required}'.", required, "missing_required_parameter"
        )
    if required == "messages" and not (
        isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value)
    ):
        return _refusal(
            "Invalid type for 'messages': expected an array of objects.", required, None
        )
    temperature = body.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 <= temperature <= 2
    ):
        return _refusal(
            f"Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got"
            f" {temperature} instead.",
            "temperature",
            "decimal_above_max_value",
        )
    return None


def tokens(text: str) -> int:
    """A text's tokens as the simulated services count them (:func:`.model.estimate_tokens`)."""
    return estimate_tokens(text)


def shape(
    endpoint: str, body: dict[str, Any], content: str, request_id: str, now: float
) -> dict[str, Any]:
    """The endpoint's reply body for a reply text ``content``, made at ``now``."""
    model, created = body.get("model"), int(now)
    prompt = prompt_tokens(body)
    out = tokens(content)
    if endpoint == "/v1/responses":
        return {
            "id": f"resp_{request_id}",
            "object": "response",
            "created_at": created,
            "status": "completed",
            "model": model,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "metadata": body.get("metadata") or {},
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "output": [
                {
                    "type": "message",
                    "id": f"msg_{request_id}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": content, "annotations": []}],
                }
            ],
            "usage": {
                "input_tokens": prompt,
                "output_tokens": out,
                "total_tokens": prompt + out,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
    if endpoint == "/v1/embeddings":
        inputs = texts(body.get("input"))
        return {
            "object": "list",
            "model": model,
            "data": [
                {"object": "embedding", "index": i, "embedding": _vector(text)}
                for i, text in enumerate(inputs)
            ],
            "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
        }
    if endpoint == "/v1/completions":
        return {
            "id": f"cmpl-{request_id}",
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [{"text": content, "index": 0, "logprobs": None, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": out,
                "total_tokens": prompt + out,
            },
        }
    if endpoint == "/v1/moderations":
        return {
            "id": f"modr-{request_id}",
            "model": model or "omni-moderation-latest",
            "results": [
                {
                    "flagged": False,
                    "categories": dict.fromkeys(CATEGORIES, False),
                    "category_scores": dict.fromkeys(CATEGORIES, 0.0),
                    "category_applied_input_types": {c: ["text"] for c in CATEGORIES},
                }
                for _ in texts(body.get("input"))
            ],
        }
    return {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": content, "refusal": None},
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": out,
            "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _vector(text: str, dims: int = 8) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [round(b / 255 - 0.5, 6) for b in digest[:dims]]


def usage_of(body: dict[str, Any]) -> tuple[int, int]:
    """(input, output) tokens of any reply shape: what a batch's ``usage`` adds up."""
    u = body.get("usage") or {}
    return (
        int(u.get("prompt_tokens", u.get("input_tokens")) or 0),
        int(u.get("completion_tokens", u.get("output_tokens")) or 0),
    )


def input_count(body: dict[str, Any]) -> int:
    """How many embedding inputs a line carries (the batch may hold 50,000)."""
    return len(texts(body.get("input")))
