"""What every wire's request-file rules share, and what a batch without results means.

Every request line is encoded one way (compact JSON, UTF-8 kept, one ``\\n``), so a
file's bytes, its size checks and its token estimate agree across providers.

Each service refuses a request file that is too large or repeats a request id; the
wording says which (``custom_id`` or Gemini's ``key``). A batch that ended with no
result file at all was either stopped before anything ran (its requests are sent
again) or failed as a whole (they fail, in the service's words).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from ..bench.protocol import rejects_temperature
from ..errors import PlanError
from .base import Adjust, BatchFailure


def encode_line(obj: dict[str, Any]) -> bytes:
    """One request line as every service reads it: compact JSON, UTF-8, ending in \\n."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def request_lines(
    lines: Sequence[bytes], where: str, *, id_key: str, max_bytes: int, limit: str
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line of a request file (numbered from 1), once the file's size and the ids'
    uniqueness are checked; ``limit`` names the size limit for the message."""
    size = sum(len(x) for x in lines)
    if size > max_bytes:
        raise PlanError(f"{where}: {size} bytes, over {limit}")
    seen: set[str] = set()
    for n, raw in enumerate(lines, 1):
        obj = json.loads(raw)
        rid = obj.get(id_key)
        if not isinstance(rid, str):
            raise PlanError(f"{where}: line {n}: {id_key} {rid!r} is not a string")
        if rid in seen:
            raise PlanError(f"{where}: line {n}: duplicate {id_key} {rid!r}")
        seen.add(rid)
        yield n, obj


def ended_without_results(
    errors: Sequence[dict[str, Any]] | None, not_run: Sequence[str]
) -> BatchFailure:
    """A job that ended with no result file: cancelled or expired before any line ran
    (``not_run`` states; send its requests again), or failed as a whole."""
    error = (list(errors or []) or [{}])[0] or {}
    code = error.get("code")
    if code in not_run:
        return BatchFailure("resubmit", str(code), f"batch job ended {code} without results")
    return BatchFailure("fail", str(code), f"BatchJobFailed: {error.get('message') or code}")


def sends_temperature(adjust: Adjust) -> bool:
    """Whether a request still carries its temperature (the model has not refused one)."""
    return adjust.get("temperature") is not False


def temperature_fallback(status: int, body_text: str, adjust: Adjust) -> Adjust | None:
    """The reference's rule (§8): a 400 whose body mentions ``temperature``, while one was
    sent, is sent again without it (an attempt spent)."""
    if sends_temperature(adjust) and rejects_temperature(status, body_text):
        return {**adjust, "temperature": False}
    return None
