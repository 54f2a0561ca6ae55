"""Anthropic's Message Batches, offline: the reference's Messages body, request lines,
the envelope's rules, and the results file read into the common frame.

What the model is sent and how its reply reads are the reference runner's
(``../shared/spec/reference-behaviour.md`` §9): ``max_tokens`` 32000, the
system message top-level, no temperature ever, ``output_config.effort`` for a
reasoning effort (``max`` stays ``max``); the answer is the non-empty text
blocks joined with a newline and stripped. The batch format is
``../shared/spec/provider-batch-apis.md`` §1: requests travel inline in the
create call (a request file holds one ``{"custom_id", "params"}`` per line, the
create body is their list), ids match ``^[a-zA-Z0-9_-]{1,64}$``, and an errored
line's error type stands for the HTTP status the reference would have seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from ..bench.protocol import JUDGE_SCHEMA, Prompt
from ..errors import BatchFileError, PlanError
from ..kinds import ProviderName, Stage
from . import frames
from .base import Adjust, BatchError, BatchFailure, Limits, LineRules, Rendered
from .checks import encode_line, request_lines, sends_temperature, temperature_fallback
from .ids import SAFE_ID, safe_id

MAX_REQUESTS = 100_000
# 256 MB a create body: ``{"requests":[`` + the lines joined by commas + ``]}`` is
# 14 bytes more than the lines with their newlines.
MAX_BYTES = 256 * 1024 * 1024 - 14
# The reference's retried statuses, and 529 (overloaded): a documented extension,
# an overloaded line is free to send again.
RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# An errored line's error type → the HTTP status it stands for (Anthropic's errors page);
# a type this table does not know reads as a 500.
STATUS_OF = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "conflict_error": 409,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
# Lines the service never ran: sent again, never billed.
NOT_RUN = {"canceled": "batch_cancelled", "expired": "batch_expired"}


def claude_body(
    prompt: Prompt,
    adjust: Adjust | None = None,
    *,
    structured: bool = False,
    sampling: bool = False,
) -> dict[str, Any]:
    """What the reference sends a Claude model, wherever it is served (after the model,
    or Bedrock's version): ``max_tokens``, the user message, the system prompt at top
    level, the effort as ``output_config`` (``max`` stays ``max``), never a temperature.

    A judge (never the reference's: it judges on OpenAI) is sent, where the service's API
    version has one (``sampling``: Bedrock's and Vertex's; the Messages API's current
    version has none, as the anthropic SDK's types say), the judges' temperature, 0,
    unless the model refused one; and where the service takes Claude's structured output
    (``structured``), the decisions' schema as ``output_config.format``."""
    system, messages = prompt.for_two_roles()
    body: dict[str, Any] = {"max_tokens": prompt.max_tokens, "messages": messages, "system": system}
    output: dict[str, Any] = {}
    if prompt.reasoning_effort is not None:
        output["effort"] = prompt.reasoning_effort
    if prompt.json_mode:
        if sampling and sends_temperature(adjust or {}):
            body["temperature"] = prompt.temperature
        if structured:
            output["format"] = {"type": "json_schema", "schema": JUDGE_SCHEMA}
    if output:
        body["output_config"] = output
    return body


def claude_rendered(body: dict[str, Any]) -> Rendered:
    """A Claude body, rendered: whether it carries a temperature is what it says (and
    what its failure is read by: :func:`claude_fallback`)."""
    sent = "temperature" in body
    return Rendered(body, sent, sent={"temperature": True} if sent else None)


def claude_fallback(
    status: int, body_text: str, sent: Mapping[str, Any] | None, adjust: Adjust
) -> Adjust | None:
    """The temperature rule for a request that carried one (a judge's); an answer is
    never sent one, so none of its failures has a fallback (the reference's rule)."""
    if not (sent or {}).get("temperature"):
        return None
    return temperature_fallback(status, body_text, adjust)


def cloud_claude_body(prompt: Prompt, version: str, adjust: Adjust | None = None) -> dict[str, Any]:
    """The reference's Claude body as a cloud takes it (Bedrock, Vertex): the cloud's
    ``anthropic_version`` first, no model (the job names it); no structured output (not
    offered to batch jobs there: a judge's reply is read as the message says it)."""
    return {"anthropic_version": version, **claude_body(prompt, adjust, sampling=True)}


def is_cloud_claude(body: Any, version: str) -> bool:
    """Whether a request body is in that shape (:func:`cloud_claude_body`)."""
    return (
        isinstance(body, dict) and "model" not in body and body.get("anthropic_version") == version
    )


@dataclass
class AnthropicWire:
    name: ProviderName = "anthropic"
    limits: Limits = field(default_factory=lambda: Limits(MAX_REQUESTS, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("Anthropic", RETRIED))

    def effort(self, asked: str | None) -> str | None:
        """The reference sends ``max`` to Anthropic as ``max``: every effort as asked."""
        return asked

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        """The reference's Messages body, key order included (:func:`claude_body`)."""
        return claude_rendered({"model": model, **claude_body(prompt, adjust, structured=True)})

    def fallback(
        self, status: int, body_text: str, sent: Mapping[str, Any] | None, adjust: Adjust
    ) -> Adjust | None:
        """:func:`claude_fallback`."""
        return claude_fallback(status, body_text, sent, adjust)

    def custom_id(
        self, stage: Stage, case_id: str, attempt: int, run_id: str, judge_pass: int = 1
    ) -> str:
        return safe_id(stage, case_id, attempt, run_id, judge_pass)

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        obj = {"custom_id": custom_id, "params": rendered.body}
        return encode_line(obj)

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """The create call's envelope rules, which refuse the whole batch when broken."""
        if len(lines) > self.limits.max_lines:
            raise PlanError(f"{where}: {len(lines)} requests, over the {MAX_REQUESTS} limit")
        limit = "the 256 MB limit of a batch"
        for n, obj in request_lines(
            lines, where, id_key="custom_id", max_bytes=MAX_BYTES, limit=limit
        ):
            cid = obj["custom_id"]
            if not SAFE_ID.match(cid):
                raise PlanError(f"{where}: line {n}: custom_id {cid!r} is not {SAFE_ID.pattern}")
            params = obj.get("params")
            if not isinstance(params, dict) or params.get("stream") is True:
                raise PlanError(f"{where}: line {n}: params must be a non-streaming Messages body")

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure:
        """Message Batches never fail as a whole once created (each line ends on its own);
        a batch without results is one the service lost: send its requests again."""
        return BatchFailure("resubmit", None, "the batch ended without results")

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        return read_results(paths)

    def check_replies(self, frame: pl.DataFrame, requests: Sequence[bytes], where: str) -> None:
        """Nothing: this service is not known to file a reply under another request."""


# The fields of a results line that batchbench reads, typed (msgspec skips the rest).
_NULL = msgspec.Raw(b"null")


class _Block(msgspec.Struct, gc=False):
    type: str | None = None
    text: msgspec.Raw = _NULL


class _OutputDetails(msgspec.Struct, gc=False):
    thinking_tokens: int | None = None


class _CacheCreation(msgspec.Struct, gc=False):
    ephemeral_5m_input_tokens: int | None = None
    ephemeral_1h_input_tokens: int | None = None


class _Usage(msgspec.Struct, gc=False):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_creation: _CacheCreation | None = None
    service_tier: str | None = None  # standard, priority or batch, as the reply says
    output_tokens_details: _OutputDetails | None = None


class _Message(msgspec.Struct, gc=False):
    content: list[_Block] | None = None
    stop_reason: str | None = None
    usage: _Usage | None = None
    model: str | None = None  # the model that served it


class _Result(msgspec.Struct, gc=False):
    type: str
    message: _Message | None = None
    error: msgspec.Raw = _NULL  # kept as the service wrote it: the error row quotes it


class _Line(msgspec.Struct, gc=False):
    custom_id: str | None = None
    result: _Result | None = None


class _ErrorType(msgspec.Struct, gc=False):
    type: str | None = None


class _ErrorResponse(msgspec.Struct, gc=False):
    error: _ErrorType | None = None


_LINE = msgspec.json.Decoder(_Line)
_TEXT = msgspec.json.Decoder(str | None)
_ERROR = msgspec.json.Decoder(_ErrorResponse | None)


def answer_text(message: _Message) -> str:
    """The reference's reading: every non-empty text block, joined with a newline, stripped.
    Thinking, tool use and every other block are not the answer."""
    texts = []
    for block in message.content or []:
        if block.type != "text":
            continue
        try:
            text = _TEXT.decode(block.text)
        except msgspec.ValidationError:
            text = None
        if text:
            texts.append(text)
    return "\n".join(texts).strip()


def _status(error: msgspec.Raw) -> int:
    try:
        decoded = _ERROR.decode(error)
    except msgspec.ValidationError:
        return 500
    kind = decoded.error.type if decoded is not None and decoded.error is not None else None
    return STATUS_OF.get(kind or "", 500)


def cache_writes(u: _Usage) -> dict[str, int]:
    """Tokens written to cache by lifetime. A reply without the split (older API versions)
    wrote them all at five minutes, the only lifetime there was."""
    written = u.cache_creation_input_tokens or 0
    hour = (u.cache_creation.ephemeral_1h_input_tokens or 0) if u.cache_creation else 0
    return {"cache_write_5m_tokens": written - hour, "cache_write_1h_tokens": hour}


def claude_reply(message: _Message | None) -> dict[str, Any]:
    """A Claude message's part of a result row, wherever it was served (a Message Batch,
    a Bedrock job): its text by the reference's rule, the empty reply's error, and its
    tokens (input counts cache reads and writes, as Anthropic bills them)."""
    u = (message.usage if message is not None else None) or _Usage()
    details = u.output_tokens_details
    return {
        "content": answer_text(message) if message is not None else None,
        "empty_error": (
            "Anthropic returned an empty text message"
            f" stop={message.stop_reason if message is not None else None}"
        ),
        "prompt_tokens": (u.input_tokens or 0)
        + (u.cache_read_input_tokens or 0)
        + (u.cache_creation_input_tokens or 0),
        "cached_tokens": u.cache_read_input_tokens,
        **cache_writes(u),
        "completion_tokens": u.output_tokens,
        "reasoning_tokens": details.thinking_tokens if details is not None else None,
        "served_model": message.model if message is not None else None,
        "served_version": None,  # Claude's replies carry no fingerprint
        "service_tier": u.service_tier,
    }


def read_results(paths: Sequence[Path]) -> pl.DataFrame:
    """Results files → the common frame, every line checked. ``succeeded`` is a 200 reply
    (its text read by the reference's rule), ``errored`` the HTTP status its error type
    stands for with the error object as the body's text, ``canceled`` and ``expired``
    lines the service never ran."""
    rows: list[dict[str, Any]] = []
    read, unfit = frames.read_fitting(paths, _LINE, frames.IDS)
    for path, lineno, line in read:
        result = line.result
        if result is None:
            raise BatchFileError(f"{path}: line {lineno}: no 'result'")
        if result.type not in ("succeeded", "errored", *NOT_RUN):
            raise BatchFileError(f"{path}: line {lineno}: unknown result type {result.type!r}")
        message = result.message if result.type == "succeeded" else None
        if result.type == "succeeded" and message is None:
            raise BatchFileError(f"{path}: line {lineno}: a succeeded result without message")
        row = {
            "file": str(path),
            "lineno": lineno,
            "custom_id": line.custom_id,
            "status_code": (
                200
                if message is not None
                else _status(result.error)
                if result.type == "errored"
                else None
            ),
            "has_response": result.type in ("succeeded", "errored"),
            "has_error": result.type in NOT_RUN,
            "error_code": NOT_RUN.get(result.type),
            "error_message": result.type if result.type in NOT_RUN else None,
            "body_text": (
                bytes(result.error).decode("utf-8", "replace") if result.type == "errored" else None
            ),
            **claude_reply(message),
        }
        rows.append(row)
    built = frames.from_rows(rows)
    return frames.with_unfit(built, unfit)
