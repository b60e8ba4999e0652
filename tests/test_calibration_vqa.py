"""Reference VQA models (shovir.calibration.vqa_reference): known behaviour, by hand and through
the runner and scorer."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

from shovir.calibration import vqa_reference as V
from shovir.calibration.reference import PatchDetector
from shovir.data import phantom as P
from shovir.models import get_model, register_model
from shovir.models.base import Message

NAMES = {
    "reference-vqa-grounded": "shovir.calibration.vqa_reference:GroundedVQAReference",
    "reference-vqa-prior": "shovir.calibration.vqa_reference:PriorVQAReference",
    "reference-vqa-report": "shovir.calibration.vqa_reference:ReportReliantVQAReference",
}
BLANK = Image.new("L", (320, 320), 128)


@pytest.fixture(scope="module", autouse=True)
def registered():
    # the same targets as the built-in registry lines, so registering again is a no-op there
    for name, target in NAMES.items():
        register_model(name, target)


@pytest.fixture(scope="module")
def phantom_28():
    """Image syn-00028 (seed 0): "Right chest wall port in place. ... Linear atelectasis in the right
    lower lung zone. Moderate bilateral pleural effusions. ... Right lateral pleural thickening."""
    case = P.sample_case(28)
    return Image.fromarray(P.render_case(case)[0]), case


def ask(kind: str, finding: str | None = None, candidates=(), image=BLANK, report=None, options=True) -> Message:
    return Message(images=[image] if image is not None else [], prompt=P.question_text(kind, finding, candidates),
                   report=report, options=list(P.question_options(kind, candidates)) if options else None)


def check_scores(generation, options) -> None:
    """Scores are log-probabilities over the options, and the text is their argmax."""
    assert list(generation.scores) == list(options)
    values = list(generation.scores.values())
    assert all(math.isfinite(v) and v <= 0 for v in values)
    assert math.fsum(math.exp(v) for v in values) == pytest.approx(1.0)
    assert generation.scores[generation.text] == max(values)


# ---------------------------------------------------------------------------------------------
# Grounded
# ---------------------------------------------------------------------------------------------


def test_grounded_sees_nothing_on_a_blank_image():
    model = get_model("reference-vqa-grounded")
    messages = [ask("presence", "Pleural Effusion"), ask("absence", "Support Devices"), ask("side", "Pneumothorax"),
                ask("which", candidates=("Cardiomegaly", "Edema", "Lung Lesion"))]
    out = model.generate(messages)
    assert [g.text for g in out] == ["no", "yes", "neither", "none of these"]  # ABSENT_ANSWERS
    for message, generation in zip(messages, out):
        check_scores(generation, message.options)


def test_grounded_reads_the_findings_of_a_phantom(phantom_28):
    image, _ = phantom_28
    model = get_model("reference-vqa-grounded")
    messages = [ask("presence", "Pleural Effusion", image=image), ask("side", "Pleural Effusion", image=image),
                ask("side", "Atelectasis", image=image), ask("absence", "Support Devices", image=image),
                ask("presence", "Cardiomegaly", image=image),
                ask("which", candidates=("Lung Lesion", "Pleural Other", "Edema"), image=image)]
    assert [g.text for g in model.generate(messages)] == ["yes", "both", "right", "no", "no", "pleural thickening"]


def test_grounded_never_sees_a_fracture():
    """syn-00003: "Displaced left 4th rib fracture." -- beyond the detector (its threshold is null)."""
    image = Image.fromarray(P.render_case(P.sample_case(3))[0])
    out = get_model("reference-vqa-grounded").generate([ask("presence", "Fracture", image=image),
                                                       ask("side", "Fracture", image=image)])
    assert [g.text for g in out] == ["no", "neither"]
    assert out[0].scores["yes"] == pytest.approx(-30.0, abs=1e-6)  # clipped log-odds: finite


class CountingDetector:
    """The shipped detector, counting its forward passes."""

    def __init__(self) -> None:
        self.inner = PatchDetector.default()
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def logits(self, pixels):
        self.calls += 1
        return self.inner.logits(pixels)


def test_grounded_runs_the_detector_once_per_image(phantom_28):
    image, _ = phantom_28
    detector = CountingDetector()
    model = V.GroundedVQAReference(detector=detector)
    same_pixels = Image.frombytes("L", image.size, image.tobytes())  # another object, same bytes
    messages = [ask(k, "Pleural Effusion", image=image) for k in ("presence", "absence", "side")]
    messages += [ask("presence", "Edema", image=same_pixels)] + [ask("presence", "Edema") for _ in range(3)]
    model.generate(messages)
    model.generate(messages[:2])
    assert detector.calls == 2  # the phantom and the blank image


# ---------------------------------------------------------------------------------------------
# Text prior
# ---------------------------------------------------------------------------------------------


def test_prior_ignores_image_and_report(phantom_28):
    image, case = phantom_28
    model = get_model("reference-vqa-prior")
    for kind, finding, candidates in [("presence", "Pleural Effusion", ()), ("side", "Atelectasis", ()),
                                      ("which", None, ("Cardiomegaly", "Pleural Effusion", "Fracture"))]:
        variants = [ask(kind, finding, candidates, image=image), ask(kind, finding, candidates),
                    ask(kind, finding, candidates, image=None, report=case.report, options=False)]
        out = model.generate(variants)
        assert len({(g.text, tuple(g.scores.items())) for g in out}) == 1
        check_scores(out[0], variants[0].options)


def test_prior_answers_are_the_fitted_majorities():
    table = json.loads(V.PRIOR_TABLE.read_text())
    counts = table["counts"]
    # hand-read from the shipped counts: "no" outnumbers "yes" for every finding asked with presence phrasing
    assert all(c["no"] > c["yes"] for c in counts["presence"].values())
    assert all(c["yes"] > c["no"] for c in counts["absence"].values())
    model = V.PriorVQAReference()
    assert model.generate([ask("presence", "Pleural Effusion"), ask("absence", "Pleural Effusion")])[0].text == "no"
    side = counts["side"]["Pleural Effusion"]
    majority = max(P.SIDE_OPTIONS, key=lambda o: (side[o], -P.SIDE_OPTIONS.index(o)))
    assert model.generate([ask("side", "Pleural Effusion")])[0].text == majority
    which = counts["which"]
    offered = ("Pleural Effusion", "Cardiomegaly", "Support Devices")
    rates = [(which["answer"][n] + 1) / (which["offered"][n] + 2) for n in offered]
    none = (which["none"] + 1) / (which["questions"] + 2)
    expected = P.question_options("which", offered)[int(np.argmax([*[r / (1 - r) for r in rates], none / (1 - none)]))]
    assert model.generate([ask("which", candidates=offered)])[0].text == expected


def test_prior_table_provenance_and_byte_for_byte_refit(tmp_path):
    table = json.loads(V.PRIOR_TABLE.read_text())
    provenance = table["provenance"]
    assert provenance["seeds"] == [101, 102, 103] and 0 not in provenance["seeds"]
    assert provenance["n_images_per_seed"] == 1000 and provenance["n_questions"] == 15000
    out = tmp_path / "prior.json"
    assert V.main(["--fit", "--out", str(out)]) == 0
    assert out.read_bytes() == V.PRIOR_TABLE.read_bytes()
    with pytest.raises(ValueError, match="0 is the demo's evaluation seed"):
        V.fit_prior_table(seeds=[0, 101], n_images=1)


# ---------------------------------------------------------------------------------------------
# Report-reliant
# ---------------------------------------------------------------------------------------------

REPORT = ("FINDINGS: Right chest wall port in place. Moderate bilateral pleural effusions. No pneumothorax. "
          "Possible small nodule in the left upper lung. IMPRESSION: Bilateral pleural effusions.")


def test_report_reliant_answers_from_the_report(phantom_28):
    image, _ = phantom_28
    model = get_model("reference-vqa-report")
    questions = [("presence", "Pleural Effusion", ()), ("side", "Pleural Effusion", ()), ("absence", "Pneumothorax", ()),
                 ("presence", "Lung Lesion", ()), ("side", "Lung Lesion", ()), ("side", "Atelectasis", ()),
                 ("which", None, ("Cardiomegaly", "Lung Lesion", "Edema")), ("presence", "Support Devices", ())]
    expected = ["yes", "both", "yes", "yes", "left", "neither", "lung lesion", "yes"]  # "possible" counts as present
    for shown in (image, BLANK):  # the image is ignored once the report is there
        messages = [ask(k, f, c, image=shown, report=REPORT) for k, f, c in questions]
        out = model.generate(messages)
        assert [g.text for g in out] == expected
        for message, generation in zip(messages, out):
            check_scores(generation, message.options)


def test_report_reliant_without_report_is_the_grounded_model(phantom_28):
    image, _ = phantom_28
    messages = [ask("side", "Atelectasis", image=image), ask("presence", "Pleural Effusion"),
                ask("presence", "Pleural Effusion", image=image, report="  ")]  # a blank report is no report
    report, grounded = get_model("reference-vqa-report"), get_model("reference-vqa-grounded")
    assert [(g.text, g.scores) for g in report.generate(messages)] == [(g.text, g.scores) for g in grounded.generate(messages)]
    mixed = report.generate([messages[0], ask("side", "Atelectasis", image=BLANK, report=REPORT), messages[1]])
    assert [g.text for g in mixed] == ["right", "neither", "no"]  # order kept across the two paths


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(NAMES))
def test_errors_name_the_field(name):
    model = get_model(name)
    with pytest.raises(ValueError, match="message 0 has no prompt"):
        model.generate([Message(images=[BLANK])])
    with pytest.raises(ValueError, match="message 0: question: 'Describe the image.' is not a synthetic VQA template"):
        model.generate([Message(images=[BLANK], prompt="Describe the image.")])
    with pytest.raises(ValueError, match=r"options \['no', 'yes'\] are not the template's \['yes', 'no'\]"):
        model.generate([Message(images=[BLANK], prompt=P.question_text("presence", "Edema"), options=["no", "yes"])])


def test_grounded_needs_an_image():
    with pytest.raises(ValueError, match="message 0 has no image"):
        V.GroundedVQAReference().generate([ask("presence", "Edema", image=None)])


# ---------------------------------------------------------------------------------------------
# Through the runner and the scorer
# ---------------------------------------------------------------------------------------------


def test_known_answers_through_the_pipeline(tmp_path):
    from shovir.runner.config import SweepConfig
    from shovir.runner.run import run_sweep
    from shovir.scoring import score_run

    conditions = ["baseline", "blank", "shuffle", {"name": "baseline", "with_report": True}, "swap",
                  {"name": "swap", "with_report": True}]
    config = SweepConfig.from_dict({"dataset": {"name": "synthetic", "rows": "vqa", "n_images": 30},
                                    "models": sorted(NAMES), "conditions": conditions, "seed": 3, "batch_size": 64})
    run_sweep(config, tmp_path / "run", cache_dir=str(tmp_path / "cache"), progress=False, quiet=True)
    results = score_run(tmp_path / "run", n_resamples=50)
    samples = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    absent = np.mean([s["answer"] == P.ABSENT_ANSWERS[P.parse_question(s["question"]).question_type] for s in samples])

    def metrics(alias: str):
        protocols = results["models"][alias]["protocols"]
        return (protocols["beyond_accuracy"]["visual_reliance"]["baseline"],
                protocols["modalens"]["swap_sensitivity"]["swap"])

    reliance, swap = metrics("reference-vqa-grounded")
    assert reliance["accuracy_real"] > 0.8 and reliance["vrs"] > 0.25
    assert reliance["accuracy_blank"] == pytest.approx(absent)  # blank = answering "absent" everywhere
    assert swap["flip_rate_without_report"] == swap["flip_rate_with_report"] > 0.2  # the report is ignored
    reliance, swap = metrics("reference-vqa-prior")
    assert reliance["vrs"] == reliance["image_sensitivity"] == reliance["blank_drop"] == 0.0
    assert swap["flip_rate_without_report"] == swap["flip_rate_with_report"] == 0.0
    reliance, swap = metrics("reference-vqa-report")
    assert swap["flip_rate_with_report"] == 0.0 and swap["n_flips_with_report"] == 0
    assert swap["flip_rate_without_report"] > 0.2 and swap["ci"]["paired_difference"]["low"] > 0
    assert swap["n_trials"] == 150
