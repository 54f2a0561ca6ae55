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

import msgspec

from ..bench.protocol import rejects_temperature
from ..errors import ApiError, PlanError
from .base import Adjust, BatchError, BatchFailure

_ENCODER = msgspec.json.Encoder()


def encode_line(obj: dict[str, Any]) -> bytes:
    """One request line as every service reads it: compact JSON, UTF-8, ending in \\n —
    the bytes ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`` writes, made
    by msgspec, several times faster (a request file can be a gigabyte)."""
    return _ENCODER.encode(obj) + b"\n"


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
    errors: Sequence[BatchError] | None, not_run: Sequence[str]
) -> BatchFailure:
    """A job that ended with no result file: cancelled or expired before any line ran
    (``not_run`` states; send its requests again), or failed as a whole."""
    error = (list(errors or []) or [BatchError(None, None)])[0]
    code = error.code
    if code in not_run:
        return BatchFailure("resubmit", str(code), f"batch job ended {code} without results")
    return BatchFailure("fail", str(code), f"BatchJobFailed: {error.message or code}")


def sends_temperature(adjust: Adjust) -> bool:
    """Whether a request still carries its temperature (the model has not refused one)."""
    return adjust.get("temperature") is not False


def temperature_fallback(status: int, body_text: str, adjust: Adjust) -> Adjust | None:
    """The reference's rule (§8): a 400 whose body mentions ``temperature``, while one was
    sent, is sent again without it (an attempt spent)."""
    if sends_temperature(adjust) and rejects_temperature(status, body_text):
        return {**adjust, "temperature": False}
    return None


def replies_fit_their_requests(
    reported: Sequence[int], estimated: Sequence[int], ids: Sequence[str], where: str
) -> None:
    """Each reply's reported prompt tokens against its own request's length: over a file,
    the two follow one line (the tokenizer's rate, plus what every request shares, such
    as the system message). Replies filed under other requests' keys break it: the
    counts stop following the lengths (a correlation under 0.5, where the lengths differ
    enough to tell), or a reply's count lies far off its request's. Either is an ApiError
    naming the file and the worst reply, before a single answer is scored against another
    case's rubric (python-genai#1909)."""
    n = len(reported)
    if n < 3:
        return
    mean_e, mean_r = sum(estimated) / n, sum(reported) / n
    spread_e = sum((e - mean_e) ** 2 for e in estimated)
    spread_r = sum((r - mean_r) ** 2 for r in reported)
    if spread_e == 0 or mean_e <= 0:
        return  # requests of one length: their counts cannot tell them apart
    slope = sum((e - mean_e) * (r - mean_r) for e, r in zip(estimated, reported)) / spread_e
    base = mean_r - slope * mean_e
    worst = max(zip(ids, estimated, reported), key=lambda x: abs(x[2] - (base + slope * x[1])))
    cid, e, r = worst
    expected = base + slope * e
    varied = (spread_e / n) ** 0.5 / mean_e >= 0.05  # lengths that differ by 5% or more
    correlation = 0.0 if spread_r == 0 else slope * (spread_e / spread_r) ** 0.5
    if (n >= 8 and varied and correlation < 0.5) or abs(r - expected) > max(0.3 * expected, 16):
        raise ApiError(
            f"{where}: replies report prompt token counts that do not fit their own"
            f" requests ({cid!r}: {r} tokens, about {max(expected, 0):.0f} expected;"
            f" across the {n} replies the counts follow the requests' lengths at"
            f" {correlation:.2f}): the service filed replies under other requests' keys;"
            " the file is not scored, and nothing is bought again"
        )
