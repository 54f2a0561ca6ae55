"""Vertex AI's face: batch prediction jobs, Cloud Storage's JSON API and an OAuth token
endpoint, on one port.

What google-genai's ``Client(vertexai=True)`` sends when ``GOOGLE_VERTEX_BASE_URL``
names the emulator (``/v1/projects/P/locations/L/batchPredictionJobs…`` and the
publisher models), what google-cloud-storage sends when ``STORAGE_EMULATOR_HOST``
does (``/storage/v1/b/…``, ``/upload/storage/v1/b/…``, ``/download/storage/v1/b/…``),
and what google-auth sends to refresh the credentials of the file
``GOOGLE_APPLICATION_CREDENTIALS`` names (``POST /token``). Both API versions are
served, ``v1`` and google-genai's default ``v1beta1``.

Calls to Vertex carry ``Authorization: Bearer`` and a token the token endpoint gave, or
a JWT the service account signed itself (:mod:`.jwt`, as Google takes it): a call
without one, with one it never gave or that has expired (the emulator's
``expired_tokens`` setting, to rehearse it), or with a JWT Google would refuse (another
key's, expired, for another service), is 401 UNAUTHENTICATED; a call on a
project other than the service account's own (the ``@PROJECT.iam`` of the JWT its
client signed) is 403 PERMISSION_DENIED, as Google answers a project the credentials
cannot see. Errors are Google's ``{"error": {code, message, status}}``.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from ...core import HEX, ApiFailure, Store
from ...face import Exchange, FaultKind, Reply, Route, bearer, route
from ..gemini_model import STATUS_NAMES
from . import jwt
from .gcs import DEFAULT_BUCKET, Storage, StorageRoutes
from .gcs_xml import PREFIX, XmlRoutes, xml_errors
from .jobs import Jobs, publisher_of
from .lines import line_id, run_gemini

PROJECT = "batchbench-demo"
KEY_ID = "emulator"  # the credentials file's private_key_id: a self-signed JWT's kid
LOCATION = "us-central1"
PARENT = r"^/v1(?:beta1)?/(projects/[^/]+/locations/[^/]+)"
GENERATE = "/publishers/google/models/([^/:]+):generateContent$"
_VERSIONED = ("/v1/projects/", "/v1/publishers/", "/v1beta1/projects/", "/v1beta1/publishers/")
_PROJECT = re.compile(r"^/v1(?:beta1)?/projects/([^/]+)/")
_SERVICE_ACCOUNT = re.compile(r"^[^@]+@([a-z][-a-z0-9]{4,28}[a-z0-9])\.iam\.gserviceaccount\.com$")


class VertexFace:
    name = "vertex"

    def __init__(self, store: Store) -> None:
        self.store = store
        self.storage = Storage()
        self.jobs = Jobs(store, self.storage)
        self.gcs = StorageRoutes(self.storage, store.now)
        self._adc: Path | None = None
        self._pem = ""
        # The service accounts whose self-signed JWTs are taken: email → (key id, public
        # key), as Google publishes each account's (the emulator's own, and any trusted).
        self.accounts: dict[str, tuple[str, Any]] = {}
        self.tokens: dict[str, tuple[float, str]] = {}  # token → (issued at, its project)
        self.routes: Sequence[Route] = [
            route("POST", "^/token$", self.token),
            route("POST", PARENT + "/batchPredictionJobs$", self.create, creates=True),
            route("GET", PARENT + "/batchPredictionJobs$", self.list),
            route("GET", PARENT + "/batchPredictionJobs/([0-9]+)$", self.get),
            route("POST", PARENT + "/batchPredictionJobs/([0-9]+):cancel$", self.cancel, True),
            route("DELETE", PARENT + "/batchPredictionJobs/([0-9]+)$", self.delete, True),
            route("GET", PARENT + "/publishers/([^/]+)/models/([^/:]+)$", self.model),
            route("POST", PARENT + GENERATE, self.generate),
            route("GET", "^/v1(?:beta1)?/publishers/([^/]+)/models/([^/:]+)$", self.global_model),
            route("POST", r"^/upload/storage/v1/b/([^/]+)/o$", self.gcs.upload, writes=True),
            route("PUT", r"^/upload/storage/v1/b/([^/]+)/o$", self.gcs.resume, writes=True),
            route("GET", r"^/storage/v1/b/([^/]+)$", self.gcs.get_bucket),
            route("POST", r"^/storage/v1/b$", self.gcs.create_bucket, writes=True),
            route("DELETE", r"^/storage/v1/b/([^/]+)/o/(.+)$", self.gcs.delete, writes=True),
            route("GET", r"^/storage/v1/b/([^/]+)/o$", self.gcs.list),
            route("GET", r"^/storage/v1/b/([^/]+)/o/(.+)$", self.gcs.get),
            route("GET", r"^/download/storage/v1/b/([^/]+)/o/(.+)$", self.gcs.get),
            *self._xml_routes(),
        ]

    def _xml_routes(self) -> list[Route]:
        """Cloud Storage's XML API (obstore's client speaks it), under :data:`PREFIX`."""
        xml = XmlRoutes(self.storage, self.store.now)
        named = PREFIX + r"/([^/]+)/(.+)$"
        return [
            route("PUT", "^" + named, xml_errors(xml.put), writes=True),
            route("GET", "^" + named, xml_errors(xml.get)),
            route("HEAD", "^" + named, xml_errors(xml.head)),
            route("DELETE", "^" + named, xml_errors(xml.delete), writes=True),
            route("GET", "^" + PREFIX + r"/([^/]+)/?$", xml_errors(xml.list)),
        ]

    # the face ---------------------------------------------------------------
    def claims(self, x: Exchange) -> bool:
        return x.path == "/token" or x.path.startswith(
            (*_VERSIONED, "/storage/v1/", "/upload/storage/", "/download/storage/", PREFIX)
        )

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        if x.path == "/token" or "upload_id" in x.query:
            return None  # the token endpoint takes the refresh token; a session is its URL
        if x.path.startswith(("/storage/", "/upload/", "/download/", PREFIX)):
            return None  # Cloud Storage's emulators take anonymous calls
        token = bearer(x)
        if not token:
            return ApiFailure(
                401,
                "Request is missing required authentication credential. Expected OAuth 2"
                " access token, login cookie or other valid authentication credential.",
            )
        issued = self.tokens.get(token)
        if issued is None and jwt.looks_like(token):
            email = jwt.verified(token, self.accounts, x.header("Host"))
            if email is not None:  # signed by the account itself: its project's
                issued = (self.store.now(), _project_of_account(email))
        if issued is None or issued[0] < self.store.settings.expired_tokens:
            return ApiFailure(
                401,
                "Request had invalid authentication credentials. Expected OAuth 2 access"
                " token, login cookie or other valid authentication credential.",
                code="UNAUTHENTICATED",
            )
        found = _PROJECT.match(x.path)
        if found and found.group(1) != issued[1]:
            verb = {"GET": "get", "POST": "create", "DELETE": "delete"}.get(x.method, "get")
            return ApiFailure(
                403,
                f"Permission 'aiplatform.batchPredictionJobs.{verb}' denied on resource"
                f" '//aiplatform.googleapis.com/projects/{found.group(1)}' (or it may not"
                " exist).",
                code="PERMISSION_DENIED",
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
            "GOOGLE_BASE_URL": url + PREFIX,  # the XML API, where obstore looks for it
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
        token request with it, unchanged: the token endpoint does not check that
        signature; a self-signed JWT's, sent as the bearer token, is checked).
        None without ``cryptography``, which comes only with the Vertex clients."""
        if self._adc is None:
            try:  # google-auth's own dependency: there whenever Vertex's SDKs are
                from cryptography.hazmat.primitives import serialization
                from cryptography.hazmat.primitives.asymmetric import rsa
            except ImportError:
                return None  # without the [vertex] extra, no client here needs them

            # 2,048 bits, as Google's: obstore (aws-lc) refuses a smaller key, though
            # google-auth would sign with it and the emulator never checks the signature
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ).decode()
            _sweep()
            folder = Path(tempfile.mkdtemp(prefix=f"{ADC_PREFIX}{os.getpid()}-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)  # gone with the process
            self._adc = folder / "service-account.json"
            self._pem = pem
        info = {
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": KEY_ID,
            "private_key": self._pem,
            "client_email": f"batchbench@{PROJECT}.iam.gserviceaccount.com",
            "client_id": "1",
            "token_uri": f"{url}/token",
        }
        self._adc.write_text(json.dumps(info))
        self.trust(info)
        return self._adc

    def trust(self, info: Mapping[str, Any]) -> None:
        """A service account (its credentials file's content) whose self-signed JWTs are
        taken, as Google takes any account's: its public key, from the private one."""
        from cryptography.hazmat.primitives import serialization

        key = serialization.load_pem_private_key(str(info["private_key"]).encode(), None)
        public = key.public_key()
        self.accounts[str(info["client_email"])] = (str(info["private_key_id"]), public)

    def close(self) -> None:
        """The credentials folder (its private key) removed: the emulator has stopped."""
        if self._adc is not None:
            shutil.rmtree(self._adc.parent, ignore_errors=True)
            self._adc = None

    # the routes -------------------------------------------------------------
    def token(self, x: Exchange) -> Reply:
        """An access token for the service account whose key signed the JWT the client
        sends (``assertion``, RFC 7523): its project is the one the token may use."""
        token = "ya29.emulator-" + self.store.decide.token(HEX, 24)
        self.tokens[token] = (self.store.now(), _project_of(x.body))
        return Reply({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def create(self, x: Exchange, parent: str) -> Reply:
        return Reply(self.jobs.create(parent, x.json()))

    def list(self, x: Exchange, parent: str) -> Reply:
        return Reply(self.jobs.listed(parent, x.query, x.int_param("pageSize", 100, 1, 1000)))

    def get(self, x: Exchange, parent: str, ident: str) -> Reply:
        return Reply(self.jobs.get(ident).obj(self.store.now()))

    def cancel(self, x: Exchange, parent: str, ident: str) -> Reply:
        return Reply(self.jobs.cancel(ident))

    def delete(self, x: Exchange, parent: str, ident: str) -> Reply:
        return Reply(self.jobs.delete(parent, ident))

    def model(self, x: Exchange, parent: str, publisher: str, model: str) -> Reply:
        return self.global_model(x, publisher, model)

    def generate(self, x: Exchange, parent: str, model: str) -> Reply:
        """A synchronous generateContent of a Gemini model, labels and all. With Flex
        PayGo's two headers (``X-Vertex-AI-LLM-Request-Type: shared``,
        ``X-Vertex-AI-LLM-Shared-Request-Type: flex``) at the batch price, slower, and
        refused 429 when flex has no capacity; served on the global endpoint only
        (Google's page: "doesn't support regional or multi-regional endpoints"; what a
        region answers is not documented — refused here, so a client that sends it
        there is seen). The reply's ``usageMetadata.trafficType`` says which it was."""
        self.global_model(x, "google", model)
        request = x.json()
        if not isinstance(request, dict):
            raise ApiFailure(400, "Invalid JSON payload received.", code="INVALID_ARGUMENT")
        shared = x.header("X-Vertex-AI-LLM-Request-Type") == "shared"
        flex = shared and x.header("X-Vertex-AI-LLM-Shared-Request-Type") == "flex"
        if flex and not parent.endswith("/locations/global"):
            raise ApiFailure(
                400, "Flex PayGo is served on the global endpoint only.", code="INVALID_ARGUMENT"
            )
        call = line_id({"request": request}, self.store.decide.nth("vertex-generate"))
        if flex and self.store.shed(call):
            raise self.fault("429")
        status, out = run_gemini(self.store, unquote(model), request, f"sync/{call}")
        response = out.get("response")
        self.store.executed("vertex", "flex" if flex else "sync", call, status, response)
        if response is None:
            return Reply(json.loads(out["status"].partition(": ")[2]), status)
        usage = response.setdefault("usageMetadata", {})
        usage["trafficType"] = "ON_DEMAND_FLEX" if flex else "ON_DEMAND"
        return Reply(response)

    def global_model(self, x: Exchange, publisher: str, model: str) -> Reply:
        model = unquote(model)
        name = model.split("@", 1)[0]
        family = publisher_of(name)
        if publisher not in ("google", "anthropic") or family not in (None, publisher):
            raise ApiFailure(
                404, f"Publisher Model `publishers/{publisher}/models/{model}` not found."
            )
        if not self.store.known_model(name):
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


ADC_PREFIX = "batchbench-emulator-adc-"


def _sweep() -> None:
    """Credentials folders an emulator killed outright (SIGKILL) left behind: removed, never
    taken up (each emulator makes its own, named by its process)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{ADC_PREFIX}*"):
        pid = folder.name.removeprefix(ADC_PREFIX).split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _project_of_account(email: str) -> str:
    """The project of a service account (``NAME@PROJECT.iam.gserviceaccount.com``)."""
    found = _SERVICE_ACCOUNT.match(email)
    return found.group(1) if found else PROJECT


def _project_of(body: bytes) -> str:
    """The project of the service account whose JWT a token request carries (its
    ``iss``, ``NAME@PROJECT.iam.gserviceaccount.com``); the demo's when it does not say."""
    form = parse_qs(body.decode("utf-8", "replace"))
    assertion = (form.get("assertion") or [""])[0]
    try:
        claims = json.loads(base64.urlsafe_b64decode(assertion.split(".")[1] + "=="))
    except (IndexError, ValueError):
        return PROJECT
    return _project_of_account(str(claims.get("iss", "")))


def make(store: Store) -> VertexFace:
    return VertexFace(store)
