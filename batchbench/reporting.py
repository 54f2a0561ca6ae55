"""How library code says things: through a reporter it is given, never by printing.

The CLI passes reporters that write to stdout (results) and stderr (warnings);
a caller that wants silence passes nothing.
"""

from __future__ import annotations


def quiet(line: str) -> None:
    """The reporter of a caller that wants no lines."""
