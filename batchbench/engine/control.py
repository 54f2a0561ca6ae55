"""Acting on a run from outside its advancing process: cancel it, or ask for its live state.

Both go to the services the run recorded (never to whatever the environment
says today), and both work while another process advances the run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from ..clock import SYSTEM, Clock
from ..errors import BatchbenchError, RunLockedError, RunStateError
from ..kinds import Stage
from ..providers.base import Provider
from ..storage import token_file
from .cancelling import cancel_in_flight, look_for_lost
from .events import BatchSeen, CancelRequested, Event
from .runconfig import RunConfig
from .rundir import REMOVING, Run, existing_run, list_runs, open_run
from .services import connect_all, run_services, stage_bundle
from .state import RunState
from .submit import Submitter


@contextlib.contextmanager
def _providers(
    run: Run,
    config: RunConfig,
    state: RunState,
    base_url: str | None,
    warn: Callable[[str], None],
    clock: Clock,
) -> Iterator[dict[Stage, Provider]]:
    """The run's stages' clients, closed when the command is done with them."""
    services, _ = run_services(config, state, base_url, say=warn)
    clients = connect_all([services], warn=warn, clock=clock)
    try:
        yield stage_bundle(services, clients)
    finally:
        for client in clients.values():
            client.close()


def cancel_run(
    jobs_dir: Path,
    name: str,
    base_url: str | None = None,
    *,
    warn: Callable[[str], None],
    clock: Clock = SYSTEM,
) -> list[str]:
    """Stop a run: no new batches, and every in-flight batch cancelled. Returns their ids.

    A local run needs no lock: the intent is one appended journal line, which a
    process advancing the run reads at its next tick (it then submits nothing more).
    A run in a bucket has one writer of its journal, the lease's holder: free, the
    cancel takes the lease and journals as a runner does; held by another machine,
    the cancel leaves its request beside the journal (``cancel.json``), which that
    machine journals and acts on before its next billable call, and tells the
    service to stop the batches it knows. Cancelling a batch is the service's
    business either way. What the service says of each batch is journaled, so
    ``status`` can tell a run whose batches were told to stop from one whose cancel
    never reached them (it then says to run ``cancel`` again).
    """
    run = existing_run(jobs_dir, name)
    config = run.load_config()
    state = run.state(config.case_ids)
    if state.finished(config.judge_passes) and not state.in_flight():
        scored = sum(1 for c in state.cases.values() if c.final == "scored")
        raise RunStateError(
            f"run {name!r} has finished ({scored} of {len(state.cases)} cases scored):"
            " nothing to cancel"
        )
    with _providers(run, config, state, base_url, warn, clock) as providers:
        if not run.home.leased:
            return _cancel(run, config, providers, warn, clock, journal=True)
        try:
            with run.lock(clock):
                return _cancel(run, config, providers, warn, clock, journal=True)
        except RunLockedError:
            run.home.ask_cancel()  # the holder journals it, before its next billable call
            warn(
                f"note: run {name!r} is being advanced by another machine: it journals the"
                " cancel and submits nothing more from its next step; its batches are told"
                " to stop here"
            )
            return _cancel(run, config, providers, warn, clock, journal=False)


def _cancel(
    run: Run,
    config: RunConfig,
    providers: dict[Stage, Provider],
    warn: Callable[[str], None],
    clock: Clock,
    *,
    journal: bool,
) -> list[str]:
    """The cancel itself: its intent journaled (when this process may write the journal),
    then every in-flight batch told to stop."""
    state = run.state(config.case_ids)
    seen: list[Event] = []

    def record(event: Event) -> None:
        if journal:
            run.record(event, clock.time())
        seen.append(event)

    submitter = Submitter(run, config, providers, record, lambda: state, clock=clock)
    if journal:
        record(CancelRequested())
        if look_for_lost(submitter, state):  # found: the journal says where now
            state = run.state(config.case_ids)
    return cancel_in_flight(submitter, state, warn)


def refresh_status(
    jobs_dir: Path,
    name: str,
    base_url: str | None = None,
    *,
    warn: Callable[[str], None],
    clock: Clock = SYSTEM,
) -> tuple[list[str], bool]:
    """Ask the services (one list walk each) for the live state of every batch in
    flight. When no process is advancing the run, what they say is journaled too.

    Returns a line per batch and whether the journal was updated.
    """
    run = existing_run(jobs_dir, name)
    config = run.load_config()
    seen: list[Event] = []
    try:
        with run.lock():
            state = run.state(config.case_ids)
            record = lambda e: seen.append(run.record(e, clock.time()))  # noqa: E731
            with _providers(run, config, state, base_url, warn, clock) as providers:
                Submitter(run, config, providers, record, lambda: state, clock=clock).poll(
                    state.in_flight()
                )
            journaled = True
    except RunLockedError:  # the advancing process journals it itself
        state = run.state(config.case_ids)
        with _providers(run, config, state, base_url, warn, clock) as providers:
            Submitter(run, config, providers, seen.append, lambda: state, clock=clock).poll(
                state.in_flight()
            )
        journaled = False
    live = {e.sub: e.view() for e in seen if isinstance(e, BatchSeen)}
    lines = []
    for sub in state.in_flight():
        v = live.get(sub.id) or sub.view
        if v is None:
            lines.append(f"{sub.id} {sub.batch_id} {sub.word}")
        else:
            lines.append(f"{sub.id} {sub.batch_id} {v.word}: {v.lines_text}")
    return lines, journaled


def judging_its_answers(jobs_dir: Path, name: str) -> list[str]:
    """The runs of the jobs folder that judge run ``name``'s answers (its judge panel's
    other judges, :attr:`RunConfig.answers_from`): they read its answers, so it is not
    moved or removed from under them."""
    found = []
    for other in list_runs(Path(jobs_dir)):
        try:
            theirs = other.load_config()
        except BatchbenchError:
            continue  # not a run this can read: not a panel's either
        if theirs.answers_from == name:
            found.append(other.name)
    return sorted(found)


def _panel_refusal(jobs_dir: Path, name: str, along: Collection[str], doing: str) -> None:
    others = [n for n in judging_its_answers(jobs_dir, name) if n not in along]
    if not others:
        return
    named = ", ".join(repr(n) for n in others)
    if doing == "remove":
        hint = f"`batchbench remove {name} {' '.join(others)}` removes the panel whole"
    else:
        hint = f"move {named} first, then this one, so that the panel ends up together"
    raise RunStateError(
        f"run {name!r} is the first of a judge panel: run(s) {named} judge its answers"
        f" and would lose them; {hint}"
    )


def remove_run(
    jobs_dir: Path, name: str, *, force: bool = False, along: Collection[str] = ()
) -> str:
    """Delete a run's folder, once nothing of it runs on a service unwatched: a batch in
    flight would run on, billed, with no folder left to collect it (``force`` forgets
    it all the same). Under the run's lock (a process advancing it refuses this), the
    folder is first renamed aside, so a crash midway leaves no half-run that ``list``
    shows or a command resumes. Returns what was removed, in a sentence."""
    import os
    import shutil

    run = existing_run(jobs_dir, name)
    config = run.load_config()
    _panel_refusal(jobs_dir, name, along, "remove")
    with run.lock():
        state = run.state(config.case_ids)
        # A batch told to stop ends on its own; one still running would run on unwatched.
        flying = [
            s.batch_id or f"{s.id} (create unconfirmed)"
            for s in state.in_flight()
            if s.view is None or s.view.phase != "cancelling"
        ]
        if flying and not force:
            raise RunStateError(
                f"run {name!r} has {len(flying)} batch(es) in flight ({', '.join(flying)}):"
                f" they run on, and are billed, whether or not the run is kept; `batchbench"
                f" cancel {name}` first, or --force to forget them"
            )
        run.home.remove()  # a run in a bucket: its objects (a local run: nothing more)
        aside = run.root.with_name(f"{REMOVING}{run.root.name}-{os.getpid()}")
        os.replace(run.root, aside)
    shutil.rmtree(aside)
    if not any(config.run_id in r.config_path.read_text() for r in list_runs(Path(jobs_dir))):
        token_file(jobs_dir, config.run_id).unlink(missing_ok=True)  # no folder holds that run
    scored = sum(1 for c in state.cases.values() if c.final == "scored")
    forgotten = f"; {len(flying)} batch(es) in flight forgotten" if flying else ""
    ran = sum(s.ran for s in state.subs.values() if not s.collected)
    if ran:  # billed by the service, whatever became of them
        forgotten += f"; {ran} line(s) its batches ran, billed, were never collected"
    return f"removed run {name!r} ({scored} of {len(state.cases)} cases scored){forgotten}"


def move_run(jobs_dir: Path, name: str, to: Path) -> str:
    """Move a run to another jobs folder — a local one into a bucket, or back: one live
    home at a time. Under the run's lock (a bucket's lease: a machine advancing the run
    refuses it) its files are copied whole (the destination takes them all or, after a
    crash, is resumed by moving again); then the source gets its note, before its files
    go, so a command still pointed there is told where the run went instead of
    starting it afresh. Moved back where it came from, the note there gives way.
    Returns what was done, in a sentence."""
    import json

    run = existing_run(jobs_dir, name)
    _panel_refusal(jobs_dir, name, (), "move")
    dest = open_run(to, name)
    if dest.shown == run.shown:
        raise RunStateError(f"run {name!r} is in {run.shown} already")
    if dest.exists():
        raise RunStateError(f"{dest.shown} holds a run already: remove it or move elsewhere")
    config = run.load_config()
    back = dest.moved_note()  # the note a move of this run away from there left
    if back is not None and back.get("run_id", back.get("to")) not in (config.run_id, run.shown):
        raise RunStateError(
            f"{dest.shown} holds the note of another run, moved to {back.get('to')}: move"
            " this one elsewhere"
        )
    with run.lock():
        files = {}
        for file in run.home.files():
            run.home.fetch(file)
            files[file] = (run.root / file).read_bytes()
        dest.home.receive(files)
        note = {"to": dest.shown, "run_id": config.run_id}
        run.home.leave(json.dumps(note).encode() + b"\n")
    return f"moved run {name!r} ({len(files)} files) to {dest.shown}"
