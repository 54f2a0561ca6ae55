"""A run's pacing and limits: what the user may set about how a run goes, not what it
measures (those are :class:`.runconfig.RunConfig`'s)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Settings:
    max_requests_per_batch: int = 50_000
    max_bytes_per_batch: int = 200 * 1024 * 1024
    max_attempts: int = 3  # judge replies per answer before an invalid one is an error
    max_retries: int = 6  # attempts per request, as the reference's --max-retries
    poll_interval: float = 30.0
    hold_seconds: float = 60.0  # wait after token_limit_exceeded before creating again
    max_enqueued_tokens: int | None = None  # estimated prompt tokens in flight per model
    delete_remote_files: bool = False  # delete a batch's files on the server once collected
    outage_seconds: float = 600.0  # give up when the API has failed this long without a break
    max_ambiguous_creates: int = 8  # creates in a row that failed without saying whether
    resubmit_after: float = 12 * 3600.0  # a batch not started by then is cancelled and sent again
    # Requests too few for the service's minimum batch (Bedrock's records per job) are
    # sent on demand, at the full price, only when the user says so.
    on_demand_remainder: bool = False
    tail_flex: float | None = None  # seconds before a small tail goes on flex (:mod:`.late`)
    deadline: float | None = None  # the run is to end by then (:mod:`.deadline`)
    deadline_given: str = ""  # as written: a span (+14h) is from the first invocation's now
    allow_list_price: bool = False  # its fallback may be on demand at list price
    # How long a create with no answer may still land (None: its service's own bound)
    create_wait: float | None = None
    # A canary before the first real run on a service (:mod:`.canary`): None, on for a
    # real service and off for a loopback one; True or False as the user asked.
    canary: bool | None = None
