"""google-cloud-aiplatform's batch prediction against the emulator's Vertex face, unpatched.

aiplatform's generated clients ask google-auth for a *self-signed JWT*
(``always_use_jwt_access``) and send no token request: the face takes it as Google does
(AIP-4111) — #62.1, where every call got 401. This drives the SDK's own
``vertexai.batch_prediction.BatchPredictionJob.submit`` over its REST transport (its
default, gRPC, is not served), polls with ``refresh()`` to the end, and checks that no
token was minted for it (the JWT itself was the credential; the storage client,
which puts the input, asks for one). Run by hand where aiplatform
is installed (it is not a dependency of batchbench: 650 MB):

    python3 -m venv /tmp/aip
    /tmp/aip/bin/pip install google-cloud-aiplatform==1.71.1 -e '.[vertex]'
    /tmp/aip/bin/python tests/third_party/aiplatform_batches.py
"""

from __future__ import annotations

import json
import os
import sys
import time

from batchbench.emulator import Emulator

with Emulator(latency=0.2) as emulator:
    os.environ.update(emulator.environment())
    from google.cloud import aiplatform, storage
    from google.oauth2 import service_account
    from vertexai.batch_prediction import BatchPredictionJob

    credentials = service_account.Credentials.from_service_account_file(
        os.environ["GOOGLE_APPLICATION_CREDENTIALS"],
        scopes=["https://www.googleapis.com/auth/cloud-platform"],
    )
    project = os.environ["GOOGLE_CLOUD_PROJECT"]
    line = {"request": {"contents": [{"role": "user", "parts": [{"text": "What is 1+1?"}]}]}}
    bucket = storage.Client(project=project, credentials=credentials).bucket("batchbench")
    bucket.blob("aip/input.jsonl").upload_from_string(json.dumps(line) + "\n")
    before = len(emulator.face("vertex").tokens)  # type: ignore[attr-defined]
    aiplatform.init(
        project=project,
        location="us-central1",
        credentials=credentials,
        api_endpoint=os.environ["GOOGLE_VERTEX_BASE_URL"],
        api_transport="rest",
    )
    job = BatchPredictionJob.submit(
        source_model="gemini-2.5-flash",
        input_dataset="gs://batchbench/aip/input.jsonl",
        output_uri_prefix="gs://batchbench/aip/out",
    )
    while not job.has_ended:
        time.sleep(0.5)  # a person polling by hand: the job runs on the emulator's clock
        job.refresh()
    minted = len(emulator.face("vertex").tokens) - before  # type: ignore[attr-defined]
    print(f"aiplatform/vertex: {job.state.name}, {job.output_location}, tokens minted {minted}")
    sys.exit(0 if job.has_succeeded and minted == 0 else 1)
