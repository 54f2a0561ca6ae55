"""Fireworks batch inference, emulated: datasets, batch inference jobs, their clock, its face.

As ``../shared/spec/provider-batch-apis.md`` §3 and the fireworks-ai SDK have it:
a dataset is created, then its JSONL uploaded in one request (150 MB at most)
or, for larger files, through signed upload URLs (``:getUploadEndpoint``, a PUT
per file, ``:validateUpload``); its lines are ``{"custom_id", "body"}`` with no
``model``, ``method`` or ``url`` (the model and the shared
``inferenceParameters`` are the job's). A job is created with an id the caller
chooses (a second create of that id is a 409), goes ``JOB_STATE_VALIDATING`` ->
``JOB_STATE_RUNNING`` (lines run progressively, ``jobProgress`` counting them)
-> ``JOB_STATE_COMPLETED``, and writes its output dataset:
``BIJOutputSet.jsonl`` (``{"custom_id", "response"}``) and ``error-data.jsonl``
(``{"custom_id", "error"}``), fetched through signed URLs
(``:getDownloadEndpoint``). A cancel goes through ``JOB_STATE_CANCELLING`` to
``JOB_STATE_CANCELLED``, and the window ends a job ``JOB_STATE_EXPIRED``, each
keeping the rows that ran; deleting a running job stops it
(``JOB_STATE_DELETING``, then gone). Lists page at most 200 (larger sizes are
coerced to 200), jobs oldest first unless ``orderBy`` says otherwise.

Paths are under ``/v1/accounts/{id}/``, the key a bearer token; the signed URLs
(``/_fireworks/...``) are their own credential.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core import HEX, LOWER, ApiFailure, Store
from ..face import Exchange, FaultKind, Reply, Route, bearer, route
from ..multipart import multipart
from .fireworks_book import (
    ENDED,
    MAX_UPLOAD_BYTES,
    A,
    Dataset,
    FireworksBook,
    Job,
    _page,
    error_body,
)


class FireworksFace(FireworksBook):
    """The datasets and batch inference jobs the emulated service holds, and its routes."""

    name = "fireworks"
    key_variable = "FIREWORKS_API_KEY"

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.routes: Sequence[Route] = [
            route("POST", A + r"/datasets$", self.create_dataset, writes=True),
            route("GET", A + r"/datasets$", self.list_datasets),
            route("GET", A + r"/datasets/([^/:]+)$", self.get_dataset),
            route("DELETE", A + r"/datasets/([^/:]+)$", self.delete_dataset, writes=True),
            route("POST", A + r"/datasets/([^/:]+):upload$", self.upload, writes=True),
            route(
                "POST",
                A + r"/datasets/([^/:]+):getUploadEndpoint$",
                self.upload_endpoint,
                writes=True,
            ),
            route(
                "POST", A + r"/datasets/([^/:]+):validateUpload$", self.validate_upload, writes=True
            ),
            route("GET", A + r"/datasets/([^/:]+):getDownloadEndpoint$", self.download_endpoint),
            route("POST", A + r"/batchInferenceJobs$", self.create_job, creates=True),
            route("GET", A + r"/batchInferenceJobs$", self.list_jobs),
            route("GET", A + r"/batchInferenceJobs/([^/:]+)$", self.get_job),
            route("POST", A + r"/batchInferenceJobs/([^/:]+):cancel$", self.cancel, writes=True),
            route("DELETE", A + r"/batchInferenceJobs/([^/:]+)$", self.delete_job, writes=True),
            route("GET", A + r"/(models|routers)/([^/:]+)$", self.model),
            route("GET", A + r"/models$", self.models),
            route("GET", r"^/_fireworks/blobs/([0-9a-f]+)$", self.blob),
            route("PUT", r"^/_fireworks/uploads/([0-9a-f]+)$", self.put_blob, writes=True),
        ]

    # the face ---------------------------------------------------------------
    def claims(self, x: Exchange) -> bool:
        return x.path.startswith(("/v1/accounts/", "/_fireworks/"))

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        if x.path.startswith("/_fireworks/"):
            return None  # a signed URL
        token = bearer(x)
        if not token or (api_key is not None and token != api_key):
            return ApiFailure(401, "invalid API key" if token else "missing API key")
        return None

    def error(self, failure: ApiFailure) -> Reply:
        return Reply(
            error_body(failure.status, failure.message), failure.status, dict(failure.headers)
        )

    def fault(self, kind: FaultKind) -> ApiFailure:
        if kind == "429":
            return ApiFailure(429, "rate limit exceeded", headers={"retry-after": "0"})
        if kind == "overloaded":
            return ApiFailure(503, "The service is temporarily unavailable")
        return ApiFailure(500, "internal error")

    def base_url(self, url: str) -> str:
        return url

    def environment(self, url: str) -> dict[str, str]:
        return {"FIREWORKS_BASE_URL": url, "FIREWORKS_ACCOUNT_ID": "demo"}

    def ledger(self) -> list[dict[str, Any]]:
        return [
            {
                "id": j.name,
                "provider": "fireworks",
                "status": j.state,
                "display_name": j.display_name,
                "custom_ids": [ln["custom_id"] for ln in j.lines],
                "created_at": int(j.created),
            }
            for j in self.made
        ]

    def restore(self, state: Mapping[str, Any]) -> None:
        for d in state.get("datasets", []):
            made = Dataset(d["name"], self.store.now(), state="READY")
            made.files = {k: v.encode("utf-8") for k, v in d["files"].items()}
            self.datasets[made.name] = made
        for j in state.get("jobs", []):
            self._add(
                j["name"],
                j["model"],
                j["input_dataset"],
                j["output_dataset"],
                dict(j["parameters"]),
                j.get("display_name") or j["name"],
                float(j["created_at"]),
            )

    # datasets ---------------------------------------------------------------
    def _dataset(self, name: str) -> Dataset:
        found = self.datasets.get(name)
        if found is None:
            raise ApiFailure(404, f"dataset {name} not found")
        return found

    def create_dataset(self, x: Exchange, account: str) -> Reply:
        payload = x.json()
        dataset_id = payload.get("datasetId") if isinstance(payload, dict) else None
        if not isinstance(dataset_id, str) or not dataset_id:
            raise ApiFailure(400, "datasetId is required")
        name = f"accounts/{account}/datasets/{dataset_id}"
        if name in self.datasets:
            raise ApiFailure(409, f"dataset {name} already exists")
        meta = payload.get("dataset") or {}
        made = Dataset(name, self.store.now(), meta.get("displayName"))
        self.datasets[name] = made
        return Reply(made.obj())

    def list_datasets(self, x: Exchange, account: str) -> Reply:
        size = x.int_param("pageSize", 50, 1, 200, coerce=True)
        mine = sorted(
            (d for d in self.datasets.values() if d.name.startswith(f"accounts/{account}/")),
            key=lambda d: d.name,
        )
        chunk, token = _page(mine, size, x.query.get("pageToken"))
        out: dict[str, Any] = {"datasets": [d.obj() for d in chunk], "totalSize": len(mine)}
        if token is not None:
            out["nextPageToken"] = token
        return Reply(out)

    def get_dataset(self, x: Exchange, account: str, name: str) -> Reply:
        return Reply(self._dataset(f"accounts/{account}/datasets/{name}").obj())

    def delete_dataset(self, x: Exchange, account: str, name: str) -> Reply:
        full = f"accounts/{account}/datasets/{name}"
        self._dataset(full)
        del self.datasets[full]
        return Reply({})

    def upload(self, x: Exchange, account: str, name: str) -> Reply:
        _, files = multipart(x.header("Content-Type"), x.body)
        if "file" not in files:
            raise ApiFailure(400, "a file is required")
        filename, data = files["file"]
        made = self._dataset(f"accounts/{account}/datasets/{name}")
        if made.state != "UPLOADING":
            raise ApiFailure(400, f"dataset {made.name} is {made.state}: it takes no upload")
        if len(data) > MAX_UPLOAD_BYTES:
            raise ApiFailure(
                400, "the file is over the 150 MB of a single upload; use the upload endpoint"
            )
        made.files = {filename: data}
        made.state = "READY"
        return Reply({"id": made.name, "bytes": len(data), "filename": filename, "object": "file"})

    def _signed(self, x: Exchange, kind: str, dataset: str, filename: str) -> str:
        token = self.store.decide.token(HEX, 24)
        self.blobs[token] = (dataset, filename)
        return f"{x.base}/_fireworks/{kind}/{token}?X-Goog-Signature=emulated"

    def upload_endpoint(self, x: Exchange, account: str, name: str) -> Reply:
        """Signed URLs to PUT each file at (larger than one upload takes); each call
        replaces the files the dataset expects."""
        made = self._dataset(f"accounts/{account}/datasets/{name}")
        payload = x.json()
        sizes = payload.get("filenameToSize") if isinstance(payload, dict) else None
        if not isinstance(sizes, dict) or not sizes:
            raise ApiFailure(400, "filenameToSize is required")
        made.expected = {str(k): int(v) for k, v in sizes.items()}
        urls = {f: self._signed(x, "uploads", made.name, f) for f in made.expected}
        return Reply({"filenameToSignedUrls": urls})

    def put_blob(self, x: Exchange, token: str) -> Reply:
        dataset, filename = self.blobs.pop(token, ("", ""))
        made = self.datasets.get(dataset)
        if made is None or filename not in made.expected:
            raise ApiFailure(403, "the signed URL is not valid")
        if len(x.body) != made.expected[filename]:
            raise ApiFailure(
                400, f"{filename}: {len(x.body)} bytes, not the {made.expected[filename]} announced"
            )
        made.files[filename] = x.body
        return Reply(b"")

    def validate_upload(self, x: Exchange, account: str, name: str) -> Reply:
        made = self._dataset(f"accounts/{account}/datasets/{name}")
        missing = sorted(set(made.expected) - set(made.files))
        if not made.expected or missing:
            raise ApiFailure(400, f"dataset {made.name}: files not uploaded: {missing}")
        if any(not data for data in made.files.values()):
            raise ApiFailure(400, f"dataset {made.name}: an uploaded file is empty")
        made.state = "READY"
        return Reply({})

    def download_endpoint(self, x: Exchange, account: str, name: str) -> Reply:
        made = self._dataset(f"accounts/{account}/datasets/{name}")
        urls = {f: self._signed(x, "blobs", made.name, f) for f in made.files}
        return Reply({"filenameToSignedUrls": urls})

    def blob(self, x: Exchange, token: str) -> Reply:
        name, filename = self.blobs.get(token, ("", ""))
        made = self.datasets.get(name)
        if made is None or filename not in made.files:
            raise ApiFailure(403, "the signed URL is not valid")
        # empty-results: the output reads empty while that bad day lasts, whole after it
        empty = made.job is not None and self.store.anomaly("empty-results", made.job)
        return Reply(b"" if empty else made.files[filename], file=True)

    # jobs -------------------------------------------------------------------
    def _add(
        self,
        name: str,
        model: str,
        source: str,
        output: str,
        parameters: dict[str, Any],
        display: str,
        created: float,
    ) -> Job:
        self.seq += 1
        job = Job(name, model, source, output, parameters, display, created, self.seq)
        self.jobs[name] = job
        self.made.append(job)
        return job

    def create_job(self, x: Exchange, account: str) -> Reply:
        payload = x.json()
        if not isinstance(payload, dict):
            raise ApiFailure(400, "the body must be a batch inference job")
        job_id = x.query.get("batchInferenceJobId") or self.store.decide.token(LOWER, 12)
        name = f"accounts/{account}/batchInferenceJobs/{job_id}"
        if name in self.jobs or any(j.name == name for j in self.made):
            raise ApiFailure(409, f"batch inference job {name} already exists")
        model, source = payload.get("model"), payload.get("inputDatasetId")
        if not model or not source:
            raise ApiFailure(400, "model and inputDatasetId are required")
        if not self.store.known_model(str(model)):
            raise ApiFailure(404, f"Model not found: {model}")
        if self._dataset(source).state != "READY":
            raise ApiFailure(400, f"dataset {source} is not READY")
        output = payload.get("outputDatasetId") or f"accounts/{account}/datasets/{job_id}-output"
        job = self._add(
            name,
            str(model),
            source,
            output,
            dict(payload.get("inferenceParameters") or {}),
            payload.get("displayName") or job_id,
            self.store.now(),
        )
        return Reply(job.obj())

    def _job(self, name: str) -> Job:
        found = self.jobs.get(name)
        if found is None:
            raise ApiFailure(404, f"batch inference job {name} not found")
        return found

    def list_jobs(self, x: Exchange, account: str) -> Reply:
        size = x.int_param("pageSize", 50, 1, 200, coerce=True)
        order = x.query.get("orderBy", "create_time").replace("created_time", "create_time")
        mine = sorted(
            (j for j in self.jobs.values() if j.name.startswith(f"accounts/{account}/")),
            key=lambda j: j.seq,
            reverse=order.strip() == "create_time desc",
        )
        chunk, token = _page(mine, size, x.query.get("pageToken"))
        out: dict[str, Any] = {
            "batchInferenceJobs": [j.obj() for j in chunk],
            "totalSize": len(mine),
        }
        if token is not None:
            out["nextPageToken"] = token
        return Reply(out)

    def get_job(self, x: Exchange, account: str, name: str) -> Reply:
        return Reply(self._job(f"accounts/{account}/batchInferenceJobs/{name}").obj())

    def cancel(self, x: Exchange, account: str, name: str) -> Reply:
        job = self._job(f"accounts/{account}/batchInferenceJobs/{name}")
        if job.state in ENDED:
            raise ApiFailure(400, f"batch inference job {job.name} has already ended")
        if job.state != "JOB_STATE_CANCELLING":
            job.state = "JOB_STATE_CANCELLING"
            job.stamps["cancelling"] = self.store.now()
        return Reply(job.obj())

    def delete_job(self, x: Exchange, account: str, name: str) -> Reply:
        job = self._job(f"accounts/{account}/batchInferenceJobs/{name}")
        if job.state in ENDED:
            del self.jobs[job.name]
        else:  # a running job is stopped, then goes
            job.state = "JOB_STATE_DELETING"
            job.stamps["deleting"] = self.store.now()
        return Reply({})

    def model(self, x: Exchange, account: str, kind: str, name: str) -> Reply:
        full = f"accounts/{account}/{kind}/{name}"
        if not self.store.known_model(full):
            raise ApiFailure(404, f"Model not found: {full}")
        return Reply(
            {
                "name": full,
                "displayName": name,
                "kind": "HF_BASE_MODEL",
                "state": "READY",
                "supportsBatchInference": True,
                "createTime": "2026-01-01T00:00:00Z",
            }
        )

    def models(self, x: Exchange, account: str) -> Reply:
        names = self.store.catalogue.listed(f"accounts/{account}/models/")
        return Reply({"models": [{"name": n} for n in names], "totalSize": len(names)})


def make(store: Store) -> FireworksFace:
    return FireworksFace(store)
