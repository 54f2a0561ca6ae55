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
from datetime import datetime, timezone

import pytest
from support import reference

from batchbench.bench.decisions import Judged, lay_verdicts
from batchbench.bench.scoring import rubric_frame
from batchbench.engine import lines
from batchbench.engine.collection import Outcome
from batchbench.engine.event_records import Line
from batchbench.engine.rows import rows_for
from batchbench.engine.runconfig import RunConfig
from batchbench.engine.state import fold
from batchbench.engine.submission import Submission

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
        items[0]["points"] = 3  # a points rubric needs a positive item
        case_id = (_text(rng, 5) if hostile else "case") + f"-{c}"
        cases.append(
            {
                "case_id": case_id,
                "benchmark": _text(rng, 4) if hostile else "bench",
                "grading_method": rng.choice(["points_rubric", "f1_weighted_rubric"]),
                "rubric_items": items,
            }
        )
    return cases


def _row(rng: random.Random, case: dict, matched: dict[str, bool], **known) -> dict:
    """The reference's row for a scored case, as its runner builds it: scored by the
    plain-Python rule (``support.reference``), decisions item by item from the rubric."""
    score, components = reference.score_case(case, {i for i, m in matched.items() if m})
    return {
        "protocol_version": "bedside-bench-grading-v1",
        "case_id": case["case_id"],
        "benchmark": case["benchmark"],
        "grading_method": case["grading_method"],
        **known,
        "decisions": [
            {"item_id": it["item_id"], "points": it["points"], "matched": matched[it["item_id"]]}
            for it in case["rubric_items"]
        ],
        "score": score,
        "score_components": components,
    }


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


@pytest.mark.parametrize("hostile", [False, True], ids=["plain ids", "hostile ids"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk", [100_000, 5], ids=["one slice", "slices of 5 rows"])
def test_a_scored_line_is_json_dumps_of_its_row(seed, hostile, chunk, monkeypatch):
    """rows_for, the collection's own writer, against ``json.dumps`` of the reference's row."""
    monkeypatch.setattr(lines, "CHUNK_ROWS", chunk)  # 5: slices end mid-case but for the rule
    rng = random.Random(seed)
    cases = _cases(rng, hostile)
    ids = [c["case_id"] for c in cases]
    verdicts = {
        c["case_id"]: {it["item_id"]: rng.random() < 0.5 for it in c["rubric_items"]} for c in cases
    }
    for n, value in enumerate((False, True, False, True)):  # nothing matched, all matched
        verdicts[cases[n]["case_id"]] = dict.fromkeys(verdicts[cases[n]["case_id"]], value)
    laid = {c: list(v.values()) for c, v in verdicts.items()}  # (built in rubric order)
    judged = Judged(lay_verdicts(laid, rubric_frame(cases)), laid, {})
    judge_sent = {i: rng.random() < 0.5 for i in ids}
    sub = Submission(
        "judges-0001", "judges", 1, "x", [Line(i, 1, judge_sent[i], f"judge:{i}") for i in ids], 0.0
    )
    state = fold(ids, [])
    for cs in state.cases.values():
        cs.started = rng.choice([None, 1796200000.0, 1796200000.125])
        cs.answers.used_temperature = rng.choice([None, True, False])
    outcomes = {f"judge:{i}": Outcome(i, "ok") for i in ids}
    effort = rng.choice([None, "high", _text(rng, 3)])
    config = RunConfig("r", _text(rng, 3), _text(rng, 3), effort, "", "", "", {}, ids)
    answers = {i: _text(rng, 40) + "\n\nline two" for i in ids}
    now = 1796200012.25
    written = rows_for(
        sub,
        outcomes,
        judged,
        {c["case_id"]: c for c in cases},
        config,
        effort,
        state,
        answers.__getitem__,
        now,
    )
    assert [case_id for case_id, _ in written] == ids
    for case, (_, line) in zip(cases, written):
        cs = state.cases[case["case_id"]]
        started = cs.started or now
        row = _row(
            rng,
            case,
            verdicts[case["case_id"]],
            answer_model=config.answer_model,
            judge_model=config.judge_model,
            answer_reasoning_effort=effort,
            answer_temperature=1 if cs.answers.used_temperature else None,
            judge_temperature=0 if judge_sent[case["case_id"]] else None,
            started_at=_stamp(started),
            finished_at=_stamp(now),
            elapsed_seconds=(
                datetime.fromtimestamp(now, tz=timezone.utc)
                - datetime.fromtimestamp(started, tz=timezone.utc)
            ).total_seconds(),
            answer=answers[case["case_id"]],
        )
        assert line == json.dumps(row, ensure_ascii=False)


def test_a_template_writes_any_row_as_json_dumps_does():
    """Shared values (written once) and per-line texts, hostile keys' values included."""
    rng = random.Random(7)
    for _ in range(50):
        row = {
            "a": _text(rng, 6) + rng.choice(["", "%(d)s", "%%", "%s"]),  # % formats
            "b%s": rng.choice([None, 1, 0.1, 1e-05, float("nan"), _text(rng, 3)]),
            "c": {"x": rng.choice([0, 2.5, None]), "y": 1.0},
            "d": [],
            "e": rng.choice([True, False]),
        }
        shared = {k: row[k] for k in rng.sample(["a", "b%s", "c", "e"], 2)}
        template = lines.Template(row, shared, lists=("d",))
        items = [{"i": _text(rng, 2)} for _ in range(rng.randint(0, 3))]
        texts = {k: lines.value(v) for k, v in row.items() if k not in shared and k != "d"}
        texts["d"] = ", ".join(json.dumps(i, ensure_ascii=False) for i in items)
        expected = json.dumps({**row, "d": items}, ensure_ascii=False)
        assert template.line(texts) == expected
        assert template.fill(tuple(texts[k] for k in template.keys)) == expected
        before, after = template.split("d")  # the list's text put in between
        assert before.line(texts) + texts["d"] + after.line(texts) == expected


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
