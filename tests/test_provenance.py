"""#66.1: provenance — the model asked for beside the one each service says served each
reply, when the queries went out, the judge's effective parameters — in ``status``, the
run's ``report.json``, the report (page and ``--json``) and both exports.

The oracles are the raw files the services wrote, read here with the json module, and
the journal's own time stamps; never batchbench's reading of them."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from support.cli import FIXTURE, run_cli
from support.providers import RIGS
from support.runs import env, run_args

from batchbench.engine.provenance import vendor

# A venue's routing prefix names the venue, not the model: the service is asked (and
# says it served) the model without it.
VENUE_PREFIXES = ("bedrock/", "vertex/", "groq/", "together/", "mistral/", "openrouter/", "xai/")


def _journal(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]


def _iso(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("rig", list(RIGS.values()), ids=list(RIGS))
def test_every_service_says_what_served_each_stage_and_when_it_was_asked(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(models=[rig.resolved])
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--limit", "4"), env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    record = json.loads(run_cli("status", rig.name(), *jobs, "--json").stdout)["provenance"]
    asked = rig.resolved
    for prefix in VENUE_PREFIXES:
        asked = asked.removeprefix(prefix)
    assert record["answers"]["served"] == {asked: 4}
    assert record["judges"]["served"] == {"judge-model": 4}
    assert record["answers"]["requested"] == rig.model
    # a fingerprint where the service documents one (OpenAI's chat completion, Azure's, Groq's)
    assert bool(record["answers"]["fingerprints"]) == (rig.provider in {"openai", "azure", "groq"})
    # The span: the first create of a stage's batches to its last collection, as journaled.
    events = _journal(tmp_path / "jobs" / rig.name())
    stage_of = {e["sub"]: e["stage"] for e in events if e["ev"] == "plan"}
    for stage in ("answers", "judges"):
        creates = [
            e["t"] for e in events if e["ev"] == "create_started" and stage_of[e["sub"]] == stage
        ]
        ends = [e["t"] for e in events if e["ev"] == "collected" and stage_of[e["sub"]] == stage]
        assert record[stage]["first_query"] == _iso(min(creates))
        assert record[stage]["last_query"] == _iso(max(ends))
    assert record["answers"]["parameters"]["temperature_requests"] == {
        "sent": 4 if rig.sends_temperature else 0,
        "not_sent": 0 if rig.sends_temperature else 4,
    }


def test_a_run_whose_replies_name_two_snapshots_says_so_everywhere(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """The emulator's snapshot-change day: some replies name another snapshot. The counts
    are the raw files' own; status, report.json, the page, its --json and both exports
    say the same."""
    emu = batch_emulator_factory(anomalies={"snapshot-change": 0.4}, seed=3)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "12")
    assert run_cli(*args, env=env()).returncode == 0
    run = tmp_path / "jobs" / "ans-model"
    served: dict[str, Counter[str]] = {"answers": Counter(), "judges": Counter()}
    prints: Counter[str] = Counter()
    for path in (run / "raw").iterdir():
        for line in path.read_text().splitlines():
            reply = json.loads(line).get("response") or {}
            if reply.get("status_code") == 200:
                body = reply["body"]
                stage = "judges" if body["model"].startswith("judge-model") else "answers"
                served[stage][body["model"]] += 1
                prints[body["system_fingerprint"]] += 1
    assert len(served["answers"]) == 2 and sum(served["answers"].values()) == 12  # can fail

    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    status = json.loads(run_cli("status", "ans-model", *jobs, "--json").stdout)
    record = status["provenance"]
    for stage in ("answers", "judges"):
        assert record[stage]["served"] == dict(served[stage])
    assert sum(Counter(record["answers"]["fingerprints"]).values()) + sum(
        Counter(record["judges"]["fingerprints"]).values()
    ) == sum(prints.values())
    text = run_cli("status", "ans-model", *jobs).stdout
    assert "answers: replies name 2 served models" in text
    assert json.loads((run / "report.json").read_text())["provenance"] == record

    page, numbers = tmp_path / "page.html", tmp_path / "page.json"
    proc = run_cli("report", "ans-model", *jobs, "-o", str(page), "--json", str(numbers))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(numbers.read_text())["provenance"] == {"ans-model": record}
    html = page.read_text()
    assert "id='provenance'" in html
    assert all(model in html for model in served["answers"])

    proc = run_cli("export", "ans-model", *jobs, "--format", "eee", "-o", str(tmp_path / "eee"))
    assert proc.returncode == 0, proc.stderr
    (aggregate,) = [
        json.loads(p.read_text())
        for p in (tmp_path / "eee").rglob("*.json")
        if not p.name.endswith("_samples.json")
    ]
    said = aggregate["model_info"]["additional_details"]["served_model"]
    assert all(f"{m} ({n})" in said for m, n in served["answers"].items())
    judge = aggregate["evaluation_results"][0]["metric_config"]["llm_scoring"]["judges"][0]
    assert all(
        m in judge["model_info"]["additional_details"]["served_model"] for m in served["judges"]
    )


def test_the_inspect_log_names_the_served_model_of_each_sample(
    batch_emulator_factory, tmp_path, fixture_dir
):
    log_module = pytest.importorskip("inspect_ai.log")
    emu = batch_emulator_factory(anomalies={"snapshot-change": 0.4}, seed=3)
    assert (
        run_cli(*run_args(emu, tmp_path, fixture_dir, "--limit", "12"), env=env()).returncode == 0
    )
    run = tmp_path / "jobs" / "ans-model"
    answers: Counter[str] = Counter()
    for path in (run / "raw").iterdir():
        for line in path.read_text().splitlines():
            body = (json.loads(line).get("response") or {}).get("body") or {}
            if str(body.get("model", "")).startswith("ans-model"):
                answers[body["model"]] += 1
    out = tmp_path / "run.eval"
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert (
        run_cli("export", "ans-model", *jobs, "--format", "inspect", "-o", str(out)).returncode == 0
    )
    log = log_module.read_eval_log(str(out))
    assert Counter(s.output.model for s in log.samples) == answers
    assert log.eval.metadata["provenance"]["answers"]["served"] == dict(answers)


def test_a_journal_from_before_provenance_still_reads_and_says_nothing_was_recorded(tmp_path):
    shutil.copytree(FIXTURE / "previous-run" / "run", tmp_path / "jobs" / "prev")
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    proc = run_cli("status", "prev", *jobs, "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)["provenance"]
    assert record["answers"]["served"] == {} and record["answers"]["first_query"] is not None
    assert "not said by the service" in run_cli("status", "prev", *jobs).stdout


@pytest.mark.parametrize(
    ("model", "maker"),
    [
        ("gpt-4.1-2025-04-14", "OpenAI"),
        ("o3-mini", "OpenAI"),
        ("groq/openai/gpt-oss-120b", "OpenAI"),
        ("claude-opus-4-1-20250805", "Anthropic"),
        ("bedrock/us.anthropic.claude-3-5-sonnet-20240620-v1:0", "Anthropic"),
        ("vertex/claude-opus-4@20250514", "Anthropic"),
        ("gemini-2.5-pro", "Google"),
        ("accounts/fireworks/models/llama-v3p1-405b-instruct", "Meta"),
        ("together/meta-llama/Llama-3.3-70B-Instruct-Turbo", "Meta"),
        ("mistral/mistral-large-latest", "Mistral AI"),
        ("xai/grok-4", "xAI"),
        ("accounts/fireworks/models/deepseek-v3", "DeepSeek"),
        ("together/Qwen/Qwen3-235B-A22B", "Alibaba"),
        ("sim-answer", None),
    ],
)
def test_the_vendor_is_the_maker_of_the_model_whoever_serves_it(model, maker):
    assert vendor(model) == maker


def test_the_fields_read_as_provenance_are_the_official_sdks_own():
    """A witness that is not ours: the reply fields the readers take the served model
    from are the ones each vendor's SDK types declare — OpenAI's ChatCompletion `model`
    and `system_fingerprint`, Anthropic's Message `model`, google-genai's
    GenerateContentResponse `modelVersion` (its wire name)."""
    from anthropic.types import Message
    from google.genai.types import GenerateContentResponse
    from openai.types.chat import ChatCompletion

    assert {"model", "system_fingerprint"} <= set(ChatCompletion.model_fields)
    assert "model" in Message.model_fields
    assert GenerateContentResponse.model_fields["model_version"].alias == "modelVersion"
