"""PadChest-GR builder (shovir.data.padchest_gr) on fixtures written in the real formats.

Fixtures: a ``grounded_reports_*.json`` list of studies (reference §2.2) and 16-bit grayscale
PNGs (PIL mode ``I;16``). Images are 256 x 128 (width x height) and boxes use fractions k/256
and k/128, so normalised → pixel conversion is exact and can be checked by hand.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from shovir.data.export import main
from shovir.data.padchest_gr import (
    PadChestGR,
    is_negated,
    load_padchest_mapping,
    verifier_name,
)
from shovir.labels import CLASSES, class_index

WIDTH, HEIGHT = 256, 128


def box(x_min, y_min, x_max, y_max, classes, anatomy):
    return {"x_min": x_min, "y_min": y_min, "x_max": x_max, "y_max": y_max, "classes": classes, "anatomy": anatomy}


def codes(**named) -> list[int]:
    """A 14-code vector from ``Class_Name=code`` keywords."""
    vector = [0] * len(CLASSES)
    for name, code in named.items():
        vector[class_index(name.replace("_", " "))] = code
    return vector


def finding(sentence, labels=(), boxes=(), locations=(), abnormal=True, **extra):
    item = {"sentence_en": sentence, "sentence_es": "(es) " + sentence, "abnormal": abnormal,
            "labels": list(labels), "locations": list(locations), "boxes": [list(b) for b in boxes]}
    item.update(extra)
    return item


def write_png16(path: Path, width: int = WIDTH, height: int = HEIGHT) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(1).integers(0, 65536, size=(height, width), dtype=np.uint16)
    pixels[0, 0] = 65535  # make the 16-bit range certain
    image = Image.fromarray(pixels)
    assert image.mode == "I;16"
    image.save(path)


def write_fixture(tmp_path: Path, studies: list[dict], images=None, name="grounded_reports_20240819.json") -> Path:
    """Write the JSON and a PNG per study (``images`` limits which ones); return data_dir."""
    data_dir = tmp_path / "padchest"
    data_dir.mkdir(exist_ok=True)
    (data_dir / name).write_text(json.dumps(studies))
    for study in studies:
        if images is None or study["ImageID"] in images:
            write_png16(data_dir / study["ImageID"])
    return data_dir


def build(tmp_path: Path, data_dir: Path, verifier=None, **config):
    config.setdefault("min_images_per_class", 0)
    builder = PadChestGR(data_dir=str(data_dir), cache_dir=str(tmp_path / "cache"), verifier=verifier, **config)
    builder.download_and_prepare()
    return builder.as_dataset(split="test"), builder.build_report, builder


# A study exercising most of the pipeline. Pixel boxes (x = u * 256, y = v * 128):
#   f1 [0.25, 0.5, 0.75, 1.0]        -> [64, 64, 192, 128]
#   f2 [0.0, 0.0, 0.125, 0.25]       -> [0, 0, 32, 32]       (label outside CheXpert: class-less)
#   f3 [0.5, 0.0, 0.625, 0.25]       -> [128, 0, 160, 32]
#      [0.875, 0.75, 1.0, 1.0]       -> [224, 96, 256, 128]
MAIN = {
    "ImageID": "img_main.png",
    "StudyID": "study-main",
    "findings": [
        finding("No pleural effusion.", abnormal=False),
        finding("Cardiomegaly.", ["cardiomegaly"], [[0.25, 0.5, 0.75, 1.0]], ["cardiac"],
                extra_boxes=[[0.25, 0.5, 0.7, 0.9]]),
        finding("Aortic elongation.", ["aortic elongation"], [[0.0, 0.0, 0.125, 0.25]], ["aortic"]),
        finding("Calcified granuloma in the right upper lobe.", ["calcified granuloma"],
                [[0.5, 0.0, 0.625, 0.25], [0.875, 0.75, 1.0, 1.0]]),
        finding("Pleural thickening without effusion.", ["pleural thickening"], [[0.0, 0.5, 0.25, 0.75]], ["pleural"]),
        finding("Possible atelectasis at the left base.", ["atelectasis"], [[0.75, 0.0, 0.875, 0.25]], ["left base"]),
        finding("Normal mediastinum.", abnormal=False, boxes=[[0.375, 0.0, 0.5, 0.25]]),
        finding("Cardiomegaly.", abnormal=True),  # repeated sentence, no boxes
    ],
}
NORMAL = {"ImageID": "img_normal.png", "StudyID": "study-normal",
          "findings": [finding("No significant radiological alterations.", abnormal=False)]}


def test_fixture_pngs_are_16_bit(tmp_path):
    data_dir = write_fixture(tmp_path, [MAIN])
    with Image.open(data_dir / "img_main.png") as image:
        assert image.mode == "I;16"
        assert image.getextrema()[1] == 65535
    ds, _, _ = build(tmp_path, data_dir)
    decoded = ds[0]["image"]
    assert decoded.mode in ("I;16", "I")  # datasets decodes the file as stored, still 16-bit
    assert np.asarray(decoded).max() == 65535


def test_image_rows_static_mapping(tmp_path):
    data_dir = write_fixture(tmp_path, [MAIN, NORMAL], images={"img_main.png"})
    ds, report, _ = build(tmp_path, data_dir)
    assert len(ds) == 1
    row = ds[0]
    assert (row["image_id"], row["study_id"], row["patient_id"]) == ("img_main.png", "study-main", "")
    assert (row["width"], row["height"]) == (WIDTH, HEIGHT)
    # f4 is negated ("without"): its box stays, class-less; normal findings carry no finding boxes.
    assert row["boxes"] == [
        box(64, 64, 192, 128, ["Cardiomegaly"], "cardiac"),
        box(0, 0, 32, 32, [], "aortic"),
        box(128, 0, 160, 32, ["Lung Lesion"], "unspecified"),
        box(224, 96, 256, 128, ["Lung Lesion"], "unspecified"),
        box(0, 64, 64, 96, [], "pleural"),
        box(192, 0, 224, 32, ["Atelectasis"], "left base"),
    ]
    # Without a verifier: 1 for every class with a box; No Finding 0 because some class is positive.
    assert row["labels"] == codes(Cardiomegaly=1, Lung_Lesion=1, Atelectasis=1)
    # Every sentence_en, source order, the repeated "Cardiomegaly." kept once.
    assert row["report"] == (
        "No pleural effusion. Cardiomegaly. Aortic elongation. Calcified granuloma in the right upper lobe. "
        "Pleural thickening without effusion. Possible atelectasis at the left base. Normal mediastinum."
    )
    assert dict(report.skipped) == {"no_boxes": 1}
    assert (report.read, report.kept) == (2, 1)
    notes = report.notes
    assert notes["verified"] is False and notes["verifier"] is None
    # Findings of every study read in full: MAIN has 2 normal findings, NORMAL one.
    assert notes["findings"] == {"abnormal_with_boxes": 4, "abnormal_without_boxes": 1, "negated_classless": 1, "normal": 3}
    assert notes["boxes"] == {"extra_boxes_ignored": 1, "negated_classless": 1, "normal_finding_boxes_ignored": 1, "read": 6}
    assert notes["labels_unmapped"] == {"aortic elongation": 1}
    assert notes["class_images"]["before"] == {"Lung Lesion": 1, "Atelectasis": 1, "Cardiomegaly": 1}


def test_abnormal_report_sentences_and_source_order(tmp_path):
    # The same sentences in two different source orders: the report follows each source.
    a = finding("Right basal atelectasis.", ["atelectasis"], [[0.0, 0.0, 0.5, 0.5]])
    b = finding("Cardiomegaly.", ["cardiomegaly"], [[0.5, 0.5, 1.0, 1.0]])
    n = finding("No pneumothorax.", abnormal=False)
    studies = [{"ImageID": "one.png", "findings": [a, n, b, a]}, {"ImageID": "two.png", "findings": [b, a, n]}]
    data_dir = write_fixture(tmp_path, studies)
    ds, _, _ = build(tmp_path, data_dir, report_sentences="abnormal")
    reports = dict(zip(ds["image_id"], ds["report"]))
    assert reports == {"one.png": "Right basal atelectasis. Cardiomegaly.", "two.png": "Cardiomegaly. Right basal atelectasis."}
    ds, _, _ = build(tmp_path, data_dir, report_sentences="all")
    assert dict(zip(ds["image_id"], ds["report"]))["two.png"] == "Cardiomegaly. Right basal atelectasis. No pneumothorax."


def test_negation_filter_can_be_switched_off(tmp_path):
    assert is_negated("Pleural thickening without effusion.")
    assert not is_negated("Nodule, knot-like.")
    data_dir = write_fixture(tmp_path, [MAIN])
    ds, report, _ = build(tmp_path, data_dir, negation_filter=False)
    assert box(0, 64, 64, 96, ["Pleural Other"], "pleural") in ds[0]["boxes"]
    assert report.notes["findings"]["negated_classless"] == 0
    assert report.notes["boxes"]["read"] == 6


# -- verifier hook ------------------------------------------------------------------------------

VERIFIER_CALLS: list[list[str]] = []
KEYWORDS = {"cardiomegaly": "Cardiomegaly", "nodule": "Lung Lesion", "effusion": "Pleural Effusion",
            "atelectasis": "Atelectasis"}


def keyword_verifier(sentences: list[str]) -> np.ndarray:
    """A stand-in CheXbert: keyword → class; "no ..." → negative, "possible" → uncertain."""
    VERIFIER_CALLS.append(list(sentences))
    out = np.zeros((len(sentences), len(CLASSES)), dtype=np.int64)
    for i, sentence in enumerate(sentences):
        low = sentence.lower()
        for keyword, name in KEYWORDS.items():
            if keyword in low:
                out[i, class_index(name)] = 2 if low.startswith("no ") else 3 if "possible" in low else 1
        if not out[i].any():
            out[i, class_index("No Finding")] = 1
    return out


def test_verifier_confirms_rejects_and_merges_labels(tmp_path):
    data_dir = write_fixture(tmp_path, [MAIN])
    ds, report, builder = build(tmp_path, data_dir, verifier=keyword_verifier)
    row = ds[0]
    # "Cardiomegaly." confirms Cardiomegaly; "Calcified granuloma ..." gives no Lung Lesion (rejected,
    # boxes kept class-less); "Possible atelectasis ..." is uncertain (3), which does not confirm.
    assert row["boxes"] == [
        box(64, 64, 192, 128, ["Cardiomegaly"], "cardiac"),
        box(0, 0, 32, 32, [], "aortic"),
        box(128, 0, 160, 32, [], "unspecified"),
        box(224, 96, 256, 128, [], "unspecified"),
        box(0, 64, 64, 96, [], "pleural"),
        box(192, 0, 224, 32, [], "left base"),
    ]
    # Merged over the report sentences (1 > 3 > 2 > 0): Cardiomegaly 1; Atelectasis 3 (possible);
    # Pleural Effusion: 2 ("No pleural effusion.") vs 1 ("... without effusion." has the keyword) -> 1;
    # No Finding 0 since classes are positive.
    assert row["labels"] == codes(Cardiomegaly=1, Atelectasis=3, Pleural_Effusion=1)
    verification = report.notes["verification"]
    assert verification["confirmed"] == {"Cardiomegaly": 1}
    assert verification["rejected"] == {"Lung Lesion": 1, "Atelectasis": 1}
    assert verification["rejected_boxes"] == {"Lung Lesion": 2, "Atelectasis": 1}
    assert report.notes["verified"] is True
    assert report.notes["verifier"] == builder.config.verifier_name == f"{__name__}:keyword_verifier"


def test_verifier_negative_sentences_give_negative_codes(tmp_path):
    study = {"ImageID": "neg.png", "findings": [
        finding("No pleural effusion.", abnormal=False),
        finding("Aortic elongation.", ["aortic elongation"], [[0.0, 0.0, 0.5, 0.5]]),
    ]}
    data_dir = write_fixture(tmp_path, [study])
    ds, _, _ = build(tmp_path, data_dir, verifier=keyword_verifier)
    # Only a negative and a class-less finding: No Finding is positive.
    assert ds[0]["labels"] == codes(Pleural_Effusion=2, No_Finding=1)
    ds, _, _ = build(tmp_path, data_dir)
    assert ds[0]["labels"] == codes(No_Finding=1)


def test_verifier_cache_identity(tmp_path):
    data_dir = write_fixture(tmp_path, [MAIN])
    _, _, plain = build(tmp_path, data_dir)
    VERIFIER_CALLS.clear()
    _, _, first = build(tmp_path, data_dir, verifier=keyword_verifier)
    assert len(VERIFIER_CALLS) == 1  # one batched call over the unique sentences
    assert len(VERIFIER_CALLS[0]) == len(set(VERIFIER_CALLS[0]))
    _, report, again = build(tmp_path, data_dir, verifier=keyword_verifier)
    assert len(VERIFIER_CALLS) == 1  # second build read the cache
    assert report.notes["verification"]["confirmed"] == {"Cardiomegaly": 1}
    assert first.config_id == again.config_id != plain.config_id
    # A string (the form a config or the command line uses) is a registered verifier name, never an
    # import path: a config cannot make the builder call an arbitrary function.
    from shovir.data.padchest_gr import VERIFIERS

    VERIFIERS.register("test-keywords", keyword_verifier, source="test")
    _, _, by_string = build(tmp_path, data_dir, verifier="test-keywords")
    assert by_string.config.verifier_name == "test-keywords"
    with pytest.raises(ValueError, match="is not registered"):
        build(tmp_path, data_dir, verifier=f"{__name__}:keyword_verifier")


def test_verifier_without_stable_name(tmp_path):
    data_dir = write_fixture(tmp_path, [MAIN])
    anonymous = lambda sentences: keyword_verifier(sentences)  # noqa: E731
    with pytest.raises(ValueError, match="verifier_name="):
        PadChestGR(data_dir=str(data_dir), cache_dir=str(tmp_path / "cache"), verifier=anonymous)
    ds, _, builder = build(tmp_path, data_dir, verifier=anonymous, verifier_name="keywords-v1")
    assert builder.config.verifier_name == "keywords-v1"
    assert verifier_name(keyword_verifier) == f"{__name__}:keyword_verifier"
    # A name without the verifier cannot build.
    with pytest.raises(ValueError, match="no verifier was given"):
        build(tmp_path / "other", data_dir, verifier_name="keywords-v2")


class NamedVerifier:
    """A labeler-like object: the Labeler protocol's ``name`` joins its class in the cache name."""

    name = "keywords"

    def __call__(self, sentences):
        return keyword_verifier(sentences)


def test_verifier_name_of_labeler_objects():
    assert verifier_name(NamedVerifier()) == f"{__name__}:NamedVerifier[keywords]"


def bad_shape_verifier(sentences):
    return np.zeros((len(sentences) + 1, len(CLASSES)), dtype=int)


def test_verifier_output_is_checked(tmp_path):
    data_dir = write_fixture(tmp_path, [MAIN])
    with pytest.raises(ValueError, match="bad_shape_verifier returned"):
        build(tmp_path, data_dir, verifier=bad_shape_verifier)


# -- class frequency filter -----------------------------------------------------------------------


def two_class_studies():
    cardio = finding("Cardiomegaly.", ["cardiomegaly"], [[0.25, 0.5, 0.75, 1.0]], ["cardiac"])
    nodule = finding("Nodule in the right upper lobe.", ["nodule"], [[0.5, 0.0, 0.625, 0.25]], ["right upper lobe"])
    return [
        {"ImageID": "c1.png", "findings": [cardio]},
        {"ImageID": "c2.png", "findings": [cardio, nodule]},
        {"ImageID": "n1.png", "findings": [nodule]},
        {"ImageID": "n2.png", "findings": [nodule, nodule]},  # two boxes, still one image
        {"ImageID": "x1.png", "findings": [finding("Scoliosis.", ["scoliosis"], [[0.0, 0.0, 1.0, 1.0]])]},
    ]


def test_min_images_per_class_drops_rare_classes(tmp_path):
    data_dir = write_fixture(tmp_path, two_class_studies())
    # Cardiomegaly is in 2 images (c1, c2), Lung Lesion in 3 (c2, n1, n2): with 3 Cardiomegaly goes.
    ds, report, _ = build(tmp_path, data_dir, min_images_per_class=3)
    rows = {row["image_id"]: row for row in ds}
    assert rows["c1.png"]["boxes"] == [box(64, 64, 192, 128, [], "cardiac")]
    assert [b["classes"] for b in rows["c2.png"]["boxes"]] == [[], ["Lung Lesion"]]
    assert rows["c1.png"]["labels"] == codes(Cardiomegaly=1)  # the finding is still in the image
    notes = report.notes
    assert notes["class_images"] == {"before": {"Cardiomegaly": 2, "Lung Lesion": 3}, "after": {"Lung Lesion": 3}}
    assert notes["dropped_classes"] == ["Cardiomegaly"]
    assert notes["class_boxes_after"] == {"Lung Lesion": 4}
    assert notes["images_with_class_box"] == 3
    assert len(ds) == 5

    ds, report, _ = build(tmp_path, data_dir, min_images_per_class=3, require_classes=True)
    assert sorted(ds["image_id"]) == ["c2.png", "n1.png", "n2.png"]
    assert dict(report.skipped) == {"no_class_box": 2}
    assert (report.read, report.kept) == (5, 3)

    pairs, _, _ = build(tmp_path, data_dir, min_images_per_class=3, rows="pairs")
    assert sorted(pairs["sample_id"]) == ["c2.png::Lung Lesion", "n1.png::Lung Lesion", "n2.png::Lung Lesion"]


def test_default_min_images_is_40(tmp_path):
    data_dir = write_fixture(tmp_path, two_class_studies())
    builder = PadChestGR(data_dir=str(data_dir), cache_dir=str(tmp_path / "cache"))
    assert builder.config.min_images_per_class == 40
    builder.download_and_prepare()
    assert builder.build_report.notes["dropped_classes"] == ["Cardiomegaly", "Lung Lesion"]
    assert builder.build_report.notes["class_images"]["after"] == {}


# -- pairs: IoU filter on converted boxes ----------------------------------------------------------


def test_pair_rows_iou_filter(tmp_path):
    # Pixel boxes on 256x128: A [0,0,10,10] Cardiomegaly; B [7,0,20,10] Atelectasis (IoU 30/200 = 0.15);
    # C [5,0,15,10] Pleural Effusion (IoU 50/150); D [100,50,120,70] Lung Lesion (IoU 0);
    # E [200,0,210,10] class-less (aortic elongation): never disease, never context.
    u, v = 1 / WIDTH, 1 / HEIGHT
    study = {"ImageID": "pairs.png", "findings": [
        finding("Cardiomegaly.", ["cardiomegaly"], [[0, 0, 10 * u, 10 * v]], ["heart"]),
        finding("Atelectasis.", ["atelectasis"], [[7 * u, 0, 20 * u, 10 * v]], ["lung"]),
        finding("Pleural effusion.", ["pleural effusion"], [[5 * u, 0, 15 * u, 10 * v]], ["pleura"]),
        finding("Nodule.", ["nodule"], [[100 * u, 50 * v, 120 * u, 70 * v]], ["lobe"]),
        finding("Aortic elongation.", ["aortic elongation"], [[200 * u, 0, 210 * u, 10 * v]], ["aorta"]),
    ]}
    data_dir = write_fixture(tmp_path, [study])
    a = box(0, 0, 10, 10, ["Cardiomegaly"], "heart")
    b = box(7, 0, 20, 10, ["Atelectasis"], "lung")
    d = box(100, 50, 120, 70, ["Lung Lesion"], "lobe")
    for inclusive, expected in ((False, [d]), (True, [b, d])):
        ds, _, _ = build(tmp_path, data_dir, rows="pairs", iou_inclusive=inclusive)
        rows = {row["sample_id"]: row for row in ds}
        assert sorted(rows) == sorted(f"pairs.png::{c}" for c in ("Cardiomegaly", "Atelectasis", "Pleural Effusion", "Lung Lesion"))
        cardio = rows["pairs.png::Cardiomegaly"]
        assert cardio["disease_boxes"] == [a]
        assert cardio["context_boxes"] == expected
        assert cardio["labels"] == codes(Cardiomegaly=1, Atelectasis=1, Pleural_Effusion=1, Lung_Lesion=1)


# -- ids, sources, tolerance ---------------------------------------------------------------------


def test_master_table_fills_patient_ids(tmp_path):
    studies = [dict(MAIN), {"ImageID": "other.png", "findings": MAIN["findings"][1:2]}]
    data_dir = write_fixture(tmp_path, studies)
    (data_dir / "master_table.csv").write_text(
        "ImageID,StudyID,PatientID,label\n"
        "img_main.png,table-study,patient-1,cardiomegaly\n"
        "img_main.png,table-study,patient-1,nodule\n"
        "other.png,study-2,patient-2,cardiomegaly\n"
    )
    ds, report, _ = build(tmp_path, data_dir)
    ids = {row["image_id"]: (row["patient_id"], row["study_id"]) for row in ds}
    # The JSON's StudyID wins over the table's; PatientID comes from the table.
    assert ids == {"img_main.png": ("patient-1", "study-main"), "other.png": ("patient-2", "study-2")}
    assert report.notes["master_table"] == str(data_dir / "master_table.csv")


def test_grounded_reports_discovery(tmp_path):
    data_dir = write_fixture(tmp_path, [MAIN])
    (data_dir / "grounded_reports_20240819.json").rename(data_dir / "reports.json")
    with pytest.raises(FileNotFoundError, match="found none"):
        build(tmp_path, data_dir)
    ds, report, _ = build(tmp_path, data_dir, grounded_reports=str(data_dir / "reports.json"))
    assert len(ds) == 1 and report.notes["grounded_reports"] == str(data_dir / "reports.json")
    for name in ("grounded_reports_1.json", "grounded_reports_2.json"):
        (data_dir / name).write_text("[]")
    with pytest.raises(FileNotFoundError, match="grounded_reports_1.json, grounded_reports_2.json"):
        build(tmp_path, data_dir)


def test_image_dir_option(tmp_path):
    data_dir = write_fixture(tmp_path, [MAIN], images=set())
    write_png16(tmp_path / "pngs" / "img_main.png")
    ds, _, _ = build(tmp_path, data_dir, image_dir=str(tmp_path / "pngs"))
    assert len(ds) == 1
    with pytest.raises(FileNotFoundError, match="image_dir"):
        build(tmp_path, data_dir, image_dir=str(tmp_path / "nowhere"))


def test_float_noise_at_the_border_is_tolerated(tmp_path):
    study = {"ImageID": "edge.png", "findings": [finding("Cardiomegaly.", ["cardiomegaly"], [[0.5, 0.5, 1.0000000001, 1.0]])]}
    data_dir = write_fixture(tmp_path, [study])
    ds, _, _ = build(tmp_path, data_dir)
    assert ds[0]["boxes"] == [box(128, 64, 256, 128, ["Cardiomegaly"], "unspecified")]


def test_mapping_resource_has_69_labels():
    mapping, unmapped = load_padchest_mapping()
    assert len(mapping) == 69 and len(unmapped) == 85
    assert set(mapping.values()) <= set(CLASSES[:-1]) and "Pneumonia" not in mapping.values()
    assert not set(mapping) & unmapped


def test_labels_outside_the_mapping_file_are_counted(tmp_path):
    study = {"ImageID": "new.png", "findings": [finding("Odd thing.", ["brand new label"], [[0.0, 0.0, 0.5, 0.5]])]}
    data_dir = write_fixture(tmp_path, [study])
    ds, report, _ = build(tmp_path, data_dir)
    assert ds[0]["boxes"] == [box(0, 0, 128, 64, [], "unspecified")]
    assert report.notes["labels_not_in_mapping_file"] == {"brand new label": 1}


# -- errors: each kind under on_error="raise" and "skip" -----------------------------------------

BAD = "bad_image_0001.png"
GOOD = {"ImageID": "good.png", "findings": [finding("Cardiomegaly.", ["cardiomegaly"], [[0.25, 0.5, 0.75, 1.0]])]}


def bad_study(boxes=([0.25, 0.5, 0.75, 1.0],), image_id=BAD, **fields):
    study = {"ImageID": image_id, "findings": [finding("Cardiomegaly.", ["cardiomegaly"], list(boxes))]}
    study.update(fields)
    return study


ERROR_CASES = {
    # reason: (bad study, how to write its image)
    "missing_image": (bad_study(), None),
    "unreadable_image": (bad_study(), "garbage"),
    "box_outside_image": (bad_study([[0.5, 0.5, 1.5, 0.9]]), "png"),
    "degenerate_box": (bad_study([[0.5, 0.5, 0.5, 0.9]]), "png"),
    "malformed_box": (bad_study([[0.1, 0.2, 0.3]]), "png"),
    "path_outside_root": (bad_study(image_id=f"../{BAD}"), "outside"),
    "malformed_entry": (bad_study(findings={"not": "a list"}), "png"),
    "duplicate_image_id": (bad_study(image_id="good.png"), None),
}


def write_error_fixture(tmp_path: Path, reason: str) -> Path:
    study, image = ERROR_CASES[reason]
    data_dir = write_fixture(tmp_path, [GOOD, study], images={"good.png"})
    if image == "png":
        write_png16(data_dir / BAD)
    elif image == "garbage":
        (data_dir / BAD).write_bytes(b"\x89PNG but not really an image")
    elif image == "outside":
        write_png16(tmp_path / BAD)
    return data_dir


@pytest.mark.parametrize("reason", sorted(ERROR_CASES))
def test_error_raise_names_the_item(tmp_path, reason):
    data_dir = write_error_fixture(tmp_path, reason)
    expected = FileNotFoundError if reason == "missing_image" else ValueError
    with pytest.raises(expected) as info:
        build(tmp_path, data_dir)
    assert (BAD if reason != "duplicate_image_id" else "good.png") in str(info.value)


@pytest.mark.parametrize("reason", sorted(ERROR_CASES))
def test_error_skip_counts_by_reason(tmp_path, reason):
    data_dir = write_error_fixture(tmp_path, reason)
    ds, report, _ = build(tmp_path, data_dir, on_error="skip")
    assert ds["image_id"] == ["good.png"]
    assert (report.read, report.kept, dict(report.skipped)) == (2, 1, {reason: 1})


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_unknown_chexpert_class_in_mapping_is_a_config_error(tmp_path, on_error):
    # PadChest labels outside the mapping are class-less boxes, not errors (tested above); an
    # unknown *CheXpert* class can only come from a mapping file, which is checked as a whole.
    data_dir = write_fixture(tmp_path, [GOOD])
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps({"mapping": {"cardiomegaly": "Cardiomegaly", "pleural effusion": "Effusion"}}))
    with pytest.raises(ValueError, match="label 'pleural effusion': unknown CheXpert class 'Effusion'"):
        build(tmp_path, data_dir, mapping_file=str(mapping), on_error=on_error)


def test_bad_options():
    with pytest.raises(ValueError, match="report_sentences"):
        PadChestGR(report_sentences="some")
    with pytest.raises(ValueError, match="min_images_per_class"):
        PadChestGR(min_images_per_class=-1)


# -- command line export ----------------------------------------------------------------------


def test_export_embeds_16_bit_png_bytes(tmp_path):
    from shovir.data.padchest_gr import VERIFIERS

    VERIFIERS.register("test-keywords", keyword_verifier, source="test")
    data_dir = write_fixture(tmp_path, [MAIN, GOOD])
    out = tmp_path / "out"
    assert main("padchest_gr", [
        "--data-dir", str(data_dir), "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--rows", "pairs",
        "--set", "min_images_per_class=0", "--set", "verifier=test-keywords",
    ]) == 0
    table = pq.read_table(out / "padchest_gr" / "test.parquet")
    # MAIN keeps only Cardiomegaly after verification; GOOD has Cardiomegaly.
    assert sorted(table.column("sample_id").to_pylist()) == ["good.png::Cardiomegaly", "img_main.png::Cardiomegaly"]
    for image_id, image in zip(table.column("image_id").to_pylist(), table.column("image").to_pylist()):
        assert image["bytes"] == (data_dir / image_id).read_bytes()
        with Image.open(io.BytesIO(image["bytes"])) as decoded:
            assert decoded.mode == "I;16"
    report = json.loads((out / "padchest_gr.build_report.json").read_text())
    assert report["notes"]["verifier"] == "test-keywords"
