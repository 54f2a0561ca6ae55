"""Planning: the request files of a stage's pending requests, written under a hidden name,
then each journaled as a :class:`~.events.Plan` as it is put in place.

A submission holds requests that share what the service takes per batch (their
fallbacks, whether they go on flex or on demand), in shards the service and the run's
settings allow. Where the judge's service routes identical requests together
(:attr:`~batchbench.providers.spec.ProviderSpec.passes_together`: OpenAI, whose prompt
cache sends a request "to a machine based on a hash of the initial prefix"), a case's
``--judge-passes`` requests are laid out together — one batch, side by side, each line
naming its pass — so passes 2..K can read the prefix the first wrote; elsewhere each
pass is its own batch (on Anthropic, K cold copies in one batch would each pay to write
the cache, costing more, not less).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .. import _failpoints
from ..bench.dataset import Case
from ..costs.pricing import prompt_tokens, token_counter
from ..errors import InvariantError
from ..kinds import Stage
from ..providers.base import Provider
from ..providers.ids import claim
from ..providers.registry import BY_NAME
from . import requests as files_of
from .canary import Canary
from .event_records import Line
from .events import Event, Plan
from .rows import Answers
from .runconfig import RunConfig
from .rundir import Run
from .settings import Settings
from .spend import SpendCap
from .state import RunState

Key = tuple[str, int]  # a request to plan: its case and judge pass


class Planner:
    """Writes and journals a stage's request files (:meth:`plan`)."""

    def __init__(
        self,
        run: Run,
        config: RunConfig,
        cases: Mapping[str, Case],
        providers: Mapping[Stage, Provider],
        settings: Settings,
        state: Callable[[], RunState],
        record: Callable[[Event], None],
        *,
        canary: Canary,
        answers: Answers,
        by_pass: Mapping[int, list[str]],
        spend: SpendCap | None,
    ) -> None:
        self.run, self.config, self.cases, self.providers = run, config, cases, providers
        self.settings, self.state, self.record = settings, state, record
        self.canary, self.answers, self.by_pass, self.spend = canary, answers, by_pass, spend

    def _request_path(self, stage: Stage, first: int, k: int) -> Path:
        return files_of.staged(self.run.requests_dir / f"{stage}-{first + k:04d}.jsonl")

    def together(self, stage: Stage, judge_pass: int) -> bool:
        """Whether the first pass's file takes the other passes' requests of its cases."""
        config = self.config
        return (
            stage == "judges"
            and judge_pass == 1
            and config.judge_passes > 1
            and not config.grading.per_item
            and BY_NAME[self.providers[stage].wire.name].passes_together
            and not self.canary.due.get(stage)  # a canary's few, alone
        )

    def keys(self, stage: Stage, judge_pass: int, pending: list[str]) -> list[Key]:
        """The requests to plan: each pending case's, and, laid out together, each of its
        other passes still pending, after it (a batch's, not one call at a time)."""
        if not self.together(stage, judge_pass):
            return [(case_id, judge_pass) for case_id in pending]
        state, passes = self.state(), range(2, self.config.judge_passes + 1)
        keys = []
        for case_id in pending:
            keys.append((case_id, 1))
            if any(state.via(stage, case_id)):
                continue
            case = state.cases[case_id]
            keys += [(case_id, p) for p in passes if case.stage(stage, p).status == "pending"]
        return keys

    def _request(self, state: RunState, stage: Stage, model: str, key: Key) -> files_of.Request:
        """The request of one case and judge pass, at its next attempt."""
        case_id, p = key
        st = state.cases[case_id].stage(stage, p)
        return files_of.build_request(
            self.providers[stage].wire,
            stage,
            self.cases[case_id],
            model,
            st.attempt + 1,
            self.config.run_id,
            adjust=st.adjust,
            reasoning_effort=self.config.reasoning_effort,
            answer=self.answers(case_id) if stage == "judges" else None,
            judge_pass=p,
            grading=self.config.grading,
        )

    def plan(self, stage: Stage, judge_pass: int = 1) -> None:
        """Write the request files for every pending case of a stage (and judge pass),
        then journal them."""
        state = self.state()
        model = self.config.model(stage)
        wire = self.providers[stage].wire
        budget = self.settings.max_enqueued_tokens
        counted = budget is not None or self.spend is not None  # both weigh what goes out
        count = token_counter(model)[1] if counted else None
        having = self.by_pass.get(judge_pass, self.config.case_ids)
        pending = state.pending(stage, having, judge_pass)
        if judge_pass == 1:
            pending = self.canary.first(stage, pending, wire.limits.min_lines)
        keys = self.keys(stage, judge_pass, pending)
        together = len(keys) > len(pending)
        used = state.used_ids()

        request = functools.partial(self._request, state, stage, model)

        def entries(group: list[Key], shared: str) -> Iterator[tuple[Line, bytes, int]]:
            for key in group:
                made = request(key)
                case_id = key[0]
                if _key(made.rendered.shared) != shared:
                    raise InvariantError(f"{case_id}: its request shares other parameters")
                claim(made.custom_id, case_id, used)
                tokens = prompt_tokens(made.prompt, count) if count is not None else 0
                rendered = made.rendered
                line = Line(
                    case_id,
                    made.attempt,
                    rendered.temperature,
                    made.custom_id,
                    sent=rendered.sent,
                    judge_pass=key[1] if together else 0,
                )
                yield line, made.line, tokens

        # A submission holds requests that share what the service takes per batch: cases
        # with the same fallbacks render the same, so one request of each tells.
        # A batch cut short goes in submissions of its own: on flex, or on demand (RunState.via).
        by_adjust: dict[str, list[Key]] = {}
        for key in keys:
            adjust = state.cases[key[0]].stage(stage, key[1]).adjust
            by_adjust.setdefault(_key([adjust, *state.via(stage, key[0])]), []).append(key)
        groups: dict[str, tuple[dict[str, Any] | None, tuple[bool, bool], list[Key]]] = {}
        for group in by_adjust.values():
            shared = request(group[0]).rendered.shared
            via = state.via(stage, group[0][0])
            groups.setdefault(_key([shared, *via]), (shared, via, []))[2].extend(group)
        seq = state.next_seq(stage)
        cap = min(
            self.settings.max_requests_per_batch,
            state.caps.get(stage, 10**9),
            wire.limits.max_lines,
        )
        cap = files_of.fit_minimum(len(keys), cap, wire.limits.min_lines, wire.limits.max_lines)
        batched = [k for k in keys if not any(state.via(stage, k[0]))]  # not one by one
        if batched and not self.settings.on_demand_remainder:
            label = BY_NAME[wire.name].label
            files_of.check_minimum(
                self.config.name, stage, len(batched), wire.limits.min_lines, label
            )
        files: list[tuple[Path, list[Line], int, dict[str, Any] | None, tuple[bool, bool]]] = []
        for shared, via, group in groups.values():
            made = files_of.write_shards(
                entries(group, _key(shared)),
                functools.partial(self._request_path, stage, seq + len(files)),
                max_lines=cap,
                max_bytes=min(self.settings.max_bytes_per_batch, wire.limits.max_bytes),
                max_tokens=budget,
            )
            files += [(path, lines, tokens, shared, via) for path, lines, tokens in made]
        for offset, (staged_at, lines, tokens, shared, via) in enumerate(files):
            _failpoints.hit("planned")
            path = files_of.put_in_place(staged_at)
            self.record(
                Plan(
                    sub=path.stem,
                    stage=stage,
                    seq=seq + offset,
                    path=path.name,
                    lines=lines,
                    tokens=tokens,
                    judge_pass=judge_pass,
                    shared=shared,
                    flex=via[0],
                    listed=via[1],
                )
            )


def _key(value: object) -> str:
    """A JSON value as a key (what a request's fallbacks or shared parameters are)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
