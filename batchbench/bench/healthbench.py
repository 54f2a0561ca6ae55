"""HealthBench (#65), as simple-evals' ``healthbench_eval.py`` reads, asks and grades it
(the facts: ``../shared/spec/healthbench.md``): its JSONL read and checked, each line's
conversation, and the grader's one request per rubric item, byte for byte.

A file is told apart from a BedsideBench folder by what it is: one JSON object a line
with a ``prompt`` list and ``rubrics`` (``--dataset-format healthbench`` names it).
Any file of this shape works — the three public ones, or a team's own rubric set.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast

from .._io import read_bounded
from ..errors import DatasetError
from .dataset import Case
from .protocol import Prompt

Role = Literal["user", "assistant", "system"]
ROLES: tuple[Role, ...] = ("user", "assistant", "system")
# simple-evals' ChatCompletionSampler for the OpenAI chat models and for its grader.
SYSTEM_MESSAGE = "You are a helpful assistant."
GRADER_MODEL = "gpt-4.1-2025-04-14"
TEMPERATURE = 0.5
MAX_TOKENS = 2048
MAX_BYTES = 1 << 30  # the public full set is ~60 MB: a gigabyte is no rubric file


@dataclass(frozen=True)
class RubricItem:
    criterion: str
    points: float  # as the file gives it: an int stays an int ("[5]", not "[5.0]")
    tags: tuple[str, ...]

    def __str__(self) -> str:
        """simple-evals' ``str(rubric_item)``: ``[points] criterion``, the points as
        Python prints them (5 → ``5``, 5.0 → ``5.0``, -3 → ``-3``)."""
        return f"[{self.points}] {self.criterion}"


@dataclass(frozen=True)
class Example:
    prompt_id: str
    prompt: tuple[dict[str, str], ...]  # the conversation so far
    rubrics: tuple[RubricItem, ...]
    example_tags: tuple[str, ...]
    ideal_completion: str | None  # the physicians' (``--physician-completions``)


@dataclass(frozen=True)
class HealthBench:
    examples: tuple[Example, ...]
    sha256: str  # the file's bytes

    def by_id(self) -> dict[str, Example]:
        return {e.prompt_id: e for e in self.examples}


def first_object(path: Path) -> dict[str, Any]:
    """A file's first line as a JSON object (empty when it is not a file of such lines):
    what tells a JSONL's format by its content."""
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            first = json.loads(fh.readline())
    except (OSError, ValueError, RecursionError):
        return {}
    return first if isinstance(first, dict) else {}


def is_healthbench(path: Path) -> bool:
    """A file whose first line is a JSON object with a ``prompt`` list and ``rubrics``."""
    first = first_object(path)
    return isinstance(first.get("prompt"), list) and "rubrics" in first


def _field(where: str, line: dict[str, Any], name: str, kind: type, what: str) -> Any:
    if name not in line:
        raise DatasetError(f"{where}: no {name!r} ({what})")
    value = line[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DatasetError(f"{where}: {name!r} is not {what}")
    return value


def _strings(where: str, value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise DatasetError(f"{where}: {name!r} is not a list of strings")
    return tuple(value)


def message(where: str, n: int, m: Any) -> dict[str, str]:
    here = f"{where}: prompt[{n}]"
    if not isinstance(m, dict):
        raise DatasetError(f"{here} is not an object with role and content")
    if m.get("role") not in ROLES:
        raise DatasetError(f"{here}: role {m.get('role')!r} is not one of {', '.join(ROLES)}")
    if not isinstance(m.get("content"), str):
        raise DatasetError(f"{here}: content is not a string")
    return {"role": m["role"], "content": m["content"]}


def _item(where: str, n: int, r: Any) -> RubricItem:
    here = f"{where}: rubrics[{n}]"
    if not isinstance(r, dict):
        raise DatasetError(f"{here} is not an object with criterion, points and tags")
    if not isinstance(r.get("criterion"), str) or not r["criterion"].strip():
        raise DatasetError(f"{here}: criterion is not a non-empty string")
    points = r.get("points")
    if isinstance(points, bool) or not isinstance(points, (int, float)) or points != points:
        raise DatasetError(f"{here}: points {points!r} is not a number")
    return RubricItem(r["criterion"], points, _strings(here, r.get("tags", []), "tags"))


def _example(where: str, line: Any) -> Example:
    if not isinstance(line, dict):
        raise DatasetError(f"{where}: not a JSON object")
    prompt_id = _field(where, line, "prompt_id", str, "a string")
    if not prompt_id.strip():
        raise DatasetError(f"{where}: 'prompt_id' is empty")
    messages = _field(where, line, "prompt", list, "a list of messages")
    if not messages:
        raise DatasetError(f"{where}: 'prompt' holds no message")
    rubrics = _field(where, line, "rubrics", list, "a list of rubric items")
    if not rubrics:
        raise DatasetError(f"{where}: 'rubrics' holds no item")
    ideal = line.get("ideal_completions_data")
    if ideal is not None and not isinstance(ideal, dict):
        raise DatasetError(f"{where}: 'ideal_completions_data' is neither null nor an object")
    completion = (ideal or {}).get("ideal_completion")
    if completion is not None and not isinstance(completion, str):
        raise DatasetError(f"{where}: 'ideal_completions_data.ideal_completion' is not a string")
    return Example(
        prompt_id,
        tuple(message(where, n, m) for n, m in enumerate(messages)),
        tuple(_item(where, n, r) for n, r in enumerate(rubrics)),
        _strings(where, line.get("example_tags", []), "example_tags"),
        completion,
    )


def jsonl(path: Path, what: str) -> tuple[bytes, Iterator[tuple[int, str, Any]]]:
    """A JSONL file's bytes (bounded) and each non-blank line as ``(number, where, value)``;
    a line that is not JSON is one line naming the file and the line."""
    data = read_bounded(path, MAX_BYTES, DatasetError, str(path), f"over 1 GiB: not {what}")

    def lines() -> Iterator[tuple[int, str, Any]]:
        for n, raw in enumerate(data.split(b"\n"), 1):
            if not raw.strip():
                continue
            where = f"{path}: line {n}"
            try:
                yield n, where, json.loads(raw)
            except (ValueError, RecursionError):
                raise DatasetError(f"{where}: not JSON") from None

    return data, lines()


def load_healthbench(path: Path) -> HealthBench:
    """Every line read and checked: a line that is not an example is one line naming the
    file, the line and the field; a ``prompt_id`` twice is refused."""
    data, lines = jsonl(path, "a HealthBench file")
    examples: list[Example] = []
    seen: dict[str, int] = {}
    for n, where, line in lines:
        example = _example(where, line)
        if example.prompt_id in seen:
            raise DatasetError(
                f"{where}: prompt_id {example.prompt_id!r} again (line {seen[example.prompt_id]})"
            )
        seen[example.prompt_id] = n
        examples.append(example)
    if not examples:
        raise DatasetError(f"{path}: no example in it")
    return HealthBench(tuple(examples), hashlib.sha256(data).hexdigest())


@functools.cache
def grader_template() -> str:
    """simple-evals' ``GRADER_TEMPLATE`` (kept as data with its source: ``SOURCE.md``)."""
    text = resources.files(__package__).joinpath("healthbench_data/grader_template.txt")
    return text.read_text(encoding="utf-8").strip()


PROTOCOL_VERSION = "healthbench-simple-evals-v1"
BENCHMARK = "healthbench"


def as_case(example: Example) -> Case:
    """An example as the engine carries a case: its id, the conversation shown as the
    grader is shown it (``prompt``), each rubric item under an ``item_<n>`` id with its
    tags, and the example's own fields beside them (so :func:`example_of` rebuilds it)."""
    case = {
        "case_id": example.prompt_id,
        "benchmark": BENCHMARK,
        "grading_method": BENCHMARK,
        "prompt": "\n\n".join(f"{m['role']}: {m['content']}" for m in example.prompt),
        "rubric_items": [
            {"item_id": f"item_{n}", "text": r.criterion, "points": r.points, "tags": list(r.tags)}
            for n, r in enumerate(example.rubrics)
        ],
        "split": BENCHMARK,
        "conversation": [dict(m) for m in example.prompt],
        "example_tags": list(example.example_tags),
        "ideal_completion": example.ideal_completion,
    }
    return cast(Case, case)


def example_of(case: Case) -> Example:
    """The example a case was made of (:func:`as_case`)."""
    extra = cast(dict[str, Any], case)
    return Example(
        case["case_id"],
        tuple(extra["conversation"]),
        tuple(
            RubricItem(i["text"], i["points"], tuple(cast(dict[str, Any], i)["tags"]))
            for i in case["rubric_items"]
        ),
        tuple(extra["example_tags"]),
        extra["ideal_completion"],
    )


def answer_prompt(case: Case, *, reasoning_effort: str | None) -> Prompt:
    """What the answer model is asked: the conversation behind the system message, with
    the chat sampler's temperature and ``max_tokens``."""
    turns = tuple((m["role"], m["content"]) for m in example_of(case).prompt)
    return Prompt(
        system=SYSTEM_MESSAGE,
        user=turns[-1][1],
        max_tokens=MAX_TOKENS,
        temperature=TEMPERATURE,
        json_mode=False,
        reasoning_effort=reasoning_effort,
        turns=turns,
    )


def grader_prompt(case: Case, answer: str, part: int) -> Prompt:
    """The grader's request for rubric item ``part`` (1 the first): its exact messages,
    the grader sampler's temperature and ``max_tokens``."""
    example = example_of(case)
    system, user = grader_messages(example, answer, example.rubrics[part - 1])
    return Prompt(
        system=system["content"],
        user=user["content"],
        max_tokens=MAX_TOKENS,
        temperature=TEMPERATURE,
        json_mode=False,
        reasoning_effort=None,
    )


def answer_messages(example: Example) -> list[dict[str, str]]:
    """What the answer model is sent, as simple-evals' chat sampler sends it: its system
    message, then the conversation (``actual_queried_message_list``)."""
    return [{"role": "system", "content": SYSTEM_MESSAGE}, *example.prompt]


def conversation(example: Example, answer: str) -> str:
    """``convo_str``: each message ``role: content``, the answer last as the assistant's,
    joined by blank lines."""
    messages = [*answer_messages(example), {"role": "assistant", "content": answer}]
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def grader_messages(example: Example, answer: str, item: RubricItem) -> list[dict[str, str]]:
    """One rubric item's grader request: the system message, then ``GRADER_TEMPLATE`` with
    the conversation and the item in place."""
    prompt = grader_template().replace("<<conversation>>", conversation(example, answer))
    prompt = prompt.replace("<<rubric_item>>", str(item))
    return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": prompt}]


def calculate_score(items: Sequence[RubricItem], met: Sequence[bool]) -> float | None:
    """simple-evals' ``calculate_score``: achieved points over the positive points (None
    when no item has positive points)."""
    total = sum(i.points for i in items if i.points > 0)
    if total == 0:
        return None
    return sum(i.points for i, m in zip(items, met) if m) / total


def part_row(
    case: Case, grades: list[dict[str, Any]], answer: str
) -> tuple[dict[str, Any], str | None]:
    """An example's row as simple-evals' ``example_level_metadata`` holds it (its score
    from every item's grade: ``criteria_met`` and ``explanation``), and None; or, where an
    item was never graded (``criteria_met`` None, its ``error``), the row with the error
    and every item as it ended, and that error."""
    example = example_of(case)
    items = []
    for item, grade in zip(example.rubrics, grades):
        said = {"criterion": item.criterion, "points": item.points, "tags": list(item.tags)}
        items.append({**said, **grade})  # criteria_met and explanation, or its error
    failed = [(n, g["error"]) for n, g in enumerate(grades) if g["criteria_met"] is None]
    row: dict[str, Any] = {}
    error = None
    if failed:
        n, first = failed[0]
        error = f"{len(failed)} of {len(grades)} rubric items not graded (item_{n}: {first})"
        row["error"] = error
    else:
        row["score"] = calculate_score(example.rubrics, [bool(g["criteria_met"]) for g in grades])
    row.update(
        rubric_items=items,
        prompt=[dict(m) for m in example.prompt],
        completion=[{"role": "assistant", "content": answer}],
        completion_id=completion_id(example.prompt_id, answer),
        example_tags=list(example.example_tags),
    )
    return row, error


def completion_id(prompt_id: str, answer: str) -> str:
    """simple-evals' ``completion_id``: SHA-256 of the prompt id and the response."""
    return hashlib.sha256((prompt_id + answer).encode()).hexdigest()


_FENCE = re.compile(r"^```json\s*|\s*```$")


def parse_grade(text: str) -> dict[str, Any] | None:
    """A grader's reply read as ``parse_json_to_dict`` reads it (markdown fence stripped,
    JSON); None unless ``criteria_met`` is exactly true or false — where simple-evals asks
    again, for ever, batchbench asks again up to ``--max-attempts``."""
    try:
        found = json.loads(_FENCE.sub("", text.strip()))
    except (ValueError, RecursionError):
        return None
    if not isinstance(found, dict) or found.get("criteria_met") not in (True, False):
        return None
    if not isinstance(found["criteria_met"], bool):  # 1 == True, but it is not a boolean
        return None
    return {
        "criteria_met": found["criteria_met"],
        "explanation": found.get("explanation", "No explanation provided"),
    }
