"""Offline, rule-based CheXpert labeler: report text → 14 CheXpert codes, with explanations.

This is shovir's default labeler. It needs no weights, runs at thousands of reports per second on
one core and can say, for every code, which phrase and which rule produced it
(:meth:`RuleBasedLabeler.explain`). It follows the conventions of the CheXpert labeler (Irvin et
al., *CheXpert: A Large Chest Radiograph Dataset with Uncertainty Labels and Expert Comparison*,
AAAI 2019), whose output CheXbert (Smit et al. 2020) was trained to reproduce, but it is an
independent implementation: surface patterns over a normalised text instead of dependency parses.
Where CheXbert and the CheXpert labeler differ, and where shovir departs from either, the choice and
its reason are written down in ``docs/labeler_conventions.md`` (the labeler conventions document);
the hand-checked sentences of ``tests/data/labeler_eval_sentences.jsonl`` pin each one down.

Stages
------
1. **Normalisation.** Lower case; hyphens, tabs and newlines become spaces (so "ground-glass" is
   "ground glass"); a blank line is a sentence boundary. The text keeps its length, so every match
   points back into the original report.
2. **Mention extraction.** One pre-compiled regular expression (a character trie of every phrase,
   whole words only, longest phrase first) finds, in a single left-to-right pass, the *mentions*
   of the 13 observations, *cues* (negation, uncertainty, descriptors), clause *terminators* and
   *excluded* phrases ("pleural line" is not a line, "heart border" is not the heart size,
   "perihilar haziness" is not a lung opacity). Three kinds of mention exist:

   * *findings* ("pleural effusion", "cardiomegaly", "endotracheal tube"): positive unless a cue
     says otherwise;
   * *attributes* ("heart size", "cardiac silhouette", "mediastinal contours", "costophrenic
     angles"): they name a structure, not a finding, and count only with a descriptor —
     "enlarged"/"widened" (positive), "normal"/"not enlarged"/"upper limits of normal" (negative),
     or, following CheXpert, "stable"/"unchanged"/"borderline" and a size hedged between normal and
     enlarged ("upper limits normal or mildly enlarged") (uncertain); a bare attribute is not a
     mention;
   * *other findings* outside the 13 classes (emphysema, granuloma, scoliosis, hernia, pericardial
     effusion, ...): they have no column but, as in CheXpert, a positive or uncertain one rules out
     *No Finding*.

3. **Scope.** A report is cut into sentences (".", "?", "!", ";", ":", blank lines) and sentences
   into *segments* at contrastive words ("but", "however", "although", "except", "which", ...),
   at "and the"/"and there"/", the ..."/", there ..." clause starts, before a cue that follows a comma ("no effusion,
   possible pneumonia") and before "no change in"-type phrases. A hedge or descriptor after a comma
   does not start a segment when it only modifies one member of a negated list that goes on
   ("No focal consolidation, suspicious opacity, pleural effusion, or pneumothorax": the list is
   still open, or a comma and another member follow), so the "no" reaches every member, as
   CheXpert's negation-before-uncertainty order has it. A cue acts only inside its segment:

   * segment-wide forward cues ("no", "without", "negative for", "free of", "rather than",
     "resolution of", "no new", "cannot exclude", "suspicious for", "concerning for", "may
     represent", ...) apply to every later mention of the segment, so "No pleural effusion or
     pneumothorax" negates both;
   * adjective-like cues ("possible", "likely", "questionable", "normal", "resolved", "may", ...)
     apply to the next mention when only modifiers stand between them ("possible right lower lobe
     pneumonia"), otherwise backward to the previous mention ("pneumonia is possible");
   * backward cues ("is not seen", "has resolved", "cannot be excluded", "within normal limits",
     ...) apply to the mention just before them, within a few words and without crossing a comma —
     or across a *coordinated subject*: "Heart size and pulmonary vascularity appear within normal
     limits", "The heart, mediastinum, and pulmonary vessels are normal" (members joined by "and"
     or commas, a few words each, then linking verbs) negate the structure that opens them.

   A cue reaching a mention also reaches the mentions listed with it ("A, B and C are not seen").

4. **Classification of a mention** (CheXpert order: pre-negation uncertainty, then negation, then
   uncertainty): a *pre-negation uncertainty* cue ("cannot be excluded", "not ruled out", "no
   new") gives **uncertain** (3) even though it contains a negation; otherwise a negation cue
   gives **negative** (2) — so "no suspicious nodule" is negative; otherwise an uncertainty cue,
   alternatives ("atelectasis, pneumonia or aspiration" — the whole "or" list; "opacity,
   atelectasis versus consolidation" — only the pair "versus" joins), a stability cue on a finding
   whose head noun is a structure ("the widened mediastinum is unchanged", "stable enlarged
   cardiac silhouette"; CheXpert's stable-silhouette rule; "stable cardiomegaly" stays positive) or
   a phrase that is uncertain by convention (CheXpert: "vascular congestion", "indistinctness" →
   Edema uncertain) give **uncertain** (3); otherwise **positive** (1). "Heart failure"/"CHF"
   mentioned as present also makes Cardiomegaly uncertain (a CheXpert exception).

   A *sign* ("blunting of the costophrenic angle", "the costophrenic angle is blunted") suggests a
   class without naming it: it gives its code (uncertain) only when its sentence does not mention
   the class explicitly. Otherwise the explicit mention decides — "blunting of the left
   costophrenic angle although no definite evidence of pleural effusion" is a negative effusion —
   and the sign counts as an other finding (it still rules out No Finding, as CheXpert's "blunt").
5. **Aggregation.** A class mentioned several times gets the highest code in the CheXpert order
   positive (1) > uncertain (3) > negative (2) > blank (0).
6. **No Finding** is 1 when the report is not empty and no class other than Support Devices (and
   no *other finding*) is positive or uncertain — the CheXpert rule; so "No acute
   cardiopulmonary process.", "Normal chest radiograph." or "Lungs are clear." give No Finding 1
   and nothing else. Otherwise it is 0 (never 2 or 3: the CheXbert No Finding head is binary).
   Empty or whitespace-only reports are all blank.

Deliberate choices where CheXpert is ambiguous or surprising (each with its reason in
``docs/labeler_conventions.md``): "rule out X"/"evaluate for X" (indication wording) is uncertain
while "X is ruled out"/"X is excluded" is negative; "X is unlikely" is uncertain, as CheXpert's
"less likely"; "likely X" is uncertain; "blunting of the costophrenic angle" alone is an uncertain
pleural effusion (a sign, not the finding), and "sharp costophrenic angles" a negative one;
"perihilar haziness" (an edema sign) is not a lung opacity; "density" alone is an *other finding*,
as in CheXpert, not a lung opacity; "No acute osseous abnormality" leaves Fracture blank and "the
lungs are clear" leaves Lung Opacity blank (CheXpert: no mention phrase); Support Devices follow
CheXpert's device list — tubes, lines, catheters, pacemakers and defibrillators, prosthetic valves,
hardware, coils, drains, ports — so sternotomy wires, surgical clips, staples and external
monitoring leads are not devices, while stents and pacing wires are; neutral wording that
contains a cue word is skipped ("tube in normal position", "nearly resolved effusion", "the tip is
not visualized", "effusion has not resolved").

Phrases are data: every list above lives in ``shovir/labelers/resources/rule_phrases.json``
(written for shovir, not copied from the CheXpert labeler; one phrase per array item, each
section documented), which :mod:`shovir.labelers.rule_phrases` reads once per process and
checks. This module holds the matcher; it exposes the file's tables as :data:`FINDINGS`,
:data:`ATTRIBUTES`, :data:`OTHER_FINDINGS`, :data:`EXCLUSIONS`, :data:`CUES` and
:data:`TERMINATORS`.

Known limits: no parser, so long-distance syntax (e.g. negation carried into a relative clause
without a terminator, or past a closed list: "no effusion or pneumothorax and mild cardiomegaly"
negates the cardiomegaly) follows the segment heuristics above; single newlines are treated as
spaces (hard-wrapped reports) unless ``newline_is_boundary=True``.

>>> labeler = RuleBasedLabeler()
>>> codes = labeler(["Mild cardiomegaly. No pleural effusion or pneumothorax. Possible pneumonia."])
>>> {CLASSES[i]: int(c) for i, c in enumerate(codes[0]) if c}
{'Cardiomegaly': 1, 'Pneumonia': 3, 'Pneumothorax': 2, 'Pleural Effusion': 2}
>>> codes = labeler(["No focal consolidation, suspicious pulmonary opacity, pleural effusion, or pneumothorax. "
...                  "Heart size and pulmonary vascularity appear within normal limits."])
>>> {CLASSES[i]: int(c) for i, c in enumerate(codes[0]) if c}
{'Cardiomegaly': 2, 'Lung Opacity': 2, 'Consolidation': 2, 'Pneumothorax': 2, 'Pleural Effusion': 2, 'No Finding': 1}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from shovir.labelers.rule_phrases import (
    ADJACENT,
    BACKWARD,
    DESCRIPTOR,
    FORWARD,
    NEGATION,
    NEXT,
    PRE_NEGATION_UNCERTAINTY,
    STABILITY,
    UNCERTAINTY,
    CueGroup,
    expand,
    load_phrases,
)
from shovir.labels import (
    BLANK,
    CLASSES,
    CODE_NAMES,
    NEGATIVE,
    NUM_CLASSES,
    POSITIVE,
    UNCERTAIN,
)

__all__ = [
    "ATTRIBUTES",
    "CUES",
    "EXCLUSIONS",
    "FINDINGS",
    "OTHER_FINDING",
    "OTHER_FINDINGS",
    "TERMINATORS",
    "Decision",
    "RuleBasedLabeler",
    "expand",
]

OTHER_FINDING = "Other finding"
"""Name used in explanations for findings outside the 13 classes (they only affect No Finding)."""

# ----------------------------------------------------------------------------------------------
# Phrase tables, from resources/rule_phrases.json (see shovir.labelers.rule_phrases for the
# "{a,b,}" pattern syntax and the checks). Phrases are lower case; hyphens are written as spaces
# (the text is normalised the same way).
# ----------------------------------------------------------------------------------------------

_PHRASES = load_phrases()

FINDINGS: dict[str, tuple[str, ...]] = _PHRASES.findings
"""Finding phrases per class: a match is a positive mention unless a cue says otherwise."""

ATTRIBUTES: dict[str, tuple[str, ...]] = _PHRASES.attributes
"""Structure phrases that count only with a descriptor ("enlarged", "normal", "stable", ...).
Keys may join two classes with "|"."""

OTHER_FINDINGS: tuple[str, ...] = _PHRASES.other_findings
"""Findings outside the 13 classes; positive or uncertain ones rule out No Finding (CheXpert)."""

EXCLUSIONS: tuple[str, ...] = _PHRASES.exclusions
"""Phrases that contain a mention or cue word but are neither; they are skipped."""

# Cue polarities and scopes.
_PREUNC, _NEG, _UNC, _STABLE, _POS = PRE_NEGATION_UNCERTAINTY, NEGATION, UNCERTAINTY, STABILITY, DESCRIPTOR
_FWD, _NEXT, _BWD, _ADJ = FORWARD, NEXT, BACKWARD, ADJACENT

CUES: tuple[CueGroup, ...] = _PHRASES.cues
"""Cue table: (phrases, polarity, scope, forward window, backward window, starts a segment)."""

TERMINATORS: tuple[str, ...] = _PHRASES.terminators
"""Words that end the scope of a cue (they start a new segment)."""

# ----------------------------------------------------------------------------------------------
# Compilation
# ----------------------------------------------------------------------------------------------

_M_FINDING, _M_ATTR, _CUE, _TERM, _EXCL = 0, 1, 2, 3, 4
_OTHER_INDEX = NUM_CLASSES  # internal column for other findings (affects No Finding only)
_NO_FINDING = CLASSES.index("No Finding")
_SUPPORT = CLASSES.index("Support Devices")
_CARDIOMEGALY = CLASSES.index("Cardiomegaly")
_RANK = (0, 3, 1, 2)  # CheXpert priority by code: blank < negative < uncertain < positive
_NAMES = CLASSES + (OTHER_FINDING,)  # index 14: other findings

# Mentions that are uncertain by convention (CheXpert post-negation uncertainty rules).
_INHERENTLY_UNCERTAIN = _PHRASES.inherently_uncertain
_STABILITY_UNCERTAIN = _PHRASES.stability_uncertain
_SIGNS = _PHRASES.signs
_HEART_FAILURE = _PHRASES.heart_failure
_ATTR_POSITIVE_CODE = {"Pleural Effusion": UNCERTAIN}  # blunted costophrenic angle: a sign, uncertain

_LIST_STOP = _PHRASES.list_stop_words
_OR_WORDS = _PHRASES.alternative_words
_PAIR_WORDS = _PHRASES.pairwise_alternative_words
_CONJUNCTIONS = frozenset(("and", "or", "nor", "and/or")) | _OR_WORDS | _PAIR_WORDS
_PREDICATE_WORDS = _PHRASES.linking_verbs | _PHRASES.subject_adverbs
_MEMBER_WORDS = _PHRASES.member_words
# words that end a coordinated subject ("heart size and pulmonary vascularity"): list stop words and
# the backward blockers other than the "and" that joins the members
_SUBJECT_STOP = (_LIST_STOP | frozenset(_PHRASES.backward_blockers)) - {"and"}
_NEXT_BLOCK = re.compile(r"[,;]|\b(?:" + "|".join(map(re.escape, _PHRASES.next_blockers)) + r")\b")
_BACK_BLOCK = re.compile(r"[,;]|\b(?:" + "|".join(map(re.escape, _PHRASES.backward_blockers)) + r")\b")
_NORMALISE = str.maketrans({"-": " ", "\t": " ", "\r": " ", "\n": " ", "\f": " ", "\v": " ", "\u2013": " ",
                            "\u2014": " ", "\u00a0": " "})
_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n")
# A period ends a sentence unless an abbreviation ends just before it or it sits in a decimal number.
# The period is matched first and the lookbehinds checked after it: tried at every position of the
# text, lookbehinds before a literal cost the labeler a third of its time.
_BREAK_PATTERN = (
    r"[!?;|]|:(?!\d)"
    r"|\." + "".join(rf"(?<!\b{re.escape(word)}\.)" for word in _PHRASES.abbreviations) + r"(?:(?!\d)|(?<!\d\.))"
    r"|,(?= +(?:and +)?(?:" + "|".join(map(re.escape, _PHRASES.clause_starts)) + r")\b)"
)


def _norm_phrase(phrase: str) -> str:
    return " ".join(phrase.lower().translate(_NORMALISE).split())


class _Entry:
    """What a matched phrase means."""

    __slots__ = ("kind", "classes", "polarity", "scope", "fwd", "bwd", "breaks", "inherent", "heart_failure",
                 "stable_uncertain", "sign", "modifier")

    def __init__(self, kind: int, classes: tuple[int, ...] = (), polarity: str = "", scope: str = "",
                 fwd: int = 0, bwd: int = 0, breaks: bool = False, inherent: int = POSITIVE,
                 heart_failure: bool = False, stable_uncertain: bool = False, sign: bool = False) -> None:
        self.kind = kind
        self.classes = classes
        self.polarity = polarity
        self.scope = scope
        self.fwd = fwd
        self.bwd = bwd
        self.breaks = breaks
        self.inherent = inherent
        self.heart_failure = heart_failure
        self.stable_uncertain = stable_uncertain  # names a structure: a stability cue makes it uncertain
        self.sign = sign  # suggests its class; yields to an explicit mention in the same sentence
        # a cue that can modify one member of a list: a hedge ("suspicious") or a descriptor ("large")
        self.modifier = kind == _CUE and polarity in (UNCERTAINTY, DESCRIPTOR) and scope in (NEXT, ADJACENT)


def _trie_regex(phrases: Iterable[str]) -> str:
    """A regular expression matching any of ``phrases``, longest first, via a character trie."""
    trie: dict = {}
    for phrase in phrases:
        node = trie
        for ch in phrase:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        end = "" in node
        branches = []
        for ch in sorted(k for k in node if k):
            atom = " +" if ch == " " else re.escape(ch)
            branches.append(atom + emit(node[ch]))
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if end:
            return ("(?:" + body + ")?") if len(branches) == 1 else body + "?"
        return body

    return emit(trie)


class Decision(NamedTuple):
    """One labeling decision, as returned by :meth:`RuleBasedLabeler.explain`.

    ``class_name`` is a CheXpert class (or :data:`OTHER_FINDING`, or ``"(excluded)"`` for a skipped
    phrase), ``code`` the code this mention gives (0-3), ``phrase`` the matched text, ``sentence``
    the sentence of the report it was found in, ``rule`` a plain-English reason and ``scope`` the
    clause (segment) whose cues decided the code — the stretch of the sentence between two
    terminators or boundaries, so "No focal consolidation, suspicious opacity, or effusion" shows
    that the "no" reached the effusion. ``scope`` is empty for the final, per-class decisions.
    """

    class_name: str
    code: int
    phrase: str
    sentence: str
    rule: str
    scope: str = ""


class _Item:
    __slots__ = ("start", "end", "entry", "phrase", "cues", "carried", "group", "rank", "alternative", "code", "sign")

    def __init__(self, start: int, end: int, entry: _Entry, phrase: str) -> None:
        self.start = start
        self.end = end
        self.entry = entry
        self.phrase = phrase
        self.cues: list = []  # windowed cues that reach this mention, with the side they are on
        self.carried: dict | None = None  # nearest segment-wide forward cue per polarity
        self.group = -1  # list group within the segment
        self.rank = 0  # position within the group
        self.alternative = False  # joined to a neighbour by "versus" (pairwise alternatives)
        self.code = BLANK  # the code this mention got (set when its segment is resolved)
        self.sign = entry.sign  # a sign of its class (a blunted costophrenic angle)


class RuleBasedLabeler:
    """Offline CheXpert labeler: reports → ``(n, 14)`` ``int8`` codes (0 blank, 1 positive,
    2 negative, 3 uncertain) in :data:`shovir.labels.CLASSES` order.

    Rules and conventions are described in the module docstring; :meth:`explain` shows, for one
    report, every matched phrase with its code and the rule that set it.

    Parameters
    ----------
    newline_is_boundary:
        Treat every newline as a sentence boundary (for bulleted reports without punctuation).
        By default a single newline is a space (hard-wrapped reports) and only a blank line ends a
        sentence.
    extra_findings:
        Additional finding phrases per class name, e.g. ``{"Lung Lesion": ["lung abscess"]}``;
        they use the same ``{a,b,}`` pattern syntax as :data:`FINDINGS`.

    >>> labeler = RuleBasedLabeler()
    >>> labeler(["No acute cardiopulmonary process."])[0].tolist()
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    >>> labeler(["Endotracheal tube in place. Small left pleural effusion."])[0, [9, 12, 13]].tolist()
    [1, 1, 0]
    """

    name = "rule"

    def __init__(self, newline_is_boundary: bool = False,
                 extra_findings: Mapping[str, Iterable[str]] | None = None) -> None:
        self.newline_is_boundary = bool(newline_is_boundary)
        table: dict[str, _Entry] = {}
        origin: dict[str, str] = {}

        def add(pattern: str, entry: _Entry, where: str) -> None:
            for phrase in expand(_norm_phrase(pattern)):
                if phrase in table:
                    old = table[phrase]
                    same_mention = old.kind == entry.kind and old.kind in (_M_FINDING, _M_ATTR)
                    if same_mention:  # one phrase naming two classes (hydropneumothorax)
                        merged = tuple(dict.fromkeys(old.classes + entry.classes))
                        table[phrase] = _Entry(old.kind, merged, inherent=old.inherent,
                                               heart_failure=old.heart_failure,
                                               stable_uncertain=old.stable_uncertain, sign=old.sign)
                        continue
                    raise ValueError(f"phrase {phrase!r} is both {origin[phrase]} and {where}")
                table[phrase] = entry
                origin[phrase] = where

        uncertain = {p for pat in _INHERENTLY_UNCERTAIN for p in expand(pat)}
        stable_uncertain = {p for pat in _STABILITY_UNCERTAIN for p in expand(pat)}
        signs = {p for pat in _SIGNS for p in expand(pat)}
        heart_failure = {p for pat in _HEART_FAILURE for p in expand(pat)}
        findings: dict[str, list[str]] = {name: list(phrases) for name, phrases in FINDINGS.items()}
        for name, phrases in (extra_findings or {}).items():
            if name not in CLASSES[:_NO_FINDING]:
                raise ValueError(f"extra_findings: unknown class {name!r}; expected one of: "
                                 + ", ".join(CLASSES[:_NO_FINDING]))
            if isinstance(phrases, str):
                raise ValueError(f"extra_findings[{name!r}]: expected a list of phrases, got a string")
            findings.setdefault(name, []).extend(phrases)
        for name, patterns in findings.items():
            index = CLASSES.index(name)
            for pattern in patterns:
                for phrase in expand(_norm_phrase(pattern)):
                    entry = _Entry(_M_FINDING, (index,), inherent=UNCERTAIN if phrase in uncertain else POSITIVE,
                                   heart_failure=phrase in heart_failure,
                                   stable_uncertain=phrase in stable_uncertain, sign=phrase in signs)
                    add(phrase, entry, f"a {name} finding")
        for names, patterns in ATTRIBUTES.items():
            indices = tuple(CLASSES.index(n) for n in names.split("|"))
            for pattern in patterns:
                add(pattern, _Entry(_M_ATTR, indices), f"a {names} attribute")
        for pattern in OTHER_FINDINGS:
            add(pattern, _Entry(_M_FINDING, (_OTHER_INDEX,)), "an other finding")
        for pattern in EXCLUSIONS:
            add(pattern, _Entry(_EXCL), "an exclusion")
        for phrases, polarity, scope, fwd, bwd, breaks in CUES:
            for pattern in phrases:
                add(pattern, _Entry(_CUE, polarity=polarity, scope=scope, fwd=fwd, bwd=bwd, breaks=breaks),
                    f"a {polarity} cue")
        for pattern in TERMINATORS:
            add(pattern, _Entry(_TERM), "a terminator")
        self._table = table
        self._regex = re.compile(r"(?P<b>" + _BREAK_PATTERN + r")|\b(?P<w>" + _trie_regex(table) + r")\b")

    # -- public API ----------------------------------------------------------------------------

    def __call__(self, reports: Sequence[str]) -> np.ndarray:
        """Label a batch of reports.

        Returns an ``int8`` array of shape ``(len(reports), 14)``. Raises ``ValueError`` for a
        single string (wrap it in a list) and for a non-string entry, naming its index.

        >>> RuleBasedLabeler()(["Heart size is normal.", ""]).tolist()[1]
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        """
        if isinstance(reports, (str, bytes)):
            raise ValueError("reports: expected a sequence of report strings, got a single string; "
                             "wrap it in a list")
        out = np.zeros((len(reports), NUM_CLASSES), dtype=np.int8)
        for i, report in enumerate(reports):
            if not isinstance(report, str):
                raise ValueError(f"reports[{i}]: expected a str, got {type(report).__name__}: {report!r:.60}")
            codes = self._label(report, None)
            if codes is not None:
                out[i] = codes
        return out

    def label(self, report: str) -> list[int]:
        """The 14 codes of one report as a list.

        >>> RuleBasedLabeler().label("Possible left lower lobe pneumonia.")[6]
        3
        """
        return self([report])[0].tolist()

    def explain(self, report: str) -> list[Decision]:
        """Why ``report`` gets its codes: one :class:`Decision` per matched phrase, in text order,
        then one per class with its final code (``rule`` starting with ``"final:"``), No Finding
        last. Each phrase's decision names the cue that set its code and, in ``scope``, the clause
        the cue acted in.

        >>> for d in RuleBasedLabeler().explain("No pleural effusion."):
        ...     print(d.class_name, d.code, repr(d.phrase), d.rule)
        Pleural Effusion 2 'pleural effusion' negative: negation cue 'no' before it in the clause
        Pleural Effusion 2 '' final: negative (highest of its mentions: positive > uncertain > negative)
        No Finding 1 '' final: no class other than Support Devices is positive or uncertain
        >>> for d in RuleBasedLabeler().explain("No effusion, suspicious opacity, or pneumothorax; possible nodule."):
        ...     if not d.rule.startswith("final"):
        ...         print(d.class_name, d.code, repr(d.scope))
        Pleural Effusion 2 'No effusion, suspicious opacity, or pneumothorax'
        Lung Opacity 2 'No effusion, suspicious opacity, or pneumothorax'
        Pneumothorax 2 'No effusion, suspicious opacity, or pneumothorax'
        Lung Lesion 3 'possible nodule'
        """
        if not isinstance(report, str):
            raise ValueError(f"report: expected a str, got {type(report).__name__}")
        decisions: list[Decision] = []
        codes = self._label(report, decisions)
        if codes is None:
            decisions.append(Decision("No Finding", BLANK, "", "", "final: empty report, every class blank"))
            return decisions
        for c in range(_NO_FINDING):
            if codes[c] != BLANK:
                decisions.append(Decision(CLASSES[c], int(codes[c]), "", "",
                                          f"final: {CODE_NAMES[int(codes[c])]} (highest of its mentions: "
                                          "positive > uncertain > negative)"))
        if codes[_NO_FINDING] == POSITIVE:
            rule = "final: no class other than Support Devices is positive or uncertain"
        else:
            blocking = [d.class_name for d in decisions
                        if d.code in (POSITIVE, UNCERTAIN) and d.class_name not in (CLASSES[_SUPPORT], "(excluded)")
                        and not d.rule.startswith("final")]
            rule = "final: 0 because of " + ", ".join(dict.fromkeys(blocking))
        decisions.append(Decision("No Finding", int(codes[_NO_FINDING]), "", "", rule))
        return decisions

    # -- engine --------------------------------------------------------------------------------

    def _normalise(self, report: str) -> str:
        text = report.lower()
        if len(text) != len(report):  # a few characters lower-case to two; keep offsets aligned
            text = "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in report)
        if "\n" in text:
            if self.newline_is_boundary:
                text = text.replace("\n", "|")
            else:
                text = _PARAGRAPH.sub(lambda m: "|" + " " * (len(m.group()) - 1), text)
        return text.translate(_NORMALISE)

    def _label(self, report: str, explain: list[Decision] | None) -> list[int] | None:
        if not report or report.isspace():
            return None
        text = self._normalise(report)
        table = self._table
        segments: list[list[_Item]] = []
        modifier_started: list[int] = []  # segments opened by a modifier after a comma ("no A, suspicious B, ...")
        spans: list[list[int]] | None = [] if explain is not None else None  # clause of each segment
        current: list[_Item] = []
        excluded: list[_Item] = []
        clause_start = 0
        for m in self._regex.finditer(text):
            phrase = m.group("w")
            if phrase is None:  # sentence boundary
                if current:
                    segments.append(current)
                    current = []
                    if spans is not None:
                        spans.append([clause_start, m.start()])
                if spans is not None:
                    clause_start = m.end()
                continue
            entry = table.get(phrase) or table[" ".join(phrase.split())]
            kind = entry.kind
            if kind == _TERM:
                if current:
                    segments.append(current)
                    current = []
                    if spans is not None:
                        spans.append([clause_start, m.start("w")])
                if spans is not None:
                    clause_start = m.start("w")
                continue
            start = m.start("w")
            if kind == _EXCL:
                if explain is not None:
                    excluded.append(_Item(start, m.end("w"), entry, phrase))
                continue
            if kind == _CUE and current and (entry.breaks or _comma_before(text, start)):
                segments.append(current)
                current = []
                if spans is not None:
                    spans.append([clause_start, start])
                    clause_start = start
                if entry.modifier:
                    modifier_started.append(len(segments))
            current.append(_Item(start, m.end("w"), entry, phrase))
        if current:
            segments.append(current)
            if spans is not None:
                spans.append([clause_start, len(text)])
        if modifier_started:
            segments, spans = _join_negated_lists(text, segments, spans, modifier_started)

        codes = [BLANK] * (NUM_CLASSES + 1)
        found: list[tuple[_Item, int, int, str, str]] | None = [] if explain is not None else None
        signs: list[tuple[_Item, int, int, str, str]] = []
        for k, segment in enumerate(segments):
            self._resolve(text, segment, codes, found, signs, _clause(report, spans[k]) if spans is not None else "")
        if signs:
            self._resolve_signs(text, segments, signs, codes, found)

        affirmed = any(codes[c] in (POSITIVE, UNCERTAIN) for c in range(NUM_CLASSES + 1)
                       if c != _SUPPORT and c != _NO_FINDING)
        codes[_NO_FINDING] = BLANK if affirmed else POSITIVE
        if explain is not None:
            rows = [(item.start, _NAMES[c], code, item.phrase, _sentence(report, text, item.start), rule, scope)
                    for item, c, code, rule, scope in found]
            rows += [(item.start, "(excluded)", BLANK, item.phrase, _sentence(report, text, item.start),
                      "excluded phrase: not a CheXpert observation", "") for item in excluded]
            rows.sort(key=lambda r: r[0])
            explain.extend(Decision(*row[1:]) for row in rows)
        return codes[:NUM_CLASSES]

    @staticmethod
    def _resolve_signs(text: str, segments: list[list[_Item]], signs: list[tuple[_Item, int, int, str, str]],
                       codes: list[int], found: list[tuple[_Item, int, int, str, str]] | None) -> None:
        """Fold the signs into ``codes``: a sign gives its code to its class unless its sentence
        mentions the class explicitly; then that mention decides and the sign is an other finding."""
        for item, c, code, rule, scope in signs:
            start, end = _sentence_span(text, item.start)
            explicit = any(start <= other.start < end and other.entry.kind != _CUE and not other.sign
                           and other.code != BLANK and c in other.entry.classes
                           for segment in segments for other in segment)
            target = c
            if explicit:
                target, code = _OTHER_INDEX, (code if code != NEGATIVE else BLANK)
                rule = (f"other finding: a sign of {CLASSES[c]} that yields to the explicit mention of {CLASSES[c]} "
                        "in the same sentence")
            if _RANK[code] > _RANK[codes[target]]:
                codes[target] = code
            if found is not None:
                found.append((item, target, code, rule, scope))

    @staticmethod
    def _resolve(text: str, segment: list[_Item], codes: list[int], found: list[tuple[_Item, int, int, str, str]] | None,
                 signs: list[tuple[_Item, int, int, str, str]], scope: str) -> None:
        """Decide every mention of one segment and fold it into ``codes``.

        Signs are not folded in but appended to ``signs`` (their code depends on the rest of their
        sentence, see :meth:`_resolve_signs`); every mention keeps its code in ``item.code``.
        """
        mentions = [item for item in segment if item.entry.kind != _CUE]
        if not mentions:
            return
        # list groups: consecutive mentions joined only by commas, conjunctions and modifiers
        groups: list[list[_Item]] = []
        group_or: list[bool] = []
        previous: _Item | None = None
        for item in segment:
            if item.entry.kind == _CUE:
                previous = None
                continue
            item.cues = []
            if previous is not None:
                joined, has_or, has_pair = _list_gap(text[previous.end:item.start])
                if joined:
                    item.group, item.rank = previous.group, len(groups[-1])
                    groups[-1].append(item)
                    group_or[-1] = group_or[-1] or has_or
                    if has_pair:
                        previous.alternative = item.alternative = True
                    previous = item
                    continue
            item.group, item.rank = len(groups), 0
            groups.append([item])
            group_or.append(False)
            previous = item
        # attach cues to mentions in one pass; segment-wide cues are carried as the nearest one per polarity
        count = len(segment)
        following: list[_Item | None] = [None] * count
        upcoming = None
        for position in range(count - 1, -1, -1):
            following[position] = upcoming
            if segment[position].entry.kind != _CUE:
                upcoming = segment[position]
        active: dict[str, _Item] = {}
        preceding: _Item | None = None
        for position, cue in enumerate(segment):
            entry = cue.entry
            if entry.kind != _CUE:
                cue.carried = dict(active) if active else None
                preceding = cue
                continue
            scope_kind = entry.scope
            if scope_kind == _FWD:
                active[entry.polarity] = cue
                continue
            target = None
            if scope_kind is _NEXT or scope_kind is _ADJ:
                after = following[position]
                if after is not None:
                    gap = text[cue.end:after.start]
                    if len(gap.split()) <= entry.fwd and not _NEXT_BLOCK.search(gap):
                        group = groups[after.group]
                        if entry.polarity not in (_POS, _STABLE) or any(
                                g.entry.kind == _M_ATTR or (entry.polarity is _STABLE and g.entry.stable_uncertain)
                                for g in group):
                            target = (group[after.rank:], "before")
            if target is None and (scope_kind is _BWD or scope_kind is _ADJ) and preceding is not None:
                gap = text[preceding.end:cue.start]
                members = groups[preceding.group][:preceding.rank + 1]
                if len(gap.split()) <= entry.bwd and not _BACK_BLOCK.search(gap):
                    target = (members, "after")
                elif any(g.entry.kind == _M_ATTR for g in members) and _coordinated_subject(gap):
                    # "Heart size and pulmonary vascularity appear within normal limits": the predicate is
                    # said of every member of the subject, the structure included
                    target = (members, "subject")
            if target is not None:
                for item in target[0]:
                    item.cues.append((cue, target[1]))
        # classify
        for item in mentions:
            entry = item.entry
            by = {}
            if item.carried:
                for polarity, cue in item.carried.items():
                    by[polarity] = (cue, "before")
            for cue, side in item.cues:
                by.setdefault(cue.entry.polarity, (cue, side))
            if _PREUNC in by:
                code, rule = UNCERTAIN, _because("uncertain", "pre-negation uncertainty", by[_PREUNC])
            elif _NEG in by:
                code, rule = NEGATIVE, _because("negative", "negation", by[_NEG])
            elif _UNC in by:
                code, rule = UNCERTAIN, _because("uncertain", "uncertainty", by[_UNC])
            elif (group_or[item.group] or item.alternative) and (entry.kind == _M_FINDING or _POS in by):
                code, rule = UNCERTAIN, "uncertain: listed as an alternative ('or'/'versus') with another finding"
            elif entry.kind == _M_ATTR:
                if _POS in by:
                    code = POSITIVE
                    rule = _because("positive", "abnormal descriptor", by[_POS])
                elif _STABLE in by:
                    code, rule = UNCERTAIN, _because("uncertain", "stability (CheXpert: a stable size/silhouette "
                                                     "is uncertain)", by[_STABLE])
                else:
                    code, rule = BLANK, "not counted: a structure named without a descriptor"
            elif entry.stable_uncertain and _STABLE in by:
                code, rule = UNCERTAIN, _because("uncertain", "stability (CheXpert: a stable or unchanged "
                                                 "mediastinum/silhouette is uncertain, even when enlarged)", by[_STABLE])
            elif entry.inherent == UNCERTAIN:
                code, rule = UNCERTAIN, "uncertain: this phrase is uncertain by CheXpert convention"
            else:
                code, rule = POSITIVE, "positive: no negation or uncertainty cue in its clause"
            item.code = code
            for c in entry.classes:
                this_code, this_rule = code, rule
                sign = entry.sign
                if code == POSITIVE and entry.kind == _M_ATTR and CLASSES[c] in _ATTR_POSITIVE_CODE:
                    this_code = _ATTR_POSITIVE_CODE[CLASSES[c]]
                    this_rule = rule.replace("positive:", "uncertain (a sign, not the finding):", 1)
                    item.sign = sign = True
                if sign:
                    signs.append((item, c, this_code, this_rule, scope))
                    continue
                if _RANK[this_code] > _RANK[codes[c]]:
                    codes[c] = this_code
                if found is not None:
                    found.append((item, c, this_code, this_rule, scope))
            if entry.heart_failure and code in (POSITIVE, UNCERTAIN):
                if _RANK[UNCERTAIN] > _RANK[codes[_CARDIOMEGALY]]:
                    codes[_CARDIOMEGALY] = UNCERTAIN
                if found is not None:
                    found.append((item, _CARDIOMEGALY, UNCERTAIN,
                                  "uncertain: heart failure implies possible cardiomegaly (CheXpert)", scope))


def _comma_before(text: str, start: int) -> bool:
    j = start - 1
    while j >= 0 and text[j] == " ":
        j -= 1
    return j >= 0 and text[j] == ","


def _list_gap(gap: str) -> tuple[bool, bool, bool]:
    """Whether two mentions separated by ``gap`` form a list, whether it offers alternatives
    ("or"), and whether these two are offered as a pair of alternatives ("versus")."""
    words = gap.replace(",", " ").replace(".", " ").split()
    if len(words) > 5:
        return False, False, False
    has_or = has_pair = False
    for word in words:
        if word in _LIST_STOP:
            return False, False, False
        if word in _OR_WORDS:
            has_or = True
        elif word in _PAIR_WORDS:
            has_pair = True
    return True, has_or, has_pair


def _coordinated_subject(gap: str) -> bool:
    """Whether ``gap`` (after a structure, before a backward cue) continues the structure's
    coordinated subject up to its predicate: ``" and pulmonary vascularity appear "``.

    Members start with "and" or a comma, have at most ``member_words`` words and no stop word; the
    linking verbs and adverbs of the predicate ("are", "appear", "otherwise") may close the gap.
    """
    words = gap.replace(",", " , ").split()
    while words and words[-1] in _PREDICATE_WORDS:
        words.pop()
    if len(words) < 2 or words[0] not in (",", "and"):
        return False
    size = 0
    for word in words:
        if word == "," or word == "and":
            if size == 0 and word == "and" and words[0] == ",":  # ", and" opens one member
                continue
            size = 0
            continue
        if word in _SUBJECT_STOP:
            return False
        size += 1
        if size > _MEMBER_WORDS:
            return False
    return size > 0


def _continues_negated_list(text: str, previous: list[_Item], segment: list[_Item], following: list[_Item]) -> bool:
    """Whether ``segment``, opened by a modifier after a comma, continues a list that a forward
    negation opened in ``previous``: "No focal consolidation, | suspicious opacity, effusion, or
    pneumothorax" (one negated list) rather than "No effusion, | possible pneumonia" (two clauses).

    It does when the negated list is still open (its last members are joined by commas only and
    there are two of them), or when the modified member is followed by a comma and another member
    that is unmodified or that a conjunction closes the list after ("..., possible C, or D").
    ``following`` holds the items of the next segments that modifiers broke off the same way.
    """
    if previous[-1].entry.kind == _CUE:
        return False
    trailing: list[_Item] = []
    counting = True
    for item in reversed(previous):
        entry = item.entry
        if entry.kind != _CUE:
            if counting:
                trailing.append(item)
            continue
        if entry.modifier:  # a modified member already joined to the list
            counting = False
            continue
        if entry.polarity is not _NEG or entry.scope is not _FWD:
            return False
        break
    else:
        return False
    trailing.reverse()
    if len(trailing) >= 2 and not any(_has_conjunction(text[a.end:b.start]) for a, b in pairwise(trailing)):
        return True
    position = 0
    while position < len(segment) and segment[position].entry.kind == _CUE:
        if segment[position].entry.polarity is not _UNC and segment[position].entry.polarity is not _POS:
            return False
        position += 1
    if position >= len(segment):
        return False
    first = segment[position]
    rest = segment[position + 1:] + following
    if not rest:
        return False
    gap = text[first.end:rest[0].start]
    if "," not in gap or not _list_gap(gap)[0]:
        return False
    for item in rest:  # the next member, past its own modifiers ("..., large effusion, ...")
        if item.entry.kind != _CUE:
            break
        if not item.entry.modifier:
            return False
    else:
        return False
    if rest[0].entry.kind != _CUE:  # an unmodified member follows: a list
        return True
    # a modified member follows: a list only when a conjunction closes it ("..., possible C, or D")
    return _has_conjunction(gap) or any(_has_conjunction(text[a.end:b.start]) for a, b in pairwise(rest))


def _has_conjunction(gap: str) -> bool:
    return not _CONJUNCTIONS.isdisjoint(gap.replace(",", " ").split())


def _join_negated_lists(text: str, segments: list[list[_Item]], spans: list[list[int]] | None,
                        modifier_started: list[int]) -> tuple[list[list[_Item]], list[list[int]] | None]:
    """Segments with every modifier-opened segment that continues a negated list joined back to it."""
    joined: list[list[_Item]] = []
    joined_spans: list[list[int]] | None = [] if spans is not None else None
    candidates = set(modifier_started)
    for k, segment in enumerate(segments):
        if k in candidates and joined:
            following: list[_Item] = []
            j = k + 1
            while j in candidates:
                following += segments[j]
                j += 1
            if _continues_negated_list(text, joined[-1], segment, following):
                joined[-1] = joined[-1] + segment
                if joined_spans is not None:
                    joined_spans[-1] = [joined_spans[-1][0], spans[k][1]]
                continue
        joined.append(segment)
        if joined_spans is not None:
            joined_spans.append(spans[k])
    return joined, joined_spans


def _clause(report: str, span: list[int]) -> str:
    """The text of a clause of ``report``, whitespace collapsed and edge punctuation removed."""
    return " ".join(report[span[0]:span[1]].split()).strip(" ,.;:")


def _because(label: str, kind: str, cue_side: tuple[_Item, str]) -> str:
    cue, side = cue_side
    where = {"before": "before it in the clause", "after": "after it",
             "subject": "after the coordinated subject it belongs to"}[side]
    return f"{label}: {kind} cue {cue.phrase!r} {where}"


_SENTENCE_END = re.compile(_BREAK_PATTERN)


def _sentence_span(text: str, position: int) -> tuple[int, int]:
    """Start and end of the sentence of the normalised ``text`` around ``position`` (a comma that
    starts a clause does not end a sentence)."""
    start = 0
    for m in _SENTENCE_END.finditer(text, 0, position):
        if m.group() != ",":
            start = m.end()
    end_match = next((m for m in _SENTENCE_END.finditer(text, position) if m.group() != ","), None)
    return start, (end_match.end() if end_match else len(text))


def _sentence(report: str, text: str, position: int) -> str:
    """The sentence of ``report`` around ``position`` (boundaries found in the normalised text)."""
    start, end = _sentence_span(text, position)
    return " ".join(report[start:end].split())
