"""ShoViR's clinical and shortcut metrics over 14-code CheXpert label vectors (ShoViR §3.4, §4.3).

All inputs are label *codes* (0 blank, 1 positive, 2 negative, 3 uncertain; :mod:`shovir.labels`),
binarised here with the chosen uncertainty policy, so the same arrays serve every metric.
Reference labels are the labeler run on the reference reports (the F1-CheXbert convention);
the flip rate's ``references`` are the dataset's ground-truth labels — keep the two conventions
explicit (reference code §9, defect 13).

Counting-based metrics are ratios of per-sample sums, so their percentile bootstrap intervals
come from :mod:`shovir.metrics.bootstrap` without a Python loop over resamples; pass
``clusters`` (patient ids) to resample patients instead of samples.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from shovir import labels as L
from shovir.metrics import _checks
from shovir.metrics.bootstrap import NO_INTERVAL, bootstrap_interval, bootstrap_intervals

__all__ = [
    "chexbert_f1",
    "per_target_f1",
    "delta_fn",
    "occlusion_delta",
    "flip_rate",
    "cross_disease_flip_matrix",
    "sensitivity_auc",
]

_TOP5_INDEX = [L.class_index(name) for name in L.TOP5]


def _f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    denominator = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, 2 * tp / np.where(denominator > 0, denominator, 1), 0.0)


def _averages(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, support: np.ndarray) -> dict[str, np.ndarray]:
    """micro/macro/weighted F1 along the last axis (classes), scikit-learn's definitions with
    ``zero_division=0``; works on (k,) or (r, k) count arrays."""
    per_class = _f1_from_counts(tp, fp, fn)
    micro = _f1_from_counts(tp.sum(-1), fp.sum(-1), fn.sum(-1))
    total = support.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        weighted = np.where(total > 0, (per_class * support).sum(-1) / np.where(total > 0, total, 1), 0.0)
    return {"micro": micro, "macro": per_class.mean(-1), "weighted": weighted}


def _interval_dict(interval: Any) -> dict[str, float | None]:
    return dict(NO_INTERVAL) if interval is None else interval.bounds()


def chexbert_f1(
    references: Sequence[Sequence[int]] | np.ndarray,
    predictions: Sequence[Sequence[int]] | np.ndarray,
    uncertain: L.UncertainPolicy = "negative",
    n_resamples: int = 0,
    clusters: Sequence[object] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """F1-CheXbert (ShoViR §3.4): F1 over the 14 classes (F1-14) and over TOP5 (F1-5), micro,
    macro and weighted, with per-class precision, recall, F1 and support.

    Codes are binarised with ``uncertain`` (``"negative"``: only 1 is positive, the authors'
    default ``rrg-``; ``"positive"``: 1 and 3). The numbers equal scikit-learn's
    ``precision_recall_fscore_support`` on the binarised arrays (``zero_division=0``). With
    ``n_resamples > 0``, ``ci`` holds percentile bootstrap intervals of the six aggregates.

    >>> refs = [[0, 1, 0, 0, 1] + [0] * 9, [0, 1] + [0] * 12]
    >>> hyps = [[0, 1, 0, 0, 2] + [0] * 9, [0, 3] + [0] * 12]
    >>> result = chexbert_f1(refs, hyps)
    >>> round(result["f1_14"]["micro"], 4), round(result["f1_5"]["macro"], 4), result["per_class"]["Cardiomegaly"]["support"]
    (0.5, 0.1333, 2)
    """
    ref = _checks.codes("references", references)
    hyp = _checks.codes("predictions", predictions)
    _checks.same_length(references=ref, predictions=hyp, clusters=clusters)
    y_true, y_pred = L.binarize(ref, uncertain).astype(np.float64), L.binarize(hyp, uncertain).astype(np.float64)
    tp, fp, fn = y_true * y_pred, (1 - y_true) * y_pred, y_true * (1 - y_pred)
    counts = {"tp": tp.sum(0), "fp": fp.sum(0), "fn": fn.sum(0), "support": y_true.sum(0)}
    all14 = _averages(counts["tp"], counts["fp"], counts["fn"], counts["support"])
    top5 = _averages(*(counts[k][_TOP5_INDEX] for k in ("tp", "fp", "fn", "support")))
    precision_den = counts["tp"] + counts["fp"]
    recall_den = counts["tp"] + counts["fn"]
    per_class_f1 = _f1_from_counts(counts["tp"], counts["fp"], counts["fn"])
    per_class = {
        name: {
            "precision": float(counts["tp"][i] / precision_den[i]) if precision_den[i] else 0.0,
            "recall": float(counts["tp"][i] / recall_den[i]) if recall_den[i] else 0.0,
            "f1": float(per_class_f1[i]),
            "support": int(counts["support"][i]),
        }
        for i, name in enumerate(L.CLASSES)
    }
    keys = [f"{group}_{average}" for group in ("f1_14", "f1_5") for average in ("micro", "macro", "weighted")]
    ci: dict[str, dict[str, float | None]] = {key: _interval_dict(None) for key in keys}
    if n_resamples > 0:
        k = L.NUM_CLASSES
        stacked = np.concatenate([tp, fp, fn, y_true], axis=1)

        def statistic_for(group: str, average: str):
            index = slice(None) if group == "f1_14" else _TOP5_INDEX

            def statistic(sums: np.ndarray) -> np.ndarray:
                parts = [sums[:, j * k : (j + 1) * k][:, index] for j in range(4)]
                return _averages(*parts)[average]

            return statistic

        statistics = {key: statistic_for(*key.rsplit("_", 1)) for key in keys}
        ci = {key: value.bounds() for key, value in bootstrap_intervals(statistics, stacked, clusters, n_resamples, seed=seed).items()}
    return {
        "f1_14": {name: float(value) for name, value in all14.items()},
        "f1_5": {name: float(value) for name, value in top5.items()},
        "per_class": per_class,
        "uncertain": uncertain,
        "n": int(ref.shape[0]),
        "ci": ci,
    }


def _target_units(
    ref: np.ndarray, arms: Sequence[np.ndarray], targets: Sequence[str], uncertain: L.UncertainPolicy
) -> tuple[list[str], np.ndarray]:
    """Per-sample contributions to each target class's counts, head c scored on samples with
    target c: columns [tp, fp, fn] × k for each arm, then k one-hot sample counts."""
    target_index = np.array([L.class_index(name) for name in targets])
    rows = np.arange(len(targets))
    classes = [name for name in L.CLASSES if name in set(targets)]
    onehot = (target_index[:, None] == np.array([L.class_index(c) for c in classes])[None, :]).astype(np.float64)
    y_true = L.binarize(ref, uncertain)[rows, target_index].astype(np.float64)
    blocks = []
    for arm in arms:
        y_pred = L.binarize(arm, uncertain)[rows, target_index].astype(np.float64)
        blocks += [onehot * (y_true * y_pred)[:, None], onehot * ((1 - y_true) * y_pred)[:, None],
                   onehot * (y_true * (1 - y_pred))[:, None]]
    return classes, np.concatenate(blocks + [onehot], axis=1)


def _mu_f1(sums: np.ndarray, arm: int, k: int, n_arms: int = 1) -> np.ndarray:
    """μ-F1 of one arm from summed :func:`_target_units` columns (one row per resample)."""
    tp, fp, fn = (sums[:, (3 * arm + j) * k : (3 * arm + j + 1) * k] for j in range(3))
    n = sums[:, 3 * n_arms * k : (3 * n_arms + 1) * k]
    return (_f1_from_counts(tp, fp, fn) * n).sum(1) / n.sum(1)


def per_target_f1(
    references: Sequence[Sequence[int]] | np.ndarray,
    predictions: Sequence[Sequence[int]] | np.ndarray,
    target_classes: Sequence[str],
    uncertain: L.UncertainPolicy = "negative",
    n_resamples: int = 0,
    clusters: Sequence[object] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Per-target-class F1 and μ-F1 of the disease-level experiments (ShoViR §3.4, §4.2).

    For each class c, F1 of head c over the samples whose target class is c (the authors'
    ``run_eval_chexbert_class.py``). μ-F1 averages these F1s weighted by the number of samples
    *actually evaluated* per class in this call (the authors hard-coded counts in ``weights.json``
    and reused OCO counts for DOCO, which drops samples; reference code §9, defect 3).

    Because those samples are mostly reference positives, the per-target F1 behaves like a
    recall of class c. ``population_f1`` therefore also gives each class's F1 over *all* samples
    of the condition (head c scored on every row).

    >>> refs = [[0, 1] + [0] * 12, [0, 1] + [0] * 12, [0, 0, 1] + [0] * 11]
    >>> hyps = [[0, 1] + [0] * 12, [0, 2] + [0] * 12, [0, 0, 1] + [0] * 11]
    >>> result = per_target_f1(refs, hyps, ["Cardiomegaly", "Cardiomegaly", "Lung Opacity"])
    >>> round(result["per_class"]["Cardiomegaly"], 4), result["counts"], round(result["mu_f1"], 4)
    (0.6667, {'Cardiomegaly': 2, 'Lung Opacity': 1}, 0.7778)
    """
    ref = _checks.codes("references", references)
    hyp = _checks.codes("predictions", predictions)
    targets = _checks.class_names("target_classes", target_classes)
    _checks.same_length(references=ref, predictions=hyp, target_classes=targets, clusters=clusters)
    y_true, y_pred = L.binarize(ref, uncertain).astype(np.float64), L.binarize(hyp, uncertain).astype(np.float64)
    classes, units = _target_units(ref, [hyp], targets, uncertain)
    k = len(classes)

    def mu_statistic(sums: np.ndarray) -> np.ndarray:
        return _mu_f1(sums, 0, k)

    sums = units.sum(0, keepdims=True)
    tp, fp, fn = (sums[0, j * k : (j + 1) * k] for j in range(3))
    count = sums[0, 3 * k : 4 * k]
    f1 = _f1_from_counts(tp, fp, fn)
    population = _f1_from_counts((y_true * y_pred).sum(0), ((1 - y_true) * y_pred).sum(0), (y_true * (1 - y_pred)).sum(0))
    interval = bootstrap_interval(mu_statistic, units, clusters, n_resamples, seed=seed) if n_resamples > 0 else None
    return {
        "mu_f1": float(mu_statistic(sums)[0]),
        "per_class": {c: float(f1[i]) for i, c in enumerate(classes)},
        "counts": {c: int(count[i]) for i, c in enumerate(classes)},
        "population_f1": {c: float(population[L.class_index(c)]) for c in classes},
        "uncertain": uncertain,
        "n": int(len(targets)),
        "ci": {"mu_f1": _interval_dict(interval)},
    }


def delta_fn(
    references: Sequence[Sequence[int]] | np.ndarray,
    baseline_predictions: Sequence[Sequence[int]] | np.ndarray,
    noise_predictions: Sequence[Sequence[int]] | np.ndarray,
    uncertain: L.UncertainPolicy = "negative",
    n_resamples: int = 0,
    clusters: Sequence[object] | None = None,
    seed: int = 0,
    *,
    sample_ids: Sequence[str] | None = None,
    noise_sample_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """ΔFN = F1(Baseline) − F1(Full Noise Image) (ShoViR §3.4, Table 1), for F1-14 and F1-5
    (micro and macro), on the same samples. Pass ``sample_ids`` (of the baseline rows) and
    ``noise_sample_ids`` to have the alignment of the two conditions checked.

    >>> refs = [[0, 1] + [0] * 12, [0, 0, 1] + [0] * 11]
    >>> out = delta_fn(refs, refs, [[0] * 13 + [1]] * 2)
    >>> out["f1_14_micro"], out["baseline"]["f1_14_micro"], out["full_noise"]["f1_14_micro"]
    (1.0, 1.0, 0.0)
    """
    ref = _checks.codes("references", references)
    base = _checks.codes("baseline_predictions", baseline_predictions)
    noise = _checks.codes("noise_predictions", noise_predictions)
    _checks.same_length(references=ref, baseline_predictions=base, noise_predictions=noise, clusters=clusters, sample_ids=sample_ids)
    _checks.aligned_ids(sample_ids=sample_ids, noise_sample_ids=noise_sample_ids)
    y_true = L.binarize(ref, uncertain).astype(np.float64)
    keys = [f"{g}_{a}" for g in ("f1_14", "f1_5") for a in ("micro", "macro")]
    parts = []
    for predictions in (base, noise):
        y_pred = L.binarize(predictions, uncertain).astype(np.float64)
        parts += [y_true * y_pred, (1 - y_true) * y_pred, y_true * (1 - y_pred)]
    units = np.concatenate(parts + [y_true], axis=1)
    k = L.NUM_CLASSES

    def score(sums: np.ndarray, arm: int, group: str, average: str) -> np.ndarray:
        index = slice(None) if group == "f1_14" else _TOP5_INDEX
        tp, fp, fn = (sums[:, (3 * arm + j) * k : (3 * arm + j + 1) * k][:, index] for j in range(3))
        support = sums[:, 6 * k : 7 * k][:, index]
        return _averages(tp, fp, fn, support)[average]

    totals = units.sum(0, keepdims=True)
    result: dict[str, Any] = {"baseline": {}, "full_noise": {}, "ci": {}, "uncertain": uncertain, "n": int(ref.shape[0])}
    for key in keys:
        group, average = key.rsplit("_", 1)
        before, after = float(score(totals, 0, group, average)[0]), float(score(totals, 1, group, average)[0])
        result[key] = before - after
        result["baseline"][key], result["full_noise"][key] = before, after
    drops = {key: (lambda s, g=key.rsplit("_", 1)[0], a=key.rsplit("_", 1)[1]: score(s, 0, g, a) - score(s, 1, g, a)) for key in keys}
    intervals = bootstrap_intervals(drops, units, clusters, n_resamples, seed=seed) if n_resamples > 0 else {}
    result["ci"] = {key: _interval_dict(intervals.get(key)) for key in keys}
    return result


def occlusion_delta(
    references: Sequence[Sequence[int]] | np.ndarray,
    control_predictions: Sequence[Sequence[int]] | np.ndarray,
    predictions: Sequence[Sequence[int]] | np.ndarray,
    target_classes: Sequence[str],
    uncertain: L.UncertainPolicy = "negative",
    n_resamples: int = 0,
    clusters: Sequence[object] | None = None,
    seed: int = 0,
    *,
    sample_ids: Sequence[str] | None = None,
    control_sample_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Δ_X = μ-F1(RO) − μ-F1(X) (ShoViR §3.4), X = OCO or DOCO at the same p, paired by sample.

    Positive Δ: the structured occlusion hurts more than the random control. Pass ``sample_ids``
    and ``control_sample_ids`` to have the alignment of the two conditions checked.

    >>> refs = [[0, 1] + [0] * 12] * 2
    >>> out = occlusion_delta(refs, refs, [[0, 2] + [0] * 12, [0, 1] + [0] * 12], ["Cardiomegaly"] * 2)
    >>> out["delta"], out["mu_f1_control"], round(out["mu_f1"], 4)
    (0.3333333333333333, 1.0, 0.6667)
    """
    ref = _checks.codes("references", references)
    control = _checks.codes("control_predictions", control_predictions)
    hyp = _checks.codes("predictions", predictions)
    _checks.same_length(references=ref, control_predictions=control, predictions=hyp, target_classes=target_classes,
                        clusters=clusters, sample_ids=sample_ids)
    _checks.aligned_ids(sample_ids=sample_ids, control_sample_ids=control_sample_ids)
    with_control = per_target_f1(ref, control, target_classes, uncertain)
    with_x = per_target_f1(ref, hyp, target_classes, uncertain)
    interval = None
    if n_resamples > 0:
        targets = _checks.class_names("target_classes", target_classes)
        classes, units = _target_units(ref, [control, hyp], targets, uncertain)
        k = len(classes)
        interval = bootstrap_interval(lambda s: _mu_f1(s, 0, k, 2) - _mu_f1(s, 1, k, 2), units, clusters, n_resamples, seed=seed)
    return {
        "delta": with_control["mu_f1"] - with_x["mu_f1"],
        "mu_f1_control": with_control["mu_f1"],
        "mu_f1": with_x["mu_f1"],
        "per_class_delta": {c: with_control["per_class"][c] - with_x["per_class"][c] for c in with_x["per_class"]},
        "uncertain": uncertain,
        "n": int(ref.shape[0]),
        "ci": {"delta": _interval_dict(interval)},
    }


def flip_rate(
    references: Sequence[Sequence[int]] | np.ndarray,
    control_predictions: Sequence[Sequence[int]] | np.ndarray,
    predictions: Sequence[Sequence[int]] | np.ndarray,
    target_classes: Sequence[str] | None = None,
    uncertain: L.UncertainPolicy = "negative",
    n_resamples: int = 0,
    clusters: Sequence[object] | None = None,
    seed: int = 0,
    *,
    sample_ids: Sequence[str] | None = None,
    control_sample_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The flip rate FR^c_X of ShoViR §3.4: among findings that are present (y_ic = 1) and
    detected under the control (ŷ^RO_ic = 1), the share lost under condition X (ŷ^X_ic = 0):

        FR^c_X = |{i : y_ic = 1, ŷ^RO_ic = 1, ŷ^X_ic = 0}| / |{i : y_ic = 1, ŷ^RO_ic = 1}|

    With ``target_classes``, sample i counts for its own target class only (the disease-level
    design); without, every one of the 13 localisable classes of every sample counts. ``pooled``
    sums numerators and denominators over classes. A class with an empty denominator has
    ``None``. ``references`` are ground-truth codes (the dataset's labels). Pass ``sample_ids`` and
    ``control_sample_ids`` to have the alignment of the two conditions checked.

    >>> refs = [[0, 1] + [0] * 12] * 4
    >>> control = [[0, 1] + [0] * 12] * 3 + [[0, 2] + [0] * 12]
    >>> occluded = [[0, 2] + [0] * 12] * 2 + [[0, 1] + [0] * 12] * 2
    >>> out = flip_rate(refs, control, occluded, ["Cardiomegaly"] * 4)
    >>> round(out["flip_rate"], 4), out["per_class"]["Cardiomegaly"], out["denominators"]["Cardiomegaly"]
    (0.6667, 0.6666666666666666, 3)
    """
    ref = _checks.codes("references", references)
    control = _checks.codes("control_predictions", control_predictions)
    hyp = _checks.codes("predictions", predictions)
    _checks.same_length(references=ref, control_predictions=control, predictions=hyp, target_classes=target_classes,
                        clusters=clusters, sample_ids=sample_ids)
    _checks.aligned_ids(sample_ids=sample_ids, control_sample_ids=control_sample_ids)
    y = L.binarize(ref, uncertain).astype(bool)
    y_control = L.binarize(control, uncertain).astype(bool)
    y_x = L.binarize(hyp, uncertain).astype(bool)
    if target_classes is not None:
        targets = _checks.class_names("target_classes", target_classes)
        scope = np.zeros_like(y)
        scope[np.arange(len(targets)), [L.class_index(t) for t in targets]] = True
    else:
        scope = np.zeros_like(y)
        scope[:, : L.NUM_CLASSES - 1] = True  # No Finding is not a localisable finding
    eligible = scope & y & y_control
    flipped = eligible & ~y_x
    numerators, denominators = flipped.sum(0), eligible.sum(0)
    per_class = {
        name: (float(numerators[i] / denominators[i]) if denominators[i] else None)
        for i, name in enumerate(L.CLASSES)
        if scope[:, i].any()
    }
    total = int(denominators.sum())
    pooled = float(numerators.sum() / total) if total else None
    interval = None
    if n_resamples > 0 and total:
        units = np.stack([flipped.sum(1), eligible.sum(1)], axis=1).astype(np.float64)
        interval = bootstrap_interval(lambda s: s[:, 0] / s[:, 1], units, clusters, n_resamples, seed=seed)
    return {
        "flip_rate": pooled,
        "per_class": per_class,
        "flips": {name: int(numerators[L.class_index(name)]) for name in per_class},
        "denominators": {name: int(denominators[L.class_index(name)]) for name in per_class},
        "uncertain": uncertain,
        "n": int(ref.shape[0]),
        "ci": {"flip_rate": _interval_dict(interval)},
    }


def cross_disease_flip_matrix(
    labels: Sequence[Sequence[int]] | np.ndarray,
    baseline_predictions: Sequence[Sequence[int]] | np.ndarray,
    occluded_predictions: Sequence[Sequence[int]] | np.ndarray,
    occluded_classes: Sequence[str],
    uncertain: L.UncertainPolicy = "negative",
) -> dict[str, Any]:
    """The authors' cross-disease flip matrix (``flip_rate_cross_disease.py``, reference code §6.5).

    For each sample whose class A was occluded, and each other class B (not No Finding) with
    ground truth ``labels[B] == 1``: ``rate(A, B) = #(baseline B = 1 and occluded B = 0) /
    #(baseline B = 1)``. The diagonal is not defined (``None``). Rows A and columns B follow
    :data:`shovir.labels.CLASSES` restricted to the classes seen.

    >>> labels = [[0, 1, 1] + [0] * 11]
    >>> base = [[0, 1, 1] + [0] * 11]
    >>> occ = [[0, 2, 2] + [0] * 11]
    >>> out = cross_disease_flip_matrix(labels, base, occ, ["Cardiomegaly"])
    >>> out["rates"]["Cardiomegaly"]["Lung Opacity"], out["rates"]["Cardiomegaly"]["Cardiomegaly"]
    (1.0, None)
    """
    truth = _checks.codes("labels", labels)
    base = _checks.codes("baseline_predictions", baseline_predictions)
    occluded = _checks.codes("occluded_predictions", occluded_predictions)
    occluded_names = _checks.class_names("occluded_classes", occluded_classes)
    _checks.same_length(labels=truth, baseline_predictions=base, occluded_predictions=occluded, occluded_classes=occluded_names)
    positive = truth == L.POSITIVE  # ground truth: 3 (uncertain) does not count, as in the authors' code
    before = L.binarize(base, uncertain).astype(bool)
    after = L.binarize(occluded, uncertain).astype(bool)
    rows = [name for name in L.CLASSES if name in set(occluded_names)]
    columns = list(L.LOCALIZABLE)
    occluded_index = np.array([L.class_index(name) for name in occluded_names])
    rates: dict[str, dict[str, float | None]] = {}
    counts: dict[str, dict[str, int]] = {}
    for a in rows:
        selected = occluded_index == L.class_index(a)
        rates[a], counts[a] = {}, {}
        for b in columns:
            j = L.class_index(b)
            if b == a:
                rates[a][b], counts[a][b] = None, 0
                continue
            eligible = selected & positive[:, j] & before[:, j]
            flips = eligible & ~after[:, j]
            denominator = int(eligible.sum())
            rates[a][b] = float(flips.sum() / denominator) if denominator else None
            counts[a][b] = denominator
    return {"rates": rates, "denominators": counts, "uncertain": uncertain}


def sensitivity_auc(p_values: Sequence[float], f1_values: Sequence[float]) -> dict[str, float]:
    """S_AUC, the area under the relative-drop curve (the authors' ``sensitivity_score.py``,
    reference code §6.5): ``S_AUC = ∫₀¹ (F(0) − F(p)) / F(0) dp`` by the trapezoid rule over the
    strengths given (p in [0, 1]; the authors wrote ``(1/100)·trapz`` over p in percent, the same
    number), and ``S_100 = (F(0) − F(1)) / F(0)``. ΔS_AUC is ``S_AUC(X) − S_AUC(RO)``.

    >>> sensitivity_auc([0, 0.5, 1.0], [0.8, 0.6, 0.4])
    {'s_auc': 0.25, 's_100': 0.5}
    """
    p = _checks.finite_floats("p_values", p_values)
    f = _checks.finite_floats("f1_values", f1_values)
    _checks.same_length(p_values=p, f1_values=f)
    order = np.argsort(p)
    p, f = p[order], f[order]
    if p[0] != 0:
        raise ValueError("p_values: the curve must start at p = 0 (the unoccluded baseline)")
    if p[-1] > 1 or p.min() < 0:
        raise ValueError("p_values: strengths must lie in [0, 1] (divide percentages by 100)")
    if f[0] == 0:
        raise ValueError("f1_values: F(0) is 0, the relative drop is undefined")
    drop = (f[0] - f) / f[0]
    area = float(np.sum((drop[1:] + drop[:-1]) / 2 * np.diff(p)))
    s_100 = float(drop[-1]) if p[-1] == 1 else float("nan")
    return {"s_auc": round(area, 12), "s_100": round(s_100, 12)}
