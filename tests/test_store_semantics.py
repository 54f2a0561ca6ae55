"""The stores' conditional writes as their services document them, probed with the clients
nobody here wrote: boto3 against the emulator's S3 face *and* moto's S3 server (the same
assertions hold on both: moto is the witness that is not ours), google-cloud-storage
against the emulator's Cloud Storage JSON API, obstore against its XML API.

Sources: S3 user guide, "Add preconditions to S3 operations with conditional requests"
(``If-None-Match: *`` on an existing key → 412 PreconditionFailed; ``If-Match`` with
another ETag → 412; ``If-Match`` on a missing key → 404 NoSuchKey); Cloud Storage,
"Request preconditions" (``ifGenerationMatch=0`` / ``x-goog-if-generation-match: 0``
on a live object → 412; a number other than the live generation → 412).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

boto3 = pytest.importorskip("boto3")


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    pytest.importorskip("moto")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def _s3(url: str):
    client = boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="team-not-secret",
        aws_secret_access_key="team-not-secret",
    )
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket="probe")
    return client


def _refused(call) -> tuple[int, str]:
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as caught:
        call()
    answer = caught.value.response
    return answer["ResponseMetadata"]["HTTPStatusCode"], answer["Error"]["Code"]


@pytest.mark.parametrize("where", ["emulator", "moto"])
def test_s3_conditional_puts_as_documented(where, batch_emulator, request):
    url = batch_emulator.base_urls["bedrock"] if where == "emulator" else None
    s3 = _s3(url or request.getfixturevalue("moto_url"))
    made = s3.put_object(Bucket="probe", Key="j/1.json", Body=b"one", IfNoneMatch="*")
    assert _refused(
        lambda: s3.put_object(Bucket="probe", Key="j/1.json", Body=b"two", IfNoneMatch="*")
    ) == (412, "PreconditionFailed")
    assert s3.get_object(Bucket="probe", Key="j/1.json")["Body"].read() == b"one"
    assert _refused(
        lambda: s3.put_object(Bucket="probe", Key="j/1.json", Body=b"x", IfMatch='"nope"')
    ) == (412, "PreconditionFailed")
    assert _refused(
        lambda: s3.put_object(Bucket="probe", Key="j/none", Body=b"x", IfMatch=made["ETag"])
    ) == (404, "NoSuchKey")
    s3.put_object(Bucket="probe", Key="j/1.json", Body=b"three", IfMatch=made["ETag"])
    assert s3.get_object(Bucket="probe", Key="j/1.json")["Body"].read() == b"three"
    # a delimiter listing: the "folders" right under a prefix
    s3.put_object(Bucket="probe", Key="j/sub/2.json", Body=b"2")
    listed = s3.list_objects_v2(Bucket="probe", Prefix="j/", Delimiter="/")
    assert [c["Key"] for c in listed["Contents"]] == ["j/1.json"]
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["j/sub/"]


def _gcs(emu, monkeypatch):
    storage = pytest.importorskip("google.cloud.storage")
    import google.auth

    for name, value in emu.environment().items():
        monkeypatch.setenv(name, value)
    creds, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    return storage.Client(project="batchbench-test", credentials=creds).bucket("batchbench")


def test_cloud_storage_generation_preconditions_as_documented(batch_emulator, monkeypatch):
    from google.api_core import exceptions

    bucket = _gcs(batch_emulator, monkeypatch)
    blob = bucket.blob("j/1.json")
    blob.upload_from_string(b"one", if_generation_match=0)
    first = blob.generation
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("j/1.json").upload_from_string(b"two", if_generation_match=0)
    assert bucket.blob("j/1.json").download_as_bytes() == b"one"
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("j/1.json").upload_from_string(b"x", if_generation_match=first + 1)
    bucket.blob("j/1.json").upload_from_string(b"three", if_generation_match=first)
    assert bucket.blob("j/1.json").download_as_bytes() == b"three"
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("j/1.json").delete(if_generation_match=first)  # replaced since


def test_cloud_storage_xml_api_through_obstore(batch_emulator, monkeypatch):
    """obstore speaks the XML API: a create-only put is refused where an object lives, and
    what another client wrote through the JSON API is the same object."""
    pytest.importorskip("obstore")
    import obstore
    from obstore.exceptions import AlreadyExistsError, NotFoundError, PreconditionError
    from obstore.store import GCSStore

    bucket = _gcs(batch_emulator, monkeypatch)  # the variables set, as a user's shell has
    store = GCSStore("batchbench", client_options={"allow_http": True})
    obstore.put(store, "x/a.json", b"one", mode="create")
    with pytest.raises((AlreadyExistsError, PreconditionError)):
        obstore.put(store, "x/a.json", b"two", mode="create")
    assert bytes(obstore.get(store, "x/a.json").bytes()) == b"one"
    assert bucket.blob("x/a.json").download_as_bytes() == b"one"  # the JSON API agrees
    bucket.blob("x/b/c.json").upload_from_string(b"c")
    listed = obstore.list_with_delimiter(store, "x/")
    assert [o["path"] for o in listed["objects"]] == ["x/a.json"]
    assert listed["common_prefixes"] == ["x/b"]
    obstore.delete(store, "x/a.json")
    with pytest.raises((NotFoundError, FileNotFoundError)):
        obstore.get(store, "x/a.json")
