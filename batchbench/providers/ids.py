"""Request ids (``custom_id``): the codecs the providers use.

The journal records every request's id when it is planned, so an id is never
decoded: a result line is matched to its case by the recorded mapping, and a
new id that collides with one the run already used is refused before it is
sent (:func:`claim`). Journals written before ids were recorded hold
OpenAI requests only, whose ids :func:`openai_id` derives again.
"""

from __future__ import annotations

import hashlib
import re

from ..errors import InvariantError
from ..kinds import Stage

_PREFIX = {"answers": "answer", "judges": "judge"}
SAFE_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SAFE_CASE = re.compile(r"^[a-zA-Z0-9_-]+$")
_ALNUM_CASE = re.compile(r"^[a-zA-Z0-9]*$")
_LABEL_CASE = re.compile(r"^[a-z0-9_-]+$")


def run_token(run_id: str) -> str:
    """The run's mark where a service's names leave little room (request ids, job names,
    folders): the first 8 characters of its run id, one spelling everywhere."""
    return run_id[:8]


def openai_id(stage: Stage, case_id: str, attempt: int, judge_pass: int = 1) -> str:
    """``answer:<case_id>`` on the first attempt, ``answer:<case_id>:<n>`` after; a judge's
    extra passes (``--judge-passes``) are ``judge<p>:<case_id>[:<n>]``."""
    prefix = _PREFIX[stage] + (str(judge_pass) if judge_pass > 1 else "")
    base = f"{prefix}:{case_id}"
    return base if attempt == 1 else f"{base}:{attempt}"


def safe_id(
    stage: Stage,
    case_id: str,
    attempt: int,
    run_id: str,
    judge_pass: int = 1,
    *,
    alphanumeric: bool = False,
    label: bool = False,
) -> str:
    """An id of at most 64 characters that names the run: the one codec of the run's
    mark in request ids, for every provider.

    ``<run tag>-<a|j><attempt>-<case_id>`` when the case id fits, else the case id's
    SHA-256 after ``_`` (``-`` or ``_`` after the attempt tells the two forms apart; a
    judge's extra pass adds ``p<pass>`` to the attempt), in ``^[a-zA-Z0-9_-]{1,64}$``.
    Where the service asks for letters and digits only (Bedrock's record ids,
    ``alphanumeric``): ``<run tag><a|j><attempt>`` then ``C`` and the case id, or ``H``
    and its hash. Where the id travels as a Google label value (Vertex's Gemini lines,
    ``label``): lower case, digits, ``-`` and ``_``, at most 63. The run tag (the run
    id's first 8 characters) keeps two runs' requests apart on services whose batches
    carry no metadata: a batch found after a crash is confirmed as this run's by the
    ids of its results.
    """
    gap, plain_mark, hashed_mark, fits = (
        ("", "C", "H", _ALNUM_CASE)
        if alphanumeric
        else ("-", "-", "_", _LABEL_CASE if label else _SAFE_CASE)
    )
    most = 63 if label else 64
    head = f"{run_token(run_id)}{gap}{_PREFIX[stage][0]}{attempt}" + (
        f"p{judge_pass}" if judge_pass > 1 else ""
    )
    plain = f"{head}{plain_mark}{case_id}"
    if fits.match(case_id) and len(plain) <= most:
        return plain
    digest = hashlib.sha256(case_id.encode("utf-8")).hexdigest()
    return f"{head}{hashed_mark}{digest}"[:most]


def claim(custom_id: str, case_id: str, used: dict[str, str]) -> None:
    """Take a new request id for a case; one the run already used (a bug, or a hash
    collision) is refused before anything is written or sent."""
    other = used.get(custom_id)
    if other is not None:
        raise InvariantError(
            f"request id {custom_id!r} of case {case_id} collides with case {other}'s"
        )
    used[custom_id] = case_id
