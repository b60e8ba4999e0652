"""Shared machinery of the dataset builders: row schemas, input validation, build reports.

Every grounded builder (synthetic, MIMIC-CXR, PadChest-GR) yields *image records* from its own
sources; :class:`GroundedBuilder` validates them, applies the ``on_error`` policy, expands them
into one of the two row kinds, and writes a build report that counts every skipped item:

* ``rows="images"`` — one row per image (:data:`IMAGE_FEATURES`);
* ``rows="pairs"`` — one row per (image, target class) with the disease boxes B_c and the
  co-disease (context) boxes B_c̄ of ShoViR §3.2 (:data:`PAIR_FEATURES`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Mapping

import datasets
from PIL import Image, UnidentifiedImageError

from shovir import labels as L
from shovir.boxes import CONTEXT_IOU_THRESHOLD, context_boxes, validate_box

__all__ = [
    "BOX_FEATURE",
    "IMAGE_FEATURES",
    "PAIR_FEATURES",
    "OnError",
    "BuildError",
    "BuildReport",
    "ValidatingConfig",
    "ValidatingBuilder",
    "GroundedConfig",
    "GroundedBuilder",
    "resolve_inside",
    "load_image",
    "files_sha256",
    "read_json",
]

OnError = Literal["raise", "skip"]

BOX_FEATURE = {
    "x_min": datasets.Value("float32"),
    "y_min": datasets.Value("float32"),
    "x_max": datasets.Value("float32"),
    "y_max": datasets.Value("float32"),
    "classes": datasets.List(datasets.Value("string")),
    "anatomy": datasets.Value("string"),
}
"""One box: pixel xyxy (``x_max``/``y_max`` exclusive), CheXpert classes, anatomical region."""

IMAGE_FEATURES = datasets.Features(
    {
        "image": datasets.Image(),
        "image_id": datasets.Value("string"),
        "width": datasets.Value("int32"),
        "height": datasets.Value("int32"),
        "patient_id": datasets.Value("string"),
        "study_id": datasets.Value("string"),
        "report": datasets.Value("string"),
        "labels": datasets.List(datasets.Value("int8"), length=L.NUM_CLASSES),
        "boxes": datasets.List(BOX_FEATURE),
    }
)
"""Per-image rows. ``width``/``height`` are the image's pixel size (the frame of the boxes and
of the box-size distribution RO samples from); ``labels`` holds the 14 CheXbert codes in :data:`shovir.labels.CLASSES` order."""

PAIR_FEATURES = datasets.Features(
    {
        "sample_id": datasets.Value("string"),
        **IMAGE_FEATURES,
        "target_class": datasets.Value("string"),
        "disease_boxes": datasets.List(BOX_FEATURE),
        "context_boxes": datasets.List(BOX_FEATURE),
    }
)
"""Per-(image, class) rows: ``sample_id`` is ``"<image_id>::<target_class>"``."""


class BuildError(ValueError):
    """An input item is unusable and the builder runs with ``on_error="raise"``."""


@dataclass
class BuildReport:
    """Counts of what a build read, kept and skipped (by reason), with a few example ids each.

    >>> report = BuildReport()
    >>> report.skip("missing_image", "img-1"); report.keep(); report.as_dict()["skipped"]
    {'missing_image': 1}
    """

    read: int = 0
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def keep(self, count: int = 1) -> None:
        self.kept += count

    def skip(self, reason: str, item_id: str) -> None:
        self.skipped[reason] += 1
        examples = self.examples.setdefault(reason, [])
        if len(examples) < 5:
            examples.append(str(item_id))

    def as_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "kept": self.kept,
            "skipped": dict(sorted(self.skipped.items())),
            "examples": {k: v for k, v in sorted(self.examples.items())},
            "notes": self.notes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BuildReport":
        return cls(
            read=int(data.get("read", 0)),
            kept=int(data.get("kept", 0)),
            skipped=Counter(data.get("skipped", {})),
            examples={k: list(v) for k, v in data.get("examples", {}).items()},
            notes=dict(data.get("notes", {})),
        )

    def summary(self) -> str:
        """One line for logs: ``kept 180 of 200; skipped: missing_image=20``."""
        skipped = ", ".join(f"{k}={v}" for k, v in sorted(self.skipped.items())) or "none"
        return f"kept {self.kept} of {self.read}; skipped: {skipped}"


def resolve_inside(root: str | os.PathLike, relative: str | os.PathLike, field_name: str = "path") -> Path:
    """Resolve ``relative`` under ``root`` and refuse anything that escapes it.

    Manifest paths are untrusted: ``..`` components, absolute paths and symlinks that lead out
    of the data root raise ``ValueError``.

    >>> str(resolve_inside("/data", "p10/a.jpg"))
    '/data/p10/a.jpg'
    >>> resolve_inside("/data", "../etc/passwd")
    Traceback (most recent call last):
    ...
    ValueError: path: '../etc/passwd' resolves outside the data root '/data'; manifest paths must stay inside it
    """
    root_path = Path(os.path.realpath(root))
    candidate = Path(os.path.realpath(root_path / relative))
    if candidate != root_path and root_path not in candidate.parents:
        raise ValueError(
            f"{field_name}: {str(relative)!r} resolves outside the data root {str(root_path)!r}; "
            "manifest paths must stay inside it"
        )
    return candidate


def files_sha256(paths: Iterable[str | os.PathLike | None]) -> str | None:
    """SHA-256 over the names and contents of ``paths`` in order (a missing file counts as a
    marker); ``None`` when none exists.

    Builders put it in their config so that an edited source file gets a fresh cache instead of
    the Arrow files of its previous version.

    >>> files_sha256([None, "/no/such/file"]) is None
    True
    """
    digest = hashlib.sha256()
    found = False
    for path in paths:
        if path is None or not os.path.isfile(path):
            digest.update(b"\0missing\0")
            continue
        found = True
        digest.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest() if found else None


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def read_json(path: str | os.PathLike, field: str) -> Any:
    """Parse the JSON file ``path`` (the builder option ``field``), refusing duplicate keys.

    Python's :mod:`json` keeps the last of two equal keys and drops the first without a word; a
    metadata file keyed by DICOM id would silently lose an image. Here a duplicate is an error that
    names it.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     _ = f.write('{"d1": {"report": "a"}, "d1": {"report": "b"}}')
    >>> read_json(f.name, "metadata_file")
    Traceback (most recent call last):
    ...
    ValueError: metadata_file ...: key 'd1' appears twice in one object; every key must be unique (merge or rename the entries)
    >>> os.remove(f.name)
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{field} {str(path)!r} not found (absolute, or relative to the working directory)")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle, object_pairs_hook=_refuse_duplicate_keys)
    except _DuplicateKey as duplicate:
        raise ValueError(f"{field} {str(path)!r}: key {duplicate.key!r} appears twice in one object; every key must be "
                         "unique (merge or rename the entries)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{field} {str(path)!r} is not valid JSON: line {error.lineno}, column {error.colno} "
                         f"({error.msg})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{field} {str(path)!r} is not UTF-8 text: {error}") from None


def load_image(path: Path, verify: bool = True) -> tuple[int, int]:
    """Open an image file and return ``(height, width)``.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for one PIL cannot read.
    With ``verify=True`` the whole file is decoded, so truncated files are caught at build time
    rather than halfway through a sweep.
    """
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    try:
        with Image.open(path) as image:
            if verify:
                image.load()
            width, height = image.size
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise ValueError(f"image file is unreadable: {path} ({error})") from error
    return height, width


class ValidatingConfig(datasets.BuilderConfig):
    """Options every shovir builder has.

    Args:
        on_error: ``"raise"`` stops at the first unusable item with an error naming it;
            ``"skip"`` drops it and counts it in the build report by reason.
        verify_images: decode every image file once at build time.
        source_sha256: set by the builder to :func:`files_sha256` of its source files, so that
            an edited source gets a fresh cache; not meant to be passed by hand.
    """

    def __init__(
        self, on_error: OnError = "raise", verify_images: bool = True, source_sha256: str | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("version", datasets.Version("1.0.0"))
        super().__init__(**kwargs)
        self.on_error = on_error
        self.verify_images = bool(verify_images)
        self.source_sha256 = source_sha256

    def check(self) -> None:
        """Validate the options. The builder calls it: ``datasets`` sets options on a copy of a
        registered config with ``setattr``, bypassing ``__init__``."""
        if self.on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {self.on_error!r}")


class ValidatingBuilder(datasets.GeneratorBasedBuilder):
    """Base of every shovir builder: the ``on_error`` policy and a build report.

    Subclasses implement :meth:`_rows`, yielding ``(key, row)``; they call :meth:`_reject` for
    an unusable item and :meth:`_resolve` for every path read from a manifest. After
    :meth:`download_and_prepare`, :attr:`build_report` tells what was kept and skipped.
    """

    BUILDER_CONFIG_CLASS = ValidatingConfig
    REPORT_FILE = "build_report.json"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config.check()

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={})]

    def _rows(self) -> Iterator[tuple[str, dict[str, Any]]]:
        raise NotImplementedError

    def download_and_prepare(self, *args: Any, **kwargs: Any) -> None:
        """Build (or reuse) the Arrow cache; input problems surface as the builder's own errors.

        ``datasets`` wraps exceptions raised while generating rows in ``DatasetGenerationError``;
        the original ``ValueError``/``FileNotFoundError`` names the item and field, so it is
        re-raised as it is.
        """
        try:
            super().download_and_prepare(*args, **kwargs)
        except datasets.exceptions.DatasetGenerationError as error:
            cause = error.__cause__
            if isinstance(cause, (ValueError, FileNotFoundError)):
                raise cause.with_traceback(cause.__traceback__) from None
            raise

    @property
    def build_report(self) -> BuildReport:
        """What the last build of this configuration kept and skipped (read back from the cache)."""
        report = getattr(self, "_report", None)
        if report is not None:
            return report
        path = Path(self._output_dir) / self.REPORT_FILE
        if path.is_file():
            return BuildReport.from_dict(json.loads(path.read_text()))
        raise RuntimeError("no build report yet: call download_and_prepare() first")

    def _reject(self, reason: str, item_id: str, message: str, error: type[Exception] = BuildError) -> None:
        """Raise under ``on_error="raise"``; otherwise count the item as skipped for ``reason``."""
        if self.config.on_error == "raise":
            raise error(f"{message} [item {item_id!r}; pass on_error='skip' to skip and count such items]")
        self._report.skip(reason, item_id)

    def _reject_item(self, reason: str, item_id: str, message: str, error: type[Exception] = BuildError) -> None:
        """:meth:`_reject` for an item a subclass drops while reading its source (before the
        base class saw it), so that the report's ``read`` count stays complete."""
        self._reject(reason, item_id, message, error)
        self._report.read += 1

    def _skip_item(self, reason: str, item_id: str) -> None:
        """Count an item excluded by design (not an error: never raises), read from the source."""
        self._report.skip(reason, item_id)
        self._report.read += 1

    def _require_data_dir(self) -> Path:
        if not self.config.data_dir:
            raise ValueError(f"{type(self).__name__} needs data_dir= pointing at the dataset's local files")
        root = Path(self.config.data_dir)
        if not root.is_dir():
            raise FileNotFoundError(f"data_dir {str(root)!r} is not a directory")
        return root

    def _resolve(self, relative: str, item_id: str, field_name: str = "path", root: str | os.PathLike | None = None) -> Path | None:
        """``resolve_inside(root or data_dir, relative)`` under the ``on_error`` policy."""
        try:
            return resolve_inside(root if root is not None else self.config.data_dir, relative, field_name)
        except ValueError as error:
            self._reject("path_outside_root", item_id, str(error))
            return None

    def _image_size(self, image: Any, item_id: str) -> tuple[int, int] | None:
        """``(height, width)`` of a PIL image, encoded bytes (``{"bytes": ..., "path": None}``,
        stored as they are) or an image file, under the ``on_error`` policy."""
        if isinstance(image, Image.Image):
            return image.height, image.width
        if isinstance(image, dict) and image.get("bytes") is not None:
            try:
                with Image.open(io.BytesIO(image["bytes"])) as opened:
                    return opened.height, opened.width
            except (UnidentifiedImageError, OSError) as error:
                self._reject("unreadable_image", item_id, f"image bytes are unreadable ({error})")
                return None
        try:
            return load_image(Path(image), verify=self.config.verify_images)
        except FileNotFoundError as error:
            self._reject("missing_image", item_id, str(error), FileNotFoundError)
        except ValueError as error:
            self._reject("unreadable_image", item_id, str(error))
        return None

    def _generate_examples(self) -> Iterator[tuple[str, dict[str, Any]]]:
        self._report = BuildReport()
        yield from self._rows()
        Path(self._output_dir).mkdir(parents=True, exist_ok=True)
        (Path(self._output_dir) / self.REPORT_FILE).write_text(json.dumps(self._report.as_dict(), indent=2))


class GroundedConfig(ValidatingConfig):
    """Options shared by the grounded builders.

    Args:
        rows: ``"images"`` (one row per image) or ``"pairs"`` (one row per image and target class).
        iou_threshold, iou_inclusive: the B_c̄ filter (see :func:`shovir.boxes.context_boxes`).
        drop_pairs_without_context: drop (image, class) pairs with no context box. DOCO needs
            at least one; OCO and RO do not, so the default keeps them (the ShoViR authors'
            code dropped them for DOCO only).
        on_error, verify_images: see :class:`ValidatingConfig`.
    """

    def __init__(
        self,
        rows: Literal["images", "pairs"] = "images",
        iou_threshold: float = CONTEXT_IOU_THRESHOLD,
        iou_inclusive: bool = False,
        drop_pairs_without_context: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", rows)
        super().__init__(**kwargs)
        self.rows = rows
        self.iou_threshold = iou_threshold
        self.iou_inclusive = bool(iou_inclusive)
        self.drop_pairs_without_context = bool(drop_pairs_without_context)

    def check(self) -> None:
        super().check()
        if self.rows not in ("images", "pairs"):
            raise ValueError(f"rows must be 'images' or 'pairs', got {self.rows!r}")
        threshold = self.iou_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise ValueError(f"iou_threshold must be a number in [0, 1], got {threshold!r}")


class GroundedBuilder(ValidatingBuilder):
    """Base of the grounded builders. Subclasses implement :meth:`_image_records`.

    Each record is a dict with ``image`` (a file path or a PIL image), ``image_id``,
    ``patient_id``, ``study_id``, ``report``, ``labels`` (14 codes) and ``boxes`` (dicts with
    pixel coordinates, ``classes`` and ``anatomy``). A subclass that finds a problem in its own
    source format calls ``self._reject(reason, item_id, message)``; this class validates what
    every source shares (image readable, boxes inside the image and not degenerate, class
    names known, codes valid) and expands records into rows of the configured kind.
    """

    BUILDER_CONFIG_CLASS = GroundedConfig
    BUILDER_CONFIGS = [GroundedConfig(rows="images"), GroundedConfig(rows="pairs")]
    DEFAULT_CONFIG_NAME = "images"

    def _info(self) -> datasets.DatasetInfo:
        features = PAIR_FEATURES if self.config.rows == "pairs" else IMAGE_FEATURES
        return datasets.DatasetInfo(description=(self.__doc__ or "").strip().split("\n")[0], features=features)

    def _image_records(self) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    def _check_record(self, record: dict[str, Any]) -> dict[str, Any] | None:
        item_id = record["image_id"]
        size = self._image_size(record["image"], item_id)
        if size is None:
            return None
        height, width = size
        record["height"], record["width"] = height, width
        if not isinstance(record["image"], (Image.Image, dict)):
            record["image"] = str(record["image"])
        try:
            record["labels"] = L.validate_codes([record["labels"]], field="labels")[0].tolist()
        except ValueError as error:
            self._reject("bad_labels", item_id, str(error))
            return None
        boxes = []
        for index, box in enumerate(record["boxes"]):
            problem = validate_box(box, height, width)
            if problem is not None:
                coords = {k: box.get(k) for k in ("x_min", "y_min", "x_max", "y_max")}
                self._reject(problem, item_id, f"boxes[{index}] {coords} on a {width}x{height} image: {problem}")
                return None
            try:
                classes = [L.canonical_class(name) for name in box.get("classes") or ()]
            except ValueError as error:
                self._reject("unknown_label", item_id, f"boxes[{index}].classes: {error}")
                return None
            if "No Finding" in classes:
                self._reject("unknown_label", item_id, f"boxes[{index}].classes: 'No Finding' cannot be localised")
                return None
            boxes.append(
                {
                    "x_min": float(box["x_min"]),
                    "y_min": float(box["y_min"]),
                    "x_max": float(box["x_max"]),
                    "y_max": float(box["y_max"]),
                    "classes": classes,
                    "anatomy": str(box.get("anatomy") or ""),
                }
            )
        record["boxes"] = boxes
        for key in ("patient_id", "study_id", "report"):
            record[key] = "" if record.get(key) is None else str(record[key])
        return record

    def _pairs(self, record: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        classes = sorted({name for box in record["boxes"] for name in box["classes"]}, key=L.class_index)
        for target in classes:
            disease, context = context_boxes(
                record["boxes"], target, self.config.iou_threshold, inclusive=self.config.iou_inclusive
            )
            sample_id = f"{record['image_id']}::{target}"
            if not context and self.config.drop_pairs_without_context:
                self._report.skip("pair_without_context", sample_id)
                continue
            yield sample_id, {
                "sample_id": sample_id,
                **record,
                "target_class": target,
                "disease_boxes": disease,
                "context_boxes": context,
            }

    def _rows(self) -> Iterator[tuple[str, dict[str, Any]]]:
        seen: set[str] = set()
        for record in self._image_records():
            self._report.read += 1
            item_id = str(record.get("image_id", f"#{self._report.read}"))
            if item_id in seen:
                self._reject("duplicate_image_id", item_id, f"image_id {item_id!r} appears twice")
                continue
            seen.add(item_id)
            checked = self._check_record(record)
            if checked is None:
                continue
            self._report.keep()
            if self.config.rows == "images":
                yield checked["image_id"], checked
            else:
                yield from self._pairs(checked)
        self._report.notes.setdefault("rows", self.config.rows)
