"""The reference's scored result lines, put together as text from the decided frame.

The reference writes each row with ``json.dumps(row, ensure_ascii=False)``: its default
separators (``", "``, ``": "``) are what no fast encoder writes, and at a million
decisions building each row's dicts and dumping them was half of a judge collection's
time (#52.1). Here a line is assembled from pieces that are exactly what ``json.dumps``
writes for them: strings by ``json.encoder.encode_basestring`` (the function
``json.dumps`` itself calls with ``ensure_ascii=False``), numbers by ``float.__repr__``
and ``int.__repr__`` (what it calls for them), a rubric item's points by its own text
(``points_json`` of the rubric frame: an int stays an int); every rubric item of the
judged cases in one vectorised pass. The keys and their order are the reference's
(:class:`batchbench.engine.rows.ScoredRow`); a test checks each line against
``json.dumps`` of that row, hostile strings and all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any

import polars as pl

# Characters json.dumps escapes in a string (ensure_ascii=False): a quote, a backslash,
# and the control characters.
_ESCAPED = r'[\x00-\x1f"\\]'


def number(value: Any) -> str:
    """A JSON value as ``json.dumps`` writes it: the fast way for the numbers and nulls
    a row holds, ``json.dumps`` itself for anything else (NaN and infinities too)."""
    kind = type(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    return json.dumps(value, ensure_ascii=False)


# Rubric rows put into text at a time: a million at once cost 400 MB of intermediates.
CHUNK_ROWS = 100_000


def decisions(decided: pl.DataFrame) -> dict[str, str]:
    """Each case's ``decisions`` list as the reference writes it (without its brackets),
    from rubric rows (each case's together, in rubric order) that carry ``case``,
    ``case_id``, ``item_id``, ``points_json`` and ``matched``; a slice of whole cases at a
    time, so the intermediates stay small."""
    out: dict[str, str] = {}
    for part in _whole_cases(decided, CHUNK_ROWS):
        out.update(_texts(part))
    return out


def _whole_cases(decided: pl.DataFrame, rows: int) -> list[pl.DataFrame]:
    """Slices of about ``rows`` rows, each ending at a case's end (the rows are in case
    order, as a rubric frame's are; otherwise the frame is one slice)."""
    cases = decided["case"]
    if decided.height <= rows or not cases.is_sorted():
        return [decided]
    parts, lo = [], 0
    while lo < decided.height:
        hi = min(lo + rows, decided.height)
        if hi < decided.height:  # on to the end of the case the slice would cut
            hi = int(cases.search_sorted(cases[hi - 1], side="right"))
        parts.append(decided.slice(lo, hi - lo))
        lo = hi
    return parts


def _texts(decided: pl.DataFrame) -> dict[str, str]:
    if decided["item_id"].str.contains(_ESCAPED).any():
        escaped = [encode_basestring(i)[1:-1] for i in decided["item_id"]]
        decided = decided.with_columns(pl.Series("item_id", escaped, pl.String))
    # (else, as usual, no id has anything to escape: each is its quoted self)
    item = pl.concat_str(
        pl.lit('{"item_id": "'),
        pl.col("item_id"),
        pl.lit('", "points": '),
        pl.col("points_json"),
        pl.when(pl.col("matched"))
        .then(pl.lit(', "matched": true}'))
        .otherwise(pl.lit(', "matched": false}')),
    )
    joined = (
        decided.lazy()
        .group_by("case", maintain_order=True)  # the case's number: cheaper than its id
        .agg(pl.col("case_id").first(), item.str.join(", ").alias("text"))
        .collect()
    )
    return dict(zip(joined["case_id"].to_list(), joined["text"].to_list()))


_KEYS: dict[str, str] = {}  # a key as it is written before its value: '"key": '


def _key(key: str) -> str:
    written = _KEYS.get(key)
    if written is None:
        written = _KEYS[key] = encode_basestring(key) + ": "
    return written


def line(row: Mapping[str, Any], decisions_text: str) -> str:
    """A scored row's line, keys in the row's order: its strings, numbers and nulls, its
    ``score_components`` (a flat object of numbers), and ``decisions_text`` in place of
    its ``decisions``."""
    parts = []
    for key, value in row.items():
        kind = type(value)
        if kind is str:
            rendered = encode_basestring(value)
        elif key == "decisions":
            rendered = "[" + decisions_text + "]"
        elif kind is dict:
            rendered = "{" + ", ".join([_key(k) + number(v) for k, v in value.items()]) + "}"
        else:
            rendered = number(value)
        parts.append(_key(key) + rendered)
    return "{" + ", ".join(parts) + "}"
