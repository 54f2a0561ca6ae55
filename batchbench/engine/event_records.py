"""The plain records the journal's events carry (:mod:`.events`): a submission's request
lines, what each request came to, an answer borrowed from another run. Written as JSON
arrays or objects inside their event's line; never a line of their own."""

from __future__ import annotations

from typing import Any

import msgspec

from ..kinds import Stage
from ..providers import legacy


class Line(msgspec.Struct, array_like=True, omit_defaults=True):
    """One request of a submission: which case, which attempt, whether it sent temperature,
    its id, what its wire noted of it (:attr:`Rendered.sent`; 0.2: a flag; 0.1: no id),
    and, in a submission of several judge passes (:mod:`.planning`), its pass (0: the
    submission's one)."""

    case_id: str
    attempt: int
    sent_temperature: bool
    custom_id: str | None = None
    legacy_flag: bool = False  # 0.2: a note its wire made then (:mod:`providers.legacy`)
    sent: dict[str, Any] | None = None
    judge_pass: int = 0

    def id(self, stage: Stage) -> str:
        return self.custom_id or legacy.request_id(stage, self.case_id, self.attempt)

    def note(self) -> dict[str, Any] | None:
        """What the wire noted of this request when it was sent."""
        return self.sent if self.sent is not None or not self.legacy_flag else legacy.SENT_NONE


class BorrowedAnswer(msgspec.Struct, omit_defaults=True):
    """One case's answer as the run it was borrowed from holds it (:class:`Borrowed`)."""

    source: str | None = None  # the raw file holding its line (None: the answer failed)
    custom_id: str | None = None
    temperature: bool | None = None  # whether its request carried temperature
    error: str | None = None  # its error row's, when it failed


class CaseOutcome(msgspec.Struct, array_like=True, omit_defaults=True):
    """What one request came to (:data:`~batchbench.kinds.OutcomeKind`; 0.2's two more kinds
    read by :mod:`providers.legacy`); for ``retry``, its wire's adjustments to send again."""

    kind: str
    detail: str | None
    source: str | None  # raw file id holding the successful line
    custom_id: str
    adjust: dict[str, Any] | None = None
