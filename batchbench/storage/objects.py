"""A bucket as batchbench uses it: get, create-only put, overwrite, list, delete — through
obstore (Rust's object_store: S3, Cloud Storage, Azure Blob, local disk and memory behind
one API, with conditional puts), its failures turned into one line naming the URI and
the variables to set.

Credentials come from each cloud's own environment (AWS_*, GOOGLE_APPLICATION_CREDENTIALS
or GOOGLE_SERVICE_ACCOUNT, AZURE_STORAGE_*), read by obstore; none is ever written into a
run, a log entry or a message. A URI that carries credentials is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from ..errors import ConfigError, StorageError

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Config

# scheme → (the variables that say where and who, for a message; the settings obstore reads)
SCHEMES = {
    "s3": "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and AWS_REGION",
    "gs": "GOOGLE_APPLICATION_CREDENTIALS (or GOOGLE_SERVICE_ACCOUNT)",
    "az": "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or a SAS token)",
    "memory": "nothing (one process's memory: for tests)",
    "file": "nothing (a local folder read as a bucket)",
}
TRIES = 4  # a 503 SlowDown, a dropped connection: tried again this many times in all


@dataclass(frozen=True)
class Bucket:
    """Where a jobs folder lives in a store: ``s3://BUCKET/PREFIX`` and the like."""

    scheme: str
    bucket: str
    prefix: str

    @property
    def uri(self) -> str:
        if self.scheme == "file":
            return f"file://{self.bucket}"
        return f"{self.scheme}://{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)


def _control(text: str) -> bool:
    """Whether a text holds a line break or another control character."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def parse_bucket(text: str) -> Bucket | None:
    """The bucket a jobs folder names, or None for a local folder. A URI with credentials
    in it, or of another scheme, is one line; so is one the store cannot name as it is
    written (a control character, a fragment, a ``.`` or ``..`` or empty step): never
    rewritten silently, so two URIs that differ never share one run."""
    parts = urlsplit(text)
    if not parts.scheme or len(parts.scheme) == 1:  # a path (a Windows drive letter too)
        return None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ConfigError(
            f"jobs folder {text!r}: {scheme}:// is not a store batchbench reads (s3://, gs://,"
            " az://, or a local folder)"
        )
    if parts.username or parts.password or parts.query or "@" in parts.netloc:
        raise ConfigError(
            f"jobs folder {parts.scheme}://{parts.hostname or ''}/…: credentials do not go in"
            f" the URI (they would be written and printed); set {SCHEMES[scheme]}"
        )
    if _control(text):
        raise ConfigError(
            f"jobs folder {text!r}: a line break or control character in a store's URI"
        )
    if "#" in text:
        raise ConfigError(f"jobs folder {text!r}: a store's URI takes no #fragment")
    steps = parts.path.strip("/").split("/")
    if any(step in (".", "..", "") for step in steps) and parts.path.strip("/"):
        raise ConfigError(
            f"jobs folder {text!r}: its path has a '.', '..' or empty step, which a store"
            " does not resolve (name the prefix as it is)"
        )
    if scheme == "file":  # a local folder read as a bucket: its path is the bucket
        if parts.netloc or not parts.path.startswith("/"):
            raise ConfigError(f"jobs folder {text!r}: file:// takes an absolute path (file:///…)")
        return Bucket(scheme, parts.path.rstrip("/"), "")
    if not parts.netloc:
        raise ConfigError(f"jobs folder {text!r}: no bucket named ({scheme}://BUCKET/PREFIX)")
    return Bucket(scheme, parts.netloc, parts.path.strip("/"))


def _kinds() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """obstore's "absent" and "already there" (its own classes, and the built-in ones some
    of its stores raise)."""
    try:
        from obstore import exceptions as oe
    except ImportError:  # said when a bucket is named (Objects)
        return (FileNotFoundError,), (FileExistsError,)
    return (oe.NotFoundError, FileNotFoundError), (
        oe.AlreadyExistsError,
        oe.PreconditionError,
        FileExistsError,
    )


ABSENT, THERE = _kinds()


class Objects:
    """One bucket's objects, keys relative to the bucket (not to the prefix)."""

    def __init__(self, where: Bucket) -> None:
        self.where = where
        try:
            import obstore  # noqa: F401
        except ImportError:
            from ..errors import ProviderUnavailable
            from ..providers import install_hint

            raise ProviderUnavailable(
                f"a jobs folder in a bucket ({where.uri}) needs obstore: {install_hint('bucket')}"
            ) from None
        from obstore import exceptions as oe

        try:
            self._store = _store(where)
        except oe.BaseError as exc:  # a setting missing or malformed: said before any call
            said = " ".join(str(exc).split("Debug source:")[0].split())[:200]
            raise StorageError(f"{where.uri}: {said}; set {SCHEMES[where.scheme]}") from None

    def _fail(self, exc: Exception, what: str) -> StorageError:
        from obstore import exceptions as oe

        said = " ".join(str(exc).split("Debug source:")[0].split())[:300]
        if isinstance(exc, oe.UnauthenticatedError) or _no_credentials(said):
            return StorageError(
                f"{self.where.uri}: {what}: no credentials for the store were found (its"
                f" client looked for them and said: {said[:160]});"
                f" set {SCHEMES[self.where.scheme]}"
            )
        refused = (
            "AccessDenied",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "status code: 403",
        )
        if isinstance(
            exc, (oe.PermissionDeniedError, oe.UnauthenticatedError, PermissionError)
        ) or any(word in said for word in refused):
            return StorageError(
                f"{self.where.uri}: {what}: refused ({said}): the credentials need list, get"
                f" and put on the prefix; set {SCHEMES[self.where.scheme]}"
            )
        if "bucket" in said.lower() and ("not found" in said.lower() or "nosuch" in said.lower()):
            return StorageError(f"{self.where.uri}: {what}: no such bucket ({said})")
        return StorageError(f"{self.where.uri}: {what}: {said}")

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn`` on the store, a passing fault (a 5xx, SlowDown, a dropped connection)
        tried again; absent and already-there raised as they are, for the caller."""
        from obstore import exceptions as oe

        for attempt in range(1, TRIES + 1):
            try:
                return fn(self._store, *args, **kwargs)
            except (*ABSENT, *THERE):
                raise
            except (oe.GenericError, ConnectionError, TimeoutError) as exc:
                if attempt == TRIES or _final(exc):
                    raise self._fail(exc, what) from None
            except (oe.BaseError, OSError) as exc:
                raise self._fail(exc, what) from None
        raise StorageError(f"{self.where.uri}: {what}: unreachable")  # pragma: no cover

    def get(self, key: str) -> bytes | None:
        import obstore

        try:
            found = self._call(f"read {key}", obstore.get, key)
        except ABSENT:
            return None
        return bytes(found.bytes())

    def create(self, key: str, data: bytes) -> bool:
        """Write ``key`` only if absent. True when it now holds ``data``: made by this call,
        or by an earlier try of it whose answer was lost (a put that timed out after it
        succeeded is looked up by name, never taken for another's); False when it holds
        other bytes — another writer's. A conflict that wrote nothing (S3's 409 when two
        creates race) is tried again."""
        import obstore

        for _ in range(TRIES):
            try:
                self._call(f"write {key}", obstore.put, key, data, mode="create")
                return True
            except THERE:
                found = self.get(key)
                if found is not None:
                    return found == data
        raise StorageError(f"{self.where.uri}: write {key}: the store kept refusing it")

    def overwrite(self, key: str, data: bytes) -> None:
        import obstore

        self._call(f"write {key}", obstore.put, key, data, mode="overwrite")

    def names(self, prefix: str, after: str | None = None) -> Iterator[str]:
        """The keys under ``prefix`` in order, those after ``after`` only when given."""
        for key, _ in self.listing(prefix, after):
            yield key

    def listing(self, prefix: str, after: str | None = None) -> list[tuple[str, float]]:
        """The keys under ``prefix`` (after ``after`` when given), each with when the store
        last wrote it (the store's clock), sorted by key: object_store promises no order
        ("the order of returned ObjectMeta is not guaranteed"), and a local folder's
        listing has none."""
        import obstore

        def listed(store: Any) -> list[tuple[str, float]]:  # read whole, inside the retry
            stream = obstore.list(store, prefix, offset=after, chunk_size=1000)
            return [
                (str(meta["path"]), meta["last_modified"].timestamp())
                for chunk in stream
                for meta in chunk
            ]

        found: list[tuple[str, float]] = self._call(f"list {prefix}", listed)
        return sorted(item for item in found if after is None or item[0] > after)

    def now(self, key: str) -> float:
        """The store's own clock: ``key`` written (overwritten) and its time read back.
        Leases are judged on it, never on a machine's clock, which may be minutes off."""
        import obstore

        self.overwrite(key, b"")
        meta = self._call(f"read {key}", obstore.head, key)
        return float(meta["last_modified"].timestamp())

    def folders(self, prefix: str) -> list[str]:
        """The names of the 'folders' right under ``prefix`` (a delimiter list)."""
        import obstore

        found = self._call(f"list {prefix}", obstore.list_with_delimiter, prefix)
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in found["common_prefixes"])

    def delete(self, key: str) -> None:
        import obstore

        try:
            self._call(f"delete {key}", obstore.delete, key)
        except ABSENT:
            return


# What obstore's clients say when they found no credentials to sign with: the cloud's
# metadata service asked in vain, a credential chain exhausted, a token never fetched.
# Words, because obstore raises these as GenericError: narrow ones (a message that
# merely holds "token", a listing's continuation token, is not a missing credential).
NO_CREDENTIALS = (
    "169.254.169.254",
    "credential",
    "token request",
    "fetching token",
    "fetch token",
    "no token",
)


def _no_credentials(said: str) -> bool:
    lowered = said.lower()
    return any(words in lowered for words in NO_CREDENTIALS)


def _final(exc: BaseException) -> bool:
    """A store's answer that no retry changes: no such bucket, refused, not allowed."""
    said = str(exc)
    return any(
        f"status code: {code}" in said or f"Server returned non-2xx status code: {code}" in said
        for code in (400, 401, 403, 404, 405)
    ) or any(word in said for word in ("NoSuchBucket", "AccessDenied", "InvalidAccessKeyId"))


# obstore's own retries of a 5xx or a dropped connection: a few, quick (the calls above
# try again too, and a tick that still fails leaves nothing half-written: the next resumes)
RETRY: RetryConfig = {
    "max_retries": 2,
    "backoff": {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=1)},
    "retry_timeout": timedelta(seconds=30),
}
_MEMORY: dict[str, Any] = {}  # memory:// stores, one per bucket name, for the process


def _check_environment() -> None:
    """The stores' own variables, read by obstore itself: one with a line break in it
    (a value pasted with its newline) stops its client with a panic; named here instead,
    its value never shown (it may be a secret)."""
    for name, value in sorted(os.environ.items()):
        if name.startswith(("AWS_", "GOOGLE_", "AZURE_")) and _control(value):
            raise ConfigError(
                f"{name} holds a line break or control character: set it again without"
                " (its value is not shown)"
            )


def _store(where: Bucket) -> Any:
    """The obstore store for the bucket, configured from the environment."""
    from obstore import store

    _check_environment()
    if where.scheme == "memory":
        return _MEMORY.setdefault(where.bucket, store.MemoryStore())
    if where.scheme == "file":
        os.makedirs(where.bucket, exist_ok=True)
        return store.LocalStore(where.bucket)
    if where.scheme == "s3":
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        config: dict[str, Any] = {}
        if endpoint:
            config |= {"endpoint": endpoint, "virtual_hosted_style_request": False}
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            config["region"] = region
        options = {"allow_http": True} if endpoint and endpoint.startswith("http://") else {}
        return store.S3Store(
            where.bucket,
            config=cast("S3Config", config),
            client_options=cast("ClientConfig", options),
            retry_config=RETRY,
        )
    if where.scheme == "gs":
        # obstore reads GOOGLE_* itself; GOOGLE_BASE_URL names a stand-in (the emulator's)
        base = os.environ.get("GOOGLE_BASE_URL", "")
        options = {"allow_http": True} if base.startswith("http://") else {}
        return store.GCSStore(
            where.bucket, client_options=cast("ClientConfig", options), retry_config=RETRY
        )
    return store.AzureStore(where.bucket, retry_config=RETRY)
