"""Requests too few for a Bedrock job, sent on demand because the user chose it.

A job below the account's minimum number of records is refused, so a small
remainder (a smoke run, a retry of a few lines) is sent only when the run is told to
(``--on-demand-remainder``), each record one ``InvokeModel`` call at the full price,
one at a time (:mod:`.one_by_one`: each call noted before it is sent and its reply
written as a job's output would be, ``{recordId, modelInput, modelOutput | error}``).
A refusal the service answered (429, 500, a 4xx) ran nothing and follows the
reference's rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import _failpoints
from ..errors import ApiError, TransientApiError, Unreachable
from .base import BatchView, Tag
from .one_by_one import UNKNOWN, Calls, OneByOne, OutcomeUnknown

KIND = "ondemand"


def is_on_demand(batch_id: str) -> bool:
    return batch_id.startswith(f"{KIND}-")


class OnDemand(OneByOne):
    def __init__(self, runtime: Any, call: Callable[..., Any], warn: Callable[[str], None]) -> None:
        super().__init__(warn)
        self.runtime = runtime
        self.call = call  # the client's call under its errors() map

    def run_records(self, tag: Tag, model_id: str, path: Path, now: float) -> BatchView:
        calls = Calls(
            kind=KIND,
            key=lambda record: str(record["recordId"]),
            send=lambda record: self._invoke(model_id, record),
            unknown=_unknown,
            ok=lambda line: "modelOutput" in line,
            status="Completed (on demand)",
        )
        return self.run(calls, tag, path, now)

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
            raise OutcomeUnknown(str(exc)) from None
        except ApiError as exc:
            line["error"] = {"errorCode": exc.status or 500, "errorMessage": str(exc)}
            return line
        line["modelOutput"] = json.loads(reply["body"].read())
        _failpoints.hit("invoked")  # crash tests: paid for, not yet written
        return line


def _unknown(record: dict[str, Any], message: str) -> dict[str, Any]:
    error = {"errorCode": UNKNOWN, "errorMessage": message}
    return {"recordId": record["recordId"], "modelInput": record["modelInput"], "error": error}
