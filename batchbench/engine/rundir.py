"""A run on disk: an append-only journal, its immutable config (:mod:`.runconfig`),
and its locks.

The run's state is never stored, only computed from the journal
(:mod:`.state`). A crash can therefore leave nothing inconsistent behind; at worst
the last journal line is torn, and a torn line is ignored (the action it described
is repeated, and every action is safe to repeat).
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import msgspec

from .._io import append_line, atomic_write_text, jsonl_lines, storage
from ..clock import SYSTEM, Clock
from ..errors import BatchbenchError, ConfigError, RunStateError, UnknownRun
from ..storage import MOVED, home_for, moved_away, runs_in, shown
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
MOVED_FILE = MOVED  # all that is left where a run was moved from


class Run:
    """Paths and files of one run directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = root.name
        self.home = home_for(root)  # where its files live: this folder, or a bucket

    def _here(self, name: str) -> Path:
        """The path of one of the run's files, the file fetched first (a run in a bucket)."""
        self.home.fetch(name)
        return self.root / name

    @property
    def shown(self) -> str:
        """The run's place as the user knows it (a folder, or a bucket's URI)."""
        return self.home.shown()

    # paths ----------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self._here(CONFIG_FILE)

    @property
    def journal_path(self) -> Path:
        return self._here(JOURNAL_FILE)

    @property
    def results_path(self) -> Path:
        return self._here(RESULTS_FILE)

    @property
    def passes_path(self) -> Path:
        """Every judge pass's decisions and score, when a run has more than one."""
        return self._here("judge_passes.jsonl")

    @property
    def noise_path(self) -> Path:
        return self._here("judge_noise.json")

    @property
    def summary_path(self) -> Path:
        return self._here(SUMMARY_FILE)

    @property
    def report_path(self) -> Path:
        return self._here(REPORT_FILE)

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
        return self._here(f"raw/{name}.jsonl")

    def request_path(self, name: str) -> Path:
        """A request file the run wrote (``answers-0001.jsonl``)."""
        return self._here(f"requests/{name}")

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

    def moved(self) -> str | None:
        """Where the run was moved to (``batchbench move``), when this is where it was."""
        note = self.moved_note()
        return None if note is None else str(note.get("to"))

    def moved_note(self) -> dict[str, object] | None:
        """The note a move away from here left (where to, which run), if any."""
        try:
            found = json.loads(self._here(MOVED_FILE).read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
            return None
        return found if isinstance(found, dict) else None

    def refuse_if_moved(self) -> None:
        """A run moved elsewhere lives there only: one live home at a time."""
        try:
            note = self._here(MOVED_FILE).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return
        raise moved_away(self.name, note)

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
        self.refuse_if_moved()
        with storage(self.root):  # (a run read from a bucket has only what it fetched)
            for sub in (self.requests_dir, self.raw_dir):
                sub.mkdir(mode=0o700, exist_ok=True)
        if self.exists():
            existing = self.load_config()
            diffs = config_conflicts(existing, config)
            if diffs:
                raise ConfigError(
                    f"run {self.name!r} in {shown(self.root.parent)} exists with another"
                    f" configuration: {'; '.join(diffs)} (use another --run name)"
                )
            return existing
        atomic_write_text(self.config_path, config.to_json())
        self.home.created(CONFIG_FILE)
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
        line = ENCODER.encode(event)
        self.home.before_record()  # a run in a bucket: the files it names are there first
        append_line(self.journal_path, line.decode("utf-8"))
        self.home.recorded(line + b"\n")
        return event

    def journal_size(self) -> int:
        try:
            return self.journal_path.stat().st_size
        except FileNotFoundError:
            return 0

    def state(self, case_ids: list[str]) -> RunState:
        """The run's state, folded from its journal. The cyclic collector waits while it
        is: a 100,000-case run's state is 300,000 new objects in no cycle, and the sweeps
        their allocation set off were 40 % of the fold (and of ``status``)."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return fold(case_ids, self.events(), str(self.journal_path))
        finally:
            if collecting:
                gc.enable()

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
                where = self.home.line_at(self.journal_path, lineno)
                raise RunStateError(f"{where} is corrupt ({exc})") from None
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
    def lock(self, clock: Clock = SYSTEM) -> contextlib.AbstractContextManager[None]:
        """Exclusive right to advance this run: a second process is refused (a local
        folder's flock, a bucket's lease, timed by ``clock``)."""
        return self.home.lock(clock.time)

    def keep(self) -> None:
        """Keep the right to advance the run while waiting (a bucket's lease renewed; it
        stops the run here, in one line, when another machine took it)."""
        self.home.keep()

    def token_lock(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        """Exclusive right to advance the run this folder holds, whichever folder of the
        jobs folder holds it too (a copy, a clone, the original beside a restored
        backup: one run token in their run.json). One at a time, each looks on the
        service before it buys, so the second adopts what the first bought."""
        return self.home.token_lock(run_id)


def open_run(jobs_dir: Path, name: str) -> Run:
    return Run(Path(jobs_dir) / check_name(name))


def existing_run(jobs_dir: Path, name: str) -> Run:
    """The run of this name in the jobs folder; one line naming the folder when none."""
    run = open_run(jobs_dir, name)
    if not run.exists():
        run.refuse_if_moved()
        names = [r.root.name for r in list_runs(Path(jobs_dir))]
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownRun(f"no run {name!r} in {shown(Path(jobs_dir))}{hint}")
    return run


# A run folder `remove` has renamed aside before deleting it: no longer a run.
REMOVING = ".removing-"


def list_runs(jobs_dir: Path) -> list[Run]:
    jobs_dir = Path(jobs_dir)
    names = runs_in(jobs_dir)  # a bucket's, else the folder's
    if names is not None:
        runs = [Run(jobs_dir / name) for name in names if not name.startswith(".")]
        return [r for r in runs if r.exists()]
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
