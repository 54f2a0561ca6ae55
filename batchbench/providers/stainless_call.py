"""One call through a Stainless-made SDK (openai, anthropic), sent once and read as a
batch's output line: OpenAI's flex calls and Anthropic's Messages calls at the list
price both go through :func:`one_call`, so their reading of a refusal, a lost reply and
an answer is one rule.

A refusal for want of capacity (the statuses the caller names: 429, Anthropic's 529)
ran nothing and is not billed: :class:`.one_by_one.Busy`, tried again later by the
engine. A reply lost on the way (a timeout, a connection dropped after it was taken)
may have run: :class:`.one_by_one.OutcomeUnknown`. Any other answer, an error
included, is the line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

from .. import _failpoints
from . import transport
from .one_by_one import Answered, Busy, OutcomeUnknown

# status, the service's request id, the body (parsed) → the output line
Line = Callable[[int, "str | None", Any], dict[str, Any]]


def body_of(text: str) -> Any:
    """A reply's body as JSON, or its text in an error envelope when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {"error": {"message": text[:1000], "type": "server_error"}}


def said(body: Any) -> str | None:
    """The service's own words in an error body (OpenAI's ``error.message``, Anthropic's
    ``error.message`` under its ``type: error`` envelope), when it has them."""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None


def one_call(
    sdk: ModuleType,
    create: Callable[[], Any],
    line: Line,
    *,
    busy: Collection[int],
    request_id: str,
    timeout: float,
    failpoint: str,
) -> Answered | Busy:
    """``create`` (a ``with_raw_response`` create, no retries of the SDK's own) made once,
    its outcome read: ``request_id`` is the header naming the service's request."""
    try:
        raw = create()
    except sdk.APIStatusError as exc:
        rid = exc.response.headers.get(request_id)
        answer = line(exc.status_code, rid, body_of(exc.response.text))
        if exc.status_code in busy:  # refused, not run, not billed
            words = said(body_of(exc.response.text)) or exc.message
            return Busy(f"{exc.status_code}: {words}"[:200])
        return Answered(answer)
    except sdk.APITimeoutError as exc:
        raise OutcomeUnknown(f"no answer in {timeout:g}s ({exc})") from None
    except sdk.APIConnectionError as exc:
        if transport.fault(exc) == "connect":  # never reached: not run, not billed
            return Busy(f"cannot connect ({exc})"[:200])
        raise OutcomeUnknown(str(exc)) from None
    _failpoints.hit(failpoint)  # crash tests: paid for, not yet journaled
    response = raw.http_response
    return Answered(
        line(response.status_code, response.headers.get(request_id), body_of(response.text))
    )
