"""#46.3: the emulator's S3 and Bedrock faces as boto3 itself drives them — its transfer
manager's multipart uploads and ranged downloads, HEAD, DELETE and ListBuckets, S3's
XML errors, Bedrock's ListFoundationModels, a job's manifest with the token counts
AWS documents (docs.aws.amazon.com bedrock userguide batch-inference-results)."""

from __future__ import annotations

import json
import os

import pytest
from support.providers import RIGS

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

BEDROCK = RIGS["bedrock"]


@pytest.fixture
def aws(batch_emulator, monkeypatch):
    """boto3's clients as a user's code makes them from the environment the emulator
    prints (its own retries off, so a fault is seen as the service gave it)."""
    for name, value in BEDROCK.env(batch_emulator).items():
        monkeypatch.setenv(name, value)
    config = Config(retries={"total_max_attempts": 1}, s3={"addressing_style": "path"})
    session = boto3.session.Session(region_name="us-east-1")
    return session.client("s3", config=config), session.client("bedrock", config=config)


def test_the_transfer_managers_upload_and_download(aws, tmp_path):
    s3, _ = aws
    big = tmp_path / "records.jsonl"
    big.write_bytes(os.urandom(9 * 1024 * 1024 + 123))  # past 8 MiB: multipart, ranged
    s3.upload_file(str(big), "batchbench", "in/records.jsonl")
    head = s3.head_object(Bucket="batchbench", Key="in/records.jsonl")
    assert head["ContentLength"] == big.stat().st_size
    back = tmp_path / "back.jsonl"
    s3.download_file("batchbench", "in/records.jsonl", str(back))
    assert back.read_bytes() == big.read_bytes()
    assert "batchbench" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.head_bucket(Bucket="batchbench")
    with pytest.raises(ClientError) as missing:
        s3.head_bucket(Bucket="no-such-bucket")
    assert missing.value.response["Error"]["Code"] == "404"
    s3.delete_object(Bucket="batchbench", Key="in/records.jsonl")
    with pytest.raises(ClientError) as gone:
        s3.get_object(Bucket="batchbench", Key="in/records.jsonl")
    assert gone.value.response["Error"]["Code"] == "NoSuchKey"  # parsed from S3's XML


def test_s3s_errors_are_s3s_xml_even_for_a_fault(aws, batch_emulator):
    s3, _ = aws
    batch_emulator.hub.faults.rate = 1.0  # every call answered with a fault
    with pytest.raises(ClientError) as fault:
        s3.list_objects_v2(Bucket="batchbench")
    error = fault.value.response["Error"]
    assert error["Code"] in ("SlowDown", "InternalError"), error


def test_bedrock_lists_its_models_and_checks_buckets_at_create(aws):
    _, bedrock = aws
    summaries = bedrock.list_foundation_models(byProvider="anthropic")["modelSummaries"]
    ids = [m["modelId"] for m in summaries]
    assert ids and all(i.startswith("anthropic.claude-") for i in ids)
    records = {"s3InputDataConfig": {"s3Uri": "s3://batchbench/in/a.jsonl"}}
    with pytest.raises(ClientError) as refused:
        bedrock.create_model_invocation_job(
            jobName="bucketless",
            roleArn="arn:aws:iam::123456789012:role/batch",
            modelId=ids[0],
            inputDataConfig=records,
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": "s3://no-such-bucket/out/"}},
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "no-such-bucket" in refused.value.response["Error"]["Message"]


def test_a_jobs_manifest_counts_its_tokens(aws, batch_emulator):
    """manifest.json.out's inputTokenCount and outputTokenCount: the sums of the usage its
    output lines report, added up here."""
    s3, bedrock = aws
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hello"}],
    }
    lines = [{"recordId": f"R{i:011d}", "modelInput": body} for i in range(100)]
    s3.put_object(
        Bucket="batchbench", Key="in/a.jsonl", Body="".join(json.dumps(x) + "\n" for x in lines)
    )
    [model] = bedrock.list_foundation_models(byProvider="anthropic")["modelSummaries"][:1]
    made = bedrock.create_model_invocation_job(
        jobName="counted",
        roleArn="arn:aws:iam::123456789012:role/batch",
        modelId=model["modelId"],
        inputDataConfig={"s3InputDataConfig": {"s3Uri": "s3://batchbench/in/a.jsonl"}},
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": "s3://batchbench/out/"}},
    )
    batch_emulator.flush()
    job_id = made["jobArn"].rsplit("/", 1)[-1]
    listed = s3.list_objects_v2(Bucket="batchbench", Prefix=f"out/{job_id}/")["Contents"]
    files = {o["Key"].rsplit("/", 1)[-1]: o["Key"] for o in listed}
    output = s3.get_object(Bucket="batchbench", Key=files["a.jsonl.out"])["Body"].read()
    usage = [json.loads(x)["modelOutput"]["usage"] for x in output.splitlines()]
    manifest = json.loads(
        s3.get_object(Bucket="batchbench", Key=files["manifest.json.out"])["Body"].read()
    )
    assert manifest["successRecordCount"] == 100
    assert manifest["inputTokenCount"] == sum(u["input_tokens"] for u in usage) > 0
    assert manifest["outputTokenCount"] == sum(u["output_tokens"] for u in usage) > 0


def test_count_tokens_counts_what_invoke_bills_and_bills_nothing(aws, batch_emulator):
    """CountTokens as boto3 sends it (its body a blob, base64 in JSON): the input tokens
    an InvokeModel of the same body reports, AWS's documented promise ("will match the
    token count that would be charged"), with nothing executed; a body that is not a
    Messages request is a ValidationException."""
    runtime = boto3.session.Session(region_name="us-east-1").client(
        "bedrock-runtime", config=Config(retries={"total_max_attempts": 1})
    )
    model = "anthropic.claude-opus-5-v1:0"
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 16,
        "system": "You are a careful clinician.",
        "messages": [{"role": "user", "content": "Which dose of amoxicillin for a child?"}],
    }
    counted = runtime.count_tokens(
        modelId=model, input={"invokeModel": {"body": json.dumps(body).encode()}}
    )["inputTokens"]
    assert not batch_emulator.ledger()["executions"]
    reply = json.loads(runtime.invoke_model(modelId=model, body=json.dumps(body))["body"].read())
    assert counted == reply["usage"]["input_tokens"] > 0
    with pytest.raises(ClientError) as refused:
        runtime.count_tokens(modelId=model, input={"invokeModel": {"body": b"{}"}})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
