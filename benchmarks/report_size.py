"""The HTML report of 10 runs × 500 cases: how long it takes to write, and how big it is.

Makes a synthetic dataset of 500 cases (10 benchmarks × 50, 8 rubric items each)
and 10 results files of plausible rows (answers of about 1,500 characters),
then times ``load_sources`` + ``render`` + writing, in this process. Targets:
under 5 s and under 20 MB.

    python benchmarks/report_size.py
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path

POINTS = [2, 1, -1, 3, 1, 2, -2, 1]


def make_dataset(root: Path, benchmarks: int = 10, per: int = 50, items: int = 8) -> list[dict]:
    panels, cases = [], []
    for b in range(benchmarks):
        name = f"bench_{b}"
        folder = root / "data" / name
        (folder / "cases").mkdir(parents=True)
        ids = []
        for i in range(per):
            prompt = f"Case {b}-{i}: a clinical question about topic {i} " + "detail " * 40
            digest = hashlib.md5(prompt.encode()).hexdigest()
            case = {
                "case_id": digest,
                "benchmark": name,
                "grading_method": "points_rubric",
                "prompt": prompt,
                "split": "test",
                "rubric_items": [
                    {
                        "item_id": f"{digest}_{k}",
                        "text": f"criterion {k} " * 6,
                        "points": POINTS[k % 8],
                    }
                    for k in range(items)
                ],
            }
            (folder / "cases" / f"{digest}.json").write_text(json.dumps(case))
            ids.append(digest)
            cases.append(case)
        (folder / "manifest.json").write_text(json.dumps({"case_ids": ids}))
        panels.append({"id": name, "grading_method": "points_rubric", "path": f"data/{name}"})
    (root / "registry.json").write_text(json.dumps({"panels": panels}))
    return cases


def make_rows(cases: list[dict], model: str, rng: random.Random) -> list[dict]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # support.reference
    from support import reference as plain_reference

    rows = []
    for case in cases:
        matched = {it["item_id"] for it in case["rubric_items"] if rng.random() < 0.6}
        score, components = plain_reference.score_case(case, matched)
        rows.append(
            {
                "protocol_version": "bedside-bench-grading-v1",
                "case_id": case["case_id"],
                "benchmark": case["benchmark"],
                "grading_method": case["grading_method"],
                "answer_model": model,
                "judge_model": "judge",
                "answer_reasoning_effort": None,
                "answer_temperature": 1,
                "judge_temperature": 0,
                "started_at": "2026-12-03T00:00:00+00:00",
                "finished_at": "2026-12-03T00:01:00+00:00",
                "elapsed_seconds": 60.0,
                "answer": ("An answer sentence. " * 75)[:1500],
                "decisions": [
                    {
                        "item_id": it["item_id"],
                        "points": it["points"],
                        "matched": it["item_id"] in matched,
                    }
                    for it in case["rubric_items"]
                ],
                "score": score,
                "score_components": components,
            }
        )
    return rows


def main() -> None:
    from batchbench.views.page import load_sources, render, write_page

    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cases = make_dataset(root / "dataset")
        files = []
        for r in range(10):
            path = root / f"model{r}.jsonl"
            path.write_text("".join(json.dumps(x) + "\n" for x in make_rows(cases, f"m{r}", rng)))
            files.append(str(path))
        start = time.perf_counter()
        sources, ds = load_sources(files, root / "jobs", root / "dataset")
        loaded = time.perf_counter()
        text = render(sources, ds)
        out = root / "report.html"
        write_page(out, text)
        done = time.perf_counter()
        size = out.stat().st_size / 1e6
    print("10 runs x 500 cases (8 rubric items, answers of 1,500 characters)")
    print(
        f"load {loaded - start:.2f} s + render and write {done - loaded:.2f} s"
        f" = {done - start:.2f} s   (target < 5 s: {'met' if done - start < 5 else 'NOT met'})"
    )
    print(f"page {size:.1f} MB   (target < 20 MB: {'met' if size < 20 else 'NOT met'})")
    if done - start >= 5 or size >= 20:
        sys.exit(1)


if __name__ == "__main__":
    main()
