"""The S3 calls a batch inference client, and boto3's own transfer helpers
(``upload_file``, ``download_file``), make, emulated: buckets (create, head, list),
objects (put, get with a ``Range``, head, delete), multipart uploads (create, upload a
part, complete, abort: ``upload_file`` goes multipart from 8 MiB), ListObjectsV2
(docs.aws.amazon.com AmazonS3 API reference; ``../shared/spec/provider-batch-apis.md``
§5.6), path-style as botocore addresses a custom endpoint, every error in S3's XML.

A bucket must exist before an object is put in it (``NoSuchBucket`` otherwise), as
on S3: the emulator starts with one, ``batchbench``, and ``CreateBucket`` (``PUT
/{bucket}``) makes more. Bodies botocore sends ``aws-chunked`` (with a trailing
checksum) are decoded.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote
from xml.sax.saxutils import escape, unescape

from ...core import ApiFailure, iso8601
from ...face import Exchange, Reply

DEFAULT_BUCKET = "batchbench"
XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"


@dataclass
class S3Object:
    data: bytes
    modified: float
    # Whether it reads empty now (a job's output under the empty-results bad day).
    withheld: Callable[[], bool] | None = None

    @property
    def etag(self) -> str:
        return '"' + hashlib.md5(self.data).hexdigest() + '"'


@dataclass
class Buckets:
    """Every bucket's objects, by key."""

    objects: dict[str, dict[str, S3Object]] = field(default_factory=lambda: {DEFAULT_BUCKET: {}})

    def put(
        self,
        bucket: str,
        key: str,
        data: bytes,
        now: float,
        withheld: Callable[[], bool] | None = None,
    ) -> S3Object:
        if bucket not in self.objects:
            raise no_such_bucket(bucket)
        made = S3Object(data, now, withheld)
        self.objects[bucket][key] = made
        return made

    def get(self, bucket: str, key: str) -> S3Object:
        if bucket not in self.objects:
            raise no_such_bucket(bucket)
        found = self.objects[bucket].get(key)
        if found is None:
            raise ApiFailure(404, "The specified key does not exist.", code="NoSuchKey")
        return found

    def under(self, bucket: str, prefix: str) -> list[tuple[str, S3Object]]:
        if bucket not in self.objects:
            raise no_such_bucket(bucket)
        return sorted((k, o) for k, o in self.objects[bucket].items() if k.startswith(prefix))


def no_such_bucket(bucket: str) -> ApiFailure:
    return ApiFailure(404, "The specified bucket does not exist", code="NoSuchBucket")


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` → ``(bucket, key)``."""
    rest = uri.removeprefix("s3://")
    bucket, _, key = rest.partition("/")
    return bucket, key


def error_reply(failure: ApiFailure, request_id: str) -> Reply:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
        f"<Code>{escape(failure.code or 'InternalError')}</Code>"
        f"<Message>{escape(failure.message)}</Message>"
        f"<RequestId>{request_id}</RequestId></Error>"
    ).encode()
    headers = {"x-amz-request-id": request_id, **failure.headers}
    return Reply(body, failure.status, headers, content_type="application/xml")


def _decoded(x: Exchange) -> bytes:
    """The object's bytes: an ``aws-chunked`` body (``size;chunk-signature\\r\\n…``, a
    final 0 chunk, trailers) unwrapped, any other body as sent."""
    if "aws-chunked" not in x.header("content-encoding") and not x.header(
        "x-amz-decoded-content-length"
    ):
        return x.body
    out, rest = [], x.body
    while rest:
        head, _, rest = rest.partition(b"\r\n")
        size = int(head.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2 :]
    return b"".join(out)


def _xml(body: str, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    data = f'<?xml version="1.0" encoding="UTF-8"?>\n{body}'.encode()
    return Reply(data, status, headers or {}, content_type="application/xml")


@dataclass
class Upload:
    bucket: str
    key: str
    parts: dict[int, bytes] = field(default_factory=dict)


class S3Routes:
    """The routes' handlers, over one :class:`Buckets`."""

    def __init__(self, buckets: Buckets, now: Callable[[], float]) -> None:
        self.buckets = buckets
        self.now = now
        self.uploads: dict[str, Upload] = {}

    def list_buckets(self, x: Exchange) -> Reply:
        names = "".join(
            f"<Bucket><Name>{escape(b)}</Name><CreationDate>{iso8601(0)}</CreationDate></Bucket>"
            for b in sorted(self.buckets.objects)
        )
        return _xml(
            f'<ListAllMyBucketsResult xmlns="{XMLNS}"><Owner><ID>emulator</ID></Owner>'
            f"<Buckets>{names}</Buckets></ListAllMyBucketsResult>"
        )

    def head_bucket(self, x: Exchange, bucket: str) -> Reply:
        if bucket not in self.buckets.objects:
            raise no_such_bucket(bucket)
        return Reply(b"", 200, {"x-amz-bucket-region": "us-east-1"})

    def head(self, x: Exchange, bucket: str, key: str) -> Reply:
        """HeadObject: GetObject's headers, no body (the server sends none for HEAD)."""
        return self.get(x, bucket, key)

    def delete(self, x: Exchange, bucket: str, key: str) -> Reply:
        """DeleteObject (204, there or not), or AbortMultipartUpload with ``uploadId``."""
        if "uploadId" in x.query:
            if self.uploads.pop(x.query["uploadId"], None) is None:
                raise ApiFailure(404, "The specified upload does not exist.", code="NoSuchUpload")
            return Reply(b"", 204)
        if bucket not in self.buckets.objects:
            raise no_such_bucket(bucket)
        self.buckets.objects[bucket].pop(unquote(key), None)
        return Reply(b"", 204)

    def delete_objects(self, x: Exchange, bucket: str) -> Reply:
        """DeleteObjects (``POST /bucket?delete``): each key named deleted, there or not
        (what obstore and the SDKs' batch deletes send)."""
        if "delete" not in x.query:
            raise ApiFailure(
                405, f"Method POST is not allowed for /{bucket}.", code="InvalidRequest"
            )
        if bucket not in self.buckets.objects:
            raise no_such_bucket(bucket)
        keys = [unescape(k.decode()) for k in re.findall(rb"<Key>(.*?)</Key>", x.body, re.S)]
        for key in keys:
            self.buckets.objects[bucket].pop(key, None)
        deleted = "".join(f"<Deleted><Key>{escape(k)}</Key></Deleted>" for k in keys)
        return _xml(f'<DeleteResult xmlns="{XMLNS}">{deleted}</DeleteResult>')

    def post(self, x: Exchange, bucket: str, key: str) -> Reply:
        """CreateMultipartUpload (``?uploads``) or CompleteMultipartUpload (``?uploadId``)."""
        key = unquote(key)
        if "uploads" in x.query:
            if bucket not in self.buckets.objects:
                raise no_such_bucket(bucket)
            upload_id = hashlib.sha256(f"{bucket}/{key}/{len(self.uploads)}/{self.now()}".encode())
            ident = upload_id.hexdigest()[:32]
            self.uploads[ident] = Upload(bucket, key)
            return _xml(
                f'<InitiateMultipartUploadResult xmlns="{XMLNS}"><Bucket>{escape(bucket)}'
                f"</Bucket><Key>{escape(key)}</Key><UploadId>{ident}</UploadId>"
                "</InitiateMultipartUploadResult>"
            )
        upload = self.uploads.get(x.query.get("uploadId", ""))
        if upload is None:
            raise ApiFailure(404, "The specified upload does not exist.", code="NoSuchUpload")
        numbers = [int(n) for n in re.findall(rb"<PartNumber>(\d+)</PartNumber>", x.body)]
        if not numbers or any(n not in upload.parts for n in numbers):
            raise ApiFailure(
                400,
                "One or more of the specified parts could not be found.",
                code="InvalidPart",
            )
        data = b"".join(upload.parts[n] for n in sorted(numbers))
        del self.uploads[x.query["uploadId"]]
        made = self.buckets.put(bucket, key, data, self.now())
        return _xml(
            f'<CompleteMultipartUploadResult xmlns="{XMLNS}"><Bucket>{escape(bucket)}</Bucket>'
            f"<Key>{escape(key)}</Key><ETag>{escape(made.etag)}</ETag>"
            "</CompleteMultipartUploadResult>"
        )

    def create_bucket(self, x: Exchange, bucket: str) -> Reply:
        if bucket in self.buckets.objects:
            raise ApiFailure(
                409,
                "Your previous request to create the named bucket succeeded and you already"
                " own it.",
                code="BucketAlreadyOwnedByYou",
            )
        self.buckets.objects[bucket] = {}
        return Reply(b"", 200, {"Location": f"/{bucket}"})

    def put(self, x: Exchange, bucket: str, key: str) -> Reply:
        """PutObject, or UploadPart (``?partNumber&uploadId``)."""
        if "uploadId" in x.query:
            upload = self.uploads.get(x.query["uploadId"])
            if upload is None:
                raise ApiFailure(404, "The specified upload does not exist.", code="NoSuchUpload")
            data = _decoded(x)
            upload.parts[int(x.query.get("partNumber", "0"))] = data
            return Reply(b"", 200, {"ETag": '"' + hashlib.md5(data).hexdigest() + '"'})
        name = unquote(key)
        self._precondition(x, bucket, name)
        made = self.buckets.put(bucket, name, _decoded(x), self.now())
        return Reply(b"", 200, {"ETag": made.etag})

    def _precondition(self, x: Exchange, bucket: str, key: str) -> None:
        """S3's conditional writes, as its user guide documents them: ``If-None-Match: *``
        refuses a key that exists (412 PreconditionFailed); ``If-Match: <etag>`` refuses
        another version (412), or a key that does not exist (404 NoSuchKey)."""
        absent = self.buckets.objects.get(bucket, {}).get(key)
        if x.header("If-None-Match").strip() == "*" and absent is not None:
            raise ApiFailure(
                412,
                "At least one of the pre-conditions you specified did not hold",
                code="PreconditionFailed",
            )
        wanted = x.header("If-Match").strip()
        if wanted:
            if absent is None:
                raise ApiFailure(404, "The specified key does not exist.", code="NoSuchKey")
            if wanted != absent.etag:
                raise ApiFailure(
                    412,
                    "At least one of the pre-conditions you specified did not hold",
                    code="PreconditionFailed",
                )

    def get(self, x: Exchange, bucket: str, key: str) -> Reply:
        """GetObject; a ``Range: bytes=a-b`` is 206 with that slice (download_file reads a
        large object so, a part at a time)."""
        found = self.buckets.get(bucket, unquote(key))
        empty = found.withheld is not None and found.withheld()
        data = b"" if empty else found.data
        headers = {
            "ETag": found.etag,
            "Last-Modified": _http_date(found.modified),
            "Accept-Ranges": "bytes",
        }
        wanted = re.fullmatch(r"bytes=(\d*)-(\d*)", x.header("Range").strip())
        if wanted and data:
            first = int(wanted.group(1) or 0)
            last = min(int(wanted.group(2) or len(data) - 1), len(data) - 1)
            if first > last:
                raise ApiFailure(416, "The requested range is not satisfiable", code="InvalidRange")
            headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
            return Reply(
                data[first : last + 1],
                206,
                headers,
                file=True,
                content_type="application/octet-stream",
            )
        return Reply(data, 200, headers, file=True, content_type="application/octet-stream")

    def list(self, x: Exchange, bucket: str) -> Reply:
        if x.query.get("list-type") != "2":
            raise ApiFailure(
                400, "Only ListObjectsV2 (list-type=2) is served", code="NotImplemented"
            )
        prefix = x.query.get("prefix", "")
        max_keys = x.int_param("max-keys", 1000, 0, 1000, coerce=True)
        after = x.query.get("continuation-token") or x.query.get("start-after") or ""
        found = [(k, o) for k, o in self.buckets.under(bucket, prefix) if k > after]
        delimiter = x.query.get("delimiter", "")
        prefixes: list[str] = []
        if delimiter:  # a key past the prefix with the delimiter in it is a "folder"
            kept = []
            for k, o in found:
                cut = k.find(delimiter, len(prefix))
                if cut < 0:
                    kept.append((k, o))
                elif k[: cut + len(delimiter)] not in prefixes:
                    prefixes.append(k[: cut + len(delimiter)])
            found = kept
        page, more = found[:max_keys], len(found) > max_keys
        common = "".join(
            f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in prefixes
        )
        contents = "".join(
            f"<Contents><Key>{escape(k)}</Key><LastModified>{iso8601(o.modified)}</LastModified>"
            f"<ETag>{escape(o.etag)}</ETag><Size>{len(o.data)}</Size>"
            "<StorageClass>STANDARD</StorageClass></Contents>"
            for k, o in page
        )
        token = (
            f"<NextContinuationToken>{escape(page[-1][0])}</NextContinuationToken>" if more else ""
        )
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{XMLNS}">'
            f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<KeyCount>{len(page)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>"
            f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{token}{contents}{common}"
            "</ListBucketResult>"
        ).encode()
        return Reply(body, 200, content_type="application/xml")


def _http_date(t: float) -> str:
    from email.utils import formatdate

    return formatdate(t, usegmt=True)
