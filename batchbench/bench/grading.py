"""Which benchmark a run grades, and what that decides — one record a benchmark, found by
the protocol version its run records, so the engine holds no ``if healthbench``:

* what the answer model is asked, and the judge of each answer;
* how many judge requests an answer takes: BedsideBench's judge marks every rubric item
  in one reply; HealthBench's grader is asked once per item (simple-evals' rule), each
  item a *part* of the case's judging;
* how a judge reply reads: a verdict per rubric item it covers, or the error that asks
  it again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from ..errors import ConfigError, JudgeReplyError
from . import healthbench, healthbench_meta, protocol
from .dataset import Case, Dataset, load_dataset
from .protocol import Prompt


@dataclass(frozen=True)
class Sampling:
    """What a stage's every request is sent with (the provenance record says it)."""

    temperature: float
    max_tokens: int
    json_mode: bool


@dataclass(frozen=True)
class Grading:
    name: str
    protocol_version: str
    per_item: bool  # one judge request per rubric item (a part each), not one per answer
    answer_prompt: Callable[[Case, str | None], Prompt]  # the case, the reasoning effort
    judge_prompt: Callable[[Case, str, int], Prompt]  # the case, its answer, the part
    read_judge: Callable[[Case, int, str], list[bool]]  # a part's reply → its items' verdicts
    default_judge: str | None  # the judge model when none is named (None: the CLI's)
    sampling: dict[str, Sampling]  # by stage
    judge_reply: Callable[[Case, int], str]  # a valid reply to a part, for the dry run's count
    given: str | None = None  # a case's field holding an answer it gives (graded instead)
    always_given: bool = False  # the dataset's answers are what it grades (a meta-eval)
    given_label: str | None = None  # the answer model's name where they are graded
    # a case judged part by part: its row's fields from each part's grade, and its error
    part_row: Callable[[Case, list[dict[str, Any]], str], tuple[dict[str, Any], str | None]] = (
        lambda case, grades, answer: ({}, None)
    )

    def parts(self, case: Case) -> int:
        """Judge requests one answer takes (one pass)."""
        return len(case["rubric_items"]) if self.per_item else 1

    def check_passes(self, judge_passes: int) -> None:
        """``--judge-passes K``: K passes of one judge body, not of a grader per item."""
        if self.per_item and judge_passes > 1:
            raise ConfigError(
                f"--judge-passes {judge_passes}: {self.name} asks its grader once per rubric"
                " item; more passes of it are not built"
            )

    def giving_answers(self, cases: Sequence[Case]) -> list[Case]:
        """``--physician-completions``: the cases that give an answer of their own (as
        simple-evals grades only those); one line when there are none."""
        if self.given is None:
            raise ConfigError(
                f"--physician-completions: {self.name} gives no answers of its own"
                " (HealthBench's ideal completions do)"
            )
        field = self.given
        kept = [c for c in cases if isinstance(cast(dict[str, Any], c).get(field), str)]
        if not kept:
            raise ConfigError("--physician-completions: no chosen example has an ideal completion")
        return kept

    def items_of(self, case: Case, part: int) -> list[str]:
        """The rubric item ids a part's reply decides."""
        ids = [it["item_id"] for it in case["rubric_items"]]
        return ids[part - 1 : part] if self.per_item else ids


def _bedside_judge(case: Case, part: int, content: str) -> list[bool]:
    return protocol.judge_matches(content, [it["item_id"] for it in case["rubric_items"]])


def _bedside_reply(case: Case, part: int) -> str:
    decisions = [{"item_id": it["item_id"], "matched": True} for it in case["rubric_items"]]
    return json.dumps({"decisions": decisions}, separators=(",", ":"))


# A grade as graders write them: fenced JSON, a sentence or two of explanation.
_GRADE = (
    '```json\n{\n  "explanation": "The response advises seeing a clinician promptly if the'
    " fever persists beyond three days or warning signs appear, which meets the rubric item's"
    ' criteria.",\n  "criteria_met": true\n}\n```'
)


def _healthbench_judge(case: Case, part: int, content: str) -> list[bool]:
    grade = healthbench.parse_grade(content)
    if grade is None:
        raise JudgeReplyError(
            protocol.error_text(
                "the grader's reply has no criteria_met true or false", "ValueError"
            )
        )
    return [bool(grade["criteria_met"])]


BEDSIDE = Grading(
    "BedsideBench",
    protocol.PROTOCOL_VERSION,
    per_item=False,
    answer_prompt=lambda case, effort: protocol.answer_prompt(case, reasoning_effort=effort),
    judge_prompt=lambda case, answer, part: protocol.judge_prompt(case, answer),
    read_judge=_bedside_judge,
    default_judge=None,
    judge_reply=_bedside_reply,
    sampling={
        "answers": Sampling(
            protocol.ANSWER_TEMPERATURE, protocol.ANSWER_MAX_COMPLETION_TOKENS, False
        ),
        "judges": Sampling(protocol.JUDGE_TEMPERATURE, protocol.JUDGE_MAX_COMPLETION_TOKENS, True),
    },
)
HEALTHBENCH = Grading(
    "HealthBench",
    healthbench.PROTOCOL_VERSION,
    per_item=True,
    answer_prompt=lambda case, effort: healthbench.answer_prompt(case, reasoning_effort=effort),
    judge_prompt=healthbench.grader_prompt,
    read_judge=_healthbench_judge,
    default_judge=healthbench.GRADER_MODEL,
    judge_reply=lambda case, part: _GRADE,
    given="ideal_completion",
    given_label="physician-completions",
    sampling={  # simple-evals' ChatCompletionSampler, for the answers and the grader
        stage: Sampling(healthbench.TEMPERATURE, healthbench.MAX_TOKENS, False)
        for stage in ("answers", "judges")
    },
    part_row=healthbench.part_row,
)
HEALTHBENCH_META = Grading(
    "HealthBench meta-eval",
    healthbench_meta.PROTOCOL_VERSION,
    per_item=True,
    answer_prompt=lambda case, effort: healthbench.answer_prompt(case, reasoning_effort=effort),
    judge_prompt=healthbench_meta.grader_prompt,
    read_judge=_healthbench_judge,
    default_judge=healthbench.GRADER_MODEL,
    judge_reply=lambda case, part: _GRADE,
    given="completion",
    always_given=True,
    given_label="meta-eval-completions",
    sampling=HEALTHBENCH.sampling,
    part_row=healthbench_meta.part_row,
)
GRADINGS: Sequence[Grading] = (BEDSIDE, HEALTHBENCH, HEALTHBENCH_META)


def grading_of(protocol_version: str) -> Grading:
    for grading in GRADINGS:
        if grading.protocol_version == protocol_version:
            return grading
    known = ", ".join(g.protocol_version for g in GRADINGS)
    raise ConfigError(f"protocol {protocol_version!r} is not one of {known}")


DatasetFormat = Literal["bedside-bench", "healthbench", "healthbench-meta"]
FORMATS: tuple[DatasetFormat, ...] = ("bedside-bench", "healthbench", "healthbench-meta")


def dataset_format(path: Path, named: str | None = None) -> DatasetFormat:
    """The format named (``--dataset-format``), else what the path is: a HealthBench JSONL
    by its first line, anything else a BedsideBench checkout."""
    if named is None:
        if healthbench_meta.is_meta(path):
            return "healthbench-meta"
        return "healthbench" if healthbench.is_healthbench(path) else "bedside-bench"
    for known in FORMATS:
        if named == known:
            return known
    raise ConfigError(f"--dataset-format {named!r}: {' or '.join(FORMATS)}")


def grading_for(found: DatasetFormat) -> Grading:
    """How a dataset of this format is graded."""
    return {"healthbench": HEALTHBENCH, "healthbench-meta": HEALTHBENCH_META}.get(found, BEDSIDE)


def load(path: Path, named: str | None = None) -> tuple[Dataset, Grading]:
    """A dataset of either benchmark as the engine carries one, and how it is graded."""
    if grading_for(dataset_format(path, named)) is BEDSIDE:
        return load_dataset(path), BEDSIDE
    grading = grading_for(dataset_format(path, named))
    if grading is HEALTHBENCH_META:
        found, digest = healthbench_meta.load_meta(path)
        return Dataset(path, tuple(found), (healthbench_meta.BENCHMARK,), digest), grading
    hb = healthbench.load_healthbench(path)
    cases = tuple(healthbench.as_case(e) for e in hb.examples)
    return Dataset(path, cases, (healthbench.BENCHMARK,), hb.sha256), HEALTHBENCH
