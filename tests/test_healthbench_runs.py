"""#65: HealthBench through every service's batch API, scored as simple-evals scores it.

The witness is not batchbench: a scripted model (the emulator's responder) that answers
each conversation and grades each grader request by a rule of this file's own, and
records what every service was sent; the expectations — each grader message, each
example's score, each metric's mean and ``n_samples`` — are rebuilt from the spec's
written rules in plain Python (``support/healthbench_rules.py``). The emulator's ledger
of executed lines says nothing was bought twice, kills included."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from support import healthbench_rules as rules
from support.cli import assert_one_line_error, run_cli
from support.providers import RIGS
from support.runs import assert_no_duplicates, env, rows_of, run_args

from batchbench._failpoints import Crash

FILE = rules.FILE
LINES = rules.lines()
ITEMS = sum(len(line["rubrics"]) for line in LINES)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _turns(value: Any) -> Iterator[tuple[str, str]]:
    """Every ``{"role": …}`` message in a request as (role, its text), in order."""
    if isinstance(value, dict):
        if isinstance(value.get("role"), str):
            yield value["role"], "".join(_strings(value.get("content", value.get("parts"))))
            return
        for v in value.values():
            yield from _turns(v)
    elif isinstance(value, list):
        for v in value:
            yield from _turns(v)


def _met(message: str) -> bool:
    """This file's grader: an item is met when the message's SHA-256 starts below 0x96."""
    return hashlib.sha256(message.encode()).digest()[0] < 0x96


def _verdicts(line: dict, answer: str) -> list[bool]:
    """What this file's grader says of each item of ``line`` about ``answer``."""
    return [_met(rules.grader_message(line, answer, item)) for item in line["rubrics"]]


def _answer(n: str, model: str = "") -> str:
    return f"Answer {n}: rest, fluids, and see a clinician if it lasts.{model}"


class Scripted:
    """The responder: grades grader requests by :func:`_met` (fenced JSON, as simple-evals
    asks), answers each conversation with :func:`_answer`; records what it was sent.
    ``invalid``: grader messages containing this text get a reply with no verdict."""

    def __init__(self, invalid: str | None = None) -> None:
        self.graders: list[str] = []
        self.answers: list[Any] = []
        self.invalid = invalid

    def __call__(self, given: dict[str, Any]) -> str:
        texts = list(_strings(given))
        grader = next((t for t in texts if "\n# Rubric item\n" in t), None)
        if grader is not None:
            self.graders.append(grader)
            if self.invalid is not None and self.invalid in grader:
                return "I cannot grade this."
            reply = {"explanation": "scripted", "criteria_met": _met(grader)}
            return "```json\n" + json.dumps(reply, indent=2) + "\n```"
        self.answers.append(given)
        found = re.search(r"Synthetic question (\d+)", " ".join(texts))
        assert found, texts
        return _answer(found.group(1), self.model_in(given))

    def model_in(self, given: dict[str, Any]) -> str:  # one answer for every model
        return ""


def _question(line: dict) -> str:
    found = re.search(
        r"Synthetic question (\d+)",
        line["prompt"][0]["content"] + " ".join(m["content"] for m in line["prompt"]),
    )
    assert found
    return found.group(1)


def _expected_messages() -> Counter[str]:
    return Counter(
        rules.grader_message(line, _answer(_question(line)), item)
        for line in LINES
        for item in line["rubrics"]
    )


def _check_rows_and_summary(run_dir, judge_model: str) -> None:
    """Each row and the summary against the plain rules over the scripted verdicts."""
    rows = {r["prompt_id"]: r for r in rows_of(run_dir / "results.jsonl")}
    assert set(rows) == {line["prompt_id"] for line in LINES}
    graded = []
    for line in LINES:
        row, answer = rows[line["prompt_id"]], _answer(_question(line))
        met = _verdicts(line, answer)
        graded.append((line, met))
        assert row["score"] == rules.score(line["rubrics"], met)
        assert [i["criteria_met"] for i in row["rubric_items"]] == met
        assert [(i["criterion"], i["points"], i["tags"]) for i in row["rubric_items"]] == [
            (r["criterion"], r["points"], r["tags"]) for r in line["rubrics"]
        ]
        assert row["completion"] == [{"role": "assistant", "content": answer}]
        assert (
            row["completion_id"]
            == hashlib.sha256((line["prompt_id"] + answer).encode()).hexdigest()
        )
        assert row["judge_model"] == judge_model
    summary = json.loads((run_dir / "results.summary.json").read_text())
    expected = rules.metric_values(graded)
    metrics = summary["metrics"]
    assert summary["score"] == pytest.approx(
        rules.clipped_mean(expected["overall_score"]), abs=1e-12
    )
    for name, values in expected.items():
        assert metrics[name] == pytest.approx(rules.clipped_mean(values), abs=1e-12), name
        assert metrics[f"{name}:n_samples"] == len(values), name
        assert metrics[f"{name}:bootstrap_std"] >= 0
    assert {k for k in metrics if not k.endswith((":n_samples", ":bootstrap_std"))} == (
        set(expected) | {"score"}
    ) - {"score"}
    assert (summary["graded"], summary["errors"], summary["examples"]) == (8, 0, 8)


@pytest.mark.parametrize("rig", list(RIGS.values()), ids=list(RIGS))
def test_every_service_answers_each_conversation_and_the_grader_each_item_once(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    """Answers on each of the thirteen services (the conversation, turn by turn, behind
    the sampler's system message), the grader on OpenAI's: every grader message is the
    spec's string for its item, each sent once; rows and summary are the plain rules'."""
    scripted = Scripted()
    emu = batch_emulator_factory(models=[rig.resolved], responder=scripted)
    args = rig.args(emu, tmp_path, fixture_dir, "--dataset", str(FILE))
    args[args.index("judge-model")] = "gpt-4.1-2025-04-14"
    proc = run_cli(*args, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert Counter(scripted.graders) == _expected_messages()  # each item's, each once
    assert_no_duplicates(emu)
    assert len(scripted.answers) == len(LINES)
    for line in LINES:  # the conversation, in order, on every service's wire
        first = next(m["content"] for m in line["prompt"] if m["role"] != "system")
        [sent] = [a for a in scripted.answers if first in set(_strings(a))]
        strings = list(_strings(sent))
        assert any(rules.SYSTEM in s for s in strings)
        wanted = [(m["role"], m["content"]) for m in line["prompt"] if m["role"] != "system"]
        turns = [("assistant" if r == "model" else r, t) for r, t in _turns(sent)]
        assert turns[-len(wanted) :] == wanted
        for m in line["prompt"]:
            if m["role"] == "system":  # a conversation's own system message: sent too
                assert any(m["content"] in s for s in strings)
    _check_rows_and_summary(tmp_path / "jobs" / rig.name(), "gpt-4.1-2025-04-14")


@pytest.mark.parametrize("judge", ["anthropic", "gemini", "bedrock"])
def test_the_grader_on_another_service_grades_each_item_as_simple_evals_asks(
    judge, batch_emulator_factory, tmp_path, fixture_dir
):
    """The grader is any service's model (--judge-model): each item's message, once."""
    rig = RIGS[judge]
    scripted = Scripted()
    emu = batch_emulator_factory(models=[rig.resolved], responder=scripted)
    args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE))
    args[args.index("judge-model")] = rig.model
    proc = run_cli(*args, env={**rig.env(emu), **env()})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert Counter(scripted.graders) == _expected_messages()
    assert_no_duplicates(emu)
    _check_rows_and_summary(tmp_path / "jobs" / "ans-model", rig.model)


def test_an_item_never_graded_is_asked_max_attempts_times_then_failed_and_shown(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Where simple-evals asks for ever, batchbench asks up to --max-attempts: the item is
    then failed, its example an error row showing every item, and the summary counts it."""
    line = LINES[2]
    criterion = line["rubrics"][1]["criterion"]
    scripted = Scripted(invalid=criterion)
    emu = batch_emulator_factory(responder=scripted)
    args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE), "--max-attempts", "2")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert sum(criterion in g for g in scripted.graders) == 2
    assert_no_duplicates(emu)
    run_dir = tmp_path / "jobs" / "ans-model"
    [row] = [r for r in rows_of(run_dir / "results.jsonl") if r["prompt_id"] == line["prompt_id"]]
    assert "score" not in row and "1 of 5 rubric items not graded (item_1:" in row["error"]
    assert [i["criteria_met"] is None for i in row["rubric_items"]] == [
        False,
        True,
        False,
        False,
        False,
    ]
    summary = json.loads((run_dir / "results.summary.json").read_text())
    assert (summary["graded"], summary["errors"]) == (7, 1)
    assert summary["metrics"]["overall_score:n_samples"] == 6  # 7 graded, one unscorable
    status = json.loads(
        run_cli("status", "ans-model", "--jobs-dir", str(tmp_path / "jobs"), "--json").stdout
    )
    assert status["cases"]["errors"] == 1
    # The same command again, the grader now answering: only the item that failed is
    # asked again (the example's other items and answer are kept), and its row replaces
    # the error row in the summary (the last row counts).
    scripted.invalid = None
    asked = len(scripted.graders)
    again = run_cli(*args, env=env())
    assert again.returncode == 0, again.stdout + again.stderr
    assert scripted.graders[asked:] == [
        rules.grader_message(line, _answer(_question(line)), line["rubrics"][1])
    ]
    assert_no_duplicates(emu)
    summary = json.loads((run_dir / "results.summary.json").read_text())
    assert (summary["graded"], summary["errors"]) == (8, 0)
    _check_rows_and_summary(run_dir, "judge-model")


@pytest.mark.parametrize(
    "failpoint",
    [
        "planned:3",
        "uploaded:4",
        "created:5",
        "rows_half_written:2",
        "rows_written:4",
        "journal_half_written:9",
    ],
)
def test_a_run_killed_anywhere_resumes_to_the_same_rows_buying_nothing_twice(
    failpoint, batch_emulator_factory, tmp_path, fixture_dir, monkeypatch
):
    """A crash at each dangerous moment (among the grader's parts: the 3rd plan, the
    5th create…), then the same command: the rows and summary are an unkilled run's,
    and the ledger shows each request bought once."""
    scripted = Scripted()
    emu = batch_emulator_factory(responder=scripted)
    args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE), cap=4)
    monkeypatch.setenv("BATCHBENCH_FAILPOINT", f"{failpoint}:raise")
    with pytest.raises(Crash):
        run_cli(*args, env=env())
    monkeypatch.delenv("BATCHBENCH_FAILPOINT")
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_no_duplicates(emu)
    run_dir = tmp_path / "jobs" / "ans-model"
    assert len(rows_of(run_dir / "results.jsonl")) == len(LINES)  # each example's row once
    _check_rows_and_summary(run_dir, "judge-model")


def test_more_judge_passes_are_refused_in_one_line(tmp_path, fixture_dir, batch_emulator):
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--dataset", str(FILE))
    proc = run_cli(*args, "--judge-passes", "2", env=env())
    assert_one_line_error(proc, "--judge-passes 2", "once per rubric item")
    assert not (tmp_path / "jobs" / "ans-model").exists()


def test_the_dry_run_prices_one_grader_request_per_rubric_item():
    """The judge stage is one request per rubric item, each the grader's message about
    an answer of the assumed length; its input tokens, counted here by the o200k
    tokenizer over the spec's messages (not batchbench's requests), 3 tokens a message and
    3 priming the reply."""
    bpe = pytest.importorskip("bpe_openai")
    enc = bpe.get_encoding("o200k_base")
    proc = run_cli(
        "run",
        "--answer-model",
        "gpt-4.1",
        "--judge-model",
        "gpt-4.1-2025-04-14",
        "--dataset",
        str(FILE),
        "--dry-run",
        "--json",
        "--assumed-answer-tokens",
        "50",
    )
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    judges = plan["stages"]["judges"]
    assert (plan["stages"]["answers"]["requests"], judges["requests"]) == (len(LINES), ITEMS)
    answer = ("answer " * 50).strip()
    expected = sum(
        3
        + sum(
            3 + len(enc.encode_ordinary(text))
            for text in (rules.SYSTEM, rules.grader_message(line, answer, item))
        )
        for line in LINES
        for item in line["rubrics"]
    )
    assert judges["input_tokens"] == expected


def test_show_prints_the_conversation_each_items_verdict_and_why(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(responder=Scripted())
    assert (
        run_cli(*run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE)), env=env()).returncode
        == 0
    )
    line = LINES[3]
    proc = run_cli("show", "ans-model", line["prompt_id"], "--jobs-dir", str(tmp_path / "jobs"))
    assert proc.returncode == 0, proc.stderr
    answer = _answer(_question(line))
    met = _verdicts(line, answer)
    text = proc.stdout
    assert f"score {rules.score(line['rubrics'], met)}" in text
    for m in line["prompt"]:
        assert f"{m['role']}: {m['content']}" in text
    assert answer in text
    for n, (item, ok) in enumerate(zip(line["rubrics"], met)):
        assert (
            f"[{'x' if ok else '.'}] {item['points']:+g}  {item['criterion']}  (item_{n})" in text
        )
        assert f"judges item_{n} #1" in text


class ByModel(Scripted):
    """Each model answers in its own words (its name at the end): its verdicts differ."""

    def model_in(self, given: dict[str, Any]) -> str:
        return f" ({given.get('model')})"


def test_compare_pairs_two_runs_per_metric_over_the_examples_both_graded(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """Overall, per theme, per axis: each metric's clipped mean over the examples both
    graded, and their difference, rebuilt from the plain rules; the interval holds it."""
    emu = batch_emulator_factory(responder=ByModel(), models=["other-model"])
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    for model in ("ans-model", "other-model"):
        args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE))
        at = args.index("ans-model")  # the run's name, then the answer model
        args[at] = args[at + 2] = model
        assert run_cli(*args, env=env()).returncode == 0
    proc = run_cli("compare", "ans-model", "other-model", *jobs, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["baseline"] == "ans-model"
    [pairs] = [c["metrics"] for c in result["comparisons"] if c["run"] == "other-model"]

    def values(model: str) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for line in LINES:
            answer = _answer(_question(line), f" ({model})")
            met = _verdicts(line, answer)
            for name, found in rules.metric_values([(line, met)]).items():
                out.setdefault(name, {})[line["prompt_id"]] = found[0]
        return out

    a, b = values("other-model"), values("ans-model")
    named = {p["metric"]: p for p in pairs}
    wanted = [n for n in a if n.startswith(("theme:", "axis:")) or n == "overall_score"]
    assert set(named) == set(wanted)
    for name in wanted:
        both = [c for c in a[name] if c in b[name]]
        mean_a = rules.clipped_mean([a[name][c] for c in both])
        mean_b = rules.clipped_mean([b[name][c] for c in both])
        p = named[name]
        assert p["n"] == len(both)
        assert p["run"] == pytest.approx(mean_a, abs=1e-12)
        assert p["baseline"] == pytest.approx(mean_b, abs=1e-12)
        assert p["ci95"][0] - 1e-12 <= p["difference"] <= p["ci95"][1] + 1e-12 or p["n"] == 1
    text = run_cli("compare", "ans-model", "other-model", *jobs).stdout
    assert "other-model vs ans-model" in text and "simple-evals' overall_score" in text


def test_a_healthbench_run_is_not_compared_with_a_bedside_bench_run(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(responder=Scripted())
    assert (
        run_cli(*run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE)), env=env()).returncode
        == 0
    )
    plain = batch_emulator_factory()  # the simulated model, for BedsideBench's cases
    other = run_args(plain, tmp_path, fixture_dir, "--limit", "3")
    other[other.index("ans-model")] = "bedside"
    assert run_cli(*other, env=env()).returncode == 0
    proc = run_cli("compare", "ans-model", "bedside", "--jobs-dir", str(tmp_path / "jobs"))
    assert_one_line_error(proc, "bedside", "not HealthBench runs")


def _graded_run(batch_emulator_factory, tmp_path, fixture_dir, dataset=FILE) -> list[str]:
    emu = batch_emulator_factory(responder=Scripted())
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir, "--dataset", str(dataset)), env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return ["--jobs-dir", str(tmp_path / "jobs")]


def _plain_scores() -> dict[str, float | None]:
    out = {}
    for line in LINES:
        answer = _answer(_question(line))
        met = _verdicts(line, answer)
        out[line["prompt_id"]] = rules.score(line["rubrics"], met)
    return out


def test_the_exports_carry_each_examples_score_and_simple_evals_metrics(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """The table (a row per item with --decisions), Every Eval Ever records checked against
    the schema's own files, and an Inspect log read back by inspect_ai: each example's
    score and each metric are the plain rules'."""
    jobs = _graded_run(batch_emulator_factory, tmp_path, fixture_dir)
    plain = _plain_scores()
    table = tmp_path / "items.csv"
    assert run_cli("export", "ans-model", *jobs, "-o", str(table), "--decisions").returncode == 0
    import csv

    items = list(csv.DictReader(table.open()))
    assert len(items) == ITEMS
    for row in items:
        want = plain[row["case_id"]]
        assert (float(row["score"]) if row["score"] else None) == pytest.approx(want)
    jsonschema = pytest.importorskip("jsonschema")
    schemas = FILE.parents[1] / "eee"
    out = tmp_path / "eee"
    proc = run_cli("export", "ans-model", *jobs, "--format", "eee", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    [record] = out.glob("data/healthbench/*/*/*.json")
    aggregate = json.loads(record.read_text())
    validator = jsonschema.Draft7Validator(json.loads((schemas / "eval.schema.json").read_text()))
    assert not list(validator.iter_errors(aggregate))
    samples = [
        json.loads(x)
        for x in (out / aggregate["detailed_evaluation_results"]["file_path"])
        .read_text()
        .splitlines()
    ]
    each = jsonschema.Draft7Validator(
        json.loads((schemas / "instance_level_eval.schema.json").read_text())
    )
    assert not [e for s in samples for e in each.iter_errors(s)]
    assert {s["sample_id"]: s["evaluation"]["score"] for s in samples} == {
        k: v for k, v in plain.items() if v is not None
    }
    by_name = {r["evaluation_name"]: r["score_details"] for r in aggregate["evaluation_results"]}
    graded = [(line, _verdicts(line, _answer(_question(line)))) for line in LINES]
    for name, values in rules.metric_values(graded).items():
        assert by_name[name]["score"] == pytest.approx(rules.clipped_mean(values), abs=1e-12)
        assert by_name[name]["uncertainty"]["num_samples"] == len(values)
    log_module = pytest.importorskip("inspect_ai.log")
    path = tmp_path / "hb.eval"
    assert (
        run_cli("export", "ans-model", *jobs, "--format", "inspect", "-o", str(path)).returncode
        == 0
    )
    log = log_module.read_eval_log(str(path))
    assert {
        s.id: (s.scores["healthbench"].value if s.scores else None) for s in log.samples
    } == plain
    overall = log.results.scores[0].metrics["overall_score"].value
    assert overall == pytest.approx(
        rules.clipped_mean([v for v in plain.values() if v is not None])
    )
    for sample, line in zip(sorted(log.samples, key=lambda s: s.id), LINES):
        sent = [(m.role, m.text) for m in sample.messages][: len(line["prompt"]) + 1]
        assert sent == [
            ("system", rules.SYSTEM),
            *((m["role"], m["content"]) for m in line["prompt"]),
        ]


def test_the_report_shows_simple_evals_figures_and_escapes_what_it_shows(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """A criterion that is markup shows as text; the overall score and each theme's are
    the plain rules' (their exact values in data-value)."""
    hostile = tmp_path / "hostile.jsonl"
    lines = rules.lines()
    lines[1]["rubrics"][0]["criterion"] = "<script>alert('x')</script> gives <b>doses</b>"
    hostile.write_text("".join(json.dumps(line) + "\n" for line in lines))
    jobs = _graded_run(batch_emulator_factory, tmp_path, fixture_dir, hostile)
    page = tmp_path / "hb.html"
    proc = run_cli("report", "ans-model", *jobs, "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert "<script>alert" not in text and "&lt;script&gt;alert(&#x27;x&#x27;)" in text
    graded = []
    for line in lines:
        answer = _answer(_question(line))
        graded.append((line, _verdicts(line, answer)))
    values = rules.metric_values(graded)
    overall = rules.clipped_mean(values["overall_score"])
    assert f'data-value="{overall!r}"' in text
    for name in (n for n in values if n.startswith("theme:")):
        assert f"<td>{name.removeprefix('theme:')}</td>" in text
        assert f'data-value="{rules.clipped_mean(values[name])!r}"' in text
    for line in lines:
        assert f"id='case-{line['prompt_id']}'" in text


def test_physician_completions_are_graded_as_given_and_nothing_is_asked_for_them(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """--physician-completions: the examples with an ideal completion, each graded per
    item as simple-evals grades a model's answer; no answer request reaches any service."""
    scripted = Scripted()
    emu = batch_emulator_factory(responder=scripted)
    args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE), "--physician-completions")
    at = args.index("--answer-model")
    del args[at : at + 2]
    args[args.index("--run") + 1] = "physicians"
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert scripted.answers == []  # nothing answered by a model
    with_ideal = [
        ln for ln in LINES if (ln.get("ideal_completions_data") or {}).get("ideal_completion")
    ]
    assert 0 < len(with_ideal) < len(LINES)
    wanted = Counter(
        rules.grader_message(ln, ln["ideal_completions_data"]["ideal_completion"], item)
        for ln in with_ideal
        for item in ln["rubrics"]
    )
    assert Counter(scripted.graders) == wanted
    rows = rows_of(tmp_path / "jobs" / "physicians" / "results.jsonl")
    assert {r["prompt_id"] for r in rows} == {ln["prompt_id"] for ln in with_ideal}
    for row in rows:
        [line] = [ln for ln in with_ideal if ln["prompt_id"] == row["prompt_id"]]
        ideal = line["ideal_completions_data"]["ideal_completion"]
        met = _verdicts(line, ideal)
        assert row["score"] == rules.score(line["rubrics"], met)
        assert row["completion"] == [{"role": "assistant", "content": ideal}]
        assert row["answer_model"] == "physician-completions"
    assert_no_duplicates(emu)
    both = run_cli(*args, "--answer-model", "gpt-4.1", env=env())
    assert_one_line_error(both, "--physician-completions", "leave out --answer-model")


def test_the_grader_is_simple_evals_unless_named_and_bedside_bench_needs_a_judge(
    batch_emulator_factory, tmp_path, fixture_dir
):
    scripted = Scripted()
    emu = batch_emulator_factory(responder=scripted, models=["gpt-4.1-2025-04-14"])
    args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE), "--limit", "2")
    at = args.index("--judge-model")
    del args[at : at + 2]
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [row, _] = rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")
    assert row["judge_model"] == "gpt-4.1-2025-04-14"
    bedside = run_args(emu, tmp_path, fixture_dir, "--run", "bedside")
    at = bedside.index("--judge-model")
    del bedside[at : at + 2]
    assert_one_line_error(run_cli(*bedside, env=env()), "run needs --judge-model MODEL")
    given = run_cli(*bedside, "--judge-model", "judge-model", "--physician-completions", env=env())
    assert_one_line_error(given, "--physician-completions", "BedsideBench gives no answers")


def test_what_is_not_built_for_healthbench_says_so_in_one_line(
    batch_emulator_factory, tmp_path, fixture_dir
):
    jobs = _graded_run(batch_emulator_factory, tmp_path, fixture_dir)
    sheet = run_cli(
        "calibrate", "sheet", "ans-model", *jobs, "--cases", "4", "-o", str(tmp_path / "s.csv")
    )
    assert_one_line_error(sheet, "HealthBench", "BedsideBench runs only")
    report = run_cli(
        "report", "ans-model", *jobs, "--checklist", "chart", "-o", str(tmp_path / "r.html")
    )
    assert_one_line_error(report, "--checklist", "BedsideBench runs")


def test_a_healthbench_run_in_a_bucket_ticked_by_cron_finishes_once(
    batch_emulator_factory, tmp_path, fixture_dir, clock
):
    """A team's bucket: --no-wait ticks (any machine's) until done; each grader request
    bought once, the rows and summary the plain rules'."""
    pytest.importorskip("obstore")
    from support.buckets import pull

    emu = batch_emulator_factory(latency=100.0, responder=Scripted())
    uri = f"memory://{tmp_path.name}/runs"
    args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE), cap=4)
    args[args.index("--jobs-dir") + 1] = uri
    for _ in range(40):
        proc = run_cli(*args, "--no-wait", env=env())
        assert proc.returncode in (0, 3), proc.stdout + proc.stderr
        if proc.returncode == 0:
            break
        clock.advance(150)
    assert proc.returncode == 0
    assert_no_duplicates(emu)
    got = pull(uri, "ans-model", {}, tmp_path / "pulled")
    _check_rows_and_summary(got / "ans-model", "judge-model")


def test_several_models_in_one_command_are_ranked_by_simple_evals_score(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(responder=ByModel(), models=["other-model"])
    args = run_args(
        emu, tmp_path, fixture_dir, "--dataset", str(FILE), "--answer-model", "other-model"
    )
    at = args.index("--run")
    del args[at : at + 2]
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "leaderboard (simple-evals' HealthBench score)" in proc.stdout
    scores = {}
    for model in ("ans-model", "other-model"):
        graded = [(ln, _verdicts(ln, _answer(_question(ln), f" ({model})"))) for ln in LINES]
        scores[model] = rules.clipped_mean(rules.metric_values(graded)["overall_score"])
    ranked = [m for m, _ in sorted(scores.items(), key=lambda kv: -kv[1])]
    board = proc.stdout.split("leaderboard (simple-evals' HealthBench score)")[1]
    assert board.index(ranked[0]) < board.index(ranked[1])
    for score in scores.values():
        assert f"{score:.3f}" in board
