"""Azure OpenAI: the face driven by the openai SDK's own Azure client, and runs through the CLI.

The shared provider contract (reference bodies and rows, pay once, status, cancel,
keys, bad days) runs for Azure in ``test_providers.py`` and ``test_pay_once.py``;
here is what is Azure's own: its paths, header and versions as the SDK sends them,
deployments as models, a run kept inside Azure, prices by the model behind a
deployment.
"""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources

import openai
import pytest
from support.cli import assert_one_line_error, run_cli
from support.providers import RIGS
from support.runs import rows_of

AZURE = RIGS["azure"]
LINE = {
    "custom_id": "r1",
    "method": "POST",
    "url": "/chat/completions",  # the spelling Azure's docs show
    "body": {"model": "ans-model", "messages": [{"role": "user", "content": "hello"}]},
}


def _client(emu, key: str = AZURE.key, version: str = "v1") -> openai.AzureOpenAI:
    return openai.AzureOpenAI(
        base_url=f"{emu.base_urls['azure']}/openai/v1",
        api_key=key,
        api_version=version,
        max_retries=0,
    )


def test_the_sdks_azure_client_runs_a_batch_end_to_end(batch_emulator_factory):
    emu = batch_emulator_factory(api_key=AZURE.key)
    client = _client(emu)
    uploaded = client.files.create(
        file=("in.jsonl", (json.dumps(LINE) + "\n").encode()), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/chat/completions",  # Azure's spelling
        completion_window="24h",
    )
    emu.flush()
    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts.completed == 1
    assert done.output_file_id is not None
    out = json.loads(client.files.content(done.output_file_id).text)
    assert out["custom_id"] == "r1" and out["response"]["status_code"] == 200
    assert [b["provider"] for b in emu.ledger()["batches"]] == ["azure"]


def test_the_key_goes_in_api_key_and_a_dated_version_is_not_the_v1_api(batch_emulator_factory):
    emu = batch_emulator_factory(api_key=AZURE.key)
    with pytest.raises(openai.AuthenticationError, match="invalid subscription key"):
        _client(emu, key="wrong").batches.list()
    with pytest.raises(openai.BadRequestError, match="not supported on the v1 API"):
        _client(emu, version="2024-10-21").batches.list()
    assert _client(emu).batches.list().data == []


def test_a_batch_naming_an_unknown_deployment_fails_validation_unpaid(batch_emulator_factory):
    emu = batch_emulator_factory(api_key=AZURE.key)
    client = _client(emu)
    line = {**LINE, "body": {**LINE["body"], "model": "ans-modle"}}
    uploaded = client.files.create(
        file=("in.jsonl", (json.dumps(line) + "\n").encode()), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    emu.flush()
    failed = client.batches.retrieve(batch.id)
    assert failed.status == "failed"
    assert failed.errors is not None and failed.errors.data[0].code == "model_not_found"
    assert emu.ledger()["executions"] == []


def test_a_misspelt_deployment_stops_the_run_in_one_line_naming_it_and_the_endpoint(
    batch_emulator, tmp_path, fixture_dir
):
    """#47.8: Azure has no call that names a deployment before a run, so the first batch's
    validation (model_not_found, as Azure's docs list it) is where a typo shows: one line
    naming the deployment and the endpoint, not a run of failed cases."""
    emu = batch_emulator
    argv = AZURE.args(emu, tmp_path, fixture_dir, "--limit", "4", model="azure/ans-modle")
    proc = run_cli(*argv, env=AZURE.env(emu))
    assert_one_line_error(
        proc,
        f"Azure OpenAI at {emu.base_urls['azure']} refused batch",
        "for azure/ans-modle: model_not_found",
        "no Global Batch deployment of that name",
    )
    assert emu.ledger()["executions"] == []
    assert len(emu.ledger()["batches"]) == 1  # stopped at the first refusal


def test_a_dated_openai_api_version_in_the_environment_is_said_and_the_v1_api_used(
    batch_emulator, tmp_path, fixture_dir
):
    """#47.10: Azure users often have OPENAI_API_VERSION=2024-10-21 (the dated API's);
    on the v1 API's paths the service refuses it (the SDK's own client is refused here
    too), so the run says so once and speaks the v1 API as api-version v1."""
    emu = batch_emulator
    with pytest.raises(openai.BadRequestError, match="v1"):
        _client(emu, version="2024-10-21").models.list()
    env = {**AZURE.env(emu), "OPENAI_API_VERSION": "2024-10-21"}
    proc = run_cli(*AZURE.args(emu, tmp_path, fixture_dir, "--limit", "2"), env=env)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "OPENAI_API_VERSION=2024-10-21 is for Azure OpenAI's dated API" in said


def test_one_command_grades_openai_and_azure_models_with_judges_inside_azure(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    argv = [
        "run",
        "--run",
        "grp",
        "--answer-model",
        "ans-model",
        "--answer-model",
        "azure/ans-model",
        "--judge-model",
        "azure/judge-model",
        "--dataset",
        str(fixture_dir),
        "--limit",
        "5",
        "--poll-interval",
        "0.05",
        *jobs,
    ]
    env = {**AZURE.env(emu), "OPENAI_BASE_URL": emu.base_urls["openai"]}
    proc = run_cli(*argv, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every request stays inside Azure OpenAI" in proc.stdout
    batches = emu.ledger()["batches"]
    # answers: one OpenAI batch, one Azure batch; judges: both runs' on Azure
    assert Counter(b["provider"] for b in batches) == {"openai": 1, "azure": 3}
    judged = {e["custom_id"] for e in emu.ledger()["executions"] if e["provider"] == "azure"}
    assert len(judged) == 15  # 5 Azure answers, 5 judges of each run
    names = ["grp-ans-model", "grp-azure-ans-model"]
    plain, azure = (rows_of(tmp_path / "jobs" / n / "results.jsonl") for n in names)
    assert all(r["judge_model"] == "azure/judge-model" for r in plain + azure)
    assert all(r["answer"].startswith("Simulated answer (ans-model)") for r in azure)
    # the same deployment's answers score as the same model's: only the model's name differs
    assert [r["score"] for r in azure] == [r["score"] for r in plain]
    status = json.loads(run_cli("status", *names, *jobs, "--json").stdout)
    assert [s["status"] for s in status] == ["complete", "complete"]


def test_answers_on_azure_with_judges_elsewhere_say_where_the_judges_go(
    batch_emulator, tmp_path, fixture_dir
):
    proc = run_cli(
        *AZURE.args(batch_emulator, tmp_path, fixture_dir, "--limit", "2"),
        env=AZURE.env(batch_emulator),
    )
    assert proc.returncode == 0, proc.stderr
    assert "judges go to OpenAI" in proc.stdout and "--judge-model azure/" in proc.stdout


def test_no_endpoint_is_one_line_naming_the_variable(tmp_path, fixture_dir):
    argv = ["run", "--answer-model", "azure/x", "--judge-model", "j", "--dataset", str(fixture_dir)]
    env = {"AZURE_OPENAI_API_KEY": "k", "AZURE_OPENAI_ENDPOINT": "", "OPENAI_API_KEY": "k"}
    proc = run_cli(*argv, "--jobs-dir", str(tmp_path / "jobs"), env=env)
    assert_one_line_error(proc, "AZURE_OPENAI_ENDPOINT")
    assert not list((tmp_path / "jobs").glob("*/journal.jsonl"))


def test_a_deployment_is_priced_as_the_model_behind_it(tmp_path, fixture_dir):
    """Named after its model, a deployment has that model's price; otherwise the user
    names the model in a --pricing file (``{"as": MODEL}``). Expected: gpt-4.1's price
    from the built-in table, times the dry run's token counts, at half price."""
    text = resources.files("batchbench").joinpath("pricing.json").read_text("utf-8")
    table = json.loads(text)["models"]["gpt-4.1"]

    def answers(model: str, *extra: str) -> dict:
        argv = [
            "run",
            "--answer-model",
            model,
            "--judge-model",
            "gpt-4.1",
            "--dataset",
            str(fixture_dir),
        ]
        out = run_cli(*argv, "--dry-run", "--json", *extra).stdout
        return json.loads(out)["stages"]["answers"]

    named = answers("azure/gpt-4.1")
    expected = named["input_tokens"] * table["input"] + named["output_tokens"] * table["output"]
    assert named["batch_usd"] == pytest.approx(expected / 1e6 / 2, abs=1e-6)
    assert answers("azure/prod-east")["batch_usd"] is None
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"azure/prod-east": {"as": "gpt-4.1"}}}))
    chosen = answers("azure/prod-east", "--pricing", str(prices))
    assert chosen["batch_usd"] == pytest.approx(named["batch_usd"], abs=1e-6)


def test_the_dated_api_reaches_the_same_batches_with_a_dated_version(batch_emulator_factory):
    """Azure also serves the dated API (``/openai/batches?api-version=2024-10-21``), as the
    SDK's Azure client speaks it with ``azure_endpoint``; a version without batches is not
    found there."""
    emu = batch_emulator_factory(api_key=AZURE.key)

    def dated(version: str) -> openai.AzureOpenAI:
        return openai.AzureOpenAI(
            azure_endpoint=emu.base_urls["azure"],
            api_key=AZURE.key,
            api_version=version,
            max_retries=0,
        )

    client = dated("2024-10-21")
    uploaded = client.files.create(
        file=("in.jsonl", (json.dumps(LINE) + "\n").encode()), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    emu.flush()
    assert client.batches.retrieve(batch.id).status == "completed"
    assert _client(emu).batches.retrieve(batch.id).id == batch.id  # one book, two paths
    with pytest.raises(openai.NotFoundError):
        dated("2023-05-15").batches.list()
