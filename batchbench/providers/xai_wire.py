"""xAI's Batch API, offline: OpenAI's request lines in, xAI's result pages out.

xAI takes OpenAI's upload and lines (docs.x.ai batch API: ``custom_id``, ``method``,
``url: /v1/chat/completions``, ``body``), the body the reference's OpenAI body with
xAI's model id (``xai/ID`` names it here: ``xai/grok-4.3`` → ``grok-4.3``). Its results
are its own: ``GET /v1/batches/{id}/results`` pages of ``{"results",
"pagination_token"}``, kept verbatim one page a line as the batch's raw file. A result
is ``batch_result.response.chat_get_completion`` (a chat completion, read as OpenAI's)
or ``batch_result.error``, a ``google.rpc.Status`` whose gRPC code names the HTTP
failure it was (3 → 400, 8 → 429, 13 → 500, 14 → 503…): read as that failed reply, its
error as the body, so the reference's rules (the temperature fallback, the retried
statuses) apply to it as to OpenAI's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec
import polars as pl

from ..errors import BatchFileError
from ..kinds import ProviderName
from . import frames
from .base import Limits, LineRules
from .openai_results import Line, LineError, Response, outputs_frame
from .openai_wire import EMPTY_MESSAGE, MAX_BYTES, MAX_LINES, RETRIED, OpenAIWire
from .prefixes import XAI as PREFIX

# google.rpc.Code → the HTTP status it stands for (google.rpc's own mapping)
STATUS_OF: Final = {
    1: 499,  # CANCELLED
    2: 500,  # UNKNOWN
    3: 400,  # INVALID_ARGUMENT
    4: 504,  # DEADLINE_EXCEEDED
    5: 404,  # NOT_FOUND
    7: 403,  # PERMISSION_DENIED
    8: 429,  # RESOURCE_EXHAUSTED
    9: 400,  # FAILED_PRECONDITION
    11: 400,  # OUT_OF_RANGE
    12: 501,  # UNIMPLEMENTED
    13: 500,  # INTERNAL
    14: 503,  # UNAVAILABLE
    16: 401,  # UNAUTHENTICATED
}


# An HTTP failure → the google.rpc.Code xAI writes for it (the first of STATUS_OF's).
CODE_OF: Final = {http: code for code, http in reversed(STATUS_OF.items())}


def result_page(custom_id: str, status: int, body: object) -> dict[str, object]:
    """One reply as a results page holds it (a call at the list price written as the
    batch's own results are, so :meth:`XAIWire.read_results` reads it): a completion, or
    the failure as the ``google.rpc.Status`` its HTTP status stands for."""
    if 200 <= status < 300:
        outcome: dict[str, object] = {"response": {"chat_get_completion": body}}
    else:
        said = body.get("error") if isinstance(body, dict) else body
        message = said if isinstance(said, str) else json.dumps(said)
        outcome = {"error": {"code": CODE_OF.get(status, 2), "message": message}}
    return {"results": [{"batch_request_id": custom_id, "batch_result": outcome}]}


class _Status(msgspec.Struct, gc=False):
    code: int | None = None
    message: str | None = None


class _Outcome(msgspec.Struct, gc=False):
    response: dict[str, msgspec.Raw] | None = None
    error: msgspec.Raw = msgspec.Raw(b"null")


class _Result(msgspec.Struct, gc=False):
    batch_request_id: str | None = None
    batch_result: _Outcome | None = None


class _Page(msgspec.Struct, gc=False):
    results: list[_Result] | None = None


_PAGE = msgspec.json.Decoder(_Page)
_STATUS = msgspec.json.Decoder(_Status)


@dataclass
class XAIWire(OpenAIWire):
    name: ProviderName = "xai"
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))
    rules: LineRules = field(default_factory=lambda: LineRules("xAI", RETRIED))
    model_prefix: str = PREFIX

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        """Each file's pages, one a line (every line checked), their results in order."""
        for p in paths:
            _check_text(Path(p))
        read: list[tuple[str, int, Line]] = []
        places: dict[str, int] = {}  # a result's place in its file, from 1
        for path, _, page in frames.read_files(paths, _PAGE):
            for r in page.results or []:
                places[path] = places.get(path, 0) + 1
                read.append((path, places[path], _line(r, path)))
        return outputs_frame(read, EMPTY_MESSAGE)


def _check_text(path: Path) -> None:
    """Every page is UTF-8 text; a result that is not is named by its place in the file
    (its page's results, in order), as a line is by its number."""
    data = frames.map_file(path)
    try:
        frames.check_utf8(data, path)
    except BatchFileError:
        before = 0
        for page in bytes(data).splitlines():
            bad = frames.non_utf8_result(page)
            if bad is not None:
                raise BatchFileError(f"{path}: result {before + bad}: not UTF-8 text") from None
            try:
                before += len(_PAGE.decode(page).results or [])
            except msgspec.DecodeError:
                break  # said as the line it is, below
        raise


def _line(result: _Result, path: str) -> Line:
    """A result as OpenAI's line: a completion as a 200 reply; an error as the failed reply
    its gRPC code names (an error without one: a failure of the line)."""
    outcome = result.batch_result or _Outcome()
    completion = (outcome.response or {}).get("chat_get_completion")
    if completion is not None:
        return Line(result.batch_request_id, Response(200, completion), None)
    if bytes(outcome.error) == b"null":
        raise BatchFileError(f"{path}: result {result.batch_request_id!r} has no answer")
    status = _STATUS.decode(outcome.error)
    http = STATUS_OF.get(status.code or 0)
    if http is None:
        return Line(result.batch_request_id, None, LineError(str(status.code), status.message))
    body = msgspec.Raw(b'{"error": ' + bytes(outcome.error) + b"}")
    return Line(result.batch_request_id, Response(http, body), None)
