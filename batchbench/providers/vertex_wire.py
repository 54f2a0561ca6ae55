"""Vertex AI batch prediction, offline: Gemini and Claude as Vertex takes and returns them.

A model is named ``vertex/MODEL``: a Gemini model is sent the reference's Gemini
request (:mod:`.gemini_wire`), a Claude model the reference's Claude body
(:func:`.anthropic_wire.claude_body`) in Vertex's shape — ``anthropic_version``
``vertex-2023-10-16``, no model. A Gemini line is ``{"request": …}``: Vertex has no
per-line id, so the request id rides in the request's ``labels`` (a Google label
value: :func:`.ids.safe_id` with ``label``), which the predictions echo back; a
Claude line is ``{"custom_id", "request"}``. Predictions are read by those ids,
never by order: a line whose ``status`` is not empty failed, its reason and error
body in it (``Bad Request: {…}``); lines that never ran are absent.
"""

from __future__ import annotations

import http
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from ..bench.protocol import Prompt
from ..errors import BatchFileError, ConfigError, PlanError
from ..kinds import ProviderName, Stage
from . import frames
from .anthropic_wire import (
    STATUS_OF,
    AnthropicWire,
    _Message,
    claude_rendered,
    claude_reply,
    cloud_claude_body,
    is_cloud_claude,
)
from .base import Adjust, BatchError, BatchFailure, Limits, LineRules, Rendered
from .checks import encode_line, ended_without_results, request_lines
from .gemini_wire import RETRIED, GeminiWire, _Response, gemini_reply
from .ids import SAFE_ID, safe_id

PREFIX = "vertex/"
CLAUDE_VERSION = "vertex-2023-10-16"
MAX_LINES = 200_000  # requests per job
MAX_BYTES = 1024**3  # an input file
CLAUDE_JOBS = 4  # concurrent Claude batch jobs a project runs, by default
ID_LABEL = "batchbench_id"
LABEL_VALUE = re.compile(
    r"^[a-z0-9_-]{1,63}$"
)  # Google's rule for a label's value  # the request label a Gemini line's id rides in
# A job that ended without predictions: cancelled or expired before any line ran
# (sent again), or failed as a whole (they fail).
NOT_RUN = ("JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")


def model_name(model: str) -> str:
    """``vertex/gemini-2.5-flash`` → ``gemini-2.5-flash``."""
    return model.removeprefix(PREFIX)


def family(model: str) -> str:
    """The publisher of a Vertex model name (``google`` or ``anthropic``); any other is
    refused in one line, before anything is sent."""
    name = model_name(model)
    if name.startswith("gemini"):
        return "google"
    if name.startswith("claude-"):
        return "anthropic"
    raise ConfigError(
        f"model {model!r}: batchbench grades Gemini (vertex/gemini-…) and Claude"
        " (vertex/claude-…) models on Vertex AI"
    )


def failure_of(status: str, read: Any) -> tuple[int, str]:
    """A failed line's ``status`` (``Bad Request: {…}``) → the HTTP status it stands for
    and the error body the reference would have read (the JSON, else the text)."""
    reason, _, rest = status.partition(": ")
    try:
        body: Any = json.loads(rest)
        text = rest
    except json.JSONDecodeError:
        body, text = None, status
    code = read(body) if body is not None else None
    if code is None:
        phrases = {s.phrase: s.value for s in http.HTTPStatus}
        code = phrases.get(reason, 500)
    return int(code), text


def _google_code(body: Any) -> int | None:
    code = (body.get("error") or {}).get("code") if isinstance(body, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _claude_code(body: Any) -> int | None:
    kind = (body.get("error") or {}).get("type") if isinstance(body, dict) else None
    return STATUS_OF.get(kind) if isinstance(kind, str) else None


@dataclass
class VertexGeminiWire(GeminiWire):
    name: ProviderName = "vertex-gemini"
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("Gemini", RETRIED))

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        family(model)
        return super().render(prompt, model, adjust)

    def custom_id(
        self, stage: Stage, case_id: str, attempt: int, run_id: str, judge_pass: int = 1
    ) -> str:
        return safe_id(stage, case_id, attempt, run_id, judge_pass, label=True)

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        return encode_line({"request": {**rendered.body, "labels": {ID_LABEL: custom_id}}})

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """A job's input rules (its count and size), each id a unique label value, and the
        Gemini parser's own rules on each request (:meth:`.GeminiWire.check_file`)."""
        if len(lines) > MAX_LINES:
            raise PlanError(f"{where}: {len(lines)} requests, over the {MAX_LINES} limit")
        size = sum(len(x) for x in lines)
        if size > MAX_BYTES:
            raise PlanError(f"{where}: {size} bytes, over the 1 GB limit of a job's input")
        keyed = []
        for n, raw in enumerate(lines, 1):
            request = json.loads(raw).get("request")
            rid = (request.get("labels") or {}).get(ID_LABEL) if isinstance(request, dict) else None
            if not isinstance(rid, str) or not LABEL_VALUE.match(rid):
                raise PlanError(f"{where}: line {n}: its {ID_LABEL} label is not a label value")
            keyed.append(encode_line({"key": rid, "request": request}))
        super().check_file(keyed, where)

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure:
        return ended_without_results(errors, NOT_RUN)

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        return read_gemini(paths)

    def keyed_request(self, line: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A Vertex line's id rides in its request's labels. Each prediction echoes its
        request, but a reply paired with another line's request would echo the wrong one:
        the token counts are checked as the Gemini API's are."""
        request = line["request"]
        return request["labels"][ID_LABEL], request


@dataclass
class VertexClaudeWire(AnthropicWire):
    name: ProviderName = "vertex-claude"
    limits: Limits = field(
        default_factory=lambda: Limits(MAX_LINES, MAX_BYTES, max_batches=CLAUDE_JOBS)
    )

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        """The reference's Claude body in Vertex's shape: no model, the version first."""
        family(model)
        return claude_rendered(cloud_claude_body(prompt, CLAUDE_VERSION, adjust))

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        return encode_line({"custom_id": custom_id, "request": rendered.body})

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        if len(lines) > MAX_LINES:
            raise PlanError(f"{where}: {len(lines)} requests, over the {MAX_LINES} limit")
        for n, obj in request_lines(
            lines, where, id_key="custom_id", max_bytes=MAX_BYTES, limit="the 1 GB limit"
        ):
            if not SAFE_ID.match(obj["custom_id"]):
                raise PlanError(f"{where}: line {n}: custom_id is not {SAFE_ID.pattern}")
            body = obj.get("request")
            if not is_cloud_claude(body, CLAUDE_VERSION):
                raise PlanError(f"{where}: line {n}: request is not Vertex's Claude shape")

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure:
        return ended_without_results(errors, NOT_RUN)

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        return read_claude(paths)


# The fields of a predictions line that batchbench reads, typed (msgspec skips the rest).
class _Request(msgspec.Struct, gc=False):
    labels: dict[str, str] | None = None


class _GeminiLine(msgspec.Struct, gc=False):
    status: str | None = None
    request: _Request | None = None
    response: _Response | None = None


class _ClaudeLine(msgspec.Struct, gc=False):
    custom_id: str | None = None
    status: str | None = None
    response: _Message | None = None


def _row(
    path: str | Path,
    lineno: int,
    custom_id: str | None,
    status: str | None,
    has_response: bool,
    read: Callable[[Any], int | None],
) -> tuple[dict[str, Any], bool]:
    """One predictions line's row but its reply's part, and whether it is a reply: a
    non-empty ``status`` is a failed line (its reason and body; ``read`` finds the HTTP
    status in the body)."""
    where = f"{path}: line {lineno}"
    if status:
        code, body = failure_of(status, read)
    elif not has_response:
        raise BatchFileError(f"{where}: neither a response nor a failed status")
    else:
        code, body = 200, None
    row = {
        "file": str(path),
        "lineno": lineno,
        "custom_id": custom_id,
        "status_code": code,
        "has_response": True,
        "has_error": False,
        "error_code": None,
        "error_message": None,
        "body_text": body,
    }
    return row, code == 200


def read_gemini(paths: Sequence[Path]) -> pl.DataFrame:
    """``predictions.jsonl`` of a Gemini job → the common frame, each line's id its label."""
    rows = []
    for path, lineno, line in frames.read_files(paths, msgspec.json.Decoder(_GeminiLine)):
        labels = (line.request.labels if line.request is not None else None) or {}
        if ID_LABEL not in labels:
            raise BatchFileError(f"{path}: line {lineno}: its request has no {ID_LABEL} label")
        has = line.response is not None
        row, ok = _row(path, lineno, labels[ID_LABEL], line.status, has, _google_code)
        rows.append({**row, **gemini_reply(line.response if ok else None)})
    return frames.from_rows(rows)


def read_claude(paths: Sequence[Path]) -> pl.DataFrame:
    """``predictions.jsonl`` of a Claude job → the common frame, read by ``custom_id``."""
    rows = []
    for path, lineno, line in frames.read_files(paths, msgspec.json.Decoder(_ClaudeLine)):
        has = line.response is not None
        row, ok = _row(path, lineno, line.custom_id, line.status, has, _claude_code)
        rows.append({**row, **claude_reply(line.response if ok else None)})
    return frames.from_rows(rows)
