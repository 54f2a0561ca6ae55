"""Azure OpenAI's Global Batch, offline: OpenAI's wire with a deployment for a model.

Azure serves OpenAI's Batch API shape under ``/openai/v1/``: the same request
lines, result lines and validation, with three differences that are the wire's
own — the model a line names is the *deployment* (``azure/DEPLOYMENT`` names it
here), a line's ``url`` is ``/chat/completions`` (the spelling Azure's docs show),
and a file may hold 100,000 lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from ..bench.protocol import Prompt
from ..kinds import ProviderName
from .base import Adjust, BatchError, BatchFailure, Limits, Rendered
from .openai_wire import MAX_BYTES, OpenAIWire

PREFIX: Final = "azure/"
ENDPOINT: Final = "/chat/completions"
MAX_LINES = 100_000


def deployment(model: str) -> str:
    """``azure/DEPLOYMENT`` → ``DEPLOYMENT``: what the service is asked for."""
    return model.removeprefix(PREFIX)


@dataclass
class AzureWire(OpenAIWire):
    name: ProviderName = "azure"
    endpoint: str = ENDPOINT
    limits: Limits = field(default_factory=lambda: Limits(MAX_LINES, MAX_BYTES))

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        """The reference's OpenAI body, the deployment as its model."""
        return super().render(prompt, deployment(model), adjust)

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure:
        """A deployment name the resource does not have fails the batch's validation
        (``model_not_found``), as it would every batch of the run: the run stops there.
        No call names a deployment before a run (see :mod:`.azure_client`)."""
        found = super().failure(errors, requests)
        if found.code != "model_not_found":
            return found
        why = (
            "the resource has no Global Batch deployment of that name (azure/NAME names a"
            " deployment on its Deployments page, not a model)"
        )
        return replace(found, stop=why)
