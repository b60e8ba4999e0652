"""The reference models: interface, determinism and the known-answer calibration on phantoms.

The calibration runs end to end on the demo's data (synthetic, 200 images, seed 0, per-(image,
class) rows): perturb with :class:`shovir.perturb.Condition` (p = 1, the default noise model, RO
box sizes from the dataset), generate, label with the rule-based labeler, score with
:func:`shovir.metrics.flip_rate` / :func:`shovir.metrics.delta_fn`. Everything is deterministic
(seeded data, seeded perturbations, deterministic models), so the thresholds are not flaky.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from shovir import labels as L
from shovir.data import build, phantom
from shovir.labelers import get_labeler
from shovir.metrics.clinical import chexbert_f1, delta_fn, flip_rate
from shovir.models import Message, get_model
from shovir.calibration.reference import (
    ContextReference,
    GroundedReference,
    PatchDetector,
    PriorReference,
    compose_report,
    prior_findings,
    to_pixels,
)
from shovir.perturb import Condition, EmpiricalBoxSizes, NoiseModel

MODELS = ("reference-grounded", "reference-prior", "reference-context")
CONTEXT_DERIVED_WITH_BOXES = ("Edema", "Atelectasis")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    dataset, _ = build("synthetic", rows="pairs", n_images=200, seed=0, cache_dir=str(tmp_path_factory.mktemp("syn")))
    return dataset


@pytest.fixture(scope="module")
def models():
    return {name: get_model(name) for name in MODELS}


@pytest.fixture(scope="module")
def calibration(pairs, models):
    """Label codes per model and condition: per pair for RO/OCO/DOCO, per image for baseline and
    full noise (whole-image conditions do not depend on the target class)."""
    labeler = get_labeler("rule")
    rows = pairs[:]
    n = len(rows["image_id"])
    sizes = EmpiricalBoxSizes.from_dataset(pairs)
    conditions = {name: Condition(name, p=1.0, seed=0, noise=NoiseModel(), box_sizes=sizes) for name in ("ro", "oco", "doco")}
    first = {}
    for i, image_id in enumerate(rows["image_id"]):
        first.setdefault(image_id, i)
    image_rows = sorted(first.values())
    noise = Condition("full_noise", p=1.0, seed=0, noise=NoiseModel())

    def row(i):
        return {key: rows[key][i] for key in rows}

    images = {"baseline": [rows["image"][i] for i in image_rows],
              "full_noise": [noise.apply(rows["image"][i], row(i))[0] for i in image_rows]}
    for name, condition in conditions.items():
        images[name] = [condition.apply(rows["image"][i], row(i))[0] for i in range(n)]
    codes, texts = {}, {}
    for model_name, model in models.items():
        for condition, batch in images.items():
            generations = model.generate([Message(images=[image]) for image in batch])
            texts[model_name, condition] = [g.text for g in generations]
            codes[model_name, condition] = labeler(texts[model_name, condition])
    return {
        "codes": codes,
        "texts": texts,
        "labels": np.array(rows["labels"], dtype=np.int8),
        "targets": list(rows["target_class"]),
        "image_labels": np.array([rows["labels"][i] for i in image_rows], dtype=np.int8),
        "reference_codes": labeler([rows["report"][i] for i in image_rows]),
    }


def _flip(calibration, model, condition, classes=None):
    targets = calibration["targets"]
    keep = np.array([classes is None or t in classes for t in targets])
    return flip_rate(
        references=calibration["labels"][keep],
        control_predictions=calibration["codes"][model, "ro"][keep],
        predictions=calibration["codes"][model, condition][keep],
        target_classes=[t for t, k in zip(targets, keep) if k],
    )


# -- calibration --------------------------------------------------------------------------------


def test_grounded_loses_its_target_under_oco_only(calibration):
    oco = _flip(calibration, "reference-grounded", "oco")
    doco = _flip(calibration, "reference-grounded", "doco")
    print("grounded FR_OCO", oco["flip_rate"], "FR_DOCO", doco["flip_rate"], oco["denominators"])
    assert sum(oco["denominators"].values()) >= 200
    assert oco["flip_rate"] >= 0.7
    assert doco["flip_rate"] <= 0.15


def test_grounded_baseline_f1(calibration):
    f1 = chexbert_f1(calibration["reference_codes"], calibration["codes"]["reference-grounded", "baseline"])
    print("grounded F1-14 micro", f1["f1_14"]["micro"], "F1-5 micro", f1["f1_5"]["micro"])
    assert f1["f1_14"]["micro"] >= 0.6
    noise = delta_fn(calibration["reference_codes"], calibration["codes"]["reference-grounded", "baseline"],
                     calibration["codes"]["reference-grounded", "full_noise"])
    assert noise["f1_14_micro"] >= 0.3  # a grounded model collapses on a full-noise image


def test_prior_ignores_the_image(calibration):
    texts = calibration["texts"]
    assert len(set(texts["reference-prior", "baseline"] + texts["reference-prior", "full_noise"])) == 1
    result = delta_fn(calibration["reference_codes"], calibration["codes"]["reference-prior", "baseline"],
                      calibration["codes"]["reference-prior", "full_noise"])
    assert abs(result["f1_14_micro"]) <= 0.02
    assert result["f1_14_micro"] == 0.0
    for condition in ("oco", "doco"):
        flips = _flip(calibration, "reference-prior", condition)
        assert sum(flips["denominators"].values()) > 0
        assert flips["flip_rate"] == 0.0


def test_context_loses_derived_classes_under_doco(calibration):
    doco = _flip(calibration, "reference-context", "doco", CONTEXT_DERIVED_WITH_BOXES)
    oco = _flip(calibration, "reference-context", "oco", CONTEXT_DERIVED_WITH_BOXES)
    print("context FR_DOCO", doco["flip_rate"], doco["denominators"], "FR_OCO", oco["flip_rate"])
    assert sum(doco["denominators"].values()) >= 20
    assert doco["flip_rate"] >= 0.4
    # its own box does not matter: occluding it leaves the context, so the class is kept
    assert oco["flip_rate"] <= 0.15


# -- interface ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def few_images(pairs):
    rows = pairs.select(range(0, 40, 5))
    return [row["image"] for row in rows]


@pytest.mark.parametrize("name", MODELS)
def test_one_generation_per_message_in_order_and_batch_independent(models, few_images, name):
    model = models[name]
    single = [model.generate([Message(images=[image])])[0].text for image in few_images]
    batch = [g.text for g in model.generate([Message(images=[image], prompt="ignored") for image in few_images])]
    assert batch == single
    order = [3, 0, 7, 1, 6, 2, 5, 4]
    shuffled = model.generate([Message(images=[few_images[i]]) for i in order])
    assert [g.text for g in shuffled] == [single[i] for i in order]
    assert model.generate([]) == []


@pytest.mark.parametrize("name", MODELS)
def test_deterministic_across_instances(few_images, name):
    a, b = get_model(name), get_model(name)
    messages = [Message(images=[image]) for image in few_images]
    assert [g.text for g in a.generate(messages)] == [g.text for g in b.generate(messages)]
    assert a.config_hash() == b.config_hash()
    assert a.config()["name"] == name


def test_registry_classes():
    assert isinstance(get_model("reference-grounded"), GroundedReference)
    assert isinstance(get_model("reference-prior"), PriorReference)
    assert isinstance(get_model("reference-context"), ContextReference)


def test_grounded_recall_on_clean_phantoms(calibration):
    """Of the findings the detector reports at all, it finds most on clean phantoms; a class with
    no threshold (never reported) and Pneumonia (no box: only ever hedged) are never positive."""
    detector = PatchDetector.default()
    reportable = [c for c in phantom.LOCALIZED_FINDINGS if detector.config()["positive_threshold"][c] is not None]
    columns = [L.class_index(c) for c in reportable]
    truth = calibration["image_labels"][:, columns] == L.POSITIVE
    found = calibration["codes"]["reference-grounded", "baseline"][:, columns] == L.POSITIVE
    assert (truth & found).sum() >= 0.85 * truth.sum()
    never = [L.class_index(c) for c in L.LOCALIZABLE if c not in reportable]
    assert not (calibration["codes"]["reference-grounded", "baseline"][:, never] == L.POSITIVE).any()


def test_context_derives_edema_from_cardiomegaly_and_effusion():
    model = ContextReference()
    from shovir.calibration.reference import Detection

    def detections(**codes):
        return {name: Detection(name, 0.0, codes.get(name.replace(" ", "_"), L.BLANK), 20, 20)
                for name in phantom.LOCALIZED_FINDINGS}

    both = model.codes(detections(Cardiomegaly=L.POSITIVE, Pleural_Effusion=L.POSITIVE, Edema=L.BLANK))
    assert both["Edema"] == L.POSITIVE
    hedged = model.codes(detections(Cardiomegaly=L.POSITIVE, Pleural_Effusion=L.UNCERTAIN))
    assert hedged["Edema"] == L.UNCERTAIN
    own_box_only = model.codes(detections(Edema=L.POSITIVE, Atelectasis=L.POSITIVE))
    assert "Edema" not in own_box_only and "Atelectasis" not in own_box_only
    device = model.codes(detections(Support_Devices=L.POSITIVE, Consolidation=L.POSITIVE))
    assert device["Atelectasis"] == L.POSITIVE and device["Pneumonia"] == L.POSITIVE


def test_prior_report_states_its_findings():
    codes = get_labeler("rule")([PriorReference().text])[0]
    stated = {L.CLASSES[i] for i, code in enumerate(codes) if code == L.POSITIVE}
    assert stated == set(prior_findings())


def test_compose_report_round_trips_through_the_labeler():
    labeler = get_labeler("rule")
    rng = np.random.default_rng(0)
    for _ in range(40):
        wanted = {name: int(rng.choice([L.POSITIVE, L.UNCERTAIN])) if name != "Support Devices" else L.POSITIVE
                  for name in L.LOCALIZABLE if rng.random() < 0.3}
        codes = labeler([compose_report(wanted)])[0]
        for name, code in wanted.items():
            assert codes[L.class_index(name)] == code, (name, wanted)
        pathologies = [n for n in wanted if n != "Support Devices"]
        assert codes[L.class_index("No Finding")] == (0 if pathologies else 1)


def test_devices_are_never_hedged():
    with pytest.raises(ValueError, match="Support Devices cannot be reported as uncertain"):
        compose_report({"Support Devices": L.UNCERTAIN})


def test_to_pixels_conversions():
    rgb = Image.new("RGB", (100, 50), (10, 20, 30))
    assert to_pixels(rgb).shape == (320, 320) and to_pixels(rgb).dtype == np.uint8
    wide = np.arange(320 * 320, dtype=np.uint16).reshape(320, 320)
    assert to_pixels(wide).max() == 255
    with pytest.raises(ValueError, match="2-D"):
        to_pixels(np.zeros((2, 2, 2, 2)))
    with pytest.raises(ValueError, match="pixels must have shape"):
        PatchDetector.default().logits(np.zeros((10, 10), np.uint8))


def test_missing_resources_say_how_to_make_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="shovir.calibration.fit"):
        PatchDetector(tmp_path / "none.npz", tmp_path / "none.json")


def test_message_without_image_is_refused(models):
    with pytest.raises(ValueError, match="message 0 has no image"):
        models["reference-grounded"].generate([Message(images=[])])
