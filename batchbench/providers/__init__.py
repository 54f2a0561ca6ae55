"""Which service grades which model, and how to reach it.

The reference routes an answer model by its name, after a fixed alias table
(``../shared/spec/reference-behaviour.md`` §9); judges are always OpenAI. Each
provider is a wire module (offline) and a client module (its SDK), loaded by
name when first needed: an SDK that is an optional extra is imported only by a
run that uses it, and ``status``, ``list`` and ``--help`` import none.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

from ..clock import SYSTEM, Clock
from ..errors import ConfigError, ProviderUnavailable
from ..kinds import ProviderName
from .base import Client, Service, Wire

# The reference's alias table: the row keeps the name as given, the service gets the id.
ALIASES = {
    "gemini-3.1-pro": "gemini-3.1-pro-preview",
    "glm-5.2-fast": "accounts/fireworks/routers/glm-5p2-fast",
    "glm-5p2-fast": "accounts/fireworks/routers/glm-5p2-fast",
    "kimi-k3": "accounts/fireworks/models/kimi-k3",
    "glm-5.3": "accounts/fireworks/models/glm-5p3",
    "glm-5p3": "accounts/fireworks/models/glm-5p3",
    "opus-5": "claude-opus-5",
    "claude-opus-5": "claude-opus-5",
}

DEFAULT_BASE_URLS: dict[ProviderName, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "fireworks": "https://api.fireworks.ai",
}
# The SDKs' own variables for another base URL.
BASE_URL_VARIABLES: dict[ProviderName, str] = {
    "openai": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "gemini": "GOOGLE_GEMINI_BASE_URL",
    "fireworks": "FIREWORKS_BASE_URL",
}
# Credentials, first non-empty wins (the reference's order).
KEY_VARIABLES: dict[ProviderName, tuple[str, ...]] = {
    "openai": ("OPENAI_ACCESS_TOKEN", "OPENAI_API_KEY"),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_AI_API_KEY"),
    "fireworks": ("FIREWORKS_API_KEY", "FIREWORKS_INFERENCE_API_KEY"),
}
# provider → (wire class, client class, the SDK it needs, the extra that installs it)
_MODULES: dict[ProviderName, tuple[str, str, str, str]] = {
    "openai": ("openai_wire:OpenAIWire", "openai_client:OpenAIClient", "openai", ""),
    "anthropic": (
        "anthropic_wire:AnthropicWire",
        "anthropic_client:AnthropicClient",
        "anthropic",
        "anthropic",
    ),
    "gemini": ("gemini_wire:GeminiWire", "gemini_client:GeminiClient", "google.genai", "gemini"),
    "fireworks": (
        "fireworks_wire:FireworksWire",
        "fireworks_client:FireworksClient",
        "fireworks",
        "fireworks",
    ),
}


def resolve(model: str) -> str:
    """The id the service is asked for (an alias's target, else the name itself)."""
    return ALIASES.get(model, model)


def route(model: str) -> ProviderName:
    """The reference's routing of an answer model, on its resolved id."""
    resolved = resolve(model)
    if resolved.startswith("gemini"):
        return "gemini"
    if resolved.startswith("claude-"):
        return "anthropic"
    if resolved.startswith("accounts/"):
        return "fireworks"
    return "openai"


def _load(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def _known(name: ProviderName) -> tuple[str, str, str, str]:
    found = _MODULES.get(name)
    if found is None:
        raise ConfigError(f"batchbench cannot grade {name} models yet")
    return found


def wire(name: ProviderName) -> Wire:
    """The provider's offline half (no SDK needed)."""
    wire_class: Callable[[], Wire] = _load(_known(name)[0])
    return wire_class()


def connect(
    service: Service,
    *,
    warn: Callable[[str], None],
    api_key: str | None = None,
    clock: Clock = SYSTEM,
) -> Client:
    """A client for the service, with the key from the environment (or given)."""
    _, client_spec, sdk, extra = _known(service.provider)
    try:
        importlib.import_module(sdk)
    except ImportError:
        raise ProviderUnavailable(
            f"grading {service.provider} models needs the {sdk!r} package:"
            f" pip install 'batchbench[{extra}]'"
        ) from None
    host, scheme = check_base_url(service.base_url)
    if scheme == "http" and not _is_loopback(host):
        warn(
            f"warning: {service.base_url} is plain http to a host that is not loopback:"
            " the API key would cross the network unencrypted"
        )
    key = api_key or key_from_env(service.provider)
    client_class: Callable[..., Client] = _load(client_spec)
    return client_class(service, key, warn=warn, clock=clock)


def key_from_env(name: ProviderName, env: Mapping[str, str] = os.environ) -> str:
    for variable in KEY_VARIABLES[name]:
        value = env.get(variable)
        if value:
            return value
    raise ConfigError(f"no API key for {name}: set {' or '.join(KEY_VARIABLES[name])}")


def explicit_base_url(
    name: ProviderName,
    flag: str | None,
    env: Mapping[str, str] = os.environ,
    given: Mapping[ProviderName, str] | None = None,
) -> str | None:
    """A base URL the user chose: one given in code (the demo's emulator), ``--base-url``
    (OpenAI's), else the SDK's variable."""
    if given and name in given:
        return normal_url(given[name])
    if name == "openai" and flag:
        return normal_url(flag)
    value = env.get(BASE_URL_VARIABLES[name])
    return normal_url(value, BASE_URL_VARIABLES[name]) if value else None


def normal_url(url: str, source: str = "--base-url") -> str:
    """A base URL as compared and recorded: checked, without a trailing slash."""
    check_base_url(url, source)
    return url.rstrip("/")


def check_base_url(url: str, source: str = "--base-url") -> tuple[str, str]:
    """``(host, scheme)`` of an http(s) base URL, or a one-line error naming it and where
    it came from (the flag or the SDK's variable)."""
    try:
        parsed = urlparse(url)
        host, _ = parsed.hostname, parsed.port
    except ValueError as exc:
        raise ConfigError(f"{source} {url!r} is not a valid URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not host:
        raise ConfigError(f"{source} {url!r} is not an http(s) URL")
    return host, parsed.scheme


def _is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
