"""The grading protocol's wire format: prompts, request bodies, judge replies.

Every string here is byte-exact with the reference runner, because a changed
space in a prompt is a different benchmark. Parsing is strict for the same
reason: an invalid judge reply never earns partial credit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .errors import JudgeReplyError

PROTOCOL_VERSION = "bedside-bench-grading-v1"
ENDPOINT = "/v1/chat/completions"

ANSWER_SYSTEM_MESSAGE = (
    "You are a physician answering a clinical question. Give a direct, self-contained answer"
    " that addresses the requested evaluation or management. Explain essential reasoning,"
    " calculations, safety precautions, and follow-up. Do not mention benchmarks, rubrics,"
    " or grading."
)

JUDGE_SYSTEM_MESSAGE = "\n".join(
    [
        "You are grading a clinical answer against independent rubric items.",
        "",
        "For every rubric item, decide whether the ANSWER explicitly states or clearly entails it.",
        "",
        "Rules:",
        "1. Judge only information present in the ANSWER. Do not infer omitted content.",
        "2. Accept clinically equivalent wording; exact phrase matching is not required.",
        "3. A partially stated criterion is false when a clinically essential component is"
        " missing.",
        "4. For a harmful, inappropriate, or negative-point item, true means the ANSWER endorses,"
        " recommends, or performs that action. Merely mentioning the action to reject or warn"
        " against it is false.",
        "5. Judge each item independently.",
        "6. Return exactly one decision for every supplied item_id and no other item_ids.",
        "",
        "Return JSON only:",
        '{"decisions":[{"item_id":"item_0","matched":true},{"item_id":"item_1","matched":false}]}',
    ]
)

ANSWER_MAX_COMPLETION_TOKENS = 32000
ANSWER_TEMPERATURE = 1
JUDGE_MAX_COMPLETION_TOKENS = 5000
JUDGE_TEMPERATURE = 0


def rubric_line(item: dict[str, Any]) -> str:
    return f"[{item['item_id']}] points={item['points']:+g} :: {item['text']}"


def judge_user_message(case: dict[str, Any], answer: str) -> str:
    lines = "\n".join(rubric_line(item) for item in case["rubric_items"])
    return f"CLINICAL PROMPT:\n{case['prompt']}\n\nANSWER:\n{answer}\n\nRUBRIC ITEMS:\n{lines}"


def api_reasoning_effort(effort: str | None) -> str | None:
    """The reference sends ``max`` to OpenAI models as ``xhigh``."""
    return "xhigh" if effort == "max" else effort


def answer_body(
    case: dict[str, Any],
    model: str,
    *,
    reasoning_effort: str | None = None,
    temperature: float | None = ANSWER_TEMPERATURE,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "system", "content": ANSWER_SYSTEM_MESSAGE},
            {"role": "user", "content": case["prompt"]},
        ],
        "max_completion_tokens": ANSWER_MAX_COMPLETION_TOKENS,
    }
    if temperature is not None:
        body["temperature"] = temperature
    effort = api_reasoning_effort(reasoning_effort)
    if effort is not None:
        body["reasoning_effort"] = effort
    return body


def judge_body(
    case: dict[str, Any],
    answer: str,
    model: str,
    *,
    temperature: float | None = JUDGE_TEMPERATURE,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "system", "content": JUDGE_SYSTEM_MESSAGE},
            {"role": "user", "content": judge_user_message(case, answer)},
        ],
        "response_format": {"type": "json_object"},
        "max_completion_tokens": JUDGE_MAX_COMPLETION_TOKENS,
    }
    if temperature is not None:
        body["temperature"] = temperature
    return body


def rejects_temperature(status_code: int, body: Any) -> bool:
    """A 400 whose message names ``temperature``: resend without it (reference rule)."""
    if status_code != 400 or not isinstance(body, dict):
        return False
    error = body.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return isinstance(message, str) and "temperature" in message


def parse_judge_reply(content: Any, item_ids: Sequence[str]) -> dict[str, bool]:
    """Decisions by item id, or JudgeReplyError saying exactly what was wrong."""
    if not isinstance(content, str) or not content.strip():
        raise JudgeReplyError("judge reply is empty")
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        raise JudgeReplyError(f"judge reply is not JSON: {exc.msg} at char {exc.pos}") from None
    if not isinstance(data, dict):
        raise JudgeReplyError(f"judge reply must be a JSON object, got {type(data).__name__}")
    decisions = data.get("decisions")
    if not isinstance(decisions, list):
        raise JudgeReplyError("judge reply has no 'decisions' list")
    found: dict[str, bool] = {}
    for i, entry in enumerate(decisions):
        if not isinstance(entry, dict):
            raise JudgeReplyError(f"decisions[{i}] must be an object")
        item_id = entry.get("item_id")
        matched = entry.get("matched")
        if not isinstance(item_id, str):
            raise JudgeReplyError(f"decisions[{i}].item_id must be a string, got {item_id!r}")
        if not isinstance(matched, bool):
            raise JudgeReplyError(
                f"decisions[{i}].matched must be a boolean, got {matched!r} for {item_id}"
            )
        if item_id in found:
            raise JudgeReplyError(f"duplicate judge decision for item_id {item_id!r}")
        found[item_id] = matched
    expected = set(item_ids)
    missing = [i for i in item_ids if i not in found]
    extra = sorted(set(found) - expected)
    if missing or extra:
        raise JudgeReplyError(f"judge item mismatch; missing={missing}, extra={extra}")
    return found


def error_text(exc: BaseException | str, kind: str | None = None) -> str:
    """The reference's short ``Type: message`` error, capped at 2000 characters."""
    if isinstance(exc, BaseException):
        text = f"{kind or type(exc).__name__}: {exc}"
    else:
        text = f"{kind or 'Error'}: {exc}"
    return text[:2000]
