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


def test_list_and_errors_say_who_chose_the_jobs_folder(batch_emulator, project, tmp_path):
    """#63.10: a jobs folder the user did not type — the project file's, found upward, or
    BATCHBENCH_JOBS_DIR's — is named with who chose it, by `list` and by every error that
    names the folder; one typed is not."""
    toml = project / "batchbench.toml"
    runs = project / "runs"
    assert run_cli(*_run(batch_emulator), env=env()).returncode == 0
    listed = run_cli("list")
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[0] == f"runs in {runs} (the jobs folder {toml} names)"
    proc = run_cli("status", "ans-modle")
    assert_one_line_error(proc, f"no run 'ans-modle' in {runs}", f"(the jobs folder {toml} names)")
    proc = run_cli("status", "nope", env={"BATCHBENCH_JOBS_DIR": str(tmp_path)})
    assert_one_line_error(proc, f"in {tmp_path} (the jobs folder BATCHBENCH_JOBS_DIR names)")
    proc = run_cli("status", "nope", "--jobs-dir", str(runs))
    assert_one_line_error(proc, f"no run 'nope' in {runs}")
    assert "names)" not in proc.stderr
    assert run_cli("list", "--jobs-dir", str(runs)).stdout.startswith("run ")  # the table


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


BROKEN = {
    "not UTF-8": (b'jobs-dir = "\xff\xfe"\n', "not UTF-8"),
    "tool = 5": (b"tool = 5\n", "tool must be a table"),
    "nested deep": (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deep"),
    "a secret": (b'jobs-dir = "s3://AKIA:secret@team/runs"\n', "never holds a secret"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_project_file_is_one_line_and_help_version_and_tab_still_work(
    case, tmp_path, monkeypatch
):
    """#61.7: a project file that is not UTF-8, has `tool = 5`, nests thousands deep or
    holds a URL with credentials: one line naming it (never a traceback, the secret
    never echoed); --help and --version still answer, and a TAB completes silently."""
    import subprocess
    import sys

    monkeypatch.delenv("BATCHBENCH_PROJECT_FILE")
    data, said = BROKEN[case]
    name = "pyproject.toml" if case == "tool = 5" else "batchbench.toml"  # named: ours
    (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    named = {"BATCHBENCH_PROJECT_FILE": str(tmp_path / name)}
    proc = run_cli("list", env=named)
    assert_one_line_error(proc, str(tmp_path / name), said)
    assert "secret" not in proc.stderr.replace("never holds a secret", "")
    for asked in (["--help"], ["--version"], ["list", "--help"]):
        answered = run_cli(*asked, env=named)
        assert answered.returncode == 0 and "Traceback" not in answered.stderr, answered.stderr
    command = Path(sys.executable).with_name("batchbench")
    tab = {
        "COMP_WORDS": "batchbench ca",
        "COMP_CWORD": "1",
        "_BATCHBENCH_COMPLETE": "complete_bash",
    }
    done = subprocess.run(
        [command], capture_output=True, text=True, env={**tab, **named, "PATH": "/usr/bin"}
    )
    assert done.stdout.split() == ["calibrate", "cancel"] and not done.stderr, done.stderr


def test_a_project_file_that_is_no_file_is_refused_at_once(tmp_path):
    """#61.7: BATCHBENCH_PROJECT_FILE=/dev/zero read for ever; a FIFO would block."""
    import os

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        proc = run_cli("list", "--jobs-dir", str(tmp_path), env={"BATCHBENCH_PROJECT_FILE": path})
        assert_one_line_error(proc, path, "not a regular file")


def test_another_projects_broken_pyproject_above_is_passed_over(tmp_path, monkeypatch):
    """#61.7: an unrelated pyproject.toml with a TOML error in a parent folder (or one this
    user cannot read) is not a project file of ours: passed over, not a stop."""
    monkeypatch.delenv("BATCHBENCH_PROJECT_FILE")
    inner = tmp_path / "inner"
    inner.mkdir()
    (tmp_path / "pyproject.toml").write_text('[project\nname = "x"\n')
    monkeypatch.chdir(inner)
    proc = run_cli("list")
    assert proc.returncode == 0, proc.stderr
    assert f"no runs in {inner / 'jobs'}" in proc.stdout


def test_a_strangers_project_file_in_a_shared_folder_is_not_obeyed(tmp_path, monkeypatch):
    """#61.7: a batchbench.toml owned by another user in a shared folder (a /tmp, mode
    1777) would choose this user's bucket, dataset, prices or judge: refused, naming it,
    as git refuses a repository another user owns (CVE-2022-24765)."""
    import os

    if os.getuid() != 0:
        pytest.skip("making a file another user's needs root")
    monkeypatch.delenv("BATCHBENCH_PROJECT_FILE")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    planted = shared / "batchbench.toml"
    planted.write_text('jobs-dir = "s3://strangers-bucket/runs"\n')
    os.chown(planted, 4242, 4242)
    mine = shared / "mine"
    mine.mkdir()
    monkeypatch.chdir(mine)
    monkeypatch.setattr(os, "getuid", lambda: 1000)  # a user, not root: the file is no one's here
    proc = run_cli("list")
    assert_one_line_error(proc, str(planted), "belongs to another user")
    assert "strangers-bucket" not in proc.stdout
