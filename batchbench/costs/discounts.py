"""The batch discount each venue gives, and where that figure was read.

Not one figure for every service: Groq's stored documentation has said 25 % and later
50 %, Together discounts *selected* models only ("up to 50 %"), OpenRouter prices each
model's batch on its own. Each venue's entry in ``pricing.json`` (``batch_discounts``)
carries its fraction, its source and, where the vendor names models, the models that
differ; a price file of one's own (``--pricing``) may give its own table, or one
``batch_discount`` for every venue. Where the sources disagree the smaller discount is
taken, so that an estimate is not below the bill, and the source says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class Discount:
    """A fraction off the synchronous list price, and where it was read."""

    fraction: float
    source: str
    as_of: str | None = None

    def text(self) -> str:
        """``batch discount 50%, per <source>, as of 2026-06``: for the dry run's lines."""
        when = f", as of {self.as_of}" if self.as_of else ""
        return f"batch discount {self.fraction:.0%}, per {self.source}{when}"


@dataclass(frozen=True)
class VenueDiscount:
    """A venue's discount, and the models it discounts otherwise (``models``)."""

    usual: Discount
    models: Mapping[str, Discount] = field(default_factory=dict)

    def of(self, model: str) -> Discount:
        return self.models.get(model, self.usual)


def _fraction(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ConfigError(f"{where} must be a number in [0, 1)")
    return float(value)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_venues(data: Any, source: str) -> dict[str, VenueDiscount]:
    """``batch_discounts`` of a price file: venue → ``{"discount", "source", "as_of",
    "models": {model: discount}}``; a one-line error names the field that is wrong."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: batch_discounts must be an object of venues")
    venues: dict[str, VenueDiscount] = {}
    for venue, entry in data.items():
        where = f"{source}: batch_discounts.{venue}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be an object with 'discount' and 'source'")
        said = _text(entry.get("source")) or source
        as_of = _text(entry.get("as_of"))
        usual = Discount(_fraction(entry.get("discount"), f"{where}.discount"), said, as_of)
        models = entry.get("models") or {}
        if not isinstance(models, dict):
            raise ConfigError(f"{where}.models must map model names to discounts")
        venues[venue] = VenueDiscount(
            usual,
            {
                name: Discount(_fraction(value, f"{where}.models.{name}"), said, as_of)
                for name, value in models.items()
            },
        )
    return venues
