"""What a new invocation does with a run it finds: a finished run is said to be complete
(a cron tick asks no service), a cancelled one is taken up again only by the user, and
the cases that ended in an error are redone — but not one whose call's outcome is
unknown (it may have been billed), unless the user asks."""

from __future__ import annotations

from collections.abc import Callable

from ..costs.pricing import Pricing, cost
from ..formats import usd
from ..providers import spec
from ..storage import shown
from .cancelling import take_asked_cancel
from .deadline import stamp
from .events import DeadlineSet, Redo, Resumed
from .options import RunOptions
from .pipeline import Pipeline
from .runconfig import RunConfig
from .rundir import Run
from .state import RunState


def finished_note(run: Run, config: RunConfig, state: RunState) -> str:
    """What a cron tick says of a run that had already finished."""
    cases = state.cases.values()
    scored = sum(1 for c in cases if c.final == "scored")
    failed = sum(1 for c in cases if c.final == "error")
    unknown = sum(1 for c in cases if c.final == "error" and c.unknown)
    redo = ""
    if failed > unknown:  # what a plain run redoes (reopen): never a call of unknown outcome
        redo = f"; run it without --no-wait to redo the {failed - unknown} failed case(s)"
    if unknown:
        redo += (
            f"; {unknown} failed with a call sent and never answered (it may have been"
            " billed): only `run … --resend-unknown` sends those again"
        )
    return (
        f"run {config.name!r} is complete: {scored} scored, {failed} failed"
        f" ({shown(run.results_path)}){redo}"
    )


def rebought(pipeline: Pipeline, pricing: Pricing, assumed_output: int) -> str | None:
    """What taking a cancelled run up again buys a second time: the requests its cancelled
    batches ran on a service that bills them but returns no rows for a cancelled batch
    (:attr:`~batchbench.providers.spec.ProviderSpec.cancel_drops_rows`), priced at the
    batch price from their estimated prompt tokens and the assumed reply length."""
    count, total, unpriced = 0, 0.0, False
    for sub in pipeline.state.subs.values():
        view = sub.view
        provider = pipeline.providers[sub.stage].client.service.provider
        if view is None or not view.done or view.ending not in (None, "cancelled"):
            continue  # ended otherwise (its rows kept), or nothing ran
        if not spec(provider).cancel_drops_rows:
            continue
        per_request = sub.tokens // max(len(sub.lines), 1)
        model = pipeline.config.model(sub.stage)
        priced = cost(
            pricing.price(model),
            per_request * view.done,
            0,
            assumed_output * view.done,
            batch_discount=pricing.discount(provider, model).fraction,
        )["batch_usd"]
        count += view.done
        total += priced or 0.0
        unpriced = unpriced or priced is None
    if not count:
        return None
    price = "unpriced (no price for its model)" if unpriced else f"about {usd(total)}"
    return (
        f"{count} request(s) its cancelled batches ran before the cancel were billed, and the"
        " service returns no rows for a cancelled batch: they are bought again (a batch that"
        f" ended before the cancel took keeps its rows) — {price} at the batch price"
    )


def reopen(
    pipeline: Pipeline,
    options: RunOptions,
    say: Callable[[str], None],
    pricing: Pricing | None = None,
) -> None:
    """A resumed run takes new work again; a plain invocation redoes its failed cases.

    A --no-wait invocation (cron, every few minutes) only resumes: redoing there
    would pay for a case that fails for good again and again. A cancelled run stays
    cancelled until the user asks for it again (``--resume-cancelled``): a group's
    command re-run for its other models, or a cron tick, would undo the cancel.
    """
    config = pipeline.config
    deadline = pipeline.settings.deadline
    listed, given = pipeline.settings.allow_list_price, pipeline.settings.deadline_given
    state = pipeline.state
    if deadline is not None and given == state.deadline_given and state.deadline is not None:
        deadline = state.deadline  # the same words again (a cron tick's +14h): the same time
    if deadline is not None and (state.deadline, state.allow_list_price) != (deadline, listed):
        parts = [pipeline.grading.parts(pipeline.cases[c]) for c in config.case_ids]
        judges = sum(parts) / len(parts) if parts else 1.0  # an answer's, one pass
        pipeline.record(
            DeadlineSet(at=deadline, allow_list_price=listed, given=given, judge_requests=judges)
        )
        also = " (or, where there is none, on demand at the list price)" if listed else ""
        say(
            f"{config.name!r} is to end by {stamp(deadline)}: each batch is waited for while"
            " it can end in time, then its unfinished lines go one call at a time on its"
            f" service's flex tier, at the batch price{also}"
        )
    if pipeline.run.home.leased:  # a cancel asked from another machine comes first
        take_asked_cancel(pipeline.submitter, say, stop_batches=not options.resume_cancelled)
    if pipeline.state.cancelled:
        if not options.resume_cancelled:  # a group's command, a cron tick: not the user's say
            say(
                f"{config.name!r} was cancelled: collecting what finished, submitting nothing"
                " (`run … --resume-cancelled` takes it up again)"
            )
            return
        pipeline.record(Resumed())
        say(f"taking {config.name!r} up again after its cancel, as --resume-cancelled asks")
        again = (
            rebought(pipeline, pricing, options.budget.assumed_answer_tokens) if pricing else None
        )
        if again is not None:
            say(f"{config.name!r}: {again}")
    failed = [c for c in config.case_ids if pipeline.state.cases[c].final == "error"]
    if not failed or options.no_wait:
        return
    unknown = [c for c in failed if pipeline.state.cases[c].unknown]
    if unknown and options.resend_unknown:
        say(
            f"sending again {len(unknown)} case(s) of {config.name!r} whose call was sent but"
            " never answered, as --resend-unknown asks: each may be paid twice"
        )
    elif unknown:
        say(
            f"{len(unknown)} case(s) of {config.name!r} ended with a call sent but never"
            " answered (it may have run and been billed): left as they are;"
            " --resend-unknown sends them again"
        )
        failed = [c for c in failed if c not in unknown]
    if failed:
        pipeline.record(Redo(cases=failed))
        say(f"redoing {len(failed)} case(s) of {config.name!r} that ended in an error")
