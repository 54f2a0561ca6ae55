"""litellm's batch calls against the emulator: OpenAI's and Azure OpenAI's faces, end to end.

A check a third-party client does not trip on the emulator's faces (#32, #33), run by
hand in an environment that has litellm (it is not a dependency of batchbench):

    python -m venv /tmp/tp && /tmp/tp/bin/pip install litellm -e .
    LITELLM_LOCAL_MODEL_COST_MAP=True /tmp/tp/bin/python tests/third_party/litellm_batches.py

It prints one line per service and exits non-zero at the first that does not end with
its line answered.
"""

from __future__ import annotations

import io
import json
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network for its price map

import litellm  # noqa: E402

from batchbench.emulator import Emulator  # noqa: E402

LINE = {
    "custom_id": "r1",
    "method": "POST",
    "url": "/v1/chat/completions",
    "body": {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "hello"}]},
}


def one_batch(provider: str, **where: str) -> str:
    data = (json.dumps(LINE) + "\n").encode()
    uploaded = litellm.create_file(
        file=("in.jsonl", io.BytesIO(data)), purpose="batch", custom_llm_provider=provider, **where
    )
    batch = litellm.create_batch(
        completion_window="24h",
        endpoint="/v1/chat/completions",
        input_file_id=uploaded.id,
        custom_llm_provider=provider,
        **where,
    )
    emulator.flush()
    done = litellm.retrieve_batch(batch_id=batch.id, custom_llm_provider=provider, **where)
    if done.status != "completed" or not done.output_file_id:
        raise SystemExit(f"{provider}: batch {done.id} is {done.status}")
    content = litellm.file_content(
        file_id=done.output_file_id, custom_llm_provider=provider, **where
    )
    reply = json.loads(content.content.decode().splitlines()[0])
    text = reply["response"]["body"]["choices"][0]["message"]["content"]
    return f"{provider}: {batch.id} completed, r1 answered {text[:40]!r}"


with Emulator(latency=0.05, api_key="litellm-check") as emulator:
    urls = emulator.base_urls
    print(one_batch("openai", api_base=urls["openai"], api_key="litellm-check"))
    print(
        one_batch(
            "azure",
            api_base=urls["azure"],
            api_key="litellm-check",
            api_version="preview",
        )
    )
    # the dated API's paths, as older litellm setups name them
    print(
        one_batch(
            "azure", api_base=urls["azure"], api_key="litellm-check", api_version="2024-10-21"
        )
    )
sys.exit(0)
