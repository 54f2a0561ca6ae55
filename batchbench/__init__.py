"""batchbench: BedsideBench through the providers' batch APIs, scored like the reference runner."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import BatchbenchError

if TYPE_CHECKING:
    from .scores.summary import summarize

__all__ = ["BatchbenchError", "summarize", "__version__"]
__version__ = "0.3.0"


def __getattr__(name: str) -> Any:
    """``summarize`` imports numpy: only when it is asked for, so the CLI starts fast."""
    if name == "summarize":
        from .scores.summary import summarize

        return summarize
    raise AttributeError(f"module 'batchbench' has no attribute {name!r}")
