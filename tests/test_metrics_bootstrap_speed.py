"""The fast paths of shovir.metrics.bootstrap give the same numbers, or the same distribution, as
the plain definitions (no timing here: speed is measured by benchmarks/metrics.py).

* ``cluster_sums`` (bincount per column) equals ``np.add.at``.
* ``resampled_sums`` below :data:`PATTERN_MIN_CLUSTERS` keeps its documented draws
  (``rng.integers(0, G, size=(B, G))``, any chunking); from it on, with few distinct cluster sums,
  it draws per-pattern counts: exactly the multinomial law of the pattern counts, checked by
  moments against the draw path on the same data and by an exact small case.
* ``paired_permutation_pvalue`` from that size on draws Binomial(m_k, 1/2) per distinct |d|: its
  p-value agrees with the exact tail probability and with the sign-matrix path.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from shovir.metrics import bootstrap as B


def test_cluster_sums_equal_add_at_in_order_of_first_appearance():
    rng = np.random.default_rng(0)
    values = rng.random((500, 3))
    labels = rng.choice(np.array(["c", "a", "b", "z", "q"]), 500)
    expected_order = list(dict.fromkeys(labels.tolist()))
    expected = np.zeros((len(expected_order), 3))
    np.add.at(expected, [expected_order.index(v) for v in labels], values)
    np.testing.assert_allclose(B.cluster_sums(values, labels), expected, rtol=1e-12)


def test_draw_path_is_independent_of_chunking(monkeypatch):
    rng = np.random.default_rng(1)
    units = np.stack([rng.integers(0, 2, 300), np.ones(300)], 1).astype(float)
    whole = B.resampled_sums(units, n_resamples=50, seed=4)
    monkeypatch.setattr(B, "_CHUNK_CELLS", 600)  # two resamples per chunk
    np.testing.assert_array_equal(B.resampled_sums(units, n_resamples=50, seed=4), whole)
    draws = np.random.default_rng(4).integers(0, 300, size=(50, 300))
    np.testing.assert_array_equal(whole, np.array([units[row].sum(0) for row in draws]))


def test_patterns_found_by_radix_and_by_unique():
    per_cluster = np.array([[1, 0, 1], [0, 0, 1], [1, 0, 1], [2, 1, 1]] * 8, dtype=float)
    patterns, counts = B._patterns(per_cluster)
    assert counts.sum() == 32
    assert {tuple(p): c for p, c in zip(patterns.tolist(), counts.tolist())} == {(1, 0, 1): 16, (0, 0, 1): 8, (2, 1, 1): 8}
    fractional = per_cluster * 0.5
    patterns, counts = B._patterns(fractional)
    assert sorted(counts.tolist()) == [8, 8, 16] and (patterns * 2 == np.rint(patterns * 2)).all()
    assert B._patterns(np.arange(64, dtype=float)[:, None]) is None  # 64 patterns in 64 clusters: no gain


def test_pattern_path_has_the_law_of_the_draw_path(monkeypatch):
    rng = np.random.default_rng(2)
    n = B.PATTERN_MIN_CLUSTERS
    units = np.stack([rng.random(n) < 0.3, rng.random(n) < 0.6, np.ones(n)], 1).astype(float)
    fast = B.resampled_sums(units, n_resamples=4000, seed=1)
    assert fast.shape == (4000, 3) and (fast[:, 2] == n).all()
    monkeypatch.setattr(B, "PATTERN_MIN_CLUSTERS", 10**12)
    slow = B.resampled_sums(units, n_resamples=4000, seed=1)
    totals = units.sum(0)
    # multinomial means n * p and variances n * p (1 - p) per indicator column
    for column in (0, 1):
        p = totals[column] / n
        for sample in (fast, slow):
            assert sample[:, column].mean() == pytest.approx(n * p, abs=4 * math.sqrt(n * p * (1 - p) / 4000))
            assert sample[:, column].std() == pytest.approx(math.sqrt(n * p * (1 - p)), rel=0.06)
    assert np.corrcoef(fast[:, 0], fast[:, 1])[0, 1] == pytest.approx(np.corrcoef(slow[:, 0], slow[:, 1])[0, 1], abs=0.06)
    # same data, same seed: the same numbers every time
    monkeypatch.undo()
    np.testing.assert_array_equal(B.resampled_sums(units, n_resamples=4000, seed=1), fast)


def test_pattern_path_interval_matches_the_draw_path(monkeypatch):
    rng = np.random.default_rng(3)
    n = 3 * B.PATTERN_MIN_CLUSTERS
    clusters = np.repeat(np.arange(n // 3), 3)
    units = np.stack([rng.random(n) < 0.2, np.ones(n)], 1).astype(float)
    statistic = {"rate": lambda s: s[:, 0] / s[:, 1]}
    with_patterns = B.bootstrap_intervals(statistic, units, clusters, n_resamples=3000, seed=0)["rate"]
    monkeypatch.setattr(B, "PATTERN_MIN_CLUSTERS", 10**12)
    with_draws = B.bootstrap_intervals(statistic, units, clusters, n_resamples=3000, seed=0)["rate"]
    assert with_patterns.estimate == with_draws.estimate
    width = with_draws.high - with_draws.low
    assert with_patterns.low == pytest.approx(with_draws.low, abs=0.08 * width)
    assert with_patterns.high == pytest.approx(with_draws.high, abs=0.08 * width)


def _exact_two_sided(m: int, observed: int) -> float:
    """P(|2 Bin(m, 1/2) - m| >= observed)."""
    return sum(math.comb(m, k) for k in range(m + 1) if abs(2 * k - m) >= observed) / 2**m


def test_binomial_permutation_path_matches_the_exact_tail(monkeypatch):
    rng = np.random.default_rng(4)
    n = B.PATTERN_MIN_CLUSTERS
    d = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.2, 0.61, 0.19])
    m, observed = int((d != 0).sum()), int(abs(d.sum()))
    exact = _exact_two_sided(m, observed)
    fast = B.paired_permutation_pvalue(d, n_permutations=20000, seed=1)
    assert fast == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 20000) + 1e-4)
    monkeypatch.setattr(B, "PATTERN_MIN_CLUSTERS", 10**12)
    slow = B.paired_permutation_pvalue(d, n_permutations=20000, seed=1)
    assert slow == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 20000) + 1e-4)


def test_binomial_permutation_path_with_several_magnitudes_and_clusters():
    rng = np.random.default_rng(5)
    n = 2 * B.PATTERN_MIN_CLUSTERS
    clusters = np.repeat(np.arange(n // 2), 2)
    d = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.25, 0.45, 0.3])
    p = B.paired_permutation_pvalue(d, clusters, n_permutations=4000, seed=2)
    assert 0 < p <= 1 and p == B.paired_permutation_pvalue(d, clusters, n_permutations=4000, seed=2)
    # a clear shift is detected; no shift at all ties every permutation
    assert B.paired_permutation_pvalue(np.abs(d), clusters, n_permutations=999) == 1 / 1000
    assert B.paired_permutation_pvalue(np.zeros(n), n_permutations=999) == 1.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: B.paired_permutation_pvalue(np.ones(3), n_permutations=0), r"n_permutations: expected an integer >= 1, got 0"),
        (lambda: B.paired_permutation_pvalue(np.ones(3), n_permutations=10.0), r"n_permutations: expected an integer"),
        (lambda: B.paired_permutation_pvalue(np.array([1.0, np.nan])), r"differences: non-finite value at unit 1"),
        (lambda: B.resampled_sums(np.ones((3, 1)), n_resamples=2.5), r"n_resamples: expected an integer >= 1"),
        (lambda: B.resampled_sums(np.ones((3, 1)), n_resamples=5, seed="1"), r"seed: expected an integer >= 0"),
        (lambda: B.bootstrap_intervals({}, np.ones((3, 1)), n_resamples=-1), r"n_resamples: expected an integer >= 0, got -1"),
        (lambda: B.cluster_sums(np.ones((3, 1)), ["a", "b"]), r"clusters: expected 3 cluster ids"),
    ],
)
def test_bad_settings_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
