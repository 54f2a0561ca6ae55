"""The everyday CLI: never a paid run by accident, the true state, answers at a glance."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import polars as pl
import pytest
from support.cli import REPO, assert_one_line_error, run_cli
from support.runs import env, parse_id, rows_of, run_args

from batchbench.costs.pricing import load_pricing
from batchbench.emulator import FakeClock
from batchbench.engine.event_records import Line
from batchbench.engine.events import BatchSeen, Created, Plan
from batchbench.engine.state import fold
from batchbench.views.progress import WIDTH, Progress, progress_line


def jobs_of(tmp_path: Path) -> Path:
    return tmp_path / "jobs"


# Never a paid run by accident ----------------------------------------------------------


def test_where_runs_live_is_said_first_and_can_come_from_the_environment(
    batch_emulator, tmp_path, fixture_dir
):
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2")
    at = args.index("--jobs-dir")
    del args[at : at + 2]
    where = tmp_path / "elsewhere"
    first = run_cli(*args, env={**env(), "BATCHBENCH_JOBS_DIR": str(where)})
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == f"NEW run 'ans-model' in {where / 'ans-model'}"
    again = run_cli(*args, env={**env(), "BATCHBENCH_JOBS_DIR": str(where)})
    assert again.stdout.splitlines()[0] == f"RESUMING run 'ans-model' in {where / 'ans-model'}"
    assert not (REPO / "jobs" / "ans-model").exists()


def test_a_smoke_run_gets_its_own_name_and_conflicts_read_old_to_new(
    batch_emulator, tmp_path, fixture_dir
):
    args = run_args(batch_emulator, tmp_path, fixture_dir)
    at = args.index("--run")
    del args[at : at + 2]  # the default names
    smoke = run_cli(*args, "--smoke", env=env())
    assert smoke.returncode == 0, smoke.stderr
    assert (jobs_of(tmp_path) / "ans-model-smoke" / "run.json").exists()
    assert not (jobs_of(tmp_path) / "ans-model").exists()  # the full run's name is free
    other = args[:]
    other[other.index("judge-model")] = "judge-2"
    proc = run_cli(*other, "--smoke", env=env())
    assert_one_line_error(proc, "judge_model: judge-model → judge-2")
    proc = run_cli(*args, "--smoke", "--run", "ans-model-smoke", "--limit", "2", env=env())
    assert_one_line_error(proc, "selection: smoke → smoke, first 2", "selected cases: 10 → 2")


@pytest.mark.parametrize(
    "model,priced_as",
    [
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mni", None),
        ("gpt-4o-mini-high", None),
    ],
)
def test_pricing_matches_a_model_or_its_dated_snapshot_never_a_prefix(model, priced_as):
    table = json.loads((REPO / "batchbench" / "pricing.json").read_text())["models"]
    price = load_pricing(None).price(model)
    if priced_as is None:
        assert price is None
    else:
        assert price is not None and price.input == table[priced_as]["input"]


def test_a_dry_run_names_unpriced_models_and_applies_max_cost(tmp_path, fixture_dir):
    base = ["run", "--answer-model", "gpt-4o-mni", "--judge-model", "gpt-4.1"]
    base += ["--dataset", str(fixture_dir), "--jobs-dir", str(tmp_path), "--smoke", "--dry-run"]
    text = run_cli(*base, "--max-cost", "5").stdout
    assert "no price for gpt-4o-mni" in text
    assert "the run would be refused (--max-cost: no price for 'gpt-4o-mni'" in text
    base[base.index("gpt-4o-mni")] = "gpt-4o-mini"
    plan = json.loads(run_cli(*base, "--json", "--max-cost", "0.000001").stdout)
    assert plan["max_cost"]["refused_because"].startswith("estimated cost $")
    assert "the run fits" in run_cli(*base, "--max-cost", "1000").stdout
    assert not any(tmp_path.iterdir())


# Always the true state -------------------------------------------------------------------


def test_no_wait_prints_the_state_after_its_work_and_status_its_age(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(latency=1.0)
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--smoke", "--no-wait", cap=4), env=env())
    assert proc.returncode == 3
    assert re.search(r"ans-model: in progress .*as of \d\d:\d\d UTC, just now", proc.stdout)
    # One vocabulary in the text, whatever the provider calls it; its own word in --json.
    assert "answers: 0/10 done" in proc.stdout and "batches: 3 queued" in proc.stdout
    assert "validating" not in proc.stdout
    status = run_cli("status", "ans-model", "--jobs-dir", str(jobs_of(tmp_path)))
    assert re.search(r"as of \d\d:\d\d UTC, just now", status.stdout)
    record = json.loads(
        run_cli("status", "ans-model", "--json", "--jobs-dir", str(jobs_of(tmp_path))).stdout
    )
    assert {(b["status"], b["service_status"]) for b in record["batches"]} == {
        ("queued", "validating")
    }


def test_status_refresh_asks_the_api_and_journals_what_it_learned(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(latency=30.0)
    args = run_args(emu, tmp_path, fixture_dir, "--smoke", "--no-wait", cap=4)
    assert run_cli(*args, env=env()).returncode == 3
    emu.flush()  # the batches finished meanwhile; the journal does not know yet
    journal = jobs_of(tmp_path) / "ans-model" / "journal.jsonl"
    before = journal.read_text()
    refresh = ["status", "ans-model", "--refresh", "--jobs-dir", str(jobs_of(tmp_path))]
    proc = run_cli(*refresh, "--base-url", emu.base_url, env=env())
    assert proc.returncode == 0, proc.stderr
    live = [x for x in proc.stdout.splitlines() if x.startswith("live: ")]
    assert len(live) == 3 and all(re.search(r"completed: (\d+)/\1 lines done$", x) for x in live)
    new = journal.read_text()[len(before) :]
    assert new.count('"ev":"batch"') == 3 and '"status":"completed"' in new


def test_progress_counts_running_lines_and_fits_100_columns():
    events = [
        Plan(
            sub="answers-0001",
            stage="answers",
            seq=1,
            path="p",
            t=1000.0,
            lines=[Line(f"c{i}", 1, True) for i in range(40)],
        ),
        Created(sub="answers-0001", batch_id="b1", t=1001.0),
        BatchSeen(
            sub="answers-0001",
            batch_id="b1",
            status="in_progress",
            t=1100.0,
            counts={"total": 40, "completed": 10, "failed": 0},
        ),
    ]
    state = fold([f"c{i}" for i in range(40)], events)
    state.subs["answers-0001"].create_started = 1000.0
    line = progress_line(state, now=1200.0)
    assert line.startswith("answers 0/40 (+10/40 running) · judges 0/40 · 3m20s")
    assert line.endswith("ETA 10m00s")  # 30 lines to go at 10 lines per 200 s
    assert len(progress_line(state, now=1e9)) <= WIDTH
    # A terminal narrower than the line: the running details go, the ETA stays.
    narrow = progress_line(state, now=1200.0, width=48)
    assert narrow == "answers 0/40 · judges 0/40 · 3m20s · ETA 10m00s"
    tiny = progress_line(state, now=1200.0, width=30)
    assert len(tiny) <= 30 and tiny.endswith(" · ETA 10m00s") and "…" in tiny
    # Two lines of forty after 3 minutes (queueing in it) tell no end: no wild ETA.
    early = fold(
        [f"c{i}" for i in range(40)],
        [
            *events[:2],
            BatchSeen(
                sub="answers-0001",
                batch_id="b1",
                status="in_progress",
                t=1100.0,
                counts={"total": 40, "completed": 2, "failed": 0},
            ),
        ],
    )
    assert "ETA" not in progress_line(early, now=1200.0)


def test_status_gives_an_eta_and_a_projected_cost_while_a_run_is_in_flight(
    batch_emulator_factory, clock, tmp_path, fixture_dir
):
    """#47.9: from the journal alone, the ETA at the pace of the batches in flight (their
    counts read here with the openai SDK) and each stage's cost when done, at its cost
    per request so far."""
    import openai

    emu = batch_emulator_factory(latency=100.0)
    table = tmp_path / "prices.json"
    models = {
        "ans-model": {"input": 1.0, "output": 4.0},
        "judge-model": {"input": 2.0, "output": 8.0},
    }
    table.write_text(json.dumps({"batch_discount": 0.5, "models": models}))
    jobs = ["--jobs-dir", str(jobs_of(tmp_path)), "--pricing", str(table)]
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "8", "--no-wait", cap=4)
    started = clock.time()
    assert run_cli(*args, env=env()).returncode == 3  # two answer batches made
    clock.advance(150)  # validated at 100 s, their lines running until 200 s
    assert run_cli(*args, env=env()).returncode == 3
    sdk = openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0)
    paces = []
    for batch in sdk.batches.list():
        done, total = batch.request_counts.completed, batch.request_counts.total
        paces.append((total - done) * (clock.time() - started) / done)
    status = json.loads(run_cli("status", "ans-model", *jobs, "--json").stdout)
    assert status["eta_seconds"] == pytest.approx(max(paces), abs=1.0)
    assert "projected_batch_usd" not in status  # nothing collected: nothing to go by
    text = run_cli("status", "ans-model", *jobs).stdout
    assert f"ETA {int(status['eta_seconds'])}s (as of " in text

    clock.advance(150)  # the answers are done; this tick collects them, sends the judges
    assert run_cli(*args, env=env()).returncode == 3
    status = json.loads(run_cli("status", "ans-model", *jobs, "--json").stdout)
    answers = status["cost"]["stages"]["answers"]
    assert answers["requests"] == 8
    assert status["projected_batch_usd"] == {
        "answers": pytest.approx(answers["batch_usd"]),  # all 8 in: what they cost
        "judges": None,
        "total": None,
    }
    text = " ".join(run_cli("status", "ans-model", *jobs).stdout.split())
    assert "judges ? (no priced results yet)" in text


def test_progress_in_a_log_is_a_heartbeat_not_a_line_per_step():
    out, clock = io.StringIO(), FakeClock(0.0)
    progress = Progress(out, clock=clock, tty=False)

    class Fake:
        config = type("Config", (), {"name": "r"})

        def __init__(self, done):
            self.state = fold(["c0", "c1"], [])
            self.state.cases["c0"].answers.status = "ok" if done else "pending"
            self._done = done

        def done(self):
            return False

    printed = []
    for step in range(100):  # a change every 10 s for 1000 s
        clock.set(step * 10.0)
        before = out.tell()
        progress(Fake(step % 2 == 0))
        if out.tell() != before:
            printed.append(clock.time())
    # A line when something changed and a minute has passed since the last: the state
    # at 60 s is the one printed at 0 s, so the next line comes at 70 s.
    assert printed == [float(t) for t in range(0, 1000, 70)]
    assert len(out.getvalue().splitlines()) == len(printed)


@pytest.mark.parametrize(
    "when", ["while its batches run", "after they ended, before the run collected them"]
)
def test_cancel_works_while_another_process_advances_the_run(
    batch_emulator_factory, clock, tmp_path, fixture_dir, when
):
    """``cancel`` (journal intent, tell the service) lands while a run is being advanced,
    at a moment forced on the shared clock: in both orders against the batches' end the
    run submits nothing more, keeps what finished, and says it was cancelled."""
    emu = batch_emulator_factory(latency=60)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "12", "--poll-interval", "30", cap=3)
    journal = jobs_of(tmp_path) / "ans-model" / "journal.jsonl"
    cancels = []

    def cancel() -> None:
        cancels.append(
            run_cli(
                "cancel",
                "ans-model",
                "--jobs-dir",
                str(jobs_of(tmp_path)),
                "--base-url",
                emu.base_url,
                env=env(),
            )
        )

    # The answer batches are made at the start: validated at 60 s, their lines run until
    # 100 s, they end at 160 s; the run polls every 30 s. So 90 s is mid-run, and 170 s
    # is after their end and before the run's next poll (at 180 s).
    at = 90 if when == "while its batches run" else 170
    clock.call_at(clock.time() + at, cancel)
    proc = run_cli(*args, env=env())
    assert cancels and cancels[0].returncode == 0, cancels
    assert proc.returncode == 3, proc.stderr
    assert "cancelled: `run … --resume-cancelled` takes it up again" in proc.stdout
    lines = journal.read_text().splitlines()
    cut = next(i for i, x in enumerate(lines) if '"cancel_requested"' in x)
    assert not any('"ev":"created"' in x for x in lines[cut:])  # nothing submitted after it
    assert not any('"ev":"plan"' in x for x in lines[cut:])
    told = sum(1 for x in lines[cut:] if '"ev":"batch"' in x and '"status":"cancelling"' in x)
    assert told == (4 if at == 90 else 0)  # told to stop only while they ran


# Answers at a glance ----------------------------------------------------------------------


def _failing_judge(body):
    """Judges half the cases (by their first item id's first hex digit), fails the rest."""
    if body["model"] != "judge-model":
        return "An answer."
    ids = re.findall(r"^\[([^\]]+)\] points=", body["messages"][-1]["content"], re.M)
    if ids[0][0] in "01234567":
        return "not json at all"
    return json.dumps({"decisions": [{"item_id": i, "matched": True} for i in ids]})


def test_list_show_export_and_errors_grouped(batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(latency=0.05, responder=_failing_judge)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "8", "--max-attempts", "1")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 1
    rows = rows_of(jobs_of(tmp_path) / "ans-model" / "results.jsonl")
    failed = [r for r in rows if "error" in r]
    grouped = f"{len(failed)} failed: {len(failed)} × invalid judge JSON"
    assert failed and len(failed) < 8 and grouped in proc.stdout

    listing = json.loads(run_cli("list", "--jobs-dir", str(jobs_of(tmp_path)), "--json").stdout)
    assert listing == [
        {
            "run": "ans-model",
            "answer_model": "ans-model",
            "judge_model": "judge-model",
            "dataset": "dataset",
            "dataset_sha256": json.loads(
                (jobs_of(tmp_path) / "ans-model" / "run.json").read_text()
            )["dataset_sha256"],
            "status": "finished with errors",
            "scored": 8 - len(failed),
            "failed": len(failed),
            "total": 8,
            "overall_macro_mean": json.loads(
                (jobs_of(tmp_path) / "ans-model" / "results.summary.json").read_text()
            )["overall_macro_mean"],
            "cost_usd": None,  # neither fixture model has a price
            "priced_cost_usd": None,
            "unpriced": ["ans-model answers", "judge-model judges"],
        }
    ]

    shown = run_cli("show", "ans-model", failed[0]["case_id"], "--jobs-dir", str(jobs_of(tmp_path)))
    assert shown.returncode == 0, shown.stderr
    assert "error: ValueError: invalid judge JSON" in shown.stdout
    assert "judges #1 (judges-0001): failed: ValueError: invalid judge JSON" in shown.stdout
    assert "reply: not json at all" in shown.stdout

    out = tmp_path / "scores.parquet"
    proc = run_cli("export", "ans-model", "-o", str(out), "--jobs-dir", str(jobs_of(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    frame = pl.read_parquet(out)
    assert sorted(frame["case_id"].to_list()) == sorted(r["case_id"] for r in rows)
    scores = {r["case_id"]: r.get("score") for r in rows}
    assert dict(zip(frame["case_id"], frame["score"])) == scores
    csv = tmp_path / "items.csv"
    run_cli(
        "export", "ans-model", "-o", str(csv), "--decisions", "--jobs-dir", str(jobs_of(tmp_path))
    )
    items = pl.read_csv(csv)
    assert items.height == sum(len(r.get("decisions", [])) for r in rows)


def test_a_run_whose_cases_all_failed_is_not_called_complete(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(
        latency=0.05, responder=lambda body: {"status_code": 403, "body": {}}
    )
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--limit", "3"), env=env())
    assert proc.returncode == 1
    listing = run_cli("list", "--jobs-dir", str(jobs_of(tmp_path))).stdout
    header, row = listing.splitlines()
    cells = dict(zip(re.split(r"\s{2,}", header), re.split(r"\s{2,}", row)))
    assert cells["status"] == "failed" and cells["scored/failed/total"] == "0/3/3"
    assert cells["mean"] == "—" and "complete" not in listing

    # Every --json is strict JSON (RFC 8259 has no NaN): a figure that cannot be given is null.
    def strict(text: str) -> object:
        def refuse(constant: str) -> object:
            raise AssertionError(f"{constant} is not JSON")

        return json.loads(text, parse_constant=refuse)

    jobs = ("--jobs-dir", str(jobs_of(tmp_path)))
    listed = strict(run_cli("list", *jobs, "--json").stdout)
    assert listed[0]["overall_macro_mean"] is None
    status = strict(run_cli("status", "ans-model", *jobs, "--json").stdout)
    assert status["run"] == "ans-model"


def test_help_version_and_the_order_of_commands():
    top = run_cli("-h").stdout
    order = [
        "demo",
        "check",
        "run",
        "status",
        "list",
        "show",
        "compare",
        "plan",
        "report",
        "calibrate",
        "export",
        "cancel",
        "remove",
        "move",
        "summarize",
        "validate",
        "emulator",
    ]
    box = top.split("Commands ")[1].split("╰")[0]  # the commands' panel, one row per command
    listed = [row[2:].split()[0] for row in box.splitlines()[1:] if row[2:3].strip()]
    assert listed == order
    assert re.fullmatch(r"batchbench \d+\.\d+\.\d+\n", run_cli("--version").stdout)
    for command in order:
        text = run_cli(command, "--help").stdout
        assert "Example" in text and "<bool>" not in text, command
        # #47.10: no typer type beside an argument, no braces in the usage, and every
        # paragraph wrapped to the terminal (a docstring's own line breaks are not kept:
        # with room to spare, a paragraph's line never ends mid-sentence before a word
        # that continues it)
        wide = run_cli(command, "--help", env={"COLUMNS": "250"}).stdout
        assert "<list[" not in wide and "{" not in wide.split("Usage:")[1].splitlines()[0]
        prose = wide.split("╭")[0].splitlines()[3:]
        for line, after in zip(prose, prose[1:]):
            if line.strip() and after.strip():
                assert len(line.rstrip()) > 150 or line.rstrip()[-1] in ".:)", (command, line)
    # Shell completion, as bash asks the installed command for it
    import subprocess
    import sys

    command = Path(sys.executable).with_name("batchbench")
    script = subprocess.run([command, "--show-completion", "bash"], capture_output=True, text=True)
    assert "complete -o default -F _batchbench_completion batchbench" in script.stdout
    asked = {"COMP_WORDS": "batchbench ca", "COMP_CWORD": "1"}
    asked |= {"_BATCHBENCH_COMPLETE": "complete_bash", "PATH": "/usr/bin"}
    words = subprocess.run([command], capture_output=True, text=True, env=asked).stdout.split()
    assert words == ["calibrate", "cancel"]


def test_the_demo_suggests_keeping_its_folder_and_prints_paths_that_exist(tmp_path):
    kept = run_cli("demo", "--jobs-dir", str(tmp_path / "kept"))
    assert kept.returncode == 0, kept.stderr
    printed = Path(kept.stdout.strip().splitlines()[-1].removeprefix("results: "))
    assert printed.exists()
    # What the rehearsal's tokens would cost on the real models it names, from its raw files.
    table = load_pricing()
    usd = 0.0
    for stage, model in (("answers", "gpt-5.4-mini"), ("judges", "gpt-4.1")):
        price = table.price(model)
        for path in (tmp_path / "kept" / "demo" / "raw").glob("*.jsonl"):
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                if parse_id(rec["custom_id"]).stage == stage and rec["error"] is None:
                    u = rec["response"]["body"]["usage"]
                    cached = u["prompt_tokens_details"]["cached_tokens"]
                    usd += (
                        (u["prompt_tokens"] - cached) * price.input
                        + cached * price.cached_input
                        + u["completion_tokens"] * price.output
                    ) / 2e6
    said = f"with gpt-5.4-mini answers and gpt-4.1 judges, these tokens would have cost ${usd:,.4f}"
    assert said in kept.stdout and usd > 0
    temporary = run_cli("demo")
    assert "--jobs-dir" in temporary.stdout and "results: " not in temporary.stdout


def test_new_commands_name_their_bad_input_in_one_line(tmp_path):
    jobs = tmp_path / "jobs"
    assert run_cli("demo", "--jobs-dir", str(jobs)).returncode == 0
    missing = tmp_path / "nowhere" / "out"
    for args, fragments in [
        (["show", "demo", "nosuchcase"], ["run 'demo' has no case 'nosuchcase'"]),
        (
            ["export", "demo", "-o", f"{missing}.xlsx"],
            ["--format must be parquet, csv, eee or inspect"],
        ),
        (["export", "demo", "-o", f"{missing}.csv"], [f"cannot write {missing}.csv"]),
        (["report", "demo", "-o", f"{missing}.html"], [f"cannot write {missing}.html"]),
        (["report", "nosuchrun"], ["no run 'nosuchrun'", "and no such results file"]),
        (["compare", "demo"], ["at least two runs"]),
        (["status", "--refresh"], ["name them"]),
    ]:
        assert_one_line_error(run_cli(*args, "--jobs-dir", str(jobs)), *fragments)
    proc = run_cli("emulator", "--anomaly", "status-zero=x", real=True)
    assert proc.returncode == 2 and "'x' is not a rate from 0 to 1" in proc.stderr


@pytest.mark.parametrize("command", ["report", "export"])
def test_a_labels_file_given_as_a_run_or_a_label_is_refused_naming_labels(
    command, batch_emulator, tmp_path, fixture_dir
):
    """#63.4: `--label dr_a.csv` (typed for --labels) was taken as the run's name on the
    page, and a sheet given where a run goes was read as one: refused in one line naming
    --labels, nothing written."""
    from support.cli import assert_one_line_error

    made = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2"), env=env())
    assert made.returncode == 0, made.stderr
    sheet = tmp_path / "dr_a.csv"
    sheet.write_text("run,case_id,item_id,verdict,rater\n")
    out = tmp_path / "out.html"
    jobs = ["--jobs-dir", str(tmp_path / "jobs"), "-o", str(out)]
    for given in (["ans-model", "--label", str(sheet)], ["ans-model", str(sheet)]):
        proc = run_cli(command, *given, *jobs)
        assert_one_line_error(proc, "--labels")
        assert not out.exists()


@pytest.mark.parametrize("shell,made", [("zsh", ".zfunc/_batchbench"), ("fish", None)])
def test_completion_for_the_shell_named(tmp_path, shell, made):
    """#63.11: `--install-completion zsh` installed bash's (Typer's flags take no shell
    when it can detect one), and where no shell can be detected (cron, a container) a
    named one failed: the shell named is the one installed or shown, whatever runs the
    command; an unknown one is one line."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "SHELL": "/bin/bash"}  # the shell it runs under: not asked
    if made:
        proc = run_cli("--install-completion", shell, env=env, real=True)
        assert proc.returncode == 0, proc.stderr
        assert f"{shell} completion installed in {home / made}" in proc.stdout
        assert "_BATCHBENCH_COMPLETE=complete_zsh" in (home / made).read_text()
        assert not (home / ".bashrc").exists()
    shown = run_cli("--show-completion", shell, env=env, real=True)
    assert shown.returncode == 0 and f"complete_{shell}" in shown.stdout
    assert_one_line_error(
        run_cli("--show-completion", "tcsh", env=env, real=True), "unknown shell 'tcsh'"
    )


def test_tab_completes_run_names_and_formats(batch_emulator, tmp_path, fixture_dir):
    """#63.11: a TAB after a command that takes runs offered file names; it offers the
    jobs folder's runs (the one typed, else the default), `sheet` for calibrate, and the
    formats --format takes — as bash asks the installed command."""
    import subprocess
    import sys

    from support.runs import env, run_args

    made = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2"), env=env())
    assert made.returncode == 0, made.stderr
    (tmp_path / "jobs" / "other-run").mkdir()  # a folder, not a run: never offered
    command = Path(sys.executable).with_name("batchbench")

    def tab(line: str) -> list[str]:
        words = line.split(" ")
        asked = {"COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1), "PATH": "/usr/bin"}
        asked |= {"_BATCHBENCH_COMPLETE": "complete_bash", "HOME": str(tmp_path)}
        done = subprocess.run([command], capture_output=True, text=True, env=asked, cwd=tmp_path)
        return done.stdout.split()

    assert tab("batchbench status a") == ["ans-model"]  # ./jobs, the default
    assert tab(f"batchbench report --jobs-dir {tmp_path / 'jobs'} ") == ["ans-model"]
    assert tab("batchbench calibrate ") == ["sheet", "ans-model"]
    assert tab("batchbench export --format ") == ["parquet", "csv", "eee", "inspect"]
    assert tab("batchbench calibrate ans-model --labels-format l") == ["label-studio"]


def test_ctrl_c_in_a_command_with_nothing_to_resume_says_no_resume(
    batch_emulator, tmp_path, fixture_dir, monkeypatch
):
    """#63.9: Ctrl-C in `report` said "run the same command to resume": a page is written
    whole or not at all, so nothing is resumed; only `run` (and `move`) say so."""
    from support.runs import env, run_args

    from batchbench.views import page

    made = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2"), env=env())
    assert made.returncode == 0, made.stderr

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(page, "render", interrupted)
    proc = run_cli("report", "ans-model", "--jobs-dir", str(tmp_path / "jobs"))
    assert proc.returncode == 130
    assert proc.stderr.strip() == "interrupted: nothing is lost"


def test_calibrate_sheet_help_is_the_sheets_own():
    """#63.11: `calibrate sheet --help` printed calibrate's help: its own usage, words and
    options now (what a sheet takes), calibrate's own help unchanged."""
    sheet = run_cli("calibrate", "sheet", "--help")
    assert sheet.returncode == 0
    assert "calibrate sheet [OPTIONS] RUN..." in sheet.stdout  # (in-process: "root")
    assert "labelling sheet" in sheet.stdout and "--cases" in sheet.stdout
    options = sheet.stdout.split("Options")[1]  # (its words name calibrate's next step)
    assert "--labels" not in options and "--plan" not in options
    whole = run_cli("calibrate", "--help").stdout
    assert "[sheet] RUN..." in whole and "--labels" in whole and "--plan" in whole
