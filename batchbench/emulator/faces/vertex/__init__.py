"""Vertex AI's face: batch prediction jobs, Cloud Storage's JSON API and an OAuth token
endpoint, on one port.

What google-genai's ``Client(vertexai=True)`` sends when ``GOOGLE_VERTEX_BASE_URL``
names the emulator (``/v1/projects/P/locations/L/batchPredictionJobs…`` and the
publisher models), what google-cloud-storage sends when ``STORAGE_EMULATOR_HOST``
does (``/storage/v1/b/…``, ``/upload/storage/v1/b/…``, ``/download/storage/v1/b/…``),
and what google-auth sends to refresh the credentials of the file
``GOOGLE_APPLICATION_CREDENTIALS`` names (``POST /token``). Calls to Vertex carry
``Authorization: Bearer``; a call without one is 401 UNAUTHENTICATED, as Google
answers it. Errors are Google's ``{"error": {code, message, status}}``.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ...core import HEX, ApiFailure, Store
from ...face import Exchange, FaultKind, Reply, Route, bearer, route
from ..gemini_model import STATUS_NAMES
from .gcs import DEFAULT_BUCKET, Storage, StorageRoutes
from .jobs import Jobs

PROJECT = "batchbench-demo"
LOCATION = "us-central1"
PARENT = r"^/v1/(projects/[^/]+/locations/[^/]+)"
_PATHS = ("/v1/projects/", "/v1/publishers/", "/storage/", "/upload/storage/", "/download/storage/")


class VertexFace:
    name = "vertex"

    def __init__(self, store: Store) -> None:
        self.store = store
        self.storage = Storage()
        self.jobs = Jobs(store, self.storage)
        self.gcs = StorageRoutes(self.storage, store.now)
        self._adc: Path | None = None
        self._pem = ""
        self.routes: Sequence[Route] = [
            route("POST", "^/token$", self.token),
            route("POST", PARENT + "/batchPredictionJobs$", self.create, creates=True),
            route("GET", PARENT + "/batchPredictionJobs$", self.list),
            route("GET", PARENT + "/batchPredictionJobs/([0-9]+)$", self.get),
            route("POST", PARENT + "/batchPredictionJobs/([0-9]+):cancel$", self.cancel, True),
            route("GET", PARENT + "/publishers/([^/]+)/models/([^/:]+)$", self.model),
            route("GET", "^/v1/publishers/([^/]+)/models/([^/:]+)$", self.global_model),
            route("POST", r"^/upload/storage/v1/b/([^/]+)/o$", self.gcs.upload, writes=True),
            route("PUT", r"^/upload/storage/v1/b/([^/]+)/o$", self.gcs.resume, writes=True),
            route("GET", r"^/storage/v1/b/([^/]+)$", self.gcs.get_bucket),
            route("GET", r"^/storage/v1/b/([^/]+)/o$", self.gcs.list),
            route("GET", r"^/storage/v1/b/([^/]+)/o/(.+)$", self.gcs.get),
            route("GET", r"^/download/storage/v1/b/([^/]+)/o/(.+)$", self.gcs.get),
        ]

    # the face ---------------------------------------------------------------
    def claims(self, x: Exchange) -> bool:
        return x.path == "/token" or x.path.startswith(
            (
                "/v1/projects/",
                "/v1/publishers/",
                "/storage/v1/",
                "/upload/storage/",
                "/download/storage/",
            )
        )

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        if x.path == "/token" or "upload_id" in x.query:
            return None  # the token endpoint takes the refresh token; a session is its URL
        if x.path.startswith(("/storage/", "/upload/", "/download/")):
            return None  # Cloud Storage's emulators take anonymous calls
        if not bearer(x):
            return ApiFailure(
                401,
                "Request is missing required authentication credential. Expected OAuth 2"
                " access token, login cookie or other valid authentication credential.",
            )
        return None

    def error(self, failure: ApiFailure) -> Reply:
        status = failure.code if failure.code and failure.code.isupper() else None
        body = {
            "error": {
                "code": failure.status,
                "message": failure.message,
                "status": status or STATUS_NAMES.get(failure.status, "UNKNOWN"),
                "errors": [{"message": failure.message, "reason": failure.code or "error"}],
            }
        }
        return Reply(body, failure.status, dict(failure.headers))

    def fault(self, kind: FaultKind) -> ApiFailure:
        if kind == "429":
            return ApiFailure(429, "Resource exhausted. Please try again later.")
        if kind == "overloaded":
            return ApiFailure(503, "The service is currently unavailable.")
        return ApiFailure(500, "Internal error encountered.")

    def advance(self, now: float, flush: bool) -> None:
        self.jobs.advance(now, flush)

    def ledger(self) -> list[dict[str, Any]]:
        return self.jobs.ledger()

    def tamper(self, batch_id: str, change: Mapping[str, Any]) -> None:
        """Misreport any field of a job (``{"createTime": "yesterday"}``)."""
        self.jobs.get(batch_id).overrides.update(change)

    def restore(self, state: Mapping[str, Any]) -> None:
        """Nothing to take over: no snapshot of Vertex jobs is made."""

    def base_url(self, url: str) -> str:
        return url

    def environment(self, url: str) -> dict[str, str]:
        out = {
            "GOOGLE_VERTEX_BASE_URL": url,
            "STORAGE_EMULATOR_HOST": url,
            "GOOGLE_CLOUD_PROJECT": PROJECT,
            "GOOGLE_CLOUD_LOCATION": LOCATION,
            "BATCHBENCH_GCS_URI": f"gs://{DEFAULT_BUCKET}/demo",
        }
        credentials = self.credentials(url)
        if credentials is not None:
            out["GOOGLE_APPLICATION_CREDENTIALS"] = str(credentials)
        return out

    def credentials(self, url: str) -> Path | None:
        """An Application Default Credentials file whose token endpoint is this emulator:
        a service account with a key made for this emulator alone (google-auth signs its
        token request with it, unchanged; the emulator does not check the signature).
        None without ``cryptography``, which comes only with the Vertex clients."""
        if self._adc is None:
            try:  # google-auth's own dependency: there whenever Vertex's SDKs are
                from cryptography.hazmat.primitives import serialization
                from cryptography.hazmat.primitives.asymmetric import rsa
            except ImportError:
                return None  # without the [vertex] extra, no client here needs them

            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ).decode()
            folder = Path(tempfile.mkdtemp(prefix="batchbench-emulator-adc-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)  # gone with the process
            self._adc = folder / "service-account.json"
            self._pem = pem
        info = {
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": "emulator",
            "private_key": self._pem,
            "client_email": f"batchbench@{PROJECT}.iam.gserviceaccount.com",
            "client_id": "1",
            "token_uri": f"{url}/token",
        }
        self._adc.write_text(json.dumps(info))
        return self._adc

    # the routes -------------------------------------------------------------
    def token(self, x: Exchange) -> Reply:
        token = "ya29.emulator-" + self.store.decide.token(HEX, 24)
        return Reply({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def create(self, x: Exchange, parent: str) -> Reply:
        return Reply(self.jobs.create(parent, x.json()))

    def list(self, x: Exchange, parent: str) -> Reply:
        return Reply(self.jobs.listed(parent, x.query, x.int_param("pageSize", 100, 1, 1000)))

    def get(self, x: Exchange, parent: str, ident: str) -> Reply:
        return Reply(self.jobs.get(ident).obj(self.store.now()))

    def cancel(self, x: Exchange, parent: str, ident: str) -> Reply:
        return Reply(self.jobs.cancel(ident))

    def model(self, x: Exchange, parent: str, publisher: str, model: str) -> Reply:
        return self.global_model(x, publisher, model)

    def global_model(self, x: Exchange, publisher: str, model: str) -> Reply:
        model = unquote(model)
        if publisher not in ("google", "anthropic") or not self.store.known_model(
            model.split("@", 1)[0]
        ):
            raise ApiFailure(
                404, f"Publisher Model `publishers/{publisher}/models/{model}` not found."
            )
        return Reply(
            {
                "name": f"publishers/{publisher}/models/{model}",
                "versionId": model.split("@", 1)[1] if "@" in model else "001",
                "launchStage": "GA",
            }
        )


def make(store: Store) -> VertexFace:
    return VertexFace(store)
