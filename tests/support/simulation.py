"""A seeded simulation of the whole system (#61), as FoundationDB's and Jepsen's are: the
emulator, a team's bucket on its S3 face, and several machines ticking one run, each with
a clock of its own — while the seed draws the services' bad days, creates that land late
or lose their answer, store faults, kills at failpoints, clocks that jump, and cancels
from another machine.

Every command is a real one (the CLI in this process, on the machine's view of the one
fake clock), so a seed replays exactly: the emulator decides its faults from the call
and the seed, never from a shared stream. After the schedule a machine with a true
clock finishes the run, and the invariants are checked on the emulator's ledger and
the run's files: no request executed twice, the rows and summary an undisturbed run
has, no exit 70 or traceback, one home for the run.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchbench import _failpoints
from batchbench._failpoints import Crash
from batchbench.providers.registry import BY_NAME

from .buckets import emulator_s3, pull
from .cli import run_cli
from .providers import RIGS
from .runs import duplicates, normalised

URI = "s3://batchbench/sim"
ELSEWHERE = "s3://batchbench/sim-moved"  # where a `move` takes the run, and back
# Where a kill may land: each a failpoint of the engine (crash.py's, and the creates').
KILLS = (
    "planned",
    "uploaded",
    "creating",
    "created",
    "create_unanswered",
    "downloading",
    "rows_written",
    "locking",
)
# Untagged services too (Anthropic's candidates); OpenRouter's cancel re-buys what ran,
# said and priced (test_pay_once): not a silent fault, so not drawn with a cancel.
PROVIDERS = ("openai", "anthropic", "gemini", "mistral", "groq", "bedrock", "fireworks")
LATER = ("together", "xai")  # drawn from a stream of their own (fixed seeds unchanged)


class MachineClock:
    """The one fake clock as a machine whose clock is ``skew`` seconds off reads it; its
    ``machine`` is who it is (batchbench keys a machine's own waits by it)."""

    def __init__(self, base: Any, skew: float, machine: str) -> None:
        self.base, self.skew, self.machine = base, skew, machine

    def time(self) -> float:
        return float(self.base.time()) + self.skew

    def sleep(self, seconds: float) -> None:
        self.base.sleep(seconds)

    def jitter(self) -> float:
        return float(self.base.jitter())


@dataclass
class Outcome:
    """What one seed drew and did."""

    seed: int
    provider: str
    faults: Counter[str] = field(default_factory=Counter)
    steps: list[str] = field(default_factory=list)

    def said(self) -> str:
        drawn = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items()))
        return f"seed {self.seed} ({self.provider}): {drawn or 'no faults'}"


def simulate(
    seed: int,
    factory: Any,
    clock: Any,
    tmp_path: Path,
    fixture_dir: Path,
    moves: bool = False,
    removes: bool = False,
    healthbench: Path | None = None,
) -> Outcome:
    """One seed's schedule, then the invariants (an AssertionError naming the seed). With
    ``moves``, a second stream of the seed moves the run between two prefixes of the bucket
    from time to time, while the old cron still ticks the old place now and then (its
    schedule otherwise the seed's own, unchanged). With ``removes``, a third stream has
    another machine try ``remove`` (no --force): refused while anything of the run may
    run on a service or another machine holds it; when it is done, the cron starts a run
    afresh (a new run token: nothing of the old one is bought again under its name). With
    ``healthbench`` (a HealthBench JSONL), the run grades it: a grader request per item."""
    rng = random.Random(seed)
    moving = random.Random(seed * 7919 + 1)
    removing = random.Random(seed * 104729 + 3)
    homes, home, moved = [URI, ELSEWHERE], 0, False
    provider = rng.choice(PROVIDERS)
    elsewhere = random.Random(seed * 1299709 + 20)  # its own stream: the rest unchanged
    if elsewhere.random() < 0.15:  # a venue added since the seeds above were fixed
        provider = elsewhere.choice(LATER)
    rig = RIGS[provider]
    out = Outcome(seed, provider)
    limit, cap = rng.choice([(4, 2), (6, 3), (6, 6)])
    reference = factory()
    chosen = ["--limit", str(limit), *(["--dataset", str(healthbench)] if healthbench else [])]
    noisy = random.Random(seed * 6700417 + 13)  # its own stream: the rest unchanged
    if noisy.random() < 0.3 and healthbench is None:  # K judge passes (OpenAI's together)
        chosen += ["--judge-passes", str(noisy.choice([2, 3]))]
        out.faults["judge passes"] += 1
    ref_args = rig.args(reference, tmp_path / "ref", fixture_dir, *chosen, cap=cap)
    done = run_cli(*ref_args, env=rig.env(reference))
    assert done.returncode == 0, done.stderr
    expected = normalised(tmp_path / "ref" / "jobs" / rig.name())

    fault_rate = rng.choice([0.0, 0.0, 0.05, 0.15])
    emu = factory(latency=rng.choice([5.0, 60.0, 400.0]), fault_rate=fault_rate, seed=seed)
    out.faults["services failing calls"] += 1 if fault_rate else 0
    if rng.random() < 0.4:
        late = rng.choice([30.0, 90.0, 300.0])
        emu.delay_creates(rig.face_name, rng.randint(1, 2), after=late)
        out.faults["late creates"] += 1
    if rng.random() < 0.3:
        emu.lose_creates(rig.face_name, 1)
        out.faults["lost creates"] += 1
    machines = [MachineClock(clock, 0.0, "sim-0")] + [
        MachineClock(clock, rng.choice([-700.0, -30.0, 30.0, 700.0]), f"sim-{n}")
        for n in range(1, rng.randint(2, 3))
    ]
    out.faults["skewed machines"] = sum(1 for m in machines if m.skew)
    args = rig.args(emu, tmp_path, fixture_dir, *chosen, cap=cap)
    args[args.index("--jobs-dir") + 1] = URI
    if random.Random(seed * 31 + 5).random() < 0.4:  # its own stream: the rest unchanged
        args.append("--canary")  # a canary first, as a real service's first run has it
        out.faults["canaries"] += 1
    env = {**rig.env(emu), **emulator_s3(emu)}
    capping = random.Random(seed * 15485863 + 7)  # its own stream: the rest unchanged
    capped = capping.random() < 0.3
    if capped:  # ticks under --max-spend: some refused every buy (exit 6), none past it
        out.faults["spend caps"] += 1
        table = tmp_path / "prices.json"
        models = {m: {"input": 1.0, "output": 2.0} for m in (rig.model, rig.resolved)}
        models["judge-model"] = {"input": 1.0, "output": 2.0}
        table.write_text(json.dumps({"batch_discount": 0.5, "models": models}))
        args += ["--pricing", str(table)]
    hurried = random.Random(seed * 2750159 + 11)  # its own stream: the rest unchanged
    if hurried.random() < 0.3:  # ticks under a deadline: a late batch is cut short
        out.faults["deadlines"] += 1
        args += ["--deadline", hurried.choice(["+30m", "+90m", "+4h"])]
        if not BY_NAME[rig.provider].flex:  # where it has no flex tier: at list price
            args.append("--allow-list-price")
    cancelled = False
    for _ in range(rng.randint(6, 16)):
        machine = rng.choice(machines)
        roll = rng.random()
        if moves and moving.random() < 0.2:  # another machine moves the run
            out.faults["moves"] += 1
            move = ["move", rig.name(), "--jobs-dir", homes[home], "--to", homes[1 - home]]
            proc = run_cli(*move, env=env, clock=machine)
            out.steps.append(_checked(proc, "move", ok=(0, 2, 4)))
            if proc.returncode == 0:
                home, moved = 1 - home, True
        if removes and removing.random() < 0.15:  # another machine removes the run
            out.faults["removes tried"] += 1
            remove = ["remove", rig.name(), "--jobs-dir", homes[home]]
            proc = run_cli(*remove, env=env, clock=removing.choice(machines))
            out.steps.append(_checked(proc, "remove", ok=(0, 2, 4)))
            if proc.returncode == 0:
                out.faults["removes done"] += 1
                cancelled = False  # the next tick starts a new run
        if moves:  # most ticks find the run where it lives; the old cron, where it was
            stale = moved and moving.random() < 0.2
            args[args.index("--jobs-dir") + 1] = homes[1 - home if stale else home]
        if roll < 0.2:
            point = rng.choice(KILLS)
            out.faults["kills"] += 1
            out.steps.append(_kill(args, env, machine, point, rng.randint(1, 2)))
        elif roll < 0.25 and not cancelled:
            cancelled = True
            out.faults["cancels"] += 1
            proc = run_cli("cancel", rig.name(), "--jobs-dir", URI, env=env, clock=machine)
            out.steps.append(_checked(proc, "cancel", ok=(0, 2, 4, 5)))
        elif roll < 0.3:
            status = ["status", rig.name(), "--jobs-dir", URI, "--json"]
            proc = run_cli(*status, env=env, clock=machine)
            out.steps.append(_checked(proc, "status", ok=(0, 2, 4)))  # 4: moved away
        else:
            more = ["--resume-cancelled"] if cancelled and rng.random() < 0.5 else []
            if capped:
                refused = capping.random() < 0.4
                more += ["--max-spend", "0" if refused else "1000"]
                out.faults["ticks refused by the cap"] += 1 if refused else 0
            proc = run_cli(*args, "--no-wait", *more, env=env, clock=machine)
            out.steps.append(_checked(proc, "tick", ok=(0, 1, 3, 4, 5, 6)))
        jump = rng.choice([10.0, 60.0, 200.0, 200.0, 900.0])
        if jump > 600:
            out.faults["clock jumps"] += 1
        clock.advance(jump)
    clock.advance(1200)  # every lease lapsed, every late create landed
    args[args.index("--jobs-dir") + 1] = homes[home]
    more = ["--resume-cancelled"] if cancelled else []
    more += ["--max-spend", "1000"] if capped else []  # a cap that holds all: held to it
    final = run_cli(*args, *more, env=env, clock=machines[0])
    assert final.returncode == 0, (out.said(), out.steps, final.stdout + final.stderr)
    _checked(final, "final", ok=(0,))
    clock.advance(3600)
    emu.flush()
    ledger = emu.ledger()
    made_twice, ran_twice = duplicates(ledger)
    one_by_one = [e for e in ledger["executions"] if e["batch_id"] in ("flex", "on-demand", "sync")]
    out.faults["lines finished by a deadline's fallback"] += len(one_by_one)
    assert not made_twice and not ran_twice, (out.said(), made_twice, ran_twice, out.steps)
    got = pull(homes[home], rig.name(), emulator_s3(emu), tmp_path / "pulled")
    assert normalised(got / rig.name()) == expected, (out.said(), out.steps)
    ref_passes = _pass_rows(tmp_path / "ref" / "jobs" / rig.name())
    assert _pass_rows(got / rig.name()) == ref_passes, (out.said(), out.steps)
    if out.faults["moves"]:  # one home: the other place holds the move's note at most
        _one_home(homes[1 - home], rig.name(), emu, out)
    return out


def _pass_rows(run: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Each case's and judge pass's row (a crash may repeat one: the last counts)."""
    path = run / "judge_passes.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return {(r["case_id"], r["pass"]): r for r in rows}


def _one_home(uri: str, name: str, emu: Any, out: Outcome) -> None:
    from batchbench.storage.objects import Objects, parse_bucket

    from .buckets import variables

    with variables(emulator_s3(emu)):
        where = parse_bucket(uri)
        assert where is not None
        left = [k.rsplit("/", 1)[-1] for k in Objects(where).names(where.key(name) + "/")]
    assert left in ([], ["moved.json"]), (out.said(), left, out.steps)


def _kill(args: list[str], env: dict[str, str], machine: Any, point: str, nth: int) -> str:
    """A tick killed at a failpoint (nothing after it runs, nothing is written back)."""
    _failpoints._counts.clear()
    try:
        killed = {**env, "BATCHBENCH_FAILPOINT": f"{point}:{nth}:raise"}
        proc = run_cli(*args, "--no-wait", env=killed, clock=machine)
    except Crash:
        return f"killed at {point}:{nth}"
    return _checked(proc, f"tick (not killed at {point})", ok=(0, 1, 3, 4, 5))


def _checked(proc: Any, what: str, ok: tuple[int, ...]) -> str:
    """A command's exit among those its step may end in; never a bug's (70), never a
    traceback."""
    text = proc.stdout + proc.stderr
    assert proc.returncode in ok, (what, proc.returncode, text)
    assert "Traceback" not in text and "internal error" not in text, (what, text)
    last = [line for line in text.splitlines() if line.strip()][-1:] or [""]
    return f"{what}: exit {proc.returncode} ({last[0][:100]})"


def summary(outcomes: list[dict[str, Any]]) -> str:
    """The terminal's line: seeds explored and the faults drawn over them."""
    faults: Counter[str] = Counter()
    for o in outcomes:
        faults.update(o["faults"])
    drawn = ", ".join(f"{k} {n}" for k, n in sorted(faults.items()) if n)
    return f"simulation: {len(outcomes)} seeds explored; faults drawn: {drawn}"


def as_property(outcome: Outcome) -> str:
    return json.dumps({"seed": outcome.seed, "faults": dict(outcome.faults)})
