"""What every provider's run must do, one body per contract, run for each provider.

Each test is parametrized over the providers' rigs (``support/providers.py``): the
same CLI, the emulator's face for that provider driven by its official SDK, and
the rows checked against :func:`support.providers.reference_outcome`, a plain
re-enactment of the reference runner's rules (reference-behaviour.md §8–§9).
What only one provider does is in its own file (``test_<provider>_runs.py``).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support import reference
from support.cli import assert_one_line_error, run_cli
from support.providers import ENDINGS, RIGS, TYPOS, Rig, reference_outcome, scripted_responder
from support.runs import (
    ERROR_KEYS,
    ROW_KEYS,
    assert_no_duplicates,
    judge_replies,
    normalised,
    parse_id,
    rows_of,
)

from batchbench.bench.dataset import load_dataset
from batchbench.emulator import SystemClock

ALL = list(RIGS.values())
OTHERS = [rig for rig in ALL if rig.provider != "openai"]  # besides the judges' own provider
# Azure's data plane cannot name a deployment without running it: a misspelt one is
# found by the service's validation of the first batch (test_azure.py).
PREFLIGHT = [rig for rig in OTHERS if rig.provider in TYPOS]


def ids(rig: Rig) -> str:
    return rig.provider


@pytest.mark.parametrize("rig", ALL, ids=ids)
def test_the_model_is_sent_the_reference_body_and_the_rows_are_the_references(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    """Each scripted case: every attempt's body is the reference's for that attempt, the
    number of attempts is the reference's, and the row is the reference's row."""
    n = max(rig.script) + 2
    cases = load_dataset(fixture_dir).cases[:n]
    prompts = [c["prompt"] for c in cases]
    seen: dict[int, list[dict]] = {}
    emu = batch_emulator_factory(responder=scripted_responder(rig, prompts, seen))
    effort = ["--reasoning-effort", rig.effort] if rig.effort else []
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", str(n), "--max-retries", "2", *effort)
    proc = run_cli(*argv, env=rig.env(emu))
    outcomes = [reference_outcome(rig, rig.replies(i), 2) for i in range(n)]
    failing = any(o.error for o in outcomes)
    assert proc.returncode == (1 if failing else 0), proc.stdout + proc.stderr
    run_dir = tmp_path / "jobs" / rig.name()
    rows = {r["case_id"]: r for r in rows_of(run_dir / "results.jsonl")}
    replies = judge_replies(run_dir)
    for i, (case, outcome) in enumerate(zip(cases, outcomes)):
        assert len(seen[i]) == len(outcome.attempts), (i, seen[i])
        for sent, state in zip(seen[i], outcome.attempts):
            want = rig.body(case["prompt"], rig.effort, state)
            assert sent == want and (list(sent) == list(want) or not rig.ordered), i
        row = rows[case["case_id"]]
        if outcome.error is not None:
            assert list(row) == ERROR_KEYS and row["error"] == outcome.error, i
            continue
        assert list(row) == ROW_KEYS
        assert row["answer"] == outcome.answer and row["answer_model"] == rig.model, i
        sent_temperature = outcome.temperature and rig.sends_temperature
        assert row["answer_temperature"] == (1 if sent_temperature else None), i
        assert row["judge_temperature"] == 0 and row["answer_reasoning_effort"] == rig.row_effort
        matched = {k for k, v in replies[case["case_id"]].items() if v}
        score, components = reference.score_case(case, matched)
        assert row["score"] == score and row["score_components"] == components
    assert_no_duplicates(emu)


@pytest.mark.parametrize("rig", ALL, ids=ids)
def test_a_sigkill_at_the_create_call_pays_each_answer_once(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    """A real process killed just after the billable create returned, before its id is
    journaled: the resume finds the batch, never makes it again, and ends with an
    uninterrupted run's rows. (Kills at random moments, many seeds: the soak set.)"""
    reference_emu = batch_emulator_factory()
    argv = rig.args(reference_emu, tmp_path / "ref", fixture_dir, "--limit", "12")
    assert run_cli(*argv, env=rig.env(reference_emu)).returncode == 0
    expected = normalised(tmp_path / "ref" / "jobs" / rig.name())
    real_time = SystemClock()  # the killed process runs on real time: so does its service
    emu = batch_emulator_factory(latency=0.005, clock=real_time)
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "12", "--poll-interval", "0.005", cap=3)
    env = {**rig.env(emu), "BATCHBENCH_FAILPOINT": "created:1"}
    proc = run_cli(*argv, env=env, real=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    proc = run_cli(*argv, env=rig.env(emu), clock=real_time)
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "jobs" / rig.name()) == expected
    assert_no_duplicates(emu)
    journal = tmp_path / "jobs" / rig.name() / "journal.jsonl"
    events = [json.loads(x) for x in journal.read_text().splitlines()]
    assert any(e["ev"] == "created" and e.get("adopted") for e in events)


@pytest.mark.parametrize("rig", OTHERS, ids=ids)
def test_status_refresh_list_and_cancel(rig, batch_emulator_factory, tmp_path, fixture_dir):
    emu = batch_emulator_factory(paused=True)  # submitted, nothing comes back
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "6", "--no-wait", cap=3)
    assert run_cli(*argv, env=rig.env(emu)).returncode == 3
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    refresh = run_cli("status", rig.name(), *jobs, "--refresh", env=rig.env(emu))
    live = [line for line in refresh.stdout.splitlines() if line.startswith("live: ")]
    assert refresh.returncode == 0 and len(live) == 2, refresh.stdout
    assert rig.name() in run_cli("list", *jobs).stdout
    proc = run_cli("cancel", rig.name(), *jobs, env=rig.env(emu))
    assert proc.returncode == 0 and "cancelled 2 batch(es)" in proc.stdout, proc.stderr
    emu.flush()
    assert run_cli(*argv, env=rig.env(emu)).returncode == 3
    status = json.loads(run_cli("status", rig.name(), *jobs, "--json").stdout)
    assert status["status"] == "cancelled" and status["cases"]["pending"] == 6
    assert {b["status"] for b in emu.ledger()["batches"]} == {rig.ended}


@pytest.mark.parametrize("rig", OTHERS, ids=ids)
def test_the_dry_run_prices_the_answers_and_max_cost_refuses(rig, tmp_path, fixture_dir):
    base = [
        "run",
        "--answer-model",
        rig.model,
        "--judge-model",
        "gpt-4.1",
        "--dataset",
        str(fixture_dir),
        "--jobs-dir",
        str(tmp_path / "dry"),
    ]
    answers = json.loads(run_cli(*base, "--dry-run", "--json").stdout)["stages"]["answers"]
    no_keys = {v: "" for v in (rig.key_variable, "OPENAI_API_KEY") if v}
    if rig.price is None:  # no public price: said, refused by --max-cost, filled by --pricing
        assert answers["batch_usd"] is None
        proc = run_cli(*base, "--max-cost", "100", env=no_keys)
        assert_one_line_error(proc, "--max-cost", f"no price for '{rig.model}'")
        prices = tmp_path / "prices.json"
        prices.write_text(
            json.dumps(
                {"batch_discount": 0.5, "models": {rig.resolved: {"input": 1.0, "output": 4.0}}}
            )
        )
        argv = [*base, "--dry-run", "--json", "--pricing", str(prices)]
        answers = json.loads(run_cli(*argv).stdout)["stages"]["answers"]
        price, off = (1.0, 4.0), 0.5  # the file's one discount, for every venue
    else:
        price, off = rig.price, rig.batch_discount
    sync = (answers["input_tokens"] * price[0] + answers["output_tokens"] * price[1]) / 1e6
    expected = sync * (1 - off)
    assert answers["batch_usd"] == pytest.approx(expected, abs=1e-6)  # shown to 6 places
    proc = run_cli(*base, "--max-cost", "0.000001", env=no_keys)
    assert_one_line_error(proc, "--max-cost", "nothing was submitted")
    assert not (tmp_path / "dry").exists()


@pytest.mark.parametrize("rig", PREFLIGHT, ids=ids)
def test_a_misspelt_model_and_a_missing_sdk_are_one_line_before_anything_is_paid(
    rig, batch_emulator, tmp_path, fixture_dir, monkeypatch
):
    """(The package importing without any SDK at all is a subprocess's proof, once for
    every SDK: test_registry_views; here each SDK is taken away in this process.)"""
    emu = batch_emulator
    typo = TYPOS[rig.provider]
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--smoke", model=typo), env=rig.env(emu))
    assert_one_line_error(proc, f"'{typo}'", emu.url)
    assert emu.ledger()["batches"] == []
    monkeypatch.setitem(sys.modules, rig.sdk, None)  # what an absent package imports as
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--smoke"), env=rig.env(emu))
    assert_one_line_error(proc, f"'{rig.sdk}'", f"[{rig.extra}]")
    assert not any(Path(tmp_path / "jobs").glob("*/journal.jsonl"))


def test_a_group_names_every_missing_sdk_at_once(batch_emulator, tmp_path, fixture_dir):
    """A group of Claude, Gemini and Fireworks models without their SDKs says all three in
    one line (one `pip install` fixes it, not three failed runs in turn)."""
    emu = batch_emulator
    anthropic, gemini, fireworks = (
        next(r for r in OTHERS if r.provider == p) for p in ("anthropic", "gemini", "fireworks")
    )
    argv = anthropic.args(emu, tmp_path, fixture_dir, "--smoke")
    at = argv.index("--answer-model")
    models = [anthropic.model, gemini.model, fireworks.model]
    argv[at : at + 2] = [a for m in models for a in ("--answer-model", m)]
    blocked = "; ".join(f"sys.modules[{r.sdk!r}] = None" for r in (anthropic, gemini, fireworks))
    code = (
        f"import sys; {blocked}\n"
        "from batchbench.cli import main\n"
        "sys.argv = ['batchbench', *sys.argv[1:]]\n"
        "main()\n"
    )
    env = {**anthropic.env(emu), **gemini.env(emu), **fireworks.env(emu), "PATH": "/usr/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env
    )
    fragments = [f"'{r.sdk}'" for r in (anthropic, gemini, fireworks)]
    # run from this checkout (an editable install): the extras go into the checkout
    root = Path(__file__).resolve().parents[1]
    assert_one_line_error(proc, *fragments, f"pip install -e '{root}[{anthropic.extra}]'")
    assert emu.ledger()["batches"] == []

    # installed from the index or a wheel (no checkout around the package): no -e, the
    # distribution's own name
    site = tmp_path / "site"
    shutil.copytree(root / "batchbench", site / "batchbench")
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(site)},
        cwd=tmp_path,
    )
    assert_one_line_error(proc, f"pip install 'bedside-batchbench[{fireworks.extra}]'")
    assert " -e " not in proc.stderr


@pytest.mark.parametrize("rig", OTHERS, ids=ids)
def test_keys_are_never_written_or_printed(rig, batch_emulator, tmp_path, fixture_dir):
    emu = batch_emulator
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--limit", "3"), env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    for path in (tmp_path / "jobs").rglob("*"):
        if path.is_file():
            assert rig.key.encode() not in path.read_bytes(), path
    assert rig.key not in proc.stdout + proc.stderr


BAD_DAYS = {
    "anthropic": {"missing-lines": 0.3, "long-finalizing": 4.0},
    # A short file of a SUCCEEDED job is owed, not bought again (#37): missing-lines is
    # a stop on Gemini (tests/test_pay_once_folders.py), not a bad day that ends well.
    "gemini": {"succeeded-before-file": 1.0},
    "fireworks": {"missing-lines": 0.3},
    "azure": {"missing-lines": 0.3, "status-zero": 0.2, "lagging-counts": 0.5},
    "bedrock": {"missing-lines": 0.3},
    # A job that fails with the predictions of the lines it ran written keeps them.
    "vertex-gemini": {"failed-with-output": 0.5},
    "vertex-claude": {"failed-with-output": 0.5},
    "groq": {"missing-lines": 0.3, "status-zero": 0.2, "lagging-counts": 0.5},
    "together": {"status-zero": 0.3},  # no line counts: a short file is owed, not lost
    "mistral": {"missing-lines": 0.3, "status-zero": 0.2, "lagging-counts": 0.5},
    "openrouter": {"missing-lines": 0.3, "status-zero": 0.2},
    "xai": {"missing-lines": 0.3, "status-zero": 0.2, "lagging-counts": 0.5},
}


@pytest.mark.parametrize("rig", OTHERS, ids=ids)
def test_faults_and_the_services_bad_days_end_in_a_good_days_rows(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    good = batch_emulator_factory()
    argv = rig.args(good, tmp_path / "ref", fixture_dir, "--limit", "16", cap=5)
    assert run_cli(*argv, env=rig.env(good)).returncode == 0
    emu = batch_emulator_factory(fault_rate=0.2, seed=9, anomalies=BAD_DAYS[rig.provider])
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--limit", "16", cap=5), env=rig.env(emu))
    assert proc.returncode == 0, proc.stderr
    assert normalised(tmp_path / "jobs" / rig.name()) == normalised(
        tmp_path / "ref" / "jobs" / rig.name()
    )
    assert_no_duplicates(emu)
    assert sum(emu.ledger()["faults"].values()) > 0


@pytest.mark.soak
@pytest.mark.parametrize("seed", [7, 11, 5])
@pytest.mark.parametrize("rig", ALL, ids=ids)
def test_sigkills_at_random_moments_pay_each_answer_once(
    rig, seed, batch_emulator_factory, tmp_path, fixture_dir
):
    """Soak: a run killed again and again, at failpoints and at seeded random moments,
    ends with an uninterrupted run's rows and nothing paid twice. A failure names its
    seed: run it alone with ``-m soak -k '<provider> and <seed>'``."""
    import random

    from support.crash import kill_and_restart

    reference_emu = batch_emulator_factory()
    argv = rig.args(reference_emu, tmp_path / "ref", fixture_dir, "--limit", "12")
    assert run_cli(*argv, env=rig.env(reference_emu)).returncode == 0
    expected = normalised(tmp_path / "ref" / "jobs" / rig.name())
    real_time = SystemClock()
    emu = batch_emulator_factory(latency=0.3, clock=real_time)
    # A kill between a create's journal line and its answer leaves an open create, waited
    # for as one that may still land (10 minutes by default, held on the fake clock by
    # test_pay_once): on real time here, bounded to 2 s (the emulator lands it at once).
    argv = [*rig.args(emu, tmp_path, fixture_dir, "--limit", "12", cap=3), "--create-wait", "2"]
    journal = tmp_path / "jobs" / rig.name() / "journal.jsonl"
    kinds, _ = kill_and_restart(argv, journal, random.Random(seed), 6, rig.env(emu))
    proc = run_cli(*argv, env=rig.env(emu), clock=real_time)
    assert proc.returncode == 0, (seed, proc.stderr)
    assert normalised(tmp_path / "jobs" / rig.name()) == expected, seed
    assert_no_duplicates(emu)
    assert sum(kinds.values()) >= 1, (seed, kinds)


@pytest.fixture
def silent_server():
    """A server that takes every connection and never says a word: a listening socket
    nobody accepts from (the kernel completes each handshake into its backlog), so no
    thread races the test; ``connections()`` counts them by accepting what waits."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    held: list[socket.socket] = []

    class Silent(str):
        """Its URL, and how many connections it took (``connections()``)."""

        def connections(self) -> int:
            while True:
                try:
                    held.append(listener.accept()[0])
                except BlockingIOError:
                    return len(held)

    yield Silent(f"http://127.0.0.1:{listener.getsockname()[1]}")
    for conn in held:
        conn.close()
    listener.close()


@pytest.mark.parametrize("rig", ALL, ids=ids)
def test_a_server_that_never_answers_is_named_before_anything_is_paid(
    rig, silent_server, batch_emulator, tmp_path, fixture_dir, monkeypatch
):
    """The pre-flight gives a silent server one attempt of its timeout (20 s; 0.25 s
    here) and names the URL, instead of five attempts of a minute each. The answer model
    is looked up first, so no call to the emulator (the judges') meets the short timeout
    on a busy machine (#63.8): the outcome does not hang on the machine's speed."""
    from batchbench.providers import retry

    monkeypatch.setattr(retry, "PREFLIGHT_TIMEOUT", 0.25)
    emu = batch_emulator
    env = {**rig.env(emu), rig.base_variable: silent_server}
    argv = rig.args(emu, tmp_path, fixture_dir, "--smoke")
    if rig.provider == "openai":
        argv[argv.index("--base-url") + 1] = silent_server
    proc = run_cli(*argv, env=env)
    assert_one_line_error(proc, silent_server, "sent no answer in 0.25 s")
    assert silent_server.connections() == 1  # one attempt, never the five a call may make
    assert emu.ledger()["batches"] == []


@pytest.mark.parametrize("rig", ALL, ids=ids)
def test_a_result_line_that_is_not_utf8_is_one_line_naming_it(
    rig, batch_emulator_factory, tmp_path, fixture_dir
):
    def mangle(kind, lines):
        if kind in ("output", "results", "responses") and lines:
            # a byte that is not UTF-8 (0xFF), on the file's last line
            return [*lines[:-1], lines[-1][:-1] + ', "note": "\udcff"}']
        return lines

    emu = batch_emulator_factory(mangle=mangle)
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "3", cap=3)  # one file of 3 lines
    proc = run_cli(*argv, env=rig.env(emu))
    assert_one_line_error(proc, "(batch ", f"{rig.unit} 3: not UTF-8 text")
    assert proc.returncode == 4


@pytest.mark.parametrize("damage", ["an HTML page", "a half file"])
@pytest.mark.parametrize("rig", ALL, ids=ids)
def test_a_result_file_that_is_a_page_or_cut_short_is_said_as_what_it_is(
    rig, damage, batch_emulator_factory, tmp_path, fixture_dir
):
    """#45.11: an HTML page (a proxy's error page) in place of the results, and a file cut
    off mid-line at every download, were both 'three downloads were all truncated'."""

    def mangle(kind, lines):
        if kind not in ("output", "results", "responses") or not lines:
            return lines
        return ["<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"]

    page = damage == "an HTML page"
    emu = batch_emulator_factory(mangle=mangle if page else None)
    if not page:
        emu.hub.faults.truncate_rate = 1.0  # every download cut off part way
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "3", cap=3)
    if not page:  # polled as by default (30 s): a poll every 0.05 s of the test's clock
        argv += ["--poll-interval", "30"]  # made ~460 downloads of the outage window, not ~265
    proc = run_cli(*argv, env=rig.env(emu))
    if page:
        assert_one_line_error(proc, "not JSON lines", "'<!DOCTYPE html>", "an HTML page")
        assert proc.returncode == 4
    else:  # a transfer cut off every time: tried again, then said once as the service's
        assert_one_line_error(proc, "download")
        assert proc.returncode == 5, proc.stderr
        assert ".part" not in proc.stderr and "('" not in proc.stderr
        # said when it starts, then once a minute of the 600 s window (not once a tick)
        said = [x for x in proc.stderr.splitlines() if x.endswith("at the next tick")]
        again = [x for x in proc.stderr.splitlines() if "s, trying again at the next tick" in x]
        assert len(said) == 1 and 2 <= len(again) <= 600 // 60, proc.stderr
        assert all("(for up to 600 s)" in x for x in again)
    assert "truncated" not in proc.stderr and "internal error" not in proc.stderr


@pytest.mark.parametrize("rig", [r for r in ALL if r.provider in ENDINGS], ids=ids)
def test_a_base_url_with_the_version_the_sdk_adds_is_named_at_once(
    rig, batch_emulator, tmp_path, fixture_dir
):
    """The SDK adds its own version: a base URL that already ends in it would 404 on every
    call; it is refused before any call, with what a right one looks like."""
    emu = batch_emulator
    url = emu.base_urls[rig.face or rig.provider] + ENDINGS[rig.provider]
    env = {**rig.env(emu), rig.base_variable: url}
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--smoke"), env=env)
    assert_one_line_error(proc, f"ends in {ENDINGS[rig.provider]}", rig.base_variable, "https://")
    assert emu.ledger()["batches"] == [] and sum(emu.ledger()["faults"].values()) == 0


# Where each service's results line keeps a usage counter, as its documentation shows it.
_COUNTER = {
    "openai": ("prompt_tokens", '"prompt_tokens": '),
    "anthropic": ("input_tokens", '"input_tokens": '),
    "gemini": ("promptTokenCount", '"promptTokenCount": '),
    "fireworks": ("prompt_tokens", '"prompt_tokens": '),
}


@pytest.mark.parametrize("provider", sorted(_COUNTER))
def test_a_result_line_with_a_counter_of_the_wrong_type_is_that_lines_failure(
    provider, batch_emulator_factory, tmp_path, fixture_dir
):
    """#61.11: one results line whose usage counter is text ("12", not 12) blocked the
    whole batch, no rows. A line that does not fit is that line's failure, as a passing
    500 is: its request is sent again once, every other case is scored as the service
    answered, and the run ends with every row."""
    rig = RIGS[provider]
    name, key = _COUNTER[provider]
    struck: list[str] = []

    def mangle(kind, lines):
        if kind not in ("output", "results", "responses") or not lines or struck:
            return lines
        line = lines[0]
        found = re.search(re.escape(key) + r"(\d+)", line)
        assert found, (name, line[:300])
        struck.append(line)
        return [line[: found.start(1)] + f'"{found.group(1)}"' + line[found.end(1) :], *lines[1:]]

    emu = batch_emulator_factory(mangle=mangle)
    argv = rig.args(emu, tmp_path, fixture_dir, "--limit", "3", cap=3)
    proc = run_cli(*argv, env=rig.env(emu))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert struck  # the line was struck, once
    rows = rows_of(tmp_path / "jobs" / rig.name() / "results.jsonl")
    assert len(rows) == 3 and all("score" in r for r in rows), rows
    # its request bought again, once (the service billed the first); every other once
    ran = Counter(
        (parse_id(e["custom_id"]).stage, parse_id(e["custom_id"]).case_id)
        for e in emu.ledger()["executions"]
    )
    assert sorted(ran.values()) == [1] * (len(ran) - 1) + [2], ran


# Each vendor's answer to a key it does not know, as its API words it (the sources are
# public reports of the live service's replies, cited in each face).
REFUSED_KEYS = {
    "groq": (401, {"error": {"message": "Invalid API Key", "type": "invalid_request_error"}}),
    "mistral": (401, {"message": "Unauthorized"}),
    "openrouter": (401, {"error": {"code": 401, "message": "User not found."}}),
    "xai": (400, {"code": "Client specified an invalid argument"}),
}


@pytest.mark.parametrize("provider", sorted(REFUSED_KEYS))
def test_a_wrong_key_gets_the_vendors_own_answer_and_one_line(
    provider, batch_emulator_factory, tmp_path, fixture_dir
):
    """#62.2: a wrong key got OpenAI's 401 on every face; each answers in its vendor's
    status and words, and batchbench still says in one line which key was refused,
    without echoing it, before anything is bought."""
    import urllib.error
    import urllib.request

    rig = RIGS[provider]
    emu = batch_emulator_factory(api_key="the-right-key")
    status, expected = REFUSED_KEYS[provider]
    models = f"{emu.base_urls[provider]}{ENDINGS.get(provider, '')}/models"  # SDK's base
    asked = urllib.request.Request(models, headers={"Authorization": "Bearer wr0ng-key-x9"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(asked)
    body = json.loads(refused.value.read())
    assert refused.value.code == status

    def within(small, big):
        return all(
            within(v, big[k]) if isinstance(v, dict) else big.get(k) == v for k, v in small.items()
        )

    assert within(expected, body), body
    if provider == "xai":
        assert body["error"].startswith("Incorrect API key provided: wr***x9.")
    proc = run_cli(*rig.args(emu, tmp_path, fixture_dir, "--smoke"), env=rig.env(emu))
    assert_one_line_error(proc, rig.key_variable)
    assert rig.key not in proc.stderr + proc.stdout and not emu.ledger()["batches"]


@pytest.mark.parametrize("rig", ALL, ids=ids)
def test_every_client_a_run_opens_is_closed_when_it_ends(
    rig, batch_emulator, tmp_path, fixture_dir, monkeypatch
):
    """#64.11: a run in a process that runs on (Python code, the tests) left its SDKs'
    connection pools open. Every client the command connects is closed at its end; the
    OpenAI SDK's own ``is_closed`` says its pool is."""
    import batchbench.providers as providers

    made: list[tuple[object, list[bool]]] = []
    connect = providers.connect

    def spied(*args, **kwargs):
        client = connect(*args, **kwargs)
        closed: list[bool] = []
        original = client.close
        client.close = lambda: (closed.append(True), original())[1]
        made.append((client, closed))
        return client

    monkeypatch.setattr(providers, "connect", spied)
    argv = rig.args(batch_emulator, tmp_path, fixture_dir, "--limit", "2")
    proc = run_cli(*argv, env=rig.env(batch_emulator))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert made and all(closed == [True] for _, closed in made)
    for client, _ in made:
        sdk = getattr(client, "sdk", None)
        if hasattr(sdk, "is_closed"):  # a Stainless SDK (OpenAI's, Anthropic's…) says so
            assert sdk.is_closed()
