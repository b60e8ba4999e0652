"""``shovir demo``: the whole suite on the built-in synthetic data, with a known answer per protocol.

* **ShoViR** — 200 phantoms, one row per (image, class); the three report-generation reference
  models through every ShoViR condition (baseline, full noise, RO/OCO/DOCO at p ∈ {0, .2, …, 1}).
* **Beyond Accuracy** and **ModaLens** — the same phantoms as VQA rows (``rows="vqa"``); the three
  VQA reference models under real, blank and shuffled images, and under the same-patient image
  swap with and without the report.

* **ICARE** (with the ShoViR part) — the offline ICARE backend (a labeler-based approximation of
  the LLM agents, :mod:`shovir.icare.backends`) on the phantoms' reference reports, compared with
  the same reports after deleting half, then all, of their clinical sentences (those stating a
  finding as present or uncertain): ICARE-GT must fall at each step (:func:`icare_section`).

Each part is a real sweep (``shovir run``) scored by ``shovir score`` into its own folder
(``<out>/shovir``, ``<out>/vqa``: results.json, tables, figures, report.md; ICARE writes
``<out>/icare/``). ``<out>/report.md`` gathers every protocol's table and figures with the
calibration verdict, and ``<out>/calibration.json`` holds the verdict, the time each part took and
the ICARE check (``"icare"``). The metrics must recover what each reference model is known to do
(:mod:`shovir.calibration.checks`).
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any, Sequence

from shovir.calibration.checks import CalibrationCheck, calibration_checks

__all__ = ["DEMO_MODELS", "VQA_MODELS", "PROTOCOLS", "ICARE_REPORTS", "run_demo", "nothing_seen_accuracy",
           "icare_section", "delete_clinical_sentences"]

DEMO_MODELS = ("reference-grounded", "reference-prior", "reference-context")
VQA_MODELS = ("reference-vqa-grounded", "reference-vqa-prior", "reference-vqa-report")
PROTOCOLS = ("shovir", "beyond_accuracy", "modalens")
"""The protocols the demo calibrates (``shovir demo --protocol NAME`` runs one)."""
ICARE_REPORTS = 60
"""Reference reports of the ICARE section (the first distinct ones of the ShoViR run)."""


def nothing_seen_accuracy(run_dir: Path) -> float | None:
    """The accuracy of answering every VQA question of a run as if the image showed nothing: what
    an image-reading model should score on blank images (Beyond Accuracy §3.3)."""
    from shovir.data.phantom.questions import ABSENT_ANSWERS, parse_question

    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines() if line]
    rows = [row for row in rows if row.get("question")]
    if not rows:
        return None
    hits = sum(ABSENT_ANSWERS[parse_question(row["question"]).question_type] == row["answer"] for row in rows)
    return hits / len(rows)


def delete_clinical_sentences(report: str, share: str = "all", labeler: Any = None) -> str:
    """``report`` without its clinical sentences: those the rule-based labeler reads as stating a
    finding present or uncertain; ``share="half"`` deletes every other one (the 1st, 3rd, ...).
    ``labeler`` defaults to a new rule-based labeler (pass one to label many reports).

    >>> delete_clinical_sentences("Cardiomegaly. No effusion. Possible pneumonia. Left rib fracture.", "half")
    'No effusion. Possible pneumonia.'
    >>> delete_clinical_sentences("Cardiomegaly. No effusion. Possible pneumonia.")
    'No effusion.'
    """
    import re

    from shovir.labelers import get_labeler

    if share not in ("half", "all"):
        raise ValueError(f"share must be 'half' or 'all', got {share!r}")
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", report.strip()) if s]
    labeler = labeler if labeler is not None else get_labeler("rule")
    codes = labeler(sentences) if sentences else []
    clinical = [i for i, row in enumerate(codes) if any(int(c) in (1, 3) for c in row[:-1])]
    dropped = set(clinical if share == "all" else clinical[::2])
    return " ".join(s for i, s in enumerate(sentences) if i not in dropped)


def icare_section(samples_file: Path, out: Path, n_reports: int = ICARE_REPORTS,
                  n_resamples: int = 200) -> tuple[str, dict[str, Any]]:
    """ICARE (offline backend) of the reference reports against themselves intact and with half and
    all of their clinical sentences deleted; the Markdown section and the check (passed when
    ICARE-GT falls at each deletion step). Writes ``icare.json`` and the logs into ``out``.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "samples.jsonl").write_text(json.dumps({"image_id": "i1", "report":
    ...     "Cardiomegaly. Left pleural effusion. Right rib fracture. Left lower lobe atelectasis."}) + "\\n")
    >>> text, check = icare_section(folder / "samples.jsonl", folder, n_resamples=0)
    >>> check["values"], check["passed"]
    ([1.0, 0.5, 0.0], True)
    """
    from shovir.icare import Icare

    reports: dict[str, str] = {}
    for line in samples_file.read_text(encoding="utf-8").splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("report") and row["image_id"] not in reports and len(reports) < n_reports:
            reports[row["image_id"]] = row["report"]
    from shovir.icare import OfflineBackend

    backend = OfflineBackend("rule")
    labeler = backend.labeler
    levels = {"intact": dict(reports),
              "half of the clinical sentences deleted": {k: delete_clinical_sentences(v, "half", labeler)
                                                         for k, v in reports.items()},
              "all clinical sentences deleted": {k: delete_clinical_sentences(v, "all", labeler)
                                                 for k, v in reports.items()}}
    rows, scores = [], {}
    with Icare(backend) as evaluator:  # one evaluator: the reference side is written and filtered once
        for number, (name, hypotheses) in enumerate(levels.items()):
            result = evaluator.evaluate(reports, hypotheses, log_path=out / f"icare_questions_{number}.jsonl",
                                        n_resamples=n_resamples)
            scores[name] = {key: result[key] for key in ("icare_gt", "icare_gen", "icare_avg")}
            ci = result["ci"]["icare_gt"]
            interval = f" [{ci['low']:.3f}, {ci['high']:.3f}]" if ci["low"] is not None else ""
            rows.append(f"| {name} | {result['icare_gt']:.3f}{interval} | "
                        + " | ".join("–" if result[k] is None else f"{result[k]:.3f}" for k in ("icare_gen", "icare_avg"))
                        + f" | {result['agreements']['gt']} / {result['questions']['gt']} |")
    gt = [scores[name]["icare_gt"] for name in levels]
    passed = all(v is not None for v in gt) and gt[0] > gt[1] > gt[2]
    claim = "ICARE-GT: intact > half of the clinical sentences deleted > all deleted"
    check = {"claim": claim, "passed": passed, "values": gt, "scores": scores, "n_reports": len(reports)}
    (out / "icare.json").write_text(json.dumps(check, indent=2), encoding="utf-8")
    text = "\n".join([
        "## ICARE — deleting clinical sentences lowers the score (offline backend)", "",
        f"{len(reports)} reference reports of the phantoms against themselves, intact and with their clinical "
        "sentences (a finding present or uncertain) deleted. The offline backend is a labeler-based approximation "
        "of the ICARE agents (one question per CheXpert finding), not an LLM.", "",
        "| generated report | ICARE-GT [95% CI] | ICARE-GEN | ICARE-AVG | agreements / questions (GT) |",
        "|---|---|---|---|---|", *rows, "", f"- {'PASS' if passed else 'FAIL'} {claim}"])
    return text, check


def _sweep(dataset: dict[str, Any], models: Sequence[str], conditions: Any, run_dir: Path, cache_dir: str | None,
           workers: int, n_resamples: int, progress: bool, quiet: bool) -> dict[str, Any]:
    from shovir.runner.config import SweepConfig
    from shovir.runner.run import run_sweep
    from shovir.scoring import score_run

    config = SweepConfig.from_dict({"dataset": dataset, "models": list(models), "conditions": conditions, "seed": 3,
                                    "batch_size": 64})
    run_sweep(config, run_dir, cache_dir=cache_dir, progress=progress, workers=workers, quiet=quiet)
    return score_run(run_dir, n_resamples=n_resamples)


def run_demo(out: str | Path = "demo", n_images: int = 200, seed: int = 0, cache_dir: str | None = None,
             workers: int = 2, n_resamples: int = 1000, progress: bool = True, quiet: bool = False,
             protocols: Sequence[str] = PROTOCOLS) -> tuple[Path, list[CalibrationCheck]]:
    """Run the demo's protocols into ``out``; return the report path and the calibration checks."""
    from shovir.report import summary_table, write_report

    unknown = sorted(set(protocols) - set(PROTOCOLS))
    if unknown or not protocols:
        raise ValueError(f"--protocol: unknown protocol(s) {unknown}; the demo runs {', '.join(PROTOCOLS)}")
    if importlib.util.find_spec("torch") is None:
        workers = 0  # background workers use torch's DataLoader
    out = Path(out)
    started = time.perf_counter()
    parts: list[tuple[str, dict[str, Any], Path]] = []
    seconds: dict[str, float] = {}
    context: dict[str, Any] = {}
    icare_text, icare_check = "", None
    if "shovir" in protocols:
        begun = time.perf_counter()
        results = _sweep({"name": "synthetic", "rows": "pairs", "n_images": n_images, "seed": seed}, DEMO_MODELS, "shovir",
                         out / "shovir" / "run", cache_dir, workers, n_resamples, progress, quiet)
        parts.append(("ShoViR — reference report generators on synthetic chest X-rays", results, out / "shovir"))
        seconds["shovir"] = time.perf_counter() - begun
        begun = time.perf_counter()
        (out / "icare").mkdir(parents=True, exist_ok=True)
        icare_text, icare_check = icare_section(out / "shovir" / "run" / "samples.jsonl", out / "icare",
                                                n_resamples=min(n_resamples, 200))
        icare_check["seconds"] = time.perf_counter() - begun
    vqa = [name for name in ("beyond_accuracy", "modalens") if name in protocols]
    if vqa:
        begun = time.perf_counter()
        results = _sweep({"name": "synthetic", "rows": "vqa", "n_images": n_images, "seed": seed}, VQA_MODELS, list(vqa),
                         out / "vqa" / "run", cache_dir, workers, n_resamples, progress, quiet)
        context["nothing_seen_accuracy"] = nothing_seen_accuracy(out / "vqa" / "run")
        parts.append(("Beyond Accuracy and ModaLens — reference VQA models on the same phantoms", results, out / "vqa"))
        seconds["+".join(vqa)] = time.perf_counter() - begun
    checks: list[CalibrationCheck] = []
    sections = []
    for title, results, folder in parts:
        own = [check for check in calibration_checks(results, context=context) if check.protocol in protocols]
        results["calibration"] = [check.as_dict() for check in own]
        verdict = "\n".join(["## Calibration verdict", ""] + [f"- {check.line()}" for check in own])
        report = write_report(results, folder, title=f"shovir demo — {title}", extra=verdict)
        body = report.read_text(encoding="utf-8").replace("](fig", f"]({folder.name}/fig")
        sections.append(body.replace("# shovir demo — ", "## ", 1).replace("\n## ", "\n### "))
        checks += own
    elapsed = time.perf_counter() - started
    share = ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items())
    verdict_lines = [f"- {check.line()}" for check in checks]
    if icare_check is not None:
        share += f"; ICARE {icare_check['seconds']:.1f} s"
        verdict_lines.append(f"- {'PASS' if icare_check['passed'] else 'FAIL'} [icare] offline backend: "
                             f"{icare_check['claim']} ({', '.join(f'{v:.3f}' for v in icare_check['values'] if v is not None)})")
    summary = ["# shovir demo — calibration on the embedded synthetic data", "",
               f"{len(checks)} known-answer checks, {sum(c.passed for c in checks)} passed; {elapsed:.0f} s ({share}).", "",
               *verdict_lines, "", *sections, *([icare_text] if icare_text else [])]
    (out / "report.md").write_text("\n".join(summary), encoding="utf-8")
    (out / "calibration.json").write_text(json.dumps({"protocols": list(protocols), "seconds": seconds,
                                                      "total_seconds": elapsed, "context": context,
                                                      "checks": [c.as_dict() for c in checks],
                                                      "icare": icare_check}, indent=2))
    if not quiet:
        for _, results, _ in parts:
            print(summary_table(results) + "\n")
        print("Calibration verdict")
        print("\n".join(verdict_lines))
        print(f"wrote {out / 'report.md'} (and per protocol: {', '.join(str(f) for _, _, f in parts)}) in {elapsed:.0f} s")
    return out / "report.md", checks
