"""Loopback stand-ins for the providers' batch APIs, for tests, demos and rehearsals.

It is a stand-in for services we do not control, so it shares no code with
the pipeline: a shared helper would let one bug hide on both sides.

    from batchbench.emulator import Emulator, FakeClock
    with Emulator(latency=0.05) as emu:
        client = openai.OpenAI(api_key="test", base_url=emu.base_url)

The names below load on first use, so the CLI starts without the server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clock import Clock, FakeClock, SystemClock
    from .hub import Faults
    from .model import judge_matches, load_responder
    from .service import Emulator, serve

__all__ = [
    "Clock",
    "Emulator",
    "FakeClock",
    "Faults",
    "SystemClock",
    "judge_matches",
    "load_responder",
    "serve",
]
_HOMES = {
    "Clock": "clock",
    "Emulator": "service",
    "FakeClock": "clock",
    "Faults": "hub",
    "SystemClock": "clock",
    "judge_matches": "model",
    "load_responder": "model",
    "serve": "service",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
