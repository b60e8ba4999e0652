"""Every bad input of the clinical and VQA metric functions and of their evaluate modules is a
``ValueError`` naming the argument (and the row, where there is one) -- never a raw numpy /
Arrow / Type / Index / Key error, never a number (issue 8, items 2 and 3).

The cases are built per *class* of bad input and applied to every function and module that takes
such an argument; module cases run through ``compute`` and through ``add_batch`` / ``add`` and
check that a refused batch stored nothing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

evaluate = pytest.importorskip("evaluate")

from shovir import metrics as M  # noqa: E402
from shovir.evaluate_modules import modules_root  # noqa: E402
from shovir.metrics import _checks  # noqa: E402

ROOT = modules_root()
C = [0, 1] + [0] * 12
E = [0, 0, 0, 0, 1] + [0] * 9
TWO = [C, E]

# -- the classes of bad input ------------------------------------------------------------------

# bad values of a 14-code argument: (value, message); "{f}" is the argument's name
BAD_CODES = [
    ("No effusion.", r"{f}: got a single str"),
    (C, r"{f}: got a flat list of 14 numbers"),
    ([C, C[:13]], r"{f}: row 1 has 13 codes"),
    ([C, C + [0]], r"{f}: row 1 has 15 codes"),
    ([C, None], r"{f}: row 1 is None"),
    ([C, [None] + C[1:]], r"{f}: row 1, column 0 \(Enlarged Cardiomediastinum\) is None"),
    ([C, [True] + C[1:]], r"{f}: row 1, column 0 .* is a bool"),
    ([C, ["1"] + C[1:]], r"{f}: row 1, column 0 .* is str"),
    ([C, [float("nan")] + C[1:]], r"{f}: NaN at row 1"),
    ([C, [0.5] + C[1:]], r"{f}: non-integer code .*0\.5.* at row 1"),
    ([C, [4] + C[1:]], r"{f}: code 4 at row 1"),
    ([C, [-1] + C[1:]], r"{f}: code -1 at row 1"),
    (np.ones((2, 14), dtype=bool), r"{f}: got booleans"),
    (np.zeros((2, 13)), r"{f}: expected label vectors of width 14"),
    (np.zeros(14), r"{f}: expected an array of shape \(n, 14\)"),
    ([], r"{f}: empty"),
    ([C, "Small effusion."], r"{f}: row 1 is a report text but row 0 is a 14-code vector; pass every row in one form"),
    (["Small effusion.", C], r"{f}: row 1 is a list but row 0 is a report text; pass every row in one form"),
    (["Small effusion.", None], r"{f}: row 1 is a None but row 0 is a report text"),
    ([C, 7], r"{f}: row 1 is int 7; each row must be a list of 14 codes"),
    (42, r"{f}: got int 42; pass a list"),
    ({"a": C}, r"{f}: got a dict"),
]

BAD_TARGETS = [
    (["Cardiomegaly", "Effusion"], r"target_classes\[1\]: unknown CheXpert class 'Effusion'"),
    (["Cardiomegaly", "No Finding"], r"target_classes\[1\]: 'No Finding' has no bounding box"),
    (["Cardiomegaly", None], r"target_classes\[1\]: CheXpert class must be a string, got NoneType"),
    (["Cardiomegaly", 3], r"target_classes\[1\]: CheXpert class must be a string, got int"),
    ("Cardiomegaly", r"target_classes: got a single str"),
    (["Cardiomegaly"], r"length mismatch|target_classes: expected 2 target classes|Mismatch in the number of rows"),
]

# bad ids (sample ids, cluster ids): (value, message)
BAD_IDS = [
    (["a", None], r"{f}: id at row 1 must be a string or an integer, got None"),
    (["a", float("nan")], r"{f}: id at row 1 must be a string or an integer, got NaN"),
    (["a", 1.5], r"{f}: id at row 1 must be a string or an integer, got float 1.5"),
    (["a", True], r"{f}: id at row 1 must be a string or an integer, got True"),
    (["a", 1], r"{f}: row 1 is 1 but earlier rows are strings; use one type for every id"),
    ("ab", r"{f}: (expected one id per row, got a single str|got a single str)"),
    (["a"], r"{f}: expected 2 ids|length mismatch|Mismatch in the number of rows"),
]
DUPLICATE_IDS = (["a", "a"], r"sample_ids: id 'a' appears twice \(rows 0 and 1\)")

BAD_SETTINGS = [
    ("n_resamples", -1, r"n_resamples: expected an integer >= 0"),
    ("n_resamples", 10.0, r"n_resamples: expected an integer >= 0"),
    ("n_resamples", "100", r"n_resamples: expected an integer >= 0"),
    ("n_resamples", True, r"n_resamples: expected an integer >= 0"),
    ("seed", "3", r"seed: expected an integer >= 0"),
    ("seed", -1, r"seed: expected an integer >= 0"),
    ("seed", 1.0, r"seed: expected an integer >= 0"),
    ("seed", None, r"seed: expected an integer >= 0"),
]
BAD_CONFIDENCE = [
    ("confidence", 95, r"confidence: expected a number in \(0, 1\)"),
    ("confidence", 0, r"confidence: expected a number in \(0, 1\)"),
    ("confidence", "0.95", r"confidence: expected a number in \(0, 1\)"),
    ("confidence", True, r"confidence: expected a number in \(0, 1\)"),
]
BAD_PERMUTATIONS = [
    ("n_permutations", -1, r"n_permutations: expected an integer >= 0"),
    ("n_permutations", 99.0, r"n_permutations: expected an integer >= 0"),
    ("n_permutations", "99", r"n_permutations: expected an integer >= 0"),
]
BAD_UNCERTAIN = [("uncertain", "maybe", r"uncertain must be 'negative' or 'positive'"),
                 ("uncertain", None, r"uncertain must be 'negative' or 'positive'")]

BAD_ANSWERS = [
    (["yes", 7], r"{f}: expected a string answer at index 1, got int 7"),
    (["yes", None], r"{f}: expected a string answer at index 1, got NoneType"),
    (["yes", float("nan")], r"{f}: expected a string answer at index 1, got NaN"),
    (["yes", b"no"], r"{f}: expected a string answer at index 1, got bytes"),
    (["yes", True], r"{f}: expected a string answer at index 1, got bool"),
    ("yes", r"{f}: (expected a sequence of answers, got a single str|got a single str)"),
    (["yes"], r"{f}: expected 2|Mismatch in the number of rows|: expected 1 (answers|items), one per .*, got 2"),
]

# -- the clinical functions -------------------------------------------------------------------

CLINICAL = {
    "chexbert_f1": (M.chexbert_f1, dict(references=TWO, predictions=TWO)),
    "per_target_f1": (M.per_target_f1, dict(references=TWO, predictions=TWO, target_classes=["Cardiomegaly", "Edema"])),
    "delta_fn": (M.delta_fn, dict(references=TWO, baseline_predictions=TWO, noise_predictions=TWO)),
    "occlusion_delta": (M.occlusion_delta, dict(references=TWO, control_predictions=TWO, predictions=TWO,
                                                target_classes=["Cardiomegaly", "Edema"])),
    "flip_rate": (M.flip_rate, dict(references=TWO, control_predictions=TWO, predictions=TWO,
                                    target_classes=["Cardiomegaly", "Edema"])),
}
CODE_ARGS = {
    "chexbert_f1": ("references", "predictions"),
    "per_target_f1": ("references", "predictions"),
    "delta_fn": ("references", "baseline_predictions", "noise_predictions"),
    "occlusion_delta": ("references", "control_predictions", "predictions"),
    "flip_rate": ("references", "control_predictions", "predictions"),
}
ID_ARGS = {"delta_fn": ("sample_ids", "noise_sample_ids"), "occlusion_delta": ("sample_ids", "control_sample_ids"),
           "flip_rate": ("sample_ids", "control_sample_ids")}


def _function_cases():
    cases = []
    for name, (_, base) in CLINICAL.items():
        for field in CODE_ARGS[name]:
            for value, message in BAD_CODES:
                cases.append(pytest.param(name, {field: value}, message.format(f=re_escape(field)), id=f"{name}-{field}-codes"))
        if "target_classes" in base:
            for value, message in BAD_TARGETS:
                cases.append(pytest.param(name, {"target_classes": value}, message, id=f"{name}-targets"))
        for value, message in BAD_IDS:
            cases.append(pytest.param(name, {"clusters": value, "n_resamples": 10}, message.format(f="clusters"), id=f"{name}-clusters"))
            for field in ID_ARGS.get(name, ()):
                other = {f: ["a", "b"] for f in ID_ARGS[name]}
                cases.append(pytest.param(name, {**other, field: value}, message.format(f=field), id=f"{name}-{field}"))
        if name in ID_ARGS:
            first, second = ID_ARGS[name]
            cases.append(pytest.param(name, {first: ["a", "a"], second: ["a", "a"]}, r"sample_ids: id 'a' appears twice",
                                      id=f"{name}-duplicate-ids"))
            cases.append(pytest.param(name, {first: ["a", "b"], second: ["b", "a"]}, rf"{second}: sample 0 is 'b'",
                                      id=f"{name}-misaligned-ids"))
        for setting, value, message in BAD_SETTINGS + BAD_UNCERTAIN:
            cases.append(pytest.param(name, {setting: value}, message, id=f"{name}-{setting}"))
        cases.append(pytest.param(name, {"labeler": "rule"}, r"labeler: given, but every code input is 14-code label vectors",
                                  id=f"{name}-labeler-with-codes"))
        text = {field: ["No effusion.", "Edema."] for field in CODE_ARGS[name]}
        cases.append(pytest.param(name, {**text, "labeler": 3}, r"labeler: expected a labeler name", id=f"{name}-bad-labeler"))
        cases.append(pytest.param(name, {**text, "labeler": "nope"}, r"labeler: unknown labeler 'nope'", id=f"{name}-unknown-labeler"))
    return cases


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize("name, changes, message", _function_cases())
def test_clinical_function_names_the_bad_input(name, changes, message):
    function, base = CLINICAL[name]
    with pytest.raises(ValueError, match=message):
        function(**{**base, **changes})


def test_cross_disease_matrix_and_sensitivity_auc_name_their_bad_inputs():
    with pytest.raises(ValueError, match=r"labels: row 0 has 13 codes"):
        M.cross_disease_flip_matrix([C[:13]], [C], [C], ["Cardiomegaly"])
    with pytest.raises(ValueError, match=r"occluded_classes\[0\]: 'No Finding' has no bounding box"):
        M.cross_disease_flip_matrix([C], [C], [C], ["No Finding"])
    with pytest.raises(ValueError, match=r"baseline_predictions: got report texts; this argument takes 14-code vectors"):
        M.cross_disease_flip_matrix([C], ["Cardiomegaly."], [C], ["Cardiomegaly"])
    with pytest.raises(ValueError, match=r"f1_values: row 1 is str '0.5'"):
        M.sensitivity_auc([0, 1], [0.6, "0.5"])
    with pytest.raises(ValueError, match=r"p_values: got a single str"):
        M.sensitivity_auc("0, 1", [0.6, 0.5])
    with pytest.raises(ValueError, match=r"p_values: row 1 is bool"):
        M.sensitivity_auc([0, True], [0.6, 0.5])
    with pytest.raises(ValueError, match=r"f1_values: non-finite value nan at index 1"):
        M.sensitivity_auc([0, 1], [0.6, math.nan])
    with pytest.raises(ValueError, match=r"p_values: a strength appears twice"):
        M.sensitivity_auc([0, 0, 1], [0.6, 0.6, 0.5])
    with pytest.raises(ValueError, match=r"per_class_f1: row 1, class 'Edema': expected an F1 in \[0, 1\], got '0.5'"):
        M.sensitivity_auc([0, 1], per_class_f1=[{"Edema": 0.6}, {"Edema": "0.5"}], form="class_mean")
    with pytest.raises(ValueError, match=r"per_class_f1\[0\]\[0\]: unknown CheXpert class 'Heart'"):
        M.sensitivity_auc([0, 1], per_class_f1=[{"Heart": 0.6}, {"Edema": 0.5}], form="class_mean")


def test_text_in_equals_the_labelled_codes_and_the_radeval_call_works():
    from shovir.labelers import get_labeler

    label = get_labeler("rule")
    hyps, refs = ["Small left effusion.", "Mild cardiomegaly."], ["No effusion.", "The heart is enlarged."]
    assert M.chexbert_f1(refs, hyps) == M.chexbert_f1(label(refs), label(hyps))
    # a labeler object with the interface (here: everything "No Finding")
    class NoFinding:
        name = "no_finding"

        def __call__(self, reports):
            out = np.zeros((len(reports), 14), dtype=np.int8)
            out[:, 13] = 1
            return out

    assert M.chexbert_f1(refs, hyps, labeler=NoFinding())["f1_14"]["micro"] == 1.0
    # codes for one argument and texts for another are fine (dataset labels vs generated reports)
    out = M.flip_rate([C, E], hyps, refs, ["Cardiomegaly", "Edema"])
    assert out == M.flip_rate([C, E], label(hyps), label(refs), ["Cardiomegaly", "Edema"])
    with pytest.raises(ValueError, match=r"labeler: 'bad' returned an array of shape \(1, 3\)"):
        M.chexbert_f1(refs, hyps, labeler=type("Bad", (), {"name": "bad", "__call__": lambda self, r: np.zeros((1, 3))})())


def test_nothing_is_scored_from_a_wrong_type():
    # integral floats are codes; everything else that is not an int 0-3 is refused (cases above)
    assert M.chexbert_f1([[0.0, 1.0] + [0.0] * 12], [C])["f1_14"]["micro"] == 1.0
    # negative n_resamples used to silently give no interval; 0 is still "no interval"
    assert M.chexbert_f1(TWO, TWO, n_resamples=0)["ci"]["f1_14_micro"] == {"low": None, "high": None}


# -- the VQA functions ------------------------------------------------------------------------

REAL, SHUF, REFS = ["yes", "no"], ["no", "no"], ["yes", "no"]
VQA = {
    "visual_reliance": (M.visual_reliance, dict(predictions_real=REAL, predictions_shuffled=SHUF, references=REFS,
                                                predictions_blank=SHUF, n_resamples=10, n_permutations=10),
                        ("predictions_real", "predictions_shuffled", "references", "predictions_blank"),
                        ("sample_ids", "sample_ids_shuffled", "sample_ids_blank")),
    "hallucination_metrics": (M.hallucination_metrics, dict(rationales=["Mild effusion.", "No idea."],
                                                            questions=["Is there effusion?", "Is it normal?"],
                                                            predictions_real=REAL, predictions_shuffled=SHUF, n_resamples=10),
                              ("rationales", "questions", "predictions_real", "predictions_shuffled"),
                              ("sample_ids", "sample_ids_shuffled")),
    "swap_sensitivity": (M.swap_sensitivity, dict(original_answers=REAL, swapped_answers=SHUF, arms=["with_report"] * 2,
                                                  trial_ids=["t1", "t2"], patient_ids=["p1", "p2"], n_resamples=10),
                         ("original_answers", "swapped_answers"), ()),
}


def _vqa_cases():
    cases = []
    for name, (_, base, answer_args, id_args) in VQA.items():
        for field in answer_args:
            for value, message in BAD_ANSWERS:
                cases.append(pytest.param(name, {field: value}, message.format(f=field), id=f"{name}-{field}"))
        cluster_field = "patient_ids" if name == "swap_sensitivity" else "clusters"
        for value, message in BAD_IDS:
            cases.append(pytest.param(name, {cluster_field: value}, message.format(f=cluster_field), id=f"{name}-{cluster_field}"))
            if id_args:
                cases.append(pytest.param(name, {id_args[0]: value, id_args[1]: ["a", "b"]}, message.format(f=id_args[0]),
                                          id=f"{name}-{id_args[0]}"))
        if id_args:
            cases.append(pytest.param(name, {id_args[0]: ["a", "a"], id_args[1]: ["a", "b"]}, DUPLICATE_IDS[1], id=f"{name}-dup"))
            cases.append(pytest.param(name, {id_args[0]: ["a", "b"], id_args[1]: ["a", "c"]},
                                      rf"{id_args[1]}: does not cover the same samples", id=f"{name}-misaligned"))
        settings = BAD_SETTINGS + BAD_CONFIDENCE + (BAD_PERMUTATIONS if name == "visual_reliance" else [])
        for setting, value, message in settings:
            cases.append(pytest.param(name, {setting: value}, message, id=f"{name}-{setting}"))
        cases.append(pytest.param(name, {"options": [3, None]}, r"options: item 0 must be a list of option strings", id=f"{name}-options"))
        cases.append(pytest.param(name, {"options": {"a": 1}}, r"options: expected a list of option strings", id=f"{name}-options-dict"))
    cases.append(pytest.param("hallucination_metrics", {"benchmarks": ["A", None]}, r"benchmarks: id at row 1", id="benchmarks-none"))
    cases.append(pytest.param("hallucination_metrics", {"benchmarks": "A"}, r"benchmarks: expected one id per row", id="benchmarks-str"))
    cases.append(pytest.param("hallucination_metrics", {"max_ngram": 2.5}, r"max_ngram must be >= 2", id="max-ngram-float"))
    cases.append(pytest.param("swap_sensitivity", {"margin_threshold": "0.5"}, r"margin_threshold: expected a finite number",
                              id="margin-threshold-str"))
    cases.append(pytest.param("swap_sensitivity", {"margins_original": [1.0, True], "margins_swapped": [0.0, 0.0]},
                              r"margins_original: margin at row 1 must be a number", id="margin-bool"))
    cases.append(pytest.param("swap_sensitivity", {"arms": "with_report"}, r"arms: expected one arm name per row", id="arms-str"))
    return cases


@pytest.mark.parametrize("name, changes, message", _vqa_cases())
def test_vqa_function_names_the_bad_input(name, changes, message):
    function, base, *_ = VQA[name]
    with pytest.raises(ValueError, match=message):
        function(**{**base, **changes})


def test_zero_permutations_run_no_test_instead_of_p_equal_one():
    out = M.visual_reliance(REAL, SHUF, REFS, SHUF, n_resamples=0, n_permutations=0)
    assert out["p_values"] == {"vrs": None, "blank_drop": None}
    assert M.visual_reliance(REAL, SHUF, REFS, n_resamples=0, n_permutations=99)["p_values"]["vrs"] is not None


def test_the_claim_detector_does_not_count_an_echo_of_the_question():
    question = "Is there a mass in the left lung?"
    assert M.detect_visual_claims("There is a mass in the left lung.", question) == []
    assert M.detect_visual_claims("Yes, there is a mass in the left lung.", question) == []
    assert M.detect_visual_claims("No, there is no mass in the left lung.", question) == []
    assert [c["cue"] for c in M.detect_visual_claims("There is a small mass in the left lung.", question)] == ["there is", "small"]
    # one echo sentence and one new observation: only the new one counts
    claims = M.detect_visual_claims("There is a mass in the left lung. It is spiculated.", question)
    assert [(c["cue"], c["statement"]) for c in claims] == [("spiculated", "It is spiculated.")]


# -- the evaluate modules ---------------------------------------------------------------------

_MODULES: dict[str, object] = {}


def _module(name: str):
    if name not in _MODULES:
        _MODULES[name] = evaluate.load(str(ROOT / name))
    return _MODULES[name]


MODULES = {
    "chexbert_f1": dict(predictions=TWO, references=TWO),
    "delta_fn": dict(references=TWO, baseline_predictions=TWO, predictions=TWO),
    "flip_rate": dict(references=TWO, control_predictions=TWO, predictions=TWO, target_classes=["Cardiomegaly", "Edema"]),
    "occlusion_delta": dict(references=TWO, control_predictions=TWO, predictions=TWO, target_classes=["Cardiomegaly", "Edema"]),
    "visual_reliance": dict(predictions_real=REAL, predictions_shuffled=SHUF, references=REFS, predictions_blank=SHUF),
    "hvrr": dict(rationales=["Mild effusion.", "No idea."], questions=["Is there effusion?", "Is it normal?"],
                 predictions_real=REAL, predictions_shuffled=SHUF),
    "swap_sensitivity": dict(original_answers=REAL, swapped_answers=SHUF, arms=["with_report"] * 2, trial_ids=["t1", "t2"],
                             patient_ids=["p1", "p2"]),
}
MODULE_SETTINGS = {"visual_reliance": dict(n_resamples=0, n_permutations=0), "hvrr": dict(n_resamples=0),
                   "swap_sensitivity": dict(n_resamples=0)}
MODULE_CODES = {name: CODE_ARGS.get(name, ()) for name in MODULES}
MODULE_CODES["delta_fn"] = ("references", "baseline_predictions", "predictions")


def _module_cases():
    cases = []
    for name, base in MODULES.items():
        for field in MODULE_CODES[name]:
            for value, message in BAD_CODES:
                if isinstance(value, np.ndarray) and value.ndim == 1:
                    continue
                cases.append(pytest.param(name, {field: value}, message.format(f=re_escape(field)), id=f"{name}-{field}"))
        for field in [f for f in base if f in ("predictions_real", "predictions_shuffled", "references", "predictions_blank",
                                                "rationales", "questions", "original_answers", "swapped_answers")
                      and name not in CLINICAL and name != "chexbert_f1"]:
            for value, message in BAD_ANSWERS:
                cases.append(pytest.param(name, {field: value}, message.format(f=field), id=f"{name}-{field}"))
        if "target_classes" in base:
            for value, message in BAD_TARGETS:
                cases.append(pytest.param(name, {"target_classes": value}, message, id=f"{name}-targets"))
        id_fields = ["clusters"] if name != "swap_sensitivity" else ["trial_ids", "patient_ids"]
        id_fields += {"delta_fn": ["sample_ids"], "flip_rate": ["control_sample_ids"], "visual_reliance": ["sample_ids_blank"],
                      "hvrr": ["benchmarks"]}.get(name, [])
        for field in id_fields:
            for value, message in BAD_IDS:
                cases.append(pytest.param(name, {field: value}, message.format(f=field), id=f"{name}-{field}"))
        cases.append(pytest.param(name, {"no_such_input": [1, 2]}, r"no_such_input: not an input", id=f"{name}-unknown"))
    cases.append(pytest.param("swap_sensitivity", {"margins_original": [1.0, "2"]}, r"margins_original: row 1 must be a number",
                              id="swap-margin-str"))
    cases.append(pytest.param("swap_sensitivity", {"margins_original": [1.0, math.inf]}, r"margins_original: row 1 is inf",
                              id="swap-margin-inf"))
    cases.append(pytest.param("visual_reliance", {"options": [["a", "b"], 3]}, r"options: row 1 must be a list of option strings",
                              id="options-row"))
    cases.append(pytest.param("visual_reliance", {"options": [["a", "b"]] * 3}, r"Mismatch in the number of rows: options has 3",
                              id="options-length"))
    return cases


@pytest.mark.parametrize("name, changes, message", _module_cases())
def test_module_names_the_bad_input_through_compute_and_add_batch(name, changes, message):
    module = _module(name)
    kwargs = {**MODULES[name], **changes}
    with pytest.raises(ValueError, match=message):
        module.add_batch(**kwargs)
    assert len(module) == 0, "a refused batch must store nothing"
    with pytest.raises(ValueError, match=message):
        module.compute(**kwargs, **MODULE_SETTINGS.get(name, {}))
    assert len(module) == 0


@pytest.mark.parametrize("name", list(MODULES))
def test_module_refuses_bad_rows_in_add(name):
    module = _module(name)
    row = {field: values[0] for field, values in MODULES[name].items()}
    first = next(iter(row))
    bad = {first: None}  # a required input missing from the row
    with pytest.raises(ValueError, match=rf"{first}: missing"):
        module.add(**{**row, **bad})
    wrong = 7 if not isinstance(row[first], list) else [True] + C[1:]
    with pytest.raises(ValueError, match=rf"{first}"):
        module.add(**{**row, first: wrong})
    assert len(module) == 0


@pytest.mark.parametrize("name", list(MODULES))
@pytest.mark.parametrize("setting, value, message", BAD_SETTINGS[:2] + BAD_SETTINGS[4:6] + [("bogus", 1, "bogus: not an input or a setting")])
def test_module_settings_are_checked_before_anything_is_stored(name, setting, value, message):
    module = _module(name)
    with pytest.raises(ValueError, match=message):
        module.compute(**MODULES[name], **{**MODULE_SETTINGS.get(name, {}), setting: value})
    assert len(module) == 0
    module.add_batch(**MODULES[name])
    with pytest.raises(ValueError, match=message):
        module.compute(**{**MODULE_SETTINGS.get(name, {}), setting: value})
    out = module.compute(**MODULE_SETTINGS.get(name, {}))  # the rows are still there, scored once
    assert out == _module(name).compute(**MODULES[name], **MODULE_SETTINGS.get(name, {}))


def test_module_extra_settings_and_labeler_errors():
    visual = _module("visual_reliance")
    for setting, value, message in BAD_CONFIDENCE + BAD_PERMUTATIONS:
        with pytest.raises(ValueError, match=message):
            visual.compute(**MODULES["visual_reliance"], **{setting: value})
    chexbert = _module("chexbert_f1")
    for _, value, message in BAD_UNCERTAIN:
        with pytest.raises(ValueError, match=message):
            chexbert.compute(**MODULES["chexbert_f1"], uncertain=value)
    with pytest.raises(ValueError, match="labeler: given, but every code input is 14-code label vectors"):
        chexbert.compute(**MODULES["chexbert_f1"], labeler="rule")
    with pytest.raises(ValueError, match="labeler: not an input"):
        visual.add_batch(**MODULES["visual_reliance"], labeler="rule")
    with pytest.raises(ValueError, match="n_resamples: not an input of add_batch\\(\\); n_resamples is a setting: give it to compute"):
        chexbert.add_batch(**MODULES["chexbert_f1"], n_resamples=10)
    with pytest.raises(ValueError, match="predictions: no samples; pass the inputs to compute"):
        chexbert.compute()
    with pytest.raises(ValueError, match="prediction: given twice"):
        chexbert.add(prediction=C, predictions=C, reference=C)
    assert len(chexbert) == 0 and len(visual) == 0


def test_module_ids_of_one_type_across_batches():
    module = _module("chexbert_f1")
    module.add_batch(predictions=[C], references=[C], clusters=[1])
    with pytest.raises(ValueError, match="clusters: these ids are strings but earlier rows had integers"):
        module.add_batch(predictions=[C], references=[C], clusters=["1"])
    assert module.compute()["n"] == 1


def test_checks_helpers_by_hand():
    assert _checks.id_list([np.int64(3), 4], "ids") == ["3", "4"]
    assert _checks.cluster_ids(None, 3) is None
    assert _checks.n_permutations(0) == 0 and _checks.confidence(0.5) == 0.5
    with pytest.raises(ValueError, match="length mismatch .*: row 1 is missing from predictions"):
        _checks.same_length(references=[1, 2], predictions=[1])
    with pytest.raises(ValueError, match="predictions: got a single str"):
        _checks.same_length(references=[1, 2], predictions="ab")
