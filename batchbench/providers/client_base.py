"""What every provider's client holds, made once: the service, the words its messages
use (:class:`.spec.ClientContext`), the clock, the warning channel and the one retry
policy. A client says only what is its own in :meth:`ClientBase.connect` — its SDK's
client and the settings its service needs — so the constructor every factory calls
(:data:`.spec.ClientFactory`) is this one, checked by the type checker.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from ..clock import SYSTEM, Clock
from . import tls
from .base import Service
from .retry import Retrier
from .spec import ClientContext
from .stainless import SdkCalls, timeout

T = TypeVar("T")


class ClientBase:
    """A provider's client: made by its factory, connected by :meth:`connect`."""

    def __init__(
        self,
        service: Service,
        api_key: str,
        *,
        warn: Callable[[str], None],
        clock: Clock = SYSTEM,
        context: ClientContext,
    ) -> None:
        self.service = service
        self.context = context
        self.where = context.where  # how its base URL is set, for a message
        self.clock = clock
        self.warn = warn
        self.retry = Retrier(warn, clock=clock)
        self.connect(api_key)

    def connect(self, api_key: str) -> None:
        """Make the SDK's client and check the service's own settings (one-line errors)."""
        raise NotImplementedError


def stainless_sdk(
    module: ModuleType, make: Callable[..., Any], service: Service, api_key: str, **more: Any
) -> Any:
    """A Stainless-made SDK's client (openai, anthropic, fireworks, together): at the
    service's base URL, each attempt bounded, on the process's TLS context, and none of
    the SDK's own retries (the one retry policy is batchbench's)."""
    return make(
        api_key=api_key,
        base_url=service.base_url,
        max_retries=0,
        timeout=timeout(module),
        http_client=tls.http_client(module),
        **more,
    )


def sdk_calls(
    client: ClientBase,
    module: ModuleType,
    api_key: str,
    refine: Callable[[str, Any], Any] | None = None,
) -> SdkCalls:
    """The calls through a Stainless-made SDK, its errors typed, under the retry policy."""
    more = {"refine": refine} if refine is not None else {}
    return SdkCalls(
        module,
        client.service,
        api_key,
        display=client.context.label,
        key_hint=client.context.key_hint,
        warn=client.warn,
        clock=client.clock,
        **more,
    )
