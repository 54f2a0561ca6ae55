"""Requests sent one call at a time instead of as a batch — a flex tail, a deadline's
fallback, Bedrock's on-demand remainder: how one service makes one such call.

A client offers :class:`Calls` for the kinds it has (:meth:`.base.Client.calls`); the
run's engine (:mod:`batchbench.engine.calls`) sends them, journaling each call before
it is sent and its answer after, so a call whose outcome a crash or a lost reply left
unknown is never sent again blind, whichever folder of the run looks. A call's
answer is written as the service's batch output would hold it, so the rest of the
run reads it as any batch's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .ids import run_token

# How a submission's requests go when not as a batch: on a flex tier, at the batch price
# (a batch's tail, a deadline's fallback), or on demand at the list price (a deadline's
# fallback with --allow-list-price; Bedrock: too few records for a job), by the user's
# choice.
CallKind = Literal["flex", "ondemand"]


class OutcomeUnknown(Exception):
    """A call was sent and its reply lost on the way (no answer in time, a connection
    closed): it may have run and been billed."""


@dataclass(frozen=True)
class Answered:
    """The service answered: the output line (a reply, or a refusal it answered with —
    the reference's rules read it as a batch's line)."""

    line: dict[str, Any]


@dataclass(frozen=True)
class Busy:
    """Not taken — refused for want of capacity, or nothing listening — so nothing ran
    and nothing is billed; it may be sent again later (``why`` says which)."""

    why: str


@dataclass(frozen=True)
class Calls:
    """How one service's requests go one at a time: ``key`` is a request line's id,
    ``send`` makes one call (raising :class:`OutcomeUnknown` when its reply is lost),
    ``ok`` tells a successful output line; ``label`` and ``status`` name them for
    people."""

    kind: CallKind
    key: Callable[[dict[str, Any]], str]
    send: Callable[[dict[str, Any]], Answered | Busy]
    ok: Callable[[dict[str, Any]], bool]
    label: str  # "flex", "on-demand"
    status: str  # the made batch's status, for people
    # Before anything is paid: the endpoint the calls go to answers (a free call); a
    # wrong or silent one is said now, not when the remainder is sent, hours later.
    check: Callable[[], None] = lambda: None


def batch_id(kind: CallKind, run_id: str, sub: str) -> str:
    """The id a submission sent one call at a time goes by (it is also its output's)."""
    return f"{kind}-{run_token(run_id)}-{sub}"
