"""The everyday polish (#23): cost and state where users look, output that reads, messages
that point at the real cause. Every test goes through the CLI against the emulator."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from support.cli import REPO, assert_one_line_error, read_lines, run_cli
from support.runs import env, parse_id, rows_of, run_args

from batchbench.costs.pricing import load_pricing

# The built-in table's figures, typed here from the sources it cites (USD per 1M tokens).
GPT_4O_MINI = (0.15, 0.075, 0.6)
GPT_41 = (2.0, 0.5, 8.0)


def _priced_run(emu, tmp_path, fixture_dir, *extra):
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "6", *extra)
    args[args.index("--answer-model") + 1] = "gpt-4o-mini"
    args[args.index("--judge-model") + 1] = "gpt-4.1"
    args[args.index("--run") + 1] = "priced"
    return run_cli(*args, env=env())


def _usage(raw: Path, stage: str) -> tuple[int, int, int]:
    """Prompt, cached and completion tokens of every successful line, from the raw files."""
    prompt = cached = completion = 0
    for path in raw.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if parse_id(rec["custom_id"]).stage != stage or rec["error"] is not None:
                continue
            if rec["response"]["status_code"] == 200:
                usage = rec["response"]["body"]["usage"]
                prompt += usage["prompt_tokens"]
                cached += usage["prompt_tokens_details"]["cached_tokens"]
                completion += usage["completion_tokens"]
    return prompt, cached, completion


def _batch_usd(usage: tuple[int, int, int], price: tuple[float, float, float]) -> float:
    prompt, cached, completion = usage
    sync = ((prompt - cached) * price[0] + cached * price[1] + completion * price[2]) / 1e6
    return round(sync * 0.5, 6)


def test_a_finished_run_prints_what_it_cost_and_status_list_and_report_agree(
    batch_emulator, tmp_path, fixture_dir
):
    proc = _priced_run(batch_emulator, tmp_path, fixture_dir)
    assert proc.returncode == 0, proc.stderr
    raw = tmp_path / "jobs" / "priced" / "raw"
    answers = _batch_usd(_usage(raw, "answers"), GPT_4O_MINI)
    judges = _batch_usd(_usage(raw, "judges"), GPT_41)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("cost at batch price"))
    assert f"answers ${answers:,.4f}" in line and f"judges ${judges:,.4f}" in line
    assert f"total ${answers + judges:,.4f}" in line
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    status = json.loads(run_cli("status", "priced", *jobs, "--json").stdout)
    assert status["cost"]["total"]["batch_usd"] == pytest.approx(answers + judges, abs=1e-6)
    listing = run_cli("list", *jobs).stdout
    assert f"${answers + judges:,.2f}" in listing
    page = tmp_path / "r.html"
    assert run_cli("report", "priced", *jobs, "-o", str(page)).returncode == 0
    assert f"total ${answers + judges:,.4f}" in page.read_text()


def test_one_unpriced_model_keeps_the_priced_part_and_names_what_is_not(
    batch_emulator, tmp_path, fixture_dir
):
    """An unpriced answer model (the fixture's) judged by a priced one: every total says the
    judges' known cost and names the answers as unpriced, never just "n/a" or "-"."""
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "6")
    args[args.index("--judge-model") + 1] = "gpt-4.1"
    args[args.index("--run") + 1] = "half"
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stderr
    judges = _batch_usd(_usage(tmp_path / "jobs" / "half" / "raw", "judges"), GPT_41)
    assert judges > 0
    part = f"${judges:,.4f} + ans-model answers (unpriced)"
    line = next(x for x in proc.stdout.splitlines() if x.startswith("cost at batch price"))
    assert line.endswith(f"total {part}"), line
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert f"total cost {part} at batch price" in run_cli("status", "half", *jobs).stdout
    assert f"${judges:,.2f} + ans-model answers (unpriced)" in run_cli("list", *jobs).stdout
    [entry] = json.loads(run_cli("list", *jobs, "--json").stdout)
    assert entry["cost_usd"] is None and entry["priced_cost_usd"] == pytest.approx(judges)
    assert entry["unpriced"] == ["ans-model answers"]
    dry = [a for a in args if a not in ("--run", "half")] + ["--dry-run"]
    plan = json.loads(run_cli(*dry, "--json").stdout)
    estimate = plan["stages"]["judges"]["batch_usd"]
    assert estimate > 0 and plan["total"]["priced_batch_usd"] == estimate
    text = run_cli(*dry).stdout
    assert f"total at batch price: ${estimate:,.4f} + ans-model answers (unpriced)" in text


def test_a_dry_run_of_several_models_ends_with_the_commands_total(tmp_path, fixture_dir):
    base = [
        "run",
        "--judge-model",
        "gpt-4.1",
        "--dataset",
        str(fixture_dir),
        "--dry-run",
        "--jobs-dir",
        str(tmp_path / "jobs"),
    ]
    models = ["--answer-model", "gpt-4o-mini", "--answer-model", "gpt-5.4-mini"]
    text = run_cli(*base, *models).stdout
    plans = json.loads(run_cli(*base, *models, "--json").stdout)
    total = sum(p["total"]["batch_usd"] for p in plans)
    sync = sum(p["total"]["sync_usd"] for p in plans)
    assert (
        text.strip().splitlines()[-1].endswith(f"${total:,.4f} at batch price (sync ${sync:,.4f})")
    )
    assert "[" not in text and "1 file of 50 requests" in text


def test_the_price_table_is_dated_sourced_and_says_when_there_is_no_price():
    pricing = load_pricing()
    for model in (
        "gpt-5.4-mini",
        "gpt-5.6-sol",
        "opus-5",
        "claude-sonnet-4-6",
        "gemini-3.1-pro",
        "accounts/fireworks/models/glm-5p2",
    ):
        price = pricing.price(model)
        assert price is not None and price.as_of and price.source, model
    assert pricing.price("kimi-k3") is None
    assert "no public" in pricing.why_unpriced("kimi-k3")
    assert pricing.price("ft:gpt-4o-mini:acme::abc123") == pricing.price("gpt-4o-mini")
    assert pricing.price("gpt-4o-mni") is None  # a shorter prefix never prices a typo


def test_a_fine_tuned_model_is_counted_and_priced_as_its_base(tmp_path, fixture_dir):
    plan = json.loads(
        run_cli(
            "run",
            "--answer-model",
            "ft:gpt-4o-mini:acme::abc123",
            "--judge-model",
            "gpt-4.1",
            "--dataset",
            str(fixture_dir),
            "--dry-run",
            "--json",
        ).stdout
    )
    answers = plan["stages"]["answers"]
    assert answers["priced"] and "o200k_base" in answers["tokenizer"]


def _on_a_terminal(argv: list[str], environ: dict[str, str]) -> str:
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execve(sys.executable, [sys.executable, "-m", "batchbench", *argv], environ)
    out = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out.append(data)
    os.waitpid(pid, 0)
    return b"".join(out).decode("utf-8", "replace")


def test_live_progress_on_a_terminal_ends_in_the_final_state_one_line_per_run(
    batch_emulator_factory, tmp_path, fixture_dir
):
    from batchbench.emulator import SystemClock

    emu = batch_emulator_factory(clock=SystemClock())  # a real terminal, a real process
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "4")
    args[args.index("--run") : args.index("--run") + 2] = []
    args += ["--answer-model", "second-model"]
    raw = _on_a_terminal(args, {**os.environ, **env()})
    assert "\x1b[" in raw  # redrawn in place
    before_results = raw[: raw.index("answer model ")]
    last_frame = before_results.replace("\r\n", "\n").split("\r\x1b[2K")[-1]
    final = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", last_frame)
    lines = [x for x in final.strip().splitlines() if x.strip()]
    assert len(lines) == 2 and all("answers 4/4 · judges 4/4" in x for x in lines), final
    assert lines[0].startswith("ans-model ") and lines[1].startswith("second-model ")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", before_results)
    assert plain.endswith("\n")  # the results start on their own line


def test_list_is_an_aligned_table_and_its_json_is_unchanged(batch_emulator, tmp_path, fixture_dir):
    assert (
        run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--smoke"), env=env()).returncode
        == 0
    )
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    header, row = run_cli("list", *jobs).stdout.splitlines()
    assert header.split()[:3] == ["run", "created", "status"]
    assert header.index("status") == row.index("complete")  # aligned
    assert re.search(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", row) and "(6d276de70eaf)" in row
    [entry] = json.loads(run_cli("list", *jobs, "--json").stdout)
    assert set(entry) == {
        "run",
        "answer_model",
        "judge_model",
        "dataset",
        "dataset_sha256",
        "status",
        "scored",
        "failed",
        "total",
        "overall_macro_mean",
        "cost_usd",
        "priced_cost_usd",
        "unpriced",
    }


def test_run_help_is_grouped_with_readable_metavars():
    text = run_cli("run", "--help", env={"COLUMNS": "120"}).stdout
    for panel in ("Selection", "Models", "API", "Budget", "Advanced"):
        assert f"─ {panel} " in text
    for metavar in ("MODEL", "PATH", "N", "USD", "SECONDS"):
        assert f" {metavar} " in text
    assert "<" not in text and "list[str]" not in text


def test_cron_ticks_on_a_finished_or_busy_run_say_one_line_and_exit_0(
    batch_emulator, tmp_path, fixture_dir
):
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--smoke", "--no-wait")
    finish = [a for a in args if a != "--no-wait"]
    assert run_cli(*finish, env=env()).returncode == 0
    tick = run_cli(*args, env=env())
    said = [x for x in tick.stdout.splitlines() if not x.startswith("RESUMING")]
    assert tick.returncode == 0 and len(said) == 1 and "is complete" in said[0]
    # Another process holds the run: this tick has nothing to do.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR);"
            " fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, b'4242'); print('held', flush=True);"
            " time.sleep(60)",
            str(tmp_path / "jobs" / "ans-model" / ".lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert read_lines(holder.stdout, 1) == ["held\n"]
        tick = run_cli(*args, env=env())
    finally:
        holder.kill()
    said = [x for x in tick.stdout.splitlines() if not x.startswith("RESUMING")]
    assert tick.returncode == 0 and len(said) == 1 and "another process" in said[0]


def test_demo_into_a_closed_pipe_is_quiet(tmp_path):
    proc = subprocess.run(
        f"{sys.executable} -m batchbench demo | head -2",
        shell=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        executable="/bin/bash",
    )
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 2
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr.lower()


def test_a_base_url_without_v1_is_named_as_the_problem(batch_emulator, tmp_path, fixture_dir):
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--smoke")
    args[args.index("--base-url") + 1] = batch_emulator.url  # no /v1
    assert_one_line_error(run_cli(*args, env=env()), batch_emulator.url, "/v1", "--base-url")


def test_validate_honours_the_dataset_variable(fixture_dir, fixture_golden_dir):
    digest = (fixture_golden_dir / "dataset_sha256.txt").read_text().strip()
    for proc in (
        run_cli("validate", "--dataset", str(fixture_dir)),
        run_cli("validate", env={"BATCHBENCH_DATASET": str(fixture_dir)}),
    ):
        assert proc.returncode == 0 and f"dataset_sha256 {digest}" in proc.stdout


def test_summarize_warns_of_selected_cases_without_a_row(fixture_dir, fixture_golden_dir, tmp_path):
    smoke = fixture_golden_dir / "smoke.jsonl"
    proc = run_cli(
        "summarize", str(smoke), "--dataset", str(fixture_dir), "-o", str(tmp_path / "s.json")
    )
    selected = 50  # the fixture's cases; the smoke file has one row per benchmark (10)
    assert f"{selected - 10} of the {selected} selected cases have no row" in proc.stderr
    assert "add --smoke" in proc.stderr
    full = shutil.copy(fixture_golden_dir / "full.jsonl", tmp_path / "first.jsonl")
    rows = Path(full).read_text().splitlines()
    ids = list(dict.fromkeys(json.loads(r)["case_id"] for r in rows))[:7]
    Path(full).write_text("".join(r + "\n" for r in rows if json.loads(r)["case_id"] in ids))
    proc = run_cli("summarize", str(full), "--dataset", str(fixture_dir))
    assert "add --limit 7" in proc.stderr


def test_one_exit_code_per_problem(batch_emulator, tmp_path, fixture_dir, fixture_golden_dir):
    golden = fixture_golden_dir / "full.jsonl"
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    out = str(tmp_path / "x.csv")
    for argv in (
        ["status", "nope"],
        ["cancel", "nope"],
        ["show", "nope", "c"],
        ["export", "nope", "-o", out],
        ["report", "nope"],
    ):
        proc = run_cli(*argv, *jobs, env=env())
        assert_one_line_error(proc, "no run 'nope'")
        assert proc.returncode == 2, argv
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--smoke", "--no-wait")
    batch_emulator.store.settings.paused = True  # submitted, nothing comes back
    assert run_cli(*args, env=env()).returncode == 3
    case = json.loads((tmp_path / "jobs" / "ans-model" / "run.json").read_text())["case_ids"][0]
    for argv in (
        ["show", "ans-model", case],
        ["export", "ans-model", "-o", out],
        ["report", "ans-model"],
        ["compare", "ans-model", str(golden)],
    ):
        proc = run_cli(*argv, *jobs)
        assert proc.returncode == 3 and "not finished yet" in proc.stderr, (argv, proc.stderr)
    # #63.9: a name one slip away from a run's gets the run's name back
    for argv in (["status", "ans-modle"], ["remove", "ans-mode"]):
        assert_one_line_error(run_cli(*argv, *jobs), "did you mean 'ans-model'?")
    assert "did you mean" not in run_cli("status", "gpt-5.4-mini", *jobs).stderr


def test_compare_labels_name_files_of_the_same_name(fixture_dir, fixture_golden_dir, tmp_path):
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        shutil.copy(fixture_golden_dir / "full.jsonl", tmp_path / side / "results.jsonl")
    files = [str(tmp_path / s / "results.jsonl") for s in ("a", "b")]
    proc = run_cli("compare", *files, "--dataset", str(fixture_dir))
    assert_one_line_error(proc, "2 of the sources are named 'results'", "--label")
    assert "[" not in proc.stderr
    proc = run_cli(
        "compare", *files, "--dataset", str(fixture_dir), "--label", "ours", "--label", "theirs"
    )
    assert proc.returncode == 0 and "theirs - ours" in proc.stdout


def test_the_report_says_when_what_it_cost_and_where_each_failure_came_from(
    batch_emulator_factory, tmp_path, fixture_dir, fixture_dataset
):
    def judge_fails_for_some(body):
        if body["model"] != "judge-model":
            return "An answer."
        ids = re.findall(r"^\[([^\]]+)\] points=", body["messages"][-1]["content"], re.M)
        if ids[0][0] in "0123":
            error = {"message": "Bad thing happened", "type": "invalid_request_error"}
            return {"status_code": 400, "body": {"error": error}}
        return json.dumps({"decisions": [{"item_id": i, "matched": True} for i in ids]})

    emu = batch_emulator_factory(responder=judge_fails_for_some)
    assert (
        run_cli(*run_args(emu, tmp_path, fixture_dir, "--limit", "10"), env=env()).returncode == 1
    )
    page = tmp_path / "r.html"
    run_cli("report", "ans-model", "--jobs-dir", str(tmp_path / "jobs"), "-o", str(page))
    html = page.read_text()
    assert re.search(r"<dt>generated</dt><dd>\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC</dd>", html)
    assert "<th>95% CI low</th><th>95% CI high</th>" in html and "cost at batch price" in html
    rows = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    failed = [r for r in rows if "error" in r]
    by_id = fixture_dataset.by_id()
    assert failed and f"{len(failed)} × HTTP 400</h4>" in html
    for r in failed:
        case = by_id[r["case_id"]]
        assert f"{case['benchmark']} · {r['case_id']}: HTTP 400: Bad thing happened" in html
    first_words = " ".join(by_id[rows[0]["case_id"]]["prompt"].split()[:12])
    assert first_words.replace("'", "&#x27;").replace('"', "&quot;")[:40] in html


def test_packaging_license_and_ignored_build_outputs():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "MIT" and (REPO / "LICENSE").read_text().startswith("MIT License")
    ignored = (REPO / ".gitignore").read_text().split()
    assert {"dist/", "build/"} <= set(ignored)


class _Stage:
    done, total = 1, 2


class _State:
    """What a progress line reads of a run's state."""

    cases: dict = {}

    def __init__(self, started: float, ended: float | None = None) -> None:
        self.started, self.ended = started, ended

    def progress(self, stage):
        return _Stage()

    def in_flight(self):
        return []


class _Pipeline:
    def __init__(self, name: str, state: _State, done: bool = False) -> None:
        self.config = type("Config", (), {"name": name})()
        self.state, self._done = state, done

    def done(self) -> bool:
        return self._done


def test_a_warning_never_lands_on_the_live_line_and_a_log_names_every_run():
    """#30.10: on a terminal a warning is its own line above the live ones; in a log the
    first line of a group already names its run; a finished run's time is its own."""
    import io

    from batchbench.emulator import FakeClock
    from batchbench.views.progress import Progress

    clock = FakeClock(1000.0)
    screen = io.StringIO()
    with Progress(stream=screen, clock=clock, tty=True, runs=1) as progress:
        progress(_Pipeline("a", _State(started=990.0)))
        progress.warn("warning: 1 × 429 from the service")
        progress(_Pipeline("a", _State(started=990.0)))
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue()).replace("\r", "\n")
    lines = [x for x in plain.splitlines() if x.strip()]
    assert "warning: 1 × 429 from the service" in lines  # a line of its own, nothing glued
    log = io.StringIO()
    progress = Progress(stream=log, clock=clock, tty=False, runs=2)
    progress(_Pipeline("first-model", _State(started=990.0)))
    assert log.getvalue().startswith("first-model: answers 1/2")
    done = io.StringIO()
    clock.advance(86400)  # a day later, the finished run is looked at again
    Progress(stream=done, clock=clock, tty=False)(
        _Pipeline("a", _State(started=990.0, ended=1290.0), done=True)
    )
    assert "· 5m00s" in done.getvalue()  # start to last collection, not to now


def test_export_help_names_the_inspect_extra():
    """#45.11: rich read `[inspect]` as markup and dropped it from `export --help`."""
    text = run_cli("export", "--help").stdout
    assert "[inspect] extra" in " ".join(text.replace("│", " ").split())
