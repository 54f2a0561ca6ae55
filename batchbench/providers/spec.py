"""What a provider's record says (:mod:`.registry` holds the records): its name rule,
its SDK and settings, its abilities, and how its two halves are made."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the protocols only: loading a provider's halves waits for first use
    from ..clock import Clock
    from .base import Client, Service, Wire


@dataclass(frozen=True)
class ClientContext:
    """What a client says of its service, from its record: one home for the words every
    message of the client uses."""

    label: str  # the service's name, for people
    key_hint: str  # the variable its key is read from ("" for a credential chain)
    base_url_variable: str  # the SDK's own variable for another base URL
    where: str  # how its base URL is set, and what one looks like
    default_location: str  # where its jobs run when the account names none ("": n/a)
    # Google's or AWS's endpoint for the environment's location or region (None: one URL)
    region_url: Callable[[Mapping[str, str]], str] | None = None

    @classmethod
    def of(cls, spec: ProviderSpec) -> ClientContext:
        return cls(
            label=spec.label,
            key_hint=next(
                (v for v in spec.key_variables if v.endswith("_API_KEY")),
                spec.key_variables[0] if spec.key_variables else "",
            ),
            base_url_variable=spec.base_url_variable,
            where=spec.where(),
            default_location=spec.default_location,
            region_url=spec.region_url,
        )


class ClientFactory(Protocol):
    """How a provider's SDK half is made (each provider's client class fits it)."""

    def __call__(
        self,
        service: Service,
        api_key: str,
        *,
        warn: Callable[[str], None],
        clock: Clock,
        context: ClientContext,
    ) -> Client: ...


@dataclass(frozen=True)
class Flag:
    """A ``run`` option setting one of a provider's account variables (the variable, when
    set, is the default): made from the registry, so a provider's settings are in
    ``run --help`` by its record existing."""

    variable: str
    option: str  # "--s3-uri"
    metavar: str
    help: str  # what it is, without the "(else VARIABLE)" the help adds


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    label: str  # the service's name, for people
    claims: Callable[[str], bool]  # the reference's routing rule, on the resolved model id
    # Its two halves, each imported on first use (``status``, ``list`` and ``--help``
    # import no SDK) and checked by the type checker against the seam's protocols.
    wire: Callable[[], Wire]  # the offline half
    client: ClientFactory  # the SDK half
    sdk: str  # the module the client needs
    extra: str  # the pip extra that installs it ("" when always installed)
    key_variables: tuple[str, ...]  # first non-empty wins (the reference's order)
    base_url_variable: str  # the SDK's own variable for another base URL
    default_base_url: str
    base_url_hint: str  # what a base URL for its SDK looks like, for a mistaken one
    aliases: Mapping[str, str] = field(default_factory=dict)  # the reference's, name → id
    # The variables naming the account a key works in (where the batches live within
    # the service): part of the service a run remembers.
    account_variables: tuple[str, ...] = ()
    # Of those, the ones a resume may change without moving the run: how new batches are
    # made (the role a job runs as, where its files go), not where batches live — a job
    # keeps its own role and output location, and is listed by the account.
    movable_variables: tuple[str, ...] = ()
    # May serve the judge stage: every service whose API can hold the judge request (the
    # reference judges on OpenAI only; see :func:`batchbench.providers.judge_note`).
    judges: bool = True
    base_url_flag: bool = False  # --base-url sets its base URL (the reference's judges')
    # A base URL made from the environment when the user names none (an AWS region's).
    region_url: Callable[[Mapping[str, str]], str] | None = None
    # The name a model is priced by when the table has no entry for the name itself
    # (an Azure deployment named after its model).
    priced_as: Callable[[str], str] | None = None
    # A cloud teams reach under a business associate agreement: a run says whether
    # every request stays inside it.
    cloud: bool = False
    # Path endings a base URL for its SDK must not have (the SDK adds its own version):
    # refused at once, with the hint, instead of a 404 after the pre-flight's calls.
    refused_endings: tuple[str, ...] = ()
    # Variables its SDK reads credentials from by itself (AWS's chain): never read by
    # batchbench, only checked as keys are, so a stray line break is named, not echoed.
    credential_variables: tuple[str, ...] = ()
    flags: tuple[Flag, ...] = ()  # ``run`` options for its account variables
    # A flex tier at the batch price: where a deadline's fallback goes.
    flex: bool = False
    # Its running batches count their finished lines, so a small tail can be seen and
    # sent to the flex tier (--tail-flex); without counts there is no tail to judge.
    flex_tail: bool = False
    # Its cache routes identical requests together, whichever batch holds them (OpenAI:
    # "routed to a machine based on a hash of the initial prefix"), so a case's K judge
    # passes go in one batch, side by side; elsewhere each pass is its own batch
    # (Anthropic: K cold copies in one batch would each pay a cache write).
    passes_together: bool = False
    # Synchronous calls at the list price the engine can send (Bedrock's InvokeModel): a
    # deadline's fallback where there is no flex tier, only with --allow-list-price.
    on_demand: bool = False
    # Who makes the models it serves, for results other tools read (Every Eval Ever's
    # developer; "" when the model's name does not say: a Fireworks account's models).
    developer: str = ""
    # Inspect's provider before a model name as given here (Inspect's own names: an Azure
    # deployment is openai/azure/…, Claude on Vertex anthropic/vertex/…, a Bedrock model
    # bedrock/…, which the name as given already starts with).
    inspect_prefix: str = ""
    # The prefix that routes a model here (``groq/ID``): Inspect's own provider name
    # stands in its place (``xai/grok-4.3`` is Inspect's ``grok/grok-4.3``).
    routing_prefix: str = ""
    # Where its jobs run when the account names no location (Vertex AI's region).
    default_location: str = ""
    # The names ``claims`` takes, for people ("claude-…"; "": OpenAI's catch-all).
    named: str = ""
    # Where the service returns no result rows for a cancelled batch yet bills the
    # requests that ran before the cancel: where it says so (cancel warns, a resume
    # prices what it buys again). "": a cancelled batch's results are kept.
    cancel_drops_rows: str = ""

    def inspect_model(self, model: str) -> str:
        """The model's name as Inspect writes it in a log."""
        return f"{self.inspect_prefix}{model.removeprefix(self.routing_prefix)}"

    def where(self) -> str:
        """How its base URL is set, and what one looks like (for a message)."""
        flag = "--base-url or " if self.base_url_flag else ""
        return f"{flag}{self.base_url_variable} ({self.base_url_hint})"
