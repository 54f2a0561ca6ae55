"""Together AI's face: its Files and Batches calls as the together SDK makes them.

As the service documents them (docs.together.ai batch inference; the SDK's own code):

- an upload is three calls: ``POST /v1/files`` (the file's name, purpose, type and
  checksum) answers ``302`` with a ``Location`` to put the bytes at and the file's id
  in ``X-Together-File-Id`` — or ``409`` naming the file already holding those bytes;
  ``PUT`` of the bytes there; ``POST /v1/files/{id}/preprocess``, which answers the file;
- a line is ``{"custom_id", "body"}``, ``custom_id`` at most 64 characters, no method
  or url (the batch names its endpoint); 50,000 lines, 100 MB;
- a create may name the ``model_id`` (the SDK's ``batches.create``): looked up, kept
  and shown on the job;
- ``POST /v1/batches`` answers ``{"job", "warning"}``; a job says ``VALIDATING``,
  ``IN_PROGRESS``, ``COMPLETED``, ``FAILED``, ``EXPIRED`` or ``CANCELLED``, a progress
  percentage and no line counts, and keeps no metadata; ``GET /v1/batches`` is one list;
- models are looked up in the supported-models catalogue (``/v2/supported-models``).

The batches run in an OpenAI book (its lifecycle, bad days, result and error lines —
read as OpenAI's, which is our reading of Together's: its docs show only that each line
carries its ``custom_id``); each Together line is handed to it with the endpoint the
batch names. On this emulator's port the face lives under ``/together``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote

from ..core import ALNUM, ApiFailure, Store
from ..face import Exchange, Reply, route
from ..multipart import multipart
from .openai import OPENAI_LIMITS, OpenAIFace
from .openai.validate import Limits

MOUNT = "/together"
ENDPOINT = "/v1/chat/completions"
MAX_ID = 64  # docs.together.ai batch inference: custom_id "max 64 characters"
MAX_BYTES = 100 * 1024 * 1024  # its rate limits: "Up to 100 MB per input file"
TOGETHER_LIMITS = Limits(
    max_lines=50_000,
    endpoints={ENDPOINT: ENDPOINT},
    file_expiry=OPENAI_LIMITS.file_expiry,
    max_id=MAX_ID,
)
STATUS = {
    "validating": "VALIDATING",
    "in_progress": "IN_PROGRESS",
    "finalizing": "IN_PROGRESS",
    "cancelling": "IN_PROGRESS",
    "completed": "COMPLETED",
    "failed": "FAILED",
    "expired": "EXPIRED",
    "cancelled": "CANCELLED",
}


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat()


def _as_openai_line(raw: bytes) -> bytes:
    """A Together line as the OpenAI book reads one: the batch's endpoint as its url. A
    line that is not Together's (no id, no body) is handed over as it is, and fails the
    batch's validation (an id over 64 characters fails it by its length)."""
    try:
        line = json.loads(raw)
    except ValueError:
        return raw
    ok = (
        isinstance(line, dict)
        and isinstance(line.get("custom_id"), str)
        and isinstance(line.get("body"), dict)
        and "url" not in line
    )
    if not ok:
        return raw
    return json.dumps({**line, "method": "POST", "url": ENDPOINT}).encode()


class TogetherFace(OpenAIFace):
    name = "together"
    key_variable = "TOGETHER_API_KEY"

    def __init__(self, store: Store) -> None:
        super().__init__(store, prefix=f"{MOUNT}/v1", limits=TOGETHER_LIMITS, provider="together")
        self.uploads: dict[str, tuple[str, str, str]] = {}  # id → name, purpose, checksum
        self.originals: dict[str, bytes] = {}  # file id → its bytes as uploaded
        self.by_checksum: dict[str, str] = {}
        self.model_ids: dict[str, str] = {}  # batch id → the model_id its create named
        p = "^" + MOUNT
        self.routes = [
            route("POST", p + r"/v1/files$", self.start_upload, writes=True),
            route("PUT", p + r"/upload/([^/]+)$", self.put_upload, writes=True),
            route("POST", p + r"/v1/files/([^/]+)/preprocess$", self.preprocess, writes=True),
            route("GET", p + r"/v1/files$", self.list_files),
            route("GET", p + r"/v1/files/([^/]+)$", self.get_file),
            route("GET", p + r"/v1/files/([^/]+)/content$", self.content),
            route("DELETE", p + r"/v1/files/([^/]+)$", self.delete_file, writes=True),
            route("POST", p + r"/v1/batches$", self.create_batch, creates=True),
            route("GET", p + r"/v1/batches$", self.list_batches),
            route("GET", p + r"/v1/batches/([^/]+)$", self.get_batch),
            route("POST", p + r"/v1/batches/([^/]+)/cancel$", self.cancel, writes=True),
            route("POST", p + r"/v1/chat/completions$", self.chat, writes=True),
            route("GET", p + r"/v2/supported-models$", self.models),
            route("GET", p + r"/v2/supported-models/(.+)$", self.model),
        ]

    def claims(self, x: Exchange) -> bool:
        return x.path.startswith(f"{MOUNT}/")

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        """A key as a bearer token; the upload URL a 302 gave is presigned (no key)."""
        if x.path.startswith(f"{MOUNT}/upload/"):
            return None
        return super().authorise(x, api_key)

    def base_url(self, url: str) -> str:
        return url + MOUNT  # the SDK adds /v1 (and /v2)

    def environment(self, url: str) -> dict[str, str]:
        return {"TOGETHER_BASE_URL": self.base_url(url)}

    def model_known(self, name: str) -> bool:
        return self.store.known_model(name) or self.store.known_model(f"together/{name}")

    # files ----------------------------------------------------------------------
    def _fields(self, x: Exchange) -> dict[str, str]:
        if x.header("Content-Type").startswith("multipart/"):
            return multipart(x.header("Content-Type"), x.body)[0]
        found = x.json() if x.body else {}
        return {k: str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def start_upload(self, x: Exchange) -> Reply:
        fields = self._fields(x)
        for key in ("file_name", "purpose", "checksum"):
            if not fields.get(key):
                raise ApiFailure(400, f"Missing required field: {key}", param=key)
        existing = self.by_checksum.get(fields["checksum"])
        if existing is not None and existing in self.book.files:
            return Reply({"message": "File already exists", "file_id": existing}, 409)
        file_id = "file-" + self.store.decide.token(ALNUM, 24).lower()
        self.uploads[file_id] = (fields["file_name"], fields["purpose"], fields["checksum"])
        where = f"{x.base}{MOUNT}/upload/{file_id}"
        return Reply(b"", 302, {"Location": where, "X-Together-File-Id": file_id})

    def put_upload(self, x: Exchange, file_id: str) -> Reply:
        if file_id not in self.uploads:
            raise ApiFailure(404, "No such upload")
        if len(x.body) > MAX_BYTES:
            raise ApiFailure(413, f"File size {len(x.body)} bytes exceeds the 100 MB limit")
        self.originals[file_id] = x.body
        return Reply(b"", 200)

    def preprocess(self, x: Exchange, file_id: str) -> Reply:
        if file_id not in self.uploads or file_id not in self.originals:
            raise ApiFailure(404, f"File {file_id} not found")
        name, purpose, checksum = self.uploads.pop(file_id)
        data = self.originals[file_id]
        if hashlib.sha256(data).hexdigest() != checksum:  # the SDK sends the sha256
            raise ApiFailure(400, "Checksum mismatch: the file was not received whole")
        lines = b"".join(_as_openai_line(raw) + b"\n" for raw in data.splitlines() if raw.strip())
        made = self.book.upload(name, "batch" if purpose == "batch-api" else purpose, lines, None)
        # The book's file is this file: Together's id, its bytes as uploaded.
        stored = self.book.files.pop(made["id"])
        stored.id = file_id
        self.book.files[file_id] = stored
        self.by_checksum[checksum] = file_id
        return Reply(self._file(file_id))

    def _file(self, file_id: str) -> dict[str, Any]:
        f = self.book.get_file(file_id)
        data = self.originals.get(file_id, f.data)
        return {
            "id": f.id,
            "object": "file",
            "bytes": len(data),
            "created_at": f.created_at,
            "filename": f.filename,
            "FileType": "jsonl",
            "purpose": "batch-api" if f.purpose == "batch" else f.purpose,
            "processing_status": "COMPLETED",
        }

    def list_files(self, x: Exchange) -> Reply:
        return Reply({"data": [self._file(i) for i in reversed(list(self.book.files))]})

    def get_file(self, x: Exchange, file_id: str) -> Reply:
        return Reply(self._file(file_id))

    def content(self, x: Exchange, file_id: str) -> Reply:
        if file_id in self.originals:
            return Reply(self.originals[file_id], file=True)
        return Reply(self.book.read_file(file_id), file=True)

    def delete_file(self, x: Exchange, file_id: str) -> Reply:
        self.book.delete_file(file_id)
        self.originals.pop(file_id, None)
        return Reply({"id": file_id, "deleted": True})

    # batches --------------------------------------------------------------------
    def _job(self, batch: dict[str, Any]) -> dict[str, Any]:
        counts = batch.get("request_counts") or {}
        total = int(counts.get("total") or 0)
        ran = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
        errors = (batch.get("errors") or {}).get("data") or []
        f = self.book.files.get(str(batch.get("input_file_id")))
        ended = batch.get("completed_at") or batch.get("failed_at") or batch.get("cancelled_at")
        return {
            "id": batch["id"],
            "user_id": "user_emulator",
            "input_file_id": batch.get("input_file_id"),
            "file_size_bytes": len(self.originals.get(f.id, f.data)) if f else None,
            "status": STATUS[str(batch["status"])],
            "job_deadline": _iso(batch.get("expires_at")),
            "created_at": _iso(batch.get("created_at")),
            "endpoint": ENDPOINT,
            "progress": 100.0 * ran / total if total else 0.0,
            "model_id": self.model_ids.get(str(batch["id"])),
            "output_file_id": batch.get("output_file_id"),
            "error_file_id": batch.get("error_file_id"),
            "error": "; ".join(str(e.get("message")) for e in errors) or None,
            "completed_at": _iso(ended or batch.get("expired_at")),
        }

    def create_batch(self, x: Exchange) -> Reply:
        payload = x.json()
        if not isinstance(payload, dict):
            raise ApiFailure(400, "Request body must be a JSON object")
        if payload.get("endpoint") != ENDPOINT:
            raise ApiFailure(
                400, f"Invalid endpoint: {payload.get('endpoint')!r}", param="endpoint"
            )
        model_id = payload.get("model_id")
        if model_id is not None and (
            not isinstance(model_id, str) or not self.model_known(model_id)
        ):
            raise ApiFailure(404, f"Model {model_id} not found", code="model_not_found")
        made = self.book.create_batch(
            {
                "input_file_id": payload.get("input_file_id"),
                "endpoint": ENDPOINT,
                "completion_window": payload.get("completion_window") or "24h",
            }
        )
        if model_id is not None:  # kept and shown, as the SDK's BatchJob.model_id
            self.model_ids[str(made["id"])] = model_id
        return Reply({"job": self._job(made), "warning": None}, 201)

    def list_batches(self, x: Exchange) -> Reply:
        found = self.book.list_batches(10**9, None)["data"]
        return Reply([self._job(b) for b in found])

    def get_batch(self, x: Exchange, batch_id: str) -> Reply:
        return Reply(self._job(self.book.batch_obj(batch_id)))

    def cancel(self, x: Exchange, batch_id: str) -> Reply:
        return Reply(self._job(self.book.cancel(batch_id)))

    # models ---------------------------------------------------------------------
    def _supported(self, name: str) -> dict[str, Any]:
        return {
            "id": name,
            "baseModel": "",
            "baseModelId": "",
            "capabilities": ["CAPABILITY_CHAT"],
            "createdAt": "2026-01-01T00:00:00Z",
            "deploymentProfiles": [],
            "displayName": name,
        }

    def models(self, x: Exchange) -> Reply:
        names = [n.removeprefix("together/") for n in self.store.catalogue.listed("together/")]
        return Reply({"data": [self._supported(n) for n in names], "next_cursor": None})

    def model(self, x: Exchange, name: str) -> Reply:
        name = unquote(name)
        if not self.model_known(name):
            raise ApiFailure(404, f"Model {name} not found", code="model_not_found")
        return Reply(self._supported(name))


def make(store: Store) -> TogetherFace:
    return TogetherFace(store)
