"""What prompt caching can save a run (#67.2, its first part), said by the dry run.

A service reads from its cache only a prompt's *prefix* it has seen before, and only
from a prefix of a minimum size: 1,024 tokens is the smallest any of them caches
(OpenAI's automatic caching starts there; Anthropic's needs ``cache_control``, which
batchbench does not send). So what can be saved is what the requests of a stage share
from their first token: the system message and the head of the template. For
BedsideBench's judges that is about 175 tokens — under the minimum, so nothing at one
pass. Extra judge passes (``--judge-passes K``) repeat each request exactly: there the
whole prompt is a prefix seen before, and is cacheable where it is long enough.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypedDict

from ..bench.protocol import Prompt

MIN_CACHED_PREFIX = 1024  # tokens: the smallest prefix a service's cache reads


class Caching(TypedDict):
    shared_prefix_tokens: int  # what every request of the stage begins with
    min_prefix_tokens: int
    cacheable_share: float  # of the stage's input tokens, at one pass
    repeats_cacheable: bool  # repeated requests (judge passes 2..K) long enough to cache
    note: str


def _text(prompt: Prompt) -> str:
    # system first: the order every wire sends
    return "\n".join([prompt.system, *(m["content"] for m in prompt.messages())])


def caching(
    prompts: Sequence[Prompt], count: Callable[[str], int], input_tokens: int, passes: int = 1
) -> Caching:
    """What the stage's prompts share, and what caching could read of it."""
    texts = [_text(p) for p in prompts]
    shared = count(os.path.commonprefix(texts)) if len(texts) > 1 else 0
    cacheable = shared >= MIN_CACHED_PREFIX
    per_request = input_tokens / len(texts) if texts else 0.0
    repeats = passes > 1 and per_request >= MIN_CACHED_PREFIX
    share = (shared * len(texts) / input_tokens) if cacheable and input_tokens else 0.0
    if cacheable:
        note = f"a shared prefix of {shared:,} tokens: caching can read {share:.0%} of the input"
    else:
        note = (
            f"a shared prefix of {shared:,} tokens, under the {MIN_CACHED_PREFIX:,} a cache"
            " starts at: nothing to save"
        )
    if passes > 1:
        note += f"; judge passes 2..{passes} repeat each request exactly" + (
            ", long enough to be read from cache where the service caches repeats"
            if repeats
            else f", each under {MIN_CACHED_PREFIX:,} tokens: not cached either"
        )
    return Caching(
        shared_prefix_tokens=shared,
        min_prefix_tokens=MIN_CACHED_PREFIX,
        cacheable_share=share,
        repeats_cacheable=repeats,
        note=note,
    )
