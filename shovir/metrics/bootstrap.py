"""Resampling shared by every metric: iid and cluster-aware bootstrap, paired permutation tests.

Every aggregate in the suite is a function of *sums over units* (TP/FP/FN counts for F1, flips
and denominators for flip rates, correct answers for accuracy). The bootstrap therefore never
loops over resamples in Python: units are summed per cluster once, each resample is a vector of
cluster multiplicities, and all resampled sums come from one matrix product
(:func:`resampled_sums`). Resampling whole clusters (patients) keeps the dependence between
trials of one patient, as ModaLens §2 prescribes; with no clusters each unit is its own cluster.

Clusters are numbered in order of first appearance, so results do not depend on how cluster ids
sort.

Draws. Up to :data:`PATTERN_MIN_CLUSTERS` clusters, resample ``b`` draws its clusters as
``rng.integers(0, G, size=(B, G))`` (in chunks that do not change the stream), so a plain loop
over the same generator reproduces every resample. From that size on, when the clusters take
few distinct sum vectors ("patterns": e.g. the 0/1 indicators of a metric), each resample draws
the *number of picks of each pattern* directly, ``rng.multinomial(G, count_k / G)``: exactly
the distribution of the per-pattern counts of ``G`` uniform draws with replacement, at a cost
that no longer grows with ``G``. The permutation test likewise keeps its per-unit signs
``rng.integers(0, 2, size=(B, G))`` below that size and, from it on, draws for each distinct
``|d|`` how many of the units carrying it keep their sign, ``Binomial(m_k, 1/2)``: exactly the
distribution of the sign-flip statistic ``Σ s_i d_i``. Both fast paths change the random stream,
not the distribution; results stay a deterministic function of (data, seed). Confidence intervals are percentile intervals (the ShoViR authors' ``scipy.stats.bootstrap``
``method="percentile"``; Beyond Accuracy §3.6; ModaLens §2).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

__all__ = [
    "Interval",
    "NO_INTERVAL",
    "Statistic",
    "bootstrap_intervals",
    "cluster_sums",
    "resampled_sums",
    "bootstrap_interval",
    "paired_permutation_pvalue",
    "PATTERN_MIN_CLUSTERS",
]

_CHUNK_CELLS = 1 << 17  # resamples per chunk sized so draws and multiplicities stay in cache
PATTERN_MIN_CLUSTERS = 1 << 12
"""From this many clusters on, :func:`resampled_sums` draws per-pattern counts (module docstring)."""
_MAX_PATTERN_FRACTION = 8  # the pattern path needs at most one pattern per 8 clusters


def _check_count(field: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        shown = "NaN" if isinstance(value, float) and value != value else repr(value)
        raise ValueError(f"{field}: expected an integer >= {minimum}, got {type(value).__name__} {shown}")
    if value < minimum:
        raise ValueError(f"{field}: expected an integer >= {minimum}, got {value}")
    return int(value)


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile bootstrap interval."""

    estimate: float
    low: float
    high: float
    confidence: float
    n_resamples: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)

    def estimate_or_none(self) -> float | None:
        """The estimate, or ``None`` when it is undefined (NaN: an empty denominator)."""
        return None if math.isnan(self.estimate) else float(self.estimate)

    def bounds(self) -> dict[str, float | None]:
        """``{"low", "high"}`` for a result dict, ``None`` where the bound is undefined (NaN).

        >>> Interval(0.5, 0.4, float("nan"), 0.95, 10).bounds()
        {'low': 0.4, 'high': None}
        """
        return {key: None if math.isnan(value) else float(value) for key, value in (("low", self.low), ("high", self.high))}


NO_INTERVAL: dict[str, None] = {"low": None, "high": None}
"""The ``ci`` entry of a metric computed without resampling, or of an absent condition: the
result keeps the same keys whatever the options."""

Statistic = Callable[[np.ndarray], np.ndarray]
"""A vectorised statistic: (r, m) array of column sums → r values."""


def cluster_sums(values: np.ndarray, clusters: Sequence[object] | np.ndarray | None) -> np.ndarray:
    """Sum the rows of ``values`` (n, m) within each cluster; returns (n_clusters, m).

    >>> cluster_sums(np.array([[1.0], [2.0], [4.0]]), ["a", "b", "a"]).tolist()
    [[5.0], [2.0]]
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if clusters is None:
        return values
    labels = np.asarray(clusters)
    if labels.ndim != 1 or labels.shape[0] != values.shape[0]:
        raise ValueError(f"clusters: expected {values.shape[0]} cluster ids, one per unit, got {labels.shape[0] if labels.ndim else 'a scalar'}")
    inverse, n_clusters = _first_appearance_codes(labels)
    sums = np.empty((n_clusters, values.shape[1]), dtype=np.float64)
    for column in range(values.shape[1]):
        sums[:, column] = np.bincount(inverse, weights=values[:, column], minlength=n_clusters)
    return sums


def _first_appearance_codes(labels: np.ndarray) -> tuple[np.ndarray, int]:
    """Cluster number of each unit, clusters numbered in order of first appearance."""
    n = labels.shape[0]
    if labels.dtype.kind in "iu" and n and labels.min() >= 0 and labels.max() < 4 * n + 1024:
        # small non-negative integer ids: first rows without sorting the units
        first = np.full(int(labels.max()) + 1, n, dtype=np.int64)
        np.minimum.at(first, labels, np.arange(n))
        present = np.flatnonzero(first < n)
        rank = np.empty(first.size, dtype=np.int64)
        rank[present[np.argsort(first[present], kind="stable")]] = np.arange(present.size)
        return rank[labels], int(present.size)
    _, first_index, inverse = np.unique(labels, return_index=True, return_inverse=True)
    # order clusters by first appearance so results do not depend on how ids sort
    order = np.argsort(np.argsort(first_index))
    return order[inverse.ravel()], int(first_index.size)


def _patterns(per_cluster: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Distinct rows of ``per_cluster`` and how many clusters carry each, or None when they are
    too many for the pattern path to pay (more than one per ``_MAX_PATTERN_FRACTION`` clusters)."""
    n = per_cluster.shape[0]
    limit = n // _MAX_PATTERN_FRACTION
    integral = bool(np.all(per_cluster == np.rint(per_cluster))) and per_cluster.min(initial=0) >= 0
    if integral:
        spans = per_cluster.max(axis=0).astype(np.int64) + 1
        if float(np.prod(spans.astype(np.float64))) <= 1 << 24:
            radix = np.concatenate([[1], np.cumprod(spans[:-1])]).astype(np.int64)
            counts = np.bincount(per_cluster.astype(np.int64) @ radix, minlength=int(np.prod(spans)))
            keys = np.flatnonzero(counts)
            if keys.size > limit:
                return None
            return (keys[:, None] // radix[None, :] % spans[None, :]).astype(np.float64), counts[keys]
    patterns, counts = np.unique(per_cluster, axis=0, return_counts=True)
    return (patterns, counts) if patterns.shape[0] <= limit else None


def resampled_sums(
    values: np.ndarray,
    clusters: Sequence[object] | np.ndarray | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """Column sums of ``values`` (n, m) under ``n_resamples`` bootstrap resamples of the units
    (or of the clusters, when given); returns (n_resamples, m).

    >>> sums = resampled_sums(np.ones((10, 1)), n_resamples=5)
    >>> sums.ravel().tolist()
    [10.0, 10.0, 10.0, 10.0, 10.0]
    """
    n_resamples = _check_count("n_resamples", n_resamples, 1)
    seed = _check_count("seed", seed, 0)
    per_cluster = cluster_sums(values, clusters)
    n_clusters = per_cluster.shape[0]
    if n_clusters == 0:
        raise ValueError("values: cannot bootstrap an empty sample")
    rng = np.random.default_rng(seed)
    if n_clusters >= PATTERN_MIN_CLUSTERS:
        found = _patterns(per_cluster)
        if found is not None:
            patterns, counts = found
            out = np.empty((n_resamples, per_cluster.shape[1]), dtype=np.float64)
            chunk = max(1, _CHUNK_CELLS // patterns.shape[0])
            for start in range(0, n_resamples, chunk):
                rows = min(chunk, n_resamples - start)
                picks = rng.multinomial(n_clusters, counts / n_clusters, size=rows)
                out[start : start + rows] = picks.astype(np.float64) @ patterns
            return out
    out = np.empty((n_resamples, per_cluster.shape[1]), dtype=np.float64)
    chunk = max(1, _CHUNK_CELLS // n_clusters)
    offsets = np.arange(chunk, dtype=np.int64)[:, None] * n_clusters
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        draws = rng.integers(0, n_clusters, size=(rows, n_clusters))
        draws += offsets[:rows]
        multiplicity = np.bincount(draws.ravel(), minlength=rows * n_clusters).reshape(rows, n_clusters)
        # float multiplicities: an int @ float product bypasses BLAS and is ~4x slower
        out[start : start + rows] = multiplicity.astype(np.float64) @ per_cluster
    return out


def bootstrap_intervals(
    statistics: Mapping[str, Statistic],
    values: np.ndarray,
    clusters: Sequence[object] | np.ndarray | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval]:
    """Percentile intervals of several statistics of the same units, from one set of resampled
    sums (so the intervals share their draws, and the sums are computed once).

    Each statistic is a vectorised function of column sums: it maps an (r, m) array to r values
    (NaN allowed: NaN resamples are ignored; an undefined estimate stays NaN). With
    ``n_resamples=0`` only the estimates are computed.

    >>> units = np.array([[1, 1], [0, 1], [1, 1], [0, 0]], dtype=float)   # (flipped, eligible)
    >>> out = bootstrap_intervals({"rate": lambda s: s[:, 0] / s[:, 1]}, units, clusters=[1, 1, 2, 3], n_resamples=2000)
    >>> round(out["rate"].estimate, 4), 0 <= out["rate"].low <= out["rate"].estimate <= out["rate"].high <= 1
    (0.6667, True)
    """
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)) or not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), e.g. 0.95, got {confidence!r}")
    n_resamples = _check_count("n_resamples", n_resamples, 0)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    totals = values.sum(axis=0, keepdims=True)
    # n_resamples = 0: estimates only, bounds undefined (reported as None by Interval.bounds)
    sums = resampled_sums(values, clusters, n_resamples, seed) if n_resamples > 0 else np.empty((0, values.shape[1]))
    tail = (1 - confidence) / 2 * 100
    results = {}
    for name, statistic in statistics.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            estimate = float(np.asarray(statistic(totals)).ravel()[0])
            samples = np.asarray(statistic(sums), dtype=np.float64).ravel()
        samples = samples[~np.isnan(samples)]
        if samples.size == 0:
            low = high = float("nan")
        else:
            low, high = (float(v) for v in np.percentile(samples, [tail, 100 - tail]))
        results[name] = Interval(estimate, low, high, confidence, n_resamples)
    return results


def bootstrap_interval(
    statistic: Statistic,
    values: np.ndarray,
    clusters: Sequence[object] | np.ndarray | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval of one statistic (see :func:`bootstrap_intervals`).

    Example: a flip rate is ``flips / denominator`` summed over trials, resampled by patient.

    >>> units = np.array([[1, 1], [0, 1], [1, 1], [0, 0]], dtype=float)
    >>> result = bootstrap_interval(lambda s: s[:, 0] / s[:, 1], units, clusters=[1, 1, 2, 3], n_resamples=2000)
    >>> round(result.estimate, 4)
    0.6667
    """
    return bootstrap_intervals({"value": statistic}, values, clusters, n_resamples, confidence, seed)["value"]


def paired_permutation_pvalue(
    differences: np.ndarray,
    clusters: Sequence[object] | np.ndarray | None = None,
    n_permutations: int = 10000,
    seed: int = 0,
) -> float:
    """Two-sided sign-flip permutation test that paired ``differences`` have mean zero
    (Beyond Accuracy §3.6, H0: VRS = 0 / BD = 0).

    Under the null each unit's (or cluster's) difference is equally likely to have either sign.
    The p-value counts the observed statistic among the permutations, ``(1 + k) / (1 + B)``.
    From :data:`PATTERN_MIN_CLUSTERS` units (or clusters) on, when the differences take few
    distinct absolute values ``v_k`` (``m_k`` units each), the statistic of a permutation is drawn as ``Σ_k v_k (2 Binomial(m_k, 1/2) - m_k)``, which has
    exactly the distribution of ``Σ_i s_i d_i`` with independent fair signs; otherwise signs are
    drawn per unit, in chunks of bounded memory.

    >>> paired_permutation_pvalue(np.ones(30), n_permutations=999) <= 0.002
    True
    >>> paired_permutation_pvalue(np.array([1.0, -1.0] * 20), n_permutations=999) == 1.0
    True
    """
    n_permutations = _check_count("n_permutations", n_permutations, 1)
    seed = _check_count("seed", seed, 0)
    per_cluster = cluster_sums(differences, clusters)[:, 0]
    if per_cluster.size == 0:
        raise ValueError("differences: cannot test an empty sample")
    if not np.isfinite(per_cluster).all():
        raise ValueError(f"differences: non-finite value at unit {int(np.flatnonzero(~np.isfinite(per_cluster))[0])}")
    observed = abs(per_cluster.sum())
    tolerance = 1e-12 * max(1.0, float(np.abs(per_cluster).sum()))
    rng = np.random.default_rng(seed)
    magnitudes, counts = np.unique(np.abs(per_cluster[per_cluster != 0]), return_counts=True)
    exceed = 0
    if per_cluster.size >= PATTERN_MIN_CLUSTERS and magnitudes.size * _MAX_PATTERN_FRACTION <= per_cluster.size:
        if magnitudes.size == 0:  # every difference is zero: every permutation ties
            return 1.0
        chunk = max(1, _CHUNK_CELLS // magnitudes.size)
        for start in range(0, n_permutations, chunk):
            rows = min(chunk, n_permutations - start)
            kept = rng.binomial(counts[None, :], 0.5, size=(rows, magnitudes.size))
            statistic = (2 * kept - counts[None, :]).astype(np.float64) @ magnitudes
            exceed += int((np.abs(statistic) >= observed - tolerance).sum())
        return (1 + exceed) / (1 + n_permutations)
    chunk = max(1, _CHUNK_CELLS // per_cluster.size)
    for start in range(0, n_permutations, chunk):
        rows = min(chunk, n_permutations - start)
        signs = (rng.integers(0, 2, size=(rows, per_cluster.size)) * 2 - 1).astype(np.float64)
        exceed += int((np.abs(signs @ per_cluster) >= observed - tolerance).sum())
    return (1 + exceed) / (1 + n_permutations)
