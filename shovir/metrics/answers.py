"""Answer extraction, normalisation and matching for the VQA protocols.

Every accuracy, flip and invariance count in the suite (Beyond Accuracy §3.4, Algorithm 1
``ExtractAnswer`` and ``1[a = y]``; ModaLens §2 "answer changes") compares two answers through
this module, so the same rule decides "correct", "changed" and "flipped" everywhere.

The canonical form of an answer (:func:`canonical_answer`) is built in three steps:

1. **Normalise** (:func:`normalize_answer`): Unicode NFKC, case-fold, every run of punctuation,
   symbols or underscores becomes one space, the English articles *a*, *an*, *the* are dropped,
   whitespace is collapsed (the SQuAD / VQA convention; an answer made only of articles keeps
   them). ``"The Left  lung."`` → ``"left lung"``.
   A leading "Answer:" / "The answer is" / "Final answer:" is dropped first.
2. **Resolve options** (:func:`resolve_option`), only when the question lists options: the exact
   option text (after normalisation) wins; otherwise an option letter -- ``"B"``, ``"(B)"``,
   ``"B."``, ``"b)"``, ``"Option B"``, ``"Answer: (B)"``, ``"The answer is B"``, or a letter
   followed by text, ``"B. Focal uptake"`` / ``"(B) Focal uptake"`` (the letter wins over the
   text) -- maps to the option at that position. Letters beyond the option list do not resolve.
3. **Yes/no** (only in a *yes/no context*, see :func:`is_yes_no_context`): the first word of
   the normalised answer decides: :data:`YES_WORDS` → ``"yes"``, :data:`NO_WORDS` → ``"no"``.
   So ``"Yes."``, ``"yes, there is"`` and ``"Present"`` are all ``"yes"``; ``"No"``,
   ``"None"``, ``"negative"`` and ``"Absent."`` are all ``"no"``. Outside a yes/no context
   ``"none"`` stays ``"none"`` (an open answer "none" is not the word "no").

A *yes/no context* is: the options contain a yes option and a no option; or, without options,
the reference answer is a single yes/no word; or, without options and reference (comparing two
predictions, as in ModaLens), both answers start with a yes/no word.

Non-string answers (``None``, NaN, numbers) raise ``ValueError`` naming the field and index; an
empty *prediction* is allowed (it is simply wrong) but an empty *reference* raises.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from typing import Sequence

import numpy as np

__all__ = [
    "YES_WORDS",
    "NO_WORDS",
    "normalize_answer",
    "extract_answer",
    "extract_rationale",
    "resolve_option",
    "is_yes_no_context",
    "canonical_answer",
    "answers_match",
    "answers_agree",
    "check_answers",
    "per_item_options",
    "match_many",
    "agree_many",
]

YES_WORDS: frozenset[str] = frozenset({"yes", "yeah", "yep", "yup", "true", "correct", "affirmative", "positive", "present"})
"""First words read as "yes" in a yes/no context."""

NO_WORDS: frozenset[str] = frozenset({"no", "nope", "false", "incorrect", "negative", "none", "absent"})
"""First words read as "no" in a yes/no context ("not" is left out: "not sure" is no answer)."""

_ARTICLES = frozenset({"a", "an", "the"})
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.IGNORECASE | re.DOTALL)
_THINK_TAG = re.compile(r"<think>(.*?)(?:</think>|$)", re.IGNORECASE | re.DOTALL)
_ANY_ANSWER_BLOCK = re.compile(r"<answer>.*?(?:</answer>|$)", re.IGNORECASE | re.DOTALL)
_LEAD_IN = re.compile(
    r"^\s*(?:the\s+)?(?:correct\s+|final\s+)?(?:answer|option|choice)\s*(?:is\s*)?(?:[:\-]\s*)?(?:option\s+|choice\s+)?",
    re.IGNORECASE,
)
_ANSWER_LEAD_IN = re.compile(r"^\s*(?:the\s+)?(?:correct\s+|final\s+)?answer\s*(?:is\b|:|-)\s*", re.IGNORECASE)
_BARE_LETTER = re.compile(r"\(?([A-Za-z])\)?[.:)]?")
_LETTER_AND_TEXT = re.compile(r"(?:\(([A-Z])\)|([A-Z])[.:)])\s*(\S.*)", re.DOTALL)

Options = Sequence[str] | None


def _is_nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _require_str(value: object, field: str, index: int | None = None) -> str:
    if isinstance(value, str):
        return value
    where = f" at index {index}" if index is not None else ""
    what = "NaN" if _is_nan(value) else f"{type(value).__name__} {value!r}"
    raise ValueError(f"{field}: expected a string answer{where}, got {what}")


def normalize_answer(text: str) -> str:
    """Normalise an answer for comparison: NFKC, case-fold, punctuation → space, drop articles,
    collapse whitespace (module docstring, step 1).

    >>> normalize_answer("  The Left-Upper  Lobe. ")
    'left upper lobe'
    >>> normalize_answer("Yes, there is."), normalize_answer("A")
    ('yes there is', 'a')
    """
    return _normalize(_require_str(text, "answer"))


@functools.lru_cache(maxsize=1 << 16)
def _normalize(text: str) -> str:
    # answers repeat (a benchmark has a handful of distinct ones): each is normalised once
    words = _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split()
    kept = [word for word in words if word not in _ARTICLES]
    return " ".join(kept or words)  # an answer that is only an article ("A") keeps it


def extract_answer(output: str) -> str:
    """The answer of a structured output ``<think>…</think> <answer>…</answer>`` (Beyond
    Accuracy §3.5; Algorithm 1 ``ExtractAnswer``): the text of the last ``<answer>`` block, or
    the whole output, stripped, when it has no such block. An unclosed final block runs to the end.

    >>> extract_answer("<think>The mass is spiculated.</think> <answer> Yes </answer>")
    'Yes'
    >>> extract_answer("no")
    'no'
    """
    output = _require_str(output, "output")
    blocks = _ANSWER_TAG.findall(output)
    return (blocks[-1] if blocks else output).strip()


def extract_rationale(output: str) -> str:
    """The rationale of a structured output (Algorithm 1 ``ExtractRationale``): the ``<think>``
    blocks joined by newlines, or, without one, the output with its ``<answer>`` blocks removed.

    >>> extract_rationale("<think>Opacity in the left base.</think><answer>B</answer>")
    'Opacity in the left base.'
    >>> extract_rationale("There is a small effusion. <answer>yes</answer>")
    'There is a small effusion.'
    """
    output = _require_str(output, "output")
    blocks = _THINK_TAG.findall(output)
    if blocks:
        return "\n".join(block.strip() for block in blocks)
    return _ANY_ANSWER_BLOCK.sub(" ", output).strip()


def resolve_option(text: str, options: Options) -> str | None:
    """The option that ``text`` designates, or ``None`` (module docstring, step 2).

    >>> opts = ["Axial", "Focal uptake pattern", "A. fumigatus"]
    >>> [resolve_option(t, opts) for t in ["B", "(b)", "Option B", "answer: C.", "a. fumigatus", "B. Focal"]]
    ['Focal uptake pattern', 'Focal uptake pattern', 'Focal uptake pattern', 'A. fumigatus', 'A. fumigatus', 'Focal uptake pattern']
    >>> resolve_option("D", opts) is None
    True
    """
    text = _require_str(text, "answer")
    if not options:
        return None
    stripped = _LEAD_IN.sub("", text.strip(), count=1).strip()
    candidates = {normalize_answer(text), normalize_answer(stripped)} - {""}
    for option in options:
        if normalize_answer(option) in candidates:
            return option
    match = _BARE_LETTER.fullmatch(stripped)
    letter = match.group(1).upper() if match else None
    if letter is None:
        match = _LETTER_AND_TEXT.fullmatch(stripped)
        if match:
            letter = match.group(1) or match.group(2)
    if letter is not None:
        position = ord(letter) - ord("A")
        if position < len(options):
            return options[position]
    return None


def _first_word(normalised: str) -> str:
    return normalised.split(" ", 1)[0] if normalised else ""


def _yes_no_word(normalised: str) -> str | None:
    first = _first_word(normalised)
    if first in YES_WORDS:
        return "yes"
    if first in NO_WORDS:
        return "no"
    return None


def is_yes_no_context(options: Options = None, reference: str | None = None, answers: Sequence[str] = ()) -> bool:
    """Whether answers are read as yes/no (module docstring): options with a yes and a no
    option; else a reference that is one yes/no word; else every one of ``answers`` starting
    with a yes/no word.

    >>> is_yes_no_context(["Yes", "No"]), is_yes_no_context(reference="No."), is_yes_no_context(reference="none found")
    (True, True, False)
    >>> is_yes_no_context(answers=["Yes, there is", "no"]), is_yes_no_context(answers=["yes", "left"])
    (True, False)
    """
    if options:
        words = {_yes_no_word(normalize_answer(option)) for option in options}
        return {"yes", "no"} <= words
    if reference is not None:
        normalised = normalize_answer(reference)
        return " " not in normalised and _yes_no_word(normalised) is not None
    return bool(answers) and all(_yes_no_word(normalize_answer(a)) is not None for a in answers)


def canonical_answer(text: str, options: Options = None, yes_no: bool = False) -> str:
    """The canonical form of ``text`` (module docstring, steps 1-3); two answers are the same
    answer exactly when their canonical forms are equal.

    >>> canonical_answer("(B)", ["Axial", "Coronal"]), canonical_answer("Yes, there is.", yes_no=True)
    ('coronal', 'yes')
    >>> canonical_answer("None", yes_no=True), canonical_answer("None"), canonical_answer("Answer: Left lung")
    ('no', 'none', 'left lung')
    """
    text = _require_str(text, "answer")
    if options is not None and not isinstance(options, tuple):
        options = tuple(options)
    if options is not None and not all(isinstance(option, str) for option in options):
        return _canonical.__wrapped__(text, options, bool(yes_no))  # unhashable: resolve_option names the problem
    return _canonical(text, options, bool(yes_no))


@functools.lru_cache(maxsize=1 << 16)
def _canonical(text: str, options: tuple[str, ...] | None, yes_no: bool) -> str:
    resolved = resolve_option(text, options)
    if resolved is None:
        resolved = _ANSWER_LEAD_IN.sub("", text, count=1)
    normalised = normalize_answer(resolved)
    if yes_no:
        word = _yes_no_word(normalised)
        if word is not None:
            return word
    return normalised


def answers_match(prediction: str, reference: str, options: Options = None) -> bool:
    """Whether ``prediction`` is the reference answer: ``1[a = y]`` of Beyond Accuracy §3.4 /
    Algorithm 1, on canonical forms (yes/no context decided by the options or the reference).

    Raises ``ValueError`` when the reference is empty or, with options, designates none of them.

    >>> answers_match("Yes, there is a mass.", "yes"), answers_match("negative", "No")
    (True, True)
    >>> answers_match("Option B", "Coronal", ["Axial", "Coronal"]), answers_match("A", "Coronal", ["Axial", "Coronal"])
    (True, False)
    """
    return bool(match_many([prediction], [reference], None if options is None else [list(options)])[0])


def answers_agree(first: str, second: str, options: Options = None, reference: str | None = None) -> bool:
    """Whether two predictions are the same answer (``a_real = a_shuffle`` of Beyond Accuracy
    §3.4-3.5; "answer unchanged" of ModaLens §2), on canonical forms.

    >>> answers_agree("Yes.", "yes, it is"), answers_agree("yes", "No"), answers_agree("B", "Coronal", ["Axial", "Coronal"])
    (True, False, True)
    """
    refs = None if reference is None else [reference]
    return bool(agree_many([first], [second], None if options is None else [list(options)], refs)[0])


def check_answers(values: Sequence[object], field: str, allow_empty_text: bool = True) -> list[str]:
    """Validate a sequence of answers: non-empty, every item a string (``ValueError`` naming
    ``field`` and the index otherwise). With ``allow_empty_text=False`` an answer that
    normalises to nothing also raises.

    >>> check_answers(["yes", "no"], "predictions")
    ['yes', 'no']
    >>> check_answers(["yes", float("nan")], "predictions")
    Traceback (most recent call last):
    ...
    ValueError: predictions: expected a string answer at index 1, got NaN
    """
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{field}: expected a sequence of answers, got a single {type(values).__name__}")
    try:
        items = list(values)
    except TypeError:
        raise ValueError(f"{field}: expected a sequence of answers, got {type(values).__name__}") from None
    if not items:
        raise ValueError(f"{field}: empty; at least one answer is needed")
    if set(map(type, items)) == {str}:  # the common case, checked in one pass at C speed
        if not allow_empty_text:
            for value in dict.fromkeys(items):  # answers repeat: each distinct one is normalised once
                if not _normalize(value):
                    raise ValueError(f"{field}: answer at index {items.index(value)} is empty after normalisation ({value!r})")
        return items
    for index, value in enumerate(items):
        _require_str(value, field, index)
        if not allow_empty_text and not normalize_answer(value):
            raise ValueError(f"{field}: answer at index {index} is empty after normalisation ({value!r})")
    return items


def per_item_options(options: object, n: int, field: str = "options") -> list[tuple[str, ...] | None]:
    """Broadcast ``options`` to one tuple (or ``None``) per item: ``None`` (open questions), one
    list of strings shared by all items, or one list (or ``None``/empty) per item.

    >>> per_item_options(["yes", "no"], 2)
    [('yes', 'no'), ('yes', 'no')]
    >>> per_item_options([["a", "b"], None], 2)
    [('a', 'b'), None]
    """
    if options is None:
        return [None] * n
    if isinstance(options, (str, bytes)):
        raise ValueError(f"{field}: expected a list of option strings or one list per item, got a string")
    if isinstance(options, dict) or not hasattr(options, "__iter__"):
        raise ValueError(f"{field}: expected a list of option strings or one list per item, got {type(options).__name__}")
    items = list(options)  # type: ignore[arg-type]
    if items and all(isinstance(item, str) for item in items):
        return [tuple(items)] * n
    if len(items) != n:
        raise ValueError(f"{field}: expected one option list per item ({n}), got {len(items)}")
    out: list[tuple[str, ...] | None] = []
    for index, item in enumerate(items):
        if item is None:
            out.append(None)
            continue
        if isinstance(item, (str, bytes, dict)) or not isinstance(item, (list, tuple, np.ndarray)) \
                or not all(isinstance(option, str) for option in item):
            raise ValueError(f"{field}: item {index} must be a list of option strings (or None for an open question), "
                             f"got {item!r:.60}")
        out.append(tuple(item) if len(item) else None)
    return out


def _canonical_references(
    references: Sequence[str], options: list[tuple[str, ...] | None], field: str
) -> tuple[list[str], list[bool]]:
    """Each checked reference's canonical form and yes/no context (raising when, with options,
    it designates none of them); worked out once per distinct (reference, options)."""
    keys: dict[tuple[str, tuple[str, ...] | None], tuple[str, bool]] = {}
    canon, yes_no = [], []
    for index, (reference, opts) in enumerate(zip(references, options)):
        key = keys.get((reference, opts))
        if key is None:
            if opts is not None and resolve_option(reference, opts) is None:
                raise ValueError(f"{field}: reference {reference!r} at index {index} is none of its options {list(opts)!r}")
            context = is_yes_no_context(opts, reference)
            key = keys[(reference, opts)] = (canonical_answer(reference, opts, context), context)
        canon.append(key[0])
        yes_no.append(key[1])
    return canon, yes_no


def _matches(
    predictions: list[str], canon: list[str], yes_no: list[bool], options: list[tuple[str, ...] | None]
) -> np.ndarray:
    """``1[a = y]`` of checked predictions against :func:`_canonical_references` keys."""
    # predictions are checked strings and options tuples of strings: the memoised form directly
    return np.fromiter(map(lambda p, r, o, y: _canonical(p, o, y) == r, predictions, canon, options, yes_no),
                       dtype=bool, count=len(predictions))


def match_many(
    predictions: Sequence[str],
    references: Sequence[str],
    options: object = None,
    field: str = "predictions",
    reference_field: str = "references",
) -> np.ndarray:
    """Vectorised :func:`answers_match`: a boolean array, one entry per item.

    >>> match_many(["Yes.", "B", "lung"], ["yes", "Coronal", "liver"], [None, ["Axial", "Coronal"], None]).tolist()
    [True, True, False]
    """
    predictions = check_answers(predictions, field)
    references = check_answers(references, reference_field, allow_empty_text=False)
    if len(predictions) != len(references):
        raise ValueError(f"{field}: {len(predictions)} answers but {reference_field} has {len(references)}")
    opts = per_item_options(options, len(references))
    refs, yes_no = _canonical_references(references, opts, reference_field)
    return _matches(predictions, refs, yes_no, opts)


def agree_many(
    first: Sequence[str],
    second: Sequence[str],
    options: object = None,
    references: Sequence[str] | None = None,
    fields: tuple[str, str] = ("first", "second"),
) -> np.ndarray:
    """Vectorised :func:`answers_agree`: a boolean array, one entry per pair. The yes/no context
    of each pair comes from its options, else its reference, else the pair itself.

    >>> agree_many(["Yes.", "no", "left"], ["yes it is", "None", "Left."]).tolist()
    [True, True, True]
    """
    first = check_answers(first, fields[0])
    second = check_answers(second, fields[1])
    if len(first) != len(second):
        raise ValueError(f"{fields[1]}: {len(second)} answers but {fields[0]} has {len(first)}")
    opts = per_item_options(options, len(first))
    if references is not None:
        references = check_answers(references, "references", allow_empty_text=False)
        if len(references) != len(first):
            raise ValueError(f"references: {len(references)} answers but {fields[0]} has {len(first)}")
    contexts: dict[tuple[str | None, tuple[str, ...] | None], bool] = {}
    yes_no = []
    for index, o in enumerate(opts):
        reference = references[index] if references is not None and not o else None
        key = (reference, o)
        context = contexts.get(key)
        if context is None:
            context = contexts[key] = is_yes_no_context(o, reference) if (o or reference is not None) else None
        yes_no.append(context)
    return _agreements(first, second, opts, yes_no)


def _agreements(
    first: list[str], second: list[str], options: list[tuple[str, ...] | None], yes_no: list[bool | None]
) -> np.ndarray:
    """``a = a'`` of checked answer pairs; a ``None`` context is decided by the pair itself
    (:func:`is_yes_no_context` without options or reference)."""
    def agree(a: str, b: str, o: tuple[str, ...] | None, context: bool | None) -> bool:
        if context is None:
            context = _answer_yes_no(a) is not None and _answer_yes_no(b) is not None
        return _canonical(a, o, context) == _canonical(b, o, context)

    return np.fromiter(map(agree, first, second, options, yes_no), dtype=bool, count=len(first))


@functools.lru_cache(maxsize=1 << 16)
def _answer_yes_no(text: str) -> str | None:
    """The yes/no word an answer starts with, memoised: answers repeat across 10^6 rows."""
    return _yes_no_word(normalize_answer(text))
