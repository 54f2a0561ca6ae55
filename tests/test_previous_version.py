"""A run left mid-flight by the previous release (0.1.0) finishes under this one.

``fixtures/previous-run`` is a run folder that version wrote, with its answers
collected, eight answer retries and every judge batch in flight, and what the
emulator held for those batches. A fresh emulator takes them over (as the real
service outlives a client's process) and this version resumes the run: the
same rows the reference's rules give for the answers and decisions the
emulator returned, and no batch created again.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import plain_reference
from conftest import FIXTURE, run_cli

pytest_plugins = ["batchbench.emulator.pytest_plugin"]

PREVIOUS = FIXTURE / "previous-run"


def test_a_run_left_mid_flight_by_the_previous_release_finishes(
    batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset
):
    jobs = tmp_path / "jobs"
    shutil.copytree(PREVIOUS / "run", jobs / "prev")
    state = json.loads((PREVIOUS / "emulator-state.json").read_text())
    emu = batch_emulator_factory(latency=0.05)
    emu.store.restore(state)
    before = (jobs / "prev" / "journal.jsonl").read_text().splitlines()
    old_batches = {json.loads(x)["batch_id"] for x in before if '"ev":"created"' in x}

    proc = run_cli(
        "run", "--run", "prev", "--answer-model", "ans-model", "--judge-model", "judge-model",
        "--jobs-dir", str(jobs), "--dataset", str(fixture_dir), "--base-url", emu.base_url,
        "--poll-interval", "0.05", "--max-requests-per-batch", "6",
        env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ""},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "RESUMING run 'prev'" in proc.stdout

    # No batch of the old version was created again: every batch it had made
    # was collected, and the only new ones are judges of the answer retries.
    events = [json.loads(x) for x in (jobs / "prev" / "journal.jsonl").read_text().splitlines()]
    created = Counter(e["sub"] for e in events if e["ev"] == "created")
    assert max(created.values()) == 1
    collected = {e["sub"] for e in events if e["ev"] == "collected"}
    old_subs = {json.loads(x)["sub"] for x in before if '"ev":"created"' in x}
    assert old_subs <= collected
    new = events[len(before) :]
    # 0.1 recorded no service: the first resume records the one it used.
    services = {(e["stage"], e["provider"], e["base_url"]) for e in new if e["ev"] == "service"}
    assert services == {("answers", "openai", emu.base_url), ("judges", "openai", emu.base_url)}
    planned_now = {e["sub"] for e in new if e["ev"] == "plan"}
    assert planned_now and {e["sub"] for e in new if e["ev"] == "created"} == planned_now
    ledger = emu.ledger()
    in_emulator = {b["id"] for b in ledger["batches"]}
    made_now = {e["batch_id"] for e in new if e["ev"] == "created"}
    assert in_emulator == made_now | (old_batches - _collected_before(before))
    executed = Counter(x["custom_id"] for x in ledger["executions"])
    assert executed and max(executed.values()) == 1

    # The rows are what the reference's rules give for what the emulator returned.
    rows = [json.loads(x) for x in (jobs / "prev" / "results.jsonl").read_text().splitlines()]
    by_id = fixture_dataset.by_id()
    assert [r["case_id"] for r in rows] == [c["case_id"] for c in fixture_dataset.cases]
    replies = _judge_replies(jobs / "prev" / "raw")
    for row in rows:
        case = by_id[row["case_id"]]
        assert row["answer"].startswith("Answer to: ") or row["answer"].startswith(
            "Simulated answer (ans-model): "
        )
        matched = {i for i, m in replies[row["case_id"]].items() if m}
        score, components = plain_reference.score_case(case, matched)
        assert row["score"] == score
        assert json.dumps(row["score_components"]) == json.dumps(components)
        assert row["answer_temperature"] == 1 and row["judge_temperature"] == 0


def _collected_before(journal_lines: list[str]) -> set[str]:
    """Batches the old version had already collected (not in the emulator's snapshot)."""
    events = [json.loads(x) for x in journal_lines]
    done = {e["sub"] for e in events if e["ev"] == "collected"}
    return {e["batch_id"] for e in events if e["ev"] == "created" and e["sub"] in done}


def _judge_replies(raw: Path) -> dict[str, dict[str, bool]]:
    out: dict[str, dict[str, bool]] = {}
    for path in raw.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if not rec["custom_id"].startswith("judge:") or rec.get("response") is None:
                continue
            content = rec["response"]["body"]["choices"][0]["message"]["content"]
            decisions = json.loads(content)["decisions"]
            out[rec["custom_id"].split(":")[1]] = {d["item_id"]: d["matched"] for d in decisions}
    return out
