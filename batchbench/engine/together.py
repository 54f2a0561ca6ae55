"""A submission of several judge passes (:mod:`.planning`), collected a pass at a time:
each pass's lines and result rows as if they were a submission of their own — so every
rule of :mod:`.collection` and :mod:`.rows` holds per pass, unchanged — and the passes'
collections journaled as one (:func:`merged`), its outcomes keyed by request id."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from .collection import Collection
from .submission import Submission

Part = tuple[Submission, "pl.DataFrame | None"]  # a pass, as its own, and its result rows


def split(sub: Submission, frame: pl.DataFrame | None) -> list[Part]:
    """Each pass of ``sub`` (in order) with its rows of the results; rows naming none of
    the submission's requests go with the first pass, to be reported once."""
    passes = sorted({sub.pass_of(line) for line in sub.lines})
    parts = [sub.of_pass(p) for p in passes]
    if frame is None:
        return [(part, None) for part in parts]
    every = list(sub.ids())
    out: list[Part] = []
    for n, part in enumerate(parts):
        mine = pl.col("custom_id").is_in(list(part.ids()))
        if n == 0:
            mine = mine | ~pl.col("custom_id").is_in(every)
        out.append((part, frame.filter(mine)))
    return out


def merged(results: Sequence[Collection]) -> Collection:
    """The passes' collections as one: every outcome (each request's id is its own), the
    usage and counts summed, the first notice and stop, the tightest cap and latest hold."""
    one = Collection({})
    for r in results:
        one.outcomes.update(r.outcomes)
        for into, counts in (
            (one.usage, r.usage),
            (one.served, r.served),
            (one.fingerprints, r.fingerprints),
            (one.tiers, r.tiers),
        ):
            for name, n in counts.items():
                into[name] = into.get(name, 0) + n
        one.anomalies += r.anomalies
        one.free_retry = one.free_retry or r.free_retry
        caps = [c for c in (one.cap, r.cap) if c is not None]
        one.cap = min(caps) if caps else None
        holds = [h for h in (one.hold_until, r.hold_until) if h is not None]
        one.hold_until = max(holds) if holds else None
        one.notice = one.notice or r.notice
        one.stop = one.stop or r.stop
    return one
