"""What journals of earlier versions said in a provider's words, read in the neutral ones.

Journals are permanent: every run ever started must still resume. Version 0.1 knew
only OpenAI (its request ids, statuses and file fields); 0.2 wrote a few of its
providers' quirks into the journal's records (a Fireworks job's parameters, its
effort fallback, the temperature fallback as an outcome kind). Those names live
here, and only here: :mod:`batchbench.engine.events` decodes old journals through
them, and the fold turns them into the neutral records (a submission's shared
parameters, a request's adjustments, an outcome that retries with them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .ids import openai_id

# 0.1: runs recorded no services; both stages were OpenAI's.
PROVIDER_OF_0_1 = "openai"
# 0.2: Plan's key for what a submission's requests share (a Fireworks job's parameters).
PLAN_SHARED_KEY = "job"
# 0.1: BatchSeen's keys for an OpenAI batch's result files.
OUTPUT_FILE_KEY = "output_file_id"
ERROR_FILE_KEY = "error_file_id"
# 0.2: what a line flagged as having sent reasoning_effort "none" had sent.
SENT_NONE: dict[str, Any] = {"effort": "none"}
# 0.2: outcome kinds that retried with a fallback, and the adjustment each stands for.
RETRY_KINDS: dict[str, dict[str, Any]] = {
    "no_temperature": {"temperature": False},
    "no_effort": {"effort": "low"},
}
# 0.1: an OpenAI batch's ended statuses.
OPENAI_ENDINGS = {"completed", "failed", "expired", "cancelled"}


def request_id(stage: str, case_id: str, attempt: int) -> str:
    """A request id 0.1 did not record (its requests were OpenAI's): derived again."""
    return openai_id(stage, case_id, attempt)  # type: ignore[arg-type]


def adjusted(kind: str, adjust: Mapping[str, Any]) -> dict[str, Any] | None:
    """The adjustment a 0.2 outcome kind retried with, on top of ``adjust``; None for a
    kind that is not one of those."""
    patch = RETRY_KINDS.get(kind)
    return None if patch is None else {**adjust, **patch}


def openai_view(
    status: str, files: tuple[str | None, str | None]
) -> tuple[str, str | None, tuple[str, ...]]:
    """``(phase, ending, files)`` of a 0.1 journal's OpenAI batch status."""
    ending = status if status in OPENAI_ENDINGS else None
    if ending:
        return "ended", ending, tuple(f for f in files if f)
    phase = {"validating": "pending", "cancelling": "cancelling"}.get(status, "running")
    return phase, None, ()
