"""GREEN: every rule of the response parser on hand-written judge responses, the score with the
authors' golden cases and zero-match convention, the summary (mean, population std, error-free
shares), the prompt's truncation, failures kept out of the mean, and the offline approximation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shovir.icare import green, parse_green_response
from shovir.icare.green import GREEN_JUDGE, clean_green_response, green_backend_defaults
from shovir.icare.prompts import GREEN_CHAT_TEMPLATE, green_prompt
from shovir.metrics.green import green_score, green_summary

CATEGORIES = ("False report of a finding in the candidate", "Missing a finding present in the reference",
              "Misidentification of a finding's anatomic location/position", "Misassessment of the severity of a finding",
              "Mentioning a comparison that isn't in the reference",
              "Omitting a comparison detailing a change from a prior study")


def response(significant, matched, insignificant=(0,) * 6, explanation="Compared.", labels="abcdef"):
    sig = "\n".join(f"({l}) {c}: {n}." for l, c, n in zip(labels, CATEGORIES, significant))
    ins = "\n".join(f"({l}) {c}: {n}." for l, c, n in zip(labels, CATEGORIES, insignificant))
    return (f"[Explanation]:\n{explanation}\n\n[Clinically Significant Errors]:\n{sig}\n\n"
            f"[Clinically Insignificant Errors]:\n{ins}\n\n[Matched Findings]:\n{matched}. finding")


def test_the_authors_golden_cases():
    cases = [([2, 3, 0, 1, 0, 0], 0, 0.0), ([2, 1, 2, 0, 0, 0], 1, 1 / 6), ([1, 0, 0, 0, 0, 0], 1, 1 / 2)]
    for significant, matched, expected in cases:
        parsed = parse_green_response(response(significant, matched))
        assert parsed.significant == significant and parsed.matched == matched
        assert parsed.score == pytest.approx(expected) and green_score(matched, significant) == pytest.approx(expected)
    out = green(["r"] * 3, ["p"] * 3, judge_responses=[response(s, m) for s, m, _ in cases], n_resamples=0)
    scores = [0.0, 1 / 6, 0.5]
    assert out["green"] == pytest.approx(np.mean(scores)) and out["std"] == pytest.approx(np.std(scores))
    assert out["std"] == pytest.approx(0.2078699, abs=1e-6)  # population (ddof=0), not the sample std 0.2546
    assert out["error_free"] == {"a": 0.0, "b": pytest.approx(1 / 3), "c": pytest.approx(2 / 3), "d": pytest.approx(2 / 3),
                                 "e": 1.0, "f": 1.0}
    assert out["calls"] == {"made": 0, "saved": 0, "failed": 0} and out["config"]["judge_responses"] is True


def test_zero_matched_findings_score_zero_even_without_errors():
    assert parse_green_response(response([0] * 6, 0)).score == 0.0
    assert green_score(0, [0] * 6) == 0.0 and green_score(4, [0] * 6) == 1.0


def test_insignificant_errors_never_enter_the_score():
    parsed = parse_green_response(response([1, 0, 0, 0, 0, 0], 3, insignificant=[5, 5, 0, 0, 0, 0]))
    assert parsed.insignificant == [5, 5, 0, 0, 0, 0] and parsed.score == 0.75


def test_cleaning_keeps_the_answer_after_the_last_assistant_marker_and_drops_end_tokens():
    raw = ("<|user|>\nPrompt with [Explanation]:\n<Explanation> and [Matched Findings]:\n<The number>.</s>\n"
           "<|assistant|>\n" + response([1, 0, 0, 0, 0, 0], 2) + "</s><unk>")
    parsed = parse_green_response(raw)
    assert parsed.matched == 2 and parsed.significant == [1, 0, 0, 0, 0, 0] and parsed.explanation == "Compared."
    assert clean_green_response("x [/INST] [Explanation]: fine<|eot_id|>") == " fine"


def test_a_section_ends_at_the_first_blank_line():
    text = ("[Clinically Significant Errors]:\n(a) False report: 1.\n\n(b) Missing: 4.\n\n"
            "[Matched Findings]:\n2. a; b\n\n7. more findings after a blank line")
    parsed = parse_green_response(text)
    assert parsed.significant == [1, 0, 0, 0, 0, 0] and parsed.matched == 2  # (b) and "7." lie beyond the blank line
    # blank space right after the header is skipped, so the body starts at its first text
    assert parse_green_response("[Matched Findings]:\n\n   3. x").matched == 3


def test_a_body_starting_with_no_counts_zero():
    text = ("[Clinically Significant Errors]:\nNo clinically significant errors. (a) False report: 3.\n\n"
            "[Matched Findings]:\n2. effusion; edema")
    parsed = parse_green_response(text)
    assert parsed.significant == [0] * 6 and parsed.matched == 2 and parsed.score == 1.0
    assert parse_green_response("[Matched Findings]:\nNone. 2. x").matched == 0  # "None" starts with "No" too
    assert parse_green_response("[Matched Findings]:\nNo matched findings").matched == 0


def test_the_matched_count_is_a_leading_number_followed_by_a_period():
    assert parse_green_response("[Matched Findings]:\n3. a; b; c").matched == 3
    assert parse_green_response("[Matched Findings]:\n3 findings: a; b; c").matched == 0  # no period
    assert parse_green_response("[Matched Findings]:\nThere are 3. a; b; c").matched == 0  # not at the start
    parsed = parse_green_response("[Matched Findings]:\n2. Cardiomegaly; small left effusion")
    assert parsed.matched_findings == ["Cardiomegaly", "small left effusion"]


def test_a_category_count_needs_its_period():
    text = ("[Clinically Significant Errors]:\n(a) False report of a finding in the candidate: 2\n"
            "(b) Missing a finding present in the reference: 1. effusion\n(c) Location: 3 errors.\n"
            "(d) Severity:2.\n\n[Matched Findings]:\n1. x")
    parsed = parse_green_response(text)
    # (a) no period -> 0; (c) "3 errors." is not "3." -> 0; (d) no space after the colon -> 0
    assert parsed.significant == [0, 1, 0, 0, 0, 0] and parsed.significant_errors["b"] == ["effusion"]


def test_numbered_categories_are_read_when_no_lettered_ones_exist():
    numbered = response([1, 0, 2, 0, 0, 1], 2, labels="123456")
    assert parse_green_response(numbered).significant == [1, 0, 2, 0, 0, 1]
    mixed = "[Clinically Significant Errors]:\n(a) False report: 1.\n(2) Missing: 5.\n\n[Matched Findings]:\n1. x"
    assert parse_green_response(mixed).significant == [1, 0, 0, 0, 0, 0]  # lettered lines exist: numbered ignored


def test_categories_in_any_order_and_a_repeated_one():
    text = ("[Clinically Significant Errors]:\n(c) Location: 1.\n(a) False report: 2.\n(a) False report: 1.\n\n"
            "[Matched Findings]:\n1. x")
    # lines are sorted; for a category given twice the later one in sorted order wins ("(a) ...: 2." sorts last)
    assert parse_green_response(text).significant == [2, 0, 1, 0, 0, 0]


def test_missing_sections_count_zero_and_are_reported(tmp_path):
    parsed = parse_green_response("The reports agree.")
    assert parsed.matched == 0 and parsed.significant == [0] * 6 and parsed.sections_found == []
    only_matched = parse_green_response("[Matched Findings]:\n2. a; b")
    assert only_matched.score == 1.0 and only_matched.sections_found == ["Matched Findings"]
    out = green(["r1", "r2"], ["p1", "p2"], judge_responses=["The reports agree.", "[Matched Findings]:\n2. a; b"],
                n_resamples=0, log_path=tmp_path / "green.jsonl")
    assert out["unparsed"] == 1 and out["n"] == 2 and out["green"] == 0.5
    rows = [json.loads(line) for line in (tmp_path / "green.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["0", "1"] and rows[1]["matched_findings"] == ["a", "b"]
    assert rows[0]["response"] == "The reports agree." and rows[0]["green"] == 0.0


def test_the_prompt_cuts_each_report_to_300_words():
    long = " ".join(f"w{i}" for i in range(400))
    prompt = green_prompt(long, "Short candidate.")
    assert "w299" in prompt and "w300" not in prompt and "Short candidate." in prompt
    for section in ("[Explanation]:", "[Clinically Significant Errors]:", "[Clinically Insignificant Errors]:",
                    "[Matched Findings]:"):
        assert section in prompt
    assert all(f"{letter}) {name}." in prompt for letter, name in zip("abcdef", CATEGORIES))


def test_judge_responses_are_paired_by_id():
    out = green({"x": "ref x", "y": "ref y"}, {"y": "p", "x": "q"}, judge_responses={"y": response([0] * 6, 1),
                                                                                    "x": response([1] * 6, 0)},
                n_resamples=0)
    assert [(r["id"], r["green"]) for r in out["reports"]] == [("x", 0.0), ("y", 1.0)]
    with pytest.raises(ValueError, match="judge_responses: expected a list of 2 responses"):
        green(["a", "b"], ["c", "d"], judge_responses=["only one"])
    with pytest.raises(ValueError, match=r"judge_responses\[1\]: expected the judge's reply as a string"):
        green(["a", "b"], ["c", "d"], judge_responses=["x", None])


def test_the_summary_refuses_bad_counts():
    with pytest.raises(ValueError, match="significant_errors: expected 6 counts"):
        green_score(1, [0, 0])
    with pytest.raises(ValueError, match=r"matched\[0\]: expected a non-negative integer count"):
        green_summary([-1], [[0] * 6])
    with pytest.raises(ValueError, match="cannot summarise an empty set"):
        green_summary([], [])


def test_the_bootstrap_interval_brackets_the_mean():
    out = green_summary([1, 1, 0, 2], [[1, 0, 0, 0, 0, 0], [0] * 6, [0] * 6, [0, 2, 0, 0, 0, 0]], n_resamples=500)
    assert out["ci"]["green"]["low"] <= out["green"] <= out["ci"]["green"]["high"]


def test_the_offline_approximation_and_the_default_judge():
    out = green(["Cardiomegaly. Small left pleural effusion.", "No acute cardiopulmonary process."],
                ["Cardiomegaly. No effusion. Right pneumothorax.", "No acute cardiopulmonary process."], n_resamples=0)
    first, second = out["reports"]
    assert first["matched"] == 1 and first["significant"] == [1, 1, 0, 0, 0, 0] and first["green"] == pytest.approx(1 / 3)
    assert second["matched"] == 1 and second["green"] == 1.0  # two normal studies match on "no acute findings"
    defaults = green_backend_defaults("transformers")
    assert defaults["model"] == GREEN_JUDGE == "StanfordAIMI/GREEN-RadLlama2-7b"
    assert defaults["chat_template"] == GREEN_CHAT_TEMPLATE and defaults["max_length"] == 2048 and defaults["batch_size"] == 8
