"""GREEN (Ostmeier et al., *GREEN: Generative Radiology Report Evaluation and Error Notation*,
2024): the score formula and its summary, from parsed judge counts.

The prompt, the judge and the parser of its response live in :mod:`shovir.icare.green`; this
module only computes, per report,

``GREEN = matched / (matched + Σ_{c ∈ a..f} significant_c)``

(the paper's score: matched findings over matched findings plus the clinically significant errors
of the six categories). Clinically *insignificant* errors never enter the score. Following the
authors, a report with **zero matched findings scores 0**, even when the judge lists no error.
The summary is the authors': the mean, the *population* standard deviation (``ddof=0``) and, per
error category, the share of reports with no significant error of that category; shovir adds a
percentile bootstrap interval of the mean (clustered when ``clusters`` are given).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shovir.metrics.bootstrap import NO_INTERVAL, bootstrap_interval

__all__ = ["GREEN_CATEGORIES", "green_score", "green_summary"]

GREEN_CATEGORIES = (
    "(a) False report of a finding in the candidate",
    "(b) Missing a finding present in the reference",
    "(c) Misidentification of a finding's anatomic location/position",
    "(d) Misassessment of the severity of a finding",
    "(e) Mentioning a comparison that isn't in the reference",
    "(f) Omitting a comparison detailing a change from a prior study",
)
"""The six error categories (a)–(f), in the authors' order and wording."""


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{field}: expected a non-negative integer count, got {value!r}")
    return int(value)


def green_score(matched: int, significant_errors: Sequence[int]) -> float:
    """GREEN of one report: ``matched / (matched + Σ significant errors)``; 0 when nothing matched.

    The authors' golden cases (counts (a)–(f), then matched findings):

    >>> green_score(0, [2, 3, 0, 1, 0, 0]), green_score(1, [2, 1, 2, 0, 0, 0]), green_score(1, [1, 0, 0, 0, 0, 0])
    (0.0, 0.16666666666666666, 0.5)
    >>> green_score(0, [0] * 6), green_score(3, [0] * 6)
    (0.0, 1.0)
    """
    matched = _count(matched, "matched")
    if len(significant_errors) != len(GREEN_CATEGORIES):
        raise ValueError(f"significant_errors: expected 6 counts, one per category (a)-(f), got {len(significant_errors)}")
    errors = sum(_count(v, f"significant_errors[{i}]") for i, v in enumerate(significant_errors))
    if matched == 0:
        return 0.0
    return matched / (matched + errors)


def green_summary(
    matched: Sequence[int],
    significant_errors: Sequence[Sequence[int]],
    *,
    clusters: Sequence[Any] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """The GREEN summary of a set of reports: per-report scores, their mean and population std, and
    the per-category share of reports free of that significant error (the authors' "accuracy").

    Returns ``green`` (the mean), ``std``, ``scores``, ``error_free`` (category letter → share),
    ``ci`` (``{"green": {"low", "high"}}``) and ``n``.

    >>> out = green_summary([0, 1, 1], [[2, 3, 0, 1, 0, 0], [2, 1, 2, 0, 0, 0], [1, 0, 0, 0, 0, 0]], n_resamples=0)
    >>> round(out["green"], 6), round(out["std"], 6), out["error_free"]["a"], round(out["error_free"]["c"], 6), out["n"]
    (0.222222, 0.20787, 0.0, 0.666667, 3)
    """
    n = len(matched)
    if n == 0:
        raise ValueError("matched: cannot summarise an empty set of reports")
    if len(significant_errors) != n:
        raise ValueError(f"significant_errors: expected {n} rows (one per report, like matched), got {len(significant_errors)}")
    scores = []
    rows = []
    for i, (m, errors) in enumerate(zip(matched, significant_errors)):
        if len(errors) != len(GREEN_CATEGORIES):
            raise ValueError(f"significant_errors[{i}]: expected 6 counts (a)-(f), got {len(errors)}")
        scores.append(green_score(_count(m, f"matched[{i}]"), [_count(v, f"significant_errors[{i}][{j}]")
                                                                for j, v in enumerate(errors)]))
        rows.append([int(v) for v in errors])
    values = np.asarray(scores, dtype=np.float64)
    counts = np.asarray(rows, dtype=np.int64)
    units = np.stack([values, np.ones(n)], axis=1)
    interval = bootstrap_interval(lambda s: s[:, 0] / s[:, 1], units, clusters, n_resamples, confidence, seed) \
        if n_resamples else None
    return {
        "green": float(values.mean()),
        "std": float(values.std()),
        "scores": [float(v) for v in values],
        "error_free": {"abcdef"[j]: float(np.mean(counts[:, j] == 0)) for j in range(len(GREEN_CATEGORIES))},
        "ci": {"green": interval.bounds() if interval is not None else dict(NO_INTERVAL)},
        "n": n,
    }
