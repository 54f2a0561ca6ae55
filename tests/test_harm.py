"""#66.4: endorsed harm — a negative-points rubric item the judge marked met — per run,
with Wilson intervals, the paired difference between runs, the worst cases; in the
report and in ``report --json``. Witnesses that are not ours: Newcombe's published
table of Wilson intervals (Stat Med 1998;17:857, Table I), statsmodels' independent
Newcombe interval (to which the paired one reduces when the pairs are uncorrelated),
and a plain recount of the run's rows against the dataset's points."""

from __future__ import annotations

import json

import pytest
from support.cli import assert_one_line_error, run_cli
from support.runs import env, rows_of, run_args

from batchbench.bench.dataset import load_dataset
from batchbench.scores.harm import paired_difference, wilson


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I,
    # method 3 (Wilson's score interval, no continuity correction)
    [
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_is_newcombes_published_interval(k, n, low, high):
    assert [round(x, 4) for x in wilson(k, n)] == [low, high]


def _report(tmp_path, *runs: str) -> dict:
    """``report RUN... --json``'s record (the page beside it, at tmp_path/r.html)."""
    record, page = tmp_path / "r.json", tmp_path / "r.html"
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    made = run_cli("report", *runs, *jobs, "-o", str(page), "--json", str(record))
    assert made.returncode == 0, made.stderr
    return json.loads(record.read_text())


def _pairs(both: int, only_a: int, only_b: int, neither: int):
    rows_a: dict = {}
    rows_b: dict = {}
    cases: dict = {}
    counts = [
        (True, True, both),
        (True, False, only_a),
        (False, True, only_b),
        (False, False, neither),
    ]
    for x, y, count in counts:
        for _ in range(count):
            cid = f"c{len(cases)}"
            cases[cid] = {
                "case_id": cid,
                "rubric_items": [{"item_id": cid, "points": -1, "text": "t"}],
            }
            rows_a[cid] = {"decisions": [{"item_id": cid, "matched": x}]}
            rows_b[cid] = {"decisions": [{"item_id": cid, "matched": y}]}
    return rows_a, rows_b, cases


@pytest.mark.parametrize(
    ("table", "expected"),
    # statsmodels 0.15, confint_proportions_2indep(k1, n, k2, n, method="newcomb"): the
    # independent interval, which Newcombe's paired one equals when ad = bc (phi = 0)
    [
        ((2, 2, 4, 4), (-0.4808826936457038, 0.2032307658645751)),
        ((1, 1, 1, 1), (-0.4949196078428281, 0.4949196078428281)),
    ],
)
def test_the_paired_interval_reduces_to_newcombes_independent_one(table, expected):
    a, b, cases = _pairs(*table)
    found = paired_difference(a, b, cases)
    assert found["ci"] == pytest.approx(list(expected), abs=1e-12)
    swapped = paired_difference(b, a, cases)  # the other way round: the interval negated
    assert swapped["ci"] == pytest.approx([-found["ci"][1], -found["ci"][0]], abs=1e-12)


def test_correlated_pairs_narrow_the_interval_and_it_holds_the_difference():
    a, b, cases = _pairs(36, 12, 2, 0)
    found = paired_difference(a, b, cases)
    assert found["difference"] == pytest.approx(0.2) and found["n"] == 50
    assert found["ci"][0] < 0.2 < found["ci"][1]
    assert (found["only_a"], found["only_b"]) == (12, 2)


def test_the_report_shows_each_runs_endorsed_harm_from_its_rows(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(models=["first", "second"])
    for model in ("first", "second"):
        args = run_args(emu, tmp_path, fixture_dir, "--limit", "24")
        args[args.index("--answer-model") + 1] = model
        args[args.index("--run") + 1] = model
        assert run_cli(*args, env=env()).returncode == 0
    harm = _report(tmp_path, "first", "second")["harm"]
    page = tmp_path / "r.html"
    cases = load_dataset(fixture_dir).by_id()
    flags = {}
    for run in ("first", "second"):  # a plain recount: rows' decisions, the dataset's points
        rows = {r["case_id"]: r for r in rows_of(tmp_path / "jobs" / run / "results.jsonl")}
        negative, endorsed, harmed, scored = [], 0, 0, 0
        flags[run] = {}
        for cid, row in rows.items():
            met = {d["item_id"]: d["matched"] for d in row.get("decisions", [])}
            bad = [it for it in cases[cid]["rubric_items"] if it["points"] < 0]
            if "decisions" not in row or not bad:
                continue
            scored += 1
            negative += [(cid, it["item_id"]) for it in bad]
            hit = sum(1 for it in bad if met[it["item_id"]])
            endorsed += hit
            harmed += hit > 0
            flags[run][cid] = hit > 0
        assert harmed > 0  # the simulated judge endorses some: the counts are not vacuous
        got = harm["runs"][run]
        assert (got["cases"], got["cases_with_harm"]) == (scored, harmed)
        assert (got["negative_items"], got["items_endorsed"]) == (len(negative), endorsed)
        assert got["case_ci"] == pytest.approx(list(wilson(harmed, scored)))
        items = [(it["case_id"], it["item_id"]) for it in got["items"]]
        assert sorted(items) == sorted(negative) and len(set(items)) == len(items)  # each once
        assert len(got["worst"]) == min(10, harmed)
    both = sorted(set(flags["first"]) & set(flags["second"]))
    diff = harm["differences"]["second - first"]
    expected = (sum(flags["second"][c] for c in both) - sum(flags["first"][c] for c in both)) / len(
        both
    )
    assert diff["n"] == len(both) and diff["difference"] == pytest.approx(expected)
    text = page.read_text()
    assert "id='harm'" in text and "Endorsed harm" in text
    for case in harm["runs"]["first"]["worst"]:
        assert f"href='#case-{case['case_id']}'" in text


def test_the_report_prints_each_prompt_verbatim_with_its_hash_and_every_request_file(
    batch_emulator, tmp_path, fixture_dir
):
    """#66.2: the templates once, each with its SHA-256, and every request file's
    SHA-256 — the files' own bytes hashed here, and a judge request as sent rebuilt
    from the printed templates by plain string filling."""
    import hashlib

    assert (
        run_cli(
            *run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "6"), env=env()
        ).returncode
        == 0
    )
    prompts = _report(tmp_path, "ans-model")["prompts"]
    templates = {t["name"]: t for t in prompts["templates"]}
    for t in templates.values():
        assert t["sha256"] == hashlib.sha256(t["text"].encode()).hexdigest()
    folder = tmp_path / "jobs" / "ans-model" / "requests"
    on_disk = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.jsonl")}
    assert prompts["request_files"]["ans-model"] == on_disk and on_disk
    judge_file = next(p for p in sorted(folder.glob("judges-*.jsonl")))
    sent = json.loads(judge_file.read_text().splitlines()[0])["body"]["messages"]
    assert sent[0]["content"] == templates["judge system message"]["text"]
    user = sent[1]["content"]
    cases = load_dataset(fixture_dir).cases
    case = next(c for c in cases if user.startswith(f"CLINICAL PROMPT:\n{c['prompt']}\n\n"))
    line = templates["judge rubric line (one an item, joined by newlines)"]["text"]
    lines = "\n".join(
        line.replace("{item_id}", it["item_id"])
        .replace("{points:+g}", f"{it['points']:+g}")
        .replace("{text}", it["text"])
        for it in case["rubric_items"]
    )
    answer = user.split("\n\nANSWER:\n", 1)[1].split("\n\nRUBRIC ITEMS:\n", 1)[0]
    filled = (
        templates["judge user message"]["text"]
        .replace("{prompt}", case["prompt"])
        .replace("{answer}", answer)
        .replace("{rubric_lines}", lines)
    )
    assert filled == user
    page = (tmp_path / "r.html").read_text()
    assert "id='prompts'" in page and templates["judge system message"]["sha256"] in page


def test_the_flow_of_cases_counts_each_step_and_who_left_why(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#66.3: dataset → selected → sent → answered → judged → scored, each exclusion with
    its cause; the counts rebuilt here from the rule the service was told to follow."""
    import hashlib

    def refused(text: str) -> bool:  # the service refuses these cases' answers for good
        return hashlib.md5(text.encode()).hexdigest()[0] in "012"

    def garbled(text: str) -> bool:  # the judge answers these with what is not JSON
        return hashlib.md5(text.encode()).hexdigest()[0] in "345"

    def responder(body):
        user = body["messages"][-1]["content"]
        if body["model"] == "judge-model":
            prompt = user.split("\n\nANSWER:\n", 1)[0].removeprefix("CLINICAL PROMPT:\n")
            if garbled(prompt):
                return "not json"
            ids = [line[1:].split("]")[0] for line in user.split("RUBRIC ITEMS:\n")[1].splitlines()]
            return json.dumps({"decisions": [{"item_id": i, "matched": False} for i in ids]})
        if refused(user):
            return {"status_code": 400, "body": {"error": {"message": "content refused"}}}
        return "an answer"

    emu = batch_emulator_factory(responder=responder)
    args = run_args(emu, tmp_path, fixture_dir, "--limit", "20", "--max-attempts", "1")
    assert run_cli(*args, env=env()).returncode == 1  # some cases end in an error row
    flow = {s["step"]: s for s in _report(tmp_path, "ans-model")["flow"]["ans-model"]}
    dataset = load_dataset(fixture_dir)
    rows = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    prompts = {c["case_id"]: c["prompt"] for c in dataset.cases}
    chosen = [prompts[r["case_id"]] for r in rows]
    answered = [p for p in chosen if not refused(p)]
    judged = [p for p in answered if not garbled(p)]
    assert flow["in the dataset"]["cases"] == len(dataset.cases)
    assert flow["in the dataset"]["excluded"] == {
        "not selected (--smoke, --limit, --benchmark)": len(dataset.cases) - 20
    }
    assert flow["selected"]["cases"] == flow["sent"]["cases"] == 20
    assert flow["answered"]["cases"] == len(answered) and 0 < len(answered) < 20
    assert sum(flow["sent"]["excluded"].values()) == 20 - len(answered)
    assert "HTTP 400" in flow["sent"]["excluded"]
    assert flow["judged"]["cases"] == flow["scored"]["cases"] == len(judged) < len(answered)
    assert flow["answered"]["excluded"] == {"invalid judge JSON": len(answered) - len(judged)}
    assert "id='flow'" in (tmp_path / "r.html").read_text()


def test_answer_lengths_and_the_length_adjusted_score_beside_the_raw_one(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#66.5: each run's answer lengths (numpy's inverted-CDF percentiles, the nearest-rank
    rule, as the witness) and, asked for, the length-adjusted mean by the rule as the
    issue writes it: less 0.0147 per 500 characters beyond 2,000."""
    import numpy as np

    def responder(body):
        user = body["messages"][-1]["content"]
        if body["model"] == "judge-model":
            items = user.split("RUBRIC ITEMS:\n")[1].splitlines()
            ids = [line[1:].split("]")[0] for line in items]
            return json.dumps({"decisions": [{"item_id": i, "matched": True} for i in ids]})
        return "a" * (600 + 97 * (len(user) % 60))  # 600 to 6,323 characters

    emu = batch_emulator_factory(responder=responder)
    assert (
        run_cli(*run_args(emu, tmp_path, fixture_dir, "--limit", "20"), env=env()).returncode == 0
    )
    record, page = tmp_path / "r.json", tmp_path / "r.html"
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    made = run_cli(
        "report", "ans-model", *jobs, "-o", str(page), "--json", str(record), "--length-adjusted"
    )
    assert made.returncode == 0, made.stderr
    found = json.loads(record.read_text())["length"]["ans-model"]
    rows = [r for r in rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl") if "score" in r]
    lengths = np.array([len(r["answer"]) for r in rows])
    for name, q in (("p10", 10), ("p25", 25), ("p50", 50), ("p75", 75), ("p90", 90)):
        assert found["quantiles"][name] == int(np.percentile(lengths, q, method="inverted_cdf"))
    assert found["over_centre"] == int((lengths > 2000).sum()) > 0
    scores = np.array([r["score"] for r in rows])
    penalty = 0.0147 * np.maximum(0, lengths - 2000) / 500
    assert found["raw_mean"] == pytest.approx(scores.mean())
    assert found["adjusted_mean"] == pytest.approx((scores - penalty).mean())
    assert found["adjusted_mean"] < found["raw_mean"]
    text = page.read_text()
    assert "id='length'" in text and "length-adjusted" in text


def test_a_sealed_plan_is_recorded_by_the_runs_and_the_report_checks_against_it(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#66.7: `plan … --seal` writes the analysis plan before the runs; `run --plan`
    keeps its SHA-256 (hashed here from the file's bytes) and text; the report says
    "as planned", or names each deviation (a margin the plan did not have)."""
    import hashlib

    import tomllib

    emu = batch_emulator_factory(models=["first", "second"])
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]

    def grade(model: str, name: str, *extra: str):
        args = run_args(emu, tmp_path, fixture_dir, *extra)
        args[args.index("--answer-model") + 1] = model
        args[args.index("--run") + 1] = name
        return run_cli(*args, env=env())

    for model in ("first", "second"):
        assert grade(model, f"pilot-{model}").returncode == 0
    sealed = tmp_path / "plan.toml"
    made = run_cli(
        "plan", "pilot-first", "pilot-second", "--mde", "0.2", *jobs, "--seal", str(sealed)
    )
    assert made.returncode == 0, made.stderr
    digest = hashlib.sha256(sealed.read_bytes()).hexdigest()
    assert digest in made.stdout
    said = tomllib.loads(sealed.read_text())
    assert said["models"] == ["first", "second"] and said["judge"] == "judge-model"
    assert (said["seed"], said["samples"]) == (42, 10000) and said["mde"] == 0.2
    for model in ("first", "second"):
        assert grade(model, f"main-{model}", "--plan", str(sealed)).returncode == 0
        config = json.loads((tmp_path / "jobs" / f"main-{model}" / "run.json").read_text())
        assert config["analysis_plan"]["sha256"] == digest
        assert config["analysis_plan"]["text"] == sealed.read_text()
    plans = _report(tmp_path, "main-first", "main-second")["plan"]
    assert [p["sha256"] for p in plans] == [digest] and plans[0]["as_planned"]
    assert "Analysis as planned" in (tmp_path / "r.html").read_text()
    record = tmp_path / "m.json"
    made = run_cli(
        "report",
        "main-first",
        "main-second",
        *jobs,
        "-o",
        str(tmp_path / "m.html"),
        "--margin",
        "0.05",
        "--json",
        str(record),
    )
    assert made.returncode == 0, made.stderr
    [plan] = json.loads(record.read_text())["plan"]
    assert not plan["as_planned"] and any("margin" in d for d in plan["deviations"])
    other = tmp_path / "other.toml"
    other.write_text(sealed.read_text().replace("0.2", "0.1"))
    refused = grade("first", "main-first", "--plan", str(other))
    assert refused.returncode != 0 and "analysis plan" in refused.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("models = [")
    refused = grade("first", "main-third", "--plan", str(broken))
    assert (
        refused.returncode == 2
        and "broken.toml" in refused.stderr
        and "Traceback" not in refused.stderr
    )


@pytest.mark.parametrize(
    ("given", "said"),
    [("/dev/zero", "not a file"), ("missing.toml", "no such file"), ("bad.toml", "not a TOML")],
)
def test_a_plan_that_is_not_one_is_one_line_before_anything_is_made(
    fixture_dir, tmp_path, given, said
):
    """A device (read for ever), a missing file, a broken one: one line naming it."""
    (tmp_path / "bad.toml").write_text("models = [")
    path = given if given.startswith("/") else str(tmp_path / given)
    proc = run_cli(
        "run",
        "--answer-model",
        "m",
        "--judge-model",
        "j",
        "--dataset",
        str(fixture_dir),
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "--plan",
        path,
        "--dry-run",
    )
    assert_one_line_error(proc, "--plan", said)
    assert not (tmp_path / "jobs").exists()
