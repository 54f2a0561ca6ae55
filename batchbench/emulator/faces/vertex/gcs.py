"""The Cloud Storage JSON API calls a batch prediction client makes, emulated: objects
uploaded (multipart, or resumable past 8 MiB as google-cloud-storage sends them, their
content type kept), listed under a prefix, read (metadata, or ``alt=media``) and
deleted, and buckets looked up and created (cloud.google.com/storage/docs/json_api).

Writes honour ``ifGenerationMatch`` (``0``: create only; 412 ``conditionNotMet``
otherwise), as a writer that must not overwrite sends it. As the service answers: a
bucket must exist (the emulator starts with ``batchbench``), object names are URL-
encoded in paths, listings come in name order a page at a time, a download carries
``x-goog-hash`` (crc32c and md5) so the client checks what it received, and errors are
Google's ``{"error": {code, message, errors}}``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from ...core import ApiFailure, rfc3339
from ...face import Exchange, Reply

DEFAULT_BUCKET = "batchbench"
BUCKET_NAME = re.compile(r"^[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9]$")


@dataclass
class Blob:
    data: bytes
    updated: float
    generation: int
    withheld: Callable[[], bool] | None = None  # reads empty now (a bad day)
    content_type: str = "application/octet-stream"

    def view(self) -> bytes:
        return b"" if self.withheld is not None and self.withheld() else self.data


@dataclass
class Storage:
    """Every bucket's objects, by name; resumable uploads under way."""

    buckets: dict[str, dict[str, Blob]] = field(default_factory=lambda: {DEFAULT_BUCKET: {}})
    uploads: dict[str, tuple[str, str, bytearray]] = field(default_factory=dict)
    types: dict[str, str | None] = field(default_factory=dict)  # an upload's content type
    conditions: dict[str, str] = field(default_factory=dict)  # an upload's ifGenerationMatch
    generation: int = 1_700_000_000_000_000

    def bucket(self, name: str) -> dict[str, Blob]:
        found = self.buckets.get(name)
        if found is None:
            raise ApiFailure(404, "The specified bucket does not exist.", code="notFound")
        return found

    def put(
        self,
        bucket: str,
        name: str,
        data: bytes,
        now: float,
        withheld: Callable[[], bool] | None = None,
        content_type: str | None = None,
    ) -> Blob:
        self.generation += 1
        made = Blob(
            data, now, self.generation, withheld, content_type or "application/octet-stream"
        )
        self.bucket(bucket)[name] = made
        return made

    def get(self, bucket: str, name: str) -> Blob:
        found = self.bucket(bucket).get(name)
        if found is None:
            raise ApiFailure(404, f"No such object: {bucket}/{name}", code="notFound")
        return found

    def under(self, bucket: str, prefix: str) -> list[tuple[str, Blob]]:
        return sorted((k, b) for k, b in self.bucket(bucket).items() if k.startswith(prefix))


def split_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/name`` → ``(bucket, name)``."""
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    return bucket, name


def _hashes(data: bytes) -> tuple[str | None, str]:
    """An object's crc32c (where google-crc32c is installed, as it is with the client)
    and md5, base64, as Cloud Storage reports them."""
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    try:
        import google_crc32c
    except ImportError:
        return None, md5
    value: int = google_crc32c.value(data)
    return base64.b64encode(value.to_bytes(4, "big")).decode(), md5


def resource(bucket: str, name: str, blob: Blob) -> dict[str, Any]:
    data = blob.view()
    crc, md5 = _hashes(data)
    return {
        "kind": "storage#object",
        "id": f"{bucket}/{name}/{blob.generation}",
        "name": name,
        "bucket": bucket,
        "generation": str(blob.generation),
        "metageneration": "1",
        "contentType": blob.content_type,
        "size": str(len(data)),
        "md5Hash": md5,
        **({"crc32c": crc} if crc else {}),
        "updated": rfc3339(blob.updated),
        "timeCreated": rfc3339(blob.updated),
        "storageClass": "STANDARD",
    }


def _related(content_type: str, body: bytes) -> tuple[dict[str, Any], bytes]:
    """A ``multipart/related`` upload: its JSON metadata part and its media part."""
    marker = "boundary="
    if not content_type.startswith("multipart/related") or marker not in content_type:
        raise ApiFailure(400, "Expected a multipart/related body", code="invalid")
    boundary = content_type.split(marker, 1)[1].split(";")[0].strip().strip('"').encode()
    parts, kinds = [], []
    for chunk in body.split(b"--" + boundary)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, content = chunk.partition(b"\r\n\r\n")
        parts.append(content[:-2] if content.endswith(b"\r\n") else content)
        kinds.append(_header(head, "content-type"))
    if len(parts) != 2:
        raise ApiFailure(400, "A multipart upload has a metadata part and a media part")
    try:
        metadata = json.loads(parts[0] or b"{}")
    except json.JSONDecodeError:
        raise ApiFailure(400, "The metadata part is not JSON", code="invalid") from None
    if kinds[1] and "contentType" not in metadata:  # the media part's own type
        metadata["contentType"] = kinds[1]
    return metadata, parts[1]


def _header(head: bytes, name: str) -> str | None:
    for line in head.decode("latin-1").splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def precondition(storage: Storage, bucket: str, name: str, wanted: str | None) -> None:
    """``ifGenerationMatch``, as the JSON API documents it: ``0`` holds only where no live
    object has the name, a number only for that generation; otherwise 412."""
    if wanted is None or wanted == "":
        return
    there = storage.bucket(bucket).get(name)
    if not wanted.isdigit() or int(wanted) != (there.generation if there else 0):
        raise ApiFailure(
            412,
            "At least one of the pre-conditions you specified did not hold.",
            code="conditionNotMet",
        )


class StorageRoutes:
    """The routes' handlers, over one :class:`Storage`."""

    def __init__(self, storage: Storage, now: Callable[[], float]) -> None:
        self.storage = storage
        self.now = now

    def _name(self, x: Exchange, metadata: dict[str, Any]) -> str:
        name = x.query.get("name") or metadata.get("name")
        if not isinstance(name, str) or not name:
            raise ApiFailure(400, "Required parameter: name", code="required")
        return name

    def upload(self, x: Exchange, bucket: str) -> Reply:
        self.storage.bucket(bucket)
        kind = x.query.get("uploadType")
        if kind == "multipart":
            metadata, data = _related(x.header("Content-Type"), x.body)
            name = self._name(x, metadata)
            precondition(self.storage, bucket, name, x.query.get("ifGenerationMatch"))
            made = self.storage.put(
                bucket, name, data, self.now(), None, metadata.get("contentType")
            )
            return Reply(resource(bucket, name, made))
        if kind == "resumable":
            metadata = x.json() if x.body else {}
            name = self._name(x, metadata or {})
            upload_id = f"u{len(self.storage.uploads) + 1}-{abs(hash((bucket, name))) % 10**8}"
            self.storage.uploads[upload_id] = (bucket, name, bytearray())
            self.storage.conditions[upload_id] = x.query.get("ifGenerationMatch", "")
            self.storage.types[upload_id] = (metadata or {}).get("contentType") or x.header(
                "X-Upload-Content-Type"
            )
            where = (
                f"{x.base}/upload/storage/v1/b/{quote(bucket)}/o?uploadType=resumable"
                f"&upload_id={upload_id}"
            )
            return Reply({}, 200, {"Location": where})
        if kind == "media":
            name = self._name(x, {})
            precondition(self.storage, bucket, name, x.query.get("ifGenerationMatch"))
            given = x.header("Content-Type") or None
            made = self.storage.put(bucket, name, x.body, self.now(), None, given)
            return Reply(resource(bucket, name, made))
        raise ApiFailure(400, f"Invalid upload type {kind!r}", code="invalid")

    def resume(self, x: Exchange, bucket: str) -> Reply:
        """One chunk of a resumable upload (``Content-Range: bytes a-b/total`` or ``*``)."""
        upload_id = x.query.get("upload_id", "")
        if upload_id not in self.storage.uploads:
            raise ApiFailure(404, "No such upload session", code="notFound")
        _, name, buffer = self.storage.uploads[upload_id]
        buffer += x.body
        total = x.header("Content-Range").rsplit("/", 1)[-1]
        if total == "*" or (total.isdigit() and len(buffer) < int(total)):
            return Reply(b"", 308, {"Range": f"bytes=0-{len(buffer) - 1}"} if buffer else {})
        del self.storage.uploads[upload_id]
        kind = self.storage.types.pop(upload_id, None)
        precondition(self.storage, bucket, name, self.storage.conditions.pop(upload_id, ""))
        made = self.storage.put(bucket, name, bytes(buffer), self.now(), None, kind)
        return Reply(resource(bucket, name, made))

    def create_bucket(self, x: Exchange) -> Reply:
        """``buckets.insert`` (``?project=P``, ``{"name"}``): 409 when the name is taken."""
        body = x.json() if x.body else {}
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not BUCKET_NAME.match(name):
            raise ApiFailure(400, "Invalid bucket name", code="invalid")
        if name in self.storage.buckets:
            raise ApiFailure(
                409,
                "Your previous request to create the named bucket succeeded and you already"
                " own it.",
                code="conflict",
            )
        self.storage.buckets[name] = {}
        return Reply({"kind": "storage#bucket", "id": name, "name": name, "location": "US"})

    def delete(self, x: Exchange, bucket: str, name: str) -> Reply:
        """``objects.delete``: 204, or 404 for an object that is not there."""
        name = unquote(name)
        self.storage.get(bucket, name)
        precondition(self.storage, bucket, name, x.query.get("ifGenerationMatch"))
        del self.storage.bucket(bucket)[name]
        return Reply(b"", 204)

    def get_bucket(self, x: Exchange, bucket: str) -> Reply:
        self.storage.bucket(bucket)
        return Reply({"kind": "storage#bucket", "id": bucket, "name": bucket, "location": "US"})

    def list(self, x: Exchange, bucket: str) -> Reply:
        prefix = x.query.get("prefix", "")
        page_size = x.int_param("maxResults", 1000, 1, 1000, coerce=True)
        after = x.query.get("pageToken", "")
        found = [(k, b) for k, b in self.storage.under(bucket, prefix) if k > after]
        page = found[:page_size]
        out: dict[str, Any] = {
            "kind": "storage#objects",
            "items": [resource(bucket, k, b) for k, b in page],
        }
        if len(found) > page_size:
            out["nextPageToken"] = page[-1][0]
        return Reply(out)

    def get(self, x: Exchange, bucket: str, name: str) -> Reply:
        name = unquote(name)
        blob = self.storage.get(bucket, name)
        if x.query.get("alt") != "media":
            return Reply(resource(bucket, name, blob))
        data = blob.view()
        crc, md5 = _hashes(data)
        headers = {
            "x-goog-hash": f"crc32c={crc},md5={md5}" if crc else f"md5={md5}",
            "x-goog-generation": str(blob.generation),
            "x-goog-stored-content-length": str(len(data)),
        }
        return Reply(data, 200, headers, file=True, content_type="application/octet-stream")
