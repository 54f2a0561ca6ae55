"""The grading protocol: what each model is asked, how a judge reply reads, error texts.

Every string here is byte-exact with the reference runner, because a changed
space in a prompt is a different benchmark. Parsing is strict for the same
reason: an invalid judge reply never earns partial credit. What a model is
asked is a neutral :class:`Prompt`; each provider renders it into its own body
(:mod:`batchbench.providers`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from ..errors import JudgeReplyError
from .dataset import Case, RubricItem

PROTOCOL_VERSION = "bedside-bench-grading-v1"


@dataclass(frozen=True)
class Prompt:
    """What the model sees, before any service's wire format (each provider renders it,
    with its own fallbacks: a temperature a model refused is the wire's to drop)."""

    system: str
    user: str
    max_tokens: int
    temperature: float
    json_mode: bool
    reasoning_effort: str | None  # as asked: each provider maps ``max`` its own way
    # A conversation (HealthBench): every message after the system message, the last the
    # one answered, as ``(role, content)``. Empty: the one ``user`` message.
    turns: tuple[tuple[str, str], ...] = ()

    def messages(self) -> list[dict[str, str]]:
        """The messages after the system message, as the chat APIs take them."""
        if not self.turns:
            return [{"role": "user", "content": self.user}]
        return [{"role": role, "content": content} for role, content in self.turns]

    def for_two_roles(self) -> tuple[str, list[dict[str, str]]]:
        """The system text and the user/assistant messages, for an API whose conversation
        has no ``system`` role (Claude's, Gemini's): a system message inside the
        conversation joins the system text, a blank line between."""
        system = [self.system]
        rest = []
        for m in self.messages():
            if m["role"] == "system":
                system.append(m["content"])
            else:
                rest.append(m)
        return "\n\n".join(system), rest


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

# The reply the judge system message asks for, as a JSON Schema: for a service whose
# structured output takes one (Claude's ``output_config.format``), where OpenAI's is
# ``response_format: json_object`` and Gemini's ``response_mime_type``.
JUDGE_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"item_id": {"type": "string"}, "matched": {"type": "boolean"}},
                "required": ["item_id", "matched"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["decisions"],
    "additionalProperties": False,
}

ANSWER_MAX_COMPLETION_TOKENS = 32000
ANSWER_TEMPERATURE = 1
JUDGE_MAX_COMPLETION_TOKENS = 5000
JUDGE_TEMPERATURE = 0


# The user messages as templates (the case's fields in braces), so that a report can
# print each verbatim with its hash (#66.2): the reference's strings, byte for byte.
ANSWER_USER_TEMPLATE = "{prompt}"
RUBRIC_LINE_TEMPLATE = "[{item_id}] points={points:+g} :: {text}"
JUDGE_USER_TEMPLATE = (
    "CLINICAL PROMPT:\n{prompt}\n\nANSWER:\n{answer}\n\nRUBRIC ITEMS:\n{rubric_lines}"
)
TEMPLATES = {  # what each request is made of, in the order a run sends them
    "answer system message": ANSWER_SYSTEM_MESSAGE,
    "answer user message": ANSWER_USER_TEMPLATE,
    "judge system message": JUDGE_SYSTEM_MESSAGE,
    "judge user message": JUDGE_USER_TEMPLATE,
    "judge rubric line (one an item, joined by newlines)": RUBRIC_LINE_TEMPLATE,
}


def rubric_line(item: RubricItem) -> str:
    return RUBRIC_LINE_TEMPLATE.format(**item)


def judge_user_message(case: Case, answer: str) -> str:
    lines = "\n".join(rubric_line(item) for item in case["rubric_items"])
    return JUDGE_USER_TEMPLATE.format(prompt=case["prompt"], answer=answer, rubric_lines=lines)


def answer_prompt(case: Case, *, reasoning_effort: str | None) -> Prompt:
    """What the model under test is asked."""
    return Prompt(
        system=ANSWER_SYSTEM_MESSAGE,
        user=case["prompt"],
        max_tokens=ANSWER_MAX_COMPLETION_TOKENS,
        temperature=ANSWER_TEMPERATURE,
        json_mode=False,
        reasoning_effort=reasoning_effort,
    )


def judge_prompt(case: Case, answer: str) -> Prompt:
    """What the judge is asked about one answer."""
    return Prompt(
        system=JUDGE_SYSTEM_MESSAGE,
        user=judge_user_message(case, answer),
        max_tokens=JUDGE_MAX_COMPLETION_TOKENS,
        temperature=JUDGE_TEMPERATURE,
        json_mode=True,
        reasoning_effort=None,
    )


BODY_TEXT_LIMIT = 1000
ERROR_TEXT_LIMIT = 2000


def rejects_temperature(status_code: int | None, body_text: str | None) -> bool:
    """The reference's rule: a 400 whose body, read as text, mentions ``temperature``.

    The text is the whole error object (message, param, code), so a 400 saying
    ``Temperature must be 1`` or one whose only mention is ``"param":
    "temperature"`` both count; the request is then sent again without it.
    """
    return (
        status_code == 400
        and body_text is not None
        and "temperature" in body_text[:BODY_TEXT_LIMIT].lower()
    )


def http_error(status_code: int, body_text: str | None) -> str:
    """What the reference's ``RuntimeError`` says of a failed HTTP reply."""
    return f"HTTP {status_code}: {(body_text or '')[:BODY_TEXT_LIMIT]}"


def gave_up(label: str, attempts: int, last_error: str) -> str:
    """The reference's error row once a call's retries are spent (``label``: ``API``,
    ``Anthropic``, ``Gemini`` or ``Fireworks``, as it names the service)."""
    return error_text(
        f"{label} request failed after {attempts} attempts: {last_error}", "RuntimeError"
    )


class _Decision(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    item_id: str
    matched: bool


class _Reply(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    decisions: list[_Decision]


_REPLY = msgspec.json.Decoder(_Reply)


def parse_judge_reply(content: str, item_ids: Sequence[str]) -> dict[str, bool]:
    """Decisions by item id, or JudgeReplyError carrying the reference's error text.

    The steps, and so the first error met and its wording, are the reference
    runner's: its row says ``Type: message`` of the exception it raised, and a
    batch run's error rows must read the same. A reply of exactly the asked shape
    (``{"decisions": [{"item_id", "matched"}…]}``, nothing else, each item once, the
    rubric's items) is read by a typed decoder at once; anything else takes the
    reference's steps, which then say what is wrong in its words.
    """
    try:
        reply = _REPLY.decode(content)
    except (msgspec.DecodeError, UnicodeEncodeError):
        return _reference_steps(content, item_ids)
    found = {d.item_id: d.matched for d in reply.decisions}
    if len(found) != len(reply.decisions) or found.keys() != set(item_ids):
        return _reference_steps(content, item_ids)  # its error, in the reference's words
    return found


def judge_matches(content: str, item_ids: Sequence[str]) -> list[bool]:
    """:func:`parse_judge_reply`'s verdict as each rubric item's decision in the rubric's
    order (what the frames lay on the rubric's rows). A reply that names the items in
    that very order, as judges do, is that verdict already: no dict is built for it."""
    try:
        decisions = _REPLY.decode(content).decisions
    except (msgspec.DecodeError, UnicodeEncodeError):
        decisions = []
    if decisions and [d.item_id for d in decisions] == list(item_ids):
        return [d.matched for d in decisions]
    found = parse_judge_reply(content, item_ids)
    return [found[i] for i in item_ids]


def _reference_steps(content: str, item_ids: Sequence[str]) -> dict[str, bool]:
    """The reference runner's own steps, error by error."""
    try:
        payload = json.loads(content)
        decisions = payload["decisions"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise JudgeReplyError(error_text(f"invalid judge JSON: {exc}", "ValueError")) from None
    except (ValueError, RecursionError) as exc:  # huge integers, deep nesting
        raise JudgeReplyError(error_text(exc)) from None
    found: dict[str, bool] = {}
    try:
        for entry in decisions:
            item_id = entry.get("item_id")
            matched = entry.get("matched")
            if not isinstance(item_id, str) or not isinstance(matched, bool):
                raise ValueError("each judge decision needs string item_id and bool matched")
            if item_id in found:
                raise ValueError(f"duplicate judge decision for {item_id}")
            found[item_id] = matched
    except (AttributeError, TypeError, ValueError) as exc:
        raise JudgeReplyError(error_text(exc)) from None
    expected = set(item_ids)
    if set(found) != expected:
        missing = sorted(expected - set(found))
        extra = sorted(set(found) - expected)
        raise JudgeReplyError(
            error_text(f"judge item mismatch; missing={missing}, extra={extra}", "ValueError")
        )
    return found


def error_text(exc: BaseException | str, kind: str | None = None) -> str:
    """The reference's short ``Type: message`` error, capped at 2000 characters."""
    if isinstance(exc, BaseException):
        text = f"{kind or type(exc).__name__}: {exc}"
    else:
        text = f"{kind or 'Error'}: {exc}"
    return text[:ERROR_TEXT_LIMIT]
