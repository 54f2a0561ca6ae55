"""What prompt caching can save a run, said by the dry run (#67.2).

A service reads from its cache only a prompt's *prefix* it has seen before, and only
from a prefix of a minimum size: 1,024 tokens is the smallest any of them caches
(OpenAI's automatic caching starts there, and reads in blocks of 128 tokens). What can
be read is, for each request, the longest prefix it shares with a request sent before
it: the system message and the template's head across the stage; the conversation and
the answer across one HealthBench example's rubric items; the whole prompt where judge
passes (``--judge-passes K``) repeat it. For BedsideBench's judges the shared head is
about 175 tokens — under the minimum, so nothing at one pass.

What that saves is the venue's to say (:class:`.discounts.CacheTerms`): where cached
input stacks with the batch discount, the difference between the batch input price and
the cached one; where it does not or our sources do not say, nothing is counted. A venue
whose cache reads only what a request marks (Anthropic's ``cache_control``) reads
nothing here: batchbench marks nothing, so it never buys a cache write — K cold copies
in one Message Batch would each pay one, 1.25x the input price, and read none.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypedDict

from ..bench.protocol import Prompt
from ..formats import usd
from .discounts import Discount
from .pricing import Price

MIN_CACHED_PREFIX = 1024  # tokens: the smallest prefix a service's cache reads
BLOCK = 128  # tokens: a cache reads whole blocks of this many


class Caching(TypedDict):
    shared_prefix_tokens: int  # what every request of the stage begins with
    min_prefix_tokens: int
    cacheable_tokens: int  # input a cache could read, each request after its prefix's first
    cacheable_share: float  # of the stage's input tokens
    repeats_cacheable: bool  # repeated requests (judge passes 2..K) long enough to cache
    saving_usd: float | None  # at this venue's terms (None: not priced)
    note: str


def _text(prompt: Prompt) -> str:
    # system first: the order every wire sends
    return "\n".join([prompt.system, *(m["content"] for m in prompt.messages())])


def _readable(texts: Sequence[str], count: Callable[[str], int]) -> int:
    """Tokens a cache could read: each text in sorted order reads its longest common
    prefix with the one before it — the longest it shares with any other — in whole
    blocks, from the minimum up."""
    readable = 0
    ordered = sorted(texts)
    for before, text in zip(ordered, ordered[1:]):
        shared = count(os.path.commonprefix([before, text]))
        if shared >= MIN_CACHED_PREFIX:
            readable += shared // BLOCK * BLOCK
    return readable


def caching(
    prompts: Sequence[Prompt],
    count: Callable[[str], int],
    input_tokens: int,
    passes: int = 1,
    *,
    venue: str = "",
    terms: Discount | None = None,
    price: Price | None = None,
    together: bool = False,
) -> Caching:
    """What the stage's prompts share, what a cache could read of it, and what that
    saves at ``venue``'s terms (``terms``: its discount and how it bills cached input;
    ``together``: its judge passes laid out side by side, :mod:`batchbench.engine.planning`)."""
    texts = [_text(p) for p in prompts]
    shared = count(os.path.commonprefix(texts)) if len(texts) > 1 else 0
    marked = terms is not None and terms.cache.marked
    readable = 0 if marked else _readable(texts, count)
    share = readable / input_tokens if input_tokens else 0.0
    repeats = passes > 1 and not marked and input_tokens / max(len(texts), 1) >= MIN_CACHED_PREFIX
    saving: float | None = None
    if terms is not None and price is not None and terms.cache.stacking == "stacks":
        cached = terms.cache.read_price(price.input, price.cached_input)
        saving = round(readable * (price.input - cached) * (1 - terms.fraction) / 1e6, 6)
    if marked:
        note = (
            f"{venue} caches only a prefix a request marks (cache_control); batchbench marks"
            " none, so nothing is read and no cache write is bought"
        )
    elif readable:
        note = f"a cache could read {readable:,} input tokens ({share:.0%})"
    else:
        note = (
            f"a shared prefix of {shared:,} tokens, under the {MIN_CACHED_PREFIX:,} a cache"
            " starts at: nothing to save"
        )
    if passes > 1 and not marked:
        laid = "side by side in one batch" if together else "each pass its own batch"
        note += f"; judge passes 2..{passes} repeat each request exactly, {laid}" + (
            ", long enough to be read from cache where the service caches repeats"
            if repeats
            else f", each under {MIN_CACHED_PREFIX:,} tokens: not cached either"
        )
    if readable and terms is not None:
        why = terms.cache.uncached_why(venue)
        note += f"; that saves {usd(saving)} at batch price" if saving is not None else ""
        note += f"; not counted: {why}" if why else ""
    return Caching(
        shared_prefix_tokens=shared,
        min_prefix_tokens=MIN_CACHED_PREFIX,
        cacheable_tokens=readable,
        cacheable_share=share,
        repeats_cacheable=repeats,
        saving_usd=saving,
        note=note,
    )
