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
    "groq": (50_000, 200 * MB),  # console.groq.com/docs/batch
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
