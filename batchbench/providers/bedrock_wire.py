"""Amazon Bedrock batch inference, offline: Claude's request in Bedrock's shape, records,
and the job's output read into the common frame.

What the model is sent and how its reply reads are the reference's Claude rules
(``../shared/spec/reference-behaviour.md`` §9, as :mod:`.anthropic_wire` applies them):
``max_tokens`` 32000, the system prompt at top level, never a temperature, the
effort as ``output_config.effort``; the answer is the non-empty text blocks joined,
thinking skipped, an empty text the reference's error. Bedrock's own shape
(``../shared/spec/provider-batch-apis.md`` §5.3–5.4): each record is ``{"recordId",
"modelInput"}``, the input carries ``anthropic_version: bedrock-2023-05-31`` and no
``model`` (the job names it), record ids stay alphanumeric, a job holds at most
50,000 records and at least the account's minimum (a quota, 100 by default:
``BATCHBENCH_BEDROCK_MIN_RECORDS`` when the account's differs). Output lines come in
any order, ``{recordId, modelInput, modelOutput}`` or ``{…, error: {errorCode,
errorMessage}}``; records that never ran are absent (sent again, as lost).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
import polars as pl

from ..bench.protocol import Prompt
from ..errors import BatchFileError, ConfigError, PlanError
from ..kinds import ProviderName, Stage
from . import frames
from .anthropic_wire import (
    RETRIED,
    _Message,
    claude_fallback,
    claude_rendered,
    claude_reply,
    cloud_claude_body,
    is_cloud_claude,
)
from .base import Adjust, BatchError, BatchFailure, Limits, LineRules, Rendered
from .checks import encode_line, request_lines
from .ids import safe_id

PREFIX: Final = "bedrock/"
VERSION: Final = "bedrock-2023-05-31"
MAX_RECORDS = 50_000
MAX_BYTES = 1024 * 1024 * 1024  # 1 GB a file
MIN_RECORDS = 100  # the default quota (third-party sources; the account's may differ)
_ALNUM = re.compile(r"^[a-zA-Z0-9]{1,64}$")
# Where the model id names a Claude model: anthropic.claude-…, or an inference profile
# (us.anthropic.claude-…, an ARN ending so).
_CLAUDE = re.compile(r"(^|[./])anthropic\.claude-")
_REGION = re.compile(r"^(us|eu|apac|global|us-gov|jp|au)\.")
# Error codes Bedrock writes as words rather than statuses, and the status each stands for.
STATUS_OF = {
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "ResourceNotFoundException": 404,
    "ModelTimeoutException": 408,
    "ThrottlingException": 429,
    "ModelErrorException": 500,
    "InternalServerException": 500,
    "ServiceUnavailableException": 503,
}


def model_id(model: str) -> str:
    """``bedrock/ID`` → ``ID``: the model id or inference profile the job names."""
    return model.removeprefix(PREFIX)


def claude(model: str) -> str:
    """The Claude model id, or a one-line refusal: the reference's rules are Claude's."""
    found = model_id(model)
    if not _CLAUDE.search(found):
        raise ConfigError(
            f"{model!r} is not a Claude model: batchbench grades Claude models on Bedrock"
            " (bedrock/anthropic.claude-… or an inference profile such as"
            " bedrock/us.anthropic.claude-…), by the reference runner's Claude rules"
        )
    return found


def priced_as(model: str) -> str:
    """The Claude model a Bedrock id is priced as (``us.anthropic.claude-sonnet-4-5-
    20250929-v1:0`` → ``claude-sonnet-4-5-20250929``: the table's dated-family rule
    does the rest)."""
    found = _REGION.sub("", model_id(model).split("/")[-1])
    found = found.split(".", 1)[-1] if "." in found else found
    return re.sub(r"-v\d+(:\d+)?$", "", found)


def min_records(env: Mapping[str, str] = os.environ) -> int:
    value = env.get("BATCHBENCH_BEDROCK_MIN_RECORDS", "")
    if not value:
        return MIN_RECORDS
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"BATCHBENCH_BEDROCK_MIN_RECORDS must be a positive integer: {value!r}")
    return int(value)


@dataclass
class BedrockWire:
    name: ProviderName = "bedrock"
    limits: Limits = field(
        default_factory=lambda: Limits(MAX_RECORDS, MAX_BYTES, min_lines=min_records())
    )
    rules: LineRules = field(default_factory=lambda: LineRules("Anthropic", RETRIED))

    def effort(self, asked: str | None) -> str | None:
        """As the reference sends Claude: every effort as asked."""
        return asked

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        """The reference's Claude body in Bedrock's shape: no model, the version first."""
        claude(model)
        return claude_rendered(cloud_claude_body(prompt, VERSION, adjust))

    def fallback(
        self, status: int, body_text: str, sent: Mapping[str, Any] | None, adjust: Adjust
    ) -> Adjust | None:
        """The temperature rule, for a judge's only (:func:`.anthropic_wire.claude_fallback`)."""
        return claude_fallback(status, body_text, sent, adjust)

    def custom_id(
        self, stage: Stage, case_id: str, attempt: int, run_id: str, judge_pass: int = 1
    ) -> str:
        """An alphanumeric record id naming the run (:func:`.ids.safe_id`'s form for
        services that take letters and digits only, as Bedrock's documents ask)."""
        return safe_id(stage, case_id, attempt, run_id, judge_pass, alphanumeric=True)

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        return encode_line({"recordId": custom_id, "modelInput": rendered.body})

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """A job's input rules: records, size, alphanumeric unique ids, Bedrock's shape."""
        if len(lines) > self.limits.max_lines:
            raise PlanError(f"{where}: {len(lines)} records, over the {MAX_RECORDS} limit")
        for n, obj in request_lines(
            lines, where, id_key="recordId", max_bytes=MAX_BYTES, limit="the 1 GB limit"
        ):
            if not _ALNUM.match(obj["recordId"]):
                raise PlanError(f"{where}: line {n}: recordId is not alphanumeric")
            body = obj.get("modelInput")
            if not is_cloud_claude(body, VERSION):
                raise PlanError(f"{where}: line {n}: modelInput is not Bedrock's Claude shape")

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure:
        """A job that failed as a whole (its input unreadable, its output unwritable, a
        quota): the service's words, as every request's error."""
        message = (list(errors or []) or [BatchError(None, None)])[0].message
        return BatchFailure("fail", None, f"BatchValidationError: {message}")

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        return read_output(paths)

    def check_replies(self, frame: pl.DataFrame, requests: Sequence[bytes], where: str) -> None:
        """Nothing: the output echoes each record's own input under its own id."""


class _Error(msgspec.Struct, gc=False):
    errorCode: int | str | None = None
    errorMessage: str | None = None


class _Record(msgspec.Struct, gc=False):
    recordId: str | None = None
    modelOutput: _Message | None = None
    error: _Error | None = None


_RECORD = msgspec.json.Decoder(_Record)
_ENCODE = msgspec.json.Encoder()


def _status(error: _Error) -> int:
    code = error.errorCode
    if isinstance(code, int):
        return code
    if isinstance(code, str) and code.isdigit():
        return int(code)
    return STATUS_OF.get(code or "", 500)


def read_output(paths: Sequence[Path]) -> pl.DataFrame:
    """``*.jsonl.out`` files → the common frame: a ``modelOutput`` is a 200 reply read by
    the reference's Claude rule, an ``error`` the status its code stands for with the
    error object as the body's text."""
    rows: list[dict[str, Any]] = []
    for path, lineno, line in frames.read_files(paths, _RECORD):
        message, error = line.modelOutput, line.error
        if (message is None) == (error is None):
            raise BatchFileError(f"{path}: line {lineno}: needs one of modelOutput or error")
        row = {
            "file": str(path),
            "lineno": lineno,
            "custom_id": line.recordId,
            "status_code": 200 if message is not None else _status(error),  # type: ignore[arg-type]
            "has_response": True,
            "has_error": False,
            "error_code": None,
            "error_message": None,
            "body_text": _ENCODE.encode(error).decode() if error is not None else None,
            **claude_reply(message),
        }
        rows.append(row)
    return frames.from_rows(rows)
