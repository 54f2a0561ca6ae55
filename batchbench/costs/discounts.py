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
from typing import Any, Literal

from ..errors import ConfigError

Stacking = Literal["stacks", "no", "unknown"]


@dataclass(frozen=True)
class CacheTerms:
    """How a venue bills input read from its prompt cache inside a batch.

    ``stacks``: at the cache-read price with the batch discount on top (Anthropic: "the
    pricing discounts from prompt caching and Message Batches can stack"), or, where the
    venue states it so (Fireworks: "a further 50%"), at ``cached_share`` of the batch
    input price. ``no``: the batch price alone. ``unknown`` — no statement in our
    sources — is priced as ``no``, never below the bill, and said so.
    """

    stacking: Stacking = "unknown"
    source: str = "no statement on caching inside batches in our sources"
    cached_share: float | None = None  # of the batch input price (None: cached_input's)
    marked: bool = False  # reads only a prefix a request marks (Anthropic's cache_control)

    def read_price(self, input_price: float, cached_input: float) -> float:
        """A cache read's price (per 1M tokens, before the batch discount) where it
        stacks: ``cached_share`` of the input price where the venue states one, else the
        model's cached-input price."""
        share = self.cached_share
        return input_price * share if share is not None else cached_input

    def uncached_why(self, venue: str) -> str | None:
        """Why cached input on this venue is priced as uncached (None: it is not)."""
        if self.stacking == "stacks":
            return None
        how = (
            "does not discount cached input in a batch"
            if self.stacking == "no"
            else "has no stated price for cached input in a batch"
        )
        return f"{venue} {how} ({self.source})"


UNKNOWN = CacheTerms()


@dataclass(frozen=True)
class Discount:
    """A fraction off the synchronous list price, and where it was read; and how the
    venue bills cached input under it."""

    fraction: float
    source: str
    as_of: str | None = None
    cache: CacheTerms = UNKNOWN

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


def _terms(value: Any, where: str) -> CacheTerms:
    """``caching: {"stacks": true | false | null, "source", "cached_share", "marked"}``."""
    if value is None:
        return UNKNOWN
    if not isinstance(value, dict) or value.get("stacks") not in (True, False, None):
        raise ConfigError(f"{where} must be an object whose 'stacks' is true, false or null")
    said: dict[Any, Stacking] = {True: "stacks", False: "no", None: "unknown"}
    stacking = said[value.get("stacks")]
    share = value.get("cached_share")
    return CacheTerms(
        stacking,
        _text(value.get("source")) or UNKNOWN.source,
        None if share is None else _fraction(share, f"{where}.cached_share"),
        value.get("marked") is True,
    )


def parse_venues(data: Any, source: str) -> dict[str, VenueDiscount]:
    """``batch_discounts`` of a price file: venue → ``{"discount", "source", "as_of",
    "models": {model: discount}, "caching": {...}}``; a one-line error names the field
    that is wrong."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: batch_discounts must be an object of venues")
    venues: dict[str, VenueDiscount] = {}
    for venue, entry in data.items():
        where = f"{source}: batch_discounts.{venue}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be an object with 'discount' and 'source'")
        said = _text(entry.get("source")) or source
        as_of = _text(entry.get("as_of"))
        terms = _terms(entry.get("caching"), f"{where}.caching")
        usual = Discount(_fraction(entry.get("discount"), f"{where}.discount"), said, as_of, terms)
        models = entry.get("models") or {}
        if not isinstance(models, dict):
            raise ConfigError(f"{where}.models must map model names to discounts")
        venues[venue] = VenueDiscount(
            usual,
            {
                name: Discount(_fraction(value, f"{where}.models.{name}"), said, as_of, terms)
                for name, value in models.items()
            },
        )
    return venues
