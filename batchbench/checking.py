"""``batchbench check``: each named service tried with calls that cost nothing, before a
run buys anything there.

For every model named, on the service its stage would use: the key and the right to use
the Batch API (a list of the account's batches: read-only, free), and the model (looked
up as a run looks it up before buying). Quota is reported by no free call any of these
services offers: the canary (:mod:`.engine.canary`) is what meets it, and the table says
so rather than guess. One row a (stage, model), one line a failure, as the service said
it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import providers
from .engine.options import check_model_name
from .errors import BatchbenchError
from .kinds import Stage
from .providers.base import Client, Service, Tag

QUOTA = "not told by a free call (the canary meets it)"


@dataclass(frozen=True)
class Checked:
    """One (stage, model) on its service: each check's outcome, ``ok`` or what failed."""

    stage: Stage
    model: str
    service: str  # its label and where it is
    access: str  # the key, and the right to list batches
    model_found: str

    @property
    def ok(self) -> bool:
        return self.access == "ok" and self.model_found == "ok"


def _said(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _tried(action: Callable[..., object], *args: object) -> str:
    try:
        action(*args)
    except BatchbenchError as exc:
        return _said(exc)
    return "ok"


def check_services(
    answer_models: Sequence[str],
    judge_models: Sequence[str],
    base_url: str | None,
    warn: Callable[[str], None],
) -> list[Checked]:
    """Every (stage, model) named, tried on its service; no call that is billed."""
    asked: list[tuple[Stage, str]] = [
        *(("answers", m) for m in answer_models),
        *(("judges", m) for m in judge_models),
    ]
    for stage, model in asked:  # a flag that names no model: refused before any call
        check_model_name(f"--{stage[:-1]}-model", model)
    clients: dict[Service, Client | str] = {}
    out: list[Checked] = []
    for stage, model in asked:
        name = providers.route(model) if stage == "answers" else providers.judge_provider(model)
        label = providers.spec(name).label
        try:
            chosen = providers.explicit_base_url(name, base_url)
            url = chosen[0] if chosen else providers.default_base_url(name)
        except BatchbenchError as exc:  # a service only the user can name, not named
            out.append(Checked(stage, model, label, _said(exc), "not tried"))
            continue
        service = Service(name, url, providers.account_from_env(name))
        where = f"{label} at {providers.shown(url)}"
        if service not in clients:
            try:
                clients[service] = providers.connect(service, warn=warn)
            except BatchbenchError as exc:
                clients[service] = _said(exc)
        client = clients[service]
        if isinstance(client, str):  # no client: no key, no SDK, a bad address
            out.append(Checked(stage, model, where, client, "not tried"))
            continue
        resolved = providers.resolve(model)
        tag = Tag("check", "0" * 32, stage, "check", 0, 1, 1, resolved)
        access = _tried(client.find, tag, time.time(), set())  # the newest page: one call
        found = _tried(client.check_models, [resolved])
        out.append(Checked(stage, model, where, access, found))
    for held in clients.values():
        if not isinstance(held, str):
            held.close()
    return out


def check_text(rows: Sequence[Checked]) -> str:
    """The table: one row a (stage, model), each check's outcome; then the verdict."""
    head = ("stage", "model", "service", "key and batches", "model")
    body = [(r.stage, r.model, r.service, r.access, r.model_found) for r in rows]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(x, widths)).rstrip() for x in [head, *body]]
    bad = sum(not r.ok for r in rows)
    lines.append(f"quota: {QUOTA}")
    if bad:
        lines.append(f"some checks failed ({bad} of {len(rows)}): nothing was bought")
    else:
        lines.append("every check passed: nothing was bought")
    return "\n".join(lines)
