"""Requests too few for a Bedrock job, sent on demand because the user chose it.

A job below the account's minimum number of records is refused, so a small
remainder (a smoke run, a retry of a few lines) is sent only when the run is told to
(``--on-demand-remainder``), each record one ``InvokeModel`` call at the full price;
its answer is written as a job's output would be, ``{recordId, modelInput,
modelOutput | error}``. A refusal the service answered (429, 500, a 4xx) ran nothing
and follows the reference's rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .. import _failpoints
from ..errors import ApiError, TransientApiError, Unreachable
from .one_by_one import Answered, Busy, Calls, OutcomeUnknown


def on_demand_calls(runtime: Any, call: Callable[..., Any], model_id: str) -> Calls:
    """A record sent as one InvokeModel call of ``model_id`` (``call``: the client's call
    under its error map, made once: it costs money and carries no idempotency token)."""

    def send(record: dict[str, Any]) -> Answered | Busy:
        line: dict[str, Any] = {"recordId": record["recordId"], "modelInput": record["modelInput"]}
        try:
            reply = call(
                f"invoke {model_id} for {record['recordId']}",
                lambda: runtime.invoke_model(
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
                return Answered(line)  # answered (or never reached): nothing ran
            raise OutcomeUnknown(str(exc)) from None
        except ApiError as exc:
            line["error"] = {"errorCode": exc.status or 500, "errorMessage": str(exc)}
            return Answered(line)
        line["modelOutput"] = json.loads(reply["body"].read())
        _failpoints.hit("invoked")  # crash tests: paid for, not yet journaled
        return Answered(line)

    return Calls(
        kind="ondemand",
        key=lambda record: str(record["recordId"]),
        send=send,
        ok=lambda line: "modelOutput" in line,
        label="on-demand",
        status="Completed (on demand)",
    )
