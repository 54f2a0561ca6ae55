"""A result file's bytes to disk, verbatim and whole: the one way every client keeps one.

The bytes go to a temporary name beside the destination, are fsynced, and only
then renamed over it (the folder fsynced too), so a crash or a dropped
connection never leaves a half file where a whole one is expected. The crash
tests can kill the process after any chunk (failpoint ``downloading``).
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import _failpoints
from .._io import durable_replace, storage


class Sink(io.RawIOBase):
    """Where a download writes: the file, a count, and a failpoint after each chunk."""

    def __init__(self, fh: Any) -> None:
        super().__init__()
        self.fh = fh
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, chunk: Any) -> int:
        self.fh.write(chunk)
        self.size += len(chunk)
        _failpoints.hit("downloading")
        return len(chunk)


def verbatim(dest: Path, fill: Callable[[Sink], None]) -> int:
    """``fill`` writes the bytes into a :class:`Sink`; they land at ``dest`` whole, or not
    at all. Returns their size."""
    tmp = dest.with_name(f".{dest.name}.part")
    try:
        with storage(tmp):
            # A run folder copied by a tool that drops empty folders (git) has no raw/.
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            sink = Sink(fh)
            # The network's failures are the client's to type (some SDKs' derive from
            # OSError: a dropped connection is not a disk that cannot be written).
            fill(sink)
            with storage(tmp):
                fh.flush()
                os.fsync(fh.fileno())
        with storage(tmp):
            durable_replace(tmp, dest)
        return sink.size
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
