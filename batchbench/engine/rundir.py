"""A run on disk: an append-only journal, its immutable config (:mod:`.runconfig`),
and its locks.

The run's state is never stored, only computed from the journal
(:mod:`.state`). A crash can therefore leave nothing inconsistent behind; at worst
the last journal line is torn, and a torn line is ignored (the action it described
is repeated, and every action is safe to repeat).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import msgspec

from .._io import append_line, atomic_write_text, jsonl_lines, storage
from ..errors import BatchbenchError, ConfigError, RunLockedError, RunStateError, UnknownRun
from .events import DECODER, ENCODER, Created, Disowned, Event
from .runconfig import (
    RunConfig,
    check_name,
    config_conflicts,
)
from .state import RunState, fold

if TYPE_CHECKING:
    import polars as pl

    from ..providers.base import Wire

E = TypeVar("E", bound=Event)

_SAFE = re.compile(r"[A-Za-z0-9_.-]")
CONFIG_FILE = "run.json"
JOURNAL_FILE = "journal.jsonl"
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "results.summary.json"
REPORT_FILE = "report.json"
LOCK_FILE = ".lock"


class Run:
    """Paths and files of one run directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = root.name

    # paths ----------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def journal_path(self) -> Path:
        return self.root / JOURNAL_FILE

    @property
    def results_path(self) -> Path:
        return self.root / RESULTS_FILE

    @property
    def passes_path(self) -> Path:
        """Every judge pass's decisions and score, when a run has more than one."""
        return self.root / "judge_passes.jsonl"

    @property
    def noise_path(self) -> Path:
        return self.root / "judge_noise.json"

    @property
    def summary_path(self) -> Path:
        return self.root / SUMMARY_FILE

    @property
    def report_path(self) -> Path:
        return self.root / REPORT_FILE

    @property
    def requests_dir(self) -> Path:
        return self.root / "requests"

    @property
    def raw_dir(self) -> Path:
        return self.root / "raw"

    def raw_path(self, file_id: str) -> Path:
        """Where a downloaded result file is kept: its service's id, with any character
        outside ``[A-Za-z0-9_.-]`` written ``%XX`` (``files/x`` → ``files%2Fx.jsonl``)."""
        name = "".join(c if _SAFE.match(c) else f"%{ord(c):02X}" for c in file_id)
        if not file_id or name.startswith(".") or len(name) > 200:
            raise RunStateError(f"unsafe file id from the API: {file_id!r}")
        return self.raw_dir / f"{name}.jsonl"

    def read_results(self, wire: Wire, refs: Sequence[str]) -> pl.DataFrame:
        """The kept result files of these refs (the service's file ids), read by their
        wire; each line's ``file`` is its file's ref, never a path."""
        import polars as pl  # status and list use this module without polars

        paths = {str(self.raw_path(ref)): ref for ref in refs}
        frame = wire.read_results([Path(p) for p in paths])
        return frame.with_columns(pl.col("file").replace_strict(paths, return_dtype=pl.String))

    # config ---------------------------------------------------------------
    def exists(self) -> bool:
        return self.config_path.is_file()

    def load_config(self) -> RunConfig:
        try:
            data = json.loads(self.config_path.read_text(encoding="utf-8"))
            return RunConfig(**data)
        except FileNotFoundError:
            raise RunStateError(f"{self.root}: not a batchbench run (no {CONFIG_FILE})") from None
        except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as exc:
            raise RunStateError(f"{self.config_path}: unreadable run config ({exc})") from None

    def create(self, config: RunConfig) -> RunConfig:
        """The run's config: written now if the run is new, else the existing one.

        The folder is made first and the config written under the run's lock, so
        of two processes creating the same new run exactly one configuration
        wins; the other reads it (and is refused if it differs, or while the
        winner holds the lock). The caller must hold :meth:`lock`.
        """
        if self.exists():
            existing = self.load_config()
            diffs = config_conflicts(existing, config)
            if diffs:
                raise ConfigError(
                    f"run {self.name!r} in {self.root.parent.resolve()} exists with another"
                    f" configuration: {'; '.join(diffs)} (use another --run name)"
                )
            return existing
        with storage(self.root):
            for sub in (self.requests_dir, self.raw_dir):
                sub.mkdir(mode=0o700, exist_ok=True)
        atomic_write_text(self.config_path, config.to_json())
        return config

    def make_folder(self) -> None:
        """The private run folder (0700), so its lock can be taken."""
        with storage(self.root):
            self.root.parent.mkdir(parents=True, exist_ok=True)
            self.root.mkdir(mode=0o700, exist_ok=True)
            os.chmod(self.root, 0o700)

    # journal --------------------------------------------------------------
    def record(self, event: E, now: float) -> E:
        """Append an event, stamped with ``now`` (the caller's clock), and fsync it."""
        event = msgspec.structs.replace(event, t=now)
        append_line(self.journal_path, ENCODER.encode(event).decode("utf-8"))
        return event

    def journal_size(self) -> int:
        try:
            return self.journal_path.stat().st_size
        except FileNotFoundError:
            return 0

    def state(self, case_ids: list[str]) -> RunState:
        """The run's state, folded from its journal."""
        return fold(case_ids, self.events(), str(self.journal_path))

    def events(self) -> list[Event]:
        try:
            data = self.journal_path.read_bytes()
        except FileNotFoundError:
            return []
        events: list[Event] = []
        last = data.count(b"\n") + 1
        for lineno, line in jsonl_lines(data):
            try:
                events.append(DECODER.decode(line))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if lineno == last and isinstance(exc, msgspec.DecodeError):
                    continue  # torn by a crash mid-append: the action repeats
                raise RunStateError(
                    f"{self.journal_path}: line {lineno} is corrupt ({exc})"
                ) from None
        return events

    def repair(self) -> None:
        """Drop a line torn by a crash from the end of the journal and the results.

        Only a line without its newline is dropped: the action it recorded is
        repeated (journal) or its rows are written again (results).
        """
        for path in (self.journal_path, self.results_path, self.passes_path):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            if data and not data.endswith(b"\n"):
                with storage(path), open(path, "r+b") as fh:
                    fh.truncate(data.rfind(b"\n") + 1)
                    fh.flush()
                    os.fsync(fh.fileno())

    # lock -----------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive right to advance this run: a second process is refused."""
        with _exclusive(self.root / LOCK_FILE, str(os.getpid())) as holder:
            if holder is not None:
                raise RunLockedError(
                    f"run {self.name!r} is being advanced by another process"
                    f" (pid {holder or '?'}); wait for it or stop it"
                )
            yield

    @contextlib.contextmanager
    def token_lock(self, run_id: str) -> Iterator[None]:
        """Exclusive right to advance the run this folder holds, whichever folder of the
        jobs folder holds it too (a copy, a clone, the original beside a restored
        backup: one run token in their run.json). One at a time, each looks on the
        service before it buys, so the second adopts what the first bought."""
        me = f"{os.getpid()} {self.root.resolve()}"
        with _exclusive(token_file(self.root.parent, run_id), me) as holder:
            if holder is not None:
                pid, _, folder = holder.partition(" ")
                raise RunLockedError(
                    f"{self.root.resolve()} holds the same run as {folder or '?'} (one run"
                    f" token in their run.json), which another process (pid {pid or '?'}) is"
                    " advancing: run this one when it has stopped, and it adopts what that"
                    " one bought"
                )
            yield


def token_file(jobs_dir: Path, run_id: str) -> Path:
    """The lock every folder holding one run (one run token) takes to advance it."""
    return Path(jobs_dir) / f".run-{run_id}.lock"


@contextlib.contextmanager
def _exclusive(path: Path, me: str) -> Iterator[str | None]:
    """An flock on ``path``, the holder's words (``me``) written in it: yields None when
    taken, or the words of the process holding it."""
    with storage(path):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield os.pread(fd, 4096, 0).decode(errors="replace").strip()
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.encode(), 0)
        yield None
    finally:
        os.close(fd)


def open_run(jobs_dir: Path, name: str) -> Run:
    return Run(Path(jobs_dir) / check_name(name))


def existing_run(jobs_dir: Path, name: str) -> Run:
    """The run of this name in the jobs folder; one line naming the folder when none."""
    run = open_run(jobs_dir, name)
    if not run.exists():
        raise UnknownRun(f"no run {name!r} in {Path(jobs_dir).resolve()}")
    return run


# A run folder `remove` has renamed aside before deleting it: no longer a run.
REMOVING = ".removing-"


def list_runs(jobs_dir: Path) -> list[Run]:
    jobs_dir = Path(jobs_dir)
    if not jobs_dir.is_dir():
        return []
    return [
        Run(p)
        for p in sorted(jobs_dir.iterdir())
        if (p / CONFIG_FILE).is_file() and not p.name.startswith(REMOVING)
    ]


def batches_elsewhere(run: Run, run_id: str) -> set[str]:
    """Every batch the other runs of the jobs folder hold (their journals, read as they
    are): a batch found after a lost create on a service whose batches carry no
    metadata must not be one of theirs. A folder holding the same run (its run.json's
    token: a copy, a clone, the original a backup was restored beside) is not another
    run: what it bought is this run's to adopt, never to buy again. A folder that does
    not read is skipped."""
    found: set[str] = set()
    for other in list_runs(run.root.parent):
        if other.root == run.root:
            continue
        try:
            if other.load_config().run_id == run_id:
                continue
            events = other.events()
        except BatchbenchError:
            continue
        held = {e.batch_id for e in events if isinstance(e, Created)}
        found |= held - {e.batch_id for e in events if isinstance(e, Disowned)}
    return found
