"""HealthBench's meta-evaluation: the grader graded against physicians, as simple-evals'
``healthbench_meta_eval.py`` runs it (source and licence: ``../shared/spec/healthbench.md``,
and the script itself, openai/simple-evals at ee3b031).

Each line of its JSONL is one rubric item of one completion, with the physicians' labels:
``prompt`` (the conversation), ``completion``, ``rubric`` (the item's text as the grader
is shown it), ``binary_labels`` and ``anonymized_physician_ids`` (one label a physician),
``category``. The grader is asked once per line — the conversation with the completion
last (no system message in it: the file's prompt as it is), the rubric text as given —
and its verdict is held against each physician's (``scores.healthbench_meta_scores``).
Here each line is a case whose answer the dataset gives (the completion) and whose one
rubric item is the line's.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, cast

from ..errors import DatasetError
from . import healthbench
from .dataset import Case
from .protocol import Prompt

PROTOCOL_VERSION = "healthbench-meta-simple-evals-v1"
BENCHMARK = "healthbench-meta"


def is_meta(path: Path) -> bool:
    """A file whose first line is an object with a completion, a rubric and its labels."""
    return {"completion", "rubric", "binary_labels"} <= set(healthbench.first_object(path))


def _case(where: str, n: int, line: Any) -> Case:
    if not isinstance(line, dict):
        raise DatasetError(f"{where}: not a JSON object")
    for name in ("completion", "rubric", "category"):
        if not isinstance(line.get(name), str):
            raise DatasetError(f"{where}: {name!r} is not a string")
    prompt = line.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        raise DatasetError(f"{where}: 'prompt' is not a list of messages")
    messages = [healthbench.message(where, k, m) for k, m in enumerate(prompt)]
    labels, raters = line.get("binary_labels"), line.get("anonymized_physician_ids")
    if not isinstance(labels, list) or not labels or not all(isinstance(v, bool) for v in labels):
        raise DatasetError(f"{where}: 'binary_labels' is not a list of true/false")
    if not isinstance(raters, list) or len(raters) != len(labels):
        raise DatasetError(f"{where}: 'anonymized_physician_ids' does not name one a label")
    prompt_id = str(
        line.get("prompt_id") or hashlib.sha256(json.dumps(prompt).encode()).hexdigest()
    )
    case = {
        "case_id": f"{prompt_id}-{n}",  # a line is a case: the file's line number keeps it one
        "benchmark": BENCHMARK,
        "grading_method": BENCHMARK,
        "prompt": "\n\n".join(f"{m['role']}: {m['content']}" for m in messages),
        "rubric_items": [{"item_id": "item_0", "text": line["rubric"], "points": 1, "tags": []}],
        "split": BENCHMARK,
        "prompt_id": prompt_id,
        "conversation": messages,
        "completion": line["completion"],
        "category": line["category"],
        "binary_labels": labels,
        "anonymized_physician_ids": [str(r) for r in raters],
    }
    return cast(Case, case)


def load_meta(path: Path) -> tuple[list[Case], str]:
    """Every line read and checked (one line naming the file, line and field when one is
    not a meta-eval line); the cases and the file's digest."""
    data, lines = healthbench.jsonl(path, "a HealthBench meta-eval file")
    cases = [_case(where, n, line) for n, where, line in lines]
    if not cases:
        raise DatasetError(f"{path}: no line in it")
    return cases, hashlib.sha256(data).hexdigest()


def grader_prompt(case: Case, answer: str, part: int) -> Prompt:
    """simple-evals' meta-eval request: ``GRADER_TEMPLATE`` with the file's conversation and
    the completion (``role: content``, joined by blank lines) and the rubric text as given,
    behind the grader sampler's system message."""
    extra = cast(dict[str, Any], case)
    messages = [*extra["conversation"], {"role": "assistant", "content": answer}]
    convo = "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)
    rubric = case["rubric_items"][0]["text"]
    user = healthbench.grader_template().replace("<<conversation>>", convo)
    return Prompt(
        system=healthbench.SYSTEM_MESSAGE,
        user=user.replace("<<rubric_item>>", rubric),
        max_tokens=healthbench.MAX_TOKENS,
        temperature=healthbench.TEMPERATURE,
        json_mode=False,
        reasoning_effort=None,
    )


def part_row(
    case: Case, grades: list[dict[str, Any]], answer: str
) -> tuple[dict[str, Any], str | None]:
    """A line's row: the grader's verdict beside the physicians' labels."""
    extra = cast(dict[str, Any], case)
    [grade] = grades
    row: dict[str, Any] = {
        "prompt_id": extra["prompt_id"],
        "category": extra["category"],
        "rubric": case["rubric_items"][0]["text"],
        "completion": answer,
        "binary_labels": extra["binary_labels"],
        "anonymized_physician_ids": extra["anonymized_physician_ids"],
    }
    if grade["criteria_met"] is None:
        return {**row, "error": f"not graded: {grade['error']}"}, f"not graded: {grade['error']}"
    met = bool(grade["criteria_met"])
    return {
        **row,
        "score": float(met),
        "criteria_met": met,
        "explanation": grade["explanation"],
    }, None
