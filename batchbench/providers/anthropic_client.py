"""Anthropic's Message Batches through the anthropic SDK: create, find, poll, results.

The requests travel in the create call (no upload). A Message Batch carries no
metadata, so a batch whose create outcome was lost (a crash, a timeout) is
found again by what it holds (:meth:`AnthropicClient.find`): among the batches
created since the journaled intent that the run does not already hold, the
one with the submission's request count created nearest that moment. It is
adopted at once (never a second create for the same requests) and confirmed
when it ends: results that name none of the submission's request ids (which
carry the run's id) disown it, and the submission is looked for again.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anthropic

from ..errors import ApiError, ApiNotFoundError
from ..kinds import Ending, Phase
from .anthropic_on_demand import on_demand_calls
from .base import (
    CLOCK_SKEW,
    LANDS_WITHIN,
    BatchView,
    Marks,
    Tag,
    cancel_unless_ended,
    timestamp,
    walk_list,
)
from .client_base import ClientBase, sdk_calls, stainless_sdk
from .closing import shut
from .one_by_one import CallKind, Calls

PHASES: dict[str, Phase] = {"in_progress": "running", "canceling": "cancelling", "ended": "ended"}
RESULTS = ".results"  # a batch's results, as a file reference: "<batch id>.results"
PAGE = 1000  # the list's largest page


def view(batch: dict[str, Any]) -> BatchView:
    """A Message Batch, normalised. Its counts say only ``processing`` until it has
    ended; an ended batch that was told to stop is cancelled when a line was cut short,
    expired when the window cut one, else completed."""
    status = batch.get("processing_status")
    if status not in PHASES:
        raise ApiError(
            f"message batch {batch.get('id')} has an unknown status {status!r}",
            batch_id=batch.get("id"),
        )
    counts = {k: int(v or 0) for k, v in (batch.get("request_counts") or {}).items()}
    total = sum(counts.values())
    ending: Ending | None = None
    if status == "ended":
        if counts.get("canceled") and batch.get("cancel_initiated_at"):
            ending = "cancelled"
        elif counts.get("expired"):
            ending = "expired"
        else:
            ending = "completed"
    ended = ending is not None and batch.get("results_url")
    # Ended, but its results_url not yet set (as the service does for a while): not
    # lost, still finishing: it is waited for like a running batch.
    waiting = ending is not None and not ended
    return BatchView(
        id=batch["id"],
        status="ended (results not yet available)" if waiting else str(status),
        phase="running" if waiting else PHASES[str(status)],
        ending=None if waiting else ending,
        awaiting=bool(waiting),
        total=total,
        completed=counts.get("succeeded", 0),
        failed=counts.get("errored", 0) + counts.get("canceled", 0) + counts.get("expired", 0),
        files=(f"{batch['id']}{RESULTS}",) if ended else (),
        created_at=timestamp(batch.get("created_at"), f"message batch {batch['id']}"),
        processing=counts.get("processing", 0) if status != "ended" else None,
    )


class AnthropicClient(ClientBase):
    """Message Batches calls, SDK errors turned into batchbench's typed errors."""

    marks: Marks = "results"  # a Message Batch keeps no metadata; its request ids do
    lands_within: float = LANDS_WITHIN  # a create of unknown outcome may land this late

    def connect(self, api_key: str) -> None:
        self.sdk = stainless_sdk(anthropic, anthropic.Anthropic, self.service, api_key)
        self._call = sdk_calls(self, anthropic, api_key)
        self._batches = self.sdk.messages.batches

    def close(self) -> None:
        """Its connections released (the run has ended)."""
        shut(self.sdk)

    def check_models(self, models: Iterable[str]) -> None:
        self._call.check_models(models, self.sdk.models.retrieve, self.sdk.models.list, self.where)

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """On demand, each request one Messages call at the list price (a deadline's
        fallback, with --allow-list-price); Anthropic has no flex tier."""
        return on_demand_calls(self.sdk) if kind == "ondemand" else None

    def upload(self, path: Path, tag: Tag) -> None:
        """Nothing: Message Batches take their requests inline, in the create call."""
        return None

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        """The request file's lines are the create call's ``requests``, as written."""
        requests = [json.loads(line) for line in path.read_bytes().splitlines() if line]
        with self._call.errors(f"create message batch for {tag.sub}"):  # once: never blind
            batch = self._call.reply(self._batches.create(requests=requests))
            return view(batch.model_dump(mode="json", warnings=False))

    def _since(self, since: float) -> Iterator[dict[str, Any]]:
        """The workspace's batches, newest first, a page at a time, until the page that
        reaches back before ``since`` (a Unix time)."""
        after: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": PAGE, **({"after_id": after} if after else {})}
            listing = functools.partial(self._batches.list, **kwargs)
            page = self._call("list message batches", listing)
            data = [self._call.reply(b).model_dump(mode="json", warnings=False) for b in page.data]
            yield from data
            oldest = (
                timestamp(data[-1].get("created_at"), f"message batch {data[-1]['id']}")
                if data
                else None
            )
            if not page.has_more or not data or (oldest or 0) < since:
                return
            after = data[-1]["id"]

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        """Every batch an interrupted create may have made: created since ``since`` (less
        the clock skew allowed), holding as many requests as the submission, not one the
        run or another run holds. A Message Batch keeps no tag: only its results' ids
        tell the run's own from a colleague's batch of the same size."""
        floor = since - CLOCK_SKEW
        found = []
        for batch in self._since(floor):
            candidate = view(batch)
            if candidate.id in known or candidate.total != tag.requests:
                continue
            created = candidate.created_at if candidate.created_at is not None else since
            if created >= floor:
                found.append(candidate)
        return found

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        return walk_list(self._since(since), batch_ids, lambda b: str(b["id"]), view)

    def retrieve(self, batch_id: str) -> BatchView:
        batch = self._call(
            f"retrieve message batch {batch_id}",
            functools.partial(self._batches.retrieve, batch_id),
            batch_id,
        )
        return view(batch.model_dump(mode="json", warnings=False))

    def cancel(self, batch_id: str) -> BatchView | None:
        """None when the batch had already ended (:func:`.base.cancel_unless_ended`)."""
        return cancel_unless_ended(
            lambda: view(
                self._call(
                    f"cancel message batch {batch_id}",
                    functools.partial(self._batches.cancel, batch_id),
                    batch_id,
                ).model_dump(mode="json", warnings=False)
            ),
            functools.partial(self.retrieve, batch_id),
        )

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        """The results, verbatim: the SDK follows the batch's ``results_url``."""
        stream = functools.partial(self._batches.with_streaming_response.results, batch_id)
        return self._call.download(stream, f"download results of {batch_id}", batch_id, dest)

    def delete(self, refs: Sequence[str]) -> None:
        """A Message Batch is deleted whole (its results with it) once it has ended."""
        for ref in refs:
            batch_id = ref.removesuffix(RESULTS)
            with contextlib.suppress(ApiNotFoundError):
                self._call(
                    f"delete message batch {batch_id}",
                    functools.partial(self._batches.delete, batch_id),
                )
