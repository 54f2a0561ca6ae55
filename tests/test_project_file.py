"""The project file (#47.11): the judge, dataset, jobs folder and prices written once,
found upward from the working folder as ruff and uv find theirs, below flags and the
environment, said by `run` and `status`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import assert_one_line_error, run_cli
from support.runs import env


@pytest.fixture
def project(tmp_path, monkeypatch, fixture_dir):
    """A project folder with its batchbench.toml, the command run from a folder inside."""
    monkeypatch.delenv("BATCHBENCH_PROJECT_FILE")
    root = tmp_path / "project"
    (root / "work" / "deep").mkdir(parents=True)
    (root / "batchbench.toml").write_text(
        'judge-model = "judge-model"\n'
        f'dataset = "{fixture_dir}"\n'
        'jobs-dir = "runs"  # relative: to this file\n'
    )
    monkeypatch.chdir(root / "work" / "deep")
    return root


def _run(emu, *extra):
    return [
        "run",
        "--answer-model",
        "ans-model",
        "--base-url",
        emu.base_url,
        "--limit",
        "3",
        *extra,
    ]


def test_a_run_takes_the_judge_dataset_and_jobs_folder_from_the_project_file(
    batch_emulator, project
):
    proc = run_cli(*_run(batch_emulator, "--poll-interval", "0.05"), env=env())
    assert proc.returncode == 0, proc.stderr
    toml = project / "batchbench.toml"
    assert f"(project file {toml} (judge-model, dataset, jobs-dir))" in proc.stdout
    config = json.loads((project / "runs" / "ans-model" / "run.json").read_text())
    assert config["judge_model"] == "judge-model"
    status = run_cli("status", "ans-model")  # no --jobs-dir: the project's
    assert status.returncode == 0 and f"(project file {toml}" in status.stdout
    assert "ans-model: complete" in status.stdout
    as_json = json.loads(run_cli("status", "ans-model", "--json").stdout)
    assert as_json["project_file"] == str(toml)


def test_flags_and_the_environment_win_over_the_project_file(batch_emulator, project, tmp_path):
    flagged = tmp_path / "flagged"
    proc = run_cli(*_run(batch_emulator, "--jobs-dir", str(flagged)), env=env())
    assert proc.returncode == 0, proc.stderr
    assert (flagged / "ans-model" / "run.json").is_file()
    from_env = tmp_path / "from-env"
    proc = run_cli(*_run(batch_emulator), env={**env(), "BATCHBENCH_JOBS_DIR": str(from_env)})
    assert proc.returncode == 0, proc.stderr
    assert (from_env / "ans-model" / "run.json").is_file()
    assert not (project / "runs").exists()


def test_pyproject_tables_are_found_and_passed_over_as_ruff_does(
    tmp_path, monkeypatch, fixture_dir
):
    monkeypatch.delenv("BATCHBENCH_PROJECT_FILE")
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "inner"
    inner.mkdir(parents=True)
    (outer / "pyproject.toml").write_text('[tool.batchbench]\njobs-dir = "outer-runs"\n')
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no table: passed over
    monkeypatch.chdir(inner)
    said = run_cli("list").stdout
    assert f"no runs in {outer / 'outer-runs'}" in said
    # batchbench.toml beside a pyproject.toml with a table wins in its folder
    (inner / "batchbench.toml").write_text('jobs-dir = "own-runs"\n')
    (inner / "pyproject.toml").write_text('[tool.batchbench]\njobs-dir = "table-runs"\n')
    assert f"no runs in {inner / 'own-runs'}" in run_cli("list").stdout
    # BATCHBENCH_PROJECT_FILE names one, or none
    named = tmp_path / "named.toml"
    named.write_text('jobs-dir = "named-runs"\n')
    listed = run_cli("list", env={"BATCHBENCH_PROJECT_FILE": str(named)}).stdout
    assert f"no runs in {tmp_path / 'named-runs'}" in listed
    listed = run_cli("list", env={"BATCHBENCH_PROJECT_FILE": "none"}).stdout
    assert f"no runs in {inner / 'jobs'}" in listed


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('judge = "x"\n', ["batchbench.toml: unknown key 'judge'", "judge-model"]),
        ("jobs-dir = 3\n", ["batchbench.toml: jobs-dir must be a non-empty string"]),
        ('jobs-dir = "a\n', ["batchbench.toml: not TOML", "line 1"]),
    ],
)
def test_a_bad_project_file_is_one_line_naming_it(tmp_path, monkeypatch, text, fragments):
    monkeypatch.delenv("BATCHBENCH_PROJECT_FILE")
    (tmp_path / "batchbench.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert_one_line_error(run_cli("list"), str(tmp_path / "batchbench.toml"), *fragments)


def test_the_demo_keeps_to_its_own_sample_and_folder(project, monkeypatch):
    """The demo rehearses the bundled sample in a temporary folder whatever the project
    file says (its dataset and jobs folder are the team's real ones)."""
    proc = run_cli("demo")
    assert proc.returncode == 0, proc.stderr
    assert "the demo ran in a temporary folder" in proc.stdout
    assert not (project / "runs").exists()
    assert Path.cwd() == project / "work" / "deep"
