"""A run's marked batches on a service, kept between looks (the clients whose batches
carry the run's tag and are found by a walk of the list: OpenAI's shape, Gemini's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from .base import CLOCK_SKEW

T = TypeVar("T")


class Marked(Generic[T]):
    """A run's marked batches on a service (submission → the service's record), kept
    between looks: the first look walks the list back to the run's start, each later one
    only back to the previous look's (less :data:`CLOCK_SKEW`)."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[float, dict[str, T]]] = {}

    def index(
        self, run_id: str, since: float, now: float, walk: Callable[[str, float], dict[str, T]]
    ) -> dict[str, T]:
        last, found = self._runs.get(run_id, (None, {}))
        floor = (since if last is None else max(since, last)) - CLOCK_SKEW
        merged = {**found, **walk(run_id, floor)}  # the newer walk's word wins
        self._runs[run_id] = (now, merged)
        return merged
