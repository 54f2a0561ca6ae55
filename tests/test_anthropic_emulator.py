"""The emulator's Anthropic face, driven through the real anthropic SDK over loopback HTTP.

Every expectation is the service's documented behaviour (provider-batch-apis.md §1),
checked through the SDK's own types, never through batchbench's client. The emulator
runs on the test's clock: ``clock.advance`` is an hour of batch time, at once.
"""

from __future__ import annotations

import json
import re

import anthropic
import pytest


def client(emu, **kw) -> anthropic.Anthropic:
    kw.setdefault("max_retries", 0)
    return anthropic.Anthropic(api_key=kw.pop("api_key", "test-key"), base_url=emu.url, **kw)


def request(i, model="claude-opus-5", **params):
    params = {
        "model": model,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": f"question {i}"}],
        **params,
    }
    return {"custom_id": f"req-{i}", "params": params}


def results(c, batch_id) -> dict:
    return {r.custom_id: r.result for r in c.messages.batches.results(batch_id)}


def test_a_batch_runs_counts_only_processing_and_ends_with_results_at_its_own_url(
    batch_emulator_factory, clock
):
    emu = batch_emulator_factory(latency=3600)
    c = client(emu)
    b = c.messages.batches.create(requests=[request(i) for i in range(4)])
    assert b.type == "message_batch" and b.processing_status == "in_progress"
    assert b.request_counts.processing == 4 and b.results_url is None
    assert (b.expires_at - b.created_at).total_seconds() == pytest.approx(86400)
    clock.advance(1800)  # half way: some lines ran, the counts still say nothing
    half = c.messages.batches.retrieve(b.id)
    assert half.processing_status == "in_progress"
    assert half.request_counts.model_dump() == {
        "processing": 4,
        "succeeded": 0,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    with pytest.raises(anthropic.AnthropicError, match="results_url"):  # the SDK: not yet
        c.messages.batches.results(b.id)
    with pytest.raises(anthropic.BadRequestError):  # and the results' address says so too
        c.get(f"/v1/messages/batches/{b.id}/results", cast_to=object)
    emu.flush()
    done = c.messages.batches.retrieve(b.id)
    assert done.processing_status == "ended" and done.ended_at is not None
    assert done.request_counts.succeeded == 4 and done.request_counts.processing == 0
    assert done.results_url == f"{emu.url}/v1/messages/batches/{b.id}/results"
    got = results(c, b.id)
    assert set(got) == {f"req-{i}" for i in range(4)}
    for i in range(4):
        result = got[f"req-{i}"]
        assert result.type == "succeeded"
        assert result.message.content[0].type == "text"
        assert result.message.content[0].text.endswith(f"question {i}")
        assert result.message.stop_reason == "end_turn" and result.message.usage.output_tokens > 0


def test_the_envelope_is_checked_at_once_and_params_only_when_they_run(batch_emulator):
    c = client(batch_emulator)
    for bad in ("has:colon", "x" * 65, "", "sp ace"):
        with pytest.raises(anthropic.BadRequestError, match="custom_id"):
            c.messages.batches.create(requests=[request(0), {**request(1), "custom_id": bad}])
    with pytest.raises(anthropic.BadRequestError, match="unique"):
        c.messages.batches.create(requests=[request(0), request(0)])
    assert c.messages.batches.list().data == []  # nothing was created
    b = c.messages.batches.create(
        requests=[
            request(0),
            request(1, stream=True),
            request(2, max_tokens=0),
            request(3, temperature=0.5),  # not a parameter of the SDK's Messages body
            {"custom_id": "req-4", "params": {"model": "m", "messages": []}},
        ]
    )
    batch_emulator.flush()
    got = results(c, b.id)
    assert got["req-0"].type == "succeeded"
    for cid in ("req-1", "req-2", "req-3", "req-4"):
        assert got[cid].type == "errored", cid
        assert got[cid].error.error.type == "invalid_request_error"


def test_over_256_mb_is_a_413(batch_emulator):
    batch_emulator.store.settings.max_request_bytes = 2000  # the same rule, a smaller size
    c = client(batch_emulator)
    with pytest.raises(anthropic.APIStatusError) as caught:
        c.messages.batches.create(requests=[request(i) for i in range(30)])
    assert caught.value.status_code == 413
    assert caught.value.body["error"]["type"] == "request_too_large"


def test_cancel_ends_the_unfinished_lines_canceled_and_delete_waits_for_the_end(
    batch_emulator_factory, clock
):
    emu = batch_emulator_factory(latency=3600)
    c = client(emu)
    b = c.messages.batches.create(requests=[request(i) for i in range(4)])
    with pytest.raises(anthropic.BadRequestError):  # an in-progress batch is not deleted
        c.messages.batches.delete(b.id)
    clock.advance(1000)  # some lines ran
    canceling = c.messages.batches.cancel(b.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at
    emu.flush()
    ended = c.messages.batches.retrieve(b.id)
    counts = ended.request_counts
    assert ended.processing_status == "ended"
    assert counts.succeeded >= 1 and counts.canceled >= 1
    assert counts.succeeded + counts.canceled == 4
    got = results(c, b.id)
    assert sorted(r.type for r in got.values()) == sorted(
        ["succeeded"] * counts.succeeded + ["canceled"] * counts.canceled
    )
    with pytest.raises(anthropic.BadRequestError):  # an ended batch cannot be cancelled
        c.messages.batches.cancel(b.id)
    deleted = c.messages.batches.delete(b.id)
    assert deleted.type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError):
        c.messages.batches.retrieve(b.id)
    ledger = emu.ledger()  # what was paid for stays on the books
    assert [x["id"] for x in ledger["batches"]] == [b.id]


def test_the_completion_window_expires_the_lines_that_did_not_run(batch_emulator_factory, clock):
    emu = batch_emulator_factory(latency=36000, completion_window=7200)
    c = client(emu)
    b = c.messages.batches.create(requests=[request(i) for i in range(6)])
    clock.advance(7300)  # past the window, most lines never ran
    ended = c.messages.batches.retrieve(b.id)
    assert ended.processing_status == "ended"
    kinds = [r.type for r in results(c, b.id).values()]
    assert "expired" in kinds and set(kinds) <= {"succeeded", "expired"}
    assert ended.request_counts.expired == kinds.count("expired")


def test_list_pages_newest_first_with_after_and_before(batch_emulator):
    c = client(batch_emulator)
    made = [c.messages.batches.create(requests=[request(0)]).id for _ in range(5)]
    newest_first = made[::-1]
    first = c.messages.batches.list(limit=2)
    assert [b.id for b in first.data] == newest_first[:2] and first.has_more
    assert first.first_id == newest_first[0] and first.last_id == newest_first[1]
    assert [b.id for b in c.messages.batches.list(limit=1000)] == newest_first  # auto-paginates
    after = c.messages.batches.list(limit=2, after_id=newest_first[1])
    assert [b.id for b in after.data] == newest_first[2:4]
    before = c.messages.batches.list(limit=2, before_id=newest_first[3])
    assert [b.id for b in before.data] == newest_first[1:3]
    assert [b.id for b in c.messages.batches.list(limit=3)] == newest_first  # every page
    with pytest.raises(anthropic.BadRequestError):
        c.messages.batches.list(limit=1001)


def test_keys_models_and_faults_speak_anthropic(batch_emulator_factory):
    emu = batch_emulator_factory(api_key="right", unknown_models=["claude-nope"])
    with pytest.raises(anthropic.AuthenticationError) as caught:
        client(emu, api_key="wrong").messages.batches.list()
    assert caught.value.body["error"]["type"] == "authentication_error"
    c = client(emu, api_key="right")
    model = c.models.retrieve("claude-opus-5")
    assert model.id == "claude-opus-5" and model.type == "model"
    with pytest.raises(anthropic.NotFoundError):
        c.models.retrieve("claude-nope")
    assert c.models.list().data
    faulty = batch_emulator_factory(fault_rate=1.0, seed=3)
    seen = set()
    for _ in range(20):
        try:
            client(faulty).messages.batches.list()
        except anthropic.APIStatusError as exc:
            seen.add((exc.status_code, exc.body["error"]["type"]))
    assert seen == {(429, "rate_limit_error"), (500, "api_error"), (529, "overloaded_error")}


def test_the_responder_sees_the_params_and_its_replies_take_the_result_shapes(
    batch_emulator_factory,
):
    got_params = []

    def responder(params):
        got_params.append(params)
        text = params["messages"][0]["content"]
        if text.endswith("0"):
            return "plain"
        if text.endswith("1"):
            return {
                "status_code": 529,
                "body": {
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"},
                },
            }
        return {
            "status_code": 200,
            "body": {
                "id": "msg_x",
                "type": "message",
                "role": "assistant",
                "model": params["model"],
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b"},
                ],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 3, "output_tokens": 4},
            },
        }

    emu = batch_emulator_factory(responder=responder)
    c = client(emu)
    b = c.messages.batches.create(requests=[request(i, system="sys") for i in range(3)])
    emu.flush()
    got = results(c, b.id)
    assert got["req-0"].message.content[0].text == "plain"
    assert got["req-1"].type == "errored" and got["req-1"].error.error.type == "overloaded_error"
    assert [blk.type for blk in got["req-2"].message.content] == ["thinking", "text", "text"]
    assert sorted(p["messages"][0]["content"] for p in got_params) == [
        "question 0",
        "question 1",
        "question 2",
    ]
    assert all(p["system"] == "sys" for p in got_params)
    executed = [e for e in emu.ledger()["executions"] if e["batch_id"] == b.id]
    assert sorted(e["status_code"] for e in executed) == [200, 200, 529]


def test_results_are_in_any_order_and_missing_lines_drop_some(batch_emulator_factory):
    emu = batch_emulator_factory(anomalies={"missing-lines": 0.5}, seed=5)
    c = client(emu)
    b = c.messages.batches.create(requests=[request(i) for i in range(40)])
    emu.flush()
    with c.messages.batches.with_streaming_response.results(b.id) as resp:
        lines = [json.loads(x) for x in b"".join(resp.iter_bytes()).splitlines()]
    ids = [x["custom_id"] for x in lines]
    assert 0 < len(ids) < 40 and ids != sorted(ids, key=lambda x: int(x.split("-")[1]))
    assert c.messages.batches.retrieve(b.id).request_counts.succeeded == 40  # counts say all ran


def test_the_api_version_the_client_names_is_the_one_its_params_are_checked_against(
    batch_emulator,
):
    """Clients that send anthropic-version 2023-06-01 (Curator, litellm) may still send
    temperature, top_p and top_k; the newest version (the SDK's) refuses them."""
    old = client(batch_emulator, default_headers={"anthropic-version": "2023-06-01"})
    new = client(batch_emulator)
    sampled = [request(0, temperature=0.7, top_p=0.9, top_k=5)]
    b_old = old.messages.batches.create(requests=sampled)
    b_new = new.messages.batches.create(requests=sampled)
    batch_emulator.flush()
    assert results(old, b_old.id)["req-0"].type == "succeeded"
    errored = results(new, b_new.id)["req-0"]
    assert (
        errored.type == "errored"
        and "Extra inputs are not permitted" in errored.error.error.message
    )
    bad = client(batch_emulator, default_headers={"anthropic-version": "2099-01-01"})
    with pytest.raises(anthropic.BadRequestError, match="anthropic-version"):
        bad.messages.batches.list()


def test_ids_errors_and_unknown_paths_are_anthropic_s(batch_emulator):
    """Ids in the service's format; every error in Anthropic's envelope with its
    request_id, a path only OpenAI serves included; an unknown model errors its line."""
    c = client(batch_emulator)
    b = c.messages.batches.create(requests=[request(0), request(1, model="claude-opus-55")])
    assert re.fullmatch(r"msgbatch_01[1-9A-HJ-NP-Za-km-z]{22}", b.id)
    batch_emulator.flush()
    got = results(c, b.id)
    assert re.fullmatch(r"msg_01[1-9A-HJ-NP-Za-km-z]{22}", got["req-0"].message.id)
    assert got["req-1"].type == "errored" and got["req-1"].error.error.type == "not_found_error"
    with pytest.raises(anthropic.NotFoundError) as caught:
        c.get("/v1/batches", cast_to=object)  # OpenAI's path: not Anthropic's
    body = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert body["request_id"].startswith("req_011")
    assert caught.value.response.headers["request-id"].startswith("req_")
    assert c.models.retrieve("claude-opus-5").created_at.year == 2026


def test_the_service_s_known_404_and_early_end_are_modelled(batch_emulator_factory, clock):
    """anthropic-sdk-python#1432: a batch answers 404 a moment after its create and just
    after it ends, then is found again; a batch can say ended before its results_url."""
    anomalies = {"not-found-after-create": 1.0, "ended-before-results": 1.0}
    emu = batch_emulator_factory(latency=60, anomalies=anomalies)
    c = client(emu)
    b = c.messages.batches.create(requests=[request(0)])
    with pytest.raises(anthropic.NotFoundError):
        c.messages.batches.retrieve(b.id)
    clock.advance(121)  # lines ran and the batch ended at 120 s: a 404 again, for a while
    with pytest.raises(anthropic.NotFoundError):
        c.messages.batches.retrieve(b.id)
    ended = next(x for x in c.messages.batches.list() if x.id == b.id)
    assert ended.processing_status == "ended" and ended.results_url is None
    clock.advance(300)
    found = c.messages.batches.retrieve(b.id)
    assert found.processing_status == "ended" and found.results_url is not None
