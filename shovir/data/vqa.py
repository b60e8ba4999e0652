"""Medical visual-question-answering sets as one row schema: VQA-RAD, SLAKE, PMC-VQA, PathVQA, JSONL.

The Beyond Accuracy protocol (Zafar et al. 2026, §3.2-§3.3) asks every question of four public
benchmarks — PathVQA, PMC-VQA, SLAKE and VQA-RAD — with the real image, a blank image and a
shuffled image from the same benchmark. Shuffling and the paired design need the same row
schema for every source, so :class:`MedicalVQA` reads each public release in its own format and
yields :data:`VQA_FEATURES` rows; a plain JSONL manifest covers any other set.

Readers (``format=``) and the public files they read:

=========  =========================================================  ============================
format     annotation file                                             images
=========  =========================================================  ============================
jsonl      one JSON object per line (see :class:`MedicalVQAConfig`)    files under ``image_dir``
vqa_rad    ``VQA_RAD Dataset Public.json`` (or the MEVF                ``image_name`` under
           ``trainset.json``/``testset.json``): a JSON list of         ``image_dir``
           objects with ``qid``, ``image_name``, ``question``,
           ``answer``, ``answer_type`` (``CLOSED``/``OPEN``), ...
slake      SLAKE 1.0 ``train.json``/``validate.json``/``test.json``:   ``img_name``
           a JSON list with ``qid``, ``img_name``                      (``xmlab102/source.jpg``)
           (``xmlab102/source.jpg``), ``question``, ``answer``,        under ``image_dir``
           ``q_lang`` (``en``/``zh``), ``modality``, ``answer_type``   (SLAKE's ``imgs/``)
pmc_vqa    PMC-VQA ``test_clean.csv``/``test.csv``/``train.csv``:      ``Figure_path`` under
           ``Figure_path, Question, Answer, Choice A..D,               ``image_dir`` (the unzipped
           Answer_label`` with choices written ``"A:Diffuse ..."``     ``images/``)
path_vqa   PathVQA in Parquet as published on the Hugging Face Hub     embedded bytes of the
           (``image`` struct ``{bytes, path}``, ``question``,          ``image`` column
           ``answer``); a glob selects several shards
=========  =========================================================  ============================

Every image path read from a file goes through :meth:`ValidatingBuilder._resolve` (no escape from
``image_dir``) and every image is decoded once at build time; unusable items follow the
``on_error`` policy and are counted by reason in :attr:`MedicalVQA.build_report`. Closed-question
answers are kept verbatim (``"Yes"`` stays ``"Yes"``): normalisation belongs to the metrics.

Example:

>>> from shovir.data.vqa import MedicalVQA  # doctest: +SKIP
>>> builder = MedicalVQA(data_dir="Slake1.0", format="slake", annotation_file="test.json",
...                      image_dir="imgs", language="en")  # doctest: +SKIP
>>> builder.download_and_prepare(); ds = builder.as_dataset(split="test")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import csv
import glob
import hashlib
import io
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import datasets
from PIL import Image, UnidentifiedImageError

from shovir.data._base import OnError, ValidatingBuilder, ValidatingConfig, files_sha256

__all__ = [
    "VQA_FEATURES",
    "ANSWER_TYPES",
    "FORMATS",
    "VQAFormat",
    "DEFAULT_DATASET_NAMES",
    "strip_option_prefix",
    "content_image_id",
    "source_fingerprint",
    "MedicalVQAConfig",
    "MedicalVQA",
]

VQA_FEATURES = datasets.Features(
    {
        "sample_id": datasets.Value("string"),
        "image": datasets.Image(),
        "image_id": datasets.Value("string"),
        "patient_id": datasets.Value("string"),
        "study_id": datasets.Value("string"),
        "question": datasets.Value("string"),
        "answer": datasets.Value("string"),
        "options": datasets.List(datasets.Value("string")),
        "answer_type": datasets.Value("string"),
        "modality": datasets.Value("string"),
        "report": datasets.Value("string"),
        "dataset": datasets.Value("string"),
    }
)
"""One row per question, identical for every reader (and extended by :mod:`shovir.data.mimic_vqa`).

``sample_id`` is unique within a build; ``options`` is empty for open questions and for closed
questions whose source lists no choices; ``answer_type`` is ``"closed"`` or ``"open"``;
``patient_id``, ``study_id``, ``modality`` and ``report`` are ``""`` when the source does not say.
"""

ANSWER_TYPES: tuple[str, ...] = ("closed", "open")
"""Values of the ``answer_type`` column."""

VQAFormat = Literal["jsonl", "vqa_rad", "slake", "pmc_vqa", "path_vqa"]
FORMATS: tuple[str, ...] = ("jsonl", "vqa_rad", "slake", "pmc_vqa", "path_vqa")
"""The source formats :class:`MedicalVQA` reads."""

DEFAULT_DATASET_NAMES: dict[str, str] = {
    "vqa_rad": "VQA-RAD",
    "slake": "SLAKE",
    "pmc_vqa": "PMC-VQA",
    "path_vqa": "PathVQA",
}
"""Value of the ``dataset`` column per format (``jsonl`` uses the manifest's file stem)."""

PMC_LETTERS: tuple[str, ...] = ("A", "B", "C", "D")
"""PMC-VQA's four choice letters (columns ``Choice A`` .. ``Choice D``)."""


def source_fingerprint(data_dir: str | None, annotation_file: str | None) -> str | None:
    """SHA-256 over the annotation file(s) (a glob matches several, hashed in sorted order).

    The builders put it in their config so that an edited source file gets a fresh cache
    instead of the stale Arrow files of its previous version. ``None`` when nothing matches
    (the build then reports the missing file).
    """
    if not annotation_file:
        return None
    pattern = annotation_file if os.path.isabs(annotation_file) or not data_dir else os.path.join(data_dir, annotation_file)
    paths = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
    return files_sha256(paths)


def strip_option_prefix(text: str, letter: str) -> str:
    """Remove PMC-VQA's ``"A:"`` style prefix (the choice's own letter and a colon) and outer spaces.

    Only the choice's own letter is stripped, so text that merely starts with a capital letter
    and a colon-free word survives.

    >>> strip_option_prefix(" B:Focal uptake pattern ", "B")
    'Focal uptake pattern'
    >>> strip_option_prefix("C: A. fumigatus", "C")
    'A. fumigatus'
    >>> strip_option_prefix("Axial", "A")
    'Axial'
    """
    return re.sub(rf"^\s*{re.escape(letter)}\s*:\s*", "", text).strip()


def content_image_id(data: bytes) -> str:
    """A stable id for an embedded image: ``"sha256-"`` and the first 16 hex digits of its SHA-256.

    The same bytes give the same id on any machine, so identical images share an id.

    >>> content_image_id(b"abc")
    'sha256-ba7816bf8f01cfea'
    """
    return "sha256-" + hashlib.sha256(data).hexdigest()[:16]


class MedicalVQAConfig(ValidatingConfig):
    """Options of :class:`MedicalVQA`.

    Args:
        format: the source format, one of :data:`FORMATS`.
        annotation_file: the question file, relative to ``data_dir`` or absolute. For
            ``path_vqa`` it may be a glob (``"data/test-*.parquet"``); shards are read in sorted
            order.
        image_dir: root of the image files, relative to ``data_dir`` or absolute (default:
            ``data_dir``). Image paths in the annotation file must stay inside it.
        language: SLAKE only: keep questions whose ``q_lang`` equals this (``"en"`` by default,
            ``"zh"`` for Chinese); ``None`` or ``"all"`` keeps every language. The excluded
            questions are counted per language in the build report notes.
        dataset_name: value of the ``dataset`` column (default :data:`DEFAULT_DATASET_NAMES`,
            or the manifest's file stem for ``jsonl``).
        on_error, verify_images: see :class:`~shovir.data._base.ValidatingConfig`.

    The ``jsonl`` manifest has one JSON object per line with the required keys ``id``,
    ``image`` (path relative to ``image_dir``), ``question`` and ``answer``, and the optional
    keys ``options`` (list of strings), ``answer_type`` (``closed``/``open``; default ``closed``
    when ``options`` is given, else ``open``), ``modality``, ``patient_id``, ``study_id`` and
    ``report``. Blank lines are ignored; other keys are counted in the notes as ignored.

    >>> MedicalVQAConfig(format="slake", annotation_file="test.json").name
    'slake'
    >>> MedicalVQAConfig(format="csv", annotation_file="x.csv")
    Traceback (most recent call last):
    ...
    ValueError: format must be one of jsonl, vqa_rad, slake, pmc_vqa, path_vqa; got 'csv'
    """

    def __init__(
        self,
        format: VQAFormat = "jsonl",
        annotation_file: str | None = None,
        image_dir: str | None = None,
        language: str | None = "en",
        dataset_name: str | None = None,
        on_error: OnError = "raise",
        verify_images: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", format if isinstance(format, str) else "default")
        super().__init__(on_error=on_error, verify_images=verify_images, **kwargs)
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {format!r}")
        if not annotation_file:
            raise ValueError(
                f"MedicalVQA(format={format!r}) needs annotation_file= naming the question file "
                "(relative to data_dir or absolute), e.g. annotation_file='test.json'"
            )
        if language is not None and not isinstance(language, str):
            raise ValueError(f"language must be a language code such as 'en', 'all' or None; got {language!r}")
        self.format = format
        self.annotation_file = str(annotation_file)
        self.image_dir = None if image_dir is None else str(image_dir)
        self.language = None if language in (None, "", "all") else language
        self.dataset_name = dataset_name


def _record_id(record: Any, key: str, fallback: str) -> str:
    """``str(record[key])`` when the record is an object holding that key, else ``fallback``."""
    if isinstance(record, dict) and record.get(key) is not None:
        return str(record[key])
    return fallback


class _Draft(dict):
    """A row before validation, with where it came from (``where``) for error messages."""


class AnnotatedBuilder(ValidatingBuilder):
    """A builder reading one annotation file (or glob) under ``data_dir``.

    The source's content hash goes into the config id, so an edited annotation file never hits
    the cache of its previous version; ``data_dir`` is made absolute for the same reason.
    Subclasses set :attr:`FEATURES`.
    """

    FEATURES: datasets.Features

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("data_dir"):
            kwargs["data_dir"] = os.path.abspath(os.fspath(kwargs["data_dir"]))
        kwargs["source_sha256"] = source_fingerprint(kwargs.get("data_dir"), kwargs.get("annotation_file"))
        super().__init__(*args, **kwargs)

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(description=(self.__doc__ or "").strip().split("\n")[0], features=self.FEATURES)

    def _data_path(self, value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() else Path(self.config.data_dir) / path

    def _json_lines(self, path: Path) -> Iterator[tuple[int, str, Any]]:
        """``(line number, "file line N", parsed object)`` for each non-blank line of a JSONL
        file, each counted as read; an invalid line is rejected under the ``on_error`` policy."""
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                self._report.read += 1
                where = f"{path.name} line {number}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    self._reject(
                        "invalid_json", f"line {number}",
                        f"{where}: invalid JSON at column {error.colno} ({error.msg}); "
                        "each line must be one complete JSON object — fix or remove the line",
                    )
                    continue
                yield number, where, record


class MedicalVQA(AnnotatedBuilder):
    """Medical VQA questions (VQA-RAD, SLAKE, PMC-VQA, PathVQA or a JSONL manifest) as :data:`VQA_FEATURES` rows.

    ``build_report`` counts questions: ``read`` (questions read, after the SLAKE language
    selection), ``kept``, ``skipped`` by reason (``missing_field``, ``empty_field``,
    ``bad_field``, ``invalid_json``, ``duplicate_id``, ``path_outside_root``,
    ``missing_image``, ``unreadable_image``, ``bad_answer_label``, ...); ``notes`` hold the
    format, the dataset name, counts per answer type and the SLAKE language exclusions.
    """

    BUILDER_CONFIG_CLASS = MedicalVQAConfig

    FEATURES = VQA_FEATURES

    def _annotation_paths(self) -> list[Path]:
        pattern = str(self._data_path(self.config.annotation_file))
        if self.config.format == "path_vqa" and glob.has_magic(pattern):
            paths = [Path(p) for p in sorted(glob.glob(pattern))]
            if not paths:
                raise FileNotFoundError(
                    f"annotation_file: no file matches {pattern!r}; point it at PathVQA's Parquet shards"
                )
            return paths
        path = Path(pattern)
        if not path.is_file():
            raise FileNotFoundError(
                f"annotation_file: {str(path)!r} is not a file; give its path relative to data_dir or absolute"
            )
        return [path]

    # ------------------------------------------------------------------ build

    def _rows(self) -> Iterator[tuple[str, dict[str, Any]]]:
        self._require_data_dir()
        config = self.config
        paths = self._annotation_paths()
        self._image_root = self._data_path(config.image_dir) if config.image_dir else Path(config.data_dir)
        if not self._image_root.is_dir():
            raise FileNotFoundError(f"image_dir: {str(self._image_root)!r} is not a directory")
        self._dataset_name = config.dataset_name or DEFAULT_DATASET_NAMES.get(config.format, paths[0].stem)
        self._seen: set[str] = set()
        notes = self._report.notes
        notes.update(
            format=config.format,
            dataset=self._dataset_name,
            annotation_files=[str(p) for p in paths],
        )
        answer_types: Counter = Counter()
        reader = getattr(self, f"_read_{config.format}")
        for path in paths:
            for draft in reader(path):
                row = self._finish(draft)
                if row is None:
                    continue
                self._report.keep()
                answer_types[row["answer_type"]] += 1
                yield row["sample_id"], row
        notes["answer_types"] = dict(sorted(answer_types.items()))

    @contextlib.contextmanager
    def _context(self, where: str) -> Iterator[None]:
        """Prefix errors raised by the base helpers (under ``on_error="raise"``) with the item's location."""
        try:
            yield
        except FileNotFoundError as error:
            raise FileNotFoundError(f"{where}: {error}") from error
        except ValueError as error:
            raise type(error)(f"{where}: {error}") from error

    def _finish(self, draft: _Draft) -> dict[str, Any] | None:
        """Check what every reader shares (ids, text, image) and return the finished row."""
        where = draft.pop("where")
        sample_id = draft["sample_id"]
        for field in ("question", "answer"):
            if not draft[field].strip():
                self._reject(
                    "empty_field", sample_id, f"{where}: field {field!r} is empty; give the {field} text or remove the item"
                )
                return None
        if sample_id in self._seen:
            self._reject(
                "duplicate_id", sample_id,
                f"{where}: question id {sample_id!r} appears twice; ids must be unique (rename or drop the repeat)",
            )
            return None
        self._seen.add(sample_id)
        image = draft["image"]
        if isinstance(image, str) and not image.strip():
            self._reject("empty_field", sample_id, f"{where}: field 'image' is empty; give the image path")
            return None
        with self._context(where):
            if isinstance(image, dict):
                if not self._check_bytes(image["bytes"], sample_id):
                    return None
            else:
                path = self._resolve(image, sample_id, "image", root=self._image_root)
                if path is None or self._image_size(path, sample_id) is None:
                    return None
                draft["image"] = str(path)
        draft.setdefault("dataset", self._dataset_name)
        return {name: draft[name] for name in VQA_FEATURES}

    def _check_bytes(self, data: bytes | None, item_id: str) -> bool:
        """Decode embedded image bytes once, under the ``on_error`` policy."""
        if not data:
            self._reject("missing_image", item_id, "field 'image' holds no image bytes")
            return False
        try:
            with Image.open(io.BytesIO(data)) as image:
                if self.config.verify_images:
                    image.load()
        except (UnidentifiedImageError, OSError, SyntaxError) as error:
            self._reject("unreadable_image", item_id, f"field 'image': embedded bytes are not a readable image ({error})")
            return False
        return True

    def _draft(self, where: str, **fields: Any) -> _Draft:
        draft = _Draft(
            where=where, patient_id="", study_id="", options=[], modality="", report="", dataset=self._dataset_name
        )
        draft.update(fields)
        return draft

    def _missing(self, record: Any, required: Sequence[str], item_id: str, where: str) -> bool:
        """Reject a record that is not an object or lacks required keys; True if rejected."""
        if not isinstance(record, dict):
            self._reject("bad_record", item_id, f"{where}: expected a JSON object, got {type(record).__name__}")
            return True
        missing = [key for key in required if record.get(key) is None]
        if missing:
            self._reject(
                "missing_field", item_id,
                f"{where}: missing field(s) {', '.join(map(repr, missing))}; required: {', '.join(required)}",
            )
            return True
        return False

    def _answer_type(self, value: Any, item_id: str, where: str, field: str = "answer_type") -> str | None:
        text = str(value).strip().lower()
        if text not in ANSWER_TYPES:
            self._reject(
                "bad_field", item_id, f"{where}: field {field!r} is {value!r}; expected 'closed' or 'open' (any case)"
            )
            return None
        return text

    @staticmethod
    def _json_list(path: Path) -> list[Any]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ValueError(
                f"{path}: invalid JSON at line {error.lineno}, column {error.colno} ({error.msg}); "
                "the file must be the dataset's original JSON list"
            ) from None
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of question objects, got {type(data).__name__}")
        return data

    # ------------------------------------------------------------------ readers

    def _read_jsonl(self, path: Path) -> Iterator[_Draft]:
        required = ("id", "image", "question", "answer")
        optional = ("options", "answer_type", "modality", "patient_id", "study_id", "report")
        ignored: Counter = Counter()
        for number, where, record in self._json_lines(path):
            item_id = _record_id(record, "id", f"line {number}")
            if self._missing(record, required, item_id, where):
                continue
            ignored.update(key for key in record if key not in required and key not in optional)
            draft = self._jsonl_draft(record, item_id, where)
            if draft is not None:
                yield draft
        if ignored:
            self._report.notes["ignored_keys"] = dict(sorted(ignored.items()))

    def _jsonl_draft(self, record: dict[str, Any], item_id: str, where: str) -> _Draft | None:
        for key in ("id", "image", "question", "answer"):
            if not isinstance(record[key], (str, int)) or isinstance(record[key], bool):
                self._reject("bad_field", item_id, f"{where}: field {key!r} must be a string, got {record[key]!r}")
                return None
        text = {}
        for key in ("modality", "patient_id", "study_id", "report"):
            value = record.get(key)
            if value is not None and (not isinstance(value, (str, int)) or isinstance(value, bool)):
                self._reject("bad_field", item_id, f"{where}: field {key!r} must be a string, got {value!r}")
                return None
            text[key] = "" if value is None else str(value)
        options = record.get("options")
        if options is None:
            options = []
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            self._reject("bad_field", item_id, f"{where}: field 'options' must be a list of strings, got {options!r}")
            return None
        if record.get("answer_type") is None:
            answer_type = "closed" if options else "open"
        else:
            answer_type = self._answer_type(record["answer_type"], item_id, where)
            if answer_type is None:
                return None
        answer = str(record["answer"])
        if options and answer_type == "open":
            self._reject(
                "bad_field", item_id,
                f"{where}: an open question cannot list options; drop 'options' or set answer_type 'closed'",
            )
            return None
        if options and answer not in options:
            self._reject(
                "bad_field", item_id,
                f"{where}: answer {answer!r} is not one of options {options!r}; the answer must equal one option verbatim",
            )
            return None
        return self._draft(
            where,
            sample_id=str(record["id"]),
            image=str(record["image"]),
            image_id=str(record["image"]),
            question=str(record["question"]),
            answer=answer,
            options=options,
            answer_type=answer_type,
            **text,
        )

    def _json_question(self, record: Any, index: int, path: Path, required: tuple[str, ...], image_key: str,
                       **extra: str) -> _Draft | None:
        """One question of a JSON-list release (VQA-RAD, SLAKE), counted as read; ``None`` when
        rejected."""
        self._report.read += 1
        where = f"{path.name} item {index}"
        item_id = _record_id(record, "qid", f"item {index}")
        if self._missing(record, required, item_id, where):
            return None
        answer_type = self._answer_type(record["answer_type"], item_id, where)
        if answer_type is None:
            return None
        return self._draft(
            where,
            sample_id=item_id,
            image=str(record[image_key]),
            image_id=str(record[image_key]),
            question=str(record["question"]),
            answer=str(record["answer"]),
            answer_type=answer_type,
            **extra,
        )

    def _read_vqa_rad(self, path: Path) -> Iterator[_Draft]:
        required = ("qid", "image_name", "question", "answer", "answer_type")
        for index, record in enumerate(self._json_list(path)):
            draft = self._json_question(record, index, path, required, "image_name")
            if draft is not None:
                yield draft

    def _read_slake(self, path: Path) -> Iterator[_Draft]:
        required = ("qid", "img_name", "question", "answer", "q_lang", "answer_type")
        language = self.config.language
        excluded: Counter = Counter()
        total = 0
        for index, record in enumerate(self._json_list(path)):
            total += 1
            if language is not None and isinstance(record, dict) and record.get("q_lang") not in (None, language):
                excluded[str(record["q_lang"])] += 1
                continue
            modality = str(record.get("modality") or "") if isinstance(record, dict) else ""
            draft = self._json_question(record, index, path, required, "img_name", modality=modality)
            if draft is not None:
                yield draft
        notes = self._report.notes
        notes["language"] = language or "all"
        notes["records_in_files"] = notes.get("records_in_files", 0) + total
        merged = Counter(notes.get("excluded_by_language", {}))
        merged.update(excluded)
        notes["excluded_by_language"] = dict(sorted(merged.items()))

    def _read_pmc_vqa(self, path: Path) -> Iterator[_Draft]:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            columns = set(reader.fieldnames or ())
            answer_col = "Answer" if "Answer" in columns else "Anwser"
            label_col = next((c for c in ("Answer_label", "Anwser_label") if c in columns), None)
            needed = {"Figure_path", "Question", *(f"Choice {letter}" for letter in PMC_LETTERS)}
            needed.add(label_col or answer_col)
            lacking = sorted(needed - columns)
            if lacking:
                raise ValueError(
                    f"{path}: not a PMC-VQA CSV, missing column(s) {', '.join(lacking)}; expected "
                    "Figure_path, Question, Answer, Choice A..D, Answer_label"
                )
            disagree: list[str] = []
            for index, record in enumerate(reader):
                self._report.read += 1
                where = f"{path.name} row {index} (line {reader.line_num})"
                item_id = f"{path.stem}:{index}"
                options = []
                for letter in PMC_LETTERS:
                    option = strip_option_prefix(record.get(f"Choice {letter}") or "", letter)
                    if not option:
                        self._reject("empty_field", item_id, f"{where}: field 'Choice {letter}' is empty")
                        break
                    options.append(option)
                if len(options) != len(PMC_LETTERS):
                    continue
                letter = (record.get(label_col or answer_col) or "").strip().rstrip(":").upper()
                if letter not in PMC_LETTERS:
                    self._reject(
                        "bad_answer_label", item_id,
                        f"{where}: field {label_col or answer_col!r} is {record.get(label_col or answer_col)!r}; "
                        "expected one of A, B, C, D",
                    )
                    continue
                answer = options[PMC_LETTERS.index(letter)]
                if label_col is not None:
                    given = strip_option_prefix(record.get(answer_col) or "", letter)
                    if given and given != answer:
                        disagree.append(item_id)
                yield self._draft(
                    where,
                    sample_id=item_id,
                    image=str(record.get("Figure_path") or ""),
                    image_id=str(record.get("Figure_path") or ""),
                    question=str(record.get("Question") or ""),
                    answer=answer,
                    options=options,
                    answer_type="closed",
                )
        if disagree:
            notes = self._report.notes.setdefault("answer_text_differs_from_label", {"count": 0, "examples": []})
            notes["count"] += len(disagree)
            notes["examples"] = (notes["examples"] + disagree)[:5]

    def _read_path_vqa(self, path: Path) -> Iterator[_Draft]:
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        columns = set(parquet.schema_arrow.names)
        lacking = sorted({"image", "question", "answer"} - columns)
        if lacking:
            raise ValueError(
                f"{path}: not a PathVQA Parquet file, missing column(s) {', '.join(lacking)}; expected "
                "image (struct of bytes and path), question, answer"
            )
        index = 0
        for batch in parquet.iter_batches(batch_size=256, columns=["image", "question", "answer"]):
            for record in batch.to_pylist():
                self._report.read += 1
                where = f"{path.name} row {index}"
                item_id = f"{path.stem}:{index}"
                index += 1
                image = record["image"]
                if isinstance(image, dict):
                    data, image_path = image.get("bytes"), image.get("path")
                else:
                    data, image_path = image, None
                if data is None and image_path:
                    image_spec: Any = str(image_path)  # a file next to the Parquet data, resolved under image_dir
                    image_id = str(image_path)
                else:
                    image_spec = {"bytes": data, "path": image_path or None}
                    image_id = str(image_path) if image_path else (content_image_id(data) if data else "")
                answer = "" if record["answer"] is None else str(record["answer"])
                is_yes_no = answer.strip().lower() in ("yes", "no")
                yield self._draft(
                    where,
                    sample_id=item_id,
                    image=image_spec,
                    image_id=image_id,
                    question="" if record["question"] is None else str(record["question"]),
                    answer=answer,
                    answer_type="closed" if is_yes_no else "open",
                    modality="pathology",
                )
