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
