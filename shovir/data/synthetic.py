"""The built-in synthetic chest X-ray dataset: phantoms with known findings, boxes and reports.

:class:`SyntheticCXR` is the embedded default dataset of shovir: the demo, the tests and the
known-answer calibration experiments run on it, with no download and no data-use agreement. It
renders :mod:`shovir.data.phantom` cases (a chest-X-ray-like anatomy, 12 localisable findings
that each change the image only inside their own box, template reports with positive, negated
and uncertain mentions, and a documented co-occurrence structure from latent scenarios) and
hands them to :class:`shovir.data._base.GroundedBuilder`, which validates them and expands them
into per-image rows or per-(image, class) rows with disease and context boxes.

Usage::

    from shovir.data.synthetic import SyntheticCXR
    builder = SyntheticCXR(config_name="pairs", n_images=200, seed=0, cache_dir="cache")
    builder.download_and_prepare()
    pairs = builder.as_dataset(split="test")   # one row per (image, target class)

or ``shovir.data.build("synthetic", rows="pairs", n_images=200)``.

Properties the experiments rely on (see :mod:`shovir.data.phantom` for the model and its tables):

* image ``i`` depends only on ``(seed, i)`` (and on ``n_patients`` when it is given), so the
  first ``k`` images are byte-identical whatever ``n_images`` is;
* ids are ``syn-00000`` (image), ``P0000`` (patient, 1-4 consecutive studies, mean 2.5) and
  ``S00000`` (study); studies of a patient share its anatomy and usually its scenario;
* every class with a box is coded 1 (or 3 for a subtle rendering); Pneumonia is the one class
  coded 1 or 3 without a box (it is reported with its consolidation);
* scenario co-occurrence is exact and known: :func:`shovir.data.phantom.cooccurrence_matrix`.
"""

from __future__ import annotations

import io

from collections import Counter
from typing import Any, Iterator

import datasets
from PIL import Image

from shovir import labels as L
from shovir.data._base import GroundedBuilder, GroundedConfig
from shovir.data.phantom import (
    CONTEXT_DERIVABLE,
    PHANTOM_VERSION,
    SCENARIOS,
    cooccurrence_matrix,
    render_case,
    sample_case,
)

__all__ = ["SyntheticConfig", "SyntheticCXR", "SCENARIOS", "CONTEXT_DERIVABLE", "cooccurrence_matrix"]

MIN_IMAGE_SIZE = 128
"""Smallest supported side: thinner structures (tube walls, pleural line) vanish below it."""


class SyntheticConfig(GroundedConfig):
    """Options of :class:`SyntheticCXR`.

    Args:
        n_images: number of images (studies).
        seed: generator seed; every image is keyed by ``(seed, index)``.
        image_size: side of the square 8-bit grayscale images, at least 128.
        n_patients: ``None`` (default) gives each patient 1-4 consecutive studies (mean 2.5,
            about ``n_images / 2.5`` patients) independently of ``n_images``; an integer deals the
            studies round-robin over exactly that many patients (at most ``n_images``).
        rows, on_error, iou_threshold, iou_inclusive, drop_pairs_without_context, verify_images:
            see :class:`shovir.data._base.GroundedConfig`.

    >>> SyntheticConfig(rows="pairs", n_images=10).n_images
    10
    >>> SyntheticConfig(image_size=64)
    Traceback (most recent call last):
    ...
    ValueError: image_size must be an integer >= 128, got 64
    """

    def __init__(
        self,
        n_images: int = 200,
        seed: int = 0,
        image_size: int = 320,
        n_patients: int | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("version", datasets.Version(PHANTOM_VERSION))
        super().__init__(**kwargs)
        self.n_images = n_images
        self.seed = seed
        self.image_size = image_size
        self.n_patients = n_patients
        self.check()

    def check(self) -> None:
        """Raise ``ValueError`` naming the first invalid option (also run by the builder, because
        ``datasets`` sets config keyword arguments as plain attributes)."""
        super().check()
        for name, minimum in (("n_images", 1), ("seed", 0), ("image_size", MIN_IMAGE_SIZE)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
        if self.n_patients is not None:
            value = self.n_patients
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= self.n_images:
                raise ValueError(f"n_patients must be None or an integer in [1, n_images={self.n_images}], got {value!r}")


class SyntheticCXR(GroundedBuilder):
    """Synthetic chest X-ray phantoms with grounded findings, CheXpert codes and template reports."""

    BUILDER_CONFIG_CLASS = SyntheticConfig
    BUILDER_CONFIGS = [SyntheticConfig(rows="images"), SyntheticConfig(rows="pairs")]
    DEFAULT_CONFIG_NAME = "images"

    def _image_records(self) -> Iterator[dict[str, Any]]:
        config: SyntheticConfig = self.config
        scenarios: Counter = Counter()
        boxes_per_class: Counter = Counter()
        patients: set[str] = set()
        for index in range(config.n_images):
            case = sample_case(index, seed=config.seed, n_patients=config.n_patients)
            image, boxes = render_case(case, size=config.image_size)
            scenarios[case.scenario] += 1
            patients.add(case.patient_id)
            for name in {b["classes"][0] for b in boxes}:
                boxes_per_class[name] += 1
            # zlib level 1 writes these noisy images about 3x faster than the default for ~15% more bytes
            encoded = io.BytesIO()
            Image.fromarray(image).save(encoded, format="PNG", compress_level=1)
            yield {
                "image": {"bytes": encoded.getvalue(), "path": None},
                "image_id": case.image_id,
                "patient_id": case.patient_id,
                "study_id": case.study_id,
                "report": case.report,
                "labels": list(case.labels),
                "boxes": boxes,
            }
        self._report.notes.update(
            {
                "phantom_version": PHANTOM_VERSION,
                "seed": config.seed,
                "n_patients": len(patients),
                "scenarios": dict(sorted(scenarios.items())),
                "images_with_box": {name: boxes_per_class[name] for name in L.LOCALIZABLE if boxes_per_class[name]},
            }
        )
