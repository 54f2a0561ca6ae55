"""#65 (its first part): HealthBench read, asked and scored as simple-evals does it.

Each expectation is rebuilt here from the written rules (``../shared/spec/healthbench.md``)
in plain Python — the grader's user message by the spec's replace, each example's score
and each metric's mean and ``n_samples`` exactly, the bootstrap's std within its sampling
noise — never from batchbench's own output. The file is synthetic
(``tests/fixtures/healthbench``): the public ones are never fetched or copied."""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from pathlib import Path

import numpy as np
import pytest
from support.cli import FIXTURE, assert_one_line_error, run_cli

from batchbench.bench import healthbench as hb
from batchbench.scores import healthbench_scores as scores

FILE = FIXTURE / "healthbench" / "synthetic.jsonl"
SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "healthbench.md"


def _lines() -> list[dict]:
    return [json.loads(line) for line in FILE.read_text().splitlines()]


def test_the_grader_template_is_simple_evals_byte_for_byte():
    """Against the spec's copy of GRADER_TEMPLATE (the block between its two ```` fences,
    stripped as the source strips it); without ../shared, against its recorded digest."""
    ours = hb.grader_template()
    if SPEC.is_file():
        block = SPEC.read_text().split("````\n", 2)[1]
        assert ours == block.strip()
    else:  # the digest of the spec's block, taken from it when this test was written
        digest = "2adffd51fd259554ebcd036ad1072d4aa2b7ce3aec2bbffe36271f911632ed3c"
        assert hashlib.sha256(ours.encode()).hexdigest() == digest
    assert "<<conversation>>" in ours and "<<rubric_item>>" in ours


def test_every_grader_request_is_the_spec_string_for_its_item():
    """The user message, rebuilt by the spec's rule for every rubric item of every line:
    the system message first, the conversation `role: content` joined by blank lines
    with the answer last, the item as `[points] criterion` (Python's printing)."""
    ds = hb.load_healthbench(FILE)
    template = hb.grader_template()
    answer = "Synthetic answer: see a doctor if it lasts."
    checked = 0
    for line, example in zip(_lines(), ds.examples):
        queried = [{"role": "system", "content": "You are a helpful assistant."}, *line["prompt"]]
        convo = "\n\n".join(
            f"{m['role']}: {m['content']}"
            for m in queried + [{"role": "assistant", "content": answer}]
        )
        for raw, item in zip(line["rubrics"], example.rubrics):
            expected = template.replace("<<conversation>>", convo).replace(
                "<<rubric_item>>", f"[{raw['points']}] {raw['criterion']}"
            )
            sent = hb.grader_messages(example, answer, item)
            assert sent == [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": expected},
            ]
            checked += 1
    assert checked == sum(len(line["rubrics"]) for line in _lines())
    assert "[2.5] " in json.dumps([str(i) for e in ds.examples for i in e.rubrics])  # a float


@pytest.mark.parametrize(
    ("reply", "met"),
    [
        ('```json\n{"explanation": "x", "criteria_met": true}\n```', True),
        ('{"criteria_met": false}', False),
        ('{"criteria_met": 1}', None),  # 1 is not True: simple-evals asks again
        ("not json", None),
        ('```json\n{"criteria_met": "true"}\n```', None),
    ],
)
def test_a_grade_is_read_as_simple_evals_reads_it(reply, met):
    found = hb.parse_grade(reply)
    assert (found["criteria_met"] if found else None) == met
    if found is not None and "explanation" not in reply:
        assert found["explanation"] == "No explanation provided"


def _plain_score(rubrics: list[dict], met: list[bool]) -> float | None:
    total = sum(r["points"] for r in rubrics if r["points"] > 0)
    if total == 0:
        return None
    return sum(r["points"] for r, m in zip(rubrics, met) if m) / total


def test_scores_and_metrics_are_simple_evals_rules_exactly():
    """Per example, the spec's calculate_score over all items, each example tag the
    example's score, each rubric tag over its items; per metric the mean over the
    examples that have it clipped to [0, 1] and its n_samples — exactly; the bootstrap
    std within the sampling noise of a plain random.Random bootstrap of the same values."""
    lines = _lines()
    ds = hb.load_healthbench(FILE)
    draw = random.Random(3)
    verdicts = [[draw.random() < 0.6 for _ in line["rubrics"]] for line in lines]
    expected: dict[str, list[float]] = {}
    for line, met in zip(lines, verdicts):
        overall = _plain_score(line["rubrics"], met)
        if overall is not None:
            expected.setdefault("overall_score", []).append(overall)
            expected.setdefault("score", []).append(overall)
            for tag in line["example_tags"]:
                expected.setdefault(tag, []).append(overall)
        for tag in {t for r in line["rubrics"] for t in r["tags"]}:
            chosen = [(r, m) for r, m in zip(line["rubrics"], met) if tag in r["tags"]]
            s = _plain_score([r for r, _ in chosen], [m for _, m in chosen])
            if s is not None:
                expected.setdefault(tag, []).append(s)
    rows = [
        {"prompt_id": line["prompt_id"], "rubric_items": [{"criteria_met": m} for m in met]}
        for line, met in zip(lines, verdicts)
    ]
    summary = scores.summary_of_rows(ds.by_id(), rows)
    metrics = summary["metrics"]
    # the spec's rule: np.clip(np.mean(values), 0, 1) — NumPy's mean, its summation order
    assert summary["score"] == float(np.clip(np.mean(expected["score"]), 0, 1))
    for name, values in expected.items():
        if name == "score":
            assert metrics["score:n_samples"] == len(values)
            continue
        assert metrics[name] == pytest.approx(
            min(1.0, max(0.0, sum(values) / len(values))), abs=1e-15
        )
        assert metrics[f"{name}:n_samples"] == len(values)
        plain = random.Random(11)
        means = [
            min(1.0, max(0.0, statistics.fmean(plain.choices(values, k=len(values)))))
            for _ in range(1000)
        ]
        noise = statistics.pstdev(means)
        assert abs(metrics[f"{name}:bootstrap_std"] - noise) <= 0.25 * noise + 1e-9, name
    assert set(metrics) == {
        f"{n}{s}" for n in expected for s in ("", ":n_samples", ":bootstrap_std")
    } - {"score"}
    assert expected["score"] and len(expected["score"]) == len(lines) - 1  # one unscorable
    again = scores.summary_of_rows(ds.by_id(), rows)
    assert again == summary  # seeded: repeatable, unlike simple-evals' global generator


def test_validate_says_the_count_and_the_files_digest():
    proc = run_cli("validate", "--dataset", str(FILE))
    assert proc.returncode == 0, proc.stderr
    digest = hashlib.sha256(FILE.read_bytes()).hexdigest()
    items = sum(len(line["rubrics"]) for line in _lines())
    assert f"{len(_lines())} HealthBench examples, {items} rubric items" in proc.stdout
    assert f"dataset_sha256 {digest}" in proc.stdout
    named = run_cli("validate", "--dataset", str(FILE), "--dataset-format", "healthbench")
    assert named.stdout == proc.stdout


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (lambda ln: ln.pop("prompt_id"), ("line 3", "no 'prompt_id'")),
        (lambda ln: ln["rubrics"][1].update(points="five"), ("line 3", "rubrics[1]", "'five'")),
        (lambda ln: ln["prompt"][0].update(role="doctor"), ("line 3", "prompt[0]", "'doctor'")),
        (lambda ln: ln.update(rubrics=[]), ("line 3", "'rubrics' holds no item")),
        (lambda ln: ln.update(prompt_id="synthetic-000"), ("line 3", "again (line 1)")),
        (lambda ln: ln.update(example_tags="theme:x"), ("line 3", "'example_tags'")),
    ],
)
def test_a_bad_line_is_one_line_naming_the_line_and_the_field(tmp_path, change, fragments):
    lines = _lines()
    change(lines[2])
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    proc = run_cli("validate", "--dataset", str(path), "--dataset-format", "healthbench")
    assert_one_line_error(proc, str(path), *fragments)
