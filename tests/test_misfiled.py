"""Replies filed under other requests' keys (python-genai#1909), both ways.

The guard fits each reply's reported prompt tokens to its own request: it must never
refuse honest counts from a real tokenizer (the prompts of the public split and the
bundled sample, counted by OpenAI's o200k and cl100k — two witnesses nobody here wrote,
where Gemini's own tokenizer is not installable offline), and must refuse a file in
which a few percent of lines or more carry another line's reply. Then the same through
the CLI: a Gemini run on the emulator (whose replies now carry a real tokenizer's
counts) is scored, and one with the ``misfiled`` bad day is refused in one line with
nothing bought twice — on the Gemini API and on Vertex AI.
"""

from __future__ import annotations

import json
import random

import polars as pl
import pytest
from support.cli import SAMPLE, assert_one_line_error, run_cli
from support.providers import RIGS
from support.runs import rows_of, varied_sample

from batchbench.bench.dataset import load_dataset
from batchbench.bench.protocol import answer_prompt
from batchbench.errors import ApiError
from batchbench.providers.gemini_wire import GeminiWire
from batchbench.providers.vertex_wire import VertexGeminiWire

bpe_openai = pytest.importorskip("bpe_openai")
ENCODINGS = ("o200k_base", "cl100k_base")


def _file(root, wire):
    """Each case's answer request as the wire writes it, with the text a service counts."""
    lines, texts, ids = [], [], []
    for case in load_dataset(root).cases:
        prompt = answer_prompt(case, reasoning_effort=None)
        cid = wire.custom_id("answers", case["case_id"], 1, "run0000000")
        lines.append(wire.request_line(cid, wire.render(prompt, "vertex/gemini-x", {})))
        texts.append((prompt.system, prompt.user))
        ids.append(cid)
    return lines, texts, ids


def _frame(ids, counts):
    return pl.DataFrame(
        {"custom_id": ids, "status_code": [200] * len(ids), "prompt_tokens": counts}
    )


def _counts(encoding, texts):
    enc = bpe_openai.get_encoding(encoding)
    # Each content counted on its own, as a service counts a request's contents.
    return [len(enc.encode_ordinary(s)) + len(enc.encode_ordinary(u)) + 4 for s, u in texts]


def _misfile(counts, share, seed):
    """A share of lines (at least two) given each other's counts, one moved on."""
    rng = random.Random(seed)
    struck = sorted(rng.sample(range(len(counts)), max(2, round(share * len(counts)))))
    out = list(counts)
    for n, i in enumerate(struck):
        out[i] = counts[struck[(n + 1) % len(struck)]]
    return out


@pytest.fixture(params=[GeminiWire, VertexGeminiWire], ids=["gemini", "vertex-gemini"])
def wire(request):
    return request.param()


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_honest_counts_of_a_real_tokenizer_pass(dataset_dir, wire, encoding):
    """The public split's 250 prompts, counted by a real tokenizer: never refused (the
    old guard refused this file: four prompts sat more than 30% off a fit on
    characters)."""
    lines, texts, ids = _file(dataset_dir, wire)
    assert len(ids) == 250
    wire.check_replies(_frame(ids, _counts(encoding, texts)), lines, "f")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_honest_counts_of_the_sample_pass(wire, encoding, tmp_path):
    for root in (SAMPLE, varied_sample(tmp_path)):
        lines, texts, ids = _file(root, wire)
        wire.check_replies(_frame(ids, _counts(encoding, texts)), lines, "f")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_misfiled_replies_are_caught(dataset_dir, wire, encoding):
    """Every reply moved one on is refused; so is every seeded misfiling of 5% and 10% of
    the lines, and nearly every one of 2% (a reply misfiled between prompts of nearly one
    length cannot be told by its count: the public prompts cluster around 770
    characters)."""
    lines, texts, ids = _file(dataset_dir, wire)
    counts = _counts(encoding, texts)
    with pytest.raises(ApiError, match="other requests' keys"):
        wire.check_replies(_frame(ids, counts[1:] + counts[:1]), lines, "f")
    for share in (0.05, 0.10):
        for seed in range(20):
            with pytest.raises(ApiError, match=r"f: \d+ of 250 replies .* far from their own"):
                wire.check_replies(_frame(ids, _misfile(counts, share, seed)), lines, "f")
    caught = 0
    for seed in range(40):
        try:
            wire.check_replies(_frame(ids, _misfile(counts, 0.02, seed)), lines, "f")
        except ApiError:
            caught += 1
    assert caught >= 32, caught


def test_a_missing_count_is_not_a_verdict(wire):
    """A reply without a token count is left out of the fit, never a crash."""
    lines, texts, ids = _file(SAMPLE, wire)
    counts = _counts("o200k_base", texts)
    counts[3] = None
    wire.check_replies(_frame(ids, counts), lines, "f")


@pytest.mark.parametrize("provider", ["gemini", "vertex-gemini"])
def test_a_run_with_real_token_counts_is_scored(batch_emulator_factory, tmp_path, provider):
    """The emulator's replies carry o200k's counts (the ledger names the tokenizer): a
    run over the sample is scored whole, not refused."""
    rig = RIGS[provider]
    emu = batch_emulator_factory()
    proc = run_cli(*rig.args(emu, tmp_path, SAMPLE, cap=12), env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert emu.ledger()["tokenizer"] == "o200k_base (bpe-openai)"
    rows = rows_of(tmp_path / "jobs" / rig.name() / "results.jsonl")
    assert len(rows) == 12 and all("error" not in r for r in rows)


def test_a_run_of_the_public_split_is_scored(batch_emulator_factory, tmp_path, dataset_dir):
    """The issue's run: every public prompt through Gemini with a real tokenizer's
    counts, scored (it stopped with exit 5 after paying for every answer)."""
    rig = RIGS["gemini"]
    emu = batch_emulator_factory()
    proc = run_cli(*rig.args(emu, tmp_path, dataset_dir, cap=250), env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert len(rows_of(tmp_path / "jobs" / rig.name() / "results.jsonl")) == 250


@pytest.mark.parametrize("provider", ["gemini", "vertex-gemini"])
def test_a_misfiled_file_is_refused_and_nothing_bought_twice(
    batch_emulator_factory, tmp_path, provider
):
    rig = RIGS[provider]
    emu = batch_emulator_factory(anomalies={"misfiled": 0.5})
    varied = varied_sample(tmp_path)
    proc = run_cli(*rig.args(emu, tmp_path, varied, cap=12), env=rig.env(emu))
    assert_one_line_error(proc, "far from their own requests'", "other requests' keys")
    journal = (tmp_path / "jobs" / rig.name() / "journal.jsonl").read_text().splitlines()
    stops = [e for e in map(json.loads, journal) if e["ev"] == "stopped"]
    assert [e["reason"] for e in stops] == ["replies"]  # journaled, said by status
    results = tmp_path / "jobs" / rig.name() / "results.jsonl"
    assert not results.exists() or not rows_of(results)
    executed = [e["custom_id"] for e in emu.ledger()["executions"]]
    assert len(executed) == 12 == len(set(executed))
    # Run again: the file is refused again, and nothing is bought again.
    again = run_cli(*rig.args(emu, tmp_path, varied, cap=12), env=rig.env(emu))
    assert_one_line_error(again, "other requests' keys")
    assert len(emu.ledger()["executions"]) == 12
