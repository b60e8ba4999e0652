"""ICARE end to end with a scripted judge: hand-computed scores on hand-written report pairs, the
filter's every outcome, failures never counted as (dis)agreement, bounded retries and duplicate
removal, seeded shuffles, pairing by id, the reference side written once, and the log."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from shovir.icare import (
    MCQ,
    Backend,
    Icare,
    Reply,
    icare,
    icare_from_answers,
    normalize_answer,
    shuffle_options,
)
from shovir.icare.parse import parse_mcqs

R1 = "Small left pleural effusion. Normal heart size."
H1 = "Normal heart size."
R2 = "Cardiomegaly."
H2 = "Enlarged heart."

# the MCQ replies, in the messy layouts judges produce
MCQS = {
    R1: """Sure! Here are the questions.

**1: Is there a pleural effusion?**
A) Yes
B) No
C) Cannot tell
D) Bilateral
Answer: A

2. Which side is the effusion on?
(A) Left
(B) Right
(C) Both
(D) Neither
**Answer: (A)**

Q3: What is the heart size?
A. Normal
B. Enlarged
C. Small
D. Not stated
Answer: A) Normal

4: IS THERE A PLEURAL EFFUSION
A) Yes
B) No
C) Maybe
D) Large
Answer: A

5: What is the lung volume?
A) Low
B) High
C) Normal
Answer: C""",
    H1: """1: How large is the heart?
A) Normal
B) Enlarged
C) Small
D) Not stated
Answer: A

2: Is the aorta tortuous?
A) Yes
B) No
C) Calcified
D) Not stated
Answer: B""",
    R2: """1: Is the heart enlarged?
A) Yes
B) No
C) Unclear
D) Not assessed
Answer: A

2: Is there cardiomegaly?
A) Yes
B) No
C) Possibly
D) Not assessed
Answer: A""",
}
RETRY_REPLY = {R1: MCQS[R1].split("\n\n2.")[0].split("Here are the questions.\n\n")[1]}  # q1 again: no progress

# the judge's answers, by option text: (question, report or None) -> option text, or a failure
ANSWERS = {
    ("Is there a pleural effusion?", R1): "Yes", ("Is there a pleural effusion?", None): "No",
    ("Which side is the effusion on?", R1): "Left", ("Which side is the effusion on?", None): "Left",
    ("What is the heart size?", R1): "Normal", ("What is the heart size?", None): "I do not know.",
    ("How large is the heart?", H1): "Normal", ("How large is the heart?", None): "Enlarged",
    ("How large is the heart?", R1): "Normal",
    ("Is the aorta tortuous?", H1): "Yes", ("Is the aorta tortuous?", None): "No",
    ("Is the heart enlarged?", R2): "Yes", ("Is the heart enlarged?", None): "No", ("Is the heart enlarged?", H2): "Yes",
    ("Is there cardiomegaly?", R2): "Yes", ("Is there cardiomegaly?", None): "No",
    ("Is there cardiomegaly?", H2): Reply(error="HTTP 500 after 4 attempts: overloaded"),
    ("Is there a pleural effusion?", H1): "No",
}


class ScriptedJudge(Backend):
    """Answers from the tables above (by option text, whatever the shuffle); counts its calls by kind."""

    name = "scripted"

    def __init__(self, mcqs=MCQS, answers=ANSWERS):
        self.mcqs, self.answers = mcqs, answers
        self.calls: Counter = Counter()
        self.prompts: list[str] = []

    def identity(self):
        return {"backend": self.name, "model": "script"}

    def complete(self, calls, on_reply=None):
        out = []
        for call in calls:
            self.calls[call.kind] += 1
            self.prompts.append(call.prompt)
            task = call.task
            if call.kind == "mcq":
                if task["report"] == H2:
                    out.append(Reply(error="HTTP 503 after 4 attempts: engine overloaded"))
                elif task["avoid"]:
                    out.append(Reply(RETRY_REPLY.get(task["report"], "")))
                else:
                    out.append(Reply(self.mcqs[task["report"]]))
                continue
            # unscripted (question, report) pairs, as when one model is given another pair's report: the first
            # option in alphabetical order
            chosen = self.answers.get((task["question"], task["report"]), min(task["options"]))
            if isinstance(chosen, Reply):
                out.append(chosen)
            elif chosen in task["options"]:
                out.append(Reply(f"{'ABCD'[task['options'].index(chosen)]}"))
            else:
                out.append(Reply(chosen))  # not an option: an unreadable answer
        return out


def _run(judge=None, **options):
    judge = judge or ScriptedJudge()
    result = icare({"p1": R1, "p2": R2}, {"p2": H2, "p1": H1}, backend=judge, n_questions=4, n_resamples=0, **options)
    return judge, result


def test_hand_computed_scores_on_scripted_answers():
    # GT side: p1 keeps "pleural effusion" (GT agent Yes, GEN agent No: disagree); p2 keeps "heart enlarged"
    # (agree) and "cardiomegaly" (GEN agent's call failed: a failure, not a disagreement). GEN side: p1 keeps
    # "heart size" (agree); p2's generated report never got questions (every writing call failed).
    _, out = _run()
    assert out["icare_gt"] == 0.5 and out["icare_gen"] == 1.0 and out["icare_avg"] == 0.75
    assert out["agreements"] == {"gt": 1, "gen": 1} and out["questions"] == {"gt": 2, "gen": 1}
    assert out["answer_failures"] == {"gt": 1, "gen": 0} and out["n"] == 2
    assert out["per_report"]["p1"]["icare_gt"] == 0.0 and out["per_report"]["p1"]["icare_avg"] == 0.5
    assert out["per_report"]["p2"]["icare_gt"] == 1.0 and out["per_report"]["p2"]["icare_gen"] is None
    assert out["per_report"]["p2"]["icare_avg"] is None
    assert out["report_level"]["icare_gt"] == {"mean": 0.5, "std": 0.5, "n": 2}
    assert out["report_level"]["icare_gen"] == {"mean": 1.0, "std": 0.0, "n": 1}
    assert out["report_level"]["icare_avg"] == {"mean": 0.5, "std": 0.0, "n": 1}


def test_every_filter_outcome_and_the_writing_counts():
    _, out = _run()
    p1 = out["per_report"]["p1"]["counts"]
    # R1: five items, one without four options (incomplete), one duplicate of the first; the retry for the
    # fourth question repeated the first (a duplicate, no progress) and ended the retries
    assert p1["gt"]["yielded"] == 3 and p1["gt"]["incomplete"] == 1 and p1["gt"]["duplicates"] == 2
    assert p1["gt"]["attempts"] == 2 and p1["gt"]["requested"] == 4
    assert p1["gt"]["kept"] == 1 and p1["gt"]["filtered_right_without_report"] == 1  # the side is guessable
    assert p1["gt"]["lost_to_failures"] == 1  # "I do not know." without the report: unreadable, the question is lost
    assert p1["gen"]["yielded"] == 2 and p1["gen"]["kept"] == 1 and p1["gen"]["filtered_wrong_with_report"] == 1
    p2 = out["per_report"]["p2"]["counts"]
    assert p2["gen"]["yielded"] == 0 and p2["gen"]["attempts"] == 3 and p2["gen"]["generation_failures"] == 3
    assert "engine overloaded" in p2["gen"]["last_generation_error"]
    assert out["counts"]["gt"]["kept"] == 3 and out["counts"]["gt"]["answer_failures"] == 1


def test_the_log_traces_every_score_to_its_questions(tmp_path):
    _, out = _run(log_path=tmp_path / "log.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    questions = [r for r in rows if r["record"] == "question"]
    reports = [r for r in rows if r["record"] == "report"]
    assert len(questions) == 3 + 2 + 2 and len(reports) == 4
    by_question = {(r["report_id"], r["question"]): r for r in questions}
    effusion = by_question[("p1", "Is there a pleural effusion?")]
    assert effusion["kept"] and effusion["reason"] == "kept" and effusion["agreement"] is False
    assert effusion["final_options"][ord(effusion["answer_gt"]) - 65] == "Yes"
    assert effusion["final_options"][ord(effusion["answer_gen"]) - 65] == "No"
    assert effusion["options"][ord(effusion["key"]) - 65] == effusion["key_text"] == "Yes"
    assert by_question[("p1", "Which side is the effusion on?")]["reason"] == "right_without_report"
    lost = by_question[("p1", "What is the heart size?")]
    assert lost["reason"] == "failed_without_report" and "unreadable answer 'I do not know.'" in lost["failure"]
    failed = by_question[("p2", "Is there cardiomegaly?")]
    assert failed["agreement"] is None and failed["answer_gen"] is None and "agent GEN: HTTP 500" in failed["failure"]
    summary = {(r["report_id"], r["source"]): r for r in reports}
    assert summary[("p1", "gt")]["yielded"] == 3 and summary[("p1", "gt")]["kept"] == 1
    assert summary[("p1", "gt")]["lost_to_failures"] == 1 and summary[("p2", "gen")]["yielded"] == 0
    # the saved answers give back the same scores without any judge
    again = icare_from_answers(rows, ["p1", "p2"], n_resamples=0)
    for key in ("icare_gt", "icare_gen", "icare_avg", "agreements", "questions", "answer_failures"):
        assert again[key] == out[key]


def test_unpaired_or_bad_reports_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"no report for id\(s\) \['p2'\]"):
        icare({"p1": R1, "p2": R2}, {"p1": H1, "p3": H2}, backend=ScriptedJudge(), n_resamples=0)
    with pytest.raises(ValueError, match="prediction_ids: ids must be unique"):
        icare([R1, R2], [H1, H2], ids=["a", "b"], prediction_ids=["a", "a"], backend=ScriptedJudge())
    with pytest.raises(ValueError, match=r"references\['a'\]: expected a report string, got int"):
        icare({"a": 3}, {"a": "x"}, backend=ScriptedJudge())


def test_pairing_by_id_gives_the_same_result_in_any_order():
    _, out = _run()
    shuffled = icare([R2, R1], [H1, H2], ids=["p2", "p1"], prediction_ids=["p1", "p2"], backend=ScriptedJudge(),
                     n_questions=4, n_resamples=0)
    for key in ("icare_gt", "icare_gen", "agreements", "questions", "answer_failures"):
        assert shuffled[key] == out[key]


def test_the_reference_side_is_written_and_filtered_once_for_every_model():
    judge = ScriptedJudge()
    with Icare(judge, n_questions=4) as evaluator:
        evaluator.evaluate({"p1": R1, "p2": R2}, {"p1": H1, "p2": H2}, n_resamples=0)
        first = Counter(judge.calls)
        second = evaluator.evaluate({"p1": R1, "p2": R2}, {"p1": R2, "p2": R1}, n_resamples=0)  # another "model"
    assert second["calls"]["reports_reused"] == 2 and second["calls"]["made"] > 0
    assert judge.calls["mcq"] == first["mcq"]  # R1 and R2 were written from once, as reference and as hypothesis
    # a model that copies another pair's reference agrees with it only where the reports agree
    assert second["per_report"]["p1"]["counts"]["gt"]["kept"] == 1


def test_shuffles_are_seeded_follow_the_key_and_the_unshuffled_variant_keeps_the_order(tmp_path):
    question = MCQ("Heart size?", ("Normal", "Enlarged", "Small", "Not stated"), "B")
    orders = {shuffle_options(question, seed, "before_filter").options for seed in range(20)}
    assert len(orders) > 5 and all(sorted(o) == sorted(question.options) for o in orders)
    for seed in range(20):
        shuffled = shuffle_options(question, seed, "before_filter")
        assert shuffled.key_text == "Enlarged" and shuffled == shuffle_options(question, seed, "before_filter")
    assert any(shuffle_options(question, seed, "before_filter") != shuffle_options(question, seed, "after_filter")
               for seed in range(20))  # a new order after the filter
    _, out = _run(variant="unshuffled", log_path=tmp_path / "u.jsonl")
    assert out["icare_gt"] == 0.5 and out["icare_gen"] == 1.0  # the judge answers by content, so the same scores
    rows = [json.loads(line) for line in (tmp_path / "u.jsonl").read_text().splitlines() if '"question"' in line]
    effusion = next(r for r in rows if r["question"] == "Is there a pleural effusion?" and r["record"] == "question")
    assert effusion["options"] == ["Yes", "No", "Cannot tell", "Bilateral"] == effusion["final_options"]
    assert effusion["key"] == "A"
    _run(log_path=tmp_path / "s.jsonl")
    again = tmp_path / "s2.jsonl"
    _run(log_path=again)
    assert (tmp_path / "s.jsonl").read_text() == again.read_text()  # same seed, same shuffles, same log


def test_retry_prompts_name_the_questions_already_written():
    judge, _ = _run()
    retries = [p for p in judge.prompts if "You already wrote" in p]
    assert retries and "- Is there a pleural effusion?" in retries[0] and "write 1 new ones" in retries[0]


def test_identical_wrong_answers_agree_and_are_reported():
    from shovir.metrics.icare import icare_agreement

    out = icare_agreement(["r", "r", "r"], ["gt", "gt", "gen"], ["B", "A", "C"], ["B", "A", "D"], keys=["A", "A", "C"],
                          n_resamples=0)
    assert out["agreements"] == {"gt": 2, "gen": 0} and out["agreements_off_key"] == {"gt": 1, "gen": 0}
    _, scripted = _run()
    assert scripted["agreements_off_key"] == {"gt": 0, "gen": 0}
    with pytest.raises(ValueError, match=r"keys\[0\]: expected one of A, B, C, D"):
        icare_agreement(["r"], ["gt"], ["A"], ["A"], keys=["E"])


def test_answers_are_normalised_before_comparison():
    assert [normalize_answer(t) for t in ("A", "a)", "(A)", "Answer: A", "**A**", "A. Yes")] == ["A"] * 6
    assert normalize_answer("Yes", ["Yes", "No", "Maybe", "Unclear"]) == "A"
    assert normalize_answer("B or C") is None


def test_parse_mcqs_is_tolerant_and_counts_what_it_drops():
    parsed = parse_mcqs(MCQS[R1])
    assert [(q.question, q.options, q.key) for q in parsed.items] == [
        ("Is there a pleural effusion?", ("Yes", "No", "Cannot tell", "Bilateral"), "A"),
        ("Which side is the effusion on?", ("Left", "Right", "Both", "Neither"), "A"),
        ("What is the heart size?", ("Normal", "Enlarged", "Small", "Not stated"), "A"),
        ("IS THERE A PLEURAL EFFUSION", ("Yes", "No", "Maybe", "Large"), "A"),
    ]
    assert parsed.incomplete == 1
    broken = parse_mcqs("1: Q?\nA) a\nB) b\nC) c\nD) d\nE) e\nAnswer: A\n\n2: R?\nA) a\nB) a\nC) c\nD) d\nAnswer: B\n\n"
                        "3: S?\nA) a\nB) b\nC) c\nD) d\nAnswer: the second one\n\n4: T?\nA) a\nB) b\nC) c\nD) d")
    assert broken.items == [] and broken.incomplete == 4  # five options, two equal, no readable key, no key


def test_bad_settings_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="n_questions must be an integer >= 1"):
        Icare("offline", n_questions=0)
    with pytest.raises(ValueError, match="variant must be one of shuffled, unshuffled"):
        Icare("offline", variant="random")
    with pytest.raises(ValueError, match="unknown LLM backend 'ofline' \\(did you mean 'offline'\\?\\)"):
        Icare("ofline")
