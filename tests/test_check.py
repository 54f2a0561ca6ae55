"""#62.5: ``batchbench check`` tries each named service with calls that cost nothing —
the key and the right to list batches, the model — in one table, through the CLI
against the emulator: the ledger shows nothing created and nothing executed."""

from __future__ import annotations

from support.cli import assert_one_line_error, run_cli


def _env(emu, key: str) -> dict[str, str]:
    keys = {v: key for v in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY")}
    return {**emu.environment(), **keys, "OPENAI_BASE_URL": emu.base_urls["openai"]}


def _rows(stdout: str) -> dict[str, str]:
    return {line.split()[1]: line for line in stdout.splitlines()[1:] if line[:1] in "aj"}


def test_check_tries_each_service_for_free(batch_emulator_factory):
    emu = batch_emulator_factory(api_key="the-right-key")
    models = ["--answer-model", "claude-opus-5", "--answer-model", "groq/openai/gpt-oss-120b"]
    proc = run_cli("check", *models, "--judge-model", "judge-model", env=_env(emu, "the-right-key"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(proc.stdout)
    assert set(rows) == {"claude-opus-5", "groq/openai/gpt-oss-120b", "judge-model"}
    assert all(row.split()[-2:] == ["ok", "ok"] for row in rows.values()), proc.stdout
    assert "Groq at" in rows["groq/openai/gpt-oss-120b"]
    assert "every check passed: nothing was bought" in proc.stdout
    assert "quota:" in proc.stdout  # said, not guessed
    ledger = emu.ledger()
    assert ledger["batches"] == [] and ledger["executions"] == []


def test_check_names_what_each_service_refused(batch_emulator_factory):
    emu = batch_emulator_factory(api_key="the-right-key")
    proc = run_cli(
        "check",
        "--answer-model",
        "nonesuch-model",
        "--answer-model",
        "groq/openai/gpt-oss-120b",
        env=_env(emu, "a-wrong-key"),
    )
    assert proc.returncode == 5
    rows = _rows(proc.stdout)
    assert "refused the key (HTTP 401); check GROQ_API_KEY" in rows["groq/openai/gpt-oss-120b"]
    assert "OPENAI_API_KEY" in rows["nonesuch-model"]
    proc = run_cli("check", "--answer-model", "nonesuch-model", env=_env(emu, "the-right-key"))
    assert proc.returncode == 5 and "nonesuch-model" in _rows(proc.stdout)["nonesuch-model"]
    assert "404" in proc.stdout and "(1 of 1)" in proc.stdout
    proc = run_cli(
        "check", "--judge-model", "judge-model", env={**_env(emu, ""), "OPENAI_API_KEY": ""}
    )
    assert proc.returncode == 5 and "no API key for OpenAI" in proc.stdout
    assert emu.ledger()["batches"] == []


def test_check_refuses_a_flag_naming_no_model_in_one_line(batch_emulator):
    proc = run_cli("check", "--answer-model", "azure/", env=_env(batch_emulator, "k"))
    assert_one_line_error(proc, "--answer-model 'azure/' names no model")
    proc = run_cli("check", env=_env(batch_emulator, "k"))
    assert_one_line_error(proc, "check needs --answer-model or --judge-model")
