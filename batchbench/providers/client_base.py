"""What every provider's client holds, made once: the service, the words its messages
use (:class:`.spec.ClientContext`), the clock, the warning channel and the one retry
policy. A client says only what is its own in :meth:`ClientBase.connect` — its SDK's
client and the settings its service needs — so the constructor every factory calls
(:data:`.spec.ClientFactory`) is this one, checked by the type checker.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from ..clock import SYSTEM, Clock
from ..errors import ApiError, ApiNotFoundError
from ..kinds import Ending, Phase
from . import tls
from .base import BatchView, Service, cancel_unless_ended
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


class StainlessBatches(ClientBase):
    """The batch and file calls an OpenAI-shaped, Stainless-made SDK makes alike (openai's
    and those made like it: Azure, Groq, xAI; together's): retrieve, cancel, download
    and delete, written once. A client names its SDK's client (``sdk``), its typed calls
    (``_call``) and how it reads a batch (:meth:`view`)."""

    sdk: Any
    _call: SdkCalls

    def view(self, batch: dict[str, Any]) -> BatchView:
        raise NotImplementedError

    def retrieve(self, batch_id: str) -> BatchView:
        what = f"retrieve batch {batch_id}"
        batch = self._call(what, lambda: self.sdk.batches.retrieve(batch_id), batch_id)
        return self.view(batch.model_dump(warnings=False))

    def cancel(self, batch_id: str) -> BatchView | None:
        """None when the batch had already ended (:func:`.base.cancel_unless_ended`)."""

        def cancel() -> BatchView:
            what = f"cancel batch {batch_id}"
            done = self._call(what, lambda: self.sdk.batches.cancel(batch_id), batch_id)
            return self.view(done.model_dump(warnings=False))

        return cancel_unless_ended(cancel, functools.partial(self.retrieve, batch_id))

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        stream = functools.partial(self.sdk.files.with_streaming_response.content, ref)
        return self._call.download(stream, f"download {ref}", batch_id, dest)

    def delete(self, refs: Sequence[str]) -> None:
        for ref in refs:
            with contextlib.suppress(ApiNotFoundError):
                self._call(f"delete {ref}", functools.partial(self.sdk.files.delete, ref))


def phase_of(
    batch: Mapping[str, Any], endings: Mapping[str, Ending], phases: Mapping[str, Phase]
) -> tuple[str, Phase, Ending | None]:
    """A batch's ``status``, its phase and its ending, by the service's tables: an ending
    status is the phase ``ended``; a status in neither table is the service saying
    something batchbench does not know, refused in one line naming the batch."""
    status = str(batch.get("status"))
    ending = endings.get(status)
    phase: Phase | None = "ended" if ending is not None else phases.get(status)
    if phase is None:
        said = f"batch {batch.get('id')} has an unknown status {status!r}"
        raise ApiError(said, batch_id=batch.get("id"))
    return status, phase, ending


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
