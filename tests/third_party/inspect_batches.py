"""inspect-ai's Anthropic and Google batchers against the emulator, end to end.

A check that a third-party client that no one here wrote gets its answers from the
emulator's Message Batches and Gemini Batch Mode faces (#32), run by hand where
inspect-ai is installed (it is not a dependency of batchbench):

    /tmp/tp/bin/pip install inspect-ai anthropic google-genai -e .
    /tmp/tp/bin/python tests/third_party/inspect_batches.py [anthropic] [google]

Each provider's two-sample eval must end with both samples answered by the emulator's
simulated model (its answers start "Simulated answer").
"""

from __future__ import annotations

import os
import sys
import tempfile

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import BatchConfig
from inspect_ai.solver import generate

from batchbench.emulator import Emulator

MODELS = {"anthropic": "anthropic/claude-sonnet-4-5", "google": "google/gemini-3.1-pro-preview"}
FACES = {"anthropic": "anthropic", "google": "gemini"}  # inspect's provider → the face
ONLY = sys.argv[1:] or list(MODELS)


def task() -> Task:
    return Task(
        dataset=[Sample(input="What is 2 + 2?"), Sample(input="Name a colour.")],
        solver=generate(),
    )


with (
    Emulator(latency=0.2, api_key="inspect-check") as emulator,
    tempfile.TemporaryDirectory() as logs,
):
    os.environ.update(
        {
            "ANTHROPIC_BASE_URL": emulator.base_urls["anthropic"],
            "ANTHROPIC_API_KEY": "inspect-check",
            "GOOGLE_GEMINI_BASE_URL": emulator.base_urls["gemini"],
            "GOOGLE_API_KEY": "inspect-check",
            "GEMINI_API_KEY": "inspect-check",
        }
    )
    failed = False
    for provider, model in [(p, MODELS[p]) for p in ONLY]:
        [log] = eval(
            task(),
            model=model,
            log_dir=logs,
            display="none",
            batch=BatchConfig(size=2, send_delay=0.5, tick=0.5),
        )
        answers = [s.output.completion for s in (log.samples or [])]
        ok = log.status == "success" and len(answers) == 2
        ok = ok and all(a.startswith("Simulated answer") for a in answers)
        face = FACES[provider]
        batches = [b for b in emulator.ledger()["batches"] if b["provider"] == face]
        said = f"{len(answers)} answers, {len(batches)} batch(es) on the emulator's {face} face"
        print(f"{provider}: {log.status}, {said}")
        failed |= not ok or not batches
    sys.exit(1 if failed else 0)
