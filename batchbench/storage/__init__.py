"""Where the jobs folder lives: a local folder (the default: a run's files are the run),
or a bucket — ``s3://BUCKET/PREFIX``, ``gs://BUCKET/PREFIX``, ``az://CONTAINER/PREFIX`` —
that any machine advances and every machine reads.

A bucket is read into a working folder of the command's own (made here, removed when the
command ends: nothing is kept between commands, as on a CI runner), whose runs write
back as they advance (:mod:`.home`). The rest of batchbench sees a folder either way:
:func:`jobs_path` turns what the user gave into one, :func:`home_for` gives each run
folder its :class:`.home.Home`, :func:`runs_in` lists a bucket's runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from .. import _failpoints
from .._io import atomic_write_bytes
from .._io import storage as local_storage
from ..errors import ConfigError, RunLockedError
from .home import MOVED as MOVED
from .home import Home, Remote
from .home import moved_away as moved_away
from .objects import Bucket, Objects, parse_bucket

MARK = ".bucket"  # in a working folder: the URI of the bucket it stands for
LOCK_FILE = ".lock"


@dataclass
class Folders:
    """The jobs folders one command works in: each bucket's working folder, each run's
    home there, and what a jobs folder option could not take. Closed where it was opened:
    :func:`opened` for a Python caller or a test; the CLI's command wrapper for the one
    its option parser fills (``PROCESS``)."""

    working: dict[Path, Objects] = field(default_factory=dict)  # folder → its bucket
    homes: dict[Path, Remote] = field(default_factory=dict)  # run folder → its home
    refused: list[BaseException] = field(default_factory=list)

    def close(self, write_back: bool = True) -> None:
        """Every run advanced written back, the working folders removed (the bucket is
        the run). A command killed (a crash test's failpoint) writes nothing back, as a
        SIGKILLed process cannot."""
        try:
            for home in list(self.homes.values()):
                if write_back:
                    home.close()
        finally:
            self.homes.clear()
            for folder in list(self.working):
                shutil.rmtree(folder, ignore_errors=True)
            self.working.clear()


PROCESS = Folders()  # the CLI's: its option parser opens folders before the command runs
_current: ContextVar[Folders] = ContextVar("batchbench_folders")


def _folders() -> Folders:
    return _current.get(PROCESS)


@contextlib.contextmanager
def opened() -> Iterator[Folders]:
    """Jobs folders of their own for a Python caller: every bucket named inside is read
    into a working folder, written back and removed when the block ends, as a command's
    are (not written back when it ends in a :class:`~batchbench._failpoints.Crash`)."""
    folders = Folders()
    token = _current.set(folders)
    try:
        yield folders
    except BaseException as exc:
        with contextlib.suppress(Exception):  # the block's own error is the one raised
            folders.close(write_back=not isinstance(exc, _failpoints.Crash))
        raise
    else:
        folders.close()
    finally:
        _current.reset(token)


def jobs_path(text: str | Path) -> Path:
    """The folder the commands work in for the jobs folder the user named: itself, or
    a bucket's working folder (one per command and bucket)."""
    where = parse_bucket(str(text)) if not isinstance(text, Path) else None
    if where is None:
        return Path(text).expanduser()
    working = _folders().working
    for folder, objects in working.items():
        if objects.where == where:
            return folder
    objects = Objects(where)  # a store set up wrong stops here, before any folder exists
    folder = Path(tempfile.mkdtemp(prefix="batchbench-bucket-"))
    working[folder] = objects  # from here closing the folders removes it
    (folder / MARK).write_text(where.uri)
    return folder


def _bucket_of(jobs_dir: Path) -> Objects | None:
    working = _folders().working
    return working.get(jobs_dir) or working.get(jobs_dir.resolve())


def home_for(root: Path) -> Home:
    """The home of the run folder ``root``: local, or its bucket's."""
    objects = _bucket_of(root.parent)
    if objects is None:
        return Local(root)
    homes = _folders().homes
    home = homes.get(root)
    if home is None:
        home = homes[root] = Remote(root, objects, root.name)
    return home


def runs_in(jobs_dir: Path) -> list[str] | None:
    """The run folders of a bucket's jobs folder (None: a local folder, listed as one)."""
    objects = _bucket_of(jobs_dir)
    if objects is None:
        return None
    return [n for n in objects.folders(objects.where.key() + "/" if objects.where.prefix else "")]


def read_shared(jobs_dir: Path, name: str) -> bytes | None:
    """A file of the jobs folder itself, not of a run (the canaries that passed): in its
    bucket when it has one — a working folder goes with its command — else in it."""
    objects = _bucket_of(jobs_dir)
    if objects is None:
        try:
            return (Path(jobs_dir) / name).read_bytes()
        except OSError:
            return None
    return objects.get(objects.where.key(name))


def write_shared(jobs_dir: Path, name: str, data: bytes) -> None:
    """Write a file of the jobs folder itself (:func:`read_shared`), whole."""
    objects = _bucket_of(jobs_dir)
    if objects is None:
        atomic_write_bytes(Path(jobs_dir) / name, data)
    else:
        objects.overwrite(objects.where.key(name), data)


def object_path(text: str) -> Path | None:
    """A run's file named by its URI (``s3://BUCKET/PREFIX/RUN/results.jsonl``, as a run
    prints it), fetched into the command's working folder; None for a local path."""
    where = parse_bucket(text)
    if where is None:
        return None
    if where.scheme == "file":  # its path is the bucket: the jobs folder is two steps up
        parts = where.bucket.rsplit("/", 2)
        if len(parts) == 3:
            where = Bucket("file", parts[0] or "/", f"{parts[1]}/{parts[2]}")
    run_key, _, name = where.prefix.rpartition("/")
    jobs_key, _, run = run_key.rpartition("/")
    if not name or not run:
        raise ConfigError(f"{text}: name a run's file (…/RUN/results.jsonl)")
    root = jobs_path(Bucket(where.scheme, where.bucket, jobs_key).uri) / run
    home_for(root).fetch(name)
    return root / name


def shown(path: Path) -> str:
    """A path as the user knows it: inside a bucket's working folder, its URI."""
    for folder, objects in _folders().working.items():
        with contextlib.suppress(ValueError):
            rest = path.relative_to(folder).as_posix()
            return objects.where.uri + ("" if rest == "." else f"/{rest}")
    return str(path.resolve())


def bucket_of(jobs_dir: Path) -> Bucket | None:
    objects = _bucket_of(jobs_dir)
    return None if objects is None else objects.where


def refuse(exc: BaseException) -> None:
    """Keep what the option parser could not take, for the command to say in one line."""
    _folders().refused.append(exc)


def refused() -> None:
    """Raise what an option could not take (once)."""
    if _folders().refused:
        raise _folders().refused.pop()


def close_all(write_back: bool = True) -> None:
    """The end of a command: its folders closed (:meth:`Folders.close`)."""
    _folders().close(write_back)


class Local:
    """A run in a local folder: its files are the run; the lock is an flock."""

    leased = False

    def __init__(self, root: Path) -> None:
        self.root = root

    def fetch(self, name: str) -> None:
        return None

    def line_at(self, path: Path, lineno: int) -> str:
        return f"{path}: line {lineno}"

    def check_home(self) -> None:
        try:
            note = (self.root / MOVED).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return
        raise moved_away(self.root.name, note)

    def before_record(self) -> None:
        return None

    def recorded(self, line: bytes) -> None:
        return None

    def ask_cancel(self) -> None:
        return None  # a local journal takes the cancel's own line

    def cancel_asked(self) -> bool:
        return False

    def clear_cancel(self) -> None:
        return None

    def created(self, name: str) -> None:
        return None

    def close(self) -> None:
        return None

    def keep(self) -> None:
        return None

    def shown(self) -> str:
        return str(self.root.resolve())

    def remove(self) -> None:
        return None  # the caller removes the folder

    def files(self) -> list[str]:
        return sorted(
            p.relative_to(self.root).as_posix()
            for p in self.root.rglob("*")
            if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(self.root).parts)
        )

    def receive(self, files: dict[str, bytes]) -> None:
        """A run moved in: written whole in a folder beside, then renamed into place (a
        crash midway leaves no half-run). Moved back where it came from, the folder holds
        the note it left: the files go in beside it, the configuration last, then the
        note goes (until then a command pointed here is told the run is elsewhere)."""
        with local_storage(self.root):
            if (self.root / MOVED).exists():
                config = "run.json"
                for name in sorted(files, key=lambda n: n == config):
                    path = self.root / name
                    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                    atomic_write_bytes(path, files[name])
                (self.root / MOVED).unlink()
                return
            aside = self.root.with_name(f".moving-{self.root.name}-{os.getpid()}")
            shutil.rmtree(aside, ignore_errors=True)
            try:
                for name, data in files.items():
                    path = aside / name
                    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                    path.write_bytes(data)
                os.chmod(aside, 0o700)
                os.replace(aside, self.root)
            finally:
                shutil.rmtree(aside, ignore_errors=True)  # never left for `list` to show

    def leave(self, note: bytes) -> None:
        """A move away: the note first (a command pointed here is told from now on), then
        the run's files out of the folder — into a folder beside, removed whole — so the
        folder never stands empty for a command to start a new run in."""
        atomic_write_bytes(self.root / MOVED, note)
        aside = self.root.with_name(f".moved-{self.root.name}-{os.getpid()}")
        aside.mkdir(mode=0o700)
        for entry in self.root.iterdir():
            if entry.name not in (MOVED, LOCK_FILE):
                os.replace(entry, aside / entry.name)
        shutil.rmtree(aside)

    @contextlib.contextmanager
    def token_lock(self, run_id: str) -> Iterator[None]:
        me = f"{os.getpid()} {self.root.resolve()}"
        with exclusive(token_file(self.root.parent, run_id), me) as holder:
            if holder is not None:
                pid, _, folder = holder.partition(" ")
                raise RunLockedError(
                    f"{self.root.resolve()} holds the same run as {folder or '?'} (one run"
                    f" token in their run.json), which another process (pid {pid or '?'}) is"
                    " advancing: run this one when it has stopped, and it adopts what that"
                    " one bought"
                )
            yield

    @contextlib.contextmanager
    def lock(self, clock: Callable[[], float] = time.time) -> Iterator[None]:
        with exclusive(self.root / LOCK_FILE, str(os.getpid())) as holder:
            if holder is not None:
                raise RunLockedError(
                    f"run {self.root.name!r} is being advanced by another process"
                    f" (pid {holder or '?'}); wait for it or stop it"
                )
            self.check_home()  # moved while this process waited for the lock
            yield


def token_file(jobs_dir: Path, run_id: str) -> Path:
    """The lock every folder holding one run (one run token) takes to advance it."""
    return Path(jobs_dir) / f".run-{run_id}.lock"


@contextlib.contextmanager
def exclusive(path: Path, me: str) -> Iterator[str | None]:
    """An flock on ``path``, the holder's words (``me``) written in it: yields None when
    taken, or the words of the process holding it."""
    with local_storage(path):
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
