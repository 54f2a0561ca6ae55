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
machine sharing its bucket) sees the same sums; ``--max-cost`` stays the estimate's
refusal before anything is bought.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..bench.protocol import ANSWER_MAX_COMPLETION_TOKENS, JUDGE_MAX_COMPLETION_TOKENS
from ..costs.pricing import Pricing, cost
from ..costs.rollup import run_cost
from ..errors import BatchbenchError, ConfigError
from ..formats import usd
from ..kinds import Stage
from .runconfig import RunConfig
from .state import RunState
from .submission import Submission

# Each request's output allowance, as the protocol asks it: the most it can be billed for.
MAX_OUTPUT: dict[Stage, int] = {
    "answers": ANSWER_MAX_COMPLETION_TOKENS,
    "judges": JUDGE_MAX_COMPLETION_TOKENS,
}


class SpendCapReached(BatchbenchError):
    """The next billable call would cross ``--max-spend``: nothing more was bought."""

    exit_code = 6


@dataclass(frozen=True)
class SpendCap:
    usd: float
    pricing: Pricing

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
        model = config.model(sub.stage)
        off = self.pricing.discount(config.providers[sub.stage], model).fraction
        output = len(sub.lines) * MAX_OUTPUT[sub.stage]
        found = cost(self.pricing.price(model), sub.tokens, 0, output, batch_discount=off)
        return found["batch_usd"] or 0.0

    def billed(self, state: RunState, config: RunConfig) -> float:
        total = run_cost(state.usage, config.models, self.pricing, config.providers)["total"]
        return total["priced_batch_usd"] or 0.0

    def committed(self, state: RunState, config: RunConfig, but: str | None = None) -> float:
        """Every submission bought (or whose create may have been) and not yet collected,
        at its worst: its results, whenever they come, are billed."""
        return sum(self.worst(s, config) for s in state.subs.values() if _owed(s) and s.id != but)

    def before_buying(self, sub: Submission, state: RunState, config: RunConfig) -> None:
        """Raise :class:`SpendCapReached` when buying ``sub`` could take the run past the
        cap (nothing is bought)."""
        billed = self.billed(state, config)
        committed = self.committed(state, config, but=sub.id)
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


def _owed(sub: Submission) -> bool:
    """Bought, or may have been (a create with no answer yet), and not yet collected."""
    made = sub.batch_id is not None or sub.create_open or bool(sub.landing)
    return not sub.collected and (made or bool(sub.candidates))
