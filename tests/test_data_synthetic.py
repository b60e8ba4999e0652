"""Known-answer tests of the synthetic chest X-ray dataset (shovir.data.synthetic / phantom).

The expectations here are written by hand from the design (module docstring of
``shovir.data.phantom``), not read back from the implementation: keyword and cue patterns,
the analytic co-occurrence formula and the locality of each finding are re-derived here.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import subprocess
import sys
from collections import Counter

import datasets
import numpy as np
import pytest
from PIL import Image

from shovir import labels as L
from shovir.boxes import iou_matrix
from shovir.data import build
from shovir.data import phantom as P
from shovir.data.export import main as export_main
from shovir.data.synthetic import SyntheticConfig, SyntheticCXR

LOCALIZED = [c for c in L.LOCALIZABLE if c != "Pneumonia"]
POSITIVE_OR_UNCERTAIN = (L.POSITIVE, L.UNCERTAIN)


def _build(tmp_path, name: str, **config):
    builder = SyntheticCXR(cache_dir=str(tmp_path / "cache" / name), **config)
    builder.download_and_prepare()
    return builder.as_dataset(split="test"), builder


def _png_bytes(dataset: datasets.Dataset) -> list[bytes]:
    raw = dataset.cast_column("image", datasets.Image(decode=False))
    return [row["image"]["bytes"] for row in raw]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """The default dataset: 200 images, seed 0, one row per image."""
    dataset, builder = _build(tmp_path_factory.mktemp("images"), "images", config_name="images", n_images=200)
    return dataset, builder.build_report


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    dataset, _ = _build(tmp_path_factory.mktemp("pairs"), "pairs", config_name="pairs", n_images=200)
    return dataset


# ---------------------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------------------


def test_same_seed_gives_identical_png_bytes_and_rows(tmp_path):
    first, _ = _build(tmp_path, "a", n_images=6, seed=3)
    second, _ = _build(tmp_path, "b", n_images=6, seed=3)
    assert _png_bytes(first) == _png_bytes(second)
    assert first.remove_columns("image").to_list() == second.remove_columns("image").to_list()


def test_different_seed_gives_different_images_and_labels(tmp_path):
    a, _ = _build(tmp_path, "s0", n_images=6, seed=0)
    b, _ = _build(tmp_path, "s1", n_images=6, seed=1)
    assert all(x != y for x, y in zip(_png_bytes(a), _png_bytes(b)))
    assert a["report"] != b["report"]


def test_first_images_do_not_depend_on_n_images(tmp_path):
    small, _ = _build(tmp_path, "n4", n_images=4)
    large, _ = _build(tmp_path, "n9", n_images=9)
    assert _png_bytes(small) == _png_bytes(large)[:4]
    assert small.remove_columns("image").to_list() == large.select(range(4)).remove_columns("image").to_list()


def test_image_bytes_are_identical_in_another_process(tmp_path):
    dataset, _ = _build(tmp_path, "here", n_images=3, seed=5)
    here = hashlib.sha256(b"".join(_png_bytes(dataset))).hexdigest()
    code = (
        "import hashlib, sys, datasets\n"
        "from shovir.data.synthetic import SyntheticCXR\n"
        "b = SyntheticCXR(cache_dir=sys.argv[1], n_images=3, seed=5)\n"
        "b.download_and_prepare()\n"
        "ds = b.as_dataset(split='test').cast_column('image', datasets.Image(decode=False))\n"
        "print(hashlib.sha256(b''.join(r['image']['bytes'] for r in ds)).hexdigest())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "other")], capture_output=True, text=True, check=True,
        env={"PYTHONHASHSEED": "12345", "HF_DATASETS_OFFLINE": "1", "PATH": "", "HOME": str(tmp_path)},
    )
    assert result.stdout.strip().splitlines()[-1] == here


def test_stable_rng_is_keyed_by_content_not_by_position():
    a = P.stable_rng(0, "labels", 7).random(3)
    assert np.array_equal(a, P.stable_rng(0, "labels", 7).random(3))
    assert not np.array_equal(a, P.stable_rng(0, "labels", 8).random(3))
    assert not np.array_equal(a, P.stable_rng(0, "noise", 7).random(3))


# ---------------------------------------------------------------------------------------------
# Ids, patients, configuration
# ---------------------------------------------------------------------------------------------


def test_ids_and_patients(images):
    dataset, report = images
    ids = dataset["image_id"]
    assert ids[:3] == ["syn-00000", "syn-00001", "syn-00002"]
    assert dataset["study_id"][:2] == ["S00000", "S00001"]
    assert all(re.fullmatch(r"P\d{4}", p) for p in dataset["patient_id"])
    # Patients take 1-4 consecutive studies, numbered in order of appearance.
    runs = Counter(dataset["patient_id"])
    assert set(runs.values()) <= {1, 2, 3, 4}
    order = list(dict.fromkeys(dataset["patient_id"]))
    assert order == [f"P{i:04d}" for i in range(len(order))]
    assert 60 <= len(runs) <= 100  # about n_images / 2.5 = 80
    assert report.notes["n_patients"] == len(runs) and report.kept == 200


def test_explicit_n_patients_deals_studies_round_robin():
    assert [P.patient_of(i, n_patients=4)[0] for i in range(9)] == [0, 1, 2, 3, 0, 1, 2, 3, 0]
    case = P.sample_case(5, n_patients=4)
    assert case.patient_id == "P0001" and case.visit == 1


@pytest.mark.parametrize(
    "options, field",
    [({"n_images": 0}, "n_images"), ({"image_size": 64}, "image_size"), ({"seed": -1}, "seed"),
     ({"n_images": 5, "n_patients": 6}, "n_patients"), ({"n_images": True}, "n_images")],
)
def test_config_rejects_bad_options(options, field):
    with pytest.raises(ValueError, match=field):
        SyntheticConfig(**options)


def test_builder_kwargs_are_validated_at_build_time(tmp_path):
    # datasets sets config kwargs with setattr, bypassing __init__; the builder checks them
    with pytest.raises(ValueError, match="n_patients"):
        SyntheticCXR(cache_dir=str(tmp_path / "cache"), n_images=3, n_patients=7)


def test_rows_match_the_public_case_api(images):
    dataset, _ = images
    row = dataset[17]
    case = P.sample_case(17)
    image, boxes = P.render_case(case, size=320)
    assert np.array_equal(np.asarray(row["image"]), image)
    assert row["image"].mode == "L" and row["image"].size == (320, 320)
    assert row["report"] == case.report and row["labels"] == list(case.labels)
    assert [(b["x_min"], b["y_min"], b["x_max"], b["y_max"], b["classes"]) for b in row["boxes"]] == [
        (b["x_min"], b["y_min"], b["x_max"], b["y_max"], b["classes"]) for b in boxes
    ]


# ---------------------------------------------------------------------------------------------
# Boxes, labels and reports
# ---------------------------------------------------------------------------------------------


def test_boxes_are_integer_and_inside_the_image(images):
    dataset, _ = images
    for row in dataset.remove_columns("image"):
        for box in row["boxes"]:
            coords = [box["x_min"], box["y_min"], box["x_max"], box["y_max"]]
            assert all(float(c).is_integer() for c in coords)
            assert 0 <= box["x_min"] < box["x_max"] <= 320 and 0 <= box["y_min"] < box["y_max"] <= 320
            assert len(box["classes"]) == 1 and box["classes"][0] in LOCALIZED
            assert box["anatomy"]


def test_label_codes_agree_with_boxes(images):
    dataset, _ = images
    pneumonia, consolidation = L.class_index("Pneumonia"), L.class_index("Consolidation")
    for row in dataset.remove_columns("image"):
        codes = row["labels"]
        boxed = {b["classes"][0] for b in row["boxes"]}
        for c, name in enumerate(L.LOCALIZABLE):
            if name in boxed:
                assert codes[c] in POSITIVE_OR_UNCERTAIN, (row["image_id"], name)
            elif name != "Pneumonia":
                assert codes[c] != L.POSITIVE and codes[c] != L.UNCERTAIN, (row["image_id"], name)
        if codes[pneumonia] in POSITIVE_OR_UNCERTAIN:  # report-only, always with its consolidation
            assert codes[consolidation] in POSITIVE_OR_UNCERTAIN
        # CheXpert rule: No Finding unless a class other than Support Devices is positive/uncertain.
        pathologies = [code for name, code in zip(L.CLASSES[:-1], codes[:-1]) if name != "Support Devices"]
        no_finding = not any(code in POSITIVE_OR_UNCERTAIN for code in pathologies)
        assert codes[-1] == (L.POSITIVE if no_finding else L.BLANK)
        abnormal_boxes = boxed - {"Support Devices"}
        assert (codes[-1] == L.POSITIVE) == (not abnormal_boxes and codes[pneumonia] not in POSITIVE_OR_UNCERTAIN)


# Hand-written patterns: the words that name each class in the templates, and the cues.
KEYWORDS = {
    "Enlarged Cardiomediastinum": r"mediastin",
    "Cardiomegaly": r"cardiomegaly|\bheart\b|\bcardiac\b",
    "Lung Opacity": r"opacit",
    "Lung Lesion": r"nodul|\bmass(es)?\b",
    "Edema": r"\bedema\b",
    "Consolidation": r"consolidat",
    "Pneumonia": r"pneumonia",
    "Atelectasis": r"atelectasis",
    "Pneumothorax": r"pneumothorax",
    "Pleural Effusion": r"effusion",
    "Pleural Other": r"pleural thickening",
    "Fracture": r"fracture",
    "Support Devices": r"pacemaker|\bport\b|endotracheal tube|\bdevices\b",
}
NEGATION = re.compile(r"\b(no|not|normal)\b", re.I)
UNCERTAINTY = re.compile(r"\b(possible|questionable|may|borderline|concerning for)\b", re.I)


def _sentences(report: str) -> list[str]:
    assert report.startswith("FINDINGS: ") and " IMPRESSION: " in report
    return [s for s in re.split(r"(?<=\.)\s+", report) if s]


def test_report_mentions_agree_with_codes(images):
    dataset, _ = images
    seen = Counter()
    for row in dataset.remove_columns("image"):
        sentences = _sentences(row["report"])
        for name, pattern in KEYWORDS.items():
            code = row["labels"][L.class_index(name)]
            hits = [s for s in sentences if re.search(pattern, s, re.I)]
            if code == L.BLANK:
                assert not hits, (row["image_id"], name, hits)
                continue
            assert hits, (row["image_id"], name, code, row["report"])
            for sentence in hits:
                negated, uncertain = bool(NEGATION.search(sentence)), bool(UNCERTAINTY.search(sentence))
                assert (negated, uncertain) == {L.POSITIVE: (False, False), L.NEGATIVE: (True, False),
                                                L.UNCERTAIN: (False, True)}[code], (row["image_id"], name, sentence)
            seen[code] += 1
    # All three kinds of mention occur in the default dataset.
    assert seen[L.POSITIVE] > 300 and seen[L.NEGATIVE] > 150 and seen[L.UNCERTAIN] > 20
    no_finding = [r for r in dataset["labels"] if r[-1] == L.POSITIVE]
    assert 0.1 < len(no_finding) / len(dataset) < 0.35


def test_phantom_keywords_cover_the_test_patterns():
    """The module's published keyword patterns find the same classes as the hand-written ones."""
    for i in range(60):
        case = P.sample_case(i)
        for name, pattern in P.CLASS_KEYWORDS.items():
            mine = bool(re.search(KEYWORDS[name], case.report, re.I))
            assert bool(re.search(pattern, case.report, re.I)) == mine, (i, name)


def test_every_localised_finding_has_enough_pairs(images):
    dataset, report = images
    per_class = Counter(name for row in dataset["boxes"] for name in {b["classes"][0] for b in row})
    for name in LOCALIZED:
        assert per_class[name] >= 15, (name, per_class[name])
    assert "Pneumonia" not in per_class and "No Finding" not in per_class
    assert report.notes["images_with_box"] == {name: per_class[name] for name in L.LOCALIZABLE if per_class[name]}


# ---------------------------------------------------------------------------------------------
# Co-occurrence structure
# ---------------------------------------------------------------------------------------------


def test_analytic_cooccurrence_hand_checked():
    weights = {s.name: s.weight for s in P.SCENARIOS}
    s = P.SPORADIC_RATE["Consolidation"]
    abnormal_without_infection = sum(w for n, w in weights.items() if n not in ("normal", "infection"))
    # Pneumonia occurs only in infection (0.8), where consolidation is certain.
    expected = weights["infection"] * 0.8 / (weights["infection"] + abnormal_without_infection * s)
    m = P.cooccurrence_matrix()
    assert m[L.class_index("Consolidation"), L.class_index("Pneumonia")] == pytest.approx(expected, abs=1e-12)
    assert P.conditional_probability("Pneumonia", ["Consolidation"]) == pytest.approx(expected, abs=1e-12)
    # Cardiomegaly is certain in heart failure: P(Cardiomegaly | Edema) = sum_k w_k q_kE q_kC / sum_k w_k q_kE.
    q = lambda p: 1 - (1 - p) * (1 - s)  # noqa: E731
    hf, other = weights["heart_failure"], 1 - weights["normal"] - weights["heart_failure"]
    expected = (hf * q(0.8) * 1.0 + other * s * s) / (hf * q(0.8) + other * s)
    assert m[L.class_index("Edema"), L.class_index("Cardiomegaly")] == pytest.approx(expected, abs=1e-12)
    assert np.allclose(np.diag(m), 1.0)
    devices, nf = L.class_index("Support Devices"), L.class_index("No Finding")
    pathologies = [c for c in range(nf) if c != devices]
    assert m[nf, pathologies].max() == 0.0 and m[pathologies, nf].max() == 0.0  # No Finding excludes them
    # ... but not devices (CheXpert rule). Every abnormal scenario except post-operative contains a
    # certain pathology, so device-only studies come from post-operative studies without
    # atelectasis (0.7), effusion (0.4), pneumothorax (0.3) or any of the 11 sporadic pathologies.
    postop = weights["postoperative_icu"]
    device_only = postop * (0.3 * 0.6 * 0.7) * (1 - s) ** 11
    marginals = P.marginal_probabilities()
    assert marginals["No Finding"] == pytest.approx(weights["normal"] + device_only, abs=1e-12)
    assert marginals["Support Devices"] == pytest.approx(postop + (1 - weights["normal"] - postop) * s, abs=1e-12)
    assert m[devices, nf] == pytest.approx(device_only / marginals["Support Devices"], abs=1e-12)
    for target, given in P.CONTEXT_DERIVABLE.items():  # context-derivable: strongly predicted
        assert P.conditional_probability(target, given) > 0.6 > 3 * marginals[target]


def _check_conditionals(presence: np.ndarray, design_effect: float) -> int:
    """Compare empirical P(B | A) with the analytic matrix; returns the number of cells checked.

    The tolerance is 4.5 standard errors of a proportion from n_A draws, inflated by the design
    effect for correlated draws: sqrt(deff * p (1 - p) / n_A). With ~180 cells, a correct sampler
    exceeds it with probability ~1e-3 (and the seeds are fixed); a wrong scenario probability of
    0.1 or more in any frequent cell is caught.
    """
    analytic = P.cooccurrence_matrix()
    checked = 0
    for a in range(L.NUM_CLASSES):
        rows = presence[:, a]
        n_a = int(rows.sum())
        assert n_a > 100, L.CLASSES[a]
        for b in range(L.NUM_CLASSES):
            p = analytic[a, b]
            empirical = presence[rows, b].mean()
            tolerance = 4.5 * math.sqrt(design_effect * max(p * (1 - p), 1e-4) / n_a)
            assert abs(empirical - p) <= tolerance, (L.CLASSES[a], L.CLASSES[b], empirical, p)
            checked += 1
    return checked


def test_sampled_label_sets_match_the_analytic_cooccurrence():
    # Independent label sets from the scenario mixture (no rendering).
    assert _check_conditionals(P.sample_presence(3000, rng=np.random.default_rng(11)), design_effect=1.0) == 196


def test_dataset_labels_match_the_analytic_cooccurrence():
    # The dataset's own label stream: studies of a patient share a scenario, so draws are
    # correlated in clusters of 1-4 (mean 2.5); the design effect is at most E[m^2]/E[m] = 3.
    presence = P.dataset_presence(3000, seed=0)
    assert _check_conditionals(presence, design_effect=3.0) == 196
    assert np.array_equal(presence[:50], P.dataset_presence(50, seed=0))


# ---------------------------------------------------------------------------------------------
# Locality, anatomy and pairs
# ---------------------------------------------------------------------------------------------


def _cases_covering_every_kind(limit: int = 400) -> list[tuple[P.Case, int]]:
    wanted, chosen = set(), []
    kinds = {"heart", "mediastinum", "effusion", "compressive", "pneumothorax", "nodule", "consolidation",
             "opacity", "edema", "plate", "thickening", "fracture", "pacemaker", "port", "ett"}
    for index in range(limit):
        case = P.sample_case(index)
        for k, spec in enumerate(case.specs):
            if spec.kind not in wanted:
                wanted.add(spec.kind)
                chosen.append((case, k))
        if wanted == kinds:
            return chosen
    raise AssertionError(f"kinds never drawn: {kinds - wanted}")


def test_each_finding_changes_the_image_only_inside_its_box():
    for case, k in _cases_covering_every_kind():
        full, boxes = P.render_case(case, size=320)
        without, _ = P.render_case(case, size=320, exclude=[k])
        diff = np.abs(full.astype(np.int16) - without.astype(np.int16))
        box = boxes[k]
        inside = np.zeros(diff.shape, dtype=bool)
        inside[box["y_min"]:box["y_max"], box["x_min"]:box["x_max"]] = True
        spec = case.specs[k]
        label = (case.image_id, spec.kind)
        assert diff[~inside].max() == 0, label  # same anatomy and noise: nothing changes outside
        # Strong local evidence: several times the acquisition noise (sigma <= ~5 gray levels).
        assert np.percentile(diff[inside], 90) >= (10 if spec.subtle else 15), label
        assert diff[inside].mean() >= 2.0, label
        # The box is tight: the changed pixels reach (nearly) all four sides.
        ys, xs = np.nonzero(diff)
        changed = [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
        reference = np.array([[box["x_min"], box["y_min"], box["x_max"], box["y_max"]]])
        assert iou_matrix(np.array([changed]), reference)[0, 0] > 0.8, label
        # Other boxes of the image are untouched by leaving this finding out.
        assert [b for i, b in enumerate(boxes) if i != k] == P.render_case(case, size=320, exclude=[k])[1]


def test_same_patient_studies_share_anatomy():
    cases = [P.sample_case(i) for i in range(40)]
    renders = np.stack([
        P.render(c.anatomy, [], 160, P.stable_rng(c.seed, "noise", c.index))[0].astype(float).ravel() for c in cases
    ])
    corr = np.corrcoef(renders)
    patient = np.array([c.patient for c in cases])
    same = (patient[:, None] == patient[None, :]) & ~np.eye(len(cases), dtype=bool)
    different = patient[:, None] != patient[None, :]
    assert same.any()
    assert corr[same].mean() > corr[different].mean() + 0.03
    np.fill_diagonal(corr, -1.0)
    nearest = corr.argmax(axis=1)
    with_sibling = [i for i in range(len(cases)) if same[i].any()]
    assert np.mean([patient[nearest[i]] == patient[i] for i in with_sibling]) >= 0.7
    # Patient-level parameters are shared exactly; study jitter is small.
    a, b = [c for c in cases if c.patient == patient[same.any(axis=1)][0]][:2]
    assert (a.anatomy.heart_rx, a.anatomy.rib_spacing, a.anatomy.texture_key) == (
        b.anatomy.heart_rx, b.anatomy.rib_spacing, b.anatomy.texture_key)
    assert abs(a.anatomy.shift_u - b.anatomy.shift_u) < 0.05


def test_pairs_context_boxes_exclude_overlapping_boxes(images, pairs):
    dataset, _ = images
    boxes_of = {row["image_id"]: row["boxes"] for row in dataset.remove_columns("image")}
    expected_rows = sum(len({b["classes"][0] for b in boxes}) for boxes in boxes_of.values())
    assert len(pairs) == expected_rows
    excluded_rows = Counter()
    for row in pairs.remove_columns("image"):
        target = row["target_class"]
        assert row["sample_id"] == f"{row['image_id']}::{target}"
        disease, context = row["disease_boxes"], row["context_boxes"]
        assert disease and all(target in b["classes"] for b in disease)
        assert all(target not in b["classes"] for b in context)
        coords = lambda bs: np.array([[b["x_min"], b["y_min"], b["x_max"], b["y_max"]] for b in bs])  # noqa: E731
        if context:
            assert iou_matrix(coords(context), coords(disease)).max() < 0.15
        others = [b for b in boxes_of[row["image_id"]] if target not in b["classes"]]
        assert len(others) >= len(context)
        if len(others) > len(context):
            dropped = [b for b in others if b not in context]
            assert iou_matrix(coords(dropped), coords(disease)).max(axis=1).min() >= 0.15
            excluded_rows[target] += 1
    # The designed overlaps exercise the IoU filter: compressive atelectasis over an effusion and a
    # ground-glass halo next to a consolidation.
    assert sum(excluded_rows.values()) >= 6
    assert set(excluded_rows) & {"Atelectasis", "Pleural Effusion"}
    assert set(excluded_rows) & {"Lung Opacity", "Consolidation"}


def test_build_helper_and_export_script(tmp_path):
    dataset, report = build("synthetic", rows="pairs", n_images=4, seed=2, image_size=128,
                            cache_dir=str(tmp_path / "cache"))
    assert report.kept == 4 and all(np.asarray(im).shape == (128, 128) for im in dataset["image"])
    assert export_main("synthetic", ["--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache2"),
                                     "--set", "n_images=3", "--set", "image_size=128"]) == 0
    exported = datasets.Dataset.from_parquet(str(tmp_path / "out" / "synthetic" / "test.parquet"))
    assert len(exported) == 3 and exported[0]["image_id"] == "syn-00000"
    assert json.loads((tmp_path / "out" / "synthetic.build_report.json").read_text())["kept"] == 3
    assert Image.open(io.BytesIO(_png_bytes(exported)[0])).format == "PNG"
    # the folder loads as it is: the build report sits beside it
    loaded = datasets.load_dataset("parquet", data_dir=str(tmp_path / "out" / "synthetic"),
                                   cache_dir=str(tmp_path / "cache3"))
    assert list(loaded) == ["test"] and loaded["test"]["image_id"] == exported["image_id"]
    with pytest.raises(FileExistsError, match="already holds files"):
        export_main("synthetic", ["--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache2"),
                                  "--set", "n_images=3", "--set", "image_size=128"])


def test_documented_cooccurrence_table_matches_the_code():
    """The P(B | A) table in the phantom module docstring is the analytic matrix, rounded."""
    doc = P.__doc__
    header = next(line for line in doc.splitlines() if line.strip().startswith("A \\ B"))
    columns = header.split()[3:]
    assert len(columns) == L.NUM_CLASSES
    rows = {}
    for line in doc.splitlines():
        parts = line.split()
        if len(parts) == L.NUM_CLASSES + 1 and parts[0] in columns + ["P(B)"]:
            rows[parts[0]] = [float(x) for x in parts[1:]]
    m = P.cooccurrence_matrix()
    for a, name in enumerate(columns):
        assert np.allclose(rows[name], m[a], atol=0.0051), name
    marginals = P.marginal_probabilities()
    assert np.allclose(rows["P(B)"], [marginals[c] for c in L.CLASSES], atol=0.0051)
