"""Speed of the patient-clustered bootstrap against a per-resample Python loop, same run.

The ModaLens workload (§2): 10,000 bootstrap draws of patients over 50,000 paired trials in 300
clusters; the statistic is the paired difference of two flip rates (without report − with
report). shovir sums each patient's trials once and obtains every resample from one product of
a multiplicity matrix with the cluster sums (:func:`shovir.metrics.bootstrap.resampled_sums`);
the baseline redraws patients, gathers their trials and recomputes the rates in a Python loop,
the straightforward implementation. Both use the same random draws, so their intervals agree.

Usage: ``python benchmarks/metrics.py [--draws 10000] [--trials 50000] [--clusters 300]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from shovir.metrics.bootstrap import bootstrap_interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=50_000)
    parser.add_argument("--clusters", type=int, default=300)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    patients = rng.integers(0, args.clusters, args.trials)
    flips_without = (rng.random(args.trials) < 0.21).astype(float)
    flips_with = (rng.random(args.trials) < 0.05).astype(float)
    units = np.stack([flips_without, flips_with, np.ones(args.trials)], axis=1)

    def paired_difference(sums: np.ndarray) -> np.ndarray:
        return (sums[:, 0] - sums[:, 1]) / sums[:, 2]

    start = time.perf_counter()
    fast = bootstrap_interval(paired_difference, units, clusters=patients, n_resamples=args.draws, seed=1)
    fast_s = time.perf_counter() - start

    start = time.perf_counter()
    _, first, inverse = np.unique(patients, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    members = [np.flatnonzero(order[inverse] == c) for c in range(first.size)]
    draw_rng = np.random.default_rng(1)
    estimates = np.empty(args.draws)
    for b in range(args.draws):
        chosen = draw_rng.integers(0, len(members), size=len(members))
        rows = np.concatenate([members[c] for c in chosen])
        estimates[b] = (flips_without[rows].sum() - flips_with[rows].sum()) / rows.size
    low, high = np.percentile(estimates, [2.5, 97.5])
    loop_s = time.perf_counter() - start

    print(f"{args.draws} patient-clustered draws, {args.trials} paired trials, {args.clusters} clusters")
    print(f"  vectorised : {fast_s * 1000:8.1f} ms   CI [{fast.low:.5f}, {fast.high:.5f}]")
    print(f"  python loop: {loop_s * 1000:8.1f} ms   CI [{low:.5f}, {high:.5f}]")
    print(f"  speed-up   : {loop_s / fast_s:8.1f}x (target >= 20x); intervals agree: {np.allclose([low, high], [fast.low, fast.high])}")


if __name__ == "__main__":
    main()
