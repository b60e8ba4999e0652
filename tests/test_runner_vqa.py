"""The VQA protocols through the runner and the scorer: real / blank / shuffled images (Beyond
Accuracy) and the same-patient swap with and without the report (ModaLens)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from shovir import labels as L
from shovir.metrics import swap_sensitivity, visual_reliance
from shovir.models import Generation, ModelAdapter, register_model
from shovir.runner.config import SweepConfig
from shovir.runner.run import run_sweep
from shovir.results import Results
from shovir.scoring import score_run


class ToyVQA(ModelAdapter):
    """Answers "yes" when the image is bright, unless a report is given, which it then trusts."""

    name = "toy-vqa"

    def generate(self, messages):
        out = []
        for message in messages:
            if message.report is not None:
                out.append(Generation("yes" if "cardiomegaly" in message.report.lower() else "no"))
                continue
            bright = float(np.asarray(message.images[0].convert("L")).mean()) > 100
            out.append(Generation("yes" if bright else "no"))
        return out


register_model("toy-vqa", f"{__name__}:ToyVQA")

CASES = [  # image, patient, study, brightness, Cardiomegaly code, report
    ("a1", "P1", "S1", 200, 1, "Cardiomegaly."),
    ("a2", "P1", "S2", 40, 2, "No cardiomegaly."),
    ("b1", "P2", "S3", 220, 1, "Cardiomegaly."),
    ("b2", "P2", "S4", 30, 0, "Normal chest."),
]


def _manifest(root: Path) -> None:
    lines = []
    for image_id, patient, study, value, code, report in CASES:
        Image.fromarray(np.full((24, 20), value, np.uint8)).save(root / f"{image_id}.png")
        labels = [0] * 14
        labels[L.class_index("Cardiomegaly")] = code
        lines.append(json.dumps({"image": f"{image_id}.png", "image_id": image_id, "patient_id": patient, "study_id": study,
                                 "report": report, "labels": labels}))
    (root / "cases.jsonl").write_text("\n".join(lines) + "\n")


def test_vqa_protocols_run_and_score(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _manifest(data)
    config = SweepConfig.from_dict({
        "dataset": {"name": "mimic_vqa", "data_dir": str(data), "annotation_file": "cases.jsonl", "uncertain": "no"},
        "models": ["toy-vqa"],
        "conditions": ["baseline", "blank", "shuffle", {"name": "baseline", "with_report": True},
                       {"name": "swap"}, {"name": "swap", "with_report": True}],
        "seed": 1, "batch_size": 8})
    run = run_sweep(config, tmp_path / "run", cache_dir=str(tmp_path / "cache"), progress=False)
    results = score_run(run, n_resamples=100)
    assert results["scoring"]["task"] == "vqa" and results["scoring"]["protocols"] == ["beyond_accuracy", "modalens"]
    view = Results(results)

    samples = {json.loads(l)["sample_id"]: json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()}
    predictions = {}
    for path in (run / "predictions" / "toy-vqa" / "mimic_vqa").glob("*.jsonl"):
        predictions[path.stem] = {json.loads(l)["sample_id"]: json.loads(l) for l in path.read_text().splitlines()}
    ids = sorted(samples)
    # the blank image is gray 128: bright for the toy, so every blank answer is "yes"
    assert {predictions["blank"][i]["text"] for i in ids} == {"yes"}
    # swapped images come from another study of the same patient with a different finding set
    for record in predictions["swap"].values():
        donor = record["donor_image_id"]
        assert donor != record["image_id"] and donor[0] == record["image_id"][0]
    expected = visual_reliance([predictions["baseline"][i]["text"] for i in ids], [predictions["shuffle"][i]["text"] for i in ids],
                               [samples[i]["answer"] for i in ids], predictions_blank=[predictions["blank"][i]["text"] for i in ids],
                               options=[samples[i]["options"] for i in ids], n_resamples=100)
    reliance = view.result("toy-vqa", "beyond_accuracy", "visual_reliance", "baseline")
    assert reliance["vrs"] == expected["vrs"]
    assert reliance["blank_drop"] == expected["blank_drop"]
    swap = view.result("toy-vqa", "modalens", "swap_sensitivity", "swap")
    # without the report the toy reads the image, so the discordant swap flips answers;
    # with the report it ignores the image, so nothing flips
    assert swap["flip_rate_with_report"] == 0.0
    assert swap["flip_rate_without_report"] > 0.0
    direct = swap_sensitivity(
        [predictions[c][i]["text"] for c in ("baseline", "baseline+report") for i in ids],
        [predictions[s][i]["text"] for s in ("swap", "swap+report") for i in ids],
        ["without_report"] * len(ids) + ["with_report"] * len(ids), ids * 2,
        [samples[i]["patient_id"] for i in ids] * 2, n_resamples=100)
    assert swap["paired_difference"] == direct["paired_difference"]

    # the report: one table per protocol, each value with its interval and n, and each protocol's figure
    from shovir.report import write_report

    report = write_report(results, tmp_path / "report").read_text()
    assert "Beyond Accuracy" in report and "ModaLens" in report
    assert (tmp_path / "report" / "fig_beyond_accuracy.png").stat().st_size > 0
    assert (tmp_path / "report" / "fig_modalens_swap.png").stat().st_size > 0
    table = (tmp_path / "report" / "table_modalens.md").read_text()
    # the swap's intervals resample patients: two patients are fewer than 10 units, so flagged
    assert f"n={swap['n_patients']} †" in table and swap["n_patients"] == 2
    csv_header = (tmp_path / "report" / "table_beyond_accuracy.csv").read_text().splitlines()[0]
    assert csv_header.startswith("model,Acc real,Acc real low,Acc real high,Acc real n,")
    assert "HVRR: not computed — the answers carry no rationale" in (tmp_path / "report" / "table_beyond_accuracy.md").read_text()


class ThinkingVQA(ToyVQA):
    """The toy with a rationale: it always claims a visual finding, whatever the image."""

    name = "toy-vqa-think"

    def generate(self, messages):
        return [Generation(f"<think>The cardiac silhouette is enlarged.</think><answer>{g.text}</answer>")
                for g in super().generate(messages)]


register_model("toy-vqa-think", f"{__name__}:ThinkingVQA")


def test_hvrr_is_scored_when_the_answers_carry_rationales(tmp_path):
    from shovir.metrics import hallucination_metrics
    from shovir.metrics.answers import extract_answer, extract_rationale

    data = tmp_path / "data"
    data.mkdir()
    _manifest(data)
    config = SweepConfig.from_dict({
        "dataset": {"name": "mimic_vqa", "data_dir": str(data), "annotation_file": "cases.jsonl", "uncertain": "no"},
        "models": ["toy-vqa-think"], "conditions": ["baseline", "shuffle"], "seed": 1})
    run = run_sweep(config, tmp_path / "run", cache_dir=str(tmp_path / "cache"), progress=False, quiet=True)
    results = Results(score_run(run, n_resamples=50))
    scored = results.result("toy-vqa-think", "beyond_accuracy", "hvrr", "baseline")
    samples = {json.loads(l)["sample_id"]: json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()}
    ids = sorted(samples)
    texts = {c: {json.loads(l)["sample_id"]: json.loads(l)["text"] for l in
                 (run / "predictions" / "toy-vqa-think" / "mimic_vqa" / f"{c}.jsonl").read_text().splitlines()}
             for c in ("baseline", "shuffle")}
    direct = hallucination_metrics([extract_rationale(texts["baseline"][i]) for i in ids], [samples[i]["question"] for i in ids],
                                   [extract_answer(texts["baseline"][i]) for i in ids],
                                   [extract_answer(texts["shuffle"][i]) for i in ids], [samples[i]["answer"] for i in ids],
                                   [samples[i]["options"] for i in ids], clusters=[samples[i]["patient_id"] for i in ids],
                                   n_resamples=50)
    assert scored["hvrr"] == direct["hvrr"] and scored["nvcr"] == direct["nvcr"] and scored["n"] == len(ids)
    assert scored["nvcr"] == 1.0  # every rationale claims an enlarged heart
