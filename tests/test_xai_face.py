"""The emulator's xAI face against a witness it did not write: the official xai-sdk's
own batch messages (its protobuf types, whose JSON xAI's REST API answers). A batch, a
page of the batch list and a cancelled batch, as the face answers them over HTTP, parse
as xai-sdk's ``Batch`` and ``ListBatchesResponse`` with no field left over; and the
OpenAI SDK pointed at the face uploads a file as xAI's docs show."""

from __future__ import annotations

import io
import json

import httpx
import openai
import pytest

batch_pb2 = pytest.importorskip("xai_sdk.proto.v6.batch_pb2")
json_format = pytest.importorskip("google.protobuf.json_format")

KEY = "xai-test-key"


def _line(i: int) -> dict:
    body = {"model": "grok-4.3", "messages": [{"role": "user", "content": f"q{i}"}]}
    return {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}


def _clients(emu) -> tuple[openai.OpenAI, httpx.Client]:
    base = emu.base_urls["xai"]
    sdk = openai.OpenAI(api_key=KEY, base_url=base, max_retries=0)
    return sdk, httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"})


def _parsed(message_type, reply: httpx.Response):
    assert reply.status_code == 200, reply.text
    return json_format.Parse(reply.text, message_type())  # unknown fields are an error


def test_a_batch_and_the_list_are_xai_sdks_own_messages(batch_emulator):
    emu = batch_emulator
    sdk, http = _clients(emu)
    data = "".join(json.dumps(_line(i)) + "\n" for i in range(3)).encode()
    uploaded = sdk.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    made = http.post("/batches", json={"name": "batchbench-r1-s1", "input_file_id": uploaded.id})
    batch = _parsed(batch_pb2.Batch, made)
    assert batch.name == "batchbench-r1-s1" and batch.input_file_id == uploaded.id
    assert batch.create_time.seconds > 0 and not batch.HasField("cancel_time")

    listed = _parsed(batch_pb2.ListBatchesResponse, http.get("/batches", params={"limit": 10}))
    assert [b.batch_id for b in listed.batches] == [batch.batch_id]

    emu.flush()
    done = _parsed(batch_pb2.Batch, http.get(f"/batches/{batch.batch_id}"))
    assert (done.state.num_requests, done.state.num_pending, done.state.num_success) == (3, 0, 3)
    page = http.get(f"/batches/{batch.batch_id}/results", params={"limit": 2}).json()
    assert len(page["results"]) == 2 and page["pagination_token"]
    rest = http.get(
        f"/batches/{batch.batch_id}/results", params={"pagination_token": page["pagination_token"]}
    ).json()
    ids = [r["batch_request_id"] for r in page["results"] + rest["results"]]
    assert sorted(ids) == ["c0", "c1", "c2"] and rest["pagination_token"] is None
    completion = rest["results"][0]["batch_result"]["response"]["chat_get_completion"]
    assert completion["choices"][0]["message"]["content"]


def test_a_cancel_is_xai_sdks_batch_with_its_cancel_time(batch_emulator_factory):
    sdk, http = _clients(batch_emulator_factory(paused=True))  # a batch that has not ended
    data = "".join(json.dumps(_line(i)) + "\n" for i in range(2)).encode()
    uploaded = sdk.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    made = _parsed(
        batch_pb2.Batch,
        http.post("/batches", json={"name": "n", "input_file_id": uploaded.id}),
    )
    cancelled = _parsed(batch_pb2.Batch, http.post(f"/batches/{made.batch_id}:cancel"))
    assert cancelled.cancel_time.seconds > 0


def test_a_batch_made_by_name_takes_requests_added_afterwards(batch_emulator):
    """docs.x.ai's own flow: create a batch by name, then add requests to it (the body as
    tryAGI's client, generated from xAI's OpenAPI, sends it); the batch is xai-sdk's
    Batch throughout, keeps its name, runs what was added and returns its results. A
    request naming a model xAI does not serve is refused with the call, naming it."""
    emu = batch_emulator
    _, http = _clients(emu)
    made = _parsed(batch_pb2.Batch, http.post("/batches", json={"name": "evening-run"}))
    assert made.name == "evening-run" and made.state.num_requests == 0
    asked = [
        {
            "batch_request_id": f"r{i}",
            "batch_request": {"chat_get_completion": _line(i)["body"]},
        }
        for i in range(3)
    ]
    added = http.post(f"/batches/{made.batch_id}/requests", json={"batch_requests": asked})
    assert added.status_code == 200, added.text
    emu.store.clock.advance(60)
    seen = _parsed(batch_pb2.Batch, http.get(f"/batches/{made.batch_id}"))
    assert seen.name == "evening-run"
    assert (seen.state.num_requests, seen.state.num_success, seen.state.num_pending) == (3, 3, 0)
    listed = _parsed(batch_pb2.ListBatchesResponse, http.get("/batches"))
    assert [b.batch_id for b in listed.batches] == [made.batch_id]  # its groups not shown
    results = http.get(f"/batches/{made.batch_id}/results").json()["results"]
    assert sorted(r["batch_request_id"] for r in results) == ["r0", "r1", "r2"]
    unknown = {
        **asked[0],
        "batch_request": {"chat_get_completion": {**_line(9)["body"], "model": "grok-nonesuch"}},
    }
    refused = http.post(f"/batches/{made.batch_id}/requests", json={"batch_requests": [unknown]})
    assert refused.status_code == 404 and "grok-nonesuch" in refused.json()["error"]
