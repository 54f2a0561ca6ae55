"""Fireworks batch inference, offline: the reference's body split into what varies per
line and what the job carries, the dataset's rules, and the output read into the frame.

The reference sends Fireworks (``../shared/spec/reference-behaviour.md`` §9)
``{"model", "messages", "max_tokens": 32000, "reasoning_effort": E or "none",
"temperature": 1}``. In a batch inference job the model and the shared
parameters are the job's (``inferenceParameters``: ``maxTokens``,
``temperature``, and ``extraBody`` for the effort) and a dataset line is
``{"custom_id", "body": {"messages"}}``; the service merges them back, so the
model receives the reference's body. A request whose parameters differ (its
temperature refused, or its ``none`` effort refused and sent as ``low``) goes
into another job (:attr:`Rendered.shared` differs). The output dataset holds a
results file (``{"custom_id", "response": <chat completion>}``) and an error file
(``{"custom_id", "error": {"code", "message"}}``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from ..bench.protocol import BODY_TEXT_LIMIT, Prompt
from ..errors import BatchFileError, PlanError
from ..kinds import ProviderName, Stage
from . import frames
from .base import Adjust, BatchError, BatchFailure, Limits, LineRules, Rendered
from .checks import (
    encode_line,
    ended_without_results,
    request_lines,
    sends_temperature,
    temperature_fallback,
)
from .ids import safe_id
from .openai_results import Body, chat_columns

MAX_LINES = 1_000_000  # "no upper limit on the number of requests"
MAX_BYTES = 150 * 1024 * 1024  # the single-request dataset upload
RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504})  # as for Anthropic, in the reference
EMPTY_MESSAGE = "Fireworks returned an empty message"
_NOT_RUN = ("JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")


@dataclass
class FireworksWire:
    name: ProviderName = "fireworks"
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("Fireworks", RETRIED))

    def effort(self, asked: str | None) -> str | None:
        """The reference sends ``max`` to Fireworks as ``max``: every effort as asked."""
        return asked

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        """The line carries the messages; the job the rest of the reference's body (its
        ``inferenceParameters``: the requests a job holds share them)."""
        asked = self.effort(prompt.reasoning_effort)
        effort = asked or adjust.get("effort") or "none"
        job: dict[str, Any] = {"maxTokens": prompt.max_tokens}
        temperature = sends_temperature(adjust)
        if temperature:
            job["temperature"] = prompt.temperature
        job["extraBody"] = json.dumps({"reasoning_effort": effort}, separators=(",", ":"))
        body: dict[str, Any] = {
            "messages": [{"role": "system", "content": prompt.system}, *prompt.messages()]
        }
        if prompt.json_mode:  # a judge (ours: the reference judges on OpenAI), in JSON mode
            body["response_format"] = {"type": "json_object"}
        sent = {"effort": "none"} if effort == "none" else None
        return Rendered(body, temperature, job, sent)

    def fallback(
        self, status: int, body_text: str, sent: Mapping[str, Any] | None, adjust: Adjust
    ) -> Adjust | None:
        """The reference's rules: a 400 naming ``reasoning_effort`` when ``none`` was sent
        is sent again with ``low``; else the temperature rule."""
        named = "reasoning_effort" in body_text[:BODY_TEXT_LIMIT].lower()
        if status == 400 and (sent or {}).get("effort") == "none" and named:
            return {**adjust, "effort": "low"}
        return temperature_fallback(status, body_text, adjust)

    def custom_id(
        self, stage: Stage, case_id: str, attempt: int, run_id: str, judge_pass: int = 1
    ) -> str:
        return safe_id(stage, case_id, attempt, run_id, judge_pass)

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        obj = {"custom_id": custom_id, "body": rendered.body}
        return encode_line(obj)

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """A dataset's rules: one upload's size, unique ids, bodies without a model."""
        limit = "the 150 MB of one dataset upload"
        for n, obj in request_lines(
            lines, where, id_key="custom_id", max_bytes=MAX_BYTES, limit=limit
        ):
            body = obj.get("body")
            if not isinstance(body, dict) or {"model", "method", "url"} & set(body):
                raise PlanError(f"{where}: line {n}: a body without model, method or url")

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure:
        """A job that ended without output (:func:`.checks.ended_without_results`)."""
        return ended_without_results(errors, _NOT_RUN)

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        return read_results(paths)

    def check_replies(self, frame: pl.DataFrame, requests: Sequence[bytes], where: str) -> None:
        """Nothing: this service is not known to file a reply under another request."""


class _Line(msgspec.Struct, gc=False):
    custom_id: str | None = None
    response: Body | None = None
    error: msgspec.Raw = msgspec.Raw(b"null")


class _Code(msgspec.Struct, gc=False):
    code: int | str | None = None


_LINE = msgspec.json.Decoder(_Line)
_CODE = msgspec.json.Decoder(_Code | None)


def _status(error: msgspec.Raw) -> int:
    """An error line's HTTP status (its ``code``); one without a number reads as a 500."""
    try:
        found = _CODE.decode(error)
    except msgspec.ValidationError:
        return 500
    code = found.code if found is not None else None
    return code if isinstance(code, int) and 100 <= code < 600 else 500


def read_results(paths: Sequence[Path]) -> pl.DataFrame:
    """The output dataset's files → the common frame: a ``response`` is a 200 reply read
    as a chat completion; an ``error`` the HTTP status its code says, its text the body."""
    read, unfit = frames.read_fitting(paths, _LINE, frames.IDS)
    for file, lineno, line in read:
        if line.response is None and bytes(line.error) == b"null":
            raise BatchFileError(f"{file}: line {lineno}: neither 'response' nor 'error'")
    files = [f for f, _, _ in read]
    numbers = [n for _, n, _ in read]
    lines = [line for _, _, line in read]
    failed = [bytes(ln.error) != b"null" for ln in lines]
    bodies = [None if bad else ln.response for ln, bad in zip(lines, failed)]
    built = frames.build(
        {
            "file": files,
            "lineno": numbers,
            "row": range(len(lines)),
            "custom_id": [ln.custom_id for ln in lines],
            "status_code": [_status(ln.error) if bad else 200 for ln, bad in zip(lines, failed)],
            "has_response": [True] * len(lines),
            "has_error": [False] * len(lines),
            "error_code": [None] * len(lines),
            "error_message": [None] * len(lines),
            "body_text": [
                bytes(ln.error).decode("utf-8", "replace") if bad else None
                for ln, bad in zip(lines, failed)
            ],
            "empty_error": EMPTY_MESSAGE,
            **chat_columns(bodies),
        }
    )
    return frames.with_unfit(built, unfit)
