"""Runs against the emulator as the tests make them, and what they read back."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cli import SAMPLE, run_cli

KEY = "sk-test-marker-7f3a9c"
ROW_KEYS = [
    "protocol_version",
    "case_id",
    "benchmark",
    "grading_method",
    "answer_model",
    "judge_model",
    "answer_reasoning_effort",
    "answer_temperature",
    "judge_temperature",
    "started_at",
    "finished_at",
    "elapsed_seconds",
    "answer",
    "decisions",
    "score",
    "score_components",
]
ERROR_KEYS = [*ROW_KEYS[:6], "finished_at", "error"]


def poll_interval(emu: Any) -> str:
    """A poll every quarter of the emulator's phase (never under 0.05 s): on the test's
    clock the waits cost nothing, but each poll is real requests, and a run polling
    every 0.05 s through 5-second phases made a hundred rounds of them per batch."""
    return str(max(0.05, emu.store.settings.latency / 4))


def run_args(emu: Any, tmp_path: Path, fixture_dir: Path, *extra: str, cap: int = 40) -> list[str]:
    """A run named ans-model (smoke or not) in tmp_path/jobs, against the emulator."""
    return [
        "run",
        "--run",
        "ans-model",
        "--answer-model",
        "ans-model",
        "--judge-model",
        "judge-model",
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "--dataset",
        str(fixture_dir),
        "--base-url",
        emu.base_url,
        "--poll-interval",
        poll_interval(emu),
        "--max-requests-per-batch",
        str(cap),
        *extra,
    ]


def env() -> dict[str, str]:
    return {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": ""}


def cancel_cli(emu: Any, tmp_path: Path) -> Any:
    """``batchbench cancel ans-model`` for a run made with :func:`run_args`."""
    return run_cli(
        "cancel",
        "ans-model",
        "--jobs-dir",
        str(tmp_path / "jobs"),
        "--base-url",
        emu.base_url,
        env=env(),
    )


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def journal(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "journal.jsonl").read_text().splitlines()]


def judge_replies(run_dir: Path) -> dict[str, dict[str, bool]]:
    """The decisions the emulator returned, read back from the raw judge files (OpenAI's
    format: the judges' service)."""
    out = {}
    for path in (run_dir / "raw").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if "custom_id" not in rec:
                continue  # another provider's answers file
            request = parse_id(rec["custom_id"])
            if request.stage != "judges" or rec.get("error") is not None:
                continue
            if (rec.get("response") or {}).get("status_code") != 200:
                continue
            content = rec["response"]["body"]["choices"][0]["message"]["content"]
            try:
                reply = json.loads(content)
                decisions = {d["item_id"]: d["matched"] for d in reply["decisions"]}
            except (ValueError, KeyError, TypeError):
                continue
            out[request.case_id] = decisions
    return out


def duplicates(ledger: dict) -> tuple[list[str], list[str]]:
    """Submissions created more than once and lines executed more than once.

    An OpenAI batch names its submission in its metadata; an Anthropic one carries
    none, so a request id held by two batches is a submission made twice.
    """
    subs = Counter(  # a submission is its run's: runs of a group share submission names
        f"{b['metadata'].get('batchbench_run_id', '')[:8]}/{b['metadata']['batchbench_sub']}"
        for b in ledger["batches"]
        if b.get("metadata")
    )
    held = Counter(cid for b in ledger["batches"] for cid in b.get("custom_ids", ()))
    lines = Counter(e["custom_id"] for e in ledger["executions"])
    made_twice = [s for s, n in subs.items() if n > 1] + [c for c, n in held.items() if n > 1]
    return made_twice, [c for c, n in lines.items() if n > 1]


def assert_no_duplicates(emu: Any) -> None:
    subs, lines = duplicates(emu.ledger())
    assert subs == [] and lines == [], (subs, lines)


def normalised(run_dir: Path) -> tuple[list[dict], dict]:
    """Results and summary without the clock's fields, which differ between runs."""
    rows = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows.append(
            {
                k: v
                for k, v in row.items()
                if k not in ("started_at", "finished_at", "elapsed_seconds")
            }
        )
    summary = json.loads((run_dir / "results.summary.json").read_text())
    summary.pop("started_at", None)  # (a HealthBench summary has neither)
    summary.pop("finished_at", None)
    return sorted(rows, key=lambda r: r["case_id"]), summary


def http_config(emu: Any, **settings: Any) -> None:
    """Change the emulator's settings over HTTP, as a rehearsal would."""
    req = urllib.request.Request(
        emu.url + "/_emulator/config", method="POST", data=json.dumps(settings).encode()
    )
    urllib.request.urlopen(req, timeout=10).read()


_ID = re.compile(
    r"^(?P<token>[0-9a-f]{8})-(?P<stage>[aj])(?P<attempt>\d+)(?:p(?P<pass>\d+))?[-_](?P<case>.+)$"
)
# Runs made before 0.3 (their journals still resume): OpenAI's ids carried no token.
_OLD_ID = re.compile(
    r"^(?P<stage>answer|judge)(?P<pass>\d*):(?P<case>[^:]+)(?::(?P<attempt>\d+))?$"
)


@dataclass(frozen=True)
class RequestId:
    """A request id as the README documents it: ``<run token>-<a|j><attempt>[p<pass>]-<case>``
    (an old OpenAI run's: ``answer:<case>[:<attempt>]``, ``judge[<pass>]:<case>[:<attempt>]``)."""

    token: str | None
    stage: str  # "answers" or "judges"
    attempt: int
    judge_pass: int
    case_id: str  # or its SHA-256, when the case id does not fit


def parse_id(custom_id: str) -> RequestId:
    found = _ID.match(custom_id)
    if found:
        stage = "answers" if found["stage"] == "a" else "judges"
        return RequestId(
            found["token"], stage, int(found["attempt"]), int(found["pass"] or 1), found["case"]
        )
    old = _OLD_ID.match(custom_id)
    assert old, f"not a request id of the documented form: {custom_id!r}"
    return RequestId(
        None,
        "answers" if old["stage"] == "answer" else "judges",
        int(old["attempt"] or 1),
        int(old["pass"] or 1),
        old["case"],
    )


def varied_sample(tmp_path: Path) -> Path:
    """The bundled sample with prompts of different lengths (its own are all alike, and
    replies to prompts of one length cannot be told apart by their counts): the n-th case
    asks its question n times over."""
    root = tmp_path / "varied"
    shutil.copytree(SAMPLE, root)
    for n, path in enumerate(sorted(root.glob("data/*/cases/*.json"))):
        case = json.loads(path.read_text())
        case["prompt"] = " ".join([case["prompt"]] * (1 + n))
        digest = hashlib.md5(case["prompt"].encode()).hexdigest()  # the dataset's item ids
        for i, item in enumerate(case["rubric_items"]):
            item["item_id"] = f"{digest}_{i}"
        path.write_text(json.dumps(case))
    return root


def tool_neutral(found: dict[str, Any]) -> dict[str, Any]:
    """A calibration's figures without what depends on the labelling tool rather than
    on the verdicts: its blinding statement and the time it kept per label."""
    rating = dict(found.get("rating") or {})
    for key in ("blinding", "median_seconds", "timed_labels"):
        rating.pop(key, None)
    rating["raters"] = [
        {k: v for k, v in r.items() if k != "median_seconds"} for r in rating.get("raters", [])
    ]
    return {**found, "rating": rating} if "rating" in found else found
