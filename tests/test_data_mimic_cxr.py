"""MIMIC-CXR builder (shovir.data.mimic_cxr) on fixtures written in the real formats.

The fixtures are the ShoViR metadata JSON (reference §2.1) and a MIMIC-CXR-JPG ``files/`` tree
``pXX/pNNNNNNNN/sNNNNNNNN/<dicom>.jpg`` of tiny grayscale JPEGs. Expected values are worked out
by hand in the comments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from shovir.data.mimic_cxr import MimicCXR, parse_mimic_path, read_shovir_metadata

WIDTH, HEIGHT = 64, 48
REPO = Path(__file__).resolve().parents[1]

D1 = "11111111-aaaaaaaa-bbbbbbbb-cccccccc-dddddddd"
D2 = "22222222-eeeeeeee-ffffffff-00000000-11111111"
BAD = "bad-dicom-0001"
D1_PATH = f"p10/p10000032/s50414267/{D1}.jpg"
D2_PATH = f"p19/p19999987/s58971208/{D2}.jpg"
BAD_PATH = f"p12/p12000001/s51000001/{BAD}.jpg"
D1_LABELS = [0, 1, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0]
D2_LABELS = [0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0]

# D1's regions. With A = Edema as the target:
#   B [7,0,20,10]:  intersection 3*10 = 30, union 100 + 130 - 30 = 200, IoU = 0.15 exactly
#   C [5,0,15,10]:  intersection 5*10 = 50, union 100 + 100 - 50 = 150, IoU = 1/3
#   D [30,20,40,30]: no overlap, IoU = 0
#   E has no findings: not a finding box, dropped and counted.
REGION_A = {"anatomy": "right lung", "bbox": [0, 0, 10, 10], "findings": ["Edema"]}
REGION_B = {"anatomy": "cardiac silhouette", "bbox": [7, 0, 20, 10], "findings": ["Cardiomegaly"]}
REGION_C = {"anatomy": "right costophrenic angle", "bbox": [5, 0, 15, 10], "findings": ["pleural_effusion"]}
REGION_D = {"anatomy": "left lower lung zone", "bbox": [30, 20, 40, 30], "findings": ["Atelectasis"]}
REGION_E = {"anatomy": "mediastinum", "bbox": [0, 30, 10, 40], "findings": []}


def box(x_min, y_min, x_max, y_max, classes, anatomy):
    return {"x_min": x_min, "y_min": y_min, "x_max": x_max, "y_max": y_max, "classes": classes, "anatomy": anatomy}


def write_jpeg(path: Path, width: int = WIDTH, height: int = HEIGHT) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(0).integers(0, 256, size=(height, width), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format="JPEG")


def entry(img_path: str, regions: list, labels: list | None = None, report: str = "Findings.") -> dict:
    return {"img_path": img_path, "report": report, "labels": labels or [0] * 13 + [1], "regions": regions}


def write_fixture(tmp_path: Path, extra: dict | None = None) -> tuple[Path, Path]:
    """Two good images (D1, D2) plus optional extra entries; returns (files root, metadata JSON)."""
    root = tmp_path / "files"
    write_jpeg(root / D1_PATH)
    write_jpeg(root / D2_PATH)
    metadata = {
        D1: entry(D1_PATH, [REGION_A, REGION_B, REGION_C, REGION_D, REGION_E], D1_LABELS,
                  "Mild pulmonary edema.\nModerate cardiomegaly."),
        D2: entry(D2_PATH, [{"anatomy": "left lung", "bbox": [2, 3, 30, 40], "findings": ["Lung Opacity"]}], D2_LABELS),
    }
    metadata.update(extra or {})
    meta_file = tmp_path / "mimic_test_annotation.json"
    meta_file.write_text(json.dumps(metadata))
    return root, meta_file


def build(tmp_path: Path, root: Path, meta_file: Path, **config):
    builder = MimicCXR(data_dir=str(root), metadata_file=str(meta_file), cache_dir=str(tmp_path / "cache"), **config)
    builder.download_and_prepare()
    return builder.as_dataset(split="test"), builder.build_report


# -- helpers ----------------------------------------------------------------------------------


def test_parse_mimic_path_returns_digit_strings():
    assert parse_mimic_path(D1_PATH) == ("10000032", "50414267")
    assert parse_mimic_path("files/" + D2_PATH) == ("19999987", "58971208")


@pytest.mark.parametrize(
    "bad",
    [
        "p10/p1000003/s50414267/x.jpg",  # 7-digit patient
        "p10/p10000032/50414267/x.jpg",  # study without "s"
        "p11/p10000032/s50414267/x.jpg",  # folder p11 does not match patient 10...
        "x.jpg",
        "p10/p10000032/s50414267/x.txt",
    ],
)
def test_parse_mimic_path_rejects_with_path_and_expected_form(bad):
    with pytest.raises(ValueError) as info:
        parse_mimic_path(bad)
    assert repr(bad) in str(info.value)
    assert "pXX/pNNNNNNNN/sNNNNNNNN" in str(info.value)


def test_read_shovir_metadata_valid_and_errors(tmp_path):
    _, meta_file = write_fixture(tmp_path)
    data = read_shovir_metadata(meta_file)
    assert list(data) == [D1, D2]
    assert data[D1]["regions"][2]["findings"] == ["pleural_effusion"]

    with pytest.raises(FileNotFoundError, match="nope.json"):
        read_shovir_metadata(tmp_path / "nope.json")

    as_list = tmp_path / "list.json"
    as_list.write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="keyed by DICOM id"):
        read_shovir_metadata(as_list)

    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({BAD: {"img_path": BAD_PATH, "report": "", "labels": [0] * 14}}))
    with pytest.raises(ValueError, match=f"'{BAD}'.*regions"):
        read_shovir_metadata(missing)

    short = tmp_path / "short.json"
    short.write_text(json.dumps({BAD: entry(BAD_PATH, [], labels=[0] * 13)}))
    with pytest.raises(ValueError, match=f"'{BAD}'.*labels must be a list of 14"):
        read_shovir_metadata(short)

    bad_box = tmp_path / "bad_box.json"
    bad_box.write_text(json.dumps({BAD: entry(BAD_PATH, [{"anatomy": "x", "bbox": [1, 2, 3], "findings": ["Edema"]}])}))
    with pytest.raises(ValueError, match=rf"'{BAD}': regions\[0\]\.bbox"):
        read_shovir_metadata(bad_box)


# -- builds -----------------------------------------------------------------------------------


def test_image_rows(tmp_path):
    root, meta_file = write_fixture(tmp_path)
    ds, report = build(tmp_path, root, meta_file)
    assert len(ds) == 2
    rows = {row["image_id"]: row for row in ds}
    first = rows[D1]
    assert (first["patient_id"], first["study_id"]) == ("10000032", "50414267")
    assert first["report"] == "Mild pulmonary edema.\nModerate cardiomegaly."  # as-is, line breaks kept
    assert first["labels"] == D1_LABELS
    # Region E (no findings) is dropped; "pleural_effusion" is canonicalised.
    assert first["boxes"] == [
        box(0, 0, 10, 10, ["Edema"], "right lung"),
        box(7, 0, 20, 10, ["Cardiomegaly"], "cardiac silhouette"),
        box(5, 0, 15, 10, ["Pleural Effusion"], "right costophrenic angle"),
        box(30, 20, 40, 30, ["Atelectasis"], "left lower lung zone"),
    ]
    assert first["image"].size == (WIDTH, HEIGHT)
    assert (first["width"], first["height"]) == (WIDTH, HEIGHT)
    second = rows[D2]
    assert (second["patient_id"], second["study_id"]) == ("19999987", "58971208")
    assert second["labels"] == D2_LABELS
    assert second["boxes"] == [box(2, 3, 30, 40, ["Lung Opacity"], "left lung")]
    assert (report.read, report.kept, dict(report.skipped)) == (2, 2, {})
    assert report.notes["regions_without_findings"] == 1


@pytest.mark.parametrize("inclusive", [False, True])
def test_pair_rows_iou_filter(tmp_path, inclusive):
    root, meta_file = write_fixture(tmp_path)
    ds, _ = build(tmp_path, root, meta_file, rows="pairs", iou_inclusive=inclusive)
    rows = {row["sample_id"]: row for row in ds}
    # D1 has four classes, D2 one: one row per (image, class), classes in CheXbert head order.
    assert sorted(rows) == sorted(
        [f"{D1}::Cardiomegaly", f"{D1}::Edema", f"{D1}::Atelectasis", f"{D1}::Pleural Effusion", f"{D2}::Lung Opacity"]
    )
    edema = rows[f"{D1}::Edema"]
    assert edema["target_class"] == "Edema"
    assert edema["disease_boxes"] == [box(0, 0, 10, 10, ["Edema"], "right lung")]
    far = box(30, 20, 40, 30, ["Atelectasis"], "left lower lung zone")
    at_threshold = box(7, 0, 20, 10, ["Cardiomegaly"], "cardiac silhouette")
    # C (IoU 1/3) is never context; B (IoU exactly 0.15) only with iou_inclusive (authors' "<=").
    expected = [at_threshold, far] if inclusive else [far]
    assert edema["context_boxes"] == expected
    # Target Cardiomegaly: A has IoU 0.15 with B, C has IoU 80/150 with B, D none.
    cardio = rows[f"{D1}::Cardiomegaly"]
    assert [b["classes"] for b in cardio["context_boxes"]] == ([["Edema"], ["Atelectasis"]] if inclusive else [["Atelectasis"]])
    assert rows[f"{D2}::Lung Opacity"]["context_boxes"] == []


# -- errors: each kind under on_error="raise" and "skip" ----------------------------------------

ERROR_CASES = {
    # reason: (entry for BAD, how to write its image file)
    "missing_image": (entry(BAD_PATH, [REGION_A]), None),
    "unreadable_image": (entry(BAD_PATH, [REGION_A]), "garbage"),
    "box_outside_image": (entry(BAD_PATH, [{"anatomy": "x", "bbox": [50, 40, 70, 47], "findings": ["Edema"]}]), "jpeg"),
    "degenerate_box": (entry(BAD_PATH, [{"anatomy": "x", "bbox": [10, 10, 10, 20], "findings": ["Edema"]}]), "jpeg"),
    "malformed_box": (entry(BAD_PATH, [{"anatomy": "x", "bbox": [1, 2, 3], "findings": ["Edema"]}]), "jpeg"),
    "unknown_label": (entry(BAD_PATH, [{"anatomy": "x", "bbox": [1, 2, 3, 4], "findings": ["Effusion"]}]), "jpeg"),
    "path_outside_root": (entry("../x.jpg", [REGION_A]), None),
    "bad_path": (entry(f"p12/p1200000/s51000001/{BAD}.jpg", [REGION_A]), None),
    "malformed_entry": ({"img_path": BAD_PATH, "report": "x", "labels": [0] * 14}, "jpeg"),
    "bad_labels": (entry(BAD_PATH, [REGION_A], labels=[0] * 13 + [7]), "jpeg"),
}


def write_error_fixture(tmp_path: Path, reason: str) -> tuple[Path, Path]:
    bad_entry, image = ERROR_CASES[reason]
    root, meta_file = write_fixture(tmp_path, {BAD: bad_entry})
    # Drop D2 so that the build has exactly one good and one bad image.
    metadata = json.loads(meta_file.read_text())
    del metadata[D2]
    meta_file.write_text(json.dumps(metadata))
    target = root / BAD_PATH
    if image == "jpeg":
        write_jpeg(target)
    elif image == "garbage":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"this is not a JPEG file at all")
    (tmp_path / "x.jpg").parent.mkdir(exist_ok=True)
    write_jpeg(tmp_path / "x.jpg")  # exists, but outside the files/ root
    return root, meta_file


@pytest.mark.parametrize("reason", sorted(ERROR_CASES))
def test_error_raise_names_the_item(tmp_path, reason):
    root, meta_file = write_error_fixture(tmp_path, reason)
    expected = FileNotFoundError if reason == "missing_image" else ValueError
    with pytest.raises(expected) as info:
        build(tmp_path, root, meta_file)
    assert BAD in str(info.value)


@pytest.mark.parametrize("reason", sorted(ERROR_CASES))
def test_error_skip_counts_by_reason(tmp_path, reason):
    root, meta_file = write_error_fixture(tmp_path, reason)
    ds, report = build(tmp_path, root, meta_file, on_error="skip")
    assert ds["image_id"] == [D1]
    assert (report.read, report.kept, dict(report.skipped)) == (2, 1, {reason: 1})
    assert report.examples[reason] == [BAD]


def test_path_must_name_its_dicom(tmp_path):
    # The key is BAD but the path names another DICOM id.
    other = f"p12/p12000001/s51000001/not-{BAD}.jpg"
    root, meta_file = write_fixture(tmp_path, {BAD: entry(other, [REGION_A])})
    write_jpeg(root / other)
    with pytest.raises(ValueError, match=f"names DICOM 'not-{BAD}'"):
        build(tmp_path, root, meta_file)


def test_clip_boxes_counts_clipped(tmp_path):
    root, meta_file = write_fixture(tmp_path, {BAD: entry(BAD_PATH, [ERROR_CASES["box_outside_image"][0]["regions"][0]])})
    write_jpeg(root / BAD_PATH)
    ds, report = build(tmp_path, root, meta_file, clip_boxes=True)
    row = ds.filter(lambda r: r["image_id"] == BAD)[0]
    # [50, 40, 70, 47] on a 64x48 image: x_max clipped to 64.
    assert row["boxes"] == [box(50, 40, 64, 47, ["Edema"], "x")]
    assert report.notes["clipped_boxes"] == 1


def test_edited_metadata_gets_a_fresh_cache(tmp_path):
    root, meta_file = write_fixture(tmp_path)
    first, _ = build(tmp_path, root, meta_file)
    metadata = json.loads(meta_file.read_text())
    metadata[D2]["report"] = "Edited report."
    meta_file.write_text(json.dumps(metadata))
    second, _ = build(tmp_path, root, meta_file)
    assert first.filter(lambda r: r["image_id"] == D2)[0]["report"] == "Findings."
    assert second.filter(lambda r: r["image_id"] == D2)[0]["report"] == "Edited report."


def test_missing_metadata_file_option(tmp_path):
    root, _ = write_fixture(tmp_path)
    builder = MimicCXR(data_dir=str(root), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="metadata_file="):
        builder.download_and_prepare()


# -- command line export ----------------------------------------------------------------------


def run_script(tmp_path: Path, *extra: str) -> Path:
    root, meta_file = write_fixture(tmp_path)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, str(REPO / "dataset_scripts" / "mimic_cxr.py"), "--data-dir", str(root),
         "--set", f"metadata_file={meta_file}", "--out", str(out), "--cache-dir", str(tmp_path / "cache"), *extra],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mimic_cxr: 2 rows" in result.stdout
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("export")
    out = run_script(tmp_path)
    return tmp_path, out


def test_dataset_script_exports_parquet_and_report(exported):
    _, out = exported
    table = pq.read_table(out / "mimic_cxr" / "test.parquet")
    assert sorted(table.column("image_id").to_pylist()) == sorted([D1, D2])
    report = json.loads((out / "mimic_cxr.build_report.json").read_text())
    assert (report["read"], report["kept"]) == (2, 2)


def test_exported_parquet_is_self_contained(exported):
    tmp_path, out = exported
    table = pq.read_table(out / "mimic_cxr" / "test.parquet")
    images = dict(zip(table.column("image_id").to_pylist(), table.column("image").to_pylist()))
    # The exact bytes of the source JPEGs are embedded (no re-encoding), so the file stands alone.
    root = tmp_path / "files"
    assert images[D1]["bytes"] == (root / D1_PATH).read_bytes()
    assert images[D2]["bytes"] == (root / D2_PATH).read_bytes()
    assert not any(str(tmp_path) in (image["path"] or "") for image in images.values())


def test_a_duplicated_dicom_key_is_an_error_naming_it(tmp_path):
    root, meta_file = write_fixture(tmp_path)
    text = meta_file.read_text()
    second = json.dumps({D2: entry(D2_PATH, [REGION_A], D2_LABELS)})[1:-1]
    meta_file.write_text(text[:-1] + ", " + second + "}")  # D2 twice: json alone keeps the last
    with pytest.raises(ValueError, match=f"key '{D2}' appears twice"):
        build(tmp_path, root, meta_file)
    with pytest.raises(ValueError, match=f"key '{D2}' appears twice"):
        read_shovir_metadata(meta_file)


def test_normalised_boxes_are_refused_as_pixels_and_scaled_on_request(tmp_path):
    root, meta_file = write_fixture(tmp_path)
    metadata = json.loads(meta_file.read_text())
    metadata[D2]["regions"] = [{"anatomy": "left lung", "bbox": [0.25, 0.5, 0.75, 1.0], "findings": ["Lung Opacity"]}]
    meta_file.write_text(json.dumps(metadata))
    with pytest.raises(ValueError, match=r"looks normalised .* pass box_units='normalized'"):
        build(tmp_path, root, meta_file)
    dataset, report = build(tmp_path, root, meta_file, on_error="skip")
    assert report.skipped.get("normalized_box") == 1 and dataset["image_id"] == [D1]
    # as fractions of the 64x48 image: x 16..48, y 24..48; D1's pixel boxes now fall outside
    scaled, report = build(tmp_path, root, meta_file, box_units="normalized", on_error="skip")
    assert scaled["image_id"] == [D2] and report.skipped.get("box_outside_image") == 1
    row = 0
    assert [(b["x_min"], b["y_min"], b["x_max"], b["y_max"]) for b in scaled[row]["boxes"]] == [(16.0, 24.0, 48.0, 48.0)]
    with pytest.raises(ValueError, match="box_units must be 'pixels' or 'normalized'"):
        build(tmp_path, root, meta_file, box_units="fractions")
