"""What the emulated Gemini model does with one line: the request checked as the
batch file parser checks it (snake_case protobuf names only), the responder asked,
and its reply shaped as a GenerateContentResponse or a line error in Google's
envelope."""

from __future__ import annotations

import json
import re
from typing import Any

from ..core import Store
from ..endpoints import tokens

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
# The protobuf field names a batch file line's request may use (the parser takes
# snake_case only: camelCase is "Unknown name", a 400 for that line).
REQUEST_FIELDS = frozenset(
    {
        "contents",
        "generation_config",
        "system_instruction",
        "safety_settings",
        "tools",
        "tool_config",
        "cached_content",
        "labels",
        "model",
    }
)
GENERATION_FIELDS = frozenset(
    {
        "temperature",
        "max_output_tokens",
        "top_p",
        "top_k",
        "candidate_count",
        "stop_sequences",
        "response_mime_type",
        "response_json_schema",
        "thinking_config",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "response_modalities",
        "media_resolution",
    }
)
THINKING_FIELDS = frozenset({"thinking_level", "include_thoughts", "thinking_budget"})
THINKING_LEVELS = ("MINIMAL", "LOW", "MEDIUM", "HIGH")


def _error(status: int, message: str) -> dict[str, Any]:
    """A line's failure in Google's envelope."""
    return {
        "error": {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}
    }


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def protobuf_names(request: dict[str, Any]) -> dict[str, Any]:
    """A request read as protobuf's JSON reads it: a field by its lowerCamelCase JSON name
    or by its own (snake_case) name — Vertex AI's documented batch line uses
    ``generationConfig`` (docs.cloud.google.com vertex-ai generative-ai
    batch-prediction-from-cloud-storage), litellm's and Curator's write it too."""
    out = {_snake(k) if k in _CAMEL_TOP else k: v for k, v in request.items()}
    config = out.get("generation_config")
    if isinstance(config, dict):
        config = {_snake(k): v for k, v in config.items()}
        if isinstance(config.get("thinking_config"), dict):
            config["thinking_config"] = {_snake(k): v for k, v in config["thinking_config"].items()}
        out["generation_config"] = config
    return out


_CAMEL_TOP = {
    "generationConfig",
    "systemInstruction",
    "safetySettings",
    "toolConfig",
    "cachedContent",
}


def check_request(request: Any, snake_case: bool) -> str | None:
    """Why the service would refuse this GenerateContentRequest (None: it would not)."""
    if not isinstance(request, dict):
        return "Invalid JSON payload received. 'request' is not an object."
    names = REQUEST_FIELDS if snake_case else REQUEST_FIELDS | {"generationConfig"}
    for name in request:
        if name not in names:
            return f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.'
    contents = request.get("contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified"
    for content in contents:
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list) or not parts:
            return "* GenerateContentRequest.contents.parts: contents.parts must not be empty."
        if any(isinstance(p, dict) and p.get("text") == "" for p in parts):
            return "* GenerateContentRequest.contents.parts.text: text must not be empty."
    config = request.get("generation_config", request.get("generationConfig")) or {}
    if snake_case:
        for name in config:
            if name not in GENERATION_FIELDS:
                return (
                    f'Invalid JSON payload received. Unknown name "{name}" at'
                    " 'request.generation_config': Cannot find field."
                )
        thinking = config.get("thinking_config") or {}
        for name in thinking:
            if name not in THINKING_FIELDS:
                return (
                    f'Invalid JSON payload received. Unknown name "{name}" at'
                    " 'request.generation_config.thinking_config': Cannot find field."
                )
        level = thinking.get("thinking_level")
        if level is not None and level not in THINKING_LEVELS:
            return (
                "Invalid value at 'request.generation_config.thinking_config.thinking_level'"
                f' (type.googleapis.com/google.ai.generativelanguage.v1.ThinkingLevel), "{level}"'
            )
    temperature = config.get("temperature")
    if temperature is not None and not (
        isinstance(temperature, (int, float)) and 0 <= temperature <= 2
    ):
        return "* GenerateContentRequest.generation_config.temperature: must be in [0.0, 2.0]"
    return None


def _text(request: dict[str, Any]) -> str:
    """What the simulated model reads: the last user content's text."""
    for content in reversed(request.get("contents") or []):
        if isinstance(content, dict) and content.get("role", "user") == "user":
            return "".join(str(p.get("text", "")) for p in content.get("parts") or [])
    return ""


def response(request: dict[str, Any], text: str) -> dict[str, Any]:
    """A GenerateContentResponse holding one candidate with one text part."""
    prompt = tokens("".join(_text({"contents": [c]}) for c in request.get("contents") or []))
    out = tokens(text)
    return {
        "candidates": [
            {
                "content": {"parts": [{"text": text}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": prompt,
            "candidatesTokenCount": out,
            "totalTokenCount": prompt + out,
        },
        "modelVersion": str(request.get("model", "")).removeprefix("models/"),
    }


def run_request(
    store: Store, request: Any, model: str, snake_case: bool, line: str
) -> dict[str, Any]:
    """One executed line (``line`` names it): ``{"response": ...}`` or ``{"error": ...}``."""
    problem = check_request(request, snake_case)
    if problem is not None:
        return _error(400, problem)
    given = {**request, "model": model}
    chat: dict[str, Any] = {
        "messages": [{"role": "user", "content": _text(request)}],
        "model": model.removeprefix("models/"),
    }
    config = request.get("generation_config", request.get("generationConfig")) or {}
    if (config.get("response_mime_type") or config.get("responseMimeType")) == "application/json":
        chat["response_format"] = {"type": "json_object"}  # JSON asked, in the chat's words
    try:
        reply = store.model.reply(given, chat, line, store.settings.judge_noise)
    except Exception as exc:  # a broken responder is a 500 for that line
        return _error(500, f"responder failed: {exc}")
    if isinstance(reply, str):
        return {"response": response(given, reply)}
    if isinstance(reply, dict) and isinstance(reply.get("status_code"), int):
        status, body = reply["status_code"], reply.get("body")
        if 200 <= status < 300:
            return {"response": body}
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            return {"error": body["error"]}
        return _error(status, json.dumps(body))
    return _error(500, f"responder returned {type(reply).__name__}; expected str or dict")


def sync_response(result: dict[str, Any]) -> Any:
    """A synchronous generateContent's reply: the response itself."""
    return result["response"]
