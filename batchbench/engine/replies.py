"""A run's downloaded replies, read back by the request ids its journal recorded.

Each stage's raw files are read by that stage's wire, so a Claude answer file
and an OpenAI judge file both read as text per request id. ``show`` and the
report use this to put the reply beside each attempt and failure.
"""

from __future__ import annotations

import polars as pl

from .. import providers
from ..kinds import Stage
from .runconfig import RunConfig
from .rundir import Run
from .state import RunState


def read_replies(run: Run, config: RunConfig, state: RunState) -> dict[str, str]:
    """Every downloaded reply: request id → its text (the content, or a failed reply's
    body, or a line's own error)."""
    out: dict[str, str] = {}
    stage_providers = config.providers
    for sub in state.subs.values():
        refs = [f for f in sorted(sub.downloaded) if run.raw_path(f).exists()]
        if not refs:
            continue
        frame = run.read_results(providers.wire(stage_providers[sub.stage]), refs)
        texts = frame.select("custom_id", REPLY_TEXT)
        out.update(zip(texts["custom_id"].to_list(), texts["text"].to_list()))
    return out


# A reply's text: its content when it has one, else its body, else its error (an empty
# body or error counts as none), else "".
REPLY_TEXT = pl.coalesce(
    pl.col("content"),
    pl.when(pl.col("body_text") != "").then(pl.col("body_text")),
    pl.when(pl.col("error_message") != "").then(pl.col("error_message")),
    pl.lit(""),
).alias("text")


def latest_requests(state: RunState, stage: Stage) -> dict[str, str]:
    """Each case's latest request id of a stage (cases never sent are absent): read
    from the submission each case last went out in, every submission walked once (a
    walk per case was quadratic: 300 s for a report of 25,000 cases)."""
    wanted: dict[str, set[str]] = {}
    for case_id, case in state.cases.items():
        sub_id = case.stage(stage).sub
        if sub_id is not None:
            wanted.setdefault(sub_id, set()).add(case_id)
    out: dict[str, str] = {}
    for sub_id, cases in wanted.items():
        sub = state.subs.get(sub_id)
        if sub is None:
            continue
        for custom_id, line in sub.ids().items():  # in the submission's order: last wins
            if line.case_id in cases:
                out[line.case_id] = custom_id
    return out
