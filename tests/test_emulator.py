"""The emulator's OpenAI face, driven through the real openai SDK over loopback HTTP, on the
test's fake clock: hours of batch time pass in milliseconds, in the order the test says."""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import openai
import pytest
from openai import OpenAI
from support.cli import read_lines, run_cli

from batchbench.emulator import SystemClock

TERMINAL = {"completed", "failed", "expired", "cancelled"}
EP = "/v1/chat/completions"


def client(emu, **kw) -> OpenAI:
    kw.setdefault("max_retries", 0)
    return OpenAI(api_key=kw.pop("api_key", "test-key"), base_url=emu.base_url, **kw)


def line(i, model="m", **body):
    body = {"model": model, "messages": [{"role": "user", "content": f"question {i}"}], **body}
    return {"custom_id": f"req-{i}", "method": "POST", "url": EP, "body": body}


def upload(c, lines, name="in.jsonl"):
    data = "".join(json.dumps(x) + "\n" if isinstance(x, dict) else x + "\n" for x in lines)
    return c.files.create(file=(name, data.encode()), purpose="batch")


def submit(c, lines, **kw):
    f = upload(c, lines)
    return c.batches.create(input_file_id=f.id, endpoint=EP, completion_window="24h", **kw)


def wait(c, batch_id, clock=None, timeout=20.0):
    """Poll until the batch ends: on the test's clock (moved a second a poll), or, for an
    emulator in another process, on real time."""
    deadline = time.monotonic() + timeout
    while True:
        b = c.batches.retrieve(batch_id)
        if b.status in TERMINAL or time.monotonic() > deadline:
            return b
        if clock is not None:
            clock.advance(1.0)
        else:
            time.sleep(0.01)


def finish(emu, c, batch_id):
    """The batch at its end, by the emulator's own clock (no waiting on ours)."""
    emu.flush()
    return c.batches.retrieve(batch_id)


def created_at(emu, batch_id) -> float:
    return emu.face("openai").book.batches[batch_id].created


def records(c, file_id):
    if file_id is None:
        return []
    return [json.loads(x) for x in c.files.content(file_id).text.splitlines()]


def http(emu, path, method="GET", data=None, headers=None):
    req = urllib.request.Request(emu.url + path, method=method, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


# files ----------------------------------------------------------------------


def test_file_routes(batch_emulator):
    c = client(batch_emulator)
    f = upload(c, [line(1)])
    assert f.purpose == "batch" and f.bytes > 0 and f.expires_at - f.created_at == 2_592_000
    assert c.files.retrieve(f.id).filename == "in.jsonl"
    g = c.files.create(
        file=("b.jsonl", b"{}\n"),
        purpose="batch",
        expires_after={"anchor": "created_at", "seconds": 3600},
    )
    assert g.expires_at - g.created_at == 3600
    listed = c.files.list(purpose="batch")
    assert [x.id for x in listed.data] == [g.id, f.id]  # newest first by default
    assert [x.id for x in c.files.list(order="asc").data] == [f.id, g.id]
    assert json.loads(c.files.content(f.id).text) == line(1)
    assert c.files.delete(f.id).deleted is True
    with pytest.raises(openai.NotFoundError):
        c.files.retrieve(f.id)


def test_uploads_are_not_judged_by_their_name(batch_emulator):
    """Clients that upload raw bytes name the part "upload": the content is what counts,
    and bad lines fail the batch later, as the service does (batch-api.md §2)."""
    c = client(batch_emulator)
    data = "".join(json.dumps(line(i)) + "\n" for i in range(3)).encode()
    f = c.files.create(file=("upload", data), purpose="batch")
    b = c.batches.create(input_file_id=f.id, endpoint=EP, completion_window="24h")
    assert finish(batch_emulator, c, b.id).status == "completed"
    bad = c.files.create(file=("upload", b"a,b\n"), purpose="batch")
    b = c.batches.create(input_file_id=bad.id, endpoint=EP, completion_window="24h")
    done = finish(batch_emulator, c, b.id)
    assert done.status == "failed" and done.errors.data[0].code == "invalid_json_line"
    with pytest.raises(openai.BadRequestError):
        c.files.create(file=("x.jsonl", b"{}"), purpose="nonsense")


# lifecycle --------------------------------------------------------------------


def test_lifecycle_statuses_timestamps_and_counts(batch_emulator_factory, clock):
    emu = batch_emulator_factory(latency=1.0)
    c = client(emu)
    b = submit(c, [line(i) for i in range(40)], metadata={"run": "r1"})
    assert b.status == "validating" and b.in_progress_at is None
    assert b.request_counts.total == 0 and b.expires_at - b.created_at == 86400
    t0 = created_at(emu, b.id)
    seen = []
    # Validation takes a latency; line i then runs at start + latency * i / total (the
    # first at once); finalizing takes another latency.
    for dt in (0.5, 1.0, 1.5, 2.0, 3.0):
        clock.set(t0 + dt)
        now = c.batches.retrieve(b.id)
        seen.append((now.status, now.request_counts.completed))
    assert seen == [
        ("validating", 0),
        ("in_progress", 1),
        ("in_progress", 21),
        ("finalizing", 40),
        ("completed", 40),
    ]
    done = c.batches.retrieve(b.id)
    assert done.in_progress_at and done.finalizing_at and done.completed_at
    assert done.request_counts.total == 40 and done.request_counts.completed == 40
    assert done.model == "m" and done.metadata == {"run": "r1"}
    assert done.usage.input_tokens > 0 and done.usage.output_tokens > 0
    assert done.error_file_id is None
    out = records(c, done.output_file_id)
    assert sorted(r["custom_id"] for r in out) == sorted(f"req-{i}" for i in range(40))
    assert [r["custom_id"] for r in out] != [f"req-{i}" for i in range(40)]  # shuffled
    for r in out:
        assert r["error"] is None and r["response"]["status_code"] == 200
        assert r["response"]["body"]["usage"]["total_tokens"] > 0


def test_lines_execute_progressively(batch_emulator_factory, clock):
    emu = batch_emulator_factory(latency=1.0)
    c = client(emu)
    b = submit(c, [line(i) for i in range(200)])
    t0 = created_at(emu, b.id)
    counts = []
    for dt in (1.0, 1.25, 1.5, 1.75, 2.0):
        clock.set(t0 + dt)
        counts.append(c.batches.retrieve(b.id).request_counts.completed)
    assert counts == [1, 51, 101, 151, 200]
    assert len(emu.ledger()["executions"]) == 200


def test_create_checks(batch_emulator):
    c = client(batch_emulator)
    f = upload(c, [line(1)])
    bad = [
        {"endpoint": "/v1/nope"},
        {"completion_window": "48h"},
        {"metadata": {f"k{i}": "v" for i in range(17)}},
        {"metadata": {"k": "v" * 513}},
        {"metadata": {"k" * 65: "v"}},
        {"input_file_id": "file-missing"},
    ]
    for change in bad:
        args = {"input_file_id": f.id, "endpoint": EP, "completion_window": "24h", **change}
        with pytest.raises(openai.BadRequestError):
            c.batches.create(**args)
    assert batch_emulator.ledger()["batches"] == []


def test_list_pagination_newest_first(batch_emulator):
    c = client(batch_emulator)
    ids = [submit(c, [line(i)]).id for i in range(5)]
    page = c.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2]
    assert page.has_more is True and page.first_id == ids[4] and page.last_id == ids[3]
    assert [b.id for b in c.batches.list(limit=2)] == ids[::-1]  # SDK auto-pagination
    rest = c.batches.list(limit=100, after=ids[2])
    assert [b.id for b in rest.data] == ids[1::-1] and rest.has_more is False


def test_cancel_keeps_finished_lines(batch_emulator_factory, clock):
    emu = batch_emulator_factory(latency=1.0)
    c = client(emu)
    b = submit(c, [line(i) for i in range(100)])
    t0 = created_at(emu, b.id)
    clock.set(t0 + 1.0)  # validated: running from now on
    clock.set(t0 + 1.0 + 0.095)  # lines 0..9 have run
    assert c.batches.retrieve(b.id).request_counts.completed == 10
    cancelling = c.batches.cancel(b.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at
    clock.advance(1.0)  # cancelling takes a latency; nothing more runs
    done = c.batches.retrieve(b.id)
    assert done.status == "cancelled" and done.cancelled_at
    ok = records(c, done.output_file_id)
    errors = records(c, done.error_file_id)
    assert len(ok) == 10 and len(errors) == 90
    assert {e["error"]["code"] for e in errors} == {"batch_cancelled"}
    assert all(e["response"] is None for e in errors)
    executed = {x["custom_id"] for x in emu.ledger()["executions"]}
    assert executed == {r["custom_id"] for r in ok}
    with pytest.raises(openai.ConflictError) as err:
        c.batches.cancel(b.id)
    assert "Cannot cancel a batch with status 'cancelled'" in err.value.message


def test_expiry_keeps_finished_lines(batch_emulator_factory, clock):
    emu = batch_emulator_factory(latency=0.2, completion_window=0.35)
    c = client(emu)
    b = submit(c, [line(i) for i in range(50)])
    t0 = created_at(emu, b.id)
    clock.set(t0 + 0.2)  # validated
    clock.set(t0 + 0.5)  # past the window: lines up to t0 + 0.35 ran (0.15 of 0.2 s)
    done = c.batches.retrieve(b.id)
    assert done.status == "expired" and done.expired_at
    ok = records(c, done.output_file_id)
    errors = records(c, done.error_file_id)
    assert len(ok) == int(50 * 0.15 / 0.2) + 1 and len(ok) + len(errors) == 50
    assert {e["error"]["code"] for e in errors} == {"batch_expired"}
    with pytest.raises(openai.ConflictError):
        c.batches.cancel(b.id)


# validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    "lines,code,line_no",
    [
        ([line(1), "{not json"], "invalid_json_line", 2),
        (
            [line(1), {"custom_id": "x", "method": "POST", "url": EP}],
            "missing_required_parameter",
            2,
        ),
        ([line(1), line(2), line(1)], "duplicate_custom_id", 3),
        ([line(1), dict(line(2), url="/v1/embeddings")], "invalid_url", 2),
        ([line(1), line(2, model="other")], "mismatched_model", 2),
        ([line(1, stream=True)], "streaming_unsupported", 1),
        ([], "empty_file", None),
    ],
)
def test_validation_failures(batch_emulator, lines, code, line_no):
    c = client(batch_emulator)
    done = finish(batch_emulator, c, submit(c, lines).id)
    assert done.status == "failed" and done.failed_at
    assert len(done.errors.data) == 1
    assert done.errors.data[0].code == code and done.errors.data[0].line == line_no
    assert done.output_file_id is None and done.error_file_id is None
    assert done.request_counts.total == 0
    assert batch_emulator.ledger()["executions"] == []


def test_line_and_size_limits(batch_emulator):
    c = client(batch_emulator)
    many = [line(i) for i in range(50_001)]
    done = finish(batch_emulator, c, submit(c, many).id)
    assert done.status == "failed" and done.errors.data[0].code == "too_many_tasks"
    http(
        batch_emulator, "/_emulator/config", "POST", json.dumps({"max_batch_bytes": 1000}).encode()
    )
    # A batch file over the limit is refused at upload, as the service refuses it.
    with pytest.raises(openai.BadRequestError) as refused:
        submit(c, [line(i) for i in range(30)])
    assert refused.value.status_code == 400 and "File is too large." in str(refused.value)


@pytest.mark.soak
def test_fifty_thousand_lines_complete(batch_emulator_factory):
    emu = batch_emulator_factory(latency=0.5)
    c = client(emu)
    done = finish(emu, c, submit(c, [line(i) for i in range(50_000)]).id)
    assert done.status == "completed" and done.request_counts.completed == 50_000
    assert len(emu.ledger()["executions"]) == 50_000


def test_enqueued_token_limit(batch_emulator_factory, clock):
    emu = batch_emulator_factory(latency=2.0, enqueued_token_limit=200)
    c = client(emu)
    first = submit(c, [line(i) for i in range(10)])  # ~10 tokens a line (chat format: 7 + text)
    clock.set(created_at(emu, first.id) + 2.0)  # in progress: its tokens are enqueued
    assert c.batches.retrieve(first.id).status == "in_progress"
    second = submit(c, [line(i) for i in range(20)])
    other_model = submit(c, [line(i, model="other") for i in range(10)])
    clock.set(created_at(emu, other_model.id) + 2.0)
    assert c.batches.retrieve(second.id).status == "failed"  # validated while first ran
    failed = finish(emu, c, second.id)
    assert failed.status == "failed"
    err = failed.errors.data[0]
    assert err.code == "token_limit_exceeded" and err.line is None
    assert "Enqueued token limit reached for m" in err.message
    assert finish(emu, c, other_model.id).status == "completed"
    assert finish(emu, c, first.id).status == "completed"


# the simulated model and responders ---------------------------------------------


def test_default_judge_follows_the_documented_rule(batch_emulator):
    c = client(batch_emulator)
    user = (
        "CLINICAL PROMPT:\nQ\n\nANSWER:\nsome answer\n\nRUBRIC ITEMS:\n"
        "[abc_0] points=+2 :: x\n[abc_1] points=-1 :: y\n[abc_2] points=+1 :: z"
    )
    body = {
        "model": "j",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": user}],
        "response_format": {"type": "json_object"},
    }
    done = finish(
        batch_emulator,
        c,
        submit(c, [{"custom_id": "j1", "method": "POST", "url": EP, "body": body}]).id,
    )
    [rec] = records(c, done.output_file_id)
    reply = json.loads(rec["response"]["body"]["choices"][0]["message"]["content"])
    expected = [
        {"item_id": i, "matched": hashlib.md5(f"{i}|some answer".encode()).hexdigest()[0] < "8"}
        for i in ("abc_0", "abc_1", "abc_2")
    ]
    assert reply == {"decisions": expected}


def test_responder_is_called_once_per_executed_line(batch_emulator_factory):
    calls: list[str] = []

    def responder(body):
        text = body["messages"][-1]["content"]
        calls.append(text)
        n = int(text.split()[-1])
        if n % 4 == 1:
            return {
                "status_code": 400,
                "body": {
                    "error": {
                        "message": "Unsupported value: 'temperature' does not support 0.",
                        "type": "invalid_request_error",
                        "param": "temperature",
                        "code": "unsupported_value",
                    }
                },
            }
        if n % 4 == 2:
            return {"error": {"code": "request_timeout", "message": "timed out"}}
        if n % 4 == 3:
            return {"status_code": 500, "body": {"error": {"message": "boom"}}}
        return f"answer {n}"

    emu = batch_emulator_factory(responder=responder)
    c = client(emu)
    done = finish(emu, c, submit(c, [line(i) for i in range(20)]).id)
    assert sorted(calls) == sorted(f"question {i}" for i in range(20))
    ok = records(c, done.output_file_id)
    errors = {r["custom_id"]: r for r in records(c, done.error_file_id)}
    assert sorted(r["custom_id"] for r in ok) == sorted(f"req-{i}" for i in range(0, 20, 4))
    assert ok[0]["response"]["body"]["choices"][0]["message"]["content"].startswith("answer")
    assert errors["req-1"]["response"]["status_code"] == 400 and errors["req-1"]["error"] is None
    assert errors["req-2"]["response"] is None
    assert errors["req-2"]["error"]["code"] == "request_timeout"
    assert errors["req-3"]["response"]["status_code"] == 500
    assert done.request_counts.completed == 5 and done.request_counts.failed == 15


def test_all_failed_batch_has_null_output_file(batch_emulator_factory):
    emu = batch_emulator_factory(responder=lambda body: {"status_code": 400, "body": {}})
    c = client(emu)
    done = finish(emu, c, submit(c, [line(i) for i in range(3)]).id)
    assert done.status == "completed"
    assert done.output_file_id is None and done.error_file_id is not None


# auth, errors, faults -----------------------------------------------------------


def test_auth_and_unknown_ids(batch_emulator_factory):
    emu = batch_emulator_factory(api_key="right")
    status, body = http(emu, "/v1/batches")
    assert status == 401 and set(body["error"]) == {"message", "type", "param", "code"}
    with pytest.raises(openai.AuthenticationError):
        client(emu, api_key="wrong").batches.list()
    c = client(emu, api_key="right")
    with pytest.raises(openai.NotFoundError) as err:
        c.batches.retrieve("batch_nope")
    assert err.value.body["message"] == "No batch found with id 'batch_nope'."
    status, _ = http(emu, "/v1/nothing", headers={"Authorization": "Bearer right"})
    assert status == 404


def test_faults_are_seeded_and_429s_say_when_to_retry(batch_emulator_factory):
    def outcomes(seed):
        emu = batch_emulator_factory(fault_rate=0.5, seed=seed)
        c = client(emu)
        seen = []
        for _ in range(30):
            try:
                c.batches.list()
                seen.append(200)
            except openai.RateLimitError as err:
                assert err.response.headers.get("retry-after") == "0"
                seen.append(429)
            except openai.InternalServerError:
                seen.append(500)
        return seen

    first = outcomes(5)
    assert first == outcomes(5)
    assert {200, 429, 500} <= set(first) and first != outcomes(6)


def test_faults_do_not_move_with_polling(batch_emulator_factory):
    """A fault is decided by the call's route and its count on that route: however often
    a client polls between them, its uploads and creates meet the same faults."""

    def creates(seed, polls):
        emu = batch_emulator_factory(fault_rate=0.4, seed=seed)
        c = client(emu)
        seen = []
        for i in range(12):
            for _ in range(polls):
                with contextlib.suppress(openai.APIStatusError):
                    c.batches.list()
            try:
                c.files.create(file=(f"f{i}.jsonl", b"{}\n"), purpose="batch")
                seen.append(200)
            except openai.APIStatusError as err:
                seen.append(err.status_code)
        return seen

    assert creates(9, 0) == creates(9, 1) == creates(9, 5)
    assert {200, 429} <= set(creates(9, 0))


def test_unknown_models_are_refused_as_the_service_refuses_them(batch_emulator):
    """A typo is not "in progress" forever: the models look-up is a 404, and a batch of
    an unknown model fails validation with model_not_found."""
    c = client(batch_emulator)
    assert c.models.retrieve("gpt-4o-mini").created == 1721172741  # a real creation date
    assert c.models.retrieve("gpt-4o-2024-08-06").id == "gpt-4o-2024-08-06"  # a snapshot
    with pytest.raises(openai.NotFoundError) as err:
        c.models.retrieve("gpt-5.4-minni")
    assert err.value.body["code"] == "model_not_found"
    done = finish(batch_emulator, c, submit(c, [line(1, model="gpt-5.4-minni")]).id)
    assert done.status == "failed" and done.errors.data[0].code == "model_not_found"
    assert batch_emulator.ledger()["executions"] == []


def test_truncated_download(batch_emulator_factory):
    emu = batch_emulator_factory(truncate_rate=1.0)
    c = client(emu)
    f = upload(c, [line(i) for i in range(50)])
    with pytest.raises(openai.APIConnectionError):
        c.files.content(f.id).read()


def test_slow_responses(batch_emulator_factory, clock):
    t0 = clock.time()
    fake = batch_emulator_factory(slow_rate=1.0, slow_seconds=30)
    client(fake).batches.list()
    assert clock.time() - t0 == 30  # a slow reply waits on the emulator's clock
    emu = batch_emulator_factory(slow_rate=1.0, slow_seconds=0.3, clock=SystemClock())
    c = client(emu)
    start = time.monotonic()
    c.batches.list()
    assert time.monotonic() - start >= 0.3
    with pytest.raises(openai.APITimeoutError):
        client(emu, timeout=0.1).batches.list()


def test_ledger_and_flush(batch_emulator_factory):
    emu = batch_emulator_factory(latency=3600)
    c = client(emu)
    b = submit(c, [line(i) for i in range(3)], metadata={"batchbench_run": "x"})
    status, ledger = http(emu, "/_emulator/ledger")
    assert status == 200
    assert ledger["batches"] == [
        {
            "id": b.id,
            "provider": "openai",
            "status": "validating",
            "metadata": {"batchbench_run": "x"},
            "input_file_id": b.input_file_id,
            "created_at": b.created_at,
            "custom_ids": [],  # not yet validated
        }
    ]
    assert http(emu, "/_emulator/flush", "POST", b"")[0] == 200
    assert c.batches.retrieve(b.id).status == "completed"
    _, ledger = http(emu, "/_emulator/ledger")
    assert sorted(e["custom_id"] for e in ledger["executions"]) == ["req-0", "req-1", "req-2"]


def test_cli_emulator_with_file_responder(tmp_path):
    """The command in its own process, on real time."""
    responder = tmp_path / "resp.py"
    responder.write_text("def reply(body):\n    return 'scripted ' + body['model']\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "batchbench",
            "emulator",
            "--port",
            "0",
            "--latency",
            "0.05",
            "--responder",
            f"{responder}:reply",
            "--model",
            "m",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        first, second = read_lines(proc.stdout, 2)
        url = first.strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:")
        assert second.startswith("Point a client at it")
        base_url = f"{url}/v1"
        wanted = {f"export AZURE_OPENAI_ENDPOINT={url}", f"export OPENAI_BASE_URL={base_url}"}
        # and the keys the SDKs read (a newcomer pastes the lines and has a full environment)
        keys = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "FIREWORKS_API_KEY"}
        last = "/_emulator/ledger"  # the last line it prints: where its ledger is (#63.11)
        banner = [x.strip() for x in read_lines(proc.stdout, 60, until=lambda x: last in x)]
        variables, said = banner[:-1], banner[-1]
        printed = dict(x.removeprefix("export ").partition("=")[::2] for x in variables)
        assert wanted <= set(variables) and keys <= set(printed), variables
        c = OpenAI(
            api_key=printed["OPENAI_API_KEY"], base_url=printed["OPENAI_BASE_URL"], max_retries=0
        )
        f = upload(c, [line(1)])
        b = c.batches.create(input_file_id=f.id, endpoint=EP, completion_window="24h")
        done = wait(c, b.id)
        [rec] = records(c, done.output_file_id)
        assert rec["response"]["body"]["choices"][0]["message"]["content"] == "scripted m"
        # the banner's last line, a shell comment, says where the ledger is
        assert said.startswith("# ") and said.split()[-1] == f"{url}/_emulator/ledger"
        import urllib.request

        with urllib.request.urlopen(said.split()[-1]) as reply:
            ledger = json.loads(reply.read())
        assert [e["custom_id"] for e in ledger["executions"]] == ["req-1"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_cli_emulator_help_documents_every_option():
    out = run_cli("emulator", "--help", env={"COLUMNS": "200"}).stdout
    for option in (
        "--host",
        "--port",
        "--latency",
        "--completion-window",
        "--responder",
        "--fault-rate",
        "--seed",
        "--enqueued-token-limit",
        "--truncate-rate",
        "--slow-rate",
        "--api-key",
        "--model",
        "--judge-noise",
        "--anomaly",
    ):
        assert option in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--port", "99999"], "--port must be between 0 and 65535"),
        (["--responder", "nofile.py:f"], "responder file not found"),
        (["--latency", "-1"], "--latency must be a finite number of seconds"),
        (["--latency", "nan"], "--latency must be a finite number of seconds"),
        (["--fault-rate", "nan"], "--fault-rate must be between 0 and 1"),
        (["--judge-noise", "2"], "--judge-noise must be between 0 and 1"),
    ],
)
def test_cli_emulator_bad_option(args, message):
    proc = run_cli("emulator", *args)
    assert proc.returncode == 2 and message in proc.stderr
    assert "Traceback" not in proc.stderr


# fidelity: each endpoint's shape, refusals, limits ------------------------------------


def _run(c, clock, endpoint, bodies):
    lines = [
        {"custom_id": f"r{i}", "method": "POST", "url": endpoint, "body": body}
        for i, body in enumerate(bodies)
    ]
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    f = c.files.create(file=("in.jsonl", data), purpose="batch")
    b = c.batches.create(input_file_id=f.id, endpoint=endpoint, completion_window="24h")
    done = wait(c, b.id, clock)
    out = [json.loads(x) for x in c.files.content(done.output_file_id).text.splitlines()]
    return done, {r["custom_id"]: r["response"]["body"] for r in out}


def test_each_endpoint_gets_its_own_reply_shape(batch_emulator, clock):
    from openai.types import Completion, CreateEmbeddingResponse, ModerationCreateResponse
    from openai.types.responses import Response

    c = client(batch_emulator)
    done, bodies = _run(c, clock, "/v1/responses", [{"model": "m", "input": "What is 2+2?"}])
    reply = Response.model_validate(bodies["r0"])
    assert reply.object == "response" and reply.output_text.endswith("What is 2+2?")
    assert reply.usage is not None and reply.usage.input_tokens > 0
    assert done.usage is not None and done.usage.input_tokens == reply.usage.input_tokens
    done, bodies = _run(c, clock, "/v1/embeddings", [{"model": "e", "input": ["a", "b", "c"]}])
    embeddings = CreateEmbeddingResponse.model_validate(bodies["r0"])
    assert [d.index for d in embeddings.data] == [0, 1, 2] and embeddings.data[0].embedding
    done, bodies = _run(c, clock, "/v1/completions", [{"model": "m", "prompt": "Say hi"}])
    completion = Completion.model_validate(bodies["r0"])
    assert completion.object == "text_completion" and "Say hi" in completion.choices[0].text
    done, bodies = _run(c, clock, "/v1/moderations", [{"model": "mod", "input": ["x", "y"]}])
    assert len(ModerationCreateResponse.model_validate(bodies["r0"]).results) == 2


@pytest.mark.parametrize(
    "body,param",
    [
        ({"model": "m"}, "messages"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 5},
            "temperature",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "colour": "red"},
            "colour",
        ),
    ],
)
def test_a_body_its_endpoint_refuses_is_a_400_row(batch_emulator, body, param):
    c = client(batch_emulator)
    f = c.files.create(
        file=(
            "in.jsonl",
            (
                json.dumps({"custom_id": "r0", "method": "POST", "url": EP, "body": body}) + "\n"
            ).encode(),
        ),
        purpose="batch",
    )
    done = finish(
        batch_emulator,
        c,
        c.batches.create(input_file_id=f.id, endpoint=EP, completion_window="24h").id,
    )
    assert done.status == "completed" and done.output_file_id is None
    [row] = [json.loads(x) for x in c.files.content(done.error_file_id).text.splitlines()]
    assert row["error"] is None and row["response"]["status_code"] == 400
    error = row["response"]["body"]["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["param"] == param


def test_output_expires_after_is_checked_and_applied(batch_emulator):
    c = client(batch_emulator)
    f = upload(c, [line(0)])
    for bad in ({"anchor": "created_at", "seconds": 60}, {"anchor": "now", "seconds": 7200}):
        with pytest.raises(openai.BadRequestError):
            c.batches.create(
                input_file_id=f.id, endpoint=EP, completion_window="24h", output_expires_after=bad
            )
    b = c.batches.create(
        input_file_id=f.id,
        endpoint=EP,
        completion_window="24h",
        output_expires_after={"anchor": "created_at", "seconds": 7200},
    )
    out = c.files.retrieve(finish(batch_emulator, c, b.id).output_file_id)
    assert out.expires_at - out.created_at == 7200


def test_other_methods_get_the_json_error_envelope(batch_emulator):
    for method in ("PUT", "PATCH", "DELETE"):
        status, body = http(batch_emulator, "/v1/batches", method, b"{}")
        assert status == 405 and body["error"]["code"] == "method_not_allowed"


def test_the_embeddings_input_limit(batch_emulator):
    c = client(batch_emulator)
    bodies = [{"model": "e", "input": ["x"] * 25_001}, {"model": "e", "input": ["y"] * 25_000}]
    lines = [
        {"custom_id": f"r{i}", "method": "POST", "url": "/v1/embeddings", "body": b}
        for i, b in enumerate(bodies)
    ]
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    f = c.files.create(file=("in.jsonl", data), purpose="batch")
    b = c.batches.create(input_file_id=f.id, endpoint="/v1/embeddings", completion_window="24h")
    done = finish(batch_emulator, c, b.id)
    assert done.status == "failed" and done.errors.data[0].code == "too_many_inputs"


def test_faults_and_bad_days_aimed_at_nothing_are_refused(batch_emulator):
    """#45.12: a fault aimed at a face the emulator does not have, or a bad day it does not
    have, injected nothing while the test stayed green: each is refused, naming the ones
    there are."""
    from batchbench.emulator import Emulator

    with pytest.raises(ValueError, match="no face 'vertex-gemini'.*vertex"):
        batch_emulator.lose_creates("vertex-gemini")
    with pytest.raises(ValueError, match="no face 'gemeni'"):
        batch_emulator.refuse_creates("gemeni")
    with pytest.raises(ValueError, match="unknown anomaly 'misfiling'"):
        Emulator(anomalies={"misfiling": 1.0})
    request = urllib.request.Request(
        f"{batch_emulator.url}/_emulator/config",
        data=json.dumps({"anomalies": {"wrong-key": 1.0}}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    assert refused.value.code == 400 and b"unknown anomaly" in refused.value.read()
    batch_emulator.lose_creates("vertex")  # the face that serves both Vertex records
    assert batch_emulator.hub.faults.lost_creates["vertex"] == 1


def test_the_tokenizer_counts_a_text_of_any_length(batch_emulator):
    """#61.11: bpe-openai refuses very long input ("Input too long to encode safely"): a
    ~10 MB judge file raised in the emulator, and every later request failed. A long
    text is counted in pieces cut at spaces, which no o200k token spans: the same count
    as its paragraphs counted one by one. The emulator answers on after such a call."""
    from batchbench.emulator.model import estimate_tokens, tokenizer_name

    paragraph = " The patient takes warfarin 5 mg daily; INR 3.2 today, no bleeding."
    big = paragraph * 150_000  # ~10 MB
    if tokenizer_name().startswith("o200k"):
        assert estimate_tokens(big) == 150_000 * estimate_tokens(paragraph)
    else:  # the estimate: one token per four characters
        assert estimate_tokens(big) == -(-len(big) // 4)
    assert estimate_tokens("x" * 3_000_000) > 0  # no space to cut at: estimated, no error
    client = openai.OpenAI(api_key="k", base_url=batch_emulator.base_url, max_retries=0)
    assert client.models.list().data  # still answering


def test_a_chat_request_is_billed_as_openais_cookbook_counts_it(batch_emulator):
    """#62.4: the emulator counted a chat request's text only ("What is 1+1?": 7 tokens).
    OpenAI's cookbook ("How to count tokens with tiktoken", num_tokens_from_messages)
    counts 3 tokens a message, each of its values' tokens, 1 for a name, and 3 priming
    the reply: 14 for that question alone. Held by the rule written out here, on the
    real o200k tokenizer, through the SDK's own batch."""
    bpe = pytest.importorskip("bpe_openai")
    enc = bpe.get_encoding("o200k_base")

    def cookbook(messages: list[dict]) -> int:  # the documented rule, plainly
        n = 3
        for message in messages:
            n += 3
            for key, value in message.items():
                n += len(enc.encode_ordinary(value)) + (1 if key == "name" else 0)
        return n

    asked = [
        [{"role": "user", "content": "What is 1+1?"}],
        [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Dose of amoxicillin for otitis?", "name": "dr_a"},
        ],
    ]
    assert cookbook(asked[0]) == 14
    c = client(batch_emulator)
    lines = [line(i) for i in range(len(asked))]
    for body_line, messages in zip(lines, asked):
        body_line["body"]["messages"] = messages
    done = finish(batch_emulator, c, submit(c, lines).id)
    billed = {
        r["custom_id"]: r["response"]["body"]["usage"]["prompt_tokens"]
        for r in records(c, done.output_file_id)
    }
    assert billed == {f"req-{i}": cookbook(m) for i, m in enumerate(asked)}
    said = batch_emulator.ledger()["tokenizers"]  # whose count each face's is, said
    assert "OpenAI's own" in said["openai"] and "stand-in" in said["anthropic"]
    assert set(said) == {face.name for face in batch_emulator.hub.faces}
