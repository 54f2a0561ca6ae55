"""Tokens and prices: what a run will cost before it is submitted, and what it did cost.

Token counts use the model's real tokenizer when one can be loaded offline
(``tiktoken`` with a locally cached encoding, or ``bpe-openai``, which carries
its encodings), and otherwise a documented estimate: one token per four
characters of message text, plus OpenAI's chat framing (3 tokens a message, 3
to prime the reply). Prices come from ``pricing.json`` in this package, or a
file of the same layout given with ``--pricing``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..bench.protocol import Prompt
from ..errors import ConfigError
from ..providers import priced_as, resolve
from ..tokens import estimate_tokens
from .discounts import Discount, VenueDiscount, parse_venues

TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3


def estimate_text_tokens(text: str) -> int:
    """The fallback (:func:`..tokens.estimate_tokens`): the larger of one token per four
    characters, rounded up, and the text's word pieces."""
    return estimate_tokens(text)


def encoding_name(model: str) -> str | None:
    """The tokenizer OpenAI documents for a model family, or None when unknown."""
    m = model.lower()
    if m.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")):
        return "o200k_base"
    if m.startswith(("gpt-4", "gpt-3.5")):
        return "cl100k_base"
    return None


@lru_cache(maxsize=8)
def _encoder(name: str) -> tuple[str, Callable[[str], int]] | None:
    try:
        import tiktoken

        enc = tiktoken.get_encoding(name)  # fails offline unless the encoding is cached
        return f"tiktoken {name}", lambda text: len(enc.encode(text, disallowed_special=()))
    except Exception:
        pass
    try:
        import bpe_openai

        enc2 = bpe_openai.get_encoding(name)
        return f"bpe-openai {name}", lambda text: len(enc2.encode_ordinary(text))
    except Exception:
        return None


def token_counter(model: str) -> tuple[str, Callable[[str], int]]:
    """``(description, count)`` for this model: its tokenizer if offline, else the estimate."""
    name = encoding_name(base_model(model))
    found = _encoder(name) if name else None
    if found is not None:
        return found
    return "estimate (4 characters or a word piece a token)", estimate_text_tokens


def prompt_tokens(prompt: Prompt, count: Callable[[str], int]) -> int:
    """Input tokens of a prompt: its two messages with OpenAI's chat framing."""
    messages = (prompt.system, *(m["content"] for m in prompt.messages()))
    return TOKENS_PER_REPLY + sum(TOKENS_PER_MESSAGE + count(text) for text in messages)


# ---------------------------------------------------------------------------
# Prices


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens at the synchronous list price, and where that figure is from."""

    input: float
    cached_input: float
    output: float
    as_of: str | None = None
    source: str | None = None


def base_model(model: str) -> str:
    """The model a fine-tune was made from (``ft:gpt-4o-mini:org::id`` is gpt-4o-mini):
    it has its base's tokenizer and price."""
    if model.startswith("ft:"):
        parts = model.split(":")
        if len(parts) > 1 and parts[1]:
            return parts[1]
    return model


def _names(model: str) -> list[str]:
    """The table entries that may price a model, most specific first: the name, its
    alias's target, a fine-tune's base, a dated snapshot's family (gpt-4o-2024-08-06,
    claude-haiku-4-5-20251001); never a shorter prefix (gpt-4o-mni is not gpt-4o)."""
    out: list[str] = []
    for name in (model, resolve(model), base_model(model), priced_as(model) or model):
        dated = re.fullmatch(r"(.+?)-(\d{4}-\d{2}-\d{2}|\d{8})", name)
        out += [name, *([dated.group(1)] if dated else [])]
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Pricing:
    default: Discount  # a venue's batch discount where the table names none for it
    models: dict[str, Price]
    source: str
    unpriced: dict[str, str] = field(default_factory=dict)  # model → why it has no price
    venues: dict[str, VenueDiscount] = field(default_factory=dict)  # provider → discount

    def discount(self, provider: str, model: str) -> Discount:
        """The batch discount ``model`` gets on ``provider`` (a venue's own, else the
        table's default), with its source."""
        venue = self.venues.get(provider)
        if venue is None:
            return self.default
        for name in _names(model):
            if name in venue.models:
                return venue.models[name]
        return venue.usual

    def price(self, model: str) -> Price | None:
        for name in _names(model):
            if name in self.models:
                return self.models[name]
            if name in self.unpriced:
                return None
        return None

    def priced_as(self, stand_ins: dict[str, str]) -> Pricing:
        """This table with each model priced as its stand-in (a simulated model, say, as
        the real one it rehearses): ``{"sim-judge": "gpt-4.1"}``."""
        models = dict(self.models)
        for model, real in stand_ins.items():
            price = self.price(real)
            if price is None:
                raise ConfigError(f"{self.source}: no price for {real!r} to stand in for {model!r}")
            models[model] = price
        return Pricing(self.default, models, self.source, self.unpriced, self.venues)

    def why_unpriced(self, model: str) -> str:
        """Why a model has no price here, for the user."""
        for name in _names(model):
            if name in self.unpriced:
                return self.unpriced[name]
        return f"not in {self.source}"


def load_pricing(path: str | Path | None = None) -> Pricing:
    if path is None:
        text = resources.files("batchbench").joinpath("pricing.json").read_text("utf-8")
        source = "built-in pricing.json"
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--pricing {path}: cannot read ({exc.strerror})") from None
        source = str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ConfigError(f"{source}: needs a 'models' object")
    default, venues = _discounts(data, source, path is None)
    models: dict[str, Price] = {}
    unpriced: dict[str, str] = {}
    same_as: dict[str, Any] = {}
    for name, entry in data["models"].items():
        if isinstance(entry, dict) and "as" in entry:
            same_as[name] = entry["as"]  # a deployment priced as the model behind it
            continue
        if isinstance(entry, dict) and "input" in entry and entry["input"] is None:
            when = f" (as of {entry['as_of']})" if entry.get("as_of") else ""
            unpriced[name] = f"{entry.get('source') or 'no public price'}{when}"
            continue
        try:
            values = {k: float(entry[k]) for k in ("input", "output")}
            values["cached_input"] = float(entry.get("cached_input", entry["input"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ConfigError(
                f"{source}: models.{name} needs numeric 'input' and 'output' (USD per 1M tokens)"
            ) from None
        if min(values.values()) < 0:
            raise ConfigError(f"{source}: models.{name} has a negative price")
        as_of, said = entry.get("as_of"), entry.get("source")
        models[name] = Price(
            **values,
            as_of=as_of if isinstance(as_of, str) else None,
            source=said if isinstance(said, str) else None,
        )
    table = Pricing(default, models, source, unpriced, venues)
    if not same_as:
        return table
    fallback = load_pricing() if path is not None else table
    for name, real in same_as.items():
        price = table.price(real) if isinstance(real, str) else None
        if price is None and isinstance(real, str):
            price = fallback.price(real)
        if price is None:
            raise ConfigError(
                f"{source}: models.{name}: 'as' must name a priced model, got {real!r}"
            )
        models[name] = price
    return table


def _discounts(
    data: dict[str, Any], source: str, built_in: bool
) -> tuple[Discount, dict[str, VenueDiscount]]:
    """A price file's batch discounts: its venues' own (``batch_discounts``), its one
    ``batch_discount`` for every venue, or — a file that says neither — the built-in
    table's venues (a file of prices alone does not make every venue's discount 50 %)."""
    default = data.get("batch_discount", 0.5)
    if isinstance(default, bool) or not isinstance(default, (int, float)) or not 0 <= default < 1:
        raise ConfigError(f"{source}: batch_discount must be a number in [0, 1)")
    said = data.get("batch_discount_source")
    usual = Discount(float(default), said if isinstance(said, str) else source)
    if "batch_discounts" in data:
        return usual, parse_venues(data["batch_discounts"], source)
    if "batch_discount" in data or built_in:
        return usual, {}
    built = load_pricing()
    return built.default, built.venues


def cost(
    price: Price | None, prompt: int, cached: int, completion: int, *, batch_discount: float
) -> dict[str, float | None]:
    """Batch and synchronous cost in USD of these token counts (None without a price)."""
    if price is None:
        return {"batch_usd": None, "sync_usd": None}
    sync = (
        (prompt - cached) * price.input + cached * price.cached_input + completion * price.output
    ) / 1e6
    return {"batch_usd": round(sync * (1 - batch_discount), 6), "sync_usd": round(sync, 6)}


# Anthropic's cache writes, as multiples of the input price ("5-minute cache write 1.25x
# base input, 1-hour 2x", Anthropic's prompt-caching pricing); Claude reports them on
# every venue that serves it.
CACHE_WRITE = {"cache_write_5m_tokens": 1.25, "cache_write_1h_tokens": 2.0}


def usage_cost(usage: Mapping[str, int], price: Price | None, discount: Discount) -> dict[str, Any]:
    """Cost of a stage's recorded usage at this venue's terms (reasoning tokens are billed
    within completion). Input read from cache is priced as the venue bills it inside a
    batch (:class:`.discounts.CacheTerms`); writes at their multiple of the input price
    with the batch discount. ``uncached``: cached tokens priced as uncached, if any."""
    if price is None:
        return {"batch_usd": None, "sync_usd": None}
    cached = int(usage.get("cached_tokens", 0))
    writes = sum(int(usage.get(k, 0)) * m for k, m in CACHE_WRITE.items()) * price.input
    written = sum(int(usage.get(k, 0)) for k in CACHE_WRITE)
    plain = max(int(usage.get("prompt_tokens", 0)) - cached - written, 0) * price.input
    output = int(usage.get("completion_tokens", 0)) * price.output
    keep = 1 - discount.fraction
    terms = discount.cache
    stacks = terms.stacking == "stacks"
    read = terms.read_price(price.input, price.cached_input) if stacks else price.input
    cached_batch = cached * read * keep
    sync = (plain + cached * price.cached_input + writes + output) / 1e6
    batch = ((plain + writes + output) * keep + cached_batch) / 1e6
    out: dict[str, Any] = {"batch_usd": round(batch, 6), "sync_usd": round(sync, 6)}
    if cached and terms.stacking != "stacks":
        out["uncached"] = cached
    return out
