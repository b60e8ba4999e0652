"""One intervention as a picklable ``datasets`` transform: :class:`Condition`.

>>> from shovir.perturb import Condition
>>> Condition.parse("oco_p60")
Condition(name='oco', p=0.6, seed=0)

``ds.set_transform(Condition("doco", p=1.0, seed=3))`` perturbs rows on the fly, deterministically:
the randomness of a row is keyed by ``(seed, image_id, condition, target_class)`` — the target
class only for the box conditions, whose boxes depend on it (see
:func:`shovir.perturb.sample_rng`), so any worker, process or machine produces the same bytes.

The blend strength ``p`` is deliberately *not* part of that key (``noise_per_p=False``): a p-sweep
then blends one fixed noise field into one fixed set of boxes, so μ-F1 versus p traces a dose
response instead of re-drawing noise and RO boxes at every level. This is also what the authors'
per-sample reseeding did. ``noise_per_p=True`` draws afresh for every p.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from shovir.conditions import KINDS
from shovir.perturb._image import ImageLike, to_canvas, unchanged
from shovir.perturb._rng import sample_rng
from shovir.perturb.counterfactual import PAPER_BLANK_SIZE, blank
from shovir.perturb.noise import NoiseModel, _check_p, blend_noise, full_noise
from shovir.perturb.occlusion import (
    ClippedNormalBoxSizes,
    EmpiricalBoxSizes,
    RandomBoxPlan,
    _rects,
    occluded_area,
    plan_area_matched_boxes,
    plan_random_boxes,
)

__all__ = ["CONDITIONS", "Condition"]

CONDITIONS: tuple[str, ...] = tuple(name for name, kind in KINDS.items() if kind.apply is not None)
"""Conditions a :class:`Condition` applies per row (declared in :mod:`shovir.conditions`).
``shuffle`` and ``swap`` need other rows' images: see :class:`shovir.perturb.ImageSubstitution`."""

_BOX_CONDITIONS = tuple(name for name, kind in KINDS.items() if kind.family == "box")
_PATTERN = re.compile(r"^(?P<name>[a-z_]+?)(?:_p(?P<pct>\d{1,3})|@(?P<p>[0-9.]+))?$")
_APPLIERS: dict[str, Callable[..., tuple[ImageLike, dict[str, Any]]]] = {}


@dataclass(frozen=True)
class Condition:
    """An image intervention applied per row of a shovir dataset.

    Args:
        name: one of :data:`CONDITIONS`.
        p: blending strength in [0, 1] (box conditions and full noise); p = 0 is the baseline.
        seed: the experiment seed.
        noise: the :class:`~shovir.perturb.NoiseModel` (paper default; ``NoiseModel.authors()``).
        box_sizes: RO box-size distribution, required for ``ro`` and ``ro_area``
            (``EmpiricalBoxSizes.from_dataset(ds)``, or ``AUTHORS_PADCHEST_BOX_SIZES``).
        noise_per_p: include p in the random key (see the module docstring).
        max_tries: RO placement attempts per box.
        image_column: the column holding the image.
        blank_size: ``(width, height)`` of the ``blank`` image (default the paper's 224×224 RGB);
            ``None`` keeps each input's size and mode.

    Rows need ``image_id``; ``oco`` needs ``disease_boxes``, ``doco`` needs ``context_boxes``
    (per-pair rows, ``rows="pairs"``); ``ro`` avoids every box in ``boxes``; ``ro_area`` also needs
    ``disease_boxes`` to know the OCO area it must match.

    The transform adds ``condition``, ``p``, ``occluded_pixels``, ``occluder_boxes``
    (``[x0, y0, x1, y1]`` pixels) and ``occlusion_complete`` (False when RO could not place every
    box or the whole matched area) to each row, so nothing about a perturbation is hidden.
    """

    name: str
    p: float = 1.0
    seed: int = 0
    noise: NoiseModel = field(default=NoiseModel(), repr=False)
    box_sizes: EmpiricalBoxSizes | ClippedNormalBoxSizes | None = field(default=None, repr=False)
    noise_per_p: bool = field(default=False, repr=False)
    max_tries: int = field(default=100, repr=False)
    image_column: str = field(default="image", repr=False)
    blank_size: tuple[int, int] | None = field(default=PAPER_BLANK_SIZE, repr=False)

    def __post_init__(self) -> None:
        if self.name not in CONDITIONS:
            raise ValueError(f"condition must be one of {', '.join(CONDITIONS)}, got {self.name!r}")
        _check_p(self.p)
        object.__setattr__(self, "p", float(self.p))
        if KINDS[self.name].random_boxes and self.box_sizes is None:
            raise ValueError(
                f"condition {self.name!r} needs box_sizes: pass EmpiricalBoxSizes.from_dataset(ds) "
                "(the dataset's own box sizes) or AUTHORS_PADCHEST_BOX_SIZES"
            )

    @classmethod
    def parse(cls, text: str, **kwargs: Any) -> "Condition":
        """From ``"oco_p60"`` (the authors' experiment strings), ``"doco@0.2"`` or ``"full_noise"``.

        The authors' ``all_noise_mean`` is ``full_noise``.

        >>> Condition.parse("doco@0.2").p, Condition.parse("all_noise_mean").name
        (0.2, 'full_noise')
        """
        match = _PATTERN.match(text.strip().lower())
        if not match:
            raise ValueError(f"cannot parse condition {text!r}; write e.g. 'oco_p60', 'ro@0.2' or 'full_noise'")
        name = {"all_noise_mean": "full_noise"}.get(match["name"], match["name"])
        if match["pct"] is not None:
            kwargs["p"] = int(match["pct"]) / 100
        elif match["p"] is not None:
            kwargs["p"] = float(match["p"])
        return cls(name, **kwargs)

    @property
    def label(self) -> str:
        """A short name for logs and file names: ``"oco_p60"``, ``"full_noise"``.

        >>> Condition("ro", 0.2, box_sizes=EmpiricalBoxSizes(((0.1, 0.1),))).label
        'ro_p20'
        """
        if self.name in _BOX_CONDITIONS:
            return f"{self.name}_p{int(round(self.p * 100)):02d}"
        return self.name

    def rng(self, image_id: str, target_class: str | None = None) -> np.random.Generator:
        """The generator of one row (see :func:`shovir.perturb.sample_rng`)."""
        return sample_rng(self.seed, image_id, self.name, target_class, self.p if self.noise_per_p else None)

    def apply(self, image: ImageLike, row: Mapping[str, Any]) -> tuple[ImageLike, dict[str, Any]]:
        """Perturb one image given its row; return the new image and what was done."""
        info: dict[str, Any] = {"condition": self.label, "p": self.p, "occluded_pixels": 0, "occluder_boxes": [], "occlusion_complete": True}
        if "image_id" not in row:
            raise ValueError("row has no 'image_id'; perturbations are keyed by it")
        if self.p == 0 and KINDS[self.name].graded:
            return unchanged(image), info
        return _applier(self.name)(self, image, row, info)

    def __call__(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """The ``set_transform`` / ``with_transform`` entry point (a batch is a dict of lists)."""
        if self.image_column not in batch:
            raise ValueError(f"batch has no {self.image_column!r} column; pass image_column= to Condition")
        keys = list(batch)
        size = len(batch[self.image_column])
        images, infos = [], []
        for i in range(size):
            row = {key: batch[key][i] for key in keys}
            image, info = self.apply(batch[self.image_column][i], row)
            images.append(image)
            infos.append(info)
        batch[self.image_column] = images
        for key in ("condition", "p", "occluded_pixels", "occluder_boxes", "occlusion_complete"):
            batch[key] = [info[key] for info in infos]
        return batch


def _require(row: Mapping[str, Any], key: str, condition: str) -> list[Any]:
    if key not in row:
        raise ValueError(
            f"condition {condition!r} needs the {key!r} column: build the dataset with rows='pairs' "
            "(one row per image and target class)"
        )
    return list(row[key] or [])


def _applier(name: str) -> Callable[..., tuple[ImageLike, dict[str, Any]]]:
    """The function :data:`shovir.conditions.KINDS` declares for ``name``, imported once."""
    if name not in _APPLIERS:
        import importlib

        module_name, function_name = KINDS[name].apply.split(":")  # type: ignore[union-attr]
        _APPLIERS[name] = getattr(importlib.import_module(module_name), function_name)
    return _APPLIERS[name]


def _target(condition: Condition, row: Mapping[str, Any]) -> str | None:
    # whole-image conditions do not depend on the target class: one image per image_id, so a
    # runner can generate once per image for all of its (image, class) samples
    return (row.get("target_class") or None) if KINDS[condition.name].needs_target else None


def apply_baseline(condition: Condition, image: ImageLike, row: Mapping[str, Any], info: dict[str, Any]) -> tuple[ImageLike, dict[str, Any]]:
    """The unperturbed image (a copy of an array, the same PIL image)."""
    return unchanged(image), info


def apply_blank(condition: Condition, image: ImageLike, row: Mapping[str, Any], info: dict[str, Any]) -> tuple[ImageLike, dict[str, Any]]:
    """Beyond Accuracy §3.3: :func:`shovir.perturb.blank`."""
    return blank(image, condition.blank_size), info


def apply_full_noise(condition: Condition, image: ImageLike, row: Mapping[str, Any], info: dict[str, Any]) -> tuple[ImageLike, dict[str, Any]]:
    """ShoViR §3.2: matched noise over the whole image at strength p."""
    out = full_noise(image, condition.rng(str(row["image_id"]), None), condition.noise, condition.p)
    canvas = to_canvas(image)
    info["occluded_pixels"] = canvas.height * canvas.width
    return out, info


def _occlude_boxes(condition: Condition, image: ImageLike, row: Mapping[str, Any], info: dict[str, Any],
                   choose: Callable[[int, int, np.random.Generator], tuple[list[Any], RandomBoxPlan | None]]) -> tuple[ImageLike, dict[str, Any]]:
    canvas = to_canvas(image)
    generator = condition.rng(str(row["image_id"]), _target(condition, row))
    boxes, plan = choose(canvas.height, canvas.width, generator)
    rects = _rects(boxes, canvas.height, canvas.width)
    plane, occluded = blend_noise(canvas, rects, condition.p, generator, condition.noise)
    info["occluded_pixels"] = occluded
    info["occluder_boxes"] = [[x0, y0, x1, y1] for y0, y1, x0, x1 in rects]
    info["occlusion_complete"] = True if plan is None else plan.complete
    return canvas.restore(plane), info


def apply_oco(condition: Condition, image: ImageLike, row: Mapping[str, Any], info: dict[str, Any]) -> tuple[ImageLike, dict[str, Any]]:
    """ShoViR §3.2 OCO: noise in the target class's own boxes B_c."""
    return _occlude_boxes(condition, image, row, info, lambda h, w, g: (_require(row, "disease_boxes", condition.name), None))


def apply_doco(condition: Condition, image: ImageLike, row: Mapping[str, Any], info: dict[str, Any]) -> tuple[ImageLike, dict[str, Any]]:
    """ShoViR §3.2 DOCO: noise in the co-disease boxes B_c̄."""
    return _occlude_boxes(condition, image, row, info, lambda h, w, g: (_require(row, "context_boxes", condition.name), None))


def apply_ro(condition: Condition, image: ImageLike, row: Mapping[str, Any], info: dict[str, Any]) -> tuple[ImageLike, dict[str, Any]]:
    """ShoViR §3.2 RO: random boxes avoiding every annotated box."""
    def choose(height: int, width: int, generator: np.random.Generator) -> tuple[list[Any], RandomBoxPlan]:
        plan = plan_random_boxes(height, width, row.get("boxes") or [], generator, condition.box_sizes,  # type: ignore[arg-type]
                                 max_tries=condition.max_tries)
        return plan.boxes, plan

    return _occlude_boxes(condition, image, row, info, choose)


def apply_ro_area(condition: Condition, image: ImageLike, row: Mapping[str, Any], info: dict[str, Any]) -> tuple[ImageLike, dict[str, Any]]:
    """Area-matched RO: random boxes covering exactly the OCO area of the row."""
    def choose(height: int, width: int, generator: np.random.Generator) -> tuple[list[Any], RandomBoxPlan]:
        target_area = occluded_area(_require(row, "disease_boxes", condition.name), height, width)
        plan = plan_area_matched_boxes(height, width, row.get("boxes") or [], target_area, generator,
                                       condition.box_sizes, condition.max_tries)  # type: ignore[arg-type]
        return plan.boxes, plan

    return _occlude_boxes(condition, image, row, info, choose)
