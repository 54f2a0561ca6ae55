"""What a full HealthBench run costs through each service's batch API, against the price
simple-evals pays asking the same requests synchronously (#65).

Every request is built as simple-evals builds it (``batchbench.bench.healthbench``): an
answer per example (its system message and the conversation, up to 2,048 tokens back),
and a grader request per rubric item (the grader's template with the conversation, an
answer of the assumed length, and the item; gpt-4.1-2025-04-14, up to 2,048 tokens
back, a grade of the assumed length). Tokens are counted with OpenAI's own encodings
(bpe-openai); prices are batchbench's table (``pricing.json``), the batch price each
venue's own discount. Printed per service where the answer model is priced: the input
and output tokens, the batch price and the synchronous one, and their ratio.

    .venv/bin/python benchmarks/healthbench_price.py [FILE.jsonl] [--answer-model M]

Without a file, the synthetic one in tests/fixtures (eight examples); a public file
(5,000 examples, ~48,000 rubric items) gives the real run's figures.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from batchbench.bench import healthbench as hb
from batchbench.costs.pricing import cost, load_pricing, token_counter

REPO = Path(__file__).resolve().parent.parent
SYNTHETIC = REPO / "tests" / "fixtures" / "healthbench" / "synthetic.jsonl"
PER_MESSAGE, PER_REPLY = 3, 3  # OpenAI's chat framing, as the dry run counts it
VENUES = {  # the answer model as each venue names it (the judge stays OpenAI's)
    "openai": "{m}",
    "azure": "azure/{m}",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", type=Path, default=SYNTHETIC)
    ap.add_argument("--answer-model", default="gpt-4.1")
    ap.add_argument("--answer-tokens", type=int, default=500, help="assumed answer length")
    ap.add_argument("--grade-tokens", type=int, default=60, help="assumed grade length")
    opts = ap.parse_args()
    data = hb.load_healthbench(opts.file)
    _, count = token_counter(opts.answer_model)
    answer = ("answer " * opts.answer_tokens).strip()

    def tokens(messages: list[dict[str, str]]) -> int:
        return PER_REPLY + sum(PER_MESSAGE + count(m["content"]) for m in messages)

    answers_in = sum(tokens(hb.answer_messages(e)) for e in data.examples)
    grades_in = sum(
        tokens(hb.grader_messages(e, answer, item)) for e in data.examples for item in e.rubrics
    )
    items = sum(len(e.rubrics) for e in data.examples)
    answers_out = len(data.examples) * opts.answer_tokens
    grades_out = items * opts.grade_tokens
    pricing = load_pricing()
    print(
        f"{opts.file.name}: {len(data.examples):,} examples, {items:,} rubric items"
        f" ({items / len(data.examples):.1f} grader requests an example)"
    )
    print(f"  answers: {answers_in:,} input, {answers_out:,} output tokens ({opts.answer_model})")
    print(f"  graders: {grades_in:,} input, {grades_out:,} output tokens ({hb.GRADER_MODEL})")
    judge = pricing.price(hb.GRADER_MODEL)
    for venue, spelled in VENUES.items():
        model = spelled.format(m=opts.answer_model)
        price = pricing.price(model)
        if price is None or judge is None:
            print(f"  {venue}: no price for {model}")
            continue
        off = pricing.discount(venue, model).fraction
        judge_off = pricing.discount("openai", hb.GRADER_MODEL).fraction
        a = cost(price, answers_in, 0, answers_out, batch_discount=off)
        g = cost(judge, grades_in, 0, grades_out, batch_discount=judge_off)
        batch = (a["batch_usd"] or 0) + (g["batch_usd"] or 0)
        sync = (a["sync_usd"] or 0) + (g["sync_usd"] or 0)
        print(
            f"  {venue:<8} batch ${batch:,.4f}   simple-evals' synchronous ${sync:,.4f}"
            f"   {batch / sync:.2f} x (graders {g['batch_usd'] or 0:,.4f} of it)"
        )


if __name__ == "__main__":
    main()
