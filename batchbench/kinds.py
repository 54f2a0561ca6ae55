"""The closed sets batchbench names things by, in one place.

Each is a ``Literal`` so a misspelt stage or status is a type error, not a
silent miss in a comparison.
"""

from __future__ import annotations

from typing import Literal

Stage = Literal["answers", "judges"]
STAGES: tuple[Stage, ...] = ("answers", "judges")

# A provider's name: one of :data:`batchbench.providers.registry.PROVIDERS`' records.
ProviderName = str

# Where a batch is, whatever the service calls it: accepted but not started
# (a job stuck there is resubmitted after --resubmit-after), running, told to
# stop (the service acknowledged a cancel), or ended with its results ready.
Phase = Literal["pending", "running", "cancelling", "ended"]
# How an ended batch ended.
Ending = Literal["completed", "failed", "expired", "cancelled"]

# What one request came to, once its batch is collected.
# ``retry``: sent again with the adjustments its wire gave (an attempt spent).
# ``unknown``: sent one call at a time, its outcome lost (it may have run and been billed):
# the case ends in an error row that a plain rerun leaves as it is (--resend-unknown).
OutcomeKind = Literal["ok", "transient", "lost", "retry", "invalid", "failed", "unknown"]
# Where one case is in one stage.
StageStatus = Literal["pending", "inflight", "ok", "failed"]
# Where a whole run is.
RunStatus = Literal[
    "not started",
    "in progress",
    "cancel pending",  # cancelled, but some batch in flight was never told (unreachable)
    "cancelled",
    "complete",
    "finished with errors",
    "failed",
]
