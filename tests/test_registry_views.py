"""Every provider of the registry in every view made of providers (#41.2): a record added
to ``providers/registry.py`` and forgotten anywhere a user or a test lists providers
fails here, by name.
"""

from __future__ import annotations

import pytest
from support.cli import read_lines, run_cli
from support.providers import ENDINGS, NO_PREFLIGHT, RIGS, TYPOS

from batchbench.emulator import Emulator
from batchbench.providers.registry import BY_NAME, PROVIDERS

NAMES = [spec.name for spec in PROVIDERS]
# Account variables a run goes without (an OpenAI organization or project: the key's own).
OPTIONAL = {"OPENAI_ORG_ID", "OPENAI_PROJECT_ID"}


@pytest.fixture(scope="module")
def emulator_environment() -> dict[str, str]:
    with Emulator(latency=0.0) as emu:
        return emu.environment()


@pytest.mark.parametrize("name", NAMES)
def test_the_emulator_serves_and_prints_every_provider(name, emulator_environment):
    """Its faces, and the variables ``batchbench emulator`` prints and the demo sets:
    each provider's base-URL variable and account variables."""
    spec = BY_NAME[name]
    assert spec.base_url_variable in emulator_environment, spec.base_url_variable
    for variable in set(spec.account_variables) - OPTIONAL:
        assert variable in emulator_environment, variable


def test_the_emulator_command_prints_every_providers_variables(emulator_environment):
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "batchbench", "emulator", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = read_lines(proc.stdout, 2 + len(emulator_environment))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        finally:  # one that did not stop fails the test, and is not left running
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    printed = "".join(lines)
    for spec in PROVIDERS:
        assert f"export {spec.base_url_variable}=" in printed, (spec.name, printed)


def test_run_help_names_every_provider():
    proc = run_cli("run", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for spec in PROVIDERS:
        assert spec.label in text, spec.label
        for flag in spec.flags:  # its account settings, each an option naming its variable
            assert flag.option in text and flag.variable in text, flag


def test_the_tests_rig_every_provider_and_list_its_rules():
    assert sorted(RIGS) == sorted(NAMES)
    assert sorted([*TYPOS, *NO_PREFLIGHT]) == sorted(NAMES)
    with_endings = {spec.name for spec in PROVIDERS if spec.refused_endings}
    assert set(ENDINGS) == with_endings
    for name, ending in ENDINGS.items():
        assert ending in BY_NAME[name].refused_endings


def test_the_demo_runs_without_any_providers_sdk(tmp_path):
    """A plain install (no extras) runs the demo: the emulator's faces need no provider
    SDK (nor google-auth's cryptography, which only the Vertex clients bring)."""
    import subprocess
    import sys

    blocked = ["cryptography", "google.genai", "google.cloud", "anthropic", "boto3", "fireworks"]
    code = (
        f"import sys; sys.modules.update(dict.fromkeys({blocked!r}))\n"
        "from batchbench.cli import main\n"
        "sys.argv = ['batchbench', 'demo', '--jobs-dir', sys.argv[1]]\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "jobs")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "overall (macro)" in proc.stdout
