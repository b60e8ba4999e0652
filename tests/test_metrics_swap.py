"""ModaLens image-swap metrics (shovir.metrics.swap): golden values from §2/§4.1 by hand, the
patient-clustered bootstrap against a slow loop over patients, and input validation."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from shovir.metrics.swap import SWAP_KEYS, swap_sensitivity

# -- a hand-computed case (one row per trial x arm) ------------------------------------------
#
# trial patient | with report: orig/swap  flip  m_orig  m_swap  |Δ|  | without: orig/swap  flip  m_orig  m_swap  |Δ|
# t1    p1      |   yes / "Yes."          0     2.0     1.8    0.2  |   yes / no          1     2.0    -2.0    4.0
# t2    p1      |   yes / no              1     2.0    -1.0    3.0  |   yes / "No."       1     2.0    -0.5    2.5
# t3    p2      |   no  / no              0    -1.0    -0.2    0.8  |   no  / yes         1    -1.0     1.0    2.0
# t4    p3      |   no  / "no"            0    -3.0    -3.0    0.0  |   no  / no          0    -3.0    -2.4    0.6
#
# flip rate with = 1/4 = 0.25, without = 3/4 = 0.75, paired difference = 0.75 - 0.25 = 0.5
# mean |Δ margin|: with = (0.2 + 3 + 0.8 + 0)/4 = 1.0 ; without = (4 + 2.5 + 2 + 0.6)/4 = 2.275 ; difference 1.275
# label-unchanged trials with |Δ| > 0.5: with = {t1: 0.2, t3: 0.8, t4: 0} → 1/3 ; without = {t4: 0.6} → 1/1
# |Δ| larger without than with: t1 (4 > 0.2), t3 (2 > 0.8), t4 (0.6 > 0); not t2 (2.5 < 3) → 3/4
ROWS = dict(
    original_answers=["yes", "yes", "no", "no", "yes", "yes", "no", "no"],
    swapped_answers=["Yes.", "no", "no", "no", "no", "No.", "yes", "no"],
    arms=["with_report"] * 4 + ["without_report"] * 4,
    trial_ids=["t1", "t2", "t3", "t4"] * 2,
    patient_ids=["p1", "p1", "p2", "p3"] * 2,
    margins_original=[2.0, 2.0, -1.0, -3.0] * 2,
    margins_swapped=[1.8, -1.0, -0.2, -3.0, -2.0, -0.5, 1.0, -2.4],
)
GOLDEN = {
    "flip_rate_with_report": 0.25,
    "flip_rate_without_report": 0.75,
    "paired_difference": 0.5,
    "mean_abs_margin_change_with_report": 1.0,
    "mean_abs_margin_change_without_report": 2.275,
    "margin_paired_difference": 1.275,
    "unchanged_margin_moved_with_report": 1 / 3,
    "unchanged_margin_moved_without_report": 1.0,
    "share_larger_without_report": 0.75,
}


def _plain(value):
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return value is None or type(value) in (float, int, str, bool)


def test_golden_values_by_hand():
    out = swap_sensitivity(**ROWS, n_resamples=500)
    for key, value in GOLDEN.items():
        assert out[key] == pytest.approx(value, abs=1e-12), key
    assert out["n_trials"] == 4 and out["n_patients"] == 3
    assert out["n_flips_with_report"] == 1 and out["n_flips_without_report"] == 3
    assert out["margin_threshold"] == 0.5


def test_stable_keys_plain_types_and_ci_bracketing():
    full = swap_sensitivity(**ROWS, n_resamples=500)
    bare = swap_sensitivity(**{k: v for k, v in ROWS.items() if not k.startswith("margins")}, n_resamples=500)
    expected = [*SWAP_KEYS, "ci", "n_trials", "n_patients", "n_flips_with_report", "n_flips_without_report", "margin_threshold"]
    for out in (full, bare):
        assert list(out) == expected and list(out["ci"]) == list(SWAP_KEYS)
        assert _plain(out)
        json.dumps(out, allow_nan=False)
    for key in SWAP_KEYS:
        assert full["ci"][key]["low"] <= full[key] <= full["ci"][key]["high"], key
    for key in SWAP_KEYS[3:]:
        assert bare[key] is None and bare["ci"][key] == {"low": None, "high": None}
    assert bare["paired_difference"] == full["paired_difference"]


def test_threshold_changes_only_the_moved_shares():
    out = swap_sensitivity(**ROWS, n_resamples=100, margin_threshold=0.7)
    # with: only t3 (0.8) > 0.7 among unchanged → 1/3; without: t4 0.6 is not > 0.7 → 0
    assert out["unchanged_margin_moved_with_report"] == pytest.approx(1 / 3)
    assert out["unchanged_margin_moved_without_report"] == 0.0
    assert out["margin_threshold"] == 0.7


def test_row_order_does_not_change_estimates():
    order = [7, 2, 5, 0, 3, 6, 1, 4]
    shuffled = {k: [v[i] for i in order] for k, v in ROWS.items()}
    a, b = swap_sensitivity(**ROWS, n_resamples=200), swap_sensitivity(**shuffled, n_resamples=200)
    for key in SWAP_KEYS:
        assert a[key] == pytest.approx(b[key], abs=1e-12), key


def test_options_resolve_letters():
    out = swap_sensitivity(["A", "yes"], ["Yes", "(B)"], ["with_report", "without_report"], ["t", "t"], ["p", "p"],
                           options=["yes", "no"], n_resamples=50)
    assert out["flip_rate_with_report"] == 0.0 and out["flip_rate_without_report"] == 1.0


def test_single_arm():
    out = swap_sensitivity(["yes", "no", "yes"], ["no", "no", "yes"], ["without_report"] * 3, ["a", "b", "c"], [1, 1, 2],
                           n_resamples=100)
    assert out["flip_rate_without_report"] == pytest.approx(1 / 3)
    assert out["flip_rate_with_report"] is None and out["paired_difference"] is None
    assert out["ci"]["paired_difference"] == {"low": None, "high": None} and out["n_flips_with_report"] is None


# -- errors -----------------------------------------------------------------------------------


def _rows(**changes):
    rows = dict(ROWS)
    rows.update(changes)
    return rows


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(arms=["with_report"] * 4 + ["without_report"] * 3 + ["no_report"]),
         r"arms: unknown arm 'no_report' at row 7; expected one of with_report, without_report"),
        (dict(trial_ids=["t1", "t2", "t3", "t3", "t1", "t2", "t3", "t4"]),
         r"trial_ids: trial 't3' appears more than once in arm 'with_report' \(rows 2 and 3\)"),
        (dict(trial_ids=["t1", "t2", "t3", "t4", "t1", "t2", "t3", "t5"]),
         r"trial_ids: the arms do not cover the same trials: 1 trial\(s\) missing from arm 'with_report' \(e.g. \['t5'\]\); "
         r"1 trial\(s\) missing from arm 'without_report' \(e.g. \['t4'\]\)"),
        (dict(patient_ids=["p1", "p1", "p2", "p3", "p1", "p1", "p2", "p9"]),
         r"patient_ids: trial 't4' has patient 'p3' in arm 'with_report' \(row 3\) but 'p9'"),
        (dict(swapped_answers=ROWS["swapped_answers"][:7]), r"swapped_answers: expected 8 answers, one per row"),
        (dict(arms=ROWS["arms"][:7]), r"arms: expected 8 arm names"),
        (dict(trial_ids=ROWS["trial_ids"][:7]), r"trial_ids: expected 8 ids"),
        (dict(patient_ids=ROWS["patient_ids"][:7]), r"patient_ids: expected 8 ids"),
        (dict(patient_ids=["p1", None] + ROWS["patient_ids"][2:]),
         r"patient_ids: id at row 1 must be a string or an integer, got None"),
        (dict(original_answers=["yes", math.nan] + ROWS["original_answers"][2:]),
         r"original_answers: expected a string answer at index 1, got NaN"),
        (dict(swapped_answers=[True] + ROWS["swapped_answers"][1:]),
         r"swapped_answers: expected a string answer at index 0, got bool"),
        (dict(margins_swapped=[math.nan] + ROWS["margins_swapped"][1:]), r"margins_swapped: margin at row 0 is nan"),
        (dict(margins_original=["2"] + ROWS["margins_original"][1:]), r"margins_original: margin at row 0 must be a number"),
        (dict(margins_swapped=None), r"margins_swapped: margins need both"),
        (dict(margins_original=ROWS["margins_original"][:7]), r"margins_original: expected 8 margins"),
        (dict(margin_threshold=-1.0), r"margin_threshold: expected a finite number >= 0"),
        (dict(original_answers=[], swapped_answers=[], arms=[], trial_ids=[], patient_ids=[],
              margins_original=None, margins_swapped=None), r"original_answers: empty"),
    ],
)
def test_errors_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        swap_sensitivity(**_rows(**changes), n_resamples=10)


# -- patient-clustered bootstrap --------------------------------------------------------------


def _simulated(n_patients, trials_per_patient, seed, p_with=0.05, p_without=0.2):
    """Rows in patient order; each patient has its own flip propensity (so clustering matters)."""
    rng = np.random.default_rng(seed)
    rows = {k: [] for k in ("original_answers", "swapped_answers", "arms", "trial_ids", "patient_ids",
                             "margins_original", "margins_swapped")}
    for arm, p in (("with_report", p_with), ("without_report", p_without)):
        arm_rng = np.random.default_rng(seed)  # same patient effects in both arms
        effects = arm_rng.beta(1, 3, n_patients) * 2
        for patient in range(n_patients):
            for t in range(trials_per_patient):
                original = "yes" if rng.random() < 0.5 else "no"
                flip = rng.random() < min(1.0, p * effects[patient] * 2)
                swapped = {"yes": "no", "no": "yes"}[original] if flip else original
                rows["original_answers"].append(original)
                rows["swapped_answers"].append(swapped)
                rows["arms"].append(arm)
                rows["trial_ids"].append(f"p{patient}-q{t}")
                rows["patient_ids"].append(f"p{patient}")
                m = rng.normal(0, 2)
                rows["margins_original"].append(m)
                rows["margins_swapped"].append(m + rng.normal(0, 1 if arm == "with_report" else 2))
    return rows


def _slow_cluster_ci(rows, key, n_resamples, seed, threshold=0.5, confidence=0.95):
    """Resample patients one draw at a time (same draws as shovir.metrics.bootstrap: patients in
    order of first appearance, rng.integers(0, G, size=(B, G)) in one chunk) and recompute."""
    trials = list(dict.fromkeys(rows["trial_ids"]))
    per_trial = {t: {} for t in trials}
    patient_of = {}
    for i, t in enumerate(rows["trial_ids"]):
        flip = rows["original_answers"][i] != rows["swapped_answers"][i]
        delta = abs(rows["margins_swapped"][i] - rows["margins_original"][i])
        per_trial[t][rows["arms"][i]] = (flip, delta)
        patient_of[t] = rows["patient_ids"][i]
    patients = list(dict.fromkeys(patient_of[t] for t in trials))
    members = {p: [t for t in trials if patient_of[t] == p] for p in patients}

    def statistic(chosen):
        w = [per_trial[t]["with_report"] for t in chosen]
        wo = [per_trial[t]["without_report"] for t in chosen]
        n = len(chosen)
        unchanged_w = [d for f, d in w if not f]
        unchanged_wo = [d for f, d in wo if not f]

        def moved(unchanged):
            return sum(d > threshold for d in unchanged) / len(unchanged) if unchanged else math.nan

        return {
            "flip_rate_with_report": sum(f for f, _ in w) / n,
            "flip_rate_without_report": sum(f for f, _ in wo) / n,
            "paired_difference": (sum(f for f, _ in wo) - sum(f for f, _ in w)) / n,
            "mean_abs_margin_change_with_report": sum(d for _, d in w) / n,
            "mean_abs_margin_change_without_report": sum(d for _, d in wo) / n,
            "margin_paired_difference": (sum(d for _, d in wo) - sum(d for _, d in w)) / n,
            "unchanged_margin_moved_with_report": moved(unchanged_w),
            "unchanged_margin_moved_without_report": moved(unchanged_wo),
            "share_larger_without_report": sum(b[1] > a[1] for a, b in zip(w, wo)) / n,
        }[key]

    draws = np.random.default_rng(seed).integers(0, len(patients), size=(n_resamples, len(patients)))
    values = [statistic([t for g in row for t in members[patients[g]]]) for row in draws]
    values = [v for v in values if not math.isnan(v)]
    tail = (1 - confidence) / 2 * 100
    return np.percentile(values, [tail, 100 - tail])


def test_cluster_ci_equals_slow_loop_over_patients():
    rows = _simulated(n_patients=12, trials_per_patient=5, seed=1)
    out = swap_sensitivity(**rows, n_resamples=300, seed=4)
    for key in SWAP_KEYS:
        low, high = _slow_cluster_ci(rows, key, 300, 4)
        assert out["ci"][key]["low"] == pytest.approx(low, abs=1e-12), key
        assert out["ci"][key]["high"] == pytest.approx(high, abs=1e-12), key


def test_cluster_bootstrap_resamples_patients():
    # 10 patients x 4 trials; patient p0 holds every flip (4 flips without the report, none with it).
    # Paired difference = 4/40 = 0.1 either way, but resampling patients moves the 4 flips together:
    # a draw without p0 (probability 0.9^10 = 0.35) gives 0, so the clustered CI starts at 0 and is
    # wider than the iid one (every trial its own patient).
    n = 40
    rows = dict(
        original_answers=["no"] * (2 * n),
        swapped_answers=["no"] * n + ["yes"] * 4 + ["no"] * (n - 4),
        arms=["with_report"] * n + ["without_report"] * n,
        trial_ids=[f"t{i}" for i in range(n)] * 2,
    )
    clustered = swap_sensitivity(**rows, patient_ids=[f"p{i // 4}" for i in range(n)] * 2, n_resamples=10000)
    iid = swap_sensitivity(**rows, patient_ids=[f"p{i}" for i in range(n)] * 2, n_resamples=10000)
    assert clustered["paired_difference"] == iid["paired_difference"] == pytest.approx(0.1)
    assert clustered["n_patients"] == 10 and iid["n_patients"] == 40
    width = {name: o["ci"]["paired_difference"]["high"] - o["ci"]["paired_difference"]["low"]
             for name, o in (("clustered", clustered), ("iid", iid))}
    assert width["clustered"] > 1.5 * width["iid"]
    assert clustered["ci"]["paired_difference"]["low"] == 0.0
    assert iid["ci"]["paired_difference"]["low"] > 0.0
    # with clusters every resampled flip count is a multiple of 4, so the bounds are multiples of 4/40
    for bound in clustered["ci"]["paired_difference"].values():
        assert round(bound * n) % 4 == 0


def test_cluster_ci_coverage_is_sane():
    # true paired difference: each trial flips independently given its patient's effect e ~ 2*Beta(1, 3)
    # (mean 0.5), with probability 2*p*e, so E[flip] = 2*p*0.5 = p: 0.2 - 0.05 = 0.15
    hits, reps = 0, 120
    for rep in range(reps):
        rows = _simulated(n_patients=30, trials_per_patient=6, seed=1000 + rep)
        out = swap_sensitivity(**{k: v for k, v in rows.items() if not k.startswith("margins")}, n_resamples=400, seed=rep)
        hits += out["ci"]["paired_difference"]["low"] <= 0.15 <= out["ci"]["paired_difference"]["high"]
    assert 0.85 <= hits / reps <= 0.995, hits / reps


def test_default_10000_draws_on_a_modalens_sized_run_is_fast():
    rows = _simulated(n_patients=293, trials_per_patient=40, seed=5)  # ~11,700 trials, 23,440 rows
    start = time.perf_counter()
    out = swap_sensitivity(**rows)
    assert time.perf_counter() - start < 10
    assert out["n_trials"] == 293 * 40 and out["ci"]["paired_difference"]["low"] < out["paired_difference"]
