"""Cloud Storage's XML API over the same buckets as the JSON API: the calls a client made
for S3-like stores sends (obstore, Rust's object_store) — put, get, head, delete, and a
ListObjectsV2-style listing (cloud.google.com/storage/docs/xml-api/overview).

A put honours ``x-goog-if-generation-match`` as the service documents it: ``0`` creates
only where no live object has the name, a number replaces only that generation, and
anything else is 412 ``PreconditionFailed``. Object names arrive percent-encoded (``/``
as ``%2F``). Errors are the XML API's ``<Error><Code/><Message/></Error>``.

The real service answers this API at the root of storage.googleapis.com, beside the JSON
API; the emulator serves it under :data:`PREFIX` (a client takes it as its base URL:
``GOOGLE_BASE_URL`` for obstore) so that its paths cannot be mistaken for S3's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from email.utils import formatdate
from urllib.parse import unquote
from xml.sax.saxutils import escape

from ...core import ApiFailure, rfc3339
from ...face import Exchange, Reply
from .gcs import Blob, Storage

PREFIX = "/gcs-xml"
_XML = '<?xml version="1.0" encoding="UTF-8"?>\n'
_UNMET = "At least one of the pre-conditions you specified did not hold."

Handle = Callable[..., Reply]


def _error(failure: ApiFailure) -> Reply:
    code = failure.code or {404: "NoSuchKey", 412: "PreconditionFailed"}.get(
        failure.status, "InternalError"
    )
    body = f"{_XML}<Error><Code>{code}</Code><Message>{escape(failure.message)}</Message></Error>"
    return Reply(body.encode(), failure.status, content_type="application/xml")


def xml_errors(handle: Handle) -> Handle:
    """The route's failures said as the XML API says them."""

    def answered(x: Exchange, *groups: str) -> Reply:
        try:
            return handle(x, *groups)
        except ApiFailure as failure:
            return _error(failure)

    return answered


def _etag(blob: Blob) -> str:
    return '"' + hashlib.md5(blob.view()).hexdigest() + '"'


def _headers(blob: Blob) -> dict[str, str]:
    return {
        "ETag": _etag(blob),
        "Last-Modified": formatdate(blob.updated, usegmt=True),
        "x-goog-generation": str(blob.generation),
        "x-goog-metageneration": "1",
        "x-goog-stored-content-length": str(len(blob.view())),
    }


class XmlRoutes:
    """The XML API's handlers, over one :class:`~.gcs.Storage`."""

    def __init__(self, storage: Storage, now: Callable[[], float]) -> None:
        self.storage = storage
        self.now = now

    def _bucket(self, bucket: str) -> dict[str, Blob]:
        found = self.storage.buckets.get(bucket)
        if found is None:
            raise ApiFailure(404, "The specified bucket does not exist.", code="NoSuchBucket")
        return found

    def _object(self, bucket: str, key: str) -> Blob:
        found = self._bucket(bucket).get(unquote(key))
        if found is None:
            raise ApiFailure(404, "The specified key does not exist.", code="NoSuchKey")
        return found

    def put(self, x: Exchange, bucket: str, key: str) -> Reply:
        name = unquote(key)
        wanted = x.header("x-goog-if-generation-match").strip()
        if wanted:
            there = self._bucket(bucket).get(name)
            if not wanted.isdigit() or int(wanted) != (there.generation if there else 0):
                raise ApiFailure(412, _UNMET, code="PreconditionFailed")
        kind = x.header("Content-Type") or None
        made = self.storage.put(bucket, name, x.body, self.now(), None, kind)
        return Reply(b"", 200, _headers(made))

    def get(self, x: Exchange, bucket: str, key: str) -> Reply:
        blob = self._object(bucket, key)
        return Reply(blob.view(), 200, _headers(blob), file=True, content_type=blob.content_type)

    def head(self, x: Exchange, bucket: str, key: str) -> Reply:
        blob = self._object(bucket, key)
        return Reply(b"", 200, _headers(blob), content_type=blob.content_type)

    def delete(self, x: Exchange, bucket: str, key: str) -> Reply:
        self._object(bucket, key)
        del self._bucket(bucket)[unquote(key)]
        return Reply(b"", 204)

    def list(self, x: Exchange, bucket: str) -> Reply:
        """A bucket's objects under ``prefix``, a page at a time; with ``delimiter``, the
        names past it folded into ``CommonPrefixes``."""
        self._bucket(bucket)
        prefix = x.query.get("prefix", "")
        most = x.int_param("max-keys", 1000, 1, 1000, coerce=True)
        after = x.query.get("continuation-token") or x.query.get("start-after") or ""
        delimiter = x.query.get("delimiter", "")
        entries: list[tuple[str, Blob | None]] = []
        for name, blob in self.storage.under(bucket, prefix):
            cut = name.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                folder = name[: cut + len(delimiter)]
                if not entries or entries[-1][0] != folder:
                    entries.append((folder, None))
            else:
                entries.append((name, blob))
        entries = [e for e in entries if e[0] > after]
        page, more = entries[:most], len(entries) > most
        parts = [
            f"<Contents><Key>{escape(k)}</Key><Generation>{b.generation}</Generation>"
            f"<MetaGeneration>1</MetaGeneration><LastModified>{rfc3339(b.updated)}"
            f"</LastModified><ETag>{escape(_etag(b))}</ETag><Size>{len(b.view())}</Size>"
            "</Contents>"
            if b is not None
            else f"<CommonPrefixes><Prefix>{escape(k)}</Prefix></CommonPrefixes>"
            for k, b in page
        ]
        token = (
            f"<NextContinuationToken>{escape(page[-1][0])}</NextContinuationToken>" if more else ""
        )
        body = (
            f'{_XML}<ListBucketResult xmlns="http://doc.s3.amazonaws.com/2006-03-01">'
            f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<KeyCount>{len(page)}</KeyCount><MaxKeys>{most}</MaxKeys>"
            f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>"
            f"{token}{''.join(parts)}</ListBucketResult>"
        )
        return Reply(body.encode(), 200, content_type="application/xml")
