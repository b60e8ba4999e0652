"""Score a run folder: label the generated reports and compute every metric its conditions allow.

``score_run(run_dir)`` reads ``samples.jsonl`` and ``predictions/``, labels every distinct text
once (rule-based labeler by default, CheXbert when configured), and returns the ``results.json``
document (schema :data:`SCHEMA_VERSION`):

* image level (ShoViR Table 1): F1-CheXbert 14/5 and BLEU/ROUGE-L on the baseline, the same
  under full noise, ΔFN — one record per image;
* disease level (ShoViR §4.2–4.3): μ-F1 per condition and strength, Δ_X against RO (and against
  area-matched RO when the run has it), flip rates FR_X with the dataset labels as ground truth,
  S_AUC, and per-class F1;
* VQA protocols: visual reliance (real / shuffled / blank) and image-swap sensitivity per arm.

Intervals are percentile bootstraps resampling patients when the samples carry patient ids.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from shovir import labels as L
from shovir.labelers import get_labeler
from shovir.metrics import chexbert_f1, delta_fn, flip_rate, occlusion_delta, per_target_f1, sensitivity_auc
from shovir.runner.config import STRENGTHS

__all__ = ["SCHEMA_VERSION", "score_run", "load_predictions"]

SCHEMA_VERSION = "1.0"
_BOX = ("ro", "ro_area", "oco", "doco")


def _p_label(p: float) -> str:
    return f"p{int(round(p * 100)):02d}"


def load_predictions(run_dir: Path) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``{model: {condition: {sample_id: record}}}`` from ``predictions/<model>/<dataset>/``."""
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    root = run_dir / "predictions"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} does not exist: run the sweep first (shovir run ...)")
    for model_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for dataset_dir in sorted(p for p in model_dir.iterdir() if p.is_dir()):
            for path in sorted(dataset_dir.glob("*.jsonl")):
                records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
                if records:
                    model = records[0]["model"]
                    out.setdefault(model, {})[path.stem] = {r["sample_id"]: r for r in records}
    return out


class _Labels:
    """Label each distinct text once."""

    def __init__(self, labeler: Callable[[Sequence[str]], np.ndarray]) -> None:
        self.labeler = labeler
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        new = sorted({t for t in texts if t not in self.cache})
        if new:
            for text, codes in zip(new, self.labeler(new)):
                self.cache[text] = np.asarray(codes, dtype=np.int8)
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, L.NUM_CLASSES), np.int8)


def _image_level(condition: dict[str, dict[str, Any]], samples: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One record per image (the pair samples of an image share image-level generations)."""
    per_image: dict[str, dict[str, Any]] = {}
    for sample_id in sorted(condition):
        record = condition[sample_id]
        per_image.setdefault(record["image_id"], record)
    return per_image


def _report_generation(
    model_conditions: dict[str, dict[str, dict[str, Any]]],
    samples: dict[str, dict[str, Any]],
    label: _Labels,
    n_resamples: int,
    seed: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    image_refs = {s["image_id"]: s for s in samples.values()}
    if "baseline" in model_conditions:
        base = _image_level(model_conditions["baseline"], samples)
        images = sorted(base)
        refs = label([image_refs[i].get("report", "") for i in images])
        hyps = label([base[i]["text"] for i in images])
        patients = [image_refs[i].get("patient_id") or i for i in images]
        level: dict[str, Any] = {"n_images": len(images)}
        level["baseline"] = chexbert_f1(refs, hyps, n_resamples=n_resamples, clusters=patients, seed=seed)
        try:
            from shovir.metrics.nlg import nlg_scores

            level["nlg"] = nlg_scores([base[i]["text"] for i in images], [image_refs[i].get("report", "") for i in images],
                                      n_resamples=n_resamples, clusters=patients, seed=seed)
        except ImportError as error:
            level["nlg"] = {"unavailable": str(error)}
        if "full_noise" in model_conditions:
            noise = _image_level(model_conditions["full_noise"], samples)
            missing = sorted(set(images) - set(noise))
            if missing:
                raise ValueError(f"full_noise lacks {len(missing)} images of the baseline (e.g. {missing[:3]})")
            noise_codes = label([noise[i]["text"] for i in images])
            level["full_noise"] = chexbert_f1(refs, noise_codes, n_resamples=n_resamples, clusters=patients, seed=seed)
            level["delta_fn"] = delta_fn(refs, hyps, noise_codes, n_resamples=n_resamples, clusters=patients, seed=seed)
        out["image_level"] = level
    box_conditions = {name for name in model_conditions if name.split("_p")[0] in _BOX}
    if not box_conditions:
        return out
    pair_ids = sorted({sid for name in box_conditions for sid in model_conditions[name]})
    targets = [samples[sid]["target_class"] for sid in pair_ids]
    patients = [samples[sid].get("patient_id") or samples[sid]["image_id"] for sid in pair_ids]
    refs = label([samples[sid].get("report", "") for sid in pair_ids])
    truth = np.array([samples[sid]["labels"] for sid in pair_ids])
    codes: dict[str, np.ndarray] = {}
    for name in box_conditions:
        records = model_conditions[name]
        missing = [sid for sid in pair_ids if sid not in records]
        if missing:
            raise ValueError(f"condition {name} lacks {len(missing)} samples (e.g. {missing[:3]}); conditions must cover the same samples")
        codes[name] = label([records[sid]["text"] for sid in pair_ids])
    strengths = sorted({float(model_conditions[n][pair_ids[0]]["p"]) for n in box_conditions})
    disease: dict[str, Any] = {"n_pairs": len(pair_ids), "mu_f1": {}, "per_class_f1": {}, "counts": {}, "delta": {},
                               "flip_rate": {}, "s_auc": {}}
    for name in sorted(box_conditions):
        family, p = name.split("_p")[0], _p_label(int(name.split("_p")[1]) / 100)
        result = per_target_f1(refs, codes[name], targets, n_resamples=n_resamples, clusters=patients, seed=seed)
        disease["mu_f1"].setdefault(family, {})[p] = {"value": result["mu_f1"], "ci": result["ci"]["mu_f1"]}
        disease["per_class_f1"].setdefault(family, {})[p] = result["per_class"]
        disease["counts"] = result["counts"]
    for family in ("oco", "doco"):
        for control in ("ro", "ro_area"):
            for p in strengths:
                x, c = f"{family}_{_p_label(p)}", f"{control}_{_p_label(p)}"
                if x not in codes or c not in codes:
                    continue
                key = family if control == "ro" else f"{family}_vs_ro_area"
                delta = occlusion_delta(refs, codes[c], codes[x], targets, n_resamples=n_resamples, clusters=patients, seed=seed)
                disease["delta"].setdefault(key, {})[_p_label(p)] = {"value": delta["delta"], "ci": delta["ci"]["delta"]}
                if control == "ro":
                    rates = flip_rate(truth, codes[c], codes[x], targets, n_resamples=n_resamples, clusters=patients, seed=seed)
                    disease["flip_rate"].setdefault(family, {})[_p_label(p)] = {
                        "value": rates["flip_rate"], "ci": rates["ci"]["flip_rate"], "per_class": rates["per_class"],
                        "denominators": rates["denominators"]}
    for family, curve in disease["mu_f1"].items():
        points = sorted((int(k[1:]) / 100, v["value"]) for k, v in curve.items())
        if len(points) > 1 and points[0][0] == 0 and points[0][1]:
            disease["s_auc"][family] = sensitivity_auc([p for p, _ in points], [f for _, f in points])
    out["disease_level"] = disease
    return out


def _vqa(model_conditions: dict[str, dict[str, dict[str, Any]]], samples: dict[str, dict[str, Any]], n_resamples: int, seed: int) -> dict[str, Any]:
    from shovir.metrics import swap_sensitivity, visual_reliance

    out: dict[str, Any] = {}
    for suffix in ("", "+report"):
        real = model_conditions.get("baseline" + suffix)
        shuffled = model_conditions.get("shuffle" + suffix)
        if real and shuffled:
            ids = sorted(set(real) & set(shuffled))
            blank = model_conditions.get("blank" + suffix)
            out["visual_reliance" + suffix] = visual_reliance(
                [real[i]["text"] for i in ids], [shuffled[i]["text"] for i in ids], [samples[i]["answer"] for i in ids],
                predictions_blank=[blank[i]["text"] for i in ids] if blank else None,
                options=[samples[i].get("options") or None for i in ids], n_resamples=n_resamples, seed=seed)
    arms = [("without_report", ""), ("with_report", "+report")]
    rows: dict[str, list[Any]] = {k: [] for k in ("original", "swapped", "arms", "trials", "patients")}
    for arm, suffix in arms:
        real, swapped = model_conditions.get("baseline" + suffix), model_conditions.get("swap" + suffix)
        if not (real and swapped):
            continue
        for sid in sorted(set(real) & set(swapped)):
            rows["original"].append(real[sid]["text"])
            rows["swapped"].append(swapped[sid]["text"])
            rows["arms"].append(arm)
            rows["trials"].append(sid)
            rows["patients"].append(samples[sid].get("patient_id") or samples[sid]["image_id"])
    if rows["original"]:
        out["swap_sensitivity"] = swap_sensitivity(rows["original"], rows["swapped"], rows["arms"], rows["trials"],
                                                   rows["patients"], n_resamples=n_resamples, seed=seed)
    return out


def score_run(
    run_dir: str | Path,
    labeler: str = "rule",
    labeler_options: dict[str, Any] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Compute the results document of a run folder (see the module docstring)."""
    run_dir = Path(run_dir)
    run_info = json.loads((run_dir / "run.json").read_text())
    samples = {}
    for line in (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            samples[row.get("sample_id", row["image_id"])] = row
    label = _Labels(get_labeler(labeler, **(labeler_options or {})))
    predictions = load_predictions(run_dir)
    vqa = any("question" in s for s in samples.values())
    models = {}
    for model, conditions in predictions.items():
        models[model] = _vqa(conditions, samples, n_resamples, seed) if vqa else _report_generation(conditions, samples, label, n_resamples, seed)
    from shovir.runner.run import package_versions

    return {
        "schema_version": SCHEMA_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "run": {"config": run_info["config"], "config_hash": run_info["config_hash"], "seed": run_info["config"]["seed"],
                "plan": run_info["plan"], "skipped": run_info.get("skipped", {})},
        "scoring": {"labeler": labeler, "n_resamples": n_resamples, "seed": seed, "protocol": "vqa" if vqa else "report_generation",
                    "strengths": list(STRENGTHS)},
        "versions": package_versions(),
        "models": models,
    }
