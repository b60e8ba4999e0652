"""ShoViR metrics against hand computations, scikit-learn, sacrebleu and rouge-score."""

from __future__ import annotations

import numpy as np
import pytest

from shovir import labels as L
from shovir.metrics.bootstrap import bootstrap_interval, resampled_sums
from shovir.metrics.clinical import (
    chexbert_f1,
    cross_disease_flip_matrix,
    delta_fn,
    flip_rate,
    occlusion_delta,
    per_target_f1,
    sensitivity_auc,
)

sklearn_metrics = pytest.importorskip("sklearn.metrics")


def _codes(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    codes = rng.choice(4, size=(n, 14), p=[0.5, 0.25, 0.15, 0.1])
    codes[:, 13] = rng.integers(0, 2, n)  # the No Finding head is binary
    return codes


def _vector(**codes: int) -> list[int]:
    vector = [0] * 14
    for name, code in codes.items():
        vector[L.class_index(name.replace("_", " "))] = code
    return vector


@pytest.mark.parametrize("uncertain", ["negative", "positive"])
def test_chexbert_f1_equals_scikit_learn(uncertain):
    refs, hyps = _codes(300, 1), _codes(300, 2)
    result = chexbert_f1(refs, hyps, uncertain=uncertain)
    y_true, y_pred = L.binarize(refs, uncertain), L.binarize(hyps, uncertain)
    top5 = [L.class_index(c) for c in L.TOP5]
    for average in ("micro", "macro", "weighted"):
        expected14 = sklearn_metrics.f1_score(y_true, y_pred, average=average, zero_division=0)
        expected5 = sklearn_metrics.f1_score(y_true[:, top5], y_pred[:, top5], average=average, zero_division=0)
        assert result["f1_14"][average] == pytest.approx(expected14, abs=1e-12)
        assert result["f1_5"][average] == pytest.approx(expected5, abs=1e-12)
    p, r, f, s = sklearn_metrics.precision_recall_fscore_support(y_true, y_pred, zero_division=0)
    for i, name in enumerate(L.CLASSES):
        assert result["per_class"][name] == pytest.approx({"precision": p[i], "recall": r[i], "f1": f[i], "support": s[i]})


def test_chexbert_f1_by_hand():
    # Cardiomegaly: TP 1 (row 0), FN 1 (row 1, uncertain counts as negative) -> F1 = 2/3
    # Edema: FN 1 (row 0 negative prediction) -> F1 = 0; every other class has no support -> 0
    refs = [_vector(Cardiomegaly=1, Edema=1), _vector(Cardiomegaly=1)]
    hyps = [_vector(Cardiomegaly=1, Edema=2), _vector(Cardiomegaly=3)]
    result = chexbert_f1(refs, hyps)
    assert result["per_class"]["Cardiomegaly"]["f1"] == pytest.approx(2 / 3)
    assert result["f1_14"]["micro"] == pytest.approx(2 * 1 / (2 * 1 + 0 + 2))  # TP 1, FP 0, FN 2
    assert result["f1_5"]["macro"] == pytest.approx((2 / 3) / 5)
    assert chexbert_f1(refs, hyps, uncertain="positive")["per_class"]["Cardiomegaly"]["f1"] == 1.0


def test_chexbert_f1_bootstrap_interval_brackets_estimate_and_is_seeded():
    refs, hyps = _codes(200, 3), _codes(200, 4)
    a = chexbert_f1(refs, hyps, n_resamples=300, seed=1)
    b = chexbert_f1(refs, hyps, n_resamples=300, seed=1)
    assert a["ci"] == b["ci"]
    for key in ("f1_14_micro", "f1_5_macro"):
        group, average = key.rsplit("_", 1)
        assert a["ci"][key]["low"] <= a[group][average] <= a["ci"][key]["high"]
    assert chexbert_f1(refs, hyps)["ci"]["f1_14_micro"] == {"low": None, "high": None}


def test_per_target_f1_uses_evaluated_counts_and_only_the_target_head():
    refs = [_vector(Cardiomegaly=1, Edema=1)] * 3 + [_vector(Edema=1)] * 2
    hyps = [_vector(Cardiomegaly=1), _vector(Cardiomegaly=1), _vector(Edema=1), _vector(Edema=1), _vector()]
    targets = ["Cardiomegaly"] * 3 + ["Edema"] * 2
    result = per_target_f1(refs, hyps, targets)
    # Cardiomegaly: samples 0-2 on head 1: TP 2, FN 1 -> 0.8 ; Edema: samples 3-4 on head 4: TP 1, FN 1 -> 2/3
    assert result["per_class"] == pytest.approx({"Cardiomegaly": 0.8, "Edema": 2 / 3})
    assert result["counts"] == {"Cardiomegaly": 3, "Edema": 2}
    assert result["mu_f1"] == pytest.approx((3 * 0.8 + 2 * 2 / 3) / 5)
    # the population F1 scores head c on every row: Edema has 5 positives, 2 detected -> 4/7
    assert result["population_f1"]["Edema"] == pytest.approx(2 * 2 / (2 * 2 + 0 + 3))


@pytest.mark.parametrize("uncertain", ["negative", "positive"])
def test_per_target_f1_equals_scikit_learn_per_target_class(uncertain):
    # the definition (ShoViR §3.4): class c's F1 is head c's F1 over the samples whose target is c;
    # mu-F1 weights them by those samples' counts. Target spellings vary as the authors' files do.
    refs, hyps = _codes(3000, 11), _codes(3000, 12)
    rng = np.random.default_rng(13)
    names = [L.CLASSES[i] for i in rng.integers(0, 13, 3000)]
    spelled = [name.replace(" ", "_") if i % 3 == 0 else name.lower() if i % 3 == 1 else name for i, name in enumerate(names)]
    result = per_target_f1(refs, hyps, spelled, uncertain=uncertain)
    y_true, y_pred = L.binarize(refs, uncertain), L.binarize(hyps, uncertain)
    expected, counts = {}, {}
    for name in L.CLASSES:
        rows = [i for i, target in enumerate(names) if target == name]
        if rows:
            column = L.class_index(name)
            expected[name] = sklearn_metrics.f1_score(y_true[rows, column], y_pred[rows, column], zero_division=0)
            counts[name] = len(rows)
    assert result["per_class"] == pytest.approx(expected, abs=1e-12) and result["counts"] == counts
    assert result["mu_f1"] == pytest.approx(sum(expected[c] * counts[c] for c in counts) / 3000, abs=1e-12)
    population = sklearn_metrics.f1_score(y_true, y_pred, average=None, zero_division=0)
    assert result["population_f1"] == pytest.approx({c: population[L.class_index(c)] for c in counts}, abs=1e-12)
    # occlusion_delta is the difference of two such mu-F1s on the same samples
    control = _codes(3000, 14)
    out = occlusion_delta(refs, control, hyps, spelled, uncertain=uncertain)
    assert out["delta"] == pytest.approx(per_target_f1(refs, control, names, uncertain=uncertain)["mu_f1"] - result["mu_f1"], abs=1e-12)


def test_delta_fn_equals_scikit_learn_differences():
    refs, base, noise = _codes(500, 21), _codes(500, 22), _codes(500, 23)
    out = delta_fn(refs, base, noise)
    y_true = L.binarize(refs)
    top5 = [L.class_index(c) for c in L.TOP5]
    for average in ("micro", "macro"):
        before = sklearn_metrics.f1_score(y_true, L.binarize(base), average=average, zero_division=0)
        after = sklearn_metrics.f1_score(y_true, L.binarize(noise), average=average, zero_division=0)
        assert out["f1_14_" + average] == pytest.approx(before - after, abs=1e-12)
        before5 = sklearn_metrics.f1_score(y_true[:, top5], L.binarize(base)[:, top5], average=average, zero_division=0)
        assert out["baseline"]["f1_5_" + average] == pytest.approx(before5, abs=1e-12)


def test_delta_fn_and_occlusion_delta():
    refs = _codes(100, 5)
    noise = np.zeros((100, 14), int)
    result = delta_fn(refs, refs, noise)
    assert result["baseline"]["f1_14_micro"] == 1.0 and result["f1_14_micro"] == 1.0
    targets = ["Cardiomegaly"] * 4
    refs4 = [_vector(Cardiomegaly=1)] * 4
    control = [_vector(Cardiomegaly=1)] * 4
    occluded = [_vector(Cardiomegaly=1)] * 2 + [_vector()] * 2
    out = occlusion_delta(refs4, control, occluded, targets, n_resamples=200)
    assert out["delta"] == pytest.approx(1 - 2 / 3)
    assert out["ci"]["delta"]["low"] <= out["delta"] <= out["ci"]["delta"]["high"]


def test_flip_rate_matches_the_paper_equation():
    # sample: (y, control, X) for Cardiomegaly
    cases = [(1, 1, 0), (1, 1, 0), (1, 1, 1), (1, 0, 0), (0, 1, 0), (1, 3, 0)]
    refs = [_vector(Cardiomegaly=y) for y, _, _ in cases]
    control = [_vector(Cardiomegaly=c) for _, c, _ in cases]
    occluded = [_vector(Cardiomegaly=x) for _, _, x in cases]
    out = flip_rate(refs, control, occluded, ["Cardiomegaly"] * len(cases))
    # eligible: y = 1 and control = 1 -> samples 0, 1, 2 (3 is uncertain: not detected) ; flips: 0, 1
    assert out["flip_rate"] == pytest.approx(2 / 3)
    assert out["denominators"] == {"Cardiomegaly": 3} and out["flips"] == {"Cardiomegaly": 2}
    assert flip_rate(refs, control, occluded, ["Cardiomegaly"] * 6, uncertain="positive")["flip_rate"] == pytest.approx(3 / 4)
    # without target classes every localisable class counts; No Finding never does
    refs2 = [_vector(Cardiomegaly=1, Edema=1, No_Finding=1)]
    pooled = flip_rate(refs2, refs2, [_vector(Edema=1, No_Finding=0)])
    assert pooled["flip_rate"] == 0.5 and "No Finding" not in pooled["per_class"]


def test_flip_rate_cluster_bootstrap_is_wider_when_flips_cluster_in_one_patient():
    n = 200
    refs = control = [_vector(Cardiomegaly=1)] * n
    occluded = [_vector()] * 40 + [_vector(Cardiomegaly=1)] * (n - 40)
    patients = [0] * 40 + [1 + i // 4 for i in range(n - 40)]
    iid = flip_rate(refs, control, occluded, ["Cardiomegaly"] * n, n_resamples=2000)
    clustered = flip_rate(refs, control, occluded, ["Cardiomegaly"] * n, n_resamples=2000, clusters=patients)
    width = lambda r: r["ci"]["flip_rate"]["high"] - r["ci"]["flip_rate"]["low"]  # noqa: E731
    assert iid["flip_rate"] == clustered["flip_rate"] == 0.2
    assert width(clustered) > 3 * width(iid)


def test_bootstrap_matches_a_plain_loop_on_the_same_draws():
    rng = np.random.default_rng(0)
    units = np.stack([rng.integers(0, 2, 50), np.ones(50)], 1).astype(float)
    fast = resampled_sums(units, n_resamples=100, seed=7)
    draws = np.random.default_rng(7).integers(0, 50, size=(100, 50))
    slow = np.array([units[row].sum(0) for row in draws])
    assert np.allclose(fast, slow)
    interval = bootstrap_interval(lambda s: s[:, 0] / s[:, 1], units, n_resamples=100, seed=7)
    ratios = slow[:, 0] / slow[:, 1]
    assert (interval.low, interval.high) == pytest.approx(tuple(np.percentile(ratios, [2.5, 97.5])))


def test_cross_disease_flip_matrix_by_hand():
    labels = [_vector(Cardiomegaly=1, Edema=1, Pleural_Effusion=3)] * 2
    base = [_vector(Cardiomegaly=1, Edema=1, Pleural_Effusion=1)] * 2
    occluded = [_vector(Edema=2, Pleural_Effusion=2), _vector(Edema=1)]
    out = cross_disease_flip_matrix(labels, base, occluded, ["Cardiomegaly"] * 2)
    assert out["rates"]["Cardiomegaly"]["Edema"] == 0.5  # 1 of 2 baseline detections lost
    assert out["rates"]["Cardiomegaly"]["Pleural Effusion"] is None  # ground truth 3 is not positive
    assert out["denominators"]["Cardiomegaly"]["Edema"] == 2


def test_sensitivity_auc_by_hand():
    # relative drops 0, .25, .5 at p = 0, .5, 1 -> trapezoids .0625 + .1875 = .25
    assert sensitivity_auc([0, 0.5, 1], [0.8, 0.6, 0.4]) == {
        "s_auc": 0.25, "s_100": 0.5, "form": "mu_f1", "s_auc_mu_f1": 0.25, "s_100_mu_f1": 0.5,
        "s_auc_class_mean": None, "s_100_class_mean": None}
    assert sensitivity_auc([0, 0.2, 0.4, 0.6, 0.8, 1.0], [0.5] * 6)["s_auc"] == 0.0
    with pytest.raises(ValueError, match="start at p = 0"):
        sensitivity_auc([0.2, 1.0], [0.5, 0.4])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: chexbert_f1([[0] * 14], [[0] * 14, [0] * 14]), "length mismatch"),
        (lambda: chexbert_f1([[0] * 13], [[0] * 13]), "width 14"),
        (lambda: chexbert_f1([[0] * 13 + [5]], [[0] * 14]), "code 5"),
        (lambda: chexbert_f1([[0.5] + [0] * 13], [[0] * 14]), "non-integer"),
        (lambda: chexbert_f1([[float("nan")] + [0] * 13], [[0] * 14]), "NaN"),
        (lambda: chexbert_f1([], []), "empty"),
        (lambda: per_target_f1([[0] * 14], [[0] * 14], ["Effusion"]), r"target_classes\[0\]"),
        (lambda: flip_rate([[0] * 14], [[0] * 14], [[0] * 14], ["Edema", "Edema"]), "length mismatch"),
    ],
)
def test_bad_input_names_the_field(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_nlg_scores_equal_sacrebleu_and_rouge_score():
    sacrebleu = pytest.importorskip("sacrebleu")
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    from shovir.metrics.nlg import nlg_scores

    hyps = ["the heart is enlarged .", "no pleural effusion", "small left effusion with atelectasis", "lungs clear"]
    refs = ["the heart size is enlarged .", "no effusion or pneumothorax", "left pleural effusion and basal atelectasis", "the lungs are clear"]
    out = nlg_scores(hyps, refs, n_resamples=200)
    assert out["bleu_4"] == pytest.approx(sacrebleu.metrics.BLEU().corpus_score(hyps, [refs]).score / 100, abs=1e-9)
    assert out["bleu_1"] == pytest.approx(sacrebleu.metrics.BLEU(max_ngram_order=1).corpus_score(hyps, [refs]).score / 100, abs=1e-9)
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    assert out["rouge_l"] == pytest.approx(np.mean([scorer.score(r, h)["rougeL"].fmeasure for h, r in zip(hyps, refs)]))
    assert out["ci"]["bleu_4"]["low"] <= out["bleu_4"] <= out["ci"]["bleu_4"]["high"]


def test_bleu_from_resampled_statistics_equals_sacrebleu_on_the_resampled_corpus():
    sacrebleu = pytest.importorskip("sacrebleu")
    from shovir.metrics.nlg import _bleu_statistics, bleu_from_statistics

    hyps = ["a small effusion", "heart is normal in size", "no pneumothorax", "tube in good position", "x"]
    refs = ["small left effusion", "normal heart size", "no pneumothorax is seen", "the tube is in position", "y z"]
    stats = _bleu_statistics(hyps, refs, 4)
    for rows in ([0, 0, 1, 3, 4], [2, 2, 2, 2, 2], [4, 4, 4, 1, 0]):
        expected = sacrebleu.metrics.BLEU().corpus_score([hyps[i] for i in rows], [[refs[i] for i in rows]]).score / 100
        assert bleu_from_statistics(stats[rows].sum(0, keepdims=True), 4)[0] == pytest.approx(expected, abs=1e-12)


def test_paired_metrics_check_that_conditions_cover_the_same_samples():
    refs = [_vector(Cardiomegaly=1)] * 2
    with pytest.raises(ValueError, match="control_sample_ids: sample 0 is 'b'"):
        flip_rate(refs, refs, refs, ["Cardiomegaly"] * 2, sample_ids=["a", "b"], control_sample_ids=["b", "a"])
    with pytest.raises(ValueError, match="noise_sample_ids"):
        delta_fn(refs, refs, refs, sample_ids=["a", "b"], noise_sample_ids=["a", "c"])
    with pytest.raises(ValueError, match="duplicate sample ids"):
        occlusion_delta(refs, refs, refs, ["Cardiomegaly"] * 2, sample_ids=["a", "a"], control_sample_ids=["a", "a"])
    assert flip_rate(refs, refs, refs, ["Cardiomegaly"] * 2, sample_ids=["a", "b"], control_sample_ids=["a", "b"])["flip_rate"] == 0.0


def test_sensitivity_auc_in_both_forms_by_hand():
    # Edema (3 samples) 0.8 -> 0.6 -> 0.4, Atelectasis (1 sample) 0.4 -> 0.4 -> 0.2, at p = 0, .5, 1.
    # mu-F1: (2.4 + .4)/4 = .7, (1.8 + .4)/4 = .55, (1.2 + .2)/4 = .35 -> drops 0, 3/14, 1/2
    #        S_AUC = .5 * (0 + 3/14)/2 + .5 * (3/14 + 1/2)/2 = 3/56 + 10/56 = 13/56
    # class mean: .6, .5, .3 -> drops 0, 1/6, 1/2 -> S_AUC = .5 * (1/6)/2 + .5 * (2/3)/2 = 1/24 + 1/6 = 5/24
    per_class = [{"Edema": 0.8, "Atelectasis": 0.4}, {"Edema": 0.6, "Atelectasis": 0.4}, {"Edema": 0.4, "Atelectasis": 0.2}]
    counts = [{"Edema": 3, "Atelectasis": 1}] * 3
    out = sensitivity_auc([0, 0.5, 1], per_class_f1=per_class, class_counts=counts)
    assert out["form"] == "mu_f1"
    assert out["s_auc"] == out["s_auc_mu_f1"] == pytest.approx(13 / 56)
    assert out["s_auc_class_mean"] == pytest.approx(5 / 24) and out["s_100_class_mean"] == pytest.approx(0.5)
    assert out["s_100_mu_f1"] == pytest.approx(0.5)
    mean = sensitivity_auc([0, 0.5, 1], per_class_f1=per_class, form="class_mean")
    assert mean["s_auc"] == pytest.approx(5 / 24) and mean["s_auc_mu_f1"] is None and set(mean) == set(out)
    # the per_target_f1 results feed it directly; a class without an F1 (None) is left out of the mean
    assert sensitivity_auc([0, 1], per_class_f1=[{"Edema": 0.5, "Fracture": None}, {"Edema": 0.25}],
                           form="class_mean")["s_auc"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="class_counts: form='mu_f1' from per_class_f1 needs"):
        sensitivity_auc([0, 1], per_class_f1=per_class[:2])
    with pytest.raises(ValueError, match="form: expected one of mu_f1, class_mean"):
        sensitivity_auc([0, 1], [0.5, 0.4], form="macro")
    with pytest.raises(ValueError, match="exactly one"):
        sensitivity_auc([0, 1], [0.5, 0.4], per_class_f1=per_class[:2])
