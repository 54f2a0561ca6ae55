"""#67.2: caching priced as each service prices it, rehearsed on the emulator.

The witnesses: the emulator's ledger of billed tokens per executed line (its caching
rules are the services' documented ones, :mod:`batchbench.emulator.prompt_cache`), priced
here by a plain rule written from each service's statement; the Anthropic SDK's own
types for a reply with cache writes; the written rules for what a cache can read.
"""

from __future__ import annotations

import json

import anthropic
import pytest
from support.cli import assert_one_line_error, run_cli
from support.runs import assert_no_duplicates, env, run_args

from batchbench.costs.pricing import load_pricing, usage_cost
from batchbench.providers.anthropic_wire import read_results

FILLER = " ".join(f"detail-{i} of the history, noted by the parent." for i in range(500))
PRICES = {"input": 2.0, "cached_input": 0.5, "output": 8.0}  # USD per 1M, this file's own


def _dataset(tmp_path, examples: int = 3, items: int = 4):
    """HealthBench lines whose conversation is long (about 5,000 tokens): each example's
    grader requests share it, and the answer, after the template's head."""
    path = tmp_path / "long.jsonl"
    lines = []
    for n in range(examples):
        rubrics = [
            {"criterion": f"Criterion {i} of example {n}.", "points": 1 + i, "tags": []}
            for i in range(items)
        ]
        prompt = [{"role": "user", "content": f"Synthetic question {n}. {FILLER}"}]
        lines.append(
            {"prompt": prompt, "rubrics": rubrics, "example_tags": [], "prompt_id": f"p{n}"}
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _responder(given):
    text = json.dumps(given)
    if "# Rubric item" in text:
        return '```json\n{"explanation": "ok", "criteria_met": true}\n```'
    return "Rest, fluids, and see a clinician if it lasts."


def _pricing(tmp_path, stacks):
    table = tmp_path / "prices.json"
    venue = {"discount": 0.5, "source": "this test", "caching": {"stacks": stacks}}
    models = {m: PRICES for m in ("ans-model", "gpt-4.1-2025-04-14")}
    table.write_text(json.dumps({"models": models, "batch_discounts": {"openai": venue}}))
    return ["--pricing", str(table)]


def _bill(executions, stacks: bool) -> float:
    """The services' bill of the executed lines: every token at half its list price; cached
    input at the cached price (half of it) where caching stacks, else as uncached input."""
    total = 0.0
    for line in executions:
        b = line["billed"]
        cached_price = PRICES["cached_input"] if stacks else PRICES["input"]
        total += (b["input"] - b["cached"]) * PRICES["input"] * 0.5
        total += b["cached"] * cached_price * 0.5 + b["output"] * PRICES["output"] * 0.5
    return total / 1e6


@pytest.mark.parametrize("stacks", [True, None], ids=["stacks", "unknown"])
def test_the_cost_ledger_equals_the_services_bill_with_cached_input(
    stacks, batch_emulator_factory, tmp_path, fixture_dir
):
    """Each example's grader requests share ~5,000 tokens after the first: OpenAI's cache
    reads them (1,024 tokens and up, in blocks of 128), and the run's cost equals the bill
    of what the emulator executed within 1 %; where the venue's stacking is unknown the
    cached input is priced as uncached, and the status says so."""
    emu = batch_emulator_factory(models=["gpt-4.1-2025-04-14"], responder=_responder)
    data = _dataset(tmp_path)
    prices = _pricing(tmp_path, stacks)
    args = run_args(emu, tmp_path, fixture_dir, "--dataset", str(data), *prices)
    args[args.index("judge-model")] = "gpt-4.1-2025-04-14"
    proc = run_cli(*args, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_no_duplicates(emu)
    executions = emu.ledger()["executions"]
    cached = [e["billed"]["cached"] for e in executions]
    assert sum(cached) > 0
    assert all(c == 0 or (c >= 1024 and c % 128 == 0) for c in cached)
    jobs = ["--jobs-dir", str(tmp_path / "jobs"), *prices]
    status = json.loads(run_cli("status", "ans-model", *jobs, "--json").stdout)
    cost = status["cost"]
    assert cost["total"]["batch_usd"] == pytest.approx(_bill(executions, bool(stacks)), rel=0.01)
    judges = cost["stages"]["judges"]
    assert judges["cached_tokens"] == sum(cached)
    # the run's own last lines price it with the file it was given, as status does
    assert f"total ${cost['total']['batch_usd']:,.4f}" in proc.stdout
    text = run_cli("status", "ans-model", *jobs).stdout
    said = f"{judges['cached_tokens']:,} cached input tokens priced as uncached: openai"
    assert (said in text) is (stacks is None)


def test_the_dry_run_says_what_the_shared_conversation_can_save(tmp_path):
    """Each example's items share the conversation: a cache can read, for every item after
    an example's first, at least the conversation's tokens — and that saving is priced at
    the venue's terms (here: stacking, so half of input less cached, per token)."""
    data = _dataset(tmp_path, examples=2, items=3)
    argv = ["run", "--answer-model", "ans-model", "--judge-model", "gpt-4.1-2025-04-14"]
    argv += ["--dataset", str(data), "--dry-run", "--json"]
    argv += ["--jobs-dir", str(tmp_path / "jobs"), *_pricing(tmp_path, True)]
    plan = json.loads(run_cli(*argv).stdout)
    judges = plan["stages"]["judges"]
    caching = judges["caching"]
    shared_items = 2 * (3 - 1)  # each example's items after its first
    per_item = judges["input_tokens"] / judges["requests"]
    assert caching["cacheable_tokens"] >= shared_items * 4000
    assert caching["cacheable_tokens"] <= shared_items * per_item
    assert caching["cacheable_tokens"] % 128 == 0
    expected = caching["cacheable_tokens"] * (PRICES["input"] - PRICES["cached_input"]) * 0.5
    assert caching["saving_usd"] == pytest.approx(expected / 1e6, abs=1e-6)


def _anthropic(emu):
    return anthropic.Anthropic(api_key="test", base_url=emu.url, max_retries=0)


def _marked(text: str, ttl: str) -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "system": [
            {"type": "text", "text": text, "cache_control": {"type": "ephemeral", "ttl": ttl}}
        ],
        "messages": [{"role": "user", "content": "Summarise."}],
    }


def _ended(emu, client, requests):
    batch = client.messages.batches.create(requests=requests)
    emu.flush()
    return {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}


def test_anthropic_cache_writes_and_reads_as_documented(batch_emulator_factory, tmp_path):
    """A marked prefix over the minimum is written at its ttl by every cold copy in one
    batch (they run concurrently) and read by a later batch; one under 1,024 tokens is
    neither. Read back by batchbench from the SDK's own results, the writes are priced at
    2x the input price (1 hour) with the batch discount, and reads at the cached price."""
    emu = batch_emulator_factory(models=["claude-sonnet-4-5"])
    client = _anthropic(emu)
    first = _ended(
        emu,
        client,
        [
            {"custom_id": "a", "params": _marked(FILLER, "1h")},
            {"custom_id": "b", "params": _marked(FILLER, "1h")},
            {"custom_id": "short", "params": _marked("Be brief.", "5m")},
        ],
    )
    for cid in ("a", "b"):
        usage = first[cid].message.usage
        assert usage.cache_read_input_tokens == 0
        assert usage.cache_creation.ephemeral_1h_input_tokens > 1024
        assert usage.cache_creation_input_tokens == usage.cache_creation.ephemeral_1h_input_tokens
    short = first["short"].message.usage
    assert (short.cache_creation_input_tokens, short.cache_read_input_tokens) == (0, 0)
    written = first["a"].message.usage.cache_creation_input_tokens
    second = _ended(emu, client, [{"custom_id": "c", "params": _marked(FILLER, "1h")}])
    usage = second["c"].message.usage
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (written, 0)

    path = tmp_path / "results.jsonl"
    lines = [{"custom_id": cid, "result": r.model_dump(mode="json")} for cid, r in first.items()]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    frame = read_results([path])
    assert set(frame["service_tier"].to_list()) == {"batch"}  # the tier the reply names
    used = {c: int(frame[c].sum()) for c in ("prompt_tokens", "cached_tokens", "completion_tokens")}
    used["cache_write_1h_tokens"] = int(frame["cache_write_1h_tokens"].sum())
    assert used["cache_write_1h_tokens"] == 2 * written
    pricing = load_pricing()
    price = pricing.price("claude-sonnet-4-5")
    got = usage_cost(used, price, pricing.discount("anthropic", "claude-sonnet-4-5"))
    plain = used["prompt_tokens"] - 2 * written
    expected = (
        (
            plain * price.input
            + 2 * written * 2.0 * price.input
            + used["completion_tokens"] * price.output
        )
        * 0.5
        / 1e6
    )
    assert got["batch_usd"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    ("caching", "said"),
    [
        ({"stacks": "yes"}, "batch_discounts.openai.caching must be an object"),
        ({"stacks": True, "cached_share": 2}, "batch_discounts.openai.caching.cached_share"),
        ("stacks", "batch_discounts.openai.caching must be an object"),
    ],
)
def test_a_bad_caching_fact_in_a_price_file_is_one_line(tmp_path, fixture_dir, caching, said):
    table = tmp_path / "prices.json"
    venue = {"discount": 0.5, "caching": caching}
    table.write_text(json.dumps({"models": {}, "batch_discounts": {"openai": venue}}))
    argv = ["run", "--answer-model", "gpt-4.1", "--judge-model", "gpt-4.1", "--dry-run"]
    proc = run_cli(*argv, "--dataset", str(fixture_dir), "--pricing", str(table))
    assert_one_line_error(proc, str(table), said)
