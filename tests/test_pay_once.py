"""Pay once, whatever the run folder or the service does (#28): the emulator's record of
executed requests proves that no request was bought twice.

Every provider's batches carry the run's mark: a random token drawn when the run is
made (``run.json``), in every request id, and — where the service keeps one — in the
batch's tag (OpenAI metadata, a Gemini display name, a Fireworks job id). Where it
does, the run looks on the service before every create, so a run folder that lost
its memory (a deleted or shortened journal, an older copy restored) adopts what is
there instead of buying it again. Where it does not (Anthropic), a lost create leaves
candidates that only their results' ids tell apart.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
from support.cli import run_cli
from support.providers import RIGS
from support.runs import rows_of

TAGGED = [RIGS[p] for p in ("openai", "gemini", "fireworks")]
ANTHROPIC = RIGS["anthropic"]


def _once(emu) -> Counter:
    """Every executed request id, counted: each must be 1."""
    counts = Counter(e["custom_id"] for e in emu.ledger()["executions"])
    assert counts and max(counts.values()) == 1, counts.most_common(3)
    return counts


def _run_dir(rig, tmp_path):
    return tmp_path / "jobs" / rig.name()


@pytest.mark.parametrize("rig", TAGGED, ids=lambda r: r.provider)
@pytest.mark.parametrize("damage", ["journal deleted", "journal cut in half", "older copy"])
def test_a_run_folder_that_lost_its_memory_buys_nothing_twice(
    rig, damage, batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(latency=5.0)
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "6", cap=2)
    folder = _run_dir(rig, tmp_path)
    older = tmp_path / "older"
    if damage == "older copy":  # a backup taken before any batch existed
        assert run_cli(*args, "--dry-run").returncode == 0
    proc = run_cli(*args, "--no-wait", env=rig.env(emu))
    assert proc.returncode == 3, proc.stderr
    journal = folder / "journal.jsonl"
    made = len(emu.ledger()["batches"])
    assert made >= 3
    if damage == "journal deleted":
        journal.unlink()
    elif damage == "journal cut in half":
        lines = journal.read_bytes().splitlines(keepends=True)
        journal.write_bytes(b"".join(lines[: len(lines) // 2]))
    else:
        shutil.copytree(folder, older)
        events = [json.loads(x) for x in journal.read_text().splitlines()]
        keep = next(i for i, e in enumerate(events) if e["ev"] == "created")
        (older / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[:keep]))
        shutil.rmtree(folder)
        shutil.copytree(older, folder)
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(rows_of(folder / "results.jsonl")) == 6
    emu.flush()  # every batch made, ours or a mistaken twin, runs to its end
    _once(emu)
