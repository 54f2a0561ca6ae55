"""A team's run in a bucket (#49): any machine advances it, every machine reads it, nothing
is paid twice.

Each command reads the bucket into a working folder of its own and removes it when it
ends, so ticks here are machines that share nothing but the bucket. The stores: obstore's
in-memory store (fast), the emulator's S3 face (conditional writes as S3 documents them)
and moto's S3 server (an S3 nobody here wrote). The witnesses: a local run's rows and
summary, and the emulator's record of every request it executed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.buckets import AWS, pull
from support.cli import REPO, assert_one_line_error, run_cli
from support.runs import assert_no_duplicates, env, normalised, run_args

pytest.importorskip("obstore")


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    """An S3 nobody here wrote: moto's server, its bucket ``team`` made by boto3."""
    pytest.importorskip("moto")
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    s3 = boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    s3.create_bucket(Bucket="team")
    yield url
    server.stop()


def _store(kind: str, emu, moto_url: str | None, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A jobs URI on the store, and the variables that reach it."""
    if kind == "memory":
        return f"memory://{tmp_path.name}/runs", {}
    if kind == "emulator-s3":
        return "s3://batchbench/team", {**AWS, "AWS_ENDPOINT_URL_S3": emu.base_urls["bedrock"]}
    return f"s3://team/{tmp_path.name}", {**AWS, "AWS_ENDPOINT_URL_S3": str(moto_url)}


def _ticks(args: list[str], variables: dict[str, str], clock, most: int = 12) -> list:
    """``--no-wait`` ticks a few minutes apart until the run is done."""
    said = []
    for _ in range(most):
        proc = run_cli(*args, "--no-wait", env={**env(), **variables})
        said.append(proc)
        assert proc.returncode in (0, 3), proc.stdout + proc.stderr
        if proc.returncode == 0:
            return said
        clock.advance(150)
    raise AssertionError("the run did not finish in the ticks given")


@pytest.mark.parametrize("kind", ["memory", "emulator-s3", "moto-s3"])
def test_ticks_from_machines_sharing_only_the_bucket_finish_the_run_once(
    kind, batch_emulator_factory, tmp_path, fixture_dir, clock, request
):
    good = batch_emulator_factory()
    local = run_args(good, tmp_path / "local", fixture_dir, "--limit", "6", cap=3)
    assert run_cli(*local, env=env()).returncode == 0

    emu = batch_emulator_factory(latency=100.0)
    moto = request.getfixturevalue("moto_url") if kind == "moto-s3" else None
    uri, variables = _store(kind, emu, moto, tmp_path)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "6", cap=3)
    args[args.index("--jobs-dir") + 1] = uri
    said = _ticks(args, variables, clock)
    assert f"NEW run 'ans-model' in {uri}/ans-model" in said[0].stdout
    assert f"results: {uri}/ans-model/results.jsonl" in said[-1].stdout
    assert_no_duplicates(emu)  # every request executed once over all the ticks

    # a third machine reads it: status, list, the rows themselves
    jobs = ["--jobs-dir", uri]
    status = json.loads(run_cli("status", "ans-model", *jobs, "--json", env=variables).stdout)
    assert status["status"] == "complete" and status["cases"]["scored"] == 6
    listed = json.loads(run_cli("list", *jobs, "--json", env=variables).stdout)
    assert [r["run"] for r in listed] == ["ans-model"]
    out = tmp_path / "rows.csv"
    exported = run_cli("export", "ans-model", *jobs, "-o", str(out), env=variables)
    assert exported.returncode == 0, exported.stderr
    # the same rows and summary as the local run's
    got = _pull(uri, variables, tmp_path / "pulled")
    assert normalised(got / "ans-model") == normalised(tmp_path / "local" / "jobs" / "ans-model")


def _pull(uri: str, values: dict[str, str], into: Path) -> Path:
    return pull(uri, "ans-model", values, into)


def test_a_run_another_machine_advances_is_said_in_one_line(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """Two machines tick one run: the one without the lease says so (a --no-wait tick
    exits 0) and buys nothing."""
    emu = batch_emulator_factory(latency=100.0)
    uri, variables = _store("emulator-s3", emu, None, tmp_path)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "3")
    args[args.index("--jobs-dir") + 1] = uri
    assert run_cli(*args, "--no-wait", env={**env(), **variables}).returncode == 3
    made = len(emu.ledger()["batches"])
    # the other machine holds the run now: its lease, fresh, in the bucket
    from batchbench.storage.objects import Objects, parse_bucket

    saved = os.environ.copy()
    os.environ.update(variables)
    try:
        objects = Objects(parse_bucket(uri))
        leases = list(objects.names("team/ans-model/lease/"))
        epoch = int(leases[-1].rsplit("/", 1)[-1].split(".")[0]) + 1
        body = {"holder": "ci-runner-7:4242:abcd", "expires": clock.time() + 3600}
        assert objects.create(f"team/ans-model/lease/{epoch:012d}.json", json.dumps(body).encode())
    finally:
        os.environ.clear()
        os.environ.update(saved)
    clock.advance(150)
    proc = run_cli(*args, "--no-wait", env={**env(), **variables})
    assert proc.returncode == 0, proc.stderr
    assert "being advanced by another machine (ci-runner-7:4242:abcd" in proc.stdout
    assert len(emu.ledger()["batches"]) == made


def test_a_machine_killed_mid_tick_is_taken_over_and_nothing_bought_twice(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """A runner killed (SIGKILL) after its batch was made, before its journal said so:
    its lease lapses, the next machine takes the run and adopts the batch (the run's
    mark on it) instead of buying it again."""
    emu = batch_emulator_factory(latency=100.0)
    uri, variables = _store("emulator-s3", emu, None, tmp_path)
    # the runner's journal is stamped on its real clock, this machine's on the test's
    # (weeks on): the not-started rule, which reads those stamps, is set aside here
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "3", "--resubmit-after", "1e9")
    args[args.index("--jobs-dir") + 1] = uri
    killed = subprocess.run(
        [sys.executable, "-m", "batchbench", *args, "--no-wait"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env(), **variables, "BATCHBENCH_FAILPOINT": "created:1"},
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    assert len(emu.ledger()["batches"]) == 1  # bought, and the journal does not know
    # the runner's lease was taken on its clock; this machine's is weeks on (lapsed)
    assert clock.time() > time.time() + 3600
    _ticks(args, variables, clock)
    assert_no_duplicates(emu)
    assert len(emu.ledger()["batches"]) == 2  # the answers' batch, adopted; the judges'


def test_a_bucket_uri_with_credentials_or_a_missing_bucket_is_one_line(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory()
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "2")
    at = args.index("--jobs-dir") + 1
    args[at] = "s3://AKIA123:secret@team/runs"
    proc = run_cli(*args, env=env())
    assert_one_line_error(proc, "credentials do not go in the URI")
    assert "secret" not in proc.stdout + proc.stderr
    args[at] = "ftp://team/runs"
    assert_one_line_error(run_cli(*args, env=env()), "ftp:// is not a store batchbench reads")
    uri, variables = _store("emulator-s3", emu, None, tmp_path)
    args[at] = "s3://no-such-bucket/runs"
    proc = run_cli(*args, env={**env(), **variables})
    assert_one_line_error(proc, "s3://no-such-bucket/runs")


@pytest.mark.parametrize("anomaly", ["s3-slowdown", "s3-conflict", "s3-lost-reply"])
def test_the_stores_bad_days_buy_nothing_twice(
    anomaly, batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """503 SlowDown, a 409 ConditionalRequestConflict that wrote nothing, a put that took
    effect and answered 500: tried again (a create looked up by name first), or the
    tick stops in one line naming the bucket with nothing half-written, and the next
    tick goes on; the run ends with a local run's rows, each request executed once."""
    good = batch_emulator_factory()
    local = run_args(good, tmp_path / "local", fixture_dir, "--limit", "6", cap=3)
    assert run_cli(*local, env=env()).returncode == 0
    emu = batch_emulator_factory(latency=100.0, anomalies={anomaly: 0.3})
    uri, variables = _store("emulator-s3", emu, None, tmp_path)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "6", cap=3)
    args[args.index("--jobs-dir") + 1] = uri
    for _ in range(20):
        proc = run_cli(*args, "--no-wait", env={**env(), **variables})
        if proc.returncode == 0:
            break
        if proc.returncode not in (3,):  # the store's bad day stopped this tick
            assert_one_line_error(proc, uri)
        clock.advance(150)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_no_duplicates(emu)
    got = _pull(uri, variables, tmp_path / "pulled")
    assert normalised(got / "ans-model") == normalised(tmp_path / "local" / "jobs" / "ans-model")


def test_absent_or_wrong_credentials_are_one_line_naming_what_to_set(
    batch_emulator_factory, tmp_path, fixture_dir
):
    from support.runs import KEY

    emu = batch_emulator_factory(api_key=KEY)  # AWS knows one access key here
    uri, variables = _store("emulator-s3", emu, None, tmp_path)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "2")
    args[args.index("--jobs-dir") + 1] = uri
    absent = {**variables, "AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None}
    proc = run_cli(*args, env={**env(), **absent})
    assert_one_line_error(proc, uri, "no credentials for the store", "AWS_ACCESS_KEY_ID")
    wrong = {**variables, "AWS_ACCESS_KEY_ID": "AKIA-NOT-KNOWN"}
    proc = run_cli(*args, env={**env(), **wrong})
    assert_one_line_error(proc, uri, "refused", "AWS_ACCESS_KEY_ID")
    assert "team-not-secret" not in proc.stdout + proc.stderr  # the secret is never said
    assert emu.ledger()["batches"] == []
