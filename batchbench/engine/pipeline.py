"""The state machine that advances a run, one journaled action at a time.

``Pipeline.step()`` reads the folded state, picks the single next useful action, journals
the intent, does it, and journals the outcome. After a crash the loop repeats at most one
action, and every action is safe to repeat: an upload is merely orphaned, a create is
preceded by a look for the batch it may have made, a download rewrites the same bytes,
and a case's rows are written once (the journal counts them). What a collected batch
means is :mod:`.collection`'s, rows are :mod:`.rows`', and :class:`.group.Group` loops.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import polars as pl

from .. import _failpoints
from ..bench.dataset import Case
from ..bench.scoring import rubric_frame
from ..clock import SYSTEM, Clock
from ..errors import ConfigError
from ..kinds import STAGES, Stage
from ..providers.base import Provider, Wire
from ..providers.registry import BY_NAME
from ..reporting import quiet
from . import late, together
from .borrow import Borrower, Given
from .calls import call_kind, unknown_detail
from .canary import Canary
from .cancelling import take_asked_cancel
from .candidates import check_candidate
from .collection import Collection, RetryLimits, collect
from .events import Event
from .parts import Parts
from .planning import Planner
from .rows import Answers, append_pass_rows, pass_rows
from .runconfig import RunConfig
from .rundir import Run
from .settings import Settings
from .slots import Slots
from .spend import SpendCap
from .state import RunState
from .submission import Submission
from .submit import Submitter
from .turnaround import Forecast


class Pipeline:
    def __init__(
        self,
        run: Run,
        config: RunConfig,
        cases: Mapping[str, Case],
        providers: Mapping[Stage, Provider],
        settings: Settings,
        *,
        warn: Callable[[str], None] = quiet,
        clock: Clock = SYSTEM,
        window_from: float | None = None,
        spend: SpendCap | None = None,
    ) -> None:
        self.run = run
        self.spend = spend
        self.config = config
        self.cases = cases
        self.providers = providers
        self.settings = settings
        self.warn = warn  # what the user should know of the service's doings (stderr)
        self.clock = clock
        run.repair()  # the caller holds the run's lock
        self.state: RunState = run.state(config.case_ids)
        self._journal_size = run.journal_size()
        self.limits = RetryLimits(
            settings.max_retries, settings.max_attempts, settings.hold_seconds
        )
        given = config.answers_given  # the dataset's answers (its ideal completions)
        self.answers = Answers(
            run,
            providers["answers"].wire,
            lambda: self.state,
            {c: str(dict(cases[c]).get(given)) for c in config.case_ids} if given else None,
        )
        self.grading = config.grading
        self.parts = Parts(
            run, config, cases, providers["judges"].wire, self.answers, lambda: self.state
        )
        self._cancel_asked_at = float("-inf")  # a run in a bucket: cancel.json last looked for
        self.submitter = Submitter(
            run,
            config,
            providers,
            self.record,
            lambda: self.state,
            clock=clock,
            max_ambiguous_creates=settings.max_ambiguous_creates,
            warn=warn,
            outage_seconds=settings.outage_seconds,
            window_from=window_from,
            create_wait=settings.create_wait,
            look_every=settings.poll_interval,
            spend=spend,
        )
        self.slots = Slots(run, lambda: self.state)  # a quota of batches at once
        self.canary = Canary(run.root.parent, config, providers, settings.canary, warn)
        self.late = late.Late(
            self.submitter,
            settings.resubmit_after,
            settings.tail_flex,
            warn,
            config,
            lambda: Forecast.of_folder(run.root.parent),
        )
        self.planner = Planner(
            run,
            config,
            cases,
            providers,
            settings,
            lambda: self.state,
            self.record,
            canary=self.canary,
            answers=self.answers,
            by_pass=self.parts.by_pass,
            spend=spend,
        )
        self._rubric: pl.DataFrame | None = None
        # a judge panel's other judge: the first run's answers, taken; or the dataset's
        self.borrower: Borrower | Given | None = None
        if config.answers_given is not None:
            self.borrower = Given(config, lambda: self.state, self.record)
        elif config.answers_from is not None:
            self.borrower = Borrower(
                run, config, cases, lambda: self.state, self.record, clock.time
            )

    @property
    def rubric(self) -> pl.DataFrame:
        """The run's rubric rows, for joining judge decisions (built on first use)."""
        if self._rubric is None:
            self._rubric = rubric_frame([self.cases[c] for c in self.config.case_ids])
        return self._rubric

    # journal ----------------------------------------------------------------
    def record(self, event: Event) -> None:
        self.state.apply(self.run.record(event, self.clock.time()))
        self._journal_size = self.run.journal_size()

    def catch_up(self) -> None:
        """Read what another process appended to the journal (``cancel``) since, and take
        a cancel asked of this machine (a run in a bucket: :mod:`.cancelling`)."""
        if self.run.journal_size() != self._journal_size:
            self.state = self.run.state(self.config.case_ids)
            self._journal_size = self.run.journal_size()
        now = self.clock.time()
        if self.run.home.leased and now - self._cancel_asked_at >= self.settings.poll_interval:
            self._cancel_asked_at = now  # once a poll (a GET): and before every create
            take_asked_cancel(self.submitter, self.warn)

    # decisions --------------------------------------------------------------
    def done(self) -> bool:
        return self.state.finished(self.config.judge_passes)

    def step(self) -> bool:
        """Do the next action that needs no waiting; False when only waiting remains."""
        self.submitter.calls.adopt_tails()  # another folder of the run cut one short
        st = self.state
        for sub in st.subs.values():
            if not sub.uploaded and sub.batch_id is None:
                self.submitter.upload(sub)
                return True
        for sub in st.subs.values():
            if sub.batch_id is None and sub.candidates:  # after a lost create, untagged
                ended = [c for c, v in sub.candidates.items() if v and v.phase == "ended"]
                if ended and not self.submitter.owed.later(sub):
                    check_candidate(self.submitter, sub, ended[0])
                    return True
                continue  # wait for one to end: only its results can tell
            if sub.batch_id is None and not st.cancelled:
                if st.holds.get(sub.stage, 0) > self.clock.time() or not self._fits_budget(sub):
                    continue
                if self.run.home.leased and take_asked_cancel(self.submitter, self.warn):
                    return True  # a cancel asked from another machine: nothing bought
                if self.submitter.create(sub, st.batch_ids()):
                    return True
        # Plan before collecting the next file: the judges of a collected answer
        # file go out at once, not after every answer file is in.
        if not st.cancelled:
            if self.borrower is not None and self.borrower.step():
                return True
            for stage in STAGES:
                if stage == "answers" and self.borrower is not None:
                    continue  # never bought here: taken from the panel's first run
                if self.canary.holds(self.state, stage):
                    continue  # its canary first: the rest waits for its results
                if self.state.pending(stage, self.config.case_ids):
                    self.planner.plan(stage)
                    return True
            for judge_pass, having in self.parts.by_pass.items():
                if self.canary.holds(self.state, "judges"):
                    break
                if self.state.pending("judges", having, judge_pass):
                    self.planner.plan("judges", judge_pass)
                    return True
        for sub in st.subs.values():
            if sub.terminal and not sub.collected and not self.submitter.owed.later(sub):
                missing = [f for f in sub.result_files() if f not in sub.downloaded]
                if missing and not sub.settled:  # settled: what arrived is what counts
                    self.submitter.download(sub, missing[0])
                    return True
                self._collect(sub)
                return True
        if self.late.act(st, self.clock.time()):
            return True
        if self.settings.delete_remote_files:
            for sub in st.subs.values():
                if sub.collected and not sub.remote_deleted:
                    self.submitter.delete_remote(sub)
                    return True
        return False

    def _fits_budget(self, sub: Submission) -> bool:
        """Release a file only while the service runs fewer of the run's batches than it
        takes at once, and the model's estimated in-flight tokens stay in budget."""
        wire = self.providers[sub.stage].wire
        most = wire.limits.max_batches
        same = lambda s: self.providers[s.stage].wire.name == wire.name  # noqa: E731
        if most is not None and self.slots.taken(sub.stage, same) >= most:
            return False
        budget = self.settings.max_enqueued_tokens
        if budget is None:
            return True
        model = self.config.model(sub.stage)
        flying = sum(s.tokens for s in self.in_flight() if self.config.model(s.stage) == model)
        return flying == 0 or flying + sub.tokens <= budget

    def in_flight(self) -> list[Submission]:
        return self.state.in_flight()

    # downloading and collecting ------------------------------------------------
    def _collect(self, sub: Submission) -> None:
        wire = self.providers[sub.stage].wire
        files = sub.result_files()
        if sub.settled:  # the user settled its owed results: what arrived counts
            files = [f for f in files if f in sub.downloaded]
        frame = None
        if files or sub.view is None or sub.view.ending != "failed":
            kept = [self.run.raw_path(f) for f in files]
            frame = self.submitter.owed.read(sub, kept, lambda: self.run.read_results(wire, files))
            if frame is None:  # owed: waited for, bounded (never bought again)
                return
        parts = together.split(sub, frame) if sub.packed else [(sub, frame)]
        del frame  # each part's rows held by its collection only (:meth:`_collected`)
        results = []
        while parts:
            results.append(self._collected(*parts.pop(0), wire))
        result = results[0] if len(results) == 1 else together.merged(results)
        for line in result.anomalies:
            self.warn(f"warning: {line}")
        if result.notice:
            self.warn(result.notice)
        _failpoints.hit("rows_written")
        self.record(result.event(sub))
        self.canary.collected(sub, result.outcomes)
        if result.stop:  # the run cannot go on as asked: one line, nothing more is sent
            provider = self.providers[sub.stage]
            raise ConfigError(
                f"{BY_NAME[provider.wire.name].label} at {provider.client.service.base_url}"
                f" refused batch {sub.batch_id} for {self.config.model(sub.stage)}: {result.stop};"
                " nothing of it ran or was billed"
            )

    def _collected(self, sub: Submission, frame: pl.DataFrame | None, wire: Wire) -> Collection:
        """One pass's outcomes (a submission's only one, but for a packed one's), its rows
        written: before the journal line that counts them."""
        part = sub.judge_pass
        items = {  # this file's cases' (not the dataset's: 100,000 lists at each collection)
            line.case_id: self.grading.items_of(self.cases[line.case_id], part)
            for line in sub.lines
        }
        per_item = sub.stage == "judges" and self.grading.per_item
        kind = call_kind(sub, wire)
        unknown = {
            cid: unknown_detail(kind, cid)
            for cid in sub.ids()
            if kind is not None and cid in self.state.calls_open
        }
        result = collect(
            sub,
            frame,
            self.state,
            self.limits,
            self.rubric,
            items,
            self.clock.time(),
            wire,
            unknown,
            read=functools.partial(self.parts.read, part=part) if per_item else None,
        )
        del frame  # read: not held while the rows are written (a million decisions' replies)
        if per_item:  # the cases whose last part this is: their rows
            result.graded = self.parts.ended(sub, result, self.clock.time())
        elif sub.judge_pass == 1:
            effort = self.providers["answers"].wire.effort(self.config.reasoning_effort)
            self.parts.write_rows(sub, result, effort, self.clock.time())
        if sub.stage == "judges" and self.config.judge_passes > 1:
            append_pass_rows(
                self.run,
                pass_rows(sub.judge_pass, result.outcomes, result.judged, self.cases),
            )
        return result
