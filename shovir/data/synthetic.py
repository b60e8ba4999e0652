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

or ``shovir.data.build("synthetic", rows="pairs", n_images=200)``. ``rows="vqa"`` gives one row per
template question (:data:`SYNTHETIC_VQA_FEATURES`): five questions per image about presence,
absence, side and which finding, answered from the rendered ground truth
(:mod:`shovir.data.phantom.questions`, where the design and the answer priors are documented),
for the Beyond Accuracy and ModaLens protocols.

Properties the experiments rely on (see :mod:`shovir.data.phantom` for the model and its tables):

* image ``i`` depends only on ``(seed, i)`` (and on ``n_patients`` when it is given), so the
  first ``k`` images are byte-identical whatever ``n_images`` is;
* ids are ``syn-00000`` (image), ``P0000`` (patient, 1-4 consecutive studies, mean 2.5) and
  ``S00000`` (study); studies of a patient share its anatomy and usually its scenario;
* every class with a box is coded 1 (or 3 for a subtle rendering); Pneumonia is the one class
  coded 1 or 3 without a box (it is reported with its consolidation);
* scenario co-occurrence is exact and known: :func:`shovir.data.phantom.cooccurrence_matrix`;
* VQA questions of image ``i`` depend only on its case (a generator keyed by
  ``(seed, "questions", i)``), so they too are the same whatever ``n_images`` is.
"""

from __future__ import annotations

import copy
import io
from collections import Counter
from typing import Any, Iterator

import datasets
from PIL import Image

from shovir import labels as L
from shovir.data._base import GroundedBuilder, GroundedConfig, files_sha256
from shovir.data.phantom import (
    CONTEXT_DERIVABLE,
    PHANTOM_VERSION,
    QUESTIONS_PER_IMAGE,
    SCENARIOS,
    cooccurrence_matrix,
    render_case,
    sample_case,
    sample_questions,
)
from shovir.data.phantom import questions as _questions_module
from shovir.data.vqa import VQA_FEATURES

__all__ = ["ROW_KINDS", "SYNTHETIC_VQA_FEATURES", "SyntheticConfig", "SyntheticCXR", "SCENARIOS", "CONTEXT_DERIVABLE",
           "cooccurrence_matrix"]

SYNTHETIC_VQA_FEATURES = datasets.Features(
    {
        **VQA_FEATURES,
        "finding": datasets.Value("string"),
        "label_code": datasets.Value("int8"),
        "labels": datasets.List(datasets.Value("int8"), length=L.NUM_CLASSES),
        "question_type": datasets.Value("string"),
    }
)
"""Rows of ``rows="vqa"``: :data:`shovir.data.vqa.VQA_FEATURES` (``sample_id`` is
``"<image_id>::q<k>"``, k = 0..4; ``answer_type`` ``"closed"``; ``dataset`` ``"synthetic"``; ``report``
the study's template report) plus, as in :data:`shovir.data.mimic_vqa.MIMIC_VQA_FEATURES`,
``finding`` (the class asked about; for a which-finding question the present option's class, ``""``
when the answer is "none of these") and ``label_code`` (the study's report code of ``finding``, 0
for ``""``), then ``labels`` (the study's 14 CheXpert codes, used for the swap pairing) and
``question_type`` (``presence``, ``absence``, ``side`` or ``which``)."""

ROW_KINDS: tuple[str, ...] = ("images", "pairs", "vqa")
"""Values of ``rows``."""

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
        rows: ``"images"`` or ``"pairs"`` (see :class:`shovir.data._base.GroundedConfig`), or
            ``"vqa"``: one row per template question (:data:`SYNTHETIC_VQA_FEATURES`).
        on_error, iou_threshold, iou_inclusive, drop_pairs_without_context, verify_images:
            see :class:`shovir.data._base.GroundedConfig`.

    >>> SyntheticConfig(rows="pairs", n_images=10).n_images
    10
    >>> SyntheticConfig(image_size=64)
    Traceback (most recent call last):
    ...
    ValueError: image_size must be an integer >= 128, got 64
    >>> SyntheticConfig(rows="vqa").name
    'vqa'
    >>> SyntheticConfig(rows="questions")
    Traceback (most recent call last):
    ...
    ValueError: rows must be 'images', 'pairs' or 'vqa', got 'questions'
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
        if self.rows not in ROW_KINDS:
            raise ValueError(f"rows must be 'images', 'pairs' or 'vqa', got {self.rows!r}")
        if self.rows == "vqa":
            # GroundedConfig knows the images/pairs kinds only: check the options it shares on a copy
            probe = copy.copy(self)
            probe.rows = "images"
            GroundedConfig.check(probe)
        else:
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
    BUILDER_CONFIGS = [SyntheticConfig(rows="images"), SyntheticConfig(rows="pairs"), SyntheticConfig(rows="vqa")]
    DEFAULT_CONFIG_NAME = "images"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "vqa" in (kwargs.get("rows"), kwargs.get("config_name")):
            # the questions are code, not data: an edited question module must not reuse cached rows
            kwargs["source_sha256"] = files_sha256([_questions_module.__file__])
        super().__init__(*args, **kwargs)

    def _info(self) -> datasets.DatasetInfo:
        if self.config.rows != "vqa":
            return super()._info()
        return datasets.DatasetInfo(description=(self.__doc__ or "").strip().split("\n")[0],
                                    features=SYNTHETIC_VQA_FEATURES)

    def _pairs(self, record: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        """Rows of a checked record for the non-image kinds: (image, class) pairs, or its questions."""
        # GroundedBuilder._rows validates every record and hands it here unless rows="images", so
        # the question rows reuse its checks, duplicate-id refusal and read/kept counts
        if self.config.rows != "vqa":
            yield from super()._pairs(record)
            return
        tally = self._vqa_tally
        for k, question in enumerate(record.pop("_questions")):
            sample_id = f"{record['image_id']}::q{k}"
            code = record["labels"][L.class_index(question.finding)] if question.finding else L.BLANK
            tally["answers"][question.answer] += 1
            tally["by_type"].setdefault(question.question_type, Counter())[question.answer] += 1
            tally["subtle"] += bool(question.finding) and code == L.UNCERTAIN
            yield sample_id, {
                "sample_id": sample_id,
                "image": record["image"],
                "image_id": record["image_id"],
                "patient_id": record["patient_id"],
                "study_id": record["study_id"],
                "question": question.question,
                "answer": question.answer,
                "options": list(question.options),
                "answer_type": "closed",
                "modality": "X-Ray",
                "report": record["report"],
                "dataset": "synthetic",
                "finding": question.finding,
                "label_code": int(code),
                "labels": record["labels"],
                "question_type": question.question_type,
            }

    def _image_records(self) -> Iterator[dict[str, Any]]:
        config: SyntheticConfig = self.config
        vqa = config.rows == "vqa"
        self._vqa_tally: dict[str, Any] = {"answers": Counter(), "by_type": {}, "subtle": 0}
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
            encoded = io.BytesIO()
            if vqa:
                # every question row holds its image and the runner decodes each row it fetches: an
                # uncompressed BMP decodes in 0.1 ms against 2 ms for the PNG (320 px), for 1.6x the bytes
                Image.fromarray(image).save(encoded, format="BMP")
            else:
                # zlib level 1 writes these noisy images about 3x faster than the default for ~15% more bytes
                Image.fromarray(image).save(encoded, format="PNG", compress_level=1)
            record = {
                "image": {"bytes": encoded.getvalue(), "path": None},
                "image_id": case.image_id,
                "patient_id": case.patient_id,
                "study_id": case.study_id,
                "report": case.report,
                "labels": list(case.labels),
                "boxes": boxes,
            }
            if vqa:
                record["_questions"] = sample_questions(case)  # expanded into rows by _pairs
            yield record
        self._report.notes.update(
            {
                "phantom_version": PHANTOM_VERSION,
                "seed": config.seed,
                "n_patients": len(patients),
                "scenarios": dict(sorted(scenarios.items())),
                "images_with_box": {name: boxes_per_class[name] for name in L.LOCALIZABLE if boxes_per_class[name]},
            }
        )
        if vqa:
            tally = self._vqa_tally
            self._report.notes.update(
                {
                    "questions": sum(tally["answers"].values()),
                    "questions_per_image": QUESTIONS_PER_IMAGE,
                    "answers": dict(sorted(tally["answers"].items())),
                    "answers_by_type": {kind: dict(sorted(c.items())) for kind, c in sorted(tally["by_type"].items())},
                    "questions_about_subtle_findings": tally["subtle"],
                    "answer_priors": "documented in shovir.data.phantom.questions",
                }
            )
