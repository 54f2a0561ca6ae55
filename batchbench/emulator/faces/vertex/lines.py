"""One line of a Vertex AI batch prediction job, run: a Gemini request (its labels
checked by Google's rules, then run without them, as the Gemini face runs one) or a
Claude request (Vertex's shape: ``anthropic_version`` ``vertex-2023-10-16``, no
model). A failed line's ``status`` is the reason and the error body; a good one's "".
"""

from __future__ import annotations

import http
import json
import re
from typing import Any

from ...core import BASE58, Store
from ..anthropic_book import message
from ..bedrock.invoke import problem
from ..gemini_model import protobuf_names, run_request

CLAUDE_VERSION = "vertex-2023-10-16"
LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


def run_gemini(
    store: Store, model: str, request: dict[str, Any], where: str
) -> tuple[int, dict[str, Any]]:
    """One Gemini line: its labels checked (Google's rules), its request run without them."""
    labels = request.get("labels") or {}
    if not isinstance(labels, dict) or not all(
        LABEL_KEY.match(str(k)) and LABEL_VALUE.match(str(v)) for k, v in labels.items()
    ):
        error = {"code": 400, "message": "Invalid labels.", "status": "INVALID_ARGUMENT"}
        result: dict[str, Any] = {"error": error}
    else:  # either spelling, as protobuf's JSON reads it; checked as its field names
        bare = protobuf_names({k: v for k, v in request.items() if k != "labels"})
        result = run_request(store, bare, f"models/{model}", True, where)
    if "response" in result:
        return 200, {"status": "", "request": request, "response": result["response"]}
    status = int(result["error"].get("code") or 500)
    return status, {"status": failed(status, {"error": result["error"]}), "request": request}


def run_claude(
    store: Store, model: str, request: dict[str, Any], where: str
) -> tuple[int, dict[str, Any]]:
    """One Claude line, checked as Vertex's Claude shape and run with the job's model."""
    refused = problem(request, CLAUDE_VERSION)
    if refused is not None:
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": refused}}
        return 400, {"status": failed(400, body)}
    chat = {**request, "model": model}
    try:
        reply = store.model.reply(chat, chat, where, store.settings.judge_noise)
    except Exception as exc:  # a broken responder is a server error for that line
        body = {"type": "error", "error": {"type": "api_error", "message": str(exc)}}
        return 500, {"status": failed(500, body)}
    if isinstance(reply, str):
        made = message(chat, reply, "msg_vrtx_01" + store.decide.token(BASE58, 22))
        return 200, {"response": made, "status": ""}
    status = reply.get("status_code") if isinstance(reply, dict) else None
    if isinstance(status, int) and 200 <= status < 300:
        return status, {"response": reply.get("body"), "status": ""}
    if isinstance(status, int):
        return status, {"status": failed(status, reply.get("body"))}
    body = {"type": "error", "error": {"type": "api_error", "message": "bad responder"}}
    return 500, {"status": failed(500, body)}


def line_id(line: dict[str, Any], index: int) -> str:
    """What tells a line apart in the ledger: a Claude line's ``custom_id``; a Gemini
    line's labels (its only id, whatever the client named them); else its position."""
    if line.get("custom_id") is not None:
        return str(line["custom_id"])
    labels = line["request"].get("labels")
    if isinstance(labels, dict) and labels:
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return f"line {index + 1}"


def failed(status: int, body: Any) -> str:
    """A failed line's ``status`` as Vertex writes it: the reason, then the error body."""
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Error"
    return f"{reason}: {json.dumps(body)}"
