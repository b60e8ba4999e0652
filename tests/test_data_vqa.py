"""MedicalVQA readers on fixtures written in each source's real format (tiny images, tmp_path)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import runpy
import sys
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from shovir.data.vqa import VQA_FEATURES, MedicalVQA

ROOT = Path(__file__).resolve().parents[1]


def write_image(path: Path, size: tuple[int, int] = (8, 6), value: int = 128) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", size, value).save(path)
    return path


def png_bytes(size: tuple[int, int] = (5, 4), value: int = 50) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (value, value, value)).save(buffer, format="PNG")
    return buffer.getvalue()


def build(tmp_path: Path, data_dir: Path, **config):
    builder = MedicalVQA(data_dir=str(data_dir), cache_dir=str(tmp_path / "cache"), **config)
    builder.download_and_prepare()
    dataset = builder.as_dataset(split="test")
    assert dataset.features == VQA_FEATURES
    return dataset, builder.build_report


def table(dataset: datasets.Dataset) -> list[dict]:
    return dataset.remove_columns("image").to_list()


# ---------------------------------------------------------------------------------------- jsonl


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_jsonl_rows(tmp_path):
    root = tmp_path / "data"
    write_image(root / "img" / "a.png")
    write_image(root / "img" / "b.jpg", size=(10, 7))
    write_jsonl(
        root / "manifest.jsonl",
        [
            {"id": "q1", "image": "img/a.png", "question": "Is there an effusion?", "answer": "Yes",
             "options": ["Yes", "No"], "modality": "X-Ray", "patient_id": "p1", "study_id": "s1",
             "report": "Small left effusion."},
            "",
            {"id": 2, "image": "img/b.jpg", "question": "Which organ is shown?", "answer": "liver", "extra": 1},
            {"id": "q3", "image": "img/a.png", "question": "Is it normal?", "answer": "no", "answer_type": "CLOSED"},
        ],
    )
    dataset, report = build(tmp_path, root, format="jsonl", annotation_file="manifest.jsonl")
    assert table(dataset) == [
        {"sample_id": "q1", "image_id": "img/a.png", "patient_id": "p1", "study_id": "s1",
         "question": "Is there an effusion?", "answer": "Yes", "options": ["Yes", "No"], "answer_type": "closed",
         "modality": "X-Ray", "report": "Small left effusion.", "dataset": "manifest"},
        {"sample_id": "2", "image_id": "img/b.jpg", "patient_id": "", "study_id": "",
         "question": "Which organ is shown?", "answer": "liver", "options": [], "answer_type": "open",
         "modality": "", "report": "", "dataset": "manifest"},
        {"sample_id": "q3", "image_id": "img/a.png", "patient_id": "", "study_id": "",
         "question": "Is it normal?", "answer": "no", "options": [], "answer_type": "closed",
         "modality": "", "report": "", "dataset": "manifest"},
    ]
    assert dataset[1]["image"].size == (10, 7)
    assert (report.read, report.kept, dict(report.skipped)) == (3, 3, {})
    assert report.notes["ignored_keys"] == {"extra": 1}
    assert report.notes["answer_types"] == {"closed": 2, "open": 1}


GOOD = {"id": "ok", "image": "img/a.png", "question": "Is there a mass?", "answer": "no"}
BAD_LINES = {
    "missing_image": ({"id": "q-missing", "image": "img/none.png", "question": "Q?", "answer": "a"},
                      FileNotFoundError, r"manifest.jsonl line 2.*image file not found.*q-missing"),
    "unreadable_image": ({"id": "q-broken", "image": "img/broken.png", "question": "Q?", "answer": "a"},
                         ValueError, r"manifest.jsonl line 2.*unreadable.*q-broken"),
    "path_outside_root": ({"id": "q-escape", "image": "../outside.png", "question": "Q?", "answer": "a"},
                          ValueError, r"manifest.jsonl line 2.*image: '../outside.png' resolves outside.*q-escape"),
    "empty_field": ({"id": "q-empty", "image": "img/a.png", "question": "  ", "answer": "a"},
                    ValueError, r"manifest.jsonl line 2: field 'question' is empty.*q-empty"),
    "invalid_json": ('{"id": "q-cut", "image": "img/a.png", "quest',
                     ValueError, r"manifest.jsonl line 2: invalid JSON.*line 2"),
    "duplicate_id": (dict(GOOD), ValueError, r"manifest.jsonl line 2: question id 'ok' appears twice"),
}


def error_fixture(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    write_image(root / "img" / "a.png")
    (root / "img" / "broken.png").write_bytes(b"this is not a png")
    write_image(tmp_path / "outside.png")
    return root


@pytest.mark.parametrize("reason", sorted(BAD_LINES))
def test_jsonl_error_raises_naming_item_and_field(tmp_path, reason):
    root = error_fixture(tmp_path)
    line, error, pattern = BAD_LINES[reason]
    write_jsonl(root / "manifest.jsonl", [GOOD, line])
    with pytest.raises(error, match=pattern):
        build(tmp_path, root, format="jsonl", annotation_file="manifest.jsonl")


def test_jsonl_errors_skipped_and_counted(tmp_path):
    root = error_fixture(tmp_path)
    write_jsonl(root / "manifest.jsonl", [GOOD] + [BAD_LINES[r][0] for r in sorted(BAD_LINES)])
    dataset, report = build(tmp_path, root, format="jsonl", annotation_file="manifest.jsonl", on_error="skip")
    assert [row["sample_id"] for row in table(dataset)] == ["ok"]
    assert (report.read, report.kept) == (7, 1)
    assert dict(report.skipped) == {reason: 1 for reason in BAD_LINES}
    assert report.examples["invalid_json"] == ["line 4"]  # sorted reasons: duplicate, empty, invalid
    assert report.examples["duplicate_id"] == ["ok"]


def test_jsonl_answer_must_be_an_option(tmp_path):
    root = error_fixture(tmp_path)
    write_jsonl(root / "m.jsonl", [dict(GOOD, options=["yes", "no"], answer="No")])
    with pytest.raises(ValueError, match=r"m.jsonl line 1: answer 'No' is not one of options"):
        build(tmp_path, root, format="jsonl", annotation_file="m.jsonl")


def test_config_errors_name_the_option(tmp_path):
    with pytest.raises(ValueError, match="needs annotation_file="):
        MedicalVQA(data_dir=str(tmp_path), cache_dir=str(tmp_path / "cache"), format="slake")
    with pytest.raises(ValueError, match="format must be one of"):
        MedicalVQA(data_dir=str(tmp_path), cache_dir=str(tmp_path / "cache"), format="tsv", annotation_file="x")
    builder = MedicalVQA(data_dir=str(tmp_path), cache_dir=str(tmp_path / "cache"), annotation_file="nope.jsonl")
    with pytest.raises(FileNotFoundError, match="annotation_file: .*nope.jsonl"):
        builder.download_and_prepare()


def test_cache_reused_and_refreshed_when_the_manifest_changes(tmp_path):
    root = error_fixture(tmp_path)
    write_jsonl(root / "m.jsonl", [GOOD])
    first, _ = build(tmp_path, root, format="jsonl", annotation_file="m.jsonl")
    again, report = build(tmp_path, root, format="jsonl", annotation_file="m.jsonl")
    assert (len(first), len(again), report.kept) == (1, 1, 1)  # second report read back from the cache
    write_jsonl(root / "m.jsonl", [GOOD, dict(GOOD, id="new")])
    edited, report = build(tmp_path, root, format="jsonl", annotation_file="m.jsonl")
    assert [r["sample_id"] for r in table(edited)] == ["ok", "new"] and report.kept == 2


# -------------------------------------------------------------------------------------- VQA-RAD


def vqa_rad_record(qid, image_name, question, answer, answer_type, organ="HEAD", qtype="PRES"):
    """An entry of 'VQA_RAD Dataset Public.json' with every field of the public release."""
    return {
        "qid": qid, "phrase_type": "freeform", "qid_linked_id": f"linked-{qid}",
        "image_case_url": "https://medpix.nlm.nih.gov/case?id=x", "image_name": image_name,
        "image_organ": organ, "evaluation": "not evaluated", "question": question,
        "question_rephrase": "NULL", "question_relation": "NULL", "question_frame": "NULL",
        "question_type": qtype, "answer": answer, "answer_type": answer_type,
    }


def test_vqa_rad(tmp_path):
    root = tmp_path / "VQA_RAD"
    write_image(root / "VQA_RAD Image Folder" / "synpic54610.jpg")
    write_image(root / "VQA_RAD Image Folder" / "synpic29265.jpg")
    records = [
        vqa_rad_record(0, "synpic54610.jpg", "Are regions of the brain infarcted?", "Yes", "CLOSED"),
        vqa_rad_record(1, "synpic29265.jpg", "What imaging modality was used?", "CT", "OPEN", "CHEST", "MODALITY"),
        vqa_rad_record(2, "synpic29265.jpg", "How many lesions are seen?", 2, "OPEN", "CHEST", "COUNT"),
    ]
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(records))
    dataset, report = build(tmp_path, root, format="vqa_rad", annotation_file="VQA_RAD Dataset Public.json",
                            image_dir="VQA_RAD Image Folder")
    rows = table(dataset)
    assert [(r["sample_id"], r["image_id"], r["answer"], r["answer_type"]) for r in rows] == [
        ("0", "synpic54610.jpg", "Yes", "closed"),
        ("1", "synpic29265.jpg", "CT", "open"),
        ("2", "synpic29265.jpg", "2", "open"),
    ]
    assert rows[0]["question"] == "Are regions of the brain infarcted?"
    assert {(r["options"] == [], r["modality"], r["patient_id"], r["report"], r["dataset"]) for r in rows} == {
        (True, "", "", "", "VQA-RAD")
    }
    assert (report.read, report.kept, report.notes["answer_types"]) == (3, 3, {"closed": 1, "open": 2})


def test_vqa_rad_bad_answer_type(tmp_path):
    root = tmp_path / "VQA_RAD"
    write_image(root / "a.jpg")
    records = [vqa_rad_record(5, "a.jpg", "Is it?", "Yes", "MAYBE"), vqa_rad_record(6, "a.jpg", "Is it?", "No", "CLOSED")]
    (root / "rad.json").write_text(json.dumps(records))
    with pytest.raises(ValueError, match=r"rad.json item 0: field 'answer_type' is 'MAYBE'.*item '5'"):
        build(tmp_path, root, format="vqa_rad", annotation_file="rad.json")
    dataset, report = build(tmp_path, root, format="vqa_rad", annotation_file="rad.json", on_error="skip")
    assert [r["sample_id"] for r in table(dataset)] == ["6"]
    assert dict(report.skipped) == {"bad_field": 1}


# ---------------------------------------------------------------------------------------- SLAKE


def slake_record(qid, img_id, question, answer, lang, answer_type, modality="CT", content="Organ"):
    """An entry of SLAKE 1.0's test.json, fields as in the public release."""
    return {
        "img_id": img_id, "img_name": f"xmlab{img_id}/source.jpg", "question": question, "answer": answer,
        "q_lang": lang, "location": "Lung", "modality": modality, "answer_type": answer_type,
        "base_type": "vqa", "triple": ["vhead", "_", "_"], "qid": qid, "content_type": content,
    }


def slake_fixture(tmp_path: Path) -> Path:
    root = tmp_path / "Slake1.0"
    write_image(root / "imgs" / "xmlab102" / "source.jpg")
    write_image(root / "imgs" / "xmlab124" / "source.jpg")
    records = [
        slake_record(11934, 102, "What modality is used to take this image?", "CT", "en", "OPEN", content="Modality"),
        slake_record(11938, 102, "Does the picture contain liver?", "No", "en", "CLOSED"),
        slake_record(11970, 124, "Are there abnormalities in this image?", "Yes", "en", "CLOSED", modality="X-Ray"),
        slake_record(12001, 102, "这张图片的成像方式是什么?", "CT", "zh", "OPEN"),
        slake_record(12002, 124, "图中是否有异常?", "是", "zh", "CLOSED", modality="X-Ray"),
    ]
    (root / "test.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return root


def test_slake_english_only_and_exclusions_counted(tmp_path):
    root = slake_fixture(tmp_path)
    dataset, report = build(tmp_path, root, format="slake", annotation_file="test.json", image_dir="imgs")
    assert table(dataset) == [
        {"sample_id": "11934", "image_id": "xmlab102/source.jpg", "patient_id": "", "study_id": "",
         "question": "What modality is used to take this image?", "answer": "CT", "options": [],
         "answer_type": "open", "modality": "CT", "report": "", "dataset": "SLAKE"},
        {"sample_id": "11938", "image_id": "xmlab102/source.jpg", "patient_id": "", "study_id": "",
         "question": "Does the picture contain liver?", "answer": "No", "options": [],
         "answer_type": "closed", "modality": "CT", "report": "", "dataset": "SLAKE"},
        {"sample_id": "11970", "image_id": "xmlab124/source.jpg", "patient_id": "", "study_id": "",
         "question": "Are there abnormalities in this image?", "answer": "Yes", "options": [],
         "answer_type": "closed", "modality": "X-Ray", "report": "", "dataset": "SLAKE"},
    ]
    assert (report.read, report.kept, dict(report.skipped)) == (3, 3, {})
    assert report.notes["excluded_by_language"] == {"zh": 2}
    assert report.notes["records_in_files"] == 5 and report.notes["language"] == "en"


def test_slake_other_languages(tmp_path):
    root = slake_fixture(tmp_path)
    dataset, report = build(tmp_path, root, format="slake", annotation_file="test.json", image_dir="imgs", language="zh")
    assert [(r["sample_id"], r["answer"]) for r in table(dataset)] == [("12001", "CT"), ("12002", "是")]
    assert report.notes["excluded_by_language"] == {"en": 3}
    dataset, report = build(tmp_path, root, format="slake", annotation_file="test.json", image_dir="imgs", language="all")
    assert len(dataset) == 5 and report.notes["excluded_by_language"] == {}


# -------------------------------------------------------------------------------------- PMC-VQA

PMC_HEADER = ["Figure_path", "Question", "Answer", "Choice A", "Choice B", "Choice C", "Choice D", "Answer_label"]


def test_pmc_vqa_prefixes_stripped_and_answer_from_label(tmp_path):
    root = tmp_path / "PMC-VQA"
    write_image(root / "images" / "PMC1064097_F1.jpg")
    write_image(root / "images" / "PMC2000001_F2.jpg")
    with (root / "test_clean.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(PMC_HEADER)
        writer.writerow(["PMC1064097_F1.jpg", "What is the uptake pattern in the breast?", "Focal uptake pattern",
                         " A:Diffuse uptake pattern", " B:Focal uptake pattern", " C:No uptake pattern",
                         " D:Cannot determine from the information given", "B"])
        writer.writerow(["PMC2000001_F2.jpg", "Which view, axial or coronal, is shown?", "Coronal ",
                         "A:Axial", "B:Sagittal", "C:Coronal", "D:Oblique, left", " C"])
        writer.writerow(["PMC2000001_F2.jpg", "What stain was used?", "Masson trichrome",
                         "A:H&E", "B:PAS", "C:Masson trichrome", "D:Giemsa", "E"])
        writer.writerow(["PMC2000001_F2.jpg", "Where is the lesion?", "Left lobe",
                         "A:Left lobe", "B:Right lobe", "C:Both", "D:Neither", "B"])
    dataset, report = build(tmp_path, root, format="pmc_vqa", annotation_file="test_clean.csv", image_dir="images",
                            on_error="skip")
    rows = table(dataset)
    assert rows[0] == {
        "sample_id": "test_clean:0", "image_id": "PMC1064097_F1.jpg", "patient_id": "", "study_id": "",
        "question": "What is the uptake pattern in the breast?", "answer": "Focal uptake pattern",
        "options": ["Diffuse uptake pattern", "Focal uptake pattern", "No uptake pattern",
                    "Cannot determine from the information given"],
        "answer_type": "closed", "modality": "", "report": "", "dataset": "PMC-VQA",
    }
    assert (rows[1]["answer"], rows[1]["options"]) == ("Coronal", ["Axial", "Sagittal", "Coronal", "Oblique, left"])
    # Row 3: the label (B) wins over the Answer text; the disagreement is counted, not hidden.
    assert (rows[2]["sample_id"], rows[2]["answer"]) == ("test_clean:3", "Right lobe")
    assert report.notes["answer_text_differs_from_label"] == {"count": 1, "examples": ["test_clean:3"]}
    assert dict(report.skipped) == {"bad_answer_label": 1}
    assert report.examples["bad_answer_label"] == ["test_clean:2"]
    assert (report.read, report.kept) == (4, 3)


def test_pmc_vqa_wrong_columns(tmp_path):
    root = tmp_path / "pmc"
    root.mkdir()
    (root / "x.csv").write_text("image,question,answer\na.jpg,Q?,A\n")
    with pytest.raises(ValueError, match="not a PMC-VQA CSV, missing column"):
        build(tmp_path, root, format="pmc_vqa", annotation_file="x.csv")


# -------------------------------------------------------------------------------------- PathVQA


def test_path_vqa_parquet_with_embedded_bytes(tmp_path):
    root = tmp_path / "path-vqa"
    (root / "data").mkdir(parents=True)
    first, second = png_bytes(value=10), png_bytes(value=200)
    # Shard 0: written by `datasets` itself, as the Hub's Parquet conversion does (image struct, no path).
    shard0 = datasets.Dataset.from_dict(
        {"image": [{"bytes": first, "path": None}, {"bytes": second, "path": None}],
         "question": ["Is there necrosis?", "What is present?"], "answer": ["yes", "hemorrhage"]},
        features=datasets.Features({"image": datasets.Image(), "question": datasets.Value("string"),
                                    "answer": datasets.Value("string")}),
    )
    shard0.to_parquet(str(root / "data" / "test-00000-of-00002.parquet"))
    # Shard 1: plain pyarrow, struct with a path, plus one undecodable image.
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    shard1 = pa.table({
        "image": pa.array([{"bytes": first, "path": "test_0003.jpg"}, {"bytes": b"garbage", "path": None}], image_type),
        "question": ["does this image show fibrosis?", "is this normal?"],
        "answer": ["no", "no"],
    })
    pq.write_table(shard1, root / "data" / "test-00001-of-00002.parquet")

    dataset, report = build(tmp_path, root, format="path_vqa", annotation_file="data/test-*.parquet", on_error="skip")
    sha = "sha256-" + hashlib.sha256(first).hexdigest()[:16]
    assert [(r["sample_id"], r["image_id"], r["answer"], r["answer_type"], r["modality"]) for r in table(dataset)] == [
        ("test-00000-of-00002:0", sha, "yes", "closed", "pathology"),
        ("test-00000-of-00002:1", "sha256-" + hashlib.sha256(second).hexdigest()[:16], "hemorrhage", "open", "pathology"),
        ("test-00001-of-00002:0", "test_0003.jpg", "no", "closed", "pathology"),
    ]
    assert dataset[0]["image"].size == (5, 4) and dataset[0]["image"].getpixel((0, 0)) == (10, 10, 10)
    assert dict(report.skipped) == {"unreadable_image": 1}
    assert report.examples["unreadable_image"] == ["test-00001-of-00002:1"]
    assert (report.read, report.kept) == (4, 3)


# --------------------------------------------------------------------------------- script entry


def run_script(tmp_path: Path, monkeypatch) -> Path:
    """Run ``dataset_scripts/vqa.py`` as ``__main__`` on a two-question manifest; return the output folder."""
    root = tmp_path / "data"
    write_image(root / "img" / "a.png")
    write_jsonl(root / "m.jsonl", [GOOD, dict(GOOD, id="ok2", answer="yes")])
    out = tmp_path / "out"
    argv = ["vqa.py", "--data-dir", str(root), "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
            "--set", "format=jsonl", "--set", "annotation_file=m.jsonl"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(ROOT / "dataset_scripts" / "vqa.py"), run_name="__main__")
    assert exit_info.value.code == 0
    return out


def test_dataset_script_exports_parquet(tmp_path, monkeypatch):
    out = run_script(tmp_path, monkeypatch)
    exported = pq.read_table(out / "vqa" / "test.parquet").to_pylist()
    assert [(r["sample_id"], r["answer"], r["options"]) for r in exported] == [("ok", "no", []), ("ok2", "yes", [])]
    assert json.loads((out / "vqa.build_report.json").read_text())["kept"] == 2


def test_exported_parquet_embeds_image_bytes(tmp_path, monkeypatch):
    out = run_script(tmp_path, monkeypatch)
    assert pq.read_table(out / "vqa" / "test.parquet").to_pylist()[0]["image"]["bytes"]
