"""PadChest-GR grounded reports with per-box CheXpert classes (ShoViR paper §3.1, reference §2.2, §3.1).

Source format: ``grounded_reports_*.json`` (e.g. ``grounded_reports_20240819.json``) is a JSON
list of studies, one frontal image each::

    {"ImageID": "<file>.png", "StudyID": "...",            # StudyID / PatientID used when present
     "findings": [{"sentence_en": "...", "sentence_es": "...", "abnormal": true,
                   "labels": ["cardiomegaly"], "locations": ["heart"],
                   "boxes": [[x1, y1, x2, y2], ...],          # normalised to [0, 1], xyxy
                   "extra_boxes": [[...]], "progression": ...}]}

The images are 16-bit grayscale PNGs named by ``ImageID``. ``boxes`` holds the first reader's
boxes; ``extra_boxes`` (a second, independent reader, PadChest-GR paper) is not used by ShoViR
and is counted in ``notes["boxes"]["extra_boxes_ignored"]``. Public loaders take ``PatientID``
from the PadChest-GR ``master_table.csv`` rather than from the JSON, so it is read from that
table (columns ``ImageID``, ``StudyID``, ``PatientID``) when ``data_dir`` holds one or
``master_table=`` names one; ids present in the JSON take precedence.

Pipeline (paper §3.1, authors' ``organize_by_chexpert_label.py``):

1. Keep findings with ``abnormal=True`` and at least one box; boxes of normal findings are not
   findings (counted). Images left without any box are excluded (``skipped["no_boxes"]``; the
   paper's "34.0% lack spatial annotations").
2. Negation filter (``negation_filter=True``): a finding whose English sentence matches the
   authors' regexes :data:`NEGATION_PATTERNS` gets no CheXpert class (counted). The authors
   dropped it; its boxes are kept here as class-less boxes, because they still mark an abnormal
   region ("pleural thickening without effusion") that random occlusion must not hit.
3. Static mapping: each PadChest label → a CheXpert class through
   ``resources/padchest_to_chexpert.json`` (69 labels, reference §3.1).
4. Verification (optional ``verifier``): keep a mapped class only when the verifier (a
   CheXbert-style labeller, ``list[str] -> (n, 14)`` codes) gives code 1 (positive; uncertain
   is *not* accepted, the authors' ``rrg`` binarisation) for that class on the finding's
   sentence. Rejections are counted per class. The verifier is a builder argument, not a config
   field: ``datasets`` would hash a config field by pickling it (a function only by its import
   reference, a labeller object with its whole model state, and unpicklable objects not at
   all); the cache identity uses the stable ``verifier_name`` instead (see :func:`verifier_name`).
5. Classes seen in fewer than ``min_images_per_class`` images (40, paper §3.1; the authors'
   ``cli.py`` used 50) are removed from the boxes' ``classes``; per-class image counts before
   and after are in the notes.
6. One output box per PadChest box, in pixels: ``x = u * width``, ``y = v * height`` with the
   size read from the PNG. ``classes`` are the finding's kept CheXpert classes (possibly none:
   a finding outside the CheXpert vocabulary stays as a class-less box, which RO must avoid and
   :func:`shovir.boxes.context_boxes` ignores); ``anatomy`` is the first location.

Where this builder deliberately differs from the authors' code, and why:

* **Deterministic reference report** (defect 8). The authors joined a Python ``set`` of
  sentences, so the order changed with the hash seed, and kept only abnormal sentences. Here
  the report is the findings' ``sentence_en`` in source order, de-duplicated keeping the first
  occurrence; ``report_sentences="all"`` (default) keeps normal/negative sentences too (better
  BLEU/ROUGE/RadGraph comparability), ``"abnormal"`` reproduces the authors' selection.
* **A fixed mapping** (reference §3.1 "Important"). The authors extended the static mapping
  with CheXbert's predictions on the synthetic sentence ``"The patient has <label>."``, making
  the effective mapping depend on the model. Here the mapping is the static data file only;
  the verifier can only confirm or reject a mapped class, never add one.
* **Boxes of unverified findings are kept, class-less.** The authors dropped them; they are
  real abnormal regions, so RO must not place its random boxes on them.
* **Fractional boxes are not truncated** (see :mod:`shovir.boxes`), and a box outside the image
  is an error rather than silently clipped (a tolerance of 1e-6 absorbs float noise in the
  normalised coordinates).
* **Image labels.** ``labels`` holds 1 for every CheXpert class with a verified box (including
  classes later removed by ``min_images_per_class``: the finding is still in the image); with a
  verifier, its codes on the report sentences are merged first with priority 1 > 3 > 2 > 0 (the
  authors' rule). No Finding is 1 only when no other class is positive or uncertain.
* **Nothing is dropped silently** (defect 11): every skipped image is counted by reason and
  every dropped finding, box or class is counted in ``build_report.notes``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Sequence

import numpy as np
from PIL import Image

from shovir import labels as L
from shovir.conditions import closest
from shovir.registry import Registry
from shovir.boxes import validate_box
from shovir.data._base import GroundedBuilder, GroundedConfig, files_sha256, read_json

__all__ = [
    "PadChestGRConfig",
    "PadChestGR",
    "NEGATION_PATTERNS",
    "is_negated",
    "load_padchest_mapping",
    "normalise_label",
    "verifier_name",
    "Verifier",
]

NEGATION_PATTERNS: tuple[str, ...] = (
    r"\bno\s+(?:evidence\s+of\s+)?",
    r"\bno\b",
    r"\bnot\b",
    r"\bwithout\b",
    r"\babsent\b",
)
"""The authors' negation regexes (``NegationDetector.negation_patterns``), matched on the lower-cased sentence."""

_NEGATION = re.compile("|".join(f"(?:{pattern})" for pattern in NEGATION_PATTERNS))

Verifier = Callable[[list[str]], Any]
"""A CheXbert-style labeller: ``sentences -> array (len(sentences), 14)`` of codes 0-3."""

MAPPING_RESOURCE = "padchest_to_chexpert.json"
_BOX_TOLERANCE = 1e-6
_VERIFIER_BATCH = 256
_NO_FINDING = L.class_index("No Finding")
_FINDING_COUNTS = ("abnormal_with_boxes", "abnormal_without_boxes", "negated_classless", "normal")
_BOX_COUNTS = ("read", "extra_boxes_ignored", "negated_classless", "normal_finding_boxes_ignored")


def is_negated(sentence: str) -> bool:
    """Whether ``sentence`` matches one of the authors' negation patterns (:data:`NEGATION_PATTERNS`).

    >>> is_negated("No pleural effusion."), is_negated("Cardiomegaly without signs of failure.")
    (True, True)
    >>> is_negated("Nodule in the left upper lobe."), is_negated("Notable cardiomegaly.")
    (False, False)
    """
    return bool(_NEGATION.search((sentence or "").lower()))


def normalise_label(label: str) -> str:
    """Lower-case a PadChest label and collapse whitespace, for case-insensitive lookup.

    >>> normalise_label("  NSG   tube ")
    'nsg tube'
    """
    return re.sub(r"\s+", " ", str(label)).strip().lower()


def load_padchest_mapping(path: str | os.PathLike | None = None) -> tuple[dict[str, str], frozenset[str]]:
    """Load a PadChest label → CheXpert class mapping file.

    Returns ``(mapping, unmapped)`` with keys normalised by :func:`normalise_label` and values in
    :data:`shovir.labels.CLASSES` spelling. Without ``path`` the packaged
    ``resources/padchest_to_chexpert.json`` (the authors' 69-label table) is used. Raises
    ``ValueError`` naming the label for a class outside the 13 localisable CheXpert classes.

    >>> mapping, unmapped = load_padchest_mapping()
    >>> len(mapping), mapping["hydropneumothorax"], mapping["nsg tube"], "aortic elongation" in unmapped
    (69, 'Pleural Effusion', 'Support Devices', True)
    """
    if path is None:
        text = resources.files("shovir.data").joinpath("resources", MAPPING_RESOURCE).read_text(encoding="utf-8")
        where = f"shovir/data/resources/{MAPPING_RESOURCE}"
    else:
        if not Path(path).is_file():
            raise FileNotFoundError(f"mapping_file {str(path)!r} not found")
        text = Path(path).read_text(encoding="utf-8")
        where = str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"mapping_file {where}: not valid JSON ({error})") from error
    if not isinstance(data, dict) or not isinstance(data.get("mapping"), dict):
        raise ValueError(f"mapping_file {where}: expected an object with a 'mapping' object (label -> CheXpert class)")
    mapping: dict[str, str] = {}
    for label, name in data["mapping"].items():
        try:
            canonical = L.canonical_class(name)
        except ValueError as error:
            raise ValueError(f"mapping_file {where}: label {label!r}: {error}") from None
        if canonical == "No Finding":
            raise ValueError(f"mapping_file {where}: label {label!r} maps to 'No Finding', which cannot be localised")
        mapping[normalise_label(label)] = canonical
    unmapped = data.get("unmapped", [])
    if not isinstance(unmapped, list):
        raise ValueError(f"mapping_file {where}: 'unmapped' must be a list of labels")
    return mapping, frozenset(normalise_label(label) for label in unmapped)


def verifier_name(verifier: Verifier | str) -> str:
    """A stable name for a verifier, used in the cache identity of the built dataset.

    An import string is its own name; a module-level function or class instance is named
    ``module:qualname``, followed by ``[name]`` for an object with a string ``name`` attribute
    (the :class:`shovir.labelers.Labeler` protocol). Lambdas, nested functions and
    ``functools.partial`` objects have no stable name: pass ``verifier_name=`` yourself (also
    when one labeler class runs with other weights).

    >>> verifier_name("mypkg.labelers:chexbert_codes")
    'mypkg.labelers:chexbert_codes'
    >>> verifier_name(normalise_label)
    'shovir.data.padchest_gr:normalise_label'
    """
    if isinstance(verifier, str):
        return verifier
    target = verifier if callable(verifier) and hasattr(verifier, "__qualname__") else type(verifier)
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module in ("functools", "builtins"):
        raise ValueError(
            f"verifier {verifier!r} has no stable name (lambda, nested function or anonymous object); "
            "pass verifier_name='...' so that the dataset cache can tell verifiers apart"
        )
    label = getattr(verifier, "name", None) if target is not verifier else None
    return f"{module}:{qualname}" + (f"[{label}]" if isinstance(label, str) and label else "")


VERIFIERS = Registry("verifier", "shovir.verifiers", {
    "rule": "shovir.labelers.rule_based:RuleBasedLabeler",
    "chexbert": "shovir.labelers.chexbert:CheXbertLabeler",
})
"""Verifier names a config may use (entry-point group ``shovir.verifiers``). A config names a
verifier only through this registry: an arbitrary ``module:attribute`` is refused, so a sweep
file can never make shovir call e.g. ``subprocess:run`` with sentences of the data file."""


def _import_verifier(spec: str) -> Verifier:
    if spec not in VERIFIERS:
        raise ValueError(f"verifier {spec!r} is not registered{closest(spec, list(VERIFIERS))}; registered verifiers: "
                         f"{', '.join(VERIFIERS) or 'none'}. Pass a callable from Python, or register yours under the "
                         "'shovir.verifiers' entry-point group")
    target: Any = VERIFIERS.load(spec)
    if isinstance(target, type):
        target = target()
    if not callable(target):
        raise ValueError(f"verifier {spec!r} is not callable")
    return target


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _merge_codes(into: list[int], codes: Sequence[int]) -> None:
    """Merge a 14-code vector into ``into`` with priority 1 > 3 > 2 > 0 (the authors' rule)."""
    rank = {L.BLANK: 0, L.NEGATIVE: 1, L.UNCERTAIN: 2, L.POSITIVE: 3}
    for i, code in enumerate(codes):
        if rank[int(code)] > rank[into[i]]:
            into[i] = int(code)


def _by_class(counter: Counter) -> dict[str, int]:
    """Counts keyed by CheXpert class, in CheXbert head order (JSON-friendly)."""
    return {name: int(counter[name]) for name in sorted(counter, key=L.class_index)}


def _find_grounded_reports(data_dir: str | os.PathLike) -> Path:
    candidates = sorted(Path(data_dir).glob("grounded_reports_*.json"))
    if len(candidates) != 1:
        found = ", ".join(p.name for p in candidates) or "none"
        raise FileNotFoundError(
            f"expected exactly one grounded_reports_*.json in data_dir {str(data_dir)!r}, found {found}; "
            "pass grounded_reports= to choose the file"
        )
    return candidates[0]


class PadChestGRConfig(GroundedConfig):
    """Options of :class:`PadChestGR`.

    Args:
        grounded_reports: the ``grounded_reports_*.json`` file, absolute or relative to the
            working directory. Default: the single such file in ``data_dir``.
        image_dir: folder of the PNG images named by ``ImageID`` (default ``data_dir``).
        min_images_per_class: classes with boxes in fewer images are removed from the boxes'
            classes (paper §3.1: 40). ``0`` keeps every class.
        negation_filter: drop findings whose sentence matches :data:`NEGATION_PATTERNS`.
        report_sentences: ``"all"`` (every finding sentence) or ``"abnormal"`` (the authors'
            choice), in source order, duplicates removed.
        verifier_name: stable name of the verifier passed to the builder (set automatically;
            part of the cache identity).
        mapping_file: a mapping JSON with the schema of ``resources/padchest_to_chexpert.json``
            (default: the packaged 69-label table).
        master_table: PadChest-GR ``master_table.csv`` for ``PatientID``/``StudyID``
            (default: ``data_dir/master_table.csv`` when it exists).
        require_classes: keep only images with at least one box that carries a retained CheXpert
            class (the paper's 1,390-image set); others are skipped as ``no_class_box``.
        rows, on_error, iou_threshold, iou_inclusive, drop_pairs_without_context, verify_images:
            see :class:`shovir.data._base.GroundedConfig`.
    """

    def __init__(
        self,
        grounded_reports: str | None = None,
        image_dir: str | None = None,
        min_images_per_class: int = 40,
        negation_filter: bool = True,
        report_sentences: Literal["all", "abnormal"] = "all",
        verifier_name: str | None = None,
        mapping_file: str | None = None,
        master_table: str | None = None,
        require_classes: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.grounded_reports = None if grounded_reports is None else str(grounded_reports)
        self.image_dir = None if image_dir is None else str(image_dir)
        self.min_images_per_class = min_images_per_class
        self.negation_filter = bool(negation_filter)
        self.report_sentences = report_sentences
        self.verifier_name = verifier_name
        self.mapping_file = None if mapping_file is None else str(mapping_file)
        self.master_table = None if master_table is None else str(master_table)
        self.require_classes = bool(require_classes)

    def check(self) -> None:
        """Validate the options (also called by the builder: ``datasets`` may set them by ``setattr``)."""
        super().check()
        minimum = self.min_images_per_class
        if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 0:
            raise ValueError(f"min_images_per_class must be a non-negative integer, got {self.min_images_per_class!r}")
        if self.report_sentences not in ("all", "abnormal"):
            raise ValueError(f"report_sentences must be 'all' or 'abnormal', got {self.report_sentences!r}")


class PadChestGR(GroundedBuilder):
    """PadChest-GR frontal CXRs with grounded findings mapped to CheXpert classes (ShoViR §3.1).

    Args:
        verifier: optional CheXbert-style labeller confirming each mapped class on its finding
            sentence: a callable ``list[str] -> (n, 14)`` codes, or an import string
            ``"package.module:attribute"`` (a class there is instantiated without arguments).
            It is held by the builder, not by the config: the cache identity uses
            ``verifier_name`` (by default ``module:qualname``), so give a distinct
            ``verifier_name=`` when the same code runs with other weights.
        **kwargs: ``datasets`` builder arguments and :class:`PadChestGRConfig` options.

    Usage::

        builder = PadChestGR(data_dir=".../PadChest-GR", image_dir=".../PadChest-GR/images",
                             rows="pairs", verifier=my_chexbert)
        builder.download_and_prepare()
        dataset = builder.as_dataset(split="test")
    """

    BUILDER_CONFIG_CLASS = PadChestGRConfig
    BUILDER_CONFIGS = [PadChestGRConfig(rows="images"), PadChestGRConfig(rows="pairs")]
    DEFAULT_CONFIG_NAME = "images"

    def __init__(self, *args: Any, verifier: Verifier | str | None = None, **kwargs: Any) -> None:
        if verifier is not None:
            name = kwargs.get("verifier_name") or verifier_name(verifier)
            if isinstance(verifier, str):
                verifier = _import_verifier(verifier)
            elif not callable(verifier):
                raise ValueError(
                    f"verifier must be callable (list[str] -> (n, 14) codes), got {type(verifier).__name__}"
                )
            kwargs["verifier_name"] = name
        self._verifier: Verifier | None = verifier
        for key in ("grounded_reports", "image_dir", "mapping_file", "master_table"):
            if kwargs.get(key) is not None:
                kwargs[key] = os.path.abspath(os.fspath(kwargs[key]))
        data_dir = kwargs.get("data_dir")
        reports = kwargs.get("grounded_reports")
        if reports is None and data_dir and os.path.isdir(data_dir):
            candidates = sorted(Path(data_dir).glob("grounded_reports_*.json"))
            reports = candidates[0] if len(candidates) == 1 else None
        master = kwargs.get("master_table")
        if master is None and data_dir:
            master = os.path.join(data_dir, "master_table.csv")
        kwargs["source_sha256"] = files_sha256([reports, kwargs.get("mapping_file"), master])
        super().__init__(*args, **kwargs)

    # -- helpers ------------------------------------------------------------------------------

    def _image_size(self, image: Any, item_id: str) -> tuple[int, int] | None:
        # The first pass already decoded the file (under the same policy); reuse its size.
        if not isinstance(image, Image.Image):
            cached = getattr(self, "_sizes", {}).get(str(image))
            if cached is not None:
                return cached
        return super()._image_size(image, item_id)

    def _read_master_table(self, data_dir: Path) -> dict[str, tuple[str, str]]:
        path = self.config.master_table
        if path is None:
            default = data_dir / "master_table.csv"
            if not default.is_file():
                self._report.notes["master_table"] = None
                return {}
            path = str(default)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"master_table {path!r} not found (PadChest-GR master_table.csv, unzipped)")
        table: dict[str, tuple[str, str]] = {}
        conflicts = 0
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = {"ImageID", "StudyID", "PatientID"} - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"master_table {path!r}: missing column(s) {', '.join(sorted(missing))}")
            for row in reader:
                ids = (str(row["PatientID"] or ""), str(row["StudyID"] or ""))
                previous = table.setdefault(str(row["ImageID"]), ids)
                if previous != ids:
                    conflicts += 1
        self._report.notes["master_table"] = path
        self._report.notes["master_table_conflicting_rows"] = conflicts
        return table

    def _load_reports(self) -> tuple[Path, list[Any]]:
        data_dir = self._require_data_dir()
        path = Path(self.config.grounded_reports) if self.config.grounded_reports else _find_grounded_reports(data_dir)
        if not path.is_file():
            raise FileNotFoundError(
                f"grounded_reports {str(path)!r} not found (absolute, or relative to the working directory)"
            )
        data = read_json(path, "grounded_reports")
        if not isinstance(data, list):
            raise ValueError(
                f"grounded_reports {str(path)!r}: expected a JSON list of studies "
                f"({{ImageID, findings: [...]}}), got a {type(data).__name__}"
            )
        return path, data

    def _run_verifier(self, sentences: list[str]) -> dict[str, list[int]]:
        codes: dict[str, list[int]] = {}
        name = self.config.verifier_name
        for start in range(0, len(sentences), _VERIFIER_BATCH):
            batch = sentences[start : start + _VERIFIER_BATCH]
            output = self._verifier(list(batch))
            array = L.validate_codes(np.asarray(output), field=f"verifier {name} output")
            if array.shape[0] != len(batch):
                raise ValueError(
                    f"verifier {name} returned {array.shape[0]} label vectors for {len(batch)} sentences; "
                    "it must return one row of 14 codes per sentence"
                )
            for sentence, row in zip(batch, array.tolist()):
                codes[sentence] = row
        return codes

    # -- the build ----------------------------------------------------------------------------

    def _image_records(self) -> Iterator[dict[str, Any]]:
        config = self.config
        config.check()
        if config.verifier_name and self._verifier is None:
            raise ValueError(
                f"verifier_name={config.verifier_name!r} is set but no verifier was given; "
                "pass verifier= (a callable or 'module:attribute') to build this configuration"
            )
        data_dir = self._require_data_dir()
        source, studies = self._load_reports()
        image_dir = Path(config.image_dir) if config.image_dir else data_dir
        if not image_dir.is_dir():
            guess = data_dir / str(config.image_dir)
            hint = f"; did you mean {str(guess)!r}?" if guess.is_dir() else ""
            raise FileNotFoundError(
                f"image_dir {str(image_dir)!r} is not a directory "
                f"(relative paths are taken from the working directory){hint}"
            )
        mapping, unmapped = load_padchest_mapping(config.mapping_file)
        ids_table = self._read_master_table(data_dir)
        self._report.notes.update(
            grounded_reports=str(source),
            image_dir=str(image_dir),
            mapping_file=config.mapping_file or f"shovir/data/resources/{MAPPING_RESOURCE}",
            studies=len(studies),
            verified=self._verifier is not None,
            verifier=config.verifier_name,
        )
        # Pass 1: parse, filter and validate every image, so that the class counts are exact.
        candidates = self._collect(studies, image_dir, mapping, unmapped, ids_table)
        # Verification: one batched call over the unique sentences that need codes.
        codes = self._run_verifier(self._sentences_to_verify(candidates)) if self._verifier is not None else {}
        self._verify_classes(candidates, codes)
        dropped = self._count_classes(candidates)
        # Pass 2: emit the records (GroundedBuilder validates them again and builds the rows).
        for candidate in candidates:
            retained = candidate["classes"] - dropped
            if config.require_classes and not retained:
                self._skip_item("no_class_box", candidate["image_id"])
                continue
            boxes = []
            for finding, pixel_boxes in zip(candidate["findings"], candidate["boxes"]):
                classes = [name for name in finding["verified"] if name not in dropped]
                boxes.extend({**box, "classes": classes, "anatomy": finding["anatomy"]} for box in pixel_boxes)
            yield {
                "image": candidate["image"],
                "image_id": candidate["image_id"],
                "patient_id": candidate["patient_id"],
                "study_id": candidate["study_id"],
                "report": " ".join(candidate["sentences"]),
                "labels": self._image_labels(candidate, codes),
                "boxes": boxes,
            }

    def _collect(
        self,
        studies: list[Any],
        image_dir: Path,
        mapping: dict[str, str],
        unmapped: frozenset[str],
        ids_table: dict[str, tuple[str, str]],
    ) -> list[dict[str, Any]]:
        """Pass 1: the usable images with their kept findings and pixel boxes (rejections counted)."""
        # Stable keys: every count is present, zero included.
        counts = {
            "findings": Counter(dict.fromkeys(_FINDING_COUNTS, 0)),
            "boxes": Counter(dict.fromkeys(_BOX_COUNTS, 0)),
            "labels_unmapped": Counter(),
            "labels_not_in_mapping_file": Counter(),
        }
        candidates: list[dict[str, Any]] = []
        seen: set[str] = set()
        self._sizes: dict[str, tuple[int, int]] = {}
        for index, study in enumerate(studies):
            if not isinstance(study, dict) or not isinstance(study.get("ImageID"), str) or not study["ImageID"]:
                self._reject_item(
                    "malformed_entry", f"#{index}",
                    f"grounded_reports[{index}]: expected an object with a non-empty string ImageID",
                )
                continue
            image_id = study["ImageID"]
            where = f"grounded_reports[{index}] (ImageID {image_id!r})"
            if image_id in seen:
                self._reject_item("duplicate_image_id", image_id, f"image_id {image_id!r} appears twice")
                continue
            seen.add(image_id)
            parsed = self._parse_study(study, where, image_id, mapping, unmapped, counts)
            if parsed is None:
                continue
            sentences, findings = parsed
            if not findings:
                self._skip_item("no_boxes", image_id)
                continue
            path = self._resolve(image_id, image_id, field_name=f"{where}: ImageID", root=image_dir)
            size = None if path is None else super()._image_size(path, image_id)
            if size is None:
                self._report.read += 1
                continue
            self._sizes[str(path)] = size
            boxes = self._pixel_boxes(findings, size, image_id)
            if boxes is None:
                continue
            patient_id, study_id = ids_table.get(image_id, ("", ""))
            if study.get("PatientID") not in (None, ""):
                patient_id = str(study["PatientID"])
            if study.get("StudyID") not in (None, ""):
                study_id = str(study["StudyID"])
            candidates.append(
                {
                    "image": path,
                    "image_id": image_id,
                    "patient_id": patient_id,
                    "study_id": study_id,
                    "sentences": sentences,
                    "findings": findings,
                    "boxes": boxes,
                }
            )
        for key, counter in counts.items():
            self._report.notes[key] = dict(sorted(counter.items()))
        return candidates

    @staticmethod
    def _sentences_to_verify(candidates: list[dict[str, Any]]) -> list[str]:
        """Unique sentences in first-seen order: finding sentences with mapped classes, report sentences."""
        wanted: dict[str, None] = {}
        for candidate in candidates:
            for finding in candidate["findings"]:
                if finding["mapped"] and finding["sentence"]:
                    wanted.setdefault(finding["sentence"], None)
            for sentence in candidate["sentences"]:
                wanted.setdefault(sentence, None)
        return list(wanted)

    def _verify_classes(self, candidates: list[dict[str, Any]], codes: dict[str, list[int]]) -> None:
        """Set each finding's ``verified`` classes (mapped and confirmed) and each image's ``classes``."""
        verification = {name: Counter() for name in ("confirmed", "rejected", "rejected_boxes", "unverifiable")}
        for candidate in candidates:
            for finding in candidate["findings"]:
                kept = []
                for name in finding["mapped"]:
                    if self._verifier is None:
                        kept.append(name)
                    elif not finding["sentence"]:
                        verification["unverifiable"][name] += 1
                    elif codes[finding["sentence"]][L.class_index(name)] == L.POSITIVE:
                        kept.append(name)
                        verification["confirmed"][name] += 1
                    else:
                        verification["rejected"][name] += 1
                        verification["rejected_boxes"][name] += len(finding["boxes"])
                finding["verified"] = kept
            candidate["classes"] = {name for finding in candidate["findings"] for name in finding["verified"]}
        self._report.notes["verification"] = {key: _by_class(value) for key, value in verification.items()}

    def _count_classes(self, candidates: list[dict[str, Any]]) -> set[str]:
        """Per-class image counts before/after ``min_images_per_class``; return the dropped classes."""
        minimum = self.config.min_images_per_class
        before = Counter(name for candidate in candidates for name in candidate["classes"])
        dropped = {name for name, n in before.items() if n < minimum}
        after: Counter = Counter()
        boxes_after: Counter = Counter()
        with_class_box = 0
        for candidate in candidates:
            retained = candidate["classes"] - dropped
            if self.config.require_classes and not retained:
                continue
            after.update(retained)
            with_class_box += bool(retained)
            for finding in candidate["findings"]:
                boxes_after.update({name: len(finding["boxes"]) for name in finding["verified"] if name not in dropped})
        notes = self._report.notes
        notes["min_images_per_class"] = minimum
        notes["class_images"] = {"before": _by_class(before), "after": _by_class(after)}
        notes["class_boxes_after"] = _by_class(boxes_after)
        notes["dropped_classes"] = sorted(dropped, key=L.class_index)
        notes["images_with_class_box"] = with_class_box
        return dropped

    def _image_labels(self, candidate: dict[str, Any], codes: dict[str, list[int]]) -> list[int]:
        """14 codes: verifier codes on the report sentences (1 > 3 > 2 > 0), 1 for verified box classes."""
        labels = [L.BLANK] * L.NUM_CLASSES
        if self._verifier is not None:
            for sentence in candidate["sentences"]:
                _merge_codes(labels, codes[sentence])
        for name in candidate["classes"]:
            labels[L.class_index(name)] = L.POSITIVE
        positive = any(labels[i] in (L.POSITIVE, L.UNCERTAIN) for i in range(L.NUM_CLASSES) if i != _NO_FINDING)
        labels[_NO_FINDING] = L.BLANK if positive else L.POSITIVE
        return labels

    def _parse_study(
        self,
        study: dict[str, Any],
        where: str,
        image_id: str,
        mapping: dict[str, str],
        unmapped: frozenset[str],
        counts: dict[str, Counter],
    ) -> tuple[list[str], list[dict[str, Any]]] | None:
        """Report sentences and the kept findings of one study, or ``None`` if it was rejected."""
        raw_findings = study.get("findings", [])
        if not isinstance(raw_findings, list):
            self._reject_item(
                "malformed_entry", image_id, f"{where}: findings must be a list, got {type(raw_findings).__name__}"
            )
            return None
        sentences: dict[str, None] = {}
        findings: list[dict[str, Any]] = []
        finding_counts: Counter = Counter()
        box_counts: Counter = Counter()
        label_counts: Counter = Counter()
        unknown_counts: Counter = Counter()
        for number, finding in enumerate(raw_findings):
            here = f"{where}: findings[{number}]"
            if not isinstance(finding, dict):
                self._reject_item("malformed_entry", image_id, f"{here} must be an object, got {type(finding).__name__}")
                return None
            sentence = finding.get("sentence_en") or ""
            if not isinstance(sentence, str):
                self._reject_item(
                    "malformed_entry", image_id, f"{here}.sentence_en must be a string, got {sentence!r}"
                )
                return None
            sentence = " ".join(sentence.split())
            abnormal = finding.get("abnormal", False)
            if not isinstance(abnormal, bool):
                self._reject_item(
                    "malformed_entry", image_id, f"{here}.abnormal must be true or false, got {abnormal!r}"
                )
                return None
            if sentence and (abnormal or self.config.report_sentences == "all"):
                sentences.setdefault(sentence, None)
            raw_boxes = finding.get("boxes") or []
            extra = finding.get("extra_boxes") or []
            if not isinstance(raw_boxes, list):
                self._reject_item(
                    "malformed_box", image_id, f"{here}.boxes must be a list of [x1, y1, x2, y2], got {raw_boxes!r}"
                )
                return None
            box_counts["extra_boxes_ignored"] += len(extra) if isinstance(extra, list) else 0
            if not abnormal:
                finding_counts["normal"] += 1
                box_counts["normal_finding_boxes_ignored"] += len(raw_boxes)
                continue
            if not raw_boxes:
                finding_counts["abnormal_without_boxes"] += 1
                continue
            negated = self.config.negation_filter and is_negated(sentence)
            labels = finding.get("labels") or []
            if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
                self._reject_item(
                    "malformed_entry", image_id, f"{here}.labels must be a list of PadChest label strings, got {labels!r}"
                )
                return None
            mapped = set()
            for label in labels:
                key = normalise_label(label)
                if key in mapping:
                    mapped.add(mapping[key])
                elif key in unmapped:
                    label_counts[key] += 1
                else:
                    unknown_counts[key] += 1
            boxes = []
            for box_index, box in enumerate(raw_boxes):
                if not isinstance(box, list) or len(box) != 4 or not all(_is_number(v) for v in box):
                    self._reject_item(
                        "malformed_box",
                        image_id,
                        f"{here}.boxes[{box_index}] must be [x1, y1, x2, y2] normalised to [0, 1], got {box!r}",
                    )
                    return None
                boxes.append([float(v) for v in box])
            locations = finding.get("locations") or []
            anatomy = str(locations[0]) if isinstance(locations, list) and locations and locations[0] else "unspecified"
            if negated:
                # The sentence denies its CheXpert finding, but its boxes still mark an abnormal
                # region ("pleural thickening without effusion"): keep them class-less so RO
                # avoids them, give them no class so neither OCO nor DOCO uses them.
                mapped = set()
                box_counts["negated_classless"] += len(boxes)
            finding_counts["negated_classless" if negated else "abnormal_with_boxes"] += 1
            box_counts["read"] += len(boxes)
            findings.append(
                {
                    "sentence": sentence,
                    "mapped": sorted(mapped, key=L.class_index),
                    "boxes": boxes,
                    "anatomy": anatomy,
                    "where": here,
                }
            )
        # Count only studies that were not rejected, so notes describe what was read in full.
        counts["findings"].update(finding_counts)
        counts["boxes"].update(box_counts)
        counts["labels_unmapped"].update(label_counts)
        counts["labels_not_in_mapping_file"].update(unknown_counts)
        return list(sentences), findings

    def _pixel_boxes(
        self, findings: list[dict[str, Any]], size: tuple[int, int], image_id: str
    ) -> list[list[dict[str, float]]] | None:
        """Normalised boxes → pixel boxes, per finding; ``None`` (after rejecting) if one is unusable."""
        height, width = size
        result = []
        for finding in findings:
            pixel_boxes = []
            for box_index, box in enumerate(finding["boxes"]):
                # Float noise just outside [0, 1] is clamped; anything further out is an error below.
                u1, v1, u2, v2 = (
                    min(max(c, 0.0), 1.0) if -_BOX_TOLERANCE <= c <= 1 + _BOX_TOLERANCE else c for c in box
                )
                pixel = {"x_min": u1 * width, "y_min": v1 * height, "x_max": u2 * width, "y_max": v2 * height}
                problem = validate_box(pixel, height, width)
                if problem is not None:
                    self._reject_item(
                        problem,
                        image_id,
                        f"{finding['where']}.boxes[{box_index}] {box} (normalised) = "
                        f"{[round(pixel[k], 3) for k in ('x_min', 'y_min', 'x_max', 'y_max')]} "
                        f"on a {width}x{height} image: {problem}",
                    )
                    return None
                pixel_boxes.append(pixel)
            result.append(pixel_boxes)
        return result
