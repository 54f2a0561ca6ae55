"""The state machine with a fake Batch API and a fake clock: no HTTP, no sleeping.

The fake keeps batches in memory and runs each line through the emulator's own
default model when its time comes, so these tests check the pipeline's
decisions (what it journals, what it adopts, what it refuses) in milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from batchbench.dataset import load_dataset
from batchbench.emulator.model import run_line
from batchbench.errors import ApiError, TransientApiError
from batchbench.pipeline import Pipeline, Settings
from batchbench.report import write_report
from batchbench.rundir import Run, RunConfig
from batchbench.runs import fold

FIXTURE = Path(__file__).parent / "fixtures" / "dataset"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeApi:
    """Batches finish ``duration`` seconds after creation, counting lines as they go."""

    def __init__(self, clock: Clock, duration: float = 100.0) -> None:
        self.clock = clock
        self.duration = duration
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.created = 0
        self.fail_next_create_after_creating = False
        self.status_override: str | None = None

    def upload(self, path: Path) -> str:
        file_id = f"file-{len(self.files)}"
        self.files[file_id] = path.read_bytes()
        return file_id

    def create(self, file_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        self.created += 1
        batch_id = f"batch_{self.created}"
        lines = [json.loads(x) for x in self.files[file_id].splitlines()]
        self.batches[batch_id] = {
            "id": batch_id,
            "metadata": metadata,
            "created_at": int(self.clock()),
            "lines": lines,
            "output_file_id": None,
        }
        if self.fail_next_create_after_creating:
            self.fail_next_create_after_creating = False
            raise TransientApiError("create batch: HTTP 502: bad gateway", status=502)
        return self._obj(batch_id)

    def _obj(self, batch_id: str) -> dict[str, Any]:
        b = self.batches[batch_id]
        total = len(b["lines"])
        share = min(1.0, (self.clock() - b["created_at"]) / self.duration)
        done = int(total * share)
        status = "completed" if share >= 1 else "in_progress"
        if status == "completed" and b["output_file_id"] is None:
            out = []
            for line in b["lines"]:
                response, error = run_line(line["body"], "req", None)
                out.append({"custom_id": line["custom_id"], "response": response, "error": error})
            b["output_file_id"] = f"file-out-{batch_id}"
            self.files[b["output_file_id"]] = "".join(json.dumps(x) + "\n" for x in out).encode()
        return {
            "id": batch_id,
            "status": self.status_override or status,
            "metadata": b["metadata"],
            "created_at": b["created_at"],
            "output_file_id": b["output_file_id"],
            "error_file_id": None,
            "errors": None,
            "request_counts": {"total": total, "completed": done, "failed": 0},
        }

    def batches_since(self, since: float):
        for batch_id in sorted(self.batches, key=lambda i: -int(i.split("_")[1])):
            yield self._obj(batch_id)

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        return self._obj(batch_id)

    def download(self, file_id: str, dest: Path) -> int:
        dest.write_bytes(self.files[file_id])
        return len(self.files[file_id])

    def delete_file(self, file_id: str) -> None:
        self.files.pop(file_id, None)


@pytest.fixture
def made(tmp_path):
    ds = load_dataset(FIXTURE)
    cases = {c["case_id"]: c for c in ds.cases[:6]}
    config = RunConfig(
        name="unit",
        answer_model="a",
        judge_model="j",
        reasoning_effort=None,
        protocol_version="bedside-bench-grading-v1",
        dataset=str(FIXTURE),
        dataset_sha256=ds.sha256,
        selection={},
        case_ids=list(cases),
    )
    run = Run(tmp_path / "unit")
    run.make_folder()
    with run.lock():
        run.create(config)
    clock = Clock()
    api = FakeApi(clock)

    def pipeline(**settings: Any) -> Pipeline:
        return Pipeline(
            run,
            config,
            cases,
            api,  # type: ignore[arg-type]
            Settings(poll_interval=10, max_requests_per_batch=3, **settings),
            say=lambda _: None,
            clock=clock,
            sleep=clock.sleep,
        )

    return run, config, api, clock, pipeline


def test_a_whole_run_on_the_fake_clock(made):
    run, config, api, clock, pipeline = made
    p = pipeline()
    assert p.advance(wait=True) is True
    rows = [json.loads(x) for x in run.results_path.read_bytes().split(b"\n") if x]
    assert sorted(r["case_id"] for r in rows) == sorted(config.case_ids)
    assert all("score" in r for r in rows)
    assert api.created == 4  # 6 answers and 6 judges, 3 to a file
    assert clock.now - 1_000_000.0 < 400  # waited by polling, not by spinning


def test_status_and_report_read_the_counts_from_the_journal(made):
    run, config, api, clock, pipeline = made
    p = pipeline()
    p.advance(wait=False)  # submitted, nothing finished
    clock.sleep(50)
    p.poll()  # half way: the API says so, and the journal records it
    refolded = fold(config.case_ids, run.events())
    counts = {s.id: s.counts for s in refolded.subs.values()}
    assert counts == {s.id: s.counts for s in p.state.subs.values()}
    assert {c["completed"] for c in counts.values()} == {1}  # 3 lines, half done
    write_report(run, p.state, config)
    report = json.loads(run.report_path.read_text())
    assert any("1/3" in r for r in report["stages"]["answers"]["running"])


def test_an_ambiguous_create_is_adopted_not_made_twice(made):
    run, config, api, clock, pipeline = made
    api.fail_next_create_after_creating = True  # the batch exists; the reply was lost
    p = pipeline()
    assert p.advance(wait=True) is True
    subs = [b["metadata"]["batchbench_sub"] for b in api.batches.values()]
    assert len(subs) == len(set(subs))  # one batch per submission
    adopted = [e for e in run.events() if getattr(e, "adopted", False)]
    assert len(adopted) == 1


def test_an_unknown_batch_status_stops_the_run_naming_the_batch(made):
    run, config, api, clock, pipeline = made
    p = pipeline()
    p.advance(wait=False)
    api.status_override = "paused"
    clock.sleep(20)
    with pytest.raises(ApiError, match=r"batch batch_\d has an unknown status 'paused'"):
        p.poll()


def test_a_long_outage_gives_up_after_the_outage_budget(made):
    run, config, api, clock, pipeline = made
    p = pipeline(outage_seconds=120)
    p.advance(wait=False)

    def down(*args: Any, **kwargs: Any):
        raise TransientApiError("list batches: Connection refused")

    api.batches_since = down  # type: ignore[method-assign]
    api.retrieve = down  # type: ignore[method-assign]
    start = clock.now
    with pytest.raises(TransientApiError):
        p.advance(wait=True)
    assert 120 <= clock.now - start < 200


def test_a_group_walks_the_batch_list_once_a_tick_for_all_its_runs(made, tmp_path):
    from batchbench.group import Group, Member

    run, config, api, clock, pipeline = made
    other_run = Run(tmp_path / "other")
    other_run.make_folder()
    with other_run.lock():
        other_config = other_run.create(RunConfig(**{**config.__dict__, "name": "other"}))
    first = pipeline()
    second = Pipeline(
        other_run, other_config, first.cases, api, first.settings,
        say=lambda _: None, clock=clock, sleep=clock.sleep,
    )  # fmt: skip
    walks = []
    real = api.batches_since

    def counted(since):
        walks.append(since)
        return real(since)

    api.batches_since = counted  # type: ignore[method-assign]
    group = Group([Member(first), Member(second)], api, 10, say=lambda _: None,
                  clock=clock, sleep=clock.sleep)  # fmt: skip
    group.advance(wait=True)
    assert first.done() and second.done()
    assert len(walks) == group.list_walks > 0  # one walk per tick, for both runs' batches
