"""Acting on a run from outside its advancing process: cancel it, or ask for its live state.

Both go to the services the run recorded (never to whatever the environment
says today), and both work while another process advances the run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..clock import SYSTEM, Clock
from ..errors import BatchbenchError, RunLockedError, RunStateError
from ..kinds import Stage
from ..providers import spec
from ..providers.base import Provider, Service
from ..storage import token_file
from .calls import call_kind
from .events import BatchSeen, CancelRequested, Event
from .runconfig import RunConfig
from .rundir import MOVED_FILE, REMOVING, Run, existing_run, list_runs, open_run
from .services import connect_all, run_services, stage_bundle
from .state import RunState
from .submission import Submission
from .submit import Submitter


def _providers(
    run: Run,
    config: RunConfig,
    state: RunState,
    base_url: str | None,
    warn: Callable[[str], None],
    clock: Clock,
) -> dict[Stage, Provider]:
    services, _ = run_services(config, state, base_url, say=warn)
    return stage_bundle(services, connect_all([services], warn=warn, clock=clock))


def cancel_run(
    jobs_dir: Path,
    name: str,
    base_url: str | None = None,
    *,
    warn: Callable[[str], None],
    clock: Clock = SYSTEM,
) -> list[str]:
    """Stop a run: no new batches, and every in-flight batch cancelled. Returns their ids.

    It does not need the run's lock: the intent is one appended journal line,
    which a process advancing the run reads at its next tick (it then submits
    nothing more), and cancelling a batch is the service's business. What the
    service says of each batch is journaled too, so ``status`` can tell a run
    whose batches were told to stop from one whose cancel never reached them
    (it then says to run ``cancel`` again). The journal is read (and so
    checked) before anything is appended to it.
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
    providers = _providers(run, config, state, base_url, warn, clock)
    run.record(CancelRequested(), clock.time())

    def record(event: Event) -> None:
        run.record(event, clock.time())

    # A create whose outcome was lost may have made a batch: look for it first.
    submitter = Submitter(run, config, providers, record, lambda: state, clock=clock)
    lost = [
        s
        for s in state.subs.values()
        if s.batch_id is None
        and s.create_started
        and call_kind(s, providers[s.stage].wire) is None  # calls: no batch to look for
    ]
    for sub in lost:
        if not sub.candidates:
            submitter.look(sub, state.batch_ids())
    if lost:
        state = run.state(config.case_ids)
    cancelled: list[str] = []
    failures: list[BatchbenchError] = []
    for sub in state.in_flight():
        if sub.batch_id is None:
            warn(f"warning: {candidates_text(sub, providers[sub.stage].client.service)}")
            continue
        try:
            note = _drops_rows(run, sub, providers[sub.stage], clock)
            if note is not None:
                warn(note)
            view = providers[sub.stage].client.cancel(sub.batch_id)
        except BatchbenchError as exc:
            failures.append(exc)
            continue
        if view is not None:
            run.record(BatchSeen.of(sub.id, view), clock.time())
            cancelled.append(sub.batch_id)
    if failures:
        # The first failure itself, its class and fields (HTTP status, batch id) kept,
        # told how many more there were and what to do.
        first = failures[0]
        first.args = (
            f"{len(failures)} batch(es) could not be cancelled, so they still run"
            f" ({first}); run `batchbench cancel {name}` again",
        )
        raise first
    return cancelled


def _drops_rows(run: Run, sub: Submission, provider: Provider, clock: Clock) -> str | None:
    """Before cancelling a batch on a service that returns no rows for a cancelled batch
    yet bills what ran: how many of its requests have run (asked afresh, journaled), said."""
    found = spec(provider.client.service.provider)
    if not found.cancel_drops_rows or sub.batch_id is None:
        return None
    view = provider.client.retrieve(sub.batch_id)
    run.record(BatchSeen.of(sub.id, view), clock.time())
    if not view.done:
        return None
    return (
        f"note: {found.label} returns no result rows for a cancelled batch and bills the"
        f" requests that ran ({found.cancel_drops_rows}): batch {sub.batch_id} ({sub.id})"
        f" has run {view.done} of its {view.total or len(sub.lines)} requests; cancelled, their"
        " results are lost, and `run … --resume-cancelled` buys them again"
    )


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
            providers = _providers(run, config, state, base_url, warn, clock)
            record = lambda e: seen.append(run.record(e, clock.time()))  # noqa: E731
            Submitter(run, config, providers, record, lambda: state, clock=clock).poll(
                state.in_flight()
            )
            journaled = True
    except RunLockedError:  # the advancing process journals it itself
        state = run.state(config.case_ids)
        providers = _providers(run, config, state, base_url, warn, clock)
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


def candidates_text(sub: Submission, service: Service) -> str:
    """Why a submission's batch cannot be cancelled (or shown) yet: which candidates a lost
    create left, and why the run's own is not told apart."""
    ids = ", ".join(sub.candidates)
    return (
        f"{sub.id}: its create's outcome was lost, and {len(sub.candidates)} batch(es) of its"
        f" size appeared since ({ids}) on {service}, which keeps no tag on a batch: only"
        " their results' ids tell the run's own from another's, so none is cancelled"
        " (cancel the right one yourself, or let them end)"
    )


def remove_run(jobs_dir: Path, name: str, *, force: bool = False) -> str:
    """Delete a run's folder, once nothing of it runs on a service unwatched: a batch in
    flight would run on, billed, with no folder left to collect it (``force`` forgets
    it all the same). Under the run's lock (a process advancing it refuses this), the
    folder is first renamed aside, so a crash midway leaves no half-run that ``list``
    shows or a command resumes. Returns what was removed, in a sentence."""
    import os
    import shutil

    run = existing_run(jobs_dir, name)
    config = run.load_config()
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
    return f"removed run {name!r} ({scored} of {len(state.cases)} cases scored){forgotten}"


def move_run(jobs_dir: Path, name: str, to: Path) -> str:
    """Move a run to another jobs folder — a local one into a bucket, or back: one live
    home at a time. Under the run's lock its files are copied whole (the destination
    takes them all or, after a crash, is resumed by moving again), then the source is
    removed and a note left in its place, so a command still pointed there says where
    the run went instead of starting it afresh. Returns what was done, in a sentence."""
    import json
    import os
    import shutil

    run = existing_run(jobs_dir, name)
    dest = open_run(to, name)
    if dest.shown == run.shown:
        raise RunStateError(f"run {name!r} is in {run.shown} already")
    if dest.exists():
        raise RunStateError(f"{dest.shown} holds a run already: remove it or move elsewhere")
    with run.lock():
        files = {}
        for file in run.home.files():
            run.home.fetch(file)
            files[file] = (run.root / file).read_bytes()
        dest.home.receive(files)
        run.home.remove()  # a run in a bucket: its objects (a local run: renamed aside)
        aside = run.root.with_name(f"{REMOVING}{run.root.name}-{os.getpid()}")
        os.replace(run.root, aside)
        run.root.mkdir(mode=0o700)
        (run.root / MOVED_FILE).write_text(json.dumps({"to": dest.shown}) + "\n")
        run.home.created(MOVED_FILE)
    shutil.rmtree(aside)
    return f"moved run {name!r} ({len(files)} files) to {dest.shown}"
