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
from contextlib import AbstractContextManager
from typing import Any

from .. import _failpoints
from ..errors import ApiError, TransientApiError, Unreachable
from .bedrock_wire import VERSION
from .one_by_one import Answered, Busy, Calls, OutcomeUnknown
from .retry import Retrier

PROBE = {"role": "user", "content": "ping"}  # the smallest message CountTokens counts


def on_demand_calls(
    runtime: Any,
    call: Callable[..., Any],
    model_id: str,
    check: Callable[[], None] = lambda: None,
) -> Calls:
    """A record sent as one InvokeModel call of ``model_id`` (``call``: the client's call
    under its error map, made once: it costs money and carries no idempotency token);
    ``check``: the runtime endpoint's pre-flight."""

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
        check=check,
    )


def reach_runtime(
    retrier: Retrier,
    look: Any,
    errors: Callable[[str], AbstractContextManager[object]],
    model_id: str,
) -> None:
    """The on-demand endpoint reached, before anything is paid: one CountTokens call
    (free: "no charge", AWS says) through ``look``, a runtime client of short timeouts. A
    refusal in words (a model it cannot count, a permission) is an answer: only an
    endpoint that is not there, or silent, stops the run here; what InvokeModel refuses
    is each record's own error later."""
    probe = {"anthropic_version": VERSION, "max_tokens": 1, "messages": [PROBE]}
    try:
        retrier.preflight(
            f"reach the on-demand endpoint (count tokens for {model_id!r})",
            lambda: look.count_tokens(
                modelId=model_id, input={"invokeModel": {"body": json.dumps(probe).encode()}}
            ),
            url=look.meta.endpoint_url,
            where="AWS_ENDPOINT_URL_BEDROCK_RUNTIME (or AWS_ENDPOINT_URL) and the region",
            errors=errors,
        )
    except ApiError as exc:
        if exc.status is None:
            raise
