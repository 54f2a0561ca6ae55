"""Shared fixtures: where the datasets and goldens are, the test's clock, the emulator.

Every test gets a fake clock (``clock``): the emulator the test starts runs on it
and so does every command the test runs in this process (``support.cli.run_cli``),
so an hour of batch time passes in milliseconds and in the order the code's own
waits give, never by racing real time. A test that starts ``batchbench`` as a
subprocess gives its emulator real time instead (``clock=SystemClock()``).
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli import FIXTURE, REPO, SAMPLE, use_clock

from batchbench.cli import GC_THRESHOLDS
from batchbench.emulator import Emulator, FakeClock

# Model names the tests use that the emulator's catalogue does not hold (its catalogue
# is the price table's models and the simulated ones): added to every test emulator.
TEST_MODELS = (
    "ans-model",
    "judge-model",
    "a",
    "j",
    "m",
    "e",
    "mod",
    "other",
    "judge",
    "model-a",
    "model-b",
    "second-model",
    "other-judge",
    "another-judge",
)


def _in_memory_temp() -> None:
    """Temporary folders in memory (``/dev/shm``) when the machine has room there and
    nobody chose another place: a run fsyncs every journal line and rows file, and on a
    disk those waits were a tenth of the suite (#52.5). No test can tell the difference:
    a crash here is a killed process, never a lost machine, so what fsync guards is
    never tested. Set at configure, before xdist starts its workers, which inherit it
    (as does every command a test starts)."""
    shm = "/dev/shm"
    if os.environ.get("TMPDIR") or not os.path.isdir(shm) or not os.access(shm, os.W_OK):
        return
    free = shutil.disk_usage(shm).free
    if free < 4 << 30:  # a container's default /dev/shm is 64 MB; a run of the suite ~150 MB
        return
    os.environ["TMPDIR"] = shm
    tempfile.tempdir = None  # read TMPDIR again


def pytest_configure(config: pytest.Config) -> None:
    # No project file a developer keeps above the checkout reaches the tests (the tests
    # of the project file itself take this away).
    os.environ["BATCHBENCH_PROJECT_FILE"] = "none"
    if config.option.basetemp is None:
        _in_memory_temp()
    config.addinivalue_line(
        "markers",
        "soak: long, seeded runs (kills at random moments, big"
        " files); `pytest -m soak`, run by .ci/run",
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collector as the command sets it (``cli.main``, which in-process commands do
    not pass through), and what collection imported — every SDK, a few million objects
    that live as long as the process — set aside from its scans (``gc.freeze``): a full
    collection scanned them all again, many times a test."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest single checks first (the type checker, the kill sweep), so that on
    several workers they run beside the rest rather than after it."""
    first = ("test_quality.py", "test_a_sigkill_at_each_failpoint")
    items.sort(key=lambda item: not any(name in item.nodeid for name in first))


def _dataset_dir() -> Path:
    return Path(os.environ.get("BATCHBENCH_TEST_DATASET", REPO.parent / "shared" / "bedside-bench"))


@pytest.fixture(autouse=True)
def clock() -> Iterator[FakeClock]:
    """The test's clock, shared by its emulators and its in-process commands."""
    fake = FakeClock()
    use_clock(fake)
    yield fake
    use_clock(None)


@pytest.fixture
def batch_emulator_factory(clock: FakeClock) -> Iterator[Callable[..., Emulator]]:
    """Emulators on the test's clock (unless given another), knowing the test models."""
    started: list[Emulator] = []

    def make(**options: Any) -> Emulator:
        options.setdefault("latency", 0.05)
        options.setdefault("clock", clock)
        options["models"] = [*TEST_MODELS, *options.get("models", ())]
        emu = Emulator(**options).start()
        started.append(emu)
        return emu

    yield make
    for emu in started:
        emu.stop()


@pytest.fixture
def batch_emulator(batch_emulator_factory: Callable[..., Emulator]) -> Emulator:
    return batch_emulator_factory()


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
    from batchbench.bench.dataset import load_dataset

    if request.param == "fixture":
        root, golden = FIXTURE / "dataset", FIXTURE / "golden"
    else:
        root = request.getfixturevalue("dataset_dir")
        golden = root.parent / "golden"
    return GoldenSet(root, golden, load_dataset(root))


@pytest.fixture(scope="session")
def fixture_dataset(fixture_dir: Path) -> Any:
    from batchbench.bench.dataset import load_dataset

    return load_dataset(fixture_dir)


@pytest.fixture(scope="session")
def shared_dir(dataset_dir: Path) -> Path:
    return dataset_dir.parent


@pytest.fixture(scope="session")
def golden_dir(shared_dir: Path) -> Path:
    return shared_dir / "golden"


@pytest.fixture(scope="session")
def dataset(dataset_dir: Path) -> Any:
    from batchbench.bench.dataset import load_dataset

    return load_dataset(dataset_dir)


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """A writable copy of the bundled sample, for tests that break it."""
    dest = tmp_path / "sample"
    shutil.copytree(SAMPLE, dest)
    return dest


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
def small_disk(tmp_path: Path) -> Iterator[Disk]:
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


def pytest_terminal_summary(terminalreporter) -> None:
    """How many seeds the simulation explored, and the faults they drew (#61)."""
    import json

    from support.simulation import summary

    outcomes, seen = [], set()
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call" or report.nodeid in seen:
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name == "simulation":
                    seen.add(report.nodeid)
                    outcomes.append(json.loads(value))
    if outcomes:
        terminalreporter.write_line(summary(outcomes))
