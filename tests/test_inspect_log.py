"""``export --format inspect``: an Inspect log, read back with inspect_ai's own reader.

The numbers are checked against the rows and the plain reference summary
(``support/reference.py``), the samples against the dataset: one a case, the answer
as the output, the per-item verdicts, a case that ended in an error as a sample with
that error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import reference
from support.cli import assert_one_line_error, run_cli
from support.runs import parse_id, run_args

from batchbench.bench.dataset import load_dataset
from batchbench.emulator.model import default_content

log_module = pytest.importorskip("inspect_ai.log")


def test_the_log_reads_back_with_the_runs_cases_answers_and_scores(
    batch_emulator_factory, tmp_path, fixture_dir
):
    cases = load_dataset(fixture_dir).cases
    refused = cases[0]["prompt"]

    def responder(body: dict):
        if "response_format" not in body and body["messages"][-1]["content"] == refused:
            error = {"message": "This prompt is refused.", "type": "invalid_request_error"}
            return {"status_code": 400, "body": {"error": error}}
        return default_content(body)

    emu = batch_emulator_factory(responder=responder)
    proc = run_cli(
        *run_args(emu, tmp_path, fixture_dir), env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ""}
    )
    assert proc.returncode == 1, proc.stderr  # one case ends in an error row
    rows = [json.loads(x) for x in (tmp_path / "jobs" / "ans-model" / "results.jsonl").open()]
    out = tmp_path / "run.eval"
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    exported = run_cli("export", "ans-model", "--format", "inspect", "-o", str(out), *jobs)
    assert exported.returncode == 0, exported.stderr
    log = log_module.read_eval_log(str(out))
    assert log.status == "success" and log.eval.model == "openai/ans-model"
    by_case = {r["case_id"]: r for r in rows}
    assert sorted(s.id for s in log.samples) == sorted(by_case)
    by_id = {c["case_id"]: c for c in cases}
    # each answer's tokens, as the raw batch output says them (read here line by line)
    answered = {}
    for raw in (tmp_path / "jobs" / "ans-model" / "raw").glob("*.jsonl"):
        for text in raw.read_text().splitlines():
            line = json.loads(text)
            found = parse_id(line["custom_id"])
            body = (line.get("response") or {}).get("body") or {}
            if found.stage == "answers" and body.get("usage"):
                answered[found.case_id] = body["usage"]
    for sample in log.samples:
        row = by_case[sample.id]
        # what a viewer lists is the case; the messages keep the system prompt before it
        assert sample.input == by_id[sample.id]["prompt"]
        assert sample.messages[0].role == "system"
        assert sample.messages[1].content == by_id[sample.id]["prompt"]
        if "error" in row:
            assert sample.error is not None and sample.error.message == row["error"]
            assert "HTTP 400" in row["error"]
            continue
        score = sample.scores["rubric"]
        assert score.value == row["score"] and sample.output.completion == row["answer"]
        assert score.metadata["decisions"] == row["decisions"]
        used, raw = sample.model_usage["openai/ans-model"], answered[sample.id]
        assert used.input_tokens + (used.input_tokens_cache_read or 0) == raw["prompt_tokens"]
        assert used.output_tokens == raw["completion_tokens"] and sample.output.usage == used
    total = log.stats.model_usage["openai/ans-model"]
    scored = [c for c in answered if "error" not in by_case[c]]
    assert total.output_tokens == sum(answered[c]["completion_tokens"] for c in scored)
    summary = reference.summarize(rows)
    metrics = log.results.scores[0].metrics
    assert metrics["overall"].value == pytest.approx(summary["overall_macro_mean"], rel=1e-12)
    for name, bench in summary["benchmarks"].items():
        assert metrics[name].value == pytest.approx(bench["mean"], rel=1e-12)
        assert metrics[name].metadata["ci95"] == pytest.approx(bench["ci95"], rel=1e-12)
    assert log.eval.metadata["dataset_sha256"] == load_dataset(fixture_dir).sha256
    assert log.eval.metadata["judge_model"] == "judge-model"


def test_without_inspect_ai_the_export_says_how_to_get_it(batch_emulator, tmp_path, fixture_dir):
    import subprocess
    import sys

    proc = run_cli(
        *run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "3"),
        env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ""},
    )
    assert proc.returncode == 0, proc.stderr
    code = (
        "import sys; sys.modules['inspect_ai'] = None\n"
        "from batchbench.cli import main\n"
        "sys.argv = ['batchbench', *sys.argv[1:]]\n"
        "main()\n"
    )
    argv = ["export", "ans-model", "--format", "inspect", "-o", str(tmp_path / "x.eval")]
    done = subprocess.run(
        [sys.executable, "-c", code, *argv, "--jobs-dir", str(tmp_path / "jobs")],
        capture_output=True,
        text=True,
    )
    assert_one_line_error(done, "[inspect]")


def test_the_log_is_written_as_every_o_is(batch_emulator, tmp_path, fixture_dir):
    """#45.4: a symlink, a device or a folder at -o is refused in one line naming it and
    left as it was; a log that was there is replaced whole, never written through."""
    proc = run_cli(
        *run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "3"),
        env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ""},
    )
    assert proc.returncode == 0, proc.stderr
    jobs = ["--jobs-dir", str(tmp_path / "jobs"), "--format", "inspect"]
    target = tmp_path / "target.eval"
    target.write_text("keep me")
    link = tmp_path / "link.eval"
    link.symlink_to(target)
    proc = run_cli("export", "ans-model", "-o", str(link), *jobs)
    assert_one_line_error(proc, str(link), "a symbolic link", "not replaced")
    assert link.is_symlink() and target.read_text() == "keep me"
    proc = run_cli("export", "ans-model", "-o", "/dev/null", *jobs)
    assert_one_line_error(proc, "/dev/null", "a device")
    assert Path("/dev/null").is_char_device()
    proc = run_cli("export", "ans-model", "-o", str(tmp_path), *jobs)
    assert_one_line_error(proc, str(tmp_path), "a folder")
    out = tmp_path / "run.eval"
    for _ in range(2):  # written, then replaced whole
        proc = run_cli("export", "ans-model", "-o", str(out), *jobs)
        assert proc.returncode == 0, proc.stderr
        assert len(log_module.read_eval_log(str(out)).samples) == 3
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bb-")] == []


# Inspect's own names for a model on each service (its providers page: an Azure OpenAI
# deployment is openai/azure/…, Claude on Vertex anthropic/vertex/…, Gemini on Vertex
# google/vertex/…, a Bedrock model bedrock/…), written out here.
INSPECT_NAMES = {
    "gpt-5.4-mini": "openai/gpt-5.4-mini",
    "azure/gpt-4o-batch": "openai/azure/gpt-4o-batch",
    "claude-opus-5": "anthropic/claude-opus-5",
    "gemini-3.1-pro-preview": "google/gemini-3.1-pro-preview",
    "accounts/fireworks/models/glm-5p3": "fireworks/accounts/fireworks/models/glm-5p3",
    "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0": (
        "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0"
    ),
    "vertex/claude-sonnet-4-5": "anthropic/vertex/claude-sonnet-4-5",
    "vertex/gemini-2.5-pro": "google/vertex/gemini-2.5-pro",
    "groq/openai/gpt-oss-120b": "groq/openai/gpt-oss-120b",
    "together/openai/gpt-oss-120b": "together/openai/gpt-oss-120b",
    "mistral/mistral-medium-latest": "mistral/mistral-medium-latest",
    "openrouter/anthropic/claude-opus-5": "openrouter/anthropic/claude-opus-5",
    "xai/grok-4.3": "grok/grok-4.3",
}


@pytest.mark.parametrize("model", sorted(INSPECT_NAMES))
def test_each_services_model_has_inspects_own_name(model):
    """#48.3: the log's model is what `inspect view` and Inspect's own providers call it;
    its first part is a model API Inspect registers."""
    import inspect_ai.model._providers.providers  # noqa: F401  (registers them)
    from inspect_ai._util.registry import registry_find, registry_info

    from batchbench.exports.inspect_log import inspect_model_name

    apis = {
        registry_info(o).name.split("/")[-1] for o in registry_find(lambda i: i.type == "modelapi")
    }
    named = inspect_model_name(model)
    assert named == INSPECT_NAMES[model]
    assert named.split("/")[0] in apis
