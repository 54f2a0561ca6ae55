"""A scored result line is byte for byte what the reference writes for its row.

The oracle is ``json.dumps(row, ensure_ascii=False)`` of the full row (the reference's
own call), with the decisions written out item by item from the case's rubric; the
lines are batchbench's, assembled from the decided frame. Seeded hostile text: quotes,
backslashes, every control character, line and paragraph separators, non-BMP
characters, in ids, names and answers; points as ints, floats and huge ints.
"""

from __future__ import annotations

import json
import random

import pytest

from batchbench.bench.decisions import lay_verdicts
from batchbench.bench.scoring import rubric_frame
from batchbench.engine import lines

ALPHABET = [
    '"',
    "\\",
    "\u2028",
    "\u2029",
    "é",
    "😀",
    "\x7f",
    "a",
    "Z",
    " ",
    "/",
    *map(chr, range(32)),
]


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) if rng.random() < 0.5 else "x" for _ in range(n))


def _cases(rng: random.Random, hostile: bool) -> list[dict]:
    cases = []
    for c in range(20):
        items = []
        for i in range(rng.randint(1, 7)):
            points = rng.choice([3, -2, 1, 0, 2.5, -0.1, 10**20, 1e-05, 7.0])
            item_id = (_text(rng, 6) if hostile else "item") + f"_{c}_{i}"
            items.append({"item_id": item_id, "text": "t", "points": points})
        case_id = (_text(rng, 5) if hostile else "case") + f"-{c}"
        cases.append({"case_id": case_id, "grading_method": "points_rubric", "rubric_items": items})
    return cases


@pytest.mark.parametrize("hostile", [False, True], ids=["plain ids", "hostile ids"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk", [100_000, 5], ids=["one slice", "slices of 5 rows"])
def test_a_scored_line_is_json_dumps_of_its_row(seed, hostile, chunk, monkeypatch):
    monkeypatch.setattr(lines, "CHUNK_ROWS", chunk)  # 5: slices end mid-case but for the rule
    rng = random.Random(seed)
    cases = _cases(rng, hostile)
    verdicts = {
        c["case_id"]: {it["item_id"]: rng.random() < 0.5 for it in c["rubric_items"]} for c in cases
    }
    laid = {c: list(v.values()) for c, v in verdicts.items()}  # (built in rubric order)
    decided = lay_verdicts(laid, rubric_frame(cases))
    texts = lines.decisions(decided)
    assert list(texts) == [c["case_id"] for c in cases]
    for case in cases:
        row = {
            "protocol_version": "bedside-bench-grading-v1",
            "case_id": case["case_id"],
            "benchmark": _text(rng, 4),
            "grading_method": case["grading_method"],
            "answer_model": _text(rng, 3),
            "judge_model": "judge",
            "answer_reasoning_effort": rng.choice([None, "high"]),
            "answer_temperature": rng.choice([None, 1]),
            "judge_temperature": rng.choice([None, 0]),
            "started_at": "2026-12-05T10:00:00+00:00",
            "finished_at": "2026-12-05T10:00:01.250000+00:00",
            "elapsed_seconds": rng.choice([1.25, 0.0, 86400.0, 1e-06]),
            "answer": _text(rng, 40) + "\n\nline two",
            "decisions": [],
            "score": rng.choice([0.5, 1.0, 0.0, 1 / 3, float("nan")]),
            "score_components": rng.choice(
                [
                    {
                        "matched_signed_points": 0,
                        "available_positive_points": 4.5,
                        "raw_score": 0.1,
                    },
                    {
                        "f1_weighted": 0.6667,
                        "precision_weighted": None,
                        "recall_weighted": 0.0,
                        "severe_rate": 1.0,
                    },
                ]
            ),
        }
        full = dict(row)
        matched = verdicts[case["case_id"]]
        full["decisions"] = [
            {"item_id": it["item_id"], "points": it["points"], "matched": matched[it["item_id"]]}
            for it in case["rubric_items"]
        ]
        expected = json.dumps(full, ensure_ascii=False)
        assert lines.line(row, texts[case["case_id"]]) == expected


def test_numbers_are_written_as_json_dumps_writes_them():
    values = [
        0,
        -7,
        10**30,
        0.1,
        1e-05,
        1e16,
        -0.0,
        5e-324,
        float("inf"),
        float("nan"),
        None,
        True,
        False,
    ]
    assert [lines.number(v) for v in values] == [json.dumps(v) for v in values]
