"""Batch request lines and files: custom ids, bodies per stage, sharding by the limits.

A request file is written once, atomically, before its upload is even
intended, and never changes: the file on disk is exactly what was submitted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import protocol
from .errors import RunStateError

MAX_LINES = 50_000
MAX_BYTES = 200 * 1024 * 1024
STAGES = ("answers", "judges")
_PREFIX = {"answers": "answer", "judges": "judge"}


def custom_id(stage: str, case_id: str, attempt: int) -> str:
    """``answer:<case_id>`` on the first attempt, ``answer:<case_id>:<n>`` after."""
    base = f"{_PREFIX[stage]}:{case_id}"
    return base if attempt == 1 else f"{base}:{attempt}"


def parse_custom_id(value: str) -> tuple[str, str, int] | None:
    """``(stage, case_id, attempt)``, or None for an id batchbench never makes."""
    parts = value.split(":")
    stage = {"answer": "answers", "judge": "judges"}.get(parts[0])
    if stage is None or len(parts) not in (2, 3) or not parts[1]:
        return None
    if len(parts) == 3:
        if not parts[2].isdigit() or int(parts[2]) < 2:
            return None
        return stage, parts[1], int(parts[2])
    return stage, parts[1], 1


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
    case: dict[str, Any],
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
    case: dict[str, Any], answer: str, model: str, attempt: int, *, temperature: float | None
) -> Request:
    body = protocol.judge_body(case, answer, model, temperature=temperature)
    return Request("judges", case["case_id"], attempt, body)


def shard(
    lines: Sequence[bytes],
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    *,
    tokens: Sequence[int] | None = None,
    max_tokens: int | None = None,
) -> list[list[int]]:
    """Indices of ``lines`` grouped in order so no group exceeds any limit.

    ``max_tokens`` (with per-line ``tokens``) keeps a file's estimated prompt
    tokens under an enqueued-token budget; a single line over it goes alone.
    """
    max_lines = min(max_lines, MAX_LINES)
    max_bytes = min(max_bytes, MAX_BYTES)
    groups: list[list[int]] = []
    current: list[int] = []
    size = 0
    tok = 0
    for i, line in enumerate(lines):
        if len(line) > max_bytes:
            raise RunStateError(f"one request line is {len(line)} bytes, over the batch limit")
        t = tokens[i] if tokens is not None else 0
        over_tokens = max_tokens is not None and tok + t > max_tokens
        if current and (len(current) >= max_lines or size + len(line) > max_bytes or over_tokens):
            groups.append(current)
            current, size, tok = [], 0, 0
        current.append(i)
        size += len(line)
        tok += t
    if current:
        groups.append(current)
    return groups


def write_shards(
    entries: Iterable[tuple[Any, bytes, int]],
    path_for: Callable[[int], Path],
    *,
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    max_tokens: int | None = None,
) -> list[tuple[Path, list[Any], int]]:
    """Stream ``(meta, line, tokens)`` into request files, each within every limit.

    Only the file being filled is open; a full one is fsynced and renamed into
    place before the next starts, so memory stays flat however large the run.
    Returns ``(path, metas, tokens)`` per file, in order.
    """
    max_lines = min(max_lines, MAX_LINES)
    max_bytes = min(max_bytes, MAX_BYTES)
    done: list[tuple[Path, list[Any], int]] = []
    out: Any = None
    tmp: Path | None = None
    metas: list[Any] = []
    size = tok = 0

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
        for meta, line, t in entries:
            if len(line) > max_bytes:
                raise RunStateError(f"one request line is {len(line)} bytes, over the limit")
            if out is not None and (
                len(metas) >= max_lines
                or size + len(line) > max_bytes
                or (max_tokens is not None and tok + t > max_tokens)
            ):
                close()
            if out is None:
                final = path_for(len(done))
                tmp = final.with_name(f".{final.name}.tmp")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                out = open(fd, "wb")  # noqa: SIM115 - spans iterations; closed in close()
                metas, size, tok = [], 0, 0
            out.write(line)
            metas.append(meta)
            size += len(line)
            tok += t
        close()
    finally:
        if out is not None:
            out.close()
            if tmp is not None and tmp.exists():
                tmp.unlink()
    return done
