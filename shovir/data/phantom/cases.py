"""Dataset images: sample a whole case (:func:`sample_case`) and render it (:func:`render_case`).

The top of the package: a case ties the patient and scenario of
:mod:`~shovir.data.phantom.scenarios`, the anatomy of :mod:`~shovir.data.phantom.anatomy`, the
placed findings of :mod:`~shovir.data.phantom.findings` and the report of
:mod:`~shovir.data.phantom.reports` to one ``(seed, index)``, each part from its own keyed
generator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from shovir import labels as L
from shovir.data.phantom.anatomy import Anatomy, sample_anatomy
from shovir.data.phantom.findings import FindingSpec, _place_findings, render
from shovir.data.phantom.reports import write_report
from shovir.data.phantom.scenarios import SCENARIOS, _labels_of, patient_of, stable_rng

__all__ = ["Case", "render_case", "sample_case"]


@dataclass(frozen=True)
class Case:
    """Everything sampled for one dataset image, before rendering."""

    index: int
    seed: int
    image_id: str
    patient_id: str
    study_id: str
    patient: int
    visit: int
    scenario: str
    present: tuple[str, ...]
    uncertain: tuple[str, ...]
    anatomy: Anatomy
    specs: tuple[FindingSpec, ...]
    report: str
    labels: tuple[int, ...]


def sample_case(index: int, seed: int = 0, n_patients: int | None = None) -> Case:
    """Sample image ``index`` of the dataset with ``seed``: patient, scenario, findings, anatomy,
    placements, report and codes (no rendering; independent of the image size).

    >>> case = sample_case(0)
    >>> case.image_id, case.patient_id, case.study_id
    ('syn-00000', 'P0000', 'S00000')
    >>> sample_case(0) == case
    True
    """
    if index < 0:
        raise ValueError(f"index must be >= 0, got {index}")
    patient, visit = patient_of(index, seed, n_patients)
    scenario, present, subtle = _labels_of(index, seed, n_patients)
    anatomy = sample_anatomy(stable_rng(seed, "patient", patient), stable_rng(seed, "study", index))
    specs = _place_findings(present, subtle, anatomy, scenario, stable_rng(seed, "placement", index))
    uncertain = subtle.copy()
    report_rng = stable_rng(seed, "report", index)
    pneumonia = L.class_index("Pneumonia")
    if present[pneumonia]:
        uncertain[pneumonia] = bool(subtle[L.class_index("Consolidation")]) or report_rng.random() < 0.5
    report, codes = write_report(present, uncertain, specs, report_rng)
    names = [L.CLASSES[c] for c in range(L.NUM_CLASSES)]
    return Case(
        index=index,
        seed=seed,
        image_id=f"syn-{index:05d}",
        patient_id=f"P{patient:04d}",
        study_id=f"S{index:05d}",
        patient=patient,
        visit=visit,
        scenario=SCENARIOS[scenario].name,
        present=tuple(n for n, flag in zip(names, present) if flag),
        uncertain=tuple(n for n, flag in zip(names, uncertain) if flag and present[L.class_index(n)]),
        anatomy=anatomy,
        specs=tuple(specs),
        report=report,
        labels=tuple(int(c) for c in codes),
    )


def render_case(case: Case, size: int = 320, exclude: Iterable[int] = ()) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Render ``case`` at ``size`` pixels; ``exclude`` lists indices into ``case.specs`` to leave
    out (same anatomy and noise, so the image changes only inside their boxes).

    >>> image, boxes = render_case(sample_case(0), size=128)
    >>> image.shape, all(b["x_max"] <= 128 for b in boxes)
    ((128, 128), True)
    """
    skip = set(exclude)
    specs = [spec for i, spec in enumerate(case.specs) if i not in skip]
    return render(case.anatomy, specs, size, stable_rng(case.seed, "noise", case.index))
