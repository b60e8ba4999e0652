"""Report-conditioned yes/no questions on MIMIC-CXR, the ModaLens question design.

ModaLens (Cajas Ordóñez et al. 2026, §2 "Question design" and App. A) asks, for every case, all
14 questions: one per localisable CheXpert finding (the 13 classes of
:data:`shovir.labels.LOCALIZABLE`) and one composite question about any acute cardiopulmonary
finding. Answers come from the report-derived labels, the report travels with the question, and
the patient id is kept for the patient-clustered bootstrap and for drawing same-patient
substitute images (§2 "Image substitution", "Statistics"). :class:`MimicVQA` builds these rows
(:data:`MIMIC_VQA_FEATURES`: :data:`shovir.data.vqa.VQA_FEATURES` plus ``finding`` and
``label_code``); the swap pairing itself lives elsewhere.

Answers from the 14 CheXbert codes (:mod:`shovir.labels`): 1 positive → ``"yes"``; 0 blank and
2 negative → ``"no"``; 3 uncertain → the ``uncertain`` policy (``"skip"`` by default: the
question is not asked and is counted in the build report notes; ``"yes"``; ``"no"``).

The composite question. The ModaLens text available to this project names the composite
"acute-cardiopulmonary-finding" question but does not list the classes it covers, and its code
was not public. :data:`ACUTE_CARDIOPULMONARY` is therefore shovir's definition, the findings a
radiologist's "no acute cardiopulmonary process" rules out: edema, consolidation, pneumonia,
pneumothorax and pleural effusion. Chronic or non-pulmonary classes (cardiomegaly, enlarged
cardiomediastinum, lung lesion, pleural other, fracture, support devices) and the non-specific
lung opacity and atelectasis are left out. Pass ``acute_classes=`` to use another definition;
the build report records the one used. The composite's code is derived by
:func:`composite_code` (any positive → 1, else any uncertain → 3, else any negative → 2,
else 0) and answered with the same rule as the findings.

The question wording of ModaLens is not in the available text either; :data:`QUESTIONS` holds
shovir's templates. Like ModaLens's template they carry no answer-format instruction (that
belongs to the prompt).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import datasets

from shovir import labels as L
from shovir.data._base import OnError, ValidatingConfig
from shovir.data.vqa import VQA_FEATURES, AnnotatedBuilder

__all__ = [
    "MIMIC_VQA_FEATURES",
    "COMPOSITE_FINDING",
    "ACUTE_CARDIOPULMONARY",
    "QUESTIONS",
    "OPTIONS",
    "UncertainAnswer",
    "answer_from_code",
    "composite_code",
    "case_questions",
    "MimicVQAConfig",
    "MimicVQA",
]

MIMIC_VQA_FEATURES = datasets.Features(
    {
        **VQA_FEATURES,
        "finding": datasets.Value("string"),
        "label_code": datasets.Value("int8"),
    }
)
"""VQA rows plus ``finding`` (a CheXpert class or :data:`COMPOSITE_FINDING`) and ``label_code``
(the source 0-3 code of that finding; derived by :func:`composite_code` for the composite)."""

COMPOSITE_FINDING = "Acute Cardiopulmonary Process"
"""``finding`` value of the composite question (ModaLens §2: 13 findings + one composite)."""

ACUTE_CARDIOPULMONARY: tuple[str, ...] = ("Edema", "Consolidation", "Pneumonia", "Pneumothorax", "Pleural Effusion")
"""CheXpert classes that make the composite question "yes" (shovir's definition; see the module docstring)."""

QUESTIONS: dict[str, str] = {
    "Enlarged Cardiomediastinum": "Does this chest X-ray show an enlarged cardiomediastinum?",
    "Cardiomegaly": "Does this chest X-ray show cardiomegaly?",
    "Lung Opacity": "Does this chest X-ray show a lung opacity?",
    "Lung Lesion": "Does this chest X-ray show a lung lesion?",
    "Edema": "Does this chest X-ray show pulmonary edema?",
    "Consolidation": "Does this chest X-ray show consolidation?",
    "Pneumonia": "Does this chest X-ray show pneumonia?",
    "Atelectasis": "Does this chest X-ray show atelectasis?",
    "Pneumothorax": "Does this chest X-ray show a pneumothorax?",
    "Pleural Effusion": "Does this chest X-ray show a pleural effusion?",
    "Pleural Other": "Does this chest X-ray show a pleural abnormality other than effusion, such as pleural thickening?",
    "Fracture": "Does this chest X-ray show a fracture?",
    "Support Devices": "Does this chest X-ray show a support device, such as a line, tube or pacemaker?",
    COMPOSITE_FINDING: "Does this chest X-ray show any acute cardiopulmonary process?",
}
"""Question per finding, in :data:`shovir.labels.LOCALIZABLE` order, then the composite."""

OPTIONS: list[str] = ["yes", "no"]
"""The options of every question."""

UncertainAnswer = Literal["skip", "yes", "no"]
_UNCERTAIN_POLICIES = ("skip", "yes", "no")


def answer_from_code(code: int, uncertain: UncertainAnswer = "skip") -> str | None:
    """The yes/no answer for one CheXbert code; ``None`` means "do not ask" (uncertain, ``skip``).

    >>> [answer_from_code(c) for c in (0, 1, 2, 3)]
    ['no', 'yes', 'no', None]
    >>> answer_from_code(3, uncertain="yes"), answer_from_code(3, uncertain="no")
    ('yes', 'no')
    """
    if uncertain not in _UNCERTAIN_POLICIES:
        raise ValueError(f"uncertain must be one of {', '.join(_UNCERTAIN_POLICIES)}; got {uncertain!r}")
    code = int(code)
    if code == L.POSITIVE:
        return "yes"
    if code in (L.BLANK, L.NEGATIVE):
        return "no"
    if code == L.UNCERTAIN:
        return None if uncertain == "skip" else uncertain
    raise ValueError(f"label code {code!r} is not one of 0 blank, 1 positive, 2 negative, 3 uncertain")


def composite_code(labels: Sequence[int], acute_classes: Sequence[str] = ACUTE_CARDIOPULMONARY) -> int:
    """The 0-3 code of the composite finding over ``acute_classes``.

    Any positive → 1; otherwise any uncertain → 3; otherwise any negative → 2; otherwise 0.

    >>> codes = L.codes_from_mentions({"Edema": 3, "Pleural Effusion": 2, "Cardiomegaly": 1})
    >>> composite_code(codes)
    3
    >>> composite_code(L.codes_from_mentions({"Pneumothorax": 1, "Edema": 3}))
    1
    >>> composite_code(L.codes_from_mentions({"Cardiomegaly": 1}))
    0
    """
    row = L.validate_codes([labels])[0]
    codes = {int(row[L.class_index(name)]) for name in acute_classes}
    for code in (L.POSITIVE, L.UNCERTAIN, L.NEGATIVE):
        if code in codes:
            return code
    return L.BLANK


def case_questions(
    labels: Sequence[int],
    uncertain: UncertainAnswer = "skip",
    acute_classes: Sequence[str] = ACUTE_CARDIOPULMONARY,
) -> list[dict[str, Any]]:
    """The 14 questions of one case: ``finding``, ``question``, ``label_code`` and ``answer``.

    ``answer`` is ``None`` for a question that is not asked (uncertain code with
    ``uncertain="skip"``); the builder counts those instead of yielding them.

    >>> codes = L.codes_from_mentions({"Cardiomegaly": 1, "Edema": 3})
    >>> qs = case_questions(codes)
    >>> len(qs), qs[1]["finding"], qs[1]["answer"], qs[4]["answer"], qs[-1]["finding"], qs[-1]["answer"]
    (14, 'Cardiomegaly', 'yes', None, 'Acute Cardiopulmonary Process', None)
    >>> case_questions(codes, uncertain="no")[-1]["answer"]
    'no'
    """
    row = L.validate_codes([labels])[0]
    items = []
    for finding in L.LOCALIZABLE:
        code = int(row[L.class_index(finding)])
        items.append(dict(finding=finding, question=QUESTIONS[finding], label_code=code,
                          answer=answer_from_code(code, uncertain)))
    code = composite_code(row, acute_classes)
    items.append(dict(finding=COMPOSITE_FINDING, question=QUESTIONS[COMPOSITE_FINDING], label_code=code,
                      answer=answer_from_code(code, uncertain)))
    return items


def _is_text(value: Any) -> bool:
    """A manifest id or text field: a string, or an integer id (never a boolean)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


class MimicVQAConfig(ValidatingConfig):
    """Options of :class:`MimicVQA`.

    Args:
        source: ``"jsonl"`` — a manifest with one image per line: ``image`` (path relative to
            ``image_dir``), ``image_id``, ``patient_id``, ``study_id``, ``report`` and
            ``labels`` (14 CheXbert codes in :data:`shovir.labels.CLASSES` order); or
            ``"shovir_json"`` — the ShoViR metadata JSON (dict keyed by DICOM id with
            ``img_path``, ``report``, ``labels``, ``regions``), read by
            :func:`shovir.data.mimic_cxr.read_shovir_metadata`; patient and study ids come from
            ``img_path`` (``pXX/pNNNNNNNN/sNNNNNNNN/<dicom>.jpg``).
        annotation_file: the manifest or metadata JSON, relative to ``data_dir`` or absolute.
        image_dir: root of the images (default ``data_dir``, for MIMIC-CXR-JPG its ``files/``).
        uncertain: answer for uncertain (code 3) findings: ``"skip"`` (default: not asked,
            counted in the notes), ``"yes"`` or ``"no"``.
        acute_classes: CheXpert classes of the composite question (default
            :data:`ACUTE_CARDIOPULMONARY`).
        on_error, verify_images: see :class:`~shovir.data._base.ValidatingConfig`.

    >>> MimicVQAConfig(annotation_file="cases.jsonl", uncertain="maybe")
    Traceback (most recent call last):
    ...
    ValueError: uncertain must be one of skip, yes, no; got 'maybe'
    """

    def __init__(
        self,
        source: Literal["jsonl", "shovir_json"] = "jsonl",
        annotation_file: str | None = None,
        image_dir: str | None = None,
        uncertain: UncertainAnswer = "skip",
        acute_classes: Sequence[str] = ACUTE_CARDIOPULMONARY,
        on_error: OnError = "raise",
        verify_images: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", source if isinstance(source, str) else "default")
        super().__init__(on_error=on_error, verify_images=verify_images, **kwargs)
        if source not in ("jsonl", "shovir_json"):
            raise ValueError(f"source must be 'jsonl' or 'shovir_json'; got {source!r}")
        if not annotation_file:
            raise ValueError(
                f"MimicVQA(source={source!r}) needs annotation_file= naming the "
                + ("manifest (one JSON object per image per line)" if source == "jsonl" else "ShoViR metadata JSON")
            )
        if uncertain not in _UNCERTAIN_POLICIES:
            raise ValueError(f"uncertain must be one of {', '.join(_UNCERTAIN_POLICIES)}; got {uncertain!r}")
        if isinstance(acute_classes, str) or not acute_classes:
            raise ValueError(f"acute_classes must be a non-empty list of CheXpert classes; got {acute_classes!r}")
        canonical = tuple(L.canonical_class(name) for name in acute_classes)
        outside = [name for name in canonical if name not in L.LOCALIZABLE]
        if outside:
            raise ValueError(
                f"acute_classes: {outside} cannot be part of the composite; use classes of shovir.labels.LOCALIZABLE"
            )
        self.source = source
        self.annotation_file = str(annotation_file)
        self.image_dir = None if image_dir is None else str(image_dir)
        self.uncertain = uncertain
        self.acute_classes = tuple(sorted(set(canonical), key=L.class_index))


class MimicVQA(AnnotatedBuilder):
    """ModaLens-style yes/no questions on MIMIC-CXR: 13 findings + 1 composite per image (:data:`MIMIC_VQA_FEATURES`).

    ``sample_id`` is ``"<image_id>::<finding>"``. ``build_report`` counts *images*: ``read``,
    ``kept`` and ``skipped`` by reason (``missing_field``, ``bad_field``, ``bad_labels``,
    ``bad_path``, ``invalid_json``, ``duplicate_image_id``, ``path_outside_root``,
    ``missing_image``, ``unreadable_image``); ``notes`` give the number of questions, the
    answers given, the questions not asked because their finding is uncertain (per finding),
    the uncertain policy and the composite's classes.
    """

    BUILDER_CONFIG_CLASS = MimicVQAConfig

    FEATURES = MIMIC_VQA_FEATURES

    def _rows(self) -> Iterator[tuple[str, dict[str, Any]]]:
        self._require_data_dir()
        config = self.config
        path = self._data_path(config.annotation_file)
        if not path.is_file():
            raise FileNotFoundError(
                f"annotation_file: {str(path)!r} is not a file; give its path relative to data_dir or absolute"
            )
        image_root = self._data_path(config.image_dir) if config.image_dir else Path(config.data_dir)
        if not image_root.is_dir():
            raise FileNotFoundError(f"image_dir: {str(image_root)!r} is not a directory")
        records = self._jsonl_records(path) if config.source == "jsonl" else self._shovir_records(path)
        seen: set[str] = set()
        answers: Counter = Counter()
        not_asked: Counter = Counter()
        questions = 0
        for where, record in records:
            image_id = record["image_id"]
            if image_id in seen:
                self._reject(
                    "duplicate_image_id", image_id,
                    f"{where}: image_id {image_id!r} appears twice; each image must appear once",
                )
                continue
            seen.add(image_id)
            try:
                codes = L.validate_codes([record["labels"]], field="labels")[0].tolist()
            except ValueError as error:
                self._reject("bad_labels", image_id, f"{where}: {error}")
                continue
            image_path = self._checked_image(record["image"], image_id, where, image_root)
            if image_path is None:
                continue
            self._report.keep()
            for item in case_questions(codes, config.uncertain, config.acute_classes):
                if item["answer"] is None:
                    not_asked[item["finding"]] += 1
                    continue
                sample_id = f"{image_id}::{item['finding']}"
                questions += 1
                answers[item["answer"]] += 1
                yield sample_id, {
                    "sample_id": sample_id,
                    "image": image_path,
                    "image_id": image_id,
                    "patient_id": record["patient_id"],
                    "study_id": record["study_id"],
                    "question": item["question"],
                    "answer": item["answer"],
                    "options": list(OPTIONS),
                    "answer_type": "closed",
                    "modality": "X-Ray",
                    "report": record["report"],
                    "dataset": "MIMIC-CXR",
                    "finding": item["finding"],
                    "label_code": item["label_code"],
                }
        self._report.notes.update(
            source=config.source,
            questions=questions,
            answers=dict(sorted(answers.items())),
            uncertain_policy=config.uncertain,
            not_asked_uncertain={"total": sum(not_asked.values()), "by_finding": dict(sorted(not_asked.items()))},
            acute_classes=list(config.acute_classes),
        )

    def _checked_image(self, relative: str, image_id: str, where: str, root: Path) -> str | None:
        """Resolve and decode the image once, under the ``on_error`` policy, naming the item's location."""
        try:
            path = self._resolve(relative, image_id, "image", root=root)
            if path is None or self._image_size(path, image_id) is None:
                return None
        except FileNotFoundError as error:
            raise FileNotFoundError(f"{where}: {error}") from error
        except ValueError as error:
            raise type(error)(f"{where}: {error}") from error
        return str(path)

    def _jsonl_records(self, path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
        required = ("image", "image_id", "patient_id", "study_id", "report", "labels")
        for number, where, record in self._json_lines(path):
            if not isinstance(record, dict):
                self._reject(
                    "bad_field", f"line {number}", f"{where}: expected a JSON object, got {type(record).__name__}"
                )
                continue
            item_id = str(record.get("image_id") or f"line {number}")
            missing = [key for key in required if record.get(key) is None]
            if missing:
                self._reject(
                    "missing_field", item_id,
                    f"{where}: missing field(s) {', '.join(map(repr, missing))}; required: {', '.join(required)}",
                )
                continue
            bad = [key for key in required[:5] if not _is_text(record[key])]
            empty = [key for key in ("image", "image_id") if not str(record[key]).strip()]
            if bad or empty:
                problem = f"field(s) {', '.join(map(repr, bad))} must be strings" if bad else (
                    f"field(s) {', '.join(map(repr, empty))} are empty")
                self._reject("bad_field", item_id, f"{where}: {problem}")
                continue
            yield where, {key: record[key] if key == "labels" else str(record[key]) for key in required}

    def _shovir_records(self, path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
        from shovir.data.mimic_cxr import parse_mimic_path, read_shovir_metadata

        for dicom_id, entry in read_shovir_metadata(path).items():
            self._report.read += 1
            where = f"{path.name} entry {dicom_id!r}"
            img_path = entry.get("img_path")
            if not img_path:
                self._reject("missing_field", dicom_id, f"{where}: field 'img_path' is missing or empty")
                continue
            try:
                patient_id, study_id = parse_mimic_path(str(img_path))
            except ValueError as error:
                self._reject("bad_path", dicom_id, f"{where}: field 'img_path': {error}")
                continue
            stem = Path(str(img_path).replace("\\", "/")).stem
            if stem != dicom_id:
                self._reject(
                    "bad_path", dicom_id,
                    f"{where}: img_path {img_path!r} names DICOM {stem!r}, not the entry's key; "
                    "the metadata is keyed by the DICOM id of its image",
                )
                continue
            yield where, {
                "image": str(img_path),
                "image_id": str(dicom_id),
                "patient_id": patient_id,
                "study_id": study_id,
                "report": "" if entry.get("report") is None else str(entry["report"]),
                "labels": entry.get("labels"),
            }
