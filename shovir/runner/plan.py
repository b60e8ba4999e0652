"""The sweep plan: which model calls produce which records, with duplicate calls removed.

A *request* is one record to produce: a sample under a condition. A *call* is one model input.
Several requests share a call when their inputs are identical: p = 0 of every box condition and
of full noise is the unperturbed image, and whole-image conditions (baseline, full noise, blank)
do not depend on the target class, so all (image, class) samples of one image share them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from shovir import labels as L
from shovir.perturb import shuffle_pairs, swap_pairs
from shovir.runner.config import ConditionSpec

__all__ = ["Request", "Call", "Plan", "build_plan"]

_BOX = ("oco", "doco", "ro", "ro_area")


@dataclass(frozen=True)
class Request:
    """One record to produce."""

    sample_id: str
    image_id: str
    target_class: str
    condition: str
    p: float
    with_report: bool

    @property
    def key(self) -> str:
        return f"{self.sample_id}|{self.condition}"


@dataclass
class Call:
    """One model input and the requests it answers."""

    key: str
    image_condition: str
    p: float
    row: int
    donor_row: int | None
    donor_image_id: str | None
    with_report: bool
    requests: list[Request] = field(default_factory=list)


@dataclass
class Plan:
    calls: list[Call]
    requests: list[Request]
    skipped: dict[str, list[str]]

    @property
    def saved_calls(self) -> int:
        """Model calls avoided by sharing identical inputs."""
        return len(self.requests) - len(self.calls)

    def summary(self) -> dict[str, Any]:
        return {"requests": len(self.requests), "calls": len(self.calls), "saved_calls": self.saved_calls,
                "skipped": {reason: len(ids) for reason, ids in self.skipped.items()}}


def _labels_for_swap(columns: dict[str, list[Any]]) -> list[list[int]]:
    if "labels" in columns:
        return columns["labels"]
    if "finding" in columns and "answer" in columns:  # ModaLens VQA rows: positive findings per image
        positives: dict[str, set[str]] = {}
        for image_id, finding, answer in zip(columns["image_id"], columns["finding"], columns["answer"]):
            if finding in L.CLASSES and str(answer).strip().lower() == "yes":
                positives.setdefault(image_id, set()).add(finding)
        return [L.codes_from_mentions({name: 1 for name in positives.get(image_id, ())}) for image_id in columns["image_id"]]
    raise ValueError("swap needs per-image 'labels' (14 codes) or ModaLens rows with 'finding' and 'answer'")


def build_plan(columns: dict[str, list[Any]], conditions: Sequence[ConditionSpec], seed: int, prompt: str | None = None) -> Plan:
    """Plan a sweep over a dataset given its non-image columns (``dataset.remove_columns("image")[:]``).

    >>> cols = {"image_id": ["a", "a", "b"], "sample_id": ["a::Edema", "a::Cardiomegaly", "b::Edema"],
    ...         "target_class": ["Edema", "Cardiomegaly", "Edema"]}
    >>> plan = build_plan(cols, [ConditionSpec("baseline"), ConditionSpec("oco", 0.0), ConditionSpec("oco", 1.0)], seed=0)
    >>> plan.summary()
    {'requests': 9, 'calls': 5, 'saved_calls': 4, 'skipped': {}}
    """
    n = len(columns["image_id"])
    image_ids = [str(v) for v in columns["image_id"]]
    sample_ids = [str(v) for v in columns.get("sample_id", image_ids)]
    targets = [str(v or "") for v in columns.get("target_class", [""] * n)]
    questions = columns.get("question", [prompt] * n)
    first_row: dict[str, int] = {}
    for row, image_id in enumerate(image_ids):
        first_row.setdefault(image_id, row)
    donors: dict[str, dict[str, str]] = {}
    skipped: dict[str, list[str]] = {}
    if any(spec.name == "shuffle" for spec in conditions):
        donors["shuffle"] = shuffle_pairs(image_ids, seed)
    if any(spec.name == "swap" for spec in conditions):
        labels = _labels_for_swap(columns)
        rows = [{"image_id": image_ids[r], "patient_id": columns["patient_id"][r], "study_id": columns["study_id"][r],
                 "labels": labels[r]} for r in first_row.values()]
        choices, unpaired = swap_pairs(rows, seed)
        donors["swap"] = {image_id: choice.donor_id for image_id, choice in choices.items()}
        if unpaired:
            skipped["swap_without_discordant_study"] = unpaired
    calls: dict[str, Call] = {}
    requests: list[Request] = []
    for spec in conditions:
        for row in range(n):
            donor_id = None
            if spec.name in donors:
                donor_id = donors[spec.name].get(image_ids[row])
                if donor_id is None:
                    continue  # listed in plan.skipped
            request = Request(sample_ids[row], image_ids[row], targets[row], spec.label, spec.p, spec.with_report)
            requests.append(request)
            effective = spec.image_condition
            identity = {
                "image": image_ids[row],
                "condition": effective,
                "p": 0.0 if effective == "baseline" else spec.p,
                "target": targets[row] if effective in _BOX else "",
                "question": questions[row],
                "report": spec.with_report,
                "donor": donor_id,
            }
            key = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]
            if key not in calls:
                calls[key] = Call(key, effective, identity["p"], row, None if donor_id is None else first_row[donor_id],
                                  donor_id, spec.with_report)
            calls[key].requests.append(request)
    return Plan(list(calls.values()), requests, skipped)
