"""ModaLens (Cajas Ordóñez et al. 2026): image-swap sensitivity with and without the report.

A *trial* is one question about one case, asked with the case's own image and again with a
substitute image, question (and report, when shown) fixed (§2 "Counterfactual design"). It is
run in two *arms*: ``"with_report"`` and ``"without_report"``. A trial *flips* in an arm when
the answer with the substitute differs from the answer with the original image (answers
compared by :mod:`shovir.metrics.answers`, so "Yes." and "yes" are the same answer).

Input shape: one row per trial × arm, as a runner writes records -- parallel sequences
``original_answers[i]``, ``swapped_answers[i]``, ``arms[i]``, ``trial_ids[i]``,
``patient_ids[i]`` (and optionally ``margins_original[i]`` / ``margins_swapped[i]``, ``options``).
A trial id appears once per arm; rows are joined across arms on it.

=====================================  =====================================================  ===========
key                                    definition                                             ModaLens
=====================================  =====================================================  ===========
``flip_rate_<arm>``                    flipped trials / trials, in that arm                    §2, §4.1
``paired_difference``                  ``flip_rate_without_report - flip_rate_with_report``    §4.1
                                       (same trials in both arms, so the mean of per-trial
                                       differences)
``mean_abs_margin_change_<arm>``       mean over trials of ``|m_swapped - m_original|``        §4.1
``margin_paired_difference``           ``mean_abs_…_without_report - mean_abs_…_with_report``  §4.1, G
``unchanged_margin_moved_<arm>``       share of the arm's label-unchanged trials with         §4.1
                                       ``|Δ margin| > margin_threshold`` (default 0.5)
``share_larger_without_report``        share of trials whose ``|Δ margin|`` is strictly        §4.1, G
                                       larger without the report than with it
=====================================  =====================================================  ===========

``margin`` is the continuous answer score the runner read out (e.g. the logit of "yes" minus
the logit of "no"); the margin keys are ``None`` when margins are not given.

Confidence intervals (§2 "Statistics"): percentile intervals from a patient-clustered bootstrap
(:func:`shovir.metrics.bootstrap.bootstrap_interval`): each draw resamples patients with
replacement and keeps all their trials (both arms, so the pairing is kept), 10,000 draws by
default, every key computed on the same draws.

Choices where the paper is silent: a trial's patient must be the same in both arms (else
``ValueError``); when only one arm is present at all, its rates are computed and every
other-arm and paired key is ``None`` (when both are present they must cover the same trials).
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Callable, Sequence

import numpy as np

from shovir.metrics import _checks
from shovir.metrics.answers import agree_many, check_answers, per_item_options
from shovir.metrics.bootstrap import NO_INTERVAL, bootstrap_intervals

__all__ = ["ARMS", "SWAP_KEYS", "swap_sensitivity"]

ARMS: tuple[str, ...] = ("with_report", "without_report")
"""The two arms of ModaLens: the report shown with the question, or not."""

SWAP_KEYS: tuple[str, ...] = (
    "flip_rate_with_report",
    "flip_rate_without_report",
    "paired_difference",
    "mean_abs_margin_change_with_report",
    "mean_abs_margin_change_without_report",
    "margin_paired_difference",
    "unchanged_margin_moved_with_report",
    "unchanged_margin_moved_without_report",
    "share_larger_without_report",
)
"""The estimate keys of :func:`swap_sensitivity` (also the keys of its ``ci``)."""

# columns of the per-trial unit matrix: four per arm, then a 1 and the paired margin indicator
_FLIP, _ABS, _UNCHANGED, _MOVED = 0, 1, 2, 3
_PER_ARM = 4
_ONE = 2 * _PER_ARM
_LARGER = _ONE + 1


def _margins(values: Sequence[float], field: str, n: int) -> np.ndarray:
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{field}: expected one number per row, got a string")
    items = _checks.sequence(field, values, "one number per row")
    if len(items) != n:
        raise ValueError(f"{field}: expected {n} margins, one per row, got {len(items)}")
    for index, value in enumerate(items):
        if isinstance(value, bool) or not isinstance(value, Real):
            raise ValueError(f"{field}: margin at row {index} must be a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise ValueError(f"{field}: margin at row {index} is {float(value)!r}; margins must be finite")
    return np.asarray(items, dtype=np.float64)



def swap_sensitivity(
    original_answers: Sequence[str],
    swapped_answers: Sequence[str],
    arms: Sequence[str],
    trial_ids: Sequence[object],
    patient_ids: Sequence[object],
    n_resamples: int = 10000,
    seed: int = 0,
    margins_original: Sequence[float] | None = None,
    margins_swapped: Sequence[float] | None = None,
    margin_threshold: float = 0.5,
    options: object = None,
    confidence: float = 0.95,
) -> dict:
    """Image-swap flip rates per arm, their paired difference and the continuous margin
    metrics, with patient-clustered percentile CIs (ModaLens §2, §4.1; definitions, input
    shape and choices in the module docstring).

    Rows are trial × arm; ``arms`` holds ``"with_report"`` / ``"without_report"``. ``options``:
    ``None``, one list shared by all rows (e.g. ``["yes", "no"]``), or one list per row. Raises
    ``ValueError`` naming the field for a length mismatch, empty input, non-string answers, an
    unknown arm, a trial id repeated within an arm, arms that do not cover the same trials, a
    trial whose patient differs between arms, a NaN margin, or only one of the margin arrays.

    Returns the keys :data:`SWAP_KEYS` (float or ``None``), ``ci`` (same keys → ``{"low",
    "high"}``, bounds ``None`` when undefined), ``n_trials``, ``n_patients``, ``n_flips_with_report``,
    ``n_flips_without_report`` (int or ``None``) and ``margin_threshold``.

    >>> rows = dict(
    ...     original_answers=["yes", "yes", "no", "no", "yes", "yes", "no", "no"],
    ...     swapped_answers= ["yes", "Yes.", "no", "no", "no", "yes", "yes", "no"],
    ...     arms=["with_report"] * 4 + ["without_report"] * 4,
    ...     trial_ids=["t1", "t2", "t3", "t4"] * 2, patient_ids=["p1", "p1", "p2", "p3"] * 2)
    >>> out = swap_sensitivity(**rows, n_resamples=500)
    >>> out["flip_rate_with_report"], out["flip_rate_without_report"], out["paired_difference"], out["n_patients"]
    (0.0, 0.5, 0.5, 3)
    >>> out["mean_abs_margin_change_with_report"] is None and out["ci"]["share_larger_without_report"] == {"low": None, "high": None}
    True
    """
    n_resamples, seed, confidence = _checks.resampling(n_resamples, seed, confidence)
    margin_threshold = _checks.nonnegative_number(margin_threshold, "margin_threshold")
    original = check_answers(original_answers, "original_answers")
    n_rows = len(original)
    swapped = check_answers(swapped_answers, "swapped_answers")
    if len(swapped) != n_rows:
        raise ValueError(f"swapped_answers: expected {n_rows} answers, one per row (as original_answers), got {len(swapped)}")
    if isinstance(arms, (str, bytes)):
        raise ValueError("arms: expected one arm name per row, got a single string")
    arm_list = list(arms)
    if len(arm_list) != n_rows:
        raise ValueError(f"arms: expected {n_rows} arm names, one per row, got {len(arm_list)}")
    distinct_arms = _checks.distinct_values(arm_list)  # two arms name 10^6 rows: check each once
    for arm in distinct_arms:
        if arm not in ARMS:
            raise ValueError(f"arms: unknown arm {arm!r} at row {arm_list.index(arm)}; expected one of {', '.join(ARMS)}")
    trials = np.array(_checks.id_list(trial_ids, "trial_ids", n_rows), dtype=object)
    patients = np.array(_checks.id_list(patient_ids, "patient_ids", n_rows), dtype=object)
    if (margins_original is None) != (margins_swapped is None):
        missing = "margins_swapped" if margins_swapped is None else "margins_original"
        raise ValueError(f"{missing}: margins need both margins_original and margins_swapped")
    has_margins = margins_original is not None
    if has_margins:
        delta = np.abs(
            _margins(margins_swapped, "margins_swapped", n_rows) - _margins(margins_original, "margins_original", n_rows)
        )
    else:
        delta = np.zeros(n_rows)
    opts = per_item_options(options, n_rows)
    flipped = ~agree_many(original, swapped, opts, None, ("original_answers", "swapped_answers"))

    # trials in order of first appearance, so cluster order (and thus the draws) follows the input
    _, first_row, trial_of_row = np.unique(trials, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first_row))
    trial_of_row = rank[trial_of_row.ravel()]
    n_trials = first_row.size
    arm_code = {arm: ARMS.index(arm) for arm in distinct_arms}
    arm_codes = np.fromiter(map(arm_code.__getitem__, arm_list), dtype=np.int64, count=n_rows)
    present = [a for a in range(len(ARMS)) if (arm_codes == a).any()]

    row_of = np.full((len(ARMS), n_trials), -1, dtype=np.int64)
    for a in present:
        rows = np.flatnonzero(arm_codes == a)
        counts = np.bincount(trial_of_row[rows], minlength=n_trials)
        if (counts > 1).any():
            trial = int(np.flatnonzero(counts > 1)[0])
            where = rows[trial_of_row[rows] == trial][:2].tolist()
            raise ValueError(
                f"trial_ids: trial {trials[where[0]]!r} appears more than once in arm {ARMS[a]!r} "
                f"(rows {where[0]} and {where[1]}); each trial appears once per arm"
            )
        row_of[a, trial_of_row[rows]] = rows
    if len(present) == 2:
        lacking = [(ARMS[a], np.flatnonzero(row_of[a] < 0)) for a in present]
        if any(missing.size for _, missing in lacking):
            details = "; ".join(
                f"{missing.size} trial(s) missing from arm {arm!r} (e.g. "
                f"{[trials[first_row[np.argsort(rank)][t]] for t in missing[:3]]!r})"
                for arm, missing in lacking
                if missing.size
            )
            raise ValueError(f"trial_ids: the arms do not cover the same trials: {details}")
        mismatch = patients[row_of[0]] != patients[row_of[1]]
        if mismatch.any():
            t = int(np.flatnonzero(mismatch)[0])
            raise ValueError(
                f"patient_ids: trial {trials[row_of[0, t]]!r} has patient {patients[row_of[0, t]]!r} in arm "
                f"'with_report' (row {row_of[0, t]}) but {patients[row_of[1, t]]!r} in 'without_report' (row {row_of[1, t]})"
            )
    clusters = patients[row_of[present[0]]]

    units = np.zeros((n_trials, _LARGER + 1), dtype=np.float64)
    units[:, _ONE] = 1.0
    for a in present:
        rows = row_of[a]
        block = a * _PER_ARM
        units[:, block + _FLIP] = flipped[rows]
        units[:, block + _ABS] = delta[rows]
        units[:, block + _UNCHANGED] = ~flipped[rows]
        units[:, block + _MOVED] = ~flipped[rows] & (delta[rows] > margin_threshold)
    both = len(present) == 2
    if both and has_margins:
        units[:, _LARGER] = delta[row_of[1]] > delta[row_of[0]]

    def ratio(numerator: int, denominator: int) -> Callable[[np.ndarray], np.ndarray]:
        return lambda sums: sums[:, numerator] / sums[:, denominator]

    def difference(first: int, second: int) -> Callable[[np.ndarray], np.ndarray]:
        return lambda sums: (sums[:, first] - sums[:, second]) / sums[:, _ONE]

    w, wo = 0, _PER_ARM
    statistics = {
        "flip_rate_with_report": (0 in present, ratio(w + _FLIP, _ONE)),
        "flip_rate_without_report": (1 in present, ratio(wo + _FLIP, _ONE)),
        "paired_difference": (both, difference(wo + _FLIP, w + _FLIP)),
        "mean_abs_margin_change_with_report": (has_margins and 0 in present, ratio(w + _ABS, _ONE)),
        "mean_abs_margin_change_without_report": (has_margins and 1 in present, ratio(wo + _ABS, _ONE)),
        "margin_paired_difference": (has_margins and both, difference(wo + _ABS, w + _ABS)),
        "unchanged_margin_moved_with_report": (has_margins and 0 in present, ratio(w + _MOVED, w + _UNCHANGED)),
        "unchanged_margin_moved_without_report": (has_margins and 1 in present, ratio(wo + _MOVED, wo + _UNCHANGED)),
        "share_larger_without_report": (has_margins and both, ratio(_LARGER, _ONE)),
    }
    available = {key: statistic for key, (present_here, statistic) in statistics.items() if present_here}
    intervals = bootstrap_intervals(available, units, clusters, n_resamples, confidence, seed)
    out: dict = {key: intervals[key].estimate_or_none() if key in intervals else None for key in SWAP_KEYS}
    ci = {key: intervals[key].bounds() if key in intervals else dict(NO_INTERVAL) for key in SWAP_KEYS}
    out["ci"] = ci
    out["n_trials"] = int(n_trials)
    out["n_patients"] = int(np.unique(clusters).size)
    for a, arm in enumerate(ARMS):
        out[f"n_flips_{arm}"] = int(units[:, a * _PER_ARM + _FLIP].sum()) if a in present else None
    out["margin_threshold"] = float(margin_threshold)
    return out
