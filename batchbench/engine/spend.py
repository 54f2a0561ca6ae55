"""A hard cap on what a run spends (#67.1: ``--max-spend USD``), held before every
billable call.

What counts: what was **billed** — every collected reply's tokens, priced at the batch
price of its venue (the run's cost, :func:`..costs.rollup.run_cost`) — and what is
**committed**: every batch in flight at its worst case, its requests' input tokens as
planned and each request's whole output allowance (``max_tokens``: the most a service may
bill it for). Before each create (a batch, a canary, a tail's calls on flex), the batch's
own worst case is added: a create that would take billed + committed past the cap is not
made, and the run stops in one line saying what was spent, what is committed and what
is left unbought (exit 6); raise the cap and the same command goes on. The overshoot is
at most nothing: what is in flight was counted at its worst before it was bought.

Both are read from the journal, so every process advancing the run (a cron tick, another
machine sharing its bucket) sees the same sums; ``--max-spend-over group`` adds the other
runs of the command, ``jobs-folder`` every run of the jobs folder (a team's bucket).
``--max-cost`` stays the estimate's refusal before anything is bought.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..bench.protocol import ANSWER_MAX_COMPLETION_TOKENS, JUDGE_MAX_COMPLETION_TOKENS
from ..costs.pricing import Pricing, cost
from ..costs.rollup import run_cost
from ..errors import BatchbenchError, ConfigError
from ..formats import usd
from ..kinds import Stage
from .runconfig import RunConfig
from .rundir import list_runs
from .state import RunState
from .submission import Submission

# Each request's output allowance, as the protocol asks it: the most it can be billed for.
MAX_OUTPUT: dict[Stage, int] = {
    "answers": ANSWER_MAX_COMPLETION_TOKENS,
    "judges": JUDGE_MAX_COMPLETION_TOKENS,
}


def worst_usd(
    pricing: Pricing,
    provider: str,
    model: str,
    stage: Stage,
    input_tokens: int,
    requests: int,
    listed: bool = False,
) -> float | None:
    """The most ``requests`` of a stage can be billed: their input and each one's whole
    output allowance, at the venue's batch price — or, sent on demand (``listed``), at
    the list price (None: the model has no price)."""
    off = 0.0 if listed else pricing.discount(provider, model).fraction
    output = requests * MAX_OUTPUT[stage]
    return cost(pricing.price(model), input_tokens, 0, output, batch_discount=off)["batch_usd"]


class SpendCapReached(BatchbenchError):
    """The next billable call would cross ``--max-spend``: nothing more was bought."""

    exit_code = 6


Scope = Literal["run", "group", "jobs-folder"]
Spending = list[tuple[Callable[[], RunState], RunConfig]]  # runs under one cap: state, config
SCOPES: tuple[Scope, ...] = ("run", "group", "jobs-folder")


@dataclass(frozen=True)
class SpendCap:
    usd: float
    pricing: Pricing
    # What the other runs under the same cap have billed and committed (0: a run's own).
    others: Callable[[], float] = lambda: 0.0

    def check_priced(self, config: RunConfig) -> None:
        """A cap needs a price for every model it spends on (else it could not be held)."""
        for stage, model in config.models.items():
            if self.pricing.price(model) is None:
                why = self.pricing.why_unpriced(model)
                raise ConfigError(
                    f"--max-spend: {model} ({stage}) has no price ({why}), so no cap can be"
                    " held on it: give --pricing FILE with its price"
                )

    def worst(self, sub: Submission, config: RunConfig) -> float:
        """The most a submission can be billed: its planned input tokens and every
        request's whole output allowance, at its venue's batch price."""
        stage, provider = sub.stage, config.providers[sub.stage]
        model = config.model(stage)
        found = worst_usd(
            self.pricing, provider, model, stage, sub.tokens, len(sub.lines), sub.listed
        )
        return found or 0.0

    def billed(self, state: RunState, config: RunConfig) -> float:
        billed = run_cost(
            state.usage, config.models, self.pricing, config.providers, state.listed_usage
        )
        total = billed["total"]
        return total["priced_batch_usd"] or 0.0

    def committed(self, state: RunState, config: RunConfig, but: str | None = None) -> float:
        """Every submission bought (or whose create may have been) and not yet collected,
        at its worst: its results, whenever they come, are billed."""
        return sum(self.worst(s, config) for s in state.subs.values() if _owed(s) and s.id != but)

    def before_buying(self, sub: Submission, state: RunState, config: RunConfig) -> None:
        """Raise :class:`SpendCapReached` when buying ``sub`` could take the run past the
        cap (nothing is bought)."""
        billed = self.billed(state, config)
        committed = self.committed(state, config, but=sub.id) + self.others()
        this = self.worst(sub, config)
        if billed + committed + this <= self.usd:
            return
        unbought = sum(
            len(s.lines) for s in state.subs.values() if not _owed(s) and not s.collected
        )
        raise SpendCapReached(
            f"--max-spend {usd(self.usd)}: spent {usd(billed)}, committed {usd(committed)} in"
            f" flight (at its worst); the next batch ({sub.id}, {len(sub.lines)} requests)"
            f" could cost {usd(this)}, past the cap — {unbought} planned requests left"
            " unbought; raise --max-spend and run the same command again"
        )


def spend_cap(
    usd: float | None,
    scope: Scope,
    pricing: Pricing,
    config: RunConfig,
    jobs_dir: Path,
    group: Spending,
) -> SpendCap | None:
    """The cap a run is held to (None: no --max-spend): its own spending, or with the other
    runs of its ``group`` (this command's: their pipelines' states, ``group`` filled as
    they start), or of its whole jobs folder (a team's bucket: every run's journal, read
    at each check). Every model must be priced."""
    if usd is None:
        return None
    SpendCap(usd, pricing).check_priced(config)

    def others() -> float:
        if scope == "group":
            found = [(state(), c) for state, c in group if c.run_id != config.run_id]
        elif scope == "jobs-folder":
            found = []
            for run in list_runs(jobs_dir):
                other = run.load_config()
                if other.run_id != config.run_id:
                    found.append((run.state(other.case_ids), other))
        else:
            return 0.0
        cap = SpendCap(usd, pricing)
        return sum(cap.billed(st, c) + cap.committed(st, c) for st, c in found)

    return SpendCap(usd, pricing, others)


def _owed(sub: Submission) -> bool:
    """Bought, or may have been (a create with no answer yet), and not yet collected."""
    made = sub.batch_id is not None or sub.create_open or bool(sub.landing)
    return not sub.collected and (made or bool(sub.candidates))
