"""GREEN (Ostmeier et al. 2024): the judge prompt, the response parser, and a cached run.

The judge reads a reference and a candidate report (each cut to its first 300 words,
:func:`~shovir.icare.prompts.green_prompt`) and answers in four bracketed sections::

    [Explanation]:
    <free text>

    [Clinically Significant Errors]:
    (a) False report of a finding in the candidate: 1. <error>
    ...
    (f) Omitting a comparison detailing a change from a prior study: 0.

    [Clinically Insignificant Errors]:
    ...

    [Matched Findings]:
    2. <finding 1>; <finding 2>

:func:`parse_green_response` reads it with the authors' semantics:

* **cleaning**: keep the text after the last assistant marker (``<|assistant|>``, ``[/INST]``,
  ``<|im_start|>assistant``, ``ASSISTANT:``) and after ``[Explanation]:``; drop end and unknown
  tokens (``</s>``, ``<unk>``, ``<|endoftext|>``, ``<|im_end|>``, ``<|eot_id|>``);
* a section runs from its ``[Header]:`` (blank space after it skipped) to the first blank line or
  the end; a missing section counts zero;
* a section whose body starts with ``No`` counts zero (``No clinically significant errors``);
* the matched count is the number at the very start of its section followed by a period
  (``2. ...``; ``2`` without the period, or none, reads 0);
* each category count is the first number after ``": "`` followed by a period on its ``(a)``–``(f)``
  line (``(a) ...: 2`` without the period reads 0); when no ``(a)``–``(f)`` line exists, ``(1)``–``(6)``
  lines are read instead; a category line that appears twice: the later one in sorted order wins.

The score and its summary are :func:`shovir.metrics.green.green_score` and
:func:`~shovir.metrics.green.green_summary`. A call that failed for good (an HTTP error after its
retries, a prompt too long for the judge) is not scored: it is counted under ``failed`` and left
out of the mean. A reply in which no section can be found scores 0 by the authors' rule and is
counted under ``unparsed``, so a judge that ignores the format is visible.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from shovir.icare.backends import Backend, Call, Caller, get_backend
from shovir.icare.cache import CallCache
from shovir.icare.pipeline import pair_reports, write_jsonl
from shovir.icare.prompts import GREEN_CHAT_TEMPLATE, GREEN_MAX_WORDS, green_prompt
from shovir.metrics.green import GREEN_CATEGORIES, green_score, green_summary

__all__ = ["GREEN_JUDGE", "GREEN_SECTIONS", "Green", "GreenParse", "clean_green_response", "green",
           "green_backend_defaults", "parse_green_response"]

GREEN_JUDGE = "StanfordAIMI/GREEN-RadLlama2-7b"
"""The default judge (other released ones: GREEN-Mistral-7b, -Phi2, -RadPhi2, -Phi-3, -Gemma-2b-MM);
it is read from a local folder or the local Hugging Face cache, never downloaded."""

GREEN_SECTIONS = ("Clinically Significant Errors", "Clinically Insignificant Errors", "Matched Findings")
GREEN_MAX_TOKENS = 1024
"""The reply budget of a GREEN call (the transformers backend also keeps prompt + reply within its max_length)."""

_MARKERS = ("<|assistant|>", "[/INST]", "<|im_start|>assistant", "ASSISTANT:")
_JUNK = ("</s>", "<unk>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<eos>")
_LETTER_LINE = re.compile(r"\([a-f]\) .*")
_DIGIT_LINE = re.compile(r"\([1-6]\) .*")
_COUNT = re.compile(r"(?<=: )\b\d+\b(?=\.)")
_MATCHED = re.compile(r"^\b\d+\b(?=\.)")


def clean_green_response(text: str) -> str:
    """The judge's own answer in a decoded output (see the module docstring).

    >>> clean_green_response("<|user|>\\nprompt</s>\\n<|assistant|>\\n[Explanation]:\\nSame findings.</s>")
    '\\nSame findings.'
    """
    if not isinstance(text, str):
        raise ValueError(f"judge_responses: expected the judge's reply as a string, got {type(text).__name__}")
    for marker in _MARKERS:
        if marker in text:
            text = text.rsplit(marker, 1)[-1]
    if "[Explanation]:" in text:
        text = text.rsplit("[Explanation]:", 1)[-1]
    for token in _JUNK:
        text = text.replace(token, "")
    return text


def _section(text: str, name: str) -> str | None:
    match = re.search(rf"\[{re.escape(name)}\]:\s*(.*?)(?:\n\s*\n|\Z)", text, re.DOTALL)
    return match.group(1) if match else None


def _after_count(line: str) -> list[str]:
    tail = line.split(":", 1)[1] if ":" in line else ""
    tail = re.sub(r"^\s*\d+\.", "", tail, count=1)
    return [item.strip() for item in tail.split(";") if item.strip()]


@dataclass
class GreenParse:
    """One judge response, parsed: the counts that enter the score and the text that explains it."""

    matched: int = 0
    significant: list[int] = field(default_factory=lambda: [0] * 6)
    insignificant: list[int] = field(default_factory=lambda: [0] * 6)
    explanation: str = ""
    matched_findings: list[str] = field(default_factory=list)
    significant_errors: dict[str, list[str]] = field(default_factory=dict)
    sections_found: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        """GREEN of this response (:func:`shovir.metrics.green.green_score`)."""
        return green_score(self.matched, self.significant)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "green": self.score}


def _errors(body: str | None) -> tuple[list[int], dict[str, list[str]]]:
    counts = [0] * 6
    sentences: dict[str, list[str]] = {}
    if body is None or body.startswith("No"):
        return counts, sentences
    lines = sorted(_LETTER_LINE.findall(body))
    labels = [f"({letter}) " for letter in "abcdef"]
    if not lines:  # a template that numbers the categories (1)-(6)
        lines = sorted(_DIGIT_LINE.findall(body))
        labels = [f"({number}) " for number in range(1, 7)]
    for position, label in enumerate(labels):
        for line in lines:
            if line.startswith(label):
                found = _COUNT.findall(line)
                if found:
                    counts[position] = int(found[0])
                sentences["abcdef"[position]] = _after_count(line)
    return counts, sentences


def parse_green_response(text: str) -> GreenParse:
    """The counts, findings and explanation of one GREEN judge response (the authors' semantics,
    listed in the module docstring).

    >>> response = '''[Explanation]:
    ... The candidate misses the effusion and calls the heart enlarged.
    ...
    ... [Clinically Significant Errors]:
    ... (a) False report of a finding in the candidate: 1. Cardiomegaly
    ... (b) Missing a finding present in the reference: 1. Left pleural effusion
    ... (c) Misidentification of a finding's anatomic location/position: 0.
    ... (d) Misassessment of the severity of a finding: 0.
    ... (e) Mentioning a comparison that isn't in the reference: 0.
    ... (f) Omitting a comparison detailing a change from a prior study: 0.
    ...
    ... [Clinically Insignificant Errors]:
    ... No Clinically Insignificant Errors
    ...
    ... [Matched Findings]:
    ... 2. No pneumothorax; Normal mediastinum'''
    >>> parsed = parse_green_response(response)
    >>> parsed.matched, parsed.significant, parsed.insignificant, parsed.score
    (2, [1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], 0.5)
    >>> parsed.matched_findings, parsed.significant_errors["b"], parsed.explanation
    (['No pneumothorax', 'Normal mediastinum'], ['Left pleural effusion'], 'The candidate misses the effusion and calls the heart enlarged.')
    """
    cleaned = clean_green_response(text)
    parsed = GreenParse()
    explanation = re.split(r"\n\s*\n|\[(?:" + "|".join(map(re.escape, GREEN_SECTIONS)) + r")\]:", cleaned.strip(), maxsplit=1)
    parsed.explanation = explanation[0].strip() if explanation and not cleaned.lstrip().startswith("[") else ""
    significant = _section(cleaned, GREEN_SECTIONS[0])
    insignificant = _section(cleaned, GREEN_SECTIONS[1])
    matched = _section(cleaned, GREEN_SECTIONS[2])
    parsed.sections_found = [name for name, body in zip(GREEN_SECTIONS, (significant, insignificant, matched))
                             if body is not None]
    parsed.significant, parsed.significant_errors = _errors(significant)
    parsed.insignificant, _ = _errors(insignificant)
    if matched is not None and not matched.startswith("No"):
        found = _MATCHED.findall(matched)
        if found:
            parsed.matched = int(found[0])
            parsed.matched_findings = _after_count(": " + matched)
    return parsed


def green_backend_defaults(name: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A backend's options with GREEN's defaults filled in: for ``transformers`` the judge
    :data:`GREEN_JUDGE`, the authors' chat template, ``max_length=2048`` and ``batch_size=8``.

    >>> green_backend_defaults("transformers", {"model": "/models/green"})["max_length"]
    2048
    """
    options = dict(options or {})
    if name == "transformers":
        options.setdefault("model", GREEN_JUDGE)
        options.setdefault("chat_template", GREEN_CHAT_TEMPLATE)
        options.setdefault("max_length", 2048)
        options.setdefault("batch_size", 8)
    return options


class Green:
    """GREEN with one judge backend (``"offline"``, ``"openai"``, ``"transformers"``, or a built one).

    Args:
        backend, backend_options: the judge (named backends get :func:`green_backend_defaults`).
        cache: a :class:`~shovir.icare.cache.CallCache`, a JSONL path, or ``None`` (memory).
        max_words: words of each report kept in the prompt (the authors' 300).
        max_tokens: reply budget per call.
        progress: a progress bar over the calls.

    >>> evaluator = Green("offline")
    >>> evaluator.evaluate(["Cardiomegaly."], ["Cardiomegaly."], n_resamples=0)["green"], evaluator.config()["max_words"]
    (1.0, 300)
    """

    def __init__(self, backend: Backend | str = "offline", backend_options: Mapping[str, Any] | None = None, *,
                 cache: CallCache | str | os.PathLike | None = None, max_words: int = GREEN_MAX_WORDS,
                 max_tokens: int = GREEN_MAX_TOKENS, progress: bool = False) -> None:
        options = green_backend_defaults(backend, backend_options) if isinstance(backend, str) else dict(backend_options or {})
        self.backend = get_backend(backend, **options)
        self.caller = Caller(self.backend, cache, progress=progress)
        for name, value in (("max_words", max_words), ("max_tokens", max_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.max_words, self.max_tokens = max_words, max_tokens

    def config(self) -> dict[str, Any]:
        return {"backend": self.backend.identity(), "max_words": self.max_words, "max_tokens": self.max_tokens}

    def close(self) -> None:
        self.backend.close()

    def responses(self, pairs: Sequence[tuple[str, str, str]]) -> list[tuple[str | None, str | None]]:
        """``(response or None, failure or None)`` per ``(id, reference, candidate)``."""
        calls = [Call("green", green_prompt(ref, hyp, self.max_words), self.max_tokens, None,
                      task={"reference": ref, "candidate": hyp}) for _, ref, hyp in pairs]
        return [(reply.text, None) if reply.ok else (None, reply.error)
                for reply in self.caller.run(calls, desc="GREEN judging")]

    def evaluate(self, references: Mapping[Any, str] | Sequence[str], predictions: Mapping[Any, str] | Sequence[str], *,
                 ids: Sequence[Any] | None = None, prediction_ids: Sequence[Any] | None = None,
                 judge_responses: Mapping[Any, str] | Sequence[str] | None = None,
                 log_path: str | os.PathLike | None = None, n_resamples: int = 1000, confidence: float = 0.95,
                 bootstrap_seed: int = 0) -> dict[str, Any]:
        """GREEN of report pairs joined by id; see :func:`green`."""
        pairs = pair_reports(references, predictions, ids, prediction_ids)
        before = dict(self.caller.stats)
        if judge_responses is None:
            responses = self.responses(pairs)
        else:
            responses = [(text, None) for text in _given_responses(judge_responses, pairs, ids)]
        result = summarise(pairs, responses, n_resamples=n_resamples, confidence=confidence, seed=bootstrap_seed)
        result["calls"] = {key: self.caller.stats[key] - before[key] for key in before}
        result["config"] = self.config()
        result["log"] = str(write_jsonl(log_path, result["reports"])) if log_path is not None else None
        return result


def _given_responses(given: Mapping[Any, str] | Sequence[str], pairs: Sequence[tuple[str, str, str]],
                     ids: Sequence[Any] | None) -> list[str]:
    if isinstance(given, Mapping):
        keyed = {str(k): v for k, v in given.items()}
        missing = [rid for rid, _, _ in pairs if rid not in keyed]
        if missing or len(keyed) != len(pairs):
            raise ValueError(f"judge_responses: expected one response per report pair id; missing {missing[:5]}, "
                             f"{len(keyed) - len(pairs) + len(missing)} not matching any pair")
        texts = [keyed[rid] for rid, _, _ in pairs]
    else:
        if isinstance(given, (str, bytes)) or len(given) != len(pairs):
            raise ValueError(f"judge_responses: expected a list of {len(pairs)} responses (one per report pair, in the "
                             "order of the references) or a mapping id -> response")
        texts = list(given)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"judge_responses[{index}]: expected the judge's reply as a string, got {type(text).__name__}")
    return texts


def summarise(pairs: Sequence[tuple[str, str, str]], responses: Sequence[tuple[str | None, str | None]], *,
              n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """The GREEN result of parsed responses: the summary over scored reports, and one explained
    record per report (``reports``) with its counts, findings, errors, explanation and response.

    >>> out = summarise([("r1", "ref", "hyp"), ("r2", "ref", "hyp")], [("[Matched Findings]:\\n1.", None), (None, "HTTP 500")],
    ...                 n_resamples=0)
    >>> out["green"], out["n"], out["failed"], out["reports"][1]["failure"]
    (1.0, 1, 1, 'HTTP 500')
    """
    reports = []
    matched, significant = [], []
    unparsed = 0
    for (rid, _, _), (text, failure) in zip(pairs, responses):
        record: dict[str, Any] = {"id": rid, "green": None, "failure": failure, "response": text}
        if text is not None:
            parsed = parse_green_response(text)
            record.update(parsed.as_dict())
            unparsed += not parsed.sections_found
            matched.append(parsed.matched)
            significant.append(parsed.significant)
        reports.append(record)
    failed = sum(r["failure"] is not None for r in reports)
    if matched:
        summary = green_summary(matched, significant, n_resamples=n_resamples, confidence=confidence, seed=seed)
    else:
        summary = {"green": None, "std": None, "scores": [], "error_free": {k: None for k in "abcdef"},
                   "ci": {"green": {"low": None, "high": None}}, "n": 0}
    summary.pop("scores")
    return {**summary, "categories": dict(zip("abcdef", GREEN_CATEGORIES)), "failed": failed, "unparsed": unparsed,
            "n_pairs": len(pairs), "reports": reports}


def green(
    references: Mapping[Any, str] | Sequence[str],
    predictions: Mapping[Any, str] | Sequence[str],
    *,
    ids: Sequence[Any] | None = None,
    prediction_ids: Sequence[Any] | None = None,
    judge_responses: Mapping[Any, str] | Sequence[str] | None = None,
    backend: Backend | str = "offline",
    backend_options: Mapping[str, Any] | None = None,
    evaluator: Green | None = None,
    cache: CallCache | str | os.PathLike | None = None,
    log_path: str | os.PathLike | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    bootstrap_seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """GREEN of report pairs (Ostmeier et al. 2024): a judge's response per pair, parsed and
    scored; with ``judge_responses`` (one per pair) nothing is called and the scores are recomputed.

    Returns ``green`` (mean over scored reports), ``std`` (population), ``error_free`` (category →
    share of reports without that significant error), ``ci``, ``n`` (scored), ``n_pairs``,
    ``failed``, ``unparsed``, ``reports`` (per pair: score, counts, matched findings, significant
    errors, explanation, response), ``calls`` and ``config``.

    >>> out = green(["Cardiomegaly. Small left pleural effusion."], ["Cardiomegaly. No effusion."], n_resamples=0)
    >>> out["green"], out["reports"][0]["matched"], out["reports"][0]["significant"]
    (0.5, 1, [0, 1, 0, 0, 0, 0])
    >>> green(["x"], ["y"], judge_responses=["[Matched Findings]:\\n3. a; b; c"], n_resamples=0)["green"]
    1.0
    """
    if judge_responses is not None and evaluator is None:  # recomputed from given responses: no judge at all
        pairs = pair_reports(references, predictions, ids, prediction_ids)
        given = _given_responses(judge_responses, pairs, ids)
        result = summarise(pairs, [(text, None) for text in given], n_resamples=n_resamples, confidence=confidence,
                           seed=bootstrap_seed)
        result.update(calls={"made": 0, "saved": 0, "failed": 0}, config={"backend": None, "judge_responses": True})
        result["log"] = str(write_jsonl(log_path, result["reports"])) if log_path is not None else None
        return result
    if evaluator is None:
        evaluator = Green(backend, backend_options, cache=cache, progress=progress)
        owned = True
    else:
        owned = False
    try:
        return evaluator.evaluate(references, predictions, ids=ids, prediction_ids=prediction_ids,
                                  judge_responses=judge_responses, log_path=log_path, n_resamples=n_resamples,
                                  confidence=confidence, bootstrap_seed=bootstrap_seed)
    finally:
        if owned:
            evaluator.close()
