"""Synthetic chest X-ray phantoms with known findings, boxes, labels and reports.

This module is the generative model behind :class:`shovir.data.synthetic.SyntheticCXR`, the
dataset the demo, the tests and the known-answer calibration experiments run on. It is pure
numpy (no ``datasets``): given ``(seed, index)`` it samples a *case* (patient, latent scenario,
findings, anatomy, report, 14 CheXpert codes) and renders it to an 8-bit grayscale image with one
tight box per finding appearance.

Anatomy
    A frontal (PA) chest radiograph built in an attenuation domain and mapped through
    ``1 - exp(-k A)``: soft tissue thickening toward the midline, two lung fields with rounded
    apices and sharp costophrenic angles, hemidiaphragm domes (the right one higher), heart
    silhouette, aortic knob, trachea and main bronchi, hila, vessel markings radiating from the
    hila, posterior and anterior ribs, clavicles, spine, a gastric bubble, then an exposure
    gradient and Gaussian acquisition noise. Patient ``j`` has its own anatomy (heart size, lung
    shape, dome level, rib phase and spacing, vessel pattern, exposure) drawn from a generator keyed
    by ``(seed, "patient", j)``; each study adds small jitter (position, inspiration, exposure,
    noise), so two studies of one patient look like the same patient.

Findings
    Every localisable finding is an additive change of attenuation that is exactly zero outside
    its box (boxes are the tight bounding boxes of that change), so occluding the box removes the
    whole evidence and rendering with and without the finding differs only inside it:

    =========================== ================================================ ======================
    class                       appearance                                       box / anatomy
    =========================== ================================================ ======================
    Enlarged Cardiomediastinum  upper mediastinum widened into both lungs        upper mediastinum
    Cardiomegaly                heart silhouette enlarged (CTR > 0.5)            cardiac silhouette
    Lung Opacity                hazy ground-glass patch, vessels still visible   <side> <zone> lung zone
    Lung Lesion                 round, slightly lobulated nodule or mass         <side> <zone> lung zone
    Edema                       bilateral perihilar haze with septal lines       <side> hilar structures (x2)
    Consolidation               dense irregular patch with air bronchograms      <side> <zone> lung zone
    Atelectasis                 plate-like band at a base; compressive band      <side> lower lung zone
                                above an effusion on the same side
    Pneumothorax                apical lucent rim without markings + pleural     <side> apical zone
                                line
    Pleural Effusion            meniscus opacity blunting a costophrenic angle   <side> costophrenic angle
    Pleural Other               pleural thickening along the lateral wall        <side> lateral chest wall
    Fracture                    rib discontinuity with a gap and an offset       <side> <n>th rib
    Support Devices             pacemaker generator with lead loop, chest port   <side> chest wall /
                                or endotracheal tube                             trachea
    Pneumonia                   report only (no box), with consolidation         --
    =========================== ================================================ ======================

    About 10 % of present findings (never devices) are rendered subtle (contrast or size x0.6,
    still several times the noise) and reported as uncertain (code 3). Boxes of different
    findings are placed so that they rarely overlap, except two designed overlaps (IoU > 0.15)
    that exercise the B_c̄ filter of ShoViR §3.2: compressive atelectasis above a same-side
    effusion, and a ground-glass halo (Lung Opacity) next to a consolidation.

Co-occurrence
    Labels come from latent scenarios. A study's scenario is its patient's scenario with
    probability :data:`SCENARIO_PERSISTENCE` (0.75), otherwise a fresh draw; either way its
    marginal distribution is the scenario weights. Given the scenario each finding is present
    independently with the scenario's probability, OR-ed with a sporadic rate
    (:data:`SPORADIC_RATE`: 0.04 for each of the 12 localisable findings, in abnormal scenarios
    only, never for Pneumonia):

    ====================== ====== ===========================================================
    scenario               weight findings (probability)
    ====================== ====== ===========================================================
    normal                 0.20   none: *No Finding*
    heart_failure          0.19   Cardiomegaly 1, Edema 0.8, Pleural Effusion 0.7,
                                  Enlarged Cardiomediastinum 0.6
    infection              0.17   Consolidation 1, Pneumonia 0.8, Lung Opacity 0.7,
                                  Pleural Effusion 0.3
    postoperative_icu      0.17   Support Devices 1, Atelectasis 0.7, Pleural Effusion 0.4,
                                  Pneumothorax 0.3
    trauma                 0.13   Fracture 1, Pneumothorax 0.5, Pleural Other 0.4
    nodule                 0.14   Lung Lesion 1, Pleural Other 0.4
    ====================== ====== ===========================================================

    No Finding follows the CheXpert rule: present when no class other than Support Devices is
    (device-only post-operative studies are No Finding, as the CheXpert labeler and
    :mod:`shovir.labelers` code them). Exact P(B | A) from :func:`cooccurrence_matrix` (row A,
    column B; the last row gives the prevalence P(B) from :func:`marginal_probabilities`):

    ======  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  =====  ====  ====  ====
    A \\ B  ECM   Card  Opac  Lesn  Edem  Cons  Pna   Atel  PTX   Eff   PlOth  Frac  SD    NF
    ======  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  =====  ====  ====  ====
    ECM     1.00  0.83  0.07  0.08  0.68  0.09  0.04  0.07  0.07  0.63  0.07   0.08  0.09  0.00
    Card    0.55  1.00  0.06  0.07  0.72  0.07  0.03  0.06  0.06  0.66  0.06   0.06  0.07  0.00
    Opac    0.07  0.09  1.00  0.08  0.08  0.83  0.66  0.07  0.07  0.33  0.07   0.07  0.08  0.00
    Lesn    0.07  0.08  0.07  1.00  0.08  0.08  0.03  0.07  0.07  0.10  0.38   0.07  0.08  0.00
    Edem    0.54  0.87  0.07  0.07  1.00  0.08  0.03  0.07  0.07  0.65  0.06   0.07  0.08  0.00
    Cons    0.06  0.08  0.63  0.07  0.07  1.00  0.70  0.06  0.06  0.33  0.06   0.07  0.07  0.00
    Pna     0.04  0.04  0.71  0.04  0.04  1.00  1.00  0.04  0.04  0.33  0.04   0.04  0.04  0.00
    Atel    0.07  0.09  0.07  0.08  0.08  0.08  0.04  1.00  0.30  0.41  0.07   0.07  0.83  0.00
    PTX     0.07  0.09  0.07  0.08  0.08  0.09  0.04  0.30  1.00  0.24  0.24   0.49  0.41  0.00
    Eff     0.32  0.51  0.18  0.06  0.42  0.24  0.16  0.22  0.12  1.00  0.06   0.06  0.29  0.00
    PlOth   0.07  0.09  0.07  0.46  0.08  0.09  0.04  0.07  0.25  0.11  1.00   0.43  0.09  0.00
    Frac    0.07  0.09  0.07  0.07  0.08  0.08  0.03  0.07  0.45  0.10  0.37   1.00  0.08  0.00
    SD      0.06  0.08  0.06  0.07  0.07  0.07  0.03  0.63  0.30  0.41  0.06   0.07  1.00  0.07
    NF      0.00  0.00  0.00  0.00  0.00  0.00  0.00  0.00  0.00  0.00  0.00   0.00  0.06  1.00
    P(B)    0.14  0.21  0.15  0.17  0.18  0.20  0.14  0.15  0.14  0.27  0.14   0.16  0.20  0.21
    ======  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  =====  ====  ====  ====

    Context-derivable classes (:data:`CONTEXT_DERIVABLE`): a context-only model can report them
    from their co-findings, which DOCO occludes while the class's own box stays visible. Exact
    values from :func:`conditional_probability`:

    ============= ================================ =============== ===============
    class         predicted from                   P(class | all)  P(class)
    ============= ================================ =============== ===============
    Edema         Cardiomegaly + Pleural Effusion  0.778           0.178
    Pneumonia     Consolidation                    0.697           0.136
    Atelectasis   Support Devices                  0.625           0.146
    ============= ================================ =============== ===============

    With 200 images (seed 0) every localisable finding has at least 21 (image, class) pairs
    (Pleural Other; 15-45 expected across seeds, mean >= 27).

Reports
    Template sentences, several per finding and code, one CheXpert class per sentence except the
    combined negations "No pleural effusion or pneumothorax." and "No focal consolidation,
    pleural effusion or pneumothorax.": positive findings are stated plainly, uncertain ones with
    "possible", "questionable", "may", "borderline" or "concerning for", negated ones with "no",
    "not" or "normal". A sentence without a class keyword carries no code. Pneumonia follows its
    consolidation ("This is concerning for pneumonia." is code 3). *No Finding* is 1 exactly when
    no class other than Support Devices is positive or uncertain. See :data:`CLASS_KEYWORDS` for
    the words that name each class; the rule-based labeler of :mod:`shovir.labelers` reproduces
    every code of these reports.

Determinism
    Each image draws from generators keyed by a BLAKE2b hash of ``(seed, stream, index)`` (never
    Python's per-process salted string hash, never the position of an earlier draw), so image ``i`` does not depend on
    images ``0..i-1`` and the first ``k`` images are the same whatever the dataset size. Patients
    get 1-4 consecutive studies (mean 2.5) from a hash of ``(seed, "visits", patient)``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from shovir import labels as L

__all__ = [
    "PHANTOM_VERSION",
    "LOCALIZED_FINDINGS",
    "REPORT_ONLY_FINDINGS",
    "Scenario",
    "SCENARIOS",
    "SPORADIC_RATE",
    "SCENARIO_PERSISTENCE",
    "SUBTLE_RATE",
    "SUBTLE_STRENGTH",
    "CONTEXT_DERIVABLE",
    "CLASS_KEYWORDS",
    "presence_probabilities",
    "marginal_probabilities",
    "conditional_probability",
    "cooccurrence_matrix",
    "sample_presence",
    "stable_rng",
    "patient_of",
    "scenario_of",
    "dataset_presence",
    "Anatomy",
    "sample_anatomy",
    "FindingSpec",
    "Case",
    "sample_case",
    "render",
    "render_case",
    "write_report",
]

PHANTOM_VERSION = "1.0.0"
"""Version of the generative model, used as the builder's config version (its cache key).
Bump it whenever the images, boxes, labels or reports for a given seed change."""

LOCALIZED_FINDINGS: tuple[str, ...] = tuple(c for c in L.LOCALIZABLE if c != "Pneumonia")
"""The 12 classes the phantom draws with a box (CheXbert order)."""

REPORT_ONLY_FINDINGS: tuple[str, ...] = ("Pneumonia",)
"""Classes that appear in reports and labels but never carry a box."""

# ----------------------------------------------------------------------------------------------
# Scenario model
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """A latent clinical scenario: its weight and the presence probability of each finding.

    >>> SCENARIOS[1].name, SCENARIOS[1].probabilities["Cardiomegaly"]
    ('heart_failure', 1.0)
    """

    name: str
    weight: float
    probabilities: Mapping[str, float]
    sporadic: bool = True


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("normal", 0.20, {}, sporadic=False),
    Scenario(
        "heart_failure",
        0.19,
        {"Cardiomegaly": 1.0, "Edema": 0.8, "Pleural Effusion": 0.7, "Enlarged Cardiomediastinum": 0.6},
    ),
    Scenario("infection", 0.17, {"Consolidation": 1.0, "Pneumonia": 0.8, "Lung Opacity": 0.7, "Pleural Effusion": 0.3}),
    Scenario(
        "postoperative_icu",
        0.17,
        {"Support Devices": 1.0, "Atelectasis": 0.7, "Pleural Effusion": 0.4, "Pneumothorax": 0.3},
    ),
    Scenario("trauma", 0.13, {"Fracture": 1.0, "Pneumothorax": 0.5, "Pleural Other": 0.4}),
    Scenario("nodule", 0.14, {"Lung Lesion": 1.0, "Pleural Other": 0.4}),
)
"""The latent scenarios (weights sum to 1); see the module docstring for the table."""

SPORADIC_RATE: Mapping[str, float] = {name: (0.0 if name in REPORT_ONLY_FINDINGS else 0.04) for name in L.LOCALIZABLE}
"""Probability that a finding appears on its own in an abnormal scenario (OR-ed with the scenario)."""

SCENARIO_PERSISTENCE = 0.75
"""Probability that a study keeps its patient's scenario (otherwise it draws a fresh one)."""

SUBTLE_RATE = 0.10
"""Fraction of present findings rendered subtle and reported as uncertain (never devices)."""

SUBTLE_STRENGTH = 0.6
"""Contrast (or size) factor of a subtle finding; still several times the acquisition noise."""

CONTEXT_DERIVABLE: Mapping[str, tuple[str, ...]] = {
    "Edema": ("Cardiomegaly", "Pleural Effusion"),
    "Pneumonia": ("Consolidation",),
    "Atelectasis": ("Support Devices",),
}
"""Classes a context-only model can report from their co-findings (class → predictors)."""

_NO_FINDING = L.class_index("No Finding")
_SUPPORT_DEVICES = L.class_index("Support Devices")
_PATHOLOGIES = tuple(c for c in range(_NO_FINDING) if c != _SUPPORT_DEVICES)
"""Classes that cancel No Finding (all but Support Devices, as in the CheXpert labeler)."""


def _check_scenarios() -> None:
    total = sum(s.weight for s in SCENARIOS)
    if abs(total - 1.0) > 1e-9:
        raise AssertionError(f"scenario weights sum to {total}, not 1")
    for scenario in SCENARIOS:
        for name, p in scenario.probabilities.items():
            L.class_index(name)
            if not 0.0 <= p <= 1.0:
                raise AssertionError(f"{scenario.name}: probability of {name} is {p}")


_check_scenarios()


def presence_probabilities() -> tuple[np.ndarray, np.ndarray]:
    """Scenario weights ``w`` (K,) and presence probabilities ``q`` (K, 14) given the scenario.

    ``q[k, c] = 1 - (1 - p_kc)(1 - s_c)`` with the sporadic rate ``s_c`` (0 in *normal*).
    Findings are independent given the scenario. No Finding follows the CheXpert rule (present
    when no class other than Support Devices is present), so ``q[k, No Finding]`` is the
    product of ``1 - q[k, c]`` over the other findings; it is *not* independent of them (see
    :func:`cooccurrence_matrix`).

    >>> w, q = presence_probabilities()
    >>> q.shape, round(float(w.sum()), 6), float(q[0, L.class_index("No Finding")])
    ((6, 14), 1.0, 1.0)
    """
    weights = np.array([s.weight for s in SCENARIOS], dtype=np.float64)
    q = np.zeros((len(SCENARIOS), L.NUM_CLASSES), dtype=np.float64)
    for k, scenario in enumerate(SCENARIOS):
        for c, name in enumerate(L.LOCALIZABLE):
            p = scenario.probabilities.get(name, 0.0)
            s = SPORADIC_RATE[name] if scenario.sporadic else 0.0
            q[k, c] = 1.0 - (1.0 - p) * (1.0 - s)
        q[k, _NO_FINDING] = float(np.prod(1.0 - q[k, list(_PATHOLOGIES)]))
    return weights, q


def marginal_probabilities() -> dict[str, float]:
    """Prevalence P(class present) of every class under the scenario mixture.

    >>> round(marginal_probabilities()["No Finding"], 3)
    0.214
    """
    weights, q = presence_probabilities()
    return {name: float(weights @ q[:, c]) for c, name in enumerate(L.CLASSES)}


def _probability_all(names: Iterable[str]) -> np.ndarray:
    """P(every class in ``names`` present | scenario k), shape (K,)."""
    _, q = presence_probabilities()
    indices = {L.class_index(name) for name in names}
    if _NO_FINDING in indices and indices & set(_PATHOLOGIES):
        return np.zeros(len(SCENARIOS))  # No Finding excludes every pathology
    return np.prod(q[:, sorted(indices)], axis=1) if indices else np.ones(len(SCENARIOS))


def conditional_probability(target: str, given: Sequence[str]) -> float:
    """Exact P(target present | every class in ``given`` present) under the mixture.

    >>> round(conditional_probability("Pneumonia", ["Consolidation"]), 3)
    0.697
    >>> conditional_probability("Cardiomegaly", [])  == marginal_probabilities()["Cardiomegaly"]
    True
    >>> conditional_probability("No Finding", ["Edema"])
    0.0
    """
    weights, _ = presence_probabilities()
    denominator = float(weights @ _probability_all(given))
    if denominator == 0.0:
        raise ValueError(f"conditioning event {list(given)} has probability 0")
    return float(weights @ _probability_all([*given, target])) / denominator


def cooccurrence_matrix() -> np.ndarray:
    """Exact P(B | A) as a (14, 14) array, rows A and columns B in :data:`shovir.labels.CLASSES`
    order; the diagonal is 1.

    >>> m = cooccurrence_matrix()
    >>> cm, ed = L.class_index("Cardiomegaly"), L.class_index("Edema")
    >>> round(float(m[cm, ed]), 3), round(float(m[ed, cm]), 3)
    (0.721, 0.868)
    """
    return np.array([[conditional_probability(b, [a]) for b in L.CLASSES] for a in L.CLASSES])


def _draw_presence(scenario: int, rng: np.random.Generator) -> np.ndarray:
    """Presence (bool, 14) given the scenario; always consumes 26 uniforms."""
    spec = SCENARIOS[scenario]
    u_scenario = rng.random(len(L.LOCALIZABLE))
    u_sporadic = rng.random(len(L.LOCALIZABLE))
    present = np.zeros(L.NUM_CLASSES, dtype=bool)
    for c, name in enumerate(L.LOCALIZABLE):
        hit = u_scenario[c] < spec.probabilities.get(name, 0.0)
        if spec.sporadic:
            hit = hit or u_sporadic[c] < SPORADIC_RATE[name]
        present[c] = hit
    present[_NO_FINDING] = not present[list(_PATHOLOGIES)].any()
    return present


def sample_presence(n: int, rng: np.random.Generator | int = 0) -> np.ndarray:
    """``n`` independent label sets (bool, (n, 14)) from the scenario mixture, without rendering.

    >>> sample_presence(5, 0).shape
    (5, 14)
    """
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(int(rng))
    weights, _ = presence_probabilities()
    scenarios = generator.choice(len(SCENARIOS), size=int(n), p=weights)
    return np.stack([_draw_presence(int(k), generator) for k in scenarios]) if n else np.zeros((0, L.NUM_CLASSES), bool)


# ----------------------------------------------------------------------------------------------
# Stable randomness and patients
# ----------------------------------------------------------------------------------------------


def stable_rng(seed: int, stream: str, index: int) -> np.random.Generator:
    """A generator keyed by a BLAKE2b digest of ``(seed, stream, index)``.

    Identical in every process and machine (PCG64 with a 128-bit key); independent of any other
    draw, so image ``i`` never depends on images ``0..i-1``.

    >>> float(stable_rng(0, "labels", 3).random()) == float(stable_rng(0, "labels", 3).random())
    True
    >>> float(stable_rng(0, "labels", 3).random()) == float(stable_rng(1, "labels", 3).random())
    False
    """
    payload = json.dumps(["shovir.phantom", int(seed), str(stream), int(index)]).encode("utf-8")
    key = int.from_bytes(hashlib.blake2b(payload, digest_size=16).digest(), "little")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))


@functools.lru_cache(maxsize=64)
def _visit_schedule(seed: int, n_images: int) -> tuple[tuple[int, int], ...]:
    schedule: list[tuple[int, int]] = []
    patient = 0
    while len(schedule) < n_images:
        visits = 1 + int(stable_rng(seed, "visits", patient).integers(0, 4))
        schedule.extend((patient, v) for v in range(visits))
        patient += 1
    return tuple(schedule[:n_images])


def patient_of(index: int, seed: int = 0, n_patients: int | None = None) -> tuple[int, int]:
    """``(patient, visit)`` of image ``index``: the patient number and the study's rank for it.

    With ``n_patients=None`` patients take 1-4 consecutive studies (uniform, mean 2.5) drawn from
    ``(seed, "visits", patient)``, so the mapping never depends on the dataset size. With an
    explicit ``n_patients`` studies are dealt round-robin (image ``i`` → patient
    ``i % n_patients``).

    >>> [patient_of(i, n_patients=3) for i in range(4)]
    [(0, 0), (1, 0), (2, 0), (0, 1)]
    >>> patient_of(0)
    (0, 0)
    """
    if index < 0:
        raise ValueError(f"index must be >= 0, got {index}")
    if n_patients is not None:
        return index % n_patients, index // n_patients
    size = 64
    while size <= index:
        size *= 2
    return _visit_schedule(int(seed), size)[index]


def scenario_of(index: int, seed: int = 0, n_patients: int | None = None) -> int:
    """Index into :data:`SCENARIOS` of image ``index`` (patient scenario, kept with probability
    :data:`SCENARIO_PERSISTENCE`).

    >>> 0 <= scenario_of(7) < len(SCENARIOS)
    True
    """
    patient, _ = patient_of(index, seed, n_patients)
    weights = np.array([s.weight for s in SCENARIOS])
    patient_scenario = int(stable_rng(seed, "patient-scenario", patient).choice(len(SCENARIOS), p=weights))
    rng = stable_rng(seed, "study-scenario", index)
    keep = rng.random() < SCENARIO_PERSISTENCE
    fresh = int(rng.choice(len(SCENARIOS), p=weights))
    return patient_scenario if keep else fresh


def _labels_of(index: int, seed: int, n_patients: int | None) -> tuple[int, np.ndarray, np.ndarray]:
    scenario = scenario_of(index, seed, n_patients)
    rng = stable_rng(seed, "labels", index)
    present = _draw_presence(scenario, rng)
    subtle = (rng.random(L.NUM_CLASSES) < SUBTLE_RATE) & present
    subtle[L.class_index("Support Devices")] = False
    subtle[_NO_FINDING] = False
    return scenario, present, subtle


def dataset_presence(n: int, seed: int = 0, n_patients: int | None = None) -> np.ndarray:
    """Presence (bool, (n, 14)) of the first ``n`` dataset images, exactly as the builder draws
    them, without anatomy, placement, report or rendering.

    >>> p = dataset_presence(50)
    >>> p.shape, bool((p[:, -1] == ~np.delete(p[:, :-1], L.class_index("Support Devices"), axis=1).any(axis=1)).all())
    ((50, 14), True)
    """
    return np.stack([_labels_of(i, seed, n_patients)[1] for i in range(n)]) if n else np.zeros((0, L.NUM_CLASSES), bool)


# ----------------------------------------------------------------------------------------------
# Small numerical helpers
# ----------------------------------------------------------------------------------------------


def _smoothstep(edge0: float | np.ndarray, edge1: float | np.ndarray, x: np.ndarray) -> np.ndarray:
    """Cubic Hermite step, 0 at ``edge0`` and 1 at ``edge1`` (either order); exactly 0/1 outside.

    >>> _smoothstep(0.0, 2.0, np.array([-1.0, 1.0, 3.0], np.float32)).tolist()
    [0.0, 0.5, 1.0]
    """
    t = np.asarray(x - edge0, dtype=np.float32)
    if np.ndim(edge0) == 0 and np.ndim(edge1) == 0:
        t *= np.float32(1.0 / (float(edge1) - float(edge0)))
    else:
        t /= np.asarray(edge1 - edge0, dtype=np.float32)
    np.maximum(t, 0.0, out=t)
    np.minimum(t, 1.0, out=t)
    out = t * np.float32(-2.0)
    out += np.float32(3.0)
    out *= t
    out *= t
    return out


def _span(coords: np.ndarray, lo: float, hi: float) -> slice:
    """Slice of the increasing 1-D ``coords`` that lie in ``[lo, hi]``."""
    return slice(int(np.searchsorted(coords, lo, "left")), int(np.searchsorted(coords, hi, "right")))


def _bump(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Smooth compact bump: 0 outside ``[lo, hi]``, 1 at the centre."""
    t = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    return (np.sin(np.pi * t) ** 2).astype(x.dtype if isinstance(x, np.ndarray) else np.float32)


def _interp_matrix(coords: np.ndarray, cells: int) -> np.ndarray:
    """(len(coords), cells + 3) cubic B-spline weights for coordinates in grid units [0, cells]."""
    i = np.floor(coords).astype(np.int64)
    f = coords - i
    w = np.stack(
        [(1 - f) ** 3 / 6, (3 * f**3 - 6 * f**2 + 4) / 6, (-3 * f**3 + 3 * f**2 + 3 * f + 1) / 6, f**3 / 6], axis=1
    )
    m = np.zeros((len(coords), cells + 3), dtype=np.float64)
    rows = np.arange(len(coords))
    for k in range(4):
        np.add.at(m, (rows, np.clip(i + k, 0, cells + 2)), w[:, k])
    return m


def _smooth_field(rng: np.random.Generator, ys: np.ndarray, xs: np.ndarray, cells: float) -> np.ndarray:
    """Smooth Gaussian-like random field (unit-ish variance) at normalised coordinates.

    ``ys``/``xs`` are 1-D coordinates in image units; ``cells`` is the number of lattice cells per
    unit length. The lattice covers the coordinate range, drawn from ``rng`` with a fixed count.
    """
    y0, x0 = float(ys.min()), float(xs.min())
    ny = int(math.ceil((float(ys.max()) - y0) * cells)) + 1
    nx = int(math.ceil((float(xs.max()) - x0) * cells)) + 1
    lattice = rng.standard_normal((ny + 3, nx + 3))
    wy = _interp_matrix((ys - y0) * cells, ny)
    wx = _interp_matrix((xs - x0) * cells, nx)
    return (wy @ lattice @ wx.T * 1.9).astype(np.float32)


def _segment_distance(x: np.ndarray, y: np.ndarray, p: tuple[float, float], q: tuple[float, float]) -> np.ndarray:
    """Distance from points ``(x, y)`` to the segment ``p``-``q``."""
    px, py = p
    dx, dy = q[0] - px, q[1] - py
    length2 = dx * dx + dy * dy
    t = np.clip(((x - px) * dx + (y - py) * dy) / max(length2, 1e-12), 0.0, 1.0)
    return np.sqrt((x - px - t * dx) ** 2 + (y - py - t * dy) ** 2)


# ----------------------------------------------------------------------------------------------
# Anatomy
# ----------------------------------------------------------------------------------------------

AIR = 0.66  # attenuation removed by a full-depth lung
MARKINGS = 0.2  # attenuation of the densest vessel markings
HEART = 0.07  # extra attenuation of the heart over the mediastinum


@dataclass(frozen=True)
class Anatomy:
    """Anatomy and acquisition parameters of one study (normalised image units, 0..1).

    Patient-level values come from ``(seed, "patient", patient)``; ``sample_anatomy`` adds the
    study's jitter. ``u`` runs left→right on the image (patient's right on the left), ``v``
    top→bottom.

    Fields, by group: pose (``shift_u``, ``shift_v``, ``scale``; study jitter); body and lungs
    (``body_half_width``, ``soft_density``, ``lung_center``, ``lung_half_width``, ``apex``);
    hemidiaphragms (``dome_right``, ``dome_left``: lateral levels, ``dome_height``); heart
    (``heart_cx``, ``heart_cy``, ``heart_rx``, ``heart_ry``, ``heart_angle``) and aortic knob
    (``knob_radius``); bones (``rib_phase``, ``rib_spacing``, ``rib_thickness``, ``clavicle_v``);
    ``gastric_bubble`` (visibility); exposure (``gain``, ``gamma``, ``offset``,
    ``gradient_angle``, ``gradient_amplitude``, ``noise_sigma``); ``texture_key`` seeds the
    patient's vessel tree.
    """

    shift_u: float
    shift_v: float
    scale: float
    body_half_width: float
    soft_density: float
    lung_center: float
    lung_half_width: float
    apex: float
    dome_right: float
    dome_left: float
    dome_height: float
    heart_cx: float
    heart_cy: float
    heart_rx: float
    heart_ry: float
    heart_angle: float
    knob_radius: float
    rib_phase: float
    rib_spacing: float
    rib_thickness: float
    clavicle_v: float
    gastric_bubble: float
    gain: float
    gamma: float
    offset: float
    gradient_angle: float
    gradient_amplitude: float
    noise_sigma: float
    texture_key: int

    # -- geometry in anatomical coordinates ------------------------------------------------
    def lung_axis(self, v: np.ndarray) -> np.ndarray:
        """Distance from the midline of a lung's vertical axis at height ``v``."""
        return self.lung_center + 0.03 * (v - 0.45)

    def lung_width(self, v: np.ndarray, apex_shift: float = 0.0) -> np.ndarray:
        """Half-width of a lung at height ``v`` (0 above the apex, rounded apex)."""
        rise = np.sqrt(np.clip((v - self.apex - apex_shift) / 0.13, 0.0, 1.0))
        widen = 1.0 + 0.22 * np.clip((v - 0.28) / 0.45, 0.0, 1.0)
        return self.lung_half_width * rise * widen

    def lateral_edge(self, v: np.ndarray, apex_shift: float = 0.0) -> np.ndarray:
        """Distance from the midline of a lung's (convex) lateral border at height ``v``."""
        bulge = 0.014 * np.sin(np.pi * np.clip((v - self.apex) / (0.8 - self.apex), 0.0, 1.0))
        return self.lung_axis(v) + self.lung_width(v, apex_shift) + bulge * (self.lung_width(v, apex_shift) > 0)

    def medial_edge(self, v: np.ndarray) -> np.ndarray:
        """Distance from the midline of the mediastinal border of the lungs at height ``v``."""
        return 0.078 - 0.05 * _smoothstep(0.36, 0.6, v)

    def dome(self, d: np.ndarray, side: int) -> np.ndarray:
        """Height of the hemidiaphragm at distance ``d`` from the midline (side -1 right, +1 left)."""
        base = self.dome_right if side < 0 else self.dome_left
        return base - self.dome_height * np.clip(1.0 - ((d - 0.19) / 0.21) ** 2, 0.0, 1.0)

    def to_pixels(self, u: float, v: float, size: int) -> tuple[float, float]:
        """Anatomical ``(u, v)`` → pixel ``(x, y)`` (continuous, pixel centres at +0.5)."""
        x = ((u - 0.5) * self.scale + 0.5 + self.shift_u) * size
        y = ((v - 0.5) * self.scale + 0.5 + self.shift_v) * size
        return x, y


def sample_anatomy(patient_rng: np.random.Generator, study_rng: np.random.Generator) -> Anatomy:
    """Patient anatomy from ``patient_rng`` plus study jitter from ``study_rng``.

    Both generators are consumed in a fixed order, so the anatomy of a patient is the same in all
    its studies up to the jitter.

    >>> a = sample_anatomy(stable_rng(0, "patient", 1), stable_rng(0, "study", 4))
    >>> b = sample_anatomy(stable_rng(0, "patient", 1), stable_rng(0, "study", 5))
    >>> a.rib_spacing == b.rib_spacing and a.texture_key == b.texture_key, a.shift_u == b.shift_u
    (True, False)
    """
    p = patient_rng
    patient = dict(
        scale=p.uniform(0.95, 1.03),
        body_half_width=p.uniform(0.44, 0.48),
        soft_density=p.uniform(0.9, 1.05),
        lung_center=p.uniform(0.205, 0.222),
        lung_half_width=p.uniform(0.122, 0.138),
        apex=p.uniform(0.11, 0.145),
        dome_right=p.uniform(0.745, 0.79),
        dome_left_offset=p.uniform(0.01, 0.03),
        dome_height=p.uniform(0.06, 0.085),
        heart_cx=0.5 + p.uniform(0.03, 0.05),
        heart_cy=p.uniform(0.62, 0.655),
        heart_rx=p.uniform(0.14, 0.158),
        heart_ry=p.uniform(0.098, 0.112),
        heart_angle=p.uniform(0.25, 0.45),
        knob_radius=p.uniform(0.026, 0.038),
        rib_phase=p.uniform(0.0, 0.03),
        rib_spacing=p.uniform(0.052, 0.06),
        rib_thickness=p.uniform(0.018, 0.023),
        clavicle_v=p.uniform(0.13, 0.165),
        gastric_bubble=p.uniform(0.0, 1.0),
        gain=p.uniform(1.3, 1.6),
        gamma=p.uniform(0.85, 1.15),
        texture_key=int(p.integers(0, 2**62)),
    )
    s = study_rng
    jitter = dict(
        shift_u=s.normal(0.0, 0.005),
        shift_v=s.normal(0.0, 0.005),
        scale=s.normal(0.0, 0.006),
        inspiration=s.normal(0.0, 0.006),
        heart=s.normal(0.0, 0.004),
        gain=s.normal(0.0, 0.03),
        gamma=s.normal(0.0, 0.03),
        offset=s.uniform(0.0, 0.04),
        gradient_angle=s.uniform(0.0, 2 * math.pi),
        gradient_amplitude=s.uniform(0.0, 0.07),
        noise_sigma=s.uniform(0.009, 0.013),
    )
    return Anatomy(
        shift_u=float(jitter["shift_u"]),
        shift_v=float(jitter["shift_v"]),
        scale=float(patient["scale"] * (1 + jitter["scale"])),
        body_half_width=float(patient["body_half_width"]),
        soft_density=float(patient["soft_density"]),
        lung_center=float(patient["lung_center"]),
        lung_half_width=float(patient["lung_half_width"]),
        apex=float(patient["apex"]),
        dome_right=float(patient["dome_right"] + jitter["inspiration"]),
        dome_left=float(patient["dome_right"] + patient["dome_left_offset"] + jitter["inspiration"]),
        dome_height=float(patient["dome_height"]),
        heart_cx=float(patient["heart_cx"]),
        heart_cy=float(patient["heart_cy"] + jitter["inspiration"] * 0.6 + jitter["heart"]),
        heart_rx=float(patient["heart_rx"]),
        heart_ry=float(patient["heart_ry"]),
        heart_angle=float(patient["heart_angle"]),
        knob_radius=float(patient["knob_radius"]),
        rib_phase=float(patient["rib_phase"]),
        rib_spacing=float(patient["rib_spacing"]),
        rib_thickness=float(patient["rib_thickness"]),
        clavicle_v=float(patient["clavicle_v"]),
        gastric_bubble=float(patient["gastric_bubble"]),
        gain=float(patient["gain"] * (1 + jitter["gain"])),
        gamma=float(patient["gamma"] * (1 + jitter["gamma"])),
        offset=float(jitter["offset"]),
        gradient_angle=float(jitter["gradient_angle"]),
        gradient_amplitude=float(jitter["gradient_amplitude"]),
        noise_sigma=float(jitter["noise_sigma"]),
        texture_key=int(patient["texture_key"]),
    )


@dataclass
class _Fields:
    """Rendered anatomy: coordinates and the layers findings modify (all float32)."""

    anatomy: Anatomy
    size: int
    u: np.ndarray  # (1, S) anatomical u of each column
    v: np.ndarray  # (S, 1) anatomical v of each row
    lung_free: np.ndarray  # (S, S) soft lung mask before the heart is cut out
    heart: np.ndarray  # (S, S) soft heart mask
    depth: np.ndarray  # (S, S) relative air depth of the lungs
    markings: np.ndarray  # (S, S) vessel markings in [0, 1]
    attenuation: np.ndarray  # (S, S) finding-free attenuation

    @property
    def lung(self) -> np.ndarray:
        return self.lung_free * (1.0 - self.heart)

    def crop(self, window: tuple[int, int, int, int]) -> "_View":
        y0, y1, x0, x1 = window
        return _View(
            anatomy=self.anatomy,
            u=self.u[:, x0:x1],
            v=self.v[y0:y1, :],
            lung_free=self.lung_free[y0:y1, x0:x1],
            heart=self.heart[y0:y1, x0:x1],
            depth=self.depth[y0:y1, x0:x1],
            markings=self.markings[y0:y1, x0:x1],
        )


@dataclass
class _View:
    """A window of :class:`_Fields` handed to a finding renderer."""

    anatomy: Anatomy
    u: np.ndarray
    v: np.ndarray
    lung_free: np.ndarray
    heart: np.ndarray
    depth: np.ndarray
    markings: np.ndarray

    @property
    def lung(self) -> np.ndarray:
        return self.lung_free * (1.0 - self.heart)

    @property
    def aeration(self) -> np.ndarray:
        """Attenuation the lung currently removes (air minus markings); filling it adds this back."""
        return self.lung * (AIR * self.depth - MARKINGS * self.markings)

    def d(self, side: int) -> np.ndarray:
        """Signed distance from the midline toward ``side`` (positive on that side)."""
        return (self.u - 0.5) * side


@functools.lru_cache(maxsize=8)
def _pixel_grid(size: int) -> np.ndarray:
    """Pixel-centre coordinates ``(i + 0.5) / size`` (read-only, cached)."""
    grid = (np.arange(size, dtype=np.float64) + 0.5) / size
    grid.setflags(write=False)
    return grid


def _lung_mask(anat: Anatomy, d: np.ndarray, v: np.ndarray, side: int, apex_shift: float = 0.0,
               lateral_shrink: np.ndarray | float = 0.0, soft: float = 0.004) -> np.ndarray:
    """Soft mask of one lung (above the dome); ``d`` is the signed distance toward ``side``."""
    axis = anat.lung_axis(v)
    width = anat.lung_width(v, apex_shift)
    lateral = anat.lateral_edge(v, apex_shift) - lateral_shrink
    medial = np.maximum(axis - width, anat.medial_edge(v))
    horizontal = _smoothstep(lateral + soft, lateral - soft, d) * _smoothstep(medial - soft, medial + soft, d)
    vertical = _smoothstep(anat.dome(np.abs(d), side) + soft, anat.dome(np.abs(d), side) - soft, v)
    alive = (width > 1e-4) & (lateral > medial)
    return (horizontal * vertical * alive).astype(np.float32)


def _heart_mask(anat: Anatomy, u: np.ndarray, v: np.ndarray, grow: float = 1.0, grow_y: float = 1.0,
                du: float = 0.0, dv: float = 0.0) -> np.ndarray:
    """Soft heart silhouette: a tilted ellipse sitting on the left dome (``grow`` enlarges it)."""
    cx, cy = anat.heart_cx + du, anat.heart_cy + dv
    rx, ry = anat.heart_rx * grow, anat.heart_ry * grow_y
    c, s = math.cos(anat.heart_angle), math.sin(anat.heart_angle)
    x, y = u - cx, v - cy
    xr, yr = x * c + y * s, -x * s + y * c
    rho = np.sqrt((xr / rx) ** 2 + (yr / ry) ** 2)
    return _smoothstep(1.0, 0.94, rho).astype(np.float32)


def _heart_extent(anat: Anatomy, grow: float, grow_y: float, du: float, dv: float) -> tuple[float, float, float, float]:
    rx, ry = anat.heart_rx * grow, anat.heart_ry * grow_y
    c, s = math.cos(anat.heart_angle), math.sin(anat.heart_angle)
    hx = math.sqrt((rx * c) ** 2 + (ry * s) ** 2)
    hy = math.sqrt((rx * s) ** 2 + (ry * c) ** 2)
    cx, cy = anat.heart_cx + du, anat.heart_cy + dv
    return cx - hx, cy - hy, cx + hx, cy + hy


def _rib_coordinate(anat: Anatomy, d: np.ndarray, v: np.ndarray, anterior: bool) -> tuple[np.ndarray, np.ndarray]:
    """(rib number k as float, distance to the nearest rib centreline) for posterior/anterior ribs."""
    if anterior:
        curve = 0.16 + 0.42 * np.clip(0.40 - d, 0.0, None) - 0.25 * np.clip(d - 0.36, 0.0, None)
    else:
        curve = -0.12 * d + 0.9 * d * d
    y = v - curve - (0.105 + anat.rib_phase)
    growth = 0.045
    disc = np.maximum(1.0 + 4.0 * growth * y / anat.rib_spacing, 1e-6)
    k = (-1.0 + np.sqrt(disc)) / (2.0 * growth)
    nearest = np.round(k)
    local = anat.rib_spacing * (1.0 + 2.0 * growth * nearest)
    return nearest, (k - nearest) * local


def _rib_profile(dist: np.ndarray, thickness: float) -> np.ndarray:
    """Bone cross-section: a band with brighter cortical margins."""
    t = np.abs(dist) / (thickness / 2.0)
    return (_smoothstep(1.0, 0.8, t) * (0.55 + 0.45 * np.clip(t, 0, 1) ** 4)).astype(np.float32)


def _posterior_ribs(anat: Anatomy, d: np.ndarray, v: np.ndarray, ribs: Sequence[int] | None = None) -> np.ndarray:
    k, dist = _rib_coordinate(anat, d, v, anterior=False)
    valid = (k >= 0) & (k <= 9) if ribs is None else np.isin(k, list(ribs))
    lateral_end = anat.body_half_width - 0.03
    span = _smoothstep(0.035, 0.06, d) * _smoothstep(lateral_end, lateral_end - 0.04, d)
    return _rib_profile(dist, anat.rib_thickness) * valid * span


@functools.lru_cache(maxsize=16)
def _vessel_tree(texture_key: int) -> np.ndarray:
    """Branching pulmonary vessels of a patient, as segments ``(u0, v0, u1, v1, w0, w1)``.

    Four trunks per lung leave the hilum (upper, lateral, lower, basal) and split into two
    children four times, each shorter (x0.66-0.84) and thinner (x0.72); angles and lengths come
    from the patient's texture key, so every study of a patient shows the same vessels. The
    returned array is read-only (it is cached).
    """
    rng = np.random.Generator(np.random.PCG64(texture_key))
    segments: list[tuple[float, ...]] = []
    for side in (-1, 1):
        hx, hy = 0.5 + side * 0.095, 0.43
        for base_angle in (-100.0, -30.0, 35.0, 80.0):
            stack = [(hx, hy, math.radians(base_angle + rng.uniform(-12, 12)), rng.uniform(0.065, 0.09), 0.0115, 0)]
            while stack:
                x, y, angle, length, width, level = stack.pop()
                x1 = x + side * math.cos(angle) * length
                y1 = y + math.sin(angle) * length
                segments.append((x, y, x1, y1, width, width * 0.8))
                if level < 4:
                    spread = rng.uniform(18, 34)
                    for sign in (-1.0, 1.0):
                        stack.append((x1, y1, angle + math.radians(sign * spread + rng.uniform(-8, 8)),
                                      length * rng.uniform(0.66, 0.84), width * 0.72, level + 1))
    tree = np.array(segments, dtype=np.float64)
    tree.setflags(write=False)
    return tree


def _draw_segments(u: np.ndarray, v: np.ndarray, segments: np.ndarray, chunk: int = 48) -> np.ndarray:
    """Rasterise tapered tubes (max-composited, peak 1) in small windows around each segment.

    Segments are processed in chunks of similar window size: each chunk is one vectorised
    distance computation on a (n, H, W) stack, scattered into the image with ``np.maximum.at``.
    """
    uu, vv = u[0], v[:, 0]
    out = np.zeros((vv.size, uu.size), dtype=np.float32)
    pad = segments[:, 4:6].max(axis=1)
    x0s = np.searchsorted(uu, np.minimum(segments[:, 0], segments[:, 2]) - pad)
    x1s = np.searchsorted(uu, np.maximum(segments[:, 0], segments[:, 2]) + pad)
    y0s = np.searchsorted(vv, np.minimum(segments[:, 1], segments[:, 3]) - pad)
    y1s = np.searchsorted(vv, np.maximum(segments[:, 1], segments[:, 3]) + pad)
    hs, ws = y1s - y0s, x1s - x0s
    keep = np.flatnonzero((hs > 0) & (ws > 0))
    keep = keep[np.argsort(hs[keep] * ws[keep], kind="stable")]
    for start in range(0, keep.size, chunk):
        idx = keep[start:start + chunk]
        height, width = int(hs[idx].max()), int(ws[idx].max())
        rows = y0s[idx, None] + np.arange(height)[None, :]
        cols = x0s[idx, None] + np.arange(width)[None, :]
        row_ok = rows < y1s[idx, None]
        col_ok = cols < x1s[idx, None]
        rows = np.minimum(rows, vv.size - 1)
        cols = np.minimum(cols, uu.size - 1)
        y = vv[rows][:, :, None]
        x = uu[cols][:, None, :]
        p0u, p0v, p1u, p1v, w0, w1 = (segments[idx, k][:, None, None].astype(np.float32) for k in range(6))
        du, dv = p1u - p0u, p1v - p0v
        t = ((x - p0u) * du + (y - p0v) * dv) / np.maximum(du * du + dv * dv, np.float32(1e-12))
        np.clip(t, 0.0, 1.0, out=t)
        dist = np.sqrt((x - p0u - t * du) ** 2 + (y - p0v - t * dv) ** 2)
        w = w0 + (w1 - w0) * t
        tube = np.clip(1.0 - dist / w, 0.0, 1.0) ** 0.7 * np.sqrt(w / np.float32(0.0105))
        tube *= row_ok[:, :, None] & col_ok[:, None, :]
        where = (np.broadcast_to(rows[:, :, None], tube.shape), np.broadcast_to(cols[:, None, :], tube.shape))
        np.maximum.at(out, where, tube)
    return out


def _markings(anat: Anatomy, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vessel markings in [0, 1] (the patient's vessel tree, drawn in this study's position)."""
    return _draw_segments(u, v, _vessel_tree(anat.texture_key))


def _body_half_width(anat: Anatomy, v: np.ndarray) -> np.ndarray:
    """Half-width of the body outline (neck, sloping shoulders, chest wall) at height ``v``."""
    return 0.1 + (anat.body_half_width - 0.1) * _smoothstep(-0.02, 0.2, v) ** 0.6 - 0.02 * _smoothstep(0.8, 1.0, v)


def _render_anatomy(anat: Anatomy, size: int) -> _Fields:
    """Finding-free attenuation and the layers findings need; local structures use windows."""
    grid = _pixel_grid(size)
    u = (((grid - 0.5 - anat.shift_u) / anat.scale) + 0.5)[None, :].astype(np.float32)
    v = (((grid - 0.5 - anat.shift_v) / anat.scale) + 0.5)[:, None].astype(np.float32)
    uu, vv = u[0], v[:, 0]
    d = np.abs(u - 0.5)
    shape = (size, size)

    # Body outline and soft-tissue thickness.
    half_width = _body_half_width(anat, v)
    thickness = np.sqrt(np.clip(1.0 - (d / half_width) ** 2, 0.0, 1.0))
    body = _smoothstep(half_width + 0.006, half_width - 0.006, d)
    attenuation = (np.float32(0.95 * anat.soft_density) * thickness ** np.float32(0.75)) * body

    # Lungs, each on its half of the image and between the apex and its dome.
    lung_free = np.zeros(shape, dtype=np.float32)
    depth = np.zeros(shape, dtype=np.float32)
    lung_rows = _span(vv, anat.apex - 0.01, max(anat.dome_right, anat.dome_left) + 0.01)
    for side, cols in ((-1, _span(uu, -1.0, 0.5)), (1, _span(uu, 0.5, 2.0))):
        ds = (u[:, cols] - 0.5) * side
        vs = v[lung_rows]
        lung_free[lung_rows, cols] = _lung_mask(anat, ds, vs, side)
        e = np.abs(ds - anat.lung_axis(vs)) / np.maximum(anat.lung_width(vs), 1e-4)
        radial = 0.5 + 0.5 * np.sqrt(np.clip(1.0 - 0.8 * e * e, 0.0, 1.0))
        vertical = (0.75 + 0.25 * _smoothstep(0.1, 0.32, vs)) * (1.0 - 0.12 * _smoothstep(0.5, 0.75, vs))
        depth[lung_rows, cols] = radial * vertical
    r = anat.knob_radius
    kr, kc = _span(vv, 0.29 - r, 0.29 + r), _span(uu, 0.562 - r, 0.562 + r)
    knob = _smoothstep(1.0, 0.85, np.sqrt((u[:, kc] - 0.562) ** 2 + (v[kr] - 0.29) ** 2) / r)
    lung_free[kr, kc] *= 1.0 - knob
    attenuation[kr, kc] += 0.06 * knob

    heart = np.zeros(shape, dtype=np.float32)
    hu0, hv0, hu1, hv1 = _heart_extent(anat, 1.0, 1.0, 0.0, 0.0)
    hr, hc = _span(vv, hv0 - 0.01, hv1 + 0.01), _span(uu, hu0 - 0.01, hu1 + 0.01)
    dome_left_h = anat.dome(np.abs(u[:, hc] - 0.5), +1)
    heart[hr, hc] = _heart_mask(anat, u[:, hc], v[hr]) * _smoothstep(dome_left_h + 0.014, dome_left_h + 0.002, v[hr])

    markings = _markings(anat, u, v)
    lung = lung_free[lung_rows] * (1.0 - heart[lung_rows])
    attenuation[lung_rows] += lung * (MARKINGS * markings[lung_rows] - AIR * depth[lung_rows])
    attenuation[hr, hc] += HEART * heart[hr, hc]

    # Hila.
    for side in (-1, 1):
        cu = 0.5 + side * 0.1
        rr, cc = _span(vv, 0.43 - 0.06, 0.43 + 0.06), _span(uu, cu - 0.04, cu + 0.04)
        blob = _smoothstep(1.0, 0.1, np.sqrt(((u[:, cc] - cu) / 0.04) ** 2 + ((v[rr] - 0.43) / 0.06) ** 2))
        attenuation[rr, cc] += 0.16 * blob * lung_free[rr, cc]

    # Trachea and main bronchi (air in the mediastinum).
    carina = 0.33
    tr, tc = _span(vv, -1.0, carina + 0.1), _span(uu, 0.5 - 0.1, 0.5 + 0.11)
    ut, vt = u[:, tc], v[tr]
    trachea = _smoothstep(0.019, 0.012, np.abs(ut - 0.5 + 0.006 * _bump(vt, 0.2, 0.34)))
    trachea = trachea * _smoothstep(carina + 0.01, carina - 0.01, vt)
    bronchi = np.maximum(
        _smoothstep(0.012, 0.006, _segment_distance(ut, vt, (0.5, carina), (0.5 - 0.075, carina + 0.06))),
        _smoothstep(0.011, 0.005, _segment_distance(ut, vt, (0.5, carina), (0.5 + 0.085, carina + 0.08))),
    )
    attenuation[tr, tc] -= 0.18 * np.maximum(trachea * _smoothstep(0.0, 0.04, vt), bronchi * (1.0 - lung_free[tr, tc]))

    # Spine: vertebral bodies and pedicles.
    sc = _span(uu, 0.5 - 0.045, 0.5 + 0.045)
    ds_ = d[:, sc]
    vertebra = 0.75 + 0.25 * np.cos(2 * np.pi * (v - 0.01) / 0.047)
    pedicles = _smoothstep(0.5, 0.1, np.sqrt(((ds_ - 0.028) / 0.008) ** 2 + ((np.mod(v, 0.047) - 0.02) / 0.012) ** 2))
    spine = 0.16 * _smoothstep(0.042, 0.03, ds_) * vertebra + 0.07 * pedicles * _smoothstep(0.08, 0.15, v)
    attenuation[:, sc] += spine * body[:, sc]

    # Ribs (fading below the domes) and clavicles.
    dome = np.where(u < 0.5, anat.dome(d, -1), anat.dome(d, +1))
    inside = body * _smoothstep(0.0, 0.08, v) * (0.35 + 0.65 * _smoothstep(dome + 0.07, dome, v))
    attenuation += RIB * _posterior_ribs(anat, d, v) * inside
    ar = _span(vv, 0.1, 0.85)
    k_a, dist_a = _rib_coordinate(anat, d, v[ar], anterior=True)
    anterior = _rib_profile(dist_a, anat.rib_thickness * 1.2) * ((k_a >= 0) & (k_a <= 5))
    anterior *= _smoothstep(0.15, 0.24, d) * _smoothstep(anat.body_half_width - 0.02, anat.body_half_width - 0.06, d)
    attenuation[ar] += 0.06 * anterior * inside[ar]
    cr = _span(vv, anat.clavicle_v - 0.09, anat.clavicle_v + 0.03)
    t = np.clip(d - 0.025, 0.0, None)
    clavicle_line = anat.clavicle_v - 0.2 * t + 0.35 * t * t
    clavicle = _rib_profile(v[cr] - clavicle_line, 0.03) * _smoothstep(0.015, 0.035, d) * _smoothstep(0.34, 0.3, d)
    attenuation[cr] += 0.28 * clavicle * body[cr]

    # Below the domes: liver / spleen, and the gastric bubble.
    br = _span(vv, min(anat.dome_right, anat.dome_left) - anat.dome_height - 0.01, 2.0)
    attenuation[br] += 0.08 * _smoothstep(dome, dome + 0.06, v[br]) * body[br]
    if anat.gastric_bubble > 0.3:
        bubble_v = float(anat.dome(np.float32(0.17), +1)) + 0.045
        gr, gc = _span(vv, bubble_v - 0.03, bubble_v + 0.03), _span(uu, 0.66 - 0.05, 0.66 + 0.05)
        ug, vg = u[:, gc], v[gr]
        bubble = _smoothstep(1.0, 0.7, np.sqrt(((ug - 0.66) / 0.045) ** 2 + ((vg - bubble_v) / 0.024) ** 2))
        attenuation[gr, gc] -= 0.2 * anat.gastric_bubble * bubble * _smoothstep(bubble_v - 0.024, bubble_v - 0.01, vg)

    return _Fields(anatomy=anat, size=size, u=u, v=v, lung_free=lung_free, heart=heart, depth=depth,
                   markings=markings, attenuation=attenuation.astype(np.float32))


def _to_image(fields: _Fields, attenuation: np.ndarray, noise_rng: np.random.Generator) -> np.ndarray:
    """Exposure curve, gradient and acquisition noise → uint8."""
    anat = fields.anatomy
    exposed = 1.0 - np.exp(-anat.gain * np.maximum(attenuation, 0.0))
    intensity = anat.offset + 0.93 * exposed ** anat.gamma
    grid = _pixel_grid(fields.size).astype(np.float32)
    ramp = (grid[None, :] - 0.5) * math.cos(anat.gradient_angle) + (grid[:, None] - 0.5) * math.sin(anat.gradient_angle)
    intensity = intensity + anat.gradient_amplitude * ramp
    noise = noise_rng.standard_normal((fields.size, fields.size), dtype=np.float32)
    intensity = intensity + anat.noise_sigma * (0.6 + 0.6 * intensity) * noise
    return np.clip(np.rint(intensity * 255.0), 0, 255).astype(np.uint8)


def _rib_visibility(anat: Anatomy, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Where posterior ribs show (inside the body, fading below the domes); same in base and findings."""
    d = np.abs(u - 0.5)
    half_width = _body_half_width(anat, v)
    body = _smoothstep(half_width + 0.006, half_width - 0.006, d)
    dome = np.where(u < 0.5, anat.dome(d, -1), anat.dome(d, +1))
    return body * _smoothstep(0.0, 0.08, v) * (0.35 + 0.65 * _smoothstep(dome + 0.07, dome, v))


RIB = 0.17  # attenuation of a posterior rib


# ----------------------------------------------------------------------------------------------
# Findings: specifications and renderers
# ----------------------------------------------------------------------------------------------

_SIDE_NAME = {-1: "right", 1: "left"}
_TOLERANCE = 0.003  # attenuation change below which a pixel is not part of a finding's box


@dataclass(frozen=True)
class FindingSpec:
    """One rendered appearance of a finding.

    Attributes:
        name: CheXpert class.
        kind: renderer (``"nodule"``, ``"pacemaker"``, ``"compressive"``, ...).
        side: -1 patient right (image left), +1 patient left, 0 midline.
        window: anatomical ``(u0, v0, u1, v1)`` that contains the whole appearance.
        anatomy: region name stored with the box.
        strength: 1 for a plain finding, :data:`SUBTLE_STRENGTH` for a subtle one (reported as
            uncertain).
        params: renderer parameters (plain floats / ints / strings).
    """

    name: str
    kind: str
    side: int
    window: tuple[float, float, float, float]
    anatomy: str
    strength: float = 1.0
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def subtle(self) -> bool:
        """Whether this appearance is rendered subtle (and its class reported as uncertain)."""
        return self.strength < 1.0


def _lung_span(anat: Anatomy, v: float) -> tuple[float, float]:
    """(medial, lateral) distance from the midline of a lung at height ``v``."""
    axis = float(anat.lung_axis(np.float64(v)))
    width = float(anat.lung_width(np.float64(v)))
    return max(axis - width, float(anat.medial_edge(np.float64(v)))), float(anat.lateral_edge(np.float64(v)))


def _inside_lung(anat: Anatomy, side: int, u: float, v: float, margin: float) -> bool:
    """Whether a disc of radius ``margin`` around anatomical ``(u, v)`` lies in the lung, off the heart."""
    for du, dv in ((0, 0), (margin, 0), (-margin, 0), (0, margin), (0, -margin)):
        pu, pv = u + du, v + dv
        d = (pu - 0.5) * side
        medial, lateral = _lung_span(anat, pv)
        if not (medial + 0.004 < d < lateral - 0.004):
            return False
        if pv < anat.apex + 0.02 or pv > float(anat.dome(np.float64(abs(d)), side)) - 0.008:
            return False
        if float(_heart_mask(anat, np.float64(pu), np.float64(pv))) > 0.0:
            return False
    return True


def _zone_of(v: float) -> str:
    return "upper" if v < 0.37 else ("mid" if v < 0.53 else "lower")


def _zone_range(anat: Anatomy, zone: str, side: int) -> tuple[float, float]:
    dome = float(anat.dome(np.float64(0.2), side))
    return {"upper": (anat.apex + 0.07, 0.36), "mid": (0.38, 0.52), "lower": (0.54, dome - 0.05)}[zone]


def _window_overlap(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over the smaller area of two ``(u0, v0, u1, v1)`` windows."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return iw * ih / smaller


def _lung_point(anat: Anatomy, rng: np.random.Generator, side: int, zone: str, margin: float) -> tuple[float, float] | None:
    lo, hi = _zone_range(anat, zone, side)
    for _ in range(12):
        v = rng.uniform(lo, max(hi, lo + 1e-3))
        medial, lateral = _lung_span(anat, v)
        d = rng.uniform(medial + margin, max(lateral - margin, medial + margin + 1e-3))
        u = 0.5 + side * d
        if _inside_lung(anat, side, u, v, margin):
            return u, v
    return None


# -- spec constructors (each draws a fixed number of values from rng per attempt) ---------------


def _spec_cardiomegaly(anat: Anatomy, rng: np.random.Generator, strength: float) -> FindingSpec:
    grow = rng.uniform(1.28, 1.42) if strength == 1.0 else rng.uniform(1.18, 1.22)
    params = dict(grow=grow, grow_y=1 + (grow - 1) * 0.45, du=(grow - 1) * 0.06, dv=(grow - 1) * 0.03)
    u0, v0, u1, v1 = _heart_extent(anat, params["grow"], params["grow_y"], params["du"], params["dv"])
    window = (u0 - 0.01, v0 - 0.01, u1 + 0.01, min(v1 + 0.01, anat.dome_left + 0.016))
    return FindingSpec("Cardiomegaly", "heart", 0, window, "cardiac silhouette", strength, params)


def _spec_ecm(anat: Anatomy, rng: np.random.Generator, strength: float) -> FindingSpec:
    big = rng.uniform(0.045, 0.065) * (1.0 if strength == 1.0 else 0.6)
    small = big * rng.uniform(0.5, 1.0)
    right, left = (big, small) if rng.random() < 0.6 else (small, big)
    top, bottom = 0.13, rng.uniform(0.33, 0.36)
    reach = 0.08 + max(right, left) + 0.01
    window = (0.5 - reach, top, 0.5 + reach, bottom)
    return FindingSpec("Enlarged Cardiomediastinum", "mediastinum", 0, window, "upper mediastinum", strength,
                       dict(right=right, left=left, top=top, bottom=bottom))


def _meniscus_top(anat: Anatomy, side: int, height: float, inner: float, lateral: float, start: float) -> float:
    """Highest point (smallest v) of an effusion's meniscus for d in ``[start, lateral]``."""
    d = np.linspace(start, lateral + 0.01, 64)
    reach = np.clip((d - inner) / (lateral - inner), 0.0, 1.0) ** 0.6
    return float(np.min(anat.dome(d, side) - height * reach))


def _spec_effusion(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec:
    height = rng.uniform(0.06, 0.13) if strength == 1.0 else rng.uniform(0.035, 0.05)
    dome_lateral = float(anat.dome(np.float64(0.4), side))
    _, lateral = _lung_span(anat, dome_lateral - 0.02)
    inner = lateral - rng.uniform(0.14, 0.2)
    top = _meniscus_top(anat, side, height, inner, lateral, inner) - 0.016
    window = (0.5 + side * (inner - 0.01), top, 0.5 + side * (lateral + 0.012), dome_lateral + 0.012)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    anatomy = f"{_SIDE_NAME[side]} costophrenic angle" if height < 0.09 else f"{_SIDE_NAME[side]} lower lung zone"
    return FindingSpec("Pleural Effusion", "effusion", side, window, anatomy, strength,
                       dict(height=height, inner=inner, lateral=lateral))


def _spec_pneumothorax(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec:
    gap = rng.uniform(0.03, 0.05) if strength == 1.0 else rng.uniform(0.02, 0.025)
    end = anat.apex + rng.uniform(0.22, 0.3)
    medial, _ = _lung_span(anat, anat.apex + 0.13)
    _, lateral = _lung_span(anat, end)
    window = (0.5 + side * (medial - 0.01), anat.apex - 0.01, 0.5 + side * (lateral + 0.01), end + 0.01)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    return FindingSpec("Pneumothorax", "pneumothorax", side, window, f"{_SIDE_NAME[side]} apical zone", strength,
                       dict(gap=gap, end=end))


def _spec_nodule(anat: Anatomy, rng: np.random.Generator, strength: float, side: int, zone: str) -> FindingSpec | None:
    mass = rng.random() < 0.3
    radius = rng.uniform(0.032, 0.048) if mass else rng.uniform(0.015, 0.028)
    if strength < 1.0:
        radius *= 0.75
    phases = rng.uniform(0, 2 * np.pi, 2)
    point = _lung_point(anat, rng, side, zone, radius * 1.15 + 0.005)
    if point is None:
        return None
    u, v = point
    r = radius * 1.15
    zone = _zone_of(v)
    return FindingSpec("Lung Lesion", "nodule", side, (u - r, v - r, u + r, v + r), f"{_SIDE_NAME[side]} {zone} lung zone",
                       strength, dict(u=u, v=v, radius=radius, phase3=phases[0], phase5=phases[1], mass=mass,
                                      size_cm=round(2 * radius * 38, 1)))


def _spec_consolidation(anat: Anatomy, rng: np.random.Generator, strength: float, side: int, zone: str) -> FindingSpec | None:
    a, b = rng.uniform(0.055, 0.08), rng.uniform(0.045, 0.065)
    key = int(rng.integers(0, 2**62))
    point = _lung_point(anat, rng, side, zone, 0.02)
    if point is None:
        return None
    u, v = point
    zone = _zone_of(v)
    return FindingSpec("Consolidation", "consolidation", side, (u - a, v - b, u + a, v + b),
                       f"{_SIDE_NAME[side]} {zone} lung zone", strength, dict(u=u, v=v, a=a, b=b, key=key))


def _spec_opacity(anat: Anatomy, rng: np.random.Generator, strength: float, side: int, zone: str,
                  near: FindingSpec | None = None) -> FindingSpec | None:
    a, b = rng.uniform(0.065, 0.095), rng.uniform(0.055, 0.08)
    key = int(rng.integers(0, 2**62))
    if near is not None:
        angle = rng.uniform(0, 2 * np.pi)
        u = near.params["u"] + math.cos(angle) * near.params["a"] * 0.9
        v = near.params["v"] + math.sin(angle) * near.params["b"] * 0.9
        side = near.side
    else:
        point = _lung_point(anat, rng, side, zone, 0.02)
        if point is None:
            return None
        u, v = point
    zone = _zone_of(v)
    return FindingSpec("Lung Opacity", "opacity", side, (u - a, v - b, u + a, v + b), f"{_SIDE_NAME[side]} {zone} lung zone",
                       strength, dict(u=u, v=v, a=a, b=b, key=key, halo=near is not None))


def _spec_edema(anat: Anatomy, rng: np.random.Generator, strength: float, side: int, shared: Mapping[str, float]) -> FindingSpec:
    d = shared["d"] + rng.uniform(-0.008, 0.008)
    a, b = shared["a"], shared["b"]
    u, v = 0.5 + side * d, shared["v"]
    key = int(rng.integers(0, 2**62))
    return FindingSpec("Edema", "edema", side, (u - a, v - b, u + a, v + b), f"{_SIDE_NAME[side]} hilar structures", strength,
                       dict(u=u, v=v, a=a, b=b, key=key, period=shared["period"]))


def _spec_plate(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec | None:
    length = rng.uniform(0.09, 0.14)
    thickness = rng.uniform(0.009, 0.013)
    angle = math.radians(rng.uniform(-14, 14))
    lift = rng.uniform(0.05, 0.1)
    shift = rng.uniform(-0.25, 0.25)
    second = rng.random() < 0.4
    dome_mid = float(anat.dome(np.float64(anat.lung_center), side))
    v = dome_mid - lift
    medial, lateral = _lung_span(anat, v)
    d = (medial + lateral) / 2 + shift * (lateral - medial)
    u = 0.5 + side * d
    du, dv = math.cos(angle) * length / 2, math.sin(angle) * length / 2
    p0, p1 = (u - du, v - dv), (u + du, v + dv)
    if not all(_inside_lung(anat, side, x, y, 0.004) for x, y in (p0, p1)):
        return None
    pad = thickness + 0.004 + (0.02 if second else 0.0)
    window = (min(p0[0], p1[0]) - pad, min(p0[1], p1[1]) - pad, max(p0[0], p1[0]) + pad, max(p0[1], p1[1]) + pad)
    return FindingSpec("Atelectasis", "plate", side, window, f"{_SIDE_NAME[side]} lower lung zone", strength,
                       dict(u0=p0[0], v0=p0[1], u1=p1[0], v1=p1[1], thickness=thickness, second=second))


def _spec_compressive(anat: Anatomy, rng: np.random.Generator, strength: float, effusion: FindingSpec) -> FindingSpec:
    thickness = rng.uniform(0.045, 0.065)
    p = effusion.params
    side = effusion.side
    dome_lateral = float(anat.dome(np.float64(0.4), side))
    inner = p["inner"] - rng.uniform(0.0, 0.03)
    top = _meniscus_top(anat, side, p["height"], p["inner"], p["lateral"], inner - 0.01) - thickness * 0.95 - 0.01
    window = (0.5 + side * (inner - 0.01), top, 0.5 + side * (p["lateral"] + 0.012), dome_lateral + 0.012)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    return FindingSpec("Atelectasis", "compressive", side, window, f"{_SIDE_NAME[side]} lower lung zone", strength,
                       dict(height=p["height"], inner=inner, lateral=p["lateral"], effusion_inner=p["inner"],
                            thickness=thickness))


def _spec_pleural_thickening(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec:
    length = rng.uniform(0.12, 0.2)
    top = rng.uniform(0.25, 0.66 - length)
    thickness = rng.uniform(0.013, 0.022) * (1.0 if strength == 1.0 else 0.6)
    phase = rng.uniform(0, 2 * np.pi)
    _, lateral_top = _lung_span(anat, top)
    _, lateral_bottom = _lung_span(anat, top + length)
    inner = min(lateral_top, lateral_bottom) - thickness * 1.4 - 0.006
    outer = max(lateral_top, lateral_bottom) + 0.008
    window = (0.5 + side * inner, top, 0.5 + side * outer, top + length)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    return FindingSpec("Pleural Other", "thickening", side, window, f"{_SIDE_NAME[side]} lateral chest wall", strength,
                       dict(top=top, length=length, thickness=thickness, phase=phase))


def _rib_center(anat: Anatomy, k: int, d: float) -> float:
    growth = 0.045
    position = anat.rib_spacing * k * (1 + growth * k)
    return float(-0.12 * d + 0.9 * d * d + 0.105 + anat.rib_phase + position)


def _spec_fracture(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec | None:
    k = int(rng.integers(2, 8))
    d = rng.uniform(0.2, 0.33)
    offset = anat.rib_thickness * rng.uniform(0.7, 0.95) * (1.0 if strength == 1.0 else 0.5)
    direction = 1.0 if rng.random() < 0.5 else -1.0
    taper = rng.uniform(0.06, 0.085)
    v_mid = _rib_center(anat, k, d)
    dome = float(anat.dome(np.float64(d), side))
    if v_mid > dome - 0.03 or v_mid < anat.apex + 0.06:
        return None
    medial, lateral = _lung_span(anat, v_mid)
    if not medial + 0.02 < d < lateral - taper - 0.01:
        return None
    v_a, v_b = _rib_center(anat, k, d - 0.01), _rib_center(anat, k, d + taper)
    half = anat.rib_thickness / 2 + offset + 0.008
    window = (0.5 + side * (d - 0.012), min(v_a, v_b) - half, 0.5 + side * (d + taper + 0.004), max(v_a, v_b) + half)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    number = k + 2
    return FindingSpec("Fracture", "fracture", side, window, f"{_SIDE_NAME[side]} {_ordinal(number)} rib", strength,
                       dict(rib=k, number=number, d=d, offset=offset * direction, taper=taper))


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _spec_device(anat: Anatomy, rng: np.random.Generator) -> FindingSpec:
    choice = rng.random()
    side_draw = rng.random()
    a, b, c, e = rng.uniform(0, 1, 4)
    if choice < 0.4:
        side = 1 if side_draw < 0.8 else -1
        u = 0.5 + side * (0.22 + 0.06 * a)
        v = anat.clavicle_v + 0.06 + 0.03 * b
        hx, hy = 0.034 + 0.006 * c, 0.024 + 0.004 * e
        window = (u - 0.075, v - 0.065, u + 0.075, v + 0.065)
        return FindingSpec("Support Devices", "pacemaker", side, window, f"{_SIDE_NAME[side]} chest wall", 1.0,
                           dict(u=u, v=v, hx=hx, hy=hy, loop=float(rng.uniform(0, 2 * np.pi))))
    if choice < 0.7:
        side = -1 if side_draw < 0.7 else 1
        u = 0.5 + side * (0.17 + 0.05 * a)
        v = anat.clavicle_v + 0.05 + 0.03 * b
        end_u, end_v = 0.5 + side * (0.085 + 0.02 * c), anat.clavicle_v + 0.005 + 0.02 * e
        window = (min(u, end_u) - 0.03, min(v, end_v) - 0.03, max(u, end_u) + 0.03, max(v, end_v) + 0.03)
        return FindingSpec("Support Devices", "port", side, window, f"{_SIDE_NAME[side]} chest wall", 1.0,
                           dict(u=u, v=v, end_u=end_u, end_v=end_v))
    tip = 0.2 + 0.05 * a
    top = (0.0 - 0.5 - anat.shift_v) / anat.scale + 0.5 - 0.02
    window = (0.5 - 0.02, top, 0.5 + 0.02, tip + 0.006)
    return FindingSpec("Support Devices", "ett", 0, window, "trachea", 1.0, dict(tip=tip, top=top))


# -- renderers: attenuation change inside the window ----------------------------------------------


def _delta_heart(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    dome_left = anat.dome(np.abs(view.u - 0.5), +1)
    cut = _smoothstep(dome_left + 0.014, dome_left + 0.002, view.v)
    grown = _heart_mask(anat, view.u, view.v, p["grow"], p["grow_y"], p["du"], p["dv"]) * cut
    change = np.clip(grown - view.heart, 0.0, None)
    return change * (view.lung_free * (AIR * view.depth - MARKINGS * view.markings) + HEART)


def _delta_mediastinum(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    out = np.zeros(np.broadcast_shapes(view.u.shape, view.v.shape), dtype=np.float32)
    bump = _bump(view.v, p["top"], p["bottom"])
    edge = anat.medial_edge(view.v)
    for side, amount in ((-1, p["right"]), (1, p["left"])):
        d = view.d(side)
        border = edge + amount * bump
        widened = (_smoothstep(border + 0.004, border - 0.004, d) - _smoothstep(edge + 0.004, edge - 0.004, d)) * (d > 0)
        out += widened * (view.aeration + 0.05 * view.lung)
    return out


def _delta_effusion(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    dome = anat.dome(np.abs(d), spec.side)
    reach = np.clip((d - p["inner"]) / (p["lateral"] - p["inner"]), 0.0, 1.0) ** 0.6
    meniscus = dome - p["height"] * reach
    fluid = _smoothstep(meniscus - 0.014, meniscus + 0.008, view.v) * _smoothstep(p["inner"] - 0.004, p["inner"] + 0.025, d)
    return fluid * (0.97 * view.aeration + 0.06 * view.lung)


def _delta_compressive(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    dome = anat.dome(np.abs(d), spec.side)
    reach = np.clip((d - p["effusion_inner"]) / (p["lateral"] - p["effusion_inner"]), 0.0, 1.0) ** 0.6
    meniscus = dome - p["height"] * reach
    center = meniscus - p["thickness"] * 0.35
    band = _smoothstep(p["thickness"] * 0.6, p["thickness"] * 0.15, np.abs(view.v - center))
    band = band * _smoothstep(p["inner"] - 0.004, p["inner"] + 0.03, d)
    streaks = 0.8 + 0.2 * np.cos(2 * np.pi * (view.v - center) / 0.012) ** 2
    return 0.6 * spec.strength * band * streaks * (view.aeration + 0.08 * view.lung)


def _delta_pneumothorax(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    shrink = p["gap"] * _smoothstep(p["end"], p["end"] - 0.09, view.v)
    original = _lung_mask(anat, d, view.v, spec.side) * (d > 0)
    collapsed = _lung_mask(anat, d, view.v, spec.side, apex_shift=p["gap"] * 0.9, lateral_shrink=shrink) * (d > 0)
    kept = np.where(original > 0, view.lung_free / np.maximum(original, 1e-6), 0.0).clip(0.0, 1.0)  # aortic knob
    rim = np.maximum(original - collapsed, 0.0) * kept
    # The visceral pleural line: the collapsed lung's edge, only where it has moved off the chest wall.
    moved = anat.lung_width(view.v) - anat.lung_width(view.v, p["gap"] * 0.9)
    displacement = np.where(d > anat.lung_axis(view.v), moved + shrink, moved)
    line = 4.0 * collapsed * (1.0 - collapsed) * _smoothstep(0.0, 0.006, displacement) * kept
    lucency = 0.16 * spec.strength
    return rim * (-MARKINGS * view.markings * (1.0 - view.heart) - lucency) + 0.22 * spec.strength * line


def _delta_nodule(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    x, y = view.u - p["u"], view.v - p["v"]
    theta = np.arctan2(y, x)
    lobulation = 0.12 if p["mass"] else 0.06
    outline = np.sin(3 * theta + p["phase3"]) + 0.5 * np.sin(5 * theta + p["phase5"])
    radius = p["radius"] * (1 + lobulation * outline)
    rho = np.sqrt(x * x + y * y) / radius
    solid = np.sqrt(np.clip(1.0 - rho * rho, 0.0, 1.0)) * _smoothstep(1.0, 0.9, rho)
    amplitude = 0.34 * spec.strength
    return amplitude * (0.35 + 0.65 * solid) * _smoothstep(1.0, 0.94, rho)


def _finding_rng(spec: FindingSpec) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(int(spec.params["key"])))


def _delta_consolidation(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    rng = _finding_rng(spec)
    x, y = (view.u - p["u"]) / p["a"], (view.v - p["v"]) / p["b"]
    rho = np.sqrt(x * x + y * y)
    noise = _smooth_field(rng, view.v[:, 0], view.u[0], 32.0)
    mottle = _smooth_field(rng, view.v[:, 0], view.u[0], 70.0)
    patch = _smoothstep(-0.1, 0.7, 1.3 * (1.0 - rho) + 0.5 * noise) * _smoothstep(1.0, 0.5, rho)
    patch = patch * np.clip(0.82 + 0.18 * mottle, 0.5, 1.0)
    # Air bronchograms: a small branching tree of air tubes from the hilar side of the patch.
    tubes = np.zeros_like(patch)
    root_angle = math.atan2(0.43 - p["v"], (0.5 + spec.side * 0.1) - p["u"])
    ru, rv = p["u"] + 0.6 * p["a"] * math.cos(root_angle), p["v"] + 0.6 * p["b"] * math.sin(root_angle)
    branches = [(ru, rv, root_angle + math.pi + rng.uniform(-0.3, 0.3), 0.55 * p["a"], 0)]
    while branches:
        bu, bv, angle, length, level = branches.pop()
        eu, ev = bu + math.cos(angle) * length, bv + math.sin(angle) * length
        width = 0.0045 * (0.75 ** level)
        dist = _segment_distance(view.u, view.v, (bu, bv), (eu, ev))
        tubes = np.maximum(tubes, _smoothstep(width, width * 0.3, dist))
        if level < 2:
            for sign in (-1, 1):
                branches.append((eu, ev, angle + sign * rng.uniform(0.35, 0.6), length * 0.6, level + 1))
    dense = 0.58 * view.aeration + 0.03 * view.lung
    return spec.strength * patch * (dense - 0.45 * tubes * view.lung * AIR * view.depth)


def _delta_opacity(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    rng = _finding_rng(spec)
    x, y = (view.u - p["u"]) / p["a"], (view.v - p["v"]) / p["b"]
    rho = np.sqrt(x * x + y * y)
    noise = _smooth_field(rng, view.v[:, 0], view.u[0], 22.0)
    haze = _smoothstep(1.0, 0.3, rho) * np.clip(0.75 + 0.3 * noise, 0.0, 1.3)
    return spec.strength * haze * view.lung * (0.1 + 0.28 * AIR * view.depth)


def _delta_edema(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    rng = _finding_rng(spec)
    x, y = (view.u - p["u"]) / p["a"], (view.v - p["v"]) / p["b"]
    rho = np.sqrt(x * x + y * y)
    haze = _smoothstep(1.0, 0.2, rho)
    # Septal (Kerley-type) lines: short horizontal lines in the lateral part of the window.
    lateral = _smoothstep(-0.1, 0.5, x * spec.side)
    lines = np.clip((np.cos(2 * np.pi * (view.v - p["v"]) / p["period"]) - 0.6) / 0.4, 0.0, 1.0)
    broken = _smoothstep(-0.2, 0.3, _smooth_field(rng, view.v[:, 0], view.u[0], 30.0))
    septal = lines * broken * lateral * _smoothstep(1.0, 0.6, rho)
    return spec.strength * view.lung * (0.26 * haze * (0.6 + 0.4 * view.depth) + 0.22 * septal)


def _delta_plate(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    th = p["thickness"]
    dist = _segment_distance(view.u, view.v, (p["u0"], p["v0"]), (p["u1"], p["v1"]))
    band = _smoothstep(th, 0.0, dist)
    if p["second"]:
        dist2 = _segment_distance(view.u, view.v, (p["u0"] + 0.01, p["v0"] + 0.018), (p["u1"] - 0.015, p["v1"] + 0.018))
        band = np.maximum(band, 0.7 * _smoothstep(th * 0.7, 0.0, dist2))
    return spec.strength * band * (0.45 * view.aeration + 0.05 * view.lung)


def _delta_thickening(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    lateral = anat.lateral_edge(view.v)
    along = (view.v - p["top"]) / p["length"]
    thickness = p["thickness"] * _bump(view.v, p["top"], p["top"] + p["length"]) ** 0.5 * (
        1.0 + 0.3 * np.sin(2 * np.pi * 2.5 * along + p["phase"]))
    layer = _smoothstep(lateral - thickness - 0.003, lateral - thickness + 0.003, d) * (thickness > 1e-4)
    return layer * (0.9 * view.aeration + 0.08 * view.lung)


def _delta_fracture(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    shift = p["offset"] * (d > p["d"]) * _smoothstep(p["d"] + p["taper"], p["d"] + p["taper"] * 0.5, d)
    original = _posterior_ribs(anat, np.abs(d), view.v, ribs=[p["rib"]])
    moved = _posterior_ribs(anat, np.abs(d), view.v - shift, ribs=[p["rib"]])
    gap = _smoothstep(0.006, 0.003, np.abs(d - p["d"]))
    broken = np.where(d > p["d"], moved, original) * (1.0 - gap)
    return RIB * _rib_visibility(anat, view.u, view.v) * (broken - original)


def _rounded_box(x: np.ndarray, y: np.ndarray, hx: float, hy: float, r: float) -> np.ndarray:
    qx, qy = np.abs(x) - hx + r, np.abs(y) - hy + r
    return np.sqrt(np.maximum(qx, 0) ** 2 + np.maximum(qy, 0) ** 2) + np.minimum(np.maximum(qx, qy), 0) - r


def _delta_pacemaker(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    x, y = view.u - p["u"], view.v - p["v"]
    can = _smoothstep(0.002, -0.002, _rounded_box(x, y, p["hx"], p["hy"], 0.012))
    battery = _smoothstep(0.002, -0.002, _rounded_box(x + p["hx"] * 0.3, y, p["hx"] * 0.55, p["hy"] * 0.7, 0.008))
    header = _smoothstep(0.002, -0.002, _rounded_box(x, y + p["hy"] + 0.008, p["hx"] * 0.6, 0.008, 0.004))
    # Lead loops around the generator, fading out toward the window edge.
    rx, ry = p["hx"] + 0.016, p["hy"] + 0.018
    theta = np.mod(np.arctan2(y / ry, x / rx) - p["loop"], 2 * np.pi)
    ring = np.abs(np.sqrt((x / rx) ** 2 + (y / ry) ** 2) - 1.0) * min(rx, ry)
    wire = _smoothstep(0.0032, 0.0012, ring) * _smoothstep(5.6, 4.4, theta)
    spiral = np.abs(np.sqrt((x / (rx + 0.01)) ** 2 + (y / (ry + 0.01)) ** 2) - 1.0) * min(rx, ry)
    wire = np.maximum(wire, _smoothstep(0.0032, 0.0012, spiral) * _smoothstep(0.0, 0.8, theta) * _smoothstep(3.6, 2.2, theta))
    return 1.3 * can + 0.35 * battery + 0.55 * header * (1 - can) + 0.75 * wire * (1 - can)


def _delta_port(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    x, y = view.u - p["u"], view.v - p["v"]
    r = np.sqrt(x * x + y * y)
    ring = _smoothstep(0.006, 0.003, np.abs(r - 0.016))
    base = _smoothstep(0.02, 0.017, r)
    dist = _segment_distance(view.u, view.v, (p["u"], p["v"]), (p["end_u"], p["end_v"]))
    length = math.hypot(p["end_u"] - p["u"], p["end_v"] - p["v"])
    along = np.sqrt(np.maximum((view.u - p["u"]) ** 2 + (view.v - p["v"]) ** 2 - dist**2, 0.0)) / max(length, 1e-6)
    tube = _smoothstep(0.0035, 0.0015, dist) * _smoothstep(1.0, 0.7, along)
    return 1.1 * ring + 0.35 * base + 0.6 * tube * (1 - base)


def _delta_ett(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    x = view.u - 0.5
    walls = np.maximum(_smoothstep(0.0028, 0.0008, np.abs(x - 0.0075)), _smoothstep(0.0028, 0.0008, np.abs(x + 0.0075)))
    stripe = _smoothstep(0.002, 0.0006, np.abs(x - 0.003))
    span = _smoothstep(p["tip"] + 0.003, p["tip"] - 0.002, view.v)
    return span * (0.7 * walls + 0.6 * stripe)


_RENDERERS = {
    "heart": _delta_heart,
    "mediastinum": _delta_mediastinum,
    "effusion": _delta_effusion,
    "compressive": _delta_compressive,
    "pneumothorax": _delta_pneumothorax,
    "nodule": _delta_nodule,
    "consolidation": _delta_consolidation,
    "opacity": _delta_opacity,
    "edema": _delta_edema,
    "plate": _delta_plate,
    "thickening": _delta_thickening,
    "fracture": _delta_fracture,
    "pacemaker": _delta_pacemaker,
    "port": _delta_port,
    "ett": _delta_ett,
}


# ----------------------------------------------------------------------------------------------
# Placement
# ----------------------------------------------------------------------------------------------

_MAX_OVERLAP = 0.04  # intersection over the smaller window tolerated between different findings


def _choose(make: Any, placed: Sequence[FindingSpec], ignore: Iterable[str] = (), attempts: int = 24) -> FindingSpec:
    """Draw candidates from ``make()`` until one barely overlaps the findings already placed."""
    skip = set(ignore)
    best, best_score = None, math.inf
    for _ in range(attempts):
        spec = make()
        if spec is None:
            continue
        score = max((_window_overlap(spec.window, other.window) for other in placed
                     if other.name != spec.name and other.name not in skip), default=0.0)
        if score <= _MAX_OVERLAP:
            return spec
        if score < best_score:
            best, best_score = spec, score
    if best is None:
        raise RuntimeError("could not place a finding inside the lungs; the anatomy parameters are out of range")
    return best


def _place_findings(present: np.ndarray, subtle: np.ndarray, anat: Anatomy, scenario: int,
                    rng: np.random.Generator) -> list[FindingSpec]:
    """Finding specifications for the present classes, fixed-site findings first."""
    has = {name: bool(present[L.class_index(name)]) for name in L.LOCALIZABLE}
    strength = {name: (SUBTLE_STRENGTH if subtle[L.class_index(name)] else 1.0) for name in L.LOCALIZABLE}
    specs: list[FindingSpec] = []
    sides = (-1, 1)

    def side() -> int:
        return sides[int(rng.integers(0, 2))]

    def zone() -> str:
        return ("upper", "mid", "lower")[int(rng.integers(0, 3))]

    if has["Support Devices"]:
        specs.append(_spec_device(anat, rng))
    if has["Cardiomegaly"]:
        specs.append(_spec_cardiomegaly(anat, rng, strength["Cardiomegaly"]))
    if has["Enlarged Cardiomediastinum"]:
        specs.append(_spec_ecm(anat, rng, strength["Enlarged Cardiomediastinum"]))
    if has["Edema"]:
        shared = dict(d=rng.uniform(0.16, 0.18), v=rng.uniform(0.43, 0.44), a=rng.uniform(0.1, 0.11),
                      b=rng.uniform(0.064, 0.07), period=rng.uniform(0.016, 0.02))
        specs += [_spec_edema(anat, rng, strength["Edema"], s, shared) for s in sides]
    effusions: list[FindingSpec] = []
    if has["Pleural Effusion"]:
        bilateral = rng.random() < (0.45 if SCENARIOS[scenario].name == "heart_failure" else 0.15)
        chosen = sides if bilateral else (side(),)
        effusions = [_spec_effusion(anat, rng, strength["Pleural Effusion"], s) for s in chosen]
        specs += effusions
    if has["Pneumothorax"]:
        first = side()
        specs.append(_choose(
            lambda: _spec_pneumothorax(anat, rng, strength["Pneumothorax"], first if rng.random() < 0.5 else -first),
            specs, attempts=6))
    if has["Atelectasis"]:
        if effusions and rng.random() < 0.5:
            target = effusions[int(rng.integers(0, len(effusions)))]
            specs.append(_spec_compressive(anat, rng, strength["Atelectasis"], target))
        else:
            specs.append(_choose(lambda: _spec_plate(anat, rng, strength["Atelectasis"], side()), specs))
    if has["Fracture"]:
        specs.append(_choose(lambda: _spec_fracture(anat, rng, strength["Fracture"], side()), specs))
    if has["Pleural Other"]:
        specs.append(_choose(lambda: _spec_pleural_thickening(anat, rng, strength["Pleural Other"], side()), specs))
    consolidation = None
    if has["Consolidation"]:
        consolidation = _choose(lambda: _spec_consolidation(anat, rng, strength["Consolidation"], side(), zone()), specs)
        specs.append(consolidation)
    if has["Lung Opacity"]:
        if consolidation is not None and rng.random() < 0.35:
            specs.append(_choose(lambda: _spec_opacity(anat, rng, strength["Lung Opacity"], 0, "", near=consolidation),
                                 specs, ignore=("Consolidation",)))
        else:
            specs.append(_choose(lambda: _spec_opacity(anat, rng, strength["Lung Opacity"], side(), zone()), specs))
    if has["Lung Lesion"]:
        specs.append(_choose(lambda: _spec_nodule(anat, rng, strength["Lung Lesion"], side(), zone()), specs))
    return specs


# ----------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------


def _pixel_window(anat: Anatomy, window: Sequence[float], size: int) -> tuple[int, int, int, int]:
    x0, y0 = anat.to_pixels(window[0], window[1], size)
    x1, y1 = anat.to_pixels(window[2], window[3], size)
    return (max(0, int(math.floor(y0)) - 1), min(size, int(math.ceil(y1)) + 1),
            max(0, int(math.floor(x0)) - 1), min(size, int(math.ceil(x1)) + 1))


def _finding_delta(fields: _Fields, spec: FindingSpec) -> tuple[tuple[int, int, int, int], np.ndarray] | None:
    """Pixel box ``(y0, y1, x0, x1)`` and the attenuation change inside it, or None if invisible."""
    y0, y1, x0, x1 = _pixel_window(fields.anatomy, spec.window, fields.size)
    if y1 <= y0 or x1 <= x0:
        return None
    view = fields.crop((y0, y1, x0, x1))
    delta = np.broadcast_to(_RENDERERS[spec.kind](view, spec), (y1 - y0, x1 - x0)).astype(np.float32)
    visible = np.abs(delta) > _TOLERANCE
    if not visible.any():
        return None
    rows = np.flatnonzero(visible.any(axis=1))
    cols = np.flatnonzero(visible.any(axis=0))
    r0, r1, c0, c1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    return (y0 + r0, y0 + r1, x0 + c0, x0 + c1), delta[r0:r1, c0:c1]


def render(
    anatomy: Anatomy, specs: Sequence[FindingSpec], size: int, noise_rng: np.random.Generator
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Render anatomy plus findings to a (size, size) uint8 image and the findings' boxes.

    Each finding adds its attenuation change inside its own tight box (exactly zero outside), so
    leaving a spec out changes pixels inside that spec's box only. Boxes are integer pixel xyxy
    (``x_max``/``y_max`` exclusive) with ``classes`` ``[spec.name]`` and ``anatomy``.

    >>> anat = sample_anatomy(stable_rng(0, "patient", 0), stable_rng(0, "study", 0))
    >>> image, boxes = render(anat, [], 64, stable_rng(0, "noise", 0))
    >>> image.shape, image.dtype.name, boxes
    ((64, 64), 'uint8', [])
    """
    fields = _render_anatomy(anatomy, int(size))
    attenuation = fields.attenuation.copy()
    boxes = []
    for spec in specs:
        result = _finding_delta(fields, spec)
        if result is None:
            raise RuntimeError(f"{spec.name} ({spec.kind}) left no visible change on a {size}x{size} image")
        (y0, y1, x0, x1), delta = result
        attenuation[y0:y1, x0:x1] += delta
        boxes.append({"x_min": int(x0), "y_min": int(y0), "x_max": int(x1), "y_max": int(y1),
                      "classes": [spec.name], "anatomy": spec.anatomy})
    return _to_image(fields, attenuation, noise_rng), boxes


# ----------------------------------------------------------------------------------------------
# Reports
# ----------------------------------------------------------------------------------------------

CLASS_KEYWORDS: Mapping[str, str] = {
    "Enlarged Cardiomediastinum": r"mediastin",
    "Cardiomegaly": r"cardiomegaly|\bheart\b|\bcardiac\b",
    "Lung Opacity": r"opacit|ground-glass",
    "Lung Lesion": r"nodul|\bmass(es)?\b|\blesions?\b",
    "Edema": r"edema",
    "Consolidation": r"consolidat",
    "Pneumonia": r"pneumonia",
    "Atelectasis": r"atelecta",
    "Pneumothorax": r"pneumothora",
    "Pleural Effusion": r"effusion",
    "Pleural Other": r"pleural thickening",
    "Fracture": r"fracture",
    "Support Devices": r"pacemaker|\bport\b|endotracheal|\btube\b|catheter|\bdevices?\b",
}
"""Regular expressions (case-insensitive) naming each class in the reports; every sentence that
matches one of them states that class as positive, negated or uncertain, and no other sentence
mentions it."""

# Positive (code 1) and uncertain (code 3) sentences, by class; fields from _mention_fields.
_POSITIVE: Mapping[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": ("The upper mediastinum is widened.", "Widening of the superior mediastinum.",
                                   "The cardiomediastinal silhouette is enlarged, with a widened upper mediastinum."),
    "Cardiomegaly": ("The heart is enlarged.", "Moderate cardiomegaly.", "Enlargement of the cardiac silhouette.",
                     "Cardiomegaly."),
    "Lung Opacity": ("Hazy ground-glass opacity in the {side} {zone} lung.",
                     "Ill-defined opacity in the {side} {zone} lung zone.", "Patchy {side} {zone} lung opacity."),
    "Lung Lesion": ("{size} cm {lesion} in the {side} {zone} lung.", "Well-circumscribed {side} {zone} lung {lesion}.",
                    "There is a rounded {lesion} in the {side} {zone} lung zone."),
    "Edema": ("Pulmonary edema with perihilar haziness and septal lines.", "Moderate interstitial pulmonary edema.",
              "Bilateral perihilar haziness and Kerley B lines from interstitial edema."),
    "Consolidation": ("Consolidation in the {side} {zone} lung with air bronchograms.",
                      "Dense {side} {zone} lung consolidation.", "There is airspace consolidation in the {side} {zone} lung."),
    "Pneumonia": ("Pneumonia in the {side} {zone} lung.", "{Side} {zone} lung pneumonia."),
    "Atelectasis": ("Plate-like atelectasis at the {side} lung base.",
                    "Linear atelectasis in the {side} lower lung zone.", "Subsegmental atelectasis at the {side} base."),
    "Pneumothorax": ("{Extent} {side} apical pneumothorax.",
                     "There is a {extent} {side} apical pneumothorax with a visible pleural line.", "{Side} apical pneumothorax."),
    "Pleural Effusion": ("{Extent} {side} pleural effusion.",
                         "{Extent} {side} pleural effusion with blunting of the costophrenic angle.",
                         "There is a {extent} {side} pleural effusion."),
    "Pleural Other": ("Pleural thickening along the {side} lateral chest wall.", "{Side} lateral pleural thickening.",
                      "Smooth {side} pleural thickening."),
    "Fracture": ("Acute fracture of the {side} {rib} rib.", "Displaced {side} {rib} rib fracture.",
                 "There is a fracture of the {side} {rib} rib with mild displacement."),
}
_COMPRESSIVE = ("Adjacent compressive atelectasis at the {side} base.", "Compressive atelectasis of the {side} lower lung zone.")
_BILATERAL_EFFUSION = ("{Extent} bilateral pleural effusions.", "There are {extent} bilateral pleural effusions.")
_DEVICE = {
    "pacemaker": ("{Side} chest wall pacemaker in place.", "A {side}-sided pacemaker generator projects over the upper chest."),
    "port": ("{Side} chest wall port in place.", "A {side} chest port with its catheter directed medially."),
    "ett": ("Endotracheal tube terminates in the mid trachea.", "Endotracheal tube in place, tip above the carina."),
}
_UNCERTAIN: Mapping[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": ("Possible widening of the upper mediastinum.", "The mediastinum may be mildly widened."),
    "Cardiomegaly": ("Borderline cardiomegaly.", "The heart may be mildly enlarged.", "Possible mild cardiomegaly."),
    "Lung Opacity": ("Possible faint opacity in the {side} {zone} lung.", "Questionable opacity in the {side} {zone} lung zone."),
    "Lung Lesion": ("Possible small nodule in the {side} {zone} lung.", "Questionable nodule in the {side} {zone} lung zone."),
    "Edema": ("Possible mild pulmonary edema.", "Mild interstitial edema may be present."),
    "Consolidation": ("Possible consolidation in the {side} {zone} lung.", "Questionable {side} {zone} lung consolidation."),
    "Pneumonia": ("This is concerning for pneumonia.", "Findings may represent pneumonia.", "Possible pneumonia."),
    "Atelectasis": ("Possible atelectasis at the {side} base.", "Subtle {side} basilar density may represent atelectasis."),
    "Pneumothorax": ("Questionable small {side} apical pneumothorax.", "Possible tiny {side} apical pneumothorax."),
    "Pleural Effusion": ("Possible small {side} pleural effusion.", "A trace {side} pleural effusion may be present."),
    "Pleural Other": ("Possible {side} pleural thickening.", "Questionable {side} lateral pleural thickening."),
    "Fracture": ("Possible fracture of the {side} {rib} rib.", "Questionable {side} {rib} rib fracture."),
}
_NEGATIVE: Mapping[str, tuple[str, ...]] = {
    "Enlarged Cardiomediastinum": ("The mediastinal contours are normal.", "The mediastinum is not widened.",
                                   "Normal mediastinal contours."),
    "Cardiomegaly": ("Heart size is normal.", "No cardiomegaly.", "The heart is not enlarged."),
    "Lung Opacity": ("No focal opacity.", "No focal lung opacities."),
    "Lung Lesion": ("No pulmonary nodules or masses.", "No lung nodule."),
    "Edema": ("No pulmonary edema.", "There is no edema."),
    "Consolidation": ("No focal consolidation.", "No consolidation."),
    "Pneumonia": ("No evidence of pneumonia.",),
    "Atelectasis": ("No atelectasis.",),
    "Pneumothorax": ("No pneumothorax.", "There is no pneumothorax."),
    "Pleural Effusion": ("No pleural effusion.", "No pleural effusions."),
    "Pleural Other": ("No pleural thickening.",),
    "Fracture": ("No acute rib fracture.", "No displaced fracture."),
}
_NEGATION_RATE: Mapping[str, float] = {
    "Enlarged Cardiomediastinum": 0.35, "Cardiomegaly": 0.5, "Lung Opacity": 0.15, "Lung Lesion": 0.1, "Edema": 0.3,
    "Consolidation": 0.45, "Pneumonia": 0.15, "Atelectasis": 0.08, "Pneumothorax": 0.6, "Pleural Effusion": 0.6,
    "Pleural Other": 0.05, "Fracture": 0.15, "Support Devices": 0.0,
}
_IMPRESSION_POSITIVE: Mapping[str, str] = {
    "Enlarged Cardiomediastinum": "Widened upper mediastinum.", "Cardiomegaly": "Cardiomegaly.",
    "Lung Opacity": "{Side} {zone} lung opacity.", "Lung Lesion": "{Side} {zone} lung {lesion}.",
    "Edema": "Pulmonary edema.", "Consolidation": "{Side} {zone} lung consolidation.",
    "Pneumonia": "{Side} {zone} lung pneumonia.", "Atelectasis": "{Side} basilar atelectasis.",
    "Pneumothorax": "{Side} pneumothorax.", "Pleural Effusion": "{Effusion_side} pleural effusion{s}.",
    "Pleural Other": "{Side} pleural thickening.", "Fracture": "{Side} {rib} rib fracture.",
}
_IMPRESSION_UNCERTAIN: Mapping[str, str] = {
    "Enlarged Cardiomediastinum": "Possible mediastinal widening.", "Cardiomegaly": "Possible cardiomegaly.",
    "Lung Opacity": "Possible {side} {zone} lung opacity.", "Lung Lesion": "Possible {side} lung nodule.",
    "Edema": "Possible mild edema.", "Consolidation": "Possible {side} lung consolidation.",
    "Pneumonia": "Findings concerning for pneumonia.", "Atelectasis": "Possible {side} basilar atelectasis.",
    "Pneumothorax": "Possible small {side} pneumothorax.", "Pleural Effusion": "Possible small pleural effusion.",
    "Pleural Other": "Possible {side} pleural thickening.", "Fracture": "Possible {side} {rib} rib fracture.",
}
_NORMAL_IMPRESSION = ("No acute cardiopulmonary process.", "No acute cardiopulmonary abnormality.",
                      "Normal chest radiograph.")
_SECTIONS: tuple[tuple[str, ...], ...] = (
    ("Support Devices",),
    ("Cardiomegaly", "Enlarged Cardiomediastinum"),
    ("Edema", "Consolidation", "Pneumonia", "Lung Opacity", "Lung Lesion", "Atelectasis"),
    ("Pleural Effusion", "Pneumothorax", "Pleural Other"),
    ("Fracture",),
)


def _pick(rng: np.random.Generator, options: Sequence[str]) -> str:
    return options[int(rng.integers(0, len(options)))]


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _mention_fields(name: str, specs: Sequence[FindingSpec]) -> dict[str, str]:
    own = [s for s in specs if s.name == name]
    if name == "Pneumonia":
        own = [s for s in specs if s.name == "Consolidation"]
    fields = {"side": "right", "zone": "lower", "rib": "6th", "extent": "small", "lesion": "nodule", "size": "1.5",
              "s": "", "effusion_side": "right"}
    if own:
        spec = own[0]
        if spec.side:
            fields["side"] = _SIDE_NAME[spec.side]
        if "v" in spec.params:
            fields["zone"] = _zone_of(float(spec.params["v"]))
        if "number" in spec.params:
            fields["rib"] = _ordinal(int(spec.params["number"]))
        if name == "Pneumothorax":
            fields["extent"] = "small" if spec.params["gap"] < 0.035 else "moderate"
        if name == "Pleural Effusion":
            fields["extent"] = "small" if max(s.params["height"] for s in own) < 0.09 else "moderate"
            if len(own) > 1:
                fields["effusion_side"], fields["s"] = "bilateral", "s"
            else:
                fields["effusion_side"] = fields["side"]
        if name == "Lung Lesion":
            fields["lesion"] = "mass" if spec.params["mass"] else "nodule"
            fields["size"] = f"{spec.params['size_cm']:.1f}"
    return {**fields, **{_capitalise(k): _capitalise(v) for k, v in fields.items()}}


def write_report(present: Sequence[bool], uncertain: Sequence[bool], specs: Sequence[FindingSpec],
                 rng: np.random.Generator) -> tuple[str, list[int]]:
    """Template report and its 14 CheXpert codes.

    ``present``/``uncertain`` are 14-long flags in :data:`shovir.labels.CLASSES` order (a present
    class is reported as positive, or as uncertain when flagged); ``specs`` supply sides, zones
    and sizes. Absent classes are negated at class-specific rates (higher in normal studies),
    otherwise left blank; No Finding is 1 exactly when no class other than Support Devices is
    positive or uncertain (the CheXpert rule: devices do not make a study abnormal).

    >>> present = [False] * 14
    >>> text, codes = write_report(present, present, [], np.random.default_rng(0))
    >>> text.startswith("FINDINGS:"), codes[-1]
    (True, 1)
    """
    present = [bool(x) for x in present]
    uncertain = [bool(x) for x in uncertain]
    if len(present) != L.NUM_CLASSES or len(uncertain) != L.NUM_CLASSES:
        raise ValueError(f"present and uncertain must have {L.NUM_CLASSES} flags in shovir.labels.CLASSES order")
    normal = not any(present[c] for c in _PATHOLOGIES)
    codes = [L.BLANK] * L.NUM_CLASSES
    for c, name in enumerate(L.LOCALIZABLE):
        if present[c]:
            codes[c] = L.UNCERTAIN if uncertain[c] else L.POSITIVE
        else:
            rate = min(1.0, _NEGATION_RATE[name] * (1.6 if normal else 1.0))
            codes[c] = L.NEGATIVE if rng.random() < rate else L.BLANK
    sentences: list[str] = []
    negated_done: set[str] = set()
    for section in _SECTIONS:
        for name in section:
            c = L.class_index(name)
            fields = _mention_fields(name, specs)
            if codes[c] == L.POSITIVE:
                if name == "Support Devices":
                    kinds = [s.kind for s in specs if s.name == name] or ["ett"]
                    sentences.append(_pick(rng, _DEVICE[kinds[0]]).format(**fields))
                elif name == "Atelectasis" and any(s.kind == "compressive" for s in specs):
                    sentences.append(_pick(rng, _COMPRESSIVE).format(**fields))
                elif name == "Pleural Effusion" and fields["effusion_side"] == "bilateral":
                    sentences.append(_pick(rng, _BILATERAL_EFFUSION).format(**fields))
                else:
                    sentences.append(_pick(rng, _POSITIVE[name]).format(**fields))
            elif codes[c] == L.UNCERTAIN:
                sentences.append(_pick(rng, _UNCERTAIN[name]).format(**fields))
            elif codes[c] == L.NEGATIVE and name not in negated_done:
                sentences.append(_negation(name, codes, negated_done, rng))
    if normal:
        impression = [_pick(rng, _NORMAL_IMPRESSION)]
    else:
        impression = []
        for name in L.LOCALIZABLE:
            c = L.class_index(name)
            if name == "Support Devices" or codes[c] not in (L.POSITIVE, L.UNCERTAIN) or len(impression) >= 3:
                continue
            template = _IMPRESSION_POSITIVE[name] if codes[c] == L.POSITIVE else _IMPRESSION_UNCERTAIN[name]
            impression.append(template.format(**_mention_fields(name, specs)))
    reported = any(codes[c] in (L.POSITIVE, L.UNCERTAIN) for c in _PATHOLOGIES)
    codes[_NO_FINDING] = L.BLANK if reported else L.POSITIVE
    return "FINDINGS: " + " ".join(sentences) + " IMPRESSION: " + " ".join(impression), codes


def _negation(name: str, codes: Sequence[int], done: set[str], rng: np.random.Generator) -> str:
    """A negation sentence for ``name``, merged with other negated pleural/lung classes sometimes."""
    negative = {n for n in L.LOCALIZABLE if codes[L.class_index(n)] == L.NEGATIVE} - done
    triple = {"Consolidation", "Pleural Effusion", "Pneumothorax"}
    pair = {"Pleural Effusion", "Pneumothorax"}
    if name == "Consolidation" and triple <= negative and rng.random() < 0.5:
        done |= triple
        return "No focal consolidation, pleural effusion or pneumothorax."
    if name == "Pleural Effusion" and pair <= negative and rng.random() < 0.6:
        done |= pair
        return "No pleural effusion or pneumothorax."
    done.add(name)
    return _pick(rng, _NEGATIVE[name])


# ----------------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------------


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
