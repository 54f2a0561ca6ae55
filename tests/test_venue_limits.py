"""#51: each new venue's batch limits are the ones its provider documents (the figures
the issue quotes from each provider's docs, written here, not read from our code), a
file over them is refused before it is sent, and OpenRouter's service (the emulator's
face, driven by the openrouter SDK) refuses a batch of one request too many."""

from __future__ import annotations

import json

import pytest

from batchbench.errors import PlanError
from batchbench.providers import registry

MB = 1024 * 1024
# provider → (requests a batch, bytes a batch), as documented
DOCUMENTED = {
    "groq": (50_000, 100 * MB),  # the groq SDK's files.create: ".jsonl files up to 100 MB"
    "together": (50_000, 100 * MB),  # docs.together.ai batch inference
    "mistral": (1_000_000, 200 * MB),  # docs.mistral.ai batch processing (1M requests)
    "openrouter": (5_000, 200 * MB),  # openrouter.ai/docs batch quickstart
}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_a_venues_limits_are_its_documented_ones(name):
    limits = registry.BY_NAME[name].wire().limits
    assert (limits.max_lines, limits.max_bytes) == DOCUMENTED[name]


def test_an_openrouter_file_of_one_request_too_many_is_refused_before_it_is_sent():
    wire = registry.BY_NAME["openrouter"].wire()
    line = json.dumps({"custom_id": "c", "body": {"model": "m", "messages": []}})
    lines = [line.replace('"c"', f'"c{i}"').encode() for i in range(5_001)]
    with pytest.raises(PlanError, match="5001 requests, over the 5000 limit"):
        wire.check_file(lines, "answers file 1")
    wire.check_file(lines[:5_000], "answers file 1")


def test_openrouters_service_refuses_a_batch_of_one_request_too_many(batch_emulator):
    openrouter = pytest.importorskip("openrouter")
    sdk = openrouter.OpenRouter(api_key="k", server_url=batch_emulator.base_urls["openrouter"])
    body = {"messages": [{"role": "user", "content": "hi"}]}
    requests = [{"custom_id": f"c{i}", "body": body} for i in range(5_001)]
    with pytest.raises(openrouter.errors.OpenRouterError) as refused:
        sdk.batch.create_batches(
            endpoint="/v1/chat/completions", model="anthropic/claude-opus-5", requests=requests
        )
    assert refused.value.status_code == 400 and "5000" in str(refused.value.body)
    made = sdk.batch.create_batches(
        endpoint="/v1/chat/completions", model="anthropic/claude-opus-5", requests=requests[:5_000]
    )
    assert made.status == "validating" and made.request_counts.total == 5_000


def _line(custom_id: str, model: str) -> bytes:
    body = {"model": model, "messages": [{"role": "user", "content": "What is 1+1?"}]}
    return json.dumps({"custom_id": custom_id, "body": body}).encode()


def test_groq_keeps_the_window_asked_and_refuses_what_its_sdk_documents(batch_emulator):
    """console.groq.com/docs/batch: a window of 24 hours to 7 days, kept as asked (not
    run as 24 h); the groq SDK's files.create: purpose "batch" only, files up to 100 MB."""
    groq = pytest.importorskip("groq")
    sdk = groq.Groq(api_key="k", base_url=batch_emulator.base_urls["groq"], max_retries=0)
    line = {"custom_id": "c1", "method": "POST", "url": "/v1/chat/completions"}
    body = {"model": "openai/gpt-oss-120b", "messages": [{"role": "user", "content": "hi"}]}
    data = json.dumps({**line, "body": body}).encode()
    uploaded = sdk.files.create(file=("in.jsonl", data), purpose="batch")
    day = batch_emulator.store.settings.completion_window
    for window, days in (("24h", 1), ("48h", 2), ("7d", 7)):
        made = sdk.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window=window
        )
        seen = sdk.batches.retrieve(made.id)
        assert seen.completion_window == window
        assert seen.expires_at - seen.created_at == pytest.approx(days * day, abs=1)
    with pytest.raises(groq.BadRequestError, match="completion_window"):
        sdk.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="8d"
        )
    with pytest.raises(groq.BadRequestError, match="purpose"):
        sdk.files.create(file=("in.jsonl", data), purpose="fine-tune")
    big = data + b"\n" + b" " * (100 * MB)
    with pytest.raises(groq.BadRequestError, match="too large"):
        sdk.files.create(file=("big.jsonl", big), purpose="batch")


def test_together_keeps_the_model_id_and_refuses_a_long_id_by_its_length(batch_emulator, tmp_path):
    """The together SDK's batches.create takes a model_id, kept on the job; its docs say
    a custom_id has at most 64 characters (a 65-character one fails the batch saying
    so, not something about a method), and an input file at most 100 MB."""
    together = pytest.importorskip("together")
    sdk = together.Together(api_key="k", base_url=batch_emulator.base_urls["together"])
    model = "openai/gpt-oss-120b"
    good, long = tmp_path / "good.jsonl", tmp_path / "long.jsonl"
    good.write_bytes(_line("c" * 64, model) + b"\n")
    long.write_bytes(_line("c" * 65, model) + b"\n")
    ok = sdk.files.upload(file=good, purpose="batch-api", check=False)
    bad = sdk.files.upload(file=long, purpose="batch-api", check=False)
    made = sdk.batches.create(
        input_file_id=ok.id, endpoint="/v1/chat/completions", model_id=model
    ).job
    assert made.x_model_id == model  # the SDK's name for the job's model_id
    assert sdk.batches.retrieve(made.id).x_model_id == model
    with pytest.raises(together.NotFoundError):
        sdk.batches.create(
            input_file_id=ok.id, endpoint="/v1/chat/completions", model_id="no/such-model"
        )
    failed = sdk.batches.create(input_file_id=bad.id, endpoint="/v1/chat/completions").job
    batch_emulator.store.clock.advance(60)
    seen = sdk.batches.retrieve(failed.id)
    assert seen.status == "FAILED"
    assert "65 characters" in seen.error and "64" in seen.error and "method" not in seen.error


def test_openrouter_pages_results_refuses_another_model_and_any_window_but_24h(
    batch_emulator,
):
    """openrouter.ai/docs: GET /batches/{id}/results pages a finished batch's results by
    cursor; the quickstart rejects a request whose body names another model; the SDK's
    completion_window is "24h" alone (a client that sends "1h" is refused)."""
    openrouter = pytest.importorskip("openrouter")
    import httpx

    base = batch_emulator.base_urls["openrouter"]
    sdk = openrouter.OpenRouter(api_key="k", server_url=base)
    model = "anthropic/claude-opus-5"
    body = {"messages": [{"role": "user", "content": "hi"}]}
    other = {**body, "model": "openai/gpt-oss-120b"}
    requests = [{"custom_id": f"c{i}", "body": body} for i in range(5)]
    with pytest.raises(openrouter.errors.OpenRouterError) as refused:
        sdk.batch.create_batches(
            endpoint="/v1/chat/completions",
            model=model,
            requests=[*requests, {"custom_id": "x", "body": other}],
        )
    assert refused.value.status_code == 400 and "requests[5].body.model" in str(refused.value.body)
    headers = {"Authorization": "Bearer k"}
    said = {"endpoint": "/v1/chat/completions", "model": model, "completion_window": "1h"}
    reply = httpx.post(f"{base}/batches", json={**said, "requests": requests}, headers=headers)
    assert reply.status_code == 400 and "completion_window" in reply.text
    made = sdk.batch.create_batches(endpoint="/v1/chat/completions", model=model, requests=requests)
    early = httpx.get(f"{base}/batches/{made.id}/results", headers=headers)
    assert early.status_code == 409
    batch_emulator.store.clock.advance(60)
    inline = sdk.batch.get_batches(id=made.id).results
    seen, cursor, pages = [], None, 0
    while True:
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = httpx.get(f"{base}/batches/{made.id}/results", params=query, headers=headers)
        found = page.json()
        assert page.status_code == 200 and found["object"] == "list"
        seen += found["data"]
        pages += 1
        if not found["has_more"]:
            assert found["next_cursor"] is None
            break
        cursor = found["next_cursor"]
    assert pages == 3
    assert [r["custom_id"] for r in seen] == [r.custom_id for r in inline]


def test_mistral_takes_inline_requests_several_files_and_its_sdks_file_and_job_calls(
    batch_emulator,
):
    """The mistralai SDK's batch.jobs.create takes several input_files or inline requests
    (docs.mistral.ai, since 2026-01-19); its files.list, files.retrieve and
    batch.jobs.delete are calls the service answers."""
    pytest.importorskip("mistralai")
    from mistralai.client import Mistral
    from mistralai.client.errors import MistralError

    sdk = Mistral(api_key="k", server_url=batch_emulator.base_urls["mistral"])
    model = "mistral-large-latest"
    body = {"messages": [{"role": "user", "content": "What is 1+1?"}], "max_tokens": 64}

    def upload(ids: list[str]) -> str:
        data = b"".join(json.dumps({"custom_id": i, "body": body}).encode() + b"\n" for i in ids)
        name = f"{ids[0]}.jsonl"
        return sdk.files.upload(file={"file_name": name, "content": data}, purpose="batch").id

    first, second = upload(["a1", "a2"]), upload(["b1"])
    files = sdk.batch.jobs.create(
        endpoint="/v1/chat/completions", model=model, input_files=[first, second]
    )
    inline = sdk.batch.jobs.create(
        endpoint="/v1/chat/completions",
        model=model,
        requests=[{"custom_id": "i1", "body": body}, {"body": body}],
    )
    batch_emulator.store.clock.advance(60)
    assert sdk.batch.jobs.get(job_id=inline.id).succeeded_requests == 2
    done = sdk.batch.jobs.get(job_id=files.id)
    assert done.status == "SUCCESS" and done.succeeded_requests == 3
    out = sdk.files.download(file_id=done.output_file).read().decode().splitlines()
    assert sorted(json.loads(line)["custom_id"] for line in out) == ["a1", "a2", "b1"]
    listed = sdk.files.list(purpose="batch", sample_type=["batch_request"])
    assert {f.id for f in listed.data} == {first, second} and listed.total == 2
    got = sdk.files.retrieve(file_id=done.output_file)
    assert got.sample_type == "batch_result" and got.source == "mistral" and not got.deleted
    gone = sdk.batch.jobs.delete(job_id=inline.id)
    assert gone.deleted and gone.id == inline.id
    assert inline.id not in {j.id for j in sdk.batch.jobs.list().data}
    with pytest.raises(MistralError):
        sdk.batch.jobs.create(endpoint="/v1/chat/completions", model=model)  # neither
