"""Shared fixtures: where the public split and golden files are, and a CLI runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "batchbench" / "sample"
FIXTURE = REPO / "tests" / "fixtures"  # synthetic dataset + the reference's goldens over it
sys.path.insert(0, str(REPO / "benchmarks"))


def _dataset_dir() -> Path:
    return Path(os.environ.get("BATCHBENCH_TEST_DATASET", REPO.parent / "shared" / "bedside-bench"))


@pytest.fixture(scope="session")
def dataset_dir() -> Path:
    """The public split: tests that need it skip without it (CI sets
    BATCHBENCH_REQUIRE_PUBLIC_SPLIT=1, which makes its absence a failure)."""
    path = _dataset_dir()
    if not (path / "registry.json").is_file():
        why = f"public split not found at {path}; set BATCHBENCH_TEST_DATASET to run this test"
        if os.environ.get("BATCHBENCH_REQUIRE_PUBLIC_SPLIT") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return path


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    """The synthetic fixture dataset, in the repository: runs everywhere."""
    return FIXTURE / "dataset"


@pytest.fixture(scope="session")
def fixture_golden_dir() -> Path:
    return FIXTURE / "golden"


@dataclass
class GoldenSet:
    """A dataset and the reference runner's golden files over it."""

    dataset_dir: Path
    golden_dir: Path
    dataset: Any


@pytest.fixture(scope="session", params=["fixture", "public-split"])
def golden_set(request: pytest.FixtureRequest) -> GoldenSet:
    """Exactness tests run on the in-repo fixture everywhere, and on the public split too
    where it is found."""
    from batchbench.dataset import load_dataset

    if request.param == "fixture":
        root, golden = FIXTURE / "dataset", FIXTURE / "golden"
    else:
        root = request.getfixturevalue("dataset_dir")
        golden = root.parent / "golden"
    return GoldenSet(root, golden, load_dataset(root))


@pytest.fixture(scope="session")
def fixture_dataset(fixture_dir: Path):
    from batchbench.dataset import load_dataset

    return load_dataset(fixture_dir)


@pytest.fixture(scope="session")
def shared_dir(dataset_dir: Path) -> Path:
    return dataset_dir.parent


@pytest.fixture(scope="session")
def golden_dir(shared_dir: Path) -> Path:
    return shared_dir / "golden"


@pytest.fixture(scope="session")
def dataset(dataset_dir: Path):
    from batchbench.dataset import load_dataset

    return load_dataset(dataset_dir)


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """A writable copy of the bundled sample, for tests that break it."""
    dest = tmp_path / "sample"
    shutil.copytree(SAMPLE, dest)
    return dest


def run_cli(
    *args: str,
    env: dict | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
    real: bool = False,
):
    """The CLI, in this process through typer's runner (fast); ``real=True`` (or a
    ``cwd``) runs ``python -m batchbench`` as a subprocess. Either way the result has
    ``returncode``, ``stdout`` and ``stderr``; an exception that escaped the CLI
    shows as a traceback on stderr, as it would in a terminal."""
    if not real and cwd is None:
        return _in_process(args, env)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "batchbench", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


def _in_process(args: tuple[str, ...], env: dict | None) -> subprocess.CompletedProcess:
    import traceback

    from typer.testing import CliRunner

    from batchbench.cli import app

    result = CliRunner().invoke(app, list(args), env=env)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, stderr)


def assert_one_line_error(proc, *fragments: str) -> None:
    """A failed command: non-zero exit, and its last stderr line is the one error line
    naming the culprit (progress lines may come before it, nothing after)."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("error:", "internal error"))]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


class Disk:
    """A real 4 MiB tmpfs: fill it up, or make it read-only, as a full disk would be."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        with open(self.filler, "wb") as fh:
            try:
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
            except OSError:
                pass

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def read_only(self, on: bool) -> None:
        mode = "remount,ro" if on else "remount,rw"
        subprocess.run(["mount", "-o", mode, str(self.path)], check=True)


@pytest.fixture
def small_disk(tmp_path: Path):
    path = tmp_path / "disk"
    path.mkdir()
    mounted = os.geteuid() == 0 and (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(path)],
            capture_output=True,
        ).returncode
        == 0
    )
    if not mounted:
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs as root and must be able to mount a tmpfs")
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    try:
        yield Disk(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
