"""A judge panel's other judges (#50): each judges the answers its panel's first run
collected, and buys none of its own.

The first judge's run is an ordinary run. Each other judge has a run of its own (its
rows, summary and journal apart, :func:`.runconfig.panel_name`) whose answers stage
is never planned: as the first run collects answers, this one takes them — the raw
file holding each answered line copied verbatim into its own ``raw/`` (raw files stay
each run's source of truth), a failed answer's error as its own error row — in one
:class:`.events.Borrowed` event, and judges them as if it had collected them itself.
The first run's journal is read again only when it has grown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .._io import atomic_write_bytes
from ..bench.dataset import Case
from ..bench.results import append_rows, row_counts
from ..errors import RunStateError
from .cases import GIVEN
from .event_records import BorrowedAnswer
from .events import Borrowed, Event
from .rows import error_row
from .runconfig import RunConfig
from .rundir import Run, open_run
from .state import RunState


class Borrower:
    """Takes what the panel's first run has answered (see the module)."""

    def __init__(
        self,
        run: Run,
        config: RunConfig,
        cases: Mapping[str, Case],
        state: Callable[[], RunState],
        record: Callable[[Event], None],
        now: Callable[[], float],
    ) -> None:
        assert config.answers_from is not None
        self.run, self.config, self.cases = run, config, cases
        self.state, self.record, self.now = state, record, now
        self.source = open_run(run.root.parent, config.answers_from)
        self._seen = -1  # the first run's journal size when last read

    def _first(self) -> RunState:
        found = self.source
        if not found.exists():
            raise RunStateError(
                f"run {self.config.name!r} judges the answers of run {found.name!r}, which"
                f" is not in {found.root.parent}"
            )
        theirs = found.load_config()
        if (theirs.answer_model, theirs.dataset_sha256, theirs.reasoning_effort) != (
            self.config.answer_model,
            self.config.dataset_sha256,
            self.config.reasoning_effort,
        ) or not set(self.config.case_ids) <= set(theirs.case_ids):
            raise RunStateError(
                f"run {found.name!r} answers other cases, or with another model, dataset or"
                f" effort, than run {self.config.name!r} judges: a panel's runs share answers"
            )
        return found.state(theirs.case_ids)

    def step(self) -> bool:
        """Take every answer the first run has ended that this run has not; False when
        there was none new."""
        size = self.source.journal_size()
        if size == self._seen:
            return False
        self._seen = size
        first, state = self._first(), self.state()
        taken: dict[str, BorrowedAnswer] = {}
        for case_id in self.config.case_ids:
            mine = state.cases[case_id]
            if mine.answers.status != "pending" or mine.answers.sub is not None:
                continue
            theirs = first.cases[case_id]
            if theirs.answers.status == "ok" and theirs.answers.source is not None:
                self._copy(theirs.answers.source)
                taken[case_id] = BorrowedAnswer(
                    theirs.answers.source,
                    theirs.answers.custom_id,
                    theirs.answers.used_temperature,
                )
            elif theirs.answers.status == "failed" and theirs.final == "error":
                taken[case_id] = BorrowedAnswer(error=theirs.error or "answer failed")
        if not taken:
            return False
        self._error_rows(taken, state)
        self.record(Borrowed(run=self.source.name, answers=taken))
        return True

    def _copy(self, file_id: str) -> None:
        """The first run's raw file, verbatim, into this run (once)."""
        mine = self.run.raw_path(file_id)
        if not mine.exists():
            atomic_write_bytes(mine, self.source.raw_path(file_id).read_bytes())

    def _error_rows(self, taken: Mapping[str, BorrowedAnswer], state: RunState) -> None:
        """The failed answers' error rows, each written once (a row written before a
        crash kept its event out of the journal is not written again)."""
        written = row_counts(self.run.results_path)
        rows = [
            error_row(self.cases[cid], self.config, self.now(), a.error or "")
            for cid, a in taken.items()
            if a.source is None and written[cid] <= state.cases[cid].rows
        ]
        if rows:
            append_rows(self.run.results_path, rows, self.config.case_ids)


class Given:
    """The answers the dataset gives (``--physician-completions``: HealthBench's ideal
    completions), taken once as the run's own in one :class:`.events.Borrowed` event
    (their source :data:`GIVEN`: the dataset, no raw file), then judged as answers are.
    Nothing of them is bought."""

    def __init__(
        self,
        config: RunConfig,
        state: Callable[[], RunState],
        record: Callable[[Event], None],
    ) -> None:
        self.config, self.state, self.record = config, state, record

    def step(self) -> bool:
        state = self.state()
        taken = {
            case_id: BorrowedAnswer(GIVEN, case_id)
            for case_id in self.config.case_ids
            if state.cases[case_id].answers.status == "pending"
        }
        if not taken:
            return False
        self.record(Borrowed(run=f"(the dataset's {self.config.answers_given})", answers=taken))
        return True
