"""Gemini's flex tier: a batch job's requests sent one ``generateContent`` call at a time
with ``service_tier: "flex"``, synchronous and at the batch price ("Flex and Batch both
at a 50% discount", Google's cookbook) — a deadline's fallback.

Each answer is written as the job's responses file would hold it (``{key, response}``
or ``{key, error}``, the response verbatim: the SDK hands back the raw body when asked),
so the rows are the batch path's. Flex is "best-effort (sheddable)": a 429
(``RESOURCE_EXHAUSTED``) or 503 (``UNAVAILABLE``) ran nothing and is not billed, and
the engine tries it again later. ``X-Client-Request-Id``, which the service ignores,
carries the request's key, so a call can be traced.
"""

from __future__ import annotations

import json
from typing import Any

from google import genai
from google.genai import errors, types

from .. import _failpoints
from . import transport
from .one_by_one import Answered, Busy, Calls, OutcomeUnknown

TIMEOUT_MS = 900_000  # the tier's target is "1-15 min"
BUSY = (429, 503)  # shed: not run, not billed


def _error(key: str, exc: errors.APIError) -> dict[str, Any]:
    return {"key": key, "error": {"code": exc.code, "message": exc.message, "status": exc.status}}


def flex_calls(sdk: genai.Client, model: str) -> Calls:
    """A job's request line sent as one flex call of ``model`` (no retries of the SDK's
    own: each try is the engine's, journaled)."""

    def send(line: dict[str, Any]) -> Answered | Busy:
        key, request = str(line["key"]), dict(line["request"])
        config = types.GenerateContentConfig(
            **(request.get("generation_config") or {}),
            service_tier=types.ServiceTier.FLEX,
            should_return_http_response=True,  # the body as it came
            http_options=types.HttpOptions(
                timeout=TIMEOUT_MS, headers={"X-Client-Request-Id": key}
            ),
        )
        try:
            made = sdk.models.generate_content(
                model=model, contents=request["contents"], config=config
            )
        except errors.APIError as exc:
            if exc.code in BUSY:
                return Busy(f"{exc.code}: {exc.message or exc.status}"[:200])
            return Answered(_error(key, exc))
        except Exception as exc:  # the transport's own (httpx), unwrapped
            found = transport.fault(exc)
            if found == "connect":  # never reached: not run, not billed
                return Busy(f"cannot connect ({exc})"[:200])
            if found is None:
                raise
            raise OutcomeUnknown(f"{found}: {exc}") from None
        _failpoints.hit("flexed")  # crash tests: paid for, not yet journaled
        raw = made.sdk_http_response
        body = json.loads(raw.body) if raw is not None and raw.body else {}
        return Answered({"key": key, "response": body})

    return Calls(
        kind="flex",
        key=lambda line: str(line["key"]),
        send=send,
        ok=lambda line: "response" in line,
        label="flex",
        status="SUCCEEDED (on flex)",
    )
