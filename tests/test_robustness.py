"""Crash anywhere, lose nothing, pay once: kills, faults, bad input, locks and secrets."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import openai
import pytest
from support.buckets import emulator_s3, pull
from support.cli import REPO, assert_one_line_error, read_lines, run_cli, spawn
from support.crash import FAILPOINTS, last_stage
from support.runs import (
    KEY,
    assert_no_duplicates,
    cancel_cli,
    env,
    normalised,
    parse_id,
    rows_of,
    run_args,
)

from batchbench._failpoints import Crash
from batchbench.bench import results
from batchbench.emulator import SystemClock
from batchbench.engine.submit import NOT_FOUND_GRACE

# Each failpoint, in each stage: (name, which hit of it in that process kills it).
KILLS = [
    ("journal_half_written", 2),  # the first plan's line torn
    ("planned", 1),
    ("uploaded", 1),
    ("created", 1),  # the billable call returned, its id not journaled
    ("downloading", 1),
    ("rows_written", 1),  # an answer file collected, not journaled
    ("created", 2),
    ("rows_half_written", 1),  # half of a judge file's rows appended
    ("rows_written", 2),
    ("journal_half_written", 7),
    ("downloading", 2),
]


def _sigkills(points, batch_emulator_factory, tmp_path, fixture_dir, where="folder"):
    """Killed (real processes, real SIGKILLs) at each of ``points``, answers and judges:
    the run ends equal to an uninterrupted one, with no batch created twice and no line
    executed twice. ``where``: the jobs folder a local one, or a bucket (the emulator's
    S3 face) each killed process left its lease in."""
    select = ("--limit", "16")
    reference = batch_emulator_factory(latency=0.05)
    proc = run_cli(*run_args(reference, tmp_path / "ref", fixture_dir, *select, cap=2), env=env())
    assert proc.returncode == 0, proc.stderr
    expected = normalised(tmp_path / "ref" / "jobs" / "ans-model")
    real_time = SystemClock()
    emu = batch_emulator_factory(latency=0.02, clock=real_time)
    args = run_args(emu, tmp_path, fixture_dir, *select, "--poll-interval", "0.02", cap=2)
    store = {} if where == "folder" else emulator_s3(emu)
    if where == "bucket":
        args[args.index("--jobs-dir") + 1] = "s3://batchbench/killed"

    def folder() -> Path:
        if where == "folder":
            return tmp_path / "jobs"
        return pull("s3://batchbench/killed", "ans-model", store, tmp_path / "pulled")

    killed: Counter = Counter()
    stages: set = set()
    for name, nth in points:
        # a killed runner's working folder (a bucket's) dies with it: in the test's folder
        died = {"BATCHBENCH_FAILPOINT": f"{name}:{nth}", "TMPDIR": str(tmp_path)}
        proc = spawn(args, {**env(), **store, **died})
        assert proc.wait(timeout=120) == -signal.SIGKILL, (name, nth, proc.stderr.read())
        killed[name] += 1
        stages.add(last_stage(folder() / "ans-model" / "journal.jsonl"))
    proc = run_cli(*args, env={**env(), **store}, clock=real_time)
    assert proc.returncode == 0, proc.stderr
    assert normalised(folder() / "ans-model") == expected
    assert_no_duplicates(emu)
    return killed, stages


@pytest.mark.soak  # 8 real processes killed in turn: ~13 s of waiting (#29)
@pytest.mark.parametrize("where", ["folder", "bucket"])
def test_a_sigkill_at_each_failpoint_resumes_equal_and_pays_once(
    where, batch_emulator_factory, tmp_path, fixture_dir
):
    """Once at each failpoint, answers and judges (soak, with all of KILLS and kills at
    random moments over many seeds; the default set kills every provider's run at its
    create, test_providers.py)."""
    points = [
        ("journal_half_written", 2),
        ("planned", 1),
        ("uploaded", 1),
        ("created", 1),
        ("downloading", 1),
        ("rows_written", 1),
        ("rows_half_written", 1),
    ]
    killed, stages = _sigkills(points, batch_emulator_factory, tmp_path, fixture_dir, where)
    assert set(killed) == set(FAILPOINTS) and stages == {"answers", "judges"}, (killed, stages)


@pytest.mark.soak
@pytest.mark.parametrize("where", ["folder", "bucket"])
def test_sigkill_at_every_failpoint_in_both_stages(
    where, batch_emulator_factory, tmp_path, fixture_dir
):
    killed, stages = _sigkills(KILLS, batch_emulator_factory, tmp_path, fixture_dir, where)
    assert set(killed) == set(FAILPOINTS) and stages == {"answers", "judges"}, (killed, stages)


def test_a_crash_between_pieces_of_rows_writes_each_row_once(
    batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    """A collection's rows go to disk a few thousand lines at a time: a process that
    dies in the second piece leaves the first piece's rows whole and the second's torn.
    Resumed, the run drops the torn line, writes the rest, and ends equal to an
    uninterrupted run: each case's row once, each request executed once."""
    select = ("--limit", "8")
    reference = batch_emulator_factory(latency=0.05)
    proc = run_cli(*run_args(reference, tmp_path / "ref", fixture_dir, *select), env=env())
    assert proc.returncode == 0, proc.stderr
    expected = normalised(tmp_path / "ref" / "jobs" / "ans-model")
    monkeypatch.setattr(results, "PIECE_LINES", 3)
    emu = batch_emulator_factory(latency=0.05)
    args = run_args(emu, tmp_path, fixture_dir, *select)
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "rows_half_written:2:raise")
    with pytest.raises(Crash):
        run_cli(*args, env=env())
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    run_dir = tmp_path / "jobs" / "ans-model"
    written = (run_dir / "results.jsonl").read_bytes()
    assert written.count(b"\n") >= 3 and not written.endswith(b"\n")  # piece 1 whole, 2 torn
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stderr
    assert normalised(run_dir) == expected
    assert_no_duplicates(emu)


def test_twenty_percent_faults_and_truncated_downloads(
    batch_emulator_factory, tmp_path, fixture_dir
):
    reference = batch_emulator_factory(latency=0.1)
    assert (
        run_cli(
            *run_args(reference, tmp_path / "ref", fixture_dir, "--limit", "50"), env=env()
        ).returncode
        == 0
    )
    emu = batch_emulator_factory(latency=0.1, fault_rate=0.2, truncate_rate=0.15, seed=3)
    proc = run_cli(*run_args(emu, tmp_path / "f", fixture_dir, "--limit", "50", cap=10), env=env())
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "f" / "jobs" / "ans-model") == normalised(
        tmp_path / "ref" / "jobs" / "ans-model"
    )
    assert_no_duplicates(emu)


def test_expiry_resubmits_only_unfinished_lines(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=0.2, completion_window=0.33)
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--limit", "30", cap=5), env=env())
    assert proc.returncode == 0, proc.stderr
    ledger = emu.ledger()
    assert any(b["status"] == "expired" for b in ledger["batches"])
    assert_no_duplicates(emu)  # an executed line is never sent again
    rows = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    assert len(rows) == 30 and all("score" in r for r in rows)


def test_cancel_in_the_middle_resubmits_only_unfinished(
    batch_emulator_factory, clock, tmp_path, fixture_dir
):
    """Someone cancels the batch on the service (its dashboard, say) a quarter of the way
    through its lines: the lines that ran are kept, only the others are sent again."""
    emu = batch_emulator_factory(latency=100)
    c = openai.OpenAI(api_key="k", base_url=emu.base_url, max_retries=0)
    cancelled = []

    def cancel_on_the_service():
        [batch] = c.batches.list(limit=10).data
        assert batch.status == "in_progress" and 5 <= batch.request_counts.completed < 30
        c.batches.cancel(batch.id)
        cancelled.append(batch.id)

    clock.call_at(clock.time() + 125, cancel_on_the_service)  # validated at 100 s; 10 lines
    proc = run_cli(
        *run_args(emu, tmp_path, fixture_dir, "--limit", "40", "--poll-interval", "30", cap=40),
        env=env(),
    )
    assert proc.returncode == 0, proc.stderr
    first = [e for e in emu.ledger()["executions"] if e["batch_id"] == cancelled[0]]
    assert 5 <= len(first) < 40
    assert_no_duplicates(emu)
    rows = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    assert len(rows) == 40 and all("score" in r for r in rows)


def test_token_limit_waits_and_resubmits(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=0.3, enqueued_token_limit=6000)
    proc = run_cli(
        *run_args(emu, tmp_path, fixture_dir, "--limit", "40", "--token-limit-wait", "0.3", cap=10),
        env=env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert "token_limit_exceeded" in proc.stderr  # a notice about the service: stderr
    ledger = emu.ledger()
    assert any(b["status"] == "failed" for b in ledger["batches"])
    assert_no_duplicates(emu)
    rows = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    assert len(rows) == 40 and all("score" in r for r in rows)


# bad input ------------------------------------------------------------------------


def _judge_reply(kind):
    def reply(body):
        if body["model"] != "judge-model":
            return "An answer."
        import re

        ids = re.findall(r"^\[([^\]]+)\] points=", body["messages"][-1]["content"], re.M)
        decisions = [{"item_id": i, "matched": True} for i in ids]
        if kind == "not_json":
            return "Sure! Here are my decisions."
        if kind == "a_list":
            return json.dumps(decisions)
        if kind == "no_decisions":
            return json.dumps({"items": decisions})
        if kind == "matched_string":
            decisions[0]["matched"] = "true"
        if kind == "duplicate":
            decisions.append(decisions[0])
        if kind == "missing":
            decisions.pop()
        if kind == "extra":
            decisions.append({"item_id": "made_up_9", "matched": False})
        return json.dumps({"decisions": decisions})

    return reply


@pytest.mark.parametrize(
    "kind,fragment",
    [
        ("not_json", "ValueError: invalid judge JSON: Expecting value: line 1 column 1 (char 0)"),
        ("a_list", "ValueError: invalid judge JSON: list indices must be integers or slices"),
        ("no_decisions", "ValueError: invalid judge JSON: 'decisions'"),
        ("matched_string", "ValueError: each judge decision needs string item_id and bool matched"),
        ("duplicate", "ValueError: duplicate judge decision for "),
        ("missing", "missing=['"),
        ("extra", "extra=['made_up_9']"),
    ],
)
def test_bad_judge_replies_become_error_rows(
    batch_emulator_factory, tmp_path, fixture_dir, kind, fragment
):
    emu = batch_emulator_factory(latency=0.05, responder=_judge_reply(kind))
    proc = run_cli(
        *run_args(emu, tmp_path, fixture_dir, "--limit", "1", "--max-attempts", "2"), env=env()
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    [row] = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    assert "score" not in row and fragment in row["error"] and "\n" not in row["error"]
    judged = [e for e in emu.ledger()["executions"] if parse_id(e["custom_id"]).stage == "judges"]
    assert len(judged) == 2  # judged again once, then an error row


def _mangler(kind):
    def mangle(which, lines):
        if which != "output" or not lines:
            return lines
        first = json.loads(lines[0])
        if kind == "garbage":
            return [*lines, "<html>502 Bad Gateway</html>"]
        if kind == "unknown":
            return [*lines, json.dumps(dict(first, custom_id="answer:not-ours"))]
        if kind == "duplicate":
            return [*lines, lines[0]]
        if kind == "neither":
            return [*lines[1:], json.dumps(dict(first, response=None, error=None))]
        if kind == "mistyped":
            response = dict(first["response"], status_code="200")
            return [*lines[1:], json.dumps(dict(first, response=response))]
        if kind == "two on a line":
            return [*lines[:2], lines[2] + " " + lines[2]]
        if kind == "array":
            return [*lines[:1], "[1, 2]", *lines[2:]]
        return lines

    return mangle


@pytest.mark.parametrize(
    "kind,fragments",
    [
        ("garbage", ["line 4", "not JSON"]),
        ("unknown", ["line 4", "unknown custom_id 'answer:not-ours'"]),
        ("duplicate", ["line 4", "duplicate custom_id"]),
        ("neither", ["line 3", "neither response nor error"]),
        ("mistyped", ["line 3", "Expected `int | null`, got `str`", "response.status_code"]),
        ("two on a line", ["line 3", "not JSON (Extra data)"]),
        ("array", ["line 2", "expected a JSON object, got array"]),
    ],
)
def test_broken_output_files_stop_with_the_culprit(
    batch_emulator_factory, tmp_path, fixture_dir, kind, fragments
):
    emu = batch_emulator_factory(latency=0.05, mangle=_mangler(kind))
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "3")
    proc = run_cli(*args, env=env())
    assert_one_line_error(proc, *fragments)
    run_dir = tmp_path / "jobs" / "ans-model"
    events = [json.loads(x) for x in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert not any(e["ev"] in ("downloaded", "collected") for e in events)
    # a file naming requests not sent stops the stage through the one journaled path
    stops = [e["reason"] for e in events if e["ev"] == "stopped"]
    assert stops == (["ids"] if kind in ("unknown", "duplicate") else [])
    assert list((run_dir / "raw").iterdir()) == []
    assert not (run_dir / "results.jsonl").exists()
    # Running again meets the same file and refuses again: nothing changes, nothing is paid.
    before = (run_dir / "journal.jsonl").read_bytes()
    proc = run_cli(*args, env=env())
    assert_one_line_error(proc, *fragments)
    assert (run_dir / "journal.jsonl").read_bytes() == before
    assert len(emu.ledger()["batches"]) == 1


@pytest.mark.parametrize(
    "extra,fragments",
    [
        (["--benchmark", "cardiology"], ["unknown benchmark 'cardiology'"]),
        (["--limit", "0"], ["--limit must be at least 1"]),
        (["--max-requests-per-batch", "0"], ["--max-requests-per-batch"]),
        (["--poll-interval", "0"], ["--poll-interval must be greater than 0"]),
        (["--poll-interval", "nan"], ["--poll-interval must be a finite number, got nan"]),
        (["--poll-interval", "inf"], ["--poll-interval must be a finite number, got inf"]),
        (["--max-cost", "nan"], ["--max-cost must be a finite number, got nan"]),
        (["--max-cost", "inf"], ["--max-cost must be a finite number, got inf"]),
        (["--token-limit-wait", "-5"], ["--token-limit-wait must be at least 0, got -5"]),
        (["--max-retries", "0"], ["--max-retries must be at least 1"]),
        (["--reasoning-effort", "extreme"], ["--reasoning-effort 'extreme'", "xhigh"]),
        (["--run", ""], ["run name ''"]),
        (["--run", "r" * 300], ["300 characters", "at most 128"]),
        (["--base-url", "http://[::1"], ["--base-url 'http://[::1'", "not a valid URL"]),
        (["--max-attempts", "0"], ["--max-attempts must be at least 1"]),
        (["--run", "a/b"], ["'a/b'", "[A-Za-z0-9._-]+"]),
        (["--base-url", "ftp://x"], ["is not an http(s) URL"]),
        (["--judge-passes", "0"], ["--judge-passes must be at least 1"]),
        (["--judge-passes", "1000000000"], ["--judge-passes must be at most 20"]),
        (["--resubmit-after", "0"], ["--resubmit-after must be greater than 0"]),
        # A judge on another service (#50) needs that service's key: said before anything runs.
        (["--judge-model", "claude-sonnet-4-5"], ["no API key for Anthropic", "ANTHROPIC_API_KEY"]),
    ],
)
def test_bad_configuration(batch_emulator, tmp_path, fixture_dir, extra, fragments):
    proc = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, *extra), env=env())
    assert_one_line_error(proc, *fragments)
    assert not (tmp_path / "jobs").exists()
    assert batch_emulator.ledger()["batches"] == []


@pytest.mark.parametrize(
    "model,variables,fragments",
    [
        (
            "gemini-3.1-pro",
            {"GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": "not-a-url"},
            ["GOOGLE_GEMINI_BASE_URL 'not-a-url'", "not an http(s) URL"],
        ),
        (
            "glm-5.3",
            {"FIREWORKS_API_KEY": "k", "FIREWORKS_ACCOUNT_ID": "a/b"},
            ["FIREWORKS_ACCOUNT_ID 'a/b'", "not an account id"],
        ),
    ],
)
def test_a_bad_provider_variable_is_named(
    batch_emulator, tmp_path, fixture_dir, model, variables, fragments
):
    args = run_args(batch_emulator, tmp_path, fixture_dir)
    args[args.index("--answer-model") + 1] = model
    proc = run_cli(*args, env={**env(), "FIREWORKS_BASE_URL": batch_emulator.url, **variables})
    assert_one_line_error(proc, *fragments)
    assert batch_emulator.ledger()["batches"] == []


def test_broken_dataset_changes_nothing(batch_emulator, tmp_path, sample_copy):
    (sample_copy / "registry.json").write_text("{")
    proc = run_cli(*run_args(batch_emulator, tmp_path, sample_copy), env=env())
    assert_one_line_error(proc, "registry.json", "invalid JSON")
    assert not (tmp_path / "jobs").exists()


def test_wrong_key_is_refused_without_echoing_it(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=0.05, api_key="the-right-key")
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--smoke"), env=env())
    assert_one_line_error(proc, "refused the key", "401")
    assert KEY not in proc.stderr + proc.stdout


def _http(emu, path, payload):
    import urllib.request

    req = urllib.request.Request(emu.url + path, method="POST", data=json.dumps(payload).encode())
    urllib.request.urlopen(req, timeout=10).read()


@pytest.mark.parametrize(
    "change,fragments",
    [({"forget": True}, ["vanished", "404"]), ({"status": "paused"}, ["unknown status 'paused'"])],
)
def test_api_surprises(batch_emulator_factory, tmp_path, fixture_dir, clock, change, fragments):
    emu = batch_emulator_factory(latency=3600)
    args = run_args(emu, tmp_path, fixture_dir, "--smoke", "--no-wait")
    assert run_cli(*args, env=env()).returncode == 3
    [batch] = emu.ledger()["batches"]
    clock.advance(NOT_FOUND_GRACE + 1)  # a 404 soon after a create is the service's passing fault
    _http(emu, f"/_emulator/batches/{batch['id']}", change)
    proc = run_cli(*args, env=env())
    assert_one_line_error(proc, batch["id"], *fragments)


# concurrency, secrets, files -------------------------------------------------------


def _holder(lock: Path) -> subprocess.Popen:
    """Another process holding a run's lock (as one advancing it does), until killed."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time;"
            " fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600);"
            " fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode());"
            " print('held', flush=True); time.sleep(600)",
            str(lock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert read_lines(holder.stdout, 1) == ["held\n"]
    return holder


def test_second_process_is_refused(batch_emulator, tmp_path, fixture_dir):
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2")
    assert run_cli(*args, "--no-wait", env=env()).returncode == 3
    holder = _holder(tmp_path / "jobs" / "ans-model" / ".lock")
    try:
        proc = run_cli(*args, env=env())
    finally:
        holder.kill()
        holder.wait()
    assert_one_line_error(proc, "being advanced by another process", f"pid {holder.pid}")
    assert proc.returncode == 4
    assert run_cli(*args, env=env()).returncode == 0  # once it has let go, the run goes on
    assert_no_duplicates(batch_emulator)


def test_key_never_written_or_printed_and_files_are_private(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(latency=0.05)
    outputs = []
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--smoke"), env=env())
    assert proc.returncode == 0
    outputs.append(proc.stdout + proc.stderr)
    for cmd in (["status"], ["list"], ["status", "ans-model", "--json"]):
        p = run_cli(*cmd, "--jobs-dir", str(tmp_path / "jobs"), env=env())
        outputs.append(p.stdout + p.stderr)
    p = cancel_cli(emu, tmp_path)
    outputs.append(p.stdout + p.stderr)
    files = [p for p in (tmp_path / "jobs").rglob("*") if p.is_file()]
    assert len(files) >= 8  # config, journal, lock, requests, raw files, results, reports
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    for text in outputs:
        assert KEY not in text
    run_dir = tmp_path / "jobs" / "ans-model"
    for path in [run_dir, *run_dir.rglob("*")]:
        if path.is_dir() or path.name != "results.summary.json":
            assert path.stat().st_mode & 0o077 == 0, path


def test_plain_http_to_a_non_loopback_host_warns(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=0.05)
    port = emu.base_url.rsplit(":", 1)[1]
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "1")
    args[args.index("--base-url") + 1] = f"http://0.0.0.0:{port}"
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stderr
    assert "warning:" in proc.stderr and "plain http" in proc.stderr
    proc = run_cli(*run_args(emu, tmp_path / "b", fixture_dir, "--limit", "1"), env=env())
    assert "plain http" not in proc.stderr


def test_two_processes_creating_the_same_new_run_one_configuration_wins(
    batch_emulator, tmp_path, fixture_dir
):
    """Two invocations of one new run with different judges, in both orders the lock
    allows: the second after the first wrote run.json is refused (another configuration,
    exit 2); the second while the first holds the run it is creating is told this tick has
    nothing to do (--no-wait, exit 0) or refused (exit 4). One configuration wins."""
    emu = batch_emulator
    first = run_args(emu, tmp_path, fixture_dir, "--smoke", "--no-wait")
    second = list(first)
    second[second.index("judge-model")] = "other-judge"
    # The first holds the new run's lock before it has written its config.
    holder = _holder(tmp_path / "jobs" / "ans-model" / ".lock")
    try:
        tick = run_cli(*second, env=env())
        plain = run_cli(*[a for a in second if a != "--no-wait"], env=env())
    finally:
        holder.kill()
        holder.wait()
    said = [x for x in tick.stdout.splitlines() if not x.startswith(("NEW", "RESUMING"))]
    assert tick.returncode == 0 and len(said) == 1 and "another process" in said[0], tick.stdout
    assert_one_line_error(plain, "being advanced by another process")
    assert not (tmp_path / "jobs" / "ans-model" / "run.json").exists()
    # The first writes its config; the second comes after.
    assert run_cli(*first, env=env()).returncode == 3
    late = run_cli(*second, env=env())
    assert_one_line_error(late, "another configuration", "other-judge")
    assert late.returncode == 2
    config = json.loads((tmp_path / "jobs" / "ans-model" / "run.json").read_text())
    assert config["judge_model"] == "judge-model"
    run_ids = {b["metadata"]["batchbench_run_id"] for b in emu.ledger()["batches"]}
    assert run_ids == {config["run_id"]}


class _Fixed:
    """A loopback server that answers every call with one status and body."""

    def __init__(self, status: int, body: bytes, content_type: str) -> None:
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _reply(self) -> None:
                outer.calls += 1
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _reply

            def log_message(self, *args) -> None:
                pass

        self.calls = 0
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "answer,fragments",
    [
        (None, ["cannot connect to", "look up model"]),
        ((501, b'{"error": {"message": "Not Implemented"}}', "application/json"), ["HTTP 501"]),
        ((200, b"<html>Welcome to nginx</html>", "text/html"), ["not the OpenAI API", "nginx"]),
    ],
    ids=["nothing-listens", "501", "html-200"],
)
def test_a_base_url_that_is_not_the_api_fails_fast(clock, tmp_path, fixture_dir, answer, fragments):
    server = _Fixed(*answer) if answer else None
    url = server.base_url if server else f"http://127.0.0.1:{_free_port()}/v1"
    args = [
        "run",
        "--answer-model",
        "a",
        "--judge-model",
        "j",
        "--dataset",
        str(fixture_dir),
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "--base-url",
        url,
        "--smoke",
    ]
    started = clock.time()
    proc = run_cli(*args, env=env())
    waited = clock.time() - started  # what the command spent waiting to retry
    if server:
        server.close()
    assert_one_line_error(proc, *fragments)
    assert proc.returncode == 5 and waited == 0, (proc.returncode, waited)  # never retried
    assert not (tmp_path / "jobs").exists()  # found out before anything was created


def test_an_unknown_model_is_named_before_anything_is_created(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(unknown_models=["gpt-4o-mni"])
    args = run_args(emu, tmp_path, fixture_dir, "--smoke")
    args[args.index("--answer-model") + 1] = "gpt-4o-mni"
    proc = run_cli(*args, env=env())
    assert_one_line_error(proc, "model 'gpt-4o-mni' is not available", "404")
    assert proc.returncode == 2
    assert not (tmp_path / "jobs").exists() and emu.ledger()["batches"] == []


def test_retried_faults_are_said_once_per_burst(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=0.05, fault_rate=0.3, seed=3)
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--smoke", cap=3), env=env())
    assert proc.returncode == 0, proc.stderr
    said = [x for x in proc.stderr.splitlines() if "from the API" in x]
    assert said and all(re.search(r"\d+ × (429|500).* from the API.*; retrying$", x) for x in said)
    faults = emu.ledger()["faults"]
    injected = faults.get("429", 0) + faults.get("500", 0)
    assert 0 < len(said) < injected  # summed per burst, not one line per fault


def _strays(folder) -> list:
    return [p for p in folder.rglob("*") if p.name.endswith((".tmp", ".part", ".check"))]


def test_a_jobs_folder_that_is_a_file_is_one_line(batch_emulator, tmp_path, fixture_dir):
    (tmp_path / "jobs").write_text("not a folder")
    proc = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--smoke"), env=env())
    assert_one_line_error(proc, str(tmp_path / "jobs"))
    assert proc.returncode == 4 and batch_emulator.ledger()["batches"] == []


def test_a_full_or_read_only_disk_mid_run_loses_nothing(
    batch_emulator_factory, small_disk, fixture_dir
):
    """The disk fills up, then turns read-only, while batches wait to be collected:
    each time one line naming the path, exit 4, nothing half-written; once fixed the
    run resumes and ends complete, paying once."""
    emu = batch_emulator_factory(latency=0.05)
    args = run_args(emu, small_disk.path, fixture_dir, "--limit", "12", "--no-wait", cap=4)
    assert run_cli(*args, env=env()).returncode == 3
    jobs = small_disk.path / "jobs"
    for trouble in ("full", "read-only"):
        emu.flush()  # the batches are done: collecting them needs the disk
        if trouble == "full":
            small_disk.fill()
        else:
            small_disk.read_only(True)
        proc = run_cli(*args, env=env())
        expected = "No space left on device" if trouble == "full" else "Read-only file system"
        assert_one_line_error(proc, str(jobs), expected)
        assert proc.returncode == 4 and _strays(jobs) == []
        if trouble == "full":
            small_disk.free()
        else:
            small_disk.read_only(False)
        for _ in range(50):  # advance until the next trouble, or the end
            proc = run_cli(*args, env=env())
            if proc.returncode != 3 or trouble == "full":
                break
    args.remove("--no-wait")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stderr
    rows = rows_of(jobs / "ans-model" / "results.jsonl")
    assert len(rows) == 12 and all("score" in r for r in rows)
    assert_no_duplicates(emu)


def test_summarize_into_a_read_only_folder_is_one_line(small_disk):
    golden = REPO / "tests" / "fixtures" / "golden" / "full.jsonl"
    results = small_disk.path / "full.jsonl"
    results.write_bytes(golden.read_bytes())
    small_disk.read_only(True)
    proc = run_cli("summarize", str(results))
    assert_one_line_error(proc, str(small_disk.path), "Read-only file system")
    assert proc.returncode == 4


def test_a_batch_whose_created_at_is_not_a_timestamp_is_one_line(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(latency=3600)
    args = run_args(emu, tmp_path, fixture_dir, "--smoke", "--no-wait")
    assert run_cli(*args, env=env()).returncode == 3
    [batch] = emu.ledger()["batches"]
    _http(emu, f"/_emulator/batches/{batch['id']}", {"created_at": "yesterday"})
    proc = run_cli(
        "status", "ans-model", "--refresh", "--jobs-dir", str(tmp_path / "jobs"), env=env()
    )
    assert_one_line_error(proc, f"batch {batch['id']}", "created_at 'yesterday'", "not a timestamp")


@pytest.mark.parametrize("fmt", ["eee", "inspect", "csv"])
def test_exporting_a_run_whose_rows_are_missing_is_one_line(
    fmt, batch_emulator, tmp_path, fixture_dir
):
    """#61.11: a finished run whose results.jsonl is gone exported an Every Eval Ever or
    Inspect record with score NaN, model "None" and 0 samples, exit 0: refused in one
    line naming the file, as the table export already did."""
    assert (
        run_cli(
            *run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2"), env=env()
        ).returncode
        == 0
    )
    rows = tmp_path / "jobs" / "ans-model" / "results.jsonl"
    rows.unlink()
    out = tmp_path / f"out.{fmt}"
    proc = run_cli(
        "export", "ans-model", "--jobs-dir", str(tmp_path / "jobs"), "--format", fmt, "-o", str(out)
    )
    assert_one_line_error(proc, str(rows), "not found")
    assert proc.returncode == 2 and not out.exists()


def test_a_batch_that_vanishes_beside_a_running_one_is_said_once_a_minute(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """#61.9: one of two batches vanishes (404) while the other runs on, so every poll's
    walk answers and the 404 is asked again: it was said at every poll (580 lines in ten
    minutes for a panel judge's, 189 a minute for Azure's). Said once a minute now —
    the written rule bounds it — until the grace runs out and the run stops in one line."""
    emu = batch_emulator_factory(latency=100_000)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "4", "--poll-interval", "5", cap=2)
    assert run_cli(*args, "--no-wait", env=env()).returncode == 3
    first = emu.ledger()["batches"][0]
    _http(emu, f"/_emulator/batches/{first['id']}", {"forget": True})
    start = clock.time()
    proc = run_cli(*args, env=env())
    assert_one_line_error(proc, first["id"], "vanished")
    waited = clock.time() - start
    said = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert said and len(said) <= waited // 60 + 1, (waited, len(said), said[:3])


def test_labels_from_a_device_that_never_ends_and_a_shell_file_that_cannot_be_written(
    batch_emulator, tmp_path, fixture_dir
):
    """#61.9: `calibrate --labels /dev/zero` read for ever (or ended in exit 70), and
    `--install-completion` with a .bashrc it cannot write printed a traceback: one line
    each, naming the file."""
    made = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2"), env=env())
    assert made.returncode == 0, made.stderr
    proc = run_cli(
        "calibrate", "ans-model", "--jobs-dir", str(tmp_path / "jobs"), "--labels", "/dev/zero"
    )
    assert_one_line_error(proc, "/dev/zero", "not a labels file")
    home = tmp_path / "home"
    (home / ".bashrc").mkdir(parents=True)  # root writes anything: a folder it cannot
    proc = run_cli(
        "--install-completion", "bash", env={"HOME": str(home), "SHELL": "/bin/bash"}, real=True
    )
    assert_one_line_error(proc, str(home / ".bashrc"))


@pytest.mark.parametrize("model", ["azure/", "groq/", "together/"])
def test_a_routing_prefix_with_no_model_after_it_is_refused(model, tmp_path, fixture_dir):
    """#61.11: `--answer-model azure/` made a run folder named `azure`: no model is named."""
    jobs = tmp_path / "jobs"
    for flag in ("--answer-model", "--judge-model"):
        models = {"--answer-model": "ans-model", "--judge-model": "judge-model", flag: model}
        proc = run_cli(
            "run",
            *[a for f, m in models.items() for a in (f, m)],
            "--jobs-dir",
            str(jobs),
            "--dataset",
            str(fixture_dir),
            "--dry-run",
            env=env(),
        )
        assert_one_line_error(proc, flag, f"{model!r} names no model")
    assert not jobs.exists()
