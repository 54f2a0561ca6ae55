"""Crash injection for the crash tests: die by SIGKILL at a named point.

``BATCHBENCH_FAILPOINT=name:n`` kills the process the n-th time ``hit(name)``
runs. Unset (always, outside tests) it costs one dictionary lookup. The points
sit exactly where a crash is most dangerous: after a billable call returned but
before its outcome is journaled, and in the middle of a file write.
"""

from __future__ import annotations

import os
import signal

_counts: dict[str, int] = {}


def armed(name: str) -> bool:
    """Whether a crash test set a failpoint of this name."""
    spec = os.environ.get("BATCHBENCH_FAILPOINT")
    return spec is not None and spec.partition(":")[0] == name


def hit(name: str) -> None:
    spec = os.environ.get("BATCHBENCH_FAILPOINT")
    if not spec:
        return
    want, _, nth = spec.partition(":")
    if want != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
