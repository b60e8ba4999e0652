"""Answer extraction, normalisation and matching (shovir.metrics.answers)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shovir.metrics.answers import (
    agree_many,
    answers_agree,
    answers_match,
    canonical_answer,
    check_answers,
    extract_answer,
    extract_rationale,
    is_yes_no_context,
    match_many,
    normalize_answer,
    per_item_options,
    resolve_option,
)

PMC_OPTIONS = ["Axial", "Focal uptake pattern", "A. fumigatus", "T2-weighted image"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Yes.", "yes"),
        ("  The  Left   Lung ", "left lung"),
        ("T2-weighted", "t2 weighted"),
        ("an opacity", "opacity"),
        ("ＣＴ", "ct"),  # full-width letters (NFKC)
        ("snake_case", "snake case"),
        ("?!", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    "text", ["Yes", "yes", "Yes.", "YES!", "yes, there is", "Yes - a mass is seen", "Present", "positive", "True"]
)
def test_yes_variants_match_yes(text):
    assert answers_match(text, "yes")
    assert not answers_match(text, "no")


@pytest.mark.parametrize("text", ["No", "no.", "No, there is none", "None", "negative", "Absent", "false"])
def test_no_variants_match_no(text):
    assert answers_match(text, "no")
    assert not answers_match(text, "yes")


def test_not_sure_is_neither_yes_nor_no():
    assert not answers_match("Not sure", "no") and not answers_match("Not sure", "yes")


def test_yes_no_words_only_fold_in_a_yes_no_context():
    # an open answer "none" is its own answer, not the word "no"
    assert canonical_answer("None") == "none"
    assert not answers_match("no", "none found")
    assert answers_match("None found", "none found")
    # a yes/no reference (one word) turns the context on
    assert answers_match("None", "No")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("B", "Focal uptake pattern"),
        ("b", "Focal uptake pattern"),
        ("(B)", "Focal uptake pattern"),
        ("B.", "Focal uptake pattern"),
        ("B)", "Focal uptake pattern"),
        ("Option B", "Focal uptake pattern"),
        ("option (b)", "Focal uptake pattern"),
        ("Answer: B", "Focal uptake pattern"),
        ("The answer is B.", "Focal uptake pattern"),
        ("B. Focal uptake pattern", "Focal uptake pattern"),
        ("(B) something else", "Focal uptake pattern"),  # the letter wins over the text
        ("focal uptake pattern.", "Focal uptake pattern"),
        ("A. fumigatus", "A. fumigatus"),  # exact option text wins over the letter reading
        ("t2 weighted image", "T2-weighted image"),
        ("Answer: Axial", "Axial"),
        ("E", None),  # beyond the options
        ("Sagittal", None),
    ],
)
def test_resolve_option(text, expected):
    assert resolve_option(text, PMC_OPTIONS) == expected


def test_option_letters_against_references():
    assert answers_match("(B)", "Focal uptake pattern", PMC_OPTIONS)
    assert answers_match("Option D", "T2-weighted image", PMC_OPTIONS)
    assert not answers_match("A", "Focal uptake pattern", PMC_OPTIONS)
    # a reference given as a letter (PMC-VQA style) also resolves
    assert answers_match("Focal uptake pattern", "B", PMC_OPTIONS)
    # yes/no options: letters map to yes/no, and yes/no variants to the option
    assert answers_match("A", "yes", ["Yes", "No"])
    assert answers_match("No, it is not", "No", ["Yes", "No"])


def test_reference_outside_options_raises():
    with pytest.raises(ValueError, match=r"references: reference 'Sagittal' at index 0 is none of its options"):
        answers_match("A", "Sagittal", PMC_OPTIONS)


def test_is_yes_no_context():
    assert is_yes_no_context(["yes", "no", "uncertain"])
    assert not is_yes_no_context(["No finding", "Pneumonia"])
    assert is_yes_no_context(reference="Yes")
    assert not is_yes_no_context(reference="yes there is")
    assert is_yes_no_context(answers=["No.", "yes, it is"])
    assert not is_yes_no_context(answers=["No.", "left"])
    assert not is_yes_no_context()


def test_answers_agree_between_predictions():
    assert answers_agree("Yes.", "yes, there is")
    assert not answers_agree("Yes.", "No")
    assert answers_agree("Left lung", "left lung.")
    assert not answers_agree("left lung", "right lung")
    assert answers_agree("(A)", "Axial", PMC_OPTIONS)
    # the reference decides the context: "none" and "no" agree only in a yes/no question
    assert answers_agree("None", "no", reference="no")
    assert not answers_agree("none", "no thing", reference="lung")


def test_extract_answer_and_rationale():
    output = "<think>The mass is spiculated.\nIt sits in the left apex.</think>\n<answer> B </answer>"
    assert extract_answer(output) == "B"
    assert extract_rationale(output) == "The mass is spiculated.\nIt sits in the left apex."
    assert extract_answer("<answer>A</answer> then <answer>C</answer>") == "C"
    assert extract_answer("<think>x</think><answer>yes") == "yes"  # unclosed final block
    assert extract_answer("  plain answer ") == "plain answer"
    assert extract_rationale("plain") == "plain"


def test_vectorised_helpers():
    got = match_many(["Yes.", "B", "lung", "no"], ["yes", "Focal uptake pattern", "liver", "None"], [None, PMC_OPTIONS, None, None])
    assert got.dtype == bool and got.tolist() == [True, True, False, True]
    got = agree_many(["yes", "C", "liver"], ["Yes!", "a fumigatus", "Liver"], [None, PMC_OPTIONS, None])
    assert got.tolist() == [True, True, True]
    assert per_item_options(None, 3) == [None, None, None]
    assert per_item_options([[], None, ["a"]], 3) == [None, None, ("a",)]


@pytest.mark.parametrize(
    "values, message",
    [
        ([], r"predictions: empty"),
        (["yes", None], r"predictions: expected a string answer at index 1, got NoneType None"),
        (["yes", math.nan], r"predictions: expected a string answer at index 1, got NaN"),
        ([1, "yes"], r"predictions: expected a string answer at index 0, got int 1"),
        ("yes", r"predictions: expected a sequence of answers, got a single str"),
    ],
)
def test_check_answers_errors(values, message):
    with pytest.raises(ValueError, match=message):
        check_answers(values, "predictions")


def test_matching_errors_name_the_field():
    with pytest.raises(ValueError, match=r"predictions: 2 answers but references has 1"):
        match_many(["a", "b"], ["a"])
    with pytest.raises(ValueError, match=r"references: answer at index 0 is empty"):
        match_many(["a"], ["?"])
    with pytest.raises(ValueError, match=r"options: expected one option list per item \(2\), got 3"):
        match_many(["a", "b"], ["a", "b"], [["a"], ["b"], ["c"]])
    with pytest.raises(ValueError, match=r"second: 1 answers but first has 2"):
        agree_many(["a", "b"], ["a"])


def test_empty_prediction_is_just_wrong():
    assert match_many(["", "yes"], ["no", "yes"]).tolist() == [False, True]
    assert isinstance(answers_match("", "no"), bool)
    assert np.asarray(agree_many([""], [""])).tolist() == [True]


def test_vectorised_matching_equals_the_definition_row_by_row():
    # match_many / agree_many work per distinct answer; each row must still be the module
    # docstring's rule: canonical forms in the context of the options, else the reference, else the pair
    rng = np.random.default_rng(3)
    pool = ["yes", "Yes.", "no", "No, there is not", "none", "None", "left", "Left lung", "B", "(A)", "Answer: yes",
            "negative", "affirmative", "", "yes no", "Opacity.", "opacity", "nope", "Coronal", "a"]
    n = 4000
    first, second = list(rng.choice(pool, n)), list(rng.choice(pool, n))
    references = list(rng.choice(["yes", "no", "left", "opacity", "A", "Coronal"], n))
    choices = [None, ["Axial", "Coronal"], ["yes", "no"], ["left", "right", "opacity"], ["A", "B"]]
    options = [choices[i] for i in rng.integers(0, len(choices), n)]
    options = [o if o is None or resolve_option(r, o) is not None else None for o, r in zip(options, references)]
    got_match = match_many(first, references, options).tolist()
    got_agree = agree_many(first, second, options, references).tolist()
    got_pairs = agree_many(first, second).tolist()
    for i in range(n):
        context = is_yes_no_context(options[i], references[i])
        assert got_match[i] == (canonical_answer(first[i], options[i], context) == canonical_answer(references[i], options[i], context))
        assert got_agree[i] == (canonical_answer(first[i], options[i], context) == canonical_answer(second[i], options[i], context))
        pair = is_yes_no_context(answers=[first[i], second[i]])
        assert got_pairs[i] == (canonical_answer(first[i], yes_no=pair) == canonical_answer(second[i], yes_no=pair))
    assert 0.1 < np.mean(got_match) < 0.9 and 0.1 < np.mean(got_pairs) < 0.9
