"""The simulated model behind every executed line, whichever face received it.

Default behaviour, deterministic so tests can predict it:

* an **answer** request (anything that is not a judge request) gets
  ``"Simulated answer (<model>): <the first 120 characters of the user message>"``;
* a **judge** request (rubric lines ``[item_id] points=… :: …`` in the user message,
  and JSON asked for: OpenAI's ``response_format`` ``json_object``, or — on a face
  without it — the judge's system message) gets a valid
  ``{"decisions": [...]}`` reply with one decision per rubric line, in order,
  where item ``i`` is matched exactly when the first hex digit of
  ``md5(item_id + "|" + answer)`` is below 8 (``answer`` is the text between
  ``ANSWER:\\n`` and ``\\n\\nRUBRIC ITEMS:``) — see :func:`judge_matches`. A judge
  model named ``…strict…`` matches below 5 only, one named ``…lenient…`` below 11, so
  a panel of simulated judges disagrees as real ones do. With a
  judge noise rate, each verdict is flipped when a seeded draw for that line
  and item falls under the rate, so two passes of the same request (two lines)
  can disagree, and the same line always says the same.
* a **grader** request (HealthBench's ``GRADER_TEMPLATE``: ``# Conversation`` and
  ``# Rubric item`` in it) gets simple-evals' fenced JSON,
  ``{"explanation": …, "criteria_met": …}``, where the item is met exactly when the
  first hex digit of ``md5(item + "|" + answer)`` is below 8 (``item`` the text under
  ``# Rubric item``, ``answer`` the conversation's last ``assistant: `` turn), the
  judge's strictness and noise as above.

A **responder** replaces this: a callable that receives the request as the face
received it (OpenAI's body, Anthropic's ``params``, Gemini's request with its
``model``, Fireworks' body merged with its job's parameters, Bedrock's
``modelInput`` with its ``modelId``) and returns a string (the reply text), a
dict ``{"status_code": int, "body": ...}`` used as the reply as is, or a dict
``{"error": {"code", "message"}}`` for a failure of the line itself. It is
called exactly once per executed line.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

Responder = Callable[[dict[str, Any]], Any]

_RUBRIC_LINE = re.compile(r"^\[([^\]]+)\] points=\S+ :: ", re.M)


ESTIMATE = "estimate: one token per four characters"


@functools.cache
def _tokenizer() -> tuple[str, Callable[[str], list[int]] | None]:
    """A real tokenizer when one is installed (bpe-openai carries OpenAI's o200k inside
    the package, offline): numbers, drug names and tables then count as densely as a
    service counts them, not at a fixed rate of characters. Else the estimate."""
    try:
        import bpe_openai

        encoding = bpe_openai.get_encoding("o200k_base")
    except Exception:  # not installed, or an encoding it cannot load offline
        return ESTIMATE, None
    return "o200k_base (bpe-openai)", encoding.encode_ordinary


def tokenizer_name() -> str:
    """Which tokenizer counts the tokens the emulator reports (the ledger says it)."""
    return _tokenizer()[0]


# Whose counts the one tokenizer gives on each face: OpenAI's own where the service is
# OpenAI's (o200k, with the chat framing its cookbook documents), a stand-in elsewhere —
# said, so that nobody reads a rehearsal's token counts as the vendor's.
STANDS_IN_FOR = {
    "openai": "OpenAI's own count (o200k_base; chat framing per OpenAI's cookbook)",
    "azure": "Azure OpenAI's, which is OpenAI's (o200k_base; OpenAI's chat framing)",
    "anthropic": "a stand-in: Claude's tokenizer is not public (CountTokens is the truth)",
    "bedrock": "a stand-in: Claude's tokenizer is not public (Bedrock's CountTokens is)",
    "vertex": "a stand-in for Gemini's and Claude's own tokenizers (not public offline)",
    "gemini": "a stand-in for Gemini's SentencePiece tokenizer (countTokens is the truth)",
    "fireworks": "a stand-in for each open model's own tokenizer",
    "groq": "near gpt-oss's own (o200k_harmony); a stand-in for other models'",
    "together": "near gpt-oss's own (o200k_harmony); a stand-in for other models'",
    "openrouter": "a stand-in for the routed model's own tokenizer",
    "xai": "a stand-in for Grok's tokenizer (not public)",
    "mistral": "a stand-in for Mistral's Tekken tokenizer",
}


def tokenizers(faces: list[str]) -> dict[str, str]:
    """Per face: the tokenizer that counted its tokens, and whose count that is."""
    name = tokenizer_name()
    return {face: f"{name}: {STANDS_IN_FOR.get(face, 'a stand-in')}" for face in faces}


def estimate_tokens(text: str) -> int:
    """A text's tokens: the real tokenizer's count when one is installed (at least one,
    as a service never reports an empty prompt as none), else one per four characters."""
    encode = _tokenizer()[1]
    if encode is None:
        return max(1, -(-len(text) // 4))
    return max(1, _count(encode, text))


def token_ids(text: str) -> list[Any]:
    """A text's tokens themselves (ids from the real tokenizer, else four-character
    pieces): what a prompt cache compares prefixes on."""
    encode = _tokenizer()[1]
    if encode is not None and len(text) <= CHUNK:
        try:
            return list(encode(text))
        except ValueError:
            pass
    return [text[i : i + 4] for i in range(0, len(text), 4)]


CHUNK = 100_000  # characters the tokenizer is given at once (it refuses very long input)


def _count(encode: Callable[[str], list[int]], text: str) -> int:
    """Tokens of a text of any length: a long one counted in pieces cut at whitespace (a
    token never spans one), a piece the tokenizer still refuses (a 3 MB run of one
    character) by the estimate. A ~10 MB judge file once raised here, and every later
    request to the emulator failed with it."""
    if len(text) <= CHUNK:
        try:
            return len(encode(text))
        except ValueError:  # "Input too long to encode safely": no space to cut at
            return -(-len(text) // 4)
    total, start = 0, 0
    while start < len(text):
        end = min(start + CHUNK, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + 1, end)
            end = cut if cut > start else end
        total += _count(encode, text[start:end])
        start = end
    return total


def _texts(value: Any) -> list[str]:
    """The texts of an ``input``/``prompt``/``messages``/``content`` value, whatever its
    shape (a string, a list of blocks or parts)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            if isinstance(item, dict):
                out += _texts(item.get("content", item.get("text", "")))
            elif isinstance(item, (str, list)):
                out += _texts(item)
        return out
    return []


def texts(value: Any) -> list[str]:
    return _texts(value)


def request_text(body: dict[str, Any]) -> str:
    """What the simulated model reads: the last user message, or ``input``/``prompt``."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return "".join(_texts(message.get("content", "")))
    return "\n".join(_texts(body.get("input", body.get("prompt", ""))))


def prompt_tokens(body: dict[str, Any]) -> int:
    """A request's input tokens as OpenAI bills them: a chat request by the count OpenAI's
    cookbook documents ("How to count tokens with tiktoken": 3 tokens a message, its
    role's and content's tokens, 1 for a name, and 3 priming the reply: "What is 1+1?"
    alone is 14, not its text's 7); any other request, its text."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return estimate_tokens(request_text(body))
    total = 3  # every reply is primed with <|start|>assistant<|message|>
    for message in messages:
        if not isinstance(message, dict):
            continue
        total += 3  # <|start|>{role}<|message|>{content}<|end|>
        for key, value in message.items():
            text = value if isinstance(value, str) else "".join(_texts(value))
            if text:
                total += len_tokens(text)
            if key == "name":
                total += 1
    return total


def len_tokens(text: str) -> int:
    """A text's tokens, none for no text (a message's parts; a whole prompt is never 0)."""
    return estimate_tokens(text) if text else 0


# The judge system message's first line (bench.protocol's; the emulator imports nothing
# of batchbench's): how a judge request is told on a face that has no JSON mode field.
JUDGE_MARK = "You are grading a clinical answer against independent rubric items."


def is_judge_request(body: dict[str, Any]) -> bool:
    if not _RUBRIC_LINE.search(request_text(body)):
        return False
    fmt = body.get("response_format")
    if fmt is not None:  # OpenAI's shape says it: JSON mode, or not a judge
        return isinstance(fmt, dict) and fmt.get("type") == "json_object"
    system = body.get("system")
    every = [*_texts(body.get("messages") or []), *_texts(system if system else "")]
    return any(JUDGE_MARK in text for text in every)


def strictness(model: Any) -> str:
    """The hex digit a judge's md5 draw must fall below (:func:`judge_matches`)."""
    name = str(model or "")
    return "5" if "strict" in name else "b" if "lenient" in name else "8"


def judged_answer(user_text: str) -> str:
    start = user_text.find("ANSWER:\n")
    end = user_text.rfind("\n\nRUBRIC ITEMS:")
    if start < 0 or end < start:
        return ""
    return user_text[start + len("ANSWER:\n") : end]


def judge_matches(item_id: str, answer: str, below: str = "8") -> bool:
    """The default judge's rule: first hex digit of md5(item_id|answer) below 8 (below
    ``below``, for a stricter or more lenient judge: :func:`strictness`)."""
    return hashlib.md5(f"{item_id}|{answer}".encode()).hexdigest()[0] < below


def flipped(seed: int, line: str, item_id: str, rate: float) -> bool:
    """Whether the noisy judge flips this line's verdict on this item."""
    if rate <= 0:
        return False
    digest = hashlib.sha256(f"{seed}\0noise\0{line}\0{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


_GRADER_ITEM = re.compile(r"\n# Rubric item\n(.*?)\n\n# Instructions\n", re.S)
_CONVERSATION = "# Conversation\n"


def graded(text: str) -> tuple[str, str] | None:
    """A HealthBench grader request's rubric item and the answer it grades, else None."""
    found = _GRADER_ITEM.search(text)
    start = text.find(_CONVERSATION)
    if found is None or start < 0:
        return None
    conversation = text[start + len(_CONVERSATION) : found.start()]
    at = conversation.rfind("assistant: ")
    return found.group(1), conversation[at + len("assistant: ") :] if at >= 0 else ""


def default_content(body: dict[str, Any], line: str = "", noise: float = 0.0, seed: int = 0) -> str:
    """The simulated model's reply text to a chat body (``line`` names the executed line,
    for the judge's noise)."""
    text = request_text(body)
    grading = graded(text)
    if grading is not None:
        item, answer = grading
        met = judge_matches(item, answer, strictness(body.get("model")))
        met = met != flipped(seed, line, item, noise)
        reply = {
            "explanation": f"Simulated grade: {'met' if met else 'not met'}.",
            "criteria_met": met,
        }
        return "```json\n" + json.dumps(reply, indent=2) + "\n```"
    if is_judge_request(body):
        answer = judged_answer(text)
        below = strictness(body.get("model"))
        decisions = [
            {
                "item_id": item_id,
                "matched": judge_matches(item_id, answer, below)
                != flipped(seed, line, item_id, noise),
            }
            for item_id in _RUBRIC_LINE.findall(text)
        ]
        return json.dumps({"decisions": decisions})
    return f"Simulated answer ({body.get('model')}): {text[:120]}"


class Model:
    """The simulated model, or the responder that scripts it."""

    def __init__(self, responder: Responder | None = None, seed: int = 0) -> None:
        self.responder = responder
        self.seed = seed

    def reply(self, given: dict[str, Any], chat: dict[str, Any], line: str, noise: float) -> Any:
        """What one executed line gets: the responder's answer to ``given`` (the request as
        the face received it), else the simulated model's to ``chat`` (the same request as
        chat messages). A responder that raises is that line's server error."""
        if self.responder is not None:
            return self.responder(given)
        return default_content(chat, line, noise, self.seed)


def load_responder(spec: str) -> Responder:
    """``FILE.py:FUNCTION`` → the callable, loaded from that file."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name:
        raise ValueError(f"responder must be FILE.py:FUNCTION, got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise ValueError(f"responder file not found: {path}")
    module_spec = importlib.util.spec_from_file_location(f"_responder_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"cannot load responder file {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{path} has no callable {name!r}")
    return fn  # type: ignore[no-any-return]
