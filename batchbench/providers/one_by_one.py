"""Requests sent one call at a time instead of as a batch — Bedrock's on-demand remainder,
the flex tier's tail — each call noted before it is sent and after it returns.

The replies are written as the service's batch output would hold them, one line
appended and fsynced per call beside the request file (``<file>.<kind>.out``), so
the rest of the run reads them as any batch's; a crash part way leaves the calls
already made on disk, and the next attempt makes only the others. Each call is
noted before it is sent (``<file>.<kind>.sent``, fsynced): a call whose outcome is
unknown — the process killed while it ran, a reply lost on the way — is known as
such and never sent again blind; it is that request's error (:data:`UNKNOWN`), said
on stderr, and its case ends in an error row; running the command again redoes it,
the user's choice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ApiError, BatchFileError
from .base import BatchView, Tag
from .downloads import Sink, verbatim

# A call sent whose outcome is unknown: a status the reference does not retry, so the
# case ends in an error row instead of a second, possibly billed, call.
UNKNOWN = 499


class OutcomeUnknown(Exception):
    """A call was sent and its reply lost on the way (no answer in time, a connection
    closed): it may have run and been billed."""


@dataclass(frozen=True)
class Calls:
    """How one service's requests go one at a time: ``kind`` names the files and the
    batch (``ondemand``, ``flex``); ``send`` makes one call and returns its output line
    (a refusal the service answered is a line; a lost reply raises :class:`OutcomeUnknown`);
    ``unknown`` writes the line of a call whose
    outcome is unknown; ``key`` is a request's id, ``ok`` whether a line succeeded."""

    kind: str
    key: Callable[[dict[str, Any]], str]
    send: Callable[[dict[str, Any]], dict[str, Any]]
    unknown: Callable[[dict[str, Any], str], dict[str, Any]]
    ok: Callable[[dict[str, Any]], bool]
    status: str  # the made batch's status, for people


def batch_id(kind: str, tag: Tag) -> str:
    return f"{kind}-{tag.run_id[:8]}-{tag.sub}"


class OneByOne:
    """The batches this process made of calls (by id), and how to make one."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self.warn = warn
        self.made: dict[str, BatchView] = {}

    def owns(self, ident: str, kinds: tuple[str, ...]) -> bool:
        return ident.startswith(tuple(f"{k}-" for k in kinds))

    def run(self, calls: Calls, tag: Tag, path: Path, now: float) -> BatchView:
        out = path.with_name(f"{path.name}.{calls.kind}.out")
        notes = path.with_name(f"{path.name}.{calls.kind}.sent")
        done, sent = _done(out, calls), _sent(notes)
        ok = failed = 0
        requests = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        with open(out, "ab") as fh, open(notes, "ab") as intents:
            for request in requests:
                rid = calls.key(request)
                if rid in done:
                    ok, failed = (ok + 1, failed) if done[rid] else (ok, failed + 1)
                    continue
                if rid in sent:  # sent before, its outcome never written
                    line = self.unknown(calls, request, "the process stopped while it ran")
                else:
                    _append(intents, rid.encode() + b"\n")
                    try:
                        line = calls.send(request)
                    except OutcomeUnknown as lost:
                        line = self.unknown(calls, request, f"its reply was lost ({lost})")
                _append(fh, json.dumps(line).encode() + b"\n")
                ok, failed = (ok + 1, failed) if calls.ok(line) else (ok, failed + 1)
        made = BatchView(
            id=batch_id(calls.kind, tag),
            status=calls.status,
            phase="ended",
            ending="completed",
            total=len(requests),
            completed=ok,
            failed=failed,
            files=(str(out),),
            created_at=now,
        )
        self.made[made.id] = made
        return made

    def unknown(self, calls: Calls, request: dict[str, Any], why: str) -> dict[str, Any]:
        rid = calls.key(request)
        message = (
            f"the {calls.kind} call for request {rid} was sent, but {why}: its outcome is"
            " unknown and it may have been billed, so it is not sent again blind; its case"
            " ends in an error, and running the command again redoes it"
        )
        self.warn(f"warning: {message}")
        return calls.unknown(request, message)

    def view(self, ident: str) -> BatchView:
        found = self.made.get(ident)
        if found is None:
            raise ApiError(
                f"{ident}: requests sent one at a time by another process; their replies are"
                " in the run's requests folder (*.out)",
                batch_id=ident,
            )
        return found

    def download(self, ref: str, dest: Path) -> int:
        source = Path(ref)

        def fill(sink: Sink) -> None:
            sink.write(source.read_bytes())

        return verbatim(dest, fill)


def _done(out: Path, calls: Calls) -> dict[str, bool]:
    """Requests already answered by an earlier attempt (id → whether it succeeded); a torn
    last line (a crash mid-write) is dropped and its request called again."""
    if not out.exists():
        return {}
    found: dict[str, bool] = {}
    data = out.read_bytes()
    good = data[: data.rfind(b"\n") + 1]
    if len(good) != len(data):
        out.write_bytes(good)
    for lineno, line in enumerate(good.splitlines(), 1):
        try:
            obj = json.loads(line)
            found[calls.key(obj)] = calls.ok(obj)
        except (ValueError, TypeError, KeyError):
            raise BatchFileError(
                f"{out}: line {lineno}: not a reply as batchbench writes them"
                " (damaged? move the file aside to call its requests again)"
            ) from None
    return found


def _sent(notes: Path) -> set[str]:
    """Requests whose call was sent by an earlier attempt (a torn last line: not sent)."""
    if not notes.exists():
        return set()
    data = notes.read_bytes()
    return {line.decode() for line in data[: data.rfind(b"\n") + 1].splitlines() if line}


def _append(fh: Any, data: bytes) -> None:
    fh.write(data)
    fh.flush()
    os.fsync(fh.fileno())
