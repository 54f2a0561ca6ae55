"""What was asked of which model, when, and who says it answered (#66.1).

A reviewer asks what model answered: the one *requested* (the run's
configuration) and the one the service says *served* each reply (its ``model``
or Gemini's ``modelVersion``, OpenAI's ``system_fingerprint``), counted per
stage at collection and kept in the journal; when each stage's first query went
out and its last results came back; the judge's *effective* parameters (whether
temperature was sent — a model that refuses it gets the request again without —,
the reasoning effort, structured output); and whether judge and answer model come
from the same vendor (a judge may favour its own family). All from the run's record.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Final

from ..kinds import STAGES, Stage
from .runconfig import RunConfig
from .state import RunState

# Model families by the maker's name, matched at the start of a part of the model id
# (``anthropic.claude-…`` on Bedrock, ``accounts/fireworks/models/llama-…``,
# ``openai/gpt-oss-120b`` on Groq): the vendor whose model it is, whoever serves it.
VENDORS: Final = (
    ("gpt-", "OpenAI"),
    ("o1", "OpenAI"),
    ("o3", "OpenAI"),
    ("o4", "OpenAI"),
    ("chatgpt", "OpenAI"),
    ("claude", "Anthropic"),
    ("gemini", "Google"),
    ("gemma", "Google"),
    ("medgemma", "Google"),
    ("llama", "Meta"),
    ("mistral", "Mistral AI"),
    ("mixtral", "Mistral AI"),
    ("magistral", "Mistral AI"),
    ("ministral", "Mistral AI"),
    ("codestral", "Mistral AI"),
    ("grok", "xAI"),
    ("deepseek", "DeepSeek"),
    ("qwen", "Alibaba"),
    ("kimi", "Moonshot AI"),
    ("glm", "Zhipu AI"),
)
_PARTS = re.compile(r"[/.:@]")


def vendor(model: str) -> str | None:
    """Whose model this is (None: a family this table does not know)."""
    for part in _PARTS.split(model.lower()):
        for prefix, name in VENDORS:
            if part.startswith(prefix):
                return name
    return None


def _when(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _temperature_sent(state: RunState, stage: Stage) -> dict[str, int]:
    """How many of the stage's requests carried a temperature, and how many went
    without (the wire dropped it for a model that refuses one)."""
    sent = dropped = 0
    for sub in state.subs.values():
        if sub.stage == stage:
            n = sum(1 for line in sub.lines if line.sent_temperature)
            sent, dropped = sent + n, dropped + len(sub.lines) - n
    return {"sent": sent, "not_sent": dropped}


# Service tiers a reply may name that the service bills above its standard price
# (OpenAI's and Anthropic's priority, OpenAI's scale): never a batch's price.
DEARER_TIERS = frozenset({"priority", "scale"})


def stage_record(state: RunState, config: RunConfig, stage: Stage) -> dict[str, Any]:
    """One stage's provenance: requested and served models, query span, parameters."""
    requested = config.answer_model if stage == "answers" else config.judge_model
    served = dict(state.served.get(stage, {}))
    span = state.queried.get(stage)
    sampling = config.grading.sampling[stage]
    prompt_effort = config.reasoning_effort if stage == "answers" else None
    return {
        "requested": requested,
        "service": config.providers[stage],
        "served": served,
        "fingerprints": dict(state.fingerprints.get(stage, {})),
        "tiers": dict(state.tiers.get(stage, {})),
        "first_query": _when(span[0]) if span else None,
        "last_query": _when(span[1]) if span else None,
        "parameters": {
            "temperature": sampling.temperature,
            "temperature_requests": _temperature_sent(state, stage),
            "reasoning_effort": prompt_effort or "not sent",
            "structured_output": "JSON object asked" if sampling.json_mode else "none",
            "max_tokens": sampling.max_tokens,
        },
    }


def provenance(state: RunState, config: RunConfig) -> dict[str, Any]:
    """The run's provenance record (``status --json``, ``provenance.json``, the report
    and both exports say it so), with what a reviewer must be told in ``notes``."""
    stages = {stage: stage_record(state, config, stage) for stage in STAGES}
    vendors = {stage: vendor(str(rec["requested"])) for stage, rec in stages.items()}
    same = (
        vendors["answers"] == vendors["judges"]
        if vendors["answers"] and vendors["judges"]
        else None
    )
    notes = []
    for stage, rec in stages.items():
        if len(rec["served"]) > 1:
            named = ", ".join(f"{m} ({n})" for m, n in rec["served"].items())
            notes.append(f"{stage}: replies name {len(rec['served'])} served models: {named}")
        if len(rec["fingerprints"]) > 1 and len(rec["served"]) <= 1:
            notes.append(f"{stage}: replies carry {len(rec['fingerprints'])} system fingerprints")
        dearer = sorted(set(rec["tiers"]) & DEARER_TIERS)
        if dearer:  # billed above the batch price by the service, whatever we price
            notes.append(f"{stage}: replies say they were served at the {dearer[0]} tier")
        unlike = [m for m in rec["served"] if not _same_model(str(rec["requested"]), m)]
        if unlike and len(rec["served"]) == 1:
            notes.append(f"{stage}: {rec['requested']} asked, {unlike[0]} served")
    if config.answers_from:
        borrowed = config.answers_from
        notes.append(f"answers: borrowed from run {borrowed} (its provenance is its own)")
    if config.answers_given:  # HealthBench's --physician-completions
        notes.append(
            f"answers: the dataset's own ({config.answers_given}), none asked of a service"
        )
    elif same:
        notes.append(f"judge and answer model both from {vendors['answers']}")
    elif same is None:
        unknown = [str(stages[s]["requested"]) for s in STAGES if vendors[s] is None]
        notes.append(f"same vendor or not: unknown (no known family: {', '.join(unknown)})")
    return {
        "answers": stages["answers"],
        "judges": stages["judges"],
        "vendors": vendors,
        "same_vendor": same,
        "notes": notes,
    }


def _same_model(requested: str, served: str) -> bool:
    """A served name that is the requested one, or a dated snapshot of it (``gpt-4.1``
    served as ``gpt-4.1-2025-04-14``); routing prefixes and paths aside."""
    asked = requested.rsplit("/", 1)[-1].lower()
    got = served.rsplit("/", 1)[-1].lower()
    return got == asked or got.startswith(asked + "-") or asked.startswith(got + "-")


def mixed_snapshots(record: dict[str, Any]) -> list[str]:
    """The stages whose replies name more than one served model or fingerprint."""
    return [
        stage
        for stage in STAGES
        if len(record[stage]["served"]) > 1 or len(record[stage]["fingerprints"]) > 1
    ]
