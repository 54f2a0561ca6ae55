"""Crash injection for the crash tests: die by SIGKILL at a named point.

``BATCHBENCH_FAILPOINT=name:n`` kills the process the n-th time ``hit(name)``
runs; ``name:n:raise`` raises :class:`Crash` there instead (a test running the CLI in
its own process: nothing after the point runs, as if killed, bar ``finally`` blocks);
``name:n:stop`` stops the process there (SIGSTOP), so a test that waits for the stop
can act on it at exactly that point, then let it go on (SIGCONT), on no clock.
Unset (always, outside tests) it costs one dictionary lookup. The points
sit exactly where a crash is most dangerous: after a billable call returned but
before its outcome is journaled, and in the middle of a file write.
"""

from __future__ import annotations

import os
import signal

_counts: dict[str, int] = {}


class Crash(BaseException):
    """A failpoint's crash, raised (not an Exception: nothing on the way catches it)."""


def armed(name: str) -> bool:
    """Whether a crash test set a failpoint of this name."""
    spec = os.environ.get("BATCHBENCH_FAILPOINT")
    return spec is not None and spec.partition(":")[0] == name


def hit(name: str) -> None:
    spec = os.environ.get("BATCHBENCH_FAILPOINT")
    if not spec:
        return
    want, _, rest = spec.partition(":")
    if want != name:
        return
    nth, _, how = rest.partition(":")
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] == int(nth or 1):
        if how == "raise":
            _counts[name] = 0
            raise Crash(f"failpoint {name}")
        if how == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
            return
        os.kill(os.getpid(), signal.SIGKILL)
