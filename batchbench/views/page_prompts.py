"""The report's appendix of prompts (#66.2): each template the runs' requests are made
of, verbatim, with its SHA-256, and the SHA-256 of every request file each run sent —
so a reader can tell exactly what was asked, and check a file against the record."""

from __future__ import annotations

import hashlib
import html
from pathlib import Path
from typing import Any

from ..bench.protocol import PROTOCOL_VERSION, TEMPLATES

CHUNK = 1 << 20


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def request_files(folder: Path) -> dict[str, str]:
    """Every request file a run wrote (its ``requests/``), name → SHA-256."""
    if not folder.is_dir():
        return {}
    return {p.name: sha256_file(p) for p in sorted(folder.glob("*.jsonl"))}


def prompts_record(files: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The templates with their hashes, and each run's request files' hashes."""
    return {
        "protocol_version": PROTOCOL_VERSION,
        "templates": [
            {"name": name, "sha256": sha256_text(text), "text": text}
            for name, text in TEMPLATES.items()
        ],
        "request_files": files,
    }


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def prompts_section(record: dict[str, Any]) -> str:
    templates = "".join(
        f"<h3>{_e(t['name'])}</h3><p class='note'>SHA-256 <code>{t['sha256']}</code></p>"
        f"<pre>{_e(t['text'])}</pre>"
        for t in record["templates"]
    )
    files = "".join(
        f"<h3>{_e(run)}</h3><table><tr><th>request file</th><th>SHA-256</th></tr>"
        + "".join(
            f"<tr><td>{_e(name)}</td><td><code>{digest}</code></td></tr>"
            for name, digest in found.items()
        )
        + "</table>"
        for run, found in record["request_files"].items()
        if found
    )
    return (
        "<h2 id='prompts'>Appendix: the prompts, verbatim</h2><p>Protocol"
        f" <code>{_e(record['protocol_version'])}</code>. Each request is these templates"
        " with the case's fields in braces (<code>{prompt}</code>, <code>{answer}</code>,"
        " the rubric lines), sent as each service's wire renders it; the request files"
        f" below are what each run sent, byte for byte.</p>{templates}"
        + (f"<h2 id='request-files'>Request files</h2>{files}" if files else "")
    )
