"""A judge on every service (#50): the same judge messages through each service's batch
path, JSON asked the way that service asks it, replies read by the one rule, and the
rows a plain re-enactment of the protocol gives.

Each test runs an OpenAI answer model (the emulator's simulated one) and the rig's own
model as the judge, through the rig's official SDK against the emulator's face. The
expected judge body per service is written here from the issue's rules and the spec's
judge messages (reference-behaviour.md §2), sharing no code with batchbench; the rows
from :func:`support.reference.score_case` over the decisions the responder gave.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal

import pytest
from support import reference
from support.cli import assert_one_line_error, run_cli
from support.providers import BEDROCK_MODEL, RIGS, Rig
from support.runs import assert_no_duplicates, normalised, rows_of

from batchbench.bench.dataset import load_dataset
from batchbench.emulator import SystemClock

JUDGES = [rig for rig in RIGS.values() if rig.provider != "openai"]

JUDGE_SYSTEM = "\n".join(
    [
        "You are grading a clinical answer against independent rubric items.",
        "",
        "For every rubric item, decide whether the ANSWER explicitly states or clearly entails it.",
        "",
        "Rules:",
        "1. Judge only information present in the ANSWER. Do not infer omitted content.",
        "2. Accept clinically equivalent wording; exact phrase matching is not required.",
        "3. A partially stated criterion is false when a clinically essential component is"
        " missing.",
        "4. For a harmful, inappropriate, or negative-point item, true means the ANSWER endorses,"
        " recommends, or performs that action. Merely mentioning the action to reject or warn"
        " against it is false.",
        "5. Judge each item independently.",
        "6. Return exactly one decision for every supplied item_id and no other item_ids.",
        "",
        "Return JSON only:",
        '{"decisions":[{"item_id":"item_0","matched":true},{"item_id":"item_1","matched":false}]}',
    ]
)  # the spec's text (reference-behaviour.md §2), copied
# The decisions' shape the system message asks for, as a JSON Schema (Claude's structured
# output takes one: additionalProperties false on every object).
DECISIONS = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"item_id": {"type": "string"}, "matched": {"type": "boolean"}},
                "required": ["item_id", "matched"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["decisions"],
    "additionalProperties": False,
}


def _claude(user: str, *, first: dict, last: dict, api: bool = False) -> dict:
    """Claude's judge body: on the Messages API (``api``) its structured output and no
    temperature (its current version, which the anthropic SDK sends, has none); on a
    cloud (Bedrock's, Vertex's version) the judges' temperature and the message as is."""
    body = {
        **first,
        "max_tokens": 5000,
        "messages": [{"role": "user", "content": user}],
        "system": JUDGE_SYSTEM,
    }
    if api:
        body["output_config"] = {"format": {"type": "json_schema", "schema": DECISIONS}}
    else:
        body["temperature"] = 0
    return {**body, **last}


def _gemini(user: str) -> dict:
    return {
        "contents": [
            {"role": "user", "parts": [{"text": JUDGE_SYSTEM}]},
            {"role": "user", "parts": [{"text": user}]},
        ],
        "generation_config": {
            "temperature": 0,
            "max_output_tokens": 5000,
            "response_mime_type": "application/json",
        },
        "model": "models/gemini-3.1-pro-preview",
    }


def _chat(model: str, user: str) -> list[dict]:
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


# What each face hands the responder for a judge request (as it hands it an answer's:
# support/providers.py), by the rules for a judge on that service.
EXPECTED = {
    "anthropic": lambda u: _claude(u, first={"model": "claude-opus-5"}, last={}, api=True),
    "bedrock": lambda u: _claude(
        u, first={"anthropic_version": "bedrock-2023-05-31"}, last={"modelId": BEDROCK_MODEL}
    ),
    "vertex-claude": lambda u: _claude(
        u, first={"anthropic_version": "vertex-2023-10-16"}, last={"model": "claude-opus-5"}
    ),
    "gemini": _gemini,
    "vertex-gemini": _gemini,
    "fireworks": lambda u: {
        "model": "accounts/fireworks/models/glm-5p3",
        "messages": _chat("", u),
        "response_format": {"type": "json_object"},
        "max_tokens": 5000,
        "temperature": 0,
        "reasoning_effort": "none",
    },
    "azure": lambda u: {
        "model": "ans-model",
        "messages": _chat("", u),
        "response_format": {"type": "json_object"},
        "max_completion_tokens": 5000,
        "temperature": 0,
    },
}


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _matched(item_id: str) -> bool:
    """The responder's judge: an item is matched when md5(item_id) starts with 0-7."""
    return hashlib.md5(item_id.encode()).hexdigest()[0] < "8"


def judging_responder(seen: list[dict]):
    """Answers any answer request; to a judge request (the spec's judge user message in
    it), the decisions of :func:`_matched` for its rubric lines, recorded."""

    def responder(given: dict):
        user = next((s for s in _strings(given) if s.startswith("CLINICAL PROMPT:\n")), None)
        if user is None:
            return "an answer"
        seen.append(given)
        ids = re.findall(r"^\[([^\]]+)\] points=", user, re.M)
        return json.dumps({"decisions": [{"item_id": i, "matched": _matched(i)} for i in ids]})

    return responder


def _args(rig: Rig, emu, tmp_path, fixture_dir, *extra: str, cap: int = 40) -> list[str]:
    argv = rig.args(emu, tmp_path, fixture_dir, *extra, model="ans-model", cap=cap)
    argv[argv.index("--judge-model") + 1] = rig.model
    return argv


@pytest.mark.parametrize("rig", JUDGES, ids=lambda r: r.provider)
def test_a_judge_on_every_service_is_sent_the_judge_messages_and_scores_by_the_rule(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    seen: list[dict] = []
    emu = batch_emulator_factory(responder=judging_responder(seen))
    proc = run_cli(*_args(rig, emu, tmp_path, fixture_dir, "--limit", "6"), env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = {c["case_id"]: c for c in load_dataset(fixture_dir).cases[:6]}
    assert len(seen) == 6  # one judge request per answer
    for given in seen:
        user = next(s for s in _strings(given) if s.startswith("CLINICAL PROMPT:\n"))
        want = EXPECTED[rig.provider](user)
        assert given == want
        assert list(given) == list(want) or not rig.ordered
    rows = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    for row in rows:
        case = cases[row["case_id"]]
        matched = {i["item_id"] for i in case["rubric_items"] if _matched(i["item_id"])}
        assert (row["score"], row["score_components"]) == reference.score_case(case, matched)
        temperature = None if rig.provider == "anthropic" else 0  # what was sent
        assert row["judge_model"] == rig.model and row["judge_temperature"] == temperature
    # named as what it is, when it is not OpenAI's model (Azure's judges are)
    summary = json.loads((tmp_path / "jobs" / "ans-model" / "results.summary.json").read_text())
    if rig.provider == "azure":
        assert "judge_service" not in summary and "reference's" not in proc.stdout
    else:
        assert "not by the reference's OpenAI judge" in proc.stdout
        assert summary["judge_service"] == rig.provider
    assert_no_duplicates(emu)


@pytest.mark.parametrize("rig", JUDGES, ids=lambda r: r.provider)
def test_a_sigkill_at_a_judges_create_pays_each_judge_request_once(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    """Killed just after the judges' billable create returned (the second create: one
    answers batch, then one judges batch), the resume adopts it and ends with an
    uninterrupted run's rows."""
    good = batch_emulator_factory()
    argv = _args(rig, good, tmp_path / "ref", fixture_dir, "--limit", "6")
    assert run_cli(*argv, env=rig.env(good)).returncode == 0
    expected = normalised(tmp_path / "ref" / "jobs" / "ans-model")
    real_time = SystemClock()
    emu = batch_emulator_factory(latency=0.02, clock=real_time)
    argv = _args(rig, emu, tmp_path, fixture_dir, "--limit", "6", "--poll-interval", "0.02")
    env = {**rig.env(emu), "BATCHBENCH_FAILPOINT": "created:2"}
    proc = run_cli(*argv, env=env, real=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    proc = run_cli(*argv, env=rig.env(emu), clock=real_time)
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "jobs" / "ans-model") == expected
    assert_no_duplicates(emu)


def test_a_judge_the_service_does_not_have_is_one_line_before_anything_is_paid(
    batch_emulator_factory, tmp_path, fixture_dir
):
    rig = RIGS["anthropic"]
    emu = batch_emulator_factory()
    argv = _args(rig, emu, tmp_path, fixture_dir, "--limit", "2")
    argv[argv.index("--judge-model") + 1] = "claude-opus-55"
    assert_one_line_error(run_cli(*argv, env=rig.env(emu)), "claude-opus-55")
    assert emu.ledger()["batches"] == []
