"""Vertex AI: the face driven by google-genai, google-cloud-storage and google-auth
themselves, and Vertex's own rules through the CLI.

The shared provider contract (the reference's bodies and rows, pay once after a
SIGKILL at the create, status, cancel, secrets, a misspelt model, a silent server,
bad days, the exactly-once folder contract) runs for both Vertex records in
``test_providers.py``, ``test_pay_once.py`` and ``test_pay_once_folders.py``; here is
what is Vertex's own: the run's mark in display name and labels, output prefixes per
submission, four Claude jobs at a time, partly run jobs, settings named in errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.cli import assert_one_line_error, run_cli
from support.providers import RIGS
from support.runs import assert_no_duplicates, normalised, rows_of

from batchbench.engine.rundir import Run

genai = pytest.importorskip("google.genai")
storage = pytest.importorskip("google.cloud.storage")

GEMINI = RIGS["vertex-gemini"]
CLAUDE = RIGS["vertex-claude"]


def _jobs(emu) -> list[dict]:
    """The emulator's Vertex jobs (the judges' batches are OpenAI's)."""
    return [b for b in emu.ledger()["batches"] if b["provider"] == "vertex"]


def _sdks(emu, monkeypatch):
    """The official clients, as a user's own code would make them from the environment."""
    import google.auth
    from google.genai import types

    for name, value in GEMINI.env(emu).items():
        monkeypatch.setenv(name, value)
    creds, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    gcs = storage.Client(project="batchbench-test", credentials=creds)
    options = types.HttpOptions(base_url=emu.base_urls["vertex"], api_version="v1")
    client = genai.Client(
        vertexai=True,
        project="batchbench-test",
        location="us-central1",
        credentials=creds,
        http_options=options,
    )
    return gcs, client


def test_the_official_clients_run_a_job_through_the_emulator(batch_emulator, monkeypatch):
    """Uploads (multipart, and resumable past 8 MiB), a job, its predictions by label."""
    from google.genai import types

    emu = batch_emulator
    gcs, client = _sdks(emu, monkeypatch)
    bucket = gcs.bucket("batchbench")
    big = bytes(range(256)) * (9 * 4096)  # 9 MiB: google-cloud-storage goes resumable
    bucket.blob("big/blob.bin").upload_from_string(big)
    assert bucket.blob("big/blob.bin").download_as_bytes() == big
    request = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}
    lines = [{"request": {**request, "labels": {"row": f"r{i}"}}} for i in range(3)]
    bucket.blob("in/a.jsonl").upload_from_string("".join(json.dumps(x) + "\n" for x in lines))
    job = client.batches.create(
        model="gemini-3.1-pro-preview",
        src="gs://batchbench/in/a.jsonl",
        config=types.CreateBatchJobConfig(
            display_name="mine",
            dest="gs://batchbench/out/a",
            http_options=types.HttpOptions(extra_body={"labels": {"team": "qa"}}),
        ),
    )
    emu.flush()
    done = client.batches.get(name=job.name)
    assert done.state.value == "JOB_STATE_SUCCEEDED" and done.completion_stats.successful_count == 3
    listed = client.batches.list(config=types.ListBatchJobsConfig(filter='labels.team="qa"'))
    assert [j.name for j in listed] == [job.name]
    folder = done.output_info.gcs_output_directory.removeprefix("gs://batchbench/")
    [blob] = list(gcs.list_blobs("batchbench", prefix=folder + "/"))
    predictions = [json.loads(x) for x in blob.download_as_bytes().splitlines()]
    assert sorted(p["request"]["labels"]["row"] for p in predictions) == ["r0", "r1", "r2"]
    assert all(p["status"] == "" and p["response"]["candidates"] for p in predictions)


def test_the_service_refuses_what_vertex_refuses(batch_emulator, monkeypatch):
    from google.genai import errors, types

    emu = batch_emulator
    _, client = _sdks(emu, monkeypatch)
    bad = types.HttpOptions(extra_body={"labels": {"Team": "QA"}})  # labels are lower case
    with pytest.raises(errors.ClientError) as refused:
        client.batches.create(
            model="gemini-3.1-pro-preview",
            src="gs://batchbench/in/a.jsonl",
            config=types.CreateBatchJobConfig(dest="gs://batchbench/out", http_options=bad),
        )
    assert refused.value.code == 400
    with pytest.raises(errors.ClientError) as missing:
        client.models.get(model="gemini-9-nonexistent")
    assert missing.value.code == 404
    assert emu.ledger()["batches"] == []


def test_jobs_carry_the_runs_mark_and_write_under_their_own_prefix(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    argv = GEMINI.args(emu, tmp_path, fixture_dir, "--limit", "6", cap=3)
    proc = run_cli(*argv, env=GEMINI.env(emu))
    assert proc.returncode == 0, proc.stderr
    run_id = Run(tmp_path / "jobs" / GEMINI.name()).load_config().run_id
    jobs = _jobs(emu)
    assert len(jobs) == 2
    for job in jobs:
        assert job["labels"]["batchbench-run"] == run_id
        assert job["name"] == f"batchbench-{run_id}-{job['labels']['batchbench-sub']}"
    face = emu.hub.face("vertex")
    prefixes = {face.jobs.get(j["id"]).output_prefix for j in jobs}
    assert len(prefixes) == 2 and all(run_id[:8] in p for p in prefixes)


def test_four_claude_jobs_at_a_time(batch_emulator_factory, tmp_path, fixture_dir):
    """The project's four concurrent Claude jobs: the run keeps to them (a fifth create
    would be 429 RESOURCE_EXHAUSTED), the rest wait for a job to end."""
    emu = batch_emulator_factory(paused=True)
    argv = CLAUDE.args(emu, tmp_path, fixture_dir, "--limit", "12", cap=2)
    assert run_cli(*argv, "--no-wait", env=CLAUDE.env(emu)).returncode == 3
    assert len(_jobs(emu)) == 4
    emu.store.settings.paused = False
    proc = run_cli(*argv, env=CLAUDE.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert len(_jobs(emu)) == 6 and sum(emu.ledger()["faults"].values()) == 0
    assert len(rows_of(tmp_path / "jobs" / CLAUDE.name() / "results.jsonl")) == 12
    assert_no_duplicates(emu)


def test_two_claude_models_in_one_group_share_the_projects_four_jobs(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#48.1: the quota is the project's: a group of two Claude-on-Vertex models makes
    four jobs between them, never a fifth the service would refuse."""
    emu = batch_emulator_factory(paused=True)
    argv = CLAUDE.args(emu, tmp_path, fixture_dir, "--limit", "12", cap=2)
    at = argv.index("--answer-model")
    argv[at : at + 2] = ["--answer-model", CLAUDE.model, "--answer-model", "vertex/claude-sim"]
    assert run_cli(*argv, "--no-wait", env=CLAUDE.env(emu)).returncode == 3
    assert len(_jobs(emu)) == 4  # six wanted by each run
    emu.store.settings.paused = False
    proc = run_cli(*argv, env=CLAUDE.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert len(_jobs(emu)) == 12 and "waits for room" not in proc.stderr
    assert_no_duplicates(emu)


def test_a_project_full_of_another_folders_jobs_waits_for_room(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """A run the jobs folder cannot see (another folder, another machine) holds the four
    places: the service's refusal (429 RESOURCE_EXHAUSTED) is definite, nothing was
    made, so the create waits for room — journaled, said once — and no outage window
    is spent; once a place is free, the run goes on."""
    emu = batch_emulator_factory(paused=True)
    theirs = CLAUDE.args(emu, tmp_path / "theirs", fixture_dir, "--limit", "8", cap=2)
    assert run_cli(*theirs, "--no-wait", env=CLAUDE.env(emu)).returncode == 3
    ours = CLAUDE.args(emu, tmp_path, fixture_dir, "--limit", "2", cap=2)
    for _ in range(3):  # cron ticks an hour apart: never an outage, each waits for room
        proc = run_cli(*ours, "--no-wait", env=CLAUDE.env(emu))
        assert proc.returncode == 3, proc.stderr
        assert "waits for room" in proc.stderr
        clock.advance(3600)
    assert len(_jobs(emu)) == 4
    journal = (tmp_path / "jobs" / CLAUDE.name() / "journal.jsonl").read_text()
    assert '"create_refused"' in journal and '"created"' not in journal
    emu.store.settings.paused = False
    assert run_cli(*theirs, env=CLAUDE.env(emu)).returncode == 0
    proc = run_cli(*ours, env=CLAUDE.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert len(rows_of(tmp_path / "jobs" / CLAUDE.name() / "results.jsonl")) == 2
    assert_no_duplicates(emu)


def test_a_job_cut_off_by_the_window_keeps_what_ran_and_sends_the_rest_once(
    batch_emulator_factory, clock, tmp_path, fixture_dir
):
    ref = batch_emulator_factory()
    argv = GEMINI.args(ref, tmp_path / "ref", fixture_dir, "--limit", "8", cap=8)
    assert run_cli(*argv, env=GEMINI.env(ref)).returncode == 0
    emu = batch_emulator_factory(latency=36000, completion_window=7200)
    argv = GEMINI.args(emu, tmp_path, fixture_dir, "--limit", "8", cap=8)
    assert run_cli(*argv, "--no-wait", env=GEMINI.env(emu)).returncode == 3
    clock.advance(7300)  # a few lines ran before the window closed
    emu.tick()
    [first] = _jobs(emu)
    assert first["status"] == "JOB_STATE_PARTIALLY_SUCCEEDED"
    emu.store.settings.latency, emu.store.settings.completion_window = 0.05, 86400
    proc = run_cli(*argv, env=GEMINI.env(emu))
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "jobs" / GEMINI.name()
    assert normalised(run) == normalised(tmp_path / "ref" / "jobs" / GEMINI.name())
    assert len(_jobs(emu)) == 2
    assert_no_duplicates(emu)


@pytest.mark.parametrize("rig", [GEMINI, CLAUDE], ids=lambda r: r.provider)
def test_a_job_read_failed_while_it_runs_is_not_bought_again(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    """#45.3: a running job reads FAILED (an internal error, nothing written) for a
    while, then runs on and succeeds: its requests are not sent again meanwhile, and the
    rows are a good day's, each line paid once."""
    ref = batch_emulator_factory()
    argv = rig.args(ref, tmp_path / "ref", fixture_dir, "--limit", "8", cap=8)
    assert run_cli(*argv, env=rig.env(ref)).returncode == 0
    emu = batch_emulator_factory(latency=1200, anomalies={"failed-while-running": 1.0})
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "8", cap=8)
    proc = run_cli(*argv, "--poll-interval", "60", env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "jobs" / rig.name()) == normalised(
        tmp_path / "ref" / "jobs" / rig.name()
    )
    events = [json.loads(x) for x in (tmp_path / "jobs" / rig.name() / "journal.jsonl").open()]
    assert any("read again" in e.get("status", "") for e in events if e["ev"] == "batch")
    assert len([b for b in _jobs(emu) if b["name"].endswith("answers-0001")]) == 1
    assert_no_duplicates(emu)


def test_a_job_that_failed_for_good_fails_at_once(batch_emulator, tmp_path, fixture_dir):
    """A job failed by an error that ends it for good (its input unreadable: Google's
    INVALID_ARGUMENT) is not waited for: its cases end in error rows."""
    emu = batch_emulator
    argv = GEMINI.args(emu, tmp_path, fixture_dir, "--limit", "2", cap=2)
    face = emu.face("vertex")
    original = face.jobs._validate

    def unreadable(job):
        face.jobs._fail(job, f"Failed to read the input {job.input_uri}.")

    face.jobs._validate = unreadable
    try:
        proc = run_cli(*argv, env=GEMINI.env(emu))
    finally:
        face.jobs._validate = original
    assert proc.returncode == 1, proc.stderr
    rows = rows_of(tmp_path / "jobs" / GEMINI.name() / "results.jsonl")
    assert len(rows) == 2 and all("Failed to read the input" in r["error"] for r in rows)


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        ({"GOOGLE_CLOUD_PROJECT": ""}, ["GOOGLE_CLOUD_PROJECT"]),
        ({"BATCHBENCH_GCS_URI": "s3://wrong"}, ["BATCHBENCH_GCS_URI", "--gcs-uri", "gs://"]),
        ({"BATCHBENCH_GCS_URI": ""}, ["--gcs-uri gs://BUCKET/PREFIX", "BATCHBENCH_GCS_URI"]),
        ({"BATCHBENCH_GCS_URI": "gs://batchbench/runs?x=1"}, ["'gs://batchbench/runs?x=1'"]),
        ({"BATCHBENCH_GCS_URI": "gs://batchbench/my runs"}, ["'gs://batchbench/my runs'"]),
        ({"BATCHBENCH_GCS_URI": "gs://no-such-bucket/x"}, ["gs://no-such-bucket"]),
        (
            {"GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/key.json"},
            ["GOOGLE_APPLICATION_CREDENTIALS"],
        ),
    ],
)
def test_settings_gone_wrong_are_one_line_naming_them(
    change, fragments, batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    env = {**GEMINI.env(emu), **change}
    proc = run_cli(*GEMINI.args(emu, tmp_path, fixture_dir, "--smoke"), env=env)
    assert_one_line_error(proc, *fragments)
    assert "None" not in proc.stderr
    assert emu.ledger()["batches"] == []


def test_claude_runs_in_a_region_and_only_gemini_and_claude_are_graded(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    env = {**CLAUDE.env(emu), "GOOGLE_CLOUD_LOCATION": "global"}
    proc = run_cli(*CLAUDE.args(emu, tmp_path, fixture_dir, "--smoke"), env=env)
    assert_one_line_error(proc, "GOOGLE_CLOUD_LOCATION", "global")
    llama = "vertex/llama-4-maverick"
    argv = GEMINI.args(emu, tmp_path, fixture_dir, "--smoke", model=llama)
    assert_one_line_error(run_cli(*argv, env=GEMINI.env(emu)), f"'{llama}'", "vertex/gemini-")
    assert emu.ledger()["batches"] == []


def test_the_gcs_uri_may_be_an_option_and_the_run_says_where_judges_go(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    env = {**GEMINI.env(emu), "BATCHBENCH_GCS_URI": ""}
    argv = GEMINI.args(emu, tmp_path, fixture_dir, "--limit", "2")
    proc = run_cli(*argv, "--gcs-uri", "gs://batchbench/flagged", env=env)
    assert proc.returncode == 0, proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "answers stay inside Vertex AI (Gemini); judges go to OpenAI" in said, said
    [job] = _jobs(emu)
    assert (
        emu.hub.face("vertex").jobs.get(job["id"]).input_uri.startswith("gs://batchbench/flagged/")
    )


def test_the_demo_rehearses_vertex_gemini_and_claude_models(tmp_path):
    argv = ["demo", "--jobs-dir", str(tmp_path)]
    for model in ("vertex/gemini-sim", "vertex/claude-sim"):
        argv += ["--answer-model", model]
    proc = run_cli(*argv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = sorted(p.parent for p in tmp_path.glob("*/run.json"))
    providers = {
        json.loads((r / "run.json").read_text())["services"]["answers"]["provider"] for r in runs
    }
    assert providers == {"vertex-gemini", "vertex-claude"}
    for run in runs:
        rows = rows_of(run / "results.jsonl")
        assert len(rows) == 12 and all("score" in r for r in rows)


def test_a_job_state_the_sdk_does_not_know_is_one_line(batch_emulator, tmp_path, fixture_dir):
    """#45.11: google-genai warns (with its site-packages path and source line) about a
    state it does not know, before batchbench's one line: said as one line too."""
    emu = batch_emulator
    emu.store.settings.paused = True
    argv = GEMINI.args(emu, tmp_path, fixture_dir, "--limit", "2", cap=2)
    assert run_cli(*argv, "--no-wait", env=GEMINI.env(emu)).returncode == 3
    [job] = _jobs(emu)
    emu.face("vertex").tamper(job["id"].rsplit("/", 1)[-1], {"state": "JOB_STATE_WEIRD"})
    # The real command, in a process of its own: pytest would catch the warning itself.
    env = {**os.environ, **{k: v for k, v in GEMINI.env(emu).items() if v is not None}}
    proc = subprocess.run(
        [sys.executable, "-m", "batchbench", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(proc, "unknown state 'JOB_STATE_WEIRD'")
    assert "site-packages" not in proc.stderr and ".py:" not in proc.stderr


@pytest.mark.parametrize("kind", ["a folder", "not JSON", "a key without its fields"])
def test_a_credentials_file_gone_wrong_is_one_line_naming_the_variable(
    kind, batch_emulator, tmp_path, fixture_dir
):
    """#45.11: a malformed key file was said as google-auth's Python repr, and a folder
    as an internal error naming no variable."""
    target = tmp_path / "key.json"
    if kind == "a folder":
        target.mkdir()
    else:
        target.write_text("{not json" if kind == "not JSON" else '{"type": "service_account"}')
    emu = batch_emulator
    env = {**GEMINI.env(emu), "GOOGLE_APPLICATION_CREDENTIALS": str(target)}
    proc = run_cli(*GEMINI.args(emu, tmp_path, fixture_dir, "--smoke"), env=env)
    assert_one_line_error(proc, f"GOOGLE_APPLICATION_CREDENTIALS names {target}")
    assert proc.returncode == 2 and "('" not in proc.stderr and "Error(" not in proc.stderr
    assert emu.ledger()["batches"] == []
