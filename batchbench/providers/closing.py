"""Closing what a client holds: its SDK clients and HTTP connection pools, at the end of
the command that opened them (:meth:`.base.Client.close`)."""

from __future__ import annotations

import contextlib


def shut(*held: object) -> None:
    """Close each SDK client or HTTP connection pool a client holds (its ``close``);
    one already closed, or that cannot close, is left as it is."""
    for thing in held:
        close = getattr(thing, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
