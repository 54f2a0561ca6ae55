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

from collections.abc import Mapping, Sequence
from typing import Any

from ..core import LOWER, ApiFailure, Store
from ..face import Exchange, FaultKind, Reply, Route, route
from .gemini_book import ENDED, MAX_FILE_BYTES, GeminiBook, GeminiFile, Job, V, error_body
from .gemini_model import run_request, sync_response


class GeminiFace(GeminiBook):
    """The files and batch jobs the emulated Gemini service holds, and its routes."""

    name = "gemini"
    key_variable = "GEMINI_API_KEY"

    def __init__(self, store: Store) -> None:
        super().__init__(store)

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
        """A call with Google's key, or on the Gemini API's own paths (``/v1beta/``, the
        SDK's version) even without one: it is answered in Google's envelope (403 for a
        missing key), never as another service's unknown URL."""
        return (
            bool(x.header("x-goog-api-key"))
            or "key" in x.query
            or x.path.startswith(("/upload/", "/download/", "/v1beta/"))
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

    def environment(self, url: str) -> dict[str, str]:
        return {"GOOGLE_GEMINI_BASE_URL": url}

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
        found = self._file(f"files/{name}")
        # empty-results: the file reads empty while that bad day lasts, whole after it
        empty = found.job is not None and self.store.anomaly("empty-results", found.job)
        return Reply(b"" if empty else found.data, file=True)

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
        """The synchronous generateContent, answered by the same simulated model; with
        ``serviceTier: flex``, at the batch price, slower, and refused 429 when flex has
        no capacity (a seeded share of calls: "best-effort (sheddable)").
        ``X-Client-Request-Id`` (which the service ignores) names the call in the
        ledger."""
        name = self._known(model)
        request = x.json()
        tier = request.pop("serviceTier", None) if isinstance(request, dict) else None
        call = x.header("X-Client-Request-Id") or f"call-{self.store.decide.nth('generate')}"
        if tier == "flex" and self.store.shed(call):
            raise ApiFailure(429, "Flex capacity is exhausted; please retry later.")
        result = run_request(self.store, request, f"models/{name}", False, f"sync/{call}")
        status = int(result["error"].get("code") or 500) if "error" in result else 200
        self.store.executed("gemini", tier or "sync", call, status, result.get("response"))
        if "error" in result:
            return Reply(result, status)
        return Reply(sync_response(result))


def make(store: Store) -> GeminiFace:
    return GeminiFace(store)
