"""Cloud Storage through google-cloud-storage: where Vertex AI reads a job's requests and
writes its predictions, and Google's credentials, both as typed errors.

The bucket and prefix are the run's (``BATCHBENCH_GCS_URI``, remembered by the run),
credentials are Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``,
a ``gcloud`` login, a workload's metadata server), never read or written by
batchbench itself. ``STORAGE_EMULATOR_HOST`` points the client elsewhere (the
emulator), as the library reads it. The library's own retries are off: every call
goes under batchbench's one policy (:mod:`.retry`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import google.auth
import google.auth.exceptions
from google.api_core import exceptions as api_exceptions
from google.cloud import storage

from ..errors import ApiError, ConfigError, NoAnswer, Unreachable
from ..errors import TransientApiError as Transient
from . import transport
from .downloads import Sink
from .http_errors import one_line, status_error

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
# A bucket as Cloud Storage names one, and a prefix without a query, a fragment, a space
# or a control character (Cloud Storage's object naming rules, and what passes a look but
# not a job's create).
GS_URI = re.compile(r"^gs://([a-z0-9][-_.a-z0-9]{1,220}[a-z0-9])(/[^?#\s\x00-\x1f\x7f]*)?$")
KEY_HINT = "the Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS)"
TIMEOUT = 60.0


def credentials() -> Any:
    """Application Default Credentials for Google Cloud, or one line saying how to set
    them (the file a variable names is never echoed beyond its path)."""
    named = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if named and not os.path.isfile(named):
        what = "a folder" if os.path.isdir(named) else "no file"
        raise ConfigError(
            f"GOOGLE_APPLICATION_CREDENTIALS names {named}, which is {what}: set it to a"
            " service account's key file (JSON)"
        )
    try:
        found, _ = google.auth.default(scopes=SCOPES)
    except google.auth.exceptions.DefaultCredentialsError as exc:
        if named:  # google-auth says why as a tuple: its first part is the sentence
            why = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
            raise ConfigError(
                f"GOOGLE_APPLICATION_CREDENTIALS names {named}, which is not a key file"
                f" google-auth reads ({one_line(why, limit=160)}): set it to a service"
                " account's key file (JSON)"
            ) from None
        raise ConfigError(
            "Vertex AI needs Application Default Credentials: set"
            " GOOGLE_APPLICATION_CREDENTIALS to a service account's key file, or run"
            f" `gcloud auth application-default login` ({one_line(exc, limit=160)})"
        ) from None
    return found


@contextlib.contextmanager
def storage_errors(what: str, batch_id: str | None = None) -> Iterator[None]:
    """Cloud Storage's and google-auth's exceptions → typed errors naming the call."""
    try:
        yield
    except api_exceptions.GoogleAPICallError as exc:
        status = int(exc.code or 500)
        raise status_error(
            what, status, one_line(exc.message), key_hint=KEY_HINT, batch_id=batch_id
        ) from None
    except google.auth.exceptions.RefreshError as exc:
        raise ApiError(
            f"{what}: Google refused the credentials ({one_line(exc, limit=160)}); check"
            f" {KEY_HINT}",
            status=401,
            batch_id=batch_id,
        ) from None
    except google.auth.exceptions.TransportError as exc:
        raise Unreachable(
            f"{what}: cannot reach Google ({one_line(exc)})", batch_id=batch_id
        ) from None
    except Exception as exc:  # requests' and google-resumable-media's own, unwrapped
        names = {c.__name__ for c in type(exc).__mro__}
        if "DataCorruption" in names:  # a checksum that does not match: fetch again
            raise Transient(f"{what}: the download arrived damaged", batch_id=batch_id) from None
        if "ChunkedEncodingError" in names or "IncompleteRead" in names:
            raise Transient(
                f"{what}: the connection closed before the whole file came", batch_id=batch_id
            ) from None
        if "InvalidResponse" in names:
            status = int(getattr(getattr(exc, "response", None), "status_code", 500) or 500)
            raise status_error(
                what, status, one_line(exc), key_hint=KEY_HINT, batch_id=batch_id
            ) from None
        found = transport.fault(exc)
        if found == "timeout":
            raise NoAnswer(f"{what}: no answer in time", batch_id=batch_id) from None
        if found == "connect":
            raise Unreachable(
                f"{what}: cannot connect ({one_line(exc)})", batch_id=batch_id
            ) from None
        raise


class Bucket:
    """The run's place in Cloud Storage: ``gs://BUCKET/PREFIX``."""

    def __init__(self, uri: str | None, project: str, creds: Any) -> None:
        found = GS_URI.match(uri or "")
        if not uri:
            raise ConfigError(
                "Vertex AI reads and writes its records in Cloud Storage: give the run"
                " --gcs-uri gs://BUCKET/PREFIX (or set BATCHBENCH_GCS_URI)"
            )
        if not found:
            raise ConfigError(
                f"the run's Cloud Storage location (--gcs-uri, or BATCHBENCH_GCS_URI) is"
                f" {uri!r}, not gs://BUCKET/PREFIX"
            )
        self.name, self.prefix = found.group(1), (found.group(2) or "").strip("/")
        with storage_errors("Cloud Storage's settings"):
            self.client = storage.Client(project=project, credentials=creds)
        self.bucket = self.client.bucket(self.name)

    def uri(self, *parts: str) -> str:
        return "gs://" + "/".join([self.name, *(p for p in (self.prefix, *parts) if p)])

    def check(self) -> None:
        """That the bucket is there for these credentials."""
        with storage_errors(f"look up gs://{self.name}"):
            exists = self.bucket.exists(timeout=TIMEOUT, retry=None)
        if not exists:
            raise ConfigError(
                f"the run's Cloud Storage location (--gcs-uri, or BATCHBENCH_GCS_URI) names"
                f" gs://{self.name}, which does not exist (or is not visible to these"
                " credentials)"
            )

    def put(self, path: Path, uri: str) -> None:
        name = split(uri)[1]
        with storage_errors(f"upload {path.name}"):
            self.bucket.blob(name).upload_from_filename(str(path), timeout=TIMEOUT, retry=None)

    def names(self, prefix_uri: str) -> list[str]:
        """The objects under a ``gs://`` prefix, as ``gs://`` URIs, in name order."""
        bucket, prefix = split(prefix_uri.rstrip("/") + "/")
        with storage_errors(f"list {prefix_uri}"):
            blobs = self.client.list_blobs(bucket, prefix=prefix, timeout=TIMEOUT, retry=None)
            return [f"gs://{bucket}/{b.name}" for b in blobs]

    def fill(self, uri: str) -> Callable[[Sink], None]:
        """What writes an object's bytes into a download's sink."""
        bucket, name = split(uri)

        def fill(sink: Sink) -> None:
            blob = self.client.bucket(bucket).blob(name)
            blob.download_to_file(sink, timeout=TIMEOUT, retry=None)

        return fill


def split(uri: str) -> tuple[str, str]:
    """``gs://bucket/name`` → ``(bucket, name)``."""
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    return bucket, name
