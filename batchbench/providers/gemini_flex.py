"""Gemini's flex tier: a batch job's requests sent one ``generateContent`` call at a time,
synchronous and at the batch price — a deadline's fallback. On the Gemini API it is
``service_tier: "flex"`` ("Flex and Batch both at a 50% discount", Google's cookbook);
on Vertex AI it is Flex PayGo, two headers on the global endpoint only ("a 50%
discount compared to Standard PayGo", as a batch job has; its reply's
``usageMetadata.trafficType`` says ``ON_DEMAND_FLEX``).

Each answer is written as the job's output file would hold it — the Gemini API's
``{key, response}`` or ``{key, error}``; Vertex's ``{request, response, status: ""}``
or ``{request, status: "Reason: {error}"}`` — the response verbatim (the SDK hands back
the raw body when asked), so the rows are the batch path's. Flex is "best-effort
(sheddable)": a 429 (``RESOURCE_EXHAUSTED``) or 503 (``UNAVAILABLE``) ran nothing and
is not billed, and the engine tries it again later. On the Gemini API
``X-Client-Request-Id``, which the service ignores, carries the request's key, so a
call can be traced; a Vertex request carries its id in its labels already.
"""

from __future__ import annotations

import http
import json
from dataclasses import dataclass
from typing import Any

from google import genai
from google.genai import errors, types

from .. import _failpoints
from . import transport
from .one_by_one import Answered, Busy, Calls, OutcomeUnknown
from .vertex_wire import ID_LABEL

TIMEOUT_MS = 900_000  # the tier's target is "1-15 min" (Vertex allows up to 30)
BUSY = (429, 503)  # shed: not run, not billed
# Vertex AI's Flex PayGo, and only it: no Provisioned Throughput first (Google's page,
# docs.cloud.google.com/vertex-ai/generative-ai/docs/flex-paygo; third-party clients send
# the same two headers, e.g. for Vertex's shared request types "priority" and "flex").
VERTEX_FLEX = {
    "X-Vertex-AI-LLM-Request-Type": "shared",
    "X-Vertex-AI-LLM-Shared-Request-Type": "flex",
}


@dataclass(frozen=True)
class _Shape:
    """Where one service's job lines keep their id and request, and how its output
    file writes an answer and a refusal."""

    vertex: bool

    def key(self, line: dict[str, Any]) -> str:
        if self.vertex:
            return str(line["request"]["labels"][ID_LABEL])
        return str(line["key"])

    def config(self, line: dict[str, Any]) -> types.GenerateContentConfig:
        request = line["request"]
        if self.vertex:
            headers = dict(VERTEX_FLEX)
            extra: dict[str, Any] = {"labels": request.get("labels")}
        else:
            headers = {"X-Client-Request-Id": self.key(line)}
            extra = {"service_tier": types.ServiceTier.FLEX}
        return types.GenerateContentConfig(
            **(request.get("generation_config") or {}),
            **extra,
            should_return_http_response=True,  # the body as it came
            http_options=types.HttpOptions(timeout=TIMEOUT_MS, headers=headers),
        )

    def answered(self, line: dict[str, Any], body: Any) -> dict[str, Any]:
        if self.vertex:
            return {"request": line["request"], "response": body, "status": ""}
        return {"key": self.key(line), "response": body}

    def refused(self, line: dict[str, Any], exc: errors.APIError) -> dict[str, Any]:
        error = {"code": exc.code, "message": exc.message, "status": exc.status}
        if not self.vertex:
            return {"key": self.key(line), "error": error}
        try:
            reason = http.HTTPStatus(exc.code).phrase
        except ValueError:
            reason = "Error"
        return {"request": line["request"], "status": f"{reason}: {json.dumps({'error': error})}"}

    def ok(self, line: dict[str, Any]) -> bool:
        return "response" in line and not line.get("status")


def flex_calls(sdk: genai.Client, model: str, *, vertex: bool = False) -> Calls:
    """A job's request line sent as one flex call of ``model`` (no retries of the SDK's
    own: each try is the engine's, journaled); ``vertex``: as Vertex AI takes it (the
    ``sdk`` bound to the global endpoint)."""
    shape = _Shape(vertex)

    def send(line: dict[str, Any]) -> Answered | Busy:
        try:
            made = sdk.models.generate_content(
                model=model, contents=line["request"]["contents"], config=shape.config(line)
            )
        except errors.APIError as exc:
            if exc.code in BUSY:
                return Busy(f"{exc.code}: {exc.message or exc.status}"[:200])
            return Answered(shape.refused(line, exc))
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
        return Answered(shape.answered(line, body))

    return Calls(
        kind="flex",
        key=shape.key,
        send=send,
        ok=shape.ok,
        label="flex",
        status="SUCCEEDED (on flex)",
    )
