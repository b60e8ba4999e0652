"""Deterministic image interventions on 2-D grayscale images (numpy arrays or PIL images).

Every function is usable directly, and :class:`Condition` / :class:`ImageSubstitution` wrap them
as picklable ``datasets`` transforms::

    from shovir.perturb import Condition, EmpiricalBoxSizes
    sizes = EmpiricalBoxSizes.from_dataset(pairs)
    pairs.set_transform(Condition("ro", p=1.0, seed=3, box_sizes=sizes))

To apply several interventions to one image, pass ``prepare(image)`` in place of the image: its
conversion to a grayscale plane and its pixel histogram are then done once for all of them::

    canvas = prepare(image)
    images = [oco(canvas, boxes, p, sample_rng(3, image_id, "oco", target)) for p in (0.2, 0.6, 1.0)]

Sources: ShoViR §3.2 (full noise, OCO, DOCO, RO), Beyond Accuracy §3.3 (blank, shuffle),
ModaLens §2 (same-patient swap).
"""

from shovir.perturb._image import Canvas, prepare
from shovir.perturb._rng import sample_key, sample_rng
from shovir.perturb.counterfactual import (
    PAPER_BLANK_SIZE,
    ImageSubstitution,
    SwapChoice,
    blank,
    shuffle_pairs,
    structural_similarity,
    swap_pairs,
)
from shovir.perturb.noise import NOISE_SAMPLER, NoiseModel, NoiseStats, full_noise, gaussian_blur, noise_statistics
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
    "Canvas",
    "ClippedNormalBoxSizes",
    "Condition",
    "EmpiricalBoxSizes",
    "ImageSubstitution",
    "NOISE_SAMPLER",
    "NoiseModel",
    "NoiseStats",
    "PAPER_BLANK_SIZE",
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
    "prepare",
    "ro",
    "ro_area_matched",
    "sample_key",
    "sample_rng",
    "shuffle_pairs",
    "structural_similarity",
    "swap_pairs",
]
