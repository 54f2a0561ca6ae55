"""The reference's scored result lines, put together as text from the decided frame.

The reference writes each row with ``json.dumps(row, ensure_ascii=False)``: its default
separators (``", "``, ``": "``) are what no fast encoder writes, and at a million
decisions building each row's dicts and dumping them was half of a judge collection's
time (#52.1). Here a line is assembled from pieces that are exactly what ``json.dumps``
writes for them: strings by ``json.encoder.encode_basestring`` (the function
``json.dumps`` itself calls with ``ensure_ascii=False``), numbers by ``float.__repr__``
and ``int.__repr__`` (what it calls for them), a rubric item's points by its own text
(``points_json`` of the rubric frame: an int stays an int); every rubric item of the
judged cases in one vectorised pass. A :class:`Template` writes the keys, and the values
every row of a run shares, once; each line is then one ``%`` format. The keys and
their order are the reference's (:class:`batchbench.engine.rows.ScoredRow`); a test
checks each line :func:`batchbench.engine.rows.rows_for` writes against ``json.dumps``
of the reference's row, hostile strings and all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from json.encoder import encode_basestring
from typing import Any

import polars as pl

from ..bench.scoring import COMPONENTS


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


def numbers(values: pl.Series) -> list[str]:
    """Each value of a column as :func:`number` writes it: finite floats without nulls
    (a score column, as a rule) all at once."""
    if values.dtype == pl.Float64 and not values.null_count() and values.is_finite().all():
        return list(map(float.__repr__, values.to_list()))
    return list(map(number, values.to_list()))


def score_texts(scores: pl.DataFrame) -> Iterator[tuple[str, str, str]]:
    """Each case's ``(case_id, score, score_components)``, the last two written as
    ``json.dumps`` writes the values :func:`batchbench.bench.scoring.score_records`
    gives (the same JSON types, column by column, not a dict per case)."""
    f1s = (scores["grading_method"] == "f1_weighted_rubric").to_list()
    components: dict[bool, Iterator[str]] = {}
    for f1, keys in COMPONENTS.items():
        rows = scores.filter(pl.col("grading_method").eq("f1_weighted_rubric").eq(f1))
        written = [numbers(rows[key]) for key in keys]
        if not f1:  # Python's sum() over no matched items is the integer 0 (score_records')
            nothing = rows["n_matched"].eq(0).to_list()
            written[0] = ["0" if n else t for n, t in zip(nothing, written[0])]
        components[f1] = map(_form(keys).__mod__, zip(*written))
    for case_id, f1, score in zip(scores["case_id"].to_list(), f1s, numbers(scores["score"])):
        yield case_id, score, next(components[f1])


# Rubric rows put into text at a time: a million at once cost 400 MB of intermediates.
CHUNK_ROWS = 100_000


def decisions(decided: pl.DataFrame) -> dict[str, str]:
    """Each case's ``decisions`` list as the reference writes it (without its brackets),
    from rubric rows (each case's together, in rubric order) that carry ``case``,
    ``case_id``, ``item_id``, ``points_json``, ``escaped`` and ``matched``; a slice of
    whole cases at a time, so the intermediates stay small."""
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
    if decided["escaped"].any():
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


def value(value: Any) -> str:
    """A row's value as ``json.dumps`` writes it: a string, a number or null, or a flat
    object of numbers (``score_components``)."""
    if type(value) is str:
        return encode_basestring(value)
    if type(value) is dict:
        return _form(value) % tuple(map(number, value.values()))
    return number(value)


def _form(keys: Iterable[str]) -> str:
    """A flat object's text, a ``%s`` where each key's value goes."""
    return "{" + ", ".join(_key(k).replace("%", "%%") + "%s" for k in keys) + "}"


class Template:
    """The lines of rows that have the same keys in the same order, and the same values
    under some of them (``shared``: written once, here). A line is then one ``%``
    format of the other values' texts (:func:`value`), each copied once; a key in
    ``lists`` takes its items' text, the brackets written here."""

    def __init__(
        self, keys: Iterable[str], shared: Mapping[str, Any], lists: Iterable[str] = ()
    ) -> None:
        listed = set(lists)
        # The line is literals[0] value(keys[0]) literals[1] ... literals[-1].
        self._literals: list[str] = []
        self._keys: list[str] = []
        literal = "{"
        for n, key in enumerate(keys):
            literal += (", " if n else "") + _key(key)
            if key in shared:
                literal += value(shared[key])
                continue
            self._literals.append(literal + ("[" if key in listed else ""))
            self._keys.append(key)
            literal = "]" if key in listed else ""
        self._literals.append(literal + "}")
        self._form()

    def _form(self) -> None:
        escaped = [literal.replace("%", "%%") for literal in self._literals]
        self.text = "".join(e + f"%({k})s" for e, k in zip(escaped, self._keys)) + escaped[-1]
        self._positional = "".join(e + "%s" for e in escaped[:-1]) + escaped[-1]
        self.keys = tuple(self._keys)  # the values a line takes, in order (:meth:`fill`)

    def split(self, key: str) -> tuple[Template, Template]:
        """The line's text before ``key``'s value and after it, as two templates: the
        value is then put between them once the rest is written."""
        at = self._keys.index(key)
        return (
            self._made(self._literals[: at + 1], self._keys[:at]),
            self._made(self._literals[at + 1 :], self._keys[at + 1 :]),
        )

    @classmethod
    def _made(cls, literals: list[str], keys: list[str]) -> Template:
        """A template of these literals with these keys' values between them."""
        made = cls.__new__(cls)
        made._literals, made._keys = literals, keys
        made._form()
        return made

    def line(self, texts: Mapping[str, str]) -> str:
        """The line of a row whose other values are written as ``texts`` (by key)."""
        return self.text % texts

    def fill(self, texts: tuple[str, ...]) -> str:
        """:meth:`line`, the texts given in the order of :attr:`keys` (twice as fast)."""
        return self._positional % texts
