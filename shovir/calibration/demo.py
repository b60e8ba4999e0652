"""``shovir demo``: the whole suite on the built-in synthetic data, with a known answer per protocol.

* **ShoViR** — 200 phantoms, one row per (image, class); the three report-generation reference
  models through every ShoViR condition (baseline, full noise, RO/OCO/DOCO at p ∈ {0, .2, …, 1}).
* **Beyond Accuracy** and **ModaLens** — the same phantoms as VQA rows (``rows="vqa"``); the three
  VQA reference models under real, blank and shuffled images, and under the same-patient image
  swap with and without the report.

Each part is a real sweep (``shovir run``) scored by ``shovir score`` into its own folder
(``<out>/shovir``, ``<out>/vqa``: results.json, tables, figures, report.md). ``<out>/report.md``
gathers every protocol's table and figures with the calibration verdict, and
``<out>/calibration.json`` holds the verdict and the time each part took. The metrics must recover
what each reference model is known to do (:mod:`shovir.calibration.checks`).
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any, Sequence

from shovir.calibration.checks import CalibrationCheck, calibration_checks

__all__ = ["DEMO_MODELS", "VQA_MODELS", "PROTOCOLS", "run_demo", "nothing_seen_accuracy"]

DEMO_MODELS = ("reference-grounded", "reference-prior", "reference-context")
VQA_MODELS = ("reference-vqa-grounded", "reference-vqa-prior", "reference-vqa-report")
PROTOCOLS = ("shovir", "beyond_accuracy", "modalens")
"""The protocols the demo calibrates (``shovir demo --protocol NAME`` runs one)."""


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
    if "shovir" in protocols:
        begun = time.perf_counter()
        results = _sweep({"name": "synthetic", "rows": "pairs", "n_images": n_images, "seed": seed}, DEMO_MODELS, "shovir",
                         out / "shovir" / "run", cache_dir, workers, n_resamples, progress, quiet)
        parts.append(("ShoViR — reference report generators on synthetic chest X-rays", results, out / "shovir"))
        seconds["shovir"] = time.perf_counter() - begun
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
    summary = ["# shovir demo — calibration on the embedded synthetic data", "",
               f"{len(checks)} known-answer checks, {sum(c.passed for c in checks)} passed; {elapsed:.0f} s ({share}).", "",
               *verdict_lines, "", *sections]
    (out / "report.md").write_text("\n".join(summary), encoding="utf-8")
    (out / "calibration.json").write_text(json.dumps({"protocols": list(protocols), "seconds": seconds,
                                                      "total_seconds": elapsed, "context": context,
                                                      "checks": [c.as_dict() for c in checks]}, indent=2))
    if not quiet:
        for _, results, _ in parts:
            print(summary_table(results) + "\n")
        print("Calibration verdict")
        print("\n".join(verdict_lines))
        print(f"wrote {out / 'report.md'} (and per protocol: {', '.join(str(f) for _, _, f in parts)}) in {elapsed:.0f} s")
    return out / "report.md", checks
