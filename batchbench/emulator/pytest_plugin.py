"""``pytest_plugins = ["batchbench.emulator.pytest_plugin"]`` gives a ``batch_emulator``.

The fixture starts an emulator on a free loopback port with a fast clock and
stops it after the test; ``batch_emulator_factory`` builds one with options.
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
