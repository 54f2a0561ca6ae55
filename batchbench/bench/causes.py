"""Why cases failed, in words people can act on: one taxonomy for ``status``, the
run's end, ``show`` and the report page.

An error row keeps the reference's ``Type: message`` text verbatim; these group
such rows by cause (without their particulars) and pull the service's own
message out of a quoted HTTP reply.
"""

from __future__ import annotations

import json
import re


def error_cause(error: str) -> str:
    """An error row's cause, without its particulars: what errors are grouped by."""
    text = error.split(": ", 1)[1] if ": " in error else error
    gave_up = re.match(r"\w+ request failed after \d+ attempts: (.*)", text, re.S)
    if gave_up:
        return error_cause("Error: " + gave_up.group(1)) + " (retries spent)"
    for pattern in (
        r"(invalid judge JSON)",
        r"(judge item mismatch)",
        r"(duplicate judge decision)",
        r"(each judge decision needs .*)",
        r"(HTTP \d+)",
        r"(\w+): ",
    ):
        found = re.match(pattern, text)
        if found:
            return found.group(1)
    return text[:60]


def readable_error(error: str, limit: int = 200) -> str:
    """An error row's text for people: the service's own message when the error quotes
    an HTTP reply, without the exception's type; cut to ``limit`` characters."""
    text = error.split(": ", 1)[1] if re.match(r"\w+: ", error) else error
    found = re.search(r"HTTP (\d+): (\{.*\})", text, re.S)
    if found:
        try:
            body = json.loads(found.group(2))
            inner = body.get("error", body) if isinstance(body, dict) else body
            message = inner.get("message") if isinstance(inner, dict) else None
            if isinstance(message, str) and message:
                text = text[: found.start(2)] + message
        except ValueError:
            pass
    return text if len(text) <= limit else text[: limit - 1] + "…"


def errors_line(causes: dict[str, int]) -> str:
    """``27 failed: 20 × invalid judge JSON, 7 × HTTP 400``."""
    total = sum(causes.values())
    return f"{total} failed: " + ", ".join(f"{n} × {cause}" for cause, n in causes.items())
