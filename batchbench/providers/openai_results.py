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


def _content(raw: msgspec.Raw) -> str | None:
    """A message content's text; anything but a string reads as no content."""
    try:
        return _CONTENT.decode(raw)
    except msgspec.ValidationError:
        return None


def read_outputs(paths: Sequence[Path], empty_error: str) -> pl.DataFrame:
    """All lines of these files as the common frame, each checked; ``empty_error`` is
    what the reference calls an empty message from this service."""
    return outputs_frame(frames.read_files(paths, _LINE), empty_error)


def outputs_frame(read: Sequence[tuple[str, int, Line]], empty_error: str) -> pl.DataFrame:
    """OpenAI-shaped output lines (file, line number, line) as the common frame."""
    files = [f for f, _, _ in read]
    numbers = [n for _, n, _ in read]
    lines = [line for _, _, line in read]
    responses = [ln.response for ln in lines]
    errors = [ln.error for ln in lines]
    bodies: list[Body | None] = []
    texts: list[str | None] = []
    for file, lineno, r in zip(files, numbers, responses):
        body = None
        if r is not None:
            try:
                decoded = _BODY.decode(r.body)
            except msgspec.ValidationError as exc:
                where = f"{file}: line {lineno}"
                problem = frames.field_problem(exc)
                raise BatchFileError(f"{where}: {problem} in response.body") from None
            body = decoded if isinstance(decoded, Body) else None
        ok = r is not None and r.status_code is not None and 200 <= r.status_code < 300
        bodies.append(body)
        texts.append(None if r is None or ok else bytes(r.body).decode("utf-8", "replace"))
    return frames.build(
        {
            "file": files,
            "lineno": numbers,
            "row": range(len(lines)),
            "custom_id": [ln.custom_id for ln in lines],
            "status_code": [r.status_code if r is not None else None for r in responses],
            "has_response": [r is not None for r in responses],
            "has_error": [e is not None for e in errors],
            "error_code": [e.code if e is not None else None for e in errors],
            "error_message": [e.message if e is not None else None for e in errors],
            "body_text": texts,
            "empty_error": empty_error,
            **chat_columns(bodies),
        }
    )


def chat_columns(bodies: Sequence[Body | None]) -> dict[str, list[Any]]:
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
    }
