"""The state machine with a fake provider and a fake clock: no HTTP, no sleeping.

The fake provider implements the seam (:class:`Wire` and :class:`Client`) with
its own request and result formats, not OpenAI's, so these tests also show the
pipeline speaks to a service only through the seam. Its batches run each line
through the emulator's default model when their time comes; the tests check
the pipeline's decisions (what it journals, what it adopts, what it refuses)
in milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from batchbench.bench.dataset import load_dataset
from batchbench.bench.protocol import Prompt
from batchbench.emulator import FakeClock
from batchbench.emulator.model import default_content
from batchbench.engine.group import Group, Member
from batchbench.engine.pipeline import Pipeline
from batchbench.engine.runconfig import RunConfig
from batchbench.engine.rundir import Run
from batchbench.engine.settings import Settings
from batchbench.engine.state import fold
from batchbench.errors import ApiError, PlanError, TransientApiError, Unreachable
from batchbench.kinds import ProviderName, Stage
from batchbench.providers import frames
from batchbench.providers.base import (
    BatchError,
    BatchFailure,
    BatchView,
    Limits,
    LineRules,
    Provider,
    Rendered,
    Service,
    Tag,
)
from batchbench.views.report_file import write_report

FIXTURE = Path(__file__).parent / "fixtures" / "dataset"


@dataclass
class FakeWire:
    """Lines ``{"id", "ask"}``; results ``{"id", "text"}`` or ``{"id", "status", "why"}``."""

    name: ProviderName = "openai"
    limits: Limits = field(default_factory=lambda: Limits(1000, 10**9))
    rules: LineRules = field(default_factory=lambda: LineRules("Fake", frozenset({429, 500})))

    def effort(self, asked: str | None) -> str | None:
        return asked

    def render(self, prompt: Prompt, model: str, adjust: Any) -> Rendered:
        body: dict[str, Any] = {
            "model": model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
        }
        if prompt.json_mode:
            body["response_format"] = {"type": "json_object"}
        return Rendered(body, temperature=False)

    def fallback(self, status: int, body_text: str, sent: Any, adjust: Any) -> Any:
        return None

    def custom_id(
        self, stage: Stage, case_id: str, attempt: int, run_id: str, judge_pass: int = 1
    ) -> str:
        return f"{stage[0]}{judge_pass if judge_pass > 1 else ''}.{attempt}.{case_id}"

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes:
        return (json.dumps({"id": custom_id, "ask": rendered.body}) + "\n").encode()

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        if len(lines) > self.limits.max_lines:
            raise PlanError(f"{where}: too many lines")

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure:
        return BatchFailure("fail", None, "FakeError: the batch failed")

    def check_replies(self, frame: pl.DataFrame, requests: Sequence[bytes], where: str) -> None:
        """Nothing: the fake service files every reply where it belongs."""

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        records = [
            (str(p), n, json.loads(line))
            for p in paths
            for n, line in enumerate(Path(p).read_bytes().splitlines(), 1)
        ]
        ok = ["text" in r for _, _, r in records]
        return frames.build(
            {
                "file": [f for f, _, _ in records],
                "lineno": [n for _, n, _ in records],
                "row": list(range(len(records))),
                "custom_id": [r["id"] for _, _, r in records],
                "status_code": [
                    200 if good else r["status"] for good, (_, _, r) in zip(ok, records)
                ],
                "has_response": [True] * len(records),
                "has_error": [False] * len(records),
                "error_code": [None] * len(records),
                "error_message": [None] * len(records),
                "body_text": [None if good else r["why"] for good, (_, _, r) in zip(ok, records)],
                "content": [r.get("text") for _, _, r in records],
                "empty_error": "Fake returned nothing",
                **{c: [0] * len(records) for c in frames.USAGE_COLUMNS},
            }
        )


class FakeClient:
    """Batches finish ``duration`` seconds after creation, counting lines as they go."""

    lands_within = 600.0  # a create with no answer may still land this late

    def __init__(self, clock: FakeClock, duration: float = 100.0) -> None:
        # loopback: a stand-in, which no canary precedes
        self.service = Service("openai", "http://127.0.0.1:9/fake")
        self.clock = clock
        self.duration = duration
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.created = 0
        self.lose_next_create = False  # the batch is made, the reply is lost
        self.walks = 0
        self.looks = 0  # finds: one before every create
        self.down = False

    def _up(self) -> None:
        if self.down:
            raise Unreachable("fake service: connection refused")

    def check_models(self, models: Iterable[str]) -> None:
        self._up()

    def upload(self, path: Path, tag: Tag) -> str:
        self._up()
        file_id = f"in-{len(self.files)}"
        self.files[file_id] = path.read_bytes()
        return file_id

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        self._up()
        self.created += 1
        batch_id = f"batch_{self.created}"
        lines = [json.loads(x) for x in self.files[input_ref or ""].splitlines()]
        self.batches[batch_id] = {"tag": tag, "created": self.clock.time(), "lines": lines}
        if self.lose_next_create:
            self.lose_next_create = False
            raise TransientApiError("create batch: HTTP 502: bad gateway", status=502)
        return self.retrieve(batch_id)

    marks = "tag"  # its batches keep their tag, as OpenAI's metadata does

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        self._up()
        self.looks += 1
        for batch_id, b in self.batches.items():
            if b["tag"].sub == tag.sub and b["tag"].run_id == tag.run_id and batch_id not in known:
                return [self.retrieve(batch_id)]
        return []

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        self._up()
        self.walks += 1
        return {b: self.retrieve(b) for b in batch_ids if b in self.batches}

    def retrieve(self, batch_id: str) -> BatchView:
        self._up()
        b = self.batches[batch_id]
        total = len(b["lines"])
        share = min(1.0, (self.clock.time() - b["created"]) / self.duration)
        if share < 1:
            done = int(total * share)
            return BatchView(batch_id, "working", "running", total=total, completed=done)
        out = f"out-{batch_id}"
        if out not in self.files:
            replies = [{"id": x["id"], "text": default_content(x["ask"])} for x in b["lines"]]
            self.files[out] = "".join(json.dumps(r) + "\n" for r in replies).encode()
        return BatchView(batch_id, "done", "ended", "completed", total, total, 0, files=(out,))

    def cancel(self, batch_id: str) -> BatchView | None:
        return None

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        dest.write_bytes(self.files[ref])
        return len(self.files[ref])

    def delete(self, refs: Sequence[str]) -> None:
        for ref in refs:
            self.files.pop(ref, None)


@pytest.fixture
def made(tmp_path, request):
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
    clock = FakeClock(getattr(request, "param", 1_000_000.0))  # where the clock starts
    client = FakeClient(clock)
    provider = Provider(FakeWire(), client)

    def pipeline(run: Run = run, config: RunConfig = config, **settings: Any) -> Pipeline:
        return Pipeline(
            run,
            config,
            cases,
            {"answers": provider, "judges": provider},
            Settings(poll_interval=10, max_requests_per_batch=3, **settings),
            clock=clock,
        )

    return run, config, client, clock, pipeline


def advance(*pipelines: Pipeline, wait: bool = True, outage: float = 600.0) -> Group:
    first = pipelines[0]
    group = Group(
        [Member(p) for p in pipelines],
        first.settings.poll_interval,
        clock=first.clock,
        outage_seconds=outage,
    )
    group.advance(wait=wait)
    return group


def test_a_whole_run_on_the_fake_clock(made):
    run, config, client, clock, pipeline = made
    p = pipeline()
    advance(p)
    assert p.done()
    rows = [json.loads(x) for x in run.results_path.read_bytes().split(b"\n") if x]
    assert sorted(r["case_id"] for r in rows) == sorted(config.case_ids)
    assert all("score" in r for r in rows)
    assert client.created == 4  # 6 answers and 6 judges, 3 to a file
    assert clock.time() - 1_000_000.0 < 400  # waited by polling, not by spinning
    # The provider's own ids went out, and the journal recorded them.
    ids = {line.custom_id for sub in run.state(config.case_ids).subs.values() for line in sub.lines}
    assert ids == {f"{s}.1.{c}" for s in "aj" for c in config.case_ids}


def test_status_and_report_read_the_counts_from_the_journal(made):
    run, config, client, clock, pipeline = made
    p = pipeline()
    advance(p, wait=False)  # submitted, nothing finished
    clock.sleep(50)
    p.submitter.poll(p.in_flight())  # half way: the service says so, and the journal records it
    refolded = run.state(config.case_ids)
    views = {s.id: s.view for s in refolded.subs.values()}
    assert views == {s.id: s.view for s in p.state.subs.values()}
    assert {v.completed for v in views.values() if v is not None} == {1}  # 3 lines, half done
    write_report(run, p.state, config)
    report = json.loads(run.report_path.read_text())
    assert report["stages"]["answers"]["running"] == [
        "answers-0001 running: 1/3 lines done",
        "answers-0002 running: 1/3 lines done",
    ]


def test_an_ambiguous_create_is_adopted_not_made_twice(made):
    run, config, client, clock, pipeline = made
    client.lose_next_create = True  # the batch exists; the reply was lost
    p = pipeline()
    advance(p)
    assert p.done()
    subs = [b["tag"].sub for b in client.batches.values()]
    assert len(subs) == len(set(subs)) == 4  # one batch per submission
    adopted = [e for e in run.events() if getattr(e, "adopted", False)]
    assert len(adopted) == 1


def test_an_unknown_openai_batch_status_is_an_error_naming_the_batch():
    from batchbench.providers.openai_client import view

    with pytest.raises(ApiError, match=r"batch b7 has an unknown status 'paused'"):
        view({"id": "b7", "status": "paused"})


@pytest.mark.parametrize("made", [1_000_000.0, 0.0], indirect=True, ids=["clock", "epoch"])
def test_a_long_outage_gives_up_after_the_outage_budget(made):
    """Also on a clock standing at the epoch: a streak begun at 0 is still a streak."""
    run, config, client, clock, pipeline = made
    p = pipeline()
    advance(p, wait=False)
    client.down = True
    start = clock.time()
    with pytest.raises(TransientApiError):
        advance(p, outage=120)
    assert 120 <= clock.time() - start < 130  # retried every 5 s until the budget was spent


def test_a_group_walks_each_service_once_a_tick_for_all_its_runs(made, tmp_path):
    run, config, client, clock, pipeline = made
    other_run = Run(tmp_path / "other")
    other_run.make_folder()
    with other_run.lock():
        other_config = other_run.create(RunConfig(**{**config.__dict__, "name": "other"}))
    first, second = pipeline(), pipeline(other_run, other_config)
    group = advance(first, second)
    assert first.done() and second.done()
    assert client.walks == group.list_walks > 0  # one walk per tick, for both runs' batches


def test_a_journal_line_naming_an_unknown_case_is_a_run_state_error(made):
    run, config, client, clock, pipeline = made
    pipeline()
    with run.journal_path.open("a") as fh:
        fh.write('{"ev":"redo","t":1.0,"cases":["not-a-case"]}\n')
    from batchbench.errors import RunStateError

    with pytest.raises(RunStateError, match=r"journal.jsonl: event 1 \(Redo\) names case"):
        run.state(config.case_ids)
    assert fold(["x"], []).cases == {"x": fold(["x"], []).cases["x"]}


def test_a_journal_of_before_0_4_reads_its_one_stop_event_as_owed_results():
    """#48.2: 0.3 wrote ``contradicted`` for owed results and for stops alike; read from
    its journal line as written then, it is owed results (as it then meant), no stop."""
    from batchbench.engine.events import DECODER

    lines = [
        '{"ev":"plan","sub":"answers-0001","stage":"answers","seq":1,"path":"answers-0001.jsonl",'
        '"lines":[["c1",1,true]],"t":100.0}',
        '{"ev":"created","sub":"answers-0001","batch_id":"b1","t":101.0}',
        '{"ev":"contradicted","sub":"answers-0001","batch_id":"b1",'
        '"detail":"batch b1 ended with no results named","t":150.0}',
    ]
    state = fold(["c1"], [DECODER.decode(x.encode()) for x in lines])
    sub = state.subs["answers-0001"]
    assert sub.contradiction == "batch b1 ended with no results named"
    assert sub.owed_since == 150.0 and sub.stopped is None
