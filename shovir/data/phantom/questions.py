"""Template VQA questions about a phantom case, answered from its ground truth.

The VQA side of the phantom (:class:`shovir.data.synthetic.SyntheticCXR` with ``rows="vqa"``):
a few template questions per image about the 12 localisable findings
(:data:`~shovir.data.phantom.findings.LOCALIZED_FINDINGS`), answered from what was *rendered* —
the case's present findings and the sides of their appearances (:func:`case_truth`) — never
from the report text. The Beyond Accuracy (real / blank / shuffled image) and ModaLens
(same-patient swap, with and without the report) protocols run on these rows.

Question types (:data:`QUESTION_TYPES`), with the options and how the answer is derived:

============  =========================================================  ==========================  =========================
type          template (example)                                         options                     answer
============  =========================================================  ==========================  =========================
``presence``  "Is there a pleural effusion on this chest X-ray?"         ``yes``, ``no``             ``yes`` iff present
``absence``   "Is this chest X-ray free of pleural effusion?"            ``yes``, ``no``             ``yes`` iff absent
``side``      "On which side of the patient's chest is there a pleural   ``right``, ``left``,        the sides of its
              effusion?"                                                 ``both``, ``neither``       appearances; ``neither``
                                                                                                     when absent
``which``     "Which of these findings does this chest X-ray show:       the three findings, then    the one present finding,
              pneumothorax, pleural effusion or lung lesion?"            ``none of these``           or ``none of these``
============  =========================================================  ==========================  =========================

*Sides* are the patient's (``right`` is the image's left half), as in the reports. Side
questions are asked about the 8 :data:`LATERAL_FINDINGS` only: cardiomegaly and the enlarged
cardiomediastinum are midline, edema is always bilateral, and an endotracheal tube has no side.
Only a pleural effusion can be ``both`` (bilateral effusions).

*Subtle findings* (rendered at :data:`~shovir.data.phantom.findings.SUBTLE_STRENGTH` contrast and
reported as uncertain, code 3) are **present**: the image holds them, several times above the
noise, so they are answered ``yes`` / ``no`` (absence) / their side. A model that reads the report
must therefore take "possible ..." as present. Pneumonia (no box) and No Finding are never asked.

Sampling (:func:`sample_questions`): :data:`QUESTIONS_PER_IMAGE` = 5 questions per image, from a
generator keyed by ``(seed, "questions", index)`` (:func:`~shovir.data.phantom.scenarios.stable_rng`),
so they depend on the case alone, never on ``n_images`` or the other images:

1. three closed questions (``q0``-``q2``) about three distinct findings: each targets one of the
   study's remaining present findings with probability 1/2 (always an absent one when none is
   left, a present one when no absent one is left), uniformly within the chosen group, and is
   phrased as ``presence`` or ``absence`` with probability 1/2 each;
2. one ``side`` question (``q3``) about a present lateralised finding, uniformly, or — when the
   study has none — about a uniformly drawn lateralised finding (answer ``neither``);
3. one ``which`` question (``q4``): one present finding (uniformly) and two absent distractors,
   in random order; with probability :data:`NONE_RATE` (1/8), or when the study has no present
   finding, three absent findings (answer ``none of these``).

Targeting present findings (half of the closed questions, every side question of a study with a
lateralised finding, seven in eight which questions) keeps the questions informative — a finding
drawn at random is absent from about 82 % of studies — and gives the ModaLens swap a clear
effect without looking at the other studies: on the demo data (200 images of seed 0, swap
pairing of :func:`shovir.perturb.swap_pairs` with seed 3) the ground truth differs between the
study and its donor for 40.3 % of the (question, swap) trials (41.3 % of the 795 trials with a
same-patient donor, 36.6 % of the 205 with another patient's): 28 % of the presence/absence,
59 % of the side and 58 % of the which questions. That share is the flip rate of a perfect image
reader.

Answer priors (from :func:`answer_priors` over the 100,000 questions of the first 20,000 images
of seed 7; standard errors at most 0.004 for the shares of a type;
``tests/test_data_synthetic_vqa.py`` re-estimates them on other images). The pooled yes/no prior
is exactly 1/2 by design, as the phrasing coin is independent of the target:

====================================  ======================================================
quantity                              value
====================================  ======================================================
P(yes) over closed questions          0.500 (exact; 0.499 measured)
P(yes | presence), P(yes | absence)   0.363, 0.636 (the share of closed questions about a
                                      present finding, and its complement)
side: right / left / both / neither   0.359 / 0.317 / 0.064 / 0.260 (``neither``: no
                                      lateralised finding present; right > left because
                                      atelectasis lies on the right 63 % of the time: at the
                                      left base the heart leaves less room, so placements
                                      there fail and are redrawn on a fresh side)
which: a finding / none of these      0.698 / 0.302 (about 0.2 of studies show no finding,
                                      plus 1/8 of the others)
accuracy of answering "absent"        0.494
====================================  ======================================================

Answering "absent" everywhere (:data:`ABSENT_ANSWERS`: ``no`` to presence, ``yes`` to absence,
``neither`` to side, ``none of these`` to which) is what a model that sees nothing — a grounded
model shown a blank image — gets: 0.6 · 0.636 + 0.2 · 0.260 + 0.2 · 0.302 = 0.494.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from shovir.data.phantom.cases import Case, sample_case
from shovir.data.phantom.findings import LOCALIZED_FINDINGS
from shovir.data.phantom.scenarios import stable_rng

__all__ = [
    "QUESTION_TYPES",
    "FINDINGS",
    "LATERAL_FINDINGS",
    "YES_NO",
    "SIDE_OPTIONS",
    "NONE_OF_THESE",
    "ABSENT_ANSWERS",
    "QUESTIONS_PER_IMAGE",
    "NONE_RATE",
    "GroundTruth",
    "ParsedQuestion",
    "Question",
    "case_truth",
    "question_text",
    "question_options",
    "parse_question",
    "true_answer",
    "sample_questions",
    "answer_priors",
]

QUESTION_TYPES: tuple[str, ...] = ("presence", "absence", "side", "which")
"""The four question types (see the module docstring)."""

FINDINGS: tuple[str, ...] = LOCALIZED_FINDINGS
"""The classes questions are about: the 12 localisable findings with a box (CheXbert order)."""

LATERAL_FINDINGS: tuple[str, ...] = (
    "Lung Opacity", "Lung Lesion", "Consolidation", "Atelectasis", "Pneumothorax", "Pleural Effusion",
    "Pleural Other", "Fracture",
)
"""Findings that side questions ask about: always drawn on one side (or, for effusions, both)."""

YES_NO: tuple[str, ...] = ("yes", "no")
"""Options of the closed presence and absence questions."""

SIDE_OPTIONS: tuple[str, ...] = ("right", "left", "both", "neither")
"""Options of the side questions (the patient's sides)."""

NONE_OF_THESE = "none of these"
"""The last option of every which-finding question."""

ABSENT_ANSWERS: Mapping[str, str] = {"presence": "no", "absence": "yes", "side": "neither", "which": NONE_OF_THESE}
"""The answer of a model that sees no finding, per question type."""

QUESTIONS_PER_IMAGE = 5
"""Questions asked about every image: three closed, one side, one which-finding."""

NONE_RATE = 0.125
"""Probability that the which-finding question of a study with a present finding offers three
absent findings (answer :data:`NONE_OF_THESE`)."""

_CLOSED_PER_IMAGE = 3

# finding -> (phrase after "Is there" / "is there", noun after "free of", option label)
_WORDING: Mapping[str, tuple[str, str, str]] = {
    "Enlarged Cardiomediastinum": ("an enlarged cardiomediastinum", "cardiomediastinal enlargement",
                                   "enlarged cardiomediastinum"),
    "Cardiomegaly": ("cardiomegaly", "cardiomegaly", "cardiomegaly"),
    "Lung Opacity": ("a lung opacity", "lung opacities", "lung opacity"),
    "Lung Lesion": ("a lung lesion", "lung lesions", "lung lesion"),
    "Edema": ("pulmonary edema", "pulmonary edema", "pulmonary edema"),
    "Consolidation": ("consolidation", "consolidation", "consolidation"),
    "Atelectasis": ("atelectasis", "atelectasis", "atelectasis"),
    "Pneumothorax": ("a pneumothorax", "pneumothorax", "pneumothorax"),
    "Pleural Effusion": ("a pleural effusion", "pleural effusion", "pleural effusion"),
    "Pleural Other": ("pleural thickening", "pleural thickening", "pleural thickening"),
    "Fracture": ("a rib fracture", "rib fractures", "rib fracture"),
    "Support Devices": ("a support device", "support devices", "support device"),
}
_OPTION_OF: Mapping[str, str] = {name: wording[2] for name, wording in _WORDING.items()}
_FINDING_OF_OPTION: Mapping[str, str] = {label: name for name, label in _OPTION_OF.items()}
_SIDE_NAME: Mapping[frozenset[int], str] = {frozenset({-1}): "right", frozenset({1}): "left",
                                            frozenset({-1, 1}): "both"}


@dataclass(frozen=True)
class GroundTruth:
    """What the image of a case shows: its present localisable findings (subtle ones included),
    the subtle ones, and the sides of each finding's appearances (-1 patient right, +1 patient
    left, 0 midline)."""

    present: frozenset[str]
    subtle: frozenset[str] = frozenset()
    sides: Mapping[str, frozenset[int]] = field(default_factory=dict, hash=False)


class ParsedQuestion(NamedTuple):
    """A template question read back: its type, the finding asked about (``None`` for a which
    question) and the offered findings of a which question (in option order)."""

    question_type: str
    finding: str | None
    candidates: tuple[str, ...] = ()


@dataclass(frozen=True)
class Question:
    """One sampled question with its answer.

    ``finding`` is the class asked about; for a which question, the present option's class, or
    ``""`` when the answer is :data:`NONE_OF_THESE`. ``candidates`` are the offered classes of a
    which question (empty otherwise).
    """

    question_type: str
    finding: str
    question: str
    options: tuple[str, ...]
    answer: str
    candidates: tuple[str, ...] = ()


def case_truth(case: Case) -> GroundTruth:
    """The ground truth of a sampled case, from its finding specifications (what is rendered).

    >>> truth = case_truth(sample_case(1))
    >>> sorted(truth.present), {k: sorted(v) for k, v in truth.sides.items()}
    (['Fracture', 'Pneumothorax'], {'Pneumothorax': [-1], 'Fracture': [1]})
    """
    sides: dict[str, set[int]] = {}
    subtle = set()
    for spec in case.specs:
        sides.setdefault(spec.name, set()).add(int(spec.side))
        if spec.subtle:
            subtle.add(spec.name)
    return GroundTruth(frozenset(sides), frozenset(subtle), {name: frozenset(s) for name, s in sides.items()})


def _check_finding(finding: str, allowed: Sequence[str], field_name: str = "finding") -> None:
    if finding not in allowed:
        raise ValueError(f"{field_name}: {finding!r} is not one of {', '.join(allowed)}")


def question_text(question_type: str, finding: str | None = None, candidates: Sequence[str] = ()) -> str:
    """The template text of a question.

    >>> question_text("presence", "Pleural Effusion")
    'Is there a pleural effusion on this chest X-ray?'
    >>> question_text("absence", "Fracture")
    'Is this chest X-ray free of rib fractures?'
    >>> question_text("side", "Pneumothorax")
    "On which side of the patient's chest is there a pneumothorax?"
    >>> question_text("which", candidates=["Edema", "Cardiomegaly", "Support Devices"])
    'Which of these findings does this chest X-ray show: pulmonary edema, cardiomegaly or support device?'
    >>> question_text("side", "Edema")
    Traceback (most recent call last):
    ...
    ValueError: finding: 'Edema' is not one of Lung Opacity, Lung Lesion, Consolidation, Atelectasis, Pneumothorax, Pleural Effusion, Pleural Other, Fracture
    """
    if question_type == "which":
        if len(candidates) != 3 or len(set(candidates)) != 3:
            raise ValueError(f"candidates: a which question offers 3 distinct findings, got {list(candidates)!r}")
        for name in candidates:
            _check_finding(name, FINDINGS, "candidates")
        labels = [_OPTION_OF[name] for name in candidates]
        return f"Which of these findings does this chest X-ray show: {labels[0]}, {labels[1]} or {labels[2]}?"
    if question_type not in QUESTION_TYPES:
        raise ValueError(f"question_type: {question_type!r} is not one of {', '.join(QUESTION_TYPES)}")
    _check_finding(str(finding), LATERAL_FINDINGS if question_type == "side" else FINDINGS)
    phrase, free_of, _ = _WORDING[str(finding)]
    if question_type == "presence":
        return f"Is there {phrase} on this chest X-ray?"
    if question_type == "absence":
        return f"Is this chest X-ray free of {free_of}?"
    return f"On which side of the patient's chest is there {phrase}?"


def question_options(question_type: str, candidates: Sequence[str] = ()) -> tuple[str, ...]:
    """The options of a question, in order.

    >>> question_options("side")
    ('right', 'left', 'both', 'neither')
    >>> question_options("which", ["Edema", "Cardiomegaly", "Fracture"])
    ('pulmonary edema', 'cardiomegaly', 'rib fracture', 'none of these')
    """
    if question_type in ("presence", "absence"):
        return YES_NO
    if question_type == "side":
        return SIDE_OPTIONS
    if question_type == "which":
        return tuple(_OPTION_OF[name] for name in candidates) + (NONE_OF_THESE,)
    raise ValueError(f"question_type: {question_type!r} is not one of {', '.join(QUESTION_TYPES)}")


def _normalise(text: str) -> str:
    return " ".join(str(text).split()).casefold()


_FIXED: dict[str, ParsedQuestion] = {}
for _name in FINDINGS:
    for _kind in ("presence", "absence") + (("side",) if _name in LATERAL_FINDINGS else ()):
        _FIXED[_normalise(question_text(_kind, _name))] = ParsedQuestion(_kind, _name)
_WHICH = re.compile(r"which of these findings does this chest x-ray show: (.+), (.+) or (.+)\?")


def parse_question(text: str) -> ParsedQuestion:
    """Read a template question back (case and spacing are ignored).

    Raises ``ValueError`` for any other text: the reference VQA models answer template
    questions only.

    >>> parse_question("Is this chest X-ray free of pleural effusion?")
    ParsedQuestion(question_type='absence', finding='Pleural Effusion', candidates=())
    >>> parse_question(question_text("which", candidates=["Fracture", "Edema", "Atelectasis"])).candidates
    ('Fracture', 'Edema', 'Atelectasis')
    >>> parse_question("Is the heart enlarged?")
    Traceback (most recent call last):
    ...
    ValueError: question: 'Is the heart enlarged?' is not a synthetic VQA template question (see shovir.data.phantom.questions)
    """
    if not isinstance(text, str):
        raise ValueError(f"question: expected a string, got {type(text).__name__}")
    key = _normalise(text)
    if key in _FIXED:
        return _FIXED[key]
    match = _WHICH.fullmatch(key)
    if match is not None:
        labels = match.groups()
        if all(label in _FINDING_OF_OPTION for label in labels) and len(set(labels)) == 3:
            return ParsedQuestion("which", None, tuple(_FINDING_OF_OPTION[label] for label in labels))
    raise ValueError(f"question: {text!r} is not a synthetic VQA template question (see shovir.data.phantom.questions)")


def true_answer(parsed: ParsedQuestion, truth: GroundTruth) -> str:
    """The correct option of a (parsed) template question for a case's ground truth.

    >>> truth = GroundTruth(frozenset({"Pleural Effusion", "Cardiomegaly"}), sides={"Pleural Effusion": frozenset({-1, 1})})
    >>> [true_answer(parse_question(question_text(t, "Pleural Effusion")), truth) for t in ("presence", "absence", "side")]
    ['yes', 'no', 'both']
    >>> true_answer(ParsedQuestion("which", None, ("Edema", "Cardiomegaly", "Fracture")), truth)
    'cardiomegaly'
    """
    kind, finding, candidates = parsed
    if kind == "presence":
        return "yes" if finding in truth.present else "no"
    if kind == "absence":
        return "no" if finding in truth.present else "yes"
    if kind == "side":
        if finding not in truth.present:
            return "neither"
        sides = frozenset(truth.sides.get(str(finding), ())) - {0}
        if sides not in _SIDE_NAME:
            raise ValueError(f"finding: {finding!r} has no lateral appearance (sides {sorted(sides)}); ask side "
                             f"questions about {', '.join(LATERAL_FINDINGS)} only")
        return _SIDE_NAME[sides]
    if kind == "which":
        hits = [name for name in candidates if name in truth.present]
        if len(hits) > 1:
            raise ValueError(f"candidates: {hits} are all present; a which question offers at most one present finding")
        return _OPTION_OF[hits[0]] if hits else NONE_OF_THESE
    raise ValueError(f"question_type: {kind!r} is not one of {', '.join(QUESTION_TYPES)}")


def _make(kind: str, finding: str | None, truth: GroundTruth, candidates: Sequence[str] = ()) -> Question:
    parsed = ParsedQuestion(kind, finding, tuple(candidates))
    answer = true_answer(parsed, truth)
    if kind == "which":
        finding = next((name for name in candidates if name in truth.present), "")
    return Question(kind, str(finding), question_text(kind, finding if kind != "which" else None, candidates),
                    question_options(kind, candidates), answer, tuple(candidates))


def sample_questions(case: Case, truth: GroundTruth | None = None) -> list[Question]:
    """The :data:`QUESTIONS_PER_IMAGE` questions of a case (see the module docstring), drawn
    from ``stable_rng(case.seed, "questions", case.index)``.

    >>> qs = sample_questions(sample_case(1))
    >>> [(q.question_type, q.finding, q.answer) for q in qs]     # right pneumothorax, left rib fracture
    [('presence', 'Cardiomegaly', 'no'), ('absence', 'Atelectasis', 'yes'), ('absence', 'Enlarged Cardiomediastinum', 'yes'), ('side', 'Pneumothorax', 'right'), ('which', 'Pneumothorax', 'pneumothorax')]
    >>> qs[4].question, qs[4].options
    ('Which of these findings does this chest X-ray show: pneumothorax, lung lesion or lung opacity?', ('pneumothorax', 'lung lesion', 'lung opacity', 'none of these'))
    """
    truth = case_truth(case) if truth is None else truth
    rng = stable_rng(case.seed, "questions", case.index)
    present = [name for name in FINDINGS if name in truth.present]
    absent = [name for name in FINDINGS if name not in truth.present]
    questions: list[Question] = []
    used: set[str] = set()
    for _ in range(_CLOSED_PER_IMAGE):
        # three uniforms per slot whatever the branch, so one slot's choice never shifts the next's draws
        u_group, u_pick, u_phrase = rng.random(3)
        present_left = [name for name in present if name not in used]
        absent_left = [name for name in absent if name not in used]
        pool = present_left if present_left and (not absent_left or u_group < 0.5) else absent_left
        finding = pool[int(u_pick * len(pool))]
        used.add(finding)
        questions.append(_make("presence" if u_phrase < 0.5 else "absence", finding, truth))
    u_pick = rng.random()
    lateral = [name for name in LATERAL_FINDINGS if name in truth.present] or list(LATERAL_FINDINGS)
    questions.append(_make("side", lateral[int(u_pick * len(lateral))], truth))
    u_none, u_pick = rng.random(2)
    order = rng.permutation(3)
    if present and (u_none >= NONE_RATE or len(absent) < 3) and len(absent) >= 2:
        chosen = [present[int(u_pick * len(present))]]
        chosen += [absent[int(i)] for i in rng.choice(len(absent), 2, replace=False)]
    elif len(absent) >= 3:
        chosen = [absent[int(i)] for i in rng.choice(len(absent), 3, replace=False)]
    else:  # not reachable with the phantom's scenarios (at most 9 findings at once); kept total
        raise ValueError(f"case {case.image_id}: {len(present)} present findings leave too few distractors")
    questions.append(_make("which", None, truth, [chosen[int(i)] for i in order]))
    return questions


def answer_priors(n_images: int = 2000, seed: int = 7, n_patients: int | None = None) -> dict[str, Any]:
    """Answer shares of the first ``n_images`` images of ``seed`` (no rendering: cases only).

    Returns ``n_questions``, ``n_by_type`` (questions per type), ``by_type`` (type → answer →
    share, answers of which questions pooled as ``"finding"`` or ``"none of these"``),
    ``closed_yes`` (P(yes) over presence and absence questions) and ``absent_accuracy`` (accuracy
    of :data:`ABSENT_ANSWERS`).

    >>> priors = answer_priors(n_images=40)
    >>> priors["n_questions"], sorted(priors["by_type"])
    (200, ['absence', 'presence', 'side', 'which'])
    """
    if isinstance(n_images, bool) or not isinstance(n_images, int) or n_images < 1:
        raise ValueError(f"n_images must be an integer >= 1, got {n_images!r}")
    counts: dict[str, Counter] = {kind: Counter() for kind in QUESTION_TYPES}
    absent_right = 0
    total = 0
    for index in range(n_images):
        for q in sample_questions(sample_case(index, seed=seed, n_patients=n_patients)):
            answer = q.answer if q.question_type != "which" or q.answer == NONE_OF_THESE else "finding"
            counts[q.question_type][answer] += 1
            absent_right += q.answer == ABSENT_ANSWERS[q.question_type]
            total += 1
    by_type = {kind: {a: n / sum(c.values()) for a, n in sorted(c.items())} for kind, c in counts.items() if c}
    closed = counts["presence"] + counts["absence"]
    closed_yes = (counts["presence"]["yes"] + counts["absence"]["yes"]) / max(1, sum(closed.values()))
    return {"n_questions": total, "n_by_type": {kind: sum(c.values()) for kind, c in counts.items()},
            "by_type": by_type, "closed_yes": closed_yes, "absent_accuracy": absent_right / total}
