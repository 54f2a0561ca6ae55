"""Amazon Bedrock: the face driven by boto3 itself, and Bedrock's own rules through the CLI.

The shared provider contract (the reference's Claude body and rows, pay once after a
SIGKILL at the create, status, cancel, keys, a misspelt model, a silent server, bad
days) runs for Bedrock in ``test_providers.py`` and ``test_pay_once.py``; here is
what is Bedrock's own: idempotent creates, the minimum number of records per job,
records that did not run in time, a group graded on three services.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from support.cli import assert_one_line_error, run_cli
from support.providers import BEDROCK_MODEL, RIGS
from support.runs import assert_no_duplicates, rows_of

boto3 = pytest.importorskip("boto3")
botocore = pytest.importorskip("botocore")

BEDROCK = RIGS["bedrock"]
AZURE = RIGS["azure"]
ROLE = "arn:aws:iam::123456789012:role/batchbench-test"


def _clients(emu, monkeypatch):
    for name, value in BEDROCK.env(emu).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", BEDROCK.key)
    config = botocore.config.Config(retries={"total_max_attempts": 1})
    url = emu.base_urls["bedrock"]
    return (
        boto3.client("s3", config=config),
        boto3.client("bedrock", endpoint_url=url, config=config),
    )


def _records(n: int) -> bytes:
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hello"}],
    }
    return "".join(
        json.dumps({"recordId": f"r{i}", "modelInput": body}) + "\n" for i in range(n)
    ).encode()


def _create(bedrock, token: str = "tok1", name: str = "job-1"):
    return bedrock.create_model_invocation_job(
        jobName=name,
        roleArn=ROLE,
        modelId=BEDROCK_MODEL,
        clientRequestToken=token,
        inputDataConfig={"s3InputDataConfig": {"s3Uri": "s3://batchbench/in/a.jsonl"}},
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": "s3://batchbench/out/"}},
        timeoutDurationInHours=24,
    )["jobArn"]


def test_boto3_runs_a_job_and_a_repeated_token_creates_nothing(batch_emulator, monkeypatch):
    emu = batch_emulator
    s3, bedrock = _clients(emu, monkeypatch)
    s3.put_object(Bucket="batchbench", Key="in/a.jsonl", Body=_records(3))
    arn = _create(bedrock)
    assert _create(bedrock) == arn  # the same clientRequestToken: the first job, no other
    assert len(emu.ledger()["batches"]) == 1
    emu.flush()
    job = bedrock.get_model_invocation_job(jobIdentifier=arn)
    assert job["status"] == "Completed" and job["successRecordCount"] == 3
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="batchbench", Prefix="out/")["Contents"]]
    job_id = arn.rsplit("/", 1)[-1]
    assert keys == [f"out/{job_id}/a.jsonl.out", f"out/{job_id}/manifest.json.out"]
    lines = s3.get_object(Bucket="batchbench", Key=keys[0])["Body"].read().splitlines()
    assert sorted(json.loads(x)["recordId"] for x in lines) == ["r0", "r1", "r2"]
    assert all("modelOutput" in json.loads(x) for x in lines)


def test_a_job_below_the_minimum_fails_validation_and_nothing_runs(batch_emulator, monkeypatch):
    emu = batch_emulator  # the default minimum: 100 records per job
    s3, bedrock = _clients(emu, monkeypatch)
    emu.store.settings.bedrock_min_records = 100
    s3.put_object(Bucket="batchbench", Key="in/a.jsonl", Body=_records(3))
    arn = _create(bedrock)
    emu.flush()
    job = bedrock.get_model_invocation_job(jobIdentifier=arn)
    assert job["status"] == "Failed" and "minimum" in job["message"]
    assert emu.ledger()["executions"] == []


def test_what_the_service_refuses_it_refuses_in_its_own_words(batch_emulator, monkeypatch):
    s3, bedrock = _clients(batch_emulator, monkeypatch)
    with pytest.raises(botocore.exceptions.ClientError, match="NoSuchBucket"):
        s3.put_object(Bucket="nobody", Key="a.jsonl", Body=b"x")
    with pytest.raises(botocore.exceptions.ClientError, match="jobName"):
        _create(bedrock, name="under_score")
    with pytest.raises(botocore.exceptions.ClientError, match="ResourceNotFound"):
        bedrock.get_model_invocation_job(jobIdentifier="abcdefabcdef")


def test_a_run_smaller_than_the_minimum_stops_unpaid_or_goes_on_demand_when_asked(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    rig = BEDROCK.__class__(**{**BEDROCK.__dict__, "emulator": {"bedrock_min_records": 100}})
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "6")
    proc = run_cli(*argv, env=rig.env(emu))
    assert_one_line_error(
        proc, "6 answers request(s)", "fewer than the 100", "--on-demand-remainder"
    )
    assert emu.ledger()["batches"] == [] and emu.ledger()["executions"] == []
    proc = run_cli(*argv, "--on-demand-remainder", env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rows_of(tmp_path / "jobs" / rig.name() / "results.jsonl")
    assert len(rows) == 6 and all("score" in r for r in rows)
    runtime = [e for e in emu.ledger()["executions"] if e["provider"] == "bedrock-runtime"]
    assert len(runtime) == 6  # each answer one InvokeModel call, none twice
    assert not [b for b in emu.ledger()["batches"] if b["provider"] == "bedrock"]


def test_jobs_are_never_cut_below_the_minimum(batch_emulator, tmp_path, fixture_dir):
    """12 requests, at most 3 a batch asked, at least 5 a job: two jobs of 6, not four
    of 3 (which the service would refuse)."""
    emu = batch_emulator
    rig = BEDROCK.__class__(**{**BEDROCK.__dict__, "emulator": {"bedrock_min_records": 5}})
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--limit", "12", cap=3), env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    jobs = [b for b in emu.ledger()["batches"] if b["provider"] == "bedrock"]
    assert sorted(len(b["custom_ids"]) for b in jobs) == [6, 6]


def test_records_that_did_not_run_in_time_are_sent_again_and_paid_once(
    batch_emulator_factory, clock, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(latency=36000, completion_window=7200)
    argv = BEDROCK.args(emu, tmp_path, fixture_dir, "--limit", "8", cap=8)
    assert run_cli(*argv, "--no-wait", env=BEDROCK.env(emu)).returncode == 3
    clock.advance(7300)  # the job ran a few records before its timeout
    emu.tick()
    [first] = [b for b in emu.ledger()["batches"] if b["provider"] == "bedrock"]
    assert first["status"] == "PartiallyCompleted"
    emu.store.settings.latency, emu.store.settings.completion_window = 0.05, 86400
    proc = run_cli(*argv, env=BEDROCK.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert len(rows_of(tmp_path / "jobs" / BEDROCK.name() / "results.jsonl")) == 8
    assert_no_duplicates(emu)


def test_one_command_grades_openai_azure_and_bedrock_models_judged_on_azure(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    argv = ["run", "--run", "three", "--judge-model", "azure/judge-model"]
    for model in ("ans-model", "azure/ans-model", BEDROCK.model):
        argv += ["--answer-model", model]
    argv += ["--dataset", str(fixture_dir), "--limit", "4", "--poll-interval", "0.05", *jobs]
    env = {**BEDROCK.env(emu), **AZURE.env(emu), "OPENAI_BASE_URL": emu.base_urls["openai"]}
    proc = run_cli(*argv, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    batches = emu.ledger()["batches"]
    assert Counter(b["provider"] for b in batches) == {"openai": 1, "azure": 4, "bedrock": 1}
    names = [
        "three-ans-model",
        "three-azure-ans-model",
        f"three-bedrock-{BEDROCK_MODEL}".replace(":", "-"),
    ]
    listing = run_cli("list", *jobs).stdout
    for name in names:
        rows = rows_of(tmp_path / "jobs" / name / "results.jsonl")
        assert len(rows) == 4 and all(r["judge_model"] == "azure/judge-model" for r in rows)
        assert name in listing
    status = json.loads(run_cli("status", *names, *jobs, "--json").stdout)
    assert [s["status"] for s in status] == ["complete"] * 3
    assert status[2]["cost"]["stages"]["answers"]["batch_usd"] > 0  # priced as claude-opus-5


def test_a_model_that_is_not_claude_is_refused_before_anything(tmp_path, fixture_dir):
    argv = ["run", "--answer-model", "bedrock/meta.llama3-70b-instruct-v1:0", "--judge-model", "j"]
    proc = run_cli(*argv, "--dataset", str(fixture_dir), "--dry-run")
    assert_one_line_error(proc, "is not a Claude model", "bedrock/anthropic.claude-")


def test_the_demo_rehearses_a_group_of_an_azure_and_a_bedrock_model(tmp_path):
    models = ["azure/gpt-sim", "bedrock/anthropic.claude-sim-v1:0"]
    argv = ["demo", "--jobs-dir", str(tmp_path)]
    for model in models:
        argv += ["--answer-model", model]
    proc = run_cli(*argv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = sorted(p.parent for p in tmp_path.glob("*/run.json"))
    providers = {
        json.loads((r / "run.json").read_text())["services"]["answers"]["provider"] for r in runs
    }
    assert providers == {"azure", "bedrock"}
    for run in runs:
        assert rows_of(run / "results.jsonl") and all(
            "score" in r for r in rows_of(run / "results.jsonl")
        )


@pytest.mark.parametrize(
    "location,said",
    [
        ("", "--s3-uri s3://BUCKET/PREFIX"),
        ("s3://batchbench/runs?x=1", "'s3://batchbench/runs?x=1', not s3://BUCKET/PREFIX"),
        ("s3://batchbench/my runs", "'s3://batchbench/my runs', not s3://BUCKET/PREFIX"),
        ("s3://no-such-bucket/x", "s3://no-such-bucket, which does not exist"),
    ],
)
def test_an_s3_location_gone_wrong_is_one_line_before_anything_is_made(
    location, said, batch_emulator, tmp_path, fixture_dir
):
    """#45.11: a query or a space in BATCHBENCH_S3_URI passed the pre-flight and failed at
    the create; an unset one said '(got None)'."""
    emu = batch_emulator
    env = {**BEDROCK.env(emu), "BATCHBENCH_S3_URI": location}
    proc = run_cli(*BEDROCK.args(emu, tmp_path, fixture_dir, "--limit", "2"), env=env)
    assert_one_line_error(proc, said)
    assert "None" not in proc.stderr and not emu.ledger()["batches"]


def test_the_role_and_the_s3_location_may_be_given_as_options(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    env = {**BEDROCK.env(emu), "BEDROCK_ROLE_ARN": "", "BATCHBENCH_S3_URI": ""}
    argv = BEDROCK.args(emu, tmp_path, fixture_dir, "--limit", "2")
    assert_one_line_error(run_cli(*argv, env=env), "BEDROCK_ROLE_ARN")
    role = "arn:aws:iam::123456789012:role/from-the-flag"
    proc = run_cli(*argv, "--bedrock-role", role, "--s3-uri", "s3://batchbench/flagged", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # judges on OpenAI: said, with the way to keep every request inside Bedrock (#50)
    assert "answers stay inside Amazon Bedrock; judges go to OpenAI" in proc.stdout
    assert "for every request inside Amazon Bedrock, use --judge-model bedrock/…" in proc.stdout
    run = json.loads((tmp_path / "jobs" / BEDROCK.name() / "run.json").read_text())
    assert run["services"]["answers"]["account"] == {
        "BEDROCK_ROLE_ARN": role,
        "BATCHBENCH_S3_URI": "s3://batchbench/flagged",
    }


def test_a_silent_s3_endpoint_is_named_as_s3s_not_bedrocks(
    batch_emulator, tmp_path, fixture_dir, monkeypatch
):
    """#61.11: S3 at an address that takes the connection and never answers was blamed
    on the Bedrock endpoint after minutes; the pre-flight names S3's endpoint and its
    variable after one short attempt, before anything is bought."""
    import socket

    from batchbench.providers import retry

    monkeypatch.setattr(retry, "PREFLIGHT_TIMEOUT", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # takes connections (the kernel's backlog), never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = {**BEDROCK.env(batch_emulator), "AWS_ENDPOINT_URL_S3": url}
        argv = BEDROCK.args(batch_emulator, tmp_path, fixture_dir, "--limit", "2")
        proc = run_cli(*argv, env=env)
    assert_one_line_error(proc, "took the connection but sent no answer")
    said = proc.stderr
    assert url in said and "AWS_ENDPOINT_URL_S3" in said and "AWS_ENDPOINT_URL_BEDROCK" not in said
    assert not batch_emulator.ledger()["batches"]


def test_the_on_demand_endpoint_is_reached_before_anything_is_paid(
    batch_emulator, tmp_path, fixture_dir
):
    """#61.11: with --on-demand-remainder, a runtime endpoint that is not there was found
    only when the remainder was sent, after the jobs; it is named before anything is
    bought, by a free CountTokens call (boto3's own, against the face), which the
    service's ledger does not bill."""
    import socket

    emu = batch_emulator
    rig = BEDROCK.__class__(**{**BEDROCK.__dict__, "emulator": {"bedrock_min_records": 100}})
    argv = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "2"), "--on-demand-remainder"]
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{free.getsockname()[1]}"  # closed once the block ends
    env = {**rig.env(emu), "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": nobody}
    proc = run_cli(*argv, env=env)
    assert_one_line_error(proc, "reach the on-demand endpoint")
    assert nobody in proc.stderr
    assert not emu.ledger()["batches"] and not emu.ledger()["executions"]
    proc = run_cli(*argv, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runtime = [e for e in emu.ledger()["executions"] if e["provider"] == "bedrock-runtime"]
    assert len(runtime) == 2  # the two records, on demand; the probe billed nothing


def test_a_fixed_role_or_a_new_s3_location_is_not_a_service_move(
    batch_emulator, tmp_path, fixture_dir
):
    """#61.11: a run submitted under one role and S3 location, resumed with the role fixed
    and another location: the jobs live in the account and region (each keeps its own
    role and output), so the resume is not refused as a move; it collects the jobs made
    before, buys nothing twice, and makes new jobs with what it is given now. The region
    (the endpoint) is still where the jobs live: another is refused."""
    emu = batch_emulator
    argv = BEDROCK.args(emu, tmp_path, fixture_dir, "--limit", "2")
    first = run_cli(*argv, "--no-wait", env=BEDROCK.env(emu))
    assert first.returncode == 3, first.stderr  # submitted, not done
    made = len(emu.ledger()["batches"])
    role = "arn:aws:iam::123456789012:role/the-fixed-one"
    env = {**BEDROCK.env(emu), "BEDROCK_ROLE_ARN": role, "BATCHBENCH_S3_URI": "s3://batchbench/b"}
    proc = run_cli(*argv, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--move-service" not in proc.stderr
    assert_no_duplicates(emu)
    assert len(emu.ledger()["batches"]) > made  # the judges' jobs: made now, as told
    run = json.loads((tmp_path / "jobs" / BEDROCK.name() / "run.json").read_text())
    journal = (tmp_path / "jobs" / BEDROCK.name() / "journal.jsonl").read_text()
    assert role in journal and run["services"]["answers"]["account"]["BEDROCK_ROLE_ARN"] != role


@pytest.mark.parametrize(
    "change,said",
    [
        ({"AWS_ACCESS_KEY_ID": "AKIAMARKNEVERSHOWN\r"}, "AWS_ACCESS_KEY_ID has blanks"),
        ({"AWS_SECRET_ACCESS_KEY": None}, "AWS_SECRET_ACCESS_KEY is not set"),
        (
            {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None, "AWS_PROFILE": "nope"},
            "AWS_PROFILE names profile 'nope'",
        ),
    ],
    ids=["a key with a CR", "no secret", "an unknown profile"],
)
def test_aws_credentials_gone_wrong_are_one_line_naming_the_variable(
    change, said, batch_emulator, tmp_path, fixture_dir
):
    """#37.14, 16: AWS's variables are checked as keys are; a stray CR is named, never
    echoed (nor the request's signature); a missing secret or an unknown profile is one
    line, not an internal error."""
    emu = batch_emulator
    env = {**BEDROCK.env(emu), **change}
    proc = run_cli(*BEDROCK.args(emu, tmp_path, fixture_dir, "--limit", "2"), env=env)
    assert_one_line_error(proc, said)
    assert proc.returncode == 2 or proc.returncode < 70, proc.returncode
    assert "MARKNEVERSHOWN" not in proc.stdout + proc.stderr and "Signature" not in proc.stderr
    assert not emu.ledger()["batches"]


def test_an_on_demand_call_cut_short_is_never_sent_blind_again(
    batch_emulator, tmp_path, fixture_dir, monkeypatch
):
    """#37.4: killed after an InvokeModel returned, before its reply was written: the next
    run does not call it again (its outcome is unknown: it may have been billed). It says
    so, the case ends in an error row, and every other record is called once."""
    from batchbench._failpoints import Crash

    emu = batch_emulator
    rig = BEDROCK.__class__(**{**BEDROCK.__dict__, "emulator": {"bedrock_min_records": 100}})
    argv = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "6"), "--on-demand-remainder"]
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "invoked:3:raise")
    with pytest.raises(Crash):
        run_cli(*argv, env=rig.env(emu))
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    proc = run_cli(*argv, env=rig.env(emu))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert "on-demand call for request" in said and "it is not sent again" in said
    runtime = [e for e in emu.ledger()["executions"] if e["provider"] == "bedrock-runtime"]
    assert len(runtime) == 6 == len({e["custom_id"] for e in runtime})
    rows = rows_of(tmp_path / "jobs" / rig.name() / "results.jsonl")
    errors = [r for r in rows if r.get("error")]
    assert len(rows) == 6 and len(errors) == 1
    assert errors[0]["error"].startswith("OutcomeUnknown: the on-demand call for request")


def test_a_failed_job_that_wrote_its_output_is_read_not_bought_again(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#37.4: a job that ran and then ended Failed, the output of what it ran written:
    that output is read (kept, anything missing sent again) — no record bought twice."""
    rig = BEDROCK
    emu = batch_emulator_factory(anomalies={"failed-with-output": 1.0})
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--limit", "6", cap=6), env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(rows_of(tmp_path / "jobs" / rig.name() / "results.jsonl")) == 6
    jobs = [b for b in emu.ledger()["batches"] if b["provider"] == "bedrock"]
    assert jobs and all(b["status"] == "Failed" for b in jobs)
    ran = [e["custom_id"] for e in emu.ledger()["executions"] if e["provider"] == "bedrock"]
    assert len(ran) == 6 == len(set(ran)), ran  # the six answers, each once, none again


def test_damaged_replies_are_one_line_naming_the_file(
    batch_emulator, tmp_path, fixture_dir, monkeypatch
):
    """#37.16: an on-demand call's answer damaged on disk (in the journal, where each call
    is kept), a job whose submitTime is not a timestamp: one line each naming the file
    and line, or the call — never exit 70."""
    from batchbench._failpoints import Crash

    emu = batch_emulator
    rig = BEDROCK.__class__(**{**BEDROCK.__dict__, "emulator": {"bedrock_min_records": 100}})
    argv = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "6"), "--on-demand-remainder"]
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "invoked:4:raise")
    with pytest.raises(Crash):
        run_cli(*argv, env=rig.env(emu))
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    journal = tmp_path / "jobs" / rig.name() / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    n = next(i for i, x in enumerate(lines) if b'"call_answered"' in x)
    journal.write_bytes(b"".join(lines[:n]) + b"{not json\n" + b"".join(lines[n + 1 :]))
    proc = run_cli(*argv, env=rig.env(emu))
    assert_one_line_error(proc, f"{journal}: line {n + 1} is corrupt")
    assert proc.returncode != 70

    jobs_run = rig.args(emu, tmp_path / "jobs2", fixture_dir, "--limit", "2", cap=2)
    assert run_cli(*jobs_run, "--no-wait", env=BEDROCK.env(emu)).returncode == 3
    face = emu.face("bedrock")
    with emu.store.lock:
        for job in face.ledger():
            face.tamper(job["id"], {"submitTime": "yesterday"})
    proc = run_cli(*jobs_run, env=BEDROCK.env(emu))
    assert_one_line_error(proc, "does not read")
    assert proc.returncode != 70
