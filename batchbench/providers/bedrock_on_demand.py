"""Requests too few for a Bedrock job, sent on demand because the user chose it.

A job below the account's minimum number of records is refused, so a small
remainder (a smoke run, a retry of a few lines) is sent only when the run is told to
(``--on-demand-remainder``), each record one ``InvokeModel`` call at the full price.
The replies are written as a job's output would be (``{recordId, modelInput,
modelOutput | error}``), one line appended and flushed to disk per call beside the
request file, so the rest of the run reads them as any job's; a crash part way
leaves the calls already made on disk, and the next attempt makes only the others.

Each call is noted before it is sent (``*.ondemand.sent``, fsynced), so a call whose
outcome is unknown — the process killed or interrupted while it ran, a reply lost on
the way (no answer in time, a connection closed) — is known as such: never sent
again blind, it is that record's error (:data:`UNKNOWN`), said on stderr, and the
case ends in an error row; running the command again redoes it, the user's choice.
A refusal the service answered (429, 500, a 4xx) ran nothing and follows the
reference's rules.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import _failpoints
from ..errors import ApiError, BatchFileError, TransientApiError, Unreachable
from .base import BatchView, Tag
from .downloads import Sink, verbatim

PREFIX = "ondemand-"
# A call sent whose outcome is unknown: a status the reference does not retry, so the
# case ends in an error row instead of a second, possibly billed, call.
UNKNOWN = 499


def is_on_demand(batch_id: str) -> bool:
    return batch_id.startswith(PREFIX)


class OnDemand:
    def __init__(self, runtime: Any, call: Callable[..., Any], warn: Callable[[str], None]) -> None:
        self.runtime = runtime
        self.call = call  # the client's errors() map, as a context manager factory's user
        self.warn = warn
        self.made: dict[str, BatchView] = {}

    def run(self, tag: Tag, model_id: str, path: Path, now: float) -> BatchView:
        out = path.with_name(path.name + ".ondemand.out")
        notes = path.with_name(path.name + ".ondemand.sent")
        done, sent = _done(out), _sent(notes)
        ok = failed = 0
        records = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        with open(out, "ab") as fh, open(notes, "ab") as intents:
            for record in records:
                rid = record["recordId"]
                if rid in done:
                    ok, failed = (ok + 1, failed) if done[rid] else (ok, failed + 1)
                    continue
                if rid in sent:  # sent before, its outcome never written
                    line = self._unknown(record, "the process stopped while it ran")
                else:
                    _append(intents, rid.encode() + b"\n")
                    line = self._invoke(model_id, record)
                _append(fh, json.dumps(line).encode() + b"\n")
                ok, failed = (ok + 1, failed) if "modelOutput" in line else (ok, failed + 1)
        made = BatchView(
            id=f"{PREFIX}{tag.run_id[:8]}-{tag.sub}",
            status="Completed (on demand)",
            phase="ended",
            ending="completed",
            total=len(records),
            completed=ok,
            failed=failed,
            files=(str(out),),
            created_at=now,
        )
        self.made[made.id] = made
        return made

    def _invoke(self, model_id: str, record: dict[str, Any]) -> dict[str, Any]:
        line: dict[str, Any] = {"recordId": record["recordId"], "modelInput": record["modelInput"]}
        try:
            reply = self.call(
                f"invoke {model_id} for {record['recordId']}",
                lambda: self.runtime.invoke_model(
                    modelId=model_id,
                    body=json.dumps(record["modelInput"]).encode(),
                    contentType="application/json",
                    accept="application/json",
                ),
                None,
                once=True,
            )
        except TransientApiError as exc:
            if exc.status is not None or isinstance(exc, Unreachable):
                line["error"] = {"errorCode": exc.status or 503, "errorMessage": str(exc)}
                return line  # answered (or never reached): nothing ran
            return self._unknown(record, f"its reply was lost ({exc})")
        except ApiError as exc:
            line["error"] = {"errorCode": exc.status or 500, "errorMessage": str(exc)}
            return line
        line["modelOutput"] = json.loads(reply["body"].read())
        _failpoints.hit("invoked")  # crash tests: paid for, not yet written
        return line

    def _unknown(self, record: dict[str, Any], why: str) -> dict[str, Any]:
        rid = record["recordId"]
        message = (
            f"the on-demand call for record {rid} was sent, but {why}: its outcome is unknown"
            " and it may have been billed, so it is not sent again blind; its case ends in an"
            " error, and running the command again redoes it"
        )
        self.warn(f"warning: {message}")
        error = {"errorCode": UNKNOWN, "errorMessage": message}
        return {"recordId": rid, "modelInput": record["modelInput"], "error": error}

    def view(self, batch_id: str) -> BatchView:
        found = self.made.get(batch_id)
        if found is None:
            raise ApiError(
                f"{batch_id}: requests sent on demand by another process; their replies are"
                " in the run's requests folder (*.ondemand.out)",
                batch_id=batch_id,
            )
        return found

    def download(self, ref: str, dest: Path) -> int:
        source = Path(ref)

        def fill(sink: Sink) -> None:
            sink.write(source.read_bytes())

        return verbatim(dest, fill)


def _done(out: Path) -> dict[str, bool]:
    """Records already answered by an earlier attempt (id → whether it succeeded); a torn
    last line (a crash mid-write) is dropped and its record called again."""
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
            found[str(obj["recordId"])] = "modelOutput" in obj
        except (ValueError, TypeError, KeyError):
            raise BatchFileError(
                f"{out}: line {lineno}: not an on-demand reply as batchbench writes them"
                " (damaged? move the file aside to call its records again)"
            ) from None
    return found


def _sent(notes: Path) -> set[str]:
    """Records whose call was sent by an earlier attempt (a torn last line: not sent)."""
    if not notes.exists():
        return set()
    data = notes.read_bytes()
    return {line.decode() for line in data[: data.rfind(b"\n") + 1].splitlines() if line}


def _append(fh: Any, data: bytes) -> None:
    fh.write(data)
    fh.flush()
    os.fsync(fh.fileno())
