"""Beyond Accuracy metrics (shovir.metrics.visual_reliance): golden values from §3.4-3.5 and
Algorithm 1 computed by hand, CIs against slow references, p-values against exact enumeration."""

from __future__ import annotations

import importlib
import itertools
import json
import math

import numpy as np
import pytest
import scipy.stats

from shovir.metrics.visual_reliance import (
    HALLUCINATION_KEYS,
    METRIC_KEYS,
    detect_visual_claims,
    hallucination_metrics,
    has_visual_claim,
    visual_reliance,
)

# -- a hand-computed case ---------------------------------------------------------------------
#
# sample  reference   real          shuffled           blank          correct r/s/b  changed r→s
# 0       yes         "Yes."        "yes"              "no"           1 / 1 / 0      no
# 1       no          "no"          "Yes, there is"    "None"         1 / 0 / 1      yes
# 2       Axial (opt) "A"           "(B)" = Coronal    "Option A"     1 / 0 / 1      yes
# 3       left lung   "Left lung"   "right lung"       "left lung."   1 / 0 / 1      yes
# 4       no          "yes"         "no"               "No"           0 / 1 / 1      yes
#
# Acc_real = 4/5 = 0.8, Acc_shuffle = 2/5 = 0.4, Acc_blank = 4/5 = 0.8
# VRS = 0.8 - 0.4 = 0.4 ; BD = 0.8 - 0.8 = 0.0 ; IS = 4/5 = 0.8
# VBR = P[real 1, shuffle 0] = samples 1,2,3 = 3/5 = 0.6 ; VHR = sample 4 = 1/5 = 0.2 (VBR - VHR = VRS)
REFS = ["yes", "no", "Axial", "left lung", "no"]
REAL = ["Yes.", "no", "A", "Left lung", "yes"]
SHUF = ["yes", "Yes, there is", "(B)", "right lung", "no"]
BLANK = ["no", "None", "Option A", "left lung.", "No"]
OPTS = [None, None, ["Axial", "Coronal"], None, None]
IDS = ["s0", "s1", "s2", "s3", "s4"]


def _plain(value):
    """True when ``value`` is built only of JSON-native Python types."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (float, int, str, bool)


def test_golden_values_by_hand():
    out = visual_reliance(REAL, SHUF, REFS, BLANK, OPTS, n_resamples=200, n_permutations=200)
    expected = dict(accuracy_real=0.8, accuracy_shuffled=0.4, accuracy_blank=0.8, vrs=0.4, blank_drop=0.0,
                    image_sensitivity=0.8, vbr=0.6, vhr=0.2)
    for key, value in expected.items():
        assert out[key] == pytest.approx(value, abs=1e-12), key
    assert out["n"] == 5


def test_stable_keys_and_plain_types():
    full = visual_reliance(REAL, SHUF, REFS, BLANK, OPTS, n_resamples=100, n_permutations=100)
    partial = visual_reliance(REAL, SHUF, REFS, options=OPTS, n_resamples=100, n_permutations=100)
    for out in (full, partial):
        assert list(out) == [*METRIC_KEYS, "ci", "p_values", "n"]
        assert list(out["ci"]) == list(METRIC_KEYS)
        assert list(out["p_values"]) == ["vrs", "blank_drop"]
        assert _plain(out)
        json.dumps(out, allow_nan=False)
    for key in ("accuracy_blank", "blank_drop"):
        assert partial[key] is None and partial["ci"][key] == {"low": None, "high": None}
    assert partial["p_values"]["blank_drop"] is None
    for key in METRIC_KEYS:
        assert set(full["ci"][key]) == {"low", "high"}
        assert full["ci"][key]["low"] <= full[key] <= full["ci"][key]["high"]
    assert partial["vrs"] == full["vrs"] and partial["ci"]["vrs"] == full["ci"]["vrs"]


def test_vrs_equals_vbr_minus_vhr_on_random_answers():
    rng = np.random.default_rng(3)
    refs = rng.choice(["yes", "no"], 300).tolist()
    real = rng.choice(["yes", "no", "Yes.", "No"], 300).tolist()
    shuf = rng.choice(["yes", "no", "None"], 300).tolist()
    out = visual_reliance(real, shuf, refs, n_resamples=50, n_permutations=10)
    assert out["vrs"] == pytest.approx(out["vbr"] - out["vhr"], abs=1e-12)


def test_conditions_joined_on_ids():
    order = [3, 0, 4, 2, 1]
    out = visual_reliance(
        REAL, [SHUF[i] for i in order], REFS, [BLANK[i] for i in order[::-1]], OPTS,
        sample_ids=IDS, sample_ids_shuffled=[IDS[i] for i in order], sample_ids_blank=[IDS[i] for i in order[::-1]],
        n_resamples=300, n_permutations=300,
    )
    positional = visual_reliance(REAL, SHUF, REFS, BLANK, OPTS, n_resamples=300, n_permutations=300)
    assert out == positional


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(sample_ids=IDS, sample_ids_shuffled=["s0", "s1", "s2", "s3", "s9"]),
         r"sample_ids_shuffled: does not cover the same samples as sample_ids: "
         r"1 missing \(e.g. \['s4'\]\), 1 extra \(e.g. \['s9'\]\)"),
        (dict(sample_ids=IDS, sample_ids_shuffled=["s0", "s1", "s2", "s3", "s3"]),
         r"sample_ids_shuffled: id 's3' appears twice \(rows 3 and 4\)"),
        (dict(sample_ids=["s0", "s0", "s2", "s3", "s4"]), r"sample_ids: id 's0' appears twice"),
        (dict(sample_ids_shuffled=IDS), r"sample_ids_shuffled: given without sample_ids"),
        (dict(sample_ids=IDS[:4]), r"sample_ids: expected 5 ids, one per row, got 4"),
        (dict(sample_ids=IDS, sample_ids_blank=IDS), r"sample_ids_blank: given without predictions_blank"),
        (dict(clusters=[1, 2]), r"clusters: expected 5 ids, one per row"),
        (dict(sample_ids=["s0", "s1", math.nan, "s3", "s4"]), r"sample_ids: id at row 2 must be a string or an integer, got NaN"),
    ],
)
def test_id_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        visual_reliance(REAL, SHUF, REFS, **kwargs, n_resamples=10, n_permutations=10)


@pytest.mark.parametrize(
    "args, message",
    [
        ((REAL[:4], SHUF, REFS), r"predictions_real: expected 5 answers, one per reference, got 4"),
        ((REAL, SHUF[:4], REFS), r"predictions_shuffled: expected 5 answers, one per sample \(as references\), got 4"),
        ((REAL, SHUF, REFS, BLANK[:3]), r"predictions_blank: expected 5 answers"),
        (([], [], []), r"references: empty"),
        ((REAL[:4] + [None], SHUF, REFS), r"predictions_real: expected a string answer at index 4, got NoneType"),
        ((REAL, SHUF[:4] + [float("nan")], REFS), r"predictions_shuffled: expected a string answer at index 4, got NaN"),
        ((REAL, SHUF, REFS[:4] + [0]), r"references: expected a string answer at index 4, got int 0"),
    ],
)
def test_input_errors(args, message):
    with pytest.raises(ValueError, match=message):
        visual_reliance(*args, n_resamples=10, n_permutations=10)


# -- confidence intervals ---------------------------------------------------------------------


def _random_case(n, seed, p_real=0.7, p_shuffled=0.5, p_blank=0.55):
    rng = np.random.default_rng(seed)
    refs = rng.choice(["yes", "no"], n)
    flip = {"yes": "no", "no": "yes"}

    def answers(p):
        correct = rng.random(n) < p
        return [r if c else flip[r] for r, c in zip(refs, correct)]

    return answers(p_real), answers(p_shuffled), refs.tolist(), answers(p_blank)


def _slow_percentile_ci(per_sample, clusters, n_resamples, seed, statistic, confidence=0.95):
    """One resample at a time, with the draws of shovir.metrics.bootstrap (one chunk: clusters
    in order of first appearance, drawn with rng.integers(0, G, size=(B, G)))."""
    labels = list(dict.fromkeys(clusters))
    members = {label: [i for i, c in enumerate(clusters) if c == label] for label in labels}
    draws = np.random.default_rng(seed).integers(0, len(labels), size=(n_resamples, len(labels)))
    values = []
    for row in draws:
        rows = [i for g in row for i in members[labels[g]]]
        value = statistic(per_sample[rows])
        if not math.isnan(value):
            values.append(value)
    tail = (1 - confidence) / 2 * 100
    return np.percentile(values, [tail, 100 - tail])


def _indicators(real, shuf, refs, blank):
    real, shuf, refs, blank = map(np.asarray, (real, shuf, refs, blank))
    cr, cs, cb = real == refs, shuf == refs, blank == refs
    return np.column_stack([cr, cs, cb, real != shuf, cr & ~cs, ~cr & cs]).astype(float)


SLOW_STATISTICS = {
    "accuracy_real": lambda u: u[:, 0].mean(),
    "accuracy_shuffled": lambda u: u[:, 1].mean(),
    "accuracy_blank": lambda u: u[:, 2].mean(),
    "vrs": lambda u: (u[:, 0] - u[:, 1]).mean(),
    "blank_drop": lambda u: (u[:, 0] - u[:, 2]).mean(),
    "image_sensitivity": lambda u: u[:, 3].mean(),
    "vbr": lambda u: u[:, 4].mean(),
    "vhr": lambda u: u[:, 5].mean(),
}


@pytest.mark.parametrize("clustered", [False, True])
def test_ci_equals_slow_loop_with_the_same_draws(clustered):
    real, shuf, refs, blank = _random_case(60, seed=1)
    clusters = [f"img{i // 3}" for i in range(60)] if clustered else None
    out = visual_reliance(real, shuf, refs, blank, clusters=clusters, n_resamples=400, seed=7, n_permutations=10)
    per_sample = _indicators(real, shuf, refs, blank)
    for key, statistic in SLOW_STATISTICS.items():
        low, high = _slow_percentile_ci(per_sample, clusters or list(range(60)), 400, 7, statistic)
        assert out["ci"][key]["low"] == pytest.approx(low, abs=1e-12), key
        assert out["ci"][key]["high"] == pytest.approx(high, abs=1e-12), key


def test_iid_ci_agrees_with_scipy_bootstrap():
    real, shuf, refs, blank = _random_case(200, seed=2)
    out = visual_reliance(real, shuf, refs, blank, n_resamples=20000, seed=0, n_permutations=10)
    per_sample = _indicators(real, shuf, refs, blank)
    for key, column in (("accuracy_real", per_sample[:, 0]), ("vrs", per_sample[:, 0] - per_sample[:, 1])):
        ref = scipy.stats.bootstrap((column,), np.mean, n_resamples=20000, method="percentile",
                                    rng=np.random.default_rng(5)).confidence_interval
        assert out["ci"][key]["low"] == pytest.approx(ref.low, abs=0.011), key
        assert out["ci"][key]["high"] == pytest.approx(ref.high, abs=0.011), key


def test_ci_coverage_is_sane():
    # true Acc_real = 0.7, VRS = 0.7 - 0.5 = 0.2 (independent correctness across conditions)
    hits = {"accuracy_real": 0, "vrs": 0}
    reps = 200
    for rep in range(reps):
        real, shuf, refs, _ = _random_case(80, seed=100 + rep)
        out = visual_reliance(real, shuf, refs, n_resamples=400, seed=rep, n_permutations=1)
        hits["accuracy_real"] += out["ci"]["accuracy_real"]["low"] <= 0.7 <= out["ci"]["accuracy_real"]["high"]
        hits["vrs"] += out["ci"]["vrs"]["low"] <= 0.2 <= out["ci"]["vrs"]["high"]
    for key, count in hits.items():
        assert 0.88 <= count / reps <= 0.99, (key, count / reps)


# -- permutation p-values ---------------------------------------------------------------------


def _exact_sign_flip_pvalue(differences):
    differences = np.asarray(differences, float)
    observed = abs(differences.sum())
    signs = np.array(list(itertools.product([-1, 1], repeat=differences.size)))
    return float(np.mean(np.abs(signs @ differences) >= observed - 1e-12))


def test_pvalues_match_exact_enumeration():
    # VRS_i = 1[real correct] - 1[shuffled correct] = [1]*7 + [-1] + [0, 0]: sum 6; of the 2^8 sign
    # patterns of the non-zero terms, |sum| >= 6 for 1 + 8 per side, so p = 18/256 = 0.0703125.
    # BD_i = 1[real correct] - 1[blank correct] = [1, 1, 0, 0, 0, 0, 0, 0, 0, 0]: sum 2; of the 4
    # sign patterns of the two non-zero terms, |sum| >= 2 for (+,+) and (-,-), so p = 2/4 = 0.5.
    refs = ["yes"] * 10
    real = ["yes"] * 7 + ["no", "yes", "no"]
    shuf = ["no"] * 7 + ["yes", "yes", "no"]
    blank = ["no", "no", "yes", "yes", "yes", "yes", "yes", "no", "yes", "no"]
    out = visual_reliance(real, shuf, refs, blank, n_resamples=10, n_permutations=200000, seed=3)
    vrs_d = [1] * 7 + [-1, 0, 0]
    assert _exact_sign_flip_pvalue(vrs_d) == pytest.approx(18 / 256)
    assert out["p_values"]["vrs"] == pytest.approx(18 / 256, abs=0.003)
    assert _exact_sign_flip_pvalue([1, 1, 0, 0, 0, 0, 0, 0, 0, 0]) == 0.5
    assert out["p_values"]["blank_drop"] == pytest.approx(0.5, abs=0.005)
    # no difference at all: every permutation ties the observed 0, p = 1
    same = visual_reliance(real, real, refs, n_resamples=10, n_permutations=500)
    assert same["p_values"]["vrs"] == 1.0 and same["vrs"] == 0.0


def test_pvalue_equals_slow_loop_with_the_same_draws():
    real, shuf, refs, _ = _random_case(25, seed=4)
    out = visual_reliance(real, shuf, refs, n_resamples=10, n_permutations=3000, seed=11)
    d = _indicators(real, shuf, refs, real)[:, 0] - _indicators(real, shuf, refs, real)[:, 1]
    signs = np.random.default_rng(11).integers(0, 2, size=(3000, d.size)) * 2 - 1
    exceed = sum(abs(float(np.dot(s, d))) >= abs(d.sum()) - 1e-12 for s in signs)
    assert out["p_values"]["vrs"] == (1 + exceed) / 3001


# -- visual-claim detector --------------------------------------------------------------------


def test_detector_finds_each_category():
    claims = detect_visual_claims(
        "The radiograph shows a spiculated nodule. It lies in the right upper lobe with mild surrounding edema.",
        "What is the abnormality?",
    )
    categories = {c["category"] for c in claims}
    assert categories == {"presence", "appearance", "location", "severity"}
    assert [c["cue"] for c in claims] == ["shows", "spiculated", "right", "upper", "mild"]
    assert claims[0]["statement"] == "The radiograph shows a spiculated nodule."


def test_detector_filters_phrases_shared_with_the_question():
    question = "Is there a mild effusion in the left lower lobe?"
    # every cue sits in a phrase of 2-5 words quoted from the question: no novel claim
    assert detect_visual_claims("I look for a mild effusion in the left lower lobe.", question) == []
    # "bilateral" is new; "mild"/"left"/"lower" stay filtered
    assert [c["cue"] for c in detect_visual_claims("A mild effusion in the left lower lobe, bilateral.", question)] == ["bilateral"]
    # a single shared word used in a new phrase is a claim ("mild" in "mild cardiomegaly")
    assert [c["cue"] for c in detect_visual_claims("Also mild cardiomegaly.", question)] == ["mild"]


def test_detector_multiword_cues_and_hyphens():
    claims = detect_visual_claims("There is an ill-defined ground-glass opacity.", "What is it?")
    assert [c["cue"] for c in claims] == ["there is", "ill defined", "ground glass", "opacity"]


def test_detector_without_visual_language():
    assert not has_visual_claim("Based on clinical knowledge the answer is B.", "Which stain is used?")
    with pytest.raises(ValueError, match="max_ngram must be >= 2"):
        detect_visual_claims("x", "y", max_ngram=1)
    with pytest.raises(ValueError, match="rationale: expected a string answer at index 0, got NoneType"):
        detect_visual_claims(None, "y")


# Hand-checked NVC_i cases for the two detectors (row by row, and column-wise for large batches):
# (rationale, question, has a novel claim)
CLAIM_CASES = [
    ("There is a mass in the left lung.", "Is there a mass in the left lung?", False),  # an echo
    ("There is a spiculated mass in the left lung.", "Is there a mass in the left lung?", True),  # "spiculated" is new
    ("Based on the question, yes.", "Is there a mass?", False),  # no cue
    ("I look for a mild effusion in the left lower lobe.", "Is there a mild effusion in the left lower lobe?", False),
    ("Also mild cardiomegaly.", "Is there a mild effusion in the left lower lobe?", True),  # "mild" outside a shared phrase
    ("It is a mass. Left lobe.", "Is the mass left?", True),  # "mass left" spans two statements: not a shared phrase
    ("It is a mass.\x0bLeft lobe.", "Is the mass left?", True),  # \v after a stop breaks a statement, as Python's \s
    ("It is a mass.Left lobe.", "Is the mass left?", False),  # no whitespace after the stop: one statement
    ("mass\nleft lobe", "Is the mass left?", True),  # a newline breaks a statement
    ("There is an ill-defined ground-glass opacity.", "What is it?", True),
    ("Well defined.", "Is it well defined?", False),  # an echo
    ("It is well defined.", "Is it well defined or not?", False),  # "well defined" lies in the shared "it well defined"
    ("Straße: ill-defined.", "Is it?", True),  # non-ASCII: NFKC and case folding, row by row
    ("", "Is it?", False),
    ("lung", "Is it?", False),
    ("left", "Is it?", True),  # rows are never joined: "lung" + "left" stay two rationales
]


def _claims_both_ways(rationales, questions):
    module = importlib.import_module("shovir.metrics.visual_reliance")  # the package exports a function of that name
    row_by_row = [bool(module._novel_cues(r, *module._question_profile(q), first_only=True)) for r, q in zip(rationales, questions)]
    return row_by_row, module._claims_arrow(rationales, questions).tolist()


def test_claim_detectors_on_hand_cases():
    rationales, questions, expected = (list(column) for column in zip(*CLAIM_CASES))
    assert [has_visual_claim(r, q) for r, q in zip(rationales, questions)] == expected
    row_by_row, column_wise = _claims_both_ways(rationales * 300, questions * 300)  # large enough for the Arrow path
    assert row_by_row == expected * 300 and column_wise == expected * 300
    out = hallucination_metrics(rationales * 300, questions * 300, ["yes"] * len(expected * 300),
                                ["yes"] * len(expected * 300), n_resamples=0)
    assert out["n_claims"] == sum(expected) * 300


def test_claim_detectors_agree_on_random_text():
    rng = np.random.default_rng(7)
    words = np.array(["there", "is", "are", "a", "mass", "in", "the", "left", "lung", "upper", "lobe", "ill", "defined", "well",
                      "ground", "glass", "spiculated", "yes", "no", "Mild", "effusion", "seen", "LEFT", "There", "2", "cm", "Straße"])
    separators = np.array([" ", " ", " ", ". ", "-", ", ", "! ", "\n", ";\t", ".\x0b", ".\x1c", "?\r\n", "..", " | ", "_"])

    def text(most: int) -> str:
        k = int(rng.integers(0, most))
        return "".join(w + s for w, s in zip(rng.choice(words, k), rng.choice(separators, k))).strip(" " if rng.random() < 0.5 else "")

    questions = [text(9) for _ in range(200)]
    rationales = [text(16) for _ in range(6000)]
    asked = [questions[i] for i in rng.integers(0, 200, 6000)]
    row_by_row, column_wise = _claims_both_ways(rationales, asked)
    assert column_wise == row_by_row and 0.3 < np.mean(row_by_row) < 0.95
    # the phrase cap does not change a claim: shared word pairs decide coverage
    for rationale, question in zip(rationales[:300], asked[:300]):
        assert detect_visual_claims(rationale, question, 2) == detect_visual_claims(rationale, question, 5) \
            == detect_visual_claims(rationale, question, 9)


# -- HVRR -------------------------------------------------------------------------------------
#
# sample  rationale (real)                          question               NVC  a_real / a_shuffle   invariant
# 0       "A spiculated mass is visible."           "Is there a mass?"     1    yes / Yes.           1
# 1       "The answer follows from the question."   "Is it benign?"        0    no / no              1
# 2       "Severe edema on the left."               "Is there edema?"      1    yes / no             0
# 3       "Patchy opacity."                         "What is seen?"        1    opacity / Opacity    1
# 4       "Cannot say."                             "Is it normal?"        0    yes / no             0
#
# NVCR = 3/5 = 0.6 ; HVRR = P[NVC=1 and invariant] = samples 0, 3 = 2/5 = 0.4 (Eq. 1)
# P(invariant | claim) = 2/3
RATIONALES = ["A spiculated mass is visible.", "The answer follows from the question.", "Severe edema on the left.",
              "Patchy opacity.", "Cannot say."]
QUESTIONS = ["Is there a mass?", "Is it benign?", "Is there edema?", "What is seen?", "Is it normal?"]
H_REAL = ["yes", "no", "yes", "opacity", "yes"]
H_SHUF = ["Yes.", "no", "no", "Opacity", "no"]


def test_hallucination_golden():
    out = hallucination_metrics(RATIONALES, QUESTIONS, H_REAL, H_SHUF, n_resamples=500)
    assert out["nvcr"] == pytest.approx(0.6)
    assert out["hvrr"] == pytest.approx(0.4)
    assert out["p_invariant_given_claim"] == pytest.approx(2 / 3)
    assert out["n"] == 5 and out["n_claims"] == 3
    assert list(out) == [*HALLUCINATION_KEYS, "ci", "n", "n_claims", "n_benchmarks", "per_benchmark"]
    assert _plain(out)
    json.dumps(out, allow_nan=False)


def test_hallucination_ci_equals_slow_loop_and_handles_no_claims():
    rng = np.random.default_rng(8)
    n = 40
    rationales = rng.choice(["Mild effusion.", "No idea.", "The image shows a mass."], n).tolist()
    questions = ["What is the answer?"] * n
    real = rng.choice(["yes", "no"], n).tolist()
    shuf = rng.choice(["yes", "no"], n).tolist()
    out = hallucination_metrics(rationales, questions, real, shuf, n_resamples=300, seed=2)
    claim = np.array([r != "No idea." for r in rationales], float)
    invariant = (np.array(real) == np.array(shuf)).astype(float)
    per_sample = np.column_stack([claim, claim * invariant])
    slow = {
        "nvcr": lambda u: u[:, 0].mean(),
        "hvrr": lambda u: u[:, 1].mean(),
        "p_invariant_given_claim": lambda u: u[:, 1].sum() / u[:, 0].sum() if u[:, 0].sum() else math.nan,
    }
    for key, statistic in slow.items():
        low, high = _slow_percentile_ci(per_sample, list(range(n)), 300, 2, statistic)
        assert out["ci"][key]["low"] == pytest.approx(low, abs=1e-12), key
        assert out["ci"][key]["high"] == pytest.approx(high, abs=1e-12), key

    none = hallucination_metrics(["No idea."] * 3, ["Q?"] * 3, ["yes"] * 3, ["yes"] * 3, n_resamples=50)
    assert none["nvcr"] == 0.0 and none["hvrr"] == 0.0
    assert none["p_invariant_given_claim"] is None and none["ci"]["p_invariant_given_claim"] == {"low": None, "high": None}


def test_hallucination_join_and_errors():
    order = [4, 2, 0, 1, 3]
    joined = hallucination_metrics(RATIONALES, QUESTIONS, H_REAL, [H_SHUF[i] for i in order],
                                   sample_ids=IDS, sample_ids_shuffled=[IDS[i] for i in order], n_resamples=100)
    assert joined == hallucination_metrics(RATIONALES, QUESTIONS, H_REAL, H_SHUF, n_resamples=100)
    with pytest.raises(ValueError, match=r"questions: expected 5 items"):
        hallucination_metrics(RATIONALES, QUESTIONS[:4], H_REAL, H_SHUF)
    with pytest.raises(ValueError, match=r"sample_ids_shuffled: does not cover the same samples"):
        hallucination_metrics(RATIONALES, QUESTIONS, H_REAL, H_SHUF, sample_ids=IDS, sample_ids_shuffled=IDS[:4] + ["x"])
    with pytest.raises(ValueError, match=r"rationales: expected a string answer at index 1, got NaN"):
        hallucination_metrics([RATIONALES[0], math.nan] + RATIONALES[2:], QUESTIONS, H_REAL, H_SHUF)
