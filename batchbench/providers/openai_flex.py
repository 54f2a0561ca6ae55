"""OpenAI's flex tier for a batch's tail: the same requests, one chat completion at a time
with ``service_tier: "flex"``, at the batch price.

Each answer is written as the Batch API's output line would hold it (``{id,
custom_id, response: {status_code, request_id, body}}``), so the rows are the batch
path's. A call refused 429 for want of capacity ran nothing and is not billed: it is
:class:`.one_by_one.Busy`, and the engine decides when to try it again.
``X-Client-Request-Id`` carries the request's id, so a call can be traced.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from .. import _failpoints
from . import transport
from .one_by_one import Answered, Busy, Calls, OutcomeUnknown

TIMEOUT = 900.0  # a flex reply may take minutes (the tier's target is 1 to 15)


def _line(custom_id: str, status: int, request_id: str | None, body: Any) -> dict[str, Any]:
    response = {"status_code": status, "request_id": request_id, "body": body}
    return {"id": f"flex_{request_id or custom_id}", "custom_id": custom_id, "response": response}


def _said(body: Any) -> str | None:
    """The service's own words in an error body, when it has them."""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None


def _body(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {"error": {"message": text[:1000], "type": "server_error"}}


def flex_calls(sdk: openai.OpenAI) -> Calls:
    """A batch request line sent as one flex call (no retries of the SDK's own: each
    try is the engine's, journaled)."""
    quiet = sdk.with_options(max_retries=0, timeout=TIMEOUT)

    def send(line: dict[str, Any]) -> Answered | Busy:
        custom_id, body = str(line["custom_id"]), dict(line["body"])
        model, messages = body.pop("model"), body.pop("messages")
        try:
            raw = quiet.chat.completions.with_raw_response.create(
                model=model,
                messages=messages,
                service_tier="flex",
                extra_body=body,  # the rest of the batch line's body, as it is
                extra_headers={"X-Client-Request-Id": custom_id},
            )
        except openai.APIStatusError as exc:
            request_id = exc.response.headers.get("x-request-id")
            answer = _line(custom_id, exc.status_code, request_id, _body(exc.response.text))
            if exc.status_code == 429:  # refused, not run, not billed
                return Busy(f"429: {_said(answer['response']['body']) or exc.message}"[:200])
            return Answered(answer)
        except openai.APITimeoutError as exc:
            raise OutcomeUnknown(f"no answer in {TIMEOUT:g}s ({exc})") from None
        except openai.APIConnectionError as exc:
            if transport.fault(exc) == "connect":  # never reached: not run, not billed
                return Busy(f"cannot connect ({exc})"[:200])
            raise OutcomeUnknown(str(exc)) from None
        _failpoints.hit("flexed")  # crash tests: paid for, not yet journaled
        return Answered(_line(custom_id, 200, raw.headers.get("x-request-id"), _body(raw.text)))

    return Calls(
        kind="flex",
        key=lambda line: str(line["custom_id"]),
        send=send,
        ok=lambda line: (line.get("response") or {}).get("status_code") == 200,
        label="flex",
        status="completed (on flex)",
    )
