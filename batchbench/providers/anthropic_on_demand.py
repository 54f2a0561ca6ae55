"""A Message Batch's requests sent one Messages API call at a time, at the list price: a
deadline's fallback on Anthropic, which has no flex tier, only with --allow-list-price.

Each answer is written as the batch's results would hold it (``{custom_id, result:
{type: succeeded, message} | {type: errored, error}}``), so the rows are the batch
path's. A 429 (``rate_limit_error``) or 529 (``overloaded_error``) ran nothing and is
not billed (:func:`.stainless_call.one_call`). ``X-Client-Request-Id``, which the
service ignores, carries the request's id, so a call can be traced.
"""

from __future__ import annotations

from typing import Any

import anthropic

from .one_by_one import Answered, Busy, Calls
from .stainless_call import one_call

TIMEOUT = 600.0  # the SDK's own default for a non-streaming Messages call


def _line(custom_id: str, status: int, body: Any) -> dict[str, Any]:
    if status == 200:
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": body}}
    return {"custom_id": custom_id, "result": {"type": "errored", "error": body}}


def on_demand_calls(sdk: anthropic.Anthropic) -> Calls:
    """A Message Batch's request sent as one Messages call (no retries of the SDK's own:
    each try is the engine's, journaled)."""
    quiet = sdk.with_options(max_retries=0, timeout=TIMEOUT)

    def send(request: dict[str, Any]) -> Answered | Busy:
        custom_id, params = str(request["custom_id"]), dict(request["params"])
        model, max_tokens, messages = (
            params.pop("model"),
            params.pop("max_tokens"),
            params.pop("messages"),
        )
        return one_call(
            anthropic,
            lambda: quiet.messages.with_raw_response.create(
                model=model,
                max_tokens=max_tokens,
                messages=messages,
                extra_body=params,  # the rest of the request's params, as they are
                extra_headers={"X-Client-Request-Id": custom_id},
            ),
            lambda status, rid, reply: _line(custom_id, status, reply),
            busy={429, 529},
            request_id="request-id",
            timeout=TIMEOUT,
            failpoint="invoked",
        )

    return Calls(
        kind="ondemand",
        key=lambda request: str(request["custom_id"]),
        send=send,
        ok=lambda line: (line.get("result") or {}).get("type") == "succeeded",
        label="on-demand",
        status="ended (on demand)",
    )
