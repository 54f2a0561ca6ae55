"""Pay once, whatever happened to the run folder (#37): the one contract, run on every
provider of the registry, proven by the emulator's record of executed requests.

A folder is a run's memory, and users copy, move, restore and truncate folders. Every
scenario here damages the memory of a run between two invocations — a backup restored
after the original was moved aside in the same jobs folder, a clone in the same jobs
folder run first, a journal deleted or cut in half, an older copy put back — and then
runs to the end: no request may execute twice on the service, whichever provider.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
from support.buckets import pull
from support.cli import assert_one_line_error, run_cli
from support.providers import RIGS
from support.runs import rows_of

from batchbench._failpoints import Crash
from batchbench.engine.rundir import Run
from batchbench.providers.registry import BY_NAME

ALL = [RIGS[name] for name in BY_NAME]


def _once(emu) -> None:
    """Every request id the service executed, executed once."""
    counts = Counter(e["custom_id"] for e in emu.ledger()["executions"])
    assert counts and max(counts.values()) == 1, counts.most_common(3)


def test_every_provider_of_the_registry_is_driven_here():
    assert sorted(BY_NAME) == sorted(RIGS)


@pytest.mark.parametrize("rig", ALL, ids=lambda r: r.provider)
@pytest.mark.parametrize(
    "damage",
    [
        "backup restored beside the original",
        "clone in the same jobs folder ran first",
        "journal deleted",
        "journal cut in half",
        "older copy restored",
    ],
)
def test_a_folder_that_lost_its_memory_pays_nothing_twice(
    rig, damage, batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    emu = batch_emulator_factory(latency=5.0)
    jobs = tmp_path / "jobs"
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "6", cap=2)
    folder = jobs / rig.name()
    # the moment a backup or a clone is taken: a request file uploaded, nothing bought
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "uploaded:1:raise")
    with pytest.raises(Crash):
        run_cli(*args, "--no-wait", env=rig.env(emu))
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    assert not emu.ledger()["batches"]
    if damage == "clone in the same jobs folder ran first":
        shutil.copytree(folder, jobs / "clone")
        proc = run_cli(*args, "--run", "clone", env=rig.env(emu))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        # the folder's name is not the name its run.json carries: said, not hidden
        assert "clone" in proc.stderr and rig.name() in proc.stderr
        proc = run_cli(*args, env=rig.env(emu))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert len(rows_of(folder / "results.jsonl")) == 6
        assert rows_of(folder / "results.jsonl") == rows_of(jobs / "clone" / "results.jsonl")
        emu.flush()
        _once(emu)
        listing = run_cli("list", "--jobs-dir", str(jobs)).stdout
        assert "clone" in listing, listing
        return
    backup = tmp_path / "backup"
    shutil.copytree(folder, backup)
    proc = run_cli(*args, "--no-wait", env=rig.env(emu))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert emu.ledger()["batches"], "a batch was created"
    journal = folder / "journal.jsonl"
    if damage == "backup restored beside the original":
        folder.rename(jobs / "broken")
        shutil.copytree(backup, folder)
    elif damage == "journal deleted":
        journal.unlink()
    elif damage == "journal cut in half":
        lines = journal.read_bytes().splitlines(keepends=True)
        journal.write_bytes(b"".join(lines[: len(lines) // 2]))
    else:  # the journal up to its first create, put back over the folder
        events = [json.loads(x) for x in journal.read_text().splitlines()]
        keep = next(i for i, e in enumerate(events) if e["ev"] == "create_started")
        shutil.rmtree(folder)
        shutil.copytree(backup, folder)
        (folder / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[:keep]))
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(rows_of(folder / "results.jsonl")) == 6
    emu.flush()  # every batch made, ours or a mistaken twin, runs to its end
    _once(emu)


@pytest.mark.parametrize("rig", [RIGS["anthropic"], RIGS["openai"]], ids=lambda r: r.provider)
def test_two_folders_of_one_run_never_advance_at_once(
    rig, batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    """A clone run while its original is being advanced (forced: the original's holder
    keeps the run's lock) is refused in one line naming both folders, buying nothing;
    once the holder is gone it runs, and adopts what was bought."""
    emu = batch_emulator_factory(latency=5.0)
    jobs = tmp_path / "jobs"
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "4", cap=2)
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", "uploaded:1:raise")
    with pytest.raises(Crash):
        run_cli(*args, "--no-wait", env=rig.env(emu))
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    original = Run(jobs / rig.name())
    shutil.copytree(original.root, jobs / "clone")
    with original.token_lock(original.load_config().run_id):
        proc = run_cli(*args, "--run", "clone", env=rig.env(emu))
        assert_one_line_error(proc, str(original.root.resolve()), str((jobs / "clone").resolve()))
        assert not emu.ledger()["batches"]
        # from cron (--no-wait), the tick is skipped, not failed
        tick = run_cli(*args, "--run", "clone", "--no-wait", env=rig.env(emu))
        assert tick.returncode == 0 and "nothing for this tick" in tick.stdout + tick.stderr
        assert not emu.ledger()["batches"]
    assert run_cli(*args, env=rig.env(emu)).returncode == 0
    proc = run_cli(*args, "--run", "clone", env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    emu.flush()
    _once(emu)


def test_cancel_of_several_runs_goes_past_one_that_fails(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#37.17: a run that cannot be cancelled (here: no such run) is one line, and the
    runs after it are cancelled all the same; the exit says something failed."""
    rig = RIGS["openai"]
    emu = batch_emulator_factory(latency=50.0)
    args = rig.args(emu, tmp_path, fixture_dir, "--limit", "2", cap=2)
    assert run_cli(*args, "--no-wait", env=rig.env(emu)).returncode == 3
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    proc = run_cli("cancel", "no-such-run", rig.name(), *jobs, env=rig.env(emu))
    assert proc.returncode != 0 and "no-such-run" in proc.stderr, proc.stderr
    assert f"{rig.name()}: cancelled 1 batch" in proc.stdout, proc.stdout


@pytest.mark.parametrize("rig", ALL, ids=lambda r: r.provider)
@pytest.mark.parametrize(
    "fault", ["lost create", "transient empty result", "lost create, then an empty result"]
)
@pytest.mark.parametrize("where", ["folder", "bucket"])
def test_the_services_faults_pay_nothing_twice(
    rig, fault, where, batch_emulator_factory, tmp_path, fixture_dir
):
    """The rest of the one contract, on every provider: a create that took effect but
    whose reply was lost is found (by its tag, or by its results' ids), never made again;
    results that read empty while the counts (or the requests sent) say they ran are
    owed — the stage stops after the wait, nothing bought — and collected by the next
    run once the service gives them."""
    emu = batch_emulator_factory(latency=2.0)
    args = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "4", cap=4), "--poll-interval", "5"]
    folder = tmp_path / "jobs" / rig.name()
    if where == "bucket":  # the run in a bucket (obstore's memory store), read back after
        uri = f"memory://{tmp_path.name}/jobs"
        args[args.index("--jobs-dir") + 1] = uri
        folder = tmp_path / "pulled" / rig.name()
    if fault.startswith("lost create"):
        emu.lose_creates(rig.face_name)
    if fault.endswith("empty result"):
        # an untagged service's candidate whose results read empty is owed, not disowned
        emu.store.settings.anomalies = {"empty-results": 1.0}
        proc = run_cli(*args, env=rig.env(emu))
        assert_one_line_error(proc, "hold", "nothing was bought again")
        assert proc.returncode == 5
        _once(emu)
        emu.store.settings.anomalies = {}  # the service gives its results
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if where == "bucket":
        pull(uri, rig.name(), {}, tmp_path / "pulled")
    assert len(rows_of(folder / "results.jsonl")) == 4
    if fault.startswith("lost create"):  # the fault was injected, not aimed at no face
        assert emu.ledger()["faults"]["lost create"] == 1
    emu.flush()
    _once(emu)
