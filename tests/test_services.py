"""A run remembers its service: where its batches live is recorded, used, and defended.

Real CLI, real emulators over HTTP. A run made against one service is advanced,
refreshed and cancelled there without being told again; a resume pointed at
another base URL (a flag or the SDK's variable) is refused with both named, and
``--move-service`` moves it on purpose.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from support.cli import FIXTURE, assert_one_line_error, run_cli
from support.runs import KEY, run_args


def no_url_env() -> dict[str, str]:
    return {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": ""}


def without_base_url(args: list[str]) -> list[str]:
    i = args.index("--base-url")
    return args[:i] + args[i + 2 :]


def test_a_run_is_advanced_refreshed_and_refused_by_its_own_service(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu, other = batch_emulator_factory(), batch_emulator_factory()
    args = run_args(emu, tmp_path, fixture_dir, "--smoke", "--no-wait")
    assert run_cli(*args, env=no_url_env()).returncode == 3
    config = json.loads((tmp_path / "jobs" / "ans-model" / "run.json").read_text())
    assert config["services"] == {
        "answers": {"provider": "openai", "base_url": emu.base_url, "account": {}},
        "judges": {"provider": "openai", "base_url": emu.base_url, "account": {}},
    }
    journal = tmp_path / "jobs" / "ans-model" / "journal.jsonl"

    # status --refresh and a resume with no base URL at all go to the run's service.
    refresh = ["status", "ans-model", "--refresh", "--jobs-dir", str(tmp_path / "jobs")]
    proc = run_cli(*refresh, env=no_url_env())
    assert proc.returncode == 0 and proc.stdout.count("live: ") >= 1, proc.stderr

    # Another base URL, given as a flag or in the SDK's variable, is refused.
    before = journal.read_bytes()
    moved = without_base_url(args) + ["--base-url", other.base_url]
    proc = run_cli(*moved, env=no_url_env())
    assert_one_line_error(proc, emu.base_url, other.base_url, "--base-url", "--move-service")
    assert proc.returncode == 2
    proc = run_cli(
        *without_base_url(args), env={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": other.base_url}
    )
    assert_one_line_error(proc, emu.base_url, other.base_url, "OPENAI_BASE_URL")
    # status asks where the batches are, and says it did.
    proc = run_cli(*refresh, "--base-url", other.base_url, env=no_url_env())
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) >= 1 and emu.base_url in notes[0] and other.base_url in notes[0], notes
    assert journal.read_bytes() == before and other.ledger()["batches"] == []

    # Without being told, the run finishes where its batches are.
    finish = [a for a in without_base_url(args) if a != "--no-wait"]
    proc = run_cli(*finish, env=no_url_env())
    assert proc.returncode == 0, proc.stderr
    assert other.ledger()["batches"] == [] and other.ledger()["executions"] == []


def test_move_service_points_a_run_at_another_base_url_and_journals_it(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory()
    args = run_args(emu, tmp_path, fixture_dir, "--smoke", "--no-wait")
    assert run_cli(*args, env=no_url_env()).returncode == 3
    # The same service by another name (a proxy, say): localhost instead of 127.0.0.1.
    proxy = emu.base_url.replace("127.0.0.1", "localhost")
    finish = [a for a in without_base_url(args) if a != "--no-wait"]
    proc = run_cli(*finish, "--base-url", proxy, "--move-service", env=no_url_env())
    assert proc.returncode == 0, proc.stderr
    events = (tmp_path / "jobs" / "ans-model" / "journal.jsonl").read_text().splitlines()
    moves = [json.loads(e) for e in events if '"ev":"service"' in e]
    assert {(m["stage"], m["base_url"]) for m in moves} == {
        ("answers", proxy),
        ("judges", proxy),
    }
    proc = run_cli(*finish, "--base-url", proxy, env=no_url_env())  # its service now
    assert proc.returncode == 0, proc.stderr


def test_status_list_and_help_import_no_sdk(tmp_path):
    """They answer at once: no provider SDK, no polars, numpy or matplotlib."""
    shutil.copytree(FIXTURE / "previous-run" / "run", tmp_path / "jobs" / "prev")
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    heavy = ("openai", "anthropic", "google.genai", "fireworks", "boto3", "polars", "numpy")
    heavy += ("matplotlib",)
    for argv in (["status", "prev", *jobs], ["list", *jobs], ["--help"]):
        code = (
            "import sys\nfrom batchbench.cli import app\n"
            f"try:\n    app({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print('loaded', sorted(m for m in {heavy!r} if m in sys.modules))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.stdout.splitlines()[-1] == "loaded []", (argv, out.stdout[-300:], out.stderr)
