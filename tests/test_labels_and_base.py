"""The CheXpert vocabulary, box geometry and the builder base (validation, reports, safety)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from shovir import labels as L
from shovir.boxes import context_boxes, iou_matrix, union_mask
from shovir.data._base import BuildReport, GroundedBuilder, resolve_inside


def test_vocabulary_is_chexbert_head_order():
    assert L.CLASSES[0] == "Enlarged Cardiomediastinum" and L.CLASSES[-1] == "No Finding"
    assert len(L.CLASSES) == 14 and len(L.LOCALIZABLE) == 13
    assert [L.class_index(c) for c in L.TOP5] == [1, 4, 5, 7, 9]
    assert L.canonical_class("Enlarged_Cardiomediastinum") == "Enlarged Cardiomediastinum"


def test_binarisation_modes():
    codes = [[1, 2, 3, 0] + [0] * 10]
    assert L.binarize(codes)[0, :4].tolist() == [1, 0, 0, 0]
    assert L.binarize(codes, "positive")[0, :4].tolist() == [1, 0, 1, 0]
    with pytest.raises(ValueError, match="booleans"):
        L.validate_codes(np.ones((1, 14), bool))


def test_iou_and_context_split_at_the_threshold():
    a = {"x_min": 0, "y_min": 0, "x_max": 10, "y_max": 10}
    # an overlap of 30 px^2 gives IoU 30 / (100 + 100 - 30) = 0.1765 ; of 26.0869... gives 0.15 exactly
    b = {"x_min": 7, "y_min": 0, "x_max": 17, "y_max": 10}
    assert iou_matrix([a], [b])[0, 0] == pytest.approx(30 / 170)
    width = 200 * 0.15 / 1.15 / 10  # overlap width giving IoU exactly 0.15
    c = {"x_min": 10 - width, "y_min": 0, "x_max": 20 - width, "y_max": 10}
    assert iou_matrix([a], [c])[0, 0] == pytest.approx(0.15)
    boxes = [{**a, "classes": ["Edema"]}, {**b, "classes": ["Atelectasis"]}, {**c, "classes": ["Cardiomegaly"]},
             {"x_min": 50, "y_min": 50, "x_max": 60, "y_max": 60, "classes": []}]
    _, strict = context_boxes(boxes, "Edema", 0.15)
    _, inclusive = context_boxes(boxes, "Edema", 0.15 + 1e-12, inclusive=True)
    assert [x["classes"] for x in strict] == []  # 0.1765 and 0.15 are not < 0.15; class-less boxes are never context
    assert [x["classes"] for x in inclusive] == [["Cardiomegaly"]]
    assert int(union_mask([(0, 0, 2.5, 1)], 4, 4).sum()) == 3  # a fractional edge covers the touched pixel


def test_resolve_inside_refuses_escapes_and_symlinks(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    assert resolve_inside(root, "a/x.png") == (root / "a" / "x.png").resolve()
    for bad in ("../x.png", "/etc/passwd", "a/../../x.png"):
        with pytest.raises(ValueError, match="outside the data root"):
            resolve_inside(root, bad)
    os.symlink(tmp_path, root / "link")
    with pytest.raises(ValueError, match="outside the data root"):
        resolve_inside(root, "link/secret.png")


class _Toy(GroundedBuilder):
    """A two-image grounded builder for base-class tests."""

    def _image_records(self):
        image = Image.fromarray(np.zeros((20, 30), np.uint8))
        yield {"image": image, "image_id": "good", "patient_id": 1, "study_id": "s", "report": "r", "labels": [0] * 13 + [1],
               "boxes": [{"x_min": 0, "y_min": 0, "x_max": 10, "y_max": 10, "classes": ["edema"]}]}
        yield {"image": image, "image_id": "bad", "patient_id": "2", "study_id": "s", "report": "r", "labels": [0] * 13 + [1],
               "boxes": [{"x_min": 25, "y_min": 0, "x_max": 35, "y_max": 10, "classes": ["Edema"]}]}


def test_builder_reports_skips_and_reuses_its_report_from_the_cache(tmp_path):
    builder = _Toy(cache_dir=str(tmp_path), on_error="skip")
    builder.download_and_prepare()
    rows = builder.as_dataset(split="test")
    assert rows["image_id"] == ["good"] and rows[0]["boxes"][0]["classes"] == ["Edema"] and rows[0]["patient_id"] == "1"
    assert (rows[0]["width"], rows[0]["height"]) == (30, 20)
    assert builder.build_report.as_dict()["skipped"] == {"box_outside_image": 1}
    again = _Toy(cache_dir=str(tmp_path), on_error="skip")
    again.download_and_prepare()
    assert again.build_report.summary() == "kept 1 of 2; skipped: box_outside_image=1"


def test_builder_raises_the_original_error_naming_the_item(tmp_path):
    with pytest.raises(ValueError, match=r"boxes\[0\].*box_outside_image.*item 'bad'"):
        _Toy(cache_dir=str(tmp_path), on_error="raise").download_and_prepare()


@pytest.mark.parametrize("options, message", [({"on_error": "ignore"}, "on_error"), ({"rows": "cases"}, "rows"),
                                              ({"iou_threshold": 7}, "iou_threshold")])
def test_options_are_checked_even_when_datasets_sets_them(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        _Toy(config_name="pairs", cache_dir=str(tmp_path), **options)


def test_build_report_round_trip():
    report = BuildReport()
    report.read = 3
    report.skip("missing_image", "a")
    report.keep(2)
    assert BuildReport.from_dict(report.as_dict()).as_dict() == report.as_dict()
