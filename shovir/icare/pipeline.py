"""The ICARE pipeline (``icare_metric.txt`` §3): two agents write, filter and answer questions.

For every report pair ``r`` (reference ``R_GT``, generated ``R_GEN``, joined by id):

1. **Writing** (§3.2). Each agent asks the judge for ``n`` four-option questions about its own
   report (default 40, the authors'). The reply is parsed tolerantly
   (:func:`~shovir.icare.parse.parse_mcqs`); incomplete items are counted and dropped; duplicate
   questions (same text once case and punctuation are folded) are removed. While fewer than ``n``
   remain, the agent asks again for the missing ones, naming the questions it has so the judge
   does not repeat itself — at most ``max_attempts`` calls, and an attempt that adds no new
   question ends the retries (the authors' loop had no bound and, at temperature 0, re-received
   the same reply forever).
2. **Filtering** (§3.2, Table 1). Options are shuffled (seeded), then the judge answers every
   question with its source report and without any report; a question is kept only if the first
   answer is right and the second wrong. Kept questions are shuffled again (seeded, a new order).
   The ``"unshuffled"`` variant skips both shuffles; ``"shuffled"`` is the result of record.
3. **Answering** (§3.3). Agent GT answers every kept question of the pair (from either report)
   with ``R_GT``, agent GEN with ``R_GEN``.
4. **Agreement** (§3.4): :func:`shovir.metrics.icare.icare_agreement`.

Answers are normalised to a letter (:func:`~shovir.icare.parse.normalize_answer`) before any
comparison. A failed call or an unreadable answer is a *failure*: in the filter it loses the
question (``failed_with_report`` / ``failed_without_report``, counted as lost to failures), in the
answering step it leaves the question out of agreement (``answer_failures``); it is never an
agreement or a disagreement.

Questions and their filtering depend only on the report text, the backend and the settings, so
:class:`Icare` computes them once per distinct text and reuses them for every model evaluated
with the same instance (the reference side of a run is written and filtered once); the call
cache makes a rerun free. The seeds of the shuffles come from a SHA-256 of
``(seed, stage, question, options)``, never from Python's ``hash`` or a position.

The per-question log (JSONL) has one ``{"record": "question", ...}`` line per written question
— report id, source, question, options, key, both filter answers, kept or the reason it was
filtered, both agents' answers, agreement — and one ``{"record": "report", ...}`` line per report
and side saying how many questions were asked for, yielded, kept, filtered and lost to failures.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shovir.icare.backends import Backend, Call, Caller, get_backend
from shovir.icare.cache import CallCache
from shovir.icare.parse import LETTERS, MCQ, normalize_answer, parse_mcqs, question_key
from shovir.icare.prompts import answer_prompt, mcq_prompt
from shovir.metrics.icare import icare_agreement

__all__ = [
    "DEFAULT_QUESTIONS",
    "DEFAULT_SEED",
    "VARIANTS",
    "Icare",
    "icare",
    "icare_from_answers",
    "pair_reports",
    "read_reports",
    "shuffle_options",
    "write_jsonl",
]

DEFAULT_QUESTIONS = 40
"""Questions asked per report (the ICARE authors' n)."""
DEFAULT_SEED = 123
"""The authors' evaluation seed (their stability runs also use 456, 789, 101, 202)."""
VARIANTS = ("shuffled", "unshuffled")
"""``shuffled`` (options shuffled before and after filtering; the result of record) or ``unshuffled``."""

MCQ_MAX_TOKENS = 4096
ANSWER_MAX_TOKENS = 10  # the authors' limit for a single-letter answer


# --------------------------------------------------------------------------- pairing and shuffling


def _text(value: Any, field: str, key: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field}[{key!r}]: expected a report string, got {type(value).__name__}")
    return value


def _ids(values: Sequence[Any], field: str) -> list[str]:
    out = []
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and not value.strip()):
            raise ValueError(f"{field}[{index}]: expected a non-empty string (or integer) id, got {value!r}")
        out.append(str(value))
    duplicated = sorted({i for i in out if out.count(i) > 1})
    if duplicated:
        raise ValueError(f"{field}: ids must be unique, {duplicated[:5]} appear more than once")
    return out


def pair_reports(
    references: Mapping[Any, str] | Sequence[str],
    predictions: Mapping[Any, str] | Sequence[str],
    ids: Sequence[Any] | None = None,
    prediction_ids: Sequence[Any] | None = None,
) -> list[tuple[str, str, str]]:
    """``[(id, reference, prediction), ...]`` joined on ids, in the order of the references.

    ``references`` and ``predictions`` are mappings id → report, or lists with their ids
    (``ids`` for the references, ``prediction_ids`` for the predictions, default ``ids``; without
    any, the rows of two equally long lists are the pairs and are numbered ``"0"``, ``"1"``, ...).
    An id on one side only is an error naming it, never a silent shift.

    >>> pair_reports({"b": "B ref", "a": "A ref"}, {"a": "A gen", "b": "B gen"})
    [('b', 'B ref', 'B gen'), ('a', 'A ref', 'A gen')]
    >>> pair_reports(["x", "y"], ["Y", "X"], ids=["s1", "s2"], prediction_ids=["s2", "s1"])
    [('s1', 'x', 'X'), ('s2', 'y', 'Y')]
    >>> pair_reports({"a": "A"}, {"b": "B"})
    Traceback (most recent call last):
    ...
    ValueError: predictions: no report for id(s) ['a'] of the references (and 1 id(s) of the predictions have no reference: ['b']); reports are paired by id
    """
    def as_mapping(reports: Any, field: str, own_ids: Sequence[Any] | None) -> dict[str, str]:
        if isinstance(reports, Mapping):
            if own_ids is not None:
                raise ValueError(f"{field}: give ids with lists of reports, not with a mapping (its keys are the ids)")
            keys = _ids(list(reports), f"{field} (keys)")
            return {k: _text(v, field, k) for k, v in zip(keys, reports.values())}
        if isinstance(reports, (str, bytes)) or not isinstance(reports, Sequence):
            raise ValueError(f"{field}: expected a list of reports or a mapping id -> report, got {type(reports).__name__}")
        names = _ids(own_ids, f"{'ids' if field == 'references' else 'prediction_ids'}") if own_ids is not None \
            else [str(i) for i in range(len(reports))]
        if len(names) != len(reports):
            raise ValueError(f"{field}: {len(reports)} reports but {len(names)} ids; give one id per report")
        return {k: _text(v, field, k) for k, v in zip(names, reports)}

    if ids is None and prediction_ids is None and not isinstance(references, Mapping) \
            and not isinstance(predictions, Mapping) and len(references) != len(predictions):
        raise ValueError(f"predictions: {len(predictions)} reports for {len(references)} references; without ids the "
                         "rows are the pairs, so the lists must be equally long (or pass ids / prediction_ids)")
    refs = as_mapping(references, "references", ids)
    hyps = as_mapping(predictions, "predictions", prediction_ids if prediction_ids is not None
                      else (ids if not isinstance(predictions, Mapping) else None))
    missing, extra = [k for k in refs if k not in hyps], [k for k in hyps if k not in refs]
    if missing or extra:
        raise ValueError(f"predictions: no report for id(s) {missing[:5]} of the references (and {len(extra)} id(s) of "
                         f"the predictions have no reference: {extra[:5]}); reports are paired by id")
    if not refs:
        raise ValueError("references: cannot evaluate an empty set of report pairs")
    return [(key, refs[key], hyps[key]) for key in refs]


_TEXT_FIELDS = ("report", "text", "prediction", "reference", "findings")


def read_reports(path: str | os.PathLike, *, field: str = "reports") -> dict[str, str]:
    """Reports by id from a file: JSON lines (``{"id": ..., "report": ...}``; ``sample_id`` and
    ``text`` are accepted too), a JSON object ``{id: report}`` or list of such records, or plain
    text (one report per line, ids ``"1"``, ``"2"``, ... by line number).

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> (folder / "refs.jsonl").write_text('{"id": "s1", "report": "No effusion."}\\n{"sample_id": 7, "text": "Edema."}\\n')
    74
    >>> read_reports(folder / "refs.jsonl")
    {'s1': 'No effusion.', '7': 'Edema.'}
    """
    target = Path(path)
    if not target.is_file():
        raise FileNotFoundError(f"{field}: no such file {str(target)!r}")
    text = target.read_text(encoding="utf-8")
    if target.suffix == ".txt":
        return {str(number): line.strip() for number, line in enumerate(text.splitlines(), start=1) if line.strip()}
    try:
        whole = json.loads(text) if target.suffix == ".json" else None
    except json.JSONDecodeError as error:
        raise ValueError(f"{field}: {target} is not valid JSON ({error})") from None
    if isinstance(whole, dict):
        return {str(k): _text(v, field, k) for k, v in whole.items()}
    records = whole if isinstance(whole, list) else []
    if whole is None:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{field}: {target}:{number} is not valid JSON ({error}); write one "
                                 '{"id": ..., "report": ...} object per line') from None
    out: dict[str, str] = {}
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise ValueError(f"{field}: {target} record {number} is not an object with an id and a report")
        rid = record.get("id", record.get("sample_id"))
        report = next((record[k] for k in _TEXT_FIELDS if k in record), None)
        if rid is None or report is None:
            raise ValueError(f"{field}: {target} record {number} needs an 'id' (or 'sample_id') and a 'report' "
                             f"(or one of {', '.join(_TEXT_FIELDS[1:])})")
        if str(rid) in out:
            raise ValueError(f"{field}: {target} has id {rid!r} twice; ids must be unique")
        out[str(rid)] = _text(report, field, rid)
    return out


def _rng(*parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def shuffle_options(question: MCQ, seed: int, stage: str) -> MCQ:
    """``question`` with its options in a seeded random order (the key follows its option).

    The order depends on ``(seed, stage, question text, options)`` only, so the same question is
    shuffled the same way in any run, process or batch.

    >>> q = MCQ("Heart size?", ("Normal", "Enlarged", "Small", "Not mentioned"), "B")
    >>> s = shuffle_options(q, 123, "before_filter")
    >>> s.key_text, sorted(s.options) == sorted(q.options), s == shuffle_options(q, 123, "before_filter")
    ('Enlarged', True, True)
    """
    order = _rng(int(seed), stage, question.question, list(question.options)).permutation(len(question.options))
    options = tuple(question.options[i] for i in order)
    return MCQ(question.question, options, LETTERS[int(np.flatnonzero(order == LETTERS.index(question.key))[0])])


# --------------------------------------------------------------------------- one agent's question set


@dataclass
class _Question:
    index: int
    written: MCQ
    filtering: MCQ
    final: MCQ | None = None
    with_report: str | None = None
    without_report: str | None = None
    reason: str = ""
    failure: str | None = None

    @property
    def kept(self) -> bool:
        return self.reason == "kept"


@dataclass
class _Side:
    """The questions one agent wrote from one report text, filtered."""

    text: str
    requested: int
    attempts: int = 0
    generation_failures: int = 0
    duplicates: int = 0
    incomplete: int = 0
    extra: int = 0
    last_error: str | None = None
    questions: list[_Question] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        reasons = [q.reason for q in self.questions]
        return {"requested": self.requested, "yielded": len(self.questions), "attempts": self.attempts,
                "generation_failures": self.generation_failures, "duplicates": self.duplicates,
                "incomplete": self.incomplete, "extra": self.extra, "kept": reasons.count("kept"),
                "filtered_wrong_with_report": reasons.count("wrong_with_report"),
                "filtered_right_without_report": reasons.count("right_without_report"),
                "lost_to_failures": reasons.count("failed_with_report") + reasons.count("failed_without_report")}


def _failure_text(reply_text: str, error: str | None) -> str:
    if error is not None:
        return error
    return f"unreadable answer {reply_text[:80]!r}"


class Icare:
    """ICARE with one backend and one set of settings; reuses each report's questions across calls.

    Args:
        backend: a :class:`~shovir.icare.backends.Backend` or a backend name (``"offline"``,
            ``"openai"``, ``"transformers"``) built with ``backend_options``.
        backend_options: options of a named backend (e.g. ``base_url``, ``model``).
        cache: a :class:`~shovir.icare.cache.CallCache`, a JSONL path, or ``None`` (memory).
        n_questions: questions asked per report (the authors' 40).
        seed: the evaluation seed: sent with every call and seeding the option shuffles (123).
        variant: ``"shuffled"`` (result of record) or ``"unshuffled"``.
        max_attempts: question-writing calls per report at most (>= 1).
        progress: progress bars per stage.

    Two "models" scored against the same references: the reference side is written once.

    >>> with Icare("offline") as evaluator:
    ...     first = evaluator.evaluate({"s1": "Cardiomegaly."}, {"s1": "Cardiomegaly."}, n_resamples=0)
    ...     second = evaluator.evaluate({"s1": "Cardiomegaly."}, {"s1": "No cardiomegaly."}, n_resamples=0)
    >>> first["icare_gt"], second["icare_gt"], second["calls"]["reports_reused"]
    (1.0, 0.0, 1)
    """

    def __init__(self, backend: Backend | str = "offline", backend_options: Mapping[str, Any] | None = None, *,
                 cache: CallCache | str | os.PathLike | None = None, n_questions: int = DEFAULT_QUESTIONS,
                 seed: int = DEFAULT_SEED, variant: str = "shuffled", max_attempts: int = 3,
                 progress: bool = False) -> None:
        for name, value, minimum in (("n_questions", n_questions, 1), ("max_attempts", max_attempts, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer (the authors' 123), got {seed!r}")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        self.backend = get_backend(backend, **dict(backend_options or {}))
        self.caller = Caller(self.backend, cache, progress=progress)
        self.n_questions, self.seed, self.variant, self.max_attempts = n_questions, seed, variant, max_attempts
        self._sides: dict[str, _Side] = {}
        self.reused = 0

    def config(self) -> dict[str, Any]:
        """The settings and backend identity a result was computed with."""
        return {"backend": self.backend.identity(), "n_questions": self.n_questions, "seed": self.seed,
                "variant": self.variant, "max_attempts": self.max_attempts}

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> "Icare":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----- calls
    def _answer_call(self, question: MCQ, report: str | None) -> Call:
        return Call("answer", answer_prompt(question.question, question.options, report), ANSWER_MAX_TOKENS, self.seed,
                    task={"question": question.question, "options": list(question.options), "report": report})

    def _answers(self, pairs: list[tuple[MCQ, str | None]], desc: str) -> list[tuple[str | None, str | None, str]]:
        """``(letter or None, failure or None, raw text)`` per (question, report) pair."""
        replies = self.caller.run([self._answer_call(q, report) for q, report in pairs], desc=desc)
        out = []
        for (question, _), reply in zip(pairs, replies):
            letter = normalize_answer(reply.text, question.options) if reply.ok else None
            out.append((letter, None if letter else _failure_text(reply.text, reply.error), reply.text))
        return out

    # ----- steps 1 and 2: writing and filtering, once per distinct report text
    def prepare(self, texts: Sequence[str]) -> None:
        """Write and filter the questions of every text not seen yet (each stage in one batch)."""
        new = [t for t in dict.fromkeys(texts) if t not in self._sides]
        self.reused += len(set(texts)) - len(new)
        if not new:
            return
        sides = {text: _Side(text, self.n_questions) for text in new}
        seen: dict[str, set[str]] = {text: set() for text in new}
        written: dict[str, list[MCQ]] = {text: [] for text in new}
        active = list(new)
        for attempt in range(self.max_attempts):
            active = [t for t in active if len(written[t]) < self.n_questions]
            if not active:
                break
            calls = []
            for text in active:
                have = written[text]
                prompt = mcq_prompt(text, self.n_questions - len(have), [q.question for q in have])
                calls.append(Call("mcq", prompt, MCQ_MAX_TOKENS, self.seed,
                                  task={"report": text, "n": self.n_questions - len(have),
                                        "avoid": [q.question for q in have]}))
            replies = self.caller.run(calls, desc=f"ICARE writing questions (attempt {attempt + 1})")
            still = []
            for text, reply in zip(active, replies):
                side = sides[text]
                side.attempts += 1
                if not reply.ok:
                    side.generation_failures += 1
                    side.last_error = reply.error
                    still.append(text)
                    continue
                parsed = parse_mcqs(reply.text)
                side.incomplete += parsed.incomplete
                added = 0
                for item in parsed.items:
                    key = question_key(item.question)
                    if key in seen[text]:
                        side.duplicates += 1
                    elif len(written[text]) >= self.n_questions:
                        side.extra += 1
                    else:
                        seen[text].add(key)
                        written[text].append(item)
                        added += 1
                if added:  # no new question: at temperature 0 another attempt would repeat this one
                    still.append(text)
            active = still
        shuffled = self.variant == "shuffled"
        for text in new:
            side = sides[text]
            for index, item in enumerate(written[text]):
                filtering = shuffle_options(item, self.seed, "before_filter") if shuffled else item
                side.questions.append(_Question(index, item, filtering))
        pairs = [(q.filtering, report) for text in new for q in sides[text].questions for report in (text, None)]
        answers = iter(self._answers(pairs, "ICARE filtering"))
        for text in new:
            for q in sides[text].questions:
                (with_letter, with_failure, _), (without_letter, without_failure, _) = next(answers), next(answers)
                q.with_report, q.without_report = with_letter, without_letter
                key = q.filtering.key
                if with_letter is not None and with_letter != key:
                    q.reason = "wrong_with_report"
                elif without_letter is not None and without_letter == key:
                    q.reason = "right_without_report"
                elif with_letter is None:
                    q.reason, q.failure = "failed_with_report", with_failure
                elif without_letter is None:
                    q.reason, q.failure = "failed_without_report", without_failure
                else:
                    q.reason = "kept"
                    q.final = shuffle_options(q.filtering, self.seed, "after_filter") if shuffled else q.filtering
            self._sides[text] = sides[text]

    # ----- steps 3 and 4: answering and agreement, per evaluated model
    def evaluate(
        self,
        references: Mapping[Any, str] | Sequence[str],
        predictions: Mapping[Any, str] | Sequence[str],
        *,
        ids: Sequence[Any] | None = None,
        prediction_ids: Sequence[Any] | None = None,
        log_path: str | os.PathLike | None = None,
        n_resamples: int = 1000,
        confidence: float = 0.95,
        bootstrap_seed: int = 0,
    ) -> dict[str, Any]:
        """ICARE of report pairs joined by id (:func:`pair_reports`; see the module docstring).

        Returns :func:`~shovir.metrics.icare.icare_agreement`'s result plus ``counts`` (per side:
        questions asked for, yielded, kept, filtered, lost to failures, ...), per-report counts
        under ``per_report[id]["counts"]``, ``calls`` (made, saved, failed, and the reports whose
        questions were reused), ``config`` and ``log`` (the log's path, or ``None``).
        """
        pairs = pair_reports(references, predictions, ids, prediction_ids)
        before = dict(self.caller.stats)
        reused_before = self.reused
        self.prepare([text for _, ref, hyp in pairs for text in (ref, hyp)])
        jobs: list[tuple[MCQ, str | None]] = []
        plan: list[tuple[str, str, _Question]] = []
        for rid, ref, hyp in pairs:
            for source, text in (("gt", ref), ("gen", hyp)):
                for q in self._sides[text].questions:
                    if q.kept:
                        assert q.final is not None
                        plan.append((rid, source, q))
                        jobs += [(q.final, ref), (q.final, hyp)]
        answers = self._answers(jobs, "ICARE answering")
        answered: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        for position, (rid, source, q) in enumerate(plan):
            answered[(rid, source, q.index)] = (answers[2 * position], answers[2 * position + 1])
        report_ids, sources, answers_gt, answers_gen, keys = [], [], [], [], []
        log: list[dict[str, Any]] = []
        per_counts: dict[str, dict[str, dict[str, int]]] = {}
        for rid, ref, hyp in pairs:
            per_counts[rid] = {}
            for source, text in (("gt", ref), ("gen", hyp)):
                side = self._sides[text]
                counts = side.counts()
                counts.update(answered=0, agreements=0, answer_failures=0)
                for q in side.questions:
                    row: dict[str, Any] = {
                        "record": "question", "report_id": rid, "source": source, "index": q.index,
                        "question": q.written.question, "options": list(q.filtering.options), "key": q.filtering.key,
                        "key_text": q.filtering.key_text, "answer_with_report": q.with_report,
                        "answer_without_report": q.without_report, "kept": q.kept, "reason": q.reason,
                        "final_options": None, "final_key": None, "answer_gt": None, "answer_gen": None,
                        "agreement": None, "failure": q.failure}
                    if q.kept:
                        assert q.final is not None
                        (gt_letter, gt_failure, _), (gen_letter, gen_failure, _) = answered[(rid, source, q.index)]
                        row.update(final_options=list(q.final.options), final_key=q.final.key, answer_gt=gt_letter,
                                   answer_gen=gen_letter)
                        if gt_letter is None or gen_letter is None:
                            counts["answer_failures"] += 1
                            row["failure"] = "; ".join(f"agent {who}: {why}" for who, why in
                                                       (("GT", gt_failure), ("GEN", gen_failure)) if why)
                        else:
                            row["agreement"] = gt_letter == gen_letter
                            counts["answered"] += 1
                            counts["agreements"] += int(gt_letter == gen_letter)
                        report_ids.append(rid)
                        sources.append(source)
                        answers_gt.append(gt_letter)
                        answers_gen.append(gen_letter)
                        keys.append(q.final.key)
                    log.append(row)
                if side.last_error and not side.questions:
                    counts["last_generation_error"] = side.last_error  # type: ignore[assignment]
                per_counts[rid][source] = counts
        result = icare_agreement(report_ids, sources, answers_gt, answers_gen, all_report_ids=[p[0] for p in pairs],
                                 keys=keys, n_resamples=n_resamples, confidence=confidence, seed=bootstrap_seed)
        totals: dict[str, dict[str, int]] = {}
        for source in ("gt", "gen"):
            keys = [k for k, v in per_counts[pairs[0][0]][source].items() if isinstance(v, int)]
            totals[source] = {k: sum(int(per_counts[rid][source][k]) for rid, _, _ in pairs) for k in keys}
        for rid, _, _ in pairs:
            result["per_report"][rid]["counts"] = per_counts[rid]
        result["counts"] = totals
        result["calls"] = {key: self.caller.stats[key] - before[key] for key in before}
        result["calls"]["reports_reused"] = self.reused - reused_before
        result["config"] = self.config()
        result["log"] = None
        if log_path is not None:
            for rid, _, _ in pairs:
                for source in ("gt", "gen"):
                    log.append({"record": "report", "report_id": rid, "source": source, **per_counts[rid][source],
                                "score": result["per_report"][rid][f"icare_{source}"]})
            result["log"] = str(write_jsonl(log_path, log))
        return result


def icare_from_answers(
    agent_answers: Sequence[Mapping[str, Any]],
    report_ids: Sequence[Any],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    bootstrap_seed: int = 0,
) -> dict[str, Any]:
    """ICARE recomputed without a judge from saved agent answers: the ``"question"`` records of a
    per-question log (or any mappings with ``report_id``, ``source``, ``answer_gt``,
    ``answer_gen`` and optionally ``kept``). Records with ``kept: false`` were filtered out and do
    not count (they are tallied under ``filtered``); answers are normalised to letters first, and
    an unreadable or missing answer is a failure. ``report_ids`` are the evaluated pairs.

    >>> log = [{"report_id": "r1", "source": "gt", "kept": True, "answer_gt": "A", "answer_gen": "a)"},
    ...        {"report_id": "r1", "source": "gen", "kept": True, "answer_gt": "B", "answer_gen": "C"},
    ...        {"report_id": "r1", "source": "gen", "kept": False, "answer_gt": None, "answer_gen": None},
    ...        {"report_id": "r2", "source": "gt", "kept": True, "answer_gt": "D", "answer_gen": None}]
    >>> out = icare_from_answers(log, ["r1", "r2"], n_resamples=0)
    >>> out["icare_gt"], out["icare_gen"], out["answer_failures"], out["filtered"]
    (1.0, 0.0, {'gt': 1, 'gen': 0}, 1)
    """
    ids, sources, gt, gen, keys = [], [], [], [], []
    filtered = 0
    for index, record in enumerate(agent_answers):
        if not isinstance(record, Mapping):
            raise ValueError(f"agent_answers[{index}]: expected a mapping with report_id, source, answer_gt and "
                             f"answer_gen (a question record of the ICARE log), got {type(record).__name__}")
        if record.get("record", "question") != "question":
            continue  # the log's per-report summary lines
        missing = [k for k in ("report_id", "source") if k not in record]
        if missing:
            raise ValueError(f"agent_answers[{index}]: missing {', '.join(missing)}")
        if record.get("kept", True) is False:
            filtered += 1
            continue
        answers = []
        for key in ("answer_gt", "answer_gen"):
            value = record.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"agent_answers[{index}].{key}: expected a letter, a reply string or None, got {value!r}")
            answers.append(normalize_answer(value))
        ids.append(record["report_id"])
        sources.append(record["source"])
        gt.append(answers[0])
        gen.append(answers[1])
        keys.append(record.get("final_key"))
    known = keys if keys and all(k in LETTERS for k in keys) else None  # the log's keys count off-key agreements
    result = icare_agreement(ids, sources, gt, gen, all_report_ids=list(report_ids), keys=known, n_resamples=n_resamples,
                             confidence=confidence, seed=bootstrap_seed)
    result["filtered"] = filtered
    return result


def write_jsonl(path: str | os.PathLike, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``rows`` as JSON lines to ``path`` atomically (a temporary file, then a rename).

    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "log.jsonl"
    >>> write_jsonl(target, [{"a": 1}]).read_text()
    '{"a": 1}\\n'
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return target


def icare(
    references: Mapping[Any, str] | Sequence[str],
    predictions: Mapping[Any, str] | Sequence[str],
    *,
    ids: Sequence[Any] | None = None,
    prediction_ids: Sequence[Any] | None = None,
    backend: Backend | str = "offline",
    backend_options: Mapping[str, Any] | None = None,
    evaluator: Icare | None = None,
    cache: CallCache | str | os.PathLike | None = None,
    log_path: str | os.PathLike | None = None,
    n_questions: int = DEFAULT_QUESTIONS,
    seed: int = DEFAULT_SEED,
    variant: str = "shuffled",
    max_attempts: int = 3,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    bootstrap_seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """ICARE-GT, ICARE-GEN and ICARE-AVG of report pairs (ICARE §3), with a fresh :class:`Icare`
    or the given ``evaluator`` (which keeps its backend, settings and reused questions).

    With the offline approximation, deleting the effusion sentence from a generated report loses
    the agreement on that finding:

    >>> refs = {"s1": "Mild cardiomegaly. Small left pleural effusion.", "s2": "No acute cardiopulmonary process."}
    >>> out = icare(refs, dict(refs), n_resamples=0)
    >>> out["icare_gt"], out["icare_gen"], out["questions"], out["counts"]["gt"]["yielded"]
    (1.0, 1.0, {'gt': 2, 'gen': 2}, 26)
    >>> out = icare(refs, {"s1": "Mild cardiomegaly.", "s2": "No acute cardiopulmonary process."}, n_resamples=0)
    >>> out["icare_gt"], out["icare_gen"], out["agreements"], out["per_report"]["s1"]["icare_gt"]
    (0.5, 1.0, {'gt': 1, 'gen': 1}, 0.5)
    """
    if evaluator is None:
        evaluator = Icare(backend, backend_options, cache=cache, n_questions=n_questions, seed=seed, variant=variant,
                          max_attempts=max_attempts, progress=progress)
        owned = True
    else:
        owned = False
    try:
        return evaluator.evaluate(references, predictions, ids=ids, prediction_ids=prediction_ids, log_path=log_path,
                                  n_resamples=n_resamples, confidence=confidence, bootstrap_seed=bootstrap_seed)
    finally:
        if owned:
            evaluator.close()
