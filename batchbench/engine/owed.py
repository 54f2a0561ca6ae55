"""Results a service owes: it says a batch has them, and does not give them (yet).

A batch said to have ended with no results named, a results file empty (or, where
the service counts no lines, short of the requests sent), a named file answering
404: each service does so for a while. Buying those requests again would pay twice
for what may yet arrive, so they are waited for, bounded, and then the stage stops —
one rule for every provider, journaled the same way (``Owed``, then ``Stopped``).
:func:`stop_stage` is the one path by which any stage stops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ..clock import Clock
from ..errors import ApiError, BatchbenchError
from .events import Event, Owed, Stopped, StopReason
from .submission import Submission

if TYPE_CHECKING:
    import polars as pl

# How long the results a service says a batch has are waited for, from the first time
# they were owed, before the stage stops, nothing bought again; and how often they are
# asked for meanwhile.
RESULTS_WAIT = 3600.0
RESULTS_RECHECK = 60.0


def short_of(sub: Submission, frame: pl.DataFrame) -> str | None:
    """What a collected batch's results lack against what its service says ran (None:
    nothing). Counts that say lines succeeded while the results hold none (an empty
    file), or — where the service counts no lines (Gemini) — a job that succeeded with
    fewer results than the requests it was sent. (Some lines missing from a full file
    whose counts say they ran is the service's known fault: those are sent again.)"""
    view = sub.view
    if view is None:
        return None
    files = ", ".join(sub.result_files()) or "no file"
    if view.total == 0 and view.ending == "completed" and frame.height < len(sub.lines):
        said = f"succeeded with the {len(sub.lines)} requests it was sent"
    elif view.completed > 0 and frame.height == 0:
        said = f"ended with its counts saying {view.completed} of {view.total} lines succeeded"
    else:
        return None
    return f"batch {view.id} ({sub.id}) {said}, but its results ({files}) hold {frame.height} lines"


def stop_stage(
    record: Callable[[Event], None],
    sub: Submission,
    batch_id: str,
    reason: StopReason,
    detail: str,
    error: type[BatchbenchError] = ApiError,
) -> NoReturn:
    """Every stop of a stage, one path: journaled (``status`` says why without reading
    the text), then raised as ``error`` with ``detail``; nothing is bought again."""
    if sub.stopped != reason or sub.contradiction != detail:
        record(Stopped(sub=sub.id, batch_id=batch_id, reason=reason, detail=detail))
    raise error(detail) if error is not ApiError else ApiError(detail, batch_id=batch_id)


class OwedResults:
    """The run's owed results: when each submission's are asked for again."""

    def __init__(
        self, record: Callable[[Event], None], clock: Clock, warn: Callable[[str], None]
    ) -> None:
        self.record = record
        self.clock = clock
        self.warn = warn
        self._again: dict[str, float] = {}  # submission → when its results are asked again
        self._short: dict[str, tuple[object, str]] = {}  # submission → what it last lacked

    def read(
        self, sub: Submission, kept: Sequence[Path], read: Callable[[], pl.DataFrame]
    ) -> pl.DataFrame | None:
        """A collected batch's kept files read (``read``), or None when they lack what
        the service says ran: owed (:meth:`owe`). What the same files, under the same
        word from the service, lacked at the last look is not read again: kept files
        change only by a new download, and an hour's wait read them sixty times."""
        looked = _looked(sub, kept)
        last = self._short.get(sub.id)
        if last is not None and last[0] == looked and not sub.settled:
            self.owe(sub, sub.batch_id or "", last[1])
            return None
        frame = read()
        short = None if sub.settled else short_of(sub, frame)
        if short is None:
            return frame
        self._short[sub.id] = (looked, short)
        self.owe(sub, sub.batch_id or "", short)
        return None

    def owe(self, sub: Submission, batch_id: str, detail: str) -> None:
        """The service says a batch has results it does not give (yet): it ended with
        none named, a file empty or short of what ran, a named file answering 404. Each
        service does so for a while, so it is waited for — said once, journaled, asked
        again every :data:`RESULTS_RECHECK` — up to :data:`RESULTS_WAIT` from the first
        time (the journal keeps it); then the stage stops in one line, journaled the
        same way, nothing bought again. A later run asks the service again."""
        now = self.clock.time()
        first = sub.owed_since if sub.owed_since is not None else now
        waited = now - first
        self._again[sub.id] = now + RESULTS_RECHECK
        if waited >= RESULTS_WAIT:
            stop = (
                f"{detail}, for {waited / 60:.0f} minutes now: nothing was bought again;"
                " run again once the service has its results, or with --settle-owed to keep"
                " what arrived and send only what is missing"
            )
            stop_stage(self.record, sub, batch_id, "owed", stop)
        if sub.contradiction != detail:  # once, unless the service's word changed
            self.record(Owed(sub=sub.id, batch_id=batch_id, detail=detail))
            self.warn(
                f"warning: {detail}: its results are waited for (the service does so for a"
                f" while), up to {RESULTS_WAIT / 60:.0f} minutes ({waited / 60:.0f} so far);"
                " nothing is bought again"
            )

    def later(self, sub: Submission) -> bool:
        """Its results are owed and not to be asked for again yet."""
        return sub.contradiction is not None and self._again.get(sub.id, 0.0) > self.clock.time()

    def until(self, subs: Sequence[Submission]) -> float | None:
        """When the first of these batches is asked for its results again, if every one
        of them owes its results (nothing else to poll for until then); else None."""
        times = [self._again.get(s.id) for s in subs if s.contradiction is not None]
        if not subs or len(times) < len(subs) or None in times:
            return None
        return min(t for t in times if t is not None)


def _looked(sub: Submission, files: Sequence[Path]) -> object:
    """The service's word on the batch and each kept file as it is on disk (a download
    replaces the file: a new inode and time)."""
    kept: list[object] = []
    for path in files:
        try:
            st = path.stat()
        except OSError:  # gone: read, and said as the reading says it
            kept.append(None)
            continue
        kept.append((str(path), st.st_ino, st.st_mtime_ns, st.st_size))
    return sub.view, tuple(kept)
