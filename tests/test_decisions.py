"""Judge replies checked in bulk agree, reply for reply, with the strict parser.

The fast path certifies canonical replies on their JSON bytes; everything else
goes to ``protocol.parse_judge_reply``. These tests feed both the same replies —
hand-picked tricky ones and thousands of random mutations of canonical ones —
and require the same decisions and the same error messages.
"""

from __future__ import annotations

import json
import random

import msgspec
import pytest

from batchbench import decisions as dec
from batchbench import protocol
from batchbench.errors import JudgeReplyError

IDS = ["h_0", "h_1", "h_2"]
GOOD = [{"item_id": i, "matched": k % 2 == 0} for k, i in enumerate(IDS)]


def _case(case_id, ids):
    return {
        "case_id": case_id,
        "grading_method": "points_rubric",
        "rubric_items": [{"item_id": i, "text": "t", "points": 1} for i in ids],
    }


def _strict(raw: bytes, ids):
    """What the reference-strict parser makes of a reply's JSON text."""
    content = json.loads(bytes(raw))
    try:
        return protocol.parse_judge_reply(content if isinstance(content, str) else None, ids), None
    except JudgeReplyError as exc:
        return None, str(exc)


def _assert_agree(cases, raws):
    key = dec.JudgeKey(cases)
    decided, invalid = dec.judge_decisions([c["case_id"] for c in cases], raws, key)
    got: dict[str, dict[str, bool]] = {}
    for case_id, item_id, matched in decided.select("case_id", "item_id", "matched").iter_rows():
        got.setdefault(case_id, {})[item_id] = matched
    for case, raw in zip(cases, raws):
        ids = [it["item_id"] for it in case["rubric_items"]]
        found, error = _strict(raw, ids)
        name = case["case_id"]
        if error is not None:
            assert invalid.get(name) == error and name not in got, (name, raw)
        else:
            assert got.get(name) == found and name not in invalid, (name, raw)
            # decided rows of a case come in rubric order
            assert list(got[name]) == ids
    return decided, invalid


def _dumps(reply, compact=False, **kw):
    text = json.dumps(reply, separators=(",", ":") if compact else None, **kw)
    return json.dumps(text).encode()


def test_hand_picked_replies_agree_with_the_strict_parser():
    replies = {
        "canonical": _dumps({"decisions": GOOD}),
        "compact": _dumps({"decisions": GOOD}, compact=True),
        "reordered keys": _dumps(
            {"decisions": [{"matched": d["matched"], "item_id": d["item_id"]} for d in GOOD]}
        ),
        "extra keys": _dumps({"note": "x", "decisions": [dict(d, why="y") for d in GOOD]}),
        "shuffled": _dumps({"decisions": GOOD[::-1]}),
        "not json": json.dumps("{decisions:").encode(),
        "list": _dumps(GOOD),
        "no decisions": _dumps({"d": GOOD}),
        "string bool": _dumps({"decisions": [dict(GOOD[0], matched="false"), *GOOD[1:]]}),
        "number bool": _dumps({"decisions": [dict(GOOD[0], matched=1), *GOOD[1:]]}),
        "duplicate": _dumps({"decisions": [*GOOD, GOOD[0]]}),
        "missing": _dumps({"decisions": GOOD[:2]}),
        "extra id": _dumps({"decisions": [*GOOD, {"item_id": "h_9", "matched": True}]}),
        "other case's id": _dumps({"decisions": [*GOOD[:2], {"item_id": "g_2", "matched": True}]}),
        "pretty": _dumps({"decisions": GOOD}, indent=2),
        "trailing space": json.dumps(json.dumps({"decisions": GOOD}) + " ").encode(),
        "leading newline": json.dumps("\n" + json.dumps({"decisions": GOOD})).encode(),
        "escaped letter": _dumps({"decisions": GOOD}).replace(b"decisions", b"decision\\u0073"),
        "escaped slash": _dumps({"decisions": GOOD}).replace(b"h_1", b"h\\/1"),
        "capital True": _dumps({"decisions": GOOD}).replace(b"true", b"True", 1),
        "falsy": _dumps({"decisions": GOOD}).replace(b"false", b"falsy"),
        "tru": _dumps({"decisions": GOOD}).replace(b"true", b"tru ", 1),
        "null": b"null",
        "not a string": b"{}",
        "empty": b'""',
        "empty list": _dumps({"decisions": []}),
    }
    cases = [_case(name, IDS) for name in replies]
    _, invalid = _assert_agree(cases, list(replies.values()))
    assert {"canonical", "compact", "reordered keys", "shuffled", "pretty"}.isdisjoint(invalid)
    assert "not json" in invalid and "falsy" in invalid


@pytest.mark.parametrize(
    "ids",
    [
        ["x true}", "y"],  # an id holding a flag's spelling
        ["a_false", "b_1"],
        ['q"uote', "b"],
        ["back\\slash", "c"],
        ["caf\u00e9", "d"],
        ["tab\there", "e"],
    ],
)
def test_ids_that_could_fool_the_bytes_go_to_the_strict_parser(ids):
    """For such ids a swapped flag could hide in the id: the bulk check must not be used."""
    key = dec.JudgeKey([_case("c", ids)])
    assert not key.plain[0]
    reply = {"decisions": [{"item_id": i, "matched": k == 0} for k, i in enumerate(ids)]}
    forged = {"decisions": [{"item_id": i.replace("true", "false"), "matched": True} for i in ids]}
    cases = [_case("c", ids), _case("d", ids)]
    _assert_agree(cases, [_dumps(reply), _dumps(forged)])


def _mutate(rng: random.Random, text: str) -> str:
    kind = rng.randrange(9)
    if kind == 0 and text:  # delete a character
        i = rng.randrange(len(text))
        return text[:i] + text[i + 1 :]
    if kind == 1:  # insert one
        i = rng.randrange(len(text) + 1)
        return text[:i] + rng.choice('ft"{}[],: ex_0') + text[i:]
    if kind == 2 and text:  # replace one
        i = rng.randrange(len(text))
        return text[:i] + rng.choice('tfue"}:, 1_') + text[i + 1 :]
    if kind == 3:  # flip one flag's spelling
        if rng.random() < 0.5:
            return text.replace("true", "false", 1)
        return text.replace("false", "true", 1)
    if kind == 4:  # swap two objects
        parts = text.split("}, {") if "}, {" in text else text.split("},{")
        if len(parts) > 2:
            i, j = rng.sample(range(1, len(parts) - 1), 2) if len(parts) > 3 else (1, 1)
            parts[i], parts[j] = parts[j], parts[i]
            return ("}, {" if "}, {" in text else "},{").join(parts)
    if kind == 5:  # drop an object's id digit (another item's id, or none)
        return text.replace('_1"', '_"', 1)
    if kind == 6:  # a misspelt flag
        return text.replace("false", "fals", 1).replace("true", "ture", 1)
    return text  # unchanged: must be certified


def test_random_mutations_agree_with_the_strict_parser(monkeypatch):
    """Thousands of replies, most canonical, some broken in one place; small chunks so the
    bulk check's localisation of a bad reply among good ones is exercised too."""
    monkeypatch.setattr(dec, "CHUNK_BYTES", 4096)
    rng = random.Random(20261202)
    cases, raws = [], []
    for c in range(3000):
        prefix = f"{rng.getrandbits(128):032x}"
        ids = [f"{prefix}_{i}" for i in range(rng.randrange(1, 30))]
        case = _case(f"case{c}", ids)
        reply = {"decisions": [{"item_id": i, "matched": rng.random() < 0.5} for i in ids]}
        text = json.dumps(reply, separators=(",", ":") if rng.random() < 0.3 else None)
        if rng.random() < 0.4:
            text = _mutate(rng, text)
        raw = json.dumps(text).encode()
        if rng.random() < 0.02:  # the same text, escaped differently
            raw = raw.replace(b"d", b"\\u0064", 1)
        cases.append(case)
        raws.append(raw)
    decided, invalid = _assert_agree(cases, raws)
    assert 1000 < decided["case"].n_unique() < 3000 and invalid  # both paths were taken


def test_zero_copy_views_from_a_file_are_read_the_same(tmp_path):
    """Replies come as msgspec Raw views into the downloaded file, not as bytes."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"".join(b'{"c": ' + _dumps({"decisions": GOOD}) + b"}\n" for _ in range(3)))
    lines = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode_lines(path.read_bytes())
    raws = [line["c"] for line in lines]
    cases = [_case(f"c{i}", IDS) for i in range(3)]
    decided, invalid = _assert_agree(cases, raws)
    assert decided.height == 9 and not invalid
