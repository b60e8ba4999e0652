"""ICARE answer agreement (``icare_metric.txt`` §3.4): the score formulas, from the agents' answers.

The question writing, filtering and answering live in :mod:`shovir.icare`; this module only turns
the two agents' answers to the *kept* questions into scores. A kept question ``k`` of report pair
``r`` comes from one side (``"gt"``: written from the reference report, ``"gen"``: from the
generated report) and carries two letters: ``A_GT(Q_k)``, the answer of the agent that reads the
reference report, and ``A_GEN(Q_k)``, the answer of the agent that reads the generated report.

* Report level (§3.4, "Report-level agreement"):
  ``S_GT,r = (1/|Q_GT,r|) Σ_{k ∈ Q_GT,r} 1[A_GT(Q_k) = A_GEN(Q_k)]``, and ``S_GEN,r`` alike over
  the questions written from the generated report.
* Dataset level (§3.4, "Dataset-level agreement"): the same indicator averaged over *all* kept
  questions of a side: ``S_GT = agreements / kept questions`` (not the mean of the report scores).
* ICARE-AVG (§3.1) = the mean of ICARE-GT and ICARE-GEN, at either level.

Scores are shares in [0, 1] like every shovir metric; the paper prints them in percent (its
shuffled IU X-ray result ICARE-GT 65.12% is 4,573 / 7,022 = 0.6512 here).

Failures are neither agreement nor disagreement: a question where either agent's answer failed
(an API error, or a reply with no readable letter: ``None``) leaves both the numerator and the
denominator and is counted under ``answer_failures``. Two identical wrong answers *do* agree —
agreement is the paper's definition, not correctness — and, when the questions' keys are given,
``agreements_off_key`` counts those agreements on an option other than the key, so they are seen.

The dataset-level interval is a percentile bootstrap that resamples *reports* (every question of a
report pair moves together, :func:`shovir.metrics.bootstrap.bootstrap_intervals`), including the
pairs that kept no question. The report-level summary is the mean and the population standard
deviation (``ddof=0``) of the defined report scores; a report with no answered kept question of a
side has no score for it (``None``), and ICARE-AVG of a report needs both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shovir.metrics.bootstrap import NO_INTERVAL, bootstrap_intervals

__all__ = ["LETTERS", "SIDES", "check_letter", "icare_agreement"]

SIDES = ("gt", "gen")
"""The two question sources: written from the reference (``gt``) or the generated (``gen``) report."""

LETTERS = ("A", "B", "C", "D")
"""The option letters of an ICARE question (four options, §3.2)."""


def check_letter(value: Any, field: str, index: int) -> str | None:
    """A normalised answer (``"A"``–``"D"``) or ``None`` (a failed answer); anything else raises.

    >>> check_letter("B", "answers_gt", 0), check_letter(None, "answers_gt", 1)
    ('B', None)
    >>> check_letter("B)", "answers_gen", 3)
    Traceback (most recent call last):
    ...
    ValueError: answers_gen[3]: expected one of A, B, C, D or None (a failed answer), got 'B)'; normalise replies with shovir.icare.normalize_answer first
    """
    if value is None or value in LETTERS:
        return value
    raise ValueError(f"{field}[{index}]: expected one of {', '.join(LETTERS)} or None (a failed answer), got {value!r}; "
                     "normalise replies with shovir.icare.normalize_answer first")


def _ratio(numerator: float, denominator: float) -> float | None:
    return float(numerator / denominator) if denominator else None


def _summary(values: list[float | None]) -> dict[str, Any]:
    defined = np.array([v for v in values if v is not None], dtype=np.float64)
    if defined.size == 0:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": float(defined.mean()), "std": float(defined.std()), "n": int(defined.size)}


def icare_agreement(
    report_ids: Sequence[str],
    sources: Sequence[str],
    answers_gt: Sequence[str | None],
    answers_gen: Sequence[str | None],
    *,
    all_report_ids: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """ICARE-GT, ICARE-GEN and ICARE-AVG at dataset and report level (ICARE §3.4) from the two
    agents' answers to the kept questions, one row per question.

    Args:
        report_ids: the report pair each kept question belongs to.
        sources: ``"gt"`` or ``"gen"`` per question (which report it was written from).
        answers_gt: the letter the reference-report agent chose, or ``None`` when its answer failed.
        answers_gen: the letter the generated-report agent chose, or ``None``.
        all_report_ids: every report pair evaluated (pairs without a kept question count in
            ``n``, get ``None`` scores and are resampled by the bootstrap); default: the ids seen.
        keys: the key letter of each question (as it was shown to the agents), to count the
            agreements on a wrong option (``agreements_off_key``; ``None`` per side without keys).
        n_resamples, confidence, seed: the report-clustered percentile bootstrap (0: no interval).

    Returns a dict with ``icare_gt``, ``icare_gen``, ``icare_avg`` (dataset level, in [0, 1], or
    ``None`` without answered questions), ``ci`` (each → ``{"low", "high"}``), ``agreements``,
    ``questions`` (answered by both agents), ``answer_failures`` and ``agreements_off_key`` per side, ``report_level``
    (each score → ``{"mean", "std", "n"}``), ``per_report`` (id → the three scores) and ``n``.

    Hand-checked: report r1 agrees on 2 of 3 GT questions (one more failed) and 1 of 1 GEN
    question, r2 on 0 of 1 GT question and has no GEN question:

    >>> out = icare_agreement(
    ...     ["r1", "r1", "r1", "r1", "r1", "r2"], ["gt", "gt", "gt", "gt", "gen", "gt"],
    ...     ["A", "B", "C", None, "D", "A"], ["A", "B", "D", "A", "D", "C"], n_resamples=0)
    >>> out["icare_gt"], out["icare_gen"], out["icare_avg"], out["answer_failures"]
    (0.5, 1.0, 0.75, {'gt': 1, 'gen': 0})
    >>> out["per_report"]["r1"], out["per_report"]["r2"]["icare_gen"]
    ({'icare_gt': 0.6666666666666666, 'icare_gen': 1.0, 'icare_avg': 0.8333333333333333}, None)
    >>> out["report_level"]["icare_gt"]
    {'mean': 0.3333333333333333, 'std': 0.3333333333333333, 'n': 2}
    """
    n = len(report_ids)
    for field, column in (("sources", sources), ("answers_gt", answers_gt), ("answers_gen", answers_gen)):
        if len(column) != n:
            raise ValueError(f"{field}: expected {n} entries (one per kept question, like report_ids), got {len(column)}")
    ids = [_check_id(value, "report_ids", i) for i, value in enumerate(report_ids)]
    for i, source in enumerate(sources):
        if source not in SIDES:
            raise ValueError(f"sources[{i}]: expected 'gt' or 'gen', got {source!r}")
    gt = [check_letter(value, "answers_gt", i) for i, value in enumerate(answers_gt)]
    gen = [check_letter(value, "answers_gen", i) for i, value in enumerate(answers_gen)]
    if keys is not None:
        if len(keys) != n:
            raise ValueError(f"keys: expected {n} entries (one per kept question, like report_ids), got {len(keys)}")
        for i, key in enumerate(keys):
            if key not in LETTERS:
                raise ValueError(f"keys[{i}]: expected one of {', '.join(LETTERS)}, got {key!r}")
    if all_report_ids is None:
        universe = list(dict.fromkeys(ids))
    else:
        universe = [_check_id(value, "all_report_ids", i) for i, value in enumerate(all_report_ids)]
        if len(set(universe)) != len(universe):
            raise ValueError("all_report_ids: ids must be unique (one per report pair)")
        unknown = sorted(set(ids) - set(universe))
        if unknown:
            raise ValueError(f"report_ids: {unknown[:5]} are not in all_report_ids; every question must belong to an "
                             "evaluated report pair")
    if not universe:
        raise ValueError("report_ids: cannot score an empty set of report pairs")

    # one row per answered question: [agree_gt, count_gt, agree_gen, count_gen]
    rows: list[list[float]] = []
    clusters: list[str] = []
    failures = {"gt": 0, "gen": 0}
    off_key: dict[str, int | None] = {"gt": 0, "gen": 0} if keys is not None else {"gt": None, "gen": None}
    per: dict[str, np.ndarray] = {rid: np.zeros(4) for rid in universe}
    for index, (rid, source, a, b) in enumerate(zip(ids, sources, gt, gen)):
        if a is None or b is None:
            failures[source] += 1
            continue
        if keys is not None and a == b != keys[index]:
            off_key[source] += 1  # type: ignore[operator]
        row = [0.0, 0.0, 0.0, 0.0]
        offset = 0 if source == "gt" else 2
        row[offset] = float(a == b)
        row[offset + 1] = 1.0
        rows.append(row)
        clusters.append(rid)
        per[rid] += row
    seen = set(clusters)
    for rid in universe:  # pairs without an answered question are still resampled
        if rid not in seen:
            rows.append([0.0, 0.0, 0.0, 0.0])
            clusters.append(rid)
    values = np.asarray(rows, dtype=np.float64)
    totals = values.sum(axis=0)

    def share(s: np.ndarray, k: int) -> np.ndarray:
        return s[:, k] / s[:, k + 1]

    statistics = {"icare_gt": lambda s: share(s, 0), "icare_gen": lambda s: share(s, 2),
                  "icare_avg": lambda s: (share(s, 0) + share(s, 2)) / 2}
    intervals = bootstrap_intervals(statistics, values, clusters, n_resamples, confidence, seed)
    estimates = {"icare_gt": _ratio(totals[0], totals[1]), "icare_gen": _ratio(totals[2], totals[3])}
    estimates["icare_avg"] = (None if estimates["icare_gt"] is None or estimates["icare_gen"] is None
                              else (estimates["icare_gt"] + estimates["icare_gen"]) / 2)
    per_report: dict[str, dict[str, float | None]] = {}
    for rid in universe:
        s = per[rid]
        g, e = _ratio(s[0], s[1]), _ratio(s[2], s[3])
        per_report[rid] = {"icare_gt": g, "icare_gen": e, "icare_avg": None if g is None or e is None else (g + e) / 2}
    return {
        **estimates,
        "ci": {key: (intervals[key].bounds() if n_resamples and estimates[key] is not None else dict(NO_INTERVAL))
               for key in statistics},
        "agreements": {"gt": int(totals[0]), "gen": int(totals[2])},
        "questions": {"gt": int(totals[1]), "gen": int(totals[3])},
        "answer_failures": failures,
        "agreements_off_key": off_key,
        "report_level": {key: _summary([scores[key] for scores in per_report.values()]) for key in statistics},
        "per_report": per_report,
        "n": len(universe),
    }


def _check_id(value: Any, field: str, index: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"{field}[{index}]: expected a non-empty string (or integer) report id, got {value!r}")
    return str(value)
