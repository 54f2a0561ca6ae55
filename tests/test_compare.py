"""batchbench compare: the paired bootstrap against a plain re-implementation of its
definition, bit for bit; comparing a run with itself; refusals."""

from __future__ import annotations

import json
import re

import pytest
from support import reference as plain_reference
from support.cli import FIXTURE, assert_one_line_error, run_cli

DATASET = FIXTURE / "dataset"


def _rows(name: str) -> list[dict]:
    text = (FIXTURE / "golden" / f"{name}.jsonl").read_text()
    return [json.loads(x) for x in text.split("\n") if x.strip()]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _paired_by_benchmark(a_rows, b_rows, order):
    """Cases with a successful row in both, per benchmark, in registry order."""

    def last_ok(rows):
        return {r["case_id"]: r for r in rows if "score" in r and "error" not in r}

    a, b = last_ok(a_rows), last_ok(b_rows)
    ab, bb = {}, {}
    for case in order:
        if case["case_id"] in a and case["case_id"] in b:
            ab.setdefault(case["benchmark"], []).append(a[case["case_id"]]["score"])
            bb.setdefault(case["benchmark"], []).append(b[case["case_id"]]["score"])
    return ab, bb, len(set(a) ^ set(b))


@pytest.mark.parametrize("block", [None, 997])  # all resamples at once, or 997 draws at a time
def test_the_paired_bootstrap_equals_a_plain_implementation(
    tmp_path, fixture_dataset, block, monkeypatch
):
    if block is not None:
        from batchbench.scores import summary as summary_module

        monkeypatch.setattr(summary_module, "BLOCK_PICKS", block)
    full, uneven = _rows("full"), _rows("uneven")
    for r in uneven:  # same judge and protocol; another model whose scores differ
        r["answer_model"] = "model-b"
    a = _write(tmp_path / "a.jsonl", full)
    b = _write(tmp_path / "b.jsonl", uneven)
    proc = run_cli(
        "compare",
        str(a),
        str(b),
        "--dataset",
        str(DATASET),
        "--baseline",
        "b",
        "--bootstrap-samples",
        "400",
        "--bootstrap-seed",
        "7",
        "--json",
        "--allow-partial",
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    [comparison] = got["comparisons"]
    ab, bb, excluded = _paired_by_benchmark(full, uneven, fixture_dataset.cases)
    expected = plain_reference.paired_difference(ab, bb, samples=400, seed=7)
    expected["overall"]["p_holm"] = plain_reference.holm([expected["overall"]["p_value"]])[0]
    assert excluded > 0 and len({len(v) for v in ab.values()}) > 1  # uneven, with exclusions
    assert comparison["excluded_cases"] == excluded
    assert comparison["paired_cases"] == sum(len(v) for v in ab.values())
    assert comparison["benchmarks"] == expected["benchmarks"]
    assert comparison["overall"] == expected["overall"]
    assert [r["name"] for r in got["runs"]] == ["a", "b"] and got["baseline"] == "b"
    # The leaderboard is each run's own summary, as summarize writes it.
    summary = run_cli("summarize", str(a), "--dataset", str(DATASET), "--json").stdout
    assert got["runs"][0]["overall_ci95"] == json.loads(summary)["overall_ci95"]


@pytest.mark.parametrize("block", [None, 997])  # all resamples at once, or 997 draws at a time
def test_equal_strata_take_the_summary_fast_path_and_still_agree(
    tmp_path, fixture_dataset, block, monkeypatch
):
    if block is not None:
        from batchbench.scores import summary as summary_module

        monkeypatch.setattr(summary_module, "BLOCK_PICKS", block)
    kept: dict[str, int] = {}
    three = []  # the first three scored cases of each benchmark: equal strata
    for r in _rows("full"):
        if "score" in r and kept.get(r["benchmark"], 0) < 3:
            kept[r["benchmark"]] = kept.get(r["benchmark"], 0) + 1
            three.append(r)
    other = [dict(r, score=round(1 - r["score"], 4)) for r in three]
    for r in other:
        r.pop("decisions", None)
        r.pop("score_components", None)
    a = _write(tmp_path / "a.jsonl", three)
    b = _write(tmp_path / "b.jsonl", other)
    args = ["compare", str(a), str(b), "--dataset", str(DATASET), "--json", "--baseline", "b"]
    got = json.loads(run_cli(*args, "--bootstrap-samples", "300").stdout)["comparisons"][0]
    ab, bb, _ = _paired_by_benchmark(three, other, fixture_dataset.cases)
    assert {len(v) for v in ab.values()} == {3}
    expected = plain_reference.paired_difference(ab, bb, samples=300, seed=42)
    expected["overall"]["p_holm"] = expected["overall"]["p_value"]  # one comparison
    assert got["overall"] == expected["overall"]
    assert got["benchmarks"] == expected["benchmarks"]


def test_a_run_compared_with_itself_differs_by_nothing(tmp_path):
    a = _write(tmp_path / "a.jsonl", _rows("full"))
    b = _write(tmp_path / "a2.jsonl", _rows("full"))
    got = json.loads(
        run_cli("compare", str(a), str(b), "--dataset", str(DATASET), "--json").stdout
    )["comparisons"][0]
    assert got["excluded_cases"] == 0
    for v in [got["overall"], *got["benchmarks"].values()]:
        # Every case ties: no share of resamples where a is better (not 0%), p = 1.
        assert v["diff"] == 0 and v["ci95"] == [0, 0] and v["share_a_better"] is None
        assert v["p_value"] == 1
    text = run_cli("compare", str(a), str(b), "--dataset", str(DATASET)).stdout
    assert "all tie" in text and "0.0%" not in text


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        ("judge_model", "another-judge", "another judge model"),
        ("protocol_version", "bedside-bench-grading-v2", "another protocol version"),
    ],
)
def test_runs_that_are_not_comparable_are_refused(tmp_path, field, value, fragment):
    a = _write(tmp_path / "a.jsonl", _rows("full"))
    b = _write(tmp_path / "b.jsonl", [dict(r, **{field: value}) for r in _rows("full")])
    proc = run_cli("compare", str(a), str(b), "--dataset", str(DATASET))
    assert_one_line_error(proc, "b and a", fragment)


def test_runs_with_no_case_scored_in_both_are_refused(tmp_path):
    rows = [r for r in _rows("full") if "score" in r]
    a = _write(tmp_path / "a.jsonl", rows[: len(rows) // 2])
    b = _write(tmp_path / "b.jsonl", rows[len(rows) // 2 :])
    proc = run_cli("compare", str(a), str(b), "--dataset", str(DATASET))
    assert_one_line_error(proc, "no case scored in both")


def test_a_results_file_needs_its_dataset(tmp_path):
    a = _write(tmp_path / "a.jsonl", _rows("full"))
    b = _write(tmp_path / "b.jsonl", _rows("full"))
    proc = run_cli("compare", str(a), str(b))
    assert_one_line_error(proc, "needs --dataset")


# Several answer models in one command ----------------------------------------------------


def _group_args(emu, tmp_path, *extra):
    return [
        "run",
        "--answer-model",
        "model-a",
        "--answer-model",
        "model-b",
        "--judge-model",
        "judge-model",
        "--dataset",
        str(DATASET),
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "--base-url",
        emu.base_url,
        "--poll-interval",
        "0.05",
        "--max-requests-per-batch",
        "4",
        *extra,
    ]


def assert_each_run_paid_once(emu) -> None:
    """No run created a submission twice nor ran a line twice (runs share case ids)."""
    from collections import Counter

    ledger = emu.ledger()
    run_of = {b["id"]: b["metadata"]["batchbench_run_id"] for b in ledger["batches"]}
    subs = Counter(
        (b["metadata"]["batchbench_run_id"], b["metadata"]["batchbench_sub"])
        for b in ledger["batches"]
    )
    lines = Counter((run_of[e["batch_id"]], e["custom_id"]) for e in ledger["executions"])
    assert max(subs.values()) == 1 and max(lines.values()) == 1
    assert len({run for run, _ in subs}) == 2


def test_two_models_in_one_command_each_run_as_the_reference_would(
    batch_emulator_factory, tmp_path
):
    from support.runs import env

    emu = batch_emulator_factory(latency=0.05)
    proc = run_cli(*_group_args(emu, tmp_path, "--limit", "8"), env=env())
    assert proc.returncode == 0, proc.stderr
    for name in ("model-a", "model-b"):
        run_dir = tmp_path / "jobs" / name
        rows = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
        assert len(rows) == 8 and {r["answer_model"] for r in rows} == {name}
        copy = _write(tmp_path / f"{name}.jsonl", rows)
        assert (
            run_cli("summarize", str(copy), "--dataset", str(DATASET), "--limit", "8").returncode
            == 0
        )
        assert (tmp_path / f"{name}.summary.json").read_bytes() == (
            run_dir / "results.summary.json"
        ).read_bytes()
    assert_each_run_paid_once(emu)
    statuses = json.loads(
        run_cli(
            "status", "model-a", "model-b", "--jobs-dir", str(tmp_path / "jobs"), "--json"
        ).stdout
    )
    assert [s["status"] for s in statuses] == ["complete", "complete"]
    compared = run_cli("compare", "model-a", "model-b", "--jobs-dir", str(tmp_path / "jobs"))
    assert compared.returncode == 0 and "model-b - model-a: 8 paired cases" in compared.stdout

    # the command ends with both side by side, best overall macro mean first (each run's
    # summary file is the witness), and the command that compares them paired
    board = proc.stdout.split("leaderboard (overall macro mean)\n")[1].splitlines()
    means = {
        name: json.loads((tmp_path / "jobs" / name / "results.summary.json").read_text())
        for name in ("model-a", "model-b")
    }
    ranked = sorted(means, key=lambda n: -means[n]["overall_macro_mean"])
    listed = [line.split()[1] for line in board[1:3]]
    assert listed == ranked
    for line in board[1:3]:
        s = means[line.split()[1]]
        low, high = s["overall_ci95"]
        assert f"{s['overall_macro_mean']:.3f}  [{low:.3f}, {high:.3f}]  8/8" in line
    assert board[3] == f"paired differences: batchbench compare {' '.join(ranked)}"


def test_a_model_its_service_does_not_know_stops_the_group_before_anything_is_bought(
    batch_emulator_factory, tmp_path
):
    """#63.7 reverses the rule this test once held (the other model ran on): the good
    model's batch was bought before a misspelt one was refused. Every model of a group is
    checked first; one its service does not know stops the command, nothing created."""
    from support.cli import assert_one_line_error
    from support.runs import env

    emu = batch_emulator_factory(latency=0.05, unknown_models=["model-b"])
    proc = run_cli(*_group_args(emu, tmp_path, "--smoke"), env=env())
    assert_one_line_error(proc, "model 'model-b' is not available", "nothing was started")
    assert not emu.ledger()["batches"]
    assert not (tmp_path / "jobs" / "model-a-smoke").exists()
    assert not (tmp_path / "jobs" / "model-b-smoke").exists()


def test_the_group_survives_a_sigkill_and_pays_once(batch_emulator_factory, tmp_path):
    """One process advancing two runs is killed at a create and again after a collection's
    rows (real processes, real SIGKILLs at named points): resumed, both runs end whole and
    nothing was paid twice."""
    import signal

    from support.runs import env

    from batchbench.emulator import SystemClock

    real_time = SystemClock()
    emu = batch_emulator_factory(latency=0.005, clock=real_time)
    args = _group_args(emu, tmp_path, "--limit", "8", "--poll-interval", "0.005")
    for point in ("created:3", "rows_written:1"):
        proc = run_cli(*args, env={**env(), "BATCHBENCH_FAILPOINT": point}, real=True)
        assert proc.returncode == -signal.SIGKILL, (point, proc.stderr)
    again = run_cli(*args, env=env(), clock=real_time)
    assert again.returncode == 0, again.stderr
    assert all(
        len((tmp_path / "jobs" / m / "results.jsonl").read_text().splitlines()) == 8
        for m in ("model-a", "model-b")
    )
    assert_each_run_paid_once(emu)


def _failing(rows: list[dict], n: int) -> list[dict]:
    """These rows with the first ``n`` scored cases turned into the reference's error rows."""
    out, turned = [], 0
    for r in rows:
        if "score" in r and turned < n:
            turned += 1
            keep = ("protocol_version", "case_id", "benchmark", "grading_method")
            r = {k: r[k] for k in keep} | {
                "answer_model": r["answer_model"],
                "judge_model": r["judge_model"],
                "finished_at": r["finished_at"],
                "error": "ValueError: invalid judge JSON",
            }
        out.append(r)
    return out


def test_a_run_with_failed_cases_is_flagged_and_pairs_drop_them(tmp_path):
    """A run whose failed cases leave it a mean over fewer cases says so in the
    leaderboard; the pair is over the cases both scored, and says how many it dropped.
    Long names are shown whole, and every row keeps its columns."""
    full = _rows("full")
    long = "accounts-fireworks-models-glm-5p3-with-a-long-name"
    a = _write(tmp_path / f"{long}.jsonl", full)
    b = _write(tmp_path / "twin.jsonl", _failing(full, 4))
    scored_a = {r["case_id"] for r in full if "score" in r}
    scored_b = {r["case_id"] for r in _failing(full, 4) if "score" in r}
    argv = ["compare", str(a), str(b), "--dataset", str(DATASET), "--baseline", long]
    got = json.loads(run_cli(*argv, "--json").stdout)
    [c] = got["comparisons"]
    assert (c["paired_cases"], c["only_a"], c["only_b"]) == (
        len(scored_a & scored_b),
        len(scored_b - scored_a),
        len(scored_a - scored_b),
    )
    assert c["only_b"] == 4 and c["excluded_cases"] == 4
    errors = {r["name"]: r["errors"] for r in got["runs"]}
    assert errors["twin"] == errors[long] + 4
    text = run_cli(*argv).stdout
    assert f"twin's mean is over {len(scored_b)} cases, {errors['twin']} failed" in text
    assert f"{c['paired_cases']} paired cases; 4 dropped (4 scored by {long} only" in text
    board = text.splitlines()[: len(got["runs"]) + 1]
    assert any(line.startswith(long + " ") for line in board)  # never cut
    table = [line for line in text.splitlines() if line.startswith("  ") and "[" in line]
    ends = {re.search(r"\d\.\d{4}", line).end() for line in table}  # the p column
    assert len(table) == len(c["benchmarks"]) + 1 and len(ends) == 1, table


@pytest.mark.parametrize("samples", ["1", "3", "199"])
def test_too_few_resamples_are_refused(tmp_path, samples):
    a = _write(tmp_path / "a.jsonl", _rows("full"))
    b = _write(tmp_path / "b.jsonl", _rows("uneven"))
    proc = run_cli(
        "compare", str(a), str(b), "--dataset", str(DATASET), "--bootstrap-samples", samples
    )
    assert_one_line_error(proc, f"--bootstrap-samples {samples}", "at least 200")


def test_a_groups_cancelled_member_stays_cancelled_and_its_name_is_not_a_new_run(
    batch_emulator_factory, tmp_path
):
    """#47.2: one model of a named group cancelled, then the group's command run again to
    finish the others: the cancelled one is left as it is (one line says so), nothing of
    it bought again; the group's name given with one of its models is that member, with
    another model it is refused — never a new run, paid from nothing."""
    from support.cli import assert_one_line_error
    from support.runs import env

    emu = batch_emulator_factory(latency=5.0)
    args = _group_args(emu, tmp_path, "--limit", "8", "--run", "day2")
    assert run_cli(*args, "--no-wait", env=env()).returncode == 3
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert (
        run_cli("cancel", "day2-model-b", *jobs, "--base-url", emu.base_url, env=env()).returncode
        == 0
    )
    bought = len(emu.ledger()["batches"])
    proc = run_cli(*args, env=env())
    assert proc.returncode == 3, proc.stderr
    said = " ".join(proc.stdout.split())
    assert "'day2-model-b' was cancelled: collecting what finished, submitting nothing" in said
    b_batches = [
        b for b in emu.ledger()["batches"] if b["metadata"].get("batchbench_run") == "day2-model-b"
    ]
    assert len(b_batches) == 2 and len(emu.ledger()["batches"]) > bought  # a's judges, not b's
    # the group's name with one of its models: that member
    one = [*args[:3], *args[5:]]
    assert one[1:3] == ["--answer-model", "model-a"] and "model-b" not in one
    proc = run_cli(*one, env=env())
    assert proc.returncode == 0 and "RESUMING run 'day2-model-a'" in proc.stdout
    other = [one[0], one[1], "model-c", *one[3:]]
    proc = run_cli(*other, env=env())
    assert_one_line_error(proc, "--run 'day2' names a group of runs", "day2-model-a")
    assert not (tmp_path / "jobs" / "day2").exists()
