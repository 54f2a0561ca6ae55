"""The model names the emulated services know, so a misspelt model fails as it would there.

A real service answers a model it does not have with a 404 (or errors the
batch's lines); an emulator that accepted any name would let a typo sit "in
progress" forever in a rehearsal. The catalogue holds the package's price
table's models (read as data: the emulator shares no code with the pipeline),
their dated snapshots (``gpt-4o-2024-08-06``, ``claude-haiku-4-5-20251001``),
fine-tunes of them (``ft:gpt-4o-mini:org::id``), the simulated models (a name
with a ``sim`` part: ``sim-answer``, ``claude-sim``, ``accounts/a/models/sim-x``)
and whatever names are added (``batchbench emulator --model NAME``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from importlib import resources

SIMULATED = re.compile(r"(^|[/._-])sim($|[._-])")
_DATED = re.compile(r"(.+?)-(\d{4}-\d{2}-\d{2}|\d{8})")


def price_table_models() -> list[str]:
    """The models of the package's price table (its data file; none if it is missing)."""
    try:
        text = resources.files("batchbench").joinpath("pricing.json").read_text("utf-8")
        models = json.loads(text).get("models", {})
    except (OSError, ValueError, ModuleNotFoundError):
        return []
    return [str(name) for name in models]


class Catalogue:
    """Which model names exist."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.names = set(price_table_models()) | set(extra)

    def add(self, names: Iterable[str]) -> None:
        self.names |= set(names)

    def knows(self, name: str) -> bool:
        if name in self.names or SIMULATED.search(name):
            return True
        dated = _DATED.fullmatch(name)
        if dated and dated.group(1) in self.names:
            return True
        if name.startswith("ft:"):
            parts = name.split(":")
            return len(parts) > 1 and self.knows(parts[1])
        return False

    def listed(self, prefix: str = "") -> list[str]:
        """The named models (not the simulated pattern) starting with ``prefix``."""
        return sorted(n for n in self.names if n.startswith(prefix))
