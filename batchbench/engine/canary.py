"""A canary before the first real run on a service: a few cases bought first, read
through the whole path, and only then the rest.

No emulator is the service. The first time a jobs folder sends a stage to a (service,
model) for real, the stage's first file holds a few cases only (:data:`CASES`, or the
service's minimum batch), and nothing more of that stage is planned until that file is
collected: uploaded, created, polled, downloaded, parsed — a judge's replies parsed into
decisions — and its rows written. At least one case come back good and the canary has
passed (said in the jobs folder, :data:`FILE` — in its bucket for a team's — so the next
run there goes straight to work); none, and the run stops in one line naming what the
service answered, before the bulk is paid. A canary is an ordinary submission of the run
— journaled, marked, looked for before it is created, priced — so exactly-once holds for
it as for any batch, and its cases count: none is bought twice. Run the same command
again after a failed canary and a new one is sent (the failed cases retried). On by
default for a real service, never against a loopback one (the emulator) unless asked
(``--canary``); ``--no-canary`` skips it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..errors import CanaryFailed
from ..kinds import STAGES, Stage
from ..providers import is_loopback_url
from ..providers.base import Provider
from ..providers.registry import BY_NAME
from ..storage import read_shared, write_shared
from .collection import Outcome
from .runconfig import RunConfig
from .state import RunState
from .submission import Submission

CASES = 3  # a canary's cases (or the service's minimum batch, where larger)
FILE = ".canaries.json"  # in the jobs folder: the (service, model, stage) that passed


def _key(provider: Provider, model: str, stage: Stage) -> str:
    service = provider.client.service
    return f"{service.provider} {service.base_url} {model} {stage}"


class Canary:
    """Which stages of a run still owe their canary, and the gate on planning them."""

    def __init__(
        self,
        jobs_dir: Path,
        config: RunConfig,
        providers: Mapping[Stage, Provider],
        asked: bool | None,
        warn: Callable[[str], None],
    ) -> None:
        self.jobs_dir = jobs_dir
        self.providers = providers
        self.config = config
        self.warn = warn
        self.due: dict[Stage, bool] = {}
        for stage in STAGES:
            real = not is_loopback_url(providers[stage].client.service.base_url)
            self.due[stage] = bool(asked if asked is not None else real)
        if any(self.due.values()):  # the record read only where a canary may be due
            passed = self._passed()
            self.due = {
                stage: due and self._key(stage) not in passed for stage, due in self.due.items()
            }

    def _passed(self) -> set[str]:
        try:
            found = json.loads(read_shared(self.jobs_dir, FILE) or b"[]")
        except ValueError:
            return set()
        return set(found) if isinstance(found, list) else set()

    def _key(self, stage: Stage) -> str:
        return _key(self.providers[stage], self.config.model(stage), stage)

    def _label(self, stage: Stage) -> str:
        provider = self.providers[stage]
        return f"{BY_NAME[provider.wire.name].label} ({self.config.model(stage)})"

    def holds(self, state: RunState, stage: Stage) -> bool:
        """Whether planning the stage must wait: its canary is in flight. A stage with a
        good case (the canary's, or an earlier invocation's) has passed, said once."""
        if not self.due[stage]:
            return False
        if self._key(stage) in self._passed():  # another run of the command passed it
            self.due[stage] = False
            return False
        subs = [s for s in state.subs.values() if s.stage == stage]
        if any(not s.collected for s in subs):
            return True
        if any(c.stage(stage).status == "ok" for c in state.cases.values()):
            self._pass(stage)
        return False

    def first(self, stage: Stage, pending: Sequence[str], least: int) -> list[str]:
        """The cases to plan: a canary's few while it is due, else every pending one."""
        if not self.due[stage]:
            return list(pending)
        few = list(pending[: max(CASES, least)])
        rest = len(pending) - len(few)
        if rest:
            self.warn(
                f"canary: {len(few)} {stage} to {self._label(stage)} first, read through to"
                f" rows before the other {rest} are bought (the first real {stage} there"
                " from this jobs folder; --no-canary skips it)"
            )
        return few

    def collected(self, sub: Submission, outcomes: Mapping[str, Outcome]) -> None:
        """After a file of a stage whose canary is due is collected: none of its cases
        good, and the run stops here, naming what the service answered. A file cut short
        (a deadline's, a flex tail's) is not judged by what the cut left: its unfinished
        lines go one call at a time, and that submission's answers decide. Nor is one
        whose every line the service lost (a batch cancelled or expired before they ran):
        nothing was said of them, and they go out again, a canary still."""
        if not self.due[sub.stage] or sub.judge_pass != 1 or sub.tailed:
            return
        if all(o.kind == "lost" for o in outcomes.values()):
            return
        if any(o.kind == "ok" for o in outcomes.values()):
            return
        said = next((o.detail for o in outcomes.values() if o.detail), None) or "no result"
        raise CanaryFailed(
            f"the canary's {len(outcomes)} {sub.stage} on {self._label(sub.stage)} came back"
            f" with none good: {said}; nothing more was bought — run the same command again"
            " to send a new canary, or --no-canary to send everything"
        )

    def _pass(self, stage: Stage) -> None:
        self.due[stage] = False
        passed = self._passed() | {self._key(stage)}
        write_shared(self.jobs_dir, FILE, json.dumps(sorted(passed), indent=1).encode() + b"\n")
        self.warn(f"canary passed: {stage} on {self._label(stage)}; the rest goes out")
