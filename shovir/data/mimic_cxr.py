"""MIMIC-CXR-JPG with Chest ImaGenome region boxes, read from the ShoViR metadata JSON.

Source format (reference §2.1): the ShoViR authors' ``mimic_test_annotation.json`` /
``imagenome_annotations.json`` is a JSON object keyed by DICOM id. Each value holds

* ``img_path`` — ``pXX/pNNNNNNNN/sNNNNNNNN/<dicom_id>.jpg``, relative to the MIMIC-CXR-JPG
  ``files/`` root (this builder's ``data_dir``);
* ``report`` — the raw report text, used as the reference report as it is;
* ``labels`` — 14 CheXbert codes (0 blank, 1 positive, 2 negative, 3 uncertain) in
  :data:`shovir.labels.CLASSES` order;
* ``regions`` — ``{anatomy, bbox, findings}``: one Chest ImaGenome *anatomical region* box
  ``[x1, y1, x2, y2]`` in integer pixels of the original JPEG, and the CheXpert classes mapped to
  it (ShoViR paper §3.1; mapping in the paper's Table S1).

The paper's selection steps (no ImaGenome annotation, No-Finding-only images, strict
true-positive filtering; 2,160 images) are already reflected in that file: this builder reads
it, it does not re-derive it (the ImaGenome → CheXpert script is not public, reference §3.2).

Each region with findings becomes one box ``{x_min, y_min, x_max, y_max, classes, anatomy}``;
:class:`shovir.data._base.GroundedBuilder` validates the image, the boxes and the class names and
builds the per-image or per-(image, class) rows (B_c / B_c̄ of ShoViR §3.2).

Where this builder deliberately differs from the authors' code (reference §9):

* **Nothing is dropped silently** (defect 11). A region with an empty ``findings`` list is not a
  finding box; it is dropped and counted in ``build_report.notes["regions_without_findings"]``.
  A malformed entry, a bad path, a missing/unreadable image, a box outside the image or a
  degenerate box stops the build (``on_error="raise"``) or is skipped and counted by reason.
* **Boxes are not clipped silently.** The authors' ``_clip_bbox`` (reference §4.4) guessed
  normalised coordinates when all four values lay in [0, 1], truncated with ``int()``, clamped
  to the image and silently dropped degenerate boxes at perturbation time. Here coordinates are
  pixels unless ``box_units="normalized"`` says otherwise (then they are scaled by the image size
  read from its header); a pixel box whose four coordinates all lie in [0, 1] is refused as
  ``normalized_box`` (it would occlude one pixel), a box outside the image or degenerate is an
  error, and ``clip_boxes=True`` clamps to the image with every clipped box counted in
  ``notes["clipped_boxes"]``.
* **A duplicated DICOM key is an error** naming the key: :mod:`json` alone keeps the last entry
  and loses the first.
* **The DOCO context filter is computed here, once, for every target class** (defects 9, 17,
  18): the authors' per-class files were built by a script that is not in their repository and
  filtered with a hand-edited one (``filter_bbox_doco.py``). See
  :func:`shovir.boxes.context_boxes` for the IoU convention (paper ``<``, code ``≤``).
* **Paths are untrusted**: every ``img_path`` is resolved inside ``data_dir`` and must name its
  own DICOM id (the JSON key); the authors joined paths without any check.
* **The cache follows the sources**: the absolute ``metadata_file`` path and its SHA-256 are
  part of the configuration id, so an edited metadata file is never served from a stale cache.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterator

from shovir.data._base import GroundedBuilder, GroundedConfig, files_sha256, load_image, read_json

__all__ = ["MimicCXRConfig", "MimicCXR", "parse_mimic_path", "read_shovir_metadata"]

_MIMIC_PATH = re.compile(
    r"(?:^|/)p(?P<prefix>\d{2})/p(?P<patient>\d{8})/s(?P<study>\d{8})/(?P<dicom>[^/]+)\.(?:jpg|jpeg|png)$",
    re.IGNORECASE,
)
_EXPECTED_PATH = "pXX/pNNNNNNNN/sNNNNNNNN/<dicom_id>.jpg (XX = the first two digits of the patient id)"
_ENTRY_FIELDS = ("img_path", "report", "labels", "regions")


def parse_mimic_path(img_path: str) -> tuple[str, str]:
    """Return ``(patient_id, study_id)`` as digit strings from a MIMIC-CXR-JPG image path.

    The path has the form ``pXX/pNNNNNNNN/sNNNNNNNN/<dicom_id>.jpg`` (leading folders such as
    ``files/`` are allowed). ``XX`` must be the first two digits of the patient id.

    >>> parse_mimic_path("p10/p10000032/s50414267/02aa804e-bde0afdd-112c0b34-7bc16630-4e384014.jpg")
    ('10000032', '50414267')
    >>> parse_mimic_path("files/p19/p19999987/s58971208/x.jpg")
    ('19999987', '58971208')
    >>> parse_mimic_path("p11/p10000032/s50414267/a.jpg")
    Traceback (most recent call last):
    ...
    ValueError: img_path 'p11/p10000032/s50414267/a.jpg': folder 'p11' does not match patient p10000032; expected pXX/pNNNNNNNN/sNNNNNNNN/<dicom_id>.jpg (XX = the first two digits of the patient id)
    """
    if not isinstance(img_path, str):
        raise ValueError(
            f"img_path must be a string, got {type(img_path).__name__}: {img_path!r}; expected {_EXPECTED_PATH}"
        )
    match = _MIMIC_PATH.search(img_path.replace("\\", "/"))
    if match is None:
        raise ValueError(f"img_path {img_path!r} is not a MIMIC-CXR-JPG image path; expected {_EXPECTED_PATH}")
    patient, study = match["patient"], match["study"]
    if match["prefix"] != patient[:2]:
        raise ValueError(
            f"img_path {img_path!r}: folder 'p{match['prefix']}' does not match patient p{patient}; "
            f"expected {_EXPECTED_PATH}"
        )
    return patient, study


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _entry_problem(key: str, entry: Any) -> str | None:
    """Why one metadata entry is structurally unusable (``None`` when its top level is fine)."""
    if not isinstance(entry, dict):
        return f"entry {key!r}: expected an object with {', '.join(_ENTRY_FIELDS)}, got {type(entry).__name__}"
    missing = [name for name in _ENTRY_FIELDS if name not in entry]
    if missing:
        return f"entry {key!r}: missing field(s) {', '.join(missing)} (expected {', '.join(_ENTRY_FIELDS)})"
    if not isinstance(entry["img_path"], str) or not entry["img_path"]:
        return f"entry {key!r}: field img_path must be a non-empty string, got {entry['img_path']!r}"
    if not isinstance(entry["report"], str):
        return f"entry {key!r}: field report must be a string, got {type(entry['report']).__name__}"
    labels = entry["labels"]
    if (
        not isinstance(labels, list)
        or len(labels) != 14
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in labels)
    ):
        return f"entry {key!r}: field labels must be a list of 14 integer CheXbert codes, got {labels!r}"
    if not isinstance(entry["regions"], list):
        return (
            f"entry {key!r}: field regions must be a list of {{anatomy, bbox, findings}}, "
            f"got {type(entry['regions']).__name__}"
        )
    return None


def _region_problem(key: str, index: int, region: Any) -> tuple[str, str] | None:
    """``(reason, message)`` when ``regions[index]`` is unusable, else ``None``."""
    where = f"entry {key!r}: regions[{index}]"
    if not isinstance(region, dict):
        return "malformed_entry", f"{where} must be an object with anatomy, bbox, findings, got {type(region).__name__}"
    bbox = region.get("bbox")
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(_is_number(v) for v in bbox):
        return "malformed_box", f"{where}.bbox must be [x1, y1, x2, y2] (four finite pixel coordinates), got {bbox!r}"
    findings = region.get("findings", [])
    if not isinstance(findings, list) or not all(isinstance(name, str) for name in findings):
        return "malformed_entry", f"{where}.findings must be a list of CheXpert class names, got {findings!r}"
    anatomy = region.get("anatomy", "")
    if anatomy is not None and not isinstance(anatomy, str):
        return "malformed_entry", f"{where}.anatomy must be a string, got {anatomy!r}"
    return None


def _load_json_object(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"metadata_file {str(path)!r} not found; pass the ShoViR metadata JSON "
            "(e.g. mimic_test_annotation.json) as metadata_file=, absolute or relative to the working directory"
        )
    data = read_json(path, "metadata_file")
    if not isinstance(data, dict):
        raise ValueError(
            f"metadata_file {str(path)!r}: expected a JSON object keyed by DICOM id, got a {type(data).__name__}"
        )
    return data


def read_shovir_metadata(path: str | os.PathLike) -> dict[str, dict]:
    """Load the ShoViR MIMIC-CXR metadata JSON and check its structure strictly.

    The file is a JSON object keyed by DICOM id; each value has ``img_path`` (string),
    ``report`` (string), ``labels`` (14 integers) and ``regions`` (a list of
    ``{anatomy, bbox: [x1, y1, x2, y2], findings: [CheXpert names]}``). Only :mod:`json` is used.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` naming the key and the
    field for the first structural problem. (The builder applies the same checks entry by entry
    under its ``on_error`` policy instead.)

    >>> import json, os, tempfile
    >>> entry = {"img_path": "p10/p10000032/s50414267/d1.jpg", "report": "Normal.", "labels": [0] * 13 + [1],
    ...          "regions": [{"anatomy": "right lung", "bbox": [1, 2, 30, 40], "findings": ["Lung Opacity"]}]}
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     json.dump({"d1": entry}, f)
    >>> list(read_shovir_metadata(f.name))
    ['d1']
    >>> os.remove(f.name)
    """
    data = _load_json_object(path)
    for key, entry in data.items():
        problem = _entry_problem(key, entry)
        if problem is not None:
            raise ValueError(f"{path}: {problem}")
        for index, region in enumerate(entry["regions"]):
            region_problem = _region_problem(key, index, region)
            if region_problem is not None:
                raise ValueError(f"{path}: {region_problem[1]}")
    return data


class MimicCXRConfig(GroundedConfig):
    """Options of :class:`MimicCXR`.

    Args:
        metadata_file: the ShoViR metadata JSON (e.g. ``mimic_test_annotation.json``), absolute
            or relative to the working directory. ``data_dir`` is the MIMIC-CXR-JPG ``files/`` root.
        clip_boxes: clip region boxes that reach outside the image to its borders (counted in
            ``notes["clipped_boxes"]``) instead of treating them as errors.
        box_units: ``"pixels"`` (the ShoViR metadata) or ``"normalized"`` (fractions of the
            image width and height, scaled to pixels here).
        rows, on_error, iou_threshold, iou_inclusive, drop_pairs_without_context, verify_images:
            see :class:`shovir.data._base.GroundedConfig`.
    """

    def __init__(
        self,
        metadata_file: str | None = None,
        clip_boxes: bool = False,
        box_units: str = "pixels",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.metadata_file = None if metadata_file is None else str(metadata_file)
        self.clip_boxes = bool(clip_boxes)
        self.box_units = box_units

    def check(self) -> None:
        super().check()
        if self.box_units not in ("pixels", "normalized"):
            raise ValueError(f"box_units must be 'pixels' or 'normalized', got {self.box_units!r}")


class MimicCXR(GroundedBuilder):
    """MIMIC-CXR-JPG test images with Chest ImaGenome region boxes and CheXpert labels (ShoViR §3.1).

    Usage::

        builder = MimicCXR(data_dir=".../mimic-cxr-jpg/2.1.0/files",
                           metadata_file="mimic_test_annotation.json", rows="pairs")
        builder.download_and_prepare()
        dataset = builder.as_dataset(split="test")
        print(builder.build_report.summary())
    """

    BUILDER_CONFIG_CLASS = MimicCXRConfig
    BUILDER_CONFIGS = [MimicCXRConfig(rows="images"), MimicCXRConfig(rows="pairs")]
    DEFAULT_CONFIG_NAME = "images"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Absolute path + content hash in the config id: a relative path run from another
        # folder, or an edited metadata file, must not hit a stale cache.
        metadata_file = kwargs.get("metadata_file")
        if metadata_file is not None:
            kwargs["metadata_file"] = os.path.abspath(os.fspath(metadata_file))
            kwargs["source_sha256"] = files_sha256([kwargs["metadata_file"]])
        super().__init__(*args, **kwargs)

    def _image_records(self) -> Iterator[dict[str, Any]]:
        self._require_data_dir()
        if not self.config.metadata_file:
            raise ValueError(
                "MimicCXR needs metadata_file= pointing at the ShoViR metadata JSON "
                "(e.g. mimic_test_annotation.json); data_dir is the MIMIC-CXR-JPG files/ root"
            )
        metadata = _load_json_object(self.config.metadata_file)
        notes = self._report.notes
        notes["metadata_file"] = self.config.metadata_file
        notes["entries"] = len(metadata)
        regions_without_findings = 0
        clipped = 0
        for key, entry in metadata.items():
            problem = _entry_problem(key, entry)
            if problem is not None:
                self._reject_item("malformed_entry", key, problem)
                continue
            img_path = entry["img_path"]
            path = self._resolve(img_path, key, field_name=f"entry {key!r}: img_path")
            if path is None:
                self._report.read += 1
                continue
            try:
                patient_id, study_id = parse_mimic_path(img_path)
            except ValueError as error:
                self._reject_item("bad_path", key, f"entry {key!r}: {error}")
                continue
            stem = Path(img_path.replace("\\", "/")).stem
            if stem != key:
                self._reject_item(
                    "bad_path",
                    key,
                    f"entry {key!r}: img_path {img_path!r} names DICOM {stem!r}, not the entry's key; "
                    "the metadata is keyed by the DICOM id of its image",
                )
                continue
            size = None
            normalized = self.config.box_units == "normalized"
            if self.config.clip_boxes or normalized:
                size = self._header_size(path, key)
                if size is None:
                    self._report.read += 1
                    continue
            boxes: list[dict[str, Any]] = []
            bad = False
            empty_here = 0
            clipped_here = 0
            for index, region in enumerate(entry["regions"]):
                region_problem = _region_problem(key, index, region)
                if region_problem is not None:
                    self._reject_item(region_problem[0], key, region_problem[1])
                    bad = True
                    break
                if not region.get("findings"):
                    empty_here += 1
                    continue
                x1, y1, x2, y2 = (float(v) for v in region["bbox"])
                if normalized:
                    height, width = size
                    x1, x2, y1, y2 = x1 * width, x2 * width, y1 * height, y2 * height
                elif max(x1, y1, x2, y2) <= 1.0:
                    self._reject_item("normalized_box", key,
                                      f"entry {key!r}: regions[{index}].bbox {region['bbox']!r} looks normalised (every "
                                      "coordinate in [0, 1]) but box_units is 'pixels'; pass box_units='normalized' if "
                                      "the file holds fractions of the image size")
                    bad = True
                    break
                if self.config.clip_boxes:
                    height, width = size
                    clipped_box = (max(0.0, x1), max(0.0, y1), min(float(width), x2), min(float(height), y2))
                    if clipped_box != (x1, y1, x2, y2):
                        clipped_here += 1
                        x1, y1, x2, y2 = clipped_box
                boxes.append(
                    {
                        "x_min": x1,
                        "y_min": y1,
                        "x_max": x2,
                        "y_max": y2,
                        # Canonicalised (and unknown names rejected) by GroundedBuilder._check_record.
                        "classes": list(region["findings"]),
                        "anatomy": region.get("anatomy") or "",
                    }
                )
            if bad:
                continue
            regions_without_findings += empty_here
            clipped += clipped_here
            yield {
                "image": path,
                "image_id": key,
                "patient_id": patient_id,
                "study_id": study_id,
                "report": entry["report"],
                "labels": entry["labels"],
                "boxes": boxes,
            }
        notes["regions_without_findings"] = regions_without_findings
        if self.config.clip_boxes:
            notes["clipped_boxes"] = clipped

    def _header_size(self, path: Path, item_id: str) -> tuple[int, int] | None:
        """``(height, width)`` from the image header, under the ``on_error`` policy."""
        try:
            return load_image(path, verify=False)
        except FileNotFoundError as error:
            self._reject("missing_image", item_id, str(error), FileNotFoundError)
        except ValueError as error:
            self._reject("unreadable_image", item_id, str(error))
        return None
