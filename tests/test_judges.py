"""A judge on every service (#50): the same judge messages through each service's batch
path, JSON asked the way that service asks it, replies read by the one rule, and the
rows a plain re-enactment of the protocol gives.

Each test runs an OpenAI answer model (the emulator's simulated one) and the rig's own
model as the judge, through the rig's official SDK against the emulator's face. The
expected judge body per service is written here from the issue's rules and the spec's
judge messages (reference-behaviour.md §2), sharing no code with batchbench; the rows
from :func:`support.reference.score_case` over the decisions the responder gave.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import signal

import pytest
from support import reference
from support.cli import assert_one_line_error, run_cli
from support.providers import BEDROCK_MODEL, RIGS, Rig
from support.runs import assert_no_duplicates, env, normalised, rows_of, run_args

from batchbench.bench.dataset import load_dataset
from batchbench.emulator import SystemClock

JUDGES = [rig for rig in RIGS.values() if rig.provider != "openai"]

JUDGE_SYSTEM = "\n".join(
    [
        "You are grading a clinical answer against independent rubric items.",
        "",
        "For every rubric item, decide whether the ANSWER explicitly states or clearly entails it.",
        "",
        "Rules:",
        "1. Judge only information present in the ANSWER. Do not infer omitted content.",
        "2. Accept clinically equivalent wording; exact phrase matching is not required.",
        "3. A partially stated criterion is false when a clinically essential component is"
        " missing.",
        "4. For a harmful, inappropriate, or negative-point item, true means the ANSWER endorses,"
        " recommends, or performs that action. Merely mentioning the action to reject or warn"
        " against it is false.",
        "5. Judge each item independently.",
        "6. Return exactly one decision for every supplied item_id and no other item_ids.",
        "",
        "Return JSON only:",
        '{"decisions":[{"item_id":"item_0","matched":true},{"item_id":"item_1","matched":false}]}',
    ]
)  # the spec's text (reference-behaviour.md §2), copied
# The decisions' shape the system message asks for, as a JSON Schema (Claude's structured
# output takes one: additionalProperties false on every object).
DECISIONS = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"item_id": {"type": "string"}, "matched": {"type": "boolean"}},
                "required": ["item_id", "matched"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["decisions"],
    "additionalProperties": False,
}


def _claude(user: str, *, first: dict, last: dict, api: bool = False) -> dict:
    """Claude's judge body: on the Messages API (``api``) its structured output and no
    temperature (its current version, which the anthropic SDK sends, has none); on a
    cloud (Bedrock's, Vertex's version) the judges' temperature and the message as is."""
    body = {
        **first,
        "max_tokens": 5000,
        "messages": [{"role": "user", "content": user}],
        "system": JUDGE_SYSTEM,
    }
    if api:
        body["output_config"] = {"format": {"type": "json_schema", "schema": DECISIONS}}
    else:
        body["temperature"] = 0
    return {**body, **last}


def _gemini(user: str) -> dict:
    return {
        "contents": [
            {"role": "user", "parts": [{"text": JUDGE_SYSTEM}]},
            {"role": "user", "parts": [{"text": user}]},
        ],
        "generation_config": {
            "temperature": 0,
            "max_output_tokens": 5000,
            "response_mime_type": "application/json",
        },
        "model": "models/gemini-3.1-pro-preview",
    }


def _chat(model: str, user: str) -> list[dict]:
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


# What each face hands the responder for a judge request (as it hands it an answer's:
# support/providers.py), by the rules for a judge on that service.
EXPECTED = {
    "anthropic": lambda u: _claude(u, first={"model": "claude-opus-5"}, last={}, api=True),
    "bedrock": lambda u: _claude(
        u, first={"anthropic_version": "bedrock-2023-05-31"}, last={"modelId": BEDROCK_MODEL}
    ),
    "vertex-claude": lambda u: _claude(
        u, first={"anthropic_version": "vertex-2023-10-16"}, last={"model": "claude-opus-5"}
    ),
    "gemini": _gemini,
    "vertex-gemini": _gemini,
    "fireworks": lambda u: {
        "model": "accounts/fireworks/models/glm-5p3",
        "messages": _chat("", u),
        "response_format": {"type": "json_object"},
        "max_tokens": 5000,
        "temperature": 0,
        "reasoning_effort": "none",
    },
    "mistral": lambda u: {
        "model": "mistral-medium-latest",
        "messages": _chat("", u),
        "response_format": {"type": "json_object"},
        "max_tokens": 5000,
        "temperature": 0,
    },
    "openrouter": lambda u: {
        "model": "anthropic/claude-opus-5",
        "messages": _chat("", u),
        "response_format": {"type": "json_object"},
        "max_completion_tokens": 5000,
        "temperature": 0,
    },
    "together": lambda u: {
        "model": "openai/gpt-oss-120b",
        "messages": _chat("", u),
        "response_format": {"type": "json_object"},
        "max_completion_tokens": 5000,
        "temperature": 0,
    },
    "xai": lambda u: {
        "model": "grok-4.3",
        "messages": _chat("", u),
        "response_format": {"type": "json_object"},
        "max_completion_tokens": 5000,
        "temperature": 0,
    },
    "groq": lambda u: {
        "model": "openai/gpt-oss-120b",
        "messages": _chat("", u),
        "response_format": {"type": "json_object"},
        "max_completion_tokens": 5000,
        "temperature": 0,
    },
    "azure": lambda u: {
        "model": "ans-model",
        "messages": _chat("", u),
        "response_format": {"type": "json_object"},
        "max_completion_tokens": 5000,
        "temperature": 0,
    },
}


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _matched(item_id: str) -> bool:
    """The responder's judge: an item is matched when md5(item_id) starts with 0-7."""
    return hashlib.md5(item_id.encode()).hexdigest()[0] < "8"


def judging_responder(seen: list[dict]):
    """Answers any answer request; to a judge request (the spec's judge user message in
    it), the decisions of :func:`_matched` for its rubric lines, recorded."""

    def responder(given: dict):
        user = next((s for s in _strings(given) if s.startswith("CLINICAL PROMPT:\n")), None)
        if user is None:
            return "an answer"
        seen.append(given)
        ids = re.findall(r"^\[([^\]]+)\] points=", user, re.M)
        return json.dumps({"decisions": [{"item_id": i, "matched": _matched(i)} for i in ids]})

    return responder


def _args(rig: Rig, emu, tmp_path, fixture_dir, *extra: str, cap: int = 40) -> list[str]:
    argv = rig.args(emu, tmp_path, fixture_dir, *extra, model="ans-model", cap=cap)
    argv[argv.index("--judge-model") + 1] = rig.model
    return argv


@pytest.mark.parametrize("rig", JUDGES, ids=lambda r: r.provider)
def test_a_judge_on_every_service_is_sent_the_judge_messages_and_scores_by_the_rule(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    seen: list[dict] = []
    emu = batch_emulator_factory(responder=judging_responder(seen))
    proc = run_cli(*_args(rig, emu, tmp_path, fixture_dir, "--limit", "6"), env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = {c["case_id"]: c for c in load_dataset(fixture_dir).cases[:6]}
    assert len(seen) == 6  # one judge request per answer
    for given in seen:
        user = next(s for s in _strings(given) if s.startswith("CLINICAL PROMPT:\n"))
        want = EXPECTED[rig.provider](user)
        assert given == want
        assert list(given) == list(want) or not rig.ordered
    rows = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    for row in rows:
        case = cases[row["case_id"]]
        matched = {i["item_id"] for i in case["rubric_items"] if _matched(i["item_id"])}
        assert (row["score"], row["score_components"]) == reference.score_case(case, matched)
        temperature = None if rig.provider == "anthropic" else 0  # what was sent
        assert row["judge_model"] == rig.model and row["judge_temperature"] == temperature
    # named as what it is, when it is not OpenAI's model (Azure's judges are)
    summary = json.loads((tmp_path / "jobs" / "ans-model" / "results.summary.json").read_text())
    if rig.provider == "azure":
        assert "judge_service" not in summary and "reference's" not in proc.stdout
    else:
        assert "not by the reference's OpenAI judge" in proc.stdout
        assert summary["judge_service"] == rig.provider
    assert_no_duplicates(emu)


@pytest.mark.parametrize("rig", JUDGES, ids=lambda r: r.provider)
def test_a_sigkill_at_a_judges_create_pays_each_judge_request_once(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    """Killed just after the judges' billable create returned (the second create: one
    answers batch, then one judges batch), the resume adopts it and ends with an
    uninterrupted run's rows."""
    good = batch_emulator_factory()
    argv = _args(rig, good, tmp_path / "ref", fixture_dir, "--limit", "6")
    assert run_cli(*argv, env=rig.env(good)).returncode == 0
    expected = normalised(tmp_path / "ref" / "jobs" / "ans-model")
    real_time = SystemClock()
    emu = batch_emulator_factory(latency=0.005, clock=real_time)
    argv = _args(rig, emu, tmp_path, fixture_dir, "--limit", "6", "--poll-interval", "0.005")
    env = {**rig.env(emu), "BATCHBENCH_FAILPOINT": "created:2"}
    proc = run_cli(*argv, env=env, real=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    proc = run_cli(*argv, env=rig.env(emu), clock=real_time)
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "jobs" / "ans-model") == expected
    assert_no_duplicates(emu)


def test_a_judge_the_service_does_not_have_is_one_line_before_anything_is_paid(
    batch_emulator_factory, tmp_path, fixture_dir
):
    rig = RIGS["anthropic"]
    emu = batch_emulator_factory()
    argv = _args(rig, emu, tmp_path, fixture_dir, "--limit", "2")
    argv[argv.index("--judge-model") + 1] = "claude-opus-55"
    assert_one_line_error(run_cli(*argv, env=rig.env(emu)), "claude-opus-55")
    assert emu.ledger()["batches"] == []


def _sim_score(case: dict, answer: str, below: str) -> tuple:
    """The emulator's simulated judge, as its documentation writes it: an item matched when
    the first hex digit of md5(item_id|answer) is below ``below`` (8; 5 for a strict
    judge's name, b for a lenient one's); scored by the protocol's plain rule."""
    matched = {
        i["item_id"]
        for i in case["rubric_items"]
        if hashlib.md5(f"{i['item_id']}|{answer}".encode()).hexdigest()[0] < below
    }
    return reference.score_case(case, matched)


def test_a_panel_judges_every_answer_with_each_judge_and_buys_the_answers_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Three judges on three services' worth of names (OpenAI, a strict OpenAI one,
    Claude): one run per judge, the answers bought once (by the first) and judged by
    each; each judge's rows its own and the rule's; the strict judge scores lower."""
    rig = RIGS["anthropic"]
    emu = batch_emulator_factory()
    argv = _args(rig, emu, tmp_path, fixture_dir, "--limit", "8")
    at = argv.index("--judge-model")
    argv[at + 1 : at + 2] = ["judge-model", "--judge-model", "sim-judge-strict"]
    argv += ["--judge-model", "opus-5"]
    proc = run_cli(*argv, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    jobs = tmp_path / "jobs"
    runs = {"judge-model": "ans-model", "sim-judge-strict": "ans-model--sim-judge-strict"}
    runs["opus-5"] = "ans-model--opus-5"
    cases = {c["case_id"]: c for c in load_dataset(fixture_dir).cases[:8]}
    first = {r["case_id"]: r for r in rows_of(jobs / "ans-model" / "results.jsonl")}
    means = {}
    for judge, run in runs.items():
        rows = {r["case_id"]: r for r in rows_of(jobs / run / "results.jsonl")}
        assert set(rows) == set(cases)
        for cid, row in rows.items():
            assert row["answer"] == first[cid]["answer"] and row["judge_model"] == judge
            if judge != "opus-5":
                below = "5" if "strict" in judge else "8"
                got = (row["score"], row["score_components"])
                assert got == _sim_score(cases[cid], row["answer"], below), (judge, cid)
        summary = json.loads((jobs / run / "results.summary.json").read_text())
        means[judge] = summary["overall_macro_mean"]
    assert means["sim-judge-strict"] != means["judge-model"]  # the judges disagree
    # the answers bought once, by the first judge's run; each judge's requests its own
    ids = [cid for b in emu.ledger()["batches"] for cid in b["custom_ids"]]
    assert sum("-a1-" in cid for cid in ids) == 8  # (a: answers, j: judges; 1: attempt)
    assert sum("-j1-" in cid for cid in ids) == 3 * 8
    assert_no_duplicates(emu)
    status = json.loads(
        run_cli("status", "ans-model--opus-5", "--jobs-dir", str(jobs), "--json").stdout
    )
    assert status["stages"]["answers"]["done"] == 8 and status["judge_service"] == "anthropic"
    page = tmp_path / "panel.html"
    made = run_cli("report", *runs.values(), "--jobs-dir", str(jobs), "-o", str(page))
    assert made.returncode == 0, made.stderr
    assert all(f"judged by {judge})" in page.read_text() for judge in runs)
    # #63.5: the page says its columns are judges, not models, and what a difference is
    html = page.read_text()
    judges = ", ".join(f"{judge} (run {run})" for judge, run in runs.items())
    caveat = "where the judges disagree, not a better model"
    assert f"<dt>judges</dt><dd>{judges}: the same answers judged by other judges" in html
    assert "<dt>model</dt><dd>ans-model</dd>" in html and "<dt>models</dt>" not in html
    said = f"the same answers judged by other judges: each difference on this page is {caveat}"
    assert f"<p class='caveat'>{said}.</p>" in html


def test_compare_ranks_the_models_under_each_judge_and_says_when_the_ranking_changes(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Two models, a panel of two judges: `compare` of the two first runs ranks the models
    under each judge (the order the emulator's documented judges give, recomputed here)
    and says whether the order changes with the judge."""
    emu = batch_emulator_factory()
    rig = RIGS["openai"]
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "10", model="sim-a")
    argv += ["--answer-model", "sim-b", "--judge-model", "sim-judge-lenient", "--run", "day"]
    proc = run_cli(*argv, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    jobs = tmp_path / "jobs"
    cases = load_dataset(fixture_dir).cases[:10]
    order = {}
    for judge, below, suffix in (
        ("judge-model", "8", ""),
        ("sim-judge-lenient", "b", "--sim-judge-lenient"),
    ):
        means = {}
        for model in ("sim-a", "sim-b"):
            rows = {
                r["case_id"]: r for r in rows_of(jobs / f"day-{model}{suffix}" / "results.jsonl")
            }
            by_bench: dict[str, list[float]] = {}
            for case in cases:
                score, _ = _sim_score(case, rows[case["case_id"]]["answer"], below)
                by_bench.setdefault(case["benchmark"], []).append(score)
            means[model] = sum(sum(v) / len(v) for v in by_bench.values()) / len(by_bench)
        order[judge] = sorted(means, key=lambda m: -means[m])
    # #63.2: the run's own leaderboards, one per judge (a lenient judge's runs never
    # ranked with the first judge's), each with a `compare` that works
    for judge, suffix in (("judge-model", ""), ("sim-judge-lenient", "--sim-judge-lenient")):
        board = proc.stdout.split(f"leaderboard under judge {judge} ")[1].split("\n\n")[0]
        ranked = [line.split()[1] for line in board.splitlines()[2:] if line[:1].isdigit()]
        assert ranked == [f"day-{m}{suffix}" for m in order[judge]], board
        [hint] = [x for x in board.splitlines() if x.startswith("paired differences: ")]
        asked = hint.removeprefix("paired differences: batchbench ").split()
        assert sorted(asked[1:]) == sorted(ranked)
        assert run_cli(*asked, "--jobs-dir", str(jobs)).returncode == 0
    out = run_cli("compare", "day-sim-a", "day-sim-b", "--jobs-dir", str(jobs))
    assert out.returncode == 0, out.stderr
    text = out.stdout.split("under each judge of the panel")[1]
    for judge, models in order.items():
        line = next(x for x in text.splitlines() if x.strip().startswith(judge + " "))
        assert line.index(models[0]) < line.index(models[1]), line
    changes = order["judge-model"] != order["sim-judge-lenient"]
    assert ("the ranking changes with the judge" in text) == changes
    assert ("the same ranking under every judge" in text) != changes
    data = json.loads(
        run_cli("compare", "day-sim-a", "day-sim-b", "--jobs-dir", str(jobs), "--json").stdout
    )
    assert [p["judge"] for p in data["panel"]] == ["judge-model", "sim-judge-lenient"]


def test_a_panel_killed_at_a_create_resumes_and_pays_every_request_once(
    batch_emulator_factory, tmp_path, fixture_dir
):
    rig = RIGS["anthropic"]
    good = batch_emulator_factory()

    def panel(emu, where, *extra):  # judged on OpenAI first, then by Claude
        argv = rig.args(emu, where, fixture_dir, "--limit", "6", *extra, model="ans-model")
        return [*argv, "--judge-model", "opus-5"]

    assert run_cli(*panel(good, tmp_path / "ref"), env=rig.env(good)).returncode == 0
    real_time = SystemClock()
    emu = batch_emulator_factory(latency=0.005, clock=real_time)
    argv = panel(emu, tmp_path, "--poll-interval", "0.005")
    for kill in ("created:2", "created:1"):  # the first judge's create, then the second's
        proc = run_cli(*argv, env={**rig.env(emu), "BATCHBENCH_FAILPOINT": kill}, real=True)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    proc = run_cli(*argv, env=rig.env(emu), clock=real_time)
    assert proc.returncode == 0, proc.stderr
    for run in ("ans-model", "ans-model--opus-5"):
        assert normalised(tmp_path / "jobs" / run) == normalised(tmp_path / "ref" / "jobs" / run)
    assert_no_duplicates(emu)


def _kappa(pairs):
    """Cohen's κ of (a, b) verdict pairs, from its definition."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    pa, pb = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return (observed - expected) / (1 - expected)


def test_the_physicians_pick_the_judge_that_agrees_best(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """A panel of the default and a strict simulated judge; two physicians who mostly
    agree with the default judge: `calibrate` names it, with each judge's κ and the
    physicians' own, and McNemar's counts and p as their definitions give them."""
    from support.labelling import flip, sheet, write_sheet

    emu = batch_emulator_factory()
    rig = RIGS["openai"]
    argv = [
        *rig.args(emu, tmp_path, fixture_dir, model="ans-model"),
        "--judge-model",
        "sim-judge-strict",
    ]
    assert run_cli(*argv, env=rig.env(emu)).returncode == 0
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    note, rows = sheet(jobs, tmp_path / "sheet.csv", cases=30)
    verdicts = {}
    for run in ("ans-model", "ans-model--sim-judge-strict"):
        for r in rows_of(tmp_path / "jobs" / run / "results.jsonl"):
            for d in r.get("decisions") or []:
                verdicts[(run, r["case_id"], d["item_id"])] = d["matched"]
    labels = []
    for rater in ("dr_a", "dr_b"):
        for row in rows:
            met = verdicts[("ans-model", row["case_id"], row["item_id"])]
            met = met != flip(rater, row["case_id"], row["item_id"], 0.1)
            labels.append({**row, "rater": rater, "verdict": "1" if met else "0"})
    write_sheet(tmp_path / "labels.csv", note, labels)
    argv = ["calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), *jobs]
    got = json.loads(run_cli(*argv, "--json").stdout)["panel"]
    truth = [(lb["case_id"], lb["item_id"], lb["verdict"] == "1") for lb in labels]
    runs = {"judge-model": "ans-model", "sim-judge-strict": "ans-model--sim-judge-strict"}
    for found in got["judges"]:
        pairs = [(verdicts[(runs[found["judge"]], c, i)], t) for c, i, t in truth]
        assert found["verdicts"] == len(pairs)
        assert found["kappa"] == pytest.approx(_kappa(pairs), abs=1e-12)
        low, high = found["kappa_ci95"]
        assert low <= found["kappa"] <= high
    assert got["best"] == "judge-model"
    right = {j: [verdicts[(r, c, i)] == t for c, i, t in truth] for j, r in runs.items()}
    b = sum(x and not y for x, y in zip(right["judge-model"], right["sim-judge-strict"]))
    c = sum(y and not x for x, y in zip(right["judge-model"], right["sim-judge-strict"]))
    p = min(1.0, 2 * sum(math.comb(b + c, k) for k in range(min(b, c) + 1)) / 2 ** (b + c))
    paired = got["paired"]
    assert (paired["best_only"], paired["other_only"]) == (b, c)
    assert paired["p_value"] == pytest.approx(p) and paired["larger_than_noise"] == (p < 0.05)
    by_item = {}
    for lb in labels:
        by_item.setdefault((lb["case_id"], lb["item_id"]), []).append(lb["verdict"] == "1")
    between = [tuple(v) for v in by_item.values()]
    assert got["ceiling"]["kappa"] == pytest.approx(_kappa(between), abs=1e-12)
    text = run_cli(*argv).stdout
    assert "agrees best: judge-model" in text and "physicians among themselves" in text
    # #63.3: which judge's number to report, and a judge above the physicians' own κ
    assert "report: the score line above, judge-model's corrected score" in " ".join(text.split())
    above = [j["judge"] for j in got["judges"] if j["kappa"] > got["ceiling"]["kappa"]]
    said = "agrees with the physicians more than they agree among themselves"
    assert (f"{above[0]} {said}" in " ".join(text.split())) if len(above) == 1 else above
    # physicians who side with the strict judge: the line names it, and its run
    siding = []
    for rater in ("dr_a", "dr_b"):
        for row in rows:
            met = verdicts[("ans-model--sim-judge-strict", row["case_id"], row["item_id"])]
            met = met != flip(rater, row["case_id"], row["item_id"], 0.05)
            siding.append({**row, "rater": rater, "verdict": "1" if met else "0"})
    write_sheet(tmp_path / "siding.csv", note, siding)
    other = ["calibrate", "ans-model", "--labels", str(tmp_path / "siding.csv"), *jobs]
    assert json.loads(run_cli(*other, "--json").stdout)["panel"]["best"] == "sim-judge-strict"
    flat = " ".join(run_cli(*other).stdout.split())
    assert "report: the score line above is judge-model's (this run's judge);" in flat
    assert "sim-judge-strict agrees best with the physicians" in flat
    assert "run ans-model--sim-judge-strict)" in flat
    # the report with the labels: the panel's table too, each judge's κ as calibrate's
    page = tmp_path / "labelled.html"
    made = run_cli(
        "report", "ans-model", "--labels", str(tmp_path / "siding.csv"), "-o", str(page), *jobs
    )
    assert made.returncode == 0, made.stderr
    html = page.read_text()
    assert "id='panel-ans-model'" in html
    for found in json.loads(run_cli(*other, "--json").stdout)["panel"]["judges"]:
        assert (
            f"<td>{found['judge']}</td><td>{found['verdicts']}</td><td>{found['kappa']:.3f}</td>"
            in html
        )
    # calibrating the second judge's run: its labels are the first run's sheet, said so
    proc = run_cli(*other[:1], "ans-model--sim-judge-strict", *other[2:])
    assert_one_line_error(proc, "no verdicts on run", "calibrate ans-model --labels")
    # the sheet of a panel's run is blind, and says so
    out = run_cli(
        "calibrate", "sheet", "ans-model", "--cases", "10", "-o", str(tmp_path / "s.csv"), *jobs
    )
    assert "shows none of the judges' verdicts" in out.stdout
    # how many labels tell the two judges apart by 0.05: Connor's formula, by hand
    runs_ab = ["ans-model", "ans-model--sim-judge-strict"]
    argv = ["plan", *runs_ab, "--labels", str(tmp_path / "labels.csv"), "--mde", "0.05", *jobs]
    planned = json.loads(run_cli(*argv, "--json").stdout)
    psi = (b + c) / len(truth)
    z_a, z_b = 1.959963984540054, 0.8416212335729143
    n = math.ceil((z_a * math.sqrt(psi) + z_b * math.sqrt(psi - 0.05**2)) ** 2 / 0.05**2)
    assert planned["discordant"] == pytest.approx(psi) and planned["verdicts_needed"] == n
    per_case = len(truth) / len({lb["case_id"] for lb in labels})
    assert planned["cases_needed"] == math.ceil(n / per_case)


def test_a_panel_dry_run_prices_each_judge_and_a_reordered_panel_is_refused(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory()
    rig = RIGS["openai"]
    argv = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "4", model="ans-model")]
    argv += ["--judge-model", "sim-judge-strict"]
    plans = json.loads(run_cli(*argv, "--dry-run", "--json", env=rig.env(emu)).stdout)
    assert [sorted(p["stages"]) for p in plans] == [["answers", "judges"], ["judges"]]
    assert [p["stages"]["judges"]["model"] for p in plans] == ["judge-model", "sim-judge-strict"]
    assert run_cli(*argv, env=rig.env(emu)).returncode == 0
    made = len(emu.ledger()["batches"])
    # the same panel, its judges the other way round: the runs hold other judges
    at = argv.index("judge-model")
    swapped = [*argv[:at], "sim-judge-strict", *argv[at + 1 : -1], "judge-model"]
    assert_one_line_error(run_cli(*swapped, env=rig.env(emu)), "judge_model")
    assert len(emu.ledger()["batches"]) == made


def test_a_panels_first_run_is_not_moved_or_removed_from_under_its_judges(
    batch_emulator, tmp_path, fixture_dir
):
    """#64.2: removing or moving the first judge's run broke the panel's other runs (they
    judge its answers) with no hint. Alone, it is refused naming them; the panel named
    whole is removed whole; moved with its judges first, it ends up together."""
    argv = run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "4")
    argv += ["--judge-model", "sim-judge-strict"]
    assert run_cli(*argv, env=env()).returncode == 0
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    second = "ans-model--sim-judge-strict"
    refused = run_cli("remove", "ans-model", *jobs)
    assert_one_line_error(refused, "first of a judge panel", second, f"remove ans-model {second}")
    assert (tmp_path / "jobs" / "ans-model").is_dir()
    away = ["--to", str(tmp_path / "elsewhere")]
    refused = run_cli("move", "ans-model", *jobs, *away)
    assert_one_line_error(refused, "first of a judge panel", f"move '{second}' first")
    assert run_cli("move", second, *jobs, *away).returncode == 0
    assert run_cli("move", "ans-model", *jobs, *away).returncode == 0
    there = ["--jobs-dir", str(tmp_path / "elsewhere")]
    gone = run_cli("remove", "ans-model", second, *there)
    assert gone.returncode == 0, gone.stderr
    assert not (tmp_path / "elsewhere" / "ans-model").exists()
    assert not (tmp_path / "elsewhere" / second).exists()
