"""The emulator's Gemini face, driven through the real google-genai SDK over loopback HTTP.

Expectations are the service's behaviour as provider-batch-apis.md §2 records it,
read back through the SDK's own types (raw JSON only for what the SDK drops).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from google import genai
from google.genai import errors, types


def client(emu, key="gk") -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=emu.url))


def line(i, **config):
    config = {"temperature": 1, "max_output_tokens": 100, **config}
    return {
        "key": f"k{i}",
        "request": {
            "contents": [
                {"role": "user", "parts": [{"text": "system"}]},
                {"role": "user", "parts": [{"text": f"question {i}"}]},
            ],
            "generation_config": config,
        },
    }


def upload(c, tmp_path, lines, name="in.jsonl"):
    path = tmp_path / name
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return c.files.upload(file=path, config=types.UploadFileConfig(mime_type="jsonl"))


def responses(c, job) -> dict:
    data = c.files.download(file=job.dest.file_name)
    return {x["key"]: x for x in map(json.loads, data.splitlines())}


def raw(emu, name) -> dict:
    """The job as the wire carries it (the SDK drops batchStats for this API)."""
    req = urllib.request.Request(f"{emu.url}/v1beta/{name}", headers={"x-goog-api-key": "gk"})
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


def test_a_file_job_runs_and_its_responses_file_reads_back(batch_emulator_factory, clock, tmp_path):
    emu = batch_emulator_factory(latency=3600)
    c = client(emu)
    f = upload(c, tmp_path, [line(i) for i in range(4)])
    assert f.name.startswith("files/") and f.mime_type == "application/jsonl"
    job = c.batches.create(
        model="gemini-3-flash-preview", src=f.name, config={"display_name": "mine"}
    )
    assert job.name.startswith("batches/") and job.display_name == "mine"
    assert job.state == types.JobState.JOB_STATE_PENDING
    assert raw(emu, job.name)["metadata"]["state"] == "BATCH_STATE_PENDING"
    clock.advance(3600 + 1800)  # started, half the lines run
    half = raw(emu, job.name)["metadata"]
    assert half["state"] == "BATCH_STATE_RUNNING"
    stats = half["batchStats"]
    assert all(isinstance(v, str) for v in stats.values())  # int64 as strings
    assert stats["requestCount"] == "4" and 0 < int(stats["successfulRequestCount"]) < 4
    emu.flush()
    done = c.batches.get(name=job.name)
    assert done.state == types.JobState.JOB_STATE_SUCCEEDED and done.end_time is not None
    got = responses(c, done)
    assert set(got) == {f"k{i}" for i in range(4)}
    for i in range(4):
        candidate = got[f"k{i}"]["response"]["candidates"][0]
        assert candidate["content"]["parts"][0]["text"].endswith(f"question {i}")
        assert candidate["finishReason"] == "STOP"
        assert got[f"k{i}"]["response"]["usageMetadata"]["candidatesTokenCount"] > 0


def test_inline_requests_come_back_in_order(batch_emulator):
    c = client(batch_emulator)
    src = [{"contents": [{"role": "user", "parts": [{"text": f"inline {i}"}]}]} for i in range(5)]
    job = c.batches.create(model="gemini-3-flash-preview", src=src)
    batch_emulator.flush()
    done = c.batches.get(name=job.name)
    texts = [r.response.text for r in done.dest.inlined_responses]
    assert [t.rsplit(" ", 1)[1] for t in texts] == ["0", "1", "2", "3", "4"]


def test_lines_the_file_parser_refuses_and_files_it_cannot_read(batch_emulator, tmp_path):
    c = client(batch_emulator)
    camel = line(1)
    camel["request"]["generationConfig"] = camel["request"].pop("generation_config")
    empty = line(2)
    empty["request"]["contents"][0]["parts"][0]["text"] = ""
    bad_level = line(3, thinking_config={"thinking_level": "MAX"})
    f = upload(c, tmp_path, [line(0), camel, empty, bad_level])
    job = c.batches.create(model="m", src=f.name)
    batch_emulator.flush()
    got = responses(c, c.batches.get(name=job.name))
    assert "response" in got["k0"]
    for key in ("k1", "k2", "k3"):
        assert (got[key]["error"]["code"], got[key]["error"]["status"]) == (400, "INVALID_ARGUMENT")
    broken = upload(c, tmp_path, [line(0), "{not json"], name="broken.jsonl")
    job = c.batches.create(model="m", src=broken.name)
    batch_emulator.flush()
    failed = c.batches.get(name=job.name)
    assert failed.state == types.JobState.JOB_STATE_FAILED and failed.dest is None


def test_cancel_and_expiry_keep_what_ran(batch_emulator_factory, clock, tmp_path):
    emu = batch_emulator_factory(latency=5000, completion_window=7200)
    c = client(emu)
    f = upload(c, tmp_path, [line(i) for i in range(6)])
    expiring = c.batches.create(model="m", src=f.name)
    cancelled = c.batches.create(model="m", src=f.name)
    never_started = c.batches.create(model="m", src=f.name)
    c.batches.cancel(name=never_started.name)
    clock.advance(5100)  # started at 5000 s; a line each so far
    c.batches.cancel(name=cancelled.name)
    clock.advance(2200)  # the window closes at 7200 s, half way through
    ended = c.batches.get(name=cancelled.name)
    assert ended.state == types.JobState.JOB_STATE_CANCELLED
    assert 1 <= len(responses(c, ended)) < 6
    with pytest.raises(errors.ClientError):  # an ended job is not cancelled again
        c.batches.cancel(name=cancelled.name)
    expired = c.batches.get(name=expiring.name)
    assert expired.state == types.JobState.JOB_STATE_EXPIRED
    assert 1 <= len(responses(c, expired)) < 6
    nothing = c.batches.get(name=never_started.name)
    assert nothing.state == types.JobState.JOB_STATE_CANCELLED and nothing.dest is None
    c.batches.delete(name=nothing.name)
    with pytest.raises(errors.ClientError) as caught:
        c.batches.get(name=nothing.name)
    assert caught.value.code == 404


def test_list_pages_and_keys_and_models_speak_google(batch_emulator_factory, tmp_path):
    emu = batch_emulator_factory(api_key="gk", unknown_models=["gemini-nope"])
    c = client(emu)
    f = upload(c, tmp_path, [line(0)])
    made = [
        c.batches.create(model="m", src=f.name, config={"display_name": f"j{i}"}).name
        for i in range(5)
    ]
    listed = [j.name for j in c.batches.list(config={"page_size": 2})]
    assert listed == made[::-1]  # newest first, every page
    assert c.models.get(model="gemini-3-flash-preview").name == "models/gemini-3-flash-preview"
    with pytest.raises(errors.ClientError) as caught:
        c.models.get(model="gemini-nope")
    assert caught.value.code == 404
    wrong = client(emu, key="wrong")
    with pytest.raises(errors.ClientError) as caught:
        wrong.batches.get(name=made[0])
    assert caught.value.code == 400 and "API key not valid" in str(caught.value)


def test_the_responder_gets_the_request_with_the_model_and_its_replies_shape_lines(
    batch_emulator_factory, tmp_path
):
    seen = []

    def responder(request):
        seen.append(request)
        text = request["contents"][-1]["parts"][0]["text"]
        if text.endswith("0"):
            return "plain"
        if text.endswith("1"):
            error = {
                "code": 400,
                "message": "temperature is not supported",
                "status": "INVALID_ARGUMENT",
            }
            return {"status_code": 400, "body": {"error": error}}
        parts = [{"text": "thinking...", "thought": True}, {"text": "a"}, {"text": "b"}]
        return {"status_code": 200, "body": {"candidates": [{"content": {"parts": parts}}]}}

    emu = batch_emulator_factory(responder=responder)
    c = client(emu)
    f = upload(c, tmp_path, [line(i) for i in range(3)])
    job = c.batches.create(model="gemini-3-flash-preview", src=f.name)
    emu.flush()
    got = responses(c, c.batches.get(name=job.name))
    assert got["k0"]["response"]["candidates"][0]["content"]["parts"] == [{"text": "plain"}]
    assert got["k1"]["error"]["message"] == "temperature is not supported"
    assert len(got["k2"]["response"]["candidates"][0]["content"]["parts"]) == 3
    assert {r["model"] for r in seen} == {"models/gemini-3-flash-preview"}
    assert all(r["generation_config"]["temperature"] == 1 for r in seen)


def test_the_known_bad_days_succeeded_before_file_and_stuck_pending(
    batch_emulator_factory, clock, tmp_path
):
    emu = batch_emulator_factory(anomalies={"succeeded-before-file": 1.0}, paused=True)
    c = client(emu)
    f = upload(c, tmp_path, [line(0)])
    job = c.batches.create(model="m", src=f.name)
    emu.flush()
    early = c.batches.get(name=job.name)
    assert early.state == types.JobState.JOB_STATE_SUCCEEDED and early.dest is None
    clock.advance(10)
    emu.tick()
    assert c.batches.get(name=job.name).dest.file_name
    stuck_emu = batch_emulator_factory(anomalies={"stuck-pending": 1.0})
    c = client(stuck_emu)
    f = upload(c, tmp_path, [line(0)])
    job = c.batches.create(model="m", src=f.name)
    clock.advance(3600)
    assert c.batches.get(name=job.name).state == types.JobState.JOB_STATE_PENDING
    c.batches.cancel(name=job.name)
    assert c.batches.get(name=job.name).state == types.JobState.JOB_STATE_CANCELLED


def test_faults_answer_429_500_and_503_in_googles_envelope(batch_emulator_factory):
    emu = batch_emulator_factory(fault_rate=1.0, seed=4)
    c = client(emu)
    seen = set()
    for _ in range(30):
        try:
            c.batches.get(name="batches/x")
        except errors.APIError as exc:
            seen.add((exc.code, exc.status))
    assert seen == {(429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"), (503, "UNAVAILABLE")}


def test_files_list_the_documented_download_url_and_a_synchronous_generate(
    batch_emulator, tmp_path
):
    c = client(batch_emulator)
    made = [upload(c, tmp_path, [line(i)], name=f"in{i}.jsonl").name for i in range(3)]
    assert {f.name for f in c.files.list(config={"page_size": 2})} == set(made)
    job = c.batches.create(model="gemini-3-flash-preview", src=made[0])
    batch_emulator.flush()
    name = c.batches.get(name=job.name).dest.file_name
    got = c.files.get(name=name)
    assert got.download_uri == f"{batch_emulator.url}/download/v1beta/{name}:download?alt=media"
    req = urllib.request.Request(got.download_uri, headers={"x-goog-api-key": "gk"})
    with urllib.request.urlopen(req) as resp:  # the documented REST download
        assert json.loads(resp.read().splitlines()[0])["key"] == "k0"
    reply = c.models.generate_content(model="gemini-3-flash-preview", contents="hello there")
    assert reply.text == "Simulated answer (gemini-3-flash-preview): hello there"
    with pytest.raises(errors.ClientError) as caught:
        c.models.generate_content(model="gemini-9-nope", contents="x")
    assert caught.value.code == 404


def test_unknown_paths_and_models_answer_in_googles_envelope(batch_emulator, tmp_path):
    req = urllib.request.Request(
        f"{batch_emulator.url}/v1beta/batches:nothing", headers={"x-goog-api-key": "gk"}
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req)
    body = json.loads(caught.value.read())
    assert caught.value.code == 404 and body["error"]["status"] == "NOT_FOUND"
    c = client(batch_emulator)
    f = upload(c, tmp_path, [line(0)])
    with pytest.raises(errors.ClientError) as caught:
        c.batches.create(model="gemini-3-flash-previw", src=f.name)  # a typo: not queued
    assert caught.value.code == 404 and caught.value.status == "NOT_FOUND"


def test_replies_under_another_lines_key_the_known_bad_day(batch_emulator_factory, tmp_path):
    """python-genai#1909: in big batches, replies came back under the wrong key."""
    emu = batch_emulator_factory(anomalies={"wrong-keys": 1.0})
    c = client(emu)
    f = upload(c, tmp_path, [line(i) for i in range(4)])
    job = c.batches.create(model="gemini-3-flash-preview", src=f.name)
    emu.flush()
    got = responses(c, c.batches.get(name=job.name))
    texts = {
        k: r["response"]["candidates"][0]["content"]["parts"][0]["text"] for k, r in got.items()
    }
    assert sorted(texts) == ["k0", "k1", "k2", "k3"]
    assert any(not text.endswith(f"question {k[1:]}") for k, text in texts.items())
