"""HealthBench's rules as ``../shared/spec/healthbench.md`` writes them, in plain Python
and sharing no code with batchbench: the grader's user message for an item, an
example's score, and the metrics (mean clipped to [0, 1], ``n_samples``) over examples.
The tests hold batchbench's requests, rows and summaries against these."""

from __future__ import annotations

import json
from pathlib import Path

SYSTEM = "You are a helpful assistant."
SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "healthbench.md"
FILE = Path(__file__).resolve().parents[1] / "fixtures" / "healthbench" / "synthetic.jsonl"


def lines(path: Path = FILE) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def template() -> str:
    """GRADER_TEMPLATE: the spec's block where ../shared is beside the checkout; else the
    bundled copy, whose bytes tests/test_healthbench.py pins to the spec's digest."""
    if SPEC.is_file():
        return SPEC.read_text().split("````\n", 2)[1].strip()
    from batchbench.bench.healthbench import grader_template

    return grader_template()


def grader_message(line: dict, answer: str, item: dict) -> str:
    """The spec's replace: the conversation with the sampler's system message first and
    the answer last, ``role: content`` joined by blank lines; the item ``[points] criterion``."""
    queried = [{"role": "system", "content": SYSTEM}, *line["prompt"]]
    convo = "\n\n".join(
        f"{m['role']}: {m['content']}" for m in [*queried, {"role": "assistant", "content": answer}]
    )
    rubric_item = f"[{item['points']}] {item['criterion']}"
    return template().replace("<<conversation>>", convo).replace("<<rubric_item>>", rubric_item)


def score(rubrics: list[dict], met: list[bool]) -> float | None:
    total = sum(r["points"] for r in rubrics if r["points"] > 0)
    if total == 0:
        return None
    return sum(r["points"] for r, m in zip(rubrics, met) if m) / total


def metric_values(graded: list[tuple[dict, list[bool]]]) -> dict[str, list[float]]:
    """Each metric's values over the examples that have it (overall, example tags, rubric
    tags), from (line, verdicts) pairs."""
    out: dict[str, list[float]] = {}
    for line, met in graded:
        overall = score(line["rubrics"], met)
        if overall is not None:
            out.setdefault("overall_score", []).append(overall)
            for tag in line["example_tags"]:
                out.setdefault(tag, []).append(overall)
        for tag in sorted({t for r in line["rubrics"] for t in r["tags"]}):
            chosen = [(r, m) for r, m in zip(line["rubrics"], met) if tag in r["tags"]]
            found = score([r for r, _ in chosen], [m for _, m in chosen])
            if found is not None:
                out.setdefault(tag, []).append(found)
    return out


def clipped_mean(values: list[float]) -> float:
    return min(1.0, max(0.0, sum(values) / len(values)))
