"""Gemini Batch Mode (the Developer API), emulated: files, batch jobs, their clock, its face.

As the service runs them (``../shared/spec/provider-batch-apis.md`` §2): the
input is a JSONL file uploaded through the Files API (resumable upload), one
``{"key", "request"}`` a line with the protobuf (snake_case) field names the
batch file parser requires, or inline requests in the create call. A job is
``BATCH_STATE_PENDING`` while its input is checked, then ``RUNNING`` with its
lines run progressively, then ``SUCCEEDED`` with a responses file (or, inline,
``inlinedResponses`` in input order); a cancel ends it ``CANCELLED`` at once
(the Developer API has no cancelling state) and the window ``EXPIRED``, each
keeping what ran. Deleting a job is the long-running operation's delete: it is
gone from the API, but a running one is not stopped by it. ``batchStats`` counts
are int64 strings. The known bad days are anomalies: ``succeeded-before-file``,
``stuck-pending`` and ``wrong-keys`` (replies under another line's key).

A call is Gemini's when it carries ``x-goog-api-key`` (or ``?key=``), or goes to
an upload session (whose URL is its credential, as at Google), on ``/v1`` or
``/v1beta``. A missing key is a 403 and a wrong one a 400 ``API key not valid``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..anomalies import missing_lines
from ..core import LOWER, ApiFailure, Store, due_lines, last_line, rfc3339
from ..face import Exchange, FaultKind, Reply, Route, route
from .gemini_model import STATUS_NAMES, run_request, sync_response

MAX_FILE_BYTES = 2 * 1024**3
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED")
V = r"(v1|v1beta)"


def error_body(status: int, message: str) -> dict[str, Any]:
    """Google's error envelope."""
    return {
        "error": {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}
    }


@dataclass
class GeminiFile:
    name: str
    display_name: str | None
    mime_type: str
    data: bytes
    created: float
    generated: bool = False  # a responses file (downloadable), not an upload

    def obj(self, base: str) -> dict[str, Any]:
        out = {
            "name": self.name,
            "displayName": self.display_name,
            "mimeType": self.mime_type,
            "sizeBytes": str(len(self.data)),
            "createTime": rfc3339(self.created),
            "updateTime": rfc3339(self.created),
            "expirationTime": rfc3339(self.created + 48 * 3600),
            "state": "ACTIVE",
            "source": "GENERATED" if self.generated else "UPLOADED",
        }
        if self.generated:
            out["downloadUri"] = f"{base}/download/v1beta/{self.name}:download?alt=media"
        return out


@dataclass
class Job:
    id: str
    model: str
    display_name: str | None
    created: float
    seq: int
    input_file: str | None  # the input's file name, or None for inline requests
    lines: list[tuple[str, Any]] = field(default_factory=list)  # (key, request)
    order: list[int] = field(default_factory=list)
    state: str = "PENDING"
    executed: int = 0
    results: dict[int, dict[str, Any]] = field(default_factory=dict)  # line index → result
    stamps: dict[str, float] = field(default_factory=dict)
    output_file: str | None = None
    output_hidden_until: float | None = None  # succeeded-before-file
    error: dict[str, Any] | None = None
    deleted: bool = False  # gone from the API, but still running if it was

    def obj(self) -> dict[str, Any]:
        ok = sum(1 for r in self.results.values() if "response" in r)
        total = len(self.lines)
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": self.model,
            "displayName": self.display_name,
            "createTime": rfc3339(self.created),
            "updateTime": rfc3339(max(self.stamps.values(), default=self.created)),
            "batchStats": {
                "requestCount": str(total),
                "pendingRequestCount": str(total - len(self.results)),
                "successfulRequestCount": str(ok),
                "failedRequestCount": str(len(self.results) - ok),
            },
            "state": f"BATCH_STATE_{self.state}",
        }
        meta["inputConfig"] = {"fileName": self.input_file} if self.input_file else {"requests": {}}
        out: dict[str, Any] = {"name": self.id, "metadata": meta, "done": self.state in ENDED}
        if self.state in ENDED:
            meta["endTime"] = rfc3339(self.stamps.get(self.state.lower()))
        if self.state in ENDED and self.output_hidden_until is None:
            if self.input_file is None:
                inlined = [self.results.get(i, {}) for i in range(len(self.lines))]
                output: dict[str, Any] = {"inlinedResponses": {"inlinedResponses": inlined}}
            else:
                output = {"responsesFile": self.output_file} if self.output_file else {}
            if output:
                meta["output"] = output
                out["response"] = {
                    "@type": "type.googleapis.com/google.ai.generativelanguage.v1main."
                    "GenerateContentBatchOutput",
                    **output,
                }
        if self.error is not None:
            out["error"] = self.error
        return out


class GeminiFace:
    """The files and batch jobs the emulated Gemini service holds, and its routes."""

    name = "gemini"

    def __init__(self, store: Store) -> None:
        self.store = store
        self.files: dict[str, GeminiFile] = {}
        self.uploads: dict[str, dict[str, Any]] = {}  # upload id → the session
        self.jobs: dict[str, Job] = {}
        self.made: list[Job] = []
        self.seq = 0

        def r(
            method: str, path: str, handle: Any, writes: bool = False, creates: bool = False
        ) -> Route:
            return route(method, path.replace("{v}", V), handle, writes, creates)

        self.routes: Sequence[Route] = [
            r("POST", r"^/upload/{v}/files$", self.upload, writes=True),
            r("GET", r"^/{v}/files$", self.list_files),
            r("GET", r"^/{v}/files/([^/:]+)$", self.get_file),
            r("DELETE", r"^/{v}/files/([^/:]+)$", self.delete_file, writes=True),
            r("GET", r"^/{v}/files/([^/:]+):download$", self.download),
            r("GET", r"^/download/{v}/files/([^/:]+):download$", self.download),
            r("POST", r"^/{v}/models/([^/:]+):batchGenerateContent$", self.create, creates=True),
            r("POST", r"^/{v}/models/([^/:]+):generateContent$", self.generate),
            r("GET", r"^/{v}/batches$", self.list_jobs),
            r("GET", r"^/{v}/batches/([^/:]+)$", self.get_job),
            r("POST", r"^/{v}/batches/([^/:]+):cancel$", self.cancel, writes=True),
            r("DELETE", r"^/{v}/batches/([^/:]+)$", self.delete_job, writes=True),
            r("GET", r"^/{v}/models$", self.models),
            r("GET", r"^/{v}/models/([^/:]+)$", self.model),
        ]

    # the face ---------------------------------------------------------------
    def claims(self, x: Exchange) -> bool:
        return (
            bool(x.header("x-goog-api-key"))
            or "key" in x.query
            or x.path.startswith(("/upload/", "/download/"))
        )

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        if x.path.startswith("/upload/") and "upload_id" in x.query:
            return None  # the session's URL is its credential
        key = x.header("x-goog-api-key") or x.query.get("key")
        if not key:
            return ApiFailure(
                403,
                "Method doesn't allow unregistered callers (callers without"
                " established identity). Please use API Key or other form of API"
                " consumer identity to call this API.",
            )
        if api_key is not None and key != api_key:
            return ApiFailure(400, "API key not valid. Please pass a valid API key.")
        return None

    def error(self, failure: ApiFailure) -> Reply:
        return Reply(
            error_body(failure.status, failure.message), failure.status, dict(failure.headers)
        )

    def fault(self, kind: FaultKind) -> ApiFailure:
        if kind == "429":
            return ApiFailure(
                429, "Resource has been exhausted (e.g. check quota).", headers={"retry-after": "0"}
            )
        if kind == "overloaded":
            return ApiFailure(503, "The model is overloaded. Please try again later.")
        return ApiFailure(
            500,
            "An internal error has occurred. Please retry or report in"
            " https://developers.generativeai.google/guide/troubleshooting",
        )

    def base_url(self, url: str) -> str:
        return url

    def ledger(self) -> list[dict[str, Any]]:
        return [
            {
                "id": j.id,
                "provider": "gemini",
                "status": j.state,
                "display_name": j.display_name,
                "custom_ids": [k for k, _ in j.lines],
                "created_at": int(j.created),
            }
            for j in self.made
        ]

    def restore(self, state: Mapping[str, Any]) -> None:
        for f in state.get("files", []):
            self.files[f["name"]] = GeminiFile(
                f["name"],
                f.get("display_name"),
                "application/jsonl",
                f["data"].encode("utf-8"),
                self.store.now(),
            )
        for j in state.get("jobs", []):
            self._add(
                j["name"],
                j["model"],
                j.get("display_name"),
                float(j["created_at"]),
                j["input_file"],
            )

    def _id(self, prefix: str, n: int) -> str:
        return prefix + self.store.decide.token(LOWER, n)

    # files ------------------------------------------------------------------
    def upload(self, x: Exchange, version: str) -> Reply:
        """The resumable protocol: ``start`` opens a session (its URL in a header), then
        ``upload`` chunks at their offsets, the last with ``finalize``."""
        command = x.header("X-Goog-Upload-Command")
        if "upload_id" not in x.query:
            if command != "start":
                raise ApiFailure(400, "X-Goog-Upload-Command must be start")
            size = int(x.header("X-Goog-Upload-Header-Content-Length") or 0)
            if size > MAX_FILE_BYTES:
                raise ApiFailure(400, f"File too large: {size} bytes, the limit is 2 GB")
            meta = x.json()
            file = ((meta or {}).get("file") or {}) if isinstance(meta, dict) else {}
            upload_id = self._id("", 24)
            self.uploads[upload_id] = {
                "display": file.get("display_name", file.get("displayName")),
                "mime": x.header("X-Goog-Upload-Header-Content-Type"),
                "size": size,
                "data": b"",
            }
            url = f"{x.base}/upload/{version}/files?upload_id={upload_id}&upload_protocol=resumable"
            return Reply(b"", headers={"x-goog-upload-url": url, "x-goog-upload-status": "active"})
        session = self.uploads.get(x.query["upload_id"])
        if session is None:
            raise ApiFailure(404, "The upload session was not found.")
        offset = int(x.header("X-Goog-Upload-Offset") or 0)
        if offset > len(session["data"]):
            raise ApiFailure(400, f"Invalid offset {offset}: {len(session['data'])} received")
        session["data"] = session["data"][:offset] + x.body  # a chunk sent again replaces itself
        if "finalize" not in command:
            return Reply(b"", headers={"x-goog-upload-status": "active"})
        del self.uploads[x.query["upload_id"]]
        if len(session["data"]) != session["size"]:
            raise ApiFailure(400, "The upload ended before its declared length.")
        mime = {"jsonl": "application/jsonl"}.get(session["mime"], session["mime"])
        f = GeminiFile(
            self._id("files/", 12), session["display"], mime, session["data"], self.store.now()
        )
        self.files[f.name] = f
        return Reply({"file": f.obj(x.base)}, headers={"x-goog-upload-status": "final"})

    def _file(self, name: str) -> GeminiFile:
        found = self.files.get(name)
        if found is None:
            raise ApiFailure(404, f"Requested entity was not found: {name}")
        return found

    def list_files(self, x: Exchange, version: str) -> Reply:
        size = x.int_param("pageSize", 10, 1, 100, coerce=True)
        ordered = sorted(self.files.values(), key=lambda f: f.created, reverse=True)
        chunk, token = self._page(ordered, size, x.query.get("pageToken"))
        out: dict[str, Any] = {"files": [f.obj(x.base) for f in chunk]}
        if token is not None:
            out["nextPageToken"] = token
        return Reply(out)

    def get_file(self, x: Exchange, version: str, name: str) -> Reply:
        return Reply(self._file(f"files/{name}").obj(x.base))

    def delete_file(self, x: Exchange, version: str, name: str) -> Reply:
        self._file(f"files/{name}")
        del self.files[f"files/{name}"]
        return Reply({})

    def download(self, x: Exchange, version: str, name: str) -> Reply:
        if x.query.get("alt") != "media":
            raise ApiFailure(400, "Download requires alt=media.")
        return Reply(self._file(f"files/{name}").data, file=True)

    # jobs -------------------------------------------------------------------
    def _known(self, model: str) -> str:
        name = model.removeprefix("models/")
        if not self.store.known_model(name):
            raise ApiFailure(
                404,
                f"models/{name} is not found for API version v1beta, or is not"
                " supported for batchGenerateContent. Call ListModels to see the list"
                " of available models and their supported methods.",
            )
        return name

    def create(self, x: Exchange, version: str, model: str) -> Reply:
        name = self._known(model)
        payload = x.json()
        batch = payload.get("batch") if isinstance(payload, dict) else None
        if not isinstance(batch, dict):
            raise ApiFailure(400, "Invalid JSON payload received. 'batch' is required.")
        source = batch.get("inputConfig") or batch.get("input_config") or {}
        file_name = source.get("fileName", source.get("file_name"))
        inline = (source.get("requests") or {}).get("requests")
        if (file_name is None) == (inline is None):
            raise ApiFailure(400, "inputConfig needs exactly one of fileName or requests")
        if file_name is not None:
            self._file(file_name)
        display = batch.get("displayName", batch.get("display_name"))
        job = self._add(self._id("batches/", 20), name, display, self.store.now(), file_name)
        if inline is not None:
            job.lines = [
                (str(i), r.get("request") if isinstance(r, dict) else r)
                for i, r in enumerate(inline)
            ]
        return Reply(job.obj())

    def _add(
        self, job_id: str, model: str, display: str | None, created: float, source: str | None
    ) -> Job:
        self.seq += 1
        job = Job(
            job_id, f"models/{model.removeprefix('models/')}", display, created, self.seq, source
        )
        self.jobs[job.id] = job
        self.made.append(job)
        return job

    def _job(self, name: str) -> Job:
        found = self.jobs.get(name)
        if found is None or found.deleted:
            raise ApiFailure(404, f"Requested entity was not found: {name}")
        return found

    @staticmethod
    def _page(items: list[Any], size: int, token: str | None) -> tuple[list[Any], str | None]:
        try:
            start = int(token) if token else 0
        except ValueError:
            raise ApiFailure(400, f"Invalid page token {token!r}") from None
        chunk = items[start : start + size]
        return chunk, str(start + size) if start + size < len(items) else None

    def list_jobs(self, x: Exchange, version: str) -> Reply:
        size = x.int_param("pageSize", 50, 1, 1000, coerce=True)
        ordered = sorted(
            (j for j in self.jobs.values() if not j.deleted), key=lambda j: j.seq, reverse=True
        )
        chunk, token = self._page(ordered, size, x.query.get("pageToken"))
        out: dict[str, Any] = {"operations": [j.obj() for j in chunk]}
        if token is not None:
            out["nextPageToken"] = token
        return Reply(out)

    def get_job(self, x: Exchange, version: str, name: str) -> Reply:
        return Reply(self._job(f"batches/{name}").obj())

    def cancel(self, x: Exchange, version: str, name: str) -> Reply:
        job = self._job(f"batches/{name}")
        if job.state in ENDED:
            raise ApiFailure(400, f"Batch batches/{name} has already ended ({job.state}).")
        self._end(job, "CANCELLED", self.store.now())
        return Reply({})

    def delete_job(self, x: Exchange, version: str, name: str) -> Reply:
        self._job(f"batches/{name}").deleted = True  # the operation is forgotten, not stopped
        return Reply({})

    # models -----------------------------------------------------------------
    def _model(self, name: str) -> dict[str, Any]:
        return {
            "name": f"models/{name}",
            "displayName": name,
            "version": "001",
            "inputTokenLimit": 1048576,
            "outputTokenLimit": 65536,
            "supportedGenerationMethods": ["generateContent", "batchGenerateContent"],
        }

    def model(self, x: Exchange, version: str, name: str) -> Reply:
        if not self.store.known_model(name):
            raise ApiFailure(
                404,
                f"models/{name} is not found for API version {version}, or is"
                " not supported for generateContent. Call ListModels to see the"
                " list of available models and their supported methods.",
            )
        return Reply(self._model(name))

    def models(self, x: Exchange, version: str) -> Reply:
        return Reply({"models": [self._model(m) for m in self.store.catalogue.listed("gemini")]})

    def generate(self, x: Exchange, version: str, model: str) -> Reply:
        """The synchronous generateContent, answered by the same simulated model."""
        name = self._known(model)
        request = x.json()
        line = f"sync/{self.store.decide.nth('gemini-generate')}"
        result = run_request(self.store, request, f"models/{name}", False, line)
        if "error" in result:
            return Reply(result, int(result["error"].get("code") or 500))
        return Reply(sync_response(result))

    # the clock --------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        settings = self.store.settings
        for job in sorted(self.jobs.values(), key=lambda j: j.seq):
            if job.output_hidden_until is not None and (flush or now >= job.output_hidden_until):
                job.output_hidden_until = None  # the responses file is named at last
            deadline = job.created + settings.completion_window
            stuck = self.store.anomaly("stuck-pending", job.id)
            if (
                job.state == "PENDING"
                and not stuck
                and (flush or now >= job.created + settings.latency)
            ):
                self._validate(job, now if flush else min(job.created + settings.latency, deadline))
            if job.state == "RUNNING":
                start = job.stamps["running"]
                due = due_lines(len(job.lines), start, min(now, deadline), settings.latency, flush)
                while job.executed < due:
                    self._execute(job, job.order[job.executed])
                    job.executed += 1
                if job.executed >= len(job.lines):
                    last = last_line(start, len(job.lines), settings.latency)
                    self._end(job, "SUCCEEDED", now if flush else min(now, last))
            if job.state in ("PENDING", "RUNNING") and now >= deadline and not flush:
                self._end(job, "EXPIRED", deadline)

    def _validate(self, job: Job, now: float) -> None:
        if job.input_file is not None:
            f = self.files.get(job.input_file)
            problem = None if f is not None else "The input file was deleted."
            seen: set[str] = set()
            for n, raw in enumerate((f.data if f else b"").splitlines(), 1):
                try:
                    line = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    problem = f"Invalid JSON on line {n} of the input file."
                    break
                key = line.get("key") if isinstance(line, dict) else None
                if not isinstance(key, str) or "request" not in line:
                    problem = f"Line {n} of the input file needs a string key and a request."
                    break
                if key in seen:
                    problem = f"Duplicate key {key!r} on line {n} of the input file."
                    break
                seen.add(key)
                job.lines.append((key, line["request"]))
            if problem is not None or not job.lines:
                job.lines = []
                job.error = {"code": 400, "message": problem or "The input file is empty."}
                job.state = "FAILED"
                job.stamps["failed"] = now
                return
        job.order = self.store.decide.shuffled(range(len(job.lines)), job.id)
        job.state = "RUNNING"
        job.stamps["running"] = now

    def _execute(self, job: Job, index: int) -> None:
        key, request = job.lines[index]
        result = run_request(
            self.store, request, job.model, job.input_file is not None, f"{job.id}/{key}"
        )
        job.results[index] = result
        status = 200 if "response" in result else int(result["error"].get("code") or 500)
        self.store.executed("gemini", job.id, key, status)

    def _end(self, job: Job, state: str, now: float) -> None:
        job.state = state
        job.stamps[state.lower()] = now
        if job.input_file is None or not job.results:
            return
        store = self.store
        keyed = [(job.lines[i][0], result) for i, result in job.results.items()]
        if store.anomaly("wrong-keys", job.id) and len(keyed) > 1:
            # python-genai#1909: replies under another line's key (here, each moved one on).
            keys = [k for k, _ in keyed]
            keyed = [(keys[(n + 1) % len(keys)], result) for n, (_, result) in enumerate(keyed)]
        gone = missing_lines(store, job.id, [k for k, r in keyed if "response" in r])
        lines = [json.dumps({"key": key, **result}) for key, result in keyed if key not in gone]
        if store.anomaly("empty-results", job.id):
            lines = []
        lines = store.mangled("responses", store.decide.shuffled(lines, job.id))  # in any order
        name = f"files/batch-{job.id.removeprefix('batches/')}"
        data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
        self.files[name] = GeminiFile(name, None, "application/jsonl", data, now, generated=True)
        job.output_file = name
        if state == "SUCCEEDED" and store.anomaly("succeeded-before-file", job.id):
            job.output_hidden_until = now + 4 * max(store.settings.latency, 0.05)


def make(store: Store) -> GeminiFace:
    return GeminiFace(store)
