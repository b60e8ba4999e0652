"""The sweep plan: which model inputs answer which (sample, condition) requests, and their keys.

A *request* is one (sample, condition) to answer. A *call* is one distinct model input. Several
requests share a call when their inputs are identical: p = 0 of every graded condition is the
unperturbed image, and whole-image conditions (baseline, full noise, blank) do not depend on the
target class, so all (image, class) samples of one image share them. Calls are listed image by
image (every call that shows one image together), so the input pipeline decodes an image once for
all of its conditions (:mod:`shovir.runner.inputs`).

A call's **input key** hashes everything that determines the model input, by content: the shown
image's bytes (a digest, so adding or reordering samples changes nothing), the intervention and
its strength, for box conditions the target class and the boxes, the perturbation seed, noise
model and random-box size distribution where they matter, the question, options and context
report, and the donor image of a substitution. The **generation key** adds the model's config
hash (checkpoint, prompt, decoding): :func:`generation_key`. Generations are cached under it
(:mod:`shovir.runner.store`), never under the sweep.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence

from shovir import labels as L
from shovir.conditions import KINDS, ConditionSpec
from shovir.perturb import shuffle_pairs, swap_pairs

__all__ = ["Request", "Call", "Plan", "build_plan", "generation_key", "message_seed"]


def _digest(data: Any, size: int = 12) -> str:
    return hashlib.blake2b(json.dumps(data, sort_keys=True, default=str).encode(), digest_size=size).hexdigest()


def generation_key(model_hash: str, input_key: str) -> str:
    """The cache key of one generation: the model config hash and the call's input key.

    >>> generation_key("m1", "abc") == generation_key("m1", "abc") != generation_key("m2", "abc")
    True
    """
    return _digest(["generation", model_hash, input_key], 16)


def message_seed(seed: int, key: str) -> int:
    """The sampling seed of one message: a 63-bit hash of the run seed and its generation key, so
    batch size, batch composition, resumes and world size never change a sampled output.

    >>> message_seed(3, "k") == message_seed(3, "k") != message_seed(4, "k")
    True
    """
    return int.from_bytes(hashlib.blake2b(f"{int(seed)}|{key}".encode(), digest_size=8).digest(), "little") & (2**63 - 1)


@dataclass(frozen=True)
class Request:
    """One (sample, condition) to answer, and the call that answers it."""

    sample_id: str
    image_id: str
    target_class: str
    condition: str
    p: float
    with_report: bool
    call: str = ""
    donor_image_id: str | None = None

    @property
    def key(self) -> str:
        return f"{self.sample_id}|{self.condition}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Call:
    """One model input and the requests it answers.

    ``row`` holds the question and report; ``image_row`` is the first row holding the shown image
    (rows of one image share it: decode it from there once).
    """

    key: str
    image_condition: str
    p: float
    row: int
    donor_row: int | None
    donor_image_id: str | None
    with_report: bool
    requests: list[Request] = field(default_factory=list)
    image_row: int = -1

    def __post_init__(self) -> None:
        if self.image_row < 0:
            self.image_row = self.source_row

    @property
    def source_row(self) -> int:
        """The row that describes the shown image: its boxes and target class (the donor's row
        for a substitution)."""
        return self.row if self.donor_row is None else self.donor_row


@dataclass
class Plan:
    """The calls, the requests they answer, what could not be planned (``skipped``, by reason) and
    how substitutions were paired (``pairing``: e.g. images swapped with another patient's study)."""

    calls: list[Call]
    requests: list[Request]
    skipped: dict[str, list[str]]
    pairing: dict[str, list[str]] = field(default_factory=dict)

    @property
    def saved_calls(self) -> int:
        """Model calls avoided by sharing identical inputs."""
        return len(self.requests) - len(self.calls)

    def samples_per_kind(self) -> dict[str, int]:
        """Distinct samples each condition kind answers (DOCO covers only pairs with context boxes)."""
        samples: dict[str, set[str]] = {}
        for request in self.requests:
            samples.setdefault(ConditionSpec.parse(request.condition).name, set()).add(request.sample_id)
        return {kind: len(ids) for kind, ids in samples.items()}

    def summary(self) -> dict[str, Any]:
        return {"requests": len(self.requests), "calls": len(self.calls), "saved_calls": self.saved_calls,
                "skipped": {reason: len(ids) for reason, ids in self.skipped.items()},
                "pairing": {kind: len(ids) for kind, ids in self.pairing.items()},
                "samples_per_kind": self.samples_per_kind()}


def _labels_for_swap(columns: Mapping[str, list[Any]]) -> list[list[int]]:
    if "labels" in columns:
        return columns["labels"]
    if "finding" in columns and "answer" in columns:  # ModaLens VQA rows: positive findings per image
        positives: dict[str, set[str]] = {}
        for image_id, finding, answer in zip(columns["image_id"], columns["finding"], columns["answer"]):
            if finding in L.CLASSES and str(answer).strip().lower() == "yes":
                positives.setdefault(image_id, set()).add(finding)
        return [L.codes_from_mentions({name: 1 for name in positives.get(image_id, ())}) for image_id in columns["image_id"]]
    raise ValueError("swap needs per-image 'labels' (14 codes) or ModaLens rows with 'finding' and 'answer'")


def build_plan(
    columns: Mapping[str, list[Any]],
    conditions: Sequence[ConditionSpec],
    seed: int,
    prompt: str | None = None,
    image_digests: Mapping[str, str] | None = None,
    perturbation: Mapping[str, Any] | None = None,
    swap_ssim_below: float | None = None,
    load_image: Callable[[str], Any] | None = None,
) -> Plan:
    """Plan a sweep over a dataset given its non-image columns (``dataset.remove_columns("image")[:]``).

    ``image_digests`` maps image ids to a digest of their bytes (the image ids themselves when
    omitted); ``perturbation`` holds the run settings that shape perturbed images (noise model
    and sampler, RO box-size distribution, blank image). ``swap_ssim_below`` switches on the
    ModaLens SSIM guard of the swap pairing (donors at least that similar are rejected), with
    ``load_image(image_id)`` supplying the pixels.

    >>> cols = {"image_id": ["a", "a", "b"], "sample_id": ["a::Edema", "a::Cardiomegaly", "b::Edema"],
    ...         "target_class": ["Edema", "Cardiomegaly", "Edema"]}
    >>> plan = build_plan(cols, [ConditionSpec("baseline"), ConditionSpec("oco", 0.0), ConditionSpec("oco", 1.0)], seed=0)
    >>> plan.summary()
    {'requests': 9, 'calls': 5, 'saved_calls': 4, 'skipped': {}, 'pairing': {}, 'samples_per_kind': {'baseline': 3, 'oco': 3}}
    """
    n = len(columns["image_id"])
    image_ids = [str(v) for v in columns["image_id"]]
    sample_ids = [str(v) for v in columns.get("sample_id", image_ids)]
    targets = [str(v or "") for v in columns.get("target_class", [""] * n)]
    questions = columns.get("question", [prompt] * n)
    options = columns.get("options", [None] * n)
    reports = columns.get("report", [None] * n)
    digests = dict(image_digests or {})
    settings = dict(perturbation or {})
    first_row: dict[str, int] = {}
    for row, image_id in enumerate(image_ids):
        first_row.setdefault(image_id, row)
    donors: dict[str, dict[str, str]] = {}
    skipped: dict[str, list[str]] = {}
    pairing: dict[str, list[str]] = {}
    if any(spec.kind.donor == "shuffle" for spec in conditions):
        donors["shuffle"] = shuffle_pairs(image_ids, seed)
    if any(spec.kind.donor == "swap" for spec in conditions):
        labels = _labels_for_swap(columns)
        for column in ("patient_id", "study_id"):
            if column not in columns:
                raise ValueError(f"condition 'swap' needs a {column!r} column (same-patient studies); this dataset has none")
        rows = [{"image_id": image_ids[r], "patient_id": columns["patient_id"][r], "study_id": columns["study_id"][r],
                 "labels": labels[r]} for r in first_row.values()]
        choices, unpaired = swap_pairs(rows, seed, ssim_below=swap_ssim_below, load_image=load_image)
        donors["swap"] = {image_id: choice.donor_id for image_id, choice in choices.items()}
        if unpaired:
            skipped["swap_without_discordant_study"] = unpaired
        fallback = sorted(image_id for image_id, choice in choices.items() if choice.tier == "other_patient")
        if fallback:  # swapped, but with another patient's study: counted, as ModaLens reports it
            pairing["swap_other_patient"] = fallback
    calls: dict[str, Call] = {}
    requests: list[Request] = []
    for spec in conditions:
        kind = spec.kind
        shown = spec.image_condition
        shown_kind = KINDS[shown]
        # a box kind on a pair without its boxes shows the clean image: ShoViR scores DOCO only on
        # pairs that have context boxes (§3.2), so such pairs are not planned, and are counted
        empty_boxes = [c for c in kind.requires if kind.family == "box" and c.endswith("_boxes") and c in columns]
        for row in range(n):
            missing = next((c for c in empty_boxes if not columns[c][row]), None)
            if missing is not None:
                skipped.setdefault(f"{kind.name}_without_{missing}", [])
                if sample_ids[row] not in skipped[f"{kind.name}_without_{missing}"]:
                    skipped[f"{kind.name}_without_{missing}"].append(sample_ids[row])
                continue
            donor_id = None
            if kind.donor is not None:
                donor_id = donors[kind.donor].get(image_ids[row])
                if donor_id is None:
                    continue  # listed in plan.skipped
            source = donor_id if donor_id is not None else image_ids[row]
            identity: dict[str, Any] = {
                "image": digests.get(source, source),
                "condition": shown,
                "p": spec.image_p,
                "seed": seed,
                "question": questions[row],
                "options": options[row] or None,
                "report": reports[row] if spec.with_report else None,
            }
            if shown_kind.needs_target:
                identity["target"] = targets[row]
                identity["boxes"] = [columns.get(c, [None] * n)[row] for c in ("disease_boxes", "context_boxes", "boxes")]
            if shown != "baseline" and shown_kind.family != "substitution":
                identity["noise"] = settings.get("noise")
                identity["sampler"] = settings.get("sampler")
                if shown == "blank":
                    identity["blank"] = settings.get("blank")
                if shown_kind.random_boxes:
                    identity["box_sizes"] = settings.get("box_sizes")
            key = _digest(identity, 16)
            request = Request(sample_ids[row], image_ids[row], targets[row], spec.label, spec.p, spec.with_report, key, donor_id)
            requests.append(request)
            if key not in calls:
                calls[key] = Call(key, shown, spec.image_p, row, None if donor_id is None else first_row[donor_id],
                                  donor_id, spec.with_report, image_row=first_row[source])
            calls[key].requests.append(request)
    # image by image: the input pipeline then decodes each image once for all of its conditions
    first_call: dict[int, int] = {}
    for index, call in enumerate(calls.values()):
        first_call.setdefault(call.image_row, index)
    ordered = sorted(enumerate(calls.values()), key=lambda item: (first_call[item[1].image_row], item[0]))
    return Plan([call for _, call in ordered], requests, skipped, pairing)
