"""Phrase vocabularies of the rule-based labeler: the pattern syntax and ``rule_phrases.json``.

The words :mod:`shovir.labelers.rule_based` matches are data, kept in
``shovir/labelers/resources/rule_phrases.json`` (one phrase per array item, each section with its
own description) so that they can be reviewed and edited without touching the matcher. This
module reads that file, checks it and returns it as a :class:`PhraseTables`:

=========================== =====================================================================
JSON section                what it holds
=========================== =====================================================================
``findings``                finding phrases per class (a match is a positive mention)
``attributes``              structure phrases that count only with a descriptor ("heart size")
``other_findings``          findings outside the 13 classes (they only rule out No Finding)
``exclusions``              phrases that look like a mention or a cue but are neither
``inherently_uncertain``    findings that are uncertain by CheXpert convention
``stability_uncertain``     findings naming a structure that a stability cue makes uncertain
``signs``                   findings that only suggest their class and yield to an explicit mention
``heart_failure``           findings that also make Cardiomegaly uncertain
``cues``                    groups of cue phrases sharing a polarity, a scope and word windows
``terminators``             words that end the scope of a cue
``lists``                   words that break a list of mentions, words that make it alternatives
``coordinated_subjects``    linking verbs and adverbs of "A and B are normal" subjects
``cue_blockers``            words a windowed cue does not reach across
``sentence_breaks``         abbreviations a period does not end, words a comma starts a clause at
=========================== =====================================================================

Every problem in the file raises :class:`PhraseFileError`, naming the section (and item) and
saying what to change. :func:`load_phrases` reads each file once per process.

>>> tables = load_phrases()
>>> tables.findings["Pneumothorax"][:2], tables.cues[0][1:3]
(('pneumothorax', 'pneumothoraces'), ('pre-negation uncertainty', 'forward'))
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from shovir.labels import CLASSES

__all__ = [
    "ADJACENT",
    "BACKWARD",
    "DESCRIPTOR",
    "FORWARD",
    "NEGATION",
    "NEXT",
    "PHRASE_FILE",
    "POLARITIES",
    "PRE_NEGATION_UNCERTAINTY",
    "SCHEMA_VERSION",
    "SCOPES",
    "STABILITY",
    "UNCERTAINTY",
    "PhraseFileError",
    "PhraseTables",
    "expand",
    "load_phrases",
]

SCHEMA_VERSION = 1
"""The ``schema_version`` this module reads; bump it when a section changes shape."""

PHRASE_FILE = "rule_phrases.json"
"""Name of the packaged phrase file in ``shovir/labelers/resources/``."""

PRE_NEGATION_UNCERTAINTY, NEGATION, UNCERTAINTY, STABILITY, DESCRIPTOR = (
    "pre-negation uncertainty", "negation", "uncertainty", "stability", "descriptor")
POLARITIES: tuple[str, ...] = (PRE_NEGATION_UNCERTAINTY, NEGATION, UNCERTAINTY, STABILITY, DESCRIPTOR)
"""Cue polarities, as written in the ``cues`` section."""

FORWARD, NEXT, BACKWARD, ADJACENT = "forward", "next", "backward", "adjacent"
SCOPES: tuple[str, ...] = (FORWARD, NEXT, BACKWARD, ADJACENT)
"""Cue scopes, as written in the ``cues`` section."""

# The matcher compares scopes by identity, so the strings read from JSON are swapped for these.
_CANONICAL = {name: name for name in POLARITIES + SCOPES}

_OBSERVATIONS = CLASSES[:CLASSES.index("No Finding")]  # the classes a phrase can name
_CUE_KEYS = ("polarity", "scope", "forward_window", "backward_window", "starts_segment", "phrases")

# section -> its keys besides "description", each with the shape of its value (for error messages)
_SECTIONS: dict[str, dict[str, str]] = {
    "findings": {"phrases": '{"<class>": [...], ...}'},
    "attributes": {"phrases": '{"<class>": [...], ...}'},
    "other_findings": {"phrases": "[...]"},
    "exclusions": {"phrases": "[...]"},
    "inherently_uncertain": {"phrases": "[...]"},
    "stability_uncertain": {"phrases": "[...]"},
    "signs": {"phrases": "[...]"},
    "heart_failure": {"phrases": "[...]"},
    "cues": {"groups": "[{...}, ...]"},
    "terminators": {"phrases": "[...]"},
    "lists": {"stop_words": "[...]", "alternative_words": "[...]", "pairwise_alternative_words": "[...]"},
    "coordinated_subjects": {"linking_verbs": "[...]", "adverbs": "[...]", "member_words": "<number>"},
    "cue_blockers": {"next": "[...]", "backward": "[...]"},
    "sentence_breaks": {"abbreviations": "[...]", "clause_starts": "[...]"},
}
_TOP_LEVEL = ("schema_version", "description", "pattern_syntax", *_SECTIONS)


class PhraseFileError(ValueError):
    """A phrase file that cannot be used; the message names the section and the fix."""


CueGroup = tuple[tuple[str, ...], str, str, int, int, bool]
"""One cue group: (phrases, polarity, scope, forward window, backward window, starts a segment)."""


@dataclass(frozen=True)
class PhraseTables:
    """The checked contents of a phrase file (see the module docstring for the sections).

    Phrase patterns are kept as written (``{a,b,}`` alternatives unexpanded); ``cues`` holds
    one :data:`CueGroup` tuple per group, in file order, with the polarity and scope strings of
    :data:`POLARITIES` and :data:`SCOPES`.
    """

    findings: dict[str, tuple[str, ...]]
    attributes: dict[str, tuple[str, ...]]
    other_findings: tuple[str, ...]
    exclusions: tuple[str, ...]
    inherently_uncertain: tuple[str, ...]
    stability_uncertain: tuple[str, ...]
    signs: tuple[str, ...]
    heart_failure: tuple[str, ...]
    cues: tuple[CueGroup, ...]
    terminators: tuple[str, ...]
    list_stop_words: frozenset[str]
    alternative_words: frozenset[str]
    pairwise_alternative_words: frozenset[str]
    linking_verbs: frozenset[str]
    subject_adverbs: frozenset[str]
    member_words: int
    next_blockers: tuple[str, ...]
    backward_blockers: tuple[str, ...]
    abbreviations: tuple[str, ...]
    clause_starts: tuple[str, ...]


def expand(pattern: str) -> list[str]:
    """All phrases written by ``pattern``: ``{a,b,}`` lists alternatives and may nest.

    >>> expand("pleural effusion{,s}")
    ['pleural effusion', 'pleural effusions']
    >>> expand("{left ,right ,}{upper,lower} lobe")
    ['left upper lobe', 'left lower lobe', 'right upper lobe', 'right lower lobe', 'upper lobe', 'lower lobe']
    """
    return list(dict.fromkeys(" ".join(phrase.split()) for phrase in _expand_raw(pattern)))


def _expand_raw(pattern: str) -> list[str]:
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    depth, end = 0, -1
    parts, last = [], start + 1
    for i in range(start, len(pattern)):
        ch = pattern[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                end = i
                parts.append(pattern[last:i])
                break
        elif ch == "," and depth == 1:
            parts.append(pattern[last:i])
            last = i + 1
    if end < 0:
        raise ValueError(f"unbalanced braces in phrase pattern {pattern!r}")
    prefix, suffix = pattern[:start], pattern[end + 1:]
    out: list[str] = []
    for part in parts:
        for tail in _expand_raw(part + suffix):
            out.extend(_expand_raw(prefix + tail))
    return out


def load_phrases(path: str | os.PathLike[str] | None = None) -> PhraseTables:
    """Read and check a phrase file: the packaged ``rule_phrases.json`` by default.

    Each file is read once per process (later calls return the same tables). Raises
    :class:`PhraseFileError` naming the section, the item and the fix for a file that cannot be
    read, is not JSON, has another ``schema_version``, misses or misspells a section, or holds
    a malformed entry (wrong type, upper case, unbalanced braces, an unknown class, polarity or
    scope).

    >>> load_phrases() is load_phrases()
    True
    >>> import tempfile
    >>> document = json.loads(resources.files("shovir.labelers").joinpath("resources", PHRASE_FILE).read_text())
    >>> document["findings"]["phrases"]["Edema"].append("edema{")
    >>> folder = tempfile.TemporaryDirectory()
    >>> broken = Path(folder.name) / "phrases.json"
    >>> _ = broken.write_text(json.dumps(document))
    >>> load_phrases(broken)
    Traceback (most recent call last):
    ...
    shovir.labelers.rule_phrases.PhraseFileError: ...phrases.json: findings.phrases["Edema"][14]: unbalanced braces in 'edema{'; close every '{' with a '}' (alternatives are written '{a,b,}')
    >>> _ = broken.write_text('{"schema_version": 1, "finding": {}}')
    >>> load_phrases(broken)
    Traceback (most recent call last):
    ...
    shovir.labelers.rule_phrases.PhraseFileError: ...phrases.json: finding: unknown section; use one of: schema_version, description, pattern_syntax, findings, attributes, ...
    >>> folder.cleanup()
    """
    return _load(None if path is None else str(Path(path).resolve()))


@functools.lru_cache(maxsize=8)
def _load(path: str | None) -> PhraseTables:
    if path is None:
        source = f"shovir/labelers/resources/{PHRASE_FILE}"
        try:
            text = resources.files("shovir.labelers").joinpath("resources", PHRASE_FILE).read_text(encoding="utf-8")
        except OSError as error:
            raise PhraseFileError(f"{source}: cannot read the packaged phrase file ({error}); reinstall shovir "
                                  "(setup.cfg ships shovir/labelers/resources/*.json as package data)") from None
    else:
        source = path
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise PhraseFileError(f"{source}: cannot read the phrase file ({error})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise PhraseFileError(f"{source}: not valid JSON at line {error.lineno}, column {error.colno} ({error.msg}); "
                              "a missing comma or quote near there is the usual cause") from None
    return _Checker(source).tables(document)


class _Checker:
    """Validation of one parsed phrase file; every error names ``source`` and the JSON path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str, fix: str) -> PhraseFileError:
        return PhraseFileError(f"{self.source}: {where}: {problem}; {fix}")

    def tables(self, document: Any) -> PhraseTables:
        if not isinstance(document, dict):
            raise self.fail("top level", f"expected an object, got {_kind(document)}",
                            'write the file as {"schema_version": 1, "findings": {...}, ...}')
        if "schema_version" not in document:
            raise self.fail("schema_version", "missing", f'add "schema_version": {SCHEMA_VERSION} at the top level')
        version = document["schema_version"]
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise self.fail("schema_version", f"this shovir reads version {SCHEMA_VERSION}, the file has {version!r}",
                            f"convert the file to version {SCHEMA_VERSION} (see the packaged {PHRASE_FILE})")
        unknown = [key for key in document if key not in _TOP_LEVEL]
        if unknown:
            raise self.fail(unknown[0], "unknown section", "use one of: " + ", ".join(_TOP_LEVEL))
        for key in ("description", "pattern_syntax"):
            if key in document:
                self.text(key, document[key])
        sections = {name: self.section(name, document.get(name), keys) for name, keys in _SECTIONS.items()}

        findings = self.class_lists("findings.phrases", sections["findings"]["phrases"], joined=False)
        attributes = self.class_lists("attributes.phrases", sections["attributes"]["phrases"], joined=True)
        finding_phrases = {phrase for patterns in findings.values() for pattern in patterns
                           for phrase in expand(pattern)}
        conventions = {}
        for name in ("inherently_uncertain", "stability_uncertain", "signs", "heart_failure"):
            where = f"{name}.phrases"
            conventions[name] = self.patterns(where, sections[name]["phrases"])
            for i, pattern in enumerate(conventions[name]):
                missing = [phrase for phrase in expand(pattern) if phrase not in finding_phrases]
                if missing:
                    raise self.fail(f"{where}[{i}]", f"{missing[0]!r} is not a finding phrase",
                                    "list it under findings too (this section only qualifies findings)")
        groups = sections["cues"]["groups"]
        if not isinstance(groups, list):
            raise self.fail("cues.groups", f"expected an array of cue groups, got {_kind(groups)}",
                            "write one object per group")
        return PhraseTables(
            findings=findings,
            attributes=attributes,
            other_findings=self.patterns("other_findings.phrases", sections["other_findings"]["phrases"]),
            exclusions=self.patterns("exclusions.phrases", sections["exclusions"]["phrases"]),
            inherently_uncertain=conventions["inherently_uncertain"],
            stability_uncertain=conventions["stability_uncertain"],
            signs=conventions["signs"],
            heart_failure=conventions["heart_failure"],
            cues=tuple(self.cue_group(f"cues.groups[{i}]", group) for i, group in enumerate(groups)),
            terminators=self.patterns("terminators.phrases", sections["terminators"]["phrases"]),
            list_stop_words=frozenset(self.words("lists.stop_words", sections["lists"]["stop_words"])),
            alternative_words=frozenset(self.words("lists.alternative_words", sections["lists"]["alternative_words"])),
            pairwise_alternative_words=frozenset(self.words("lists.pairwise_alternative_words",
                                                            sections["lists"]["pairwise_alternative_words"])),
            linking_verbs=frozenset(self.words("coordinated_subjects.linking_verbs",
                                               sections["coordinated_subjects"]["linking_verbs"])),
            subject_adverbs=frozenset(self.words("coordinated_subjects.adverbs", sections["coordinated_subjects"]["adverbs"])),
            member_words=self.count("coordinated_subjects.member_words", sections["coordinated_subjects"]["member_words"]),
            next_blockers=self.words("cue_blockers.next", sections["cue_blockers"]["next"]),
            backward_blockers=self.words("cue_blockers.backward", sections["cue_blockers"]["backward"]),
            abbreviations=self.words("sentence_breaks.abbreviations", sections["sentence_breaks"]["abbreviations"]),
            clause_starts=self.words("sentence_breaks.clause_starts", sections["sentence_breaks"]["clause_starts"]),
        )

    def section(self, name: str, value: Any, keys: dict[str, str]) -> dict[str, Any]:
        example = ", ".join(f'"{key}": {shape}' for key, shape in keys.items())
        if value is None:
            raise self.fail(name, "missing section", f'add "{name}": {{"description": [...], {example}}}')
        if not isinstance(value, dict):
            raise self.fail(name, f"expected an object, got {_kind(value)}", f'write it as {{"description": [...], {example}}}')
        for key in value:
            if key != "description" and key not in keys:
                raise self.fail(f"{name}.{key}", "unknown key", "use " + ", ".join(("description", *keys)))
        for key in keys:
            if key not in value:
                raise self.fail(f"{name}.{key}", "missing", f'add "{key}" to the {name} section')
        if "description" in value:
            self.text(f"{name}.description", value["description"])
        return value

    def text(self, where: str, value: Any) -> None:
        lines = [value] if isinstance(value, str) else value
        if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
            raise self.fail(where, f"expected a string or an array of strings, got {_kind(value)}",
                            "write the description as an array of lines")

    def array(self, where: str, value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, f"expected an array of phrases, got {_kind(value)}",
                            'write one phrase per item: ["first phrase", "second phrase"]')
        return value

    def patterns(self, where: str, value: Any) -> tuple[str, ...]:
        out = []
        for i, pattern in enumerate(self.array(where, value)):
            item = f"{where}[{i}]"
            if not isinstance(pattern, str):
                raise self.fail(item, f"expected a phrase (a string), got {_kind(pattern)}", "quote the phrase")
            if pattern != pattern.lower():
                raise self.fail(item, f"{pattern!r} has upper-case letters", f"write it as {pattern.lower()!r}")
            try:
                phrases = expand(pattern)
            except ValueError:
                raise self.fail(item, f"unbalanced braces in {pattern!r}",
                                "close every '{' with a '}' (alternatives are written '{a,b,}')") from None
            if not pattern.strip() or "" in phrases:
                raise self.fail(item, f"{pattern!r} can match an empty phrase",
                                "give it at least one word outside an optional '{...,}' part")
            out.append(pattern)
        return tuple(out)

    def words(self, where: str, value: Any) -> tuple[str, ...]:
        out = []
        for i, word in enumerate(self.array(where, value)):
            item = f"{where}[{i}]"
            if not isinstance(word, str) or not word or word != "".join(word.split()):
                raise self.fail(item, f"expected one word, got {word!r}", "write one word per item, without spaces")
            if word != word.lower():
                raise self.fail(item, f"{word!r} has upper-case letters", f"write it as {word.lower()!r}")
            out.append(word)
        return tuple(out)

    def count(self, where: str, value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise self.fail(where, f"expected a number of words (1 or more), got {value!r}",
                            "write a whole number such as 3")
        return value

    def class_lists(self, where: str, value: Any, joined: bool) -> dict[str, tuple[str, ...]]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object of phrase arrays per class, got {_kind(value)}",
                            'write it as {"Pleural Effusion": ["effusion", ...], ...}')
        for key in value:
            for name in key.split("|") if joined else (key,):
                if name not in _OBSERVATIONS:
                    joins = " (or two of them joined with '|')" if joined else ""
                    raise self.fail(f"{where}[{json.dumps(key)}]", f"{name!r} is not a CheXpert class",
                                    f"use one of{joins}: " + ", ".join(_OBSERVATIONS))
        return {key: self.patterns(f"{where}[{json.dumps(key)}]", patterns) for key, patterns in value.items()}

    def cue_group(self, where: str, group: Any) -> CueGroup:
        if not isinstance(group, dict):
            raise self.fail(where, f"expected an object, got {_kind(group)}",
                            "write the group as {" + ", ".join(f'"{key}": ...' for key in _CUE_KEYS) + "}")
        for key in group:
            if key != "note" and key not in _CUE_KEYS:
                raise self.fail(f"{where}.{key}", "unknown key", "use note, " + ", ".join(_CUE_KEYS))
        for key in _CUE_KEYS:
            if key not in group:
                raise self.fail(f"{where}.{key}", "missing", f'add "{key}" to the group')
        if "note" in group and not isinstance(group["note"], str):
            raise self.fail(f"{where}.note", f"expected a string, got {_kind(group['note'])}", "quote the note")
        choices = {"polarity": POLARITIES, "scope": SCOPES}
        for key, allowed in choices.items():
            if group[key] not in allowed:
                raise self.fail(f"{where}.{key}", f"{group[key]!r} is not a {key}", "use one of: " + ", ".join(allowed))
        for key in ("forward_window", "backward_window"):
            window = group[key]
            if not isinstance(window, int) or isinstance(window, bool) or window < 0:
                raise self.fail(f"{where}.{key}", f"expected a number of words (0 or more), got {window!r}",
                                "write a whole number such as 0 or 6")
        if not isinstance(group["starts_segment"], bool):
            raise self.fail(f"{where}.starts_segment", f"expected true or false, got {group['starts_segment']!r}",
                            "write true or false (no quotes)")
        return (self.patterns(f"{where}.phrases", group["phrases"]), _CANONICAL[group["polarity"]],
                _CANONICAL[group["scope"]], group["forward_window"], group["backward_window"], group["starts_segment"])


def _kind(value: Any) -> str:
    """JSON name of ``value``'s type, for error messages."""
    if isinstance(value, Mapping):
        return "an object"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
             type(None): "null"}
    return names.get(type(value), type(value).__name__)
