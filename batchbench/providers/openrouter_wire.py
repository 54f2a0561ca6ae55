"""OpenRouter's Batch API, offline: requests inline in the create call, results inline in
the batch object (openrouter.ai/docs batch quickstart).

A request is ``{"custom_id", "body"}``, the body the reference's OpenAI body (the
reference's rules for an OpenAI-shaped API) with OpenRouter's model id
(``openrouter/ID`` names it here: ``openrouter/anthropic/claude-opus-5`` →
``anthropic/claude-opus-5``); a batch holds one model, up to 5,000 requests and 200 MB.
The raw file of a batch is its object as the service sent it, verbatim; its ``results``
are read as OpenAI's output lines. A result holds exactly one of ``response`` and
``error``: an error whose ``error_type`` names an HTTP failure (``invalid_request``,
``rate_limit_exceeded``, ``provider_overloaded``…) is read as that failed reply, its
error as the body, so the reference's rules (the temperature fallback, the retried
statuses) apply to it as to OpenAI's; any other error is a failure of the line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec
import polars as pl

from ..errors import BatchFileError, PlanError, TruncatedFileError
from ..kinds import ProviderName
from . import frames
from .base import Limits, LineRules, Rendered
from .checks import encode_line, request_lines
from .openai_results import Line, LineError, Response, outputs_frame
from .openai_wire import EMPTY_MESSAGE, RETRIED, OpenAIWire
from .prefixes import OPENROUTER as PREFIX

MAX_LINES = 5_000
MAX_BYTES = 200 * 1024 * 1024
# OpenRouter's canonical error types (the SDK's APIErrorType) and the HTTP status each
# stands for (openrouter.ai/docs api errors)
STATUS_OF: Final = {
    "invalid_request": 400,
    "invalid_prompt": 400,
    "context_length_exceeded": 400,
    "max_tokens_exceeded": 400,
    "token_limit_exceeded": 400,
    "string_too_long": 400,
    "authentication": 401,
    "payment_required": 402,
    "permission_denied": 403,
    "content_policy_violation": 403,
    "not_found": 404,
    "timeout": 408,
    "precondition_failed": 412,
    "payload_too_large": 413,
    "unprocessable": 422,
    "rate_limit_exceeded": 429,
    "server": 500,
    "provider_unavailable": 502,
    "provider_overloaded": 503,
}


class _Error(msgspec.Struct, gc=False):
    message: str | None = None
    type: str | None = None
    error_type: str | None = None


class _Result(msgspec.Struct, gc=False):
    custom_id: str | None = None
    response: Response | None = None
    error: msgspec.Raw = msgspec.Raw(b"null")


class _Results(msgspec.Struct, gc=False):
    results: list[_Result] | None = None


_RESULTS = msgspec.json.Decoder(_Results)
_ERROR = msgspec.json.Decoder(_Error)


@dataclass
class OpenRouterWire(OpenAIWire):
    name: ProviderName = "openrouter"
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("OpenRouter", RETRIED))
    model_prefix: str = PREFIX

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        return encode_line({"custom_id": custom_id, "body": rendered.body})

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """A batch's rules: its count and size, unique ids, one model."""
        if len(lines) > MAX_LINES:
            raise PlanError(f"{where}: {len(lines)} requests, over the {MAX_LINES} limit")
        models = set()
        limit = "the 200 MB of one OpenRouter batch"
        for n, obj in request_lines(
            lines, where, id_key="custom_id", max_bytes=MAX_BYTES, limit=limit
        ):
            body = obj.get("body")
            if not isinstance(body, dict):
                raise PlanError(f"{where}: line {n}: no body")
            models.add(str(body.get("model")))
        if len(models) > 1:
            raise PlanError(f"{where}: {len(models)} models in one batch")

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        return read_inline(paths)


def read_inline(paths: Sequence[Path]) -> pl.DataFrame:
    """Each file one batch object, verbatim, its ``results`` read as OpenAI's output lines
    (the line number is the result's place, from 1). A file that does not parse whole was
    cut short: it is downloaded again."""
    read: list[tuple[str, int, Line]] = []
    for p in paths:
        data = Path(p).read_bytes()
        try:
            data.decode("utf-8")  # msgspec skips the fields it is not asked for unchecked
            found = _RESULTS.decode(data)
        except msgspec.ValidationError as exc:
            raise BatchFileError(f"{p}: {exc}") from None
        except (msgspec.DecodeError, UnicodeDecodeError):
            raise _undecodable(data, Path(p)) from None
        read += [(str(p), n, _line(r)) for n, r in enumerate(found.results or [], 1)]
    return outputs_frame(read, EMPTY_MESSAGE)


def _undecodable(data: bytes, path: Path) -> Exception:
    """Why a batch object does not decode: a page in its place, a result that is not
    UTF-8 (named by its place), or a transfer cut short (downloaded again)."""
    frames.check_tail(data.rstrip(b"\n") + b"\n", path)  # a page is said as one
    try:
        json.loads(data.decode("utf-8", "surrogateescape"))
    except (json.JSONDecodeError, RecursionError):
        return TruncatedFileError(f"{path}: not a whole batch object")
    bad = frames.non_utf8_result(data)
    if bad is not None:
        return BatchFileError(f"{path}: result {bad}: not UTF-8 text")
    return BatchFileError(f"{path}: not UTF-8 text")


def _line(result: _Result) -> Line:
    """A result as OpenAI's line: an HTTP failure as a failed reply, its error the body."""
    if bytes(result.error) == b"null":
        return Line(result.custom_id, result.response, None)
    error = _ERROR.decode(result.error)
    status = STATUS_OF.get(error.error_type or "")
    if status is not None:
        body = msgspec.Raw(b'{"error": ' + bytes(result.error) + b"}")
        return Line(result.custom_id, Response(status, body), None)
    return Line(result.custom_id, None, LineError(error.type, error.message))
