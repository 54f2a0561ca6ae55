"""Judge replies → a decisions frame, checked exactly, in bulk.

Most judge replies have one of two shapes: what Python's ``json.dumps`` writes,
or its compact form as in the judge's instructions, with the case's items in
rubric order. Such a reply is certified on its raw JSON bytes, as they sit in the
downloaded file: turn every ``false`` into ``true`` and it must be byte for byte
the reply that matches every item. That is exact when the case's ids are plain
(printable ASCII without quote or backslash, and neither ``true`` nor ``false``
inside an id): the only places that can differ are then the flags, so the reply
says exactly the rubric's ids, once each, in order, with those flags. The flags
are read at positions that the ids' lengths fix, for all replies at once.

Every other reply — reordered, pretty-printed, escaped differently, or wrong —
goes to the strict parser (:func:`protocol.parse_judge_reply`), so verdicts and
error messages are the reference's whichever way a reply is read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import polars as pl

from . import protocol
from .errors import JudgeReplyError
from .scoring import rubric_frame

CHUNK_BYTES = 8 << 20
DECISION_SCHEMA = {"case_id": pl.String, "item_id": pl.String, "matched": pl.Boolean}
_CONTENT = msgspec.json.Decoder(str | None)
# A message content as JSON text: a zero-copy view into a downloaded file, or bytes.
JSONText = bytes | bytearray | memoryview | msgspec.Raw


def _escaped(text: str) -> bytes:
    return json.dumps(text)[1:-1].encode()


class _Style:
    """One canonical spelling of a reply, as JSON string bytes (quotes escaped)."""

    def __init__(self, colon: str, comma: str) -> None:
        self.head = b'"' + _escaped('{"decisions"' + colon + '[{"item_id"' + colon + '"')
        self.mid = _escaped('"' + comma + '"matched"' + colon)
        self.next = _escaped("}" + comma + '{"item_id"' + colon + '"')
        self.tail = _escaped("}]}") + b'"'
        self.between = self.mid + b"true" + self.next
        self.last = self.mid + b"true" + self.tail


STYLES = (_Style(": ", ", "), _Style(":", ","))


def _plain(item_id: str) -> bool:
    return (
        item_id.isascii()
        and item_id.isprintable()
        and '"' not in item_id
        and "\\" not in item_id
        and "true" not in item_id
        and "false" not in item_id
    )


class JudgeKey:
    """What checking judge replies needs from the rubric; built once per run."""

    def __init__(self, cases: Sequence[dict[str, Any]]) -> None:
        self.frame = rubric_frame(cases)
        self.cases = pl.DataFrame(
            {"case_id": [c["case_id"] for c in cases], "case": range(len(cases))},
            schema={"case_id": pl.String, "case": pl.Int64},
        )
        self.ids = [[item["item_id"] for item in case["rubric_items"]] for case in cases]
        self.encoded = [[i.encode() for i in ids] for ids in self.ids]
        self.count = np.array([len(ids) for ids in self.ids], dtype=np.int64)
        self.base = np.concatenate([[0], np.cumsum(self.count)[:-1]]).astype(np.int64)
        self.id_len = np.fromiter(
            (len(i) for ids in self.encoded for i in ids),
            dtype=np.int64,
            count=int(self.count.sum()),
        )
        self.plain = np.array(
            [bool(ids) and all(_plain(i) for i in ids) for ids in self.ids], dtype=bool
        )

    def positions(self, case_ids: Sequence[str]) -> np.ndarray:
        found = pl.DataFrame({"case_id": case_ids}, schema={"case_id": pl.String}).join(
            self.cases, on="case_id", how="left", maintain_order="left"
        )["case"]
        if found.null_count():
            missing = found.is_null().arg_true()[0]
            raise KeyError(f"case {case_ids[missing]!r} is not in this run's rubric")
        return found.to_numpy()


def _word(text: bytes, offset: int) -> np.uint64:
    return np.uint64(int.from_bytes(text[offset : offset + 8], "little"))


def _offsets(length: int) -> list[int]:
    """Offsets of 8-byte words that cover ``length`` bytes (the last one overlapping)."""
    return [min(o, length - 8) for o in range(0, length, 8)]


def _certify(
    key: JudgeKey, positions: np.ndarray, raws: Sequence[JSONText], lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(certified, matched)`` for replies of plain cases, sorted by case: which are
    exact, and their decisions (item-major: ``matched[k, r]`` is item ``k`` of reply ``r``).
    """
    start = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    size = int(lens.sum())
    buf = bytearray().join([*raws, bytes(64)])  # padded: reads past a short reply stay inside
    data = np.frombuffer(buf, dtype=np.uint8)
    words = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))  # any offset
    style = np.full(len(raws), -1, dtype=np.int64)
    for s, spelling in enumerate(STYLES):
        hit = style < 0
        for o in _offsets(len(spelling.head)):
            hit &= words[start + o] == _word(spelling.head, o)
        style[hit] = s
    good = style >= 0
    head, mid, nxt, tail = (
        np.array([len(getattr(sp, part)) for sp in STYLES])[np.maximum(style, 0)]
        for part in ("head", "mid", "next", "tail")
    )
    n = key.count[positions]
    base = key.base[positions]
    maxn = int(n.max())
    flag_at = np.zeros((maxn, len(raws)), dtype=np.int64)
    false_at = np.zeros((maxn, len(raws)), dtype=bool)
    pos = start + head
    for k in range(maxn):
        active = k < n
        length = key.id_len[np.where(active, base + k, 0)]
        at = np.minimum(pos + length + mid, size)
        byte = data[at]
        false = byte == ord("f")
        good &= ~active | false | (byte == ord("t"))
        flag_at[k] = at
        false_at[k] = false
        step = length + mid + 4 + false + np.where(k == n - 1, tail, nxt)
        pos = np.where(active, pos + step, pos)
    good &= pos == start + lens
    # A flag read as false must be spelt "false": its last four letters are about to
    # be overwritten, so nothing else would ever look at them.
    active = np.arange(maxn)[:, None] < n[None, :]
    _, reply = np.nonzero(active & false_at)
    at = flag_at[active & false_at]
    spelt = (words[at] & np.uint64(0xFF_FFFF_FFFF)) == _word(b"false\0\0\0", 0)
    good[reply[~spelt]] = False
    # Spell every false as true (drop its "f", write "true" over "alse"), drop the
    # replies whose shape is already wrong, and compare with the all-matched text.
    keep = np.ones(len(buf), dtype=bool)
    keep[size:] = False
    for r in np.flatnonzero(~good):
        keep[start[r] : start[r] + lens[r]] = False
    at = flag_at[active & false_at & good[None, :]]
    keep[at] = False
    for i, letter in enumerate(b"true", 1):
        data[at + i] = letter
    got = data[keep]
    kept = np.flatnonzero(good)
    want = b"".join(
        [
            b"".join((STYLES[s].head, STYLES[s].between.join(key.encoded[p]), STYLES[s].last))
            for s, p in zip(style[kept].tolist(), positions[kept].tolist())
        ]
    )
    certified = good
    if got.tobytes() != want:
        ends = np.cumsum(lens[kept] - false_at[:, kept].sum(axis=0))
        if ends.size and ends[-1] == len(want):
            wrong = np.flatnonzero(got != np.frombuffer(want, dtype=np.uint8))
            certified[kept[np.unique(np.searchsorted(ends, wrong, side="right"))]] = False
        else:  # cannot happen when every length check held; trust nothing then
            certified[:] = False
    return certified, ~false_at


def judge_decisions(
    case_ids: Sequence[str], raws: Sequence[JSONText], key: JudgeKey
) -> tuple[pl.DataFrame, dict[str, str]]:
    """``(decided, invalid)`` from judge replies, each given as its content's JSON text.

    ``decided`` is the rubric rows of every valid reply's case, each case in rubric
    order, with its ``matched`` decision (ready for :func:`scoring.score_joined`);
    ``invalid`` maps each rejected case to what was wrong (no partial credit).
    """
    positions = key.positions(case_ids)
    lens = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
    candidate = np.flatnonzero(key.plain[positions])
    order = candidate[np.argsort(positions[candidate], kind="stable")]
    certified = np.zeros(len(raws), dtype=bool)
    parts: list[pl.DataFrame] = []
    # A few MB at a time: the scratch arrays stay small and are reused, not mapped afresh.
    sizes = np.cumsum(lens[order])
    marks = np.arange(CHUNK_BYTES, sizes[-1], CHUNK_BYTES) if sizes.size else []
    cuts = np.searchsorted(sizes, marks)
    for chunk in np.split(order, cuts):
        if not chunk.size:
            continue
        ok, matched_at = _certify(key, positions[chunk], [raws[i] for i in chunk], lens[chunk])
        chosen = chunk[ok]
        certified[chosen] = True
        n = key.count[positions[chosen]]
        rows = np.repeat(key.base[positions[chosen]] - np.cumsum(n) + n, n) + np.arange(n.sum())
        live = np.arange(matched_at.shape[0])[:, None] < key.count[positions[chunk]][None, :]
        matched = matched_at.T[ok][live.T[ok]]
        if rows.size and rows[-1] - rows[0] + 1 == rows.size:  # all of a run of cases
            picked = key.frame.slice(int(rows[0]), rows.size)
        else:
            picked = key.frame[rows]
        parts.append(picked.with_columns(pl.Series("matched", matched)))
    invalid: dict[str, str] = {}
    rescued: list[tuple[str, str, bool]] = []
    for i in np.flatnonzero(~certified):
        case_id = case_ids[i]
        try:
            content = _CONTENT.decode(raws[i])
        except (msgspec.ValidationError, msgspec.DecodeError):
            content = None
        try:
            found = protocol.parse_judge_reply(content, key.ids[positions[i]])
        except JudgeReplyError as exc:
            invalid[case_id] = str(exc)
            continue
        rescued.extend((case_id, item, matched) for item, matched in found.items())
    if rescued:
        extra = pl.DataFrame(rescued, schema=DECISION_SCHEMA, orient="row")
        items = key.frame.join(extra.select("case_id").unique(), on="case_id", how="semi")
        parts.append(
            items.join(extra, on=["case_id", "item_id"], how="inner", maintain_order="left")
        )
    if not parts:
        return key.frame.clear().with_columns(pl.Series("matched", [], dtype=pl.Boolean)), invalid
    decided = pl.concat(parts)
    # Certified rows are already in rubric order; rescued ones are put in place.
    if rescued:
        return decided.sort("case", maintain_order=True), invalid
    return decided.with_columns(pl.col("case").set_sorted()), invalid


def decisions_lists(decided: pl.DataFrame) -> pl.DataFrame:
    """Per case, the row's ``decisions`` list: ``{item_id, points, matched}`` in rubric order."""
    return (
        decided.group_by("case", maintain_order=True)
        .agg(
            pl.col("case_id").first(), pl.struct("item_id", "points", "matched").alias("decisions")
        )
        .drop("case")
    )
