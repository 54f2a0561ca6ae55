"""Mistral's face: its Files and Batch jobs calls as the mistralai SDK makes them.

As the service documents them (docs.mistral.ai batch processing; the SDK's types):

- a file is uploaded multipart (``purpose=batch``); its lines are ``{"custom_id",
  "body"}``, the body without a model;
- ``POST /v1/batch/jobs`` names the input files (one or several, read one after the
  other) or carries the ``requests`` inline (since 2026-01-19; ``custom_id`` optional),
  the endpoint, the model (one a job),
  ``metadata`` (kept, and listed) and ``timeout_hours``; a job says ``QUEUED``,
  ``RUNNING``, ``SUCCESS``, ``FAILED``, ``TIMEOUT_EXCEEDED``,
  ``CANCELLATION_REQUESTED`` or ``CANCELLED``, with its request counts, its output and
  error files;
- ``GET /v1/batch/jobs`` pages (``page``, ``page_size``, ``created_after``) and says the
  ``total``; ``DELETE /v1/batch/jobs/{id}`` deletes a job; ``GET /v1/files`` pages the
  files (``purpose``, ``sample_type``) and ``GET /v1/files/{id}`` retrieves one (the
  SDK's ``FileSchema``: a job's outputs are ``batch_result``/``batch_error``);
  models are ``GET /v1/models/{id}`` cards.

The jobs run in an OpenAI book (lifecycle, bad days, result lines as OpenAI's, which
is how Mistral writes them); each line is handed to it with the job's model and
endpoint. On this emulator's port the face lives under ``/mistral``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from ..core import HEX, ApiFailure, Store
from ..face import Exchange, Reply, route
from ..multipart import multipart
from .openai import OPENAI_LIMITS, OpenAIFace
from .openai.validate import Limits

MOUNT = "/mistral"
UNAUTHORIZED = "unauthorized"  # a refused key: its own body (:meth:`MistralFace.error`)
ENDPOINT = "/v1/chat/completions"
MISTRAL_LIMITS = Limits(
    max_lines=1_000_000, endpoints={ENDPOINT: ENDPOINT}, file_expiry=OPENAI_LIMITS.file_expiry
)
STATUS = {
    "validating": "QUEUED",
    "in_progress": "RUNNING",
    "finalizing": "RUNNING",
    "cancelling": "CANCELLATION_REQUESTED",
    "completed": "SUCCESS",
    "failed": "FAILED",
    "expired": "TIMEOUT_EXCEEDED",
    "cancelled": "CANCELLED",
}


def _ended(data: bytes) -> bytes:
    return data if not data or data.endswith(b"\n") else data + b"\n"


def _with_model(data: bytes, model: str) -> bytes:
    """The job's lines as the OpenAI book reads them: the job's model in each body, the
    job's endpoint as each url. A line that is not Mistral's (no id, no body, a body
    that names a model) is handed over as it is, and fails the job's validation."""
    out = []
    for raw in data.splitlines():
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            out.append(raw)
            continue
        body = line.get("body") if isinstance(line, dict) else None
        if (
            not isinstance(body, dict)
            or "model" in body
            or not isinstance(line.get("custom_id"), str)
        ):
            out.append(raw)
            continue
        moved = {**line, "method": "POST", "url": ENDPOINT, "body": {"model": model, **body}}
        out.append(json.dumps(moved).encode())
    return b"".join(x + b"\n" for x in out)


class MistralFace(OpenAIFace):
    name = "mistral"
    key_variable = "MISTRAL_API_KEY"

    def __init__(self, store: Store) -> None:
        super().__init__(store, prefix=f"{MOUNT}/v1", limits=MISTRAL_LIMITS, provider="mistral")
        self.jobs: dict[str, dict[str, Any]] = {}  # batch id → model, metadata, input files
        self.uploaded: set[str] = set()  # the files a client uploaded (not the book's copies)
        p = "^" + MOUNT + "/v1"
        self.routes = [
            route("POST", p + r"/files$", self.upload, writes=True),
            route("GET", p + r"/files$", self.list_files),
            route("GET", p + r"/files/([^/]+)$", self.get_file),
            route("GET", p + r"/files/([^/]+)/content$", self.content),
            route("DELETE", p + r"/files/([^/]+)$", self.delete_file, writes=True),
            route("POST", p + r"/batch/jobs$", self.create_batch, creates=True),
            route("GET", p + r"/batch/jobs$", self.list_batches),
            route("GET", p + r"/batch/jobs/([^/]+)$", self.get_batch),
            route("DELETE", p + r"/batch/jobs/([^/]+)$", self.delete_batch, writes=True),
            route("POST", p + r"/batch/jobs/([^/]+)/cancel$", self.cancel, writes=True),
            route("GET", p + r"/models$", self.models),
            route("GET", p + r"/models/(.+)$", self.model),
        ]

    def claims(self, x: Exchange) -> bool:
        return x.path.startswith(f"{MOUNT}/")

    def key_refused(self, token: str) -> ApiFailure:
        """Mistral's 401, without a key or with one it does not know: ``Unauthorized``,
        with the request's id (as its API answers it, e.g. cline/cline#1734)."""
        return ApiFailure(401, "Unauthorized", kind=UNAUTHORIZED)

    def error(self, failure: ApiFailure) -> Reply:
        """Mistral's error body: ``{"object": "error", "message", "type", "param", "code"}``;
        a refused key's is ``{"message": "Unauthorized", "request_id"}``."""
        if failure.kind == UNAUTHORIZED:
            said = {"message": failure.message, "request_id": self.store.decide.token(HEX, 32)}
            return Reply(said, failure.status, dict(failure.headers))
        body = {
            "object": "error",
            "message": failure.message,
            "type": failure.kind
            or ("invalid_request_error" if failure.status < 500 else "api_error"),
            "param": failure.param,
            "code": failure.code,
        }
        return Reply(body, failure.status, dict(failure.headers))

    def base_url(self, url: str) -> str:
        return url + MOUNT  # the SDK adds /v1

    def environment(self, url: str) -> dict[str, str]:
        return {"MISTRAL_BASE_URL": self.base_url(url)}

    def model_known(self, name: str) -> bool:
        return self.store.known_model(name) or self.store.known_model(f"mistral/{name}")

    # files ----------------------------------------------------------------------
    def upload(self, x: Exchange) -> Reply:
        fields, files = multipart(x.header("Content-Type"), x.body)
        if "file" not in files:
            raise ApiFailure(422, "Field required: file", param="file")
        purpose = fields.get("purpose", "fine-tune")
        name, data = files["file"]
        made = self.book.upload(name, "batch" if purpose == "batch" else "fine-tune", data, None)
        self.uploaded.add(made["id"])
        return Reply(self._file(made["id"]))

    def _file(self, file_id: str) -> dict[str, Any]:
        """A file as the SDK's ``FileSchema`` holds one: a job's output and error files
        are the service's own (``batch_result``, ``batch_error``, source ``mistral``)."""
        f = self.book.get_file(file_id)
        mine = file_id in self.uploaded
        kind = "batch_request" if f.purpose == "batch" else "instruct"
        if not mine:
            kind = "batch_error" if file_id in self.error_files() else "batch_result"
        return {
            "id": f.id,
            "object": "file",
            "bytes": len(f.data),
            "created_at": f.created_at,
            "filename": f.filename,
            "purpose": "batch" if f.purpose != "fine-tune" else "fine-tune",
            "sample_type": kind,
            "source": "upload" if mine else "mistral",
            "num_lines": f.data.count(b"\n"),
            "mimetype": "application/jsonl",
            "signature": None,
            "expires_at": None,
            "visibility": "workspace",
        }

    def error_files(self) -> set[str]:
        return {str(b.error_file_id) for b in self.book.batches.values() if b.error_file_id}

    def shown(self, file_id: str) -> bool:
        """A file the list shows: one uploaded, or a job's output or error file (not the
        copy of a job's lines the book runs)."""
        if file_id in self.uploaded:
            return True
        return any(
            file_id in (b.output_file_id, b.error_file_id) for b in self.book.batches.values()
        )

    def list_files(self, x: Exchange) -> Reply:
        """The SDK's ``files.list``: a page (``page``, ``page_size``), newest first, of the
        files of a ``purpose`` and ``sample_type`` if named, with the ``total``."""
        page = x.int_param("page", 0, 0, 10**6, coerce=True)
        size = x.int_param("page_size", 100, 1, 1000, coerce=True)
        kinds = {x.query["sample_type"]} if x.query.get("sample_type") else set()
        found = [self._file(i) for i in reversed(list(self.book.files)) if self.shown(i)]
        found = [
            f
            for f in found
            if (not x.query.get("purpose") or f["purpose"] == x.query["purpose"])
            and (not kinds or f["sample_type"] in kinds)
        ]
        chunk = found[page * size : (page + 1) * size]
        return Reply({"object": "list", "data": chunk, "total": len(found)})

    def get_file(self, x: Exchange, file_id: str) -> Reply:
        if not self.shown(file_id):
            raise ApiFailure(404, f"File {file_id} not found")
        return Reply({**self._file(file_id), "deleted": False})

    def delete_file(self, x: Exchange, file_id: str) -> Reply:
        self.book.delete_file(file_id)
        self.uploaded.discard(file_id)
        return Reply({"id": file_id, "object": "file", "deleted": True})

    # jobs -----------------------------------------------------------------------
    def _job(self, batch: dict[str, Any]) -> dict[str, Any]:
        counts = batch.get("request_counts") or {}
        made = self.jobs.get(batch["id"], {})
        errors = (batch.get("errors") or {}).get("data") or []
        return {
            "id": batch["id"],
            "object": "batch",
            "input_files": made.get("input_files", []),
            "metadata": made.get("metadata"),
            "endpoint": ENDPOINT,
            "model": made.get("model"),
            "agent_id": None,
            "output_file": batch.get("output_file_id"),
            "error_file": batch.get("error_file_id"),
            "errors": [{"message": str(e.get("message")), "count": 1} for e in errors],
            "outputs": None,
            "status": STATUS[str(batch["status"])],
            "created_at": batch.get("created_at"),
            "total_requests": int(counts.get("total") or 0),
            "completed_requests": int(counts.get("completed") or 0)
            + int(counts.get("failed") or 0),
            "succeeded_requests": int(counts.get("completed") or 0),
            "failed_requests": int(counts.get("failed") or 0),
            "started_at": batch.get("in_progress_at"),
            "completed_at": batch.get("completed_at") or batch.get("failed_at"),
        }

    def create_batch(self, x: Exchange) -> Reply:
        payload = x.json()
        if not isinstance(payload, dict):
            raise ApiFailure(422, "Request body must be a JSON object")
        files, model = payload.get("input_files"), payload.get("model")
        inline = payload.get("requests")
        if payload.get("endpoint") != ENDPOINT:
            raise ApiFailure(
                422, f"Invalid endpoint: {payload.get('endpoint')!r}", param="endpoint"
            )
        if not isinstance(model, str):
            raise ApiFailure(422, "A job names its model here", param="model")
        if (files is None) == (inline is None):  # the SDK: input files, or inline requests
            raise ApiFailure(422, "A job takes either input_files or requests", param="input_files")
        if files is not None and (not isinstance(files, list) or not files):
            raise ApiFailure(422, "input_files must name at least one file", param="input_files")
        if inline is not None and (not isinstance(inline, list) or not inline):
            raise ApiFailure(422, "requests must hold at least one request", param="requests")
        if not self.model_known(model):
            raise ApiFailure(400, f"Invalid model: {model}", code="1500")
        if files is not None:  # several files: their lines, one after the other
            data = b"".join(_ended(self.book.get_file(str(f)).data) for f in files)
            name = self.book.get_file(str(files[0])).filename
        else:  # inline (since 2026-01-19): each {custom_id?, body}, an id given if none
            data = b"".join(
                json.dumps({"custom_id": str(i), **r} if isinstance(r, dict) else r).encode()
                + b"\n"
                for i, r in enumerate(inline or [])
            )
            name = "inline.jsonl"
        # The job's lines, with its model, as a file of the book's own.
        moved = self.book.upload(name, "batch", _with_model(data, model), None)
        made = self.book.create_batch(
            {
                "input_file_id": moved["id"],
                "endpoint": ENDPOINT,
                "completion_window": "24h",
                "metadata": payload.get("metadata"),
            }
        )
        self.jobs[made["id"]] = {
            "model": model,
            "metadata": payload.get("metadata"),
            "input_files": files or [],
        }
        return Reply(self._job(made))

    def delete_batch(self, x: Exchange, batch_id: str) -> Reply:
        """The SDK's ``batch.jobs.delete``: the job is gone from the list (its files stay)."""
        self.book.batch_obj(batch_id)  # 404 for a job it does not know
        del self.book.batches[batch_id]
        self.jobs.pop(batch_id, None)
        return Reply({"id": batch_id, "object": "batch", "deleted": True})

    def list_batches(self, x: Exchange) -> Reply:
        page = x.int_param("page", 0, 0, 10**6, coerce=True)
        size = x.int_param("page_size", 100, 1, 1000, coerce=True)
        after = x.query.get("created_after")
        since = datetime.fromisoformat(after.replace("Z", "+00:00")).timestamp() if after else 0
        found = [
            b
            for b in self.book.list_batches(10**9, None)["data"]
            if (b.get("created_at") or 0) >= since
        ]
        chunk = found[page * size : (page + 1) * size]
        return Reply({"object": "list", "data": [self._job(b) for b in chunk], "total": len(found)})

    def get_batch(self, x: Exchange, batch_id: str) -> Reply:
        return Reply(self._job(self.book.batch_obj(batch_id)))

    def cancel(self, x: Exchange, batch_id: str) -> Reply:
        return Reply(self._job(self.book.cancel(batch_id)))

    # models ---------------------------------------------------------------------
    def _card(self, name: str) -> dict[str, Any]:
        return {
            "id": name,
            "object": "model",
            "created": 1767225600,
            "owned_by": "mistralai",
            "type": "base",
            "capabilities": {"completion_chat": True},
        }

    def models(self, x: Exchange) -> Reply:
        names = [n.removeprefix("mistral/") for n in self.store.catalogue.listed("mistral/")]
        return Reply({"object": "list", "data": [self._card(n) for n in names]})

    def model(self, x: Exchange, name: str) -> Reply:
        name = unquote(name)
        if not self.model_known(name):
            raise ApiFailure(404, f"Model {name} not found", code="1500")
        return Reply(self._card(name))


def make(store: Store) -> MistralFace:
    return MistralFace(store)
