"""Counting a text's tokens without its tokenizer, for the two places that must.

A tokenizer's pre-tokenizer cuts text into runs of letters, digits (three at a time,
as OpenAI's o200k and cl100k do) and single symbols, and then merges common runs into
one token each: the count of those pieces follows a real tokenizer's count far more
closely than characters do, wherever text is dense (numbers, drug names, tables,
hex ids). Over the public split's prompts, pieces sit within 0.79–1.05 of o200k's count
and 0.9–1.05 for judge prompts, where one token per four characters strays to 0.77–1.5.
"""

from __future__ import annotations

import re

_PIECE = re.compile(r"[^\W\d_]+|\d{1,3}|[^\w\s]|_")


def word_pieces(text: str) -> int:
    """How many pieces a tokenizer's pre-tokenizer cuts ``text`` into: runs of letters,
    digits three at a time, each other symbol."""
    return len(_PIECE.findall(text))


def estimate_tokens(text: str) -> int:
    """A text's tokens where no tokenizer is at hand: the larger of one per four
    characters and its word pieces (either alone undercounts some texts: characters the
    dense ones, pieces long words), so a budget of enqueued tokens is rarely overrun."""
    return max(-(-len(text) // 4), word_pieces(text))
