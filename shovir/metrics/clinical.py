"""ShoViR's clinical and shortcut metrics over 14-code CheXpert label vectors (ShoViR §3.4, §4.3).

All inputs are label *codes* (0 blank, 1 positive, 2 negative, 3 uncertain; :mod:`shovir.labels`),
binarised here with the chosen uncertainty policy, so the same arrays serve every metric.
Reference labels are the labeler run on the reference reports (the F1-CheXbert convention);
the flip rate's ``references`` are the dataset's ground-truth labels — keep the two conventions
explicit (reference code §9, defect 13).

**Text in.** ``chexbert_f1``, ``per_target_f1``, ``delta_fn``, ``occlusion_delta`` and
``flip_rate`` also take report texts (lists of str) for any code argument; they are labelled by
``labeler=`` (a :data:`shovir.labelers.LABELERS` name or an object with the labeler interface;
default the offline rule-based labeler), so ``chexbert_f1(["No effusion."], ["Small left
effusion."])`` is the RadEval-style call. A list mixing texts and code vectors, or ``labeler=``
with only codes, raises a ``ValueError`` that says which form to use.

Every argument is checked before numpy sees it (:mod:`shovir.metrics._checks`): ``ValueError``
naming the argument, the row and the fix.

Counting-based metrics are ratios of per-sample sums, so their percentile bootstrap intervals
come from :mod:`shovir.metrics.bootstrap` without a Python loop over resamples; pass
``clusters`` (patient ids) to resample patients instead of samples.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Mapping, Sequence

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


def _label_inputs(labeler: Any, **fields: Any) -> list[np.ndarray]:
    """Each code argument as (n, 14) int8 codes (texts labelled by ``labeler``), in order."""
    out, any_text = [], False
    for field, values in fields.items():
        array, from_text = _checks.codes_or_texts(field, values, labeler)
        any_text |= from_text
        out.append(array)
    _checks.no_text_with_labeler(labeler, any_text)
    return out


def _settings(uncertain: Any, n_resamples: Any, seed: Any) -> tuple[str, int, int]:
    return _checks.uncertain(uncertain), _checks.n_resamples(n_resamples), _checks.seed(seed)


def chexbert_f1(
    references: Sequence[Sequence[int]] | np.ndarray,
    predictions: Sequence[Sequence[int]] | np.ndarray,
    uncertain: L.UncertainPolicy = "negative",
    n_resamples: int = 0,
    clusters: Sequence[object] | None = None,
    seed: int = 0,
    *,
    labeler: Any = None,
) -> dict[str, Any]:
    """F1-CheXbert (ShoViR §3.4): F1 over the 14 classes (F1-14) and over TOP5 (F1-5), micro,
    macro and weighted, with per-class precision, recall, F1 and support.

    Codes are binarised with ``uncertain`` (``"negative"``: only 1 is positive, the authors'
    default ``rrg-``; ``"positive"``: 1 and 3). The numbers equal scikit-learn's
    ``precision_recall_fscore_support`` on the binarised arrays (``zero_division=0``). With
    ``n_resamples > 0``, ``ci`` holds percentile bootstrap intervals of the six aggregates.
    ``references`` / ``predictions`` may be report texts, labelled by ``labeler`` (module docstring).

    >>> refs = [[0, 1, 0, 0, 1] + [0] * 9, [0, 1] + [0] * 12]
    >>> hyps = [[0, 1, 0, 0, 2] + [0] * 9, [0, 3] + [0] * 12]
    >>> result = chexbert_f1(refs, hyps)
    >>> round(result["f1_14"]["micro"], 4), round(result["f1_5"]["macro"], 4), result["per_class"]["Cardiomegaly"]["support"]
    (0.5, 0.1333, 2)

    Report texts, as RadEval takes them (rule-based labeler by default):

    >>> chexbert_f1(["No effusion."], ["Small left effusion."])["per_class"]["Pleural Effusion"]
    {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'support': 0}
    """
    uncertain, n_resamples, seed = _settings(uncertain, n_resamples, seed)
    ref, hyp = _label_inputs(labeler, references=references, predictions=predictions)
    _checks.same_length(references=ref, predictions=hyp, clusters=clusters)
    clusters = _checks.cluster_ids(clusters, len(ref))
    y_true, y_pred = L.binarize(ref, uncertain).astype(bool), L.binarize(hyp, uncertain).astype(bool)
    parts = {"tp": y_true & y_pred, "fp": ~y_true & y_pred, "fn": y_true & ~y_pred, "support": y_true}
    counts = {key: part.sum(0).astype(np.float64) for key, part in parts.items()}  # exact integer counts
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
        stacked = np.concatenate([parts[key].astype(np.float64) for key in ("tp", "fp", "fn", "support")], axis=1)

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


def _columns(names: Sequence[str]) -> np.ndarray:
    """The label-vector column of each canonical class name (one look-up per distinct name)."""
    column = {name: L.class_index(name) for name in set(names)}
    return np.fromiter((column[name] for name in names), dtype=np.intp, count=len(names))


def _at_target(binary: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Each sample's binarised code at its own target class, as bool."""
    return binary[np.arange(len(columns)), columns].astype(bool)


def _target_classes_seen(columns: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The target classes present, in :data:`shovir.labels.CLASSES` order, and their columns."""
    seen = np.flatnonzero(np.bincount(columns, minlength=L.NUM_CLASSES))
    return [L.CLASSES[i] for i in seen], seen


def _target_units(y_true: np.ndarray, arms: Sequence[np.ndarray], columns: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Per-sample contributions to each target class's counts, head c scored on samples with
    target c: columns [tp, fp, fn] × k for each arm, then k one-hot sample counts. ``y_true``
    and ``arms`` are binarised (n, 14) arrays; ``columns`` each sample's target column."""
    classes, seen = _target_classes_seen(columns)
    onehot = (columns[:, None] == seen[None, :]).astype(np.float64)
    truth = _at_target(y_true, columns).astype(np.float64)
    blocks = []
    for arm in arms:
        predicted = _at_target(arm, columns).astype(np.float64)
        blocks += [onehot * (truth * predicted)[:, None], onehot * ((1 - truth) * predicted)[:, None],
                   onehot * (truth * (1 - predicted))[:, None]]
    return classes, np.concatenate(blocks + [onehot], axis=1)


def _target_counts(y_true: np.ndarray, y_pred: np.ndarray, columns: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The summed :func:`_target_units` of one arm, (1, 4k), counted without the per-sample
    matrix (integer counts, so the sums are exact and equal the matrix's)."""
    classes, seen = _target_classes_seen(columns)
    truth, predicted = _at_target(y_true, columns), _at_target(y_pred, columns)
    parts = [columns[truth & predicted], columns[~truth & predicted], columns[truth & ~predicted], columns]
    sums = np.concatenate([np.bincount(part, minlength=L.NUM_CLASSES)[seen] for part in parts]).astype(np.float64)
    return classes, sums[None, :]


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
    *,
    labeler: Any = None,
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
    uncertain, n_resamples, seed = _settings(uncertain, n_resamples, seed)
    ref, hyp = _label_inputs(labeler, references=references, predictions=predictions)
    targets = _checks.target_classes("target_classes", target_classes)
    _checks.same_length(references=ref, predictions=hyp, target_classes=targets, clusters=clusters)
    clusters = _checks.cluster_ids(clusters, len(ref))
    return _per_target_f1(L.binarize(ref, uncertain), L.binarize(hyp, uncertain), _columns(targets), uncertain,
                          n_resamples, clusters, seed)


def _per_target_f1(
    y_true: np.ndarray, y_pred: np.ndarray, columns: np.ndarray, uncertain: str, n_resamples: int, clusters: Any, seed: int
) -> dict[str, Any]:
    """:func:`per_target_f1` on checked, binarised arrays and target columns."""
    classes, sums = _target_counts(y_true, y_pred, columns)
    k = len(classes)

    def mu_statistic(sums: np.ndarray) -> np.ndarray:
        return _mu_f1(sums, 0, k)

    tp, fp, fn = (sums[0, j * k : (j + 1) * k] for j in range(3))
    count = sums[0, 3 * k : 4 * k]
    f1 = _f1_from_counts(tp, fp, fn)
    truth, predicted = y_true.astype(bool), y_pred.astype(bool)
    population = _f1_from_counts((truth & predicted).sum(0), (~truth & predicted).sum(0), (truth & ~predicted).sum(0))
    interval = None
    if n_resamples > 0:
        interval = bootstrap_interval(mu_statistic, _target_units(y_true, [y_pred], columns)[1], clusters, n_resamples, seed=seed)
    return {
        "mu_f1": float(mu_statistic(sums)[0]),
        "per_class": {c: float(f1[i]) for i, c in enumerate(classes)},
        "counts": {c: int(count[i]) for i, c in enumerate(classes)},
        "population_f1": {c: float(population[L.class_index(c)]) for c in classes},
        "uncertain": uncertain,
        "n": int(len(columns)),
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
    labeler: Any = None,
) -> dict[str, Any]:
    """ΔFN = F1(Baseline) − F1(Full Noise Image) (ShoViR §3.4, Table 1), for F1-14 and F1-5
    (micro and macro), on the same samples. Pass ``sample_ids`` (of the baseline rows) and
    ``noise_sample_ids`` to have the alignment of the two conditions checked.

    >>> refs = [[0, 1] + [0] * 12, [0, 0, 1] + [0] * 11]
    >>> out = delta_fn(refs, refs, [[0] * 13 + [1]] * 2)
    >>> out["f1_14_micro"], out["baseline"]["f1_14_micro"], out["full_noise"]["f1_14_micro"]
    (1.0, 1.0, 0.0)
    """
    uncertain, n_resamples, seed = _settings(uncertain, n_resamples, seed)
    ref, base, noise = _label_inputs(labeler, references=references, baseline_predictions=baseline_predictions,
                                     noise_predictions=noise_predictions)
    _checks.same_length(references=ref, baseline_predictions=base, noise_predictions=noise, clusters=clusters,
                        sample_ids=sample_ids, noise_sample_ids=noise_sample_ids)
    _checks.aligned_ids(sample_ids=sample_ids, noise_sample_ids=noise_sample_ids)
    clusters = _checks.cluster_ids(clusters, len(ref))
    y_true = L.binarize(ref, uncertain).astype(bool)
    keys = [f"{g}_{a}" for g in ("f1_14", "f1_5") for a in ("micro", "macro")]
    arms = [L.binarize(predictions, uncertain).astype(bool) for predictions in (base, noise)]
    parts = [part for y_pred in arms for part in (y_true & y_pred, ~y_true & y_pred, y_true & ~y_pred)] + [y_true]
    totals = np.concatenate([part.sum(0) for part in parts]).astype(np.float64)[None, :]  # exact integer counts
    k = L.NUM_CLASSES

    def score(sums: np.ndarray, arm: int, group: str, average: str) -> np.ndarray:
        index = slice(None) if group == "f1_14" else _TOP5_INDEX
        tp, fp, fn = (sums[:, (3 * arm + j) * k : (3 * arm + j + 1) * k][:, index] for j in range(3))
        support = sums[:, 6 * k : 7 * k][:, index]
        return _averages(tp, fp, fn, support)[average]

    result: dict[str, Any] = {"baseline": {}, "full_noise": {}, "ci": {}, "uncertain": uncertain, "n": int(ref.shape[0])}
    for key in keys:
        group, average = key.rsplit("_", 1)
        before, after = float(score(totals, 0, group, average)[0]), float(score(totals, 1, group, average)[0])
        result[key] = before - after
        result["baseline"][key], result["full_noise"][key] = before, after
    drops = {key: (lambda s, g=key.rsplit("_", 1)[0], a=key.rsplit("_", 1)[1]: score(s, 0, g, a) - score(s, 1, g, a)) for key in keys}
    intervals = {}
    if n_resamples > 0:  # per-sample units only for resampling: 7 x 14 float columns per sample
        units = np.concatenate([part.astype(np.float64) for part in parts], axis=1)
        intervals = bootstrap_intervals(drops, units, clusters, n_resamples, seed=seed)
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
    labeler: Any = None,
) -> dict[str, Any]:
    """Δ_X = μ-F1(RO) − μ-F1(X) (ShoViR §3.4), X = OCO or DOCO at the same p, paired by sample.

    Positive Δ: the structured occlusion hurts more than the random control. Pass ``sample_ids``
    and ``control_sample_ids`` to have the alignment of the two conditions checked.

    >>> refs = [[0, 1] + [0] * 12] * 2
    >>> out = occlusion_delta(refs, refs, [[0, 2] + [0] * 12, [0, 1] + [0] * 12], ["Cardiomegaly"] * 2)
    >>> out["delta"], out["mu_f1_control"], round(out["mu_f1"], 4)
    (0.3333333333333333, 1.0, 0.6667)
    """
    uncertain, n_resamples, seed = _settings(uncertain, n_resamples, seed)
    ref, control, hyp = _label_inputs(labeler, references=references, control_predictions=control_predictions,
                                      predictions=predictions)
    targets = _checks.target_classes("target_classes", target_classes)
    _checks.same_length(references=ref, control_predictions=control, predictions=hyp, target_classes=targets,
                        clusters=clusters, sample_ids=sample_ids, control_sample_ids=control_sample_ids)
    _checks.aligned_ids(sample_ids=sample_ids, control_sample_ids=control_sample_ids)
    clusters = _checks.cluster_ids(clusters, len(ref))
    columns = _columns(targets)
    y_true, y_control, y_x = (L.binarize(codes, uncertain) for codes in (ref, control, hyp))
    with_control = _per_target_f1(y_true, y_control, columns, uncertain, 0, None, seed)
    with_x = _per_target_f1(y_true, y_x, columns, uncertain, 0, None, seed)
    interval = None
    if n_resamples > 0:
        classes, units = _target_units(y_true, [y_control, y_x], columns)
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
    labeler: Any = None,
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
    uncertain, n_resamples, seed = _settings(uncertain, n_resamples, seed)
    ref, control, hyp = _label_inputs(labeler, references=references, control_predictions=control_predictions,
                                      predictions=predictions)
    _checks.same_length(references=ref, control_predictions=control, predictions=hyp, target_classes=target_classes,
                        clusters=clusters, sample_ids=sample_ids, control_sample_ids=control_sample_ids)
    _checks.aligned_ids(sample_ids=sample_ids, control_sample_ids=control_sample_ids)
    clusters = _checks.cluster_ids(clusters, len(ref))
    y = L.binarize(ref, uncertain).astype(bool)
    y_control = L.binarize(control, uncertain).astype(bool)
    y_x = L.binarize(hyp, uncertain).astype(bool)
    if target_classes is not None:
        targets = _checks.target_classes("target_classes", target_classes, len(ref))
        scope = np.zeros_like(y)
        scope[np.arange(len(targets)), _columns(targets)] = True
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
    occluded_names = _checks.target_classes("occluded_classes", occluded_classes)
    uncertain = _checks.uncertain(uncertain)
    _checks.same_length(labels=truth, baseline_predictions=base, occluded_predictions=occluded, occluded_classes=occluded_names)
    positive = truth == L.POSITIVE  # ground truth: 3 (uncertain) does not count, as in the authors' code
    before = L.binarize(base, uncertain).astype(bool)
    after = L.binarize(occluded, uncertain).astype(bool)
    rows = [name for name in L.CLASSES if name in set(occluded_names)]
    columns = list(L.LOCALIZABLE)
    occluded_index = _columns(occluded_names)
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


SAUC_FORMS: tuple[str, ...] = ("mu_f1", "class_mean")
"""The two curves S_AUC is computed on (:func:`sensitivity_auc`)."""
__all__.append("SAUC_FORMS")


def _relative_drop_area(p: np.ndarray, f: np.ndarray, field: str) -> tuple[float, float]:
    """``(S_AUC, S_100)`` of one curve sorted by p."""
    if f[0] == 0:
        raise ValueError(f"{field}: F(0) is 0, the relative drop is undefined")
    drop = (f[0] - f) / f[0]
    area = float(np.sum((drop[1:] + drop[:-1]) / 2 * np.diff(p)))
    s_100 = float(drop[-1]) if p[-1] == 1 else float("nan")
    return round(area, 12), round(s_100, 12)


def _class_curves(per_class_f1: Sequence[Mapping[str, float | None]], class_counts: Sequence[Mapping[str, int]] | None,
                  n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The class-mean curve and (with counts) the μ-F1 curve from per-class F1s at each p."""
    rows = _checks.sequence("per_class_f1", per_class_f1, "one {class: F1} mapping per strength")
    if len(rows) != n:
        raise ValueError(f"per_class_f1: expected {n} mappings, one per strength in p_values, got {len(rows)}")
    counts = None
    if class_counts is not None:
        counts = _checks.sequence("class_counts", class_counts, "one {class: count} mapping per strength")
        if len(counts) != n:
            raise ValueError(f"class_counts: expected {n} mappings, one per strength in p_values, got {len(counts)}")
    mean, mu = np.empty(n), np.empty(n)
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(f"per_class_f1: row {index} must map class names to F1 (per_target_f1's 'per_class'), "
                             f"got {type(row).__name__}")
        values = {}
        for name, value in row.items():
            canonical = _checks.class_names(f"per_class_f1[{index}]", [name])[0]
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue  # a class without samples at this strength: left out, as nanmean does
            if isinstance(value, bool) or not isinstance(value, Real) or not 0 <= value <= 1:
                raise ValueError(f"per_class_f1: row {index}, class {name!r}: expected an F1 in [0, 1], got {value!r}")
            values[canonical] = float(value)
        if not values:
            raise ValueError(f"per_class_f1: row {index} has no class with an F1; every strength needs at least one")
        mean[index] = float(np.mean(list(values.values())))
        if counts is not None:
            weights = counts[index]
            if not isinstance(weights, Mapping):
                raise ValueError(f"class_counts: row {index} must map class names to counts (per_target_f1's 'counts')")
            weights = {_checks.class_names(f"class_counts[{index}]", [k])[0]: v for k, v in weights.items()}
            missing = [name for name in values if name not in weights]
            if missing:
                raise ValueError(f"class_counts: row {index} lacks a count for {missing[0]!r}, which has an F1")
            w = np.array([_checks.positive_int(weights[name], f"class_counts[{index}][{name!r}]", 0) for name in values],
                         dtype=np.float64)
            if w.sum() == 0:
                raise ValueError(f"class_counts: row {index} sums to 0; μ-F1 needs the evaluated counts")
            mu[index] = float(np.dot(w, list(values.values())) / w.sum())
    return mean, (mu if counts is not None else None)


def sensitivity_auc(
    p_values: Sequence[float],
    f1_values: Sequence[float] | None = None,
    *,
    per_class_f1: Sequence[Mapping[str, float | None]] | None = None,
    class_counts: Sequence[Mapping[str, int]] | None = None,
    form: str = "mu_f1",
) -> dict[str, Any]:
    """S_AUC, the area under the relative-drop curve (the authors' ``sensitivity_score.py``,
    reference code §6.5): ``S_AUC = ∫₀¹ (F(0) − F(p)) / F(0) dp`` by the trapezoid rule over the
    strengths given (p in [0, 1]; the authors wrote ``(1/100)·trapz`` over p in percent, the same
    number), and ``S_100 = (F(0) − F(1)) / F(0)``. ΔS_AUC is ``S_AUC(X) − S_AUC(RO)``.

    Two curves F(p), named by ``form`` (reference code §6.4):

    * ``"mu_f1"`` (default): μ-F1, the per-target F1s weighted by the samples evaluated per
      class, ``Σ_c n_c F1_c / Σ_c n_c`` (ShoViR §3.4, Fig. 2; shovir's μ-F1 everywhere);
    * ``"class_mean"``: the unweighted mean of the per-class F1s present at that p (the
      authors' ``sensitivity_score.py`` and older plots use ``nanmean`` over classes).

    Give either ``f1_values`` -- the curve itself, read as the ``form`` curve -- or
    ``per_class_f1`` (one ``{class: F1}`` mapping per strength, e.g. :func:`per_target_f1`'s
    ``"per_class"``), from which the class-mean curve is computed and, with ``class_counts``
    (its ``"counts"``), the μ-F1 curve. ``s_auc`` / ``s_100`` are those of ``form``, and ``form``
    says which; ``s_auc_mu_f1``, ``s_100_mu_f1``, ``s_auc_class_mean`` and ``s_100_class_mean``
    are always present, ``None`` for a curve that cannot be formed from the inputs.

    >>> out = sensitivity_auc([0, 0.5, 1.0], [0.8, 0.6, 0.4])
    >>> out["s_auc"], out["s_100"], out["form"], out["s_auc_class_mean"]
    (0.25, 0.5, 'mu_f1', None)

    Class A (3 samples) falls from 0.8 to 0.4, class B (1 sample) stays at 0.4: μ-F1 goes 0.7 →
    0.4 (S_AUC = ½·(3/7)), the class mean 0.6 → 0.4 (S_AUC = ½·(1/3)):

    >>> out = sensitivity_auc([0, 1], per_class_f1=[{"Edema": 0.8, "Atelectasis": 0.4}, {"Edema": 0.4, "Atelectasis": 0.4}],
    ...                       class_counts=[{"Edema": 3, "Atelectasis": 1}] * 2, form="class_mean")
    >>> out["s_auc"], out["form"], out["s_auc_mu_f1"], out["s_100_class_mean"]
    (0.166666666667, 'class_mean', 0.214285714286, 0.333333333333)
    """
    if form not in SAUC_FORMS:
        raise ValueError(f"form: expected one of {', '.join(SAUC_FORMS)}, got {form!r}")
    if (f1_values is None) == (per_class_f1 is None):
        raise ValueError("f1_values: give either f1_values (the F(p) curve) or per_class_f1 (per-class F1s per strength), "
                         "exactly one")
    p = _checks.finite_floats("p_values", p_values)
    if p.ndim != 1:
        raise ValueError(f"p_values: expected one strength per point, got shape {p.shape}")
    if len(np.unique(p)) != len(p):
        raise ValueError("p_values: a strength appears twice; give one F value per strength")
    curves: dict[str, np.ndarray | None] = {"mu_f1": None, "class_mean": None}
    if f1_values is not None:
        f = _checks.finite_floats("f1_values", f1_values)
        _checks.same_length(p_values=p, f1_values=f)
        curves[form] = f
    else:
        if class_counts is None and form == "mu_f1":
            raise ValueError("class_counts: form='mu_f1' from per_class_f1 needs the per-class counts (per_target_f1's "
                             "'counts'), or pass form='class_mean'")
        curves["class_mean"], curves["mu_f1"] = _class_curves(per_class_f1, class_counts, len(p))
    order = np.argsort(p)
    p = p[order]
    if p[0] != 0:
        raise ValueError("p_values: the curve must start at p = 0 (the unoccluded baseline)")
    if p[-1] > 1 or p.min() < 0:
        raise ValueError("p_values: strengths must lie in [0, 1] (divide percentages by 100)")
    out: dict[str, Any] = {}
    for name, curve in curves.items():
        area, s_100 = _relative_drop_area(p, curve[order], "f1_values" if f1_values is not None else "per_class_f1") \
            if curve is not None else (None, None)
        out[f"s_auc_{name}"], out[f"s_100_{name}"] = area, s_100
    return {"s_auc": out[f"s_auc_{form}"], "s_100": out[f"s_100_{form}"], "form": form, **out}
