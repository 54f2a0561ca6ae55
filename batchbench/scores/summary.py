"""The reference summary, with a vectorised bootstrap on the reference's random stream.

The reference draws every resample from one ``random.Random(seed)``: each pick is
``randrange(n)``, which takes 32-bit Mersenne Twister words, keeps the top
``n.bit_length()`` bits and rejects values ``>= n``. NumPy's MT19937, put in the
same state, yields the same words, so the accepted picks are a deterministic
filter of a word stream we can generate in bulk. Sums are accumulated column by
column (left to right, as the reference's loop does), benchmark means are
combined with ``math.fsum`` (as ``statistics.fmean`` does), and percentiles use
the reference's interpolation expression, so every bound is bit-identical.
"""

from __future__ import annotations

import math
import queue
import random
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from .exact import Summary, exact_summary, is_success, last_rows

__all__ = ["Summary", "is_success", "last_rows", "summarize"]

DEFAULT_SAMPLES = 10000
# Draws one bootstrap holds at once (8 bytes each, plus the word stream): about 2 GB.
# Draws a bootstrap may take (samples × cases), a bound on time (memory: BLOCK_PICKS):
# the default 10,000 resamples of 200,000 cases, about 25 s a stage on two cores.
MAX_PICKS = 2_000_000_000
BLOCK_PICKS = 4_000_000  # draws held at once: resamples go in blocks of this many picks


def blocks(samples: int, per_sample: int) -> Iterator[int]:
    """Consecutive runs of resamples, each of at most BLOCK_PICKS draws (at least one
    resample): the word stream is consumed resample by resample, so drawing a block
    after another is drawing them all at once, held in a fraction of the memory."""
    step = max(1, BLOCK_PICKS // max(per_sample, 1))
    for start in range(0, samples, step):
        yield min(step, samples - start)


DEFAULT_SEED = 42
NAN = float("nan")


# Words per round per stratum above which a stratified draw goes stratum by stratum
# (its cost per stratum and round is a few NumPy calls, ~10 µs; the walk's is ~5 ns per
# word per distinct size).
SEGMENTS_OVER = 2000


class WordStream:
    """The raw 32-bit words of ``random.Random(seed)``, consumed in order.

    Generating the words is a third of the bootstrap's work and NumPy releases
    the GIL while doing it, so a producer thread keeps a few chunks ready while
    the caller filters and sums the previous ones. Use it as a context manager
    so the producer stops with the bootstrap.
    """

    CHUNK = 1 << 18
    AHEAD = 32

    def __init__(self, seed: int, expected_words: int = 0) -> None:
        state = random.Random(seed).getstate()[1]
        bitgen = np.random.MT19937()
        st = bitgen.state
        st["state"]["key"] = np.array(state[:624], dtype=np.uint32)
        st["state"]["pos"] = state[624]
        bitgen.state = st
        # integers() over the full 32-bit range returns each MT word unchanged.
        self._gen = np.random.Generator(bitgen)
        self._buf = np.empty(0, dtype=np.uint32)
        self._pos = 0
        self._chunks: queue.Queue[np.ndarray] = queue.Queue(self.AHEAD)
        self._stop = threading.Event()
        self._producer = threading.Thread(
            target=self._produce, args=(-(-expected_words // self.CHUNK),), daemon=True
        )
        self._producer.start()

    def _produce(self, chunks: int) -> None:
        """Draw up to ``chunks`` chunks ahead; past that the consumer draws for itself."""
        for _ in range(chunks):
            if self._stop.is_set():
                return
            chunk = self._gen.integers(0, 1 << 32, size=self.CHUNK, dtype=np.uint32)
            while not self._stop.is_set():
                try:
                    self._chunks.put(chunk, timeout=0.1)
                    break
                except queue.Full:
                    continue

    def _next_chunk(self) -> np.ndarray:
        while True:
            alive = self._producer.is_alive()
            try:
                return self._chunks.get(timeout=0.05) if alive else self._chunks.get_nowait()
            except queue.Empty:
                if alive:
                    continue
            # The producer has exited and every chunk it drew is consumed: the
            # generator is ours alone now, so drawing here keeps the order.
            return self._gen.integers(0, 1 << 32, size=self.CHUNK, dtype=np.uint32)

    def close(self) -> None:
        """Stop the producer; it exits after the chunk it is drawing, unjoined."""
        self._stop.set()

    def __enter__(self) -> WordStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _available(self, at_least: int) -> np.ndarray:
        """Unconsumed words, topped up so at least ``at_least`` are buffered."""
        have = self._buf.size - self._pos
        if have < at_least:
            parts = [self._buf[self._pos :]]
            while have < at_least:
                chunk = self._next_chunk()
                parts.append(chunk)
                have += chunk.size
            self._buf = np.concatenate(parts)
            self._pos = 0
        return self._buf[self._pos :]

    def picks(self, n: int, count: int) -> np.ndarray:
        """The next ``count`` results of ``randrange(n)``, filtered chunk by chunk."""
        shift = np.uint32(32 - n.bit_length())
        # (word >> shift) < n  <=>  word < n << shift: test before shifting.
        limit = np.uint32(n << (32 - n.bit_length()))
        out = np.empty(count, dtype=np.intp)
        filled = 0
        while filled < count:
            # about the words the picks left take (2**bit_length / n words a pick), so a
            # short run of picks looks at a short window
            need = (count - filled) * (1 << n.bit_length()) // n * 9 // 8 + 64
            words = self._available(need)[:need]
            accepted = np.flatnonzero(words < limit)
            take = min(accepted.size, count - filled)
            out[filled : filled + take] = words[accepted[:take]] >> shift
            filled += take
            if filled == count:
                self._pos += int(accepted[take - 1]) + 1
            else:
                self._pos += words.size
        return out

    def stratified(self, sizes: Sequence[int], samples: int) -> list[np.ndarray]:
        """``samples`` rounds of ``sizes[b]`` picks of ``randrange(sizes[b])`` for each b.

        Returns one ``(samples, sizes[b])`` index array per stratum. Strata of
        different sizes interleave picks with different rejection rules, so the
        start of each stratum's run of words is found by walking segment ends.
        """
        # randrange(n) takes 2**bit_length(n) / n words per pick on average.
        per_round = sum(1 << s.bit_length() for s in sizes)
        if per_round * len(set(sizes)) > SEGMENTS_OVER * len(sizes):
            # Large strata: each stratum's run of picks drawn in turn (a few NumPy calls
            # each), not every size's rule over the whole block's words (which grew
            # with the cases times the sizes: 57 s at 25,000 cases in 10 unequal strata).
            out = [np.empty((samples, n), dtype=np.intp) for n in sizes]
            for r in range(samples):
                for b, n in enumerate(sizes):
                    out[b][r] = self.picks(n, n)
            return out
        want = int(samples * per_round * 1.02) + 64
        while True:
            words = self._available(want)[:want]
            result = self._walk(words, sizes, samples)
            if result is not None:
                out, consumed = result
                self._pos += consumed
                return out
            want = words.size * 2

    @staticmethod
    def _walk(
        words: np.ndarray, sizes: Sequence[int], samples: int
    ) -> tuple[list[np.ndarray], int] | None:
        """Stratum start indices by walking rounds; None when ``words`` runs out.

        The walk is one step per stratum and round, each two lookups: through
        memoryviews, which give plain ints (a NumPy scalar index costs several times
        more, and the walk was half of a small run's summary)."""
        values: dict[int, np.ndarray] = {}
        accepted: dict[int, np.ndarray] = {}
        before: dict[int, np.ndarray] = {}
        # counts of accepted words fit 32 bits below 2**31 words (half the memory to fill)
        count_type = np.int32 if words.size < 1 << 31 else np.int64
        for n in set(sizes):
            v = words >> np.uint32(32 - n.bit_length())
            ok = v < n
            values[n] = v
            accepted[n] = np.flatnonzero(ok).astype(np.int64, copy=False)
            # before[n][p]: how many accepted words precede position p.
            counts = np.empty(words.size + 1, dtype=count_type)
            counts[0] = 0
            np.cumsum(ok, dtype=count_type, out=counts[1:])
            before[n] = counts
        plan = [(n - 1, accepted[n].data, before[n].data, accepted[n].size) for n in sizes]
        found: list[int] = []
        record = found.append
        pos = 0
        for _ in range(samples):
            for last, acc, bef, size in plan:
                j = bef[pos]
                end = j + last
                if end >= size:
                    return None
                record(j)
                pos = acc[end] + 1
        starts = np.array(found, dtype=np.int64).reshape(samples, len(sizes)).T
        out = []
        for b, n in enumerate(sizes):
            idx = accepted[n][starts[b][:, None] + np.arange(n)]
            out.append(values[n][idx].astype(np.intp))
        return out, pos


def sequential_means(scores: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Per-row mean of picked scores, summed strictly left to right from 0."""
    means: np.ndarray = _sequential_sums(scores, picks) / picks.shape[1]
    return means


def paired_means(a: np.ndarray, b: np.ndarray, picks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sequential_means` of two runs' scores with the same picks, in one pass: each
    case's two scores are one complex number, whose additions add the real and the
    imaginary parts each as a float addition would (so each run's sums are bit for bit
    its own), and a pick gathers both at once (1.5 × faster than two passes)."""
    packed = np.column_stack([a, b]).astype(np.float64).view(np.complex128).ravel()
    sums = _sequential_sums(packed, picks)
    n = picks.shape[1]
    return sums.real / n, sums.imag / n


# Rows of resamples at or above which one vector addition per position (across the
# rows) beats a running sum along each row (#52.4: measured on 2 cores).
WIDE_ROWS = 1024


def _sequential_sums(scores: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Per-row sums of picked scores, strictly left to right from 0 (as the reference's
    ``sum``: ``0 + -0.0`` is ``0.0``). NumPy's reductions (``np.sum``) may sum pairwise,
    which rounds differently; two ways keep the order:

    * many rows (``WIDE_ROWS``): the picks laid position-major (a copy; the callers'
      blocks bound them), each position's scores gathered and added across all the rows
      in one vector addition: two NumPy calls a position (gathering a whole block first
      wrote it to memory and read it back, a third slower at 25,000 cases);
    * few rows, as a stratified bootstrap of many cases has (a block of 4 million picks
      is 40 resamples of 100,000): a running sum along each row (``np.cumsum``, by
      definition each partial sum the one before plus the next pick), its last column
      the sum, about a million picks at a time. Positions one at a time there cost a
      call per 40 additions, and grew with the square of the cases (13 s of a
      100,000-case summary).
    """
    rows, n = picks.shape
    total = np.zeros(rows, dtype=scores.dtype)
    if n == 0:
        return total
    if rows >= WIDE_ROWS:
        positions = np.ascontiguousarray(picks.T)
        for j in range(n):
            total += scores[positions[j]]
        return total
    step = max(1, (1 << 20) // n)
    for r0 in range(0, rows, step):
        picked = scores[picks[r0 : r0 + step]]
        picked[:, 0] += 0.0
        np.cumsum(picked, axis=1, out=picked)
        total[r0 : r0 + step] = picked[:, -1]
    return total


def percentile(values: Sequence[float] | np.ndarray, p: float) -> float:
    """The reference's percentile: sort, then this exact interpolation expression."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    if v.size == 0:
        return NAN
    pos = (v.size - 1) * p
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return float(v[lo])
    f = pos - lo
    return float(v[lo]) * (1 - f) + float(v[hi]) * f


def interval(means: np.ndarray) -> list[float]:
    return [percentile(means, 0.025), percentile(means, 0.975)]


def bootstrap(
    scores_by_benchmark: Mapping[str, Sequence[float]], samples: int, seed: int
) -> tuple[dict[str, list[float]], list[float]]:
    """Benchmark intervals (names sorted), then the stratified overall interval."""
    names = sorted(b for b, s in scores_by_benchmark.items() if len(s))
    arrays = {b: np.asarray(scores_by_benchmark[b], dtype=np.float64) for b in names}
    if not names or samples < 1:
        return {b: [NAN, NAN] for b in names}, [NAN, NAN]
    per_benchmark: dict[str, list[float]] = {}
    sizes = [arrays[b].size for b in names]
    # Both stages draw samples * n picks per benchmark.
    expected = int(2.04 * samples * sum(1 << n.bit_length() for n in sizes))
    with WordStream(seed, expected) as stream:
        for b in names:
            n = arrays[b].size
            resampled = [
                sequential_means(arrays[b], stream.picks(n, rows * n).reshape(rows, n))
                for rows in blocks(samples, n)
            ]
            per_benchmark[b] = interval(np.concatenate(resampled))
        [means] = stratified_means([[arrays[b] for b in names]], stream, samples)
    overall = np.array(list(map(math.fsum, means.tolist()))) / len(names)
    return per_benchmark, interval(overall)


def stratified_means(
    score_sets: Sequence[Sequence[np.ndarray]], stream: WordStream, samples: int
) -> list[np.ndarray]:
    """``(samples, strata)`` resample means for the stratified overall interval, for each
    set of strata scores, all resampled with the same picks (the paired comparison
    resamples two runs' scores at once; the summary one run's), in blocks of resamples."""
    parts: list[list[np.ndarray]] = [[] for _ in score_sets]
    for rows in blocks(samples, sum(a.size for a in score_sets[0])):
        for found, part in zip(_stratified_block(score_sets, stream, rows), parts):
            part.append(found)
    return [np.concatenate(part) for part in parts]


def _stratified_block(
    score_sets: Sequence[Sequence[np.ndarray]], stream: WordStream, samples: int
) -> list[np.ndarray]:
    sizes = [a.size for a in score_sets[0]]
    if len(set(sizes)) > 1:
        picks = stream.stratified(sizes, samples)
        if len(score_sets) == 2:
            pairs = [paired_means(a, b, p) for a, b, p in zip(*score_sets, picks)]
            return [np.column_stack([pair[s] for pair in pairs]) for s in (0, 1)]
        return [
            np.column_stack([sequential_means(a, p) for a, p in zip(arrays, picks)])
            for arrays in score_sets
        ]
    # Equal strata: every pick has the same rule, so it is one run of picks;
    # offset each stratum's picks into the concatenated scores and sum them all.
    n, strata = sizes[0], len(sizes)
    idx = stream.picks(n, samples * strata * n).reshape(samples, strata, n)
    idx += (np.arange(strata) * n)[None, :, None]
    flat = idx.reshape(samples * strata, n)
    if len(score_sets) == 2:
        a, b = (np.concatenate(arrays) for arrays in score_sets)
        pair = paired_means(a, b, flat)
        return [means.reshape(samples, strata) for means in pair]
    return [
        sequential_means(np.concatenate(arrays), flat).reshape(samples, strata)
        for arrays in score_sets
    ]


def check_samples(samples: int, cases: int) -> None:
    """A bootstrap that fits in memory: ``samples`` resamples of ``cases`` draws each."""
    if samples < 1:
        raise ConfigError(f"--bootstrap-samples must be at least 1, got {samples}")
    if samples * cases > MAX_PICKS:
        raise ConfigError(
            f"--bootstrap-samples {samples} with {cases} cases needs {samples * cases:,} draws;"
            f" at most {MAX_PICKS:,} are drawn here (so {MAX_PICKS // max(cases, 1):,}"
            " samples)"
        )


def summarize(
    rows: Sequence[dict[str, Any]],
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    expected_case_ids: Iterable[str] | None = None,
    dataset_sha256: str | None = None,
) -> Summary:
    """The reference runner's summary dict (same keys, same order, same numbers): its
    exact fields (:func:`.exact.exact_summary`) and the bootstrap's intervals."""
    summary, scores = exact_summary(rows, expected_case_ids, dataset_sha256)
    check_samples(samples, sum(len(s) for s in scores.values()))
    intervals, overall_ci = bootstrap(scores, samples, seed)
    summary["overall_ci95"] = overall_ci
    for name, interval_ in intervals.items():
        summary["benchmarks"][name]["ci95"] = interval_
    summary["bootstrap_samples"], summary["bootstrap_seed"] = samples, seed
    return summary
