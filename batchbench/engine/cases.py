"""One case's place in a run: per stage (and per extra judge pass) how far it got, what
it used up, and its final row's outcome — the part of the fold (:mod:`.state`) each
case holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..kinds import Stage, StageStatus

GIVEN = "dataset"  # the source of an answer the dataset gave (no raw file holds it)


@dataclass(slots=True)
class StageState:
    """One case in one stage."""

    status: StageStatus = "pending"
    attempt: int = 0
    adjust: dict[str, Any] = field(default_factory=dict)  # the wire's fallbacks so far
    transients: int = 0  # attempts used up by retried replies
    losses: int = 0  # requests the service lost (not counted against the retries)
    invalid: int = 0  # invalid judge replies so far
    sub: str | None = None
    source: str | None = None  # raw file id holding the successful line
    custom_id: str | None = None  # the successful line's custom id
    used_temperature: bool | None = None  # whether the successful request carried temperature
    error: str | None = None  # why it failed, where no row says it (a part of a case)


@dataclass(slots=True)
class CaseState:
    case_id: str
    answers: StageState = field(default_factory=StageState)
    judges: StageState = field(default_factory=StageState)
    passes: dict[int, StageState] = field(default_factory=dict)  # judge passes 2..K
    started: float | None = None
    final: Literal["scored", "error"] | None = None  # once its row is written
    error: str | None = None
    unknown: bool = False  # its error: a call of unknown outcome (redone only when asked)
    rows: int = 0  # result rows written for it so far (one per final outcome)

    def stage(self, name: Stage, judge_pass: int = 1) -> StageState:
        """The case in a stage; a judge's extra passes (``--judge-passes``) each their own."""
        if name == "answers":
            return self.answers
        if judge_pass == 1:
            return self.judges
        return self.passes.setdefault(judge_pass, StageState())

    def reopen(self) -> None:
        """A case whose last row is an error is not done: a new invocation redoes it.

        It restarts from the stage that failed (a failed judge judges the kept
        answer again) with a fresh retry budget, as a new invocation of the
        reference would; attempt numbers go on, so every ``custom_id`` stays new.
        """
        if self.final != "error":
            return
        self.final, self.error, self.started, self.unknown = None, None, None, False
        for st in (self.answers, self.judges, *self.passes.values()):
            if st.status == "failed":
                st.status = "pending"
            st.transients = st.invalid = st.losses = 0
            st.adjust = {}  # a new invocation starts from the reference's request again
