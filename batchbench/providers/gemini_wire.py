"""Gemini Batch Mode, offline: the reference's generateContent request as a batch file
line, the file's rules, and the responses file read into the common frame.

What the model is sent and how its reply reads are the reference runner's
(``../shared/spec/reference-behaviour.md`` §9): both messages as ``user``
contents (the system message first, no system instruction), temperature 1 and
32000 output tokens, a thinking config for a reasoning effort (``max`` →
``HIGH``, thoughts not included); the answer is the first candidate's parts
that have text and are not thoughts, joined with nothing, stripped. The batch
file (``../shared/spec/provider-batch-apis.md`` §2) holds one ``{"key",
"request"}`` per line with the protobuf field names its parser requires
(snake_case); a responses line is ``{key, response}`` or ``{key, error}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from ..bench.protocol import Prompt
from ..errors import BatchFileError, PlanError
from ..kinds import ProviderName, Stage
from ..tokens import word_pieces
from . import frames
from .base import Adjust, BatchError, BatchFailure, Limits, LineRules, Rendered
from .checks import (
    encode_line,
    ended_without_results,
    replies_fit_their_requests,
    request_lines,
    sends_temperature,
    temperature_fallback,
)
from .ids import safe_id

MAX_LINES = 1_000_000  # no documented count limit: the file size is what binds
MAX_BYTES = 2 * 1024**3  # the Files API's 2 GB a file
# The reference retries 401 for Gemini too (with 408, 409, 429 and 5xx).
RETRIED = frozenset({401, 408, 409, 429, 500, 502, 503, 504})
EMPTY_MESSAGE = "Gemini returned an empty message"
# A job that ended without a responses file: cancelled or expired before any line
# ran (its requests are sent again), or failed as a whole (they fail).
_NOT_RUN = ("JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")

_ROLE = {"user": "user", "assistant": "model"}  # Gemini calls the model's turns "model"


@dataclass
class GeminiWire:
    name: ProviderName = "gemini"
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("Gemini", RETRIED))

    def effort(self, asked: str | None) -> str | None:
        """The reference sends ``max`` to Gemini as ``high``."""
        return "high" if asked == "max" else asked

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        """The reference's request, with the batch file's snake_case field names (a judge's
        asks for JSON: the reference judges on OpenAI only, so this is ours)."""
        config: dict[str, Any] = {}
        temperature = sends_temperature(adjust)
        if temperature:
            config["temperature"] = prompt.temperature
        config["max_output_tokens"] = prompt.max_tokens
        if prompt.json_mode:  # a judge: JSON asked of the model as Gemini asks it
            config["response_mime_type"] = "application/json"
        effort = self.effort(prompt.reasoning_effort)
        if effort is not None:
            config["thinking_config"] = {
                "thinking_level": effort.upper(),
                "include_thoughts": False,
            }
        system, messages = prompt.for_two_roles()
        turns = [{"role": _ROLE[m["role"]], "parts": [{"text": m["content"]}]} for m in messages]
        body = {
            # the reference's: the system text as the first user turn
            "contents": [{"role": "user", "parts": [{"text": system}]}, *turns],
            "generation_config": config,
        }
        return Rendered(body, temperature)

    def fallback(
        self, status: int, body_text: str, sent: Mapping[str, Any] | None, adjust: Adjust
    ) -> Adjust | None:
        """The reference's temperature rule (:func:`.checks.temperature_fallback`)."""
        return temperature_fallback(status, body_text, adjust)

    def custom_id(
        self, stage: Stage, case_id: str, attempt: int, run_id: str, judge_pass: int = 1
    ) -> str:
        return safe_id(stage, case_id, attempt, run_id, judge_pass)

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        obj = {"key": custom_id, "request": rendered.body}
        return encode_line(obj)

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """The batch file parser's rules: unique keys, requests with non-empty texts."""
        limit = "the 2 GB limit of a file"
        for n, obj in request_lines(lines, where, id_key="key", max_bytes=MAX_BYTES, limit=limit):
            contents = (obj.get("request") or {}).get("contents") or []
            if any(p.get("text") == "" for c in contents for p in c.get("parts") or []):
                raise PlanError(f"{where}: line {n}: an empty text part (the parser refuses it)")

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure:
        """A job that ended without responses (:func:`.checks.ended_without_results`)."""
        return ended_without_results(errors, _NOT_RUN)

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        return read_results(paths)

    def check_replies(self, frame: pl.DataFrame, requests: Sequence[bytes], where: str) -> None:
        """Gemini has filed replies under other lines' keys in big batches
        (python-genai#1909): each reply's prompt token count must fit its own request."""
        pieces = {}
        for line in requests:
            if line.strip():
                key, request = self.keyed_request(json.loads(line))
                contents = request.get("contents") or []
                text = "".join(p.get("text", "") for c in contents for p in c.get("parts") or [])
                pieces[key] = word_pieces(text)
        answered = frame.filter(pl.col("status_code") == 200)
        ids = answered["custom_id"].to_list()
        replies_fit_their_requests(
            answered["prompt_tokens"].to_list(), [pieces[i] for i in ids], ids, where
        )

    def keyed_request(self, line: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A request line → (its id, the request)."""
        return line["key"], line["request"]


# The fields of a responses line that batchbench reads, typed (msgspec skips the rest).
_NULL = msgspec.Raw(b"null")


class _Part(msgspec.Struct, gc=False):
    text: msgspec.Raw = _NULL
    thought: bool | None = None


class _Content(msgspec.Struct, gc=False):
    parts: list[_Part] | None = None


class _Candidate(msgspec.Struct, gc=False):
    content: _Content | None = None


class _Usage(msgspec.Struct, gc=False, rename="camel"):
    prompt_token_count: int | None = None
    cached_content_token_count: int | None = None
    candidates_token_count: int | None = None
    thoughts_token_count: int | None = None
    traffic_type: str | None = None  # Vertex AI's: ON_DEMAND, ON_DEMAND_FLEX…


class _Response(
    msgspec.Struct, gc=False, rename={"usage": "usageMetadata", "model_version": "modelVersion"}
):
    candidates: list[_Candidate] | None = None
    usage: _Usage | None = None
    model_version: str | None = None  # the model that served it


class _Status(msgspec.Struct, gc=False):
    code: int | None = None


class _Line(msgspec.Struct, gc=False):
    key: str | None = None
    response: _Response | None = None
    error: msgspec.Raw = _NULL
    status: msgspec.Raw = _NULL  # some lines carry the failure as ``status``


_LINE = msgspec.json.Decoder(_Line)
_TEXT = msgspec.json.Decoder(str | None)
_STATUS = msgspec.json.Decoder(_Status | None)


def answer_text(response: _Response) -> str:
    """The reference's reading: the first candidate's parts with text that are not
    thoughts, concatenated with no separator, stripped."""
    if not response.candidates or response.candidates[0].content is None:
        return ""
    texts = []
    for part in response.candidates[0].content.parts or []:
        if part.thought:
            continue
        try:
            text = _TEXT.decode(part.text)
        except msgspec.ValidationError:
            text = None
        if text:
            texts.append(text)
    return "".join(texts).strip()


def gemini_reply(response: _Response | None) -> dict[str, Any]:
    """A Gemini response's part of a result row, wherever it was served (Batch Mode,
    Vertex AI): its text by the reference's rule, the empty reply's error, and its
    tokens (the output counts the thoughts, as Google bills them)."""
    u = (response.usage if response is not None else None) or _Usage()
    thoughts = u.thoughts_token_count or 0
    return {
        "content": answer_text(response) if response is not None else None,
        "empty_error": EMPTY_MESSAGE,
        "prompt_tokens": u.prompt_token_count,
        "cached_tokens": u.cached_content_token_count,
        "completion_tokens": (u.candidates_token_count or 0) + thoughts,
        "reasoning_tokens": thoughts,
        "served_model": response.model_version if response is not None else None,
        "served_version": None,
        "service_tier": u.traffic_type,
    }


def read_results(paths: Sequence[Path]) -> pl.DataFrame:
    """Responses files → the common frame, every line checked: a ``response`` is a 200
    reply, an ``error`` (or ``status``) the HTTP status its code says, with the error
    object as the body's text."""
    rows: list[dict[str, Any]] = []
    read, unfit = frames.read_fitting(paths, _LINE, frames.IDS)
    for path, lineno, line in read:
        failure = line.error if bytes(line.error) != b"null" else line.status
        failed = bytes(failure) != b"null"
        if line.response is None and not failed:
            raise BatchFileError(f"{path}: line {lineno}: neither 'response' nor 'error'")
        code = None
        if failed:
            try:
                status = _STATUS.decode(failure)
            except msgspec.ValidationError:
                status = None
            code = status.code if status is not None and status.code else 500
        row = {
            "file": str(path),
            "lineno": lineno,
            "custom_id": line.key,
            "status_code": code if failed else 200,
            "has_response": True,
            "has_error": False,
            "error_code": None,
            "error_message": None,
            "body_text": bytes(failure).decode("utf-8", "replace") if failed else None,
            **gemini_reply(line.response if not failed else None),
        }
        rows.append(row)
    built = frames.from_rows(rows)
    return frames.with_unfit(built, unfit)
