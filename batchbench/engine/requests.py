"""Request lines and files: each case's request rendered for its service, sharded by limits.

A request file is written once, atomically, before its upload is even
intended, and never changes: the file on disk is exactly what was submitted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io import durable_replace, storage
from ..bench.dataset import Case
from ..bench.grading import BEDSIDE, Grading
from ..bench.protocol import Prompt
from ..errors import BelowMinimum, InvariantError, RunStateError
from ..kinds import Stage
from ..providers.base import Adjust, Rendered, Wire


@dataclass(frozen=True)
class Request:
    """One line to submit: which case and attempt, what the model sees, and the bytes."""

    case_id: str
    attempt: int
    custom_id: str
    prompt: Prompt
    rendered: Rendered
    line: bytes


def stage_prompt(
    stage: Stage,
    case: Case,
    *,
    reasoning_effort: str | None,
    answer: str | None,
    grading: Grading = BEDSIDE,
    judge_pass: int = 1,
) -> Prompt:
    """What one case's request of a stage asks (the judges: about ``answer``; a grading
    per rubric item: about the pass's item)."""
    if stage == "answers":
        return grading.answer_prompt(case, reasoning_effort)
    if answer is None:
        raise InvariantError(f"the judge request of case {case['case_id']} needs its answer")
    return grading.judge_prompt(case, answer, judge_pass)


def build_request(
    wire: Wire,
    stage: Stage,
    case: Case,
    model: str,
    attempt: int,
    run_id: str,
    *,
    adjust: Adjust | None = None,
    reasoning_effort: str | None = None,
    answer: str | None = None,
    judge_pass: int = 1,
    grading: Grading = BEDSIDE,
) -> Request:
    """The request of one case in one stage, rendered for its service with its fallbacks
    so far (a judge's extra passes send the same body under their own ids; a grading per
    rubric item, each pass its item)."""
    prompt = stage_prompt(
        stage,
        case,
        reasoning_effort=reasoning_effort,
        answer=answer,
        grading=grading,
        judge_pass=judge_pass,
    )
    rendered = wire.render(prompt, model, adjust or {})
    custom_id = wire.custom_id(stage, case["case_id"], attempt, run_id, judge_pass)
    return Request(
        case["case_id"],
        attempt,
        custom_id,
        prompt,
        rendered,
        wire.request_line(custom_id, rendered),
    )


class _Limits:
    """The one sharding rule: how full the file being filled may get."""

    def __init__(self, max_lines: int, max_bytes: int, max_tokens: int | None) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
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


def shard(
    lines: Sequence[bytes],
    max_lines: int,
    max_bytes: int,
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
    max_lines: int,
    max_bytes: int,
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
        durable_replace(tmp, final)
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


STAGED = ".staged"


def staged(final: Path) -> Path:
    """Where a request file waits until its plan is journaled: a hidden name, which a
    bucket never receives. There a file is written once, so one whose plan a kill cut
    short would stand in the way of the plan made again (with other cases, say)."""
    return final.with_name(f".{final.name}{STAGED}")


def put_in_place(path: Path) -> Path:
    """A staged request file under its own name, its plan about to be journaled."""
    final = path.with_name(path.name[1:].removesuffix(STAGED))
    durable_replace(path, final)
    return final


def fit_minimum(requests: int, cap: int, minimum: int, most: int) -> int:
    """The most requests a batch holds so that no batch falls below the service's
    ``minimum`` (where there is one): as few batches as ``cap`` allows, else as many as
    the minimum allows, never more than ``most`` a batch."""
    if minimum <= 1 or requests <= cap:
        return cap
    batches = -(-requests // cap)
    if requests // batches < minimum:
        batches = max(1, requests // minimum)
    return min(most, -(-requests // batches))


def check_minimum(run: str, stage: Stage, requests: int, minimum: int, label: str) -> None:
    """Requests too few for a batch the service accepts are never sent as one (it would
    be refused) nor bought on demand unasked (``--on-demand-remainder``): the run stops,
    saying so."""
    if requests >= minimum:
        return
    raise BelowMinimum(
        f"{requests} {stage} request(s) of run {run!r} to send, fewer than the {minimum}"
        f" records {label} takes in one batch job (the account's minimum): nothing was sent;"
        " --on-demand-remainder sends them on demand, at the full (not the batch) price"
    )
