"""#65: HealthBench's meta-eval — the grader graded against physicians — as simple-evals'
``healthbench_meta_eval.py`` runs it, through the batch APIs.

The witness is a scripted grader (its verdict a rule of this file's) and a plain
re-implementation, here, of the script's pairwise agreement as its source states it
(precision over the rater's own label, recall over the other's, F1, the balanced mean of
the two classes; each line's metrics' mean and count), never batchbench's output."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import healthbench_rules as rules
from support.cli import assert_one_line_error, run_cli
from support.runs import assert_no_duplicates, env, rows_of, run_args

FILE = Path(__file__).parent / "fixtures" / "healthbench" / "meta_synthetic.jsonl"
LINES = [json.loads(x) for x in FILE.read_text().splitlines()]


def _message(line: dict) -> str:
    """The script's grader prompt: the file's conversation with the completion last (no
    system message in it), the rubric text as given."""
    convo = [*line["prompt"], {"role": "assistant", "content": line["completion"]}]
    text = "\n\n".join(f"{m['role']}: {m['content']}" for m in convo)
    return (
        rules.template()
        .replace("<<conversation>>", text)
        .replace("<<rubric_item>>", line["rubric"])
    )


def _met(message: str) -> bool:
    return hashlib.sha256(message.encode()).digest()[0] < 0x90


class Grader:
    def __init__(self) -> None:
        self.asked: list[Any] = []

    def __call__(self, given: dict[str, Any]) -> str:
        self.asked.append(given)
        user = given["messages"][-1]["content"]
        return "```json\n" + json.dumps({"explanation": "x", "criteria_met": _met(user)}) + "\n```"


def _plain_pairwise(own: list[bool], others: list[list[bool]], cats: list[str]) -> dict[str, float]:
    """precision_pos: agreement over (line, other label) pairs where the rater said yes;
    recall_pos: where the other said yes; and the negatives; F1; balanced; per category."""
    out: dict[str, float] = {}
    for scope in [None, *sorted(set(cats))]:
        pairs = [(m, o) for m, os_, c in zip(own, others, cats) for o in os_ if scope in (None, c)]
        rate: dict[bool, tuple[float | None, float | None]] = {}
        for cls in (True, False):
            said = [m == o for m, o in pairs if m == cls]
            truth = [m == o for m, o in pairs if o == cls]
            rate[cls] = (
                sum(said) / len(said) if said else None,
                sum(truth) / len(truth) if truth else None,
            )
        prefix = "" if scope is None else f"{scope}: "
        f1s = {}
        for cls, name in ((True, "pos"), (False, "neg")):
            p, r = rate[cls]
            if p is not None:
                out[f"{prefix}pairwise_model_precision_{name}"] = p
            if r is not None:
                out[f"{prefix}pairwise_model_recall_{name}"] = r
            if p is not None and r is not None:
                f1s[name] = 0.0 if p == r == 0 else 2 * p * r / (p + r)
                out[f"{prefix}pairwise_model_f1_{name}"] = f1s[name]
        if len(f1s) == 2:
            out[f"{prefix}pairwise_model_f1_balanced"] = (f1s["pos"] + f1s["neg"]) / 2
    return out


def test_the_grader_is_asked_each_line_as_the_script_asks_and_scored_as_it_scores(
    batch_emulator_factory, tmp_path, fixture_dir
):
    grader = Grader()
    emu = batch_emulator_factory(responder=grader, models=["gpt-4.1-2025-04-14"])
    args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE))
    for flag in ("--answer-model", "--judge-model"):
        at = args.index(flag)
        del args[at : at + 2]
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sent = Counter(g["messages"][-1]["content"] for g in grader.asked)
    assert sent == Counter(_message(line) for line in LINES)  # each line once, nothing else
    assert all(
        g["messages"][0] == {"role": "system", "content": rules.SYSTEM} for g in grader.asked
    )
    assert_no_duplicates(emu)
    run = tmp_path / "jobs" / "ans-model"
    rows = rows_of(run / "results.jsonl")
    own = [_met(_message(line)) for line in LINES]
    by_line = {(r["prompt_id"], r["rubric"]): r["criteria_met"] for r in rows}
    assert [by_line[(ln["prompt_id"], ln["rubric"])] for ln in LINES] == own
    summary = json.loads((run / "results.summary.json").read_text())
    metrics = summary["metrics"]
    labels = [ln["binary_labels"] for ln in LINES]
    cats = [ln["category"] for ln in LINES]
    for name, value in _plain_pairwise(own, labels, cats).items():
        assert metrics[name] == pytest.approx(value, abs=1e-12), name
    assert summary["score"] == pytest.approx(
        _plain_pairwise(own, labels, cats)["pairwise_model_f1_balanced"]
    )
    # each line's metrics: their mean and count, plain and per category
    assert metrics["model_predicted_positive"] == pytest.approx(sum(own) / len(own))
    assert metrics["model_predicted_positive:n_samples"] == len(LINES)
    shares = [sum(ls) / len(ls) for ls in labels]
    assert metrics["percent_physician_pos"] == pytest.approx(sum(shares) / len(shares))
    for cat in set(cats):
        chosen = [len(ls) for ls, c in zip(labels, cats) if c == cat]
        assert metrics[f"{cat}: num_physician_labels"] == pytest.approx(sum(chosen) / len(chosen))
        assert metrics[f"{cat}: num_physician_labels:n_samples"] == len(chosen)
    # a physician against the others, on the lines they labelled
    rater = LINES[0]["anonymized_physician_ids"][0]
    mine, theirs = [], []
    for ln in LINES:
        for i, who in enumerate(ln["anonymized_physician_ids"]):
            if who == rater:
                mine.append(ln["binary_labels"][i])
                theirs.append(ln["binary_labels"][:i] + ln["binary_labels"][i + 1 :])
    plain = _plain_pairwise(mine, theirs, ["x"] * len(mine))
    found = summary["metadata"]["physician_agreement_metric_lists"]
    for name, value in plain.items():
        if not name.startswith("x: "):
            key = name.replace("_model_", "_physician_")
            assert found[key][rater]["value"] == pytest.approx(value), key
    shown = run_cli("status", "ans-model", "--jobs-dir", str(tmp_path / "jobs"))
    assert shown.returncode == 0, shown.stderr
    # calibrate: the grader against the physicians whose labels the run carries
    balanced = _plain_pairwise(own, labels, cats)["pairwise_model_f1_balanced"]
    said = run_cli("calibrate", "ans-model", "--jobs-dir", str(tmp_path / "jobs")).stdout
    assert f"balanced F1 (simple-evals' score) {balanced:.4f}" in said


def test_a_bad_meta_eval_line_is_one_line_naming_it(tmp_path, fixture_dir, batch_emulator):
    lines = [dict(ln) for ln in LINES]
    lines[4]["binary_labels"] = ["yes"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    args = run_args(batch_emulator, tmp_path, fixture_dir, "--dataset", str(bad))
    at = args.index("--answer-model")
    del args[at : at + 2]
    assert_one_line_error(run_cli(*args, env=env()), str(bad), "line 5", "binary_labels")


def test_a_meta_eval_run_shows_each_line_and_refuses_what_reads_answers(
    batch_emulator_factory, tmp_path, fixture_dir
):
    emu = batch_emulator_factory(responder=Grader())
    args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(FILE))
    at = args.index("--answer-model")
    del args[at : at + 2]
    assert run_cli(*args, env=env()).returncode == 0
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    [row] = [r for r in rows_of(tmp_path / "jobs" / "ans-model" / "results.jsonl")][:1]
    shown = run_cli("show", "ans-model", row["case_id"], *jobs).stdout
    line = next(ln for ln in LINES if ln["rubric"] == row["rubric"])
    mark = "x" if _met(_message(line)) else "."
    assert f"[{mark}] +1  {line['rubric']}" in shown and line["completion"] in shown
    for command in (
        ["export", "ans-model", "-o", str(tmp_path / "x.csv")],
        ["report", "ans-model"],
    ):
        assert_one_line_error(
            run_cli(*command, *jobs), "meta-eval", "the grader against physicians"
        )
