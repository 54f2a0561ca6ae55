"""Where a run's batches live, and the clients that reach them.

A run records each stage's service (provider and base URL, never a key) when
it is made, and uses it from then on: ``status --refresh``, ``cancel`` and a
resume go where the batches are, whatever the environment says today. A base
URL the user gives explicitly (``--base-url``, or the SDK's variable) that is
not the run's is refused with both named, unless ``run --move-service`` moves
the run there on purpose (a proxy in front of the same service, say); the move
is journaled. Runs made before services were recorded (0.1) were OpenAI's at
a base URL nobody wrote down: their first resume records the one it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .. import providers
from ..clock import SYSTEM, Clock
from ..errors import ConfigError
from ..kinds import STAGES, ProviderName, Stage
from ..providers.base import Client, Provider, Service
from .events import ServiceSet
from .rundir import RunConfig
from .state import RunState


def stage_providers(answer_model: str) -> dict[Stage, ProviderName]:
    """Answers go to the answer model's provider; judges are OpenAI's, as in the reference."""
    return {"answers": providers.route(answer_model), "judges": "openai"}


def new_services(
    answer_model: str, base_url: str | None, given: Mapping[ProviderName, str] | None = None
) -> dict[str, dict[str, str]]:
    """A new run's services: the base URL given, else the provider's own."""
    out: dict[str, dict[str, str]] = {}
    for stage, name in stage_providers(answer_model).items():
        chosen = providers.explicit_base_url(name, base_url, given=given)
        url = chosen or providers.DEFAULT_BASE_URLS[name]
        out[stage] = {"provider": name, "base_url": url}
    return out


def run_services(
    config: RunConfig,
    state: RunState,
    base_url: str | None,
    *,
    move: bool = False,
    given: Mapping[ProviderName, str] | None = None,
) -> tuple[dict[Stage, Service], list[ServiceSet]]:
    """Each stage's service for this invocation, and the events that record a change.

    ``base_url`` is the ``--base-url`` given (OpenAI's); other providers' come
    from their SDKs' variables; ``given`` sets any provider's in code (the demo).
    """
    found: dict[Stage, Service] = {}
    changes: list[ServiceSet] = []
    for stage, name in config.providers.items():
        stored = config.base_url(state, stage)
        chosen = providers.explicit_base_url(name, base_url, given=given)
        url = stored or chosen or providers.DEFAULT_BASE_URLS[name]
        if stored is not None and chosen is not None and chosen != stored:
            if not move:
                source = (
                    "--base-url"
                    if name == "openai" and base_url
                    else (providers.BASE_URL_VARIABLES[name])
                )
                raise ConfigError(
                    f"run {config.name!r} has its {stage} batches at {stored}, but {source}"
                    f" says {chosen}; to move the run there, add --move-service"
                )
            url = chosen
        if url != stored:
            changes.append(ServiceSet(stage=stage, provider=name, base_url=url))
        found[stage] = Service(name, url)
    return found, changes


def connect_all(
    services: Iterable[Mapping[Stage, Service]],
    *,
    warn: Callable[[str], None],
    credentials: Mapping[ProviderName, str] | None = None,
    clock: Clock = SYSTEM,
) -> dict[Service, Client]:
    """One client per distinct service across these runs (shared: one list walk each)."""
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
