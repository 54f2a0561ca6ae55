"""Where a run's batches live, and the clients that reach them.

A run records each stage's service (provider and base URL, never a key) when
it is made, and uses it from then on: ``status --refresh``, ``cancel`` and a
resume go where the batches are, whatever the environment says today. One rule
says which base URL a stage uses: the run's own; for a new run, the one the user
chose (given in code, ``--base-url``, or the SDK's variable), else the
provider's. A resume told of another URL is refused, naming both, unless ``run
--move-service`` moves the run there on purpose (journaled); ``cancel`` and
``status`` use the run's own and say so. Runs made before services were
recorded (0.1) were OpenAI's at a base URL nobody wrote down: their first resume
records the one it uses.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from .. import providers
from ..clock import SYSTEM, Clock
from ..costs.pricing import Pricing
from ..errors import ConfigError
from ..kinds import STAGES, Stage
from ..providers.base import Client, Provider, Service
from .events import ServiceSet
from .runconfig import RunConfig, ServiceRecord
from .state import RunState


def stage_providers(answer_model: str, judge_model: str) -> dict[Stage, str]:
    """Answers go to the answer model's provider, judges to the judge model's (which must
    be one that judges: the reference judges on OpenAI)."""
    return {
        "answers": providers.route(answer_model),
        "judges": providers.judge_provider(judge_model),
    }


def new_services(
    answer_model: str,
    judge_model: str,
    base_url: str | None,
    given: Mapping[str, str] | None = None,
    settings: Mapping[str, str] | None = None,
) -> dict[str, ServiceRecord]:
    """A new run's services: the base URL chosen, else the provider's own; the account
    the environment names."""
    out: dict[str, ServiceRecord] = {}
    for stage, name in stage_providers(answer_model, judge_model).items():
        chosen = providers.explicit_base_url(name, base_url, given=given)
        # A service only the user can name (an Azure resource), not named: refused when
        # the run starts (:func:`run_services`), so that a dry run needs no address.
        url = chosen[0] if chosen else providers.default_base_url(name, strict=False)
        account = dict(providers.account_from_env(name, _environment(settings)))
        out[stage] = ServiceRecord(provider=name, base_url=url, account=account)
    return out


def run_services(
    config: RunConfig,
    state: RunState,
    base_url: str | None,
    *,
    move: bool = False,
    given: Mapping[str, str] | None = None,
    say: Callable[[str], None] | None = None,
    settings: Mapping[str, str] | None = None,
) -> tuple[dict[Stage, Service], list[ServiceSet]]:
    """Each stage's service for this invocation, and the events that record a change.

    ``base_url`` is the ``--base-url`` given; other providers' come from their SDKs'
    variables; ``given`` sets any provider's in code (the demo). The account is the
    environment's (a Fireworks account, an OpenAI organization or project). With
    ``say`` (cancel, status) a URL or account other than the run's is not an error: the
    run's is used, and ``say`` tells so; without it (a resume) it is refused unless
    ``move``.
    """
    found: dict[Stage, Service] = {}
    changes: list[ServiceSet] = []
    for stage, name in config.providers.items():
        stored = config.base_url(state, stage)
        chosen = providers.explicit_base_url(name, base_url, given=given)
        url = stored or (chosen[0] if chosen else providers.default_base_url(name))
        if stored is not None and chosen is not None and chosen[0] != stored:
            there, source = chosen
            url = _differs(
                config.name,
                f"{stage} batches at {providers.shown(stored)}",
                f"{source} says {providers.shown(there)}",
                stored,
                there,
                move=move,
                say=say,
            )
        stored_account = config.account(state, stage)
        current = providers.account_from_env(name, _environment(settings))
        account = current if stored_account is None else stored_account
        lives, lives_now = (
            providers.where_batches_live(name, a) for a in (stored_account or (), current)
        )
        if stored_account is not None and lives != lives_now:
            account = _differs(
                config.name,
                f"{stage} batches under {providers.account_text(lives)}",
                f"the environment says {providers.account_text(lives_now)}",
                stored_account,
                current,
                move=move,
                say=say,
            )
        elif stored_account is not None and say is None:  # a new role, a new S3 location
            account = current
        if url != stored or account != stored_account:
            changes.append(
                ServiceSet(stage=stage, provider=name, base_url=url, account=dict(account))
            )
        found[stage] = Service(name, url, account)
    return found, changes


T = TypeVar("T")


def _environment(settings: Mapping[str, str] | None) -> Mapping[str, str]:
    """The environment, with the account settings given as options (``--bedrock-role``)
    in front of its variables."""
    return {**os.environ, **settings} if settings else os.environ


def _differs(
    run: str,
    has: str,
    told: str,
    stored: T,
    other: T,
    *,
    move: bool,
    say: Callable[[str], None] | None,
) -> T:
    """The run's own (said, for cancel and status), or the other on ``--move-service``;
    otherwise a refusal naming both: a run resumed elsewhere would buy its batches again."""
    if say is not None:
        say(f"note: {told}, but run {run!r} has its {has}: asking there")
        return stored
    if not move:
        raise ConfigError(
            f"run {run!r} has its {has}, but {told}; to move the run there, add --move-service"
        )
    return other


def connect_all(
    services: Iterable[Mapping[Stage, Service]],
    *,
    warn: Callable[[str], None],
    credentials: Mapping[str, str] | None = None,
    clock: Clock = SYSTEM,
) -> dict[Service, Client]:
    """One client per distinct service across these runs (shared: one list walk each).
    Every SDK the runs need is looked for first, and all the missing ones named at once."""
    services = list(services)
    missing = providers.missing_sdks([s.provider for stages in services for s in stages.values()])
    if missing:
        from ..errors import ProviderUnavailable

        raise ProviderUnavailable(f"these runs need {', '.join(missing)}")
    clients: dict[Service, Client] = {}
    for stages in services:
        for service in stages.values():
            if service not in clients:
                key = (credentials or {}).get(service.provider)
                clients[service] = providers.connect(service, warn=warn, api_key=key, clock=clock)
    return clients


def stage_bundle(
    services: Mapping[Stage, Service], clients: Mapping[Service, Client]
) -> dict[Stage, Provider]:
    """Each stage's wire and client, for a pipeline."""
    return {
        stage: Provider(providers.wire(services[stage].provider), clients[services[stage]])
        for stage in STAGES
    }


def flex_note(stages: Mapping[Stage, Service]) -> str:
    """What --tail-flex does for this run: which services finish a tail on flex, and
    which have no flex tier (their batches run to their end; nothing at full price)."""
    said = []
    for stage, service in stages.items():
        spec = providers.spec(service.provider)
        tier = (
            "its tail on flex" if spec.flex_tail else "no flex tail: its batches run to their end"
        )
        said.append(f"{stage} on {spec.label}, {tier}")
    return "--tail-flex: " + "; ".join(said)


def where_requests_go(stages: Mapping[Stage, Service]) -> str | None:
    """For a run whose answers go to a cloud under an agreement (Azure, Bedrock): whether
    every request stays inside it, or where the judges' go instead."""
    answers, judges = stages["answers"], stages["judges"]
    cloud = providers.spec(answers.provider)
    if not cloud.cloud:
        return None
    if judges == answers or (
        judges.provider == answers.provider and judges.base_url == answers.base_url
    ):
        return f"every request stays inside {cloud.label} ({providers.shown(answers.base_url)})"
    other = providers.spec(judges.provider)
    if judges.provider == answers.provider:
        return (
            f"note: answers go to {cloud.label} at {providers.shown(answers.base_url)},"
            f" judges to {providers.shown(judges.base_url)}"
        )
    where = f"note: answers stay inside {cloud.label}; judges go to {other.label} at"
    where += f" {providers.shown(judges.base_url)}"
    if cloud.judges:
        return f"{where} (for every request inside {cloud.label}, use --judge-model {cloud.name}/…)"
    clouds = [p for p in providers.PROVIDERS if p.cloud and p.judges and p is not other]
    agreed = " or ".join(f"--judge-model {p.name}/…" for p in clouds)
    return f"{where} ({cloud.label} does not serve judges" + (
        f"; {agreed} keeps them under an agreement too)" if agreed else ")"
    )


def check_group_models(
    clients: dict[Service, Client], models: list[tuple[Service, str]], pricing: Pricing
) -> None:
    """A group's answer models, each asked of its service before any run of the group
    starts: one its service does not know stops the whole command, naming the routing
    rule it fell under and the nearest known name — nothing bought for the others."""
    for service, model in models:
        try:
            check_answer_model(clients, service, model)
        except ConfigError as exc:
            known = [*pricing.models, *providers.ALIASES]
            near = difflib.get_close_matches(model, known, n=1, cutoff=0.75)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigError(
                f"{exc} ({providers.routing_rule(model)}){hint}: nothing was started for any"
                " model of this command"
            ) from None


def check_answer_model(clients: dict[Service, Client], service: Service, model: str) -> None:
    """The model as its service knows it, asked of the service (one line if it does not)."""
    clients[service].check_models([providers.resolve(model)])


def check_on_demand(
    clients: Mapping[Service, Client], stages: Mapping[Stage, Service], config: RunConfig
) -> None:
    """With ``--on-demand-remainder``: the endpoint each stage's on-demand calls go to is
    reached before anything is paid (:attr:`~batchbench.providers.one_by_one.Calls.check`)."""
    for stage, service in stages.items():
        calls = clients[service].calls("ondemand", config.model(stage))
        if calls is not None:
            calls.check()
