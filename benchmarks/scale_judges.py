"""Reconcile and score 1,000,000 judge decisions: batchbench's frames vs a per-line baseline.

Generates 40,000 cases of 25 rubric items and their judge output lines (the
Batch API's line format, shuffled, in 4 files), then, each in its own process so
peak memory is its own:

* batchbench, exactly what the pipeline runs on a collected judge file:
  ``outputs.read_outputs`` → ``collection.collect`` (classification, each reply
  through the one strict parser, decisions joined to the rubric) →
  ``engine.rows.rows_for`` (scores and the reference's rows); the run's rubric frame
  is built once, outside the timing, and its time printed;
* baseline: per line ``json.loads`` of the line and of the reply, dict checks,
  plain-Python scoring (``tests/support/reference.py``), the reference row per case.

Both sides end where a run ends (#52.1): the reference-format ``results.jsonl`` written
and fsynced — batchbench by ``bench.results.append_lines`` (the run's own writer), the
baseline by ``json.dumps`` per row and one fsync at the end. The pipeline's clock
stands at 0, so the files are comparable; prints both times, the ratio, each peak RSS,
and checks the files are byte-identical (SHA-256).
The bar (#52.1): 3 × the baseline, peak memory under 1 GiB.

    python benchmarks/scale_judges.py [--cases 40000] [--items 25] [--files 4]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # support.reference
POINTS = [3, 2, 1, 0, -1, -2, -3, 1, 2]


def make_cases(n: int, items: int) -> list[dict]:
    cases = []
    for c in range(n):
        case_id = f"{c:032x}"
        digest = hashlib.md5(case_id.encode()).hexdigest()
        method = "f1_weighted_rubric" if c % 5 == 0 else "points_rubric"
        rubric = [
            {"item_id": f"{digest}_{i}", "text": "t", "points": POINTS[(c + i) % 9]}
            for i in range(items)
        ]
        if method == "points_rubric":
            rubric[0]["points"] = 2
        cases.append(
            {
                "case_id": case_id,
                "benchmark": f"b{c % 10}",
                "grading_method": method,
                "prompt": "p",
                "rubric_items": rubric,
                "split": "test",
            }
        )
    return cases


def write_outputs(cases: list[dict], folder: Path, files: int, seed: int = 1) -> list[Path]:
    rng = random.Random(seed)
    lines = []
    for case in cases:
        decisions = [
            {"item_id": it["item_id"], "matched": rng.random() < 0.5} for it in case["rubric_items"]
        ]
        body = {
            "id": f"chatcmpl-{case['case_id'][:12]}",
            "object": "chat.completion",
            "created": 1796200000,
            "model": "judge",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": json.dumps({"decisions": decisions}),
                        "refusal": None,
                    },
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": 1500,
                "completion_tokens": 300,
                "total_tokens": 1800,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        }
        lines.append(
            json.dumps(
                {
                    "id": f"batch_req_{case['case_id'][:16]}",
                    "custom_id": f"judge:{case['case_id']}",
                    "response": {"status_code": 200, "request_id": "req_x", "body": body},
                    "error": None,
                }
            )
        )
    rng.shuffle(lines)
    paths = []
    per = -(-len(lines) // files)
    for f in range(files):
        path = folder / f"file-{f}.jsonl"
        path.write_text("".join(x + "\n" for x in lines[f * per : (f + 1) * per]))
        paths.append(path)
    return paths


def run_batchbench(cases: list[dict], paths: list[Path]) -> dict[str, list]:
    from batchbench.bench.results import append_lines
    from batchbench.bench.scoring import rubric_frame
    from batchbench.engine.collection import RetryLimits, collect
    from batchbench.engine.event_records import Line
    from batchbench.engine.rows import rows_for
    from batchbench.engine.runconfig import RunConfig
    from batchbench.engine.state import fold
    from batchbench.engine.submission import Submission
    from batchbench.providers.base import BatchView
    from batchbench.providers.openai_wire import OpenAIWire

    ids = [c["case_id"] for c in cases]
    by_id = {c["case_id"]: c for c in cases}
    config = RunConfig("bench", "a", "j", None, "bedside-bench-grading-v1", "", "", {}, ids)
    started = time.perf_counter()
    rubric = rubric_frame(cases)  # built once when the run starts, as the pipeline does
    items = {c["case_id"]: [it["item_id"] for it in c["rubric_items"]] for c in cases}
    key_seconds = time.perf_counter() - started
    ended = BatchView("b", "completed", "ended", "completed", files=("out",))
    sub = Submission(
        "judges-0001", "judges", 1, "x", [Line(i, 1, True, f"judge:{i}") for i in ids], 0.0
    )
    sub.view = ended
    wire = OpenAIWire()
    state = fold(ids, [])
    for case in state.cases.values():
        case.judges.sub = sub.id
    start = time.perf_counter()
    frame = wire.read_results(paths)
    result = collect(sub, frame, state, RetryLimits(6, 3, 60), rubric, items, 0.0, wire)
    del frame  # as the pipeline does: not held while the rows are written
    rows = rows_for(
        sub, result.outcomes, result.judged, by_id, config, None, state, lambda c: "A.", 0.0
    )
    out = paths[0].parent / "batchbench-results.jsonl"
    out.unlink(missing_ok=True)
    append_lines(out, rows, ids)  # the run's writer: registry order, fsynced
    elapsed = time.perf_counter() - start
    assert not result.anomalies and len(rows) == len(cases)
    return {"seconds": elapsed, "key_seconds": key_seconds, "rows": _digest(out)}


def run_baseline(cases: list[dict], paths: list[Path]) -> dict[str, list]:
    from support import reference as plain_reference

    by_id = {c["case_id"]: c for c in cases}
    start = time.perf_counter()
    rows = []
    for path in paths:
        with open(path) as fh:
            for line in fh:
                rec = json.loads(line)
                case = by_id[rec["custom_id"].split(":", 1)[1]]
                if rec["error"] is not None or not 200 <= rec["response"]["status_code"] < 300:
                    continue
                reply = json.loads(rec["response"]["body"]["choices"][0]["message"]["content"])
                found: dict[str, bool] = {}
                for d in reply["decisions"]:
                    if (
                        not isinstance(d.get("item_id"), str)
                        or not isinstance(d.get("matched"), bool)
                        or d["item_id"] in found
                    ):
                        raise ValueError(case["case_id"])
                    found[d["item_id"]] = d["matched"]
                if set(found) != {it["item_id"] for it in case["rubric_items"]}:
                    raise ValueError(case["case_id"])
                score, components = plain_reference.score_case(
                    case, {i for i, m in found.items() if m}
                )
                # The same reference row the pipeline writes (its clock stands at 0).
                stamp = datetime.fromtimestamp(0.0, tz=timezone.utc)
                rows.append(
                    {
                        "protocol_version": "bedside-bench-grading-v1",
                        "case_id": case["case_id"],
                        "benchmark": case["benchmark"],
                        "grading_method": case["grading_method"],
                        "answer_model": "a",
                        "judge_model": "j",
                        "answer_reasoning_effort": None,
                        "answer_temperature": None,
                        "judge_temperature": 0,
                        "started_at": stamp.isoformat(),
                        "finished_at": stamp.isoformat(),
                        "elapsed_seconds": (stamp - stamp).total_seconds(),
                        "answer": "A.",
                        "decisions": [
                            {
                                "item_id": it["item_id"],
                                "points": it["points"],
                                "matched": found[it["item_id"]],
                            }
                            for it in case["rubric_items"]
                        ],
                        "score": score,
                        "score_components": components,
                    }
                )
    order = {c["case_id"]: i for i, c in enumerate(cases)}
    rows.sort(key=lambda r: order[r["case_id"]])  # registry order, as a run writes them
    out = paths[0].parent / "baseline-results.jsonl"
    with open(out, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "rows": _digest(out)}


def _digest(path: Path) -> str:
    """The results file's SHA-256: the same bytes, or not."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def child(which: str, folder: Path, n: int, items: int, repeat: int) -> None:
    # Both sides in the interpreter a run's process is (``cli.main``): the cyclic
    # collector at batchbench's thresholds, not every 700 new objects.
    from batchbench.cli import GC_THRESHOLDS

    gc.set_threshold(*GC_THRESHOLDS)
    cases = make_cases(n, items)
    paths = sorted(folder.glob("file-*.jsonl"))
    fn = run_batchbench if which == "batchbench" else run_baseline
    runs = [fn(cases, paths) for _ in range(repeat)]
    result = min(runs, key=lambda r: r["seconds"])
    result["all_seconds"] = [round(r["seconds"], 3) for r in runs]
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (folder / f"{which}.json").write_text(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=40_000)
    ap.add_argument("--items", type=int, default=25)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5, help="best of N, each side")
    ap.add_argument("--child", choices=["batchbench", "baseline"])
    ap.add_argument("--folder", type=Path)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.folder, args.cases, args.items, args.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = write_outputs(make_cases(args.cases, args.items), folder, args.files)
        size = sum(p.stat().st_size for p in paths)
        results = {}
        for which in ("batchbench", "baseline"):
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    which,
                    "--folder",
                    str(folder),
                    "--cases",
                    str(args.cases),
                    "--items",
                    str(args.items),
                    "--repeat",
                    str(args.repeat),
                ],
                check=True,
            )
            results[which] = json.loads((folder / f"{which}.json").read_text())
    ours, base = results["batchbench"], results["baseline"]
    print(
        f"{args.cases:,} judge lines x {args.items} items = {args.cases * args.items:,}"
        f" decisions in {args.files} files, {size / 1e6:.0f} MB"
    )
    print(
        f"baseline (json.loads per line)  {base['seconds']:7.2f} s   peak RSS"
        f" {base['peak_rss_mib']:6.0f} MiB"
    )
    print(
        f"batchbench (frames)             {ours['seconds']:7.2f} s   peak RSS"
        f" {ours['peak_rss_mib']:6.0f} MiB"
    )
    print(f"  (once per run: the rubric frame {ours['key_seconds']:7.2f} s, not in the time above)")
    print(f"speed-up                        {base['seconds'] / ours['seconds']:7.1f} x")
    same = ours["rows"] == base["rows"]
    print(f"byte-identical results files    {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
