"""Prompt caching as the services document it, so that what caching saves is rehearsable.

Two rules, each the service's own:

- **Automatic** (OpenAI: "cache hits require an exact, repeated prefix match and work
  automatically for prompts containing 1024 tokens or more, with cache hits occurring in
  increments of 128 tokens" — OpenAI cookbook, *Prompt Caching 201*; a Batch's ``usage``
  carries ``input_tokens_details.cached_tokens``, SDK ``batch_usage.py``). A request
  reads from cache the longest prefix, in whole 128-token blocks and at least 1,024
  tokens, that a request to the same model executed before it began with; prefixes stay
  five minutes after their last use (the short end of OpenAI's "5 to 10 minutes of
  inactivity") on the emulator's clock.
- **Marked** (Anthropic: a block carrying ``cache_control`` ends a cached prefix — tools,
  system, then messages — of at least 1,024 tokens, 2,048 on Haiku; a hit reads it at
  ``cache_read_input_tokens``, a miss writes it at ``cache_creation_input_tokens``, split
  by ``ttl`` ``5m``/``1h`` in ``cache_creation``; ``input_tokens`` is what follows the
  last breakpoint). Requests of one Message Batch run concurrently, so a prefix one of
  them writes is read only by later batches: K cold copies in one batch each pay a write
  ("best-effort … 30% to 98%" hits, Anthropic's batch guide).

Nothing else caches here: where a service's caching inside batches is not documented in
our sources, it reports none.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BLOCK = 128  # tokens: OpenAI's cache hits come in whole blocks of 128
MIN_AUTOMATIC = 1024  # tokens: OpenAI caches prompts this long or longer
AUTOMATIC_TTL = 300.0  # seconds a prefix stays after its last use
TTL = {"5m": 300.0, "1h": 3600.0}  # Anthropic's cache_control ttl values


def min_marked(model: str) -> int:
    """The shortest prefix Anthropic caches for a model: 2,048 tokens on Haiku, else 1,024."""
    return 2048 if "haiku" in model.lower() else 1024


@dataclass
class _Entry:
    until: float
    writer: str  # the batch that wrote it (a marked prefix is not read by its own batch)


@dataclass
class PromptCache:
    """The prefixes each (service, model) has seen: digest → when it lapses."""

    ids: Callable[[str], list[Any]]  # a text's tokens (ids, or 4-character pieces)
    _seen: dict[tuple[str, str], dict[bytes, _Entry]] = field(default_factory=dict)

    def automatic(self, service: str, model: str, prompt: str, total: int, now: float) -> int:
        """Cached tokens of a request whose prompt (its messages in order) is ``prompt`` and
        whose input is ``total`` tokens; its prefixes are remembered for those after it."""
        if total < MIN_AUTOMATIC:
            return 0
        seen = self._seen.setdefault((service, model), {})
        digests = _block_digests(self.ids(prompt))
        hit = 0
        for n, digest in enumerate(digests, start=1):
            entry = seen.get(digest)
            if n * BLOCK >= MIN_AUTOMATIC and entry is not None and entry.until >= now:
                hit = n * BLOCK
            seen[digest] = _Entry(now + AUTOMATIC_TTL, "")
        return min(hit, total // BLOCK * BLOCK)

    def marked(
        self, model: str, params: dict[str, Any], batch: str, total: int, now: float
    ) -> dict[str, int]:
        """A Messages request's cache usage: ``read``, ``write_5m``, ``write_1h`` and the
        ``input`` left uncached (of ``total`` input tokens). The longest breakpoint prefix
        cached (and not written by this batch) is read; each longer one is written, the
        tokens between breakpoints at the later breakpoint's ttl."""
        seen = self._seen.setdefault(("anthropic", model), {})
        points = [
            (digest, min(len(self.ids(plain)), total), ttl)
            for digest, plain, ttl in _breakpoints(params)
        ]
        points = [p for p in points if p[1] >= min_marked(model)]
        hit = max(
            (
                i
                for i, (digest, _, _) in enumerate(points)
                if (entry := seen.get(digest)) is not None
                and entry.until >= now
                and entry.writer != batch
            ),
            default=-1,
        )
        usage = {"read": points[hit][1] if hit >= 0 else 0, "write_5m": 0, "write_1h": 0}
        done = usage["read"]
        for i, (digest, tokens, ttl) in enumerate(points):
            if i <= hit:
                entry = seen[digest] if i == hit else seen.get(digest)
                if entry is not None:
                    entry.until = max(entry.until, now + TTL[ttl])
                continue
            usage[f"write_{ttl}"] += max(tokens - done, 0)
            done = max(done, tokens)
            seen[digest] = _Entry(now + TTL[ttl], batch)
        usage["input"] = max(total - done, 0)
        return usage


def _block_digests(ids: list[Any]) -> list[bytes]:
    """The digest of each whole-block prefix of a token sequence (1 block, 2 blocks, …)."""
    running = hashlib.sha256()
    out = []
    for start in range(0, len(ids) - len(ids) % BLOCK, BLOCK):
        running.update(json.dumps(ids[start : start + BLOCK]).encode())
        out.append(running.copy().digest())
    return out


def chat_prompt(body: dict[str, Any]) -> str:
    """An OpenAI-shaped request's prompt as one text, in the order it is read: each
    message's role and content (or the Responses API's instructions and input)."""
    parts: list[str] = []
    if isinstance(body.get("instructions"), str):
        parts.append("system\n" + body["instructions"])
    for message in _listed(body.get("messages", body.get("input"))):
        content = message.get("content") if isinstance(message, dict) else message
        parts.append(f"{message.get('role', '') if isinstance(message, dict) else ''}\n")
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(parts)


def _listed(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return value if isinstance(value, list) else []


def _breakpoints(params: dict[str, Any]) -> list[tuple[bytes, str, str]]:
    """Each ``cache_control`` block's prefix — tools, system, then messages, up to and
    including it — as a digest of its canonical form, its plain text (what its tokens are
    counted on) and its ttl, in order."""
    out: list[tuple[bytes, str, str]] = []
    system = params.get("system")
    pieces: list[tuple[str, Any]] = [("tools", t) for t in params.get("tools") or []]
    pieces += [("system", b) for b in (system if isinstance(system, list) else [system or ""])]
    for message in params.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        role = message.get("role") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [content]
        pieces += [(str(role), b) for b in blocks]
    running = hashlib.sha256()
    plain: list[str] = []
    for where, block in pieces:
        running.update(json.dumps([where, block], sort_keys=True).encode())
        text = block.get("text") if isinstance(block, dict) else block
        plain.append(text if isinstance(text, str) else json.dumps(block))
        mark = block.get("cache_control") if isinstance(block, dict) else None
        if isinstance(mark, dict) and mark.get("type") == "ephemeral":
            ttl = str(mark.get("ttl")) if mark.get("ttl") in TTL else "5m"
            out.append((running.copy().digest(), "".join(plain), ttl))
    return out
