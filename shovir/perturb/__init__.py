"""Deterministic image interventions on 2-D grayscale images (numpy arrays or PIL images).

Every function is usable directly, and :class:`Condition` / :class:`ImageSubstitution` wrap them
as picklable ``datasets`` transforms::

    from shovir.perturb import Condition, EmpiricalBoxSizes
    sizes = EmpiricalBoxSizes.from_dataset(pairs)
    pairs.set_transform(Condition("ro", p=1.0, seed=3, box_sizes=sizes))

Sources: ShoViR §3.2 (full noise, OCO, DOCO, RO), Beyond Accuracy §3.3 (blank, shuffle),
ModaLens §2 (same-patient swap).
"""

from shovir.perturb._rng import sample_key, sample_rng
from shovir.perturb.counterfactual import (
    ImageSubstitution,
    SwapChoice,
    blank,
    shuffle_pairs,
    structural_similarity,
    swap_pairs,
)
from shovir.perturb.noise import NoiseModel, NoiseStats, full_noise, gaussian_blur, noise_statistics
from shovir.perturb.occlusion import (
    AUTHORS_PADCHEST_BOX_SIZES,
    ClippedNormalBoxSizes,
    EmpiricalBoxSizes,
    RandomBoxPlan,
    doco,
    occlude,
    occluded_area,
    oco,
    plan_area_matched_boxes,
    plan_random_boxes,
    ro,
    ro_area_matched,
)
from shovir.perturb.transforms import CONDITIONS, Condition

__all__ = [
    "AUTHORS_PADCHEST_BOX_SIZES",
    "CONDITIONS",
    "ClippedNormalBoxSizes",
    "Condition",
    "EmpiricalBoxSizes",
    "ImageSubstitution",
    "NoiseModel",
    "NoiseStats",
    "RandomBoxPlan",
    "SwapChoice",
    "blank",
    "doco",
    "full_noise",
    "gaussian_blur",
    "noise_statistics",
    "occlude",
    "occluded_area",
    "oco",
    "plan_area_matched_boxes",
    "plan_random_boxes",
    "ro",
    "ro_area_matched",
    "sample_key",
    "sample_rng",
    "shuffle_pairs",
    "structural_similarity",
    "swap_pairs",
]
