"""Judge replies → decisions joined to the rubric.

Each reply goes through the one strict parser, :func:`protocol.parse_judge_reply`,
so verdicts and error texts are the reference runner's. The valid replies'
decisions are then joined to the run's rubric by ``(case_id, item_id)``: the
rubric's row order is kept, so every case's rows come out in rubric order, as
:func:`scoring.score_joined` sums them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from . import protocol
from .errors import JudgeReplyError
from .scoring import DECISIONS_SCHEMA


def judge_decisions(
    replies: Sequence[tuple[str, str]],
    rubric: pl.DataFrame,
    item_ids: Mapping[str, Sequence[str]],
) -> tuple[pl.DataFrame, dict[str, str]]:
    """``(decided, invalid)`` from ``(case_id, reply text)`` pairs.

    ``decided`` holds the rubric rows (see :func:`scoring.rubric_frame`) of every
    valid reply's case with its ``matched`` decision; ``invalid`` maps each
    rejected case to the reference's error text (no partial credit, ever).
    """
    rows: list[tuple[str, str, bool]] = []
    invalid: dict[str, str] = {}
    for case_id, content in replies:
        try:
            found = protocol.parse_judge_reply(content, item_ids[case_id])
        except JudgeReplyError as exc:
            invalid[case_id] = str(exc)
            continue
        rows.extend((case_id, item, matched) for item, matched in found.items())
    decisions = pl.DataFrame(rows, schema=DECISIONS_SCHEMA, orient="row")
    decided = rubric.join(decisions, on=["case_id", "item_id"], how="inner", maintain_order="left")
    return decided, invalid
