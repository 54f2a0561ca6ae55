"""How sure a comparison is, what a target difference costs, and how noisy the judge is:
each definition of #24 checked against a plain re-implementation written here (or in
plain_reference.py), bit for bit where the definition is exact."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest
from support import reference as plain_reference
from support.cli import FIXTURE, assert_one_line_error, run_cli
from support.runs import KEY, parse_id, rows_of

from batchbench.bench.dataset import load_dataset
from batchbench.emulator.model import default_content, is_judge_request, judged_answer
from batchbench.scores import stats

DATASET = FIXTURE / "dataset"


def golden(name: str) -> list[dict]:
    return [json.loads(x) for x in (FIXTURE / "golden" / f"{name}.jsonl").read_text().splitlines()]


def variant(rows: list[dict], model: str, flip_every: int, seed: int) -> list[dict]:
    """Another model's rows on the same cases: some verdicts flipped, every score
    recomputed by the plain scorer, so the file is as valid as the reference's."""
    cases = {c["case_id"]: c for c in load_dataset(DATASET).cases}
    rng = random.Random(seed)
    out = []
    for row in rows:
        row = {**row, "answer_model": model}
        if "decisions" in row:
            decisions = [
                {**d, "matched": d["matched"] != (rng.randrange(flip_every) == 0)}
                for d in row["decisions"]
            ]
            matched = {d["item_id"] for d in decisions if d["matched"]}
            score, components = plain_reference.score_case(cases[row["case_id"]], matched)
            row.update(decisions=decisions, score=score, score_components=components)
        out.append(row)
    return out


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def by_benchmark(a_rows, b_rows):
    order = load_dataset(DATASET).cases
    a = {r["case_id"]: r for r in a_rows if "score" in r}
    b = {r["case_id"]: r for r in b_rows if "score" in r}
    ab, bb = {}, {}
    for case in order:
        if case["case_id"] in a and case["case_id"] in b:
            ab.setdefault(case["benchmark"], []).append(a[case["case_id"]]["score"])
            bb.setdefault(case["benchmark"], []).append(b[case["case_id"]]["score"])
    return ab, bb


def test_holm_on_a_hand_made_set():
    # sorted: .005 x4 = .02; .01 x3 = .03; .03 x2 = .06; .04 x1 = .04 -> kept at .06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert stats.holm([0.2]) == [0.2]


def test_compare_reports_se_mde_p_holm_margin_and_small_n(tmp_path):
    base = golden("full")
    made = {"base": base, "near": variant(base, "near", 9, 1), "far": variant(base, "far", 3, 2)}
    files = [write(tmp_path / f"{n}.jsonl", rows) for n, rows in made.items()]
    proc = run_cli(
        "compare",
        *map(str, files),
        "--dataset",
        str(DATASET),
        "--json",
        "--bootstrap-samples",
        "500",
        "--bootstrap-seed",
        "3",
        "--margin",
        "0.05",
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    expected_p = []
    others = {"near": files[1], "far": files[2]}
    for comparison in got["comparisons"]:
        rows = [json.loads(x) for x in others[comparison["a"]].read_text().splitlines()]
        ab, bb = by_benchmark(rows, base)
        want = plain_reference.paired_difference(ab, bb, samples=500, seed=3)
        verdicts = ("p_holm", "non_inferior")  # set over the family, and by the margin
        for name, v in want["benchmarks"].items():
            got_v = comparison["benchmarks"][name]
            assert {k: got_v[k] for k in v if k not in verdicts} == {
                k: x for k, x in v.items() if k not in verdicts
            }  # every defined field, exactly
            assert got_v["small_n"] is (v["n"] < 20)
            # No verdict rests on a small-n row.
            assert got_v["non_inferior"] is (None if v["small_n"] else v["ci95"][0] > -0.05)
        overall = comparison["overall"]
        assert {k: overall[k] for k in want["overall"] if k not in verdicts} == {
            k: x for k, x in want["overall"].items() if k not in verdicts
        }
        assert overall["non_inferior"] is (
            None if want["overall"]["small_n"] else want["overall"]["ci95"][0] > -0.05
        )
        expected_p.append(want["overall"]["p_value"])
    holm = plain_reference.holm(expected_p)
    assert [c["overall"]["p_holm"] for c in got["comparisons"]] == holm
    text = run_cli(
        "compare",
        *map(str, files),
        "--dataset",
        str(DATASET),
        "--margin",
        "0.05",
        "--bootstrap-samples",
        "500",
    ).stdout
    assert "non-inferiority at margin 0.05" in text and "not to be trusted" in text
    assert "MDE80" in text and "Holm" in text
    # a verdict the interval does not give is "not demonstrated" (never "not shown",
    # which reads as a figure left off the screen)
    far = next(c for c in got["comparisons"] if c["a"] == "far")
    assert far["overall"]["non_inferior"] is False  # "far" is the fixture's worse model
    assert "far is NOT demonstrated to be within 0.05 of" in " ".join(text.split())
    assert "not shown" not in text


def test_the_report_shows_se_mde_p_holm_and_the_verdicts_of_each_comparison(tmp_path):
    base = golden("full")
    made = {"base": base, "near": variant(base, "near", 9, 1), "far": variant(base, "far", 3, 2)}
    files = [write(tmp_path / f"{n}.jsonl", rows) for n, rows in made.items()]
    page = tmp_path / "r.html"
    proc = run_cli(
        "report", *map(str, files), "--dataset", str(DATASET), "-o", str(page), "--margin", "0.05"
    )
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    wants = {}
    for name in ("near", "far"):  # the report's default stream: 10,000 resamples, seed 42
        ab, bb = by_benchmark(made[name], base)
        wants[name] = plain_reference.paired_difference(ab, bb, samples=10_000, seed=42)
    holm = plain_reference.holm([w["overall"]["p_value"] for w in wants.values()])
    for (name, want), p_holm in zip(wants.items(), holm):
        section = text.split(f"<h3>{name} − base:")[1].split("</table>")[0]
        shown = {}
        for label, cells in re.findall(r"<tr><td>(.*?)</td>(.*?)</tr>", section):
            values = [float(v) for v in re.findall(r'data-value="([^"]+)"', cells)]
            verdict = re.findall(r"<td>(yes|not demonstrated|no verdict \(small n\))</td>", cells)
            shown[label.split(" <span")[0]] = (values, verdict)
        expected = {**want["benchmarks"], "overall (macro)": {**want["overall"], "p": p_holm}}
        assert set(shown) == set(expected)
        for label, v in expected.items():
            p = v.get("p", v["p_value"])
            share = [] if v["share_a_better"] is None else [v["share_a_better"]]
            numbers = [v["diff"], *v["ci95"], *share, v["se_diff"], v["mde80"], p]
            said = "yes" if v["ci95"][0] > -0.05 else "not demonstrated"
            assert shown[label] == (numbers, ["no verdict (small n)" if v["small_n"] else said])
            assert ("not to be trusted" in section) is any(
                x["n"] < 20 for x in want["benchmarks"].values()
            )


def test_runs_of_different_cases_are_refused_unless_partial_is_allowed(tmp_path):
    full, smoke = write(tmp_path / "full.jsonl", golden("full")), tmp_path / "smoke.jsonl"
    write(smoke, variant(golden("smoke"), "other", 4, 5))
    proc = run_cli("compare", str(full), str(smoke), "--dataset", str(DATASET))
    assert_one_line_error(proc, "smoke has 10 scored cases", "full 49", "--allow-partial")
    proc = run_cli("compare", str(full), str(smoke), "--dataset", str(DATASET), "--allow-partial")
    assert proc.returncode == 0 and "10 paired cases" in proc.stdout


def test_plan_from_a_hand_made_pilot(tmp_path):
    base = golden("full")
    other = variant(base, "other", 3, 8)
    a, b = write(tmp_path / "a.jsonl", base), write(tmp_path / "b.jsonl", other)
    got = json.loads(
        run_cli(
            "plan",
            str(a),
            str(b),
            "--dataset",
            str(DATASET),
            "--mde",
            "0.03",
            "--power",
            "0.9",
            "--alpha",
            "0.01",
            "--json",
        ).stdout
    )
    ab, bb = by_benchmark(base, other)
    sds = [statistics.stdev([x - y for x, y in zip(ab[n], bb[n])]) for n in sorted(ab)]
    z = statistics.NormalDist().inv_cdf(1 - 0.01 / 2) + statistics.NormalDist().inv_cdf(0.9)
    total = 0.0
    for sd in sds:
        total += sd * sd
    m = math.ceil((z / 0.03) ** 2 * total / len(sds) ** 2)
    assert got["cases_per_benchmark"] == m and got["total_cases"] == m * len(sds)
    assert (got["mde"], got["power"], got["alpha"]) == (0.03, 0.9, 0.01)
    assert got["estimated_usd"] is None  # results files carry no price
    text = run_cli("plan", str(a), str(b), "--dataset", str(DATASET), "--mde", "0.03").stdout
    assert "cases per benchmark" in text and "cost is unknown" in text
    for mde in ("0", "5", "1.5"):  # scores lie in 0..1: no difference outside (0, 1]
        proc = run_cli("plan", str(a), str(b), "--dataset", str(DATASET), "--mde", mde)
        assert_one_line_error(proc, f"--mde {float(mde):g}", "(0, 1]")


def test_plan_refuses_targets_it_cannot_count_and_takes_labels(tmp_path):
    base, other = golden("full"), variant(golden("full"), "other", 3, 8)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a = write(tmp_path / "a" / "results.jsonl", base)
    b = write(tmp_path / "b" / "results.jsonl", other)
    argv = ["plan", str(a), str(b), "--dataset", str(DATASET)]
    assert_one_line_error(run_cli(*argv, "--mde", "0.02"), "--label")
    argv += ["--label", "base", "--label", "other"]
    for options, culprit in (
        (["--mde", "1e-300"], "--mde 1e-300"),
        (["--mde", "0.02", "--power", "0.01", "--alpha", "0.9"], "0.01"),
        (["--mde", "0.02", "--alpha", "nan"], "--alpha nan"),
    ):
        proc = run_cli(*argv, *options)
        assert proc.returncode == 2
        assert_one_line_error(proc, culprit)
    got = json.loads(run_cli(*argv, "--mde", "0.02", "--json").stdout)
    assert got["cases_per_benchmark"] > 2
    twin = write(tmp_path / "twin.jsonl", base)
    same = ["plan", str(a), str(twin), "--dataset", str(DATASET), "--label", "x", "--label", "y"]
    got = json.loads(run_cli(*same, "--mde", "5e-324", "--json").stdout)
    assert got["cases_per_benchmark"] == 2  # no spread: the fewest cases meet any target


CALLS: dict[str, int] = {}  # how often the noisy judge has seen each text


def noisy_judge(body):
    """A judge whose verdicts vary from call to call (a seeded coin per item and call)."""
    if not is_judge_request(body):
        return default_content(body)
    text = body["messages"][-1]["content"]
    CALLS[text] = CALLS.get(text, 0) + 1
    answer = judged_answer(text)
    items = [line.split("]")[0][1:] for line in text.split("RUBRIC ITEMS:\n")[1].splitlines()]
    decisions = []
    for item in items:  # a third of the items vary from call to call, the rest never
        varies = int(hashlib.md5(item.encode()).hexdigest(), 16) % 3 == 0
        seed = f"{item}|{answer}|{CALLS[text] if varies else 0}"
        matched = hashlib.md5(seed.encode()).hexdigest()[0] < "8"
        decisions.append({"item_id": item, "matched": matched})
    return json.dumps({"decisions": decisions})


def plain_kappa(verdicts):
    """Fleiss' kappa, from the textbook's category proportions and per-item agreement."""
    n, k = len(verdicts), len(verdicts[0])
    counts = [(sum(v), k - sum(v)) for v in verdicts]
    p = [sum(c[j] for c in counts) / (n * k) for j in (0, 1)]
    per_item = [(sum(c * c for c in pair) - k) / (k * (k - 1)) for pair in counts]
    pbar, pe = sum(per_item) / n, sum(x * x for x in p)
    return (pbar - pe) / (1 - pe)


def plain_two_level(scores, samples, seed):
    rng = random.Random(seed)
    names = sorted(scores)
    values = []
    for _ in range(samples):
        means = []
        for b in names:
            cases = scores[b]
            n = len(cases)
            total = 0.0
            for _ in range(n):
                c = rng.randrange(n)
                total += cases[c][rng.randrange(len(cases[c]))]
            means.append(total / n)
        values.append(statistics.fmean(means))
    values.sort()

    def pct(p):
        pos = (len(values) - 1) * p
        lo, hi = math.floor(pos), math.ceil(pos)
        return values[lo] if lo == hi else values[lo] * (1 - (pos - lo)) + values[hi] * (pos - lo)

    return [pct(0.025), pct(0.975)]


def test_judge_passes_measure_the_judge_and_keep_the_reference_rows(
    batch_emulator_factory, tmp_path
):
    CALLS.clear()
    emu = batch_emulator_factory(responder=noisy_judge)
    args = [
        "run",
        "--answer-model",
        "gpt-4o-mini",
        "--judge-model",
        "gpt-4.1",
        "--dataset",
        str(DATASET),
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "--base-url",
        emu.base_url,
        "--poll-interval",
        "0.05",
        "--limit",
        "20",
        "--judge-passes",
        "3",
    ]
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": ""}
    dry = json.loads(run_cli(*args, "--dry-run", "--json").stdout)
    assert dry["stages"]["judges"]["requests"] == 60  # K requests per answer, priced
    assert run_cli(*args, "--max-cost", "0.0001", env=env).returncode == 2
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "judge noise over 3 passes" in proc.stdout  # said at the run's end (#30.13)
    run = tmp_path / "jobs" / "gpt-4o-mini"
    results = {r["case_id"]: r for r in rows_of(run / "results.jsonl")}
    passes = {(r["case_id"], r["pass"]): r for r in rows_of(run / "judge_passes.jsonl")}
    assert len(results) == 20 and Counter(p for _, p in passes) == {1: 20, 2: 20, 3: 20}
    cases = {c["case_id"]: c for c in load_dataset(DATASET).cases}
    # The rows keep pass 1: the raw judge lines whose ids are pass 1's.
    for path in (run / "raw").glob("*.jsonl"):
        for line in map(json.loads, path.read_text().splitlines()):
            cid = line["custom_id"]
            request = parse_id(cid)
            if request.stage == "judges" and request.judge_pass == 1 and line["response"]:
                reply = json.loads(line["response"]["body"]["choices"][0]["message"]["content"])
                case = request.case_id
                verdicts = {d["item_id"]: d["matched"] for d in reply["decisions"]}
                assert {d["item_id"]: d["matched"] for d in results[case]["decisions"]} == verdicts
    for (case, _), row in passes.items():
        matched = {d["item_id"] for d in row["decisions"] if d["matched"]}
        assert row["score"] == plain_reference.score_case(cases[case], matched)[0]
    for case, row in results.items():
        assert row["decisions"] == passes[(case, 1)]["decisions"]
    summary = run_cli(
        "summarize",
        str(run / "results.jsonl"),
        "--dataset",
        str(DATASET),
        "--limit",
        "20",
        "-o",
        str(tmp_path / "s.json"),
    )
    assert summary.returncode == 0
    own = json.loads((run / "results.summary.json").read_text())
    again = json.loads((tmp_path / "s.json").read_text())
    assert {k: v for k, v in own.items() if k not in ("started_at", "finished_at")} == {
        k: v for k, v in again.items() if k not in ("started_at", "finished_at")
    }
    # The noise, recomputed plainly.
    noise = json.loads((run / "judge_noise.json").read_text())
    order = [c for c in cases if c in results]
    verdicts = [
        [passes[(c, p)]["decisions"][i]["matched"] for p in (1, 2, 3)]
        for c in order
        for i in range(len(cases[c]["rubric_items"]))
    ]
    assert noise["passes"] == 3 and noise["cases"] == 20 and noise["items"] == len(verdicts)
    assert noise["item_agreement"] == sum(len(set(v)) == 1 for v in verdicts) / len(verdicts)
    assert 0 < noise["item_agreement"] < 1
    assert noise["fleiss_kappa"] == pytest.approx(plain_kappa(verdicts), abs=1e-12)
    sds = [statistics.stdev([passes[(c, p)]["score"] for p in (1, 2, 3)]) for c in order]
    assert noise["score_sd_mean"] == statistics.fmean(sds)
    grouped: dict = {}
    for c in order:
        grouped.setdefault(cases[c]["benchmark"], []).append(
            [passes[(c, p)]["score"] for p in (1, 2, 3)]
        )
    assert noise["overall_ci95_with_judge"] == plain_two_level(grouped, 10_000, 42)
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    assert "judge noise over 3 passes" in run_cli("status", "gpt-4o-mini", *jobs).stdout
    page = tmp_path / "r.html"
    assert run_cli("report", "gpt-4o-mini", *jobs, "-o", str(page)).returncode == 0
    assert "judge noise over 3 passes" in page.read_text()


def test_plan_prices_the_cases_at_the_pilots_batch_cost_per_case(batch_emulator, tmp_path):
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": ""}
    for model in ("gpt-4o-mini", "gpt-4.1"):
        proc = run_cli(
            "run",
            "--answer-model",
            model,
            "--judge-model",
            "gpt-4.1",
            "--dataset",
            str(DATASET),
            *jobs,
            "--base-url",
            batch_emulator.base_url,
            "--poll-interval",
            "0.05",
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
    got = json.loads(
        run_cli("plan", "gpt-4o-mini", "gpt-4.1", *jobs, "--mde", "0.05", "--json").stdout
    )
    per_case = []
    for model in ("gpt-4o-mini", "gpt-4.1"):
        status = json.loads(run_cli("status", model, *jobs, "--json").stdout)
        per_case.append(status["cost"]["total"]["batch_usd"] / status["cases"]["total"])
    assert got["estimated_usd"] == pytest.approx(got["total_cases"] * sum(per_case), rel=1e-12)
    assert got["estimated_usd"] > 0


def test_one_case_per_benchmark_gives_no_verdict_overall(tmp_path):
    """A comparison over one case per benchmark has no spread to measure: its overall row
    is small-n, and no non-inferiority verdict rests on it."""
    one = list({r["benchmark"]: r for r in golden("full") if "score" in r}.values())
    a = write(tmp_path / "a.jsonl", one)
    b = write(tmp_path / "b.jsonl", variant(one, "other", 2, 4))
    argv = ["compare", str(a), str(b), "--dataset", str(DATASET), "--margin", "0.05"]
    got = json.loads(run_cli(*argv, "--json").stdout)["comparisons"][0]
    assert got["overall"]["small_n"] is True and got["overall"]["non_inferior"] is None
    assert all(v["non_inferior"] is None for v in got["benchmarks"].values())
    text = run_cli(*argv).stdout
    assert "no verdict overall (small n: 10 paired cases)" in text
    assert "benchmarks not shown" not in text and "overall (macro)" in text.split("*")[-1]


def test_plan_refuses_a_pilot_that_does_not_cover_every_benchmark(tmp_path):
    """Two cases of one benchmark cannot speak for the others: one line naming the thin
    benchmarks, rather than an extrapolated plan."""
    base = [r for r in golden("full") if "score" in r]
    first = base[0]["benchmark"]
    thin = [r for r in base if r["benchmark"] == first][:2]
    a = write(tmp_path / "a.jsonl", thin)
    b = write(tmp_path / "b.jsonl", variant(thin, "other", 2, 1))
    argv = ["plan", str(a), str(b), "--dataset", str(DATASET), "--mde", "0.1"]
    benchmarks = {c["benchmark"] for c in load_dataset(DATASET).cases}
    proc = run_cli(*argv, "--allow-partial")
    assert_one_line_error(
        proc, "must cover every benchmark", f"in {len(benchmarks) - 1} of {len(benchmarks)}"
    )


def test_plan_says_when_it_needs_more_cases_than_the_dataset_has(tmp_path):
    base, other = golden("full"), variant(golden("full"), "other", 3, 8)
    a, b = write(tmp_path / "a.jsonl", base), write(tmp_path / "b.jsonl", other)
    argv = ["plan", str(a), str(b), "--dataset", str(DATASET), "--mde", "0.01"]
    need = json.loads(run_cli(*argv, "--json").stdout)["cases_per_benchmark"]
    counts = Counter(c["benchmark"] for c in load_dataset(DATASET).cases)
    assert need > max(counts.values())
    text = run_cli(*argv).stdout
    assert f"it needs {need:,} cases per benchmark, and the dataset has" in text
    assert all(f"{n:,} in {name}" in text for name, n in counts.items())


def _noisy_run(emu, tmp_path) -> tuple[list[str], Path]:
    args = [
        "run",
        "--answer-model",
        "gpt-4o-mini",
        "--judge-model",
        "gpt-4.1",
        "--dataset",
        str(DATASET),
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "--base-url",
        emu.base_url,
        "--poll-interval",
        "0.05",
        "--limit",
        "10",
        "--judge-passes",
        "2",
    ]
    assert run_cli(*args, env={"OPENAI_API_KEY": KEY}).returncode == 0
    return args, tmp_path / "jobs" / "gpt-4o-mini"


def test_judge_noise_is_derived_data_never_shown_against_its_passes(
    batch_emulator_factory, tmp_path
):
    """judge_noise.json is derived from judge_passes.jsonl: a hand-edited interval, a
    wrong-shaped file, a score of 7 in the passes, a cut passes file — each is one line,
    never a traceback, never shown as fact, never overwritten with less."""
    emu = batch_emulator_factory(responder=noisy_judge)
    args, run = _noisy_run(emu, tmp_path)
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    noise_path, passes_path = run / "judge_noise.json", run / "judge_passes.jsonl"
    good = noise_path.read_text()
    assert "judge noise over 2 passes" in run_cli("status", run.name, *jobs).stdout
    # A hand-edited, reversed interval is not shown as fact.
    edited = json.loads(good) | {"overall_ci95_with_judge": [0.9, 0.1]}
    noise_path.write_text(json.dumps(edited))
    text = run_cli("status", run.name, *jobs).stdout
    assert "judge noise not shown" in text and "0.900" not in text
    # A wrong-shaped file: status, report and compare each carry on, no traceback.
    noise_path.write_text('{"passes": "two"}')
    for argv in (["status", run.name], ["report", run.name, "-o", str(tmp_path / "r.html")]):
        proc = run_cli(*argv, *jobs)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    noise_path.write_text(good)
    # A score of 7 in the passes: named by file and line when the noise is derived again.
    lines = passes_path.read_text().splitlines()
    bad = json.loads(lines[3]) | {"score": 7}
    passes_path.write_text("\n".join([*lines[:3], json.dumps(bad), *lines[4:]]) + "\n")
    assert "judge noise not shown" in run_cli("status", run.name, *jobs).stdout
    proc = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert_one_line_error(proc, "judge_passes.jsonl: line 4", "score 7")
    assert noise_path.read_text() == good
    # A passes file cut short: refused, and the good noise left as it was.
    passes_path.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    proc = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert_one_line_error(proc, "judge_passes.jsonl holds", f"collected {len(lines)}")
    assert noise_path.read_text() == good
