"""How numbers read in every text batchbench prints: one home for each format.

Dollars, scores, intervals, shares and counts look the same in ``status``,
``list``, the dry run, ``compare``, ``plan`` and the summary table, and a value
that does not exist reads the same everywhere too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MISSING = "—"  # a figure that is not there, printed one way everywhere


def present(value: Any) -> bool:
    """A real, finite number (not None, NaN or a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def usd(value: float | None, digits: int = 4) -> str:
    """``$1,234.5678``; ``n/a`` without a price."""
    return f"${value:,.{digits}f}" if present(value) else MISSING


def num(value: Any, form: str = ".3f", width: int = 0, missing: str = MISSING) -> str:
    """A number in ``form``, right-aligned to ``width``; ``missing`` when there is none."""
    text = format(value, form) if present(value) else missing
    return text.rjust(width)


def interval(ci: Sequence[Any], form: str = ".3f", width: int = 0, missing: str = MISSING) -> str:
    """``[0.412, 0.533]``, each end as :func:`num` writes it."""
    return f"[{num(ci[0], form, width, missing)}, {num(ci[1], form, width, missing)}]"


def count(n: int, thing: str, plural: str | None = None) -> str:
    """``1 case``, ``2 cases``, ``1,250 cases``."""
    return f"{n:,} {thing if n == 1 else plural or thing + 's'}"


def duration(seconds: float) -> str:
    """``45s``, ``4m10s``, ``3h05m``: a wait as a person reads it."""
    seconds = int(max(0, seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def article(word: str) -> str:
    """``a Gemini``, ``an Anthropic``: by the first letter, which for every name said
    here (providers, publishers) is its first sound."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"
