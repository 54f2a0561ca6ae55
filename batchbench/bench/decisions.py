"""Judge replies → decisions joined to the rubric.

Each reply goes through the one strict parser, :func:`protocol.parse_judge_reply`,
so verdicts and error texts are the reference runner's. The valid replies'
decisions are then joined to the run's rubric by ``(case_id, item_id)``: the
rubric's row order is kept, so every case's rows come out in rubric order, as
:func:`scoring.score_joined` sums them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from ..errors import JudgeReplyError
from . import protocol
from .scoring import DECISIONS_SCHEMA


@dataclass
class Judged:
    """What the judge replies of one collection said."""

    decided: pl.DataFrame  # rubric rows of the valid replies' cases, with ``matched``
    verdicts: dict[str, dict[str, bool]]  # case id → item id → matched, as parsed
    invalid: dict[str, str]  # case id → the reference's error text (no partial credit)


def judge_decisions(
    replies: Sequence[tuple[str, str]],
    rubric: pl.DataFrame,
    item_ids: Mapping[str, Sequence[str]],
) -> Judged:
    """Parse every ``(case_id, reply text)`` and join the valid decisions to the rubric."""
    verdicts: dict[str, dict[str, bool]] = {}
    invalid: dict[str, str] = {}
    for case_id, content in replies:
        try:
            verdicts[case_id] = protocol.parse_judge_reply(content, item_ids[case_id])
        except JudgeReplyError as exc:
            invalid[case_id] = str(exc)
    return Judged(join_verdicts(verdicts, rubric), verdicts, invalid)


def join_verdicts(verdicts: Mapping[str, Mapping[str, bool]], rubric: pl.DataFrame) -> pl.DataFrame:
    """The rubric rows of these cases, each with its ``matched`` decision, in rubric order.

    Each case's verdicts must name exactly its rubric's item ids (the parser
    checks that); this is the one join of decisions against the rubric.
    """
    columns: dict[str, list[Any]] = {"case_id": [], "item_id": [], "matched": []}
    for case_id, found in verdicts.items():
        columns["case_id"].extend([case_id] * len(found))
        columns["item_id"].extend(found)
        columns["matched"].extend(found.values())
    decisions = pl.DataFrame(columns, schema=DECISIONS_SCHEMA)
    return rubric.join(decisions, on=["case_id", "item_id"], how="inner", maintain_order="left")
