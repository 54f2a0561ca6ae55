"""A batch's requests one chat completion at a time through an OpenAI-shaped SDK: on the
flex tier (``service_tier: "flex"``, at the batch price: OpenAI's, Azure OpenAI's) or on
demand at the list price (Groq's, whose flex tier is priced as on demand).

Each answer is written as the Batch API's output line would hold it (``{id,
custom_id, response: {status_code, request_id, body}}``), so the rows are the batch
path's. A call refused 429 for want of capacity ran nothing and is not billed
(:func:`.stainless_call.one_call`). ``X-Client-Request-Id`` carries the request's id,
so a call can be traced.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import openai

from .one_by_one import Answered, Busy, CallKind, Calls
from .stainless_call import one_call

TIMEOUT = 900.0  # a flex reply may take minutes (the tier's target is 1 to 15)
LABELS: dict[CallKind, tuple[str, str]] = {  # kind → its label, the made batch's status
    "flex": ("flex", "completed (on flex)"),
    "ondemand": ("on-demand", "completed (on demand)"),
}


def _line(
    kind: CallKind, custom_id: str, status: int, request_id: str | None, body: Any
) -> dict[str, Any]:
    response = {"status_code": status, "request_id": request_id, "body": body}
    made = f"{kind}_{request_id or custom_id}"
    return {"id": made, "custom_id": custom_id, "response": response}


def chat_calls(
    sdk: Any,
    kind: CallKind = "flex",
    module: ModuleType = openai,
    write: Callable[[str, int, Any], dict[str, Any]] | None = None,
) -> Calls:
    """A batch request line sent as one chat completion of the given kind, through ``sdk``
    (of ``module``: openai's, or groq's of the same make), no retries of the SDK's own:
    each try is the engine's, journaled. ``write``: the reply (id, status, body) as the
    service's own results hold it, where they are not the Batch API's output lines."""
    quiet = sdk.with_options(max_retries=0, timeout=TIMEOUT)
    tier = {"service_tier": "flex"} if kind == "flex" else {}

    def send(line: dict[str, Any]) -> Answered | Busy:
        custom_id, body = str(line["custom_id"]), dict(line["body"])
        model, messages = body.pop("model"), body.pop("messages")
        return one_call(
            module,
            lambda: quiet.chat.completions.with_raw_response.create(
                model=model,
                messages=messages,
                **tier,
                extra_body=body,  # the rest of the batch line's body, as it is
                extra_headers={"X-Client-Request-Id": custom_id},
            ),
            lambda status, rid, reply: (
                write(custom_id, status, reply)
                if write is not None
                else _line(kind, custom_id, status, rid, reply)
            ),
            busy={429},
            request_id="x-request-id",
            timeout=TIMEOUT,
            failpoint="flexed" if kind == "flex" else "invoked",
        )

    label, status = LABELS[kind]
    return Calls(
        kind=kind,
        key=lambda line: str(line["custom_id"]),
        send=send,
        ok=lambda line: (line.get("response") or {}).get("status_code") == 200,
        label=label,
        status=status,
    )
