"""Judge replies → decisions joined to the rubric.

Each reply goes through the one strict parser, :func:`protocol.parse_judge_reply`,
so verdicts and error texts are the reference runner's. The valid replies'
decisions are then laid on the run's rubric rows (each case's in rubric order, as
:func:`scoring.score_joined` sums them): the parser gives them in that order, so at a
million decisions no join by ``(case_id, item_id)`` is needed (#52.1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import polars as pl

from ..errors import InvariantError, JudgeReplyError
from . import protocol


@dataclass
class Judged:
    """What the judge replies of one collection said."""

    decided: pl.DataFrame  # rubric rows of the valid replies' cases, with ``matched``
    verdicts: dict[str, list[bool]]  # case id → each rubric item's matched, rubric order
    invalid: dict[str, str]  # case id → the reference's error text (no partial credit)


def judge_decisions(
    replies: Sequence[tuple[str, str]],
    rubric: pl.DataFrame,
    item_ids: Mapping[str, Sequence[str]],
) -> Judged:
    """Parse every ``(case_id, reply text)`` and lay the valid decisions on the rubric."""
    verdicts: dict[str, list[bool]] = {}
    invalid: dict[str, str] = {}
    for case_id, content in replies:
        try:
            verdicts[case_id] = protocol.judge_matches(content, item_ids[case_id])
        except JudgeReplyError as exc:
            invalid[case_id] = str(exc)
    return Judged(lay_verdicts(verdicts, rubric), verdicts, invalid)


def part_verdicts(
    replies: Sequence[tuple[str, str]], read: Callable[[str, str], list[bool]]
) -> Judged:
    """Replies that each decide a part of their case's rubric (a grader asked once per
    item): ``read(case_id, text)`` gives the part's verdicts or raises JudgeReplyError.
    Nothing is laid on the rubric: a case's row waits for all its parts."""
    verdicts: dict[str, list[bool]] = {}
    invalid: dict[str, str] = {}
    for case_id, content in replies:
        try:
            verdicts[case_id] = read(case_id, content)
        except JudgeReplyError as exc:
            invalid[case_id] = str(exc)
    return Judged(pl.DataFrame(), verdicts, invalid)


def lay_verdicts(verdicts: Mapping[str, Sequence[bool]], rubric: pl.DataFrame) -> pl.DataFrame:
    """The rubric rows of these cases, each with its ``matched``: a case's verdicts are
    its rubric items' decisions in rubric order, and the rubric frame holds each case's
    rows together in that order (``idx`` 0 first), so they are laid on in turn."""
    mask = rubric["case_id"].is_in(list(verdicts))
    chosen = rubric if mask.all() else rubric.filter(mask)  # all: no copy of a million rows
    firsts = chosen.filter(pl.col("idx") == 0)["case_id"].to_list()  # the cases, in order
    matched = list(chain.from_iterable(map(verdicts.__getitem__, firsts)))
    if len(matched) != chosen.height:
        raise InvariantError("the verdicts do not cover the rubric items of their cases")
    return chosen.with_columns(pl.Series("matched", matched, dtype=pl.Boolean))
