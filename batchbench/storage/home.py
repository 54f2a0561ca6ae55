"""Where a run's files live: a local folder (its files are the run), or a bucket, read
into a working folder for the command and written back as the run advances.

The seam the engine sees is :class:`Home`: ``fetch`` before a file is read (nothing, for
a local run; for a run in a bucket, the file pulled once), ``before_record`` and
``recorded`` around each journal line, ``lock`` to advance the run, ``close`` at the end
of the command. In a bucket:

- the journal is a create-only log: entry ``journal/e/<seq>.json`` per line, made only if
  absent; a writer that finds its entry taken stops (another machine wrote the run);
  segments ``journal/s/<first>-<end>.jsonl`` of 64, 1,024 and 16,384 entries, and at the
  end of a command that wrote, one from the last boundary to the end (create-only too:
  lines never change), keep reading a long journal a few objects, whoever reads it; a
  ``journal.jsonl`` object (a local run moved in) is the start of it;
- request files are written once (create-only; an object already there must hold the
  same bytes), each before the journal line that names it; a downloaded result file,
  which owed results may fetch again, is written once per copy, under the number of the
  journal line that follows it (``raw/<file>/<seq>``: the newest is the highest);
- the rows (``results.jsonl``, ``judge_passes.jsonl``) are written before the journal line
  that counts them, the summary and reports at the end of the command; never a mutable
  state object: the state is the journal's, folded;
- who advances the run is a lease (:mod:`.lease`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from .. import _failpoints
from ..errors import RunLockedError, RunStateError, StorageError
from .lease import Lease
from .objects import Objects

JOURNAL = "journal.jsonl"
MOVED = "moved.json"  # all that is left where a run was moved from (``batchbench move``)
CANCEL = "cancel.json"  # a cancel asked of the machine that holds the run's lease
SEGMENTS = (64, 1024, 16_384)  # entries per segment, smallest first
ROWS = ("results.jsonl", "judge_passes.jsonl")  # written before the line that counts them
ONCE = ("requests", "raw")  # folders of files written once
_SEGMENT = re.compile(r"(\d{12})-(\d{12})\.jsonl$")


class Home(Protocol):
    """What the engine asks of the place a run lives (:class:`.rundir.Run` asks it)."""

    # One writer of the journal at a time, by a lease another machine may hold: a cancel
    # is then asked of that machine (a local journal takes a cancel's line from anyone).
    leased: bool

    def fetch(self, name: str) -> None: ...
    def line_at(self, path: Path, lineno: int) -> str:
        """Where line ``lineno`` of the run's journal (read at ``path``) lives, for a
        message: the file and line, or the bucket object that holds it."""
        ...

    def check_home(self) -> None:
        """Before a billable call, and once its lock is taken: the run still lives here
        (not moved away meanwhile); a RunStateError naming where it went, if not."""
        ...

    def before_record(self) -> None: ...
    def recorded(self, line: bytes) -> None: ...
    def created(self, name: str) -> None: ...
    def lock(
        self, clock: Callable[[], float] = time.time
    ) -> contextlib.AbstractContextManager[None]: ...
    def token_lock(self, run_id: str) -> contextlib.AbstractContextManager[None]: ...
    def keep(self) -> None: ...
    def close(self) -> None: ...
    def remove(self) -> None: ...
    def shown(self) -> str: ...
    def files(self) -> list[str]: ...
    def receive(self, files: dict[str, bytes]) -> None: ...
    def leave(self, note: bytes) -> None: ...
    def ask_cancel(self) -> None: ...
    def cancel_asked(self) -> bool: ...
    def clear_cancel(self) -> None: ...


class Remote:
    """A run in a bucket, its working folder ``root`` (see the module)."""

    leased = True

    def __init__(self, root: Path, objects: Objects, name: str) -> None:
        self.root, self.objects, self.name = root, objects, name
        self.where = objects.where
        self.fetched: set[str] = set()
        self.pushed: dict[str, tuple[int, float]] = {}  # file → (size, mtime) written
        self.seq = -1  # journal lines the bucket holds (-1: not read yet)
        self.base = 0  # of them, the lines of a copied-in journal.jsonl
        self.read = 0  # of them, those there when this command read the journal
        self.held: dict[str, bytes] = {}  # a rewritten file → the md5 of what the bucket holds
        self.sources: list[tuple[int, str]] = []  # journal line where each object starts
        self.lease: Lease | None = None
        self.wrote = False  # this process advanced the run (a reader writes nothing back)
        self.removed = False
        # Another machine wrote the run's journal (or took its lease) under this one: what
        # this process holds is stale, and nothing of it is written back.
        self.superseded = False

    def key(self, *parts: str) -> str:
        return self.where.key(self.name, *parts)

    def shown(self) -> str:
        return f"{self.where.uri}/{self.name}"

    # reading -----------------------------------------------------------------
    def fetch(self, name: str) -> None:
        if name in self.fetched:
            return
        self.fetched.add(name)
        path = self.root / name
        if name == JOURNAL:
            self._pull_journal(path)
            return
        data = self.objects.get(self._versioned(name) or self.key(name))
        if data is not None:
            self.held[name] = hashlib.md5(data).digest()
        if data is not None and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            self._mark(name)

    def _versioned(self, name: str) -> str | None:
        """A downloaded file's newest copy: each is written once, under the journal line
        that followed it (``raw/<file>/<seq>``), so the newest is the highest number."""
        if not name.startswith("raw/"):
            return None
        copies = list(self.objects.names(self.key(name) + "/"))
        return copies[-1] if copies else None

    def _pull_journal(self, path: Path) -> None:
        """The journal's lines: a copied-in ``journal.jsonl`` first, then the segments
        that cover the most, then the entries after them."""
        parts: list[bytes] = []
        base = self.objects.get(self.key(JOURNAL))
        if base:
            base = base if base.endswith(b"\n") else base[: base.rfind(b"\n") + 1]
            parts.append(base)
            self.sources.append((0, self.key(JOURNAL)))
        seq = self.base = base.count(b"\n") if base else 0
        segments: dict[int, tuple[int, str]] = {}
        for key in self.objects.names(self.key("journal", "s") + "/"):
            found = _SEGMENT.search(key)
            if found:
                first, end = int(found.group(1)), int(found.group(2))
                if end > segments.get(first, (0, ""))[0]:
                    segments[first] = (end, key)
        while seq in segments:  # the longest segment starting where the journal stands
            end, key = segments[seq]
            parts.append(self.objects.get(key) or b"")
            self.sources.append((seq, key))
            seq = end
        after = self.key("journal", "e", f"{seq - 1:012d}.json") if seq else None
        for key in self.objects.names(self.key("journal", "e") + "/", after):
            if key != self.key("journal", "e", f"{seq:012d}.json"):
                break  # a gap: what follows is not the journal's yet
            parts.append(self.objects.get(key) or b"")
            self.sources.append((seq, key))
            seq += 1
        if parts:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"".join(parts))
        self.seq = self.read = seq

    def line_at(self, path: Path, lineno: int) -> str:
        """The bucket object holding journal line ``lineno`` (1-based), and its line there:
        the command's working folder is gone by the time anyone reads the message."""
        starts = [(first, key) for first, key in self.sources if first < lineno]
        if not starts:
            return f"{self.shown()}/journal: line {lineno}"
        first, key = starts[-1]
        return f"{self.where.scheme}://{self.where.bucket}/{key}: line {lineno - first}"

    def check_home(self) -> None:
        """Asked of the bucket itself, never of what this command fetched before: a move
        by another machine leaves its note there (under the run's lease)."""
        note = self.objects.get(self.key(MOVED))
        if note is not None:
            raise moved_away(self.name, note)

    def ask_cancel(self) -> None:
        """A cancel for the lease's holder to journal (create-only: asked once is asked)."""
        self.objects.create(self.key(CANCEL), b'{"cancel": true}\n')

    def cancel_asked(self) -> bool:
        return self.objects.get(self.key(CANCEL)) is not None

    def clear_cancel(self) -> None:
        self.objects.delete(self.key(CANCEL))

    # writing -----------------------------------------------------------------
    def before_record(self) -> None:
        """Before a journal line: the lease still ours, and every file it may name in
        the bucket (the rows it counts, the files it names)."""
        self.keep()
        self._push_changed()

    def recorded(self, line: bytes) -> None:
        self.fetch(JOURNAL)
        key = self.key("journal", "e", f"{self.seq:012d}.json")
        if not self.objects.create(key, line):  # another machine's line stands there
            self.superseded = True
            raise RunLockedError(
                f"run {self.name!r}: another machine wrote line {self.seq} of its journal"
                f" ({self.shown()}); nothing more is done here: run again"
            )
        self.seq += 1
        for size in SEGMENTS:
            if self.seq % size == 0:
                self._segment(self.seq - size, self.seq)

    def _segment(self, first: int, end: int) -> None:
        """Lines ``first``–``end`` as one object (those a copied-in journal holds left out:
        it is read whole before any segment)."""
        lines = (self.root / JOURNAL).read_bytes().splitlines(keepends=True)
        first = max(first, self.base)
        if first >= end:
            return
        data = b"".join(lines[first:end])
        self.objects.create(self.key("journal", "s", f"{first:012d}-{end:012d}.jsonl"), data)

    def created(self, name: str) -> None:
        """A file made once (the run's configuration): in the bucket only if absent; one
        made meanwhile by another machine stops this one."""
        data = (self.root / name).read_bytes()
        if not self.objects.create(self.key(name), data):
            raise RunLockedError(
                f"run {self.name!r} was started by another machine at the same moment"
                f" ({self.shown()}); run again: it resumes that one"
            )
        self._mark(name)

    def _mark(self, name: str) -> None:
        stat = (self.root / name).stat()
        self.pushed[name] = (stat.st_size, stat.st_mtime)

    def _push_changed(self, everything: bool = False) -> None:
        names = [*(f"{d}/{p.name}" for d in ONCE for p in _files(self.root / d)), *ROWS]
        if everything:
            names += [p.name for p in _files(self.root) if p.name not in (JOURNAL, *ROWS)]
        for name in names:
            path = self.root / name
            if not path.is_file() or name.startswith(".") or "/." in name:
                continue
            stat = path.stat()
            if self.pushed.get(name) == (stat.st_size, stat.st_mtime):
                continue
            data = path.read_bytes()
            if name.startswith("raw/"):  # a download may be fetched again (owed results)
                self.fetch(JOURNAL)
                version = self.key(name, f"{self.seq:012d}")
                if not self.objects.create(version, data):
                    raise StorageError(f"{self.shown()}/{name}: another writer's copy stands there")
            elif name.split("/")[0] in ONCE or name == "run.json":
                if not self.objects.create(self.key(name), data) and not self._orphan(name, data):
                    raise StorageError(
                        f"{self.shown()}/{name} holds other bytes than this run's: a file"
                        " is written once; nothing more is done"
                    )
            else:
                digest = hashlib.md5(data).digest()
                if self.held.get(name) != digest:  # the same bytes again: nothing to write
                    self.objects.overwrite(self.key(name), data)
                    self.held[name] = digest
            self._mark(name)

    def _orphan(self, name: str, data: bytes) -> bool:
        """A request file no journal line names (a kill came between its push and its
        plan's line) is no one's: it is replaced by the plan made again (True). Any name
        the journal holds is refused: the journal's create-only lines fence the rest."""
        if not name.startswith("requests/"):
            return False
        self.fetch(JOURNAL)
        journal = self.root / JOURNAL
        said = journal.read_bytes() if journal.exists() else b""  # a new run: no line yet
        if json.dumps(name.split("/", 1)[1]).encode() in said:
            return False
        self.objects.overwrite(self.key(name), data)
        return True

    # advancing -----------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, clock: Callable[[], float] = time.time) -> Iterator[None]:
        lease = Lease(self.objects, self.key("lease"), self.name, clock)
        lease.take()
        try:
            self.check_home()  # moved meanwhile: its lease here is no one's
        except RunStateError:
            lease.withdraw()
            raise
        self.lease, self.wrote = lease, True
        try:
            yield
        except RunLockedError:
            self.superseded = True  # the lease taken, or a line written, by another machine
            raise
        except _failpoints.Crash:  # a crash test's kill: as after SIGKILL, nothing more
            self.superseded = True
            raise
        finally:
            self.lease = None
            if not self.removed and not self.superseded:
                self._push_changed(everything=True)
                lease.release()

    def token_lock(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        """Nothing more: the run's lease is the bucket's one writer."""
        return contextlib.nullcontext()

    def keep(self) -> None:
        if self.lease is not None:
            try:
                self.lease.check()
            except RunLockedError:
                self.superseded = True  # ran out, or taken: nothing stale is written back
                raise

    def close(self) -> None:
        """The end of the command: what it wrote since the last journal line, written;
        the journal's lines since the last segment, a segment (the next reader's one
        object for them)."""
        if self.superseded:  # another machine's run now: nothing stale is written back
            return
        if self.wrote and (self.root / "run.json").exists():
            self._push_changed(everything=True)
        if self.wrote and self.seq > self.read and self.seq % SEGMENTS[0]:
            self._segment(self.seq - self.seq % SEGMENTS[0], self.seq)

    def files(self) -> list[str]:
        """The run's files as a folder holds them: the journal one file, a download its
        newest copy; the lease is the bucket's own."""
        found: set[str] = set()
        start = len(self.key()) + 1
        for key in self.objects.names(self.key() + "/"):
            name = key[start:]
            if name.startswith("journal/"):
                found.add(JOURNAL)
            elif name.startswith("raw/") and name.count("/") == 2:
                found.add(name.rsplit("/", 1)[0])
            elif not name.startswith("lease/") and name != CANCEL:  # the holder's to act on
                found.add(name)
        return sorted(found)

    def receive(self, files: dict[str, bytes]) -> None:
        """A run moved in: its journal the base of the log (``journal.jsonl``), every
        file created only if absent (a move tried again finds its own bytes), the
        configuration last — without it the run is not there yet."""
        config = "run.json"
        for name in sorted(files, key=lambda n: (n == config, n != JOURNAL, n)):
            if not self.objects.create(self.key(name), files[name]):
                raise StorageError(f"{self.shown()}/{name} holds another run's bytes")
        self.objects.delete(self.key(MOVED))  # moved back: the note it left goes

    def leave(self, note: bytes) -> None:
        """A move away: its note first (any command pointed here is told from now on),
        then every other object of the run, its lease last."""
        if not self.objects.create(self.key(MOVED), note):
            raise StorageError(f"{self.shown()}/{MOVED} holds another move's note")
        self._delete_all(keep=self.key(MOVED))

    def remove(self) -> None:
        """Every object of the run, its lease last (nothing is written back after)."""
        self._delete_all()

    def _delete_all(self, keep: str = "") -> None:
        keys = [k for k in self.objects.names(self.key() + "/") if k != keep]
        for key in sorted(keys, key=lambda k: "/lease/" in k):
            self.objects.delete(key)
        self.removed, self.wrote = True, False


def moved_away(name: str, note: bytes | str) -> RunStateError:
    """The one line for a command pointed at the place a run was moved away from."""
    import json

    try:
        found = json.loads(note)
        to = str(found["to"])
    except (ValueError, TypeError, KeyError):
        return RunStateError(f"run {name!r} was moved away from here (its note is unreadable)")
    return RunStateError(
        f"run {name!r} was moved to {to}: it lives there now (--jobs-dir {to.rsplit('/', 1)[0]})"
    )


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_file())
    except FileNotFoundError:
        return []
