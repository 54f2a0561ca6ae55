"""OpenAI's flex tier for a batch's tail: the same requests, one chat completion at a time
with ``service_tier: "flex"``, at the batch price.

Each answer is written as the Batch API's output line would hold it (``{id,
custom_id, response: {status_code, request_id, body}}``), so the rows are the batch
path's. A call refused 429 for want of capacity ran nothing and is not billed
(:func:`.stainless_call.one_call`). ``X-Client-Request-Id`` carries the request's id,
so a call can be traced.
"""

from __future__ import annotations

from typing import Any

import openai

from .one_by_one import Answered, Busy, Calls
from .stainless_call import one_call

TIMEOUT = 900.0  # a flex reply may take minutes (the tier's target is 1 to 15)


def _line(custom_id: str, status: int, request_id: str | None, body: Any) -> dict[str, Any]:
    response = {"status_code": status, "request_id": request_id, "body": body}
    return {"id": f"flex_{request_id or custom_id}", "custom_id": custom_id, "response": response}


def flex_calls(sdk: openai.OpenAI) -> Calls:
    """A batch request line sent as one flex call (no retries of the SDK's own: each
    try is the engine's, journaled)."""
    quiet = sdk.with_options(max_retries=0, timeout=TIMEOUT)

    def send(line: dict[str, Any]) -> Answered | Busy:
        custom_id, body = str(line["custom_id"]), dict(line["body"])
        model, messages = body.pop("model"), body.pop("messages")
        return one_call(
            openai,
            lambda: quiet.chat.completions.with_raw_response.create(
                model=model,
                messages=messages,
                service_tier="flex",
                extra_body=body,  # the rest of the batch line's body, as it is
                extra_headers={"X-Client-Request-Id": custom_id},
            ),
            lambda status, rid, reply: _line(custom_id, status, rid, reply),
            busy={429},
            request_id="x-request-id",
            timeout=TIMEOUT,
            failpoint="flexed",
        )

    return Calls(
        kind="flex",
        key=lambda line: str(line["custom_id"]),
        send=send,
        ok=lambda line: (line.get("response") or {}).get("status_code") == 200,
        label="flex",
        status="completed (on flex)",
    )
