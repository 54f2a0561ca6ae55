"""What every face's routes share: the route record and the request's parameters."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .objects import ApiFailure

Face = Literal["openai", "anthropic", "gemini", "fireworks", "emulator"]


@dataclass(frozen=True)
class Route:
    """``handle(handler, *groups, query=..., body=...)`` answers ``method`` on ``pattern``.

    ``writes``: the call changes the service's state, so an injected 500 may come
    after the change took effect (the caller cannot tell: exactly what
    exactly-once submission must survive).
    """

    method: str
    pattern: re.Pattern[str]
    handle: Callable[..., None]
    face: Face
    writes: bool = False


def json_body(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiFailure(400, "We could not parse the JSON body of your request.") from None


def int_param(query: dict, name: str, default: int, low: int, high: int) -> int:
    if name not in query:
        return default
    try:
        value = int(query[name])
    except ValueError:
        raise ApiFailure(400, f"Invalid '{name}': must be an integer", param=name) from None
    if not low <= value <= high:
        raise ApiFailure(400, f"Invalid '{name}': must be between {low} and {high}", param=name)
    return value
