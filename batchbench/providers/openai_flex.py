"""OpenAI's flex tier for a batch's tail: the same requests, one chat completion at a time
with ``service_tier: "flex"``, at the batch price.

A flex call refused 429 for want of capacity ran nothing and is not billed: it is
sent again after a wait (doubling, up to :data:`BUSY_TRIES` tries), then written as
its 429 for the reference's rules. Each reply is written as the Batch API's output
line would hold it (``{id, custom_id, response: {status_code, request_id, body}}``),
so the rows are the batch path's; the calls go one at a time through
:mod:`.one_by_one` (noted before they are sent, a lost reply never sent blind
again). ``X-Client-Request-Id`` carries the request's id, so a call can be traced.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai

from .. import _failpoints
from ..clock import Clock
from .base import BatchView, Tag
from .one_by_one import UNKNOWN, Calls, OneByOne, OutcomeUnknown

KIND = "flex"
BUSY_TRIES = 6  # tries of a call flex refuses for want of capacity
BUSY_WAIT = 2.0  # seconds before the first try again (doubling)
TIMEOUT = 900.0  # a flex reply may take minutes (the tier's target is 1 to 15)


def is_flex(batch_id: str) -> bool:
    return batch_id.startswith(f"{KIND}-")


def _line(custom_id: str, status: int, request_id: str | None, body: Any) -> dict[str, Any]:
    response = {"status_code": status, "request_id": request_id, "body": body}
    return {"id": f"flex_{request_id or custom_id}", "custom_id": custom_id, "response": response}


def _body(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {"error": {"message": text[:1000], "type": "server_error"}}


class Flex(OneByOne):
    def __init__(self, sdk: openai.OpenAI, clock: Clock, warn: Callable[[str], None]) -> None:
        super().__init__(warn)
        self.sdk = sdk.with_options(max_retries=0, timeout=TIMEOUT)
        self.clock = clock

    def run_lines(self, tag: Tag, path: Path) -> BatchView:
        calls = Calls(
            kind=KIND,
            key=lambda line: str(line["custom_id"]),
            send=self._send,
            unknown=lambda line, message: _line(
                str(line["custom_id"]), UNKNOWN, None, {"error": {"message": message}}
            ),
            ok=lambda line: (line.get("response") or {}).get("status_code") == 200,
            status="completed (on flex)",
        )
        return self.run(calls, tag, path, self.clock.time())

    def _send(self, line: dict[str, Any]) -> dict[str, Any]:
        custom_id, body = str(line["custom_id"]), dict(line["body"])
        model, messages = body.pop("model"), body.pop("messages")
        wait = BUSY_WAIT
        for attempt in range(1, BUSY_TRIES + 1):
            try:
                raw = self.sdk.chat.completions.with_raw_response.create(
                    model=model,
                    messages=messages,
                    service_tier="flex",
                    extra_body=body,  # the rest of the batch line's body, as it is
                    extra_headers={"X-Client-Request-Id": custom_id},
                )
            except openai.APIStatusError as exc:
                if exc.status_code == 429 and attempt < BUSY_TRIES:
                    self.clock.sleep(wait)  # refused, not run, not billed: later
                    wait *= 2
                    continue
                request_id = exc.response.headers.get("x-request-id")
                return _line(custom_id, exc.status_code, request_id, _body(exc.response.text))
            except openai.APITimeoutError as exc:
                raise OutcomeUnknown(f"no answer in {TIMEOUT:g}s ({exc})") from None
            except openai.APIConnectionError as exc:
                if type(exc.__cause__).__name__ == "ConnectError":  # never reached: not run
                    message = {"error": {"message": f"cannot connect: {exc}"}}
                    return _line(custom_id, 503, None, message)
                raise OutcomeUnknown(str(exc)) from None
            _failpoints.hit("flexed")  # crash tests: paid for, not yet written
            return _line(custom_id, 200, raw.headers.get("x-request-id"), _body(raw.text))
        raise AssertionError("unreachable")  # the last try returns
