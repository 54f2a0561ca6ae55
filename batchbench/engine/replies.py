"""A run's downloaded replies, read back by the request ids its journal recorded.

Each stage's raw files are read by that stage's wire, so a Claude answer file
and an OpenAI judge file both read as text per request id. ``show`` and the
report use this to put the reply beside each attempt and failure.
"""

from __future__ import annotations

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
        columns = ("custom_id", "content", "body_text", "error_message")
        for cid, content, body, error in frame.select(columns).rows():
            out[cid] = content if content is not None else (body or error or "")
    return out


def latest_request(state: RunState, case_id: str, stage: Stage) -> str | None:
    """The request id of a case's latest request of a stage (None when never sent)."""
    sub = state.subs.get(state.cases[case_id].stage(stage).sub or "")
    if sub is None:
        return None
    ids = [cid for cid, line in sub.ids().items() if line.case_id == case_id]
    return ids[-1] if ids else None
