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
import math
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import numpy as np

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


# A reply whose prompt token count lies further than this from its own request's (in
# log terms: a factor e^0.25 ≈ 1.28 either way) is far off. Real tokenizers stay well
# inside it: over the public split's 250 prompts, o200k's and cl100k's counts sit at
# most 0.17 from the fit on word pieces (tests/test_misfiled.py measures it).
FAR_OFF = 0.25
# Replies far off that condemn a file: at least two (a swap moves two), and at least
# one in 500 lines, so a long file's rare honest outlier is never a verdict.
FAR_SHARE = 0.002
# Misfiled replies between prompts of similar length land nearer: a file of 50 replies
# or more with a tenth of them 0.12 off is refused too (honest counts put about one in a
# hundred there; on fewer replies the fit itself wanders that far, so they are spared).
NEAR_OFF, NEAR_SHARE, NEAR_FROM = 0.12, 0.10, 50


def _far_off(estimated: np.ndarray, reported: np.ndarray) -> np.ndarray:
    """Each reply's distance (log ratio) from the line its file's replies follow: a least
    squares fit of counts on pieces, fitted again without the replies far off it."""
    keep = np.ones(len(estimated), dtype=bool)
    off = np.zeros(len(estimated))
    for _ in range(2):
        x, y = estimated[keep], reported[keep]
        if len(x) < 3 or np.ptp(x) == 0:
            break
        slope, base = np.polyfit(x, y, 1)
        fit = np.maximum(base + slope * estimated, 1.0)
        off = np.log(np.maximum(reported, 1.0) / fit)
        keep = np.abs(off) <= FAR_OFF
    return off


def replies_fit_their_requests(
    reported: Sequence[int | None], estimated: Sequence[int], ids: Sequence[str], where: str
) -> None:
    """Each reply's reported prompt tokens against its own request's word pieces
    (:func:`..tokens.word_pieces`, which follow any real tokenizer's count closely): over
    a file, honest counts follow one line (the tokenizer's rate, plus what every request
    shares). A reply filed under another request's key carries that request's count
    instead, far off its own line; a file with replies far off (:data:`FAR_OFF`, at least
    two and one in 500), or a long file with many a little off (:data:`NEAR_OFF`), is an
    ApiError naming the file and the worst reply, before a single answer is scored
    against another case's rubric (python-genai#1909). Requests of one length cannot tell
    replies apart: nothing is said of them."""
    known = [(i, e, r) for i, e, r in zip(ids, estimated, reported) if r is not None]
    if len(known) < 3:
        return
    e = np.array([x[1] for x in known], dtype=float)
    r = np.array([x[2] for x in known], dtype=float)
    if np.ptp(e) == 0:
        return
    n = len(known)
    signed = _far_off(e, r)
    off = np.abs(signed)
    far, near = int((off > FAR_OFF).sum()), int((off > NEAR_OFF).sum())
    if far >= max(2, math.ceil(FAR_SHARE * n)):
        count_off = far
    elif n >= NEAR_FROM and near >= math.ceil(NEAR_SHARE * n):
        count_off = near
    else:
        return
    worst = int(np.argmax(off))
    cid, _, count = known[worst]
    expected = count / math.exp(signed[worst])
    raise ApiError(
        f"{where}: {count_off} of {n} replies report prompt token counts far from their"
        f" own requests' ({cid!r}: {count} tokens, about {expected:.0f} expected): the"
        " service filed replies under other requests' keys (python-genai#1909); the file"
        " is not scored, and nothing is bought again"
    )
