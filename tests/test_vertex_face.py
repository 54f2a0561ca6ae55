"""#46.1, 2, 4, 5: the emulator's Vertex and Gemini faces as the services are, for clients
nobody here wrote — google-genai with its default API version, google-cloud-storage —
neither stricter nor more forgiving."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.cli import read_lines
from support.providers import RIGS

genai = pytest.importorskip("google.genai")
storage = pytest.importorskip("google.cloud.storage")

GEMINI = RIGS["vertex-gemini"]
PROJECT = "batchbench-test"  # the test service account's own (its client_email's)


def _clients(emu, monkeypatch, *, project=PROJECT, version=None):
    """The official clients from the environment, as a user's code makes them; google-genai
    at its default API version (v1beta1) unless told."""
    import google.auth
    from google.genai import types

    for name, value in GEMINI.env(emu).items():
        monkeypatch.setenv(name, value)
    creds, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    gcs = storage.Client(project=project, credentials=creds)
    options = types.HttpOptions(base_url=emu.base_urls["vertex"])
    if version:
        options.api_version = version
    client = genai.Client(
        vertexai=True,
        project=project,
        location="us-central1",
        credentials=creds,
        http_options=options,
    )
    return gcs, client


def _line(i: int, camel: bool = False, **more) -> dict:
    config = {"maxOutputTokens": 64, "temperature": 1} if camel else {"max_output_tokens": 64}
    request = {
        "contents": [{"role": "user", "parts": [{"text": f"question {i}"}]}],
        ("generationConfig" if camel else "generation_config"): config,
    }
    return {"request": request, **more}


def _job(client, gcs, lines, model="gemini-2.5-flash", path="in/a.jsonl"):
    from google.genai import types

    gcs.bucket("batchbench").blob(path).upload_from_string(
        "".join(json.dumps(x) + "\n" for x in lines), content_type="application/jsonl"
    )
    return client.batches.create(
        model=model,
        src=f"gs://batchbench/{path}",
        config=types.CreateBatchJobConfig(dest="gs://batchbench/out/" + path.replace("/", "-")),
    )


def _predictions(gcs, job) -> list[dict]:
    folder = job.output_info.gcs_output_directory.removeprefix("gs://batchbench/")
    [blob] = list(gcs.list_blobs("batchbench", prefix=folder + "/"))
    return [json.loads(x) for x in blob.download_as_bytes().splitlines()]


def test_the_sdks_default_version_camel_case_lines_and_other_keys(batch_emulator, monkeypatch):
    """google-genai's default v1beta1 is served; a line written with Google's own
    documented camelCase generationConfig runs (protobuf JSON reads both spellings); a
    line's other keys (Curator's custom_id) ride into its prediction, as Google documents
    for a table's other columns; Google's own sample model is there."""
    emu = batch_emulator
    gcs, client = _clients(emu, monkeypatch)
    lines = [_line(0, camel=True, custom_id="c-0"), _line(1, custom_id="c-1")]
    job = _job(client, gcs, lines)
    emu.flush()
    done = client.batches.get(name=job.name)
    assert done.state.value == "JOB_STATE_SUCCEEDED", done.error
    predictions = _predictions(gcs, done)
    assert sorted(p["custom_id"] for p in predictions) == ["c-0", "c-1"]
    assert all(p["status"] == "" and p["response"]["candidates"] for p in predictions)
    assert client.models.get(model="gemini-2.5-flash").name.endswith("gemini-2.5-flash")
    client.batches.delete(name=job.name)  # a finished job can be deleted
    with pytest.raises(genai.errors.ClientError) as gone:
        client.batches.get(name=job.name)
    assert gone.value.code == 404


def test_vertex_refuses_what_vertex_refuses(batch_emulator, monkeypatch):
    """A Claude model under publishers/google is not found; a job whose input object is
    not there is refused at create; a running job cannot be deleted."""
    from google.genai import errors

    emu = batch_emulator
    emu.store.settings.paused = True
    gcs, client = _clients(emu, monkeypatch)
    with pytest.raises(errors.ClientError) as wrong:
        _job(client, gcs, [_line(0)], model="publishers/google/models/claude-opus-5")
    assert wrong.value.code == 404 and "claude-opus-5" in str(wrong.value)
    from google.genai import types

    with pytest.raises(errors.ClientError) as missing:
        client.batches.create(
            model="gemini-2.5-flash",
            src="gs://batchbench/in/nothing-here.jsonl",
            config=types.CreateBatchJobConfig(dest="gs://batchbench/out/x"),
        )
    assert missing.value.code == 400 and "nothing-here.jsonl" in str(missing.value)
    running = _job(client, gcs, [_line(0)])
    with pytest.raises(errors.ClientError) as busy:
        client.batches.delete(name=running.name)
    assert busy.value.code == 400
    assert [b["name"] for b in emu.ledger()["batches"]] == [running.display_name]


def test_credentials_are_checked_as_google_checks_them(batch_emulator, monkeypatch):
    """A project the service account cannot see is 403 PERMISSION_DENIED; a token the
    service never gave, or one that has expired, is 401 UNAUTHENTICATED — in Google's
    envelope."""
    from google.genai import errors

    emu = batch_emulator
    _, other = _clients(emu, monkeypatch, project="someone-elses-project")
    with pytest.raises(errors.ClientError) as denied:
        list(other.batches.list())
    assert denied.value.code == 403 and denied.value.status == "PERMISSION_DENIED"
    url = (
        f"{emu.base_urls['vertex']}/v1/projects/{PROJECT}/locations/us-central1/batchPredictionJobs"
    )
    request = urllib.request.Request(url, headers={"Authorization": "Bearer ya29.made-up"})
    with pytest.raises(urllib.error.HTTPError) as made_up:
        urllib.request.urlopen(request)
    body = json.loads(made_up.value.read())
    assert made_up.value.code == 401 and body["error"]["status"] == "UNAUTHENTICATED"
    _, client = _clients(emu, monkeypatch)
    list(client.batches.list())  # a token it gave: taken
    emu.store.settings.expired_tokens = emu.store.now() + 1  # every token so far expired
    with pytest.raises(errors.ClientError) as expired:
        list(client.batches.list())
    assert expired.value.code == 401 and expired.value.status == "UNAUTHENTICATED"


def test_cloud_storage_keeps_types_deletes_and_makes_buckets(batch_emulator, monkeypatch):
    from google.api_core import exceptions

    gcs, _ = _clients(batch_emulator, monkeypatch)
    blob = gcs.bucket("batchbench").blob("notes/a.jsonl")
    blob.upload_from_string(b'{"a": 1}\n', content_type="application/jsonl")
    assert gcs.bucket("batchbench").get_blob("notes/a.jsonl").content_type == "application/jsonl"
    blob.delete()
    assert gcs.bucket("batchbench").get_blob("notes/a.jsonl") is None
    with pytest.raises(exceptions.NotFound):
        blob.delete()
    made = gcs.create_bucket("team-bucket")
    assert made.name == "team-bucket" and gcs.bucket("team-bucket").exists()
    with pytest.raises(exceptions.Conflict):
        gcs.create_bucket("team-bucket")


def test_a_gemini_call_without_a_key_is_googles_403(batch_emulator):
    """#46.4: with no key header the call fell through to the OpenAI face's 404."""
    url = f"{batch_emulator.base_urls['gemini']}/v1beta/models/gemini-2.5-flash"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url)
    body = json.loads(refused.value.read())
    assert refused.value.code == 403 and body["error"]["status"] == "PERMISSION_DENIED"


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_emulators_key_file_goes_with_it(how):
    """#46.5: the service-account key the emulator prints is removed when it is stopped
    by SIGTERM or SIGINT (not only at a normal exit); one a killed emulator left behind
    is removed by the next, never taken up."""
    pytest.importorskip("cryptography")
    import tempfile

    stale = Path(tempfile.mkdtemp(prefix="batchbench-emulator-adc-999999999-"))
    (stale / "service-account.json").write_text("{}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchbench", "emulator", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wanted = "GOOGLE_APPLICATION_CREDENTIALS="
        said = read_lines(proc.stdout, 100, until=lambda line: wanted in line)
        assert said and wanted in said[-1], said
        key = Path(said[-1].split("=", 1)[1].strip())
        assert key.is_file()
        assert not stale.exists()  # a dead emulator's folder: swept, not reused
        os.kill(proc.pid, how)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not key.parent.exists()


def test_a_stop_while_the_emulator_announces_itself_still_cleans_up():
    """A SIGTERM that lands while the emulator is still printing its exports (the CI
    flake: the emulator never exited) stops it as one that lands later does: its
    server shut, its key file removed. The order is forced: the announcement itself
    is interrupted at the key's line."""
    pytest.importorskip("cryptography")
    from batchbench.emulator import Emulator
    from batchbench.emulator.service import serve

    said: list[str] = []

    def announce(line: str) -> None:
        said.append(line)
        if "GOOGLE_APPLICATION_CREDENTIALS=" in line:
            raise KeyboardInterrupt  # what the SIGTERM handler raises, here and now

    emulator = Emulator()
    before = signal.getsignal(signal.SIGTERM)
    try:
        serve(emulator, announce)  # returns: the interrupt is the emulator's to handle
    finally:
        signal.signal(signal.SIGTERM, before)
    key = Path(said[-1].split("=", 1)[1].strip())
    assert not key.parent.exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(emulator.url + "/v1/models", timeout=2)


def test_a_self_signed_jwt_is_taken_as_google_takes_it(batch_emulator, monkeypatch):
    """#62.1: google-auth's service-account credentials with ``always_use_jwt_access``
    (google-cloud-aiplatform's clients, Curator's Gemini backend) send a JWT they signed
    themselves, and no token request; Vertex takes it (AIP-4111). The face takes what
    Google takes — google-auth's own JWT, with a scope or with the service as audience —
    and refuses, in Google's envelope, what Google refuses: another key's signature, an
    expired JWT, another service's audience."""
    import time

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from google.auth import crypt
    from google.auth import jwt as google_jwt
    from google.auth.transport.requests import AuthorizedSession, Request
    from google.oauth2 import service_account

    emu = batch_emulator
    for name, value in GEMINI.env(emu).items():
        monkeypatch.setenv(name, value)
    path = os.environ["GOOGLE_APPLICATION_CREDENTIALS"]
    info = json.loads(Path(path).read_text())
    url = (
        f"{emu.base_urls['vertex']}/v1/projects/{PROJECT}/locations/us-central1/batchPredictionJobs"
    )
    scoped = service_account.Credentials.from_service_account_file(
        path, scopes=["https://www.googleapis.com/auth/cloud-platform"], always_use_jwt_access=True
    )
    host = emu.base_urls["vertex"].split("//", 1)[1]
    audienced = service_account.Credentials.from_service_account_file(
        path, always_use_jwt_access=True
    )
    audienced._create_self_signed_jwt(f"https://{host}/")  # as a generated client does
    for creds in (scoped, audienced):
        taken = AuthorizedSession(creds).get(url)
        assert taken.status_code == 200, taken.text
        assert creds.token.count(".") == 2  # a JWT: no token was asked for
    assert not emu.face("vertex").tokens

    def signed(claims: dict, key_pem: str = info["private_key"]) -> str:
        signer = crypt.RSASigner.from_string(key_pem, info["private_key_id"])
        return google_jwt.encode(signer, claims).decode()

    now = int(time.time())
    good = {"iss": info["client_email"], "sub": info["client_email"], "iat": now, "exp": now + 3600}
    good["scope"] = "https://www.googleapis.com/auth/cloud-platform"
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other_pem = stranger.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    refused = {
        "another key's": signed(good, other_pem),
        "expired": signed({**good, "iat": now - 7200, "exp": now - 3600}),
        "another service's": signed(
            {
                **{k: v for k, v in good.items() if k != "scope"},
                "aud": "https://storage.googleapis.com/",
            }
        ),
        "living too long": signed({**good, "exp": now + 7200}),
    }
    assert AuthorizedSession(scoped).get(url).status_code == 200  # the same, signed well
    session = Request()
    for why, token in refused.items():
        reply = session(url=url, method="GET", headers={"Authorization": f"Bearer {token}"})
        body = json.loads(reply.data)
        assert reply.status == 401 and body["error"]["status"] == "UNAUTHENTICATED", why
    # a JWT of the account, on a project it cannot see: Google's 403
    elsewhere = url.replace(f"projects/{PROJECT}/", "projects/someone-elses/")
    reply = session(
        url=elsewhere, method="GET", headers={"Authorization": f"Bearer {signed(good)}"}
    )
    assert reply.status == 403 and json.loads(reply.data)["error"]["status"] == "PERMISSION_DENIED"
