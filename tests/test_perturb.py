"""Known-answer tests of the interventions (ShoViR §3.2; Beyond Accuracy §3.3; ModaLens §2)."""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from shovir.perturb import (
    AUTHORS_PADCHEST_BOX_SIZES,
    Condition,
    EmpiricalBoxSizes,
    ImageSubstitution,
    NoiseModel,
    blank,
    doco,
    full_noise,
    noise_statistics,
    occluded_area,
    oco,
    plan_area_matched_boxes,
    plan_random_boxes,
    ro,
    sample_rng,
    shuffle_pairs,
    swap_pairs,
)
from shovir.perturb._image import finish

SIZES = EmpiricalBoxSizes(((0.2, 0.25),))


def _cxr_like(height: int = 96, width: int = 80, dtype: type = np.uint8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    top = 255 if dtype == np.uint8 else 60000
    base = np.linspace(0.2, 0.8, width)[None, :] * np.linspace(0.5, 1.0, height)[:, None]
    values = base * top + rng.normal(0, top * 0.05, (height, width))
    return np.clip(values, 0, top).round().astype(dtype)


# -- statistics -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_noise_statistics_match_numpy_percentile_trimming(dtype):
    image = _cxr_like(dtype=dtype if dtype != np.float32 else np.uint16).astype(dtype)
    values = image.astype(np.float64).ravel()
    low, high = np.percentile(values, [1, 99])
    kept = values[(values >= low) & (values <= high)]
    stats = noise_statistics(image)
    assert stats.low == pytest.approx(low, abs=1e-6)
    assert stats.high == pytest.approx(high, abs=1e-6)
    assert stats.n_pixels == kept.size
    assert stats.center == pytest.approx(kept.mean(), rel=1e-9)
    assert stats.scale == pytest.approx(kept.std(), rel=1e-9)
    median = noise_statistics(image, model=NoiseModel(center="median"))
    assert median.center == pytest.approx(np.median(kept))


def test_noise_statistics_exclude_the_masked_pixels():
    image = np.full((20, 20), 10, np.uint8)
    image[:5, :5] = 250  # a bright finding
    mask = np.zeros_like(image, dtype=bool)
    mask[:5, :5] = True
    assert noise_statistics(image, exclude=mask).center == 10
    assert noise_statistics(image).center > 10


# -- full noise -------------------------------------------------------------------------------


def test_full_noise_matches_trimmed_statistics_and_removes_structure():
    image = _cxr_like(256, 256)
    stats = noise_statistics(image)
    noisy = full_noise(image, sample_rng(3, "img", "full_noise"))
    assert noisy.shape == image.shape and noisy.dtype == np.uint8
    assert float(noisy.mean()) == pytest.approx(stats.center, abs=0.5)
    assert float(noisy.std()) == pytest.approx(stats.scale, rel=0.03)
    # no left-to-right gradient survives: column means are flat
    columns = noisy.mean(axis=0)
    assert abs(np.corrcoef(np.arange(columns.size), columns)[0, 1]) < 0.2


def test_full_noise_sixteen_bit_large_image_has_no_overflow():
    rng = np.random.default_rng(1)
    image = np.clip(rng.normal(64500, 800, (3000, 3000)), 0, 65535).astype(np.uint16)
    noisy = full_noise(image, 7)
    assert noisy.dtype == np.uint16 and noisy.shape == (3000, 3000)
    assert int(noisy.min()) > 55000  # clipped at 65535, never wrapped around to 0
    assert int(noisy.max()) <= 65535


def test_full_noise_keeps_pil_modes():
    gray = Image.fromarray(_cxr_like(), mode="L")
    assert full_noise(gray, 0).mode == "L"
    sixteen = Image.new("I;16", (40, 30))
    sixteen.frombytes(_cxr_like(30, 40, np.uint16).astype("<u2").tobytes())
    out = full_noise(sixteen, 0)
    assert out.mode == "I;16" and out.size == (40, 30)
    rgb = gray.convert("RGB")
    out = np.asarray(full_noise(rgb, 0))
    assert out.shape == (96, 80, 3)
    assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()  # one channel, broadcast


# -- box occlusion ----------------------------------------------------------------------------


def test_p_zero_returns_input_byte_for_byte():
    image = _cxr_like()
    box = [{"x_min": 10, "y_min": 10, "x_max": 40, "y_max": 50}]
    assert oco(image, box, 0.0, 1).tobytes() == image.tobytes()
    assert ro(image, box, 0.0, 1, SIZES).tobytes() == image.tobytes()
    pil = Image.fromarray(image).convert("RGB")
    pil.putpixel((0, 0), (255, 0, 0))  # a coloured pixel must survive p = 0
    assert oco(pil, box, 0.0, 1).tobytes() == pil.tobytes()
    assert Condition("doco", p=0.0)(_batch(image))["image"][0].tobytes() == image.tobytes()


def test_oco_changes_only_the_union_of_boxes():
    image = _cxr_like()
    boxes = [(10, 10, 30, 40), (25, 35, 60, 70)]
    out = oco(image, boxes, 1.0, 5)
    changed = out != image
    mask = np.zeros_like(changed)
    mask[10:40, 10:30] = True
    mask[35:70, 25:60] = True
    assert not changed[~mask].any()
    assert changed[mask].mean() > 0.9
    assert occluded_area(boxes, *image.shape) == int(mask.sum())


def test_blend_is_linear_in_p_with_rounding():
    image = _cxr_like()
    box = [(8, 8, 48, 48)]
    full = oco(image, box, 1.0, 11).astype(np.float64)  # the (clipped, rounded) noise itself
    half = oco(image, box, 0.5, 11).astype(np.float64)  # same key: same noise field
    expected = image.astype(np.float64) + 0.5 * (full - image)
    assert np.abs(half - expected)[8:48, 8:48].max() <= 1.0


def test_integer_casts_round_instead_of_truncating():
    image = np.full((10, 10), 255, np.uint8)
    image[2:6, 2:6] = 0  # outside pixels are all 255: matched noise is exactly 255
    out = oco(image, [(2, 2, 6, 6)], 0.01, 0)
    assert out[3, 3] == 3  # 0 + 0.01 * 255 = 2.55 -> 3 (truncation would give 2)
    assert finish(np.array([2.5, 3.5]), np.dtype(np.uint8), (0, 255)).tolist() == [2, 4]


def test_authors_noise_model_blurs_and_feathers():
    image = _cxr_like(160, 160)
    box = [(50, 50, 110, 110)]
    paper = oco(image, box, 1.0, 2).astype(np.float64)
    authors = oco(image, box, 1.0, 2, NoiseModel.authors()).astype(np.float64)
    inside = (slice(60, 100), slice(60, 100))
    # a Gaussian blur of sigma = 2 divides white-noise std by 2*sqrt(pi)*sigma ~ 7.09
    ratio = paper[inside].std() / authors[inside].std()
    assert 5.5 < ratio < 8.5
    changed = authors != image
    assert changed[40:50, 60:100].any()  # feathering leaks outside the box...
    assert not changed[:30].any()  # ...but not beyond 3 sigma (18 px)


# -- random occlusion -------------------------------------------------------------------------


def test_ro_boxes_avoid_annotations_and_use_the_given_sizes():
    annotated = [{"x_min": 0, "y_min": 0, "x_max": 100, "y_max": 60}, {"x_min": 0, "y_min": 60, "x_max": 40, "y_max": 200}]
    for key in range(40):
        plan = plan_random_boxes(200, 100, annotated, sample_rng(0, f"im{key}", "ro"), SIZES)
        assert 1 <= plan.requested <= 2 and plan.placed == plan.requested
        for x0, y0, x1, y1 in plan.boxes:
            assert (x1 - x0, y1 - y0) == (20, 50)
            assert y0 >= 60 and x0 >= 40  # outside both annotated boxes


def test_ro_reports_boxes_it_cannot_place():
    everything = [{"x_min": 0, "y_min": 0, "x_max": 50, "y_max": 50}]
    plan = plan_random_boxes(50, 50, everything, np.random.default_rng(0), SIZES, n_boxes=2)
    assert (plan.requested, plan.placed, plan.complete) == (2, 0, False)
    batch = _batch(_cxr_like(50, 50), boxes=everything)
    out = Condition("ro", p=1.0, box_sizes=SIZES)(batch)
    assert out["occlusion_complete"] == [False] and out["occluded_pixels"] == [0]


@pytest.mark.parametrize("target", [1, 37, 400, 1234])
def test_area_matched_ro_covers_exactly_the_oco_area(target):
    avoid = [(0, 0, 30, 90)]
    plan = plan_area_matched_boxes(90, 90, avoid, target, np.random.default_rng(target), SIZES)
    assert plan.complete and plan.area == target
    mask = np.zeros((90, 90), int)
    for x0, y0, x1, y1 in plan.boxes:
        assert x0 >= 30
        mask[y0:y1, x0:x1] += 1
    assert mask.max() == 1 and mask.sum() == target  # disjoint pieces


def test_area_matched_ro_through_condition_matches_disease_area():
    image = _cxr_like(120, 120)
    disease = [{"x_min": 10, "y_min": 10, "x_max": 40, "y_max": 30, "classes": ["Edema"]}]
    batch = _batch(image, boxes=disease, disease_boxes=disease)
    out = Condition("ro_area", p=1.0, seed=4, box_sizes=SIZES)(batch)
    assert out["occluded_pixels"] == [600]
    changed = out["image"][0] != image
    assert not changed[10:30, 10:40].any()


# -- counterfactuals --------------------------------------------------------------------------


def test_blank_is_the_papers_gray_224_rgb_image_or_keeps_the_input_on_request():
    # Beyond Accuracy §3.3 / Algorithm 1: GrayImage(224x224), RGB [128, 128, 128], whatever the input
    for source in (Image.new("L", (4, 4), 9), Image.new("I;16", (2544, 3056)), Image.new("RGB", (640, 480))):
        paper = blank(source)
        assert (paper.mode, paper.size, paper.getextrema()) == ("RGB", (224, 224), ((128, 128),) * 3)
    assert blank(np.zeros((3, 5), np.uint16)).shape == (224, 224)
    assert (blank(np.zeros((3, 3), np.uint8), size=None) == 128).all()
    assert blank(Image.new("L", (4, 4), 9), size=None).getextrema() == (128, 128)
    assert blank(np.zeros((2, 2), np.float32), size=None)[0, 0] == pytest.approx(128 / 255)
    assert blank(np.zeros((2, 2), np.uint8), size=(3, 1)).shape == (1, 3)
    for bad in ((224,), (0, 224), (224.0, 224), "224x224", (True, 2)):
        with pytest.raises(ValueError, match=r"size must be \(width, height\)"):
            blank(np.zeros((2, 2), np.uint8), size=bad)


def test_shuffle_is_a_deterministic_derangement_independent_of_order():
    ids = [f"img{i}" for i in range(50)]
    pairs = shuffle_pairs(ids, seed=3)
    assert pairs == shuffle_pairs(list(reversed(ids)), seed=3)
    assert all(k != v for k, v in pairs.items())
    assert sorted(pairs.values()) == sorted(ids)
    assert pairs != shuffle_pairs(ids, seed=4)
    with pytest.raises(ValueError, match="at least 2"):
        shuffle_pairs(["only"])


def test_swap_prefers_same_patient_discordant_study():
    def codes(*positive):
        vector = [0] * 14
        for index in positive:
            vector[index] = 1
        return vector

    rows = [
        {"image_id": "a1", "patient_id": "A", "study_id": "s1", "labels": codes(1)},
        {"image_id": "a2", "patient_id": "A", "study_id": "s2", "labels": codes(1)},  # concordant with a1
        {"image_id": "a3", "patient_id": "A", "study_id": "s3", "labels": codes(9)},
        {"image_id": "b1", "patient_id": "B", "study_id": "s4", "labels": codes(1)},
        {"image_id": "c1", "patient_id": "C", "study_id": "s5", "labels": codes(1)},
    ]
    choices, unpaired = swap_pairs(rows, seed=0)
    assert choices["a1"].donor_id == "a3" and choices["a1"].tier == "same_patient"
    assert choices["a2"].donor_id == "a3"
    assert choices["a3"].donor_id in {"a1", "a2"}
    assert choices["b1"].donor_id == "a3" and choices["b1"].tier == "other_patient"
    assert unpaired == []
    assert swap_pairs(rows, seed=0)[0] == choices


def test_swap_ssim_guard_rejects_near_identical_images():
    pytest.importorskip("skimage")
    base = _cxr_like(64, 64)
    images = {"a1": base, "a2": base.copy(), "a3": np.ascontiguousarray(base[::-1])}
    rows = [
        {"image_id": "a1", "patient_id": "A", "study_id": "s1", "labels": [0] * 13 + [1]},
        {"image_id": "a2", "patient_id": "A", "study_id": "s2", "labels": [0, 1] + [0] * 12},
        {"image_id": "a3", "patient_id": "A", "study_id": "s3", "labels": [0, 0, 1] + [0] * 11},
    ]
    choices, _ = swap_pairs(rows, ssim_below=0.9, load_image=images.__getitem__)
    assert choices["a1"].donor_id == "a3" and choices["a1"].ssim < 0.9


def test_image_substitution_with_datasets():
    datasets = pytest.importorskip("datasets")
    images = [Image.fromarray(np.full((4, 4), v, np.uint8)) for v in (10, 20, 30)]
    ds = datasets.Dataset.from_dict({"image_id": ["x", "y", "z"], "image": images}, features=datasets.Features(
        {"image_id": datasets.Value("string"), "image": datasets.Image()}))
    pairs = shuffle_pairs(ds["image_id"], seed=0)
    shuffled = ds.with_transform(ImageSubstitution(pairs, ds, condition="shuffle"))
    for row in shuffled:
        assert row["donor_image_id"] != row["image_id"]
        assert np.asarray(row["image"])[0, 0] == {"x": 10, "y": 20, "z": 30}[row["donor_image_id"]]


# -- the datasets transform and determinism ---------------------------------------------------


def _batch(image, boxes=(), disease_boxes=(), context_boxes=(), image_id="img-1", target="Edema"):
    return {"image": [image], "image_id": [image_id], "target_class": [target], "boxes": [list(boxes)],
            "disease_boxes": [list(disease_boxes)], "context_boxes": [list(context_boxes)]}


def test_condition_parse_and_errors():
    assert Condition.parse("oco_p60") == Condition("oco", 0.6)
    assert Condition.parse("RO@0.2", box_sizes=SIZES).label == "ro_p20"
    with pytest.raises(ValueError, match="box_sizes"):
        Condition("ro")
    with pytest.raises(ValueError, match=r"p \(blending strength\)"):
        Condition("oco", p=1.5)
    with pytest.raises(ValueError, match="rows='pairs'"):
        Condition("oco").apply(_cxr_like(), {"image_id": "x"})
    with pytest.raises(ValueError, match="condition must be one of"):
        Condition("occlude")


def test_keys_depend_on_identity_not_position_or_p():
    image = _cxr_like()
    box = [{"x_min": 5, "y_min": 5, "x_max": 45, "y_max": 45}]
    a = Condition("oco", 1.0, seed=3).apply(image, {"image_id": "x", "target_class": "Edema", "disease_boxes": box})[0]
    b = Condition("oco", 1.0, seed=3).apply(image, {"image_id": "x", "target_class": "Edema", "disease_boxes": box})[0]
    c = Condition("oco", 1.0, seed=3).apply(image, {"image_id": "x", "target_class": "Cardiomegaly", "disease_boxes": box})[0]
    assert a.tobytes() == b.tobytes() and a.tobytes() != c.tobytes()
    # common random numbers across p: the p = 0.5 image is halfway to the p = 1 image
    half = Condition("oco", 0.5, seed=3).apply(image, {"image_id": "x", "target_class": "Edema", "disease_boxes": box})[0]
    assert np.abs(half.astype(float) - (image + 0.5 * (a.astype(float) - image))).max() <= 1.0
    fresh = Condition("oco", 0.5, seed=3, noise_per_p=True).apply(image, {"image_id": "x", "target_class": "Edema", "disease_boxes": box})[0]
    assert fresh.tobytes() != half.tobytes()


_DIGEST_SCRIPT = r"""
import hashlib, numpy as np
from shovir.perturb import Condition, EmpiricalBoxSizes
rng = np.random.default_rng(0)
image = rng.integers(0, 256, (64, 64), dtype=np.uint8)
box = [{"x_min": 5, "y_min": 5, "x_max": 30, "y_max": 30, "classes": ["Edema"]}]
ctx = [{"x_min": 40, "y_min": 40, "x_max": 60, "y_max": 60, "classes": ["Cardiomegaly"]}]
row = {"image_id": "img-7", "target_class": "Edema", "boxes": box + ctx, "disease_boxes": box, "context_boxes": ctx}
sizes = EmpiricalBoxSizes(((0.2, 0.2), (0.1, 0.3)))
digest = hashlib.sha256()
for name in ("full_noise", "oco", "doco", "ro", "ro_area"):
    digest.update(Condition(name, 0.6, seed=3, box_sizes=sizes).apply(image, row)[0].tobytes())
print(digest.hexdigest())
"""


def test_identical_bytes_across_processes():
    digests = {
        subprocess.run([sys.executable, "-c", _DIGEST_SCRIPT], check=True, capture_output=True, text=True,
                       env={"PYTHONHASHSEED": str(seed), "PATH": ""}).stdout.strip()
        for seed in (1, 2)
    }
    assert len(digests) == 1 and len(digests.pop()) == 64


def _perturbed_dataset():
    datasets = pytest.importorskip("datasets")
    from shovir.data import PAIR_FEATURES

    rows = []
    for i in range(6):
        image = Image.fromarray(_cxr_like(64, 64, seed=i))
        box = {"x_min": 4.0 + i, "y_min": 4.0, "x_max": 30.0, "y_max": 30.0, "classes": ["Edema"], "anatomy": "x"}
        ctx = {"x_min": 40.0, "y_min": 40.0, "x_max": 60.0, "y_max": 60.0, "classes": ["Cardiomegaly"], "anatomy": "y"}
        rows.append({"sample_id": f"im{i}::Edema", "image": image, "image_id": f"im{i}", "width": 64, "height": 64,
                     "patient_id": "P", "study_id": f"S{i}", "report": "", "labels": [0] * 14,
                     "boxes": [box, ctx], "target_class": "Edema", "disease_boxes": [box], "context_boxes": [ctx]})
    ds = datasets.Dataset.from_list(rows, features=PAIR_FEATURES)
    return ds.with_transform(Condition("ro_area", p=0.8, seed=9, box_sizes=EmpiricalBoxSizes.from_dataset(ds)))


def _collate(batch):
    return [hashlib.sha256(np.asarray(row["image"]).tobytes()).hexdigest() for row in batch]


def test_identical_bytes_through_dataloader_workers():
    torch = pytest.importorskip("torch")
    ds = _perturbed_dataset()
    direct = [hashlib.sha256(np.asarray(ds[i]["image"]).tobytes()).hexdigest() for i in range(len(ds))]
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=workers, collate_fn=_collate)
        assert [h for batch in loader for h in batch] == direct


def test_authors_box_size_constants():
    rng = np.random.default_rng(0)
    draws = np.array([AUTHORS_PADCHEST_BOX_SIZES.sample(rng) for _ in range(4000)])
    assert draws.min() >= 0.026 and draws.max() <= 0.984
    assert draws[:, 0].mean() == pytest.approx(0.226 + 0.0075, abs=0.01)  # clipping shifts the mean up a little
    assert math.isclose(float(np.median(draws[:, 1])), 0.25, abs_tol=0.015)


def test_doco_on_pil_sixteen_bit():
    image = Image.new("I;16", (64, 48))
    image.frombytes(_cxr_like(48, 64, np.uint16).astype("<u2").tobytes())
    out = doco(image, [(0, 0, 16, 16)], 1.0, 0)
    assert out.mode == "I;16"
    before, after = np.asarray(image), np.asarray(out)
    assert (before[16:] == after[16:]).all() and (before[:16, :16] != after[:16, :16]).any()


def test_noise_levels_are_the_standard_normal_to_within_the_level_spacing():
    import statistics

    from shovir.perturb.noise import normal_levels

    levels = normal_levels()
    cdf = np.array([statistics.NormalDist().cdf(float(x)) for x in levels])  # an independent CDF
    steps = np.arange(levels.size + 1) / levels.size
    kolmogorov = max(np.abs(steps[:-1] - cdf).max(), np.abs(steps[1:] - cdf).max())
    assert kolmogorov < 1.1e-5
    assert np.all(np.diff(levels) > 0) and levels[0] == -levels[-1]
    assert abs(float(levels.std()) - 1.0) < 1e-12


def test_prepared_images_give_the_bytes_of_fresh_ones_and_baseline_keeps_colour():
    from shovir.perturb import prepare

    rng = np.random.default_rng(5)
    plane = rng.integers(0, 256, (40, 48), dtype=np.uint8)
    colour = Image.fromarray(np.stack([plane, plane // 2, 255 - plane], axis=-1), "RGB")
    canvas = prepare(colour)
    for p in (0.4, 1.0):
        fresh = oco(colour, [(4, 4, 20, 30)], p, rng=9)
        again = oco(canvas, [(4, 4, 20, 30)], p, rng=9)
        assert isinstance(again, Image.Image) and again.mode == "RGB"
        assert np.array_equal(np.asarray(fresh), np.asarray(again))
    assert np.array_equal(np.asarray(full_noise(canvas, rng=2)), np.asarray(full_noise(colour, rng=2)))
    assert np.array_equal(np.asarray(Condition("oco", 0.0).apply(canvas, {"image_id": "a"})[0]), np.asarray(colour))
    assert blank(canvas).getpixel((0, 0)) == (128, 128, 128)
    assert list(canvas.memo) == ["histogram"]
