"""The rows of a run's cases, written once each as the collections end them: a case
judged in one reply (BedsideBench's judge marks every item at once) by :mod:`.rows`;
a case judged part by part (below).

A case judged part by part: HealthBench's grader is asked once per rubric item
(simple-evals' rule), each item a judge *pass* of its own (``judge<p>:`` in the request
id, one :class:`~.cases.StageState` a part). A case's row waits for every part to end;
it is then written from the raw files, each part's verdict and explanation read again
from the grader's reply as kept (the raw files are the source of truth, as for answers),
and the collection that ended it says so in the journal (``Collected.graded``).

An item the grader never answered validly within ``--max-attempts`` (simple-evals asks
for ever) is recorded failed with its error: the example's row is then an error row
that shows every item, graded or not, and the summary counts it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from ..bench import healthbench
from ..bench.dataset import Case
from ..bench.grading import Grading
from ..bench.results import append_lines, dump_row, row_counts
from ..errors import BatchFileError
from ..providers.base import Wire
from . import rows
from .collection import Collection
from .runconfig import RunConfig
from .rundir import Run
from .state import RunState
from .submission import Submission

_ENDED = ("ok", "failed", "unknown")


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


class Parts:
    """Which cases each part (judge pass) holds, and the rows of cases whose parts ended."""

    def __init__(
        self,
        run: Run,
        config: RunConfig,
        cases: Mapping[str, Case],
        wire: Wire,
        answer: Callable[[str], str],
        state: Callable[[], RunState],
    ) -> None:
        self.run, self.config, self.cases, self.wire = run, config, cases, wire
        self.grading: Grading = config.grading
        self.answer, self.state = answer, state
        counts = {c: self.grading.parts(cases[c]) for c in config.case_ids}
        most = max(max(counts.values(), default=1), config.judge_passes)
        # pass → the cases that have it (every case, for K passes of one body)
        self.by_pass: dict[int, list[str]] = {
            p: [c for c in config.case_ids if counts[c] >= p]
            if self.grading.per_item
            # K passes of one body: every case has each (the same list, no copy)
            else config.case_ids
            for p in range(2, most + 1)
        }
        self.counts = counts
        self._files: dict[str, dict[str, str]] = {}  # raw file → custom id → reply text
        self._written: Counter[str] | None = None

    def error_row(self, case: Case, config: RunConfig, now: float, error: str) -> dict[str, Any]:
        """A case's row when its answer failed, in its benchmark's shape."""
        if self.grading.per_item:
            return {**head(case, config), "finished_at": _utc(now), "error": error}
        return dict(rows.error_row(case, config, now, error))

    def read(self, case_id: str, content: str, part: int) -> list[bool]:
        """A part's reply → the verdicts of the items it decides (or JudgeReplyError)."""
        return self.grading.read_judge(self.cases[case_id], part, content)

    def ended(self, sub: Submission, result: Collection, now: float) -> dict[str, str | None]:
        """The cases this collection ends — every part of theirs ok or failed — each with
        its row written (once: a row on disk before a crash is not written again).
        None for a scored case, else the error its row says."""
        state = self.state()
        done: dict[str, str | None] = {}
        rows: list[tuple[str, str]] = []
        for cid, outcome in result.outcomes.items():
            if outcome.kind not in _ENDED:
                continue
            case_id = outcome.case_id
            if state.cases[case_id].final is not None:
                continue  # its row is written (never twice)
            grades: list[dict[str, Any]] = []
            for part in range(1, self.counts[case_id] + 1):
                found: tuple[str, str | None, str | None, str | None]
                if part == sub.judge_pass:
                    found = (outcome.kind, outcome.source, cid, outcome.detail)
                else:
                    st = state.cases[case_id].stage("judges", part)
                    found = (st.status, st.source, st.custom_id, st.error)
                kind, source, custom_id, detail = found
                if kind == "ok" and source is not None and custom_id is not None:
                    grades.append(self._grade(source, custom_id))
                elif kind in _ENDED:
                    grades.append({"criteria_met": None, "error": detail or "no reply"})
                else:
                    break  # a part still to come: the case is not ended
            else:
                row, error = self.row(case_id, grades, _utc(now))
                done[case_id] = error
                rows.append((case_id, dump_row(row)))
        written = self.written()
        due = [(c, line) for c, line in rows if written[c] <= state.cases[c].rows]
        if due:
            append_lines(self.run.results_path, due, self.config.case_ids)
            written.update(c for c, _ in due)
        return done

    def written(self) -> Counter[str]:
        """Rows per case on disk (read once, then kept up to date)."""
        if self._written is None:
            self._written = row_counts(self.run.results_path)
        return self._written

    def write_rows(
        self, sub: Submission, result: Collection, effort: str | None, now: float
    ) -> None:
        """Append the rows of the cases this collection ends (one judge reply a case, or a
        failed answer), each case's rows once. ``effort``: the reasoning effort as the
        answer model's service was sent it."""
        written = self.written()
        state = self.state()
        due = {
            cid: o
            for cid, o in result.outcomes.items()
            # a row written before a crash kept its collection out of the journal is not due
            if written[o.case_id] <= state.cases[o.case_id].rows
        }
        found = rows.rows_for(
            sub,
            due,
            result.judged,
            self.cases,
            self.config,
            effort,
            state,
            self.answer,
            now,
            self.error_row,
        )
        if found:
            append_lines(self.run.results_path, found, self.config.case_ids)
            written.update(case_id for case_id, _ in found)

    def _grade(self, source: str, custom_id: str) -> dict[str, Any]:
        if source not in self._files:
            frame = self.run.read_results(self.wire, [source])
            self._files[source] = dict(zip(frame["custom_id"], frame["content"]))
        try:
            text = self._files[source][custom_id]
        except KeyError:
            raise BatchFileError(f"raw file {source}: no reply {custom_id!r}") from None
        grade = healthbench.parse_grade(text or "")
        if grade is None:  # it was read valid when collected: the kept file changed
            raise BatchFileError(f"raw file {source}: reply {custom_id!r} no longer reads")
        return grade

    def row(
        self, case_id: str, grades: list[dict[str, Any]], now: str
    ) -> tuple[dict[str, Any], str | None]:
        """The case's row, in its benchmark's shape, under the run's head; an error row
        when an item was never graded (with what was)."""
        case = self.cases[case_id]
        fields, error = self.grading.part_row(case, grades, self.answer(case_id))
        return {**head(case, self.config), "finished_at": now, **fields}, error


def head(case: Case, config: RunConfig) -> dict[str, Any]:
    """What every HealthBench row starts with: the run's bookkeeping (``case_id``,
    ``benchmark``, the models) then simple-evals' ``prompt_id``."""
    return {
        "protocol_version": config.protocol_version,
        "case_id": case["case_id"],
        "prompt_id": case["case_id"],
        "benchmark": case["benchmark"],
        "grading_method": case["grading_method"],
        "answer_model": config.answer_model,
        "judge_model": config.judge_model,
    }
