"""Every provider batchbench speaks to, one record each: the one place a provider is named.

A record says how the reference routes a model to it (its name rule and aliases),
what it needs installed and set (its SDK and extra, its key and base-URL
variables), what it may do (serve judges), and where its two halves live (a wire
module, offline; a client module, its SDK), loaded only when first used so that
``status``, ``list`` and ``--help`` import no SDK. Adding a provider is its own
modules, a record here, its prices, its emulator face and its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .spec import ClientContext as ClientContext
from .spec import ClientFactory as ClientFactory
from .spec import Flag as Flag
from .spec import ProviderSpec as ProviderSpec

if TYPE_CHECKING:  # the protocols only: loading a provider's halves waits for first use
    from .base import Wire


from . import halves, prefixes


def _venue(prefix: str, **fields: Any) -> ProviderSpec:
    """A venue whose models are named by its prefix (``groq/ID`` is Groq's ``ID``): the
    prefix stated once — its routing rule, its name for people, what its wire strips and
    (unless said otherwise) Inspect's provider prefix."""
    fields.setdefault("inspect_prefix", prefix)
    return ProviderSpec(
        claims=lambda model: model.startswith(prefix),
        named=f"{prefix}…",
        routing_prefix=prefix,
        **fields,
    )


ANTHROPIC = ProviderSpec(
    name="anthropic",
    label="Anthropic",
    claims=lambda model: model.startswith("claude-"),
    named="claude-…",
    wire=halves.anthropic_wire,
    client=halves.anthropic_client,
    sdk="anthropic",
    extra="anthropic",
    key_variables=("ANTHROPIC_API_KEY",),
    base_url_variable="ANTHROPIC_BASE_URL",
    default_base_url="https://api.anthropic.com",
    base_url_hint="without /v1: the SDK adds it (https://api.anthropic.com)",
    refused_endings=("/v1",),
    aliases={"opus-5": "claude-opus-5", "claude-opus-5": "claude-opus-5"},
    on_demand=True,  # the Messages API, at the list price
    developer="anthropic",
    inspect_prefix="anthropic/",
)
GEMINI = ProviderSpec(
    name="gemini",
    label="Gemini",
    claims=lambda model: model.startswith("gemini"),
    named="gemini…",
    wire=halves.gemini_wire,
    client=halves.gemini_client,
    sdk="google.genai",
    extra="gemini",
    key_variables=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_AI_API_KEY"),
    base_url_variable="GOOGLE_GEMINI_BASE_URL",
    default_base_url="https://generativelanguage.googleapis.com",
    base_url_hint="without /v1 or /v1beta: the SDK adds its version"
    " (https://generativelanguage.googleapis.com)",
    refused_endings=("/v1", "/v1beta"),
    aliases={"gemini-3.1-pro": "gemini-3.1-pro-preview"},
    flex=True,  # service_tier "flex": synchronous, at the batch price (its cookbook)
    developer="google",
    inspect_prefix="google/",
)
FIREWORKS = ProviderSpec(
    name="fireworks",
    label="Fireworks",
    claims=lambda model: model.startswith("accounts/"),
    named="accounts/…",
    wire=halves.fireworks_wire,
    client=halves.fireworks_client,
    sdk="fireworks",
    extra="fireworks",
    key_variables=("FIREWORKS_API_KEY", "FIREWORKS_INFERENCE_API_KEY"),
    base_url_variable="FIREWORKS_BASE_URL",
    default_base_url="https://api.fireworks.ai",
    base_url_hint="without /v1: the SDK adds it (https://api.fireworks.ai)",
    refused_endings=("/v1",),
    account_variables=("FIREWORKS_ACCOUNT_ID",),
    aliases={
        "glm-5.2-fast": "accounts/fireworks/routers/glm-5p2-fast",
        "glm-5p2-fast": "accounts/fireworks/routers/glm-5p2-fast",
        "kimi-k3": "accounts/fireworks/models/kimi-k3",
        "glm-5.3": "accounts/fireworks/models/glm-5p3",
        "glm-5p3": "accounts/fireworks/models/glm-5p3",
    },
    inspect_prefix="fireworks/",
)
GROQ = _venue(
    prefixes.GROQ,
    name="groq",
    label="Groq",
    wire=halves.groq_wire,
    client=halves.groq_client,
    sdk="groq",
    extra="groq",
    key_variables=("GROQ_API_KEY",),
    base_url_variable="GROQ_BASE_URL",
    default_base_url="https://api.groq.com",
    base_url_hint="without /openai/v1 (https://api.groq.com)",
    refused_endings=("/openai/v1", "/openai"),
    on_demand=True,  # chat completions at the list price (its flex is priced the same)
)
TOGETHER = _venue(
    prefixes.TOGETHER,
    name="together",
    label="Together AI",
    wire=halves.together_wire,
    client=halves.together_client,
    sdk="together",
    extra="together",
    key_variables=("TOGETHER_API_KEY",),
    base_url_variable="TOGETHER_BASE_URL",
    default_base_url="https://api.together.ai",
    base_url_hint="without /v1 (https://api.together.ai)",
    refused_endings=("/v1",),
    on_demand=True,  # chat completions at the list price (no flex tier)
)
MISTRAL = _venue(
    prefixes.MISTRAL,
    name="mistral",
    label="Mistral",
    wire=halves.mistral_wire,
    client=halves.mistral_client,
    sdk="mistralai.client",
    extra="mistral",
    key_variables=("MISTRAL_API_KEY",),
    base_url_variable="MISTRAL_BASE_URL",
    default_base_url="https://api.mistral.ai",
    base_url_hint="without /v1 (https://api.mistral.ai)",
    refused_endings=("/v1",),
    developer="mistral",
)
XAI = _venue(
    prefixes.XAI,
    name="xai",
    label="xAI",
    wire=halves.xai_wire,
    client=halves.xai_client,
    sdk="openai",  # xAI's REST API, as its docs drive it (its own SDK speaks gRPC)
    extra="",
    key_variables=("XAI_API_KEY",),
    base_url_variable="XAI_BASE_URL",
    default_base_url="https://api.x.ai/v1",
    base_url_hint="ending in /v1 (https://api.x.ai/v1)",
    on_demand=True,  # chat completions at the list price (no flex tier)
    developer="xai",
    inspect_prefix="grok/",
)
OPENROUTER = _venue(
    prefixes.OPENROUTER,
    name="openrouter",
    label="OpenRouter",
    wire=halves.openrouter_wire,
    client=halves.openrouter_client,
    sdk="openrouter",
    extra="openrouter",
    key_variables=("OPENROUTER_API_KEY",),
    base_url_variable="OPENROUTER_BASE_URL",
    default_base_url="https://openrouter.ai/api/v1",
    base_url_hint="ending in /api/v1 (https://openrouter.ai/api/v1)",
    cancel_drops_rows='its API reference, "Cancel a batch": "OpenRouter returns no result'
    " rows for a cancelled batch, and the provider still charges for the requests that"
    ' finished before the cancellation"',
)
OPENAI = ProviderSpec(
    name="openai",
    label="OpenAI",
    claims=lambda model: True,  # the reference: any other name is OpenAI's
    wire=halves.openai_wire,
    client=halves.openai_client,
    sdk="openai",
    extra="",
    key_variables=("OPENAI_ACCESS_TOKEN", "OPENAI_API_KEY"),
    base_url_variable="OPENAI_BASE_URL",
    default_base_url="https://api.openai.com/v1",
    base_url_hint="ending in /v1 (https://api.openai.com/v1)",
    account_variables=("OPENAI_ORG_ID", "OPENAI_PROJECT_ID"),
    base_url_flag=True,
    flex=True,
    flex_tail=True,
    passes_together=True,
    developer="openai",
    inspect_prefix="openai/",
)


def _bedrock_priced_as(model: str) -> str:
    from .bedrock_wire import priced_as  # offline, no SDK

    return priced_as(model)


AZURE = ProviderSpec(
    name="azure",
    label="Azure OpenAI",
    claims=lambda model: model.startswith("azure/"),  # azure/DEPLOYMENT
    named="azure/…",
    wire=halves.azure_wire,
    client=halves.azure_client,
    sdk="openai",
    extra="",
    key_variables=("AZURE_OPENAI_API_KEY",),
    base_url_variable="AZURE_OPENAI_ENDPOINT",
    default_base_url="",  # each resource has its own: the user names it
    base_url_hint="the resource's endpoint, without /openai (https://NAME.openai.azure.com)",
    refused_endings=("/openai", "/openai/v1"),
    priced_as=lambda model: model.removeprefix("azure/"),
    cloud=True,
    flex=True,  # service_tier "flex" (preview): 50% off Standard, as a batch is
    flex_tail=True,  # its batches count their lines as OpenAI's do
    developer="openai",
    inspect_prefix="openai/",  # Inspect's Azure OpenAI: openai/azure/DEPLOYMENT
)

BEDROCK = ProviderSpec(
    name="bedrock",
    label="Amazon Bedrock",
    claims=lambda model: model.startswith("bedrock/"),  # bedrock/MODEL_ID or a profile
    named="bedrock/…",
    wire=halves.bedrock_wire,
    client=halves.bedrock_client,
    sdk="boto3",
    extra="bedrock",
    key_variables=(),  # AWS's own credential chain (keys, profiles, roles)
    credential_variables=(
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
    ),
    base_url_variable="AWS_ENDPOINT_URL_BEDROCK",
    default_base_url="",
    base_url_hint="Bedrock's control-plane endpoint (https://bedrock.REGION.amazonaws.com)",
    on_demand=True,
    account_variables=("BEDROCK_ROLE_ARN", "BATCHBENCH_S3_URI"),
    movable_variables=("BEDROCK_ROLE_ARN", "BATCHBENCH_S3_URI"),  # each job keeps its own
    flags=(
        Flag("BEDROCK_ROLE_ARN", "--bedrock-role", "ARN", "The service role Bedrock jobs run as"),
        Flag(
            "BATCHBENCH_S3_URI",
            "--s3-uri",
            "S3_URI",
            "Where Bedrock jobs read and write (s3://BUCKET/PREFIX)",
        ),
    ),
    region_url=lambda env: (
        f"https://bedrock.{region}.amazonaws.com"
        if (region := env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"))
        else ""
    ),
    priced_as=lambda model: _bedrock_priced_as(model),
    cloud=True,
    developer="anthropic",
)


# Where Vertex AI's jobs run when GOOGLE_CLOUD_LOCATION is unset (the records' default
# location, which their base URL and their client both read).
VERTEX_LOCATION = "us-central1"


def _vertex_url(env: Mapping[str, str]) -> str:
    """The API's endpoint for the environment's location (``us-central1`` when unset)."""
    location = env.get("GOOGLE_CLOUD_LOCATION") or VERTEX_LOCATION
    if location == "global":
        return "https://aiplatform.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def _vertex(
    name: str,
    label: str,
    claims: Callable[[str], bool],
    *,
    wire: Callable[[], Wire],
    client: ClientFactory,
    developer: str,
    inspect_prefix: str,
    named: str,
    priced_as: Callable[[str], str] | None = None,
    flex: bool = False,
) -> ProviderSpec:
    """Vertex AI, for one publisher's models: the same settings, each its own wire."""
    return ProviderSpec(
        name=name,
        label=label,
        claims=claims,
        named=named,
        wire=wire,
        client=client,
        developer=developer,
        inspect_prefix=inspect_prefix,
        priced_as=priced_as,
        sdk="google.cloud.storage",
        extra="vertex",
        key_variables=(),  # Application Default Credentials, read by google-auth
        credential_variables=("GOOGLE_APPLICATION_CREDENTIALS",),
        base_url_variable="GOOGLE_VERTEX_BASE_URL",
        default_base_url="",
        base_url_hint="the API's endpoint, without /v1 (https://us-central1-aiplatform.googleapis.com)",
        refused_endings=("/v1", "/v1beta1"),
        account_variables=("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "BATCHBENCH_GCS_URI"),
        flags=(
            Flag(
                "BATCHBENCH_GCS_URI",
                "--gcs-uri",
                "GS_URI",
                "Where Vertex AI jobs read and write (gs://BUCKET/PREFIX)",
            ),
        ),
        region_url=_vertex_url,
        flex=flex,
        cloud=True,
        default_location=VERTEX_LOCATION,
    )


# Claude on Vertex (vertex/claude-…) before the rest of vertex/ (Gemini; any other model
# there is named as not graded).
VERTEX_CLAUDE = _vertex(
    "vertex-claude",
    "Vertex AI (Claude)",
    lambda model: model.startswith("vertex/claude-"),
    named="vertex/claude-…",
    wire=halves.vertex_claude_wire,
    client=halves.vertex_claude_client,
    developer="anthropic",
    inspect_prefix="anthropic/",  # anthropic/vertex/claude-…
)
VERTEX_GEMINI = _vertex(
    "vertex-gemini",
    "Vertex AI (Gemini)",
    lambda model: model.startswith("vertex/"),
    named="vertex/gemini…",
    wire=halves.vertex_gemini_wire,
    client=halves.vertex_gemini_client,
    priced_as=lambda model: model.removeprefix("vertex/"),  # Vertex's batch price is Gemini's
    flex=True,  # Flex PayGo, on the global endpoint: "a 50% discount", as a batch job has
    developer="google",
    inspect_prefix="google/",  # google/vertex/gemini-…
)

# In routing order: a model is the first one's that claims it (OpenAI's, last, claims all).
PROVIDERS: tuple[ProviderSpec, ...] = (
    AZURE,
    BEDROCK,
    VERTEX_CLAUDE,
    VERTEX_GEMINI,
    ANTHROPIC,
    GEMINI,
    FIREWORKS,
    GROQ,
    XAI,
    TOGETHER,
    MISTRAL,
    OPENROUTER,
    OPENAI,
)
BY_NAME: dict[str, ProviderSpec] = {spec.name: spec for spec in PROVIDERS}


def provider_labels() -> str:
    """Every service's name, for help texts: ``OpenAI, Anthropic, …``."""
    names = [spec.label for spec in reversed(PROVIDERS)]
    return ", ".join(names[:-1]) + " or " + names[-1]


ALIASES: dict[str, str] = {a: m for spec in PROVIDERS for a, m in spec.aliases.items()}
