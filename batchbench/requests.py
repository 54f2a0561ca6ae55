"""Batch request lines and files: custom ids, bodies per stage, sharding by the limits.

A request file is written once, atomically, before its upload is even
intended, and never changes: the file on disk is exactly what was submitted.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import protocol
from ._io import storage
from .dataset import Case
from .errors import InvariantError, RunStateError

MAX_LINES = 50_000
MAX_BYTES = 200 * 1024 * 1024
_PREFIX = {"answers": "answer", "judges": "judge"}


def custom_id(stage: str, case_id: str, attempt: int) -> str:
    """``answer:<case_id>`` on the first attempt, ``answer:<case_id>:<n>`` after."""
    base = f"{_PREFIX[stage]}:{case_id}"
    return base if attempt == 1 else f"{base}:{attempt}"


@dataclass(frozen=True)
class Request:
    """One line to submit: which case, which attempt, and the exact body."""

    stage: str
    case_id: str
    attempt: int
    body: dict[str, Any]

    @property
    def custom_id(self) -> str:
        return custom_id(self.stage, self.case_id, self.attempt)

    def line(self) -> bytes:
        obj = {
            "custom_id": self.custom_id,
            "method": "POST",
            "url": protocol.ENDPOINT,
            "body": self.body,
        }
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def answer_request(
    case: Case,
    model: str,
    attempt: int,
    *,
    reasoning_effort: str | None,
    temperature: float | None,
) -> Request:
    body = protocol.answer_body(
        case, model, reasoning_effort=reasoning_effort, temperature=temperature
    )
    return Request("answers", case["case_id"], attempt, body)


def judge_request(
    case: Case, answer: str, model: str, attempt: int, *, temperature: float | None
) -> Request:
    body = protocol.judge_body(case, answer, model, temperature=temperature)
    return Request("judges", case["case_id"], attempt, body)


class _Limits:
    """The one sharding rule: how full the file being filled may get."""

    def __init__(self, max_lines: int, max_bytes: int, max_tokens: int | None) -> None:
        self.max_lines = min(max_lines, MAX_LINES)
        self.max_bytes = min(max_bytes, MAX_BYTES)
        self.max_tokens = max_tokens
        self.lines = self.size = self.tokens = 0

    def admit(self, line: bytes, tokens: int) -> bool:
        """Count the line in; False when it must start a new file (the old one is full).

        A single line over the token budget goes alone; one over the byte limit
        can never be submitted.
        """
        if len(line) > self.max_bytes:
            raise RunStateError(f"one request line is {len(line)} bytes, over the batch limit")
        full = self.lines > 0 and (
            self.lines >= self.max_lines
            or self.size + len(line) > self.max_bytes
            or (self.max_tokens is not None and self.tokens + tokens > self.max_tokens)
        )
        if full:
            self.lines = self.size = self.tokens = 0
        self.lines += 1
        self.size += len(line)
        self.tokens += tokens
        return not full


def stage_request(
    stage: str,
    case: Case,
    model: str,
    attempt: int,
    *,
    temperature: bool,
    reasoning_effort: str | None,
    answer: str | None,
) -> Request:
    """The request of one case in one stage; ``temperature`` False once the model refused it."""
    if stage == "answers":
        return answer_request(
            case,
            model,
            attempt,
            reasoning_effort=reasoning_effort,
            temperature=protocol.ANSWER_TEMPERATURE if temperature else None,
        )
    if answer is None:
        raise ValueError("a judge request needs the answer")
    return judge_request(
        case,
        answer,
        model,
        attempt,
        temperature=protocol.JUDGE_TEMPERATURE if temperature else None,
    )


def shard(
    lines: Sequence[bytes],
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    *,
    tokens: Sequence[int] | None = None,
    max_tokens: int | None = None,
) -> list[list[int]]:
    """Indices of ``lines`` grouped in order so no group exceeds any limit (the dry run)."""
    limits = _Limits(max_lines, max_bytes, max_tokens)
    groups: list[list[int]] = []
    for i, line in enumerate(lines):
        if not limits.admit(line, tokens[i] if tokens is not None else 0) or not groups:
            groups.append([])
        groups[-1].append(i)
    return groups


def write_shards(
    entries: Iterable[tuple[Any, bytes, int]],
    path_for: Callable[[int], Path],
    *,
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    max_tokens: int | None = None,
) -> list[tuple[Path, list[Any], int]]:
    """Stream ``(meta, line, tokens)`` into request files, grouped as :func:`shard` groups.

    Only the file being filled is open; a full one is fsynced and renamed into
    place before the next starts, so memory stays flat however large the run.
    Returns ``(path, metas, tokens)`` per file, in order.
    """
    limits = _Limits(max_lines, max_bytes, max_tokens)
    done: list[tuple[Path, list[Any], int]] = []
    out: Any = None
    tmp: Path | None = None
    metas: list[Any] = []
    tok = 0

    def close() -> None:
        nonlocal out, tmp
        if out is None or tmp is None:
            return
        out.flush()
        os.fsync(out.fileno())
        out.close()
        final = path_for(len(done))
        os.replace(tmp, final)
        done.append((final, metas, tok))
        out, tmp = None, None

    try:
        with storage(path_for(0).parent):
            for meta, line, t in entries:
                if not limits.admit(line, t):
                    close()
                if out is None:
                    final = path_for(len(done))
                    tmp = final.with_name(f".{final.name}.tmp")
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    out = open(fd, "wb")  # noqa: SIM115 - spans iterations; closed in close()
                    metas, tok = [], 0
                out.write(line)
                metas.append(meta)
                tok += t
            close()
    finally:
        if out is not None:
            with contextlib.suppress(OSError):  # a full disk fails the flush too
                out.close()
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
    return done


# Body fields the chat completions endpoint accepts; anything else fails a batch.
ALLOWED_BODY_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_completion_tokens",
        "max_tokens",
        "temperature",
        "top_p",
        "n",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "seed",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "user",
        "reasoning_effort",
        "metadata",
        "store",
        "service_tier",
        "modalities",
        "prediction",
        "verbosity",
        "stream",
        "stream_options",
    }
)


class PlanError(InvariantError):
    """A request file that the Batch API would reject: batchbench built it wrong."""


def check_file(lines: Sequence[bytes], where: str) -> None:
    """The Batch API's file rules: size, line count, unique ids, one model, known fields.

    Run on every file the dry run plans and on every file a run uploads.
    """
    if len(lines) > MAX_LINES:
        raise PlanError(f"{where}: {len(lines)} lines, over the {MAX_LINES} limit")
    size = sum(len(x) for x in lines)
    if size > MAX_BYTES:
        raise PlanError(f"{where}: {size} bytes, over the {MAX_BYTES} limit")
    seen: set[str] = set()
    models: set[str] = set()
    for n, raw in enumerate(lines, 1):
        obj = json.loads(raw)
        cid = obj["custom_id"]
        if cid in seen:
            raise PlanError(f"{where}: line {n}: duplicate custom_id {cid!r}")
        seen.add(cid)
        body = obj["body"]
        models.add(body.get("model"))
        unknown = sorted(set(body) - ALLOWED_BODY_FIELDS)
        if unknown:
            raise PlanError(f"{where}: line {n}: body fields not allowed: {unknown}")
        if body.get("stream") is True:
            raise PlanError(f"{where}: line {n}: stream=true is not allowed in a batch")
        if obj.get("method") != "POST" or obj.get("url") != protocol.ENDPOINT:
            raise PlanError(f"{where}: line {n}: method/url must be POST {protocol.ENDPOINT}")
    if len(models) > 1:
        raise PlanError(f"{where}: more than one model: {sorted(map(str, models))}")
