"""Owed results settled by the user (``run --settle-owed``): keep what arrived, send only
what is missing, once — journaled and priced before anything is sent.

A batch whose service says it has results it does not give is waited for and then
stops its stage (:mod:`.owed`), nothing bought again: what the service owes may yet
arrive, and buying it again pays twice. Only the user can decide to stop waiting. Each
owed batch's requests that have no result line go out again in a batch of their own
(a retry that spends none of their attempts), once: the settlement is journaled first,
with how many requests are kept and sent and what sending them costs at the batch
price (the tokens the replies that did arrive used, on average), and said.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from ..costs.pricing import Pricing, usage_cost
from ..errors import ApiError
from ..formats import usd
from ..providers.frames import USAGE_COLUMNS
from .events import Settled
from .pipeline import Pipeline


def settle_owed(pipeline: Pipeline, pricing: Pricing, say: Callable[[str], None]) -> int:
    """Settle every owed batch of the run (the number settled)."""
    settled = 0
    for sub in list(pipeline.state.subs.values()):
        if sub.contradiction is None or sub.collected or sub.batch_id is None:
            continue
        wire = pipeline.providers[sub.stage].wire
        for ref in sub.result_files():  # fetched afresh, as an owed batch's always are
            if ref not in pipeline.state.subs[sub.id].downloaded:
                with contextlib.suppress(ApiError):  # one that still answers 404: not there
                    pipeline.submitter.download(sub, ref)
        sub = pipeline.state.subs[sub.id]
        files = [f for f in sub.result_files() if f in sub.downloaded]
        frame = pipeline.run.read_results(wire, files)
        arrived = set(frame["custom_id"].to_list())
        missing = [cid for cid in sub.ids() if cid not in arrived]
        used = frame.filter(frame["status_code"] == 200)
        per = {c: int(used[c].sum()) / max(used.height, 1) for c in USAGE_COLUMNS}
        model = pipeline.config.model(sub.stage)
        price = pricing.price(model)
        off = pricing.discount(pipeline.config.providers[sub.stage], model)
        cost = usage_cost({c: round(v * len(missing)) for c, v in per.items()}, price, off)[
            "batch_usd"
        ]
        pipeline.record(
            Settled(
                sub=sub.id,
                batch_id=sub.batch_id or "",
                kept=frame.height,
                missing=len(missing),
                usd=cost,
            )
        )
        priced = usd(cost) if cost is not None else f"unpriced ({model} has no price)"
        say(
            f"settling {sub.id} (batch {sub.batch_id}), as --settle-owed asks: keeping the"
            f" {frame.height} result(s) that arrived, sending the {len(missing)} missing"
            f" request(s) again once — about {priced} at the batch price"
            + (" (estimated from no reply: none arrived)" if not used.height else "")
        )
        settled += 1
    return settled
