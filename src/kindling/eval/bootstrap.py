"""A paired bootstrap interval for the difference warm minus cold.

Each case is answered twice, cold and warm, so the two rates are compared case by case (paired).
Steps of one session are not independent (one conversation, one task), so the bootstrap resamples
whole sessions with replacement and recomputes the mean difference over the cases drawn; the
interval is the percentile interval of those means.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_RESAMPLES", "Interval", "paired_bootstrap"]

DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    """Cold and warm rates over ``cases``, their difference and its interval at ``level``."""

    cases: int
    clusters: int
    cold: float
    warm: float
    difference: float
    low: float
    high: float
    level: float

    def excludes_zero(self) -> int:
        """Return 1 when the whole interval is above zero, -1 when below, 0 when it holds zero."""
        if self.low > 0:
            return 1
        if self.high < 0:
            return -1
        return 0


def paired_bootstrap(
    cold: Sequence[float],
    warm: Sequence[float],
    clusters: Sequence[object],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> Interval | None:
    """Return the paired, cluster-resampled bootstrap interval of mean(warm) - mean(cold).

    ``cold[i]`` and ``warm[i]`` are one case's two scores and ``clusters[i]`` its session. None
    when there are no cases. Deterministic for a seed. Raises ValueError when the sequences differ
    in length or ``level`` is not in (0, 1).
    """
    if not len(cold) == len(warm) == len(clusters):
        raise ValueError("cold, warm and clusters must have one entry per case")
    if not 0 < level < 1:
        raise ValueError(f"the interval level must be between 0 and 1, not {level}")
    if not cold:
        return None
    numbers: dict[object, int] = {}
    ids = np.fromiter((numbers.setdefault(c, len(numbers)) for c in clusters), dtype=np.int64)
    cold_a = np.asarray(cold, dtype=np.float64)
    warm_a = np.asarray(warm, dtype=np.float64)
    count = len(numbers)
    sums = np.bincount(ids, weights=warm_a - cold_a, minlength=count)
    sizes = np.bincount(ids, minlength=count).astype(np.float64)
    difference = float(sums.sum() / sizes.sum())
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    # In chunks, so a large evaluation never holds resamples x sessions indices at once.
    chunk = max(1, 2_000_000 // max(count, 1))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        drawn = rng.integers(0, count, size=(stop - start, count))
        means[start:stop] = sums[drawn].sum(axis=1) / sizes[drawn].sum(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Interval(
        cases=len(cold_a),
        clusters=count,
        cold=float(cold_a.mean()),
        warm=float(warm_a.mean()),
        difference=difference,
        low=float(low),
        high=float(high),
        level=level,
    )
