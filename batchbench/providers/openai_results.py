"""OpenAI Batch API output and error files → the common frame, every line checked.

Files are read over a memory map with msgspec against a typed schema of just
the fields we use (6x faster than polars' NDJSON reader here, leaving message
contents undecoded until needed); when a file does not decode (a garbage
line), it is read again line by line only to name the line and the field. The
same reader serves every OpenAI-shaped output (Fireworks' included).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from ..errors import BatchFileError
from . import frames

# The fields of an output line that batchbench reads, typed: msgspec checks every
# line is JSON and these fields have these types, and skips everything else
# without building it. ``content`` and ``body`` are kept as their JSON text (a
# Raw): a content that is not a string reads as none, and a failed reply's body
# is wanted as text (the temperature rule and error rows read it so).
_NULL = msgspec.Raw(b"null")


class _Message(msgspec.Struct, gc=False):
    content: msgspec.Raw = _NULL


class _Choice(msgspec.Struct, gc=False):
    message: _Message | None = None


class _PromptDetails(msgspec.Struct, gc=False):
    cached_tokens: int | None = None


class _CompletionDetails(msgspec.Struct, gc=False):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None


class Body(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    model: str | None = None  # the model that served the reply (a snapshot of the alias)
    system_fingerprint: str | None = None
    service_tier: str | None = None  # the tier it was processed on, as the reply says


class Response(msgspec.Struct, gc=False):
    status_code: int | None = None
    body: msgspec.Raw = _NULL


class LineError(msgspec.Struct, gc=False):
    code: str | None = None
    message: str | None = None


class Line(msgspec.Struct, gc=False):
    custom_id: str | None = None
    response: Response | None = None
    error: LineError | None = None


_LINE = msgspec.json.Decoder(Line)
_BODY = msgspec.json.Decoder(Body | str | None)
_CONTENT = msgspec.json.Decoder(str | None)


def _content(content: msgspec.Raw | str | None) -> str | None:
    """A message content's text: already text (as :class:`_TextMessage` reads it), or its
    JSON read, where anything but a string reads as no content."""
    if content is None or isinstance(content, str):
        return content
    try:
        return _CONTENT.decode(content)
    except msgspec.ValidationError:
        return None


# The same fields as they are on a good day: every reply a 2xx chat completion whose
# content is text. Such files are read in one pass (a reply's body is not kept as JSON
# and read again); any other file is read with the fields above (:func:`outputs_frame`).
class _TextMessage(msgspec.Struct, gc=False):
    content: str | None = None


class _TextChoice(msgspec.Struct, gc=False):
    message: _TextMessage | None = None


class _TextBody(msgspec.Struct, gc=False):
    choices: list[_TextChoice] | None = None
    usage: _Usage | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    service_tier: str | None = None


class _TextResponse(msgspec.Struct, gc=False):
    status_code: int | None = None
    body: _TextBody | str | None = None


class _TextLine(msgspec.Struct, gc=False):
    custom_id: str | None = None
    response: _TextResponse | None = None
    error: LineError | None = None


_TEXT_LINE = msgspec.json.Decoder(_TextLine)


def read_outputs(paths: Sequence[Path], empty_error: str) -> pl.DataFrame:
    """All lines of these files as the common frame, each checked; ``empty_error`` is
    what the reference calls an empty message from this service."""
    try:
        read = frames.read_files(paths, _TEXT_LINE)
    except BatchFileError:
        read = None  # not as on a good day, or not readable: the full reading says which
    if read is None or any(not _ok(ln.response) for _, _, ln in read if ln.response):
        return outputs_frame(frames.read_files(paths, _LINE), empty_error)
    responses = [ln.response for _, _, ln in read]
    bodies = [
        r.body if r is not None and isinstance(r.body, _TextBody) else None for r in responses
    ]
    return frames.build(
        {
            **_line_columns(read),
            "body_text": [None] * len(read),  # no failed reply
            "empty_error": empty_error,
            **chat_columns(bodies),
        }
    )


def _ok(r: Response | _TextResponse) -> bool:
    return r.status_code is not None and 200 <= r.status_code < 300


def _line_columns(read: Sequence[tuple[str, int, Line | _TextLine]]) -> dict[str, list[Any]]:
    """Where each line is, its request, status and line error."""
    responses = [ln.response for _, _, ln in read]
    errors = [ln.error for _, _, ln in read]
    return {
        "file": [f for f, _, _ in read],
        "lineno": [n for _, n, _ in read],
        "row": list(range(len(read))),
        "custom_id": [ln.custom_id for _, _, ln in read],
        "status_code": [r.status_code if r is not None else None for r in responses],
        "has_response": [r is not None for r in responses],
        "has_error": [e is not None for e in errors],
        "error_code": [e.code if e is not None else None for e in errors],
        "error_message": [e.message if e is not None else None for e in errors],
    }


def outputs_frame(read: Sequence[tuple[str, int, Line]], empty_error: str) -> pl.DataFrame:
    """OpenAI-shaped output lines (file, line number, line) as the common frame."""
    bodies: list[Body | None] = []
    texts: list[str | None] = []
    unfit: dict[int, str] = {}  # a reply whose body does not fit: that line's failure
    for n, (file, lineno, line) in enumerate(read):
        r, body = line.response, None
        if r is not None:
            try:
                decoded = _BODY.decode(r.body)
            except msgspec.ValidationError as exc:
                problem = frames.field_problem(exc)
                unfit[n] = f"{file}: line {lineno}: not in the service's documented form"
                unfit[n] += f" ({problem} in response.body)"
                decoded = None
            body = decoded if isinstance(decoded, Body) else None
        bodies.append(body)
        texts.append(None if r is None or _ok(r) else bytes(r.body).decode("utf-8", "replace"))
    columns = _line_columns(read)
    for n, said in unfit.items():  # a 500 (retried, never scored), not the file's stop
        columns["status_code"][n], texts[n] = 500, said
    return frames.build(
        {
            **columns,
            "body_text": texts,
            "empty_error": empty_error,
            **chat_columns(bodies),
        }
    )


def chat_columns(bodies: Sequence[Body | _TextBody | None]) -> dict[str, list[Any]]:
    """A chat completion's answer text and usage, per line (a line without one: nulls).
    Every OpenAI-shaped reply reads so (Fireworks' too)."""
    usages = [b.usage if b is not None else None for b in bodies]
    messages = [b.choices[0].message if b is not None and b.choices else None for b in bodies]
    prompt = [u.prompt_tokens_details if u is not None else None for u in usages]
    completion = [u.completion_tokens_details if u is not None else None for u in usages]
    return {
        "content": [_content(m.content) if m is not None else None for m in messages],
        "prompt_tokens": [u.prompt_tokens if u is not None else None for u in usages],
        "cached_tokens": [d.cached_tokens if d is not None else None for d in prompt],
        "completion_tokens": [u.completion_tokens if u is not None else None for u in usages],
        "reasoning_tokens": [d.reasoning_tokens if d is not None else None for d in completion],
        "served_model": [b.model if b is not None else None for b in bodies],
        "served_version": [b.system_fingerprint if b is not None else None for b in bodies],
        "service_tier": [b.service_tier if b is not None else None for b in bodies],
    }
