"""MimicVQA: ModaLens-style questions from hand-written CheXbert label vectors (tiny images, tmp_path)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from shovir import labels as L
from shovir.data.mimic_vqa import (
    ACUTE_CARDIOPULMONARY,
    COMPOSITE_FINDING,
    MIMIC_VQA_FEATURES,
    QUESTIONS,
    MimicVQA,
)

# CheXbert head order: EC, Card, LO, LL, Edema, Cons, Pneu, Atel, PTX, Eff, PO, Fx, SD, NoF
LABELS_A = [0, 1, 2, 0, 3, 0, 2, 1, 0, 2, 0, 0, 1, 0]  # Edema uncertain; no acute positive
LABELS_B = [0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0]  # pneumothorax positive, edema uncertain
LABELS_C = [0] * 13 + [1]                               # No Finding

EXPECTED_A = {  # finding -> (label_code, answer with uncertain="skip"; None = not asked)
    "Enlarged Cardiomediastinum": (0, "no"), "Cardiomegaly": (1, "yes"), "Lung Opacity": (2, "no"),
    "Lung Lesion": (0, "no"), "Edema": (3, None), "Consolidation": (0, "no"), "Pneumonia": (2, "no"),
    "Atelectasis": (1, "yes"), "Pneumothorax": (0, "no"), "Pleural Effusion": (2, "no"),
    "Pleural Other": (0, "no"), "Fracture": (0, "no"), "Support Devices": (1, "yes"),
    COMPOSITE_FINDING: (3, None),  # acute codes: Edema 3, Cons 0, Pneu 2, PTX 0, Eff 2 -> uncertain
}


def write_image(path: Path, size: tuple[int, int] = (9, 7)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", size, 90).save(path)


def case(image: str, image_id: str, patient: str, study: str, labels: list[int], report: str = "") -> dict:
    return {"image": image, "image_id": image_id, "patient_id": patient, "study_id": study,
            "report": report, "labels": labels}


def manifest_fixture(tmp_path: Path) -> Path:
    root = tmp_path / "mimic"
    write_image(root / "p10" / "p10000032" / "s50000001" / "dA.jpg")
    write_image(root / "p10" / "p10000032" / "s50000002" / "dB.png")
    write_image(root / "p11" / "p11000011" / "s51000001" / "dC.jpg")
    lines = [
        case("p10/p10000032/s50000001/dA.jpg", "dA", "10000032", "50000001", LABELS_A,
             "Heart is enlarged. Possible mild edema. Right PICC."),
        case("p10/p10000032/s50000002/dB.png", "dB", "10000032", "50000002", LABELS_B, "Small right pneumothorax."),
        case("p11/p11000011/s51000001/dC.jpg", "dC", "11000011", "51000001", LABELS_C, "No acute process."),
    ]
    (root / "cases.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return root


def build(tmp_path: Path, root: Path, **config):
    builder = MimicVQA(data_dir=str(root), cache_dir=str(tmp_path / "cache"), **config)
    builder.download_and_prepare()
    dataset = builder.as_dataset(split="test")
    assert dataset.features == MIMIC_VQA_FEATURES
    return dataset, builder.build_report


def rows_by_id(dataset) -> dict[str, dict]:
    return {row["sample_id"]: row for row in dataset.remove_columns("image").to_list()}


def test_skip_policy_answers_from_hand_written_labels(tmp_path):
    root = manifest_fixture(tmp_path)
    dataset, report = build(tmp_path, root, annotation_file="cases.jsonl")
    rows = rows_by_id(dataset)
    assert len(rows) == 12 + 13 + 14
    got_a = {r["finding"]: (r["label_code"], r["answer"]) for r in rows.values() if r["image_id"] == "dA"}
    assert got_a == {k: v for k, v in EXPECTED_A.items() if v[1] is not None}
    assert rows["dA::Cardiomegaly"] == {
        "sample_id": "dA::Cardiomegaly", "image_id": "dA", "patient_id": "10000032", "study_id": "50000001",
        "question": "Does this chest X-ray show cardiomegaly?", "answer": "yes", "options": ["yes", "no"],
        "answer_type": "closed", "modality": "X-Ray", "report": "Heart is enlarged. Possible mild edema. Right PICC.",
        "dataset": "MIMIC-CXR", "finding": "Cardiomegaly", "label_code": 1,
    }
    # Image B: the composite is "yes" because pneumothorax is positive, whatever the uncertain edema.
    composite_b = rows[f"dB::{COMPOSITE_FINDING}"]
    assert (composite_b["answer"], composite_b["label_code"]) == ("yes", 1)
    assert composite_b["question"] == QUESTIONS[COMPOSITE_FINDING]
    assert "dB::Edema" not in rows and rows["dB::Pneumothorax"]["answer"] == "yes"
    # Image C: every question asked, every answer "no"; composite code 0 (blank).
    c_rows = [r for r in rows.values() if r["image_id"] == "dC"]
    assert len(c_rows) == 14 and {r["answer"] for r in c_rows} == {"no"}
    assert rows[f"dC::{COMPOSITE_FINDING}"]["label_code"] == 0
    assert (report.read, report.kept, dict(report.skipped)) == (3, 3, {})
    assert report.notes["questions"] == 39
    assert report.notes["answers"] == {"no": 34, "yes": 5}
    assert report.notes["not_asked_uncertain"] == {
        "total": 3, "by_finding": {COMPOSITE_FINDING: 1, "Edema": 2},
    }
    assert report.notes["uncertain_policy"] == "skip"
    assert report.notes["acute_classes"] == list(ACUTE_CARDIOPULMONARY)
    assert dataset[0]["image"].size == (9, 7)


@pytest.mark.parametrize("policy", ["yes", "no"])
def test_uncertain_answered_yes_or_no(tmp_path, policy):
    root = manifest_fixture(tmp_path)
    dataset, report = build(tmp_path, root, annotation_file="cases.jsonl", uncertain=policy)
    rows = rows_by_id(dataset)
    assert len(rows) == 42
    for sample_id in ("dA::Edema", f"dA::{COMPOSITE_FINDING}", "dB::Edema"):
        assert (rows[sample_id]["answer"], rows[sample_id]["label_code"]) == (policy, 3)
    assert rows[f"dB::{COMPOSITE_FINDING}"]["answer"] == "yes"  # a positive beats the policy
    assert rows["dA::Cardiomegaly"]["answer"] == "yes" and rows["dA::Lung Opacity"]["answer"] == "no"
    assert report.notes["not_asked_uncertain"] == {"total": 0, "by_finding": {}}
    assert report.notes["answers"] == ({"no": 34, "yes": 8} if policy == "yes" else {"no": 37, "yes": 5})


def test_custom_acute_classes(tmp_path):
    root = manifest_fixture(tmp_path)
    dataset, report = build(tmp_path, root, annotation_file="cases.jsonl", acute_classes=["cardiomegaly", "Atelectasis"])
    rows = rows_by_id(dataset)
    assert (rows[f"dA::{COMPOSITE_FINDING}"]["answer"], rows[f"dA::{COMPOSITE_FINDING}"]["label_code"]) == ("yes", 1)
    assert rows[f"dB::{COMPOSITE_FINDING}"]["answer"] == "no"
    assert report.notes["acute_classes"] == ["Cardiomegaly", "Atelectasis"]
    with pytest.raises(ValueError, match="No Finding.*cannot be part of the composite"):
        MimicVQA(data_dir=str(root), cache_dir=str(tmp_path / "c2"), annotation_file="cases.jsonl",
                 acute_classes=["No Finding"])


GOOD = case("p10/p10000032/s50000001/dA.jpg", "dA", "10000032", "50000001", LABELS_A)
BAD = {
    "missing_image": (case("p10/none.jpg", "dX", "1", "2", LABELS_C), FileNotFoundError,
                      r"m.jsonl line 2: image file not found.*'dX'"),
    "unreadable_image": (case("broken.jpg", "dX2", "1", "2", LABELS_C), ValueError,
                         r"m.jsonl line 2: image file is unreadable.*'dX2'"),
    "path_outside_root": (case("../outside.jpg", "dX3", "1", "2", LABELS_C), ValueError,
                          r"m.jsonl line 2: image: '../outside.jpg' resolves outside.*'dX3'"),
    "invalid_json": ('{"image": "broken.jpg", "image_id": ', ValueError, r"m.jsonl line 2: invalid JSON"),
    "duplicate_image_id": (dict(GOOD), ValueError, r"m.jsonl line 2: image_id 'dA' appears twice"),
    "bad_labels": (case("p10/p10000032/s50000001/dA.jpg", "dY", "1", "2", [0] * 13 + [4]), ValueError,
                   r"m.jsonl line 2: labels: code 4 at row 0, column 13 \(No Finding\).*'dY'"),
    "missing_field": ({"image": "p10/p10000032/s50000001/dA.jpg", "image_id": "dZ", "labels": LABELS_C},
                      ValueError, r"m.jsonl line 2: missing field\(s\) 'patient_id', 'study_id', 'report'.*'dZ'"),
}


def error_fixture(tmp_path: Path, lines: list) -> Path:
    root = manifest_fixture(tmp_path)
    (root / "broken.jpg").write_bytes(b"\xff\xd8\xff truncated")
    write_image(tmp_path / "outside.jpg")
    (root / "m.jsonl").write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return root


@pytest.mark.parametrize("reason", sorted(BAD))
def test_error_raises_naming_item_and_field(tmp_path, reason):
    line, error, pattern = BAD[reason]
    root = error_fixture(tmp_path, [GOOD, line])
    with pytest.raises(error, match=pattern):
        build(tmp_path, root, annotation_file="m.jsonl")


def test_errors_skipped_and_counted(tmp_path):
    root = error_fixture(tmp_path, [GOOD] + [BAD[reason][0] for reason in sorted(BAD)])
    dataset, report = build(tmp_path, root, annotation_file="m.jsonl", on_error="skip")
    assert {row["image_id"] for row in rows_by_id(dataset).values()} == {"dA"}
    assert len(dataset) == 12
    assert (report.read, report.kept) == (8, 1)
    assert dict(report.skipped) == {reason: 1 for reason in BAD}


def test_edited_manifest_gets_a_fresh_cache(tmp_path):
    root = manifest_fixture(tmp_path)
    first, _ = build(tmp_path, root, annotation_file="cases.jsonl")
    lines = (root / "cases.jsonl").read_text().splitlines()
    (root / "cases.jsonl").write_text(lines[2] + "\n")
    second, report = build(tmp_path, root, annotation_file="cases.jsonl")
    assert (len(first), len(second), report.read) == (39, 14, 1)


def test_shovir_metadata_source(tmp_path):
    root = tmp_path / "files"
    dicom_a = "02aa804e-bde0afdd-112c0b34-7bc16630-4e384014"
    dicom_b = "174413ec-4ec4c1f7-34ea26b7-c5f994f8-79ef1962"
    write_image(root / "p10" / "p10000032" / "s50414267" / f"{dicom_a}.jpg")
    write_image(root / "p10" / "p10000032" / "s53189527" / f"{dicom_b}.jpg")
    region = {"anatomy": "cardiac silhouette", "bbox": [1, 1, 6, 5], "findings": ["Cardiomegaly"]}
    metadata = {
        dicom_a: {"img_path": f"p10/p10000032/s50414267/{dicom_a}.jpg", "report": "Cardiomegaly. Possible edema.",
                  "labels": LABELS_A, "regions": [region]},
        dicom_b: {"img_path": f"p10/p10000032/s53189527/{dicom_b}.jpg", "report": "Right pneumothorax.",
                  "labels": LABELS_B, "regions": []},
        "mismatch": {"img_path": f"p10/p10000032/s53189527/{dicom_b}.jpg", "report": "", "labels": LABELS_C,
                     "regions": []},
    }
    (tmp_path / "mimic_test_annotation.json").write_text(json.dumps(metadata))
    dataset, report = build(tmp_path, root, source="shovir_json",
                            annotation_file=str(tmp_path / "mimic_test_annotation.json"), on_error="skip")
    rows = rows_by_id(dataset)
    assert len(rows) == 12 + 13
    row = rows[f"{dicom_a}::Cardiomegaly"]
    assert (row["image_id"], row["patient_id"], row["study_id"], row["report"], row["answer"]) == (
        dicom_a, "10000032", "50414267", "Cardiomegaly. Possible edema.", "yes")
    assert rows[f"{dicom_b}::{COMPOSITE_FINDING}"]["study_id"] == "53189527"
    assert dict(report.skipped) == {"bad_path": 1} and report.examples["bad_path"] == ["mismatch"]
    assert (report.read, report.kept, report.notes["source"]) == (3, 2, "shovir_json")


def test_label_codes_follow_shovir_labels_order():
    assert [L.class_index(name) for name in QUESTIONS if name != COMPOSITE_FINDING] == list(range(13))
