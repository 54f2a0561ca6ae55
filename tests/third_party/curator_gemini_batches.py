"""Curator's Gemini batch backend (on Vertex AI, through google-cloud-aiplatform) against
the emulator, unpatched: #62.1, where every call got 401 (google-auth's self-signed JWT).

Curator uploads its requests with google-cloud-storage (to the emulator's Cloud Storage,
``STORAGE_EMULATOR_HOST``), submits with ``vertexai.batch_prediction.BatchPredictionJob``
and polls with ``aiplatform.BatchPredictionJob`` — the credentials file's service
account signing its own JWTs. The one thing set beforehand is where aiplatform sends
its calls (the emulator, over REST: gRPC is not served); Curator's own
``vertexai.init(project, location)`` keeps that. Run by hand where Curator is installed
(it is not a dependency of batchbench). The model is one Curator's price table knows
(its cost lookup fails on newer names), told to the emulator. Its telemetry's failure
to reach the network is harmless.

    python3 -m venv /tmp/aip
    /tmp/aip/bin/pip install google-cloud-aiplatform==1.71.1 bespokelabs-curator \\
        "instructor<1.8" -e '.[vertex]'
    /tmp/aip/bin/python tests/third_party/curator_gemini_batches.py
"""

from __future__ import annotations

import os
import sys
import tempfile

from batchbench.emulator import Emulator

MODEL = os.environ.get("CURATOR_MODEL", "gemini-2.0-flash-001")  # one Curator prices
with Emulator(latency=0.2, models=[MODEL]) as emulator, tempfile.TemporaryDirectory() as cache:
    os.environ.update(emulator.environment())
    os.environ.update(
        {
            "CURATOR_CACHE_DIR": cache,
            "CURATOR_DISABLE_VIEWER": "1",
            "GEMINI_BUCKET_NAME": "batchbench",
            "GOOGLE_CLOUD_REGION": "us-central1",
        }
    )
    from google.cloud import aiplatform

    aiplatform.init(api_endpoint=os.environ["GOOGLE_VERTEX_BASE_URL"], api_transport="rest")
    from bespokelabs import curator

    llm = curator.LLM(
        model_name=MODEL,
        backend="gemini",
        batch=True,
        backend_params={"batch_check_interval": 1},
    )
    result = llm(["What is 2 + 2?", "Name a colour."])
    rows = result.dataset.to_list() if hasattr(result, "dataset") else list(result)
    answers = [r.get("response") for r in rows]
    jobs = [b for b in emulator.ledger()["batches"] if b["provider"] == "vertex"]
    print(f"curator/gemini on vertex: {len(answers)} answers, {len(jobs)} job(s): {answers}")
    sys.exit(0 if len(answers) == 2 and all(answers) and jobs else 1)
