"""The emulator's Fireworks face, driven through the real fireworks-ai SDK over loopback HTTP.

Expectations are the service's documented behaviour (provider-batch-apis.md §3 and the
SDK's own types); output files are fetched through their signed URLs with plain HTTP.
"""

from __future__ import annotations

import json
import urllib.request

import fireworks
import pytest


def client(emu, key="fk") -> fireworks.Fireworks:
    return fireworks.Fireworks(api_key=key, account_id="acct", base_url=emu.url, max_retries=0)


def lines(n, **body):
    return "".join(
        json.dumps(
            {
                "custom_id": f"r{i}",
                "body": {"messages": [{"role": "user", "content": f"question {i}"}], **body},
            }
        )
        + "\n"
        for i in range(n)
    ).encode()


def dataset(c, name, data):
    c.datasets.create(dataset_id=name, dataset={"display_name": name})
    c.datasets.upload(name, file=(f"{name}.jsonl", data))
    return f"accounts/acct/datasets/{name}"


def output(c, name) -> dict[str, list[dict]]:
    urls = c.datasets.get_download_endpoint(name).filename_to_signed_urls or {}
    return {
        fn: [json.loads(x) for x in urllib.request.urlopen(url).read().splitlines()]
        for fn, url in urls.items()
    }


PARAMS = {"max_tokens": 100, "temperature": 1, "extra_body": '{"reasoning_effort":"none"}'}


def test_a_job_runs_counts_its_progress_and_writes_its_output_dataset(
    batch_emulator_factory, clock
):
    emu = batch_emulator_factory(latency=3600)
    c = client(emu)
    source = dataset(c, "in", lines(4))
    assert c.datasets.get("in").state == "READY"
    job = c.batch_inference_jobs.create(
        batch_inference_job_id="job-1",
        model="accounts/fireworks/models/glm-5p3",
        input_dataset_id=source,
        output_dataset_id="accounts/acct/datasets/out",
        inference_parameters=PARAMS,
    )
    assert job.name == "accounts/acct/batchInferenceJobs/job-1"
    assert job.state == "JOB_STATE_VALIDATING"
    assert job.inference_parameters.max_tokens == 100
    clock.advance(3600 + 1800)
    half = c.batch_inference_jobs.get("job-1")
    assert half.state == "JOB_STATE_RUNNING" and half.job_progress.total_input_requests == 4
    assert 0 < half.job_progress.successfully_processed_requests < 4
    emu.flush()
    done = c.batch_inference_jobs.get("job-1")
    assert done.state == "JOB_STATE_COMPLETED" and done.job_progress.percent == 100
    files = output(c, "out")
    assert list(files) == ["BIJOutputSet.jsonl"]
    got = {x["custom_id"]: x["response"] for x in files["BIJOutputSet.jsonl"]}
    assert set(got) == {f"r{i}" for i in range(4)}
    assert got["r2"]["choices"][0]["message"]["content"].endswith("question 2")
    assert got["r2"]["model"] == "accounts/fireworks/models/glm-5p3"


def test_job_ids_are_the_callers_and_a_second_create_is_refused(batch_emulator):
    c = client(batch_emulator)
    source = dataset(c, "in", lines(2))
    kwargs = {"model": "m", "input_dataset_id": source}
    c.batch_inference_jobs.create(batch_inference_job_id="mine", **kwargs)
    with pytest.raises(fireworks.ConflictError):
        c.batch_inference_jobs.create(batch_inference_job_id="mine", **kwargs)
    with pytest.raises(fireworks.ConflictError):
        c.datasets.create(dataset_id="in", dataset={})
    with pytest.raises(fireworks.BadRequestError):  # a dataset is uploaded once
        c.datasets.upload("in", file=("again.jsonl", lines(1)))
    c.datasets.create(dataset_id="empty", dataset={})
    with pytest.raises(fireworks.BadRequestError):  # not READY: no job on it
        c.batch_inference_jobs.create(model="m", input_dataset_id="accounts/acct/datasets/empty")
    made = [
        c.batch_inference_jobs.create(model="m", input_dataset_id=source).name for _ in range(3)
    ]
    listed = [j.name for j in c.batch_inference_jobs.list(page_size=2)]
    assert listed == ["accounts/acct/batchInferenceJobs/mine", *made]  # oldest first, every page


def test_the_model_gets_the_jobs_parameters_merged_into_each_line(batch_emulator_factory):
    seen = []

    def responder(body):
        seen.append(body)
        if body["messages"][0]["content"].endswith("1"):
            return {
                "status_code": 400,
                "body": {
                    "error": {"message": "reasoning_effort 'none' is not supported by this model"}
                },
            }
        return "fine"

    emu = batch_emulator_factory(responder=responder)
    c = client(emu)
    bad = json.dumps({"custom_id": "with-model", "body": {"model": "x", "messages": []}}) + "\n"
    source = dataset(c, "in", lines(3) + bad.encode())
    c.batch_inference_jobs.create(
        batch_inference_job_id="j",
        model="accounts/fireworks/models/sim-m",
        input_dataset_id=source,
        inference_parameters=PARAMS,
        output_dataset_id="accounts/acct/datasets/out",
    )
    emu.flush()
    assert {json.dumps(b, sort_keys=True) for b in seen} == {
        json.dumps(
            {
                "model": "accounts/fireworks/models/sim-m",
                "max_tokens": 100,
                "temperature": 1,
                "reasoning_effort": "none",
                "messages": [{"role": "user", "content": f"question {i}"}],
            },
            sort_keys=True,
        )
        for i in range(3)
    }
    files = output(c, "out")
    errors = {x["custom_id"]: x["error"] for x in files["error-data.jsonl"]}
    assert errors["r1"]["code"] == 400 and "reasoning_effort" in errors["r1"]["message"]
    assert errors["with-model"]["code"] == 400  # a line may not name the model
    assert {x["custom_id"] for x in files["BIJOutputSet.jsonl"]} == {"r0", "r2"}


def test_cancel_and_expiry_keep_what_ran(batch_emulator_factory, clock):
    emu = batch_emulator_factory(latency=5000, completion_window=7200)
    c = client(emu)
    source = dataset(c, "in", lines(6))
    for name in ("expiring", "cancelled"):
        out = f"accounts/acct/datasets/{name}-out"
        c.batch_inference_jobs.create(
            batch_inference_job_id=name, model="m", input_dataset_id=source, output_dataset_id=out
        )
    clock.advance(5100)
    told = c.post("/v1/accounts/acct/batchInferenceJobs/cancelled:cancel", body={}, cast_to=object)
    assert told["state"] == "JOB_STATE_CANCELLING" and told["displayName"] == "cancelled"
    clock.advance(2200)  # the window closes at 7200 s; the cancel takes a latency
    assert c.batch_inference_jobs.get("cancelled").state == "JOB_STATE_CANCELLING"
    clock.advance(5000)
    for name, state in (("cancelled", "JOB_STATE_CANCELLED"), ("expiring", "JOB_STATE_EXPIRED")):
        assert c.batch_inference_jobs.get(name).state == state
        assert 1 <= len(output(c, f"{name}-out")["BIJOutputSet.jsonl"]) < 6
    with pytest.raises(fireworks.BadRequestError):
        c.post("/v1/accounts/acct/batchInferenceJobs/cancelled:cancel", body={}, cast_to=object)
    c.batch_inference_jobs.delete("cancelled")
    with pytest.raises(fireworks.NotFoundError):
        c.batch_inference_jobs.get("cancelled")


def test_keys_models_and_signed_urls(batch_emulator_factory):
    emu = batch_emulator_factory(api_key="fk", unknown_models=["nope"])
    with pytest.raises(fireworks.AuthenticationError):
        client(emu, key="wrong").batch_inference_jobs.list()
    c = client(emu)
    assert c.models.get("glm-5p3", account_id="fireworks").name.endswith("models/glm-5p3")
    with pytest.raises(fireworks.NotFoundError):
        c.models.get("nope", account_id="fireworks")
    source = dataset(c, "in", lines(1))
    c.batch_inference_jobs.create(
        batch_inference_job_id="j",
        model="m",
        input_dataset_id=source,
        output_dataset_id="accounts/acct/datasets/out",
    )
    emu.flush()
    url = c.datasets.get_download_endpoint("out").filename_to_signed_urls["BIJOutputSet.jsonl"]
    assert urllib.request.urlopen(url).read()  # no key: the URL is the credential
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(url.replace("/blobs/", "/blobs/0"))


def test_the_upload_path_for_large_files_signed_puts_then_validate(batch_emulator):
    """The SDK's path for files over 150 MB (fireworks.lib.dataset_upload): signed URLs
    for each file, a PUT of each, then validateUpload; the dataset is READY only then."""
    c = client(batch_emulator)
    c.datasets.create(dataset_id="big", dataset={"display_name": "big"})
    shards = {"a.jsonl": lines(2), "b.jsonl": lines(3)}
    sizes = {name: str(len(data)) for name, data in shards.items()}
    urls = c.datasets.get_upload_endpoint("big", filename_to_size=sizes).filename_to_signed_urls
    assert set(urls) == set(shards)
    with pytest.raises(fireworks.BadRequestError):  # not every file is there yet
        c.datasets.validate_upload("big", body={})
    for name, data in shards.items():
        put = urllib.request.Request(
            urls[name],
            data=data,
            method="PUT",
            headers={"Content-Type": "application/octet-stream"},
        )
        urllib.request.urlopen(put).read()  # no key: the URL is the credential
    assert c.datasets.get("big").state == "UPLOADING"
    c.datasets.validate_upload("big", body={})
    assert c.datasets.get("big").state == "READY" and c.datasets.get("big").example_count == "5"
    assert [d.name for d in c.datasets.list()] == ["accounts/acct/datasets/big"]


def test_jobs_list_oldest_first_and_a_page_size_over_200_is_coerced(batch_emulator):
    c = client(batch_emulator)
    source = dataset(c, "in", lines(1))
    made = [
        c.batch_inference_jobs.create(
            batch_inference_job_id=f"j{i}", model="m", input_dataset_id=source
        ).name
        for i in range(3)
    ]
    assert [j.name for j in c.batch_inference_jobs.list(page_size=500)] == made  # not refused
    newest = c.batch_inference_jobs.list(order_by="create_time desc", page_size=2)
    assert [j.name for j in newest] == made[::-1]  # every page, newest first


def test_deleting_a_running_job_stops_it(batch_emulator_factory, clock):
    emu = batch_emulator_factory(latency=100)
    c = client(emu)
    source = dataset(c, "in", lines(10))
    c.batch_inference_jobs.create(batch_inference_job_id="j", model="m", input_dataset_id=source)
    clock.advance(150)  # running: about half its lines done
    ran = len(emu.ledger()["executions"])
    assert 0 < ran < 10
    c.batch_inference_jobs.delete("j")
    assert c.batch_inference_jobs.get("j").state == "JOB_STATE_DELETING"
    clock.advance(1000)
    with pytest.raises(fireworks.NotFoundError):
        c.batch_inference_jobs.get("j")
    assert len(emu.ledger()["executions"]) == ran  # nothing ran after the delete
    with pytest.raises(fireworks.NotFoundError):  # an unknown model is refused at create
        c.batch_inference_jobs.create(
            batch_inference_job_id="k",
            model="accounts/fireworks/models/glm-9p9",
            input_dataset_id=source,
        )
