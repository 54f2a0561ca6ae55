"""A service's quota of batches running at once — Vertex AI's 4 Claude jobs a project —
belongs to the account, not to one run: it is counted over every run of the jobs
folder on that service and account (a group's runs share the folder, so they are
counted too), each run read from its journal, again only when the journal grew.

A run elsewhere (another folder, another machine) is not seen: the service's own
refusal then says so, definitely, and the create waits for room (:class:`.CreateRefused`)
instead of spending the outage window.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import BatchbenchError
from ..kinds import Stage
from .rundir import Run, list_runs
from .state import RunState
from .submission import Submission

# A service as its quota sees it: the provider and the account (a project, a region).
Where = tuple[str, tuple[tuple[str, str], ...] | None]


def running(sub: Submission) -> bool:
    """Its batch is made and has not ended: it holds one of the service's places."""
    return sub.batch_id is not None and not sub.terminal


class Slots:
    """How many of a service's places are taken, for one run's pipeline."""

    def __init__(self, run: Run, state: Callable[[], RunState]) -> None:
        self.run, self.state = run, state
        self._read: dict[Path, tuple[int, list[Where]]] = {}  # folder → (journal size, …)

    def taken(self, stage: Stage, same_wire: Callable[[Submission], bool]) -> int:
        """This run's batches on the stage's service (``same_wire``), and every other
        run's of the jobs folder on the same provider and account."""
        state = self.state()
        mine = sum(1 for s in state.subs.values() if running(s) and same_wire(s))
        recorded = state.services.get(stage)
        if recorded is None:
            return mine
        where: Where = (recorded[0], recorded[2])
        return mine + sum(taken.count(where) for taken in self._others())

    def _others(self) -> list[list[Where]]:
        out = []
        for other in list_runs(self.run.root.parent):
            if other.root == self.run.root:
                continue
            size = other.journal_size()
            cached = self._read.get(other.root)
            if cached is None or cached[0] != size:
                try:
                    config = other.load_config()
                    state = other.state(config.case_ids)
                except BatchbenchError:  # a damaged run holds no place we can know of
                    continue
                places = [
                    (found[0], found[2])
                    for s in state.subs.values()
                    if running(s) and (found := state.services.get(s.stage)) is not None
                ]
                cached = self._read[other.root] = (size, places)
            out.append(cached[1])
        return out
