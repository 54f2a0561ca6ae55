"""Each provider as the tests drive it, and the reference's rules for it (spec §8, §9).

A :class:`Rig` holds what differs between providers for a test: the environment
its SDK reads, how the emulator's face hands the responder a request and takes
its reply, and the reference runner's rules for that provider, written here from
``reference-behaviour.md`` §8–§9 and sharing no code with batchbench: the body
the model is sent, how its reply reads, which statuses are retried, and
:func:`reference_outcome`, a plain re-enactment of the reference's per-request
loop that says how many attempts a scripted case takes and what its row says.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .runs import KEY, poll_interval

ANSWER_SYSTEM_MESSAGE = (
    "You are a physician answering a clinical question. Give a direct, self-contained answer"
    " that addresses the requested evaluation or management. Explain essential reasoning,"
    " calculations, safety precautions, and follow-up. Do not mention benchmarks, rubrics, or"
    " grading."
)  # the reference's answer system message, from the spec (§2)
RETRIED = {408, 409, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class State:
    """What one attempt of a request sends, by the reference's fallbacks so far."""

    temperature: bool = True
    effort_low: bool = False  # Fireworks: "none" was refused, "low" is sent


@dataclass
class Outcome:
    attempts: list[State]  # the state of each attempt made
    answer: str | None = None  # the row's answer, when scored
    error: str | None = None  # the row's error, when it failed
    temperature: bool = True  # whether the successful request carried temperature


@dataclass
class Rig:
    provider: str
    model: str  # the name given (an alias where the provider has one)
    resolved: str  # the id the service is asked for
    key_variable: str
    key: str  # a marker that must never be written or printed
    base_variable: str
    sdk: str  # the module a missing SDK is named by
    extra: str  # the pip extra that installs it
    label: str  # "<label> request failed after <n> attempts"
    effort: str | None  # the --reasoning-effort the rows test asks for
    row_effort: str | None  # what the row records for it
    sends_temperature: bool
    retried: set[int]
    ended: str  # a cancelled batch's status in the ledger
    price: tuple[float, float] | None  # USD per 1M input, output tokens (sync), or unpriced
    # The venue's batch discount, as its own documentation states it (Groq's 25 %,
    # console.groq.com/docs/batch; Together's "selected models" only, none assumed).
    batch_discount: float = 0.5
    more_env: dict[str, str] = field(default_factory=dict)
    ordered: bool = True  # the body reaches the model in the reference's key order
    script: dict[int, list[Any]] = field(default_factory=dict)
    prompt_of: Callable[[dict], str] = lambda body: ""
    body: Callable[[str, str | None, State], dict] = lambda prompt, effort, state: {}
    read: Callable[[Any], tuple[int, str | None, str]] = lambda reply: (200, "", "")
    empty: Callable[[Any], str] = lambda reply: "empty"
    answer: Callable[[int], Any] = lambda i: f"answer {i}"
    # The emulator's settings this provider's tests need (Bedrock's minimum job size).
    emulator: dict[str, Any] = field(default_factory=dict)
    # The variables its SDKs read that name the emulator (a cloud's several endpoints).
    env_of: Callable[[Rig, Any], dict[str, str]] | None = None
    face: str = ""  # the emulator's face that serves it, when not named as the provider
    unit: str = "line"  # a result's place in the raw file ("result" where they are inline)
    tagged: bool = True  # its batches keep the run's mark (not Anthropic's, not OpenRouter's)

    @property
    def face_name(self) -> str:
        """The emulator's face that serves this provider (what its faults are aimed at)."""
        return self.face or self.provider

    def env(self, emu: Any) -> dict[str, str]:
        urls = emu.base_urls
        base = urls[self.face or self.provider]
        for name, value in self.emulator.items():
            setattr(emu.store.settings, name, value)
        more = self.env_of(self, emu) if self.env_of is not None else {}
        return {
            **more,
            "OPENAI_API_KEY": KEY,
            "OPENAI_BASE_URL": "",
            **({self.key_variable: self.key} if self.key_variable else {}),
            self.base_variable: base,
            **self.more_env,
        }

    def args(
        self,
        emu: Any,
        tmp_path: Path,
        fixture_dir: Path,
        *extra: str,
        model: str | None = None,
        cap: int = 40,
    ) -> list[str]:
        return [
            "run",
            "--answer-model",
            model or self.model,
            "--judge-model",
            "judge-model",
            "--jobs-dir",
            str(tmp_path / "jobs"),
            "--dataset",
            str(fixture_dir),
            "--base-url",
            emu.base_url,
            "--poll-interval",
            poll_interval(emu),
            "--max-requests-per-batch",
            str(cap),
            *extra,
        ]

    def name(self, smoke: bool = False) -> str:
        """The run's default name (the model's name made safe)."""
        import re

        name = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model).strip("-.")
        return f"{name}-smoke" if smoke else name

    def replies(self, i: int) -> list[Any]:
        return self.script.get(i, [self.answer(i)])


def reference_outcome(rig: Rig, replies: list[Any], max_retries: int) -> Outcome:
    """The reference's loop for one request (§8): retried statuses and empty answers are
    tried again, a 400 naming temperature drops it (spending an attempt), Fireworks' 400
    naming reasoning_effort when "none" was sent falls back to "low", any other status
    fails the case at once; retries spent name the last error."""
    state = State(temperature=rig.sends_temperature)
    attempts: list[State] = []
    last = ""
    for n in range(max_retries):
        attempts.append(state)
        status, text, body = rig.read(replies[min(n, len(replies) - 1)])
        if status == 200:
            if text:
                return Outcome(attempts, answer=text, temperature=state.temperature)
            last = rig.empty(replies[min(n, len(replies) - 1)])
            continue
        lowered = body[:1000].lower()
        if status == 400 and state.temperature and "temperature" in lowered:
            state = State(False, state.effort_low)
            last = f"HTTP {status}: {body[:1000]}"
            continue
        if (
            status == 400
            and rig.provider == "fireworks"
            and not state.effort_low
            and rig.effort is None
            and "reasoning_effort" in lowered
        ):
            state = State(state.temperature, True)
            last = f"HTTP {status}: {body[:1000]}"
            continue
        if status in rig.retried:
            last = f"HTTP {status}: {body[:1000]}"
            continue
        return Outcome(attempts, error=f"RuntimeError: HTTP {status}: {body[:1000]}")
    error = f"RuntimeError: {rig.label} request failed after {max_retries} attempts: {last}"
    return Outcome(attempts, error=error)


# --- OpenAI ---------------------------------------------------------------------------
def _openai_error(status: int, message: str, param: str | None = None) -> dict:
    return {
        "status_code": status,
        "body": {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": None,
            }
        },
    }


def _openai_read(reply: Any) -> tuple[int, str | None, str]:
    if isinstance(reply, str):
        return 200, reply, ""  # the content, as is
    return reply["status_code"], None, json.dumps(reply["body"])


OPENAI = Rig(
    provider="openai",
    model="ans-model",
    resolved="ans-model",
    key_variable="OPENAI_API_KEY",
    key=KEY,
    base_variable="OPENAI_BASE_URL",
    sdk="openai",
    extra="",
    label="API",
    effort="max",
    row_effort="xhigh",
    sends_temperature=True,
    retried=RETRIED,
    ended="cancelled",
    price=None,
    script={
        0: ["a plain answer"],
        1: [_openai_error(400, "Unsupported value: 'temperature'", "temperature"), "no temp"],
        2: ["", "after an empty one"],
        3: [""] * 2,
        4: [_openai_error(400, "bad request")],
        5: [_openai_error(503, "overloaded"), "after a 503"],
        6: ["   "],  # blank is an answer
    },
    prompt_of=lambda body: body["messages"][1]["content"],
    body=lambda prompt, effort, s: {
        "model": "ans-model",
        "messages": [
            {"role": "system", "content": ANSWER_SYSTEM_MESSAGE},
            {"role": "user", "content": prompt},
        ],
        "max_completion_tokens": 32000,
        **({"temperature": 1} if s.temperature else {}),
        **({"reasoning_effort": "xhigh" if effort == "max" else effort} if effort else {}),
    },
    read=_openai_read,
    empty=lambda reply: "API returned an empty message",
)


# --- Anthropic ------------------------------------------------------------------------
def _message(*blocks: dict, stop: str = "end_turn") -> dict:
    return {
        "status_code": 200,
        "body": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-5",
            "content": list(blocks),
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
    }


def _text(t: str) -> dict:
    return {"type": "text", "text": t}


def _anthropic_error(kind: str, status: int) -> dict:
    return {
        "status_code": status,
        "body": {"type": "error", "error": {"type": kind, "message": f"{kind} for this request"}},
    }


def _anthropic_read(reply: dict) -> tuple[int, str | None, str]:
    if reply["status_code"] != 200:
        return reply["status_code"], None, json.dumps(reply["body"])
    blocks = reply["body"]["content"]
    texts = [b["text"] for b in blocks if b.get("type") == "text" and b.get("text")]
    return 200, "\n".join(texts).strip(), ""


THINKING = {"type": "thinking", "thinking": "let me think", "signature": "sig"}
ANTHROPIC = Rig(
    provider="anthropic",
    model="opus-5",
    resolved="claude-opus-5",
    key_variable="ANTHROPIC_API_KEY",
    key="sk-ant-test-marker-2b9d",
    base_variable="ANTHROPIC_BASE_URL",
    sdk="anthropic",
    extra="anthropic",
    label="Anthropic",
    effort="max",
    row_effort="max",
    sends_temperature=False,
    retried=RETRIED | {529},
    ended="ended",
    tagged=False,
    price=(5.0, 25.0),
    script={
        0: [_message(THINKING, _text("first"), _text("  second  "))],
        1: [
            _message(
                _text(""),
                _text(" only this "),
                {"type": "tool_use", "id": "t", "name": "f", "input": {}},
            )
        ],
        2: [_message(THINKING), _message(_text("after an empty one"))],
        3: [_message(THINKING, stop="max_tokens")] * 2,  # empty every time: an error row
        4: [_anthropic_error("invalid_request_error", 400)],  # fails at once
        5: [_anthropic_error("overloaded_error", 529), _message(_text("once overloaded"))],
        6: [_anthropic_error("overloaded_error", 529)] * 2,  # retries spent
        7: [_message({"type": "redacted_thinking", "data": "x"}, _text("plain"))],
    },
    prompt_of=lambda params: params["messages"][0]["content"],
    body=lambda prompt, effort, s: {
        "model": "claude-opus-5",
        "max_tokens": 32000,
        "messages": [{"role": "user", "content": prompt}],
        "system": ANSWER_SYSTEM_MESSAGE,
        **({"output_config": {"effort": effort}} if effort else {}),
    },
    read=_anthropic_read,
    empty=lambda r: f"Anthropic returned an empty text message stop={r['body']['stop_reason']}",
    answer=lambda i: _message(_text(f"answer {i}")),
)


# --- Gemini ---------------------------------------------------------------------------
def _candidates(*parts: dict, more: list | None = None) -> dict:
    candidates = [{"content": {"parts": list(parts), "role": "model"}, "finishReason": "STOP"}]
    return {
        "status_code": 200,
        "body": {
            "candidates": candidates + (more or []),
            "usageMetadata": {
                "promptTokenCount": 9,
                "candidatesTokenCount": 4,
                "thoughtsTokenCount": 3,
            },
        },
    }


def _part(t: str, thought: bool = False) -> dict:
    return {"text": t, "thought": True} if thought else {"text": t}


def _gemini_error(code: int, message: str, status: str = "INVALID_ARGUMENT") -> dict:
    return {
        "status_code": code,
        "body": {"error": {"code": code, "message": message, "status": status}},
    }


def _gemini_read(reply: dict) -> tuple[int, str | None, str]:
    if reply["status_code"] != 200:
        return reply["status_code"], None, json.dumps(reply["body"]["error"])
    candidates = reply["body"].get("candidates") or []
    parts = candidates[0]["content"]["parts"] if candidates else []
    return (
        200,
        "".join(p["text"] for p in parts if p.get("text") and not p.get("thought")).strip(),
        "",
    )


def _gemini_body(prompt: str, effort: str | None, s: State) -> dict:
    config: dict = {"temperature": 1} if s.temperature else {}
    config["max_output_tokens"] = 32000
    if effort is not None:  # max → high, upper-cased, thoughts not included
        level = "high" if effort == "max" else effort
        config["thinking_config"] = {"thinking_level": level.upper(), "include_thoughts": False}
    return {
        "contents": [
            {"role": "user", "parts": [{"text": ANSWER_SYSTEM_MESSAGE}]},
            {"role": "user", "parts": [{"text": prompt}]},
        ],
        "generation_config": config,
        "model": "models/gemini-3.1-pro-preview",
    }


GEMINI = Rig(
    provider="gemini",
    model="gemini-3.1-pro",
    resolved="gemini-3.1-pro-preview",
    key_variable="GEMINI_API_KEY",
    key="gemini-test-marker-5e1f",
    base_variable="GOOGLE_GEMINI_BASE_URL",
    sdk="google.genai",
    extra="gemini",
    label="Gemini",
    effort="max",
    row_effort="high",
    sends_temperature=True,
    retried=RETRIED | {401},
    ended="CANCELLED",
    price=(2.0, 12.0),
    more_env={"GOOGLE_API_KEY": ""},
    script={
        0: [_candidates(_part("thinking it over", thought=True), _part("a"), _part("b "))],
        1: [_candidates(_part("  x  "), more=[{"content": {"parts": [_part("second one")]}}])],
        2: [_candidates(_part("only thoughts", thought=True)), _candidates(_part("an answer"))],
        3: [_candidates()] * 2,  # no parts at all, every time: an error row
        4: [
            _gemini_error(400, "temperature is not supported for this model"),
            _candidates(_part("no temp")),
        ],
        5: [_gemini_error(401, "API key expired", "UNAUTHENTICATED"), _candidates(_part("ok"))],
        6: [_gemini_error(400, "Request contains an invalid argument.")],  # fails at once
        7: [_gemini_error(503, "The model is overloaded.", "UNAVAILABLE")] * 2,
    },
    prompt_of=lambda request: request["contents"][1]["parts"][0]["text"],
    body=_gemini_body,
    read=_gemini_read,
    empty=lambda reply: "Gemini returned an empty message",
    answer=lambda i: _candidates(_part(f"answer {i}")),
)


# --- Fireworks ------------------------------------------------------------------------
def _completion(content: str) -> dict:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
    }
    body = {
        "id": "c",
        "object": "chat.completion",
        "choices": [choice],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3},
    }
    return {"status_code": 200, "body": body}


def _fireworks_error(code: int, message: str) -> dict:
    return {"status_code": code, "body": {"error": {"message": message}}}


def _fireworks_read(reply: dict) -> tuple[int, str | None, str]:
    if reply["status_code"] != 200:  # the error line: {"code": <status>, "message"}
        return (
            reply["status_code"],
            None,
            json.dumps({"code": reply["status_code"], **reply["body"]["error"]}),
        )
    return 200, reply["body"]["choices"][0]["message"]["content"], ""


FIREWORKS = Rig(
    provider="fireworks",
    model="glm-5.3",
    resolved="accounts/fireworks/models/glm-5p3",
    key_variable="FIREWORKS_API_KEY",
    key="fw-test-marker-77aa",
    base_variable="FIREWORKS_BASE_URL",
    sdk="fireworks",
    extra="fireworks",
    label="Fireworks",
    effort=None,
    row_effort=None,
    sends_temperature=True,
    retried=RETRIED,
    ended="JOB_STATE_CANCELLED",
    price=None,
    more_env={"FIREWORKS_ACCOUNT_ID": "my-account"},
    ordered=False,  # the service merges the job's parameters into each line's body
    script={
        0: [_completion("a plain answer")],
        1: [
            _fireworks_error(400, "reasoning_effort 'none' is not supported"),
            _completion("after low"),
        ],
        2: [
            _fireworks_error(400, "Temperature must be 0.6 for this model"),
            _completion("no temperature"),
        ],
        3: [_completion("")] * 2,  # empty every time: an error row
        4: [_fireworks_error(503, "overloaded"), _completion("after a 503")],
        5: [_fireworks_error(400, "prompt too long")],  # fails at once
        6: [_completion("   ")],  # blank is an answer
    },
    prompt_of=lambda body: body["messages"][1]["content"],
    body=lambda prompt, effort, s: {
        "model": "accounts/fireworks/models/glm-5p3",
        "messages": [
            {"role": "system", "content": ANSWER_SYSTEM_MESSAGE},
            {"role": "user", "content": prompt},
        ],
        "max_tokens": 32000,
        "reasoning_effort": effort or ("low" if s.effort_low else "none"),
        **({"temperature": 1} if s.temperature else {}),
    },
    read=_fireworks_read,
    empty=lambda reply: "Fireworks returned an empty message",
    answer=lambda i: _completion(f"answer {i}"),
)

# --- Azure OpenAI ---------------------------------------------------------------------
# The reference's OpenAI rules, the deployment as the model (the rule for Azure).
AZURE = dataclasses.replace(
    OPENAI,
    provider="azure",
    model="azure/ans-model",
    resolved="ans-model",
    key_variable="AZURE_OPENAI_API_KEY",
    key="azure-secret-marker-4f1d",
    base_variable="AZURE_OPENAI_ENDPOINT",
)


# --- Groq -----------------------------------------------------------------------------
# OpenAI's batch shape under Groq's /openai/v1 (console.groq.com/docs/batch), the
# reference's OpenAI rules, Groq's model id in the body (groq/ID names it).
GROQ = dataclasses.replace(
    OPENAI,
    provider="groq",
    model="groq/openai/gpt-oss-120b",
    resolved="groq/openai/gpt-oss-120b",
    key_variable="GROQ_API_KEY",
    key="gsk-test-marker-31c7",
    base_variable="GROQ_BASE_URL",
    sdk="groq",
    extra="groq",
    label="Groq",
    price=(0.15, 0.6),
    batch_discount=0.25,
    body=lambda prompt, effort, s: {
        **OPENAI.body(prompt, effort, s),
        "model": "openai/gpt-oss-120b",
    },
)


# --- Together AI ------------------------------------------------------------------------
# The reference's OpenAI rules in Together's lines ({custom_id, body}: the body as
# OpenAI's), Together's model id in the body (together/ID names it).
TOGETHER = dataclasses.replace(
    OPENAI,
    provider="together",
    model="together/openai/gpt-oss-120b",
    resolved="together/openai/gpt-oss-120b",
    key_variable="TOGETHER_API_KEY",
    key="tgp-test-marker-8e02",
    base_variable="TOGETHER_BASE_URL",
    sdk="together",
    extra="together",
    label="Together",
    price=(0.15, 0.6),
    batch_discount=0.0,
    body=lambda prompt, effort, s: {
        **OPENAI.body(prompt, effort, s),
        "model": "openai/gpt-oss-120b",
    },
)


# --- Mistral ---------------------------------------------------------------------------
# The reference's OpenAI body in Mistral's words (max_tokens), one model a job (the face
# hands the responder the line's body with the job's model first), no reasoning effort.
MISTRAL = dataclasses.replace(
    OPENAI,
    provider="mistral",
    model="mistral/mistral-medium-latest",
    resolved="mistral/mistral-medium-latest",
    key_variable="MISTRAL_API_KEY",
    key="mistral-test-marker-51ab",
    base_variable="MISTRAL_BASE_URL",
    sdk="mistralai.client",
    extra="mistral",
    label="Mistral",
    effort=None,
    row_effort=None,
    price=(0.4, 2.0),
    body=lambda prompt, effort, s: {
        "model": "mistral-medium-latest",
        "messages": [
            {"role": "system", "content": ANSWER_SYSTEM_MESSAGE},
            {"role": "user", "content": prompt},
        ],
        "max_tokens": 32000,
        **({"temperature": 1} if s.temperature else {}),
    },
)


# --- OpenRouter --------------------------------------------------------------------------
# The reference's OpenAI rules, requests inline ({custom_id, body}), OpenRouter's model
# id in the body (openrouter/ID names it), results inline in the batch object.
# xAI (docs.x.ai batch API; the xai-sdk's batch proto, whose JSON its REST API answers):
# OpenAI's upload and lines, xAI's model id in the body; a result is a chat completion or
# a google.rpc.Status {code, message}, its gRPC code the HTTP failure it was.
_GRPC_OF = {400: 3, 429: 8, 500: 13, 503: 14}


def _xai_read(reply: Any) -> tuple[int, str | None, str]:
    if isinstance(reply, str):
        return 200, reply, ""
    status, given = reply["status_code"], reply["body"]["error"]
    return (
        status,
        None,
        json.dumps({"error": {"code": _GRPC_OF[status], "message": given["message"]}}),
    )


XAI = dataclasses.replace(
    OPENAI,
    provider="xai",
    model="xai/grok-4.3",
    resolved="xai/grok-4.3",
    key_variable="XAI_API_KEY",
    key="xai-test-marker-5e2b",
    base_variable="XAI_BASE_URL",
    label="xAI",
    price=(1.25, 2.5),
    read=_xai_read,
    unit="result",
    body=lambda prompt, effort, s: {**OPENAI.body(prompt, effort, s), "model": "grok-4.3"},
)


# OpenRouter (openrouter.ai/docs batch quickstart; the SDK's Result and ResultError): a
# result holds a response or an error, never both; a request the model refused is an
# error {message, type, param, error_type} whose canonical error_type names its status.
_OPENROUTER_TYPES = {400: "invalid_request", 429: "rate_limit_exceeded", 500: "server"}
_OPENROUTER_TYPES |= {502: "provider_unavailable", 503: "provider_overloaded"}


def _openrouter_read(reply: Any) -> tuple[int, str | None, str]:
    if isinstance(reply, str):
        return 200, reply, ""
    status, given = reply["status_code"], reply["body"]["error"]
    error = {
        "message": given["message"],
        "type": given["type"],
        "param": given["param"],
        "error_type": _OPENROUTER_TYPES[status],
    }
    return status, None, json.dumps({"error": error})


OPENROUTER = dataclasses.replace(
    OPENAI,
    provider="openrouter",
    model="openrouter/anthropic/claude-opus-5",
    resolved="openrouter/anthropic/claude-opus-5",
    key_variable="OPENROUTER_API_KEY",
    key="sk-or-test-marker-6d4c",
    base_variable="OPENROUTER_BASE_URL",
    sdk="openrouter",
    extra="openrouter",
    label="OpenRouter",
    price=(5.0, 25.0),
    read=_openrouter_read,
    unit="result",
    tagged=False,
    body=lambda prompt, effort, s: {
        **OPENAI.body(prompt, effort, s),
        "model": "anthropic/claude-opus-5",
    },
)


# --- Amazon Bedrock -------------------------------------------------------------------
# The reference's Claude rules (§9) in Bedrock's shape (provider-batch-apis.md §5.4): no
# model in the body, anthropic_version first; the face hands the responder the record's
# modelInput with its modelId, and writes a failed record's error as {errorCode,
# errorMessage} (the message: the reply's own, else its body as JSON).
def _bedrock_read(reply: dict) -> tuple[int, str | None, str]:
    status, text, body = _anthropic_read(reply)
    if status == 200:
        return status, text, body
    given = reply["body"]
    message = given.get("message") if isinstance(given, dict) else None
    error = {"errorCode": status, "errorMessage": message or json.dumps(given)}
    return status, None, json.dumps(error, separators=(",", ":"))


BEDROCK_MODEL = "anthropic.claude-opus-5-v1:0"
BEDROCK = dataclasses.replace(
    ANTHROPIC,
    provider="bedrock",
    tagged=True,
    model=f"bedrock/{BEDROCK_MODEL}",
    resolved=f"bedrock/{BEDROCK_MODEL}",
    key_variable="AWS_SECRET_ACCESS_KEY",
    key="aws-secret-marker-9c1e",
    base_variable="AWS_ENDPOINT_URL_BEDROCK",
    sdk="boto3",
    extra="bedrock",
    ended="Stopped",
    price=(5.0, 25.0),  # claude-opus-5's, at the batch discount
    body=lambda prompt, effort, s: {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 32000,
        "messages": [{"role": "user", "content": prompt}],
        "system": ANSWER_SYSTEM_MESSAGE,
        **({"output_config": {"effort": effort}} if effort else {}),
        "modelId": BEDROCK_MODEL,
    },
    read=_bedrock_read,
    emulator={"bedrock_min_records": 1},
)


def _bedrock_env(rig: Rig, emu: Any) -> dict[str, str]:
    url = emu.base_urls["bedrock"]
    return {
        "AWS_ACCESS_KEY_ID": "AKIDTESTMARKER",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": url,
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": url,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "BEDROCK_ROLE_ARN": "arn:aws:iam::123456789012:role/batchbench-test",
        "BATCHBENCH_S3_URI": "s3://batchbench/runs",
        "BATCHBENCH_BEDROCK_MIN_RECORDS": str(rig.emulator.get("bedrock_min_records", 100)),
    }


BEDROCK.env_of = _bedrock_env


# --- Vertex AI ------------------------------------------------------------------------
# Gemini and Claude by the reference's rules, in Vertex's shapes (the account of
# Vertex batch prediction): the face hands the responder a Gemini request without its
# labels, as the Gemini face does, and a Claude request with anthropic_version
# vertex-2023-10-16 and the job's model; a failed line's status is the reason and the
# error body, which the row quotes. Credentials are a service account's key file whose
# token endpoint is the emulator: its private key is the secret never to be written.
def _service_account() -> tuple[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    # 1,024 bits: only google-auth reads this key (the Vertex clients), which signs with
    # any RSA key, and nothing checks it here; a client loads it in 5 ms, not 32 (one is
    # made in every command a test runs). obstore refuses keys this small: the
    # emulator's own key, which buckets use too, stays 2,048 bits.
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return pem, pem.splitlines()[5]  # a line from inside the key: the marker


VERTEX_PEM, VERTEX_MARKER = _service_account()


@functools.cache
def _key_folder() -> Path:
    """One folder for the process's service-account files, removed when it exits (a
    folder per call once left thousands behind)."""
    import atexit
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="batchbench-test-adc-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _vertex_env(rig: Rig, emu: Any) -> dict[str, str]:
    url = emu.base_urls["vertex"]
    info = {
        "type": "service_account",
        "project_id": "batchbench-test",
        "private_key_id": "test",
        "private_key": VERTEX_PEM,
        "client_email": "tests@batchbench-test.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": f"{url}/token",
    }
    key = _key_folder() / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.json"
    if not key.exists():  # its content is the URL's: written once, never while read
        key.write_text(json.dumps(info))
    emu.face("vertex").trust(info)  # its public key known, as Google knows every account's
    return {
        "STORAGE_EMULATOR_HOST": url,
        "GOOGLE_CLOUD_PROJECT": "batchbench-test",
        "GOOGLE_CLOUD_LOCATION": "us-central1",
        "BATCHBENCH_GCS_URI": "gs://batchbench/runs",
        "GOOGLE_APPLICATION_CREDENTIALS": str(key),
        "GOOGLE_API_KEY": "",
        "GEMINI_API_KEY": "",
    }


def _vertex_gemini_read(reply: dict) -> tuple[int, str | None, str]:
    if reply["status_code"] != 200:  # the line's status: "<reason>: {"error": {…}}"
        return reply["status_code"], None, json.dumps(reply["body"])
    return _gemini_read(reply)


VERTEX_GEMINI = dataclasses.replace(
    GEMINI,
    provider="vertex-gemini",
    model="vertex/gemini-3.1-pro-preview",
    resolved="vertex/gemini-3.1-pro-preview",
    key_variable="",
    key=VERTEX_MARKER,
    base_variable="GOOGLE_VERTEX_BASE_URL",
    sdk="google.cloud.storage",
    extra="vertex",
    ended="JOB_STATE_CANCELLED",
    more_env={},
    read=_vertex_gemini_read,
    env_of=_vertex_env,
    face="vertex",
)
VERTEX_CLAUDE = dataclasses.replace(
    ANTHROPIC,
    provider="vertex-claude",
    tagged=True,
    model="vertex/claude-opus-5",
    resolved="vertex/claude-opus-5",
    key_variable="",
    key=VERTEX_MARKER,
    base_variable="GOOGLE_VERTEX_BASE_URL",
    sdk="google.cloud.storage",
    extra="vertex",
    ended="JOB_STATE_CANCELLED",
    price=None,  # no known batch price for Claude on Vertex: named as unpriced
    body=lambda prompt, effort, s: {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 32000,
        "messages": [{"role": "user", "content": prompt}],
        "system": ANSWER_SYSTEM_MESSAGE,
        **({"output_config": {"effort": effort}} if effort else {}),
        "model": "claude-opus-5",
    },
    env_of=_vertex_env,
    face="vertex",
)
RIGS = {
    rig.provider: rig
    for rig in (
        OPENAI,
        ANTHROPIC,
        GEMINI,
        FIREWORKS,
        AZURE,
        BEDROCK,
        VERTEX_GEMINI,
        VERTEX_CLAUDE,
        GROQ,
        TOGETHER,
        MISTRAL,
        OPENROUTER,
        XAI,
    )
}

# A misspelt model per provider, found by the pre-flight before anything is bought.
# Azure's data plane cannot name a deployment without running it: a misspelt one is
# found by the service's validation of the first batch (test_azure.py).
TYPOS = {
    "openai": "gpt-5.4-minni",
    "anthropic": "claude-opus-55",
    "gemini": "gemini-3.1-pro-prevew",
    "fireworks": "accounts/fireworks/models/glm-9p9",
    "bedrock": "bedrock/anthropic.claude-opus-55-v1:0",
    "vertex-gemini": "vertex/gemini-3.1-pro-prevew",
    "vertex-claude": "vertex/claude-opus-55",
    "groq": "groq/openai/gpt-oss-1200b",
    "together": "together/openai/gpt-oss-1200b",
    "mistral": "mistral/mistral-medium-latset",
    "openrouter": "openrouter/anthropic/claude-opus-55",
    "xai": "xai/grok-4.33",
}
NO_PREFLIGHT = {"azure"}
# The version each SDK adds itself, which a base URL must not end in (from each SDK's
# documented base URL, not from batchbench's registry).
ENDINGS = {
    "anthropic": "/v1",
    "gemini": "/v1beta",
    "fireworks": "/v1",
    "azure": "/openai/v1",
    "vertex-gemini": "/v1",
    "vertex-claude": "/v1",
    "groq": "/openai/v1",
    "together": "/v1",
    "mistral": "/v1",
}


def scripted_responder(
    rig: Rig, prompts: list[str], seen: dict[int, list[dict]]
) -> Callable[[dict], Any]:
    """A responder that answers case i (its position in ``prompts``) by the rig's script,
    attempt by attempt, recording what it was sent; judges get the simulated judge."""
    from batchbench.emulator.model import default_content

    def responder(given: dict) -> Any:
        if "response_format" in given:  # a judge, on OpenAI's face
            return default_content(given)
        i = prompts.index(rig.prompt_of(given))
        seen.setdefault(i, []).append(given)
        replies = rig.replies(i)
        return replies[min(len(seen[i]) - 1, len(replies) - 1)]

    return responder
