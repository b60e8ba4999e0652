"""Latent scenarios, co-occurrence, stable randomness and patients: which classes a study has.

The label side of the phantom, independent of any pixel: the scenario mixture
(:data:`SCENARIOS`, :data:`SPORADIC_RATE`, :data:`SCENARIO_PERSISTENCE`), its exact prevalence
and co-occurrence (:func:`marginal_probabilities`, :func:`conditional_probability`,
:func:`cooccurrence_matrix`), the context-derivable classes (:data:`CONTEXT_DERIVABLE`), the
keyed generators every draw of the phantom uses (:func:`stable_rng`) and the patient/visit
schedule (:func:`patient_of`, :func:`scenario_of`, :func:`dataset_presence`). The tables these
numbers produce are in the docstring of :mod:`shovir.data.phantom`.

This is the lowest module of the package: it imports none of its siblings.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from shovir import labels as L

__all__ = [
    "CONTEXT_DERIVABLE",
    "REPORT_ONLY_FINDINGS",
    "SCENARIOS",
    "SCENARIO_PERSISTENCE",
    "SPORADIC_RATE",
    "SUBTLE_RATE",
    "Scenario",
    "conditional_probability",
    "cooccurrence_matrix",
    "dataset_presence",
    "marginal_probabilities",
    "patient_of",
    "presence_probabilities",
    "sample_presence",
    "scenario_of",
    "stable_rng",
]

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
