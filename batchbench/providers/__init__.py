"""Which service grades which model, and how to reach it.

The reference routes an answer model by its name, after a fixed alias table
(``../shared/spec/reference-behaviour.md`` §9). Every provider is one record of
:mod:`.registry`; this module answers the questions the rest of the package asks
of them — whose model is it, which wire, which client, which key, which base
URL — loading a provider's modules (and its SDK) only when first needed.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
from collections.abc import Callable, Mapping
from urllib.parse import urlparse

from ..clock import SYSTEM, Clock
from ..errors import ConfigError, ProviderUnavailable
from ..formats import article
from .base import Account, Client, Service, Wire
from .registry import ALIASES, BY_NAME, PROVIDERS, ClientContext, ProviderSpec

__all__ = [
    "ALIASES",
    "PROVIDERS",
    "ProviderSpec",
    "connect",
    "judge_provider",
    "resolve",
    "route",
    "routing_rule",
    "spec",
    "wire",
]


def resolve(model: str) -> str:
    """The id the service is asked for (an alias's target, else the name itself)."""
    return ALIASES.get(model, model)


def route(model: str) -> str:
    """The reference's routing of an answer model, on its resolved id."""
    resolved = resolve(model)
    return next(p.name for p in PROVIDERS if p.claims(resolved))


def routing_rule(model: str) -> str:
    """Which provider a name goes to and by which rule, for a message about a name that
    went astray (a typo routed to OpenAI, the reference's catch-all)."""
    name = route(model)
    label = BY_NAME[name].label
    if name != "openai":
        return f"routed to {label} by its name"
    others = ", ".join(f"{spec.named} to {spec.label}" for spec in PROVIDERS if spec.named)
    return f"routed to OpenAI, as every name no other provider claims is ({others})"


def judge_provider(model: str) -> str:
    """The judges' provider: the judge model's own, when it may judge (the reference
    judges on OpenAI); a model of another provider is refused before anything runs."""
    name = route(model)
    if not BY_NAME[name].judges:
        able = " or ".join(p.label for p in reversed(PROVIDERS) if p.judges)
        raise ConfigError(
            f"--judge-model {model!r} is {article(BY_NAME[name].label)} model, and judges are"
            f" {able} models (the reference runner judges on OpenAI)"
        )
    return name


def judge_note(model: str) -> str | None:
    """What is said beside a judge's scores when it is not OpenAI's model (the reference
    runner judges on OpenAI, so its numbers are OpenAI-judged: another judge's are not
    the reference's numbers); None for OpenAI's models, on OpenAI or Azure."""
    found = BY_NAME[route(model)]
    if found.developer == "openai":
        return None
    return f"judged on {found.label}, not by the reference's OpenAI judge"


def judge_service(model: str) -> str | None:
    """The judge's service, for a judge that is not OpenAI's model (None otherwise)."""
    found = BY_NAME[route(model)]
    return None if found.developer == "openai" else found.name


def priced_as(model: str) -> str | None:
    """The name the model's provider prices it by, when not its own (an Azure
    deployment's name, a Bedrock model id's model)."""
    found = BY_NAME[route(model)]
    return found.priced_as(resolve(model)) if found.priced_as else None


def spec(name: str) -> ProviderSpec:
    found = BY_NAME.get(name)
    if found is None:
        raise ConfigError(f"batchbench cannot grade {name} models")
    return found


def wire(name: str) -> Wire:
    """The provider's offline half (no SDK needed)."""
    return spec(name).wire()


def missing_sdks(names: list[str]) -> list[str]:
    """The SDKs these providers need that are not installed, each with its extra."""
    missing = []
    for name in dict.fromkeys(names):
        found = spec(name)
        try:
            importlib.import_module(found.sdk)
        except ImportError:
            missing.append(f"{found.sdk!r} ({install_hint(found.extra)})")
    return missing


def install_hint(extra: str) -> str:
    """How to add an extra to this installation: into the checkout it runs from (an
    editable install, whose folder holds pyproject.toml), else the installed distribution."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "batchbench").is_dir():
        return f"pip install -e '{root}[{extra}]'"
    return f"pip install 'bedside-batchbench[{extra}]'"


def connect(
    service: Service,
    *,
    warn: Callable[[str], None],
    api_key: str | None = None,
    clock: Clock = SYSTEM,
) -> Client:
    """A client for the service, with the key from the environment (or given)."""
    found = spec(service.provider)
    missing = missing_sdks([service.provider])
    if missing:
        raise ProviderUnavailable(f"grading {found.label} models needs {missing[0]}")
    host, scheme = check_base_url(service.base_url)
    path = urlparse(service.base_url).path.rstrip("/")
    for ending in found.refused_endings:
        if path.endswith(ending):
            raise ConfigError(
                f"{shown(service.base_url)} ends in {ending}, which the {found.label} SDK adds"
                f" itself: set {found.where()}"
            )
    if scheme == "http" and not _is_loopback(host):
        warn(
            f"warning: {shown(service.base_url)} is plain http to a host that is not loopback:"
            " the API key would cross the network unencrypted"
        )
    key = api_key or key_from_env(service.provider)
    return found.client(service, key, warn=warn, clock=clock, context=ClientContext.of(found))


def key_from_env(name: str, env: Mapping[str, str] = os.environ) -> str:
    """The provider's key, first non-empty variable wins. A key with blanks or a line
    break around it (as a CRLF env file leaves) is refused, naming the variable only:
    sent in a header it would fail, and the error would quote it."""
    variables = spec(name).key_variables
    for variable in spec(name).credential_variables:
        _unpadded(variable, env.get(variable) or "")
    if not variables:
        return ""  # the SDK's own credential chain (AWS's)
    for variable in variables:
        value = env.get(variable)
        if value:
            return _unpadded(variable, value)
    raise ConfigError(f"no API key for {spec(name).label}: set {' or '.join(variables)}")


def _unpadded(variable: str, value: str) -> str:
    if value != value.strip():
        raise ConfigError(
            f"{variable} has blanks or a line break around the key (a CRLF env file"
            " leaves one): remove them"
        )
    return value


def explicit_base_url(
    name: str,
    flag: str | None,
    env: Mapping[str, str] = os.environ,
    given: Mapping[str, str] | None = None,
) -> tuple[str, str] | None:
    """A base URL the user chose, and where it came from: one given in code (the demo's
    emulator), ``--base-url`` (OpenAI's, the reference's judges'), else the SDK's variable."""
    found = spec(name)
    if given and name in given:
        return normal_url(given[name], "the emulator"), "the emulator"
    if found.base_url_flag and flag:
        return normal_url(flag), "--base-url"
    value = env.get(found.base_url_variable)
    if not value:
        return None
    return normal_url(value, found.base_url_variable), found.base_url_variable


def default_base_url(name: str, env: Mapping[str, str] = os.environ, strict: bool = True) -> str:
    """The provider's own base URL when the user names none: fixed, or made from the
    environment (an AWS region), or — for a service every customer has their own of
    (an Azure resource) — a one-line error saying which variable names it (``""``
    unless ``strict``)."""
    found = spec(name)
    url = found.region_url(env) if found.region_url else found.default_base_url
    if not url and strict:
        raise ConfigError(
            f"{found.label} needs its address: set {found.base_url_variable}"
            f" ({found.base_url_hint})"
        )
    return url


def account_from_env(name: str, env: Mapping[str, str] = os.environ) -> Account:
    """The account the environment names for this provider (its variables that are set)."""
    return tuple((v, env[v]) for v in spec(name).account_variables if env.get(v))


def where_batches_live(name: str, account: Account) -> Account:
    """The part of an account that says where the batches live: a change there moves
    the run; a change in the rest (:attr:`ProviderSpec.movable_variables`) does not."""
    movable = spec(name).movable_variables
    return tuple((k, v) for k, v in account if k not in movable)


def account_text(account: Account) -> str:
    """``FIREWORKS_ACCOUNT_ID=acme``, or ``the key's default account`` when none is set."""
    return ", ".join(f"{k}={v}" for k, v in account) or "the key's default account"


def normal_url(url: str, source: str = "--base-url") -> str:
    """A base URL as compared and recorded: checked, without a trailing slash."""
    check_base_url(url, source)
    return url.rstrip("/")


def shown(url: str) -> str:
    """A URL fit to print: no user, password or query (where credentials could hide)."""
    try:
        parsed = urlparse(url)
        netloc = parsed.hostname or ""
        if parsed.port:
            netloc += f":{parsed.port}"
    except ValueError:
        parsed, netloc = None, ""
    if parsed is not None and parsed.scheme and netloc:
        return f"{parsed.scheme}://{netloc}{parsed.path}"
    # Unreadable as a URL: drop the query and anything before an '@' all the same.
    text = url.split("?")[0].split("#")[0]
    head, sep, rest = text.rpartition("://")
    return f"{head}{sep}{rest.rpartition('@')[2]}"


def check_base_url(url: str, source: str = "--base-url") -> tuple[str, str]:
    """``(host, scheme)`` of an http(s) base URL, or a one-line error naming it (without
    anything secret) and where it came from. A URL that carries credentials (a user
    and password, a query) is refused: keys come from their own variables only, and
    a URL is stored in the run and shown in messages."""
    try:
        parsed = urlparse(url)
        host, _ = parsed.hostname, parsed.port
    except ValueError as exc:
        raise ConfigError(f"{source} {shown(url)!r} is not a valid URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not host:
        raise ConfigError(f"{source} {shown(url)!r} is not an http(s) URL")
    if parsed.username or parsed.password or parsed.query or parsed.fragment:
        raise ConfigError(
            f"{source} {shown(url)!r} carries credentials or a query (user:password@, ?key=):"
            " give keys through the key's own variable, never in a URL"
        )
    return host, parsed.scheme


def is_loopback_url(url: str) -> bool:
    """Whether a base URL is this machine's (a rehearsal's emulator, not a service)."""
    return _is_loopback(urlparse(url).hostname or "")


def _is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
