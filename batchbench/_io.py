"""File writes that a crash cannot leave half done."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from . import _failpoints
from .errors import InputError, StorageError


@contextlib.contextmanager
def replacing(path: str | Path, mode: int = 0o600) -> Iterator[Path]:
    """A temporary file beside ``path`` to write whole; on success it is fsynced and
    renamed over ``path``, on any failure removed. A crash leaves the old file whole,
    never a half-written one. Only a regular file is replaced: a folder, a symlink, a
    device (``-o /dev/stdout``) or a pipe there is refused, never swapped for a file.
    The temporary name is short, so a long target name cannot push it past 255 bytes."""
    path = Path(path)
    kind = _not_a_file(path)
    if kind:
        raise StorageError(f"{path} is {kind}, not a regular file: not replaced; name a file")
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=".bb-", suffix=".tmp")
    except OSError as exc:
        raise StorageError.of(exc, path) from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        _failpoints.hit("replacing")  # crash tests: written, not yet in place
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        durable_replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise StorageError.of(exc, path) from None
        raise


def _not_a_file(path: Path) -> str | None:
    """What stands at ``path`` if it is not a regular file (None: nothing, or a file)."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a device, pipe or socket"


def atomic_write_bytes(path: str | Path, data: bytes, mode: int = 0o600) -> None:
    """Write the whole file beside ``path``, fsync, then rename over it."""
    with replacing(path, mode) as tmp:
        tmp.write_bytes(data)


def durable_replace(tmp: Path, dest: Path) -> None:
    """Put a fully written (and fsynced) file in place, and make the rename itself durable
    (the folder fsynced) before anything is journaled about it."""
    os.replace(tmp, dest)
    _fsync_dir(dest.parent)


def atomic_write_text(path: str | Path, text: str, mode: int = 0o600) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def append_bytes(path: str | Path, data: bytes, failpoint: str, mode: int = 0o600) -> None:
    """Append and fsync, so a recorded fact survives a crash (O_APPEND: one writer's tail).

    One write when not under test: another process (``cancel``) may append to the
    same journal, and one O_APPEND write is never interleaved.
    """
    append_pieces(path, [data], failpoint, mode)


def append_pieces(
    path: str | Path, pieces: Iterable[bytes], failpoint: str, mode: int = 0o600
) -> None:
    """Append each piece in turn (one write each, made as it is written: a large append
    never held whole), then fsync.

    The crash tests can kill the process half way through a piece (``failpoint``, hit
    at each): a reader must then cope with a torn last line, which :meth:`Run.repair`
    drops.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
        try:
            armed = _failpoints.armed(failpoint)
            for piece in pieces:
                half = len(piece) // 2 if armed else 0
                whole = memoryview(piece)  # halves without copies
                _write_all(fd, whole[:half])
                _failpoints.hit(failpoint)
                _write_all(fd, whole[half:])
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:  # a full disk can tear the last line: the next start drops it
        raise StorageError.of(exc, path) from None


@contextlib.contextmanager
def storage(path: str | Path) -> Iterator[None]:
    """OSErrors of file work on ``path`` become one :class:`StorageError` naming it."""
    try:
        yield
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError.of(exc, path) from None


def _write_all(fd: int, data: bytes | memoryview) -> None:
    """``os.write`` may write part of the data (a disk filling up): go on, or raise."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_line(path: str | Path, line: str, mode: int = 0o600) -> None:
    """Append one journal line."""
    data = (line if line.endswith("\n") else line + "\n").encode("utf-8")
    append_bytes(path, data, "journal_half_written", mode)


def jsonl_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` for each non-blank line of a JSON Lines file.

    JSON Lines has one separator, ``\\n``. ``str.splitlines()`` also splits at
    U+2028, U+2029, U+0085 and others, which may stand unescaped inside a JSON
    string (an answer can hold them): a reader that splits there sees torn rows.
    Every JSONL file batchbench reads goes through here.
    """
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            yield lineno, line


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_bounded(
    path: Path, limit: int, error: type[InputError], where: str, too_big: str
) -> bytes:
    """A file the user named, read whole up to a bound: one past it is ``too_big`` (a
    device that never ends, /dev/zero, is refused, not read for ever; a pipe from the
    shell still reads), and one that cannot be read says why — each one ``error`` line
    starting with ``where``."""
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise error(f"{where}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise error(f"{where}: {too_big}")
    return data
