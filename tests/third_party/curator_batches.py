"""Curator's Anthropic batch backend against the emulator, with a temperature, end to end.

Curator sends ``anthropic-version: 2023-06-01``, under which the Messages API still
takes ``temperature``: the emulator honours the version as the service does (#32.1).
Run by hand where Curator is installed (it is not a dependency of batchbench):

    /tmp/tp/bin/pip install bespokelabs-curator "instructor<1.8" -e .
    /tmp/tp/bin/python tests/third_party/curator_batches.py

(Curator 0.1.31 calls ``instructor.handle_response_model``, which later instructors
dropped: hence the pin. Its telemetry's failure to reach the network is harmless.)
"""

from __future__ import annotations

import os
import sys
import tempfile

from batchbench.emulator import Emulator

checked = Emulator(latency=0.2, api_key="curator-check")
with checked as emulator, tempfile.TemporaryDirectory() as cache:
    os.environ.update(
        {
            "CURATOR_CACHE_DIR": cache,
            "ANTHROPIC_API_KEY": "curator-check",
            "CURATOR_DISABLE_VIEWER": "1",
        }
    )
    from bespokelabs import curator

    llm = curator.LLM(
        model_name="claude-sonnet-4-5",
        backend="anthropic",
        batch=True,
        generation_params={"temperature": 0.5, "max_tokens": 64},
        backend_params={
            "base_url": emulator.base_urls["anthropic"],
            "api_key": "curator-check",
            "batch_check_interval": 1,
        },
    )
    result = llm(["What is 2 + 2?", "Name a colour."])
    rows = result.dataset.to_list() if hasattr(result, "dataset") else list(result)
    answers = [r.get("response") for r in rows]
    batches = [b for b in emulator.ledger()["batches"] if b["provider"] == "anthropic"]
    print(f"curator/anthropic: {len(answers)} answers, {len(batches)} batch(es): {answers}")
    ok = len(answers) == 2 and all(str(a).startswith("Simulated answer") for a in answers)
    sys.exit(0 if ok and batches else 1)
