"""Reading what the ICARE agents write: multiple-choice questions and single-letter answers.

:func:`parse_mcqs` reads the question-writing reply of ICARE §3.2 tolerantly. Judges drift from
the requested layout (``**1: question**``, ``A) ...``, ``Answer: X``), so it accepts

* numbering as ``1:``, ``1.``, ``1)``, ``Q1:``, ``Question 1:``, or none (a line ending in ``?``);
* bold, italics, headings and bullets around any line (``**``, ``__``, ``#``, ``-``);
* options as ``A)``, ``A.``, ``A:``, ``(A)``, ``[A]``, ``A -`` (either case);
* the key as ``Answer: B``, ``Correct answer: (B)``, ``Answer: B) Absent`` or the option's text;
* stray text anywhere (preambles, explanations), which is skipped.

An item counts only when it has a question, exactly four options lettered A–D with distinct
non-empty texts, and a key naming one of them; anything else is *incomplete* and counted, never
guessed. :func:`normalize_answer` turns an answering reply into a letter, or ``None`` when no
single letter can be read (a failure, never an answer).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["MCQ", "ParsedMCQs", "normalize_answer", "parse_mcqs", "question_key"]

LETTERS = ("A", "B", "C", "D")

_DECORATION = re.compile(r"^(?:[#>\s]*)(?:[-*•]\s+)?")
_EMPHASIS = re.compile(r"\*\*|__|(?<!\w)\*(?!\s)|(?<=\S)\*(?!\w)|`")
_NUMBERED = re.compile(r"^(?:q(?:uestion)?\s*)?\d{1,3}\s*[:.)\-]\s*(?P<text>.+)$", re.I)
_QUESTION_WORD = re.compile(r"^q(?:uestion)?\s*[:.\-]\s*(?P<text>.+)$", re.I)
_OPTION = re.compile(r"^[(\[]?(?P<letter>[A-Ea-e])\s*(?:[).:\]]|\s-)\s*(?P<text>.*\S)?\s*$")
_ANSWER = re.compile(r"^(?:the\s+)?(?:correct\s+)?(?:answer|key)(?:\s+is)?\s*[:\-]?\s*(?P<rest>.*)$", re.I)
_LEADING_LETTER = re.compile(r"^[(\[]?(?P<letter>[A-Da-d])\s*(?:[).:\]]|$|\s)")


@dataclass(frozen=True)
class MCQ:
    """One four-option question: its text, options (in A–D order) and the key letter.

    >>> MCQ("Is there an effusion?", ("Yes", "No", "Small", "Large"), "A").key_text
    'Yes'
    """

    question: str
    options: tuple[str, ...]
    key: str

    @property
    def key_text(self) -> str:
        return self.options[LETTERS.index(self.key)]

    def as_dict(self) -> dict[str, object]:
        return {"question": self.question, "options": list(self.options), "key": self.key}


@dataclass
class ParsedMCQs:
    """What :func:`parse_mcqs` read: the complete items, and how many started but were incomplete."""

    items: list[MCQ] = field(default_factory=list)
    incomplete: int = 0


def _clean(line: str) -> str:
    line = _EMPHASIS.sub("", line.strip())
    return _DECORATION.sub("", line, count=1).strip()


def _letter_or_text(rest: str, options: dict[str, str]) -> str | None:
    rest = _clean(rest).strip()
    match = _LEADING_LETTER.match(rest)
    if match:
        return match.group("letter").upper()
    folded = _fold(rest)
    hits = [letter for letter, text in options.items() if _fold(text) == folded]
    return hits[0] if len(hits) == 1 else None


def _fold(text: str) -> str:
    return re.sub(r"[\s.,;:!?\"']+", " ", text.casefold()).strip()


def question_key(question: str) -> str:
    """The form duplicate questions are compared in: case-folded, punctuation and spaces collapsed.

    >>> question_key("Is there a pleural effusion?") == question_key("  is there a Pleural effusion ")
    True
    """
    return _fold(question)


def parse_mcqs(text: str) -> ParsedMCQs:
    """The complete four-option questions in a question-writing reply, in order (see the module
    docstring for what is accepted). Duplicates are kept here; the pipeline removes them.

    >>> reply = '''Here are the questions:
    ...
    ... **1: Is there a pleural effusion?**
    ... A) Yes, on the left
    ... B) Yes, on the right
    ... C) No
    ... D) Cannot be determined
    ... Answer: A
    ...
    ... 2. What is the heart size?
    ... (A) Normal  (B) Enlarged
    ... Answer: B
    ...
    ... Question 3: Which lobe has the opacity?
    ... a. Right upper lobe
    ... b. Right lower lobe
    ... c. Left upper lobe
    ... d. Left lower lobe
    ... **Correct answer: (d)**
    ... Explanation: the report says left base.'''
    >>> parsed = parse_mcqs(reply)
    >>> [(q.question, q.key) for q in parsed.items], parsed.incomplete
    ([('Is there a pleural effusion?', 'A'), ('Which lobe has the opacity?', 'D')], 1)
    """
    if not isinstance(text, str):
        raise ValueError(f"text: expected the judge's reply as a string, got {type(text).__name__}")
    parsed = ParsedMCQs()
    question: str | None = None
    options: dict[str, str] = {}
    broken = False

    def finish(key: str | None) -> None:
        nonlocal question, options, broken
        if question is not None:
            ok = (not broken and key is not None and sorted(options) == list(LETTERS)
                  and all(options[k] for k in LETTERS) and len({_fold(v) for v in options.values()}) == 4)
            if ok:
                parsed.items.append(MCQ(question, tuple(options[k] for k in LETTERS), key))  # type: ignore[arg-type]
            else:
                parsed.incomplete += 1
        question, options, broken = None, {}, False

    for raw in text.splitlines():
        line = _clean(raw)
        if not line:
            continue
        answer = _ANSWER.match(line)
        if answer and question is not None and options:
            finish(_letter_or_text(answer.group("rest"), options))
            continue
        option = _OPTION.match(line)
        if option and question is not None:
            letter = option.group("letter").upper()
            body = (option.group("text") or "").strip()
            if letter == "E" or letter in options:
                broken = True  # a fifth option, or a letter twice: not a four-option question
            else:
                options[letter] = body
            continue
        numbered = _NUMBERED.match(line) or _QUESTION_WORD.match(line)
        if numbered or line.endswith("?"):
            finish(None)  # a new question before the last one had its key
            question = (numbered.group("text") if numbered else line).strip()
            continue
        # stray text (preamble, explanation): skipped
    finish(None)
    return parsed


_ANSWER_ONLY = re.compile(r"^[(\[]?(?P<letter>[A-Da-d])[)\]]?[.):]?$")
_ANSWER_PHRASE = re.compile(
    r"^(?:the\s+)?(?:correct\s+|final\s+)?(?:answer|option|choice)(?:\s+is)?\s*[:\-]?\s*[(\[]?(?P<letter>[A-Da-d])(?![A-Za-z])",
    re.I)
_OPTION_FIRST = re.compile(r"^[(\[]?(?P<letter>[A-D])(?:[)\]]|[.):])\s*\S")


def normalize_answer(text: str | None, options: Sequence[str] | None = None) -> str | None:
    """The letter an answering reply chose, or ``None`` when none can be read (ICARE §3.3).

    Accepts ``"B"``, ``"b"``, ``"B."``, ``"B)"``, ``"(B)"``, ``"**B**"``, ``"Answer: B"``,
    ``"The answer is (B)"``, ``"B) Absent"`` and, when ``options`` are given, the option's own
    text. A reply naming no letter or an unclear one (``"A or B"``) is ``None``: the pipeline
    counts it as a failure, never as an answer.

    >>> [normalize_answer(t) for t in ["B", "b.", "(C)", "**D**", "Answer: A", "The answer is (b)", "C) Absent", "Option D"]]
    ['B', 'B', 'C', 'D', 'A', 'B', 'C', 'D']
    >>> [normalize_answer(t) for t in ["A or B", "I cannot tell", "", None, "a small effusion"]]
    [None, None, None, None, None]
    >>> normalize_answer("Absent.", ["Present", "Absent", "Uncertain", "Not mentioned"])
    'B'
    """
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"text: expected the judge's reply as a string or None, got {type(text).__name__}")
    lines = [_clean(line) for line in text.strip().splitlines() if _clean(line)]
    if not lines:
        return None
    first = lines[0]
    for pattern in (_ANSWER_ONLY, _ANSWER_PHRASE, _OPTION_FIRST):
        match = pattern.match(first)
        if match:
            return match.group("letter").upper()
    if options is not None:
        folded = _fold(first)
        hits = [LETTERS[i] for i, option in enumerate(options[:4]) if _fold(option) == folded]
        if len(hits) == 1:
            return hits[0]
    return None
