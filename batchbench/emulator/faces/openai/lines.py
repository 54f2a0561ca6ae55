"""One executed line of an OpenAI-shaped batch: the simulated model's reply (or the
responder's), in the shape of the batch's endpoint, or the line's error."""

from __future__ import annotations

from typing import Any

from ...anomalies import served
from ...core import Store
from ...endpoints import shape
from ...prompt_cache import chat_prompt

# The OpenAI-shaped services whose chat completions document a system_fingerprint
# (OpenAI's chat completion object, Azure OpenAI's, Groq's); the others' are not said.
FINGERPRINTED = frozenset({"openai", "azure", "groq"})
# The services whose batches document automatic prompt caching in our sources (OpenAI's
# Batch usage carries cached_tokens): the others report none (:mod:`...prompt_cache`).
CACHING = frozenset({"openai"})


def reply(
    store: Store,
    where: str,
    endpoint: str,
    body: dict[str, Any],
    request_id: str,
    now: float,
    provider: str = "openai",
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``where`` names the call (a batch's line, a synchronous call) for the responder;
    ``provider``: the face answering (its completions' fields are its service's)."""
    settings = store.settings
    try:
        result = store.model.reply(body, body, where, settings.judge_noise)
    except Exception as exc:  # a broken responder is a 500 for that line, not a crash
        return {
            "status_code": 500,
            "request_id": request_id,
            "body": {
                "error": {
                    "message": f"responder failed: {exc}",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            },
        }, None
    if isinstance(result, str):
        reply = shape(endpoint, body, result, request_id, now)
        if provider in CACHING:
            cached_prompt(store, provider, body, reply, now)
        if reply.get("object") == "chat.completion":  # who served it, as OpenAI says
            model, fingerprint = served(store, str(body.get("model")), where)
            reply["model"] = model
            if provider in FINGERPRINTED:
                reply["system_fingerprint"] = fingerprint
        return {"status_code": 200, "request_id": request_id, "body": reply}, None
    if isinstance(result, dict) and isinstance(result.get("error"), dict):
        return None, {
            "code": result["error"].get("code"),
            "message": result["error"].get("message"),
        }
    if isinstance(result, dict) and isinstance(result.get("status_code"), int):
        return {
            "status_code": result["status_code"],
            "request_id": request_id,
            "body": result.get("body"),
        }, None
    return {
        "status_code": 500,
        "request_id": request_id,
        "body": {
            "error": {
                "message": f"responder returned {type(result).__name__}; expected str or dict",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
    }, None


def cached_prompt(
    store: Store, provider: str, body: dict[str, Any], reply: dict[str, Any], now: float
) -> None:
    """The reply's cached input tokens by the automatic rule (a chat or Responses reply)."""
    usage = reply.get("usage")
    details = (usage or {}).get("prompt_tokens_details", (usage or {}).get("input_tokens_details"))
    if not isinstance(details, dict) or not isinstance(usage, dict):
        return
    total = int(usage.get("prompt_tokens", usage.get("input_tokens")) or 0)
    model = str(body.get("model"))
    details["cached_tokens"] = store.cache.automatic(provider, model, chat_prompt(body), total, now)
