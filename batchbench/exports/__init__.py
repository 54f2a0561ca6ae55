"""A run's results in the formats other tools read: one table of runs (parquet, CSV),
Every Eval Ever records, an Inspect log — each from the run's rows and summary, each
file written whole or not at all."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..scores.sources import Named

Format = Literal["parquet", "csv", "eee", "inspect"]
FORMATS: tuple[Format, ...] = ("parquet", "csv", "eee", "inspect")
ALIASES = {"eval": "inspect"}  # Inspect's own suffix


def format_of(given: str | None, output: Path) -> Format:
    """The format asked for, else the output's suffix: one line when neither is one."""
    name = (given or output.suffix.lstrip(".")).lower()
    name = ALIASES.get(name, name)
    for fmt in FORMATS:
        if name == fmt:
            return fmt
    raise ConfigError(f"--format must be parquet, csv, eee or inspect, got {name or 'nothing'!r}")


def export(
    sources: list[Named],
    output: Path,
    fmt: Format,
    *,
    dataset: Path | None,
    labels: list[Path],
    decisions: bool,
    warn: Callable[[str], None],
) -> list[str]:
    """Write ``sources`` as ``fmt`` at ``output``; what was written, a line each."""
    from .runs import export_eee, export_inspect, export_table

    if labels and fmt != "eee":
        raise ConfigError("--labels goes with --format eee")
    if fmt == "inspect":
        paths = [output / f"{s.name}.eval" if len(sources) > 1 else output for s in sources]
        return [f"wrote {export_inspect(s, p, dataset, warn)}" for s, p in zip(sources, paths)]
    if fmt == "eee":
        return [f"wrote {export_eee(s, output, labels, dataset, warn)}" for s in sources]
    rows = export_table(sources, output, fmt, dataset, decisions, warn)
    return [f"wrote {rows} rows to {output}"]
