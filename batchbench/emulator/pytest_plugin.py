"""``pytest_plugins = ["batchbench.emulator.pytest_plugin"]`` gives emulator fixtures.

``batch_emulator`` starts an emulator on a free loopback port and stops it after
the test; ``batch_emulator_factory`` builds one with options. Both run on the
real clock unless given one: pass ``clock=FakeClock()`` (and the same clock to
the code under test) to make hours of batch time take milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .service import Emulator


@pytest.fixture
def batch_emulator_factory() -> Iterator[Callable[..., Emulator]]:
    started: list[Emulator] = []

    def make(**options: Any) -> Emulator:
        options.setdefault("latency", 0.05)
        emu = Emulator(**options).start()
        started.append(emu)
        return emu

    yield make
    for emu in started:
        emu.stop()


@pytest.fixture
def batch_emulator(batch_emulator_factory: Callable[..., Emulator]) -> Emulator:
    return batch_emulator_factory()
