"""One Claude request on Bedrock, emulated: a ``modelInput`` checked as Bedrock's Anthropic
shape (``../shared/spec/provider-batch-apis.md`` §5.4) and answered by the simulated
model, for a batch job's record and for ``InvokeModel`` alike.

Bedrock's shape differs from Anthropic's own API: ``anthropic_version`` is required
and must be ``bedrock-2023-05-31``, there is no ``model`` field (the model is the
job's or the call's), and the sampling parameters are accepted.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ...core import BASE58, Store
from ..anthropic_book import input_tokens, message

VERSION = "bedrock-2023-05-31"
FIELDS = frozenset(
    {
        "anthropic_version",
        "anthropic_beta",
        "max_tokens",
        "system",
        "messages",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "metadata",
    }
)


def problem(model_input: dict[str, Any], version: str = VERSION) -> str | None:
    """Why the cloud refuses this input (None: it does not): Bedrock's, or with another
    ``version`` Vertex's, which take Claude in the same shape."""
    for key in sorted(model_input):
        if key not in FIELDS:
            return f"Malformed input request: #: extraneous key [{key}] is not permitted"
    if model_input.get("anthropic_version") != version:
        return f"Malformed input request: #/anthropic_version: must be {version}"
    for key in ("max_tokens", "messages"):
        if key not in model_input:
            return f"Malformed input request: #: required key [{key}] not found"
    if not isinstance(model_input["messages"], list) or not model_input["messages"]:
        return "Malformed input request: #/messages: expected minimum item count: 1"
    return None


def invoke(
    store: Store, model_id: str, model_input: Any, line: str, version: str = VERSION
) -> tuple[int, dict[str, Any]]:
    """``(status, body)``: the Messages reply, or an error body ``{"message"}``."""
    if not isinstance(model_input, dict):
        return 400, {"message": "Malformed input request: #: expected type: JSONObject"}
    refused = problem(model_input, version)
    if refused is not None:
        return 400, {"message": refused}
    chat = {**model_input, "model": model_id}
    try:
        reply = store.model.reply(
            {**model_input, "modelId": model_id}, chat, line, store.settings.judge_noise
        )
    except Exception as exc:  # a broken responder is a server error for that record
        return 500, {"message": f"responder failed: {exc}"}
    if isinstance(reply, str):
        return 200, message(chat, reply, "msg_bdrk_01" + store.decide.token(BASE58, 22))
    if isinstance(reply, dict) and isinstance(reply.get("status_code"), int):
        body = reply.get("body")
        if 200 <= reply["status_code"] < 300 and isinstance(body, dict):
            return reply["status_code"], body
        text = body.get("message") if isinstance(body, dict) else None
        return reply["status_code"], {"message": text or json.dumps(body)}
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        return 400, {"message": str(reply["error"].get("message"))}
    return 500, {"message": f"responder returned {type(reply).__name__}; expected str or dict"}


def count_tokens(body: Any) -> tuple[int, dict[str, Any]]:
    """CountTokens of an ``invokeModel`` input (its body base64, as boto3 sends a blob):
    ``{"inputTokens"}`` as the reply's usage would count them, or a refusal."""
    given = ((body or {}).get("input") or {}).get("invokeModel") if isinstance(body, dict) else None
    if not isinstance(given, dict) or not isinstance(given.get("body"), str):
        return 400, {"message": "1 validation error detected: input.invokeModel.body is required"}
    try:
        model_input = json.loads(base64.b64decode(given["body"], validate=True))
    except (binascii.Error, ValueError):
        return 400, {"message": "Malformed input request: the body is not JSON"}
    if not isinstance(model_input, dict):
        return 400, {"message": "Malformed input request: #: expected type: JSONObject"}
    refused = problem(model_input, VERSION)
    if refused is not None:
        return 400, {"message": refused}
    return 200, {"inputTokens": input_tokens(model_input)}
