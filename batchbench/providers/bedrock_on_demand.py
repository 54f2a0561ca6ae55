"""Requests too few for a Bedrock job, sent on demand because the user chose it.

A job below the account's minimum number of records is refused, so a small
remainder (a smoke run, a retry of a few lines) is sent only when the run is told to
(``--on-demand-remainder``), each record one ``InvokeModel`` call at the full price.
The replies are written as a job's output would be (``{recordId, modelInput,
modelOutput | error}``), one line appended and flushed to disk per call beside the
request file, so the rest of the run reads them as any job's; a crash part way
leaves the calls already made on disk, and the next attempt makes only the others.
A call is made once (an ambiguous failure is that record's error, which the
reference's rules retry or not), never retried blind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ApiError
from .base import BatchView, Tag
from .downloads import Sink, verbatim

PREFIX = "ondemand-"


def is_on_demand(batch_id: str) -> bool:
    return batch_id.startswith(PREFIX)


class OnDemand:
    def __init__(self, runtime: Any, call: Callable[..., Any]) -> None:
        self.runtime = runtime
        self.call = call  # the client's errors() map, as a context manager factory's user
        self.made: dict[str, BatchView] = {}

    def run(self, tag: Tag, model_id: str, path: Path, now: float) -> BatchView:
        out = path.with_name(path.name + ".ondemand.out")
        done = _done(out)
        ok = failed = 0
        records = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        with open(out, "ab") as fh:
            for record in records:
                rid = record["recordId"]
                if rid in done:
                    ok, failed = (ok + 1, failed) if done[rid] else (ok, failed + 1)
                    continue
                line = self._invoke(model_id, record)
                fh.write(json.dumps(line).encode() + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
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
        except ApiError as exc:
            line["error"] = {"errorCode": exc.status or 500, "errorMessage": str(exc)}
            return line
        line["modelOutput"] = json.loads(reply["body"].read())
        return line

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
    for line in good.splitlines():
        obj = json.loads(line)
        found[obj["recordId"]] = "modelOutput" in obj
    return found
